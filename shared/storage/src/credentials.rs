//! Credentials that are not the process's own: S3 credentials a catalog vends for one table,
//! and the secrets (a PostgreSQL password, a Unity Catalog token) a deployment keeps in a
//! secret store.

use crate::error::Result;

/// Short-lived S3 credentials vended for one table (Unity Catalog's temporary table
/// credentials). Never printed.
#[derive(Clone, PartialEq, Eq, serde::Deserialize)]
pub struct VendedCredentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    #[serde(default)]
    pub session_token: Option<String>,
}

impl std::fmt::Debug for VendedCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VendedCredentials")
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

/// Where secrets are read (AWS Secrets Manager in a deployment, see lakemirror-aws): on every
/// use, so a rotated secret is picked up without a redeploy.
#[async_trait::async_trait]
pub trait SecretSource: Send + Sync {
    /// The secret `id` as text: the `field` of a JSON secret (as RDS writes `password`),
    /// else the whole text. `what` names it in errors ("the password secret").
    async fn secret(&self, id: &str, field: &str, what: &str) -> Result<String>;
}

/// `field` of a JSON object secret, else the whole text.
pub fn field_or_whole(secret: &str, field: &str) -> String {
    serde_json::from_str::<serde_json::Value>(secret)
        .ok()
        .and_then(|v| {
            v.get(field)
                .and_then(serde_json::Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_else(|| secret.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_plain_text_or_json_with_the_field() {
        assert_eq!(field_or_whole("s3cr3t", "password"), "s3cr3t");
        assert_eq!(
            field_or_whole(r#"{"username":"app","password":"p@ss"}"#, "password"),
            "p@ss"
        );
        assert_eq!(
            field_or_whole(r#"{"token":"x"}"#, "password"),
            r#"{"token":"x"}"#
        );
        assert_eq!(field_or_whole(r#"{"token":"x"}"#, "token"), "x");
    }

    #[test]
    fn vended_secrets_never_show_in_debug_output() {
        let credentials = VendedCredentials {
            access_key_id: "AKIA".into(),
            secret_access_key: "s3cr3t".into(),
            session_token: Some("t0k3n".into()),
        };
        let shown = format!("{credentials:?}");
        assert!(
            !shown.contains("s3cr3t") && !shown.contains("t0k3n"),
            "{shown}"
        );
    }
}
