//! Initial sync: a copy of a member's data as of one log entry (Raft's snapshot), written
//! to a file, sent to a member that needs entries the log no longer holds (a new member,
//! or one that was away longer than the oplog reaches back), and loaded there in place of
//! its data.
//!
//! A copy holds every key of the catalog, records and indexes spaces and the replicated
//! part of the replication space (what has been applied, the config, the membership and
//! the table of retryable writes), read from one engine snapshot, so it is consistent
//! with the applied entry it names. It is streamed to and from disk, never held in
//! memory. A member that has no data yet loads it by ingestion (sorted tables written
//! directly, as `basalt import` does) while it arrives: a thread reads the file as the
//! primary's pieces land in it ([`StreamingLoad`]), so receiving and loading overlap. One
//! that has data deletes it and writes the copy in batches once all of it is there. A
//! marker makes a load that a crash interrupted start over from nothing; the replicated
//! state is written last, so the member counts the copy as applied only once all of it is
//! stored.

use crate::log_store::{read_error, write_error};
use basalt_storage::{Durability, Engine, ScanStart, Snapshot, Space, WriteBatch};
use lz4_flex::frame::{FrameDecoder, FrameEncoder, FrameInfo};
use openraft::StorageError;
use parking_lot::Mutex;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The first bytes of a copy, with the format's version; the copy's size in bytes
/// follows (so a member loading it can tell how far it has come), then its records as
/// one LZ4 frame (a third of the bytes to write, send and read again, at a cost the
/// scan of the data hides).
const MAGIC: &[u8; 8] = b"BSLTSYN2";
/// Marks the end of the records; the count of records follows.
const END: u8 = 0xFF;
/// Bytes of records loaded per batch (each ingested batch is a table of its own; the
/// tests use small ones, to load a copy in many).
const LOAD_BATCH_BYTES: usize = if cfg!(test) { 4 << 10 } else { 128 << 20 };
/// Keys deleted per batch when a member's old data is cleared.
const CLEAR_BATCH_KEYS: usize = 10_000;
/// How long a copy loaded as it arrives waits for its next bytes before it gives up (the
/// primary's wait for a piece's answer).
const PIECE_WAIT: Duration = Duration::from_secs(120);
/// How often a copy loaded as it arrives looks for more bytes at its end.
const TAIL_POLL: Duration = Duration::from_millis(2);

/// The spaces copied whole.
const DATA_SPACES: [Space; 3] = [Space::Catalog, Space::Records, Space::Indexes];

/// Keys of the replication space that are replicated state (the rest — the log, the
/// vote, the member's identity — belong to the member).
pub(crate) const REPLICATED_KEYS: [&[u8]; 3] = [b"applied", b"membership", b"config"];
/// The prefix of the replicated keys of the table of retryable writes.
pub(crate) const SESSION_PREFIX: &[u8] = b"session/";

/// Where a member keeps its copies: `replication-snapshots` in its data directory.
pub(crate) fn directory(dbpath: &Path) -> PathBuf {
    dbpath.join("replication-snapshots")
}

/// A file name no other copy has: `prefix-<nanoseconds>`.
pub(crate) fn new_file(directory: &Path, prefix: &str) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(directory)?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    Ok(directory.join(format!("{prefix}-{nanos}")))
}

/// The name of a copy written or received whole begins with this; the others are
/// being written (or were, when a crash stopped them).
pub(crate) const COPY_PREFIX: &str = "snapshot-";

/// Deletes the files of `directory` that `doomed` picks.
fn remove_files(directory: &Path, doomed: impl Fn(&Path, &str) -> bool) {
    let Ok(entries) = std::fs::read_dir(directory) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if doomed(&path, &name.to_string_lossy()) {
            if let Err(e) = std::fs::remove_file(&path) {
                tracing::warn!("cannot remove {}: {e}", path.display());
            }
        }
    }
}

/// Deletes the copies `keep` supersedes (one being sent stays readable through its open
/// file).
pub(crate) fn remove_superseded(directory: &Path, keep: &Path) {
    remove_files(directory, |path, name| {
        name.starts_with(COPY_PREFIX) && path != keep
    });
}

/// Deletes what a crash left half written or received (at start, before Raft runs).
pub(crate) fn remove_unfinished(directory: &Path) {
    remove_files(directory, |_, name| !name.starts_with(COPY_PREFIX));
}

/// How far this member's load of a copy has come: `replSetGetStatus` reports it as
/// `initialSyncStatus`, and a member loading one is in STARTUP2 (no reads, no election).
#[derive(Default)]
pub(crate) struct SyncProgress {
    active: AtomicBool,
    /// When the load began: the wall clock to report, the monotonic one to measure.
    started: Mutex<Option<(bson::DateTime, Instant)>>,
    /// The copy's size, once its header is read.
    total_bytes: AtomicU64,
    /// Bytes of the copy read so far.
    read_bytes: AtomicU64,
}

/// What [`SyncProgress`] says of a load under way.
pub(crate) struct SyncFigures {
    pub(crate) started: bson::DateTime,
    pub(crate) elapsed: Duration,
    pub(crate) total_bytes: u64,
    pub(crate) read_bytes: u64,
}

impl SyncProgress {
    /// A load begins (its figures start from nothing).
    pub(crate) fn begin(&self) {
        *self.started.lock() = Some((bson::DateTime::now(), Instant::now()));
        for figure in [&self.total_bytes, &self.read_bytes] {
            figure.store(0, Ordering::Relaxed);
        }
        self.active.store(true, Ordering::Relaxed);
    }

    /// The load ended, stored or abandoned.
    pub(crate) fn end(&self) {
        self.active.store(false, Ordering::Relaxed);
    }

    pub(crate) fn active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// The figures of the load under way, if one is.
    pub(crate) fn figures(&self) -> Option<SyncFigures> {
        if !self.active() {
            return None;
        }
        let (started, at) = (*self.started.lock())?;
        Some(SyncFigures {
            started,
            elapsed: at.elapsed(),
            total_bytes: self.total_bytes.load(Ordering::Relaxed),
            read_bytes: self.read_bytes.load(Ordering::Relaxed),
        })
    }
}

/// Called with each record of a copy: its space, key and value.
type RecordVisitor<'a> = dyn FnMut(Space, &[u8], &[u8]) -> std::io::Result<()> + 'a;

/// Visits every key and value of `spaces` whole, then, with `replicated`, the
/// replicated keys of the replication space.
fn visit(
    snapshot: &dyn Snapshot,
    spaces: &[Space],
    replicated: bool,
    visit: &mut RecordVisitor<'_>,
) -> Result<(), StorageError<u64>> {
    let mut failure = None;
    let mut scan = |space: Space, prefix: &[u8]| {
        snapshot
            .scan_prefix(
                space,
                prefix,
                ScanStart::Beginning,
                &mut |key, value| match visit(space, key, value) {
                    Ok(()) => Ok(ControlFlow::Continue(())),
                    Err(e) => {
                        failure = Some(e);
                        Ok(ControlFlow::Break(()))
                    }
                },
            )
            .map_err(read_error)
    };
    for space in spaces {
        scan(*space, b"")?;
    }
    if replicated {
        scan(Space::Replication, SESSION_PREFIX)?;
        for key in REPLICATED_KEYS {
            if let Some(value) = snapshot.get(Space::Replication, key).map_err(read_error)? {
                visit(Space::Replication, key, &value).map_err(write_error)?;
            }
        }
    }
    failure.map_or(Ok(()), |e| Err(write_error(e)))
}

/// Writes the copy of `snapshot` to `path`, synced; returns the number of records. Two
/// threads share the work: this one scans the snapshot into blocks of records, another
/// compresses them and writes the file.
pub(crate) fn write(snapshot: &dyn Snapshot, path: &Path) -> Result<u64, StorageError<u64>> {
    let file = File::create(path).map_err(write_error)?;
    let (blocks, received) = std::sync::mpsc::sync_channel::<Vec<u8>>(WRITE_BLOCKS_IN_FLIGHT);
    std::thread::scope(|scope| {
        let writer = std::thread::Builder::new()
            .name("copy-writer".into())
            .spawn_scoped(scope, move || compress_into(file, received))
            .map_err(write_error)?;
        let mut block = Vec::with_capacity(WRITE_BLOCK_BYTES);
        let mut count = 0u64;
        let scanned = visit(snapshot, &DATA_SPACES, true, &mut |space, key, value| {
            block.push(space.position() as u8);
            write_bytes(&mut block, key)?;
            write_bytes(&mut block, value)?;
            count += 1;
            if block.len() >= WRITE_BLOCK_BYTES {
                let full = std::mem::replace(&mut block, Vec::with_capacity(WRITE_BLOCK_BYTES));
                // The writer stopped: its error is the one to report.
                blocks
                    .send(full)
                    .map_err(|_| std::io::Error::other("the copy's writer stopped"))?;
            }
            Ok(())
        });
        if scanned.is_ok() {
            block.push(END);
            block.extend_from_slice(&count.to_le_bytes());
            let _ = blocks.send(block);
        }
        drop(blocks);
        let written = writer
            .join()
            .map_err(|_| write_error("the copy's writer panicked"))?;
        // A writer that failed stopped the scan; a scan that failed leaves the file
        // without its end.
        written.map_err(write_error)?;
        scanned?;
        Ok(count)
    })
}

/// Bytes of records handed from the scan to the writer at a time, and how many such
/// blocks may wait between them.
const WRITE_BLOCK_BYTES: usize = 1 << 20;
const WRITE_BLOCKS_IN_FLIGHT: usize = 8;

/// The writer of [`write`]: the header, the blocks it receives as one LZ4 frame (with a
/// checksum of its content), then the size in the header, synced. The scan ends the
/// records by closing the channel after its last block.
fn compress_into(file: File, blocks: std::sync::mpsc::Receiver<Vec<u8>>) -> std::io::Result<()> {
    let mut out = BufWriter::with_capacity(1 << 20, file);
    out.write_all(MAGIC)?;
    // The size, known at the end.
    out.write_all(&0u64.to_le_bytes())?;
    let mut out = FrameEncoder::with_frame_info(FrameInfo::new().content_checksum(true), out);
    for block in blocks {
        out.write_all(&block)?;
    }
    let out = out.finish().map_err(std::io::Error::other)?;
    let mut file = out.into_inner().map_err(|e| e.into_error())?;
    let size = file.stream_position()?;
    file.seek(SeekFrom::Start(MAGIC.len() as u64))?;
    file.write_all(&size.to_le_bytes())?;
    file.sync_all()
}

fn write_bytes(out: &mut impl Write, bytes: &[u8]) -> std::io::Result<()> {
    let length = u32::try_from(bytes.len()).map_err(std::io::Error::other)?;
    out.write_all(&length.to_le_bytes())?;
    out.write_all(bytes)
}

fn read_bytes(input: &mut impl Read) -> std::io::Result<Vec<u8>> {
    let mut length = [0u8; 4];
    input.read_exact(&mut length)?;
    let mut bytes = vec![0u8; u32::from_le_bytes(length) as usize];
    input.read_exact(&mut bytes)?;
    Ok(bytes)
}

/// Whether the member holds no data at all (a new member): then a copy is ingested, and
/// loaded while it arrives.
pub(crate) fn holds_no_data(engine: &dyn Engine) -> Result<bool, StorageError<u64>> {
    let snapshot = engine.snapshot();
    for space in DATA_SPACES {
        let mut any = false;
        snapshot
            .scan_prefix(space, b"", ScanStart::Beginning, &mut |_, _| {
                any = true;
                Ok(ControlFlow::Break(()))
            })
            .map_err(read_error)?;
        if any {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Deletes the member's data and, with `replicated`, its replicated state (all that a
/// copy replaces; without it, what a copy loaded in part left).
pub(crate) fn clear(engine: &dyn Engine, replicated: bool) -> Result<(), StorageError<u64>> {
    let mut batch = WriteBatch::default();
    let flush = |batch: &mut WriteBatch| {
        engine
            .write(std::mem::take(batch), Durability::Process)
            .map_err(write_error)
    };
    let snapshot = engine.snapshot();
    visit(
        &*snapshot,
        &DATA_SPACES,
        replicated,
        &mut |space, key, _| {
            batch.delete(space, key.to_vec());
            if batch.ops.len() >= CLEAR_BATCH_KEYS {
                flush(&mut batch).map_err(std::io::Error::other)?;
            }
            Ok(())
        },
    )?;
    flush(&mut batch)
}

/// Counts the bytes read through it.
struct Counted<R> {
    input: R,
    progress: Arc<SyncProgress>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.input.read(buf)?;
        self.progress
            .read_bytes
            .fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// What reading a copy gives: its number of records and the replication space's ones.
type ReadCopy = (u64, WriteBatch);

/// Reads a copy from `input`: the data spaces' records are stored by `store` in batches,
/// the replication space's are added to `replicated`, which is returned with the number
/// of records.
fn read_copy(
    input: impl Read,
    progress: &Arc<SyncProgress>,
    store: &mut dyn FnMut(WriteBatch) -> Result<(), StorageError<u64>>,
    mut replicated: WriteBatch,
) -> Result<ReadCopy, StorageError<u64>> {
    let mut input = BufReader::with_capacity(
        1 << 20,
        Counted {
            input,
            progress: progress.clone(),
        },
    );
    let mut header = [0u8; 16];
    input.read_exact(&mut header).map_err(read_error)?;
    if &header[..8] != MAGIC {
        return Err(read_error("not a replica set copy (bad magic bytes)"));
    }
    let size = u64::from_le_bytes(header[8..].try_into().unwrap_or_default());
    progress.total_bytes.store(size, Ordering::Relaxed);
    let mut input = FrameDecoder::new(input);
    let mut data = WriteBatch::default();
    let mut data_bytes = 0usize;
    let mut count = 0u64;
    loop {
        let mut tag = [0u8; 1];
        input.read_exact(&mut tag).map_err(read_error)?;
        if tag[0] == END {
            break;
        }
        let space = Space::ALL
            .get(usize::from(tag[0]))
            .copied()
            .ok_or_else(|| read_error(format!("a copy's record in space {}", tag[0])))?;
        let key = read_bytes(&mut input).map_err(read_error)?;
        let value = read_bytes(&mut input).map_err(read_error)?;
        count += 1;
        if space == Space::Replication {
            replicated.put(space, key, value);
            continue;
        }
        data_bytes += key.len() + value.len();
        data.put(space, key, value);
        if data_bytes >= LOAD_BATCH_BYTES {
            store(std::mem::take(&mut data))?;
            data_bytes = 0;
        }
    }
    let mut expected = [0u8; 8];
    input.read_exact(&mut expected).map_err(read_error)?;
    // The frame's end (and its checksum) follows the count.
    if u64::from_le_bytes(expected) != count || input.read(&mut [0u8; 1]).ok() != Some(0) {
        return Err(read_error("a replica set copy that is cut short"));
    }
    if !data.is_empty() {
        store(data)?;
    }
    Ok((count, replicated))
}

/// Stores a copy's data into a member that holds none: sorted tables, ingested.
fn ingest(engine: &dyn Engine) -> impl FnMut(WriteBatch) -> Result<(), StorageError<u64>> + '_ {
    |batch| engine.ingest(batch).map_err(write_error)
}

/// Loads the copy at `path` in place of the member's data. The replication space's
/// records are written last, with `last` (the marker's removal), so the member counts
/// the copy as applied only once all of it is stored. Returns the number of records.
pub(crate) fn load(
    engine: &dyn Engine,
    path: &Path,
    last: WriteBatch,
    progress: &Arc<SyncProgress>,
) -> Result<u64, StorageError<u64>> {
    let fresh = holds_no_data(engine)?;
    if !fresh {
        clear(engine, true)?;
    }
    let input = File::open(path).map_err(read_error)?;
    let mut write = |batch: WriteBatch| {
        engine
            .write(batch, Durability::Process)
            .map_err(write_error)
    };
    let (count, replicated) = if fresh {
        read_copy(input, progress, &mut ingest(engine), last)?
    } else {
        read_copy(input, progress, &mut write, last)?
    };
    engine
        .write(replicated, Durability::Disk)
        .map_err(write_error)?;
    Ok(count)
}

/// Where the transfer of a copy loaded as it arrives stands.
const RECEIVING: u8 = 0;
const RECEIVED: u8 = 1;
const ABANDONED: u8 = 2;

/// Reads a file that is still being written: at its end it waits for more until the
/// transfer is complete (then the end is the end) or abandoned.
struct Tail {
    file: File,
    transfer: Arc<AtomicU8>,
}

impl Read for Tail {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let waiting_since = Instant::now();
        loop {
            // Read the state first: bytes written before it became RECEIVED are in the
            // file when the read below runs.
            let transfer = self.transfer.load(Ordering::Acquire);
            let n = self.file.read(buf)?;
            if n > 0 || transfer == RECEIVED {
                return Ok(n);
            }
            if transfer == ABANDONED {
                return Err(std::io::Error::other("the copy's transfer was abandoned"));
            }
            if waiting_since.elapsed() > PIECE_WAIT {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "no more of the copy arrived",
                ));
            }
            std::thread::sleep(TAIL_POLL);
        }
    }
}

/// A copy loaded into a member with no data while it is received: a thread reads the
/// file the primary's pieces are written to and ingests the records as they come. The
/// replication space's records wait for [`StreamingLoad::finish`], so until then the
/// member has not applied the copy (and a crash meanwhile makes it sync again: the
/// caller writes the marker before it starts one).
pub(crate) struct StreamingLoad {
    engine: Arc<dyn Engine>,
    transfer: Arc<AtomicU8>,
    thread: Option<std::thread::JoinHandle<Result<ReadCopy, StorageError<u64>>>>,
}

impl StreamingLoad {
    /// Starts loading the copy being received at `path` into `engine`, which holds no
    /// data.
    pub(crate) fn start(
        engine: Arc<dyn Engine>,
        path: &Path,
        progress: Arc<SyncProgress>,
    ) -> std::io::Result<StreamingLoad> {
        let transfer = Arc::new(AtomicU8::new(RECEIVING));
        let input = Tail {
            file: File::open(path)?,
            transfer: transfer.clone(),
        };
        let loading = engine.clone();
        let thread = std::thread::Builder::new()
            .name("initial-sync".into())
            .spawn(move || {
                read_copy(
                    input,
                    &progress,
                    &mut ingest(&*loading),
                    WriteBatch::default(),
                )
            })?;
        Ok(StreamingLoad {
            engine,
            transfer,
            thread: Some(thread),
        })
    }

    /// The whole copy is in its file: waits for the rest of it to be loaded, then writes
    /// the replication space's records with `last`. Returns the number of records. On an
    /// error the member holds part of the copy (the caller loads it again from the file).
    pub(crate) fn finish(mut self, last: WriteBatch) -> Result<u64, StorageError<u64>> {
        self.transfer.store(RECEIVED, Ordering::Release);
        let thread = self.thread.take().expect("a load's thread is joined once");
        let (count, mut replicated) = thread
            .join()
            .map_err(|_| write_error("the copy's loader panicked"))??;
        replicated.ops.extend(last.ops);
        self.engine
            .write(replicated, Durability::Disk)
            .map_err(write_error)?;
        Ok(count)
    }

    /// The transfer stopped (another copy comes, or log entries instead): stops the load
    /// and deletes what it stored, which leaves the member as it was before.
    pub(crate) fn abandon(mut self) -> Result<(), StorageError<u64>> {
        self.transfer.store(ABANDONED, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        clear(&*self.engine, false)
    }
}

impl Drop for StreamingLoad {
    /// A member shutting down mid-transfer: the thread stops at its next wait (the
    /// marker makes the member sync again when it starts).
    fn drop(&mut self) {
        self.transfer.store(ABANDONED, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use basalt_storage::MemoryEngine;

    fn engine_with(records: &[(Space, &[u8], &[u8])]) -> MemoryEngine {
        let engine = MemoryEngine::default();
        let mut batch = WriteBatch::default();
        for (space, key, value) in records {
            batch.put(*space, key.to_vec(), value.to_vec());
        }
        engine.write(batch, Durability::Process).unwrap();
        engine
    }

    fn all(engine: &dyn Engine, space: Space) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        engine
            .snapshot()
            .scan_prefix(space, b"", ScanStart::Beginning, &mut |k, v| {
                out.push((k.to_vec(), v.to_vec()));
                Ok(ControlFlow::Continue(()))
            })
            .unwrap();
        out
    }

    #[test]
    fn a_copy_replaces_data_and_replicated_state_but_not_the_members_own() {
        let source = engine_with(&[
            (Space::Catalog, b"c1", b"meta"),
            (Space::Records, b"r1", b"doc1"),
            (Space::Records, b"r2", b"doc2"),
            (Space::Indexes, b"i1", b""),
            (Space::Replication, b"applied", b"A"),
            (Space::Replication, b"session/x", b"S"),
            (Space::Replication, b"log/1", b"entry"),
            (Space::Replication, b"vote", b"V"),
        ]);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("copy");
        assert_eq!(write(&*source.snapshot(), &path).unwrap(), 6);

        // A member with data of its own: the copy replaces it.
        let target = engine_with(&[
            (Space::Records, b"r0", b"old"),
            (Space::Records, b"r1", b"stale"),
            (Space::Replication, b"session/y", b"T"),
            (Space::Replication, b"vote", b"mine"),
            (Space::Replication, b"installing", b""),
        ]);
        let mut last = WriteBatch::default();
        last.delete(Space::Replication, b"installing".to_vec());
        assert_eq!(load(&target, &path, last, &Arc::default()).unwrap(), 6);
        assert_eq!(all(&target, Space::Records), all(&source, Space::Records));
        assert_eq!(all(&target, Space::Catalog), all(&source, Space::Catalog));
        assert_eq!(all(&target, Space::Indexes), all(&source, Space::Indexes));
        let replication: Vec<Vec<u8>> = all(&target, Space::Replication)
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(
            replication,
            vec![b"applied".to_vec(), b"session/x".to_vec(), b"vote".to_vec()]
        );

        // A new member ingests it.
        let empty = MemoryEngine::default();
        load(&empty, &path, WriteBatch::default(), &Arc::default()).unwrap();
        assert_eq!(all(&empty, Space::Records), all(&source, Space::Records));
    }

    #[test]
    fn a_truncated_copy_is_refused() {
        let source = engine_with(&[(Space::Records, b"r1", b"doc1")]);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("copy");
        write(&*source.snapshot(), &path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let refused = |copy: &[u8]| {
            std::fs::write(&path, copy).unwrap();
            load(
                &MemoryEngine::default(),
                &path,
                WriteBatch::default(),
                &Arc::default(),
            )
            .is_err()
        };
        assert!(refused(&bytes[..bytes.len() - 3]));
        assert!(refused(b"garbage!garbage"));
    }

    /// Writes the copy at `from` to `to` in pieces, as the primary's arrive, pausing
    /// between them; returns when all of it is written.
    fn trickle(from: &Path, to: &Path, pieces: usize) -> std::thread::JoinHandle<()> {
        let bytes = std::fs::read(from).unwrap();
        let mut out = std::fs::OpenOptions::new().append(true).open(to).unwrap();
        std::thread::spawn(move || {
            for piece in bytes.chunks(bytes.len().div_ceil(pieces)) {
                std::thread::sleep(Duration::from_millis(20));
                out.write_all(piece).unwrap();
            }
        })
    }

    fn source() -> MemoryEngine {
        let values: Vec<(Vec<u8>, Vec<u8>)> = (0..500u32)
            .map(|i| (i.to_be_bytes().to_vec(), vec![i as u8; 100]))
            .collect();
        let mut records: Vec<(Space, &[u8], &[u8])> = values
            .iter()
            .map(|(k, v)| (Space::Records, k.as_slice(), v.as_slice()))
            .collect();
        records.push((Space::Catalog, b"c1", b"meta"));
        records.push((Space::Replication, b"applied", b"A"));
        engine_with(&records)
    }

    #[test]
    fn a_copy_is_loaded_while_it_arrives() {
        let source = source();
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("copy");
        assert_eq!(write(&*source.snapshot(), &copy).unwrap(), 502);
        let receiving = dir.path().join("receiving");
        File::create(&receiving).unwrap();

        let target: Arc<dyn Engine> = Arc::new(MemoryEngine::default());
        let progress = Arc::new(SyncProgress::default());
        progress.begin();
        let load = StreamingLoad::start(target.clone(), &receiving, progress.clone()).unwrap();
        trickle(&copy, &receiving, 7).join().unwrap();
        // Until it finishes, the replicated state is not written.
        let mut last = WriteBatch::default();
        last.put(Space::Replication, b"snapshot".to_vec(), b"S".to_vec());
        assert_eq!(load.finish(last).unwrap(), 502);
        assert_eq!(all(&*target, Space::Records), all(&source, Space::Records));
        assert_eq!(all(&*target, Space::Catalog), all(&source, Space::Catalog));
        let replication: Vec<Vec<u8>> = all(&*target, Space::Replication)
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(replication, vec![b"applied".to_vec(), b"snapshot".to_vec()]);
        let figures = progress.figures().unwrap();
        let size = std::fs::metadata(&copy).unwrap().len();
        assert_eq!((figures.total_bytes, figures.read_bytes), (size, size));
    }

    #[test]
    fn an_abandoned_transfer_leaves_the_member_as_it_was() {
        let source = source();
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("copy");
        write(&*source.snapshot(), &copy).unwrap();
        let bytes = std::fs::read(&copy).unwrap();
        let receiving = dir.path().join("receiving");
        // Half of it arrives, then no more.
        std::fs::write(&receiving, &bytes[..bytes.len() / 2]).unwrap();
        let target = engine_with(&[(Space::Replication, b"config", b"mine")]);
        let target: Arc<dyn Engine> = Arc::new(target);
        let load = StreamingLoad::start(target.clone(), &receiving, Arc::default()).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        load.abandon().unwrap();
        assert!(holds_no_data(&*target).unwrap());
        assert_eq!(
            all(&*target, Space::Replication),
            vec![(b"config".to_vec(), b"mine".to_vec())]
        );

        // A copy cut short fails when the transfer says it is complete.
        let load = StreamingLoad::start(target.clone(), &receiving, Arc::default()).unwrap();
        assert!(load.finish(WriteBatch::default()).is_err());
    }

    #[test]
    fn a_copy_changed_on_the_way_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("copy");
        write(&*source().snapshot(), &path).unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x20;
        std::fs::write(&path, &bytes).unwrap();
        let target = MemoryEngine::default();
        assert!(load(&target, &path, WriteBatch::default(), &Arc::default()).is_err());
        // What it stored before it found out does not count as applied.
        assert!(all(&target, Space::Replication).is_empty());
    }
}
