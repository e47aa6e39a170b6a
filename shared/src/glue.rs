//! AWS Glue as the Iceberg catalog: read the current metadata location, create the table,
//! and swap the metadata location with Glue's `VersionId` compare-and-swap.

use std::collections::HashMap;
use std::sync::Arc;

use aws_sdk_glue::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_glue::types::{Column, StorageDescriptor, TableInput};
use iceberg::spec::{PrimitiveType, Schema, TableMetadata, Type};

use crate::error::{Error, Result};
use crate::mirror::CommittedTable;
use crate::storage::{IoCounters, TableStorage};

/// A Glue table name: the Delta folder's last segment, lower-cased, with every character
/// Glue rejects turned into `_`.
pub fn default_table_name(table_uri: &str) -> String {
    let last = table_uri
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or_default();
    glue_name(last)
}

/// A Glue table name from the table's whole path below the bucket (`s3://lake/sales/orders`
/// -> `sales_orders`), lower-cased, other characters as `_`: unique per location.
pub fn path_table_name(table_uri: &str) -> String {
    let path = table_uri.split_once("://").map_or(table_uri, |(_, rest)| {
        rest.split_once('/').map_or("", |(_, p)| p)
    });
    glue_name(path.trim_matches('/'))
}

/// `raw` lower-cased, every character Glue rejects turned into `_`; `_` when empty.
fn glue_name(raw: &str) -> String {
    let name: String = raw
        .to_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.is_empty() {
        "_".to_string()
    } else {
        name
    }
}

/// The Glue table as read before a commit.
#[derive(Debug, Clone)]
pub struct GlueTable {
    pub database: String,
    pub name: String,
    /// None when the Glue table does not exist yet, or its metadata is gone (`lost`).
    pub current: Option<CommittedTable>,
    /// The metadata file the Glue table points at, when it is gone: it was under the Delta
    /// table's folder, which was deleted (and maybe written anew).
    pub lost: Option<String>,
    /// Whether the Glue table exists (an update, not a create, makes it current).
    exists: bool,
    version_id: Option<String>,
    parameters: HashMap<String, String>,
}

impl GlueTable {
    pub fn full_name(&self) -> String {
        format!("{}.{}", self.database, self.name)
    }
}

/// Glue catalog client.
#[derive(Clone, Debug)]
pub struct GlueCatalog {
    client: aws_sdk_glue::Client,
    counters: Arc<IoCounters>,
}

fn glue_error<E: ProvideErrorMetadata + std::error::Error + 'static>(
    operation: &'static str,
    err: SdkError<E>,
) -> Error {
    let retryable = match &err {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            true
        }
        SdkError::ServiceError(service) => {
            let code = service.err().code().unwrap_or_default();
            service.raw().status().is_server_error()
                || matches!(
                    code,
                    "ThrottlingException"
                        | "InternalServiceException"
                        | "OperationTimeoutException"
                        | "ConcurrentModificationException"
                )
        }
        _ => false,
    };
    let message = match err.as_service_error() {
        Some(service) => format!(
            "{}: {}",
            service.code().unwrap_or("error"),
            service.message().unwrap_or("no message")
        ),
        None => format!("{}", aws_sdk_glue::error::DisplayErrorContext(&err)),
    };
    Error::Glue {
        operation,
        message,
        retryable,
    }
}

/// Attempts per Glue call (the SDK's standard mode tries 3 times). Glue throttles per
/// account at a few requests per second, and a sync that gives up on throttling is redone
/// from the start by the queue: retrying the one call is cheaper. Measured with the
/// fault-injecting proxy: at 30% injected faults, 3 attempts failed 1 sync run in 14.
pub const GLUE_MAX_ATTEMPTS: u32 = 6;

/// A Glue client from the AWS configuration, with [`GLUE_MAX_ATTEMPTS`].
pub fn glue_client(aws: &aws_config::SdkConfig) -> aws_sdk_glue::Client {
    let config = aws_sdk_glue::config::Builder::from(aws)
        .retry_config(
            aws_config::retry::RetryConfig::standard().with_max_attempts(GLUE_MAX_ATTEMPTS),
        )
        .build();
    aws_sdk_glue::Client::from_conf(config)
}

impl GlueCatalog {
    /// A client from the standard AWS configuration (env, profile, instance role;
    /// `AWS_ENDPOINT_URL` for a local endpoint).
    pub async fn from_env(counters: Arc<IoCounters>) -> Self {
        let config = crate::aws::config().await;
        Self {
            client: glue_client(config),
            counters,
        }
    }

    pub fn new(client: aws_sdk_glue::Client, counters: Arc<IoCounters>) -> Self {
        Self { client, counters }
    }

    /// The same client, counting its requests in `counters` (one sync's report).
    pub fn counting_in(&self, counters: Arc<IoCounters>) -> Self {
        Self {
            client: self.client.clone(),
            counters,
        }
    }

    fn count(&self) {
        self.counters
            .requests
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Reads the Glue table and, when it is an Iceberg table, its current metadata.
    /// `delta_table_uri` guards against mirroring two Delta tables into one Glue table.
    pub async fn load(
        &self,
        database: &str,
        name: &str,
        delta_table_uri: &str,
        metadata_store: &TableStorage,
    ) -> Result<GlueTable> {
        self.count();
        let response = self
            .client
            .get_table()
            .database_name(database)
            .name(name)
            .send()
            .await;
        let table = match response {
            Ok(out) => out.table,
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(|e| e.is_entity_not_found_exception()) =>
            {
                None
            }
            Err(err) => return Err(glue_error("GetTable", err)),
        };
        let Some(table) = table else {
            return Ok(GlueTable {
                database: database.into(),
                name: name.into(),
                current: None,
                lost: None,
                exists: false,
                version_id: None,
                parameters: HashMap::new(),
            });
        };
        let full = format!("{database}.{name}");
        let parameters = table.parameters.clone().unwrap_or_default();
        let is_iceberg = parameters
            .get("table_type")
            .is_some_and(|t| t.eq_ignore_ascii_case("ICEBERG"));
        let location = parameters.get("metadata_location");
        let (true, Some(location)) = (is_iceberg, location) else {
            return Err(Error::CatalogState(format!(
                "Glue table {full} exists but is not an Iceberg table lakemirror can continue; choose another --glue-table or delete it"
            )));
        };
        let store = if metadata_store.holds(location) {
            metadata_store.clone()
        } else {
            TableStorage::open(location, metadata_store.counters().clone())?
        };
        let bytes = match store.get_if_exists(location).await? {
            Some(bytes) => bytes,
            // Our own metadata, gone with the Delta table's folder: the mirror is lost, and
            // the sync writes it anew (or reports the Delta table missing).
            None if metadata_store.contains(location) => {
                return Ok(GlueTable {
                    database: database.into(),
                    name: name.into(),
                    current: None,
                    lost: Some(location.clone()),
                    exists: true,
                    version_id: table.version_id,
                    parameters,
                });
            }
            None => {
                return Err(Error::CatalogState(format!(
                    "Glue table {full} points at metadata {location}, which does not exist; choose another --glue-table or delete it"
                )));
            }
        };
        let metadata: TableMetadata = serde_json::from_slice(&bytes).map_err(|e| {
            Error::CatalogState(format!(
                "Glue table {full}: metadata {location} is not Iceberg table metadata ({e})"
            ))
        })?;
        let mirrored = metadata
            .properties()
            .get(crate::mirror::writer::DELTA_TABLE_PROPERTY);
        if mirrored.map(String::as_str) != Some(delta_table_uri) {
            return Err(Error::CatalogState(format!(
                "Glue table {full} mirrors {}, not {delta_table_uri}; choose another --glue-table",
                mirrored.map_or("a table lakemirror did not create", String::as_str)
            )));
        }
        Ok(GlueTable {
            database: database.into(),
            name: name.into(),
            current: Some(CommittedTable {
                metadata,
                metadata_location: location.clone(),
            }),
            lost: None,
            exists: true,
            version_id: table.version_id,
            parameters,
        })
    }

    /// Makes `staged` the current metadata of the Glue table, if nobody changed the table
    /// since `read`. A lost race is [`Error::CommitConflict`].
    pub async fn commit(&self, read: &GlueTable, staged: &CommittedTable) -> Result<()> {
        let mut parameters = read.parameters.clone();
        parameters.insert("table_type".into(), "ICEBERG".into());
        parameters.insert("metadata_location".into(), staged.metadata_location.clone());
        match &read.current {
            Some(previous) => {
                parameters.insert(
                    "previous_metadata_location".into(),
                    previous.metadata_location.clone(),
                );
            }
            None => {
                parameters.remove("previous_metadata_location");
            }
        }
        let input = TableInput::builder()
            .name(&read.name)
            .table_type("EXTERNAL_TABLE")
            .set_parameters(Some(parameters))
            .storage_descriptor(
                StorageDescriptor::builder()
                    .location(staged.metadata.location())
                    .set_columns(Some(glue_columns(staged.metadata.current_schema())))
                    .build(),
            )
            .build()
            .map_err(|e| Error::InvalidInput(format!("Glue table input: {e}")))?;
        self.count();
        let conflict = || Error::CommitConflict(read.full_name());
        match read.exists {
            false => match self
                .client
                .create_table()
                .database_name(&read.database)
                .table_input(input)
                .send()
                .await
            {
                Ok(_) => Ok(()),
                Err(err)
                    if err
                        .as_service_error()
                        .is_some_and(|e| e.is_already_exists_exception()) =>
                {
                    Err(conflict())
                }
                Err(err)
                    if err
                        .as_service_error()
                        .is_some_and(|e| e.is_entity_not_found_exception()) =>
                {
                    Err(Error::CatalogState(format!(
                        "Glue database {} does not exist; create it (aws glue create-database --database-input Name={}) or choose another --glue-database",
                        read.database, read.database
                    )))
                }
                Err(err) => Err(glue_error("CreateTable", err)),
            },
            true => {
                let mut request = self
                    .client
                    .update_table()
                    .database_name(&read.database)
                    .table_input(input)
                    .skip_archive(true);
                if let Some(version) = &read.version_id {
                    request = request.version_id(version);
                }
                match request.send().await {
                    Ok(_) => Ok(()),
                    Err(err)
                        if err
                            .as_service_error()
                            .is_some_and(|e| e.is_concurrent_modification_exception()) =>
                    {
                        Err(conflict())
                    }
                    Err(err) => Err(glue_error("UpdateTable", err)),
                }
            }
        }
    }
}

/// An Iceberg table of a Glue database: its name and current metadata file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IcebergEntry {
    pub name: String,
    pub metadata_location: String,
}

impl GlueCatalog {
    /// The Iceberg tables of `database` (`table_type=ICEBERG` with a `metadata_location`),
    /// by name, one `GetTables` request per page of 100.
    pub async fn iceberg_tables(&self, database: &str) -> Result<Vec<IcebergEntry>> {
        let mut entries = Vec::new();
        let mut token: Option<String> = None;
        loop {
            self.count();
            let page = self
                .client
                .get_tables()
                .database_name(database)
                .set_next_token(token.take())
                .send()
                .await
                .map_err(|err| match err.as_service_error() {
                    Some(e) if e.is_entity_not_found_exception() => Error::CatalogState(format!(
                        "Glue database {database} does not exist; name the database glue-sync mirrors into (--glue-database)"
                    )),
                    _ => glue_error("GetTables", err),
                })?;
            for table in page.table_list.unwrap_or_default() {
                let parameters = table.parameters.unwrap_or_default();
                let is_iceberg = parameters
                    .get("table_type")
                    .is_some_and(|t| t.eq_ignore_ascii_case("ICEBERG"));
                if let (true, Some(location)) = (is_iceberg, parameters.get("metadata_location")) {
                    entries.push(IcebergEntry {
                        name: table.name,
                        metadata_location: location.clone(),
                    });
                }
            }
            match page.next_token {
                Some(next) if !next.is_empty() => token = Some(next),
                _ => break,
            }
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(entries)
    }
}

impl GlueCatalog {
    /// Deletes the Glue table `read` found (a mirror whose Delta table is gone). The Iceberg
    /// metadata files are not touched.
    pub async fn drop_table(&self, read: &GlueTable) -> Result<()> {
        self.count();
        match self
            .client
            .delete_table()
            .database_name(&read.database)
            .name(&read.name)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            // Someone else dropped it first: the outcome is the same.
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(|e| e.is_entity_not_found_exception()) =>
            {
                Ok(())
            }
            Err(err) => Err(glue_error("DeleteTable", err)),
        }
    }
}

/// Glue columns for consoles and crawlers: Hive type names with the Iceberg field ID.
fn glue_columns(schema: &Schema) -> Vec<Column> {
    schema
        .as_struct()
        .fields()
        .iter()
        .filter_map(|f| {
            Column::builder()
                .name(&f.name)
                .r#type(hive_type(&f.field_type))
                .parameters("iceberg.field.id", f.id.to_string())
                .parameters("iceberg.field.optional", (!f.required).to_string())
                .build()
                .ok()
        })
        .collect()
}

fn hive_type(t: &Type) -> String {
    match t {
        Type::Primitive(p) => match p {
            PrimitiveType::Boolean => "boolean".into(),
            PrimitiveType::Int => "int".into(),
            PrimitiveType::Long => "bigint".into(),
            PrimitiveType::Float => "float".into(),
            PrimitiveType::Double => "double".into(),
            PrimitiveType::Decimal { precision, scale } => format!("decimal({precision},{scale})"),
            PrimitiveType::Date => "date".into(),
            PrimitiveType::Timestamp | PrimitiveType::Timestamptz => "timestamp".into(),
            PrimitiveType::Binary | PrimitiveType::Fixed(_) => "binary".into(),
            _ => "string".into(),
        },
        Type::Struct(s) => format!(
            "struct<{}>",
            s.fields()
                .iter()
                .map(|f| format!("{}:{}", f.name, hive_type(&f.field_type)))
                .collect::<Vec<_>>()
                .join(",")
        ),
        Type::List(l) => format!("array<{}>", hive_type(&l.element_field.field_type)),
        Type::Map(m) => format!(
            "map<{},{}>",
            hive_type(&m.key_field.field_type),
            hive_type(&m.value_field.field_type)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_name_defaults_to_the_folder() {
        assert_eq!(default_table_name("s3://lake/warehouse/Orders/"), "orders");
        assert_eq!(
            default_table_name("/data/delta-0.8.0 special"),
            "delta_0_8_0_special"
        );
        assert_eq!(default_table_name("file:///x/Ünïcode"), "_n_code");
        assert_eq!(path_table_name("s3://lake/Sales/orders/"), "sales_orders");
        assert_eq!(path_table_name("file:///data/t"), "data_t");
    }
}
