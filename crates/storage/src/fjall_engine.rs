//! The disk engine: one fjall database under `--dbpath`, one keyspace per [`Space`],
//! LZ4 block compression (the field names every BSON document repeats compress well).
//!
//! Durability: every batch is written to fjall's journal and handed to the OS before the
//! write returns, so an acknowledged write survives `kill -9`; `Durability::Disk` also
//! fsyncs the journal.

use crate::{
    storage_error, Durability, Engine, KeyValueVisitor, ScanStart, Snapshot, Space, WriteBatch,
    WriteOp,
};
use basalt_error::Result;
use fjall::config::CompressionPolicy;
use fjall::{CompressionType, Database, Keyspace, KeyspaceCreateOptions, PersistMode, Readable};
use std::ops::Bound;
use std::path::Path;

pub struct FjallEngine {
    db: Database,
    keyspaces: [Keyspace; 3],
}

impl FjallEngine {
    pub fn open(path: &Path) -> Result<FjallEngine> {
        let db = Database::builder(path).open().map_err(storage_error)?;
        let open = |space: Space| {
            db.keyspace(space.name(), || {
                KeyspaceCreateOptions::default()
                    .data_block_compression_policy(CompressionPolicy::all(CompressionType::Lz4))
            })
            .map_err(storage_error)
        };
        let keyspaces = [
            open(Space::Catalog)?,
            open(Space::Records)?,
            open(Space::Indexes)?,
        ];
        Ok(FjallEngine { db, keyspaces })
    }

    fn keyspace(&self, space: Space) -> &Keyspace {
        match space {
            Space::Catalog => &self.keyspaces[0],
            Space::Records => &self.keyspaces[1],
            Space::Indexes => &self.keyspaces[2],
        }
    }
}

struct FjallSnapshot {
    snapshot: fjall::Snapshot,
    keyspaces: [Keyspace; 3],
}

impl FjallSnapshot {
    fn keyspace(&self, space: Space) -> &Keyspace {
        match space {
            Space::Catalog => &self.keyspaces[0],
            Space::Records => &self.keyspaces[1],
            Space::Indexes => &self.keyspaces[2],
        }
    }
}

impl Engine for FjallEngine {
    fn snapshot(&self) -> Box<dyn Snapshot> {
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
        let mut fjall_batch = self.db.batch().durability(Some(mode));
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
