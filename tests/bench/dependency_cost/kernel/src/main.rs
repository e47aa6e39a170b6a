//! The Delta side of a one-commit sync on delta_kernel's default engine: the snapshot the
//! previous sync knew (`KNOWN`), updated to the version an event announced (`TO`), as
//! `Snapshot::builder_from(known).at_version(to)` does. With `--known-only` it stops after the
//! first snapshot, so that the harness can tell the update's requests from the cold ones.
//! Credentials, region and endpoint come from the `AWS_*` environment, handed over as options
//! (the kernel builds its store with `AmazonS3Builder::new()`, which reads no environment).
//!
//!     kernel s3://bucket/table/ KNOWN TO [--known-only]

use delta_kernel::snapshot::Snapshot;
use delta_kernel_default_engine::DefaultEngineBuilder;
use delta_kernel_default_engine::storage::store_from_url_opts;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [uri, known, to, rest @ ..] = args.as_slice() else {
        return Err("usage: kernel s3://bucket/table/ KNOWN TO [--known-only]".into());
    };
    let url = url::Url::parse(uri)?;
    let options = std::env::vars()
        .filter(|(key, _)| key.starts_with("AWS_"))
        .map(|(key, value)| (key.to_ascii_lowercase(), value))
        .chain([("allow_http".to_string(), "true".to_string())]);
    let store = store_from_url_opts(&url, options)?;
    let engine = DefaultEngineBuilder::new(store).build();
    let known = Snapshot::builder_for(url.as_str())
        .at_version(known.parse()?)
        .build(&engine)?;
    if rest.iter().any(|a| a == "--known-only") {
        println!("{}", known.version());
        return Ok(());
    }
    let updated = Snapshot::builder_from(known)
        .at_version(to.parse()?)
        .build(&engine)?;
    println!("{}", updated.version());
    Ok(())
}
