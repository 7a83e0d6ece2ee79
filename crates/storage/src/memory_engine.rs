//! An in-memory engine: the reference the fjall engine is tested against, and a fast
//! backend for tests that do not care about disk.

use crate::{
    Durability, Engine, KeyValueVisitor, ScanEnd, ScanStart, Snapshot, Space, WriteBatch, WriteOp,
};
use basalt_error::Result;
use parking_lot::RwLock;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

type Tree = BTreeMap<Vec<u8>, Vec<u8>>;

/// Copy-on-write maps: a snapshot is a cheap clone of the `Arc`s as they are now.
#[derive(Default)]
pub struct MemoryEngine {
    spaces: RwLock<[Arc<Tree>; Space::ALL.len()]>,
}

struct MemorySnapshot {
    spaces: [Arc<Tree>; Space::ALL.len()],
}

impl Engine for MemoryEngine {
    fn snapshot(&self) -> Box<dyn Snapshot> {
        Box::new(MemorySnapshot {
            spaces: self.spaces.read().clone(),
        })
    }

    fn write(&self, batch: WriteBatch, _durability: Durability) -> Result<()> {
        let mut spaces = self.spaces.write();
        for op in batch.ops {
            match op {
                WriteOp::Put(space, key, value) => {
                    Arc::make_mut(&mut spaces[space.position()]).insert(key, value);
                }
                WriteOp::Delete(space, key) => {
                    Arc::make_mut(&mut spaces[space.position()]).remove(&key);
                }
            }
        }
        Ok(())
    }

    fn ingest(&self, batch: WriteBatch) -> Result<()> {
        let mut puts = WriteBatch::default();
        for (space, run) in Space::ALL.into_iter().zip(crate::ingestion_runs(batch)?) {
            for (key, value) in run {
                puts.put(space, key, value);
            }
        }
        self.write(puts, Durability::Process)
    }

    fn sync(&self) -> Result<()> {
        Ok(())
    }

    fn disk_size_bytes(&self) -> u64 {
        0
    }

    fn prefix_disk_bytes(&self, _space: Space, _prefix: &[u8]) -> u64 {
        0
    }

    /// Everything is in memory, and none of it is a cache.
    fn cache(&self) -> crate::CacheFigures {
        crate::CacheFigures::default()
    }
}

impl Snapshot for MemorySnapshot {
    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.spaces[space.position()].get(key).cloned())
    }

    fn scan_prefix(
        &self,
        space: Space,
        prefix: &[u8],
        start: ScanStart<'_>,
        visit: &mut KeyValueVisitor<'_>,
    ) -> Result<()> {
        let lower = match start {
            ScanStart::Beginning => Bound::Included(prefix.to_vec()),
            ScanStart::After(key) => Bound::Excluded(key.to_vec()),
        };
        for (k, v) in self.spaces[space.position()].range((lower, Bound::Unbounded)) {
            if !k.starts_with(prefix) {
                break;
            }
            if visit(k, v)?.is_break() {
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
        for (k, v) in self.spaces[space.position()]
            .range((Bound::Included(prefix.to_vec()), upper))
            .rev()
        {
            if visit(k, v)?.is_break() {
                break;
            }
        }
        Ok(())
    }

    fn last_key_with_prefix(&self, space: Space, prefix: &[u8]) -> Result<Option<Vec<u8>>> {
        let tree = &self.spaces[space.position()];
        let upper = match crate::prefix_upper_bound(prefix) {
            Some(end) => Bound::Excluded(end),
            None => Bound::Unbounded,
        };
        Ok(tree
            .range((Bound::Included(prefix.to_vec()), upper))
            .next_back()
            .map(|(k, _)| k.clone()))
    }
}
