//! The Raft log and vote of a member, kept in the storage engine's replication space so
//! they share the data's journal: an appended entry survives `kill -9` as an
//! acknowledged write does.

use crate::types::{decode, encode, TypeConfig};
use crate::Shared;
use basalt_storage::{Durability, Engine, ScanStart, Space, WriteBatch, OPLOG_PREFIX};
use openraft::storage::{LogFlushed, LogState, RaftLogReader, RaftLogStorage};
use openraft::{Entry, LogId, StorageError, StorageIOError, Vote};
use serde::{Deserialize, Serialize};
use std::fmt::Debug;
use std::ops::{Bound, ControlFlow, RangeBounds};
use std::sync::Arc;

const LOG_PREFIX: &[u8] = b"log/";
const VOTE_KEY: &[u8] = b"vote";
const COMMITTED_KEY: &[u8] = b"committed";
const PURGED_KEY: &[u8] = b"purged";
/// The first log entry whose oplog records the member holds (those before were purged,
/// or precede the copy it loaded): change streams cannot resume before it.
pub(crate) const OPLOG_START_KEY: &[u8] = b"oplogStart";

/// A value stored or sent on its own.
#[derive(Serialize, Deserialize)]
pub(crate) struct Record<T> {
    pub value: T,
}

pub(crate) fn log_key(index: u64) -> Vec<u8> {
    let mut key = LOG_PREFIX.to_vec();
    key.extend_from_slice(&index.to_be_bytes());
    key
}

pub(crate) fn read_error(e: impl std::fmt::Display) -> StorageError<u64> {
    StorageIOError::read(&std::io::Error::other(e.to_string())).into()
}

pub(crate) fn write_error(e: impl std::fmt::Display) -> StorageError<u64> {
    StorageIOError::write(&std::io::Error::other(e.to_string())).into()
}

/// Reads a wrapped value stored under `key`.
pub(crate) fn get<T: for<'de> Deserialize<'de>>(
    engine: &dyn Engine,
    key: &[u8],
) -> Result<Option<T>, StorageError<u64>> {
    match engine
        .snapshot()
        .get(Space::Replication, key)
        .map_err(read_error)?
    {
        Some(bytes) => Ok(Some(decode::<Record<T>>(&bytes).map_err(read_error)?.value)),
        None => Ok(None),
    }
}

/// The key and encoded value of a wrapped value in the replication space.
pub(crate) fn record<T: Serialize>(
    key: &[u8],
    value: T,
) -> Result<(Vec<u8>, Vec<u8>), StorageError<u64>> {
    let bytes = encode(&Record { value }).map_err(write_error)?;
    Ok((key.to_vec(), bytes))
}

/// Adds the put of a wrapped value to a batch.
pub(crate) fn put<T: Serialize>(
    batch: &mut WriteBatch,
    key: &[u8],
    value: T,
) -> Result<(), StorageError<u64>> {
    let (key, bytes) = record(key, value)?;
    batch.put(Space::Replication, key, bytes);
    Ok(())
}

fn write(engine: &dyn Engine, batch: WriteBatch) -> Result<(), StorageError<u64>> {
    engine
        .write(batch, Durability::Process)
        .map_err(write_error)
}

/// The log, vote and commit point of one member.
#[derive(Clone)]
pub struct LogStore {
    engine: Arc<dyn Engine>,
    shared: Arc<Shared>,
}

impl LogStore {
    /// The member's log, whose size it counts in `shared` from now on.
    pub fn new(
        engine: Arc<dyn Engine>,
        shared: Arc<Shared>,
    ) -> Result<LogStore, StorageError<u64>> {
        let store = LogStore { engine, shared };
        let mut bytes = 0u64;
        store.scan(0, u64::MAX, |_, value| {
            bytes += value.len() as u64;
            Ok(())
        })?;
        store.shared.set_log_bytes(bytes);
        Ok(store)
    }

    /// The last entry to purge so that the newest entries, `keep_bytes` of them at most,
    /// remain; `None` when they all fit.
    pub(crate) fn purge_point(&self, keep_bytes: u64) -> Result<Option<u64>, StorageError<u64>> {
        let mut remaining = self.shared.log_bytes();
        let mut point = None;
        self.scan(0, u64::MAX, |key, value| {
            if remaining > keep_bytes {
                remaining = remaining.saturating_sub(value.len() as u64);
                point = Some(index_of(key));
            }
            Ok(())
        })?;
        Ok(point)
    }

    /// Forgets the whole log and the commit point (the vote stays): after a copy's load
    /// was interrupted, the member starts again from a copy.
    pub(crate) fn clear(&self) -> Result<(), StorageError<u64>> {
        self.delete_range(0, u64::MAX)?;
        let mut batch = WriteBatch::default();
        batch.delete(Space::Replication, COMMITTED_KEY.to_vec());
        batch.delete(Space::Replication, PURGED_KEY.to_vec());
        write(&*self.engine, batch)
    }

    /// Visits the stored entries with an index in `[from, to_exclusive)`, in order.
    fn scan(
        &self,
        from: u64,
        to_exclusive: u64,
        mut visit: impl FnMut(&[u8], &[u8]) -> Result<(), StorageError<u64>>,
    ) -> Result<(), StorageError<u64>> {
        let before = from.checked_sub(1).map(log_key);
        let start = match &before {
            Some(key) => ScanStart::After(key),
            None => ScanStart::Beginning,
        };
        let mut failure = None;
        self.engine
            .snapshot()
            .scan_prefix(Space::Replication, LOG_PREFIX, start, &mut |key, value| {
                if index_of(key) >= to_exclusive {
                    return Ok(ControlFlow::Break(()));
                }
                match visit(key, value) {
                    Ok(()) => Ok(ControlFlow::Continue(())),
                    Err(e) => {
                        failure = Some(e);
                        Ok(ControlFlow::Break(()))
                    }
                }
            })
            .map_err(read_error)?;
        failure.map_or(Ok(()), Err)
    }

    fn entries(
        &self,
        from: u64,
        to_exclusive: u64,
    ) -> Result<Vec<Entry<TypeConfig>>, StorageError<u64>> {
        let mut entries = Vec::new();
        self.scan(from, to_exclusive, |_, value| {
            entries.push(decode(value).map_err(read_error)?);
            Ok(())
        })?;
        Ok(entries)
    }

    fn last_log_id(&self) -> Result<Option<LogId<u64>>, StorageError<u64>> {
        let snapshot = self.engine.snapshot();
        let last = snapshot
            .last_key_with_prefix(Space::Replication, LOG_PREFIX)
            .map_err(read_error)?;
        let Some(key) = last else { return Ok(None) };
        let bytes = snapshot
            .get(Space::Replication, &key)
            .map_err(read_error)?
            .ok_or_else(|| read_error("the last log entry vanished"))?;
        let entry: Entry<TypeConfig> = decode(&bytes).map_err(read_error)?;
        Ok(Some(entry.log_id))
    }

    /// Deletes the entries from `from` on (inclusive) up to `to` (exclusive).
    fn delete_range(&self, from: u64, to_exclusive: u64) -> Result<(), StorageError<u64>> {
        let mut batch = WriteBatch::default();
        let mut bytes = 0u64;
        self.scan(from, to_exclusive, |key, value| {
            batch.delete(Space::Replication, key.to_vec());
            bytes += value.len() as u64;
            Ok(())
        })?;
        if batch.is_empty() {
            return Ok(());
        }
        write(&*self.engine, batch)?;
        self.shared.remove_log_bytes(bytes);
        Ok(())
    }
}

impl LogStore {
    /// Deletes the oplog records (`basalt_catalog::oplog`, written by the server as it
    /// applies entries) of the entries through `index`, with the entries themselves:
    /// change streams cannot resume before the oldest entry kept.
    fn purge_oplog(&self, index: u64) -> Result<(), StorageError<u64>> {
        let snapshot = self.engine.snapshot();
        let mut batch = WriteBatch::default();
        let mut failure = None;
        let scanned = snapshot.scan_prefix(
            Space::Replication,
            OPLOG_PREFIX,
            ScanStart::Beginning,
            &mut |key, _| {
                let entry = key
                    .get(OPLOG_PREFIX.len()..OPLOG_PREFIX.len() + 8)
                    .and_then(|bytes| bytes.try_into().ok())
                    .map_or(u64::MAX, u64::from_be_bytes);
                if entry > index {
                    return Ok(ControlFlow::Break(()));
                }
                batch.delete(Space::Replication, key.to_vec());
                if batch.ops.len() >= OPLOG_PURGE_BATCH {
                    if let Err(e) = write(&*self.engine, std::mem::take(&mut batch)) {
                        failure = Some(e);
                        return Ok(ControlFlow::Break(()));
                    }
                }
                Ok(ControlFlow::Continue(()))
            },
        );
        scanned.map_err(read_error)?;
        if let Some(e) = failure {
            return Err(e);
        }
        put(&mut batch, OPLOG_START_KEY, index.saturating_add(1))?;
        write(&*self.engine, batch)
    }
}

/// Oplog records deleted per batch when entries are purged.
const OPLOG_PURGE_BATCH: usize = 10_000;

fn index_of(key: &[u8]) -> u64 {
    key.get(LOG_PREFIX.len()..)
        .and_then(|bytes| bytes.try_into().ok())
        .map_or(u64::MAX, u64::from_be_bytes)
}

fn range_of(range: &impl RangeBounds<u64>) -> (u64, u64) {
    let from = match range.start_bound() {
        Bound::Included(&i) => i,
        Bound::Excluded(&i) => i.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let to = match range.end_bound() {
        Bound::Included(&i) => i.saturating_add(1),
        Bound::Excluded(&i) => i,
        Bound::Unbounded => u64::MAX,
    };
    (from, to)
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, StorageError<u64>> {
        let (from, to) = range_of(&range);
        self.entries(from, to)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<u64>> {
        let last_purged_log_id: Option<LogId<u64>> = get(&*self.engine, PURGED_KEY)?.flatten();
        let last_log_id = self.last_log_id()?.or(last_purged_log_id);
        Ok(LogState {
            last_purged_log_id,
            last_log_id,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<u64>) -> Result<(), StorageError<u64>> {
        let mut batch = WriteBatch::default();
        put(&mut batch, VOTE_KEY, vote)?;
        write(&*self.engine, batch)
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<u64>>, StorageError<u64>> {
        get(&*self.engine, VOTE_KEY)
    }

    async fn save_committed(
        &mut self,
        committed: Option<LogId<u64>>,
    ) -> Result<(), StorageError<u64>> {
        let mut batch = WriteBatch::default();
        put(&mut batch, COMMITTED_KEY, committed)?;
        write(&*self.engine, batch)
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<u64>>, StorageError<u64>> {
        Ok(get(&*self.engine, COMMITTED_KEY)?.flatten())
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError<u64>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + Send,
        I::IntoIter: Send,
    {
        let mut batch = WriteBatch::default();
        let mut appended = 0u64;
        for entry in entries {
            let bytes = encode(&entry).map_err(write_error)?;
            appended += bytes.len() as u64;
            batch.put(Space::Replication, log_key(entry.log_id.index), bytes);
        }
        let outcome = write(&*self.engine, batch);
        if outcome.is_ok() {
            self.shared.add_log_bytes(appended);
        }
        callback.log_io_completed(
            outcome
                .as_ref()
                .map(|_| ())
                .map_err(|e| std::io::Error::other(e.to_string())),
        );
        outcome
    }

    async fn truncate(&mut self, log_id: LogId<u64>) -> Result<(), StorageError<u64>> {
        self.delete_range(log_id.index, u64::MAX)
    }

    async fn purge(&mut self, log_id: LogId<u64>) -> Result<(), StorageError<u64>> {
        let mut batch = WriteBatch::default();
        put(&mut batch, PURGED_KEY, Some(log_id))?;
        write(&*self.engine, batch)?;
        self.delete_range(0, log_id.index.saturating_add(1))?;
        self.purge_oplog(log_id.index)
    }
}
