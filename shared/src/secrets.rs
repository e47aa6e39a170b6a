//! Secrets from AWS Secrets Manager (the PostgreSQL password, the Unity Catalog token), read
//! on every invocation so a rotated secret is picked up without a redeploy.

use serde_json::Value;

use crate::error::{Error, Result};

/// A Secrets Manager client from the process's AWS configuration.
pub async fn secrets_client() -> aws_sdk_secretsmanager::Client {
    aws_sdk_secretsmanager::Client::new(crate::aws::config().await)
}

/// The secret `arn` as text: the `field` of a JSON secret (as RDS writes `password`), else
/// the whole text. `what` names it in errors ("the password secret").
pub async fn read_secret(
    client: &aws_sdk_secretsmanager::Client,
    arn: &str,
    field: &str,
    what: &str,
) -> Result<String> {
    let secret = client
        .get_secret_value()
        .secret_id(arn)
        .send()
        .await
        .map_err(|e| {
            Error::InvalidInput(format!(
                "cannot read {what} {arn}: {} (the function's role needs secretsmanager:GetSecretValue on it)",
                aws_sdk_secretsmanager::error::DisplayErrorContext(&e)
            ))
        })?;
    let text = secret.secret_string().ok_or_else(|| {
        Error::InvalidInput(format!("{what} {arn} holds no string; store it as text"))
    })?;
    Ok(field_or_whole(text, field))
}

/// `field` of a JSON object secret, else the whole text.
pub fn field_or_whole(secret: &str, field: &str) -> String {
    serde_json::from_str::<Value>(secret)
        .ok()
        .and_then(|v| v.get(field).and_then(Value::as_str).map(str::to_string))
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
}
