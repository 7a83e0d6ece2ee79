//! The storage engine interface: ordered key-value spaces, snapshots and atomic write
//! batches, with an fjall implementation for disk and an in-memory one for tests.
//!
//! Everything above this crate (catalog, query execution) speaks these traits only, so
//! another engine can stand beside fjall later. The engine knows nothing of documents,
//! collections or queries: keys and values are bytes.

mod faults;
mod fjall_engine;
mod memory_engine;
mod overlay;

pub use fjall_engine::{default_cache_bytes, physical_memory_mb, FjallEngine};
pub use memory_engine::MemoryEngine;
pub use overlay::{
    outside_write_scope, with_write_scope, write_scope, Buffered, Overlay, Pending, WriteScope,
};

use basalt_error::{Error, Result};
use std::ops::Bound;
use std::ops::ControlFlow;

/// The separate ordered key spaces Basalt keeps. Each is one LSM tree in fjall.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Space {
    /// Databases, collections, index specs and id counters.
    Catalog,
    /// Documents, keyed by `collection id | record id`.
    Records,
    /// Index entries, keyed by `index id | encoded key | record id`, with empty values.
    Indexes,
    /// A replica set member's own state: the Raft log, its vote, what it has applied and
    /// the table of retryable writes (`crates/repl`). Empty on a standalone.
    Replication,
}

impl Space {
    pub const ALL: [Space; 4] = [
        Space::Catalog,
        Space::Records,
        Space::Indexes,
        Space::Replication,
    ];

    /// Where the space is in [`Space::ALL`] (engines keep their spaces in that order).
    pub fn position(self) -> usize {
        match self {
            Space::Catalog => 0,
            Space::Records => 1,
            Space::Indexes => 2,
            Space::Replication => 3,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Space::Catalog => "catalog",
            Space::Records => "records",
            Space::Indexes => "indexes",
            Space::Replication => "replication",
        }
    }
}

/// Where a replica set member's oplog records are kept in [`Space::Replication`]: written
/// by the catalog as a member applies log entries (`basalt_catalog::oplog`), removed
/// with the log entries they came from (`basalt_repl`).
pub const OPLOG_PREFIX: &[u8] = b"oplog/";

/// How far a write must have travelled before it is acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// Handed to the operating system: survives the process being killed (`kill -9`),
    /// not a power loss. The default for every acknowledged write.
    Process,
    /// Synced to the disk (`j: true`).
    Disk,
}

/// One change inside a [`WriteBatch`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteOp {
    Put(Space, Vec<u8>, Vec<u8>),
    Delete(Space, Vec<u8>),
}

/// Changes applied all together or not at all.
#[derive(Clone, Debug, Default)]
pub struct WriteBatch {
    pub ops: Vec<WriteOp>,
}

impl WriteBatch {
    pub fn put(&mut self, space: Space, key: Vec<u8>, value: Vec<u8>) {
        self.ops.push(WriteOp::Put(space, key, value));
    }

    pub fn delete(&mut self, space: Space, key: Vec<u8>) {
        self.ops.push(WriteOp::Delete(space, key));
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

/// One space's keys and values of an ingestion, in key order.
type IngestionRun = Vec<(Vec<u8>, Vec<u8>)>;

/// The puts of an [`Engine::ingest`] batch, per space in the order of [`Space::ALL`],
/// each sorted by key; a delete or a key put twice is refused.
fn ingestion_runs(batch: WriteBatch) -> Result<[IngestionRun; 4]> {
    let mut runs: [IngestionRun; 4] = Default::default();
    for op in batch.ops {
        match op {
            WriteOp::Put(space, key, value) => runs[space.position()].push((key, value)),
            WriteOp::Delete(..) => return Err(Error::internal("an ingested batch with a delete")),
        }
    }
    for run in &mut runs {
        run.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        if run.windows(2).any(|pair| pair[0].0 == pair[1].0) {
            return Err(Error::internal("an ingested batch puts a key twice"));
        }
    }
    Ok(runs)
}

/// Where a scan starts: at the first key with a prefix, or just after a given key.
#[derive(Clone, Copy, Debug)]
pub enum ScanStart<'a> {
    /// From the first key of the prefix.
    Beginning,
    /// From the first key strictly greater than this one (resuming a cursor).
    After(&'a [u8]),
}

/// Where a backward scan starts: at the last key with a prefix, or just before a given
/// key.
#[derive(Clone, Copy, Debug)]
pub enum ScanEnd<'a> {
    /// From the last key of the prefix.
    End,
    /// From the last key strictly less than this one (resuming, or the exclusive upper
    /// end of a range).
    Before(&'a [u8]),
}

/// Called with each key and value of a scan; breaks to stop it.
pub type KeyValueVisitor<'a> = dyn FnMut(&[u8], &[u8]) -> Result<ControlFlow<()>> + 'a;

/// A consistent read-only view of every space as of one moment.
pub trait Snapshot: Send + Sync {
    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>>;

    /// Visits, in key order, every key that starts with `prefix` (from `start`), until
    /// the visitor breaks. The visitor sees borrowed bytes so a scan need not allocate
    /// per record.
    fn scan_prefix(
        &self,
        space: Space,
        prefix: &[u8],
        start: ScanStart<'_>,
        visit: &mut KeyValueVisitor<'_>,
    ) -> Result<()>;

    /// As [`Snapshot::scan_prefix`], in descending key order from `end`: what a sort
    /// opposite to an index's direction reads.
    fn scan_prefix_back(
        &self,
        space: Space,
        prefix: &[u8],
        end: ScanEnd<'_>,
        visit: &mut KeyValueVisitor<'_>,
    ) -> Result<()>;

    /// The greatest key that starts with `prefix`, if any.
    fn last_key_with_prefix(&self, space: Space, prefix: &[u8]) -> Result<Option<Vec<u8>>>;
}

/// An ordered, transactional key-value engine.
pub trait Engine: Send + Sync {
    fn snapshot(&self) -> Box<dyn Snapshot>;

    /// Applies every change of the batch atomically, durable as asked before returning.
    /// A batch the machine cannot store fails with the error naming why (OutOfDiskSpace
    /// for a full disk, IllegalOperation for a read-only one), and the disk engine then
    /// refuses every write until it is opened again; reads go on.
    fn write(&self, batch: WriteBatch, durability: Durability) -> Result<()>;

    /// Writes a batch of puts of keys not stored yet by building sorted tables directly,
    /// bypassing the journal and the memtables: a bulk load's path, for batches of
    /// megabytes (each one becomes a table of its own, so small ones cost compactions).
    /// No snapshot sees part of the batch, and it is on disk when this returns. A crash
    /// while it runs can leave its spaces written in part, but only in the order of
    /// [`Space`]: a space is on disk only once every space before it is.
    fn ingest(&self, batch: WriteBatch) -> Result<()>;

    /// Makes everything written so far durable on disk (shutdown, fsync command).
    fn sync(&self) -> Result<()>;

    /// Bytes used on disk (0 for memory).
    fn disk_size_bytes(&self) -> u64;

    /// The bytes on disk of the keys of `space` that start with `prefix` (a
    /// collection's records, an index's entries): every table that holds only such keys,
    /// and of a table that also holds others the share of its entries that are such
    /// keys. Writes not yet flushed from memory count nothing, as in WiredTiger's
    /// `storageSize`; superseded versions and deletions not yet compacted away count,
    /// as its reusable space does. 0 for memory.
    fn prefix_disk_bytes(&self, space: Space, prefix: &[u8]) -> u64;

    /// The engine's cache of blocks and its memtables, as serverStatus reports them.
    fn cache(&self) -> CacheFigures;
}

/// What the engine holds in memory: its block cache's configured size; what it holds,
/// blocks and memtables together; and of that the writes in memtables not yet flushed
/// to tables (the cache's dirty bytes, in WiredTiger's words).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheFigures {
    pub capacity_bytes: u64,
    pub cached_bytes: u64,
    pub dirty_bytes: u64,
}

/// The smallest key greater than every key with this prefix, or `None` when the prefix
/// is all 0xFF bytes (no upper bound).
/// The exclusive upper end of a backward scan of `prefix` from `end`; `None` when the
/// range is empty. A resume key past the prefix is no tighter than the prefix's own end.
fn back_scan_upper(prefix: &[u8], end: ScanEnd<'_>) -> Option<Bound<Vec<u8>>> {
    let limit = prefix_upper_bound(prefix);
    let upper = match (end, limit) {
        (ScanEnd::Before(key), Some(limit)) if key >= limit.as_slice() => Bound::Excluded(limit),
        (ScanEnd::Before(key), _) => Bound::Excluded(key.to_vec()),
        (ScanEnd::End, Some(limit)) => Bound::Excluded(limit),
        (ScanEnd::End, None) => Bound::Unbounded,
    };
    match &upper {
        Bound::Excluded(key) if key.as_slice() <= prefix => None,
        _ => Some(upper),
    }
}

pub fn prefix_upper_bound(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

#[cfg(test)]
mod conformance_tests {
    //! The same behaviour checks run against every engine, so the in-memory engine is a
    //! trustworthy reference for the disk one.
    use super::*;

    fn collect(snap: &dyn Snapshot, prefix: &[u8], start: ScanStart<'_>) -> Vec<Vec<u8>> {
        let mut keys = Vec::new();
        snap.scan_prefix(Space::Records, prefix, start, &mut |k, _| {
            keys.push(k.to_vec());
            Ok(ControlFlow::Continue(()))
        })
        .unwrap();
        keys
    }

    fn collect_back(snap: &dyn Snapshot, prefix: &[u8], end: ScanEnd<'_>) -> Vec<Vec<u8>> {
        let mut keys = Vec::new();
        snap.scan_prefix_back(Space::Records, prefix, end, &mut |k, _| {
            keys.push(k.to_vec());
            Ok(ControlFlow::Continue(()))
        })
        .unwrap();
        keys
    }

    pub(crate) fn check_engine(engine: &dyn Engine) {
        let mut batch = WriteBatch::default();
        for k in [b"a1".as_slice(), b"a2", b"a3", b"b1"] {
            batch.put(Space::Records, k.to_vec(), k.to_vec());
        }
        batch.put(Space::Catalog, b"a1".to_vec(), b"cat".to_vec());
        engine.write(batch, Durability::Process).unwrap();

        let before = engine.snapshot();
        let mut batch = WriteBatch::default();
        batch.delete(Space::Records, b"a2".to_vec());
        engine.write(batch, Durability::Disk).unwrap();
        let after = engine.snapshot();

        assert_eq!(collect(&*before, b"a", ScanStart::Beginning).len(), 3);
        assert_eq!(
            collect(&*after, b"a", ScanStart::Beginning),
            vec![b"a1".to_vec(), b"a3".to_vec()]
        );
        assert_eq!(
            collect(&*after, b"a", ScanStart::After(b"a1")),
            vec![b"a3".to_vec()]
        );
        assert_eq!(
            collect_back(&*before, b"a", ScanEnd::End),
            vec![b"a3".to_vec(), b"a2".to_vec(), b"a1".to_vec()]
        );
        assert_eq!(
            collect_back(&*before, b"a", ScanEnd::Before(b"a3")),
            vec![b"a2".to_vec(), b"a1".to_vec()]
        );
        // Keys longer than any stored one (a 70 kB `_id` asked for) select what they
        // would, without the engine failing on them.
        let long = |start: &[u8]| [start, &[b'z'; 70_000][..]].concat();
        assert_eq!(after.get(Space::Records, &long(b"a")).unwrap(), None);
        assert!(collect(&*after, &long(b"a"), ScanStart::Beginning).is_empty());
        assert_eq!(
            collect(&*after, b"a", ScanStart::After(&long(b"a1"))),
            vec![b"a3".to_vec()]
        );
        assert_eq!(
            collect_back(&*after, b"a", ScanEnd::Before(&long(b"a3"))),
            vec![b"a3".to_vec(), b"a1".to_vec()]
        );
        assert!(collect_back(&*after, &long(b"a"), ScanEnd::End).is_empty());
        assert_eq!(
            after
                .last_key_with_prefix(Space::Records, &long(b"a"))
                .unwrap(),
            None
        );
        assert_eq!(
            collect_back(&*after, b"a", ScanEnd::Before(b"a2")),
            vec![b"a1".to_vec()]
        );
        assert!(collect_back(&*after, b"b", ScanEnd::Before(b"b1")).is_empty());
        assert_eq!(collect_back(&*after, b"", ScanEnd::End).len(), 3);
        assert_eq!(
            after.get(Space::Catalog, b"a1").unwrap(),
            Some(b"cat".to_vec())
        );
        assert_eq!(after.get(Space::Records, b"a2").unwrap(), None);
        assert_eq!(
            after.last_key_with_prefix(Space::Records, b"a").unwrap(),
            Some(b"a3".to_vec())
        );
        assert_eq!(
            after.last_key_with_prefix(Space::Indexes, b"a").unwrap(),
            None
        );

        let mut seen = 0;
        after
            .scan_prefix(Space::Records, b"", ScanStart::Beginning, &mut |_, _| {
                seen += 1;
                Ok(ControlFlow::Break(()))
            })
            .unwrap();
        assert_eq!(seen, 1, "a visitor's break stops the scan");
    }

    /// An ingested batch: all of it or none of it in a snapshot, in key order whatever
    /// order it came in, beside what was written before; deletes and repeated keys refused.
    pub(crate) fn check_ingest(engine: &dyn Engine) {
        let mut batch = WriteBatch::default();
        batch.put(Space::Records, b"c1".to_vec(), b"old".to_vec());
        engine.write(batch, Durability::Process).unwrap();
        let before = engine.snapshot();
        let mut batch = WriteBatch::default();
        for k in [b"c3".as_slice(), b"c2", b"c4"] {
            batch.put(Space::Records, k.to_vec(), k.to_vec());
        }
        batch.put(Space::Indexes, b"i1".to_vec(), Vec::new());
        engine.ingest(batch).unwrap();
        let after = engine.snapshot();
        assert_eq!(collect(&*before, b"c", ScanStart::Beginning).len(), 1);
        assert_eq!(
            collect(&*after, b"c", ScanStart::Beginning),
            vec![
                b"c1".to_vec(),
                b"c2".to_vec(),
                b"c3".to_vec(),
                b"c4".to_vec()
            ]
        );
        assert_eq!(after.get(Space::Indexes, b"i1").unwrap(), Some(Vec::new()));
        assert_eq!(before.get(Space::Indexes, b"i1").unwrap(), None);

        let mut with_delete = WriteBatch::default();
        with_delete.put(Space::Records, b"d1".to_vec(), Vec::new());
        with_delete.delete(Space::Records, b"c1".to_vec());
        assert!(engine.ingest(with_delete).is_err());
        let mut twice = WriteBatch::default();
        twice.put(Space::Records, b"d1".to_vec(), Vec::new());
        twice.put(Space::Records, b"d1".to_vec(), Vec::new());
        assert!(engine.ingest(twice).is_err());
        assert!(collect(&*engine.snapshot(), b"d", ScanStart::Beginning).is_empty());
    }

    #[test]
    fn memory_engine_behaves() {
        check_engine(&MemoryEngine::default());
        check_ingest(&MemoryEngine::default());
    }

    #[test]
    fn fjall_engine_behaves_and_persists() {
        let dir = tempfile::tempdir().unwrap();
        {
            let engine = FjallEngine::open(dir.path()).unwrap();
            check_engine(&engine);
            check_ingest(&engine);
        }
        let engine = FjallEngine::open(dir.path()).unwrap();
        let snap = engine.snapshot();
        assert_eq!(
            snap.get(Space::Records, b"a3").unwrap(),
            Some(b"a3".to_vec())
        );
        assert_eq!(snap.get(Space::Records, b"a2").unwrap(), None);
        assert_eq!(
            collect(&*snap, b"c", ScanStart::Beginning).len(),
            4,
            "ingested tables are there after a restart"
        );
    }

    #[test]
    fn upper_bound_of_prefixes() {
        assert_eq!(prefix_upper_bound(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_upper_bound(&[1, 0xFF]), Some(vec![2]));
        assert_eq!(prefix_upper_bound(&[0xFF, 0xFF]), None);
        assert_eq!(prefix_upper_bound(b""), None);
    }
}
