//! GETs `COUNT` times the object `s3://BUCKET/KEY` with aws-sdk-s3 (object_store would stay
//! for `file://` tables).
//!
//!     s3-sdk BUCKET KEY COUNT

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [bucket, key, count] = args.as_slice() else {
        return Err("usage: s3-sdk BUCKET KEY COUNT".into());
    };
    let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let _glue = aws_sdk_glue::Client::new(&config);
    let _local = object_store::local::LocalFileSystem::new();
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&config)
            .force_path_style(true)
            .build(),
    );
    let mut bytes = 0;
    for _ in 0..count.parse::<usize>()? {
        let object = s3.get_object().bucket(bucket).key(key).send().await?;
        bytes += object.body.collect().await?.into_bytes().len();
    }
    println!("{bytes}");
    Ok(())
}
