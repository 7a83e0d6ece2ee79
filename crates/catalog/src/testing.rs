//! An engine for the unit tests of what the catalog does with data it cannot read: the
//! in-memory engine, with some keys in a "corrupt block". Reading one of them, by a scan,
//! a point read or a look for the last key, fails as fjall fails on a block whose
//! checksum is wrong (DataCorruptionDetected); everything else reads as stored.

use basalt_error::{Error, ErrorCode, Result};
use basalt_storage::{
    Durability, Engine, KeyValueVisitor, MemoryEngine, ScanEnd, ScanStart, Snapshot, Space,
    WriteBatch,
};
use parking_lot::Mutex;
use std::collections::BTreeSet;
use std::sync::Arc;

#[derive(Default)]
pub(crate) struct CorruptBlocks {
    inner: MemoryEngine,
    /// The unreadable keys; snapshots taken later cannot read them.
    pub(crate) unreadable: Arc<Mutex<BTreeSet<Vec<u8>>>>,
}

struct CorruptSnapshot {
    inner: Box<dyn Snapshot>,
    unreadable: BTreeSet<Vec<u8>>,
}

impl CorruptSnapshot {
    fn read(&self, key: &[u8]) -> Result<()> {
        if self.unreadable.contains(key) {
            return Err(Error::new(
                ErrorCode::DATA_CORRUPTION_DETECTED,
                "a block failed its checksum",
            ));
        }
        Ok(())
    }
}

impl Engine for CorruptBlocks {
    fn snapshot(&self) -> Box<dyn Snapshot> {
        Box::new(CorruptSnapshot {
            inner: self.inner.snapshot(),
            unreadable: self.unreadable.lock().clone(),
        })
    }

    fn write(&self, batch: WriteBatch, durability: Durability) -> Result<()> {
        self.inner.write(batch, durability)
    }

    fn ingest(&self, batch: WriteBatch) -> Result<()> {
        self.inner.ingest(batch)
    }

    fn sync(&self) -> Result<()> {
        self.inner.sync()
    }

    fn disk_size_bytes(&self) -> u64 {
        self.inner.disk_size_bytes()
    }

    fn prefix_disk_bytes(&self, space: Space, prefix: &[u8]) -> u64 {
        self.inner.prefix_disk_bytes(space, prefix)
    }

    fn cache(&self) -> basalt_storage::CacheFigures {
        self.inner.cache()
    }
}

impl Snapshot for CorruptSnapshot {
    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.read(key)?;
        self.inner.get(space, key)
    }

    fn scan_prefix(
        &self,
        space: Space,
        prefix: &[u8],
        start: ScanStart<'_>,
        visit: &mut KeyValueVisitor<'_>,
    ) -> Result<()> {
        self.inner
            .scan_prefix(space, prefix, start, &mut |key, value| {
                self.read(key)?;
                visit(key, value)
            })
    }

    fn scan_prefix_back(
        &self,
        space: Space,
        prefix: &[u8],
        end: ScanEnd<'_>,
        visit: &mut KeyValueVisitor<'_>,
    ) -> Result<()> {
        self.inner
            .scan_prefix_back(space, prefix, end, &mut |key, value| {
                self.read(key)?;
                visit(key, value)
            })
    }

    fn last_key_with_prefix(&self, space: Space, prefix: &[u8]) -> Result<Option<Vec<u8>>> {
        let last = self.inner.last_key_with_prefix(space, prefix)?;
        if let Some(key) = &last {
            self.read(key)?;
        }
        Ok(last)
    }
}
