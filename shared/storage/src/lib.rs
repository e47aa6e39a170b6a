//! lakemirror-storage, the bottom floor: objects of a table root on S3 or the local file
//! system, through one injected seam ([`ObjectStores`], or any `object_store` handed to
//! [`TableStorage::from_store`]), with every request counted ([`IoCounters`]). Table URIs
//! ([`uri`]), the URLs of services a token goes to ([`service_url`]) and credentials that are
//! not the process's own ([`credentials`]) live here because every floor above uses them.
//! How a function runs (metrics, deadlines, crash points, batch failures) is the room beside
//! it, lakemirror-runtime.

pub mod budget;
mod counters;
pub mod credentials;
mod error;
pub mod service_url;
mod stores;
mod table;
pub mod uri;

pub use budget::{MemoryShare, SharedOut};
pub use counters::{IoCounters, IoTotals};
pub use credentials::{SecretSource, VendedCredentials};
pub use error::{Error, Result, with_causes};
pub use stores::{ObjectStores, S3CredentialProvider, S3Options};
pub use table::{TableStorage, ToParse};
pub use uri::{LogPath, TableScope, canonical_uri};
