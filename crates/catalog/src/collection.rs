//! One collection: its metadata, its records and the index entries that go with them.
//!
//! Reads go through a storage snapshot. Writes go through a [`Writer`], which holds the
//! collection's write lock: writes to one collection are serialised, so a unique-index
//! check and the write it guards cannot interleave with another writer, and a
//! read-modify-write (update) sees the latest version of the document. Each change of a
//! document and all its index entries is one atomic storage batch.

use crate::index::{IndexKey, IndexSpec};
use crate::keys;
use crate::latency_stats::LatencyStats;
use crate::plan_cache::PlanCache;
use basalt_error::{Error, ErrorCode, Result};
use basalt_storage::{
    Durability, Engine, ScanEnd, ScanStart, Snapshot, Space, WriteBatch, WriteOp,
};
use bson::{doc, Bson, Document, RawDocument, RawDocumentBuf};
use parking_lot::{Condvar, Mutex, MutexGuard, RwLock};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Record bytes from which an insert batch is ingested (written into tables of its own,
/// see [`Engine::ingest`]) instead of going through the journal and the memtables: about
/// a third of the server's work per document in a bulk load. Below it, a table per batch
/// costs more in compactions than it saves.
const INGEST_BATCH_BYTES_MIN: usize = 4 << 20;

/// What [`Collection::scan_index`] hands each entry to: the entry (encoded key and record
/// id) and the values it stores.
pub type IndexEntryVisitor<'v> = dyn FnMut(&[u8], &[u8]) -> Result<ControlFlow<()>> + 'v;

/// What the catalog stores about a collection.
#[derive(Clone, Debug, PartialEq)]
pub struct CollectionMeta {
    pub id: u64,
    pub db: String,
    pub name: String,
    pub uuid: bson::Uuid,
    /// The options given to `create` (capped, validator, ...), reported by listCollections.
    pub options: Document,
    pub indexes: Vec<IndexSpec>,
}

impl CollectionMeta {
    pub fn namespace(&self) -> String {
        format!("{}.{}", self.db, self.name)
    }

    pub fn to_catalog_document(&self) -> Document {
        doc! {
            "id": self.id as i64,
            "db": self.db.clone(),
            "name": self.name.clone(),
            "uuid": bson::Binary::from_uuid(self.uuid),
            "options": self.options.clone(),
            "indexes": self.indexes.iter().map(|i| Bson::Document(i.to_catalog_document())).collect::<Vec<_>>(),
        }
    }

    pub fn from_catalog_document(d: &Document) -> Result<CollectionMeta> {
        let corrupt =
            |what: &str| Error::internal(format!("corrupt collection entry in catalog: {what}"));
        let uuid = match d.get("uuid") {
            Some(Bson::Binary(b)) => b.to_uuid().map_err(|_| corrupt("uuid"))?,
            _ => return Err(corrupt("uuid")),
        };
        let indexes = d
            .get_array("indexes")
            .map_err(|_| corrupt("indexes"))?
            .iter()
            .map(|i| match i {
                Bson::Document(spec) => IndexSpec::from_catalog_document(spec),
                _ => Err(corrupt("index")),
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(CollectionMeta {
            id: d.get_i64("id").map_err(|_| corrupt("id"))? as u64,
            db: d.get_str("db").map_err(|_| corrupt("db"))?.to_string(),
            name: d.get_str("name").map_err(|_| corrupt("name"))?.to_string(),
            uuid,
            options: d.get_document("options").cloned().unwrap_or_default(),
            indexes,
        })
    }
}

pub struct Collection {
    pub(crate) engine: Arc<dyn Engine>,
    meta: RwLock<Arc<CollectionMeta>>,
    write_lock: Mutex<()>,
    next_record_id: AtomicU64,
    /// Set when the collection is dropped or renamed away: a writer that raced with it
    /// must look the namespace up again instead of writing into a dead collection.
    retired: AtomicBool,
    /// Document count and bytes, counted by one scan the first time they are asked for
    /// and kept by every write after that, so collStats, dbStats, listDatabases and an
    /// unfiltered count cost nothing per call.
    counters: Mutex<Option<CollectionStats>>,
    plan_cache: PlanCache,
    /// Operations that used each index (by index id) since `opened` ($indexStats).
    index_uses: Mutex<HashMap<u64, u64>>,
    opened: bson::DateTime,
    /// Latencies of the operations on it since it was opened ($collStats).
    latency: LatencyStats,
    /// Notified after each insert into a capped collection, for tailing readers
    /// (`capped.rs`).
    inserted: (Mutex<()>, Condvar),
}

/// Size figures for collStats/dbStats.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CollectionStats {
    pub count: u64,
    pub data_size_bytes: u64,
}

/// A collection's bytes on disk ([`Collection::disk_sizes`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DiskSizes {
    pub records: u64,
    /// Each index's name and bytes.
    pub indexes: Vec<(String, u64)>,
}

impl DiskSizes {
    pub fn total_index_bytes(&self) -> u64 {
        self.indexes.iter().map(|(_, bytes)| bytes).sum()
    }
}

impl Collection {
    pub(crate) fn open(engine: Arc<dyn Engine>, meta: CollectionMeta) -> Result<Collection> {
        let snapshot = engine.snapshot();
        let next = last_record_id(&*snapshot, &meta)?.map_or(1, |id| id + 1);
        Ok(Collection {
            engine,
            meta: RwLock::new(Arc::new(meta)),
            write_lock: Mutex::new(()),
            next_record_id: AtomicU64::new(next),
            retired: AtomicBool::new(false),
            counters: Mutex::new(None),
            plan_cache: PlanCache::default(),
            index_uses: Mutex::default(),
            latency: LatencyStats::default(),
            opened: bson::DateTime::now(),
            inserted: (Mutex::new(()), Condvar::new()),
        })
        .and_then(|collection| {
            collection.complete_ingestion()?;
            Ok(collection)
        })
    }

    /// Completes an ingested insert batch that a crash (or an I/O error) interrupted:
    /// the records of the marked range that reached the disk get their index entries,
    /// then the marker goes. Idempotent: entries already there are written again as
    /// they are.
    fn complete_ingestion(&self) -> Result<()> {
        let meta = self.meta();
        let marker = keys::ingestion_marker_key(meta.id);
        let snapshot = self.engine.snapshot();
        let Some(value) = snapshot.get(Space::Catalog, &marker)? else {
            return Ok(());
        };
        let (first, last) = keys::ingestion_marker_range(&value)
            .ok_or_else(|| Error::internal("corrupt ingestion marker in catalog"))?;
        let mut batch = WriteBatch::default();
        let mut completed = 0u64;
        self.scan(&*snapshot, first.checked_sub(1), &mut |record_id, raw| {
            if record_id > last {
                return Ok(ControlFlow::Break(()));
            }
            let doc = decode_record(raw.as_bytes())?;
            for index in &meta.indexes {
                let (keys, stored) = index.entries_of(&doc)?;
                for key in keys.keys {
                    let entry = keys::index_entry_key(index.id, &key.encoded, record_id);
                    batch.put(Space::Indexes, entry, stored.clone());
                }
            }
            completed += 1;
            Ok(ControlFlow::Continue(()))
        })?;
        crate::column_store::mark_written(&mut batch, &meta, first..=last);
        batch.delete(Space::Catalog, marker);
        self.engine.write(batch, Durability::Disk)?;
        tracing::warn!(
            collection = %meta.namespace(),
            "completed an interrupted bulk insert: index entries written for {completed} records"
        );
        Ok(())
    }

    pub fn meta(&self) -> Arc<CollectionMeta> {
        self.meta.read().clone()
    }

    pub(crate) fn set_meta(&self, meta: CollectionMeta) {
        let mut current = self.meta.write();
        if current.indexes != meta.indexes {
            self.plan_cache.clear();
        }
        *current = Arc::new(meta);
    }

    /// The metadata and the plan cache generation, read together: a plan made over
    /// these indexes is stored under that generation, so a plan made over indexes that
    /// changed meanwhile is never cached.
    pub fn meta_for_planning(&self) -> (Arc<CollectionMeta>, u64) {
        let meta = self.meta.read();
        (without_hidden(&meta), self.plan_cache.generation())
    }

    /// The metadata the planner sees: without hidden indexes.
    pub fn planning_meta(&self) -> Arc<CollectionMeta> {
        without_hidden(&self.meta.read())
    }

    pub fn plan_cache(&self) -> &PlanCache {
        &self.plan_cache
    }

    /// The latencies of the operations on this collection, which commands record.
    pub fn latency(&self) -> &LatencyStats {
        &self.latency
    }

    /// Counts one operation that reads the index `index_id`.
    pub fn note_index_use(&self, index_id: u64) {
        *self.index_uses.lock().entry(index_id).or_default() += 1;
    }

    /// How many operations read the index `index_id`, and since when (the collection
    /// was opened or created).
    pub fn index_uses(&self, index_id: u64) -> (u64, bson::DateTime) {
        let uses = self.index_uses.lock().get(&index_id).copied().unwrap_or(0);
        (uses, self.opened)
    }

    pub(crate) fn retire(&self) {
        self.retired.store(true, Ordering::SeqCst);
    }

    pub fn is_retired(&self) -> bool {
        self.retired.load(Ordering::SeqCst)
    }

    pub fn snapshot(&self) -> Box<dyn Snapshot> {
        self.engine.snapshot()
    }

    /// Visits the collection's documents in natural (insertion) order, starting after
    /// `after_record_id` when resuming, until the visitor breaks.
    pub fn scan(
        &self,
        snapshot: &dyn Snapshot,
        after_record_id: Option<u64>,
        visit: &mut dyn FnMut(u64, &bson::RawDocument) -> Result<ControlFlow<()>>,
    ) -> Result<()> {
        let id = self.meta().id;
        let prefix = keys::record_prefix(id);
        let resume_key = after_record_id.map(|r| keys::record_key(id, r));
        let start = match &resume_key {
            Some(k) => ScanStart::After(k),
            None => ScanStart::Beginning,
        };
        snapshot.scan_prefix(Space::Records, &prefix, start, &mut |key, value| {
            let record_id = keys::trailing_record_id(key)
                .ok_or_else(|| Error::internal("record key without a record id"))?;
            let raw = bson::RawDocument::from_bytes(value)
                .map_err(|e| Error::internal(format!("corrupt record {record_id}: {e}")))?;
            visit(record_id, raw)
        })
    }

    /// `size` distinct documents drawn at random without scanning the collection (a
    /// random cursor, as `$sample` first in a pipeline reads a large collection): each
    /// draw picks a record id between the first and the last and takes the first record
    /// from there. Records after a gap of deleted ids are likelier, as with MongoDB's
    /// random cursor. `None` when that many distinct records do not come within a few
    /// draws each (a collection that is small or mostly gaps: sample it by scanning).
    pub fn random_records(
        &self,
        snapshot: &dyn Snapshot,
        size: usize,
    ) -> Result<Option<Vec<Document>>> {
        const DRAWS_PER_RECORD: usize = 8;
        let meta = self.meta();
        let id = meta.id;
        let prefix = keys::record_prefix(id);
        let mut first = None;
        self.scan(snapshot, None, &mut |record_id, _| {
            first = Some(record_id);
            Ok(ControlFlow::Break(()))
        })?;
        let (Some(first), Some(last)) = (first, last_record_id(snapshot, &meta)?) else {
            return Ok(Some(Vec::new()));
        };
        let mut chosen = std::collections::HashSet::with_capacity(size);
        let mut documents = Vec::with_capacity(size);
        for _ in 0..size.saturating_mul(DRAWS_PER_RECORD) {
            if documents.len() == size {
                return Ok(Some(documents));
            }
            let drawn = rand::random_range(first..=last);
            let mut found = None;
            let start = drawn
                .checked_sub(1)
                .map(|before| keys::record_key(id, before));
            let start = match &start {
                Some(key) => ScanStart::After(key),
                None => ScanStart::Beginning,
            };
            snapshot.scan_prefix(Space::Records, &prefix, start, &mut |key, value| {
                found = Some((keys::trailing_record_id(key), decode_record(value)?));
                Ok(ControlFlow::Break(()))
            })?;
            if let Some((Some(record_id), document)) = found {
                if chosen.insert(record_id) {
                    documents.push(document);
                }
            }
        }
        Ok((documents.len() == size).then_some(documents))
    }

    /// The record ids whose key in `index` equals `values` (an equality lookup).
    pub fn lookup_index(
        &self,
        snapshot: &dyn Snapshot,
        index: &IndexSpec,
        values: &[Bson],
    ) -> Result<Vec<u64>> {
        let prefix = keys::index_key_prefix(index.id, &index.encode(values));
        let mut ids = Vec::new();
        snapshot.scan_prefix(
            Space::Indexes,
            &prefix,
            ScanStart::Beginning,
            &mut |key, _| {
                if key.len() == prefix.len() + 8 {
                    ids.extend(keys::trailing_record_id(key));
                }
                Ok(ControlFlow::Continue(()))
            },
        )?;
        Ok(ids)
    }

    /// Visits, in key order, the entries of `index` whose encoded key starts with
    /// `key_prefix`, from the first entry after `after` (an encoded key, possibly with
    /// its record id) when given. The visitor sees the entry without the index id: the
    /// encoded key followed by the record id (u64 BE); and the values it stores
    /// ([`IndexSpec::entries_of`]).
    pub fn scan_index(
        &self,
        snapshot: &dyn Snapshot,
        index: &IndexSpec,
        key_prefix: &[u8],
        after: Option<&[u8]>,
        visit: &mut IndexEntryVisitor<'_>,
    ) -> Result<()> {
        let prefix = keys::index_key_prefix(index.id, key_prefix);
        let resume = after.map(|a| keys::index_key_prefix(index.id, a));
        let start = match &resume {
            Some(k) => ScanStart::After(k),
            None => ScanStart::Beginning,
        };
        snapshot.scan_prefix(Space::Indexes, &prefix, start, &mut |key, stored| {
            visit(&key[8..], stored)
        })
    }

    /// The record ids of each key of `index` that more than one record has (what makes
    /// an index impossible to turn unique), in key order.
    pub fn duplicate_keys(
        &self,
        snapshot: &dyn Snapshot,
        index: &IndexSpec,
    ) -> Result<Vec<Vec<u64>>> {
        let mut groups: Vec<Vec<u64>> = Vec::new();
        let mut current: (Vec<u8>, Vec<u64>) = (Vec::new(), Vec::new());
        self.scan_index(snapshot, index, &[], None, &mut |entry, _| {
            let Some(record_id) = keys::trailing_record_id(entry) else {
                return Ok(ControlFlow::Continue(()));
            };
            let key = &entry[..entry.len() - 8];
            if key != current.0.as_slice() {
                let done = std::mem::replace(&mut current, (key.to_vec(), Vec::new()));
                if done.1.len() > 1 {
                    groups.push(done.1);
                }
            }
            current.1.push(record_id);
            Ok(ControlFlow::Continue(()))
        })?;
        if current.1.len() > 1 {
            groups.push(current.1);
        }
        Ok(groups)
    }

    /// As [`Collection::scan_index`], in descending key order: from the last entry below
    /// `before` (an encoded key, possibly with its record id) when given, else from the
    /// last entry with the prefix.
    pub fn scan_index_back(
        &self,
        snapshot: &dyn Snapshot,
        index: &IndexSpec,
        key_prefix: &[u8],
        before: Option<&[u8]>,
        visit: &mut IndexEntryVisitor<'_>,
    ) -> Result<()> {
        let prefix = keys::index_key_prefix(index.id, key_prefix);
        let resume = before.map(|b| keys::index_key_prefix(index.id, b));
        let end = match &resume {
            Some(k) => ScanEnd::Before(k),
            None => ScanEnd::End,
        };
        snapshot.scan_prefix_back(Space::Indexes, &prefix, end, &mut |key, stored| {
            visit(&key[8..], stored)
        })
    }

    /// A record's stored BSON, for a reader that decodes only the fields it needs.
    pub fn get_record_bytes(
        &self,
        snapshot: &dyn Snapshot,
        record_id: u64,
    ) -> Result<Option<Vec<u8>>> {
        snapshot.get(Space::Records, &keys::record_key(self.meta().id, record_id))
    }

    pub fn get_record(&self, snapshot: &dyn Snapshot, record_id: u64) -> Result<Option<Document>> {
        let key = keys::record_key(self.meta().id, record_id);
        match snapshot.get(Space::Records, &key)? {
            Some(bytes) => Ok(Some(decode_record(&bytes)?)),
            None => Ok(None),
        }
    }

    /// The bytes on disk of the collection's records and of each index's entries (in
    /// the order of `meta().indexes`), as the engine's tables hold them compressed.
    pub fn disk_sizes(&self) -> DiskSizes {
        let meta = self.meta();
        DiskSizes {
            records: self
                .engine
                .prefix_disk_bytes(Space::Records, &keys::record_prefix(meta.id)),
            indexes: meta
                .indexes
                .iter()
                .map(|index| {
                    let size = self
                        .engine
                        .prefix_disk_bytes(Space::Indexes, &keys::index_key_prefix(index.id, &[]));
                    (index.name.clone(), size)
                })
                .collect(),
        }
    }

    pub fn stats(&self) -> Result<CollectionStats> {
        if let Some(kept) = *self.counters.lock() {
            return Ok(kept);
        }
        // Counted under the write lock, so no write lands between the scan and the
        // moment writers start keeping the counters.
        let _writes = self.write_lock.lock();
        self.stats_under_write_lock()
    }

    /// [`Collection::stats`], for a caller that holds the write lock (a [`Writer`]).
    pub(crate) fn stats_under_write_lock(&self) -> Result<CollectionStats> {
        if let Some(kept) = *self.counters.lock() {
            return Ok(kept);
        }
        let mut stats = CollectionStats::default();
        self.scan(&*self.engine.snapshot(), None, &mut |_, raw| {
            stats.count += 1;
            stats.data_size_bytes += raw.as_bytes().len() as u64;
            Ok(ControlFlow::Continue(()))
        })?;
        *self.counters.lock() = Some(stats);
        Ok(stats)
    }

    /// Adjusts the kept counters after a committed write (nothing to do until they
    /// have been counted).
    fn count_change(&self, documents: i64, bytes: i64) {
        // A transaction's writes count once they are stored, when it commits.
        if basalt_storage::write_scope().is_some_and(|scope| scope.provisional()) {
            return;
        }
        if let Some(kept) = self.counters.lock().as_mut() {
            kept.count = kept.count.saturating_add_signed(documents);
            kept.data_size_bytes = kept.data_size_bytes.saturating_add_signed(bytes);
        }
    }

    /// Forgets the kept document count and bytes, to be counted again when next asked
    /// for: after writes were counted that did not reach the disk (a committed
    /// transaction whose application failed part-way).
    pub fn forget_counts(&self) {
        *self.counters.lock() = None;
    }

    /// The highest record id handed out: the number of documents ever inserted, an
    /// upper bound on the current count that costs nothing.
    /// Whether it holds no record (as this thread's scope sees it).
    pub fn is_empty(&self) -> Result<bool> {
        Ok(last_record_id(&*self.snapshot(), &self.meta())?.is_none())
    }

    pub fn record_id_high_water(&self) -> u64 {
        self.next_record_id.load(Ordering::SeqCst).saturating_sub(1)
    }

    /// The lock and condition variable inserts into a capped collection notify.
    pub(crate) fn insert_signal(&self) -> (&Mutex<()>, &Condvar) {
        (&self.inserted.0, &self.inserted.1)
    }

    /// Takes the collection's write lock.
    pub fn writer(&self) -> Writer<'_> {
        Writer {
            collection: self,
            _guard: self.write_lock.lock(),
        }
    }
}

/// The highest record id of the collection. When the block holding it is unreadable
/// (corrupt on disk), the highest record id its `_id` index refers to, so that the
/// collection still opens, serves what can be read and hands out no id twice.
fn last_record_id(snapshot: &dyn Snapshot, meta: &CollectionMeta) -> Result<Option<u64>> {
    let prefix = keys::record_prefix(meta.id);
    let failure = match snapshot.last_key_with_prefix(Space::Records, &prefix) {
        Ok(last) => return Ok(last.and_then(|key| keys::trailing_record_id(&key))),
        Err(e) if e.code == ErrorCode::DATA_CORRUPTION_DETECTED => e,
        Err(e) => return Err(e),
    };
    let id_index = meta
        .indexes
        .iter()
        .find(|index| index.is_id_index())
        .ok_or_else(|| failure.clone())?;
    tracing::warn!(
        collection = %meta.namespace(),
        "the last records are unreadable, record ids go on after the _id index's: {}",
        failure.message
    );
    let mut highest = None;
    snapshot.scan_prefix(
        Space::Indexes,
        &id_index.id.to_be_bytes(),
        ScanStart::Beginning,
        &mut |entry, _| {
            highest = highest.max(keys::trailing_record_id(entry));
            Ok(ControlFlow::Continue(()))
        },
    )?;
    Ok(highest)
}

pub(crate) fn decode_record(bytes: &[u8]) -> Result<Document> {
    let raw = bson::RawDocument::from_bytes(bytes)
        .map_err(|e| Error::internal(format!("corrupt record: {e}")))?;
    Document::try_from(raw).map_err(|e| Error::internal(format!("corrupt record: {e}")))
}

/// Holds a collection's write lock; every change goes through here.
pub struct Writer<'a> {
    collection: &'a Collection,
    _guard: MutexGuard<'a, ()>,
}

/// The outcome of one document of an insert batch.
pub type InsertOutcome = Result<u64>;

/// A document to insert: decoded, or still in the bytes it arrived in.
enum Incoming<'d> {
    Document(&'d Document),
    Raw(&'d RawDocument),
}

/// An insert batch being built.
struct Staging {
    batch: WriteBatch,
    /// The inserted records, for their column store markers: in `batch`'s write when it
    /// is committed, written before it when it is ingested (so that their keys, another
    /// range of the index keyspace, do not make each ingested table overlap the last).
    inserted: Vec<u64>,
    /// Per index of the metadata: the keys this batch adds (kept for unique indexes).
    pending: Vec<PendingKeys>,
    /// Indexes this batch makes multikey.
    multikey: HashSet<u64>,
    /// Per index of the metadata: its greatest stored entry, once looked up.
    greatest: Vec<Option<Option<Vec<u8>>>>,
    /// Whether the only index is `_id`'s: documents in their bytes are then never decoded.
    id_index_only: bool,
    /// The top-level fields the indexes read ([`index_fields`]): only those of a
    /// document in its bytes are decoded.
    index_fields: Option<Vec<String>>,
}

/// The top-level fields the entries of `meta`'s indexes are made from; `None` when an
/// index may read any field.
fn index_fields(meta: &CollectionMeta) -> Option<Vec<String>> {
    let mut fields: Vec<String> = Vec::new();
    for index in &meta.indexes {
        for field in index.top_level_fields()? {
            if !fields.iter().any(|f| f == field) {
                fields.push(field.to_string());
            }
        }
    }
    Some(fields)
}

/// The top-level `fields` of a document in its bytes, decoded alone: what its index
/// entries are made from.
fn index_view(raw: &RawDocument, fields: &[String]) -> Result<Document> {
    basalt_value::raw::decode_named(raw, fields)
        .map_err(|e| Error::bad_value(format!("invalid document: {e}")))
}

/// The keys (`index id | encoded key`) an insert batch adds to one unique index. A load
/// with increasing keys appends each to a sorted list and learns it is new from one
/// comparison with the last; keys out of that order go to a hash set.
#[derive(Default)]
struct PendingKeys {
    ascending: Vec<Vec<u8>>,
    others: HashSet<Vec<u8>>,
}

impl PendingKeys {
    fn contains(&self, key: &[u8]) -> bool {
        // Every key of `others` is below the last ascending key it was compared with.
        match self.ascending.last() {
            Some(last) if key <= last.as_slice() => {
                self.ascending
                    .binary_search_by(|k| k.as_slice().cmp(key))
                    .is_ok()
                    || self.others.contains(key)
            }
            _ => false,
        }
    }

    fn insert(&mut self, key: Vec<u8>) {
        match self.ascending.last() {
            Some(last) if key <= *last => {
                self.others.insert(key);
            }
            _ => self.ascending.push(key),
        }
    }
}

/// The `_id` of a document in its bytes, whose first field it is.
fn leading_id(raw: &RawDocument) -> Result<Bson> {
    let corrupt = |e: bson::error::Error| Error::bad_value(format!("invalid document: {e}"));
    match raw.iter().next().transpose().map_err(corrupt)? {
        Some((key, value)) if key.as_str() == "_id" => Bson::try_from(value).map_err(corrupt),
        _ => Err(Error::internal("a raw insert without _id first")),
    }
}

impl Writer<'_> {
    pub fn collection(&self) -> &Collection {
        self.collection
    }

    /// Inserts documents (each already carrying an `_id`) in one atomic batch, skipping
    /// those that violate a unique index. With `ordered`, the first failure ends the
    /// batch and the documents after it are not attempted (and get no outcome).
    pub fn insert_many(
        &mut self,
        docs: &[impl std::borrow::Borrow<Document>],
        ordered: bool,
        durability: Durability,
    ) -> Result<Vec<InsertOutcome>> {
        let docs = docs.iter().map(|d| Incoming::Document(d.borrow()));
        self.insert_incoming(docs, ordered, durability)
    }

    /// As [`Writer::insert_many`], for documents still in their wire bytes (validated,
    /// `_id` first): the bytes are stored as they are, and a document is decoded only
    /// when an index other than `_id`'s needs its keys. A bulk load spends its time here.
    pub fn insert_many_raw(
        &mut self,
        docs: &[impl std::borrow::Borrow<RawDocument>],
        ordered: bool,
        durability: Durability,
    ) -> Result<Vec<InsertOutcome>> {
        let docs = docs.iter().map(|d| Incoming::Raw(d.borrow()));
        self.insert_incoming(docs, ordered, durability)
    }

    fn insert_incoming<'d>(
        &mut self,
        docs: impl Iterator<Item = Incoming<'d>>,
        ordered: bool,
        durability: Durability,
    ) -> Result<Vec<InsertOutcome>> {
        let meta = self.collection.meta();
        let snapshot = self.collection.engine.snapshot();
        let mut staging = Staging {
            batch: WriteBatch::default(),
            inserted: Vec::new(),
            pending: meta
                .indexes
                .iter()
                .map(|_| PendingKeys::default())
                .collect(),
            multikey: HashSet::new(),
            greatest: meta.indexes.iter().map(|_| None).collect(),
            id_index_only: meta
                .indexes
                .iter()
                .all(|i| i.keyed_by_id_alone() || i.is_column_store()),
            index_fields: index_fields(&meta),
        };
        let mut outcomes = Vec::with_capacity(docs.size_hint().0);
        let mut bytes = 0;
        for doc in docs {
            let outcome = self.stage_insert(&meta, &*snapshot, doc, &mut staging);
            let outcome = outcome.map(|(record_id, size)| {
                bytes += size;
                record_id
            });
            let failed = outcome.is_err();
            outcomes.push(outcome);
            if failed && ordered {
                break;
            }
        }
        // Record ids are handed out in order, so the inserted ones span first..=last.
        let mut inserted_ids = outcomes.iter().flatten();
        match (inserted_ids.next(), inserted_ids.next_back()) {
            (Some(&first), last) if bytes >= INGEST_BATCH_BYTES_MIN => {
                self.ingest(staging, (first, last.copied().unwrap_or(first)))?
            }
            _ => {
                let mut batch = staging.batch;
                crate::column_store::mark_written(&mut batch, &meta, staging.inserted);
                self.commit(batch, &staging.multikey, durability)?
            }
        }
        let inserted = outcomes.iter().filter(|o| o.is_ok()).count();
        self.collection.count_change(inserted as i64, bytes as i64);
        // A transaction's inserts make room when they are applied at its commit.
        let provisional = basalt_storage::write_scope().is_some_and(|scope| scope.provisional());
        if let (Some(bounds), false) = (meta.capped(), provisional) {
            self.trim_capped(bounds, durability)?;
            let (lock, inserted) = self.collection.insert_signal();
            let _guard = lock.lock();
            inserted.notify_all();
        }
        Ok(outcomes)
    }

    /// Writes a batch, with the metadata of indexes it made multikey in the same atomic
    /// write (the writer holds the write lock, which metadata changes also take).
    fn commit(
        &self,
        mut batch: WriteBatch,
        newly_multikey: &HashSet<u64>,
        durability: Durability,
    ) -> Result<()> {
        if newly_multikey.is_empty() {
            return self.collection.engine.write(batch, durability);
        }
        let mut meta = (*self.collection.meta()).clone();
        for index in &mut meta.indexes {
            index.multikey |= newly_multikey.contains(&index.id);
        }
        batch.put(
            Space::Catalog,
            keys::collection_meta_key(&meta.db, &meta.name),
            meta.to_catalog_document().to_vec()?,
        );
        self.collection.engine.write(batch, durability)?;
        self.collection.set_meta(meta);
        Ok(())
    }

    /// Writes a large insert batch through [`Engine::ingest`]. Its tables reach the disk
    /// records first, so a crash can leave records without their index entries: a marker
    /// naming the batch's record ids is synced before and removed after, and opening the
    /// collection completes a batch it finds marked ([`Collection::complete_ingestion`]).
    /// The metadata of indexes the batch makes multikey, and the column store markers of
    /// its records (a marker of a record that never arrives only has its row group
    /// rebuilt), are written with the marker.
    fn ingest(&self, staging: Staging, (first, last): (u64, u64)) -> Result<()> {
        // A batch whose ingestion failed earlier is completed before its marker is reused.
        self.collection.complete_ingestion()?;
        let marker = keys::ingestion_marker_key(self.collection.meta().id);
        let mut intent = WriteBatch::default();
        let meta = self.collection.meta();
        crate::column_store::mark_written(&mut intent, &meta, staging.inserted);
        let range = keys::ingestion_marker_value(first, last);
        intent.put(Space::Catalog, marker.clone(), range);
        self.commit(intent, &staging.multikey, Durability::Disk)?;
        if let Err(e) = self.collection.engine.ingest(staging.batch) {
            // Whatever reached the tables gets its entries now rather than at a restart,
            // and is counted again when the counts are next asked for. The ingestion's
            // error is the one to report: a full disk fails the completion too.
            *self.collection.counters.lock() = None;
            if let Err(completion) = self.collection.complete_ingestion() {
                tracing::warn!(
                    collection = %self.collection.meta().namespace(),
                    "a failed bulk insert is completed when the collection next opens: {completion}"
                );
            }
            return Err(e);
        }
        // The batch is on disk with its entries: a marker that cannot be removed (writes
        // stopped meanwhile) only has the batch's entries written again at the next open.
        let mut done = WriteBatch::default();
        done.delete(Space::Catalog, marker);
        if let Err(e) = self.collection.engine.write(done, Durability::Process) {
            tracing::warn!(
                collection = %self.collection.meta().namespace(),
                "the marker of an ingested insert batch stays until the collection next opens: {e}"
            );
        }
        Ok(())
    }

    fn stage_insert(
        &self,
        meta: &CollectionMeta,
        snapshot: &dyn Snapshot,
        doc: Incoming<'_>,
        staging: &mut Staging,
    ) -> Result<(u64, usize)> {
        let (bytes, decoded, id) = match doc {
            Incoming::Raw(raw) if staging.id_index_only => {
                (raw.as_bytes().to_vec(), None, leading_id(raw)?)
            }
            Incoming::Raw(raw) => {
                let doc = match &staging.index_fields {
                    Some(fields) => index_view(raw, fields)?,
                    None => Document::try_from(raw)
                        .map_err(|e| Error::bad_value(format!("invalid document: {e}")))?,
                };
                let id = doc.get("_id").cloned().unwrap_or(Bson::Null);
                (raw.as_bytes().to_vec(), Some(Cow::Owned(doc)), id)
            }
            Incoming::Document(doc) => {
                let id = doc.get("_id").cloned().unwrap_or(Bson::Null);
                (doc.to_vec()?, Some(Cow::Borrowed(doc)), id)
            }
        };
        let size = bytes.len();
        let mut entries = Vec::new();
        let mut turned_multikey = Vec::new();
        for (position, index) in meta.indexes.iter().enumerate() {
            if index.is_column_store() {
                continue;
            }
            let (keys, stored) = if index.keyed_by_id_alone() {
                let key = index.id_key(id.clone());
                index.check_key_size(&key)?;
                (vec![key], Vec::new())
            } else {
                let doc = decoded
                    .as_deref()
                    .ok_or_else(|| Error::internal("an index other than _id's on a raw insert"))?;
                let (keys, stored) = index.entries_of(doc)?;
                if keys.multikey && !index.multikey {
                    turned_multikey.push(index.id);
                }
                (keys.keys, stored)
            };
            for key in keys {
                let prefix = keys::index_key_prefix(index.id, &key.encoded);
                if index.rejects_duplicates() {
                    let taken = staging.pending[position].contains(&prefix)
                        || self.stored_key_may_exist(
                            snapshot,
                            index.id,
                            &mut staging.greatest[position],
                            &prefix,
                        )? && !self.holders(snapshot, &prefix, None)?.is_empty();
                    if taken {
                        return Err(duplicate_key_error(meta, index, &key));
                    }
                }
                entries.push((position, prefix, stored.clone()));
            }
        }
        let record_id = self
            .collection
            .next_record_id
            .fetch_add(1, Ordering::SeqCst);
        staging.multikey.extend(turned_multikey);
        let batch = &mut staging.batch;
        crate::oplog::insert(batch, meta, &bytes);
        batch.put(Space::Records, keys::record_key(meta.id, record_id), bytes);
        staging.inserted.push(record_id);
        for (position, prefix, stored) in entries {
            let mut entry = prefix.clone();
            entry.extend_from_slice(&record_id.to_be_bytes());
            batch.put(Space::Indexes, entry, stored);
            if meta.indexes[position].unique {
                staging.pending[position].insert(prefix);
            }
        }
        Ok((record_id, size))
    }

    /// Whether an entry starting with `prefix` may be stored in index `index_id`. A
    /// key past the index's greatest stored entry cannot be, and a load with increasing
    /// `_id`s is all such keys: one seek per batch instead of one scan per document.
    fn stored_key_may_exist(
        &self,
        snapshot: &dyn Snapshot,
        index_id: u64,
        greatest: &mut Option<Option<Vec<u8>>>,
        prefix: &[u8],
    ) -> Result<bool> {
        if greatest.is_none() {
            let index_prefix = index_id.to_be_bytes();
            *greatest = Some(snapshot.last_key_with_prefix(Space::Indexes, &index_prefix)?);
        }
        Ok(match greatest {
            Some(Some(last)) => prefix <= last.as_slice(),
            _ => false,
        })
    }

    /// Record ids other than `except` holding the key whose entries start with `prefix`
    /// (`index id | encoded key`).
    fn holders(
        &self,
        snapshot: &dyn Snapshot,
        prefix: &[u8],
        except: Option<u64>,
    ) -> Result<Vec<u64>> {
        let mut found = Vec::new();
        snapshot.scan_prefix(Space::Indexes, prefix, ScanStart::Beginning, &mut |k, _| {
            if k.len() == prefix.len() + 8 {
                if let Some(id) = keys::trailing_record_id(k) {
                    if Some(id) != except {
                        found.push(id);
                    }
                }
            }
            Ok(ControlFlow::Continue(()))
        })?;
        Ok(found)
    }

    /// Replaces the document stored at `record_id` (whose current version is `old`),
    /// moving its index entries.
    pub fn replace(
        &mut self,
        record_id: u64,
        old: &Document,
        new: &Document,
        durability: Durability,
    ) -> Result<()> {
        let new_bytes = new.to_vec()?;
        let old_size = basalt_value::document_size_bytes(old);
        self.replace_keyed(record_id, (old, new), (old_size, new_bytes), durability)
    }

    /// As [`Writer::replace`], for a document and its new version in their bytes (a
    /// time-series bucket's, rewritten as bytes): only the top-level fields the indexes
    /// read are decoded, unless an index may read any field or the change is recorded
    /// in the oplog, which needs both versions whole.
    pub fn replace_raw(
        &mut self,
        record_id: u64,
        old: &RawDocument,
        new: RawDocumentBuf,
        durability: Durability,
    ) -> Result<()> {
        let decode = |raw: &RawDocument| {
            Document::try_from(raw).map_err(|e| Error::internal(format!("a record: {e}")))
        };
        let fields = index_fields(&self.collection.meta());
        let (Some(fields), false) = (fields, crate::oplog::recording()) else {
            return self.replace(record_id, &decode(old)?, &decode(&new)?, durability);
        };
        let keyed = |raw: &RawDocument| index_view(raw, &fields);
        let views = (&keyed(old)?, &keyed(&new)?);
        let sizes = (old.as_bytes().len(), new.into_bytes());
        self.replace_keyed(record_id, views, sizes, durability)
    }

    /// Replaces the record at `record_id` with `new_bytes`, moving its index entries
    /// from the keys of `old` to those of `new` (the versions whole, or holding every
    /// field the indexes read when the oplog records nothing).
    fn replace_keyed(
        &mut self,
        record_id: u64,
        (old, new): (&Document, &Document),
        (old_size, new_bytes): (usize, Vec<u8>),
        durability: Durability,
    ) -> Result<()> {
        let meta = self.collection.meta();
        let snapshot = self.collection.engine.snapshot();
        let mut batch = WriteBatch::default();
        let mut multikey = HashSet::new();
        for index in &meta.indexes {
            let (old_keys, old_stored) = index.entries_of(old)?;
            let (new_keys, stored) = index.entries_of(new)?;
            if new_keys.multikey && !index.multikey {
                multikey.insert(index.id);
            }
            // An entry whose key stays is rewritten when its stored values change (a
            // field going from 1 to 1.0 keeps its key).
            let restored = stored != old_stored;
            let (old_keys, new_keys) = (old_keys.keys, new_keys.keys);
            for key in &new_keys {
                let kept = old_keys.iter().any(|k| k.encoded == key.encoded);
                if kept && !restored {
                    continue;
                }
                let prefix = keys::index_key_prefix(index.id, &key.encoded);
                if index.rejects_duplicates()
                    && !kept
                    && !self
                        .holders(&*snapshot, &prefix, Some(record_id))?
                        .is_empty()
                {
                    return Err(duplicate_key_error(&meta, index, key));
                }
                batch.put(
                    Space::Indexes,
                    keys::index_entry_key(index.id, &key.encoded, record_id),
                    stored.clone(),
                );
            }
            for key in &old_keys {
                if !new_keys.iter().any(|k| k.encoded == key.encoded) {
                    batch.delete(
                        Space::Indexes,
                        keys::index_entry_key(index.id, &key.encoded, record_id),
                    );
                }
            }
        }
        let new_raw = RawDocument::from_bytes(&new_bytes)
            .map_err(|e| Error::internal(format!("an updated document: {e}")))?;
        crate::oplog::update(&mut batch, &meta, old, new, new_raw);
        crate::column_store::mark_written(&mut batch, &meta, [record_id]);
        let size_change = new_bytes.len() as i64 - old_size as i64;
        batch.put(
            Space::Records,
            keys::record_key(meta.id, record_id),
            new_bytes,
        );
        self.commit(batch, &multikey, durability)?;
        self.collection.count_change(0, size_change);
        Ok(())
    }

    /// Deletes the document stored at `record_id` (whose current version is `old`).
    pub fn delete(&mut self, record_id: u64, old: &Document, durability: Durability) -> Result<()> {
        let meta = self.collection.meta();
        let mut batch = WriteBatch::default();
        for index in &meta.indexes {
            for key in index.keys_for(old)? {
                batch.delete(
                    Space::Indexes,
                    keys::index_entry_key(index.id, &key.encoded, record_id),
                );
            }
        }
        batch.delete(Space::Records, keys::record_key(meta.id, record_id));
        crate::oplog::delete(&mut batch, &meta, old);
        crate::column_store::mark_written(&mut batch, &meta, [record_id]);
        self.collection.engine.write(batch, durability)?;
        self.collection
            .count_change(-1, -(basalt_value::document_size_bytes(old) as i64));
        Ok(())
    }

    /// Writes the entries of a new index for every document, refusing duplicates of a
    /// unique index. Entries go out in batches; on failure the ones written are removed.
    /// Returns whether the index came out multikey. `progress` hears the number of
    /// documents scanned after each batch.
    pub fn build_index(
        &mut self,
        index: &IndexSpec,
        progress: &mut dyn FnMut(u64),
    ) -> Result<bool> {
        if let Some(projection) = index.column_store() {
            self.build_column_store(index, &projection, progress)?;
            return Ok(false);
        }
        let meta = self.collection.meta();
        let snapshot = self.collection.engine.snapshot();
        let mut seen: HashSet<Vec<u8>> = HashSet::new();
        let mut batch = WriteBatch::default();
        let mut failure = None;
        let mut multikey = false;
        let mut scanned = 0u64;
        self.collection
            .scan(&*snapshot, None, &mut |record_id, raw| {
                let doc = Document::try_from(raw)
                    .map_err(|e| Error::internal(format!("corrupt record {record_id}: {e}")))?;
                let (keys, stored) = index.entries_of(&doc)?;
                multikey |= keys.multikey;
                scanned += 1;
                for key in keys.keys {
                    if index.unique && !seen.insert(key.encoded.clone()) {
                        failure = Some(duplicate_key_error(&meta, index, &key));
                        return Ok(ControlFlow::Break(()));
                    }
                    batch.put(
                        Space::Indexes,
                        keys::index_entry_key(index.id, &key.encoded, record_id),
                        stored.clone(),
                    );
                }
                if batch.ops.len() >= INDEX_BUILD_BATCH_KEYS_MAX {
                    self.collection
                        .engine
                        .write(std::mem::take(&mut batch), Durability::Process)?;
                    progress(scanned);
                }
                Ok(ControlFlow::Continue(()))
            })?;
        match failure {
            None => {
                self.collection.engine.write(batch, Durability::Process)?;
                Ok(multikey)
            }
            Some(e) => {
                delete_prefix(
                    &*self.collection.engine,
                    Space::Indexes,
                    &index.id.to_be_bytes(),
                )?;
                Err(e)
            }
        }
    }

    /// The current version of a record, read under the write lock.
    pub fn current(&self, record_id: u64) -> Result<Option<Document>> {
        let snapshot = self.collection.engine.snapshot();
        self.collection.get_record(&*snapshot, record_id)
    }
}

/// Index builds commit their entries in batches of this many keys.
const INDEX_BUILD_BATCH_KEYS_MAX: usize = 10_000;

/// Deletes every key that starts with `prefix`, in batches, so removing a huge range
/// never builds one giant batch in memory. A scan that fails (an unreadable block) still
/// deletes the keys it read before the failure, then returns the failure.
pub(crate) fn delete_prefix(engine: &dyn Engine, space: Space, prefix: &[u8]) -> Result<()> {
    // Each batch's scan resumes after the last key deleted: starting over from the
    // prefix would walk every tombstone written before it (quadratic: a million
    // records took 35 s to drop).
    let mut last: Option<Vec<u8>> = None;
    loop {
        let snapshot = engine.snapshot();
        let mut batch = WriteBatch::default();
        let start = last
            .as_deref()
            .map_or(ScanStart::Beginning, ScanStart::After);
        let scanned = snapshot.scan_prefix(space, prefix, start, &mut |key, _| {
            batch.delete(space, key.to_vec());
            Ok(if batch.ops.len() >= INDEX_BUILD_BATCH_KEYS_MAX {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            })
        });
        if let Some(WriteOp::Delete(_, key)) = batch.ops.last() {
            last = Some(key.clone());
        }
        let done = batch.is_empty();
        if !done {
            engine.write(batch, Durability::Process)?;
        }
        scanned?;
        if done {
            return Ok(());
        }
    }
}

/// Deletes a collection's records by id, up to the highest id it has, without reading
/// them: how records past an unreadable block are deleted.
pub(crate) fn delete_record_ids(engine: &dyn Engine, meta: &CollectionMeta) -> Result<()> {
    let Some(highest) = last_record_id(&*engine.snapshot(), meta)? else {
        return Ok(());
    };
    let mut batch = WriteBatch::default();
    for record_id in 0..=highest {
        batch.delete(Space::Records, keys::record_key(meta.id, record_id));
        if batch.ops.len() >= INDEX_BUILD_BATCH_KEYS_MAX || record_id == highest {
            engine.write(std::mem::take(&mut batch), Durability::Process)?;
        }
    }
    Ok(())
}

/// MongoDB's E11000 error, with the `keyPattern` and `keyValue` drivers read.
pub fn duplicate_key_error(meta: &CollectionMeta, index: &IndexSpec, key: &IndexKey) -> Error {
    let key_value = index.key_value_document(key);
    let shown: Vec<String> = key_value
        .iter()
        .map(|(k, v)| format!("{k}: {}", shell_format(v)))
        .collect();
    Error::new(
        ErrorCode::DUPLICATE_KEY,
        format!(
            "E11000 duplicate key error collection: {} index: {} dup key: {{ {} }}",
            meta.namespace(),
            index.name,
            shown.join(", ")
        ),
    )
    .with_extra(doc! { "keyPattern": index.key.clone(), "keyValue": key_value })
}

/// Values as the mongo shell prints them in error messages.
fn shell_format(value: &Bson) -> String {
    match value {
        Bson::String(s) => format!("\"{s}\""),
        Bson::ObjectId(oid) => format!("ObjectId('{oid}')"),
        Bson::Document(d) => {
            let fields: Vec<String> = d
                .iter()
                .map(|(k, v)| format!("{k}: {}", shell_format(v)))
                .collect();
            format!("{{ {} }}", fields.join(", "))
        }
        Bson::Array(items) => {
            let shown: Vec<String> = items.iter().map(shell_format).collect();
            format!("[ {} ]", shown.join(", "))
        }
        other => other.to_string(),
    }
}

/// `meta` without its hidden indexes (itself when none is hidden, as is usual).
fn without_hidden(meta: &Arc<CollectionMeta>) -> Arc<CollectionMeta> {
    if !meta.indexes.iter().any(|i| i.hidden) {
        return meta.clone();
    }
    let mut visible = (**meta).clone();
    visible.indexes.retain(|i| !i.hidden);
    Arc::new(visible)
}

#[cfg(test)]
mod tests {
    use super::{delete_prefix, PendingKeys, INDEX_BUILD_BATCH_KEYS_MAX};
    use basalt_storage::{Durability, Engine, MemoryEngine, ScanStart, Space, WriteBatch};
    use std::ops::ControlFlow;

    #[test]
    fn delete_prefix_goes_on_batch_after_batch_and_stops_at_the_prefix() {
        let engine = MemoryEngine::default();
        let mut batch = WriteBatch::default();
        let keys = 2 * INDEX_BUILD_BATCH_KEYS_MAX + 7;
        for n in 0..keys as u32 {
            batch.put(
                Space::Records,
                [b"p".as_slice(), &n.to_be_bytes()].concat(),
                vec![],
            );
        }
        batch.put(Space::Records, b"o".to_vec(), vec![]);
        batch.put(Space::Records, b"q".to_vec(), vec![]);
        batch.put(Space::Indexes, b"p1".to_vec(), vec![]);
        engine.write(batch, Durability::Process).unwrap();
        delete_prefix(&engine, Space::Records, b"p").unwrap();
        let left = |space, prefix: &[u8]| {
            let mut found = Vec::new();
            engine
                .snapshot()
                .scan_prefix(space, prefix, ScanStart::Beginning, &mut |key, _| {
                    found.push(key.to_vec());
                    Ok(ControlFlow::Continue(()))
                })
                .unwrap();
            found
        };
        assert!(left(Space::Records, b"p").is_empty());
        assert_eq!(left(Space::Records, b""), [b"o".to_vec(), b"q".to_vec()]);
        assert_eq!(left(Space::Indexes, b""), [b"p1".to_vec()]);
    }

    #[test]
    fn pending_keys_hold_ascending_and_other_keys() {
        let mut pending = PendingKeys::default();
        let keys: [&[u8]; 7] = [b"b", b"d", b"d", b"a", b"c", b"f", b"e"];
        for (i, key) in keys.iter().enumerate() {
            let seen_before = keys[..i].contains(key);
            assert_eq!(pending.contains(key), seen_before, "{key:?} at {i}");
            pending.insert(key.to_vec());
        }
        for key in [b"a", b"b", b"c", b"d", b"e", b"f"] {
            assert!(pending.contains(key));
        }
        for key in [b"0".as_slice(), b"bb", b"g"] {
            assert!(!pending.contains(key));
        }
        let mut descending = PendingKeys::default();
        for key in [b"z", b"y", b"x"] {
            assert!(!descending.contains(key));
            descending.insert(key.to_vec());
        }
        assert!(descending.contains(b"y") && !descending.contains(b"w"));
    }
}
