//! A small client for the Unity Catalog REST API (`/api/2.1/unity-catalog`): what lakemirror
//! needs of it and no more. Tables: get, create, list, delete; catalogs and schemas: get;
//! temporary table credentials. Bearer-token auth.
//!
//! Every failure becomes an [`Error::Unity`] that says what to do: a 401 names `UC_TOKEN`, a
//! 403 the privilege, a missing catalog or schema how to create it, an unreachable server
//! `UC_URL`. A 404 on a get is not an error: the object is absent (`None`).

use lakemirror_storage::budget::{self, BodyError};
use std::collections::HashMap;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use lakemirror_storage::VendedCredentials;
use lakemirror_storage::service_url::{on_this_machine, path_segment};

use crate::answers::{CommitsAnswer, DeltaLoadTable, PreviewAnswer};
use crate::error::{Error, Result, Setting};

/// The path of the API below the server's base URL.
pub const API_PATH: &str = "/api/2.1/unity-catalog";

/// One column of a table (`ColumnInfo`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ColumnInfo {
    pub name: String,
    #[serde(default)]
    pub type_text: String,
    #[serde(default)]
    pub type_json: String,
    #[serde(default)]
    pub type_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub type_precision: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub type_scale: Option<i32>,
    #[serde(default)]
    pub position: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    #[serde(default = "yes")]
    pub nullable: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_index: Option<i32>,
}

fn yes() -> bool {
    true
}

/// A table as Unity Catalog returns it (`TableInfo`); fields lakemirror does not use are
/// left out.
#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
pub struct TableInfo {
    pub name: String,
    #[serde(default)]
    pub catalog_name: String,
    #[serde(default)]
    pub schema_name: String,
    #[serde(default)]
    pub table_type: Option<String>,
    #[serde(default)]
    pub data_source_format: Option<String>,
    #[serde(default)]
    pub columns: Vec<ColumnInfo>,
    #[serde(default)]
    pub storage_location: Option<String>,
    #[serde(default)]
    pub comment: Option<String>,
    #[serde(default)]
    pub properties: HashMap<String, String>,
    #[serde(default)]
    pub table_id: Option<String>,
}

impl TableInfo {
    pub fn full_name(&self) -> String {
        format!("{}.{}.{}", self.catalog_name, self.schema_name, self.name)
    }
}

/// The body of `POST /tables` (`CreateTable`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CreateTable {
    pub name: String,
    pub catalog_name: String,
    pub schema_name: String,
    pub table_type: String,
    pub data_source_format: String,
    pub columns: Vec<ColumnInfo>,
    pub storage_location: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    pub properties: HashMap<String, String>,
}

impl CreateTable {
    pub fn full_name(&self) -> String {
        format!("{}.{}.{}", self.catalog_name, self.schema_name, self.name)
    }
}

#[derive(Deserialize)]
struct ListTablesResponse {
    #[serde(default)]
    tables: Vec<TableInfo>,
    #[serde(default)]
    next_page_token: Option<String>,
}

#[derive(Deserialize)]
struct TemporaryCredentials {
    #[serde(default)]
    aws_temp_credentials: Option<VendedCredentials>,
}

/// A Unity Catalog server.
#[derive(Clone)]
pub struct UnityCatalog {
    /// The server's base URL, as configured (`UC_URL`).
    url: String,
    /// `url` + [`API_PATH`].
    api: String,
    token: Option<String>,
    http: reqwest::Client,
}

impl std::fmt::Debug for UnityCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnityCatalog")
            .field("url", &self.url)
            .field("token", &self.token.as_ref().map(|_| "***"))
            .finish()
    }
}

/// What a request was for, in words, for error messages.
struct Call<'a> {
    what: &'a str,
    /// The object a 403 or 404 is about (`catalog.schema.table`).
    object: &'a str,
}

impl UnityCatalog {
    /// A client for the server at `url` (`UC_URL`: `https://host[:port]`, without
    /// `/api/2.1/unity-catalog`), authenticating with `token` (`UC_TOKEN`) when given.
    pub fn new(url: &str, token: Option<String>) -> Result<Self> {
        let trimmed = url.trim().trim_end_matches('/');
        let base = trimmed.strip_suffix(API_PATH).unwrap_or(trimmed);
        let bad_url = |reason: String| Error::Url {
            url: url.to_string(),
            reason,
        };
        let parsed = url::Url::parse(base).map_err(|e| {
            bad_url(format!(
                "is not a URL ({e}); give the server's base URL, e.g. https://uc.example.com:8080"
            ))
        })?;
        // The token travels with every request: plain http only to this machine.
        let loopback = on_this_machine(&parsed);
        match parsed.scheme() {
            "https" => {}
            "http" if loopback => {}
            "http" => {
                return Err(bad_url(
                    "is plain http: the token and the table definitions would cross the network unencrypted; use https:// (http:// is for a server on this machine only)".into(),
                ));
            }
            _ => {
                return Err(bad_url("must start with https://".into()));
            }
        }
        // No redirect is followed: a hop to another address (plain http elsewhere) would get
        // the token past the https-or-loopback rule.
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(60))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| bad_url(format!("cannot be reached: HTTPS cannot be set up ({e})")))?;
        Ok(Self {
            url: base.to_string(),
            api: format!("{base}{API_PATH}"),
            token: token.filter(|t| !t.trim().is_empty()),
            http,
        })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub async fn get_catalog(&self, name: &str) -> Result<Option<serde_json::Value>> {
        let call = Call {
            what: "reading a catalog",
            object: name,
        };
        self.get(&format!("/catalogs/{}", path_segment(name)), &[], call)
            .await
    }

    pub async fn get_schema(&self, full_name: &str) -> Result<Option<serde_json::Value>> {
        let call = Call {
            what: "reading a schema",
            object: full_name,
        };
        self.get(&format!("/schemas/{}", path_segment(full_name)), &[], call)
            .await
    }

    /// The table `catalog.schema.table`, or None when Unity Catalog has no such table.
    pub async fn get_table(&self, full_name: &str) -> Result<Option<TableInfo>> {
        let call = Call {
            what: "reading a table",
            object: full_name,
        };
        self.get(&format!("/tables/{}", path_segment(full_name)), &[], call)
            .await
    }

    /// Every table of a schema (all pages).
    pub async fn list_tables(&self, catalog: &str, schema: &str) -> Result<Vec<TableInfo>> {
        let object = format!("{catalog}.{schema}");
        let mut tables = Vec::new();
        let mut page_token: Option<String> = None;
        let mut pages = 1;
        loop {
            let mut query = vec![("catalog_name", catalog), ("schema_name", schema)];
            if let Some(token) = &page_token {
                query.push(("page_token", token));
            }
            let call = Call {
                what: "listing tables",
                object: &object,
            };
            let page: ListTablesResponse =
                self.get("/tables", &query, call).await?.ok_or_else(|| {
                    Error::Unity {
                        message: format!(
                            "schema {object} does not exist in Unity Catalog at {}; create it (POST /schemas) or choose another (UC_SCHEMA or the Delta table property lakemirror.unity.schema)",
                            self.url
                        ),
                        retryable: false,
                    }
                    .fixed_by(Setting::Schema)
                })?;
            tables.extend(page.tables);
            match page.next_page_token.filter(|t| !t.is_empty()) {
                Some(_) if pages == MAX_LIST_PAGES => return Err(self.too_many_pages(&object)),
                Some(next) => page_token = Some(next),
                None => return Ok(tables),
            }
            pages += 1;
        }
    }

    fn too_many_pages(&self, object: &str) -> Error {
        Error::Unity {
            message: format!(
                "Unity Catalog at {} lists more than {MAX_LIST_PAGES} pages of {object}; lakemirror reads no more",
                self.url
            ),
            retryable: false,
        }
    }

    /// Creates an external table. A table of that name that exists already is
    /// [`CreateOutcome::AlreadyExists`] (409: another registration won a race).
    pub async fn create_table(&self, table: &CreateTable) -> Result<CreateOutcome> {
        let full_name = table.full_name();
        let request = self
            .authorized(self.http.post(format!("{}/tables", self.api)))
            .json(table);
        let call = Call {
            what: "creating a table",
            object: &full_name,
        };
        let response = self.send(request, &call).await?;
        let status = response.status();
        if status == reqwest::StatusCode::CONFLICT {
            return Ok(CreateOutcome::AlreadyExists);
        }
        if status == reqwest::StatusCode::BAD_REQUEST {
            // Some servers answer a duplicate with 400 instead of 409: look before failing.
            let body = error_text(response).await;
            if self.get_table(&full_name).await?.is_some() {
                return Ok(CreateOutcome::AlreadyExists);
            }
            return Err(Error::Unity {
                message: format!(
                    "Unity Catalog at {} refused to create {full_name} over {} (400: {}). Check that the location lies inside an external location the server knows (with a storage credential) and that the names are valid there",
                    self.url,
                    table.storage_location,
                    brief(&body)
                ),
                retryable: false,
            });
        }
        self.check(response, &call).await?;
        Ok(CreateOutcome::Created)
    }

    /// Deletes a table; a table that is already gone is fine.
    pub async fn delete_table(&self, full_name: &str) -> Result<()> {
        let request = self.authorized(self.http.delete(format!(
            "{}/tables/{}",
            self.api,
            path_segment(full_name)
        )));
        let call = Call {
            what: "deleting a table",
            object: full_name,
        };
        let response = self.send(request, &call).await?;
        if response.status() == reqwest::StatusCode::NOT_FOUND {
            return Ok(());
        }
        self.check(response, &call).await.map(|_| ())
    }

    /// Read credentials for a table's storage, when the server vends them. None when it
    /// does not (no credential for the location, vending off, the endpoint missing, or the
    /// server failing to mint them): the caller reads with its own credentials then, and a
    /// missing permission shows up as a storage error naming the object. A refused token
    /// (401/403) is an error.
    pub async fn temporary_table_credentials(
        &self,
        table_id: &str,
        full_name: &str,
    ) -> Result<Option<VendedCredentials>> {
        let request = self
            .authorized(
                self.http
                    .post(format!("{}/temporary-table-credentials", self.api)),
            )
            .json(&serde_json::json!({ "table_id": table_id, "operation": "READ" }));
        let call = Call {
            what: "asking for temporary table credentials",
            object: full_name,
        };
        let response = self.send(request, &call).await?;
        let status = response.status();
        if !status.is_success()
            && !matches!(
                status,
                reqwest::StatusCode::UNAUTHORIZED | reqwest::StatusCode::FORBIDDEN
            )
        {
            let body = error_text(response).await;
            tracing::warn!(table = full_name, %status, body = brief(&body), "Unity Catalog vends no credentials for this table; reading with this process's own");
            return Ok(None);
        }
        let vended: TemporaryCredentials = self.parse(response, &call).await?;
        Ok(vended.aws_temp_credentials)
    }

    /// Every catalog's name (all pages).
    pub async fn list_catalogs(&self) -> Result<Vec<String>> {
        self.list_names(
            "/catalogs",
            &[],
            "catalogs",
            "listing catalogs",
            "the metastore",
        )
        .await
    }

    /// Every schema's name in `catalog` (all pages).
    pub async fn list_schemas(&self, catalog: &str) -> Result<Vec<String>> {
        self.list_names(
            "/schemas",
            &[("catalog_name", catalog)],
            "schemas",
            "listing schemas",
            catalog,
        )
        .await
    }

    /// The `name` of each item of a paged list (`{"<field>": [...], "next_page_token": …}`).
    async fn list_names(
        &self,
        path: &str,
        query: &[(&str, &str)],
        field: &str,
        what: &str,
        object: &str,
    ) -> Result<Vec<String>> {
        let mut names = Vec::new();
        let mut page_token: Option<String> = None;
        let mut pages = 1;
        loop {
            let mut query = query.to_vec();
            if let Some(token) = &page_token {
                query.push(("page_token", token));
            }
            // Typed: only the names are kept of a page, whatever else it holds.
            #[derive(Default, serde::Deserialize)]
            struct Named {
                #[serde(default)]
                name: Option<String>,
            }
            #[derive(Default, serde::Deserialize)]
            struct Page {
                #[serde(default)]
                catalogs: Vec<Named>,
                #[serde(default)]
                schemas: Vec<Named>,
                #[serde(default)]
                next_page_token: Option<String>,
            }
            let page: Page = self
                .get(path, &query, Call { what, object })
                .await?
                .unwrap_or_default();
            let items = match field {
                "catalogs" => page.catalogs,
                _ => page.schemas,
            };
            names.extend(items.into_iter().filter_map(|item| item.name));
            match page.next_page_token.filter(|t| !t.is_empty()) {
                Some(_) if pages == MAX_LIST_PAGES => return Err(self.too_many_pages(object)),
                Some(next) => page_token = Some(next),
                None => return Ok(names),
            }
            pages += 1;
        }
    }

    /// The commits the server ratified for table `table_id` stored at `table_uri`, by the
    /// managed-tables API (`GET /delta/preview/commits`, its JSON body as the spec has it),
    /// following its pages up to `max_pages`.
    pub async fn preview_commits(
        &self,
        table_id: &str,
        table_uri: &str,
        max_pages: usize,
    ) -> Result<PreviewAnswer> {
        let call = Call {
            what: "asking which commits it ratified of table id",
            object: table_id,
        };
        let mut answer = CommitsAnswer {
            commits: Vec::new(),
            latest_table_version: -1,
        };
        let mut start_version = 0;
        for _ in 0..max_pages {
            let request = self
                .authorized(self.http.get(format!("{}/delta/preview/commits", self.api)))
                .json(&serde_json::json!({
                    "table_id": table_id,
                    "table_uri": table_uri,
                    "start_version": start_version,
                }));
            let response = self.send(request, &call).await?;
            let status = response.status();
            if matches!(status.as_u16(), 404 | 405 | 501) {
                let body = error_text(response).await;
                // A route the server has answers with its JSON error; one it lacks does not.
                return Ok(match serde_json::from_str::<serde_json::Value>(&body) {
                    Ok(serde_json::Value::Object(_)) if status.as_u16() == 404 => {
                        PreviewAnswer::NoSuchTable(brief(&body))
                    }
                    _ => PreviewAnswer::NoRoute,
                });
            }
            let page: CommitsAnswer = self.parse(response, &call).await?;
            let newest_listed = page.commits.iter().map(|c| c.version).max();
            answer.latest_table_version = page.latest_table_version;
            answer.commits.extend(page.commits);
            match newest_listed {
                Some(newest) if newest < answer.latest_table_version => {
                    start_version = newest + 1;
                }
                _ => return Ok(PreviewAnswer::Answered(answer)),
            }
        }
        Err(Error::Unity {
            message: format!(
                "Unity Catalog at {} listed more than {max_pages} pages of unpublished commits of table id {table_id}; publish them (backfill) first",
                self.url
            ),
            retryable: false,
        })
    }

    /// `loadTable` of the UC Delta API for `catalog.schema.table`: the table's location and
    /// id, and for a managed table the commits the server ratified; None when it has no such
    /// table.
    pub async fn delta_load_table(&self, full_name: &str) -> Result<Option<DeltaLoadTable>> {
        let mut parts = full_name.splitn(3, '.');
        let (Some(catalog), Some(schema), Some(table)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(Error::Entry(format!(
                "{full_name} is not a catalog.schema.table name"
            )));
        };
        let path = format!(
            "/delta/v1/catalogs/{}/schemas/{}/tables/{}",
            path_segment(catalog),
            path_segment(schema),
            path_segment(table)
        );
        let call = Call {
            what: "loading the Delta table",
            object: full_name,
        };
        self.get(&path, &[], call).await
    }

    fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    async fn get<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, &str)],
        call: Call<'_>,
    ) -> Result<Option<T>> {
        let request = self
            .authorized(self.http.get(format!("{}{path}", self.api)))
            .query(query);
        let response = self.send(request, &call).await?;
        if response.status() == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        self.parse(response, &call).await.map(Some)
    }

    async fn send(
        &self,
        request: reqwest::RequestBuilder,
        call: &Call<'_>,
    ) -> Result<reqwest::Response> {
        request.send().await.map_err(|e| Error::Unity {
            message: format!(
                "cannot reach Unity Catalog at {} while {} {}: {}. Check UC_URL (the server's base URL, without {API_PATH}) and that the server is up and reachable from here",
                self.url,
                call.what,
                call.object,
                lakemirror_storage::with_causes(&e)
            ),
            retryable: true,
        })
    }

    async fn check(&self, response: reqwest::Response, call: &Call<'_>) -> Result<String> {
        let status = response.status();
        let what = format!("Unity Catalog's answer to {} {}", call.what, call.object);
        let body = match budget::read_response(&what, response).await {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(BodyError::TooLarge(e)) => {
                return Err(Error::Unity {
                    message: e.to_string(),
                    retryable: false,
                });
            }
            Err(BodyError::Read(_)) => String::new(),
        };
        if status.is_success() {
            return Ok(body);
        }
        let url = &self.url;
        let (what, object) = (call.what, call.object);
        let message = match status.as_u16() {
            401 => format!(
                "Unity Catalog at {url} refused the credentials while {what} {object} (401 Unauthorized: {}). Set UC_TOKEN (or UC_TOKEN_SECRET_ARN) to a valid token",
                brief(&body)
            ),
            403 => format!(
                "Unity Catalog at {url} denied {what} {object} (403 Forbidden: {}). Grant the token's principal the privilege it needs (e.g. USE CATALOG, USE SCHEMA, CREATE TABLE, or ownership of the table)",
                brief(&body)
            ),
            404 => format!(
                "Unity Catalog at {url} has no {object} ({what}: {})",
                brief(&body)
            ),
            300..=399 => format!(
                "Unity Catalog at {url} answered {status} (a redirect) while {what} {object}; lakemirror follows no redirect, so the token goes only where UC_URL says: set UC_URL to the address it redirects to"
            ),
            _ => format!(
                "Unity Catalog at {url} answered {status} while {what} {object}: {}",
                brief(&body)
            ),
        };
        let error = Error::Unity {
            message,
            retryable: status.is_server_error() || status.as_u16() == 429,
        };
        Err(match status.as_u16() {
            401 => error.fixed_by(Setting::Token),
            _ => error,
        })
    }

    async fn parse<T: DeserializeOwned>(
        &self,
        response: reqwest::Response,
        call: &Call<'_>,
    ) -> Result<T> {
        let body = self.check(response, call).await?;
        serde_json::from_str(&body).map_err(|e| Error::Unity {
            message: format!(
                "Unity Catalog at {} answered {} {} with something that is not the API's JSON ({e}): {}. Is UC_URL a Unity Catalog server?",
                self.url,
                call.what,
                call.object,
                brief(&body)
            ),
            retryable: false,
        })
    }
}

/// Pages of one listing (catalogs, schemas, tables) read at most.
pub const MAX_LIST_PAGES: usize = 100;

/// What `POST /tables` did.
#[derive(Debug, Clone, PartialEq)]
pub enum CreateOutcome {
    Created,
    /// 409: a table of that name exists (created by someone else in between).
    AlreadyExists,
}

/// The start of an error's body (at most 64 KiB of it: a message is cut to 300 characters
/// anyway), for messages and the route check.
async fn error_text(mut response: reqwest::Response) -> String {
    const MAX: usize = 64 * 1024;
    let mut body = Vec::new();
    while body.len() < MAX {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk[..chunk.len().min(MAX - body.len())]),
            Ok(None) | Err(_) => break,
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}

/// The start of a response body, on one line, for error messages.
fn brief(body: &str) -> String {
    let line: String = body
        .split_whitespace()
        .take(300)
        .collect::<Vec<_>>()
        .join(" ");
    if line.is_empty() {
        return "no details".into();
    }
    match line.char_indices().nth(300) {
        Some((end, _)) => format!("{}…", &line[..end]),
        None => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_http_only_to_this_machine() {
        for ok in [
            "https://uc.example.com",
            "http://127.0.0.1:8080",
            "http://localhost:8080/",
            "http://[::1]:1",
        ] {
            assert!(UnityCatalog::new(ok, None).is_ok(), "{ok}");
        }
        let err = UnityCatalog::new("http://uc.example.com", None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("https://"), "{err}");
        assert!(UnityCatalog::new("ftp://uc.example.com", None).is_err());
    }

    #[test]
    fn the_base_url_may_be_given_with_or_without_the_api_path() {
        for url in [
            "http://localhost:8080",
            "http://localhost:8080/",
            "http://localhost:8080/api/2.1/unity-catalog",
            "http://localhost:8080/api/2.1/unity-catalog/",
        ] {
            let uc = UnityCatalog::new(url, None).unwrap();
            assert_eq!(
                uc.api, "http://localhost:8080/api/2.1/unity-catalog",
                "{url}"
            );
        }
        assert!(UnityCatalog::new("localhost:8080", None).is_err());
        assert!(UnityCatalog::new("ftp://x", None).is_err());
    }

    #[test]
    fn full_names_are_one_path_path_segment() {
        assert_eq!(path_segment("main.gold.orders"), "main.gold.orders");
        assert_eq!(
            path_segment("main.gold.my table/x"),
            "main.gold.my%20table%2Fx"
        );
    }

    #[test]
    fn the_token_never_shows_in_debug_output() {
        let uc = UnityCatalog::new("https://h:1", Some("s3cr3t".into())).unwrap();
        assert!(!format!("{uc:?}").contains("s3cr3t"));
        let creds = VendedCredentials {
            access_key_id: "AKIA".into(),
            secret_access_key: "hidden".into(),
            session_token: Some("tok".into()),
        };
        let shown = format!("{creds:?}");
        assert!(
            !shown.contains("hidden") && !shown.contains("tok"),
            "{shown}"
        );
    }

    #[test]
    fn bodies_in_messages_are_one_short_line() {
        assert_eq!(brief(""), "no details");
        assert_eq!(brief("a\n  b"), "a b");
        assert!(brief(&"x".repeat(1000)).chars().count() <= 301);
    }
}
