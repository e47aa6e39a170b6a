//! Where Unity Catalog is: the flags lakebase-sync, unity-register and `invoke` share.

use clap::Args;
use lakemirror_unity::UnityCatalog;
use lakemirror_unity::function::UnityConfig;

use crate::{Error, Result};

/// Where Unity Catalog is.
#[derive(Args)]
pub(crate) struct UnityArgs {
    /// Unity Catalog server, without /api/2.1/unity-catalog: https://host[:port].
    #[arg(long, env = "UC_URL")]
    pub uc_url: Option<String>,
    /// Bearer token for Unity Catalog (a personal access token or OAuth token).
    #[arg(long, env = "UC_TOKEN", hide_env_values = true)]
    pub uc_token: Option<String>,
}

impl UnityArgs {
    /// The client, when --uc-url is given.
    pub(crate) fn client(&self) -> Result<Option<UnityCatalog>> {
        Ok(self
            .uc_url
            .as_deref()
            .map(|url| UnityCatalog::new(url, self.uc_token.clone()))
            .transpose()?)
    }

    /// The functions' Unity Catalog configuration, when --uc-url is given.
    pub(crate) fn config(
        self,
        token_secret_arn: Option<String>,
        catalog: Option<String>,
        schema: Option<String>,
        table_prefixes: Vec<String>,
        allowed_catalogs: Option<regex::Regex>,
    ) -> Option<UnityConfig> {
        Some(UnityConfig {
            url: self.uc_url?,
            token: self.uc_token,
            token_secret_arn,
            catalog,
            schema,
            table_prefixes,
            allowed_catalogs,
        })
    }
}

/// The error of a command that needs a Unity Catalog server and was given none.
pub(crate) fn missing_uc_url() -> Error {
    Error::Usage(
        "no Unity Catalog server: give --uc-url (UC_URL), the server's base URL without /api/2.1/unity-catalog".into(),
    )
}
