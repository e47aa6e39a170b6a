//! How requests to a REST catalog prove who sends them: a bearer token, a token from an
//! OAuth2 client-credentials exchange (refreshed before it expires and when refused), or an
//! AWS SigV4 signature (Glue's and S3 Tables' Iceberg endpoints) with the SDK's signer.

use lakemirror_storage::budget::{self, BodyError};
use std::time::{Duration, Instant, SystemTime};

use aws_credential_types::Credentials;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_sigv4::http_request::{
    PayloadChecksumKind, SignableBody, SignableRequest, SigningSettings, sign,
};
use tokio::sync::Mutex;

use crate::config::ClientCredentials;
use crate::error::{Error, Result};

/// A token is fetched again this long before it expires.
const REFRESH_BEFORE_EXPIRY: Duration = Duration::from_secs(60);

/// The authentication a [`RestCatalog`](crate::RestCatalog) sends.
pub enum Auth {
    /// Nothing (a catalog on this machine without auth).
    None,
    /// `Authorization: Bearer <token>` (`REST_CATALOG_TOKEN`).
    Bearer(String),
    /// OAuth2 client credentials exchanged for a bearer token, held with its expiry.
    OAuth2 {
        client: ClientCredentials,
        token: Mutex<Option<(String, Option<Instant>)>>,
    },
    /// AWS SigV4 with the process's AWS credentials (`REST_CATALOG_SIGNING_NAME`, e.g. glue).
    SigV4 {
        region: String,
        service: String,
        credentials: SharedCredentialsProvider,
    },
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Auth::None => f.write_str("None"),
            Auth::Bearer(_) => f.write_str("Bearer(***)"),
            Auth::OAuth2 { client, .. } => write!(
                f,
                "OAuth2 {{ token_uri: {}, client_id: {} }}",
                client.token_uri, client.client_id
            ),
            Auth::SigV4 {
                region, service, ..
            } => write!(f, "SigV4 {{ region: {region}, service: {service} }}"),
        }
    }
}

#[derive(serde::Deserialize)]
struct TokenResponse {
    access_token: String,
    #[serde(default)]
    expires_in: Option<u64>,
}

impl Auth {
    /// The setting that holds this credential, for a message when the catalog refuses it.
    pub(crate) fn setting(&self) -> &'static str {
        match self {
            Auth::None => {
                "no credential is set: give REST_CATALOG_TOKEN, REST_CATALOG_CREDENTIAL or REST_CATALOG_SIGNING_NAME"
            }
            Auth::Bearer(_) => "REST_CATALOG_TOKEN",
            Auth::OAuth2 { .. } => "REST_CATALOG_CREDENTIAL (and REST_CATALOG_SCOPE)",
            Auth::SigV4 { .. } => {
                "REST_CATALOG_SIGNING_NAME and the function's AWS role (its permissions on the catalog)"
            }
        }
    }

    /// The headers a request of `method` to `url` with `body` carries.
    pub(crate) async fn headers(
        &self,
        http: &reqwest::Client,
        method: &str,
        url: &str,
        body: &[u8],
    ) -> Result<Vec<(String, String)>> {
        match self {
            Auth::None => Ok(Vec::new()),
            Auth::Bearer(token) => Ok(vec![bearer(token)]),
            Auth::OAuth2 { .. } => Ok(vec![bearer(&self.oauth2_token(http).await?)]),
            Auth::SigV4 {
                region,
                service,
                credentials,
            } => {
                let credentials = credentials.provide_credentials().await.map_err(|e| {
                    Error::Auth(format!(
                        "no AWS credentials to sign REST catalog requests with ({e}); give the function a role, or set AWS_PROFILE / AWS_ACCESS_KEY_ID"
                    ))
                })?;
                sigv4_headers(
                    method,
                    url,
                    body,
                    &credentials,
                    region,
                    service,
                    SystemTime::now(),
                )
            }
        }
    }

    /// Forgets the OAuth2 token (the catalog refused it: 401, or 419 for expired); the
    /// next request fetches a new one. Whether there was one to forget.
    pub(crate) async fn refused(&self) -> bool {
        match self {
            Auth::OAuth2 { token, .. } => token.lock().await.take().is_some(),
            _ => false,
        }
    }

    async fn oauth2_token(&self, http: &reqwest::Client) -> Result<String> {
        let Auth::OAuth2 { client, token } = self else {
            return Err(Error::Auth("not an OAuth2 catalog".into()));
        };
        let ClientCredentials {
            token_uri,
            client_id,
            client_secret,
            scope,
        } = client;
        let mut held = token.lock().await;
        if let Some((value, expires)) = held.as_ref()
            && expires.is_none_or(|at| Instant::now() + REFRESH_BEFORE_EXPIRY < at)
        {
            return Ok(value.clone());
        }
        let form = [
            ("grant_type", "client_credentials"),
            ("client_id", client_id.as_str()),
            ("client_secret", client_secret.as_str()),
            ("scope", scope.as_str()),
        ];
        let response = http
            .post(token_uri)
            .form(&form)
            .send()
            .await
            .map_err(|e| Error::Unreachable(format!("{token_uri}: {e}")))?;
        let status = response.status();
        let text = match budget::read_response(token_uri, response).await {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(BodyError::TooLarge(e)) => return Err(Error::Auth(e.to_string())),
            Err(BodyError::Read(_)) => String::new(),
        };
        if status.is_redirection() {
            return Err(Error::Auth(format!(
                "the token endpoint {token_uri} answered {status} (a redirect); lakemirror follows no redirect, so the client secret goes only where REST_CATALOG_OAUTH2_SERVER_URI says: set it to the address the endpoint redirects to"
            )));
        }
        if !status.is_success() {
            return Err(Error::Auth(format!(
                "the token endpoint {token_uri} refused client {client_id} ({status}: {}); check REST_CATALOG_CREDENTIAL and REST_CATALOG_SCOPE",
                text.chars().take(300).collect::<String>()
            )));
        }
        let answer: TokenResponse = serde_json::from_str(&text).map_err(|e| {
            Error::Auth(format!(
                "the token endpoint {token_uri} answered no access_token ({e})"
            ))
        })?;
        let expires = answer
            .expires_in
            .map(|s| Instant::now() + Duration::from_secs(s));
        *held = Some((answer.access_token.clone(), expires));
        Ok(answer.access_token)
    }
}

fn bearer(token: &str) -> (String, String) {
    ("authorization".into(), format!("Bearer {token}"))
}

/// The SigV4 headers (`authorization`, `x-amz-date`, `x-amz-content-sha256`, and
/// `x-amz-security-token` for temporary credentials) of a request, signed at `time`. Like
/// Java's and pyiceberg's REST signers, the payload hash is sent as a header.
pub fn sigv4_headers(
    method: &str,
    url: &str,
    body: &[u8],
    credentials: &Credentials,
    region: &str,
    service: &str,
    time: SystemTime,
) -> Result<Vec<(String, String)>> {
    let parsed = url::Url::parse(url).map_err(|e| Error::Auth(format!("{url}: {e}")))?;
    let host = match (parsed.host_str(), parsed.port()) {
        (Some(host), Some(port)) => format!("{host}:{port}"),
        (Some(host), None) => host.to_string(),
        (None, _) => return Err(Error::Auth(format!("{url} has no host to sign for"))),
    };
    let mut settings = SigningSettings::default();
    settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    let identity = credentials.clone().into();
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(time)
        .settings(settings)
        .build()
        .map_err(|e| Error::Auth(format!("SigV4: {e}")))?
        .into();
    let headers = [("host", host.as_str())];
    let request = SignableRequest::new(method, url, headers.into_iter(), SignableBody::Bytes(body))
        .map_err(|e| Error::Auth(format!("SigV4 cannot sign {url}: {e}")))?;
    let (instructions, _) = sign(request, &params)
        .map_err(|e| Error::Auth(format!("SigV4 cannot sign {url}: {e}")))?
        .into_parts();
    let (signed, _) = instructions.into_parts();
    Ok(signed
        .into_iter()
        .map(|h| (h.name().to_string(), h.value().to_string()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example_credentials() -> Credentials {
        Credentials::new(
            "AKIDEXAMPLE",
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            None,
            None,
            "test",
        )
    }

    fn at(seconds: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(seconds)
    }

    fn header<'a>(headers: &'a [(String, String)], name: &str) -> &'a str {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("no {name} in {headers:?}"))
    }

    /// The official SigV4 suite's `post-vanilla` (aws-signing-test-suite/v4/post-vanilla in
    /// the aws-sigv4 crate), with the payload hash as a header as REST signers send it: the
    /// same request, `x-amz-content-sha256` signed too. The expected signature was computed
    /// with botocore's SigV4Auth (what pyiceberg signs with) from the same inputs.
    #[test]
    fn signs_as_botocore_does() {
        let headers = sigv4_headers(
            "POST",
            "https://example.amazonaws.com/",
            b"",
            &example_credentials(),
            "us-east-1",
            "service",
            at(1_440_938_160), // 2015-08-30T12:36:00Z
        )
        .unwrap();
        assert_eq!(header(&headers, "x-amz-date"), "20150830T123600Z");
        assert_eq!(
            header(&headers, "x-amz-content-sha256"),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            header(&headers, "authorization"),
            format!(
                "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature={}",
                BOTOCORE_POST_VANILLA
            )
        );
    }

    /// botocore 1.x `SigV4Auth(Credentials("AKIDEXAMPLE", secret), "service", "us-east-1")`
    /// over `POST https://example.amazonaws.com/` with headers `X-Amz-Content-SHA256`
    /// (the empty body's hash) at 2015-08-30T12:36:00Z: tests/rig/sigv4_vector.py prints it.
    const BOTOCORE_POST_VANILLA: &str =
        "3ad5e249949a59b862eedd9f1bf1ece4693c3042bf860ef5e3351b8925316f98";

    #[test]
    fn a_commit_to_glue_is_signed_for_glue_with_its_body() {
        let url = "https://glue.us-east-1.amazonaws.com/iceberg/v1/catalogs/123456789012/namespaces/db/tables/t";
        let body = br#"{"requirements":[],"updates":[]}"#;
        let a = sigv4_headers(
            "POST",
            url,
            body,
            &example_credentials(),
            "us-east-1",
            "glue",
            at(1_700_000_000),
        )
        .unwrap();
        let b = sigv4_headers(
            "POST",
            url,
            b"{}",
            &example_credentials(),
            "us-east-1",
            "glue",
            at(1_700_000_000),
        )
        .unwrap();
        assert!(header(&a, "authorization").contains("/us-east-1/glue/aws4_request"));
        assert_ne!(header(&a, "authorization"), header(&b, "authorization"));
        assert_eq!(header(&a, "authorization"), GLUE_COMMIT);
    }

    /// botocore's signature of the commit above: tests/rig/sigv4_vector.py prints it.
    const GLUE_COMMIT: &str = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20231114/us-east-1/glue/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=ecd2b792bcfa8a06bde45004eef33bc4aaa3ab8b56805568071a0fed3afd465a";
}
