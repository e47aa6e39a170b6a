//! One memory budget for the whole process, from the memory it runs in (`MEMORY_SIZE`).
//!
//! The budget is a [`MemoryShare`]; a function that works on several tables at once gives
//! each its part ([`SharedOut`]). Within a share:
//!
//! - every object read into memory takes its size from the share's room for reads before
//!   its body is fetched, waits while the table's other reads hold that room, and gives it
//!   back when the last copy of the bytes is dropped (the bytes carry their reservation);
//! - an object larger than the share's room for reads fails that table alone, naming the
//!   object, its size and the setting;
//! - what parsing keeps (a replay's data files, about [`BYTES_PER_HELD_FILE`] each) is
//!   bounded by count from the rest of the share ([`MemoryShare::held_files`]).
//!
//! No read waits for room while it holds some: reads that keep each other's bytes (the column
//! chunks of a row group) take their room together, a read whose size is known takes it
//! before its request, and a parse that finds it needs more ([`MemoryShare::grow`]) takes
//! what is free or gives back what it holds before it waits. So the reads of a share do not
//! wait on each other in a circle; a read that still waits longer than [`MAX_WAIT`] fails
//! its work (retryably when the work has only a part of the budget).

use std::future::Future;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use tokio::sync::{OwnedSemaphorePermit, RwLock, Semaphore};

use crate::error::{Error, Result};

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;

/// Memory one held data file takes (its add with column stats and the path keys).
pub const BYTES_PER_HELD_FILE: u64 = 2 * KIB;
/// Reads this small are not counted (a Parquet file's last 8 bytes, `_last_checkpoint`):
/// however many run at once, they are small beside the runtime's own memory.
pub const SMALL_READ: u64 = 64 * KIB;
/// The largest object read into memory however much memory there is.
const MAX_READ: u64 = 512 * MIB;
/// What the process needs besides its budget: the runtime, the binary, the allocator's slack.
const RUNTIME_PERCENT: u64 = 25;
/// How long a read waits for room in its share: a backstop. Reads give their room back as
/// soon as they are parsed and none waits while holding room, so a wait this long means
/// reads of the share that are slow to download, or a way around those rules: the work
/// fails rather than hangs (a glue-sync batch's table runs again alone first).
const MAX_WAIT: std::time::Duration = std::time::Duration::from_secs(30);
/// Of a share, what may be read at once; the rest holds what parsing keeps.
const READ_PERCENT: u64 = 40;

/// A part of the process's memory: what one table's work may read and hold at once.
#[derive(Debug)]
pub struct MemoryShare {
    /// All of it, in bytes; None: not bounded by memory (tests, a process given no memory).
    bytes: Option<u64>,
    /// Room for objects being read (and parsed), in KiB.
    reads: Arc<Semaphore>,
    read_bytes: u64,
    /// The function's memory in MB, as messages name it.
    memory_mb: Option<u64>,
    /// How many parts of the process's budget run at once beside this one (1: all of it).
    shared_by: u32,
    /// The room for reads of the whole budget: a read above this share's that fits it
    /// succeeds when the table runs alone.
    whole_read_bytes: u64,
}

impl MemoryShare {
    /// The budget of a process with `memory_mb` of memory: three quarters of it (the rest
    /// is the runtime's), 40% of that for objects being read (at most 512 MB) and the rest
    /// for what parsing keeps.
    pub fn for_memory_mb(memory_mb: u64) -> Self {
        let bytes = memory_mb.saturating_mul(MIB) / 100 * (100 - RUNTIME_PERCENT);
        Self::new(Some(bytes), Some(memory_mb), 1, None)
    }

    /// No bound but the largest object (tests, and a process that was given no memory).
    pub fn unbounded() -> Self {
        Self::new(None, None, 1, None)
    }

    fn new(
        bytes: Option<u64>,
        memory_mb: Option<u64>,
        shared_by: u32,
        whole_read_bytes: Option<u64>,
    ) -> Self {
        let read_bytes = bytes
            .map_or(MAX_READ, |b| b / 100 * READ_PERCENT)
            .clamp(MIB, MAX_READ);
        Self {
            bytes,
            reads: Arc::new(Semaphore::new(kib(read_bytes) as usize)),
            read_bytes,
            memory_mb,
            shared_by,
            whole_read_bytes: whole_read_bytes.unwrap_or(read_bytes),
        }
    }

    /// One of `parts` equal parts of this share (each with its own room for reads).
    pub fn part(&self, parts: u32) -> Self {
        let parts = parts.max(1);
        Self::new(
            self.bytes.map(|b| b / u64::from(parts)),
            self.memory_mb,
            self.shared_by.saturating_mul(parts),
            Some(self.whole_read_bytes),
        )
    }

    /// The largest object this share reads into memory.
    pub fn read_bytes(&self) -> u64 {
        self.read_bytes
    }

    /// The most data files one replay within this share holds (about
    /// [`BYTES_PER_HELD_FILE`] each, in what the reads leave of it).
    pub fn held_files(&self) -> u64 {
        match self.bytes {
            None => u64::MAX,
            Some(bytes) => (bytes.saturating_sub(self.read_bytes) / BYTES_PER_HELD_FILE).max(1),
        }
    }

    /// The function's memory in MB, when the budget comes from one.
    pub fn memory_mb(&self) -> Option<u64> {
        self.memory_mb
    }

    /// How many parts of the budget run at once beside this one (1: it is the whole budget).
    pub fn shared_by(&self) -> u32 {
        self.shared_by
    }

    /// The memory as messages name it: "128 MB of memory (MEMORY_SIZE), shared by 4 tables".
    pub fn describe(&self) -> String {
        let memory = match self.memory_mb {
            Some(mb) => format!("{mb} MB of memory (MEMORY_SIZE)"),
            None => "this memory".to_string(),
        };
        match self.shared_by {
            1 => memory,
            n => format!("{memory}, shared by {n} tables at once"),
        }
    }

    /// Takes `size` bytes of room for reading `location` into memory, waiting while this
    /// share's other reads hold it. An object larger than the share ever holds is refused
    /// before it is read: [`Error::TooLarge`], retryable when the whole budget would hold it.
    pub async fn reserve(&self, location: &str, size: u64) -> Result<Reservation> {
        if size <= SMALL_READ {
            return Ok(Reservation { permit: None });
        }
        if size > self.read_bytes {
            return Err(self.too_large(location, size));
        }
        let waiting = self.reads.clone().acquire_many_owned(kib(size));
        match tokio::time::timeout(MAX_WAIT, waiting).await {
            Ok(Ok(permit)) => Ok(Reservation {
                permit: Some(permit),
            }),
            Ok(Err(_)) => Err(Error::location(
                location,
                "was read while the process stopped",
            )),
            Err(_) => Err(Error::TooLarge {
                location: location.to_string(),
                size,
                limit: self.read_bytes,
                memory: format!(
                    "{} (the table's other reads held the room for {} s)",
                    self.describe(),
                    MAX_WAIT.as_secs()
                ),
                fits_alone: self.shared_by > 1,
            }),
        }
    }

    /// Grows `room` (taken from this share for `location`, `size` bytes) to `bytes`: what a
    /// parse found it needs once it counted what it read. Room free now is added at once; otherwise the room
    /// held is given back first and all of it waited for, so that a read never waits while
    /// it holds room (the semaphore serves waiters in order: one that held room and waited
    /// for more could stall the whole share).
    pub async fn grow(
        &self,
        location: &str,
        size: u64,
        room: &mut Reservation,
        bytes: u64,
    ) -> Result<()> {
        if bytes <= room.bytes() || bytes <= SMALL_READ {
            return Ok(());
        }
        if bytes > self.read_bytes {
            return Err(Error::TooLargeParsed {
                location: location.to_string(),
                size,
                parsed: bytes,
                limit: self.read_bytes,
                memory: self.describe(),
                fits_alone: self.shared_by > 1 && bytes <= self.whole_read_bytes,
            });
        }
        let extra = kib(bytes - room.bytes());
        match (
            self.reads.clone().try_acquire_many_owned(extra),
            room.permit.as_mut(),
        ) {
            (Ok(more), Some(permit)) => permit.merge(more),
            (Ok(more), None) => room.permit = Some(more),
            (Err(_), _) => {
                room.permit = None;
                *room = self.reserve(location, bytes).await?;
            }
        }
        Ok(())
    }

    /// `location` (of `size` bytes) does not fit this share.
    pub fn too_large(&self, location: &str, size: u64) -> Error {
        self.too_large_to_parse(location, size, 1)
    }

    /// `location` (of `size` bytes), parsed into up to `factor` times its size, does not fit
    /// this share.
    pub fn too_large_to_parse(&self, location: &str, size: u64, factor: u64) -> Error {
        let factor = factor.max(1);
        Error::TooLarge {
            location: location.to_string(),
            size,
            limit: self.read_bytes / factor,
            memory: self.describe(),
            fits_alone: self.shared_by > 1 && size.saturating_mul(factor) <= self.whole_read_bytes,
        }
    }
}

/// Room for reads, in KiB, rounded up; an object of more than 4 TiB does not get here.
fn kib(bytes: u64) -> u32 {
    u32::try_from(bytes.div_ceil(KIB)).unwrap_or(u32::MAX)
}

/// Room taken for one object: given back when the bytes it is handed to are dropped.
#[derive(Debug)]
pub struct Reservation {
    permit: Option<OwnedSemaphorePermit>,
}

impl Reservation {
    /// The room held, in bytes (a multiple of 1 KiB; 0 for a small read).
    pub fn bytes(&self) -> u64 {
        self.permit
            .as_ref()
            .map_or(0, |p| p.num_permits() as u64 * KIB)
    }

    /// `bytes`, holding the room until its last copy (or slice) is dropped.
    pub fn holding(self, bytes: Bytes) -> Bytes {
        match self.permit {
            None => bytes,
            Some(permit) => Bytes::from_owner(Held {
                bytes,
                _permit: permit,
            }),
        }
    }
}

impl Reservation {
    /// `bytes`, holding `room` (taken for several byte ranges at once) until the last of
    /// them is dropped.
    pub fn shared(room: Arc<Reservation>, bytes: Bytes) -> Bytes {
        Bytes::from_owner(SharedHeld { bytes, _room: room })
    }
}

/// Bytes holding a room taken with others.
struct SharedHeld {
    bytes: Bytes,
    _room: Arc<Reservation>,
}

impl AsRef<[u8]> for SharedHeld {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

/// Bytes with the room they take.
struct Held {
    bytes: Bytes,
    _permit: OwnedSemaphorePermit,
}

impl AsRef<[u8]> for Held {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

/// The largest answer a service (an Iceberg REST catalog, Unity Catalog, an OAuth2 token
/// endpoint) may send: far more than a table's metadata or a page of a listing.
pub const MAX_RESPONSE: u64 = 32 * MIB;

/// Why a response body was not read.
#[derive(Debug)]
pub enum BodyError<E> {
    /// It is larger than [`MAX_RESPONSE`] or the work's share holds.
    TooLarge(Error),
    /// Reading it failed.
    Read(E),
}

/// A response body (`declared`: its announced length), read chunk by chunk (`chunks`)
/// within the work's memory share: the room for it is taken before it is read, and a body
/// longer than [`MAX_RESPONSE`] (or the share's room) is refused, naming `what`, as soon as
/// it is known to be.
pub async fn read_body<E>(
    what: &str,
    declared: Option<u64>,
    chunks: impl futures::Stream<Item = std::result::Result<Bytes, E>>,
) -> std::result::Result<Bytes, BodyError<E>> {
    use futures::TryStreamExt;
    let share = current();
    let cap = MAX_RESPONSE.min(share.read_bytes());
    let too_large = |size: u64| {
        BodyError::TooLarge(Error::TooLarge {
            location: what.to_string(),
            size,
            limit: cap,
            memory: share.describe(),
            fits_alone: false,
        })
    };
    if let Some(size) = declared.filter(|size| *size > cap) {
        return Err(too_large(size));
    }
    let room = share
        .reserve(what, declared.unwrap_or(cap))
        .await
        .map_err(BodyError::TooLarge)?;
    let mut body = bytes::BytesMut::new();
    let mut chunks = std::pin::pin!(chunks);
    while let Some(chunk) = chunks.try_next().await.map_err(BodyError::Read)? {
        if (body.len() + chunk.len()) as u64 > cap {
            return Err(too_large((body.len() + chunk.len()) as u64));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(room.holding(body.freeze()))
}

/// An HTTP response's body, read as [`read_body`] reads one (`what`: the request, for the
/// message).
pub async fn read_response(
    what: &str,
    response: reqwest::Response,
) -> std::result::Result<Bytes, BodyError<reqwest::Error>> {
    let declared = response.content_length();
    let chunks = futures::stream::unfold(response, |mut response| async move {
        match response.chunk().await {
            Ok(Some(chunk)) => Some((Ok(chunk), response)),
            Ok(None) => None,
            Err(e) => Some((Err(e), response)),
        }
    });
    read_body(what, declared, chunks).await
}

tokio::task_local! {
    static CURRENT: Arc<MemoryShare>;
}

static PROCESS: OnceLock<Arc<MemoryShare>> = OnceLock::new();

/// Sets this process's budget (once, at start-up; later calls are ignored), and has the
/// allocator give freed memory back to the system.
pub fn install(share: MemoryShare) {
    give_back_freed_memory();
    let _ = PROCESS.set(Arc::new(share));
}

/// glibc's malloc keeps memory a thread freed for later allocations, up to a threshold that
/// grows with the largest block freed (to 32 MB per arena): the groups of a bootstrap, made
/// and freed one after another on two threads, left the process 80 MB above what it held
/// (peak 273 MB at MEMORY_SIZE=256 for 1,000,000 files; 192 MB with a fixed threshold, at
/// the same speed: `tests/bench/scale.py`). A fixed threshold of 1 MB gives it back.
fn give_back_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a tunable of glibc's allocator; it is called at start-up,
    // before the budget is in use, and any value is valid for M_TRIM_THRESHOLD.
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 20);
    }
}

/// The budget of this process: installed, else [`MemoryShare::unbounded`].
pub fn process() -> Arc<MemoryShare> {
    PROCESS
        .get_or_init(|| Arc::new(MemoryShare::unbounded()))
        .clone()
}

/// The share the current work runs within ([`within`]), else the whole budget.
pub fn current() -> Arc<MemoryShare> {
    CURRENT.try_with(Arc::clone).unwrap_or_else(|_| process())
}

/// Runs `work` within `share`: its reads take their room from it. A task it spawns runs
/// within the process's budget unless it is handed the share again.
pub async fn within<F: Future>(share: Arc<MemoryShare>, work: F) -> F::Output {
    CURRENT.scope(share, work).await
}

/// A share given out to several works at once, each within its own part; a work that needs
/// more than its part (an object larger than its room) runs again alone, within the whole
/// share, once the others are done. The caller runs at most `parts` works at once.
#[derive(Debug)]
pub struct SharedOut {
    whole: Arc<MemoryShare>,
    parts: u32,
    /// Works within a part hold it shared; a work run alone holds it exclusively. Fair:
    /// a work waiting to run alone goes before works that start after it.
    alone: RwLock<()>,
}

impl SharedOut {
    /// `whole` given out in `parts` parts.
    pub fn new(whole: Arc<MemoryShare>, parts: usize) -> Self {
        Self {
            whole,
            parts: u32::try_from(parts).unwrap_or(u32::MAX).max(1),
            alone: RwLock::new(()),
        }
    }

    /// Runs `work` within one part of the share.
    pub async fn within_part<F: Future>(&self, work: F) -> F::Output {
        let _beside_others = self.alone.read().await;
        within(Arc::new(self.whole.part(self.parts)), work).await
    }

    /// Runs `work` within one part of the share; when it fails because an object did not
    /// fit its part but fits the whole share (`needs_more`), runs it again alone.
    pub async fn run<T, E, Fut>(
        &self,
        work: impl Fn() -> Fut,
        needs_more: impl Fn(&E) -> bool,
    ) -> std::result::Result<T, E>
    where
        Fut: Future<Output = std::result::Result<T, E>>,
    {
        let first = self.within_part(work()).await;
        match first {
            Err(e) if self.parts > 1 && needs_more(&e) => {
                let _alone = self.alone.write().await;
                tracing::info!(
                    parts = self.parts,
                    "a table's work needs more memory than its part of the budget: running it again alone"
                );
                within(self.whole.clone(), work()).await
            }
            done => done,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_grows_with_memory_and_a_part_is_a_fraction_of_it() {
        let small = MemoryShare::for_memory_mb(128);
        let default = MemoryShare::for_memory_mb(1024);
        let large = MemoryShare::for_memory_mb(10240);
        assert_eq!(small.read_bytes(), 96 * MIB / 100 * 40);
        assert_eq!(large.read_bytes(), MAX_READ);
        assert!(small.held_files() < default.held_files());
        assert!(default.held_files() < large.held_files());
        // Reads and held files stay inside three quarters of the memory.
        for share in [&small, &default, &large] {
            let mb = share.memory_mb().unwrap();
            assert!(
                share.held_files() * BYTES_PER_HELD_FILE + share.read_bytes() <= mb * MIB * 3 / 4
            );
        }
        let part = default.part(4);
        assert_eq!(part.shared_by(), 4);
        assert!(part.read_bytes() * 4 <= default.read_bytes() + MIB);
        assert!(
            part.describe().contains("shared by 4 tables"),
            "{}",
            part.describe()
        );
    }

    #[test]
    fn even_a_tiny_memory_reads_something() {
        let tiny = MemoryShare::for_memory_mb(0);
        assert_eq!(tiny.read_bytes(), MIB);
        assert_eq!(tiny.held_files(), 1);
    }

    #[tokio::test]
    async fn an_object_larger_than_a_part_is_refused_and_said_to_fit_alone() {
        let whole = MemoryShare::for_memory_mb(128);
        let part = whole.part(4);
        let size = part.read_bytes() + 1;
        match part.reserve("s3://lake/a/_delta_log/1.json", size).await {
            Err(Error::TooLarge { fits_alone, .. }) => assert!(fits_alone),
            other => panic!("{other:?}"),
        }
        match whole
            .reserve("s3://lake/a/_delta_log/1.json", whole.read_bytes() + 1)
            .await
        {
            Err(Error::TooLarge { fits_alone, .. }) => assert!(!fits_alone),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_read_waits_for_room_and_the_bytes_give_it_back_when_dropped() {
        let share = MemoryShare::for_memory_mb(10);
        let room = share.read_bytes();
        let first = share.reserve("a", room).await.unwrap();
        let bytes = first.holding(Bytes::from(vec![1u8; 4]));
        let slice = bytes.slice(1..2);
        drop(bytes);
        // The slice still holds the room: the second read waits.
        let waiting = share.reserve("b", room);
        tokio::pin!(waiting);
        assert!(
            futures::poll!(waiting.as_mut()).is_pending(),
            "the room is held while any copy of the bytes lives"
        );
        drop(slice);
        assert!(waiting.await.is_ok());
    }

    #[tokio::test]
    async fn growing_room_never_waits_while_holding_room() {
        let share = MemoryShare::for_memory_mb(10);
        let room = share.read_bytes();
        let mut first = share.reserve("a", room / 2).await.unwrap();
        let second = share.reserve("b", room / 2).await.unwrap();
        // Free room is taken at once; none free: the room held is given back while waiting,
        // so the second read can be done and give its back.
        {
            let growing = share.grow("a", room / 2, &mut first, room);
            tokio::pin!(growing);
            assert!(futures::poll!(growing.as_mut()).is_pending());
            drop(second);
            growing.await.unwrap();
        }
        assert_eq!(first.bytes(), room.div_ceil(KIB) * KIB);
        match share.grow("a", room, &mut first, room + 2 * KIB).await {
            Err(Error::TooLargeParsed { parsed, .. }) => assert_eq!(parsed, room + 2 * KIB),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn small_reads_take_no_room() {
        let share = MemoryShare::for_memory_mb(10);
        let _all = share.reserve("a", share.read_bytes()).await.unwrap();
        let small = share.reserve("b", SMALL_READ);
        tokio::pin!(small);
        assert!(futures::poll!(small.as_mut()).is_ready());
    }

    #[tokio::test]
    async fn work_within_a_share_reads_from_it_and_a_work_that_needs_more_runs_alone() {
        let whole = Arc::new(MemoryShare::for_memory_mb(128));
        assert!(current().bytes.is_none() || current().memory_mb.is_some());
        let shared = SharedOut::new(whole.clone(), 4);
        let big = whole.read_bytes() / 2;
        let tried = std::sync::atomic::AtomicU32::new(0);
        let read_bytes = shared
            .run(
                || async {
                    tried.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let share = current();
                    share.reserve("big", big).await.map(|_| share.read_bytes())
                },
                |e: &Error| {
                    matches!(
                        e,
                        Error::TooLarge {
                            fits_alone: true,
                            ..
                        }
                    )
                },
            )
            .await
            .unwrap();
        assert_eq!(
            read_bytes,
            whole.read_bytes(),
            "the second run had the whole share"
        );
        assert_eq!(tried.load(std::sync::atomic::Ordering::Relaxed), 2);
    }
}
