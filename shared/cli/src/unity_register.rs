//! `lakemirror unity-register`: one Delta table registered in Unity Catalog.

use lakemirror_plan::target::allowed_names;
use lakemirror_unity::{UnityRegisterRequest, unity_register};

use crate::unity::missing_uc_url;
use crate::{Context, Result};

/// The flags of `lakemirror unity-register`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The Delta table root (the folder holding _delta_log): s3://bucket/path, file:///path or a local path.
    #[arg(long, env = "TABLE_URI")]
    pub table_uri: String,
    /// Unity Catalog catalog (must exist) [default: the Delta table property
    /// lakemirror.unity.catalog].
    #[arg(long = "uc-catalog", visible_alias = "catalog", env = "UC_CATALOG")]
    pub catalog: Option<String>,
    /// Unity Catalog schema (must exist) [default: the Delta table property
    /// lakemirror.unity.schema].
    #[arg(long = "uc-schema", visible_alias = "schema", env = "UC_SCHEMA")]
    pub schema: Option<String>,
    /// Table name, used as given (the lakemirror.unity.* properties are then ignored)
    /// [default: lakemirror.unity.table, else the table folder's name, lower-cased].
    #[arg(long)]
    pub table: Option<String>,
    /// The catalogs a Delta table's own lakemirror.unity.catalog / .schema / .table
    /// properties may choose, as a regex over the whole name [default: none: those
    /// properties are ignored, with a warning].
    #[arg(long, env = "ALLOWED_UC_CATALOGS")]
    pub allowed_uc_catalogs: Option<String>,
}

pub(crate) async fn run(context: &Context, args: Args) -> Result<String> {
    let allowed_catalogs =
        allowed_names(args.allowed_uc_catalogs.as_deref(), "--allowed-uc-catalogs")?;
    let request = UnityRegisterRequest {
        table_uri: args.table_uri,
        catalog: args.catalog,
        schema: args.schema,
        table: args.table,
        allowed_catalogs,
    };
    let uc = context.unity.client()?.ok_or_else(missing_uc_url)?;
    let report = unity_register(&context.stores, &uc, &request).await?;
    match &report.full_name {
        Some(name) => eprintln!(
            "{name}: {} (Delta version {}, {} columns)",
            report.action.replace('_', " "),
            report.delta_version,
            report.columns
        ),
        None => eprintln!(
            "{}: not registered (lakemirror.unity.enabled=false)",
            report.table_uri
        ),
    }
    Ok(serde_json::to_string(&report)?)
}
