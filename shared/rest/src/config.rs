//! Where the REST catalog is and how to sign in: the `REST_CATALOG_*` settings, one name each
//! across the function's environment, the CLI's flags (`--rest-catalog-uri` …), the SAM
//! parameters and the README.

use lakemirror_runtime::settings::Variable;
use lakemirror_storage::service_url::on_this_machine;

use crate::error::{Error, Result};

/// The settings of a REST catalog target, parsed; no IO.
#[derive(Clone, PartialEq, Eq)]
pub struct RestCatalogSettings {
    /// `REST_CATALOG_URI`: the catalog's base URL, without `/v1` (e.g.
    /// `https://glue.us-east-1.amazonaws.com/iceberg`, `http://127.0.0.1:8181`).
    pub uri: String,
    /// `REST_CATALOG_WAREHOUSE`: sent to `/v1/config` (Glue: the account id; Polaris: the
    /// catalog name).
    pub warehouse: Option<String>,
    pub auth: AuthSettings,
}

/// Which authentication the settings choose (at most one of them is given).
#[derive(Clone, PartialEq, Eq)]
pub enum AuthSettings {
    None,
    /// `REST_CATALOG_TOKEN`.
    Bearer(String),
    OAuth2(ClientCredentials),
    /// `REST_CATALOG_SIGNING_NAME` (`glue`, `s3tables`, `execute-api`) and
    /// `REST_CATALOG_SIGNING_REGION` (default: the AWS region).
    SigV4 {
        service: String,
        region: Option<String>,
    },
}

/// OAuth2 client credentials and where to exchange them: `REST_CATALOG_CREDENTIAL`
/// (`client_id:client_secret`), `REST_CATALOG_OAUTH2_SERVER_URI` (default
/// `<uri>/v1/oauth/tokens`), `REST_CATALOG_SCOPE` (default `catalog`).
#[derive(Clone, PartialEq, Eq)]
pub struct ClientCredentials {
    pub token_uri: String,
    pub client_id: String,
    pub client_secret: String,
    pub scope: String,
}

impl std::fmt::Debug for RestCatalogSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let auth = match &self.auth {
            AuthSettings::None => "none".to_string(),
            AuthSettings::Bearer(_) => "bearer token".to_string(),
            AuthSettings::OAuth2(client) => format!("OAuth2 client {}", client.client_id),
            AuthSettings::SigV4 { service, .. } => format!("SigV4 for {service}"),
        };
        f.debug_struct("RestCatalogSettings")
            .field("uri", &self.uri)
            .field("warehouse", &self.warehouse)
            .field("auth", &auth)
            .finish()
    }
}

/// `REST_CATALOG_URI`.
pub const REST_CATALOG_URI: Variable = Variable {
    name: "REST_CATALOG_URI",
    default: None,
    values: &[],
    help: "Mirror into this Iceberg REST catalog instead of Glue's Data Catalog API (e.g. https://glue.<region>.amazonaws.com/iceberg); unset: Glue.",
};

/// `REST_CATALOG_WAREHOUSE`.
pub const REST_CATALOG_WAREHOUSE: Variable = Variable {
    name: "REST_CATALOG_WAREHOUSE",
    default: None,
    values: &[],
    help: "The warehouse sent to the catalog's /v1/config (Glue: the account id).",
};

/// `REST_CATALOG_TOKEN`.
pub const REST_CATALOG_TOKEN: Variable = Variable {
    name: "REST_CATALOG_TOKEN",
    default: None,
    values: &[],
    help: "The REST catalog's bearer token (a deployment keeps it in REST_CATALOG_TOKEN_SECRET_ARN).",
};

/// `REST_CATALOG_CREDENTIAL`.
pub const REST_CATALOG_CREDENTIAL: Variable = Variable {
    name: "REST_CATALOG_CREDENTIAL",
    default: None,
    values: &[],
    help: "OAuth2 client credentials client_id:client_secret (a deployment keeps them in REST_CATALOG_CREDENTIAL_SECRET_ARN).",
};

/// `REST_CATALOG_OAUTH2_SERVER_URI`.
pub const REST_CATALOG_OAUTH2_SERVER_URI: Variable = Variable {
    name: "REST_CATALOG_OAUTH2_SERVER_URI",
    default: None,
    values: &[],
    help: "The OAuth2 token endpoint; unset: <uri>/v1/oauth/tokens.",
};

/// `REST_CATALOG_SCOPE`.
pub const REST_CATALOG_SCOPE: Variable = Variable {
    name: "REST_CATALOG_SCOPE",
    default: Some("catalog"),
    values: &[],
    help: "The OAuth2 scope.",
};

/// `REST_CATALOG_SIGNING_NAME`.
pub const REST_CATALOG_SIGNING_NAME: Variable = Variable {
    name: "REST_CATALOG_SIGNING_NAME",
    default: None,
    values: &[],
    help: "Sign with SigV4 for this service (glue for Glue's Iceberg endpoint) with the process's AWS credentials.",
};

/// `REST_CATALOG_SIGNING_REGION`.
pub const REST_CATALOG_SIGNING_REGION: Variable = Variable {
    name: "REST_CATALOG_SIGNING_REGION",
    default: None,
    values: &[],
    help: "The region SigV4 signs for; unset: the process's region.",
};

impl RestCatalogSettings {
    /// The settings' names: the function's environment variables and the CLI flags'
    /// variables.
    pub const VARIABLES: [&'static Variable; 8] = [
        &REST_CATALOG_URI,
        &REST_CATALOG_WAREHOUSE,
        &REST_CATALOG_TOKEN,
        &REST_CATALOG_CREDENTIAL,
        &REST_CATALOG_OAUTH2_SERVER_URI,
        &REST_CATALOG_SCOPE,
        &REST_CATALOG_SIGNING_NAME,
        &REST_CATALOG_SIGNING_REGION,
    ];

    /// The REST catalog `setting` names; None when `REST_CATALOG_URI` is unset (the target
    /// is Glue). Unset or blank settings take their defaults.
    pub fn from_settings(setting: &dyn Fn(&str) -> Option<String>) -> Result<Option<Self>> {
        let var = |name: &str| {
            setting(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let Some(uri) = var(REST_CATALOG_URI.name) else {
            let stray: Vec<&str> = Self::VARIABLES[1..]
                .iter()
                .map(|v| v.name)
                .filter(|name| var(name).is_some())
                .collect();
            if let Some(name) = stray.first() {
                return Err(Error::setting(
                    REST_CATALOG_URI.name,
                    format!(
                        "{name} is set but REST_CATALOG_URI is not: give the catalog's URL, or unset {} to mirror into Glue",
                        stray.join(", ")
                    ),
                ));
            }
            return Ok(None);
        };
        let uri = checked_uri(&uri)?;
        let token = var(REST_CATALOG_TOKEN.name);
        let credential = var(REST_CATALOG_CREDENTIAL.name);
        let signing_name = var(REST_CATALOG_SIGNING_NAME.name);
        let chosen = [
            token.as_ref().map(|_| REST_CATALOG_TOKEN.name),
            credential.as_ref().map(|_| REST_CATALOG_CREDENTIAL.name),
            signing_name
                .as_ref()
                .map(|_| REST_CATALOG_SIGNING_NAME.name),
        ];
        let chosen: Vec<&str> = chosen.into_iter().flatten().collect();
        if chosen.len() > 1 {
            return Err(Error::setting(
                REST_CATALOG_TOKEN.name,
                format!(
                    "{} are all set: give one way to sign in (a token, OAuth2 client credentials, or SigV4)",
                    chosen.join(" and ")
                ),
            ));
        }
        let only_with = |name: &'static str, needs: &str| match var(name) {
            Some(_) => Err(Error::setting(name, format!("is set without {needs}"))),
            None => Ok(()),
        };
        let auth = if let Some(token) = token {
            AuthSettings::Bearer(token)
        } else if let Some(credential) = credential {
            let Some((client_id, client_secret)) = credential.split_once(':') else {
                return Err(Error::setting(
                    REST_CATALOG_CREDENTIAL.name,
                    "write client_id:client_secret",
                ));
            };
            let token_uri = match var(REST_CATALOG_OAUTH2_SERVER_URI.name) {
                Some(given) => checked_uri(&given).map_err(|e| match e {
                    Error::Setting { reason, .. } => {
                        Error::setting(REST_CATALOG_OAUTH2_SERVER_URI.name, reason)
                    }
                    other => other,
                })?,
                None => format!("{uri}/v1/oauth/tokens"),
            };
            AuthSettings::OAuth2(ClientCredentials {
                token_uri,
                client_id: client_id.to_string(),
                client_secret: client_secret.to_string(),
                scope: var(REST_CATALOG_SCOPE.name).unwrap_or_else(|| "catalog".into()),
            })
        } else if let Some(service) = signing_name {
            AuthSettings::SigV4 {
                service,
                region: var(REST_CATALOG_SIGNING_REGION.name),
            }
        } else {
            AuthSettings::None
        };
        if !matches!(auth, AuthSettings::OAuth2(_)) {
            only_with(
                REST_CATALOG_OAUTH2_SERVER_URI.name,
                REST_CATALOG_CREDENTIAL.name,
            )?;
            only_with(REST_CATALOG_SCOPE.name, REST_CATALOG_CREDENTIAL.name)?;
        }
        if !matches!(auth, AuthSettings::SigV4 { .. }) {
            only_with(
                REST_CATALOG_SIGNING_REGION.name,
                REST_CATALOG_SIGNING_NAME.name,
            )?;
        }
        Ok(Some(Self {
            uri,
            warehouse: var(REST_CATALOG_WAREHOUSE.name),
            auth,
        }))
    }
}

/// `uri` without a trailing `/` or `/v1`, if it is https, or http to this machine (tokens
/// and table definitions must not cross a network unencrypted).
pub(crate) fn checked_uri(uri: &str) -> Result<String> {
    let trimmed = uri.trim_end_matches('/');
    let base = trimmed.strip_suffix("/v1").unwrap_or(trimmed);
    let parsed = url::Url::parse(base).map_err(|e| {
        Error::setting(
            "REST_CATALOG_URI",
            format!("{uri:?} is not a URL ({e}); give the catalog's base URL, e.g. https://catalog.example.com/iceberg"),
        )
    })?;
    match parsed.scheme() {
        "https" => Ok(base.to_string()),
        "http" if on_this_machine(&parsed) => Ok(base.to_string()),
        "http" => Err(Error::setting(
            "REST_CATALOG_URI",
            format!(
                "{uri} is plain http: credentials and table metadata would cross the network unencrypted; use https:// (http:// is for a catalog on this machine only)"
            ),
        )),
        other => Err(Error::setting(
            "REST_CATALOG_URI",
            format!("{uri}: scheme {other} is not http(s)"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pairs: &[(&str, &str)]) -> Result<Option<RestCatalogSettings>> {
        let map: std::collections::HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        RestCatalogSettings::from_settings(&|name| map.get(name).cloned())
    }

    #[test]
    fn no_uri_is_glue_and_a_stray_rest_setting_is_refused() {
        assert_eq!(parse(&[]).unwrap(), None);
        let err = parse(&[("REST_CATALOG_TOKEN", "t")])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("REST_CATALOG_TOKEN is set but REST_CATALOG_URI is not"),
            "{err}"
        );
    }

    #[test]
    fn each_way_to_sign_in() {
        let uri = ("REST_CATALOG_URI", "http://127.0.0.1:8181/v1/");
        let bearer = parse(&[uri, ("REST_CATALOG_TOKEN", "rb_x")])
            .unwrap()
            .unwrap();
        assert_eq!(bearer.uri, "http://127.0.0.1:8181");
        assert!(bearer.auth == AuthSettings::Bearer("rb_x".into()));
        let oauth = parse(&[uri, ("REST_CATALOG_CREDENTIAL", "id:se:cret")])
            .unwrap()
            .unwrap();
        assert!(
            oauth.auth
                == AuthSettings::OAuth2(ClientCredentials {
                    token_uri: "http://127.0.0.1:8181/v1/oauth/tokens".into(),
                    client_id: "id".into(),
                    client_secret: "se:cret".into(),
                    scope: "catalog".into(),
                })
        );
        let glue = parse(&[
            (
                "REST_CATALOG_URI",
                "https://glue.eu-west-1.amazonaws.com/iceberg",
            ),
            ("REST_CATALOG_WAREHOUSE", "123456789012"),
            ("REST_CATALOG_SIGNING_NAME", "glue"),
        ])
        .unwrap()
        .unwrap();
        assert!(
            glue.auth
                == AuthSettings::SigV4 {
                    service: "glue".into(),
                    region: None
                }
        );
        assert_eq!(glue.warehouse.as_deref(), Some("123456789012"));
    }

    #[test]
    fn refuses_what_cannot_work() {
        let uri = ("REST_CATALOG_URI", "https://c.example.com");
        for (pairs, expected) in [
            (
                vec![("REST_CATALOG_URI", "http://catalog.example.com")],
                "plain http",
            ),
            (vec![("REST_CATALOG_URI", "not a url")], "is not a URL"),
            (
                vec![
                    uri,
                    ("REST_CATALOG_TOKEN", "t"),
                    ("REST_CATALOG_SIGNING_NAME", "glue"),
                ],
                "one way to sign in",
            ),
            (
                vec![uri, ("REST_CATALOG_CREDENTIAL", "no-colon")],
                "client_id:client_secret",
            ),
            (
                vec![uri, ("REST_CATALOG_SCOPE", "s")],
                "REST_CATALOG_SCOPE: is set without REST_CATALOG_CREDENTIAL",
            ),
        ] {
            let err = parse(&pairs).unwrap_err().to_string();
            assert!(err.contains(expected), "{pairs:?}: {err}");
        }
    }
}
