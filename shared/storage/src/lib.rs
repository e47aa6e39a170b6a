//! lakemirror-storage, the bottom floor: objects of a table root on S3 or the local file
//! system, through one injected seam ([`ObjectStores`], or any `object_store` handed to
//! [`TableStorage::from_store`]), with every request counted ([`IoCounters`]). Table URIs
//! ([`uri`]), the URLs of services a token goes to ([`service_url`]), credentials that are
//! not the process's own ([`credentials`]), the CloudWatch
//! metrics every function emits ([`metrics`]) and the test-only crash points ([`crash`]) live
//! here because every floor above uses them.

mod counters;
pub mod crash;
pub mod credentials;
pub mod deadline;
mod error;
mod failures;
pub mod metrics;
pub mod service_url;
mod stores;
mod table;
pub mod uri;

pub use counters::{IoCounters, IoTotals};
pub use credentials::{SecretSource, VendedCredentials};
pub use error::{Error, Result, with_causes};
pub use failures::{Failures, isolated, panic_message};
pub use stores::{ObjectStores, S3CredentialProvider, S3Options};
pub use table::{TableStorage, install_object_bytes, object_bytes};
pub use uri::{LogPath, TableScope, canonical_uri};
