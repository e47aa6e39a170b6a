//! A catalog-managed table's log: its catalog asked which commits it ratified, and the
//! listing made of the published log plus the staged commits the catalog names.

use std::sync::Arc;

use crate::actions::{Metadata, Protocol};
use crate::catalog_managed::{
    self, CatalogError, CatalogManaged, CommitCatalog, Ratified, STAGED_COMMITS,
};
use crate::error::{Error, Result};

use super::{DeltaLog, LogFileKind};

impl DeltaLog {
    /// The log read, when the table is catalog-managed, with the commits `catalog` ratified
    /// (see [`catalog_managed`]); without a catalog, up to the newest published version.
    pub fn with_commit_catalog(mut self, catalog: Option<Arc<dyn CommitCatalog>>) -> Self {
        self.commit_catalog = catalog;
        self
    }

    /// [`Self::ask_catalog`] for a table whose mirror recorded the name its catalog answered
    /// by (`known_as`): the catalog is told it first ([`CommitCatalog::known_as`]), a hint it
    /// checks before it trusts it.
    pub async fn ask_catalog_known_as(
        &self,
        table_id: &str,
        known_as: Option<&str>,
    ) -> Result<DeltaLog> {
        if let (Some(catalog), Some(name)) = (&self.commit_catalog, known_as) {
            catalog.known_as(table_id, self.table.root_uri(), name);
        }
        self.ask_catalog(Some(table_id)).await
    }

    /// How this log reads a catalog-managed table (its tail); None when it is not known to
    /// be one.
    pub fn tail(&self) -> Option<&CatalogManaged> {
        self.tail.as_ref()
    }

    /// The log with `tail` as its tail (what an earlier read of the same table found); None
    /// leaves it as it is.
    pub fn with_tail(mut self, tail: Option<CatalogManaged>) -> Self {
        if tail.is_some() {
            self.tail = tail;
        }
        self
    }

    /// How a catalog-managed table was read, for reports; None for any other table.
    pub fn catalog_managed_report(&self) -> Option<catalog_managed::CatalogManagedReport> {
        self.tail.as_ref().map(Into::into)
    }

    pub(super) fn ratified(&self) -> Option<&Ratified> {
        match &self.tail {
            Some(CatalogManaged::Ratified(ratified)) => Some(ratified),
            _ => None,
        }
    }

    /// Whether a read that finds the table catalog-managed must stop and have its catalog
    /// asked first: the log has a catalog and no tail yet.
    pub(super) fn asks_catalog(&self) -> bool {
        self.commit_catalog.is_some() && self.tail.is_none()
    }

    /// The log of a catalog-managed table with its tail: the commits its catalog ratified
    /// (`table_id` as its configuration names it), asked once here; without a catalog, its
    /// published log only.
    pub async fn ask_catalog(&self, table_id: Option<&str>) -> Result<DeltaLog> {
        let root = self.table.root_uri();
        let tail = match &self.commit_catalog {
            None => CatalogManaged::PublishedOnly {
                table_id: table_id.map(str::to_string),
            },
            Some(catalog) => {
                let id = table_id.ok_or_else(|| {
                    self.malformed(format!(
                        "the table is catalog-managed, but its configuration names no catalog table id ({}); nothing was read",
                        catalog_managed::TABLE_ID_KEYS.join(", ")
                    ))
                })?;
                let ratified = catalog.ratified(id, root).await.map_err(|e| match e {
                    CatalogError::Unavailable(reason) => Error::CatalogUnavailable {
                        table: root.to_string(),
                        reason,
                    },
                    CatalogError::Refused(reason) => Error::CatalogRefused {
                        table: root.to_string(),
                        reason,
                    },
                })?;
                tracing::debug!(table = root, catalog = %ratified.catalog, latest = ratified.latest_version, listed = ratified.commits.len(), "the catalog's ratified commits");
                CatalogManaged::Ratified(Arc::new(ratified))
            }
        };
        Ok(self.clone().with_tail(Some(tail)))
    }

    /// The log with the tail its table's definition calls for: the catalog asked when the
    /// newest version is catalog-managed. For a read that must be made once (a filtered
    /// replay acts on what it sees), and for a caller that keeps the log for several reads.
    pub async fn with_its_tail(&self) -> Result<DeltaLog> {
        if !self.asks_catalog() {
            return Ok(self.clone());
        }
        let definition = self.definition().await?;
        Ok(self.clone().with_tail(definition.catalog_managed))
    }

    /// A replay that meets a catalog-managed table (`protocol`, `metadata`) whose catalog it
    /// can ask but has not yet stops there, with the table's id: the rest of the published
    /// log may hold commits the catalog never ratified (even a gap), and the catalog's
    /// commits are the log's tail.
    pub(super) fn catalog_to_ask(
        &self,
        protocol: Option<&Protocol>,
        metadata: Option<&Metadata>,
    ) -> Option<Option<String>> {
        (self.asks_catalog() && protocol.is_some_and(catalog_managed::is_catalog_managed)).then(
            || {
                metadata
                    .and_then(catalog_managed::catalog_table_id)
                    .map(str::to_string)
            },
        )
    }

    /// How a read whose newest version has `protocol` and `metadata` read the table: the
    /// log's tail, or, for a catalog-managed table read without a catalog, its published log
    /// only.
    pub(super) fn read_as(
        &self,
        protocol: Option<&Protocol>,
        metadata: Option<&Metadata>,
    ) -> Option<CatalogManaged> {
        if self.tail.is_some() {
            return self.tail.clone();
        }
        protocol
            .is_some_and(catalog_managed::is_catalog_managed)
            .then(|| CatalogManaged::PublishedOnly {
                table_id: metadata
                    .and_then(catalog_managed::catalog_table_id)
                    .map(str::to_string),
            })
    }

    /// A listing of a catalog-managed table as its catalog has it: nothing past the newest
    /// ratified version, and the ratified commits not yet published as the staged files the
    /// catalog names (a published commit wins over a staged copy of the same version).
    pub(super) fn with_ratified_commits(
        &self,
        published: Vec<(LogFileKind, object_store::ObjectMeta)>,
        after: Option<i64>,
        ratified: &Ratified,
    ) -> Result<Vec<(LogFileKind, object_store::ObjectMeta)>> {
        let mut files: Vec<_> = published
            .into_iter()
            .filter(|(kind, _)| kind.version().is_none_or(|v| v <= ratified.latest_version))
            .collect();
        let newest_published = files
            .iter()
            .filter_map(|(kind, _)| kind.version())
            .max()
            .max(after)
            .unwrap_or(-1);
        for v in newest_published + 1..=ratified.latest_version {
            let Some(commit) = ratified.commits.get(&v) else {
                return Err(self.malformed(format!(
                    "version {v} is neither published in _delta_log/ nor listed as ratified by {} (its newest version is {}): the log has a gap at version {v}",
                    ratified.catalog, ratified.latest_version
                )));
            };
            let location = self.staged_file(&commit.file_name);
            files.push((
                LogFileKind::Commit(v),
                object_store::ObjectMeta {
                    location: self.table.key(&location)?,
                    last_modified: chrono::DateTime::from_timestamp_millis(commit.modified_ms)
                        .unwrap_or_default(),
                    size: commit.size,
                    e_tag: None,
                    version: None,
                },
            ));
        }
        Ok(files)
    }

    /// The location of a staged commit the catalog names (a bare file name, checked).
    pub(super) fn staged_file(&self, file_name: &str) -> String {
        self.log_file(&format!("{STAGED_COMMITS}/{file_name}"))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use lakemirror_runtime::Kind;

    use super::*;
    use crate::catalog_managed::CatalogManaged;
    use crate::log::{CommitsSince, DeltaSnapshot};
    use crate::test_tables::{
        InMemoryCommitCatalog, add, catalog_managed_commit, commit_info, write_commit, write_staged,
    };
    use lakemirror_storage::ObjectStores;
    use lakemirror_storage::TableStorage;

    const ROOT: &str = "s3://lake/warehouse/managed";

    /// A catalog-managed table: version 0 published; 1 and 2 staged and ratified; a third
    /// staged file for version 3 that the catalog never ratified, and a loser of version 2.
    async fn managed() -> (TableStorage, Arc<InMemoryCommitCatalog>) {
        let table = ObjectStores::in_memory()
            .open(ROOT, Arc::default())
            .unwrap();
        write_commit(
            &table,
            0,
            &catalog_managed_commit("t", "uc-1", &[("id", "long")]),
        )
        .await;
        let catalog = Arc::new(InMemoryCommitCatalog::default());
        catalog.create("uc-1", ROOT);
        for v in 1..=2 {
            let staged = write_staged(
                &table,
                v,
                &format!("00000000-0000-4000-8000-00000000000{v}"),
                &[
                    commit_info(1_700_000_000_000 + v),
                    add(&format!("part-{v}.parquet"), 10, &[]),
                ],
            )
            .await;
            catalog.ratify("uc-1", staged);
        }
        write_staged(
            &table,
            2,
            "ffffffff-0000-4000-8000-000000000002",
            &[commit_info(1), add("loser.parquet", 10, &[])],
        )
        .await;
        write_staged(
            &table,
            3,
            "ffffffff-0000-4000-8000-000000000003",
            &[commit_info(1), add("never-ratified.parquet", 10, &[])],
        )
        .await;
        (table, catalog)
    }

    fn files(snapshot: &DeltaSnapshot) -> Vec<&str> {
        snapshot.active.files.keys().map(String::as_str).collect()
    }

    #[tokio::test]
    async fn a_catalog_managed_table_is_its_published_log_and_the_commits_its_catalog_ratified() {
        let (table, catalog) = managed().await;
        let log = DeltaLog::new(table).with_commit_catalog(Some(catalog.clone()));
        let snapshot = log.snapshot(None).await.unwrap();
        assert_eq!(snapshot.version, 2);
        assert_eq!(files(&snapshot), ["part-1.parquet", "part-2.parquet"]);
        assert!(matches!(
            snapshot.catalog_managed,
            Some(CatalogManaged::Ratified(_))
        ));
        assert_eq!(catalog.asked(), 1);
        // The log keeps no state: a caller that reads on keeps the tail the read found, and
        // the catalog is not asked again.
        let log = log.with_tail(snapshot.catalog_managed);
        // A ratified version is read at once, in the history too.
        let (base, commits) = log.recent_history(None, 100, None, false).await.unwrap();
        assert_eq!(base.version, 0);
        assert_eq!(
            commits.iter().map(|c| c.version).collect::<Vec<_>>(),
            [1, 2]
        );
        assert_eq!(log.snapshot(Some(1)).await.unwrap().version, 1);
        // Incrementally: a version the catalog has not ratified does not exist.
        let CommitsSince::Contiguous(after) = log.commits_since(1, None, Some(3)).await.unwrap()
        else {
            panic!("contiguous")
        };
        assert_eq!(after.iter().map(|c| c.version).collect::<Vec<_>>(), [2]);
        assert!(log.snapshot(Some(3)).await.is_err());
        assert_eq!(catalog.asked(), 1);
    }

    #[tokio::test]
    async fn a_version_asked_for_past_the_published_log_asks_the_catalog_first() {
        let (table, catalog) = managed().await;
        let log = DeltaLog::new(table).with_commit_catalog(Some(catalog));
        let snapshot = log.snapshot(Some(2)).await.unwrap();
        assert_eq!(files(&snapshot), ["part-1.parquet", "part-2.parquet"]);
    }

    #[tokio::test]
    async fn a_published_commit_wins_over_the_staged_copy_and_the_catalog_may_forget_it() {
        let (table, catalog) = managed().await;
        // Version 1 published (as a copy of another content, to tell them apart), and the
        // catalog told: it lists only version 2 now.
        write_commit(
            &table,
            1,
            &[commit_info(5), add("published-1.parquet", 10, &[])],
        )
        .await;
        catalog.published("uc-1", 1);
        let log = DeltaLog::new(table).with_commit_catalog(Some(catalog));
        let snapshot = log.snapshot(None).await.unwrap();
        assert_eq!(files(&snapshot), ["part-2.parquet", "published-1.parquet"]);
    }

    #[tokio::test]
    async fn a_version_neither_published_nor_listed_is_a_gap_named_in_the_error() {
        let (table, catalog) = managed().await;
        // The catalog forgets version 1 though it was never published.
        catalog.published("uc-1", 1);
        let log = DeltaLog::new(table).with_commit_catalog(Some(catalog));
        let err = log.snapshot(None).await.unwrap_err().to_string();
        assert!(err.contains("version 1 is neither published"), "{err}");
    }

    #[tokio::test]
    async fn a_published_commit_past_the_catalogs_newest_version_is_never_read() {
        let (table, catalog) = managed().await;
        // Version 3 published by a writer, though the catalog never ratified it, and version
        // 1 and 2 not published: the published log alone has a gap at 1.
        write_commit(&table, 3, &[commit_info(9), add("rogue.parquet", 10, &[])]).await;
        let log = DeltaLog::new(table).with_commit_catalog(Some(catalog));
        let snapshot = log.snapshot(None).await.unwrap();
        assert_eq!(snapshot.version, 2);
        assert_eq!(files(&snapshot), ["part-1.parquet", "part-2.parquet"]);
        let (_, commits) = log.recent_history(None, 100, None, false).await.unwrap();
        assert_eq!(
            commits.iter().map(|c| c.version).collect::<Vec<_>>(),
            [1, 2]
        );
    }

    #[tokio::test]
    async fn without_a_catalog_the_table_is_read_to_its_newest_published_version() {
        let (table, _) = managed().await;
        let log = DeltaLog::new(table);
        let snapshot = log.snapshot(None).await.unwrap();
        assert_eq!(snapshot.version, 0);
        let read = snapshot.catalog_managed.unwrap();
        assert_eq!(read.table_id(), Some("uc-1"));
        assert!(read.limited().unwrap().contains("UC_URL"), "{read:?}");
    }

    #[tokio::test]
    async fn a_catalog_that_is_down_fails_the_read_retryably_and_one_about_another_table_for_good()
    {
        let (table, catalog) = managed().await;
        catalog.set_down(true);
        let log = DeltaLog::new(table.clone()).with_commit_catalog(Some(catalog.clone()));
        let err = log.snapshot(None).await.unwrap_err();
        assert!(err.is_retryable(), "{err}");
        catalog.set_down(false);
        // The id belongs to a table the catalog keeps elsewhere.
        catalog.create("uc-1", "s3://lake/warehouse/other");
        let log = DeltaLog::new(table).with_commit_catalog(Some(catalog));
        let err = log.snapshot(None).await.unwrap_err();
        assert!(!err.is_retryable(), "{err}");
        assert!(err.to_string().contains("warehouse/other"), "{err}");
    }

    #[tokio::test]
    async fn a_plain_table_never_asks_the_catalog() {
        let table = ObjectStores::in_memory()
            .open(ROOT, Arc::default())
            .unwrap();
        write_commit(
            &table,
            0,
            &[
                commit_info(1),
                crate::test_tables::protocol(),
                crate::test_tables::metadata("t", &[("id", "long")], &[]),
            ],
        )
        .await;
        let catalog = Arc::new(InMemoryCommitCatalog::default());
        let log = DeltaLog::new(table).with_commit_catalog(Some(catalog.clone()));
        let snapshot = log.snapshot(None).await.unwrap();
        log.commits_since(0, None, Some(1)).await.unwrap();
        assert_eq!(catalog.asked(), 0);
        assert!(snapshot.catalog_managed.is_none());
    }
}
