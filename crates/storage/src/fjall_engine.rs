//! The disk engine: one fjall database under `--dbpath`, one keyspace per [`Space`],
//! LZ4 block compression (the field names every BSON document repeats compress well).
//!
//! Durability: every batch is written to fjall's journal and handed to the OS before the
//! write returns, so an acknowledged write survives `kill -9`; `Durability::Disk` also
//! fsyncs the journal.

use crate::{
    storage_error, Durability, Engine, KeyValueVisitor, ScanEnd, ScanStart, Snapshot, Space,
    WriteBatch, WriteOp,
};
use basalt_error::Result;
use fjall::config::{BlockSizePolicy, CompressionPolicy, FilterPolicy};
use fjall::{
    CompressionType, Database, Keyspace, KeyspaceCreateOptions, OwnedWriteBatch, PersistMode,
    Readable,
};
use parking_lot::RwLock;
use std::ops::Bound;
use std::path::Path;
use std::time::{Duration, Instant};

/// Level-0 tables at which an ingestion waits for compaction (where fjall halts writes),
/// and for how long at most.
const L0_TABLES_HALT: usize = 30;
const L0_TABLES_WAIT_MAX: Duration = Duration::from_secs(10);

pub struct FjallEngine {
    db: Database,
    keyspaces: [Keyspace; 3],
    /// Held shared while a snapshot is taken and exclusively while an ingestion makes
    /// its tables visible, one space after another: no snapshot falls between them.
    snapshot_gate: RwLock<()>,
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
    pub fn open_with_cache(path: &Path, cache_bytes: u64) -> Result<FjallEngine> {
        let db = Database::builder(path)
            .cache_size(cache_bytes)
            .open()
            .map_err(storage_error)?;
        let open = |space: Space| {
            db.keyspace(space.name(), || keyspace_options(space))
                .map_err(storage_error)
        };
        let keyspaces = [
            open(Space::Catalog)?,
            open(Space::Records)?,
            open(Space::Indexes)?,
        ];
        Ok(FjallEngine {
            db,
            keyspaces,
            snapshot_gate: RwLock::new(()),
        })
    }

    fn keyspace(&self, space: Space) -> &Keyspace {
        &self.keyspaces[space.position()]
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
        Space::Catalog => options,
    }
}

struct FjallSnapshot {
    snapshot: fjall::Snapshot,
    keyspaces: [Keyspace; 3],
}

impl FjallSnapshot {
    fn keyspace(&self, space: Space) -> &Keyspace {
        &self.keyspaces[space.position()]
    }
}

impl Engine for FjallEngine {
    fn snapshot(&self) -> Box<dyn Snapshot> {
        let _gate = self.snapshot_gate.read();
        Box::new(FjallSnapshot {
            snapshot: self.db.snapshot(),
            keyspaces: self.keyspaces.clone(),
        })
    }

    fn write(&self, batch: WriteBatch, durability: Durability) -> Result<()> {
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
        fjall_batch.commit().map_err(storage_error)
    }

    /// Each space's puts are written into new tables (compressed, fsynced) while readers
    /// and writers go on; then, with snapshots held off, fjall registers each space's
    /// tables at a sequence number of their own (flushing that space's memtable first, so
    /// older writes stay older). Tables are registered in the order of [`Space::ALL`].
    fn ingest(&self, batch: WriteBatch) -> Result<()> {
        let mut ingestions = Vec::new();
        for (keyspace, run) in self.keyspaces.iter().zip(crate::ingestion_runs(batch)?) {
            if run.is_empty() {
                continue;
            }
            // Each ingestion adds a level-0 table: wait for compaction as fjall makes its
            // own writes wait, rather than let reads wade through ever more tables (for a
            // while only: a compaction that cannot go on must not hang the writer).
            let waiting = Instant::now();
            while keyspace.l0_table_count() >= L0_TABLES_HALT
                && waiting.elapsed() < L0_TABLES_WAIT_MAX
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            let mut ingestion = keyspace.start_ingestion().map_err(storage_error)?;
            for (key, value) in run {
                ingestion.write(key, value).map_err(storage_error)?;
            }
            ingestions.push((keyspace, ingestion));
        }
        // `finish` flushes the space's memtable before registering the tables; flushing
        // it now leaves that one (snapshots held off) with only the latest writes.
        for (keyspace, _) in &ingestions {
            keyspace.rotate_memtable_and_wait().map_err(storage_error)?;
        }
        let _gate = self.snapshot_gate.write();
        for (_, ingestion) in ingestions {
            ingestion.finish().map_err(storage_error)?;
        }
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        self.db.persist(PersistMode::SyncAll).map_err(storage_error)
    }

    fn disk_size_bytes(&self) -> u64 {
        self.db.disk_space().unwrap_or(0)
    }
}

impl Snapshot for FjallSnapshot {
    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let value = self
            .snapshot
            .get(self.keyspace(space), key)
            .map_err(storage_error)?;
        Ok(value.map(|v| v.to_vec()))
    }

    fn scan_prefix(
        &self,
        space: Space,
        prefix: &[u8],
        start: ScanStart<'_>,
        visit: &mut KeyValueVisitor<'_>,
    ) -> Result<()> {
        let lower: Bound<&[u8]> = match start {
            ScanStart::Beginning => Bound::Included(prefix),
            ScanStart::After(key) => Bound::Excluded(key),
        };
        let upper_key = crate::prefix_upper_bound(prefix);
        let upper: Bound<&[u8]> = match &upper_key {
            Some(end) => Bound::Excluded(end.as_slice()),
            None => Bound::Unbounded,
        };
        for guard in self
            .snapshot
            .range::<&[u8], _>(self.keyspace(space), (lower, upper))
        {
            let (key, value) = guard.into_inner().map_err(storage_error)?;
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
        let Some(upper) = crate::back_scan_upper(prefix, end) else {
            return Ok(());
        };
        for guard in self
            .snapshot
            .range::<Vec<u8>, _>(
                self.keyspace(space),
                (Bound::Included(prefix.to_vec()), upper),
            )
            .rev()
        {
            let (key, value) = guard.into_inner().map_err(storage_error)?;
            if visit(&key, &value)?.is_break() {
                break;
            }
        }
        Ok(())
    }

    fn last_key_with_prefix(&self, space: Space, prefix: &[u8]) -> Result<Option<Vec<u8>>> {
        let upper_key = crate::prefix_upper_bound(prefix);
        let upper: Bound<&[u8]> = match &upper_key {
            Some(end) => Bound::Excluded(end.as_slice()),
            None => Bound::Unbounded,
        };
        match self
            .snapshot
            .range::<&[u8], _>(self.keyspace(space), (Bound::Included(prefix), upper))
            .next_back()
        {
            Some(guard) => Ok(Some(guard.key().map_err(storage_error)?.to_vec())),
            None => Ok(None),
        }
    }
}
