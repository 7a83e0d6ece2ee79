//! The disk engine: one fjall database under `--dbpath`, one keyspace per [`Space`],
//! LZ4 block compression (the field names every BSON document repeats compress well).
//!
//! Durability: every batch is written to fjall's journal and handed to the OS before the
//! write returns, so an acknowledged write survives `kill -9`; `Durability::Disk` also
//! fsyncs the journal. A write the machine fails (a full or read-only disk) stops all
//! writes until a restart, reads go on (see `faults.rs`).

use crate::faults::{Activity, Faults};
use crate::{
    Durability, Engine, KeyValueVisitor, ScanEnd, ScanStart, Snapshot, Space, WriteBatch, WriteOp,
};
use basalt_error::{Error, Result};
use fjall::config::{BlockSizePolicy, CompressionPolicy, FilterPolicy};
use fjall::{
    AbstractTree, CompressionType, Database, Keyspace, KeyspaceCreateOptions, OwnedWriteBatch,
    PersistMode, Readable,
};
use parking_lot::RwLock;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Level-0 tables at which an ingestion waits for compaction (where fjall halts writes),
/// and for how long at most.
const L0_TABLES_HALT: usize = 30;
const L0_TABLES_WAIT_MAX: Duration = Duration::from_secs(10);
/// How long an ingestion waits for the memtable it sealed to be flushed: far more than a
/// 64 MiB flush takes, so only a flush that will never finish runs into it.
const MEMTABLE_FLUSH_WAIT_MAX: Duration = Duration::from_secs(120);
/// How often those waits look again.
const WAIT_POLL_INTERVAL: Duration = Duration::from_millis(10);
/// How often a wait asks fjall whether it still takes writes.
const WRITABLE_PROBE_INTERVAL: Duration = Duration::from_millis(250);

pub struct FjallEngine {
    db: Database,
    keyspaces: [Keyspace; 4],
    /// Held shared while a snapshot is taken and exclusively while an ingestion makes
    /// its tables visible, one space after another: no snapshot falls between them.
    snapshot_gate: RwLock<()>,
    faults: Arc<Faults>,
}

/// The block cache when none is configured: as WiredTiger's, half of the memory less
/// 1 GB, and at least 256 MB. fjall's own default, 32 MiB, holds a few percent of a
/// 1 M-document collection; blocks are cached decompressed, so a scan of a collection
/// that fits reads no file and decompresses nothing, and an indexed point read finds its
/// blocks in memory.
pub fn default_cache_bytes() -> u64 {
    const MB: u64 = 1024 * 1024;
    let memory_mb = physical_memory_mb().unwrap_or(0);
    (memory_mb.saturating_sub(1024) / 2).max(256) * MB
}

/// The machine's memory, from `/proc/meminfo` where there is one.
pub fn physical_memory_mb() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024)
}

impl FjallEngine {
    /// Opens (or creates) the database at `path` with the default block cache.
    pub fn open(path: &Path) -> Result<FjallEngine> {
        FjallEngine::open_with_cache(path, default_cache_bytes())
    }

    /// Opens (or creates) the database at `path` with a block cache of `cache_bytes`.
    /// Fails with the error naming the condition (a read-only or full directory, a
    /// directory another server holds, corrupt files) rather than panicking.
    pub fn open_with_cache(path: &Path, cache_bytes: u64) -> Result<FjallEngine> {
        let faults = Arc::new(Faults::new(path));
        let opening = |e: fjall::Error| faults.describe(&e, Activity::Opening);
        let db = Database::builder(path)
            .cache_size(cache_bytes)
            .open()
            .map_err(opening)?;
        let open = |space: Space| {
            db.keyspace(space.name(), || keyspace_options(space))
                .map_err(opening)
        };
        let keyspaces = [
            open(Space::Catalog)?,
            open(Space::Records)?,
            open(Space::Indexes)?,
            open(Space::Replication)?,
        ];
        Ok(FjallEngine {
            db,
            keyspaces,
            snapshot_gate: RwLock::new(()),
            faults,
        })
    }

    fn keyspace(&self, space: Space) -> &Keyspace {
        &self.keyspaces[space.position()]
    }

    /// Errs once fjall refuses writes, also when a background flush or compaction
    /// poisoned it: what an ingestion, which fjall does not check, asks before it writes
    /// and while it waits for fjall's workers. Unlike `Faults::check_writable` it asks
    /// fjall (a journal flush under its lock), so waits call it only now and then.
    fn probe_writable(&self) -> Result<()> {
        self.faults.check_writable()?;
        self.db
            .persist(PersistMode::Buffer)
            .map_err(|e| self.faults.refuse(e, Activity::Journal))
    }

    /// Waits until `done` holds, at most `max`, checking every
    /// [`WRITABLE_PROBE_INTERVAL`] that fjall still takes writes (a worker that failed
    /// never makes `done` true); says whether it held.
    fn wait_for(&self, max: Duration, done: impl Fn() -> bool) -> Result<bool> {
        let waiting = Instant::now();
        let mut probed: Option<Instant> = None;
        while !done() {
            if probed.is_none_or(|at| at.elapsed() >= WRITABLE_PROBE_INTERVAL) {
                self.probe_writable()?;
                probed = Some(Instant::now());
            }
            if waiting.elapsed() >= max {
                return Ok(false);
            }
            std::thread::sleep(WAIT_POLL_INTERVAL);
        }
        Ok(true)
    }

    /// Seals the space's memtable and waits for fjall's workers to flush it (fjall's own
    /// `rotate_memtable_and_wait` waits forever when the flush fails).
    fn flush_memtable(&self, keyspace: &Keyspace) -> Result<()> {
        keyspace
            .rotate_memtable()
            .map_err(|e| self.faults.describe(&e, Activity::Ingestion))?;
        if self.wait_for(MEMTABLE_FLUSH_WAIT_MAX, || {
            keyspace.sealed_memtable_count() == 0
        })? {
            Ok(())
        } else {
            Err(Error::internal(format!(
                "a memtable flush did not finish within {} s",
                MEMTABLE_FLUSH_WAIT_MAX.as_secs()
            )))
        }
    }
}

/// A database that stopped taking writes is left open: the journal write that failed
/// may have left the rest of its batch in fjall's journal buffer, which closing writes
/// out when there is room again, and the batch, refused, would then come back at the
/// next start. Every acknowledged write is in the journal already.
impl Drop for FjallEngine {
    fn drop(&mut self) {
        if self.faults.is_refusing() {
            std::mem::forget(self.db.clone());
        }
    }
}

/// Per-space settings. Index entries are only ever range-scanned (a key's entries share a
/// prefix, never a whole key), so bloom filters over them would be built at every flush
/// and compaction and never asked. Records are point-read by ids taken from an index or
/// a scan, which exist, so the last level (most of the data) needs no filter either. A
/// bulk load spends a good part of its flushes building filters otherwise.
fn keyspace_options(space: Space) -> KeyspaceCreateOptions {
    let options = KeyspaceCreateOptions::default()
        .data_block_compression_policy(CompressionPolicy::all(CompressionType::Lz4));
    match space {
        Space::Indexes => options.filter_policy(FilterPolicy::disabled()),
        // Records: 32 KiB blocks (WiredTiger's leaf page size) rather than 4 KiB, so a
        // scan pays the per-block cache lookup and iterator set-up once per dozens of
        // documents instead of once per one or two.
        Space::Records => options
            .expect_point_read_hits(true)
            .data_block_size_policy(BlockSizePolicy::all(32 * 1024)),
        Space::Catalog | Space::Replication => options,
    }
}

struct FjallSnapshot {
    snapshot: fjall::Snapshot,
    keyspaces: [Keyspace; 4],
    faults: Arc<Faults>,
}

impl FjallSnapshot {
    fn keyspace(&self, space: Space) -> &Keyspace {
        &self.keyspaces[space.position()]
    }

    /// A read's failure: a corrupt block is DataCorruptionDetected.
    fn failed(&self, space: Space) -> impl Fn(fjall::Error) -> Error + '_ {
        move |e| self.faults.describe(&e, Activity::Reading(space))
    }
}

/// Refuses a batch with a key longer than fjall holds (65,535 bytes), which fjall would
/// panic on; the catalog refuses such index keys first (KeyTooLong).
fn check_key_lengths(batch: &WriteBatch) -> Result<()> {
    let longest = batch
        .ops
        .iter()
        .map(|op| match op {
            WriteOp::Put(_, key, _) | WriteOp::Delete(_, key) => key.len(),
        })
        .max()
        .unwrap_or(0);
    if longest > usize::from(u16::MAX) {
        return Err(Error::internal(format!(
            "a key of {longest} bytes is longer than the storage engine holds (65535)"
        )));
    }
    Ok(())
}

/// The longest key fjall holds; it panics on a longer one, also as a scan's bound.
const MAX_KEY_BYTES: usize = u16::MAX as usize;

/// A scan's lower bound that fjall accepts and that selects the same stored keys: past
/// a key longer than any stored one are the keys past its first `MAX_KEY_BYTES` bytes
/// (no stored key lies between the two).
fn storable_lower(bound: Bound<&[u8]>) -> Bound<&[u8]> {
    match bound {
        Bound::Included(key) | Bound::Excluded(key) if key.len() > MAX_KEY_BYTES => {
            Bound::Excluded(&key[..MAX_KEY_BYTES])
        }
        other => other,
    }
}

/// As [`storable_lower`], for an upper bound: below a key longer than any stored one
/// are the keys up to its first `MAX_KEY_BYTES` bytes.
fn storable_upper<K: AsRef<[u8]>>(bound: Bound<K>) -> Bound<Vec<u8>> {
    match bound {
        Bound::Included(key) | Bound::Excluded(key) if key.as_ref().len() > MAX_KEY_BYTES => {
            Bound::Included(key.as_ref()[..MAX_KEY_BYTES].to_vec())
        }
        Bound::Included(key) => Bound::Included(key.as_ref().to_vec()),
        Bound::Excluded(key) => Bound::Excluded(key.as_ref().to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl Engine for FjallEngine {
    fn snapshot(&self) -> Box<dyn Snapshot> {
        let _gate = self.snapshot_gate.read();
        Box::new(FjallSnapshot {
            snapshot: self.db.snapshot(),
            keyspaces: self.keyspaces.clone(),
            faults: self.faults.clone(),
        })
    }

    /// Every failure of a commit leaves fjall poisoned (it poisons itself when the
    /// journal write or flush fails), so it is a refusal of all writes from then on.
    fn write(&self, batch: WriteBatch, durability: Durability) -> Result<()> {
        self.faults.check_writable()?;
        check_key_lengths(&batch)?;
        let mode = match durability {
            Durability::Process => PersistMode::Buffer,
            Durability::Disk => PersistMode::SyncAll,
        };
        let mut fjall_batch =
            OwnedWriteBatch::with_capacity(self.db.clone(), batch.ops.len()).durability(Some(mode));
        for op in batch.ops {
            match op {
                WriteOp::Put(space, key, value) => {
                    fjall_batch.insert(self.keyspace(space), key, value)
                }
                WriteOp::Delete(space, key) => fjall_batch.remove(self.keyspace(space), key),
            }
        }
        fjall_batch
            .commit()
            .map_err(|e| self.faults.refuse(e, Activity::Journal))
    }

    /// Each space's puts are written into new tables (compressed, fsynced) while readers
    /// and writers go on; then, with snapshots held off, fjall registers each space's
    /// tables at a sequence number of their own (flushing that space's memtable first, so
    /// older writes stay older). Tables are registered in the order of [`Space::ALL`].
    /// A table that cannot be written (a full disk) fails the batch and stops nothing
    /// else: fjall deletes the tables left behind when it next opens.
    fn ingest(&self, batch: WriteBatch) -> Result<()> {
        self.probe_writable()?;
        check_key_lengths(&batch)?;
        let failed = |e: fjall::Error| self.faults.describe(&e, Activity::Ingestion);
        let mut ingestions = Vec::new();
        for (keyspace, run) in self.keyspaces.iter().zip(crate::ingestion_runs(batch)?) {
            if run.is_empty() {
                continue;
            }
            // Each ingestion adds a level-0 table: wait for compaction as fjall makes its
            // own writes wait, rather than let reads wade through ever more tables (for a
            // while only: a compaction that cannot go on must not hang the writer, which
            // then goes on with one more table).
            self.wait_for(L0_TABLES_WAIT_MAX, || {
                keyspace.l0_table_count() < L0_TABLES_HALT
            })?;
            let mut ingestion = keyspace.start_ingestion().map_err(failed)?;
            for (key, value) in run {
                ingestion.write(key, value).map_err(failed)?;
            }
            ingestions.push((keyspace, ingestion));
        }
        // `finish` flushes the space's memtable before registering the tables; flushing
        // it now leaves that one (snapshots held off) with only the latest writes.
        for (keyspace, _) in &ingestions {
            self.flush_memtable(keyspace)?;
        }
        // fjall registers tables whether or not it takes writes: a batch goes in only
        // while it does.
        self.probe_writable()?;
        let _gate = self.snapshot_gate.write();
        for (_, ingestion) in ingestions {
            ingestion.finish().map_err(failed)?;
        }
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        self.faults.check_writable()?;
        self.db
            .persist(PersistMode::SyncAll)
            .map_err(|e| self.faults.refuse(e, Activity::Sync))
    }

    fn disk_size_bytes(&self) -> u64 {
        self.db.disk_space().unwrap_or(0)
    }

    /// From the key ranges and file sizes of the keyspace's tables (public but hidden in
    /// lsm-tree 3.1's docs, pinned by the lock file): a table inside the prefix counts
    /// whole; one that straddles its bounds is read to count its entries inside.
    fn prefix_disk_bytes(&self, space: Space, prefix: &[u8]) -> u64 {
        let upper = crate::prefix_upper_bound(prefix);
        let outside = |key: &[u8]| key < prefix || upper.as_deref().is_some_and(|u| key >= u);
        let version = self.keyspace(space).tree.current_version();
        let mut bytes = 0;
        for table in version.iter_tables() {
            let meta = &table.metadata;
            let (first, last) = (meta.key_range.min(), meta.key_range.max());
            if &**last < prefix || upper.as_deref().is_some_and(|u| &**first >= u) {
                continue;
            }
            if !outside(first) && !outside(last) {
                bytes += meta.file_size;
                continue;
            }
            let lower = fjall::UserKey::from(prefix);
            let inside = match &upper {
                Some(u) => table
                    .range(lower..fjall::UserKey::from(u.as_slice()))
                    .count(),
                None => table.range(lower..).count(),
            } as u64;
            bytes += (u128::from(meta.file_size) * u128::from(inside)
                / u128::from(meta.item_count.max(1))) as u64;
        }
        bytes
    }

    /// From fjall's figures of its cache and write buffer (public but undocumented in
    /// fjall 3.1, pinned by the lock file).
    fn cache(&self) -> crate::CacheFigures {
        let dirty_bytes = self.db.write_buffer_size();
        crate::CacheFigures {
            capacity_bytes: self.db.cache_capacity(),
            cached_bytes: self.db.cache_size() + dirty_bytes,
            dirty_bytes,
        }
    }
}

impl Snapshot for FjallSnapshot {
    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if key.len() > MAX_KEY_BYTES {
            return Ok(None);
        }
        let value = self
            .snapshot
            .get(self.keyspace(space), key)
            .map_err(self.failed(space))?;
        Ok(value.map(|v| v.to_vec()))
    }

    fn scan_prefix(
        &self,
        space: Space,
        prefix: &[u8],
        start: ScanStart<'_>,
        visit: &mut KeyValueVisitor<'_>,
    ) -> Result<()> {
        // No stored key starts with a prefix longer than any key.
        if prefix.len() > MAX_KEY_BYTES {
            return Ok(());
        }
        let lower: Bound<&[u8]> = match start {
            ScanStart::Beginning => Bound::Included(prefix),
            ScanStart::After(key) => Bound::Excluded(key),
        };
        let upper_key = crate::prefix_upper_bound(prefix);
        let upper: Bound<&[u8]> = match &upper_key {
            Some(end) => Bound::Excluded(end.as_slice()),
            None => Bound::Unbounded,
        };
        let lower = storable_lower(lower).map(<[u8]>::to_vec);
        for guard in self
            .snapshot
            .range::<Vec<u8>, _>(self.keyspace(space), (lower, storable_upper(upper)))
        {
            let (key, value) = guard.into_inner().map_err(self.failed(space))?;
            if visit(&key, &value)?.is_break() {
                break;
            }
        }
        Ok(())
    }

    fn scan_prefix_back(
        &self,
        space: Space,
        prefix: &[u8],
        end: ScanEnd<'_>,
        visit: &mut KeyValueVisitor<'_>,
    ) -> Result<()> {
        // No stored key starts with a prefix longer than any key.
        if prefix.len() > MAX_KEY_BYTES {
            return Ok(());
        }
        let Some(upper) = crate::back_scan_upper(prefix, end) else {
            return Ok(());
        };
        let lower = storable_lower(Bound::Included(prefix)).map(<[u8]>::to_vec);
        for guard in self
            .snapshot
            .range::<Vec<u8>, _>(self.keyspace(space), (lower, storable_upper(upper)))
            .rev()
        {
            let (key, value) = guard.into_inner().map_err(self.failed(space))?;
            if visit(&key, &value)?.is_break() {
                break;
            }
        }
        Ok(())
    }

    fn last_key_with_prefix(&self, space: Space, prefix: &[u8]) -> Result<Option<Vec<u8>>> {
        if prefix.len() > MAX_KEY_BYTES {
            return Ok(None);
        }
        let upper_key = crate::prefix_upper_bound(prefix);
        let upper: Bound<&[u8]> = match &upper_key {
            Some(end) => Bound::Excluded(end.as_slice()),
            None => Bound::Unbounded,
        };
        let lower = storable_lower(Bound::Included(prefix)).map(<[u8]>::to_vec);
        match self
            .snapshot
            .range::<Vec<u8>, _>(self.keyspace(space), (lower, storable_upper(upper)))
            .next_back()
        {
            Some(guard) => Ok(Some(guard.key().map_err(self.failed(space))?.to_vec())),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A collection's share of the tables: whole tables inside its prefix, a counted
    /// share of one it shares with others, nothing for writes still in memory.
    #[test]
    fn prefix_disk_bytes_apportions_the_tables() {
        let dir = tempfile::tempdir().unwrap();
        let engine = FjallEngine::open(dir.path()).unwrap();
        let mut batch = WriteBatch::default();
        for i in 0..3000u32 {
            let (prefix, value) = if i % 4 == 0 { (b'q', 7) } else { (b'p', 3) };
            let mut key = vec![prefix];
            key.extend_from_slice(&i.to_be_bytes());
            batch.put(Space::Records, key, vec![value; 100]);
        }
        engine.ingest(batch).unwrap();
        let mut batch = WriteBatch::default();
        batch.put(Space::Records, b"s1".to_vec(), vec![0; 100]);
        engine.write(batch, Durability::Process).unwrap();

        let table_bytes = engine.keyspace(Space::Records).disk_space();
        let (p, q) = (
            engine.prefix_disk_bytes(Space::Records, b"p"),
            engine.prefix_disk_bytes(Space::Records, b"q"),
        );
        assert!(table_bytes > 0);
        assert_eq!(engine.prefix_disk_bytes(Space::Records, b""), table_bytes);
        assert!(
            (p + q).abs_diff(table_bytes) <= 1,
            "{p} + {q} vs {table_bytes}"
        );
        let ratio = p as f64 / q as f64;
        assert!(
            (ratio - 3.0).abs() < 0.01,
            "three entries of p for each of q: {ratio}"
        );
        assert_eq!(engine.prefix_disk_bytes(Space::Records, b"s"), 0);
        assert_eq!(engine.prefix_disk_bytes(Space::Indexes, b"p"), 0);
    }
}
