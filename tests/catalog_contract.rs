//! The catalog contract: what the sync's compare-and-swap story needs of a catalog, held
//! against every implementation of `lakemirror_iceberg::Catalog` (after iceberg-rust's
//! `table_suite.rs`). The in-memory catalog always; AWS Glue on the rig's strict moto
//! (`tests/rig/moto_strict.py`, Glue's VersionId enforced) and a REST catalog on rustberg:
//! those two are `#[ignore]`d under a bare `cargo test` (no servers there) and run by
//! `tests/run.sh` (`-- --include-ignored`, `LAKEMIRROR_PYTHON` and `LAKEMIRROR_RUSTBERG`
//! set), where a missing server fails them. Every request goes to loopback.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use iceberg::spec::TableMetadata;
use lakemirror_aws::GlueCatalog;
use lakemirror_iceberg::catalog::{Catalog, CatalogCommit, CatalogEntry};
use lakemirror_iceberg::changes::Changes;
use lakemirror_iceberg::{Error, InMemoryCatalog};
use lakemirror_storage::IoCounters;

/// Makes a database and answers the catalog that holds it.
#[async_trait::async_trait]
trait Subject {
    async fn with_database(&self, database: &str) -> Arc<dyn Catalog>;
    /// Creates a table the catalog does not count as Iceberg (a Hive table).
    async fn add_other_table(&self, database: &str, name: &str);
}

struct Memory(Arc<InMemoryCatalog>);

#[async_trait::async_trait]
impl Subject for Memory {
    async fn with_database(&self, database: &str) -> Arc<dyn Catalog> {
        self.0.add_database(database);
        self.0.clone()
    }

    async fn add_other_table(&self, database: &str, name: &str) {
        self.0.put_other_table(
            database,
            name,
            HashMap::from([("table_type".into(), "HIVE".into())]),
        );
    }
}

/// Glue on the strict moto, started for the test and killed with it.
struct Glue {
    _moto: Moto,
    client: aws_sdk_glue::Client,
    catalog: Arc<GlueCatalog>,
}

struct Moto(Child);

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Glue {
    async fn start(python: &str) -> Self {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/rig/moto_strict.py");
        let mut child = Command::new(python)
            .args([script, "--port", "0", "--host", "127.0.0.1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start moto_strict.py with LAKEMIRROR_PYTHON");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let moto = Moto(child);
        let url = line
            .trim()
            .strip_prefix("ready ")
            .unwrap_or_else(|| panic!("moto did not start: {line:?}"))
            .to_string();
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
        let aws = lakemirror_aws::config::offline(Some(url.as_str())).await;
        Self {
            _moto: moto,
            client: aws_sdk_glue::Client::new(&aws),
            catalog: Arc::new(GlueCatalog::new(&aws)),
        }
    }
}

#[async_trait::async_trait]
impl Subject for Glue {
    async fn with_database(&self, database: &str) -> Arc<dyn Catalog> {
        let input = aws_sdk_glue::types::DatabaseInput::builder()
            .name(database)
            .build()
            .unwrap();
        self.client
            .create_database()
            .database_input(input)
            .send()
            .await
            .unwrap();
        self.catalog.clone()
    }

    async fn add_other_table(&self, database: &str, name: &str) {
        let input = aws_sdk_glue::types::TableInput::builder()
            .name(name)
            .table_type("EXTERNAL_TABLE")
            .parameters("classification", "parquet")
            .build()
            .unwrap();
        self.client
            .create_table()
            .database_name(database)
            .table_input(input)
            .send()
            .await
            .unwrap();
    }
}

fn metadata() -> TableMetadata {
    serde_json::from_value(serde_json::json!({
        "format-version": 2,
        "table-uuid": "8e1a0f9c-0000-4000-8000-000000000000",
        "location": "s3://lake/t",
        "last-sequence-number": 0,
        "last-updated-ms": 0,
        "last-column-id": 1,
        "current-schema-id": 0,
        "schemas": [{"type": "struct", "schema-id": 0,
                     "fields": [{"id": 1, "name": "id", "required": false, "type": "long"}]}],
        "default-spec-id": 0,
        "partition-specs": [{"spec-id": 0, "fields": []}],
        "last-partition-id": 999,
        "default-sort-order-id": 0,
        "sort-orders": [{"order-id": 0, "fields": []}],
    }))
    .unwrap()
}

/// One table of the contract's databases and the calls on it.
struct Table<'a> {
    catalog: &'a dyn Catalog,
    database: &'a str,
    name: &'a str,
    metadata: TableMetadata,
    counters: IoCounters,
}

impl<'a> Table<'a> {
    fn new(catalog: &'a dyn Catalog, database: &'a str, name: &'a str) -> Self {
        Self {
            catalog,
            database,
            name,
            metadata: metadata(),
            counters: IoCounters::default(),
        }
    }

    async fn read(&self) -> Option<CatalogEntry> {
        self.catalog
            .get_table(self.database, self.name, &self.counters)
            .await
            .unwrap()
    }

    async fn commit(&self, read: Option<&CatalogEntry>, location: &str) -> Result<(), Error> {
        let commit = CatalogCommit {
            database: self.database,
            name: self.name,
            read,
            metadata_location: location,
            previous_location: None,
            changes: Changes::Whole,
            metadata: &self.metadata,
        };
        self.catalog
            .commit_table(commit, &self.counters)
            .await
            .map(|_| ())
    }

    async fn location(&self) -> Option<String> {
        self.read()
            .await
            .and_then(|e| e.metadata_location().map(str::to_string))
    }
}

async fn a_commit_over_a_stale_read_loses_the_race(catalog: &dyn Catalog, db: &str) {
    let t = Table::new(catalog, db, "stale");
    t.commit(None, "s3://lake/m1.json").await.unwrap();
    let first = t.read().await.unwrap();
    t.commit(Some(&first), "s3://lake/m2.json").await.unwrap();
    let stale = t
        .commit(Some(&first), "s3://lake/m3.json")
        .await
        .unwrap_err();
    assert!(matches!(stale, Error::CommitConflict(_)), "{stale}");
    assert_eq!(t.location().await.as_deref(), Some("s3://lake/m2.json"));
    let second = t.read().await.unwrap();
    assert_ne!(first.version, second.version, "a commit moves the version");
    t.commit(Some(&second), "s3://lake/m4.json").await.unwrap();
    assert_eq!(t.location().await.as_deref(), Some("s3://lake/m4.json"));
    // Four commits and four reads, one request each.
    assert_eq!(t.counters.totals().requests, 8);
}

async fn a_table_created_twice_is_a_lost_race(catalog: &dyn Catalog, db: &str) {
    let t = Table::new(catalog, db, "twice");
    t.commit(None, "s3://lake/first.json").await.unwrap();
    let second = t.commit(None, "s3://lake/second.json").await.unwrap_err();
    assert!(matches!(second, Error::CommitConflict(_)), "{second}");
    assert_eq!(t.location().await.as_deref(), Some("s3://lake/first.json"));
}

async fn a_missing_database_is_named(catalog: &dyn Catalog, _db: &str) {
    let t = Table::new(catalog, "no_such_database", "t");
    assert_eq!(
        t.read().await,
        None,
        "no table in a database that does not exist"
    );
    let create = t.commit(None, "s3://lake/m1.json").await.unwrap_err();
    assert!(
        matches!(&create, Error::NoSuchDatabase(d) if d == "no_such_database"),
        "{create}"
    );
    let list = catalog
        .iceberg_tables("no_such_database", &IoCounters::default())
        .await
        .unwrap_err();
    assert!(matches!(list, Error::NoSuchDatabase(_)), "{list}");
}

async fn a_table_dropped_during_a_commit_is_a_lost_race(catalog: &dyn Catalog, db: &str) {
    let t = Table::new(catalog, db, "dropped");
    t.commit(None, "s3://lake/m1.json").await.unwrap();
    let read = t.read().await.unwrap();
    catalog
        .drop_table(db, "dropped", &t.counters)
        .await
        .unwrap();
    let lost = t
        .commit(Some(&read), "s3://lake/m2.json")
        .await
        .unwrap_err();
    assert!(matches!(lost, Error::CommitConflict(_)), "{lost}");
    // The retry reads again, finds no table and creates it.
    assert_eq!(t.read().await, None);
    t.commit(None, "s3://lake/m2.json").await.unwrap();
    assert_eq!(t.location().await.as_deref(), Some("s3://lake/m2.json"));
    // Dropping a table already gone is fine.
    catalog
        .drop_table(db, "dropped", &t.counters)
        .await
        .unwrap();
    catalog
        .drop_table(db, "dropped", &t.counters)
        .await
        .unwrap();
    assert_eq!(t.read().await, None);
}

async fn every_iceberg_table_is_listed_across_pages(
    catalog: &dyn Catalog,
    db: &str,
    subject: &dyn Subject,
) {
    // Glue answers GetTables in pages of 100.
    let names: Vec<String> = (0..130).map(|n| format!("t{n:03}")).collect();
    for name in &names {
        let t = Table::new(catalog, db, name);
        t.commit(None, &format!("s3://lake/{name}/m1.json"))
            .await
            .unwrap();
    }
    subject.add_other_table(db, "hive_table").await;
    let listed = catalog
        .iceberg_tables(db, &IoCounters::default())
        .await
        .unwrap();
    let listed_names: Vec<&str> = listed.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        listed_names, names,
        "every Iceberg table once, by name; no other table"
    );
    assert!(
        listed
            .iter()
            .all(|e| e.metadata_location == format!("s3://lake/{}/m1.json", e.name))
    );
}

/// Runs every case, each in a database of its own.
async fn contract(subject: &dyn Subject) {
    let catalog = subject.with_database("stale").await;
    a_commit_over_a_stale_read_loses_the_race(catalog.as_ref(), "stale").await;
    let catalog = subject.with_database("twice").await;
    a_table_created_twice_is_a_lost_race(catalog.as_ref(), "twice").await;
    a_missing_database_is_named(catalog.as_ref(), "twice").await;
    let catalog = subject.with_database("dropped").await;
    a_table_dropped_during_a_commit_is_a_lost_race(catalog.as_ref(), "dropped").await;
    let catalog = subject.with_database("paged").await;
    every_iceberg_table_is_listed_across_pages(catalog.as_ref(), "paged", subject).await;
}

#[tokio::test]
async fn the_in_memory_catalog_keeps_the_contract() {
    contract(&Memory(Arc::new(InMemoryCatalog::default()))).await;
}

#[tokio::test]
#[ignore = "needs moto: tests/run.sh runs it with LAKEMIRROR_PYTHON set (cargo test -- --include-ignored)"]
async fn glue_on_moto_keeps_the_contract() {
    let python = std::env::var("LAKEMIRROR_PYTHON")
        .expect("set LAKEMIRROR_PYTHON to a Python with moto (tests/rig/venv.sh makes one)");
    contract(&Glue::start(&python).await).await;
}

/// An Iceberg REST catalog: rustberg on loopback, started for the test (its binary from
/// `LAKEMIRROR_RUSTBERG`, which `tests/run.sh` installs with tests/rig/rustberg.sh) and killed
/// with it. A REST catalog takes metadata, not locations: a new table is registered from a
/// metadata file, and every later commit is the difference to the table's current metadata,
/// written by the server. So its cases write real metadata files and compare snapshots.
struct Rustberg {
    child: Child,
    url: String,
    key: String,
    warehouse: std::path::PathBuf,
}

impl Drop for Rustberg {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(self.warehouse.parent().unwrap());
    }
}

impl Rustberg {
    fn start(binary: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("lakemirror-rustberg-{}", std::process::id()));
        let warehouse = dir.join("lake");
        std::fs::create_dir_all(&warehouse).unwrap();
        std::fs::create_dir_all(dir.join("catalog")).unwrap();
        let config = dir.join("rustberg.toml");
        std::fs::write(
            &config,
            format!(
                "[server.auth]\napi_key_enabled = true\n[[server.auth.api_keys]]\nname = \"contract\"\ntenant = \"default\"\nroles = [\"admin\"]\nkey_env = \"RUSTBERG_KEY_CONTRACT\"\n[storage]\ncatalog_url = \"file://{}\"\nwarehouse_location = \"file://{}\"\nlocation_scope = \"warehouse\"\n[rate_limit]\nenabled = false\n[audit]\nsink = \"none\"\n",
                dir.join("catalog").display(),
                warehouse.display()
            ),
        )
        .unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let key = "rb_contract_key_0123456789".to_string();
        let mut child = Command::new(binary)
            .args(["--dev", "--insecure-http", "--host", "127.0.0.1", "--port"])
            .arg(port.to_string())
            .arg("--config")
            .arg(&config)
            .env("RUSTBERG_KEY_CONTRACT", &key)
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start rustberg from LAKEMIRROR_RUSTBERG");
        // It logs (at warn, on stderr) once its listener is bound.
        let mut log = BufReader::new(child.stderr.take().unwrap());
        let mut seen = String::new();
        loop {
            let mut line = String::new();
            if log.read_line(&mut line).unwrap() == 0 {
                panic!("rustberg exited before it listened: {seen}");
            }
            seen.push_str(&line);
            if line.contains("Server starting at http://") {
                break;
            }
        }
        // Keep draining its output so that it never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut sink = String::new();
            while log.read_line(&mut sink).is_ok_and(|n| n > 0) {
                sink.clear();
            }
        });
        Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
            key,
            warehouse,
        }
    }

    fn catalog(&self) -> lakemirror_rest::RestCatalog {
        let settings = lakemirror_rest::RestCatalogSettings::from_settings(&|name| match name {
            "REST_CATALOG_URI" => Some(self.url.clone()),
            "REST_CATALOG_TOKEN" => Some(self.key.clone()),
            _ => None,
        })
        .unwrap()
        .unwrap();
        lakemirror_rest::RestCatalog::new(&settings, None).unwrap()
    }

    async fn create_namespace(&self, name: &str) {
        let response = reqwest::Client::new()
            .post(format!("{}/v1/namespaces", self.url))
            .bearer_auth(&self.key)
            .json(&serde_json::json!({"namespace": [name], "properties": {}}))
            .send()
            .await
            .unwrap();
        assert!(
            response.status().is_success(),
            "{:?}",
            response.text().await
        );
    }

    /// A metadata file of table `name` in namespace `ns` with `snapshots` (ids, in order),
    /// written where lakemirror writes its own; its location and content.
    fn metadata_file(&self, ns: &str, name: &str, snapshots: &[i64]) -> (String, TableMetadata) {
        let table = self.warehouse.join(ns).join(name);
        let folder = table.join("_lakemirror/iceberg/metadata");
        std::fs::create_dir_all(&folder).unwrap();
        let mut json = serde_json::to_value(metadata()).unwrap();
        json["location"] = format!("file://{}", table.display()).into();
        json["table-uuid"] = format!(
            "8e1a0f9c-0000-4000-8000-{:012}",
            ns.len() * 1000 + name.len()
        )
        .into();
        let list: Vec<serde_json::Value> = snapshots
            .iter()
            .enumerate()
            .map(|(i, id)| {
                serde_json::json!({
                    "snapshot-id": id, "sequence-number": i + 1, "timestamp-ms": 1_700_000_000_000i64 + i as i64,
                    "manifest-list": format!("file://{}/snap-{id}.avro", folder.display()),
                    "summary": {"operation": "append"}, "schema-id": 0,
                    "parent-snapshot-id": if i == 0 { serde_json::Value::Null } else { snapshots[i - 1].into() },
                })
            })
            .collect();
        if let Some(last) = snapshots.last() {
            json["snapshots"] = list.into();
            json["current-snapshot-id"] = (*last).into();
            json["last-sequence-number"] = snapshots.len().into();
            json["last-updated-ms"] = (1_700_000_000_000i64 + snapshots.len() as i64).into();
            json["refs"] = serde_json::json!({"main": {"snapshot-id": last, "type": "branch"}});
        }
        let metadata: TableMetadata = serde_json::from_value(json).unwrap();
        let path = folder.join(format!(
            "{:05}-{}.metadata.json",
            snapshots.len(),
            snapshots.len()
        ));
        std::fs::write(&path, serde_json::to_vec(&metadata).unwrap()).unwrap();
        (format!("file://{}", path.display()), metadata)
    }
}

/// A commit to `ns.name` as the sync makes one.
async fn rest_commit(
    catalog: &dyn Catalog,
    ns: &str,
    name: &str,
    read: Option<&CatalogEntry>,
    previous: Option<&TableMetadata>,
    (location, metadata): &(String, TableMetadata),
) -> Result<Option<String>, Error> {
    let commit = CatalogCommit {
        database: ns,
        name,
        read,
        metadata_location: location,
        previous_location: None,
        changes: Changes::between(previous, metadata),
        metadata,
    };
    catalog.commit_table(commit, &IoCounters::default()).await
}

/// The current snapshot of the table the catalog points at, read from its metadata file.
async fn current_snapshot(catalog: &dyn Catalog, ns: &str, name: &str) -> Option<i64> {
    let entry = catalog
        .get_table(ns, name, &IoCounters::default())
        .await
        .unwrap()?;
    let location = entry.metadata_location().unwrap().to_string();
    let bytes = std::fs::read(location.strip_prefix("file://").unwrap()).unwrap();
    let metadata: TableMetadata = serde_json::from_slice(&bytes).unwrap();
    metadata.current_snapshot_id()
}

#[tokio::test]
#[ignore = "needs rustberg: tests/run.sh runs it with LAKEMIRROR_RUSTBERG set (cargo test -- --include-ignored)"]
async fn a_rest_catalog_on_rustberg_keeps_the_contract() {
    let binary = std::env::var("LAKEMIRROR_RUSTBERG").expect(
        "set LAKEMIRROR_RUSTBERG to a rustberg binary (tests/rig/rustberg.sh installs one)",
    );
    let server = Rustberg::start(&binary);
    let catalog = server.catalog();
    let counters = IoCounters::default();

    // A stale commit loses the race (409), and the table keeps the winner's snapshot.
    server.create_namespace("stale").await;
    let first = server.metadata_file("stale", "t", &[]);
    let registered = rest_commit(&catalog, "stale", "t", None, None, &first)
        .await
        .unwrap();
    assert_eq!(
        registered.as_deref(),
        Some(first.0.as_str()),
        "registered as written"
    );
    let read = catalog
        .get_table("stale", "t", &counters)
        .await
        .unwrap()
        .unwrap();
    let winner = server.metadata_file("stale", "t", &[11]);
    let written = rest_commit(&catalog, "stale", "t", Some(&read), Some(&first.1), &winner)
        .await
        .unwrap()
        .unwrap();
    assert_ne!(
        written, winner.0,
        "the server wrote the metadata file itself"
    );
    assert_eq!(current_snapshot(&catalog, "stale", "t").await, Some(11));
    let loser = server.metadata_file("stale", "t", &[12]);
    let stale = rest_commit(&catalog, "stale", "t", Some(&read), Some(&first.1), &loser)
        .await
        .unwrap_err();
    assert!(matches!(stale, Error::CommitConflict(_)), "{stale}");
    assert_eq!(current_snapshot(&catalog, "stale", "t").await, Some(11));

    // Created twice: the second is a lost race.
    let twice = server.metadata_file("stale", "twice", &[]);
    rest_commit(&catalog, "stale", "twice", None, None, &twice)
        .await
        .unwrap();
    let again = rest_commit(&catalog, "stale", "twice", None, None, &twice)
        .await
        .unwrap_err();
    assert!(matches!(again, Error::CommitConflict(_)), "{again}");

    // A namespace that does not exist.
    assert_eq!(
        catalog
            .get_table("no_such_database", "t", &counters)
            .await
            .unwrap(),
        None
    );
    let missing = server.metadata_file("no_such_database", "t", &[]);
    let create = rest_commit(&catalog, "no_such_database", "t", None, None, &missing)
        .await
        .unwrap_err();
    assert!(
        matches!(&create, Error::NoSuchDatabase(d) if d == "no_such_database"),
        "{create}"
    );
    let list = catalog
        .iceberg_tables("no_such_database", &counters)
        .await
        .unwrap_err();
    assert!(matches!(list, Error::NoSuchDatabase(_)), "{list}");

    // Dropped during a commit: a lost race; dropping a table already gone is fine.
    server.create_namespace("dropped").await;
    let first = server.metadata_file("dropped", "t", &[]);
    rest_commit(&catalog, "dropped", "t", None, None, &first)
        .await
        .unwrap();
    let read = catalog
        .get_table("dropped", "t", &counters)
        .await
        .unwrap()
        .unwrap();
    catalog.drop_table("dropped", "t", &counters).await.unwrap();
    let next = server.metadata_file("dropped", "t", &[21]);
    let lost = rest_commit(&catalog, "dropped", "t", Some(&read), Some(&first.1), &next)
        .await
        .unwrap_err();
    assert!(matches!(lost, Error::CommitConflict(_)), "{lost}");
    assert_eq!(
        catalog.get_table("dropped", "t", &counters).await.unwrap(),
        None
    );
    catalog.drop_table("dropped", "t", &counters).await.unwrap();

    // Every table of a namespace is listed, by name, with its current metadata.
    server.create_namespace("paged").await;
    let names: Vec<String> = (0..30).map(|n| format!("t{n:03}")).collect();
    for name in &names {
        let file = server.metadata_file("paged", name, &[]);
        rest_commit(&catalog, "paged", name, None, None, &file)
            .await
            .unwrap();
    }
    let listed = catalog.iceberg_tables("paged", &counters).await.unwrap();
    let mut listed_names: Vec<&str> = listed.iter().map(|e| e.name.as_str()).collect();
    listed_names.sort();
    assert_eq!(listed_names, names);
}
