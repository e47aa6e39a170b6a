//! GETs `COUNT` times the object `s3://BUCKET/KEY` the way lakemirror reads S3: object_store,
//! with the AWS SDK's configuration for credentials, region and endpoint (shared/aws/src/config.rs
//! does the same with a credential provider; here the SDK's credentials are read once).
//!
//!     s3-object-store BUCKET KEY COUNT

use object_store::ObjectStore;
use object_store::path::Path;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [bucket, key, count] = args.as_slice() else {
        return Err("usage: s3-object-store BUCKET KEY COUNT".into());
    };
    let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let _glue = aws_sdk_glue::Client::new(&config);
    let credentials =
        aws_config::meta::credentials::CredentialsProviderChain::default_provider().await;
    let credentials =
        aws_credential_types::provider::ProvideCredentials::provide_credentials(&credentials)
            .await?;
    let mut builder = object_store::aws::AmazonS3Builder::new()
        .with_bucket_name(bucket)
        .with_access_key_id(credentials.access_key_id())
        .with_secret_access_key(credentials.secret_access_key());
    if let Some(region) = config.region() {
        builder = builder.with_region(region.as_ref());
    }
    if let Some(endpoint) = config.endpoint_url() {
        builder = builder.with_endpoint(endpoint).with_allow_http(true);
    }
    let store = builder.build()?;
    let mut bytes = 0;
    for _ in 0..count.parse::<usize>()? {
        bytes += store
            .get(&Path::from(key.as_str()))
            .await?
            .bytes()
            .await?
            .len();
    }
    println!("{bytes}");
    Ok(())
}
