//! Secrets from AWS Secrets Manager (the PostgreSQL password, the Unity Catalog token), read
//! on every use so a rotated secret is picked up without a redeploy.

use lakemirror_storage::credentials::field_or_whole;
use lakemirror_storage::{Error, SecretSource};

/// AWS Secrets Manager, as lakemirror's [`SecretSource`].
#[derive(Clone, Debug)]
pub struct SecretsManager {
    client: aws_sdk_secretsmanager::Client,
}

impl SecretsManager {
    /// A client from the process's AWS configuration.
    pub fn new(aws: &aws_config::SdkConfig) -> Self {
        Self {
            client: aws_sdk_secretsmanager::Client::new(aws),
        }
    }
}

#[async_trait::async_trait]
impl SecretSource for SecretsManager {
    async fn secret(
        &self,
        arn: &str,
        field: &str,
        what: &str,
    ) -> lakemirror_storage::Result<String> {
        let failed = |reason: String| Error::Secret {
            what: what.to_string(),
            id: arn.to_string(),
            reason,
        };
        let secret = self
            .client
            .get_secret_value()
            .secret_id(arn)
            .send()
            .await
            .map_err(|e| {
                failed(format!(
                    "{} (the function's role needs secretsmanager:GetSecretValue on it)",
                    aws_sdk_secretsmanager::error::DisplayErrorContext(&e)
                ))
            })?;
        let text = secret
            .secret_string()
            .ok_or_else(|| failed("it holds no string; store it as text".into()))?;
        Ok(field_or_whole(text, field))
    }
}
