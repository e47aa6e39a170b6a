//! The Unity Catalog crate's one error type.

/// Result alias of lakemirror-unity.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can stop a registration or the opening of a table by its Unity Catalog name.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading the Delta table's objects failed.
    #[error(transparent)]
    Storage(#[from] lakemirror_storage::Error),

    /// The Delta log could not be read.
    #[error(transparent)]
    Delta(#[from] lakemirror_delta::Error),

    /// A deployment setting that cannot be used.
    #[error(transparent)]
    Plan(#[from] lakemirror_plan::Error),

    /// A Unity Catalog request failed; the message says what to do.
    #[error("Unity Catalog: {message}")]
    Unity { message: String, retryable: bool },

    /// The server's URL (`UC_URL`) cannot be used.
    #[error("UC_URL {}{reason}", if url.is_empty() { String::new() } else { format!("{url:?} ") })]
    Url { url: String, reason: String },

    /// The name or definition of the entry a Delta table asks for cannot be used.
    #[error("{0}")]
    Entry(String),

    /// JSON (de)serialization failed.
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),

    /// Unity Catalog holds an entry lakemirror may not change, or a table it cannot read.
    #[error("{0}")]
    CatalogState(String),
}

impl Error {
    /// Whether the same request may succeed later without anyone changing anything.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Unity { retryable, .. } => *retryable,
            Error::Storage(e) => e.is_retryable(),
            Error::Delta(e) => e.is_retryable(),
            _ => false,
        }
    }
}
