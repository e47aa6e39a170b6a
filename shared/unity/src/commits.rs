//! Unity Catalog as the commit catalog of catalog-managed Delta tables: which staged commits
//! it ratified (the [`CommitCatalog`] seam of `lakemirror-delta`).
//!
//! Asked first through the managed-tables API (`GET /delta/preview/commits`, by table id and
//! storage location; the server checks the location). A server without that route (the
//! `olai-uc-server` 0.0.11 of the tests) is asked through the UC Delta API's `loadTable`
//! (`GET /delta/v1/catalogs/{c}/schemas/{s}/tables/{t}`: `commits` and
//! `latest-table-version`), which takes the table's name: it is found once per process by
//! listing catalogs, schemas and tables for the id, unless the mirror recorded the name the
//! catalog answered by last time (`lakemirror.delta.catalog-table-name`): then a fresh process
//! asks by that name at once, one request, and walks only when the name no longer holds the
//! table. Either way the answer counts only when the catalog keeps the table of this id at this
//! Delta table's root.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::answers::{CommitsAnswer, PreviewAnswer};
use lakemirror_runtime::Kind;

use lakemirror_delta::catalog_managed::{CatalogError, CommitCatalog, Ratified, RatifiedCommit};
use lakemirror_storage::SecretSource;
use lakemirror_storage::uri::canonical_uri;

use crate::client::{TableInfo, UnityCatalog};
use crate::error::Error;

/// Pages of `/delta/preview/commits` one question reads at most.
const MAX_PAGES: usize = 100;

/// Schemas one search for a table id lists at most.
const MAX_SCHEMAS: usize = 1000;

/// How long a server found without the preview route is asked through `loadTable` alone.
const NO_ROUTE_FOR: Duration = Duration::from_secs(15 * 60);

/// How long a table id the catalog was found not to hold is remembered: syncs of the table
/// in that time are refused without listing the catalog again.
const NOT_FOUND_FOR: Duration = Duration::from_secs(15 * 60);

/// Unity Catalog as the commit catalog of catalog-managed Delta tables (glue-sync's and the
/// CLI's wiring), from `UC_URL`,
/// `UC_TOKEN` and `UC_TOKEN_SECRET_ARN` (the token read once, at cold start); None without
/// `UC_URL`: those tables are then mirrored up to their newest published version.
pub async fn commit_catalog(
    setting: &dyn Fn(&str) -> Option<String>,
    secrets: Option<&dyn SecretSource>,
) -> crate::Result<Option<Arc<dyn CommitCatalog>>> {
    if crate::function::UC_URL.value(setting).is_none() {
        return Ok(None);
    }
    let client = crate::function::UnityConfig::connection(setting)?
        .client(secrets)
        .await?;
    Ok(Some(Arc::new(UnityCommits::new(client))))
}

/// Unity Catalog answering which commits of its catalog-managed tables it ratified.
#[derive(Debug)]
pub struct UnityCommits {
    client: UnityCatalog,
    /// Table id -> full name, for servers asked through `loadTable`: found by this process.
    names: Mutex<HashMap<String, String>>,
    /// (table id, table root) -> full name as the table's mirror recorded it
    /// ([`CommitCatalog::known_as`]): asked by once, before anything else, and trusted only
    /// as far as the answer checks out; keyed by the root too, so no other table's mirror
    /// can choose the name a table is asked by.
    hints: Mutex<HashMap<(String, String), String>>,
    /// Table ids the catalog was found not to hold, and the refusal, since when: a made-up
    /// id in one table's configuration costs one walk of the catalog per
    /// [`NOT_FOUND_FOR`], not one per sync.
    not_found: Mutex<HashMap<String, (Instant, String)>>,
    /// One walk of the catalog at a time: syncs of tables naming the same id wait for the
    /// first one's answer instead of walking again beside it.
    walking: tokio::sync::Mutex<()>,
    /// Since when the server answered without the managed-commits preview route and then
    /// through `loadTable`: for [`NO_ROUTE_FOR`], syncs go straight through `loadTable` (one
    /// request once the table's name is known) instead of asking the missing route first.
    /// Only a `loadTable` that answered sets it, and one that fails clears it, so a passing
    /// 404 of a proxy cannot send every sync the long way for good.
    no_preview_route: Mutex<Option<Instant>>,
}

impl UnityCommits {
    pub fn new(client: UnityCatalog) -> Self {
        Self {
            client,
            names: Mutex::default(),
            hints: Mutex::default(),
            not_found: Mutex::default(),
            walking: tokio::sync::Mutex::default(),
            no_preview_route: Mutex::default(),
        }
    }

    /// The refusal remembered for `table_id`, while it is recent.
    fn remembered_refusal(&self, table_id: &str) -> Option<String> {
        let mut not_found = self.not_found.lock().ok()?;
        match not_found.get(table_id) {
            Some((since, refusal)) if since.elapsed() < NOT_FOUND_FOR => Some(refusal.clone()),
            Some(_) => {
                not_found.remove(table_id);
                None
            }
            None => None,
        }
    }

    /// The server's answer through `loadTable`, for a server without the preview route, and
    /// the table's name it was asked by. A name this process found that no longer holds the
    /// table (renamed, or its name taken by another table) is dropped and the catalog walked
    /// once more.
    async fn through_load_table(
        &self,
        table_id: &str,
        table_root: &str,
    ) -> Result<(CommitsAnswer, String), CatalogError> {
        let found = self
            .names
            .lock()
            .ok()
            .and_then(|names| names.get(table_id).cloned());
        if let Some(name) = found {
            match self.load_checked(&name, table_id, table_root).await {
                Ok(Some(answer)) => return Ok((answer, name)),
                Err(CatalogError::Unavailable(reason)) => {
                    return Err(CatalogError::Unavailable(reason));
                }
                Ok(None) | Err(CatalogError::Refused(_)) => {
                    if let Ok(mut names) = self.names.lock() {
                        names.remove(table_id);
                    }
                }
            }
        }
        let full_name = self.name_of(table_id, table_root).await?;
        let answer = self
            .load_checked(&full_name, table_id, table_root)
            .await?
            .ok_or_else(|| {
                if let Ok(mut names) = self.names.lock() {
                    names.remove(table_id);
                }
                CatalogError::Unavailable(format!(
                    "{} has no table {full_name} any more (it held table id {table_id}); asked again on the next sync",
                    self.describe()
                ))
            })?;
        Ok((answer, full_name))
    }

    /// For a table whose mirror recorded the name the catalog answered by
    /// ([`CommitCatalog::known_as`]): the answer through that name (or the one this process
    /// found since), one `loadTable`, checked like any answer. None without a recorded name,
    /// or when the name no longer answers for this table: the catalog is then asked as
    /// without it (the preview route, or the walk by id).
    async fn through_recorded_name(
        &self,
        table_id: &str,
        table_root: &str,
    ) -> Option<(CommitsAnswer, String)> {
        let key = (table_id.to_string(), table_root.to_string());
        let recorded = self.hints.lock().ok()?.remove(&key)?;
        let found = self
            .names
            .lock()
            .ok()
            .and_then(|names| names.get(table_id).cloned());
        let name = found.unwrap_or(recorded);
        let answered = self.load_checked(&name, table_id, table_root).await;
        let mut names = self.names.lock().ok()?;
        match answered {
            Ok(Some(answer)) => {
                names.insert(table_id.to_string(), name.clone());
                Some((answer, name))
            }
            Ok(None) | Err(_) => {
                names.remove(table_id);
                tracing::info!(table_id, %name, "the table's recorded name does not answer for it; asking the catalog as without it");
                None
            }
        }
    }

    /// The full name of the table of id `table_id`: as this process found it, else found by
    /// walking the catalog (one walk at a time), its location checked.
    async fn name_of(&self, table_id: &str, table_root: &str) -> Result<String, CatalogError> {
        let known = || {
            self.names
                .lock()
                .ok()
                .and_then(|n| n.get(table_id).cloned())
        };
        if let Some(name) = known() {
            return Ok(name);
        }
        let _walking = self.walking.lock().await;
        if let Some(name) = known() {
            return Ok(name);
        }
        if let Some(refusal) = self.remembered_refusal(table_id) {
            return Err(CatalogError::Refused(refusal));
        }
        let Some(table) = self.find_table(table_id).await? else {
            let refusal = format!(
                "{} has no table of id {table_id} (the id the Delta table's configuration names, io.unitycatalog.tableId): the table is managed by another catalog, or was dropped there. Point UC_URL at the catalog that manages it",
                self.describe()
            );
            // Only this answer is remembered: not a failure on the way.
            if let Ok(mut not_found) = self.not_found.lock() {
                not_found.retain(|_, (since, _)| since.elapsed() < NOT_FOUND_FOR);
                not_found.insert(table_id.to_string(), (Instant::now(), refusal.clone()));
            }
            return Err(CatalogError::Refused(refusal));
        };
        let name = table.full_name();
        self.check_location(
            table_id,
            table_root,
            table.storage_location.as_deref(),
            &name,
        )?;
        if let Ok(mut names) = self.names.lock() {
            names.insert(table_id.to_string(), name.clone());
        }
        Ok(name)
    }

    /// `loadTable` of `full_name`, checked to be the table of id `table_id` at `table_root`,
    /// managed by the catalog; None when the name holds no table.
    async fn load_checked(
        &self,
        full_name: &str,
        table_id: &str,
        table_root: &str,
    ) -> Result<Option<CommitsAnswer>, CatalogError> {
        let Some(loaded) = self
            .client
            .delta_load_table(full_name)
            .await
            .map_err(catalog_error)?
        else {
            return Ok(None);
        };
        if loaded.metadata.table_uuid != table_id {
            return Err(CatalogError::Refused(format!(
                "{} keeps {full_name} as table id {}, not {table_id} as the Delta table's configuration says",
                self.describe(),
                loaded.metadata.table_uuid
            )));
        }
        self.check_location(
            table_id,
            table_root,
            Some(&loaded.metadata.location),
            full_name,
        )?;
        let latest = loaded.latest_table_version.ok_or_else(|| {
            CatalogError::Refused(format!(
                "{} keeps {full_name} (table id {table_id}) as a table whose commits it does not coordinate (no latest-table-version: not a MANAGED Delta table there)",
                self.describe()
            ))
        })?;
        Ok(Some(CommitsAnswer {
            commits: loaded.commits,
            latest_table_version: latest,
        }))
    }

    /// The table of id `table_id`, by listing every catalog, schema and table (each list at
    /// most [`crate::client::MAX_LIST_PAGES`] pages, the walk at most [`MAX_SCHEMAS`] schemas).
    /// None when no table has that id. A schema whose tables cannot be listed (refused, or
    /// longer than a listing reads) is passed over, said in the log.
    async fn find_table(&self, table_id: &str) -> Result<Option<TableInfo>, CatalogError> {
        let mut schemas_listed = 0;
        for catalog in self.client.list_catalogs().await.map_err(catalog_error)? {
            for schema in self
                .client
                .list_schemas(&catalog)
                .await
                .map_err(catalog_error)?
            {
                schemas_listed += 1;
                if schemas_listed > MAX_SCHEMAS {
                    return Err(CatalogError::Refused(format!(
                        "{} holds more than {MAX_SCHEMAS} schemas, and lakemirror looks for a table id (io.unitycatalog.tableId {table_id}) in no more: a server with the managed-tables API (/delta/preview/commits) answers by id",
                        self.describe()
                    )));
                }
                let tables = match self.client.list_tables(&catalog, &schema).await {
                    Ok(tables) => tables,
                    Err(e) if !e.is_retryable() => {
                        tracing::warn!(schema = %format!("{catalog}.{schema}"), error = %e, "looking for a table id: a schema whose tables cannot be listed is passed over");
                        continue;
                    }
                    Err(e) => return Err(catalog_error(e)),
                };
                if let Some(table) = tables
                    .into_iter()
                    .find(|t| t.table_id.as_deref() == Some(table_id))
                {
                    return Ok(Some(table));
                }
            }
        }
        Ok(None)
    }

    /// The catalog's answer as the log takes it, checked ([`Ratified::new`]), with the name it
    /// was asked by, if any.
    fn answer(
        &self,
        table_id: &str,
        answer: CommitsAnswer,
        name: Option<String>,
    ) -> Result<Ratified, CatalogError> {
        let commits = answer.commits.into_iter().map(|c| RatifiedCommit {
            version: c.version,
            file_name: c.file_name,
            size: u64::try_from(c.file_size).unwrap_or_default(),
            modified_ms: c.file_modification_timestamp,
        });
        Ratified::new(
            self.describe(),
            table_id.to_string(),
            answer.latest_table_version,
            commits,
        )
        .map(|ratified| ratified.named(name))
        .map_err(CatalogError::Refused)
    }

    /// Refuses an answer about a table the catalog keeps elsewhere than `table_root`: a Delta
    /// table whose configuration names another table's id gets nothing of that table.
    fn check_location(
        &self,
        table_id: &str,
        table_root: &str,
        location: Option<&str>,
        full_name: &str,
    ) -> Result<(), CatalogError> {
        match location {
            Some(location) if canonical_uri(location) == canonical_uri(table_root) => Ok(()),
            other => Err(CatalogError::Refused(format!(
                "its configuration names catalog table id {table_id}, which {} keeps as {full_name} at {}, not at {table_root}: the id belongs to another table",
                self.describe(),
                other.unwrap_or("no location")
            ))),
        }
    }
}

#[async_trait::async_trait]
impl CommitCatalog for UnityCommits {
    fn describe(&self) -> String {
        format!("Unity Catalog at {}", self.client.url())
    }

    async fn ratified(&self, table_id: &str, table_root: &str) -> Result<Ratified, CatalogError> {
        if let Some((answer, name)) = self.through_recorded_name(table_id, table_root).await {
            return self.answer(table_id, answer, Some(name));
        }
        let route_missing = self
            .no_preview_route
            .lock()
            .ok()
            .and_then(|since| *since)
            .is_some_and(|since| since.elapsed() < NO_ROUTE_FOR);
        let preview = match route_missing {
            true => PreviewAnswer::NoRoute,
            false => self
                .client
                .preview_commits(table_id, table_root, MAX_PAGES)
                .await
                .map_err(catalog_error)?,
        };
        let (answer, name) = match preview {
            PreviewAnswer::Answered(answer) => (answer, None),
            PreviewAnswer::NoSuchTable(reason) => {
                return Err(CatalogError::Refused(format!(
                    "{} does not coordinate the commits of table id {table_id} at {table_root} ({reason}): the id names another table, or the table moved",
                    self.describe()
                )));
            }
            PreviewAnswer::NoRoute => {
                let answered = self.through_load_table(table_id, table_root).await;
                if let Ok(mut remembered) = self.no_preview_route.lock() {
                    *remembered = route_missing_since(*remembered, answered.is_ok());
                }
                let (answer, name) = answered?;
                (answer, Some(name))
            }
        };
        self.answer(table_id, answer, name)
    }

    fn known_as(&self, table_id: &str, table_root: &str, name: &str) {
        if let Ok(mut hints) = self.hints.lock() {
            let key = (table_id.to_string(), table_root.to_string());
            hints.insert(key, name.to_string());
        }
    }
}

/// Since when the preview route is taken to be missing, after `loadTable` answered (or not)
/// for a server that lacked it: kept while recent, renewed when stale, forgotten on a failure.
fn route_missing_since(since: Option<Instant>, load_table_answered: bool) -> Option<Instant> {
    match (load_table_answered, since) {
        (true, Some(since)) if since.elapsed() < NO_ROUTE_FOR => Some(since),
        (true, _) => Some(Instant::now()),
        (false, _) => None,
    }
}

fn catalog_error(e: Error) -> CatalogError {
    match e.is_retryable() {
        true => CatalogError::Unavailable(e.to_string()),
        false => CatalogError::Refused(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_preview_route_is_remembered_while_load_table_answers_and_for_a_while_only() {
        let first = route_missing_since(None, true).unwrap();
        assert_eq!(route_missing_since(Some(first), true), Some(first));
        assert_eq!(route_missing_since(Some(first), false), None);
        assert_eq!(route_missing_since(None, false), None);
        let Some(stale) = Instant::now().checked_sub(NO_ROUTE_FOR + Duration::from_secs(1)) else {
            return; // a clock this young cannot hold a stale instant
        };
        assert!(route_missing_since(Some(stale), true).is_some_and(|renewed| renewed > stale));
    }
}
