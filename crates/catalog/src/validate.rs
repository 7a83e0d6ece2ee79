//! Checks a collection's records and index entries against each other: the work of the
//! `validate` command, done as MongoDB does it.
//!
//! Every record must be a valid BSON document, and every index must hold exactly the
//! entries its documents call for: no entry missing, none extra (pointing to no
//! document, or with a key its document does not have), none storing values its
//! document does not have (a covered query would return them), no key twice in a unique
//! index. As in MongoDB, the entries are compared in two passes with bounded memory: the
//! first counts each expected entry into two of 2^16 hash buckets and each stored entry
//! out of them, and only when some bucket does not come back to zero does a second pass
//! collect the entries of those buckets to name them.
//!
//! A block of records that cannot be read (corrupt on disk) does not end the check: the
//! record ids after the last record read are read one at a time, those in the block
//! fail, and the scan goes on after the first that reads. Failed ids that an index
//! refers to are the corrupt records; their entries are not inconsistencies.

use crate::collection::decode_record;
use crate::index::{IndexKey, IndexSpec};
use crate::keys;
use crate::{Collection, CollectionMeta};
use basalt_error::{Error, ErrorCode, Result};
use basalt_storage::{KeyValueVisitor, ScanStart, Snapshot, Space};
use bson::{doc, Bson, Document};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::ops::ControlFlow;

/// Hash buckets of the first pass (MongoDB's `kNumHashBuckets`).
const BUCKETS: u64 = 1 << 16;
/// How much of the extra and of the missing entries is listed (MongoDB's 1 MB), and how
/// many corrupt record ids (MongoDB's 1 MB of record ids).
const LISTED_ENTRIES_BYTES_MAX: usize = 1 << 20;
const LISTED_CORRUPT_RECORDS_MAX: usize = (1 << 20) / 8;
/// Record ids read one at a time past an unreadable block before giving up on the rest.
const PROBED_RECORD_IDS_MAX: u64 = 1 << 20;

/// MongoDB's messages, which tools search for.
const INVALID_DOCUMENTS: &str = "Detected one or more invalid documents. See logs.";

/// What `validate` found.
#[derive(Debug, Default)]
pub struct Validation {
    /// Records read, valid or not (`nrecords`).
    pub records: u64,
    /// Records that are not valid BSON or could not be read (`nInvalidDocuments`).
    pub invalid_documents: u64,
    /// Their record ids, in order (`corruptRecords`).
    pub corrupt_records: Vec<u64>,
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
    /// `{indexName, recordId, indexKey}` of each entry no document calls for.
    pub extra_index_entries: Vec<Document>,
    /// `{indexName, recordId, idKey, indexKey}` of each entry a document lacks.
    pub missing_index_entries: Vec<Document>,
    /// One per index, in the collection's order.
    pub indexes: Vec<IndexValidation>,
}

#[derive(Debug, Default)]
pub struct IndexValidation {
    pub name: String,
    /// Entries read (`keysPerIndex`).
    pub keys: u64,
    pub errors: Vec<String>,
}

impl Validation {
    pub fn is_valid(&self) -> bool {
        self.errors.is_empty() && self.indexes.iter().all(|i| i.errors.is_empty())
    }
}

impl Collection {
    /// Checks the records and index entries of the collection as of one snapshot.
    pub fn validate(&self) -> Result<Validation> {
        let meta = self.meta();
        let snapshot = self.snapshot();
        let mut check = Check {
            meta: &meta,
            snapshot: &*snapshot,
            high_water: self.record_id_high_water(),
            report: Validation {
                indexes: meta
                    .indexes
                    .iter()
                    .map(|index| IndexValidation {
                        name: index.name.clone(),
                        ..IndexValidation::default()
                    })
                    .collect(),
                ..Validation::default()
            },
            tally: vec![0; BUCKETS as usize],
            invalid: BTreeSet::new(),
            unreadable: BTreeSet::new(),
            unreadable_referenced: BTreeSet::new(),
            unreadable_indexes: HashSet::new(),
        };
        check.count_records()?;
        check.count_entries()?;
        if check.tally.iter().any(|&count| count != 0) {
            check.name_inconsistencies()?;
        }
        check.check_key_counts();
        Ok(check.finish())
    }
}

struct Check<'a> {
    meta: &'a CollectionMeta,
    snapshot: &'a dyn Snapshot,
    high_water: u64,
    report: Validation,
    /// Per bucket: expected entries counted in, stored entries counted out.
    tally: Vec<i64>,
    /// Records that are not valid BSON.
    invalid: BTreeSet<u64>,
    /// Record ids that could not be read (a corrupt block).
    unreadable: BTreeSet<u64>,
    /// Those an index entry refers to: records that existed.
    unreadable_referenced: BTreeSet<u64>,
    /// Positions of indexes whose entries could not all be read.
    unreadable_indexes: HashSet<usize>,
}

/// An entry a document calls for, as the second pass collects it.
struct Expected {
    position: usize,
    record_id: u64,
    id: Bson,
    key: IndexKey,
    stored: Vec<u8>,
}

/// The two buckets of an entry (its key and stored values).
fn buckets(entry: &[u8], stored: &[u8]) -> [usize; 2] {
    let mut hasher = DefaultHasher::new();
    entry.hash(&mut hasher);
    stored.hash(&mut hasher);
    let hash = hasher.finish();
    [
        (hash % BUCKETS) as usize,
        (hash / BUCKETS % BUCKETS) as usize,
    ]
}

/// Whether an entry falls in a bucket that did not come back to zero.
fn is_suspect(tally: &[i64], entry: &[u8], stored: &[u8]) -> bool {
    buckets(entry, stored).iter().any(|&b| tally[b] != 0)
}

impl Check<'_> {
    /// First pass over the records: checks each is a document and counts the entries it
    /// calls for into the buckets.
    fn count_records(&mut self) -> Result<()> {
        let meta = self.meta;
        let mut records = 0;
        let mut invalid = BTreeSet::new();
        let mut tally = std::mem::take(&mut self.tally);
        let mut multikey_errors: Vec<Option<String>> = vec![None; meta.indexes.len()];
        let mut key_errors = Vec::new();
        self.traverse_records(&mut |record_id, bytes| {
            records += 1;
            let doc = match decode_record(bytes) {
                Ok(doc) => doc,
                Err(e) => {
                    tracing::warn!(
                        collection = %meta.namespace(),
                        "validate: record {record_id} is not a valid BSON document: {e}"
                    );
                    invalid.insert(record_id);
                    return Ok(());
                }
            };
            for (position, index) in meta.indexes.iter().enumerate() {
                let Ok((keys, stored)) = index.entries_of(&doc) else {
                    key_errors.push(format!(
                        "Could not build key for index '{}' from document with recordId '{record_id}'",
                        index.name
                    ));
                    continue;
                };
                if keys.multikey && !index.multikey && multikey_errors[position].is_none() {
                    multikey_errors[position] = Some(format!(
                        "Index {} is not multikey but document with RecordId({record_id}) and {} has multikey data, {} key(s)",
                        index.name,
                        id_element(&doc),
                        keys.keys.len()
                    ));
                }
                for key in keys.keys {
                    let entry = keys::index_entry_key(index.id, &key.encoded, record_id);
                    for bucket in buckets(&entry, &stored) {
                        tally[bucket] += 1;
                    }
                }
            }
            Ok(())
        })?;
        self.tally = tally;
        self.report.records = records;
        self.invalid = invalid;
        self.report.errors.extend(key_errors);
        for (index, error) in self.report.indexes.iter_mut().zip(multikey_errors) {
            index.errors.extend(error);
        }
        Ok(())
    }

    /// First pass over each index: counts its entries out of the buckets, counts them,
    /// checks that a unique index holds no key twice, and notes the unreadable records
    /// it refers to.
    fn count_entries(&mut self) -> Result<()> {
        let mut tally = std::mem::take(&mut self.tally);
        let mut referenced = BTreeSet::new();
        for (position, index) in self.meta.indexes.iter().enumerate() {
            if index.is_column_store() {
                // Row groups rather than one entry per key: nothing to count.
                continue;
            }
            let mut entries = 0;
            // The key and record of the entry before, in a unique index.
            let mut previous_key = Vec::new();
            let mut previous_id = None;
            let mut duplicate = None;
            let scanned = self.scan_entries(index, &mut |entry, stored| {
                entries += 1;
                for bucket in buckets(entry, stored) {
                    tally[bucket] -= 1;
                }
                let (key, record_id) = split_entry(entry)?;
                if self.unreadable.contains(&record_id) {
                    referenced.insert(record_id);
                }
                if index.unique && duplicate.is_none() {
                    match previous_id {
                        Some(first) if previous_key == key => {
                            duplicate = Some((key.to_vec(), first, record_id));
                        }
                        _ => {
                            previous_key.clear();
                            previous_key.extend_from_slice(key);
                            previous_id = Some(record_id);
                        }
                    }
                }
                Ok(ControlFlow::Continue(()))
            });
            let report = &mut self.report.indexes[position];
            report.keys = entries;
            if let Err(e) = scanned {
                report.errors.push(format!(
                    "Could not read every entry of index '{}': {}",
                    index.name, e.message
                ));
                self.unreadable_indexes.insert(position);
            }
            if let Some((key, first, second)) = duplicate {
                let shown = self.key_document(index, &key, &[], second);
                self.report.indexes[position].errors.push(format!(
                    "Unique index '{}' has duplicate key: {shown}, first record: RecordId({first}), second record: RecordId({second})",
                    index.name
                ));
            }
        }
        self.tally = tally;
        self.unreadable_referenced = referenced;
        Ok(())
    }

    /// Second pass, for buckets that did not come back to zero: collects the entries the
    /// documents of those buckets call for, then matches the stored ones against them.
    fn name_inconsistencies(&mut self) -> Result<()> {
        let meta = self.meta;
        let tally = std::mem::take(&mut self.tally);
        let mut expected: BTreeMap<Vec<u8>, Expected> = BTreeMap::new();
        self.traverse_records(&mut |record_id, bytes| {
            let Ok(doc) = decode_record(bytes) else {
                return Ok(());
            };
            for (position, index) in meta.indexes.iter().enumerate() {
                let Ok((keys, stored)) = index.entries_of(&doc) else {
                    continue;
                };
                for key in keys.keys {
                    let entry = keys::index_entry_key(index.id, &key.encoded, record_id);
                    if is_suspect(&tally, &entry, &stored) {
                        let id = doc.get("_id").cloned().unwrap_or(Bson::Null);
                        let stored = stored.clone();
                        expected.insert(
                            entry,
                            Expected {
                                position,
                                record_id,
                                id,
                                key,
                                stored,
                            },
                        );
                    }
                }
            }
            Ok(())
        })?;
        let mut extra = Vec::new();
        let mut inconsistent = vec![false; meta.indexes.len()];
        for (position, index) in meta.indexes.iter().enumerate() {
            if self.unreadable_indexes.contains(&position) {
                continue;
            }
            let mut found = Vec::new();
            self.scan_entries(index, &mut |entry, stored| {
                if is_suspect(&tally, entry, stored) {
                    found.push((entry.to_vec(), stored.to_vec()));
                }
                Ok(ControlFlow::Continue(()))
            })?;
            for (entry, stored) in found {
                let (key, record_id) = split_entry(&entry)?;
                if self.invalid.contains(&record_id) || self.unreadable.contains(&record_id) {
                    continue;
                }
                match expected.remove(&entry) {
                    Some(wanted) if wanted.stored == stored => {}
                    Some(_) => {
                        inconsistent[position] = true;
                        self.report.indexes[position].errors.push(format!(
                            "Index '{}' has an entry for RecordId({record_id}) that stores values its document does not have",
                            index.name
                        ));
                    }
                    None => {
                        inconsistent[position] = true;
                        extra.push(doc! {
                            "indexName": index.name.clone(),
                            "recordId": record_id as i64,
                            "indexKey": self.key_document(index, key, &stored, record_id),
                        });
                    }
                }
            }
        }
        let mut missing = Vec::new();
        for wanted in expected.into_values() {
            if self.unreadable_indexes.contains(&wanted.position) {
                continue;
            }
            let index = &meta.indexes[wanted.position];
            inconsistent[wanted.position] = true;
            missing.push(doc! {
                "indexName": index.name.clone(),
                "recordId": wanted.record_id as i64,
                "idKey": { "_id": wanted.id },
                "indexKey": index.key_value_document(&wanted.key),
            });
        }
        self.list_entries(extra, missing);
        for (report, inconsistent) in self.report.indexes.iter_mut().zip(inconsistent) {
            if inconsistent {
                report.errors.push(format!(
                    "Index with name '{}' has inconsistencies.",
                    report.name
                ));
            }
        }
        Ok(())
    }

    /// Lists extra and missing entries up to MongoDB's size limit, and says how many
    /// there were.
    fn list_entries(&mut self, extra: Vec<Document>, missing: Vec<Document>) {
        let report = &mut self.report;
        for (entries, kind, listed) in [
            (missing, "missing", &mut report.missing_index_entries),
            (extra, "extra", &mut report.extra_index_entries),
        ] {
            if entries.is_empty() {
                continue;
            }
            report
                .warnings
                .push(format!("Detected {} {kind} index entries.", entries.len()));
            let mut bytes = 0;
            for entry in entries {
                bytes += basalt_value::document_size_bytes(&entry);
                if !listed.is_empty() && bytes > LISTED_ENTRIES_BYTES_MAX {
                    report.errors.push(format!(
                        "Not all {kind} index entry inconsistencies are listed due to size limitations."
                    ));
                    break;
                }
                listed.push(entry);
            }
        }
    }

    /// MongoDB's checks of each index's entry count against the documents (those read,
    /// and those an index refers to that could not be read).
    fn check_key_counts(&mut self) {
        let records = self.report.records + self.unreadable_referenced.len() as u64;
        for (position, index) in self.meta.indexes.iter().enumerate() {
            // A column store index holds row groups, not an entry per document.
            if self.unreadable_indexes.contains(&position) || index.is_column_store() {
                continue;
            }
            let report = &mut self.report.indexes[position];
            let keys = report.keys;
            if index.keyed_by_id_alone() && keys != records {
                report.errors.push(format!(
                    "number of _id index entries ({keys}) does not match the number of documents in the index ({records})"
                ));
            }
            if !report.errors.is_empty() {
                continue;
            }
            let plain = !index.sparse
                && index.partial.is_none()
                && !index.is_id_index()
                && !index.key.values().any(crate::is_hashed);
            if !index.multikey && keys > records {
                report.errors.push(format!(
                    "index {} is not multi-key, but has more entries ({keys}) than documents in the index ({records})",
                    index.name
                ));
            } else if plain && keys < records {
                report.errors.push(format!(
                    "index {} is not sparse or partial, but has fewer entries ({keys}) than documents in the index ({records})",
                    index.name
                ));
            }
        }
    }

    /// The report, with the corrupt records: those that are not documents, and the
    /// unreadable ids an index entry refers to (records that existed).
    fn finish(mut self) -> Validation {
        let corrupt: BTreeSet<u64> = self
            .invalid
            .union(&self.unreadable_referenced)
            .copied()
            .collect();
        let report = &mut self.report;
        report.invalid_documents = corrupt.len() as u64;
        if !corrupt.is_empty() {
            report.errors.insert(0, INVALID_DOCUMENTS.to_string());
        }
        report.corrupt_records = corrupt
            .iter()
            .copied()
            .take(LISTED_CORRUPT_RECORDS_MAX)
            .collect();
        if corrupt.len() > LISTED_CORRUPT_RECORDS_MAX {
            report
                .warnings
                .push("Not all corrupted records are listed due to size limitations.".to_string());
        }
        self.report
    }

    /// Visits every record that can be read, in record order, with its bytes. A scan
    /// that meets an unreadable block goes on after it, found by reading the following
    /// ids one at a time; the ids that fail are kept in `unreadable`, and the first
    /// failure is reported.
    fn traverse_records(&mut self, visit: &mut dyn FnMut(u64, &[u8]) -> Result<()>) -> Result<()> {
        let collection_id = self.meta.id;
        let prefix = keys::record_prefix(collection_id);
        let mut after: Option<u64> = None;
        loop {
            let mut last = after;
            let resume_key = after.map(|id| keys::record_key(collection_id, id));
            let start = resume_key
                .as_deref()
                .map_or(ScanStart::Beginning, ScanStart::After);
            let scanned =
                self.snapshot
                    .scan_prefix(Space::Records, &prefix, start, &mut |key, value| {
                        let record_id = keys::trailing_record_id(key)
                            .ok_or_else(|| Error::internal("record key without a record id"))?;
                        last = Some(record_id);
                        visit(record_id, value)?;
                        Ok(ControlFlow::Continue(()))
                    });
            let failure = match scanned {
                Ok(()) => return Ok(()),
                Err(e) if e.code == ErrorCode::DATA_CORRUPTION_DETECTED => e,
                Err(e) => return Err(e),
            };
            let error = format!("Could not read every record: {}", failure.message);
            if !self.report.errors.contains(&error) {
                tracing::warn!(collection = %self.meta.namespace(), "validate: {error}");
                self.report.errors.push(error);
            }
            match self.skip_unreadable(last.map_or(1, |id| id + 1), visit)? {
                Some(resume) => after = Some(resume),
                None => return Ok(()),
            }
        }
    }

    /// Reads record ids from `first` on, one at a time, past the unreadable block a scan
    /// failed on: records before it are visited, ids in it are kept as unreadable. Says
    /// after which id the scan can go on, or `None` when there is nothing after it (or it
    /// does not end within [`PROBED_RECORD_IDS_MAX`] ids, which is reported).
    fn skip_unreadable(
        &mut self,
        first: u64,
        visit: &mut dyn FnMut(u64, &[u8]) -> Result<()>,
    ) -> Result<Option<u64>> {
        let collection_id = self.meta.id;
        let last = self
            .high_water
            .min(first.saturating_add(PROBED_RECORD_IDS_MAX));
        let mut passed_block = false;
        for record_id in first..=last {
            match self
                .snapshot
                .get(Space::Records, &keys::record_key(collection_id, record_id))
            {
                Err(e) if e.code == ErrorCode::DATA_CORRUPTION_DETECTED => {
                    self.unreadable.insert(record_id);
                    passed_block = true;
                }
                Err(e) => return Err(e),
                Ok(_) if passed_block => return Ok(Some(record_id - 1)),
                Ok(Some(bytes)) => visit(record_id, &bytes)?,
                Ok(None) => {}
            }
        }
        if last >= self.high_water {
            return Ok(None);
        }
        if !passed_block {
            // Every id read: the block the scan failed on lies further on.
            return Ok(Some(last));
        }
        self.report.warnings.push(format!(
            "Records after RecordId({last}) were not checked: the {PROBED_RECORD_IDS_MAX} record ids before it could not be read"
        ));
        Ok(None)
    }

    /// Visits every entry of `index`: its whole key in the indexes space and the values
    /// it stores.
    fn scan_entries(&self, index: &IndexSpec, visit: &mut KeyValueVisitor<'_>) -> Result<()> {
        let prefix = index.id.to_be_bytes();
        self.snapshot
            .scan_prefix(Space::Indexes, &prefix, ScanStart::Beginning, visit)
    }

    /// The `{field: value}` form of an entry's key (`key`, encoded) for the report. The
    /// encoding cannot be turned back into values, so they come from the record the entry
    /// points to when it has that key, else from the values the entry stores; a field
    /// known from neither shows its encoded bytes.
    fn key_document(
        &self,
        index: &IndexSpec,
        key: &[u8],
        stored: &[u8],
        record_id: u64,
    ) -> Document {
        let record = keys::record_key(self.meta.id, record_id);
        if let Ok(Some(bytes)) = self.snapshot.get(Space::Records, &record) {
            if let Ok(doc) = decode_record(&bytes) {
                if let Ok(keys) = index.keys_for(&doc) {
                    if let Some(found) = keys.iter().find(|k| k.encoded == key) {
                        return index.key_value_document(found);
                    }
                }
            }
        }
        let stored = Document::from_reader(stored).unwrap_or_default();
        let mut shown = Document::new();
        let mut rest = key;
        for (position, field) in index.key.keys().enumerate() {
            let length =
                basalt_value::key_string::encoded_len(rest, index.is_descending_field(position))
                    .unwrap_or(rest.len());
            let (component, after) = rest.split_at(length);
            rest = after;
            let value = stored.get(field).cloned().unwrap_or_else(|| {
                Bson::Binary(bson::Binary {
                    subtype: bson::spec::BinarySubtype::Generic,
                    bytes: component.to_vec(),
                })
            });
            shown.insert(field.clone(), value);
        }
        shown
    }
}

/// The encoded key and the record id of an entry (its key in the indexes space).
fn split_entry(entry: &[u8]) -> Result<(&[u8], u64)> {
    let record_id = keys::trailing_record_id(entry)
        .filter(|_| entry.len() >= 16)
        .ok_or_else(|| Error::internal("an index entry too short for its ids"))?;
    Ok((&entry[8..entry.len() - 8], record_id))
}

/// A record as a document, every element checked.
/// `_id: value` as MongoDB prints the element in messages.
fn id_element(doc: &Document) -> String {
    match doc.get("_id") {
        Some(id) => format!("_id: {id}"),
        None => "no _id".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Catalog;
    use basalt_storage::{Durability, Engine, MemoryEngine, WriteBatch};
    use std::sync::Arc;

    /// A collection `test.c` of 20 documents `{_id: i, a: i % 5, u: i}` (record ids
    /// 1..=20), with the indexes `a_1` and `u_1` (unique).
    fn collection(engine: Arc<dyn Engine>) -> (Catalog, Arc<Collection>) {
        let catalog = Catalog::open(engine).unwrap();
        let coll = catalog.get_or_create("test", "c").unwrap();
        for (field, unique) in [("a", false), ("u", true)] {
            let mut spec = IndexSpec::id_index(0, &format!("{field}_1"));
            spec.key = doc! { field: 1 };
            spec.unique = unique;
            catalog.add_index(&coll, spec).unwrap();
        }
        let docs: Vec<Document> = (1..=20)
            .map(|i| doc! { "_id": i, "a": i % 5, "u": i })
            .collect();
        coll.writer()
            .insert_many(&docs, true, Durability::Process)
            .unwrap();
        (catalog, coll)
    }

    fn write(catalog: &Catalog, change: impl FnOnce(&mut WriteBatch)) {
        let mut batch = WriteBatch::default();
        change(&mut batch);
        catalog.engine().write(batch, Durability::Process).unwrap();
    }

    fn index(coll: &Collection, name: &str) -> IndexSpec {
        let meta = coll.meta();
        meta.indexes
            .iter()
            .find(|i| i.name == name)
            .unwrap()
            .clone()
    }

    /// The entry `index` holds for `value` in record `record_id`, and what it stores.
    fn entry(coll: &Collection, name: &str, value: Bson, record_id: u64) -> (Vec<u8>, Vec<u8>) {
        let index = index(coll, name);
        let (keys, stored) = index
            .entries_of(&doc! { index.key.keys().next().unwrap(): value })
            .unwrap();
        (
            keys::index_entry_key(index.id, &keys.keys[0].encoded, record_id),
            stored,
        )
    }

    #[test]
    fn a_consistent_collection_is_valid() {
        let (_catalog, coll) = collection(Arc::new(MemoryEngine::default()));
        let report = coll.validate().unwrap();
        assert!(report.is_valid(), "{report:?}");
        assert_eq!(report.records, 20);
        assert_eq!(report.invalid_documents, 0);
        assert!(report.errors.is_empty() && report.warnings.is_empty());
        let keys: Vec<(&str, u64)> = report
            .indexes
            .iter()
            .map(|i| (i.name.as_str(), i.keys))
            .collect();
        assert_eq!(keys, [("_id_", 20), ("a_1", 20), ("u_1", 20)]);
    }

    #[test]
    fn records_that_are_not_documents_are_corrupt() {
        let (catalog, coll) = collection(Arc::new(MemoryEngine::default()));
        let id = coll.meta().id;
        let mut cut = doc! { "_id": 3, "s": "text" }.to_vec().unwrap();
        cut.truncate(cut.len() - 3);
        let mut bad_length = doc! { "_id": 4, "s": "text" }.to_vec().unwrap();
        bad_length[13] = 0x7F; // the string's length runs past the document
        write(&catalog, |batch| {
            batch.put(Space::Records, keys::record_key(id, 3), cut);
            batch.put(Space::Records, keys::record_key(id, 4), bad_length);
        });
        let report = coll.validate().unwrap();
        assert!(!report.is_valid());
        assert_eq!(report.records, 20);
        assert_eq!(report.invalid_documents, 2);
        assert_eq!(report.corrupt_records, [3, 4]);
        assert_eq!(report.errors, [INVALID_DOCUMENTS]);
        // Their entries are not called extra: their documents could not be read.
        assert!(report.extra_index_entries.is_empty(), "{report:?}");
        assert!(report.missing_index_entries.is_empty());
    }

    #[test]
    fn missing_and_extra_entries_are_named() {
        let (catalog, coll) = collection(Arc::new(MemoryEngine::default()));
        let (missing, _) = entry(&coll, "a_1", Bson::Int32(2), 2);
        let (to_nothing, stored) = entry(&coll, "a_1", Bson::Int32(4), 99);
        // Record 5's u_1 entry is replaced by one with another key.
        let (right_key, _) = entry(&coll, "u_1", Bson::Int32(5), 5);
        let (wrong_key, wrong_stored) = entry(&coll, "u_1", Bson::Int32(77), 5);
        write(&catalog, |batch| {
            batch.delete(Space::Indexes, missing);
            batch.put(Space::Indexes, to_nothing, stored);
            batch.delete(Space::Indexes, right_key);
            batch.put(Space::Indexes, wrong_key, wrong_stored);
        });
        let report = coll.validate().unwrap();
        assert!(!report.is_valid());
        assert_eq!(
            report.missing_index_entries,
            [
                doc! { "indexName": "a_1", "recordId": 2_i64, "idKey": { "_id": 2 }, "indexKey": { "a": 2 } },
                doc! { "indexName": "u_1", "recordId": 5_i64, "idKey": { "_id": 5 }, "indexKey": { "u": 5 } },
            ]
        );
        assert_eq!(
            report.extra_index_entries,
            [
                doc! { "indexName": "a_1", "recordId": 99_i64, "indexKey": { "a": 4 } },
                doc! { "indexName": "u_1", "recordId": 5_i64, "indexKey": { "u": 77 } },
            ]
        );
        assert_eq!(
            report.warnings,
            [
                "Detected 2 missing index entries.",
                "Detected 2 extra index entries."
            ]
        );
        let errors: Vec<&Vec<String>> = report.indexes.iter().map(|i| &i.errors).collect();
        assert!(errors[0].is_empty());
        assert_eq!(errors[1], &["Index with name 'a_1' has inconsistencies."]);
        assert_eq!(errors[2], &["Index with name 'u_1' has inconsistencies."]);
    }

    #[test]
    fn an_entry_with_other_stored_values_is_found() {
        let (catalog, coll) = collection(Arc::new(MemoryEngine::default()));
        let (key, _) = entry(&coll, "a_1", Bson::Int32(3), 3);
        write(&catalog, |batch| {
            batch.put(Space::Indexes, key, doc! { "a": 3.0 }.to_vec().unwrap());
        });
        let report = coll.validate().unwrap();
        assert!(!report.is_valid());
        assert!(report.extra_index_entries.is_empty() && report.missing_index_entries.is_empty());
        assert!(
            report.indexes[1].errors[0].contains("RecordId(3) that stores values"),
            "{report:?}"
        );
    }

    #[test]
    fn a_key_twice_in_a_unique_index_is_found() {
        let (catalog, coll) = collection(Arc::new(MemoryEngine::default()));
        let meta = coll.meta();
        let twin = doc! { "_id": 7, "a": 2, "u": 70 };
        write(&catalog, |batch| {
            batch.put(
                Space::Records,
                keys::record_key(meta.id, 21),
                twin.to_vec().unwrap(),
            );
            for name in ["_id_", "a_1", "u_1"] {
                let index = index(&coll, name);
                let (keys, stored) = index.entries_of(&twin).unwrap();
                batch.put(
                    Space::Indexes,
                    keys::index_entry_key(index.id, &keys.keys[0].encoded, 21),
                    stored,
                );
            }
        });
        let report = coll.validate().unwrap();
        assert!(!report.is_valid());
        assert_eq!(
            report.indexes[0].errors,
            ["Unique index '_id_' has duplicate key: { \"_id\": 7 }, first record: RecordId(7), second record: RecordId(21)"]
        );
        assert!(report.extra_index_entries.is_empty() && report.missing_index_entries.is_empty());
    }

    #[test]
    fn an_array_under_an_index_not_marked_multikey_is_found() {
        let (catalog, coll) = collection(Arc::new(MemoryEngine::default()));
        let meta = coll.meta();
        let arrayed = doc! { "_id": 30, "a": [1, 2], "u": 30 };
        write(&catalog, |batch| {
            batch.put(
                Space::Records,
                keys::record_key(meta.id, 21),
                arrayed.to_vec().unwrap(),
            );
            for index in &meta.indexes {
                let (keys, stored) = index.entries_of(&arrayed).unwrap();
                for key in keys.keys {
                    batch.put(
                        Space::Indexes,
                        keys::index_entry_key(index.id, &key.encoded, 21),
                        stored.clone(),
                    );
                }
            }
        });
        let report = coll.validate().unwrap();
        assert_eq!(
            report.indexes[1].errors,
            ["Index a_1 is not multikey but document with RecordId(21) and _id: 30 has multikey data, 2 key(s)"]
        );
        assert!(report.extra_index_entries.is_empty() && report.missing_index_entries.is_empty());
    }

    #[test]
    fn records_in_an_unreadable_block_are_corrupt_and_the_rest_is_checked() {
        let engine = Arc::new(crate::testing::CorruptBlocks::default());
        let unreadable = engine.unreadable.clone();
        let (catalog, coll) = collection(engine);
        let id = coll.meta().id;
        // Records 8..=11 are in the block; 10 had been deleted. After the block, record 15
        // lacks its a_1 entry.
        let (missing, _) = entry(&coll, "a_1", Bson::Int32(0), 15);
        write(&catalog, |batch| {
            batch.delete(Space::Records, keys::record_key(id, 10));
            batch.delete(Space::Indexes, missing);
            for name in ["_id_", "a_1", "u_1"] {
                let value = if name == "a_1" {
                    Bson::Int32(0)
                } else {
                    Bson::Int32(10)
                };
                batch.delete(Space::Indexes, entry(&coll, name, value, 10).0);
            }
        });
        unreadable
            .lock()
            .extend((8..=11).map(|r| keys::record_key(id, r)));
        let report = coll.validate().unwrap();
        assert!(!report.is_valid());
        assert_eq!(
            report.corrupt_records,
            [8, 9, 11],
            "10 has no entry: it did not exist"
        );
        assert_eq!(report.invalid_documents, 3);
        assert_eq!(report.records, 16);
        assert_eq!(report.errors[0], INVALID_DOCUMENTS);
        assert!(
            report.errors[1].starts_with("Could not read every record: "),
            "{report:?}"
        );
        assert_eq!(
            report.missing_index_entries,
            [
                doc! { "indexName": "a_1", "recordId": 15_i64, "idKey": { "_id": 15 }, "indexKey": { "a": 0 } }
            ]
        );
        assert!(report.extra_index_entries.is_empty(), "{report:?}");
    }
}
