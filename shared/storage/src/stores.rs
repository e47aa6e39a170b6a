//! Opening a table's store: S3 (any endpoint, e.g. moto) or the local file system, each S3
//! bucket's client built once per process and shared by every table in it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use object_store::ObjectStore;
use object_store::aws::{AmazonS3Builder, AwsCredential};
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;

use crate::counters::IoCounters;
use crate::credentials::VendedCredentials;
use crate::error::{Error, Result};
use crate::table::TableStorage;

/// Credentials for S3 as `object_store` asks for them (lakemirror-aws hands in the AWS
/// SDK's provider chain).
pub type S3CredentialProvider =
    Arc<dyn object_store::CredentialProvider<Credential = AwsCredential>>;

/// How S3 is reached, from the process's AWS configuration (built once, at a function's cold
/// start or when the CLI starts: see lakemirror-aws).
#[derive(Clone, Default)]
pub struct S3Options {
    pub region: Option<String>,
    /// `AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL`: a local S3 such as moto or LocalStack.
    pub endpoint: Option<String>,
    /// Whether the endpoint may be plain HTTP (a loopback stand-in).
    pub allow_http: bool,
    /// None: no credentials (anonymous requests).
    pub credentials: Option<S3CredentialProvider>,
}

impl std::fmt::Debug for S3Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Options")
            .field("region", &self.region)
            .field("endpoint", &self.endpoint)
            .field("allow_http", &self.allow_http)
            .field(
                "credentials",
                &self.credentials.as_ref().map(|_| "provider"),
            )
            .finish()
    }
}

/// Where tables are opened: the seam every reader and writer of objects goes through. Built
/// once per process and shared (cloning shares the same clients).
#[derive(Clone, Debug)]
pub struct ObjectStores {
    inner: Arc<Inner>,
    /// `ALLOWED_EXTERNAL_ROOTS`: every table opened may read data files below these too.
    external_roots: Arc<[String]>,
}

#[derive(Debug)]
struct Inner {
    backend: Backend,
    /// One store per S3 bucket.
    buckets: Mutex<HashMap<String, Arc<dyn ObjectStore>>>,
}

#[derive(Debug)]
enum Backend {
    S3(S3Options),
    /// Every bucket an empty in-memory store of its own (tests).
    InMemory,
}

impl ObjectStores {
    /// S3 reached as `options` say; local paths on the local file system.
    pub fn s3(options: S3Options) -> Self {
        Self::with(Backend::S3(options))
    }

    /// Every `s3://` bucket an in-memory store (object_store's `InMemory`), created empty on
    /// first use and kept for the life of this value; local paths on the local file system.
    pub fn in_memory() -> Self {
        Self::with(Backend::InMemory)
    }

    fn with(backend: Backend) -> Self {
        Self {
            inner: Arc::new(Inner {
                backend,
                buckets: Mutex::default(),
            }),
            external_roots: Arc::new([]),
        }
    }

    /// The same stores, each table opened reading data files and deletion vectors below
    /// `roots` as well as its own (`ALLOWED_EXTERNAL_ROOTS`: shallow clones' sources).
    pub fn with_external_roots(mut self, roots: Vec<String>) -> Self {
        self.external_roots = roots.into();
        self
    }

    /// Opens the table root `uri`: `s3://bucket/prefix` (`s3a://` too), `file:///abs/path` or
    /// a local path.
    pub fn open(&self, uri: &str, counters: Arc<IoCounters>) -> Result<TableStorage> {
        self.open_with_credentials(uri, counters, None)
    }

    /// As [`ObjectStores::open`], reading S3 with `credentials` (vended for this one table by
    /// a catalog) instead of the process's own when given.
    pub fn open_with_credentials(
        &self,
        uri: &str,
        counters: Arc<IoCounters>,
        credentials: Option<&VendedCredentials>,
    ) -> Result<TableStorage> {
        let uri = uri.trim_end_matches('/');
        if let Some(rest) = uri
            .strip_prefix("s3://")
            .or_else(|| uri.strip_prefix("s3a://"))
        {
            let bucket = rest.split('/').next().unwrap_or_default();
            if bucket.is_empty() {
                return Err(Error::location(
                    uri,
                    "names no bucket; use s3://bucket/path",
                ));
            }
            let store = self.bucket(bucket, credentials)?;
            return Ok(
                TableStorage::from_store(store, &format!("s3://{rest}"), counters)?
                    .with_external_roots(&self.external_roots),
            );
        }
        let local = match uri.strip_prefix("file://") {
            Some(path) => std::path::PathBuf::from(path),
            None if uri.contains("://") => {
                return Err(Error::location(
                    uri,
                    "is not supported: only s3:// URIs and local paths are",
                ));
            }
            None => std::path::absolute(uri)
                .map_err(|e| Error::location(uri, format!("is not a usable path: {e}")))?,
        };
        let path = lexically_normal(&local)
            .to_string_lossy()
            .trim_end_matches('/')
            .to_string();
        Ok(TableStorage::from_store(
            Arc::new(LocalFileSystem::new()),
            &format!("file://{path}"),
            counters,
        )?
        .with_external_roots(&self.external_roots))
    }

    /// The store of one bucket: shared, unless `credentials` are vended for one table.
    fn bucket(
        &self,
        bucket: &str,
        credentials: Option<&VendedCredentials>,
    ) -> Result<Arc<dyn ObjectStore>> {
        let mut buckets = self
            .inner
            .buckets
            .lock()
            .map_err(|_| Error::location(bucket, "the store cache was poisoned by a panic"))?;
        let options = match &self.inner.backend {
            Backend::InMemory => {
                let store = buckets
                    .entry(bucket.to_string())
                    .or_insert_with(|| Arc::new(InMemory::new()));
                return Ok(store.clone());
            }
            Backend::S3(options) => options,
        };
        if credentials.is_none()
            && let Some(store) = buckets.get(bucket)
        {
            return Ok(store.clone());
        }
        let mut builder = AmazonS3Builder::new()
            .with_bucket_name(bucket)
            .with_allow_http(options.allow_http);
        if let Some(region) = &options.region {
            builder = builder.with_region(region);
        }
        if let Some(endpoint) = &options.endpoint {
            builder = builder.with_endpoint(endpoint);
        }
        builder = match (credentials, &options.credentials) {
            (Some(vended), _) => {
                let mut builder = builder
                    .with_access_key_id(&vended.access_key_id)
                    .with_secret_access_key(&vended.secret_access_key);
                if let Some(token) = &vended.session_token {
                    builder = builder.with_token(token);
                }
                builder
            }
            (None, Some(chain)) => builder.with_credentials(chain.clone()),
            (None, None) => builder.with_skip_signature(true),
        };
        let store: Arc<dyn ObjectStore> = Arc::new(builder.build().map_err(|e| {
            Error::location(format!("s3://{bucket}"), format!("cannot be opened: {e}"))
        })?);
        if credentials.is_none() {
            buckets.insert(bucket.to_string(), store.clone());
        }
        Ok(store)
    }
}

/// `path` without `.` and `..` segments (`/work/main/../t` is `/work/t`), as the shell would
/// resolve it; no link is followed. A table root never holds such segments, so each of its
/// files has one location.
fn lexically_normal(path: &std::path::Path) -> std::path::PathBuf {
    use std::path::Component;
    let mut normal = std::path::PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                normal.pop();
            }
            other => normal.push(other.as_os_str()),
        }
    }
    normal
}
