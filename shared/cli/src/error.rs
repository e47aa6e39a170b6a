//! The CLI's one error type: every library error, each printed with the flag that fixes it
//! (the libraries name settings, never this tool's flags).

/// Result alias of the CLI.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can stop a `lakemirror` command.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Aws(#[from] lakemirror_aws::Error),
    #[error(transparent)]
    Mirror(#[from] lakemirror_mirror::Error),
    #[error(transparent)]
    Iceberg(#[from] lakemirror_iceberg::Error),
    #[error(transparent)]
    Plan(#[from] lakemirror_plan::Error),
    #[error(transparent)]
    Lakebase(#[from] lakemirror_lakebase::Error),
    #[error(transparent)]
    Unity(#[from] lakemirror_unity::Error),
    #[error(transparent)]
    Rest(#[from] lakemirror_rest::Error),
    /// A function's handler failed (`lakemirror invoke`).
    #[error("{0}")]
    Function(lambda_runtime::Error),
    /// The command line asks for something that cannot be done.
    #[error("{0}")]
    Usage(String),
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
}

impl Error {
    /// The flag that fixes this error, when one does.
    pub fn hint(&self) -> Option<String> {
        if let Error::Rest(lakemirror_rest::Error::Setting { name, .. }) = self {
            return flag_of(name);
        }
        let mirror = match self {
            Error::Mirror(e) => Some(e),
            Error::Function(e) => e.downcast_ref::<lakemirror_mirror::Error>(),
            _ => None,
        };
        let iceberg = match (self, mirror) {
            (Error::Iceberg(e), _) => Some(e),
            (_, Some(lakemirror_mirror::Error::Iceberg(e))) => Some(e),
            (Error::Function(e), _) => e.downcast_ref::<lakemirror_iceberg::Error>(),
            _ => None,
        };
        let delta = match self {
            Error::Lakebase(lakemirror_lakebase::Error::Delta(e)) => Some(e),
            Error::Unity(lakemirror_unity::Error::Delta(e)) => Some(e),
            _ => match iceberg {
                Some(lakemirror_iceberg::Error::Delta(e)) => Some(e),
                _ => None,
            },
        };
        if let Some(lakemirror_delta::Error::NotADeltaTable(_)) = delta {
            return Some("--table-uri".to_string());
        }
        let lakebase = match self {
            Error::Lakebase(e) => Some(e),
            Error::Function(e) => e.downcast_ref::<lakemirror_lakebase::Error>(),
            _ => None,
        };
        if let Some(setting) = lakebase.and_then(|e| e.setting()) {
            use lakemirror_lakebase::Setting;
            return Some(
                match setting {
                    Setting::FullRefresh => "--mode full_refresh",
                    Setting::ConflictOnExisting => "--conflict-on-existing replace",
                    Setting::PostgresUrl => "--postgres-url",
                    Setting::UnityCatalog => "--uc-url, --uc-token",
                    Setting::ShowValues => "--show-values shows the values",
                }
                .to_string(),
            );
        }
        let unity = match (self, lakebase) {
            (Error::Unity(e), _) => Some(e),
            (_, Some(lakemirror_lakebase::Error::Unity(e))) => Some(e),
            (Error::Function(e), _) => e.downcast_ref::<lakemirror_unity::Error>(),
            _ => None,
        };
        if let Some(setting) = unity.and_then(|e| e.setting()) {
            use lakemirror_unity::Setting;
            return Some(
                match setting {
                    Setting::Catalog => "--uc-catalog (or --catalog)",
                    Setting::Schema => "--uc-schema (or --schema)",
                    Setting::Table => "--table",
                    Setting::Token => "--uc-token",
                    Setting::SourceTable => "--source-table",
                }
                .to_string(),
            );
        }
        match mirror {
            Some(lakemirror_mirror::Error::Setting { name, .. }) => return flag_of(name),
            Some(lakemirror_mirror::Error::Iceberg(lakemirror_iceberg::Error::Plan(
                lakemirror_plan::Error::Setting { name, .. },
            ))) => return flag_of(name),
            Some(lakemirror_mirror::Error::SourceMissing { .. }) => {
                return Some("--on-missing-source=drop".to_string());
            }
            Some(lakemirror_mirror::Error::NotAMirror(_)) => {
                return Some("--glue-table".to_string());
            }
            _ => {}
        }
        match iceberg? {
            lakemirror_iceberg::Error::NoSuchDatabase(_) => Some("--glue-database".to_string()),
            lakemirror_iceberg::Error::CatalogState(_) => Some("--glue-table".to_string()),
            _ => None,
        }
    }

    /// Prints `error: <message> (<flag>)` on stderr.
    pub fn print(&self) {
        match self.hint() {
            Some(flag) => eprintln!("error: {self} ({flag})"),
            None => eprintln!("error: {self}"),
        }
    }
}

/// The flag that sets the setting `name` (the flag's environment variable).
pub(crate) fn flag_of(name: &str) -> Option<String> {
    crate::environment::declared(name).map(|variable| variable.flag())
}
