//! Object storage for a table root: S3 (any endpoint, e.g. moto) or the local file system.
//!
//! Locations are URIs whose key part is the *real* object key (already decoded), e.g.
//! `s3://lake/orders/x=A%2FA/part-0.parquet` names the key `orders/x=A%2FA/part-0.parquet`.

use std::sync::Arc;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectMeta, ObjectStore, PutPayload};

use crate::budget;
use crate::counters::IoCounters;
use crate::error::{Error, Result};
use crate::uri::TableScope;

/// An object read to be parsed, with the room its bytes and its parse take.
#[derive(Debug)]
pub struct ToParse {
    pub bytes: Bytes,
    pub meta: ObjectMeta,
    pub room: budget::Reservation,
}

/// A store rooted at a URI such as `s3://bucket/prefix` or `file:///data/table`.
#[derive(Clone)]
pub struct TableStorage {
    store: Arc<dyn ObjectStore>,
    /// The root as a URI without trailing slash.
    root_uri: String,
    /// `s3://bucket` or `file://`: what precedes the key in every location.
    authority: String,
    /// What this store reads (its root, and external roots) and writes (its root only).
    scope: TableScope,
    counters: Arc<IoCounters>,
}

impl std::fmt::Debug for TableStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableStorage")
            .field("root_uri", &self.root_uri)
            .finish()
    }
}

impl TableStorage {
    /// A table root served by `store`: the one seam through which lakemirror reads and
    /// writes objects ([`crate::ObjectStores`] opens S3 and the local file system; tests hand
    /// in `object_store::memory::InMemory`). `root_uri` is `s3://bucket/prefix` or
    /// `file:///abs/path`; its key part is the real object key.
    pub fn from_store(
        store: Arc<dyn ObjectStore>,
        root_uri: &str,
        counters: Arc<IoCounters>,
    ) -> Result<Self> {
        let root_uri = root_uri.trim_end_matches('/');
        let authority = if let Some(rest) = root_uri.strip_prefix("s3://") {
            let bucket = rest.split('/').next().unwrap_or_default();
            if bucket.is_empty() {
                return Err(Error::location(
                    root_uri,
                    "names no bucket; use s3://bucket/path",
                ));
            }
            format!("s3://{bucket}")
        } else if root_uri.starts_with("file:///") {
            "file://".to_string()
        } else {
            return Err(Error::location(
                root_uri,
                "is not an s3://bucket/path or file:///path URI",
            ));
        };
        Ok(Self {
            store,
            scope: TableScope::new(root_uri),
            root_uri: root_uri.to_string(),
            authority,
            counters,
        })
    }

    /// The same store, reading data files and deletion vectors below `roots` as well
    /// (`ALLOWED_EXTERNAL_ROOTS`, in the same bucket: another bucket is never read).
    pub fn with_external_roots(mut self, roots: &[String]) -> Self {
        self.scope = self.scope.with_external_roots(roots);
        self
    }

    /// What this store reads and writes; the resolver of every path a Delta log names.
    pub fn scope(&self) -> &TableScope {
        &self.scope
    }

    /// `location` as a key this store may read: the root, below it, or below an external
    /// root. Anything else is refused before a request is made.
    fn readable(&self, location: &str) -> Result<Path> {
        self.fenced(location, self.scope.admits(location))
    }

    /// `location` as a key this store may write or delete: below its root only.
    fn writable(&self, location: &str) -> Result<Path> {
        self.fenced(location, self.scope.root_holds(location))
    }

    fn fenced(&self, location: &str, allowed: bool) -> Result<Path> {
        if !allowed {
            return Err(Error::Outside {
                location: location.to_string(),
                root: self.root_uri.clone(),
            });
        }
        self.key(location)
    }

    /// The root URI, without trailing slash.
    pub fn root_uri(&self) -> &str {
        &self.root_uri
    }

    /// The counters this store adds to.
    pub fn counters(&self) -> &Arc<IoCounters> {
        &self.counters
    }

    /// Whether `location` lies under this store's root, not merely in its bucket: a file of
    /// this table's own. A path with an empty, `.` or `..` segment never does.
    pub fn contains(&self, location: &str) -> bool {
        self.scope.root_holds(location)
    }

    /// What follows the scheme and bucket, when `location` is in this store.
    fn key_part<'a>(&self, location: &'a str) -> Option<&'a str> {
        let rest = location.strip_prefix(&self.authority)?;
        (rest.is_empty() || rest.starts_with('/') || self.authority == "file://").then_some(rest)
    }

    /// The location of `relative` (already decoded) under the root.
    pub fn location(&self, relative: &str) -> String {
        format!("{}/{}", self.root_uri, relative.trim_start_matches('/'))
    }

    /// The object key of a location in this store.
    pub fn key(&self, location: &str) -> Result<Path> {
        let key = self
            .key_part(location)
            .ok_or_else(|| Error::location(location, format!("is not in {}", self.authority)))?;
        Path::parse(key.trim_start_matches('/'))
            .map_err(|e| Error::location(location, format!("is not a valid object location: {e}")))
    }

    /// The location of a key listed from this store.
    pub fn location_of_key(&self, key: &Path) -> String {
        if self.authority == "file://" {
            format!("file:///{key}")
        } else {
            format!("{}/{key}", self.authority)
        }
    }

    /// Reads `location` whole, within the memory share of the work it is for
    /// ([`budget::current`]): a larger object is refused before its body is read, and the
    /// bytes hold their room in the share until they are dropped. Any object a table's writer
    /// may write (its log, its `_lakemirror/` folder) is read through this or
    /// [`Self::get_at_most`], never unbounded.
    pub async fn get(&self, location: &str) -> Result<(Bytes, ObjectMeta)> {
        self.get_at_most(location, u64::MAX).await?.ok_or_else(|| {
            Error::Store(object_store::Error::NotFound {
                path: location.to_string(),
                source: "the object vanished while it was read".into(),
            })
        })
    }

    /// Reads `location`, which a listing said holds `size` bytes, if it still exists and
    /// holds at most `max_bytes`: its room is taken before the request, so no answer waits
    /// unread for room (an object grown since it was listed takes the rest as
    /// [`budget::MemoryShare::grow`] does).
    pub async fn get_listed(
        &self,
        location: &str,
        size: u64,
        max_bytes: u64,
    ) -> Result<Option<(Bytes, ObjectMeta)>> {
        let share = budget::current();
        if size > max_bytes.min(share.read_bytes()) {
            return Err(self.over(location, size, max_bytes, &share));
        }
        let mut room = share.reserve(location, size).await?;
        let result = match self.store.get(&self.readable(location)?).await {
            Ok(result) => result,
            Err(object_store::Error::NotFound { .. }) => {
                self.counted("GET", location, 0, 0);
                return Ok(None);
            }
            Err(e) => return Err(e.into()),
        };
        let now = result.meta.size;
        if now > max_bytes.min(share.read_bytes()) {
            self.counted("GET", location, 0, 0);
            return Err(self.over(location, now, max_bytes, &share));
        }
        share.grow(location, now, &mut room, now).await?;
        let meta = result.meta.clone();
        let bytes = result.bytes().await?;
        self.counted("GET", location, bytes.len(), 0);
        Ok(Some((room.holding(bytes), meta)))
    }

    /// One request of `op` for `location`, named for the report by what it read or wrote.
    fn counted(&self, op: &str, location: &str, read: usize, written: usize) {
        let call = format!("S3 {op} {}", crate::counters::object_kind(location));
        self.counters.call(&call, read, written);
    }

    /// `location`, of `size` bytes, over `max_bytes` or the share.
    fn over(
        &self,
        location: &str,
        size: u64,
        max_bytes: u64,
        share: &budget::MemoryShare,
    ) -> Error {
        match max_bytes < share.read_bytes() {
            true => Error::TooLarge {
                location: location.to_string(),
                size,
                limit: max_bytes,
                memory: share.describe(),
                fits_alone: false,
            },
            false => share.too_large(location, size),
        }
    }

    /// Reads `location` and its metadata if it exists and holds at most `max_bytes` (and
    /// fits the memory share it is read in): a larger object is refused before its body is
    /// read; the body waits for room in the share.
    pub async fn get_at_most(
        &self,
        location: &str,
        max_bytes: u64,
    ) -> Result<Option<(Bytes, ObjectMeta)>> {
        let result = match self.store.get(&self.readable(location)?).await {
            Ok(result) => result,
            Err(object_store::Error::NotFound { .. }) => {
                self.counted("GET", location, 0, 0);
                return Ok(None);
            }
            Err(e) => return Err(e.into()),
        };
        let share = budget::current();
        let size = result.meta.size;
        if size > max_bytes && max_bytes < share.read_bytes() {
            self.counted("GET", location, 0, 0);
            return Err(Error::TooLarge {
                location: location.to_string(),
                size,
                limit: max_bytes,
                memory: share.describe(),
                fits_alone: false,
            });
        }
        let room = match share.reserve(location, size).await {
            Ok(room) => room,
            Err(e) => {
                self.counted("GET", location, 0, 0);
                return Err(e);
            }
        };
        let meta = result.meta.clone();
        let bytes = result.bytes().await?;
        self.counted("GET", location, bytes.len(), 0);
        Ok(Some((room.holding(bytes), meta)))
    }

    /// Reads `location` whole to be parsed into up to `parse_factor` times its size: the
    /// room for the bytes and the parse is taken from the work's memory share before the
    /// body is read, and held by the answer's reservation (which the parse may cut to what
    /// it found it needs). None when the object does not exist.
    pub async fn get_to_parse(&self, location: &str, parse_factor: u64) -> Result<Option<ToParse>> {
        let result = match self.store.get(&self.readable(location)?).await {
            Ok(result) => result,
            Err(object_store::Error::NotFound { .. }) => {
                self.counted("GET", location, 0, 0);
                return Ok(None);
            }
            Err(e) => return Err(e.into()),
        };
        let share = budget::current();
        let size = result.meta.size;
        let factor = parse_factor.max(1);
        if size.saturating_mul(factor) > share.read_bytes() {
            self.counted("GET", location, 0, 0);
            return Err(share.too_large_to_parse(location, size, factor));
        }
        let room = share.reserve(location, size.saturating_mul(factor)).await?;
        let meta = result.meta.clone();
        let bytes = result.bytes().await?;
        self.counted("GET", location, bytes.len(), 0);
        Ok(Some(ToParse { bytes, meta, room }))
    }

    /// Reads `location` if it exists.
    pub async fn get_if_exists(&self, location: &str) -> Result<Option<Bytes>> {
        Ok(self
            .get_with_meta_if_exists(location)
            .await?
            .map(|(bytes, _)| bytes))
    }

    /// Reads `location` and its metadata if it exists.
    pub async fn get_with_meta_if_exists(
        &self,
        location: &str,
    ) -> Result<Option<(Bytes, ObjectMeta)>> {
        self.get_at_most(location, u64::MAX).await
    }

    /// The bytes of `range`, all of them, within the memory share of the work it is for: a
    /// range larger than the share is refused before it is asked for, and one that ends past
    /// the object's real end (sizes come from logs a writer wrote) is an error naming the
    /// object before its body is read, never a slice cut past its end later.
    pub async fn get_range(&self, location: &str, range: std::ops::Range<u64>) -> Result<Bytes> {
        let wanted = range.end.saturating_sub(range.start);
        let share = budget::current();
        if wanted > share.read_bytes() {
            return Err(share.too_large(location, wanted));
        }
        self.fetch_range(location, range, Some(&share)).await
    }

    /// The bytes of `range`, checked against the object's real end before its body is read,
    /// the room for them taken from `share` (None: taken already).
    async fn fetch_range(
        &self,
        location: &str,
        range: std::ops::Range<u64>,
        share: Option<&budget::MemoryShare>,
    ) -> Result<Bytes> {
        let wanted = range.end.saturating_sub(range.start);
        // Its length is known: the room is taken before the request, so no answer waits
        // unread for it.
        let room = match share {
            Some(share) => Some(share.reserve(location, wanted).await?),
            None => None,
        };
        let options = GetOptions {
            range: Some(GetRange::Bounded(range.clone())),
            ..GetOptions::default()
        };
        let result = self
            .store
            .get_opts(&self.readable(location)?, options)
            .await?;
        if result.range != range {
            self.counted("GET range", location, 0, 0);
            return Err(self.shorter_than_asked(location, &range, result.meta.size));
        }
        let bytes = result.bytes().await?;
        self.counted("GET range", location, bytes.len(), 0);
        if bytes.len() as u64 != wanted {
            return Err(self.shorter_than_asked(
                location,
                &range,
                range.start + bytes.len() as u64,
            ));
        }
        Ok(match room {
            Some(room) => room.holding(bytes),
            None => bytes,
        })
    }

    /// The bytes of each of `ranges` (all of them, as [`Self::get_range`]), read `at_once` at
    /// a time: the room for all of them is taken at once, before any is asked for, and
    /// given back when the last of them is dropped. (Reads that keep each other's bytes take
    /// their room together, or two of them could each hold half and wait for the other.)
    pub async fn get_ranges(
        &self,
        location: &str,
        ranges: Vec<std::ops::Range<u64>>,
        at_once: usize,
    ) -> Result<Vec<Bytes>> {
        let share = budget::current();
        let total: u64 = ranges.iter().map(|r| r.end.saturating_sub(r.start)).sum();
        let room = std::sync::Arc::new(share.reserve(location, total).await?);
        futures::stream::iter(ranges)
            .map(|range| {
                let room = room.clone();
                async move {
                    let bytes = self.fetch_range(location, range, None).await?;
                    Ok::<_, Error>(budget::Reservation::shared(room, bytes))
                }
            })
            .buffered(at_once.max(1))
            .try_collect()
            .await
    }

    fn shorter_than_asked(&self, location: &str, range: &std::ops::Range<u64>, end: u64) -> Error {
        let wanted = range.end.saturating_sub(range.start);
        Error::Location {
            location: location.to_string(),
            reason: format!(
                "ends at byte {end}, before the {wanted} bytes from {} its table's log made lakemirror ask for: the log and the object disagree (was it replaced or truncated?)",
                range.start
            ),
        }
    }

    pub async fn put(&self, location: &str, bytes: Bytes) -> Result<()> {
        let len = bytes.len();
        self.store
            .put(&self.writable(location)?, PutPayload::from_bytes(bytes))
            .await?;
        self.counted("PUT", location, 0, len);
        Ok(())
    }

    /// Deletes an object; one already gone is fine.
    pub async fn delete(&self, location: &str) -> Result<()> {
        match self.store.delete(&self.writable(location)?).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        self.counted("DELETE", location, 0, 0);
        Ok(())
    }

    /// Deletes objects, those already gone included: on S3 a request per 1,000 keys
    /// (DeleteObjects). Answers the first failure; the others are still attempted.
    pub async fn delete_all(&self, locations: &[String]) -> Result<()> {
        if locations.is_empty() {
            return Ok(());
        }
        let keys: Vec<Path> = locations
            .iter()
            .map(|location| self.writable(location))
            .collect::<Result<_>>()?;
        let requests = match self.authority.starts_with("s3://") {
            true => keys.len().div_ceil(1000),
            false => keys.len(),
        };
        let keys = futures::stream::iter(keys.into_iter().map(Ok)).boxed();
        let outcomes: Vec<object_store::Result<Path>> =
            self.store.delete_stream(keys).collect().await;
        for _ in 0..requests {
            self.counted(
                "DeleteObjects",
                locations.first().map_or("", String::as_str),
                0,
                0,
            );
        }
        match outcomes.into_iter().find_map(|outcome| match outcome {
            Ok(_) | Err(object_store::Error::NotFound { .. }) => None,
            Err(e) => Some(e),
        }) {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }

    /// The metadata of `location` (one HEAD request); not found when it does not exist.
    pub async fn head(&self, location: &str) -> Result<ObjectMeta> {
        let meta = self.store.head(&self.readable(location)?).await?;
        self.counted("HEAD", location, 0, 0);
        Ok(meta)
    }

    /// The metadata of `location` (one HEAD request), or None when it does not exist.
    pub async fn head_if_exists(&self, location: &str) -> Result<Option<ObjectMeta>> {
        let found = match self.store.head(&self.readable(location)?).await {
            Ok(meta) => Some(meta),
            Err(object_store::Error::NotFound { .. }) => None,
            Err(e) => return Err(e.into()),
        };
        self.counted("HEAD", location, 0, 0);
        Ok(found)
    }

    /// The folders directly under `folder` (a location), as locations without trailing
    /// slash, in key order: one delimited listing, which names no object below them.
    pub async fn list_folders(&self, folder: &str) -> Result<Vec<String>> {
        let key = self.readable(folder.trim_end_matches('/'))?;
        let listed = self.store.list_with_delimiter(Some(&key)).await?;
        let pages = (listed.objects.len() + listed.common_prefixes.len()).div_ceil(1000);
        for _ in 0..pages.max(1) {
            self.counted("LIST", folder, 0, 0);
        }
        let mut folders: Vec<String> = listed
            .common_prefixes
            .iter()
            .map(|p| self.location_of_key(p))
            .collect();
        folders.sort();
        Ok(folders)
    }

    /// Whether any object lies under `prefix` (a location ending in `/`): one listing
    /// request, whatever the folder holds.
    pub async fn holds_any(&self, prefix: &str) -> Result<bool> {
        self.readable(prefix.trim_end_matches('/'))?;
        let prefix_key = self.key(prefix)?;
        let first = self
            .store
            .list(Some(&prefix_key))
            .next()
            .await
            .transpose()?;
        self.counted("LIST", prefix, 0, 0);
        Ok(first.is_some())
    }

    /// Whether the first page of objects under `prefix` (a location ending in `/`; at most
    /// 1,000 keys, one listing request) holds one whose name (the key's last segment) `is`.
    pub async fn holds_any_named(&self, prefix: &str, is: impl Fn(&str) -> bool) -> Result<bool> {
        self.readable(prefix.trim_end_matches('/'))?;
        let prefix_key = self.key(prefix)?;
        let mut listed = self.store.list(Some(&prefix_key)).take(1000);
        let mut found = false;
        while let Some(meta) = listed.next().await.transpose()? {
            if meta.location.filename().is_some_and(&is) {
                found = true;
                break;
            }
        }
        self.counted("LIST", prefix, 0, 0);
        Ok(found)
    }

    /// Lists the objects under `prefix` (a location ending in `/`) whose keys sort after
    /// `after` (a location), in key order.
    pub async fn list_after(&self, prefix: &str, after: Option<&str>) -> Result<Vec<ObjectMeta>> {
        self.readable(prefix.trim_end_matches('/'))?;
        let prefix_key = self.key(prefix)?;
        let mut listed: Vec<ObjectMeta> = match after {
            Some(after) => {
                let offset = self.key(after)?;
                self.store
                    .list_with_offset(Some(&prefix_key), &offset)
                    .try_collect()
                    .await?
            }
            None => self.store.list(Some(&prefix_key)).try_collect().await?,
        };
        // S3 answers 1,000 keys a page.
        for _ in 0..listed.len().div_ceil(1000).max(1) {
            self.counted("LIST", prefix, 0, 0);
        }
        listed.sort_by(|a, b| a.location.cmp(&b.location));
        Ok(listed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ObjectStores;

    #[test]
    fn s3_locations_keep_real_keys() {
        let s = ObjectStores::in_memory()
            .open("s3://lake/warehouse/orders/", Arc::default())
            .unwrap();
        assert_eq!(s.root_uri(), "s3://lake/warehouse/orders");
        let loc = s.location("x=A%2FA/part 0 é.parquet");
        assert_eq!(loc, "s3://lake/warehouse/orders/x=A%2FA/part 0 é.parquet");
        assert_eq!(
            s.key(&loc).unwrap().as_ref(),
            "warehouse/orders/x=A%2FA/part 0 é.parquet"
        );
        assert_eq!(s.location_of_key(&s.key(&loc).unwrap()), loc);
        assert!(s.key("s3://lakehouse/x.json").is_err());
    }

    #[tokio::test]
    async fn an_object_over_the_limit_is_refused_before_it_is_read() {
        let dir = std::env::temp_dir().join(format!("lakemirror-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("big.json"), vec![b'x'; 100]).unwrap();
        let s = ObjectStores::in_memory()
            .open(dir.to_str().unwrap(), Arc::default())
            .unwrap();
        let big = s.location("big.json");
        assert_eq!(
            s.get_at_most(&big, 100).await.unwrap().unwrap().0.len(),
            100
        );
        let err = s.get_at_most(&big, 99).await.unwrap_err();
        assert!(
            matches!(
                err,
                Error::TooLarge {
                    size: 100,
                    limit: 99,
                    fits_alone: false,
                    ..
                }
            ),
            "{err}"
        );
        assert!(
            s.get_at_most(&s.location("none.json"), 99)
                .await
                .unwrap()
                .is_none()
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_table_contains_only_what_lies_under_its_root() {
        let s = ObjectStores::in_memory()
            .open("s3://lake/a/_lakemirror/iceberg", Arc::default())
            .unwrap();
        assert!(s.contains("s3://lake/a/_lakemirror/iceberg/metadata/x.avro"));
        for other in [
            "s3://lake/b/_lakemirror/iceberg/metadata/x.avro",
            "s3://lake/a/_lakemirror/iceberg-other/metadata/x.avro",
            "s3://lake/a/_lakemirror/iceberg/../../b/_lakemirror/iceberg/metadata/x.avro",
            "s3://lake/a/_lakemirror/iceberg",
        ] {
            assert!(!s.contains(other), "{other}");
        }
    }

    #[tokio::test]
    async fn a_store_reads_its_table_and_writes_its_root_only() {
        let s = ObjectStores::in_memory()
            .open("s3://lake/warehouse/team_a/t", Arc::default())
            .unwrap()
            .with_external_roots(&["s3://lake/clones/source".to_string()]);
        s.put(
            "s3://lake/warehouse/team_a/t/own.json",
            Bytes::from_static(b"{}"),
        )
        .await
        .unwrap();
        assert!(s.get("s3://lake/warehouse/team_a/t/own.json").await.is_ok());
        for victim in [
            "s3://lake/warehouse/hr/people/part-0.parquet",
            "s3://lake/warehouse/team_a/t/../../hr/people/part-0.parquet",
            "s3://lake/warehouse/team_a/tail/x.json",
        ] {
            let err = s.get(victim).await.unwrap_err();
            assert!(matches!(err, Error::Outside { .. }), "{victim}: {err}");
            assert!(s.head_if_exists(victim).await.is_err(), "{victim}");
            let err = s.put(victim, Bytes::new()).await.unwrap_err();
            assert!(matches!(err, Error::Outside { .. }), "{victim}: {err}");
            assert!(s.delete(victim).await.is_err(), "{victim}");
        }
        assert!(
            s.head_if_exists("s3://lake/clones/source/p.parquet")
                .await
                .is_ok(),
            "an external root is readable"
        );
        assert!(
            s.put("s3://lake/clones/source/p.parquet", Bytes::new())
                .await
                .is_err(),
            "but never written"
        );
    }

    #[test]
    fn local_paths_become_file_uris_and_refuse_escapes() {
        let s = ObjectStores::in_memory()
            .open("/data/t", Arc::default())
            .unwrap();
        assert_eq!(s.root_uri(), "file:///data/t");
        let climbed = ObjectStores::in_memory()
            .open("/data/x/./../t", Arc::default())
            .unwrap();
        assert_eq!(climbed.root_uri(), "file:///data/t");
        assert_eq!(
            s.key("file:///data/t/a b.parquet").unwrap().as_ref(),
            "data/t/a b.parquet"
        );
        assert!(s.key("file:///data/t/../../etc/passwd").is_err());
        assert!(
            ObjectStores::in_memory()
                .open("gs://x/y", Arc::default())
                .is_err()
        );
    }
}
