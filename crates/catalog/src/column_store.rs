//! A column store index (`{"$**": "columnstore"}`, `columnstoreProjection`): the
//! collection's documents as row groups of column chunks (`basalt_columnar`), kept in the
//! index's key range, and the record ids written since their row group was built.
//!
//! Keys in the index keyspace, after the index id (u64 BE): `g` · row group (u64 BE) →
//! the row group's header; `h` · row group · path → a chunk. Write markers are in the
//! catalog keyspace, `w` · index id · record id → the write's sequence number and the
//! last record id of the run of records it marks (within the row group: an insert batch
//! marks its records with one key per row group); there they stay out of the index
//! keyspace, into which a bulk insert ingests tables of its own that another key range
//! would make overlap (measured: a W1 load took twice as long). Every
//! insert, update and delete puts its `w` key in the batch that changes the document, so a
//! snapshot always knows which rows of a row group are stale: a query runs a row group
//! with written records on the documents themselves (exact by construction), and the
//! merge ([`Collection::merge_column_store`]) rebuilds such row groups from a snapshot,
//! then commits them, under the write lock, only if no write reached the row group in
//! between. Records past the last built row group are written records too.

use crate::collection::{Collection, Writer};
use crate::{keys, CollectionMeta, IndexSpec};
use basalt_columnar::{ChunkCache, ColumnChunk, ColumnProjection, RowGroupBuilder, RowGroupHeader};
use basalt_error::{Error, Result};
use basalt_storage::{Durability, ScanStart, Snapshot, Space, WriteBatch};
use bson::Bson;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// The index type's name in a key pattern.
pub const COLUMN_STORE: &str = "columnstore";

pub use basalt_columnar::{RECORD_IDS_PATH, ROW_GROUP_SPAN_BITS};

const HEADER_TAG: u8 = b'g';
const CHUNK_TAG: u8 = b'h';
const WRITTEN_TAG: u8 = b'w';

/// When the merge rebuilds a row group. It must have [`MERGE_WRITTEN_MIN`] written
/// records or a write older than [`MERGE_AFTER_MS`], and no write for
/// [`MERGE_QUIET_MS`] (one still being written would only be rebuilt again). And the
/// merge yields to a stream of writes to the collection: it waits until the collection
/// had no write for [`MERGE_QUIET_MS`] too, unless [`MERGE_BACKLOG_MAX`] records wait
/// or a write waited [`MERGE_OVERDUE_MS`]. Until a row group merges, queries read its
/// documents, so the waiting costs reads speed, never answers.
pub const MERGE_WRITTEN_MIN: usize = 1024;
pub const MERGE_AFTER_MS: i64 = 2_000;
pub const MERGE_QUIET_MS: i64 = 500;
pub const MERGE_BACKLOG_MAX: usize = 16 << ROW_GROUP_SPAN_BITS;
pub const MERGE_OVERDUE_MS: i64 = 30_000;

/// The most memory decoded chunks kept between queries take, for every collection.
pub const CHUNK_CACHE_BYTES_MAX: usize = 1 << 30;

fn chunk_cache() -> &'static ChunkCache {
    static CACHE: OnceLock<ChunkCache> = OnceLock::new();
    CACHE.get_or_init(|| ChunkCache::new(CHUNK_CACHE_BYTES_MAX))
}

/// Bounds the memory of decoded chunks kept between queries (the server's share of
/// `--cacheSizeGB` for them).
pub fn set_chunk_cache_limit(bytes: usize) {
    chunk_cache().set_limit_bytes(bytes);
}

/// Sequence numbers of writes and generations of row groups: milliseconds since the
/// epoch shifted left by 10 bits, and counted up within a millisecond, so they increase,
/// also across restarts, and say when they were taken (`>> 10`).
fn next_sequence() -> i64 {
    static LAST: AtomicI64 = AtomicI64::new(0);
    let now = bson::DateTime::now().timestamp_millis() << 10;
    let previous = LAST
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |last| {
            Some(now.max(last + 1))
        })
        .unwrap_or(now);
    now.max(previous + 1)
}

fn tagged(index_id: u64, tag: u8) -> Vec<u8> {
    let mut key = index_id.to_be_bytes().to_vec();
    key.push(tag);
    key
}

fn header_key(index_id: u64, group: u64) -> Vec<u8> {
    let mut key = tagged(index_id, HEADER_TAG);
    key.extend_from_slice(&group.to_be_bytes());
    key
}

fn chunk_prefix(index_id: u64, group: u64) -> Vec<u8> {
    let mut key = tagged(index_id, CHUNK_TAG);
    key.extend_from_slice(&group.to_be_bytes());
    key
}

/// The keyspace of the write markers.
const MARKERS: Space = Space::Catalog;

/// The prefix of the write markers of index `index_id`.
pub(crate) fn marker_prefix(index_id: u64) -> Vec<u8> {
    let mut key = vec![WRITTEN_TAG];
    key.extend_from_slice(&index_id.to_be_bytes());
    key
}

fn written_key(index_id: u64, record_id: u64) -> Vec<u8> {
    let mut key = marker_prefix(index_id);
    key.extend_from_slice(&record_id.to_be_bytes());
    key
}

fn group_of(record_id: u64) -> u64 {
    record_id >> ROW_GROUP_SPAN_BITS
}

impl IndexSpec {
    /// Whether this is a column store index: what every write asks of every index, so
    /// it builds nothing.
    pub fn is_column_store(&self) -> bool {
        self.key.len() == 1
            && self
                .key
                .iter()
                .next()
                .is_some_and(|(field, kind)| field == "$**" && is_column_store(kind))
    }

    /// A column store index's projection; `None` for any other index.
    pub fn column_store(&self) -> Option<ColumnProjection> {
        self.is_column_store()
            .then(|| ColumnProjection::new(self.echoed.get_document("columnstoreProjection").ok()))
    }
}

/// Puts the markers of writes to `record_ids` (ascending) for each column store index
/// of `meta`: one per run of consecutive ids within a row group, so an insert batch
/// marks its records with a key or two.
pub(crate) fn mark_written(
    batch: &mut WriteBatch,
    meta: &CollectionMeta,
    record_ids: impl IntoIterator<Item = u64>,
) {
    let indexes: Vec<u64> = meta
        .indexes
        .iter()
        .filter(|i| i.is_column_store())
        .map(|i| i.id)
        .collect();
    if indexes.is_empty() {
        return;
    }
    let runs = runs(record_ids);
    let sequence = next_sequence();
    for index_id in indexes {
        for &(first, last) in &runs {
            let mark = Mark { last, sequence };
            batch.put(MARKERS, written_key(index_id, first), mark.encode());
        }
    }
}

/// Ascending record ids as runs `(first, last)` of consecutive ids within a row group.
fn runs(record_ids: impl IntoIterator<Item = u64>) -> Vec<(u64, u64)> {
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for id in record_ids {
        match runs.last_mut() {
            Some((first, last)) if *last + 1 == id && group_of(id) == group_of(*first) => {
                *last = id
            }
            _ => runs.push((id, id)),
        }
    }
    runs
}

/// A write marker's value: the records `first..=last` (the key's record id is `first`;
/// all in its row group) were written at `sequence`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Mark {
    last: u64,
    sequence: i64,
}

impl Mark {
    fn encode(self) -> Vec<u8> {
        let mut value = self.sequence.to_be_bytes().to_vec();
        value.extend_from_slice(&self.last.to_be_bytes());
        value
    }

    /// A marker of `first`'s key (one of a single record, as the first stores wrote
    /// them, holds only its sequence).
    fn decode(first: u64, value: &[u8]) -> Option<Mark> {
        let sequence = i64::from_be_bytes(value.get(..8)?.try_into().ok()?);
        let last = match value.get(8..) {
            Some([]) => first,
            Some(last) => u64::from_be_bytes(last.try_into().ok()?),
            None => return None,
        };
        (last >= first && group_of(last) == group_of(first)).then_some(Mark { last, sequence })
    }

    fn records(&self, first: u64) -> usize {
        (self.last - first + 1) as usize
    }
}

/// What a query reads of a column store index in one snapshot.
#[derive(Debug)]
pub struct ColumnStoreView {
    pub index_id: u64,
    /// Built row groups by number.
    pub groups: BTreeMap<u64, RowGroupHeader>,
    /// Row groups with records written since they were built (or never built).
    pub written_groups: BTreeSet<u64>,
}

impl ColumnStoreView {
    /// Whether row group `group` can be read from its chunks.
    pub fn is_current(&self, group: u64) -> bool {
        self.groups.contains_key(&group) && !self.written_groups.contains(&group)
    }

    /// The record id range (`after` exclusive, `last` inclusive) of row group `group`.
    pub fn record_range(group: u64) -> (Option<u64>, u64) {
        let first = group << ROW_GROUP_SPAN_BITS;
        let last = first + (1 << ROW_GROUP_SPAN_BITS) - 1;
        (first.checked_sub(1), last)
    }
}

impl Collection {
    /// The column store index `index_id` as `snapshot` sees it.
    pub fn column_store_view(
        &self,
        snapshot: &dyn Snapshot,
        index_id: u64,
    ) -> Result<ColumnStoreView> {
        let mut groups = BTreeMap::new();
        let prefix = tagged(index_id, HEADER_TAG);
        snapshot.scan_prefix(
            Space::Indexes,
            &prefix,
            ScanStart::Beginning,
            &mut |key, value| {
                let group = keys::trailing_record_id(key)
                    .ok_or_else(|| Error::internal("a column store header key is corrupt"))?;
                groups.insert(group, RowGroupHeader::from_bytes(value)?);
                Ok(ControlFlow::Continue(()))
            },
        )?;
        let written_groups = written_groups(snapshot, index_id)?;
        Ok(ColumnStoreView {
            index_id,
            groups,
            written_groups,
        })
    }

    /// The chunk of `path` in a built row group; `None` when no row has a value there.
    pub fn column_chunk(
        &self,
        snapshot: &dyn Snapshot,
        view: &ColumnStoreView,
        group: u64,
        path: &str,
    ) -> Result<Option<Arc<ColumnChunk>>> {
        let Some(header) = view.groups.get(&group) else {
            return Ok(None);
        };
        let cache = chunk_cache();
        if let Some(chunk) = cache.get(view.index_id, group, header.generation, path) {
            return Ok(Some(chunk));
        }
        let mut key = chunk_prefix(view.index_id, group);
        key.extend_from_slice(path.as_bytes());
        let Some(bytes) = snapshot.get(Space::Indexes, &key)? else {
            return Ok(None);
        };
        let chunk = Arc::new(ColumnChunk::decode(&bytes)?);
        cache.insert(view.index_id, group, header.generation, path, chunk.clone());
        Ok(Some(chunk))
    }

    /// Folds written records into their row groups for each column store index: row
    /// groups with many written records or an old write are rebuilt from a snapshot,
    /// and each is committed only if no write reached it meanwhile (checked under the
    /// write lock, which is held only for that check and the write). Returns the row
    /// groups rebuilt.
    pub fn merge_column_store(&self) -> Result<usize> {
        let meta = self.meta();
        let now = next_sequence();
        let mut merged = 0;
        for index in meta.indexes.iter() {
            let Some(projection) = index.column_store() else {
                continue;
            };
            let snapshot = self.engine.snapshot();
            let mut by_group: BTreeMap<u64, BTreeMap<u64, Mark>> = BTreeMap::new();
            for (first, mark) in written(&*snapshot, index.id)? {
                by_group
                    .entry(group_of(first))
                    .or_default()
                    .insert(first, mark);
            }
            let age = |sequence: i64| (now - sequence) >> 10;
            let records = |marks: &BTreeMap<u64, Mark>| -> usize {
                marks.iter().map(|(first, mark)| mark.records(*first)).sum()
            };
            let newest_write = by_group
                .values()
                .flat_map(|marks| marks.values())
                .map(|m| m.sequence)
                .max();
            let backlog: usize = by_group.values().map(records).sum();
            let writes_paused = newest_write.is_none_or(|newest| age(newest) >= MERGE_QUIET_MS);
            for (group, marks) in by_group {
                let sequences = marks.values().map(|mark| mark.sequence);
                let oldest = sequences.clone().min().unwrap_or(now);
                let newest = sequences.max().unwrap_or(now);
                let due = (records(&marks) >= MERGE_WRITTEN_MIN || age(oldest) >= MERGE_AFTER_MS)
                    && age(newest) >= MERGE_QUIET_MS
                    && (writes_paused
                        || backlog >= MERGE_BACKLOG_MAX
                        || age(oldest) >= MERGE_OVERDUE_MS);
                if !due || self.is_retired() {
                    continue;
                }
                let batch = build_group(self, &*snapshot, index.id, &projection, group)?;
                let _writer = self.writer();
                let dropped = !self.meta().indexes.iter().any(|i| i.id == index.id);
                if dropped || self.is_retired() {
                    return Ok(merged);
                }
                let fresh = self.engine.snapshot();
                if group_marks(&*fresh, index.id, group)? != marks {
                    continue;
                }
                let mut batch = batch;
                for record_id in marks.keys() {
                    batch.delete(MARKERS, written_key(index.id, *record_id));
                }
                self.engine.write(batch, Durability::Process)?;
                merged += 1;
            }
        }
        Ok(merged)
    }
}

impl crate::Catalog {
    /// One merge pass over every collection with a column store index
    /// ([`Collection::merge_column_store`]); returns the row groups rebuilt.
    pub fn merge_column_stores(&self) -> Result<usize> {
        let mut merged = 0;
        for db in self.database_names() {
            for collection in self.collections_of(&db) {
                if collection
                    .meta()
                    .indexes
                    .iter()
                    .any(|i| i.is_column_store())
                {
                    merged += collection.merge_column_store()?;
                }
            }
        }
        Ok(merged)
    }
}

/// The markers of records written since their row group was built, by first record.
fn written(snapshot: &dyn Snapshot, index_id: u64) -> Result<BTreeMap<u64, Mark>> {
    written_under(snapshot, &marker_prefix(index_id))
}

/// The row groups with written records: one seek per such row group, however many
/// markers it has (a bulk load leaves one per record).
fn written_groups(snapshot: &dyn Snapshot, index_id: u64) -> Result<BTreeSet<u64>> {
    let prefix = marker_prefix(index_id);
    let mut groups = BTreeSet::new();
    let mut after: Option<Vec<u8>> = None;
    loop {
        let start = match &after {
            Some(key) => ScanStart::After(key),
            None => ScanStart::Beginning,
        };
        let mut found = None;
        snapshot.scan_prefix(MARKERS, &prefix, start, &mut |key, _| {
            let corrupt = || Error::internal("a column store write marker is corrupt");
            found = Some(keys::trailing_record_id(key).ok_or_else(corrupt)?);
            Ok(ControlFlow::Break(()))
        })?;
        let Some(record_id) = found else {
            return Ok(groups);
        };
        let group = group_of(record_id);
        groups.insert(group);
        // The next seek starts past the row group's last record id.
        match (group + 1).checked_mul(1 << ROW_GROUP_SPAN_BITS) {
            Some(next) => after = Some(written_key(index_id, next - 1)),
            None => return Ok(groups),
        }
    }
}

// A row group's markers are found by a prefix of whole bytes.
const _: () = assert!(ROW_GROUP_SPAN_BITS.is_multiple_of(8));

/// The markers of one row group: its record ids share their high 48 bits, so their keys
/// share a prefix.
fn group_marks(snapshot: &dyn Snapshot, index_id: u64, group: u64) -> Result<BTreeMap<u64, Mark>> {
    let mut prefix = marker_prefix(index_id);
    let first = (group << ROW_GROUP_SPAN_BITS).to_be_bytes();
    prefix.extend_from_slice(&first[..8 - ROW_GROUP_SPAN_BITS as usize / 8]);
    written_under(snapshot, &prefix)
}

fn written_under(snapshot: &dyn Snapshot, prefix: &[u8]) -> Result<BTreeMap<u64, Mark>> {
    let mut found = BTreeMap::new();
    snapshot.scan_prefix(MARKERS, prefix, ScanStart::Beginning, &mut |key, value| {
        let first = keys::trailing_record_id(key);
        match first.and_then(|first| Some((first, Mark::decode(first, value)?))) {
            Some((first, mark)) => found.insert(first, mark),
            None => return Err(Error::internal("a column store write marker is corrupt")),
        };
        Ok(ControlFlow::Continue(()))
    })?;
    Ok(found)
}

/// The batch that replaces row group `group` with what `snapshot` holds: its header and
/// chunks, and the removal of chunks of paths it no longer has (of everything when it
/// has no records left).
fn build_group(
    collection: &Collection,
    snapshot: &dyn Snapshot,
    index_id: u64,
    projection: &ColumnProjection,
    group: u64,
) -> Result<WriteBatch> {
    let mut builder = RowGroupBuilder::new(projection);
    let (after, last) = ColumnStoreView::record_range(group);
    collection.scan(snapshot, after, &mut |record_id, raw| {
        if record_id > last {
            return Ok(ControlFlow::Break(()));
        }
        builder.add(record_id, raw)?;
        Ok(ControlFlow::Continue(()))
    })?;
    let mut batch = WriteBatch::default();
    let prefix = chunk_prefix(index_id, group);
    let mut stale = BTreeSet::new();
    snapshot.scan_prefix(
        Space::Indexes,
        &prefix,
        ScanStart::Beginning,
        &mut |key, _| {
            stale.insert(key.to_vec());
            Ok(ControlFlow::Continue(()))
        },
    )?;
    if builder.is_empty() {
        batch.delete(Space::Indexes, header_key(index_id, group));
    } else {
        let (header, chunks) = builder.finish(next_sequence())?;
        batch.put(
            Space::Indexes,
            header_key(index_id, group),
            header.to_bytes()?,
        );
        for (path, chunk) in chunks {
            let mut key = prefix.clone();
            key.extend_from_slice(path.as_bytes());
            // A key is either rewritten or deleted: never both in one batch.
            stale.remove(&key);
            batch.put(Space::Indexes, key, chunk.encode());
        }
    }
    for key in stale {
        batch.delete(Space::Indexes, key);
    }
    Ok(batch)
}

impl Writer<'_> {
    /// Builds a new column store index's row groups from every record (under the write
    /// lock, as every index build). Row groups are shredded on a thread per core, and
    /// written in record id order as each is done; `progress` hears the documents
    /// scanned so far.
    pub(crate) fn build_column_store(
        &mut self,
        index: &IndexSpec,
        projection: &ColumnProjection,
        progress: &mut dyn FnMut(u64),
    ) -> Result<()> {
        let collection = self.collection();
        let snapshot = collection.engine.snapshot();
        // The row groups that hold records: one seek each, past the group before.
        let mut groups = Vec::new();
        let mut after = None;
        loop {
            let mut first = None;
            collection.scan(&*snapshot, after, &mut |record_id, _| {
                first = Some(record_id);
                Ok(ControlFlow::Break(()))
            })?;
            let Some(first) = first else { break };
            let group = group_of(first);
            groups.push(group);
            after = Some(ColumnStoreView::record_range(group).1);
        }
        let workers = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(groups.len());
        let next = AtomicUsize::new(0);
        let snapshot = &*snapshot;
        std::thread::scope(|scope| {
            let (done, built) = std::sync::mpsc::sync_channel(workers);
            for _ in 0..workers {
                let (done, next, groups) = (done.clone(), &next, &groups);
                scope.spawn(move || loop {
                    let at = next.fetch_add(1, Ordering::Relaxed);
                    let Some(group) = groups.get(at) else { break };
                    let batch = build_group(collection, snapshot, index.id, projection, *group);
                    // A failed build stops the others at their next row group.
                    if batch.is_err() {
                        next.store(groups.len(), Ordering::Relaxed);
                    }
                    if done.send((at, batch)).is_err() {
                        break;
                    }
                });
            }
            drop(done);
            // Written in order: a batch that arrives early waits for those before it.
            let mut waiting = BTreeMap::new();
            let mut written = 0;
            for (at, batch) in built {
                waiting.insert(at, batch?);
                while let Some(batch) = waiting.remove(&written) {
                    // A new index's keys: written as tables directly, as a bulk load's.
                    collection.engine.ingest(batch)?;
                    written += 1;
                    progress((written as u64) << ROW_GROUP_SPAN_BITS);
                }
            }
            Ok(())
        })
    }
}

/// Whether `value` names the column store index type.
pub fn is_column_store(direction: &Bson) -> bool {
    direction.as_str() == Some(COLUMN_STORE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_name_runs_of_records_within_a_row_group() {
        let span = 1u64 << ROW_GROUP_SPAN_BITS;
        let ids = [3, 4, 5, 9, span - 1, span, span + 1];
        assert_eq!(
            runs(ids),
            [(3, 5), (9, 9), (span - 1, span - 1), (span, span + 1)]
        );
        let mark = Mark {
            last: 5,
            sequence: 42,
        };
        assert_eq!(Mark::decode(3, &mark.encode()), Some(mark));
        assert_eq!(mark.records(3), 3);
        // A marker of one record as the first stores wrote it: its sequence alone.
        let single = Mark::decode(7, &42i64.to_be_bytes());
        assert_eq!(
            single,
            Some(Mark {
                last: 7,
                sequence: 42
            })
        );
        // Corrupt: short, ending before its first record, or past its row group.
        assert_eq!(Mark::decode(7, &[1, 2]), None);
        assert_eq!(
            Mark::decode(
                7,
                &Mark {
                    last: 6,
                    sequence: 1
                }
                .encode()
            ),
            None
        );
        assert_eq!(
            Mark::decode(
                7,
                &Mark {
                    last: span,
                    sequence: 1
                }
                .encode()
            ),
            None
        );
    }
}
