//! One AWS configuration for the whole process, loaded once (at a function's cold start, or
//! when the CLI starts): every client (Glue, SQS, Secrets Manager) and the S3 object stores
//! take their credentials, region and endpoint from the same `aws_config::SdkConfig`. So a
//! named profile, SSO, `credential_process`, web identity, container and instance
//! credentials all work for S3 too, and `AWS_EC2_METADATA_DISABLED` is honoured everywhere.
//!
//! S3 stays on `object_store` (ranged GETs, listings and conditional PUTs; it also carries
//! `file://` tables and the Parquet reads); only its credentials come from the SDK's chain.
//! The measured reasons (aws-sdk-s3: same requests and time, +256 s of build) are in README,
//! "Dependencies", and docs/dependencies.md.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use lakemirror_iceberg::catalog::Catalog;
use lakemirror_rest::{AwsSigning, RestCatalog, RestCatalogSettings};
use lakemirror_runtime::crash;
use lakemirror_runtime::settings::Variable;
use lakemirror_storage::uri::table_prefixes;
use lakemirror_storage::{MemoryShare, ObjectStores, S3Options, SecretSource};
use object_store::CredentialProvider;
use object_store::aws::AwsCredential;

use crate::{GlueCatalog, SecretsManager};

/// The REST catalog's variables, which [`catalog`] reads (declared beside
/// `RestCatalogSettings`).
pub use lakemirror_rest::config as rest;

/// `MEMORY_SIZE`: the function's memory, which sizes the process's memory budget.
pub const MEMORY_SIZE: Variable = Variable {
    name: "MEMORY_SIZE",
    default: None,
    values: &[],
    help: "The function's memory in MB; three quarters of it are the process's memory budget, shared by the tables a batch syncs at once. Unset: the memory Lambda gives the function (AWS_LAMBDA_FUNCTION_MEMORY_SIZE); the CLI's default is this machine's memory.",
};

/// `AWS_LAMBDA_FUNCTION_MEMORY_SIZE`, set by Lambda: the budget's size when `MEMORY_SIZE` is not.
pub const AWS_LAMBDA_FUNCTION_MEMORY_SIZE: Variable = Variable {
    name: "AWS_LAMBDA_FUNCTION_MEMORY_SIZE",
    default: None,
    values: &[],
    help: "The function's memory in MB, as Lambda sets it.",
};

/// `AWS_ENDPOINT_URL_S3`: another S3 endpoint (LocalStack, moto).
pub const AWS_ENDPOINT_URL_S3: Variable = Variable {
    name: "AWS_ENDPOINT_URL_S3",
    default: None,
    values: &[],
    help: "The S3 endpoint of a local stand-in (LocalStack, moto); unset: AWS_ENDPOINT_URL, else S3's own.",
};

/// `AWS_ALLOW_HTTP`: S3 over plain HTTP.
pub const AWS_ALLOW_HTTP: Variable = Variable {
    name: "AWS_ALLOW_HTTP",
    default: Some("false"),
    values: &["true", "false"],
    help: "true: S3 over plain HTTP (a local stand-in); an http:// endpoint allows it too.",
};

/// `ALLOWED_EXTERNAL_ROOTS`: where a table's log may name files besides its own folder.
pub const ALLOWED_EXTERNAL_ROOTS: Variable = Variable {
    name: "ALLOWED_EXTERNAL_ROOTS",
    default: None,
    values: &[],
    help: "Comma-separated s3://bucket/prefix roots whose data files and deletion vectors a table's log may name besides its own folder (shallow clones); empty: any path outside a table's root is refused.",
};

/// `REST_CATALOG_TOKEN_SECRET_ARN`: the REST catalog's bearer token, kept in Secrets Manager.
pub const REST_CATALOG_TOKEN_SECRET_ARN: Variable = Variable {
    name: "REST_CATALOG_TOKEN_SECRET_ARN",
    default: None,
    values: &[],
    help: "Secrets Manager secret with the REST catalog's bearer token (plain or JSON token), read at cold start.",
};

/// `REST_CATALOG_CREDENTIAL_SECRET_ARN`: the REST catalog's OAuth2 client credentials, kept
/// in Secrets Manager.
pub const REST_CATALOG_CREDENTIAL_SECRET_ARN: Variable = Variable {
    name: "REST_CATALOG_CREDENTIAL_SECRET_ARN",
    default: None,
    values: &[],
    help: "Secrets Manager secret with the REST catalog's OAuth2 client credentials client_id:client_secret (plain or JSON credential), read at cold start.",
};

/// The process's AWS configuration, from the standard places: environment (`AWS_PROFILE`,
/// `AWS_REGION`, `AWS_ENDPOINT_URL`, …), shared config and credentials files, SSO, web
/// identity, container and instance metadata. Load it once per process.
pub async fn load() -> aws_config::SdkConfig {
    loader().load().await
}

/// `aws_config::defaults` with the HTTPS client every SDK client here uses: hyper and rustls
/// on ring, with the system's root certificates. The SDK's own default would be the same on
/// aws-lc, a C library that a cold build compiles besides ring (docs/dependencies.md); the
/// workspace turns that default off, so every configuration must come from here.
pub fn loader() -> aws_config::ConfigLoader {
    use aws_smithy_http_client::tls::{Provider, rustls_provider::CryptoMode};
    let https = aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https();
    aws_config::defaults(aws_config::BehaviorVersion::latest()).http_client(https)
}

/// A configuration that looks nothing up, for tests: a fixed region and static credentials
/// (the instance metadata service is never asked), and `endpoint`, a local stand-in's, when
/// given.
#[cfg(any(test, feature = "test-config"))]
pub async fn offline(endpoint: Option<&str>) -> aws_config::SdkConfig {
    let loader = loader()
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_credential_types::Credentials::new(
            "testing", "testing", None, None, "test",
        ));
    match endpoint {
        Some(url) => loader.endpoint_url(url),
        None => loader,
    }
    .load()
    .await
}

/// The catalog mirrors go to: the Iceberg REST catalog the `REST_CATALOG_*` settings name
/// (signed with `config`'s credentials when they ask for SigV4), else Glue. A token or client
/// credentials kept in Secrets Manager (`REST_CATALOG_TOKEN_SECRET_ARN`,
/// `REST_CATALOG_CREDENTIAL_SECRET_ARN`: plain, or JSON with `token` / `credential`) are read
/// here, once: a rotated secret takes effect at the next cold start.
pub async fn catalog(
    config: &aws_config::SdkConfig,
    setting: &dyn Fn(&str) -> Option<String>,
) -> Result<Arc<dyn Catalog>, lakemirror_rest::Error> {
    use lakemirror_rest::config::{REST_CATALOG_CREDENTIAL, REST_CATALOG_TOKEN};
    let mut from_secrets = std::collections::HashMap::new();
    for (arn_setting, field, name) in [
        (
            &REST_CATALOG_TOKEN_SECRET_ARN,
            "token",
            REST_CATALOG_TOKEN.name,
        ),
        (
            &REST_CATALOG_CREDENTIAL_SECRET_ARN,
            "credential",
            REST_CATALOG_CREDENTIAL.name,
        ),
    ] {
        if let Some(arn) = arn_setting.value(setting) {
            let what = format!("the REST catalog's {field} secret ({})", arn_setting.name);
            let value = SecretsManager::new(config)
                .secret(&arn, field, &what)
                .await
                .map_err(|e| lakemirror_rest::Error::Auth(e.to_string()))?;
            from_secrets.insert(name, value);
        }
    }
    let merged = |name: &str| from_secrets.get(name).cloned().or_else(|| setting(name));
    let Some(rest) = RestCatalogSettings::from_settings(&merged)? else {
        return Ok(Arc::new(GlueCatalog::new(config)));
    };
    let signing = config.credentials_provider().map(|credentials| AwsSigning {
        credentials,
        region: config.region().map(|r| r.as_ref().to_string()),
    });
    tracing::info!(catalog = ?rest, "mirroring into an Iceberg REST catalog");
    Ok(Arc::new(RestCatalog::new(&rest, signing)?))
}

/// The object stores of the process: S3 as `config` says (its credentials chain, region and
/// endpoint), with `AWS_ENDPOINT_URL_S3`, `AWS_ALLOW_HTTP` and `ALLOWED_EXTERNAL_ROOTS` (the
/// roots besides its own whose files a table's log may name) looked up in `setting` (the
/// process's environment).
pub fn object_stores(
    config: &aws_config::SdkConfig,
    setting: &dyn Fn(&str) -> Option<String>,
) -> ObjectStores {
    let endpoint = AWS_ENDPOINT_URL_S3
        .value(setting)
        .or_else(|| config.endpoint_url().map(str::to_string));
    // Read whatever the endpoint: what a process reads must not depend on its environment.
    let allowed = AWS_ALLOW_HTTP
        .value(setting)
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    let allow_http = allowed
        || endpoint
            .as_deref()
            .is_some_and(|e| e.starts_with("http://"));
    ObjectStores::s3(S3Options {
        region: config.region().map(|r| r.as_ref().to_string()),
        endpoint,
        allow_http,
        credentials: s3_credentials(config).map(|c| c as lakemirror_storage::S3CredentialProvider),
    })
    .with_external_roots(table_prefixes(
        ALLOWED_EXTERNAL_ROOTS.value(setting).as_deref(),
    ))
}

/// What a function's process takes from its environment before the function is built: the
/// crash point a test arms ([`crash::CRASH_AT`]) and the memory its budget is sized by
/// ([`memory_mb`]). Read apart from [`ProcessSettings::install`], which changes the process,
/// so a test can read them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessSettings {
    pub crash_at: Option<String>,
    pub memory_mb: Option<u64>,
}

impl ProcessSettings {
    /// The settings `setting` (the process's environment) gives.
    pub fn from_settings(setting: &dyn Fn(&str) -> Option<String>) -> Result<Self, String> {
        Ok(Self {
            crash_at: crash::CRASH_AT.value(setting),
            memory_mb: memory_mb(setting)?,
        })
    }

    /// Arms the crash point and installs the process's memory budget
    /// ([`lakemirror_storage::budget`]); without a memory, reads are bounded only by the
    /// largest object.
    pub fn install(self) {
        crash::arm(self.crash_at);
        if let Some(mb) = self.memory_mb {
            lakemirror_storage::budget::install(MemoryShare::for_memory_mb(mb));
        }
    }
}

/// The function's memory in MB: `MEMORY_SIZE` (the template sets it from `MemorySize`), else
/// the memory Lambda gives the function (`AWS_LAMBDA_FUNCTION_MEMORY_SIZE`); None: neither.
pub fn memory_mb(setting: &dyn Fn(&str) -> Option<String>) -> Result<Option<u64>, String> {
    let Some(mb) = MEMORY_SIZE
        .value(setting)
        .or_else(|| AWS_LAMBDA_FUNCTION_MEMORY_SIZE.value(setting))
    else {
        return Ok(None);
    };
    mb.trim().parse().map(Some).map_err(|_| {
        format!("MEMORY_SIZE must be the function's memory in MB (a whole number), not {mb:?}")
    })
}

/// The SDK's credentials for `object_store`, refreshed a few minutes before they expire.
fn s3_credentials(config: &aws_config::SdkConfig) -> Option<Arc<SdkCredentials>> {
    config.credentials_provider().map(|provider| {
        Arc::new(SdkCredentials {
            provider,
            cached: tokio::sync::Mutex::new(None),
        })
    })
}

/// Credentials from the SDK's provider chain, as `object_store` asks for them.
#[derive(Debug)]
pub struct SdkCredentials {
    provider: SharedCredentialsProvider,
    cached: tokio::sync::Mutex<Option<(Arc<AwsCredential>, Option<SystemTime>)>>,
}

/// Credentials are fetched again this long before they expire.
const REFRESH_BEFORE_EXPIRY: Duration = Duration::from_secs(300);

#[async_trait::async_trait]
impl CredentialProvider for SdkCredentials {
    type Credential = AwsCredential;

    async fn get_credential(&self) -> object_store::Result<Arc<AwsCredential>> {
        let mut cached = self.cached.lock().await;
        if let Some((credential, expiry)) = cached.as_ref()
            && expiry.is_none_or(|e| e > SystemTime::now() + REFRESH_BEFORE_EXPIRY)
        {
            return Ok(credential.clone());
        }
        let fresh = self.provider.provide_credentials().await.map_err(|e| {
            object_store::Error::Generic {
                store: "S3",
                source: format!(
                    "no AWS credentials for S3: {}",
                    aws_sdk_glue::error::DisplayErrorContext(&e)
                )
                .into(),
            }
        })?;
        let credential = Arc::new(AwsCredential {
            key_id: fresh.access_key_id().to_string(),
            secret_key: fresh.secret_access_key().to_string(),
            token: fresh.session_token().map(str::to_string),
        });
        *cached = Some((credential.clone(), fresh.expiry()));
        Ok(credential)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The workspace turns the SDK's default HTTPS client off: a configuration without one
    /// would build, then fail every call with "no HTTP client".
    #[tokio::test]
    async fn the_configuration_carries_an_https_client() {
        let config = offline(None).await;
        assert!(config.http_client().is_some());
    }
}
