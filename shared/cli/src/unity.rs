//! Where Unity Catalog is: global flags, for every command that reads catalog-managed Delta
//! tables (their commits ratified by Unity Catalog), registers tables or reads them by name.

use std::sync::Arc;

use clap::Args;
use lakemirror_delta::CommitCatalog;
use lakemirror_unity::function::UnityConfig;
use lakemirror_unity::{UnityCatalog, UnityCommits};

use crate::{Error, Result};

/// Where Unity Catalog is.
#[derive(Args, Clone)]
#[command(next_help_heading = "Unity Catalog")]
pub(crate) struct UnityArgs {
    /// Unity Catalog server, without /api/2.1/unity-catalog: https://host[:port]. Reads the
    /// commits it ratified of catalog-managed Delta tables (without it those are read up to
    /// their newest published version), and is where lakebase-sync finds tables by name and
    /// unity-register registers them.
    #[arg(long, global = true, env = "UC_URL")]
    pub uc_url: Option<String>,
    /// Bearer token for Unity Catalog (a personal access token or OAuth token).
    #[arg(long, global = true, env = "UC_TOKEN", hide_env_values = true)]
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

    /// Unity Catalog as the commit catalog of catalog-managed tables, when --uc-url is given.
    pub(crate) fn commit_catalog(&self) -> Result<Option<Arc<dyn CommitCatalog>>> {
        Ok(self
            .client()?
            .map(|client| Arc::new(UnityCommits::new(client)) as Arc<dyn CommitCatalog>))
    }

    /// The functions' Unity Catalog configuration, when --uc-url is given.
    pub(crate) fn config(
        &self,
        token_secret_arn: Option<String>,
        catalog: Option<String>,
        schema: Option<String>,
        table_prefixes: Vec<String>,
        allowed_catalogs: Option<regex::Regex>,
    ) -> Option<UnityConfig> {
        Some(UnityConfig {
            url: self.uc_url.clone()?,
            token: self.uc_token.clone(),
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
