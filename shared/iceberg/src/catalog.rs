//! The Iceberg catalog behind a trait: AWS Glue (lakemirror-aws) or an Iceberg REST catalog
//! (lakemirror-rest) in a deployment, an in-memory catalog with the same compare-and-swap
//! in tests. What the mirror needs of a
//! catalog is small: read a table's entry, create it or swap its metadata location if nobody
//! changed it since it was read, drop it, and list a database's Iceberg tables. Reading the
//! metadata file an entry names, and deciding whether it is a mirror lakemirror may continue,
//! is done here, once, for every catalog.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;

use iceberg::spec::TableMetadata;
use lakemirror_plan::CommittedTable;
use lakemirror_plan::properties::DELTA_TABLE_PROPERTY;
use lakemirror_storage::{IoCounters, ObjectStores, TableStorage, canonical_uri};

use crate::changes::Changes;
use crate::error::{Error, Result};

/// A catalog's entry for one table: its parameters (for an Iceberg table, `table_type` and
/// `metadata_location`) and the version a compare-and-swap checks.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CatalogEntry {
    pub parameters: HashMap<String, String>,
    pub version: Option<String>,
}

impl CatalogEntry {
    /// The metadata file of an Iceberg table; None for any other kind of table.
    pub fn metadata_location(&self) -> Option<&str> {
        let is_iceberg = self
            .parameters
            .get("table_type")
            .is_some_and(|t| t.eq_ignore_ascii_case("ICEBERG"));
        is_iceberg
            .then(|| self.parameters.get("metadata_location").map(String::as_str))
            .flatten()
    }
}

/// An Iceberg table of a database: its name and current metadata file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IcebergEntry {
    pub name: String,
    pub metadata_location: String,
}

/// What a commit asks of the catalog: make `database.name` point at `metadata_location`,
/// creating the table when `read` found none, else only if its version is still `read`'s.
/// Typed: each catalog turns it into its own request (Glue table parameters, REST updates).
#[derive(Debug)]
pub struct CatalogCommit<'a> {
    pub database: &'a str,
    pub name: &'a str,
    /// The entry read before the commit; None: the table is created.
    pub read: Option<&'a CatalogEntry>,
    /// The metadata file the table is to point at.
    pub metadata_location: &'a str,
    /// The metadata file it pointed at, when it was an Iceberg table.
    pub previous_location: Option<&'a str>,
    /// What the commit changes, typed ([`crate::changes`]): what a catalog that takes changes
    /// rather than a location (REST) sends; Glue and the in-memory catalog swap the location
    /// and check `read`'s version instead.
    pub changes: Changes,
    /// The metadata `metadata_location` holds (Glue shows its columns).
    pub metadata: &'a TableMetadata,
}

impl CatalogCommit<'_> {
    /// The table's parameters after the commit as catalogs of Hive's lineage keep them (Glue,
    /// and the in-memory catalog): those read, kept (another tool's own), with `table_type`,
    /// `metadata_location` and `previous_metadata_location` set as Iceberg's convention says.
    pub fn table_parameters(&self) -> HashMap<String, String> {
        let mut parameters = self.read.map(|e| e.parameters.clone()).unwrap_or_default();
        parameters.insert("table_type".into(), "ICEBERG".into());
        parameters.insert("metadata_location".into(), self.metadata_location.into());
        match self.previous_location {
            Some(previous) => {
                parameters.insert("previous_metadata_location".into(), previous.into());
            }
            None => {
                parameters.remove("previous_metadata_location");
            }
        }
        parameters
    }
}

/// Pages of one listing of a database's tables a catalog reads at most (Glue answers 100
/// tables a page): a listing longer than that is refused, naming the database.
pub const MAX_LISTING_PAGES: usize = 1000;

/// The error of a listing of `database` longer than [`MAX_LISTING_PAGES`].
pub fn too_many_pages(kind: &str, database: &str) -> Error {
    Error::Catalog {
        operation: "listing a database's tables",
        message: format!(
            "{kind} lists more than {MAX_LISTING_PAGES} pages of tables in {database}; lakemirror reads no more: keep the mirrors in a database of their own (GLUE_DATABASE)"
        ),
        retryable: false,
    }
}

/// An Iceberg catalog. Every call counts its requests in `counters` (one sync's report).
#[async_trait::async_trait]
pub trait Catalog: Send + Sync + std::fmt::Debug {
    /// What the catalog is called in messages ("Glue", "REST catalog").
    fn kind(&self) -> &'static str;

    /// The entry of `database.name`, None when there is no such table.
    async fn get_table(
        &self,
        database: &str,
        name: &str,
        counters: &IoCounters,
    ) -> Result<Option<CatalogEntry>>;

    /// Creates the table or swaps its entry, failing with [`Error::CommitConflict`] when
    /// another writer created, changed or dropped it since it was read, and with
    /// [`Error::NoSuchDatabase`] when a table is created in a database that does not exist.
    /// `tests/catalog_contract.rs` holds every catalog to this. Some(location) when the
    /// catalog wrote the new metadata file itself (a REST catalog), at `location`; None when
    /// the entry now names the commit's own `metadata_location`.
    async fn commit_table(
        &self,
        commit: CatalogCommit<'_>,
        counters: &IoCounters,
    ) -> Result<Option<String>>;

    /// Deletes `database.name`; one already gone is fine.
    async fn drop_table(&self, database: &str, name: &str, counters: &IoCounters) -> Result<()>;

    /// The Iceberg tables of `database`, by name.
    async fn iceberg_tables(
        &self,
        database: &str,
        counters: &IoCounters,
    ) -> Result<Vec<IcebergEntry>>;
}

/// The seams every sync goes through, built once per process: where tables are opened, the
/// catalog, and who ratifies the commits of catalog-managed Delta tables.
#[derive(Clone, Debug)]
pub struct Lakehouse {
    pub stores: ObjectStores,
    pub catalog: std::sync::Arc<dyn Catalog>,
    /// Unity Catalog, for catalog-managed Delta tables; None: those are mirrored up to their
    /// newest published version.
    pub commit_catalog: Option<std::sync::Arc<dyn lakemirror_delta::CommitCatalog>>,
}

impl Lakehouse {
    /// The stores and the catalog, without a commit catalog.
    pub fn new(stores: ObjectStores, catalog: std::sync::Arc<dyn Catalog>) -> Self {
        Self {
            stores,
            catalog,
            commit_catalog: None,
        }
    }

    /// The same, reading catalog-managed tables' ratified commits from `commit_catalog`.
    pub fn with_commit_catalog(
        mut self,
        commit_catalog: Option<std::sync::Arc<dyn lakemirror_delta::CommitCatalog>>,
    ) -> Self {
        self.commit_catalog = commit_catalog;
        self
    }

    /// The Delta log of `table`, read as its catalog has it when it is catalog-managed.
    pub fn delta_log(&self, table: TableStorage) -> lakemirror_delta::DeltaLog {
        lakemirror_delta::DeltaLog::new(table).with_commit_catalog(self.commit_catalog.clone())
    }
}

/// A mirror's catalog table as read before a commit.
#[derive(Debug, Clone)]
pub struct CatalogTable {
    pub database: String,
    pub name: String,
    /// None when the table does not exist yet, or its metadata is gone (`lost`).
    pub current: Option<CommittedTable>,
    /// The metadata file the table points at, when it is gone: it was under the Delta
    /// table's folder, which was deleted (and maybe written anew).
    pub lost: Option<String>,
    /// The entry read; None when the table does not exist (a commit creates it).
    entry: Option<CatalogEntry>,
}

impl CatalogTable {
    pub fn full_name(&self) -> String {
        format!("{}.{}", self.database, self.name)
    }
}

impl Lakehouse {
    /// Reads the catalog table and, when it is an Iceberg table, its current metadata.
    /// `delta_table_uri` guards against mirroring two Delta tables into one catalog table.
    pub async fn load(
        &self,
        database: &str,
        name: &str,
        delta_table_uri: &str,
        metadata_store: &TableStorage,
    ) -> Result<CatalogTable> {
        let counters = metadata_store.counters();
        let table = |current, lost, entry| CatalogTable {
            database: database.into(),
            name: name.into(),
            current,
            lost,
            entry,
        };
        let Some(entry) = self.catalog.get_table(database, name, counters).await? else {
            return Ok(table(None, None, None));
        };
        let full = format!("{database}.{name}");
        let kind = self.catalog.kind();
        // In one spelling: a catalog may name a local file `file:/x` where lakemirror wrote
        // `file:///x` (Java's CatalogHandlers do).
        let Some(location) = entry.metadata_location().map(canonical_uri) else {
            return Err(Error::CatalogState(format!(
                "{kind} table {full} exists but is not an Iceberg table lakemirror can continue; choose another table name or delete it"
            )));
        };
        // Only metadata in this table's own metadata folder is continued: a metadata file
        // anywhere else (another table's folder, which its writer controls) proves nothing,
        // whatever properties it holds.
        let own_folder = format!("{}/metadata", canonical_uri(metadata_store.root_uri()));
        if !metadata_store.scope().root_holds(&location)
            || !location.starts_with(&format!("{own_folder}/"))
        {
            let holder = location
                .split_once("/_lakemirror/iceberg/metadata/")
                .map(|(table, _)| table.to_string());
            let other = holder
                .as_deref()
                .unwrap_or("a table lakemirror did not create here");
            return Err(Error::NameTaken {
                metadata_location: location.clone(),
                message: format!(
                    "{kind} table {full} mirrors {other}, not {delta_table_uri}: its metadata {location} lies outside this table's metadata folder {own_folder}, and lakemirror continues only metadata it wrote there; choose another table name (TABLE_NAME_FROM_PATH=unique-path names each location apart) or delete the {kind} table; nothing was written"
                ),
                holder,
            });
        }
        let metadata = match crate::metadata_json::read(metadata_store, &location).await? {
            Some(Ok(metadata)) => metadata,
            Some(Err(why)) => {
                return Err(Error::CatalogState(format!(
                    "{kind} table {full}: metadata {location} is not Iceberg table metadata ({why})"
                )));
            }
            // Our own metadata, gone with the Delta table's folder: the mirror is lost, and
            // the sync writes it anew (or reports the Delta table missing).
            None => {
                return Ok(table(None, Some(location), Some(entry)));
            }
        };
        let mirrored = metadata.properties().get(DELTA_TABLE_PROPERTY);
        if mirrored.map(|m| canonical_uri(m)) != Some(canonical_uri(delta_table_uri)) {
            return Err(Error::CatalogState(format!(
                "{kind} table {full} mirrors {}, not {delta_table_uri}; choose another table name",
                mirrored.map_or("a table lakemirror did not create", String::as_str)
            )));
        }
        let current = CommittedTable {
            metadata,
            metadata_location: location,
        };
        Ok(table(Some(current), None, Some(entry)))
    }

    /// Makes `staged` the current metadata of the table, if nobody changed the table since
    /// `read`. A lost race is [`Error::CommitConflict`]. The metadata file the table now
    /// points at: `staged`'s, or one the catalog wrote with the same content (REST).
    pub async fn commit(
        &self,
        read: &CatalogTable,
        staged: &CommittedTable,
        counters: &IoCounters,
    ) -> Result<String> {
        let commit = CatalogCommit {
            database: &read.database,
            name: &read.name,
            read: read.entry.as_ref(),
            metadata_location: &staged.metadata_location,
            previous_location: read.current.as_ref().map(|c| c.metadata_location.as_str()),
            changes: Changes::between(read.current.as_ref().map(|c| &c.metadata), &staged.metadata),
            metadata: &staged.metadata,
        };
        let written = self.catalog.commit_table(commit, counters).await?;
        Ok(written.unwrap_or_else(|| staged.metadata_location.clone()))
    }

    /// Deletes the table `read` found (a mirror whose Delta table is gone, or one a nested
    /// table gives up), unless it points at other metadata now (another writer took the
    /// name since it was read): whether it was deleted. The Iceberg metadata files are not
    /// touched.
    pub async fn drop_table(&self, read: &CatalogTable, counters: &IoCounters) -> Result<bool> {
        let Some(location) = read
            .entry
            .as_ref()
            .and_then(CatalogEntry::metadata_location)
        else {
            return Ok(false);
        };
        self.drop_if_at(&read.database, &read.name, location, counters)
            .await
    }

    /// Deletes `database.name` if it still points at the metadata file `location`: whether
    /// it was deleted (read again just before; a catalog without a conditional delete leaves
    /// a moment between the two).
    pub async fn drop_if_at(
        &self,
        database: &str,
        name: &str,
        location: &str,
        counters: &IoCounters,
    ) -> Result<bool> {
        let now = self.catalog.get_table(database, name, counters).await?;
        let same = now
            .as_ref()
            .and_then(CatalogEntry::metadata_location)
            .is_some_and(|at| canonical_uri(at) == canonical_uri(location));
        if same {
            self.catalog.drop_table(database, name, counters).await?;
        }
        Ok(same)
    }
}

/// One table of [`InMemoryCatalog`]: its parameters and version.
type StoredTable = (HashMap<String, String>, u64);

/// A catalog in memory, with the compare-and-swap of a real one: for tests of the sync loop
/// and the handlers without AWS.
#[derive(Debug, Default)]
pub struct InMemoryCatalog {
    databases: Mutex<BTreeSet<String>>,
    tables: Mutex<BTreeMap<(String, String), StoredTable>>,
    /// Commits still to lose a race, per table (see [`InMemoryCatalog::interfere`]).
    interfering: Mutex<HashMap<(String, String), u32>>,
}

impl InMemoryCatalog {
    /// A catalog holding the (empty) databases `databases`.
    pub fn with_databases(databases: &[&str]) -> Self {
        let catalog = Self::default();
        if let Ok(mut known) = catalog.databases.lock() {
            known.extend(databases.iter().map(|d| d.to_string()));
        }
        catalog
    }

    /// Adds the (empty) database `database`.
    pub fn add_database(&self, database: &str) {
        if let Ok(mut known) = self.databases.lock() {
            known.insert(database.to_string());
        }
    }

    /// The next `commits` commits to `database.name` lose their race: just before each,
    /// another writer changes the table (a new version, same parameters; or, for a table not
    /// there yet, creates it), as a concurrent sync would.
    pub fn interfere(&self, database: &str, name: &str, commits: u32) {
        if let Ok(mut interfering) = self.interfering.lock() {
            interfering.insert((database.to_string(), name.to_string()), commits);
        }
    }

    /// The parameters of `database.name`, if it exists.
    pub fn parameters(&self, database: &str, name: &str) -> Option<HashMap<String, String>> {
        let tables = self.tables.lock().ok()?;
        tables
            .get(&(database.to_string(), name.to_string()))
            .map(|(parameters, _)| parameters.clone())
    }

    /// Puts a table that is not a mirror (a Hive table, a view) at `database.name`, as
    /// another tool would, with `parameters`.
    pub fn put_other_table(&self, database: &str, name: &str, parameters: HashMap<String, String>) {
        if let Ok(mut tables) = self.tables.lock() {
            tables.insert((database.to_string(), name.to_string()), (parameters, 0));
        }
    }

    fn poisoned() -> Error {
        Error::CatalogState("the in-memory catalog was poisoned by a panic".into())
    }
}

#[async_trait::async_trait]
impl Catalog for InMemoryCatalog {
    fn kind(&self) -> &'static str {
        "in-memory catalog"
    }

    async fn get_table(
        &self,
        database: &str,
        name: &str,
        counters: &IoCounters,
    ) -> Result<Option<CatalogEntry>> {
        counters.call("catalog load", 0, 0);
        let tables = self.tables.lock().map_err(|_| Self::poisoned())?;
        Ok(tables
            .get(&(database.to_string(), name.to_string()))
            .map(|(parameters, version)| CatalogEntry {
                parameters: parameters.clone(),
                version: Some(version.to_string()),
            }))
    }

    async fn commit_table(
        &self,
        commit: CatalogCommit<'_>,
        counters: &IoCounters,
    ) -> Result<Option<String>> {
        counters.call("catalog commit", 0, 0);
        if !self
            .databases
            .lock()
            .map_err(|_| Self::poisoned())?
            .contains(commit.database)
        {
            return Err(Error::NoSuchDatabase(commit.database.to_string()));
        }
        let mut tables = self.tables.lock().map_err(|_| Self::poisoned())?;
        let key = (commit.database.to_string(), commit.name.to_string());
        let interfere = match self
            .interfering
            .lock()
            .map_err(|_| Self::poisoned())?
            .get_mut(&key)
        {
            Some(left) if *left > 0 => {
                *left -= 1;
                true
            }
            _ => false,
        };
        if interfere && let Some((_, version)) = tables.get_mut(&key) {
            *version += 1;
        }
        let conflict = || {
            Error::CommitConflict(format!(
                "table {}.{} of the in-memory catalog",
                commit.database, commit.name
            ))
        };
        let parameters = commit.table_parameters();
        match (commit.read, tables.get_mut(&key)) {
            (None, Some(_)) => Err(conflict()),
            (None, None) if interfere => {
                // Another writer created it first.
                tables.insert(key, (parameters, 0));
                Err(conflict())
            }
            (None, None) => {
                tables.insert(key, (parameters, 0));
                Ok(None)
            }
            // Dropped since it was read: as lost a race as a change (Glue answers
            // EntityNotFound); the sync reads again and finds no table.
            (Some(_), None) => Err(conflict()),
            (Some(read), Some((stored, version))) => {
                if read.version != Some(version.to_string()) {
                    return Err(conflict());
                }
                *stored = parameters;
                *version += 1;
                Ok(None)
            }
        }
    }

    async fn drop_table(&self, database: &str, name: &str, counters: &IoCounters) -> Result<()> {
        counters.call("catalog drop", 0, 0);
        let mut tables = self.tables.lock().map_err(|_| Self::poisoned())?;
        tables.remove(&(database.to_string(), name.to_string()));
        Ok(())
    }

    async fn iceberg_tables(
        &self,
        database: &str,
        counters: &IoCounters,
    ) -> Result<Vec<IcebergEntry>> {
        counters.call("catalog list", 0, 0);
        if !self
            .databases
            .lock()
            .map_err(|_| Self::poisoned())?
            .contains(database)
        {
            return Err(Error::NoSuchDatabase(database.to_string()));
        }
        let tables = self.tables.lock().map_err(|_| Self::poisoned())?;
        Ok(tables
            .iter()
            .filter(|((db, _), _)| db == database)
            .filter_map(|((_, name), (parameters, version))| {
                let entry = CatalogEntry {
                    parameters: parameters.clone(),
                    version: Some(version.to_string()),
                };
                entry.metadata_location().map(|location| IcebergEntry {
                    name: name.clone(),
                    metadata_location: location.to_string(),
                })
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata() -> TableMetadata {
        serde_json::from_value(serde_json::json!({
            "format-version": 2,
            "table-uuid": "8e1a0f9c-0000-4000-8000-000000000000",
            "location": "s3://lake/t",
            "last-sequence-number": 0,
            "last-updated-ms": 0,
            "last-column-id": 0,
            "current-schema-id": 0,
            "schemas": [{"type": "struct", "schema-id": 0, "fields": []}],
            "default-spec-id": 0,
            "partition-specs": [{"spec-id": 0, "fields": []}],
            "last-partition-id": 999,
            "default-sort-order-id": 0,
            "sort-orders": [{"order-id": 0, "fields": []}],
        }))
        .unwrap()
    }

    fn commit<'a>(
        read: Option<&'a CatalogEntry>,
        metadata: &'a TableMetadata,
        location: &'a str,
    ) -> CatalogCommit<'a> {
        CatalogCommit {
            database: "db",
            name: "t",
            read,
            metadata_location: location,
            previous_location: None,
            changes: Changes::Whole,
            metadata,
        }
    }

    #[tokio::test]
    async fn an_interfering_writer_makes_the_next_commit_conflict_once() {
        let catalog = InMemoryCatalog::with_databases(&["db"]);
        let counters = IoCounters::default();
        let metadata = metadata();
        catalog
            .commit_table(commit(None, &metadata, "s3://lake/m1.json"), &counters)
            .await
            .unwrap();
        catalog.interfere("db", "t", 1);
        let read = catalog
            .get_table("db", "t", &counters)
            .await
            .unwrap()
            .unwrap();
        let lost = catalog
            .commit_table(
                commit(Some(&read), &metadata, "s3://lake/m2.json"),
                &counters,
            )
            .await;
        assert!(matches!(lost, Err(Error::CommitConflict(_))));
        let read = catalog
            .get_table("db", "t", &counters)
            .await
            .unwrap()
            .unwrap();
        catalog
            .commit_table(
                commit(Some(&read), &metadata, "s3://lake/m2.json"),
                &counters,
            )
            .await
            .unwrap();
    }
}
