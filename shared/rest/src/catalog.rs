//! An Iceberg REST catalog as lakemirror's [`Catalog`]: a new mirror is registered (its first
//! metadata file, written by lakemirror, keeps Delta's field IDs, which `createTable` would
//! renumber); every later version is a commit of requirements and updates
//! ([`lakemirror_iceberg::changes`]), and the server writes the metadata file. A failed requirement (409)
//! is a lost race, as a changed Glue `VersionId` is.

use std::collections::HashMap;
use std::time::Duration;

use lakemirror_iceberg::Error;
use lakemirror_iceberg::catalog::{
    Catalog, CatalogCommit, CatalogEntry, IcebergEntry, MAX_LISTING_PAGES, too_many_pages,
};
use lakemirror_iceberg::changes::{Changes, TableChange};
use lakemirror_runtime::Kind;
use lakemirror_storage::budget::{self, BodyError};
use lakemirror_storage::service_url::path_segment;
use lakemirror_storage::{IoCounters, with_causes};
use reqwest::{Method, StatusCode};
use tokio::sync::{Mutex, OnceCell};

use crate::auth::Auth;
use crate::config::{AuthSettings, RestCatalogSettings, checked_uri};

type Result<T> = std::result::Result<T, Error>;

/// An Iceberg REST catalog. A Glue database is a one-level namespace here.
#[derive(Debug)]
pub struct RestCatalog {
    uri: String,
    warehouse: Option<String>,
    auth: Auth,
    http: reqwest::Client,
    /// The base URL and prefix `/v1/config` gave, asked for on first use.
    endpoint: OnceCell<String>,
}

/// Where a catalog's AWS credentials and region come from, for SigV4.
pub struct AwsSigning {
    pub credentials: aws_credential_types::provider::SharedCredentialsProvider,
    pub region: Option<String>,
}

/// A server's answer. Its body holds its room in the work's memory share until the answer
/// is dropped; it is parsed into typed answers only (no JSON tree: an answer of
/// `[0,0,0,…]` would take 30 times its size).
struct Answer {
    status: StatusCode,
    body: bytes::Bytes,
    /// The setting holding the credential sent, named when the catalog refuses it.
    credential: &'static str,
}

/// The error a REST catalog answers: `{"error": {"message", "type"}}`.
#[derive(serde::Deserialize)]
struct ErrorAnswer {
    error: ErrorModel,
}

#[derive(serde::Deserialize)]
struct ErrorModel {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

impl Answer {
    /// The server's error, when it answers one.
    fn error_model(&self) -> Option<ErrorModel> {
        serde_json::from_slice::<ErrorAnswer>(&self.body)
            .ok()
            .map(|a| a.error)
    }

    /// The type of the server's error (`{"error": {"type"}}`), empty when it names none.
    fn error_type(&self) -> String {
        self.error_model().and_then(|e| e.kind).unwrap_or_default()
    }

    /// The server's error message (`{"error": {"message", "type"}}`), or the body's start.
    fn message(&self) -> String {
        if self.status.is_redirection() {
            return format!(
                "{}: a redirect, which lakemirror does not follow (credentials go only where REST_CATALOG_URI says): set REST_CATALOG_URI to the address it redirects to",
                self.status.as_u16()
            );
        }
        let refused = match self.status {
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                format!(
                    " (the catalog refused the credential: check {})",
                    self.credential
                )
            }
            _ => String::new(),
        };
        let message = match self.error_model() {
            Some(error) => format!(
                "{} {}: {}",
                self.status.as_u16(),
                error.kind.as_deref().unwrap_or("error"),
                error.message.as_deref().unwrap_or("")
            ),
            None => format!(
                "{}: {}",
                self.status.as_u16(),
                String::from_utf8_lossy(&self.body)
                    .chars()
                    .take(300)
                    .collect::<String>()
            ),
        };
        message + &refused
    }

    fn error(&self, operation: &'static str) -> Error {
        let status = self.status;
        Error::Catalog {
            operation,
            message: self.message(),
            retryable: status.is_server_error()
                || status == StatusCode::TOO_MANY_REQUESTS
                || status == StatusCode::REQUEST_TIMEOUT,
        }
    }

    fn metadata_location(&self, operation: &'static str) -> Result<String> {
        #[derive(serde::Deserialize)]
        struct Loaded {
            #[serde(rename = "metadata-location")]
            metadata_location: Option<String>,
        }
        let loaded: Loaded = serde_json::from_slice(&self.body)?;
        loaded.metadata_location.ok_or_else(|| Error::Catalog {
            operation,
            message: "the catalog's answer names no metadata-location".into(),
            retryable: false,
        })
    }
}

impl RestCatalog {
    /// A client for the catalog `settings` describe; `aws` signs requests when the settings
    /// ask for SigV4. Nothing is sent until the first call.
    pub fn new(
        settings: &RestCatalogSettings,
        aws: Option<AwsSigning>,
    ) -> crate::error::Result<Self> {
        use crate::error::Error as RestError;
        let auth = match &settings.auth {
            AuthSettings::None => Auth::None,
            AuthSettings::Bearer(token) => Auth::Bearer(token.clone()),
            AuthSettings::OAuth2(client) => Auth::OAuth2 {
                client: client.clone(),
                token: Mutex::new(None),
            },
            AuthSettings::SigV4 { service, region } => {
                let Some(aws) = aws else {
                    return Err(RestError::Auth(
                        "SigV4 needs the AWS configuration, which this entry point did not give"
                            .into(),
                    ));
                };
                let region = region.clone().or(aws.region).ok_or_else(|| {
                    RestError::setting(
                        "REST_CATALOG_SIGNING_REGION",
                        "no region to sign for: set it, or AWS_REGION",
                    )
                })?;
                Auth::SigV4 {
                    region,
                    service: service.clone(),
                    credentials: aws.credentials,
                }
            }
        };
        // No redirect is followed: a hop to another address (plain http elsewhere) would get
        // the token or the OAuth2 client secret past the https-or-loopback rule.
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(60))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| RestError::Unreachable(format!("HTTPS cannot be set up ({e})")))?;
        Ok(Self {
            uri: settings.uri.clone(),
            warehouse: settings.warehouse.clone(),
            auth,
            http,
            endpoint: OnceCell::new(),
        })
    }

    /// Sends a request, signing it in; an OAuth2 token the server refuses (401, or 419:
    /// expired) is fetched again once.
    async fn send(
        &self,
        method: Method,
        url: &str,
        body: Option<Vec<u8>>,
        counters: &IoCounters,
    ) -> Result<Answer> {
        let mut retried = false;
        loop {
            let payload = body.clone().unwrap_or_default();
            let headers = self
                .auth
                .headers(&self.http, method.as_str(), url, &payload)
                .await?;
            let mut request = self.http.request(method.clone(), url);
            for (name, value) in headers {
                request = request.header(name, value);
            }
            if body.is_some() {
                request = request
                    .header("content-type", "application/json")
                    .body(payload.clone());
            }
            // The causes too: reqwest's own text is "error sending request for url (…)",
            // the reason (connection refused, DNS, TLS) is in its sources.
            let unreachable = |e: reqwest::Error| {
                crate::error::Error::Unreachable(format!("{method} {url}: {}", with_causes(&e)))
            };
            let response = request.send().await.map_err(unreachable)?;
            let status = response.status();
            let bytes = match budget::read_response(&format!("{method} {url}"), response).await {
                Ok(bytes) => bytes,
                Err(BodyError::Read(e)) => return Err(unreachable(e).into()),
                Err(BodyError::TooLarge(e)) => return Err(e.into()),
            };
            counters.call(
                &format!("REST {method} {}", route_kind(url)),
                bytes.len(),
                payload.len(),
            );
            let refused = status == StatusCode::UNAUTHORIZED || status.as_u16() == 419;
            if refused && !retried && self.auth.refused().await {
                retried = true;
                continue;
            }
            return Ok(Answer {
                status,
                body: bytes,
                credential: self.auth.setting(),
            });
        }
    }

    /// `<uri>/v1/<prefix>/`, from the catalog's `/v1/config` (asked once).
    async fn endpoint(&self, counters: &IoCounters) -> Result<&str> {
        self.endpoint
            .get_or_try_init(|| async {
                let mut url = format!("{}/v1/config", self.uri);
                if let Some(warehouse) = &self.warehouse {
                    url.push_str(&format!(
                        "?warehouse={}",
                        path_segment(warehouse)
                    ));
                }
                let answer = self.send(Method::GET, &url, None, counters).await?;
                if !answer.status.is_success() {
                    let mut error = answer.error("reading the REST catalog's /v1/config");
                    if let Error::Catalog { message, .. } = &mut error {
                        message.push_str(&format!(" (REST_CATALOG_URI {}", self.uri));
                        if let Some(warehouse) = &self.warehouse {
                            message.push_str(&format!(", REST_CATALOG_WAREHOUSE {warehouse}"));
                        }
                        message.push(')');
                    }
                    return Err(error);
                }
                #[derive(serde::Deserialize)]
                struct Config {
                    #[serde(default)]
                    overrides: HashMap<String, serde_json::Value>,
                    #[serde(default)]
                    defaults: HashMap<String, serde_json::Value>,
                }
                let config: Config = serde_json::from_slice(&answer.body)?;
                let setting = |key: &str| {
                    [&config.overrides, &config.defaults]
                        .iter()
                        .find_map(|part| part.get(key)?.as_str())
                        .map(str::to_string)
                };
                // A catalog may move its clients to another base URL; the token goes along,
                // so the same rule holds as for REST_CATALOG_URI (https, or this machine).
                let base = match setting("uri") {
                    Some(moved) => checked_uri(&moved).map_err(|e| Error::Catalog {
                        operation: "reading the REST catalog's /v1/config",
                        message: format!("the catalog's config moves clients to {moved}, which lakemirror refuses: {e}"),
                        retryable: false,
                    })?,
                    None => self.uri.clone(),
                };
                Ok(match setting("prefix").filter(|p| !p.is_empty()) {
                    Some(prefix) => format!("{base}/v1/{}/", prefix.trim_matches('/')),
                    None => format!("{base}/v1/"),
                })
            })
            .await
            .map(String::as_str)
    }

    async fn namespace_url(&self, database: &str, counters: &IoCounters) -> Result<String> {
        Ok(format!(
            "{}namespaces/{}",
            self.endpoint(counters).await?,
            path_segment(database)
        ))
    }

    async fn table_url(&self, database: &str, name: &str, counters: &IoCounters) -> Result<String> {
        Ok(format!(
            "{}/tables/{}",
            self.namespace_url(database, counters).await?,
            path_segment(name)
        ))
    }

    /// The table's current metadata location, None when there is no such table.
    async fn load(
        &self,
        database: &str,
        name: &str,
        counters: &IoCounters,
    ) -> Result<Option<String>> {
        let url = self.table_url(database, name, counters).await?;
        let answer = self.send(Method::GET, &url, None, counters).await?;
        match answer.status {
            StatusCode::NOT_FOUND => Ok(None),
            s if s.is_success() => answer
                .metadata_location("loading a REST catalog table")
                .map(Some),
            _ => Err(answer.error("loading a REST catalog table")),
        }
    }

    /// Whether the namespace `database` exists (`GET …/namespaces/{ns}`).
    async fn namespace_exists(&self, database: &str, counters: &IoCounters) -> Result<bool> {
        let url = self.namespace_url(database, counters).await?;
        let answer = self.send(Method::GET, &url, None, counters).await?;
        match answer.status {
            StatusCode::NOT_FOUND => Ok(false),
            s if s.is_success() => Ok(true),
            _ => Err(answer.error("loading a REST catalog namespace")),
        }
    }

    /// Registers `metadata_location` as the new table `database.name`.
    async fn register(
        &self,
        commit: &CatalogCommit<'_>,
        location: &str,
        counters: &IoCounters,
    ) -> Result<String> {
        let url = format!(
            "{}/register",
            self.namespace_url(commit.database, counters).await?
        );
        let body = serde_json::to_vec(&serde_json::json!({
            "name": commit.name,
            "metadata-location": location,
        }))?;
        let answer = self.send(Method::POST, &url, Some(body), counters).await?;
        match answer.status {
            StatusCode::CONFLICT => Err(conflict(commit)),
            // A missing namespace, or a catalog without the register route: servers differ in
            // the type they name (rustberg says NoSuchTable for a missing namespace), so the
            // namespace is asked after.
            StatusCode::NOT_FOUND
                if answer.error_type().contains("NoSuchNamespace")
                    || !self.namespace_exists(commit.database, counters).await? =>
            {
                Err(Error::NoSuchDatabase(commit.database.to_string()))
            }
            StatusCode::NOT_FOUND => Err(Error::Catalog {
                operation: "registering a REST catalog table",
                message: format!(
                    "{} to POST {url}: the catalog has no register route (Iceberg REST's registerTable), so it cannot hold a mirror: lakemirror writes the metadata itself, to keep Delta's field IDs and files, and registers it. docs/rest-catalog.md lists which catalogs register tables; nothing was registered",
                    answer.message()
                ),
                retryable: false,
            }),
            s if s.is_success() => answer.metadata_location("registering a REST catalog table"),
            _ => Err(answer.error("registering a REST catalog table")),
        }
    }

    /// Sends one commit; the metadata location the server wrote.
    async fn send_commit(
        &self,
        commit: &CatalogCommit<'_>,
        change: &TableChange,
        counters: &IoCounters,
    ) -> Result<String> {
        let url = self
            .table_url(commit.database, commit.name, counters)
            .await?;
        let body = serde_json::to_vec(change)?;
        let answer = match self.send(Method::POST, &url, Some(body), counters).await {
            Ok(answer) => answer,
            // Sent, maybe applied: the server says which below.
            Err(e) if e.is_retryable() => Answer {
                status: StatusCode::GATEWAY_TIMEOUT,
                body: e.to_string().into_bytes().into(),
                credential: self.auth.setting(),
            },
            Err(e) => return Err(e),
        };
        match answer.status {
            // A requirement failed (someone else committed), or the table is gone since it
            // was read: a lost race; the sync reads again.
            StatusCode::CONFLICT | StatusCode::NOT_FOUND => Err(conflict(commit)),
            s if s.is_success() => answer.metadata_location("committing to a REST catalog table"),
            s if s.is_server_error() => {
                self.settle_unknown(commit, change, &answer, counters).await
            }
            _ => Err(answer.error("committing to a REST catalog table")),
        }
    }

    /// A commit whose outcome is unknown (5xx, no answer): it happened if `main` is now the
    /// snapshot it added; else nothing happened and the sync reads again.
    async fn settle_unknown(
        &self,
        commit: &CatalogCommit<'_>,
        change: &TableChange,
        answer: &Answer,
        counters: &IoCounters,
    ) -> Result<String> {
        let added = change.updates.iter().rev().find_map(|u| match u {
            iceberg::TableUpdate::AddSnapshot { snapshot } => Some(snapshot.snapshot_id()),
            _ => None,
        });
        tracing::warn!(table = %full(commit), answer = %answer.message(), "the REST catalog's commit outcome is unknown; reading the table to settle it");
        let url = self
            .table_url(commit.database, commit.name, counters)
            .await?;
        let loaded = self.send(Method::GET, &url, None, counters).await?;
        if !loaded.status.is_success() {
            return Err(answer.error("committing to a REST catalog table"));
        }
        #[derive(serde::Deserialize)]
        struct Current {
            #[serde(rename = "current-snapshot-id", default)]
            current_snapshot_id: Option<i64>,
        }
        #[derive(serde::Deserialize)]
        struct Table {
            metadata: Current,
        }
        let on_main = serde_json::from_slice::<Table>(&loaded.body)?
            .metadata
            .current_snapshot_id;
        match added {
            Some(id) if on_main == Some(id) => {
                loaded.metadata_location("committing to a REST catalog table")
            }
            Some(_) => Err(conflict(commit)),
            None => Err(answer.error("committing to a REST catalog table")),
        }
    }

    /// A table that cannot be updated into `commit`'s (its metadata is gone, or the mirror
    /// was rebuilt as a new table): dropped and registered anew. Not atomic: a reader between
    /// the two finds no table, and a crash between them leaves none (the next sync registers
    /// it).
    async fn replace(
        &self,
        commit: &CatalogCommit<'_>,
        location: &str,
        counters: &IoCounters,
    ) -> Result<String> {
        let read = commit.read.and_then(|r| r.version.clone());
        if self.load(commit.database, commit.name, counters).await? != read {
            return Err(conflict(commit));
        }
        tracing::warn!(table = %full(commit), "the REST catalog table is dropped and registered again: a new table (UUID) cannot be committed onto it");
        self.drop_table(commit.database, commit.name, counters)
            .await?;
        self.register(commit, location, counters).await
    }
}

fn full(commit: &CatalogCommit<'_>) -> String {
    format!("{}.{}", commit.database, commit.name)
}

/// A lost race on the commit's table.
fn conflict(commit: &CatalogCommit<'_>) -> Error {
    Error::CommitConflict(format!("REST catalog table {}", full(commit)))
}

#[async_trait::async_trait]
impl Catalog for RestCatalog {
    fn kind(&self) -> &'static str {
        "REST catalog"
    }

    async fn get_table(
        &self,
        database: &str,
        name: &str,
        counters: &IoCounters,
    ) -> Result<Option<CatalogEntry>> {
        Ok(self
            .load(database, name, counters)
            .await?
            .map(|location| CatalogEntry {
                parameters: HashMap::from([
                    ("table_type".to_string(), "ICEBERG".to_string()),
                    ("metadata_location".to_string(), location.clone()),
                ]),
                version: Some(location),
            }))
    }

    async fn commit_table(
        &self,
        commit: CatalogCommit<'_>,
        counters: &IoCounters,
    ) -> Result<Option<String>> {
        let location = commit.metadata_location.to_string();
        let changes = match (commit.read, &commit.changes) {
            (None, _) => return self.register(&commit, &location, counters).await.map(Some),
            (Some(_), Changes::Whole) => {
                return self.replace(&commit, &location, counters).await.map(Some);
            }
            (Some(_), Changes::Update(changes)) => changes,
        };
        let mut current = commit.read.and_then(|r| r.version.clone());
        for change in changes {
            current = Some(self.send_commit(&commit, change, counters).await?);
        }
        Ok(current)
    }

    async fn drop_table(&self, database: &str, name: &str, counters: &IoCounters) -> Result<()> {
        let url = format!(
            "{}?purgeRequested=false",
            self.table_url(database, name, counters).await?
        );
        let answer = self.send(Method::DELETE, &url, None, counters).await?;
        match answer.status {
            StatusCode::NOT_FOUND => Ok(()),
            s if s.is_success() => Ok(()),
            _ => Err(answer.error("dropping a REST catalog table")),
        }
    }

    async fn iceberg_tables(
        &self,
        database: &str,
        counters: &IoCounters,
    ) -> Result<Vec<IcebergEntry>> {
        #[derive(serde::Deserialize)]
        struct Identifier {
            name: String,
        }
        #[derive(serde::Deserialize)]
        struct Page {
            #[serde(default)]
            identifiers: Vec<Identifier>,
            #[serde(rename = "next-page-token", default)]
            next_page_token: Option<String>,
        }
        let base = format!("{}/tables", self.namespace_url(database, counters).await?);
        let mut names = Vec::new();
        let mut token: Option<String> = None;
        for page in 1.. {
            if page > MAX_LISTING_PAGES {
                return Err(too_many_pages(self.kind(), database));
            }
            let url = match &token {
                Some(t) => format!("{base}?pageToken={}", path_segment(t)),
                None => base.clone(),
            };
            let answer = self.send(Method::GET, &url, None, counters).await?;
            if answer.status == StatusCode::NOT_FOUND {
                return Err(Error::NoSuchDatabase(database.to_string()));
            }
            if !answer.status.is_success() {
                return Err(answer.error("listing a REST catalog namespace"));
            }
            let page: Page = serde_json::from_slice(&answer.body)?;
            names.extend(page.identifiers.into_iter().map(|i| i.name));
            match page.next_page_token.filter(|t| !t.is_empty()) {
                Some(next) => token = Some(next),
                None => break,
            }
        }
        let mut tables = Vec::with_capacity(names.len());
        for name in names {
            if let Some(metadata_location) = self.load(database, &name, counters).await? {
                tables.push(IcebergEntry {
                    name,
                    metadata_location,
                });
            }
        }
        Ok(tables)
    }
}

/// What a REST request is for, by its route: the table, its namespace's tables, the config.
fn route_kind(url: &str) -> &'static str {
    let path = url.split('?').next().unwrap_or(url);
    if path.ends_with("/v1/config") {
        "config"
    } else if path.ends_with("/register") {
        "register"
    } else if path.ends_with("/tables") {
        "tables"
    } else if path.contains("/tables/") {
        "table"
    } else {
        "other"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, body: &str) -> Answer {
        Answer {
            status: StatusCode::from_u16(status).unwrap(),
            body: bytes::Bytes::copy_from_slice(body.as_bytes()),
            credential: "REST_CATALOG_TOKEN",
        }
    }

    #[test]
    fn a_refused_credential_names_its_setting_and_a_redirect_names_the_uri() {
        let refused = answer(
            401,
            r#"{"error":{"type":"NotAuthorizedException","message":"bad token"}}"#,
        )
        .message();
        assert!(
            refused.contains("401 NotAuthorizedException: bad token")
                && refused.contains("check REST_CATALOG_TOKEN"),
            "{refused}"
        );
        let moved = answer(307, "").message();
        assert!(
            moved.contains("does not follow") && moved.contains("REST_CATALOG_URI"),
            "{moved}"
        );
        assert!(!answer(500, "boom").message().contains("credential"));
    }

    #[test]
    fn a_missing_namespace_is_told_from_a_missing_register_route() {
        let missing = r#"{"error":{"type":"NoSuchNamespaceException","message":"ns"}}"#;
        assert_eq!(
            answer(404, missing).error_type(),
            "NoSuchNamespaceException"
        );
        assert_eq!(answer(404, "Not Found").error_type(), "");
    }

    #[test]
    fn an_unreachable_catalog_names_the_settings_to_check() {
        let text = crate::error::Error::Unreachable(
            "GET http://127.0.0.1:9/v1/config: connection refused".into(),
        )
        .to_string();
        assert!(
            text.contains("connection refused") && text.contains("REST_CATALOG_URI"),
            "{text}"
        );
    }
}
