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
use std::sync::{mpsc, Arc};

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
    /// Where purged entries are sent to be deleted (see [`sweep`]).
    sweeper: mpsc::Sender<u64>,
}

impl LogStore {
    /// The member's log, whose size it counts in `shared` from now on. Entries a purge
    /// left behind (the process stopped before they were deleted) are deleted first.
    pub fn new(
        engine: Arc<dyn Engine>,
        shared: Arc<Shared>,
    ) -> Result<LogStore, StorageError<u64>> {
        let (sweeper, purges) = mpsc::channel();
        let (sweep_engine, sweep_shared) = (engine.clone(), shared.clone());
        std::thread::Builder::new()
            .name("oplog-sweeper".into())
            .spawn(move || sweep(&*sweep_engine, &sweep_shared, &purges))
            .map_err(write_error)?;
        let store = LogStore {
            engine,
            shared,
            sweeper,
        };
        let first_kept = store.first_kept()?;
        if let Some(purged) = first_kept.checked_sub(1) {
            delete_purged(&*store.engine, &store.shared, purged)?;
        }
        let mut bytes = 0u64;
        store.scan(first_kept, u64::MAX, |_, value| {
            bytes += value.len() as u64;
            Ok(ControlFlow::Continue(()))
        })?;
        store.shared.set_log_bytes(bytes);
        Ok(store)
    }

    /// The index of the first entry not purged.
    fn first_kept(&self) -> Result<u64, StorageError<u64>> {
        let purged: Option<LogId<u64>> = get(&*self.engine, PURGED_KEY)?.flatten();
        Ok(purged.map_or(0, |id| id.index.saturating_add(1)))
    }

    /// Has the sweeper delete the entries through `index` and their oplog records.
    fn sweep_through(&self, index: u64) {
        // The sweeper lives as long as a sender: it cannot have gone.
        let _ = self.sweeper.send(index);
    }

    /// The last entry to purge so that the newest entries, `keep_bytes` of them at most,
    /// remain; `None` when they all fit.
    pub(crate) fn purge_point(&self, keep_bytes: u64) -> Result<Option<u64>, StorageError<u64>> {
        let mut remaining = self.shared.log_bytes();
        let mut point = None;
        self.scan(self.first_kept()?, u64::MAX, |key, value| {
            if remaining <= keep_bytes {
                return Ok(ControlFlow::Break(()));
            }
            remaining = remaining.saturating_sub(value.len() as u64);
            point = Some(index_of(key));
            Ok(ControlFlow::Continue(()))
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
        mut visit: impl FnMut(&[u8], &[u8]) -> Result<ControlFlow<()>, StorageError<u64>>,
    ) -> Result<(), StorageError<u64>> {
        let before = from.checked_sub(1).map(log_key);
        let mut failure = None;
        self.engine
            .snapshot()
            .scan_prefix(
                Space::Replication,
                LOG_PREFIX,
                scan_start(&before),
                &mut |key, value| {
                    if index_of(key) >= to_exclusive {
                        return Ok(ControlFlow::Break(()));
                    }
                    visit(key, value).or_else(|e| {
                        failure = Some(e);
                        Ok(ControlFlow::Break(()))
                    })
                },
            )
            .map_err(read_error)?;
        failure.map_or(Ok(()), Err)
    }

    /// The entries with an index in `[from, to_exclusive)`, as many as fit in
    /// `max_bytes` (at least one).
    fn entries(
        &self,
        from: u64,
        to_exclusive: u64,
        max_bytes: usize,
    ) -> Result<Vec<Entry<TypeConfig>>, StorageError<u64>> {
        let mut entries = Vec::new();
        let mut bytes = 0;
        self.scan(from, to_exclusive, |_, value| {
            bytes += value.len();
            if bytes > max_bytes && !entries.is_empty() {
                return Ok(ControlFlow::Break(()));
            }
            entries.push(decode(value).map_err(read_error)?);
            Ok(ControlFlow::Continue(()))
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
        delete_entries(&*self.engine, &self.shared, from, to_exclusive)
    }
}

/// The most entry bytes one append message carries (at least one entry): it must reach
/// the member and be stored there within Raft's append deadline (one heartbeat
/// interval).
const APPEND_BYTES: usize = 4 << 20;

/// Keys deleted per write when entries or oplog records go.
const DELETE_BATCH: usize = 10_000;

/// Deletes the stored entries with an index in `[from, to_exclusive)`, in writes of
/// [`DELETE_BATCH`] keys, and uncounts their bytes.
fn delete_entries(
    engine: &dyn Engine,
    shared: &Shared,
    from: u64,
    to_exclusive: u64,
) -> Result<(), StorageError<u64>> {
    let before = from.checked_sub(1).map(log_key);
    delete_prefixed(engine, LOG_PREFIX, scan_start(&before), |key, value| {
        (index_of(key) < to_exclusive).then_some(value.len() as u64)
    })
    .map(|bytes| shared.remove_log_bytes(bytes))
}

/// Deletes the keys of the replication space under `prefix`, from `start` on, while
/// `doomed` gives a size for them (summed in the result), in writes of [`DELETE_BATCH`].
fn delete_prefixed(
    engine: &dyn Engine,
    prefix: &[u8],
    start: ScanStart<'_>,
    mut doomed: impl FnMut(&[u8], &[u8]) -> Option<u64>,
) -> Result<u64, StorageError<u64>> {
    let mut batch = WriteBatch::default();
    let mut bytes = 0u64;
    let mut failure = None;
    engine
        .snapshot()
        .scan_prefix(Space::Replication, prefix, start, &mut |key, value| {
            let Some(size) = doomed(key, value) else {
                return Ok(ControlFlow::Break(()));
            };
            bytes += size;
            batch.delete(Space::Replication, key.to_vec());
            if batch.ops.len() >= DELETE_BATCH {
                if let Err(e) = write(engine, std::mem::take(&mut batch)) {
                    failure = Some(e);
                    return Ok(ControlFlow::Break(()));
                }
            }
            Ok(ControlFlow::Continue(()))
        })
        .map_err(read_error)?;
    if let Some(e) = failure {
        return Err(e);
    }
    if !batch.is_empty() {
        write(engine, batch)?;
    }
    Ok(bytes)
}

/// Deletes the entries through `index` and their oplog records; returns how many
/// records went.
fn delete_purged(
    engine: &dyn Engine,
    shared: &Shared,
    index: u64,
) -> Result<u64, StorageError<u64>> {
    delete_entries(engine, shared, 0, index.saturating_add(1))?;
    delete_prefixed(engine, OPLOG_PREFIX, ScanStart::Beginning, |key, _| {
        let entry = key
            .get(OPLOG_PREFIX.len()..OPLOG_PREFIX.len() + 8)
            .and_then(|bytes| bytes.try_into().ok())
            .map_or(u64::MAX, u64::from_be_bytes);
        (entry <= index).then_some(1)
    })
}

/// The sweeper's loop: deletes purged entries and their oplog records (the records of
/// `basalt_catalog::oplog`, written by the server as it applies entries), off Raft's
/// core. A purge only records how far the log now starts; deleting a large oplog's
/// worth of keys takes seconds, and Raft's core, blocked that long, would send no
/// heartbeats and the other members would elect another primary.
fn sweep(engine: &dyn Engine, shared: &Shared, purges: &mpsc::Receiver<u64>) {
    let mut swept = None;
    while let Ok(mut index) = purges.recv() {
        // Purges that came meanwhile: the furthest one covers them all.
        while let Ok(next) = purges.try_recv() {
            index = index.max(next);
        }
        if swept.is_some_and(|swept| swept >= index) {
            continue;
        }
        let started = std::time::Instant::now();
        let outcome = delete_purged(engine, shared, index);
        match outcome {
            Ok(records) => {
                swept = Some(index);
                tracing::info!(
                    "deleted the oplog through entry {index} ({records} records) in {} ms",
                    started.elapsed().as_millis()
                );
            }
            // Left for the next purge, or the next start, to delete.
            Err(e) => tracing::warn!("cannot delete the oplog through entry {index}: {e}"),
        }
    }
}

/// Where a scan starts: after `before`, or at the beginning.
fn scan_start(before: &Option<Vec<u8>>) -> ScanStart<'_> {
    match before {
        Some(key) => ScanStart::After(key),
        None => ScanStart::Beginning,
    }
}

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
        self.entries(from, to, usize::MAX)
    }

    /// Reading and decoding the entries of one append message happens on Raft's
    /// replication task: a lagging member's first message could otherwise hold hundreds
    /// of megabytes of batched inserts, and their reading would hold up the heartbeats.
    async fn limited_get_log_entries(
        &mut self,
        start: u64,
        end: u64,
    ) -> Result<Vec<Entry<TypeConfig>>, StorageError<u64>> {
        self.entries(start, end, APPEND_BYTES)
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
        // Change streams cannot resume before the oldest entry kept.
        let mut batch = WriteBatch::default();
        put(&mut batch, PURGED_KEY, Some(log_id))?;
        put(&mut batch, OPLOG_START_KEY, log_id.index.saturating_add(1))?;
        write(&*self.engine, batch)?;
        self.sweep_through(log_id.index);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use basalt_storage::MemoryEngine;
    use openraft::CommittedLeaderId;
    use std::time::{Duration, Instant};

    fn keys(engine: &dyn Engine, prefix: &[u8]) -> Vec<Vec<u8>> {
        let mut keys = Vec::new();
        engine
            .snapshot()
            .scan_prefix(
                Space::Replication,
                prefix,
                ScanStart::Beginning,
                &mut |k, _| {
                    keys.push(k.to_vec());
                    Ok(ControlFlow::Continue(()))
                },
            )
            .unwrap();
        keys
    }

    fn oplog_key(index: u64, n: u8) -> Vec<u8> {
        let mut key = OPLOG_PREFIX.to_vec();
        key.extend_from_slice(&index.to_be_bytes());
        key.push(n);
        key
    }

    #[test]
    fn a_purge_records_the_new_start_at_once_and_the_sweeper_deletes_what_it_purged() {
        let engine: Arc<dyn Engine> = Arc::new(MemoryEngine::default());
        let mut batch = WriteBatch::default();
        for index in 1..=10 {
            batch.put(Space::Replication, log_key(index), vec![0; 100]);
            batch.put(Space::Replication, oplog_key(index, 0), b"doc".to_vec());
            batch.put(Space::Replication, oplog_key(index, 1), b"doc".to_vec());
        }
        engine.write(batch, Durability::Process).unwrap();
        let shared = Arc::new(Shared::default());
        let mut log = LogStore::new(engine.clone(), shared.clone()).unwrap();
        assert_eq!(shared.log_bytes(), 1000);

        let purged = LogId::new(CommittedLeaderId::new(1, 0), 6);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(log.purge(purged)).unwrap();
        let state = runtime.block_on(log.get_log_state()).unwrap();
        assert_eq!(state.last_purged_log_id, Some(purged));
        assert_eq!(get::<u64>(&*engine, OPLOG_START_KEY).unwrap(), Some(7));

        let deadline = Instant::now() + Duration::from_secs(10);
        while keys(&*engine, OPLOG_PREFIX).len() > 8 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let kept: Vec<Vec<u8>> = (7..=10).map(log_key).collect();
        assert_eq!(keys(&*engine, LOG_PREFIX), kept);
        let kept: Vec<Vec<u8>> = (7..=10)
            .flat_map(|index| [oplog_key(index, 0), oplog_key(index, 1)])
            .collect();
        assert_eq!(keys(&*engine, OPLOG_PREFIX), kept);
        assert_eq!(shared.log_bytes(), 400);

        // Entries a purge left behind (the process stopped first) go at the next start.
        let mut batch = WriteBatch::default();
        batch.put(Space::Replication, log_key(5), vec![0; 100]);
        batch.put(Space::Replication, oplog_key(5, 0), b"doc".to_vec());
        engine.write(batch, Durability::Process).unwrap();
        LogStore::new(engine.clone(), shared.clone()).unwrap();
        assert_eq!(keys(&*engine, LOG_PREFIX).len(), 4);
        assert_eq!(keys(&*engine, OPLOG_PREFIX).len(), 8);
        assert_eq!(shared.log_bytes(), 400);
    }

    #[test]
    fn an_append_message_reads_entries_up_to_its_byte_bound() {
        let engine: Arc<dyn Engine> = Arc::new(MemoryEngine::default());
        let mut batch = WriteBatch::default();
        for index in 1..=10 {
            let entry = Entry::<TypeConfig> {
                log_id: LogId::new(CommittedLeaderId::new(1, 0), index),
                payload: openraft::EntryPayload::Normal(crate::types::Proposal::Config(vec![
                    0;
                    1 << 20
                ])),
            };
            batch.put(Space::Replication, log_key(index), encode(&entry).unwrap());
        }
        engine.write(batch, Durability::Process).unwrap();
        let mut log = LogStore::new(engine, Arc::new(Shared::default())).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let limited = runtime
            .block_on(log.limited_get_log_entries(1, 11))
            .unwrap();
        let indexes: Vec<u64> = limited.iter().map(|e| e.log_id.index).collect();
        assert_eq!(
            indexes,
            vec![1, 2, 3],
            "three 1 MB entries fit in 4 MB, not four"
        );
        let all = runtime.block_on(log.try_get_log_entries(1..11)).unwrap();
        assert_eq!(all.len(), 10);
        // One entry larger than the bound still goes, alone.
        let mut batch = WriteBatch::default();
        let entry = Entry::<TypeConfig> {
            log_id: LogId::new(CommittedLeaderId::new(1, 0), 11),
            payload: openraft::EntryPayload::Normal(crate::types::Proposal::Config(vec![
                0;
                5 << 20
            ])),
        };
        batch.put(Space::Replication, log_key(11), encode(&entry).unwrap());
        log.engine.write(batch, Durability::Process).unwrap();
        let limited = runtime
            .block_on(log.limited_get_log_entries(11, 12))
            .unwrap();
        assert_eq!(limited.len(), 1);
    }
}
