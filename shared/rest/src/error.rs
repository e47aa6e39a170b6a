//! The REST catalog crate's one error type: settings, auth and reaching the server. What a
//! catalog call answers goes to the sync as [`lakemirror_iceberg::Error`], as every catalog's.

/// Result alias of lakemirror-rest.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A setting is missing or unusable: which one, and why.
    #[error("{name}: {reason}")]
    Setting { name: &'static str, reason: String },
    /// The catalog or its token endpoint refused who we are, or there is nothing to sign with.
    #[error("REST catalog authentication: {0}")]
    Auth(String),
    /// The server did not answer (connection refused, timeout). Retryable.
    #[error(
        "the REST catalog did not answer: {0}. Check that REST_CATALOG_URI (or the token endpoint, REST_CATALOG_OAUTH2_SERVER_URI) names a running catalog this function can reach (network, VPC, firewall); the event is retried"
    )]
    Unreachable(String),
}

impl Error {
    pub(crate) fn setting(name: &'static str, reason: impl Into<String>) -> Self {
        Error::Setting {
            name,
            reason: reason.into(),
        }
    }
}

impl From<Error> for lakemirror_iceberg::Error {
    fn from(e: Error) -> Self {
        let retryable = matches!(e, Error::Unreachable(_));
        lakemirror_iceberg::Error::Catalog {
            operation: "REST catalog",
            message: e.to_string(),
            retryable,
        }
    }
}
