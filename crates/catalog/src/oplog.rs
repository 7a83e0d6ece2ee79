//! The oplog: one record per document a replicated write changed (and per collection
//! dropped or renamed), in MongoDB's oplog entry form, written in the same atomic batch
//! as the change itself. Change streams read it.
//!
//! The replicated log holds commands, not their effects; every member runs them and
//! writes these records as it applies them, so each member has the same oplog. A record
//! is written only while the thread runs inside [`with_entry`] (a replica set member
//! applying a log entry): a standalone keeps none. Records are keyed by the log entry's
//! index and their order within it (`OPLOG_PREFIX`, index, sequence; big-endian), so a
//! scan reads them in the order they happened; they are removed with the log entries
//! they came from.
//!
//! Fields: `ts` (the entry's timestamp: its wall-clock seconds, its index as increment),
//! `op` (`i`, `u`, `d`, `c`), `ns`, `ui` (the collection's UUID), `o`, `o2` (`_id` of an
//! update), `wall`, and the `lsid`/`txnNumber` of a transaction's or retryable write's
//! session. An update's `o` is the new document when it replaced the whole document,
//! else Basalt's description of the change: `{$v: 2, updatedFields, removedFields,
//! truncatedArrays}` (dotted paths, as change streams report them). With the collection
//! option `changeStreamPreAndPostImages`, an update's and a delete's record also holds the
//! document before (`preImage`) and an update's after (`postImage`).

use crate::collection::CollectionMeta;
use basalt_storage::{Space, WriteBatch, OPLOG_PREFIX};
use bson::{cstr, doc, Bson, Document, RawBson, RawDocument, RawDocumentBuf};
use std::cell::{Cell, RefCell};

/// The log entry a thread applies.
struct Entry {
    index: u64,
    wall_ms: i64,
    session: Option<(Document, i64)>,
    next: Cell<u32>,
}

thread_local! {
    static ENTRY: RefCell<Option<Entry>> = const { RefCell::new(None) };
    /// Set while an update replaces whole documents (a replacement, not operators).
    static REPLACING: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` recording the oplog of the log entry `index` (proposed at `wall_ms`, for the
/// session and transaction number given, if any).
pub fn with_entry<T>(
    index: u64,
    wall_ms: i64,
    session: Option<(Document, i64)>,
    f: impl FnOnce() -> T,
) -> T {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            ENTRY.with(|entry| entry.borrow_mut().take());
        }
    }
    ENTRY.with(|entry| {
        *entry.borrow_mut() = Some(Entry {
            index,
            wall_ms,
            session,
            next: Cell::new(0),
        })
    });
    let _reset = Reset;
    f()
}

/// Runs `f` as an update that replaces whole documents (its records are replacements).
pub fn replacing<T>(f: impl FnOnce() -> T) -> T {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            REPLACING.with(|replacing| replacing.set(self.0));
        }
    }
    let _reset = Reset(REPLACING.with(|replacing| replacing.replace(true)));
    f()
}

/// The key of the record `sequence` of log entry `index`.
pub fn key(index: u64, sequence: u32) -> Vec<u8> {
    let mut key = OPLOG_PREFIX.to_vec();
    key.extend_from_slice(&index.to_be_bytes());
    key.extend_from_slice(&sequence.to_be_bytes());
    key
}

/// The log entry index and sequence of a record's key.
pub fn position(key: &[u8]) -> Option<(u64, u32)> {
    let rest = key.strip_prefix(OPLOG_PREFIX)?;
    let index = u64::from_be_bytes(rest.get(..8)?.try_into().ok()?);
    let sequence = u32::from_be_bytes(rest.get(8..12)?.try_into().ok()?);
    Some((index, sequence))
}

/// What a record says besides its entry's time and session.
struct Change<'a> {
    op: &'static str,
    ns: String,
    ui: Option<bson::Uuid>,
    /// `o`, in its bytes.
    o: &'a RawDocument,
    o2: Option<Bson>,
    /// The document before and after, with `changeStreamPreAndPostImages`.
    images: Option<(&'a Document, Option<&'a RawDocument>)>,
}

impl<'a> Change<'a> {
    /// A change to a collection's documents.
    fn of(op: &'static str, meta: &CollectionMeta, o: &'a RawDocument) -> Change<'a> {
        Change {
            op,
            ns: meta.namespace(),
            ui: Some(meta.uuid),
            o,
            o2: None,
            images: None,
        }
    }
}

/// Adds a record to `batch` when the thread applies a log entry. The record is written
/// as bytes, with `o` (and a post-image) copied in as they are: an insert's or a
/// replacement's document is not encoded again.
fn record(batch: &mut WriteBatch, change: Change<'_>) {
    ENTRY.with(|entry| {
        let entry = entry.borrow();
        let Some(entry) = entry.as_ref() else {
            return;
        };
        let sequence = entry.next.get();
        entry.next.set(sequence + 1);
        let mut record = RawDocumentBuf::new();
        record.append(
            cstr!("ts"),
            bson::Timestamp {
                time: u32::try_from(entry.wall_ms / 1000).unwrap_or(0),
                increment: entry.index as u32,
            },
        );
        record.append(cstr!("op"), change.op);
        record.append(cstr!("ns"), change.ns.as_str());
        if let Some(ui) = change.ui {
            record.append(cstr!("ui"), bson::Binary::from(ui));
        }
        record.append(cstr!("o"), change.o);
        if let Some(o2) = change.o2.and_then(|o2| RawBson::try_from(o2).ok()) {
            record.append(cstr!("o2"), o2);
        }
        if let Some((before, after)) = change.images {
            if let Ok(before) = RawDocumentBuf::try_from(before) {
                record.append(cstr!("preImage"), before);
            }
            if let Some(after) = after {
                record.append(cstr!("postImage"), after);
            }
        }
        record.append(cstr!("wall"), bson::DateTime::from_millis(entry.wall_ms));
        if let Some((lsid, txn_number)) = &entry.session {
            if let Ok(lsid) = RawDocumentBuf::try_from(lsid) {
                record.append(cstr!("lsid"), lsid);
                record.append(cstr!("txnNumber"), *txn_number);
            }
        }
        batch.put(
            Space::Replication,
            key(entry.index, sequence),
            record.into_bytes(),
        );
    });
}

fn recording() -> bool {
    ENTRY.with(|entry| entry.borrow().is_some())
}

/// Whether a collection keeps its documents' images for change streams
/// (`changeStreamPreAndPostImages: {enabled: true}`). Basalt keeps them in the oplog
/// record itself (`preImage`, `postImage`), where mongod keeps a collection of them.
fn keeps_images(meta: &CollectionMeta) -> bool {
    meta.options
        .get_document("changeStreamPreAndPostImages")
        .is_ok_and(|option| option.get_bool("enabled").unwrap_or(false))
}

/// The `{_id}` of a document, encoded (an update's `o2`, a delete's `o`).
fn id_of(document: &Document) -> Document {
    doc! { "_id": document.get("_id").cloned().unwrap_or(Bson::Null) }
}

/// An insert, of the document's bytes (copied into the record as they are).
pub(crate) fn insert(batch: &mut WriteBatch, meta: &CollectionMeta, document: &[u8]) {
    if recording() {
        if let Ok(o) = RawDocument::from_bytes(document) {
            record(batch, Change::of("i", meta, o));
        }
    }
}

/// An update of `old` into `new`, whose bytes are `new_bytes`.
pub(crate) fn update(
    batch: &mut WriteBatch,
    meta: &CollectionMeta,
    old: &Document,
    new: &Document,
    new_bytes: &RawDocument,
) {
    if !recording() {
        return;
    }
    let description;
    let o = if REPLACING.with(Cell::get) {
        new_bytes
    } else {
        let mut change = Description::default();
        change.documents(old, new, &[]);
        let mut o = doc! {
            "$v": 2,
            "updatedFields": change.updated,
            "removedFields": change.removed,
            "truncatedArrays": change.truncated,
        };
        if !change.disambiguated.is_empty() {
            o.insert("disambiguatedPaths", change.disambiguated);
        }
        let Ok(encoded) = RawDocumentBuf::try_from(&o) else {
            return;
        };
        description = encoded;
        &description
    };
    let mut change = Change::of("u", meta, o);
    change.o2 = Some(Bson::Document(id_of(new)));
    change.images = keeps_images(meta).then_some((old, Some(new_bytes)));
    record(batch, change);
}

pub(crate) fn delete(batch: &mut WriteBatch, meta: &CollectionMeta, old: &Document) {
    if !recording() {
        return;
    }
    if let Ok(o) = RawDocumentBuf::try_from(&id_of(old)) {
        let mut change = Change::of("d", meta, &o);
        change.images = keeps_images(meta).then_some((old, None));
        record(batch, change);
    }
}

/// A command's record (`drop`, `renameCollection`, `create`, ...), as `db.$cmd`.
pub(crate) fn command(batch: &mut WriteBatch, db: &str, ui: Option<bson::Uuid>, o: Document) {
    if !recording() {
        return;
    }
    if let Ok(o) = RawDocumentBuf::try_from(&o) {
        let change = Change {
            op: "c",
            ns: format!("{db}.$cmd"),
            ui,
            o: &o,
            o2: None,
            images: None,
        };
        record(batch, change);
    }
}

/// What an update changed, as change streams report it: dotted paths of the values set
/// (into embedded documents that exist on both sides, and into arrays changed in a few
/// places), of the fields removed, and the arrays cut short.
#[derive(Default)]
struct Description {
    updated: Document,
    removed: Vec<Bson>,
    truncated: Vec<Bson>,
    /// The paths with a numeric part, as their parts: array indexes as integers, field
    /// names as strings (`disambiguatedPaths`: `a.1` says neither).
    disambiguated: Document,
}

/// A path as its parts: field names and array indexes.
type Parts = Vec<Bson>;

fn dotted(parts: &[Bson]) -> String {
    let names: Vec<String> = parts
        .iter()
        .map(|part| match part {
            Bson::String(name) => name.clone(),
            other => other.to_string(),
        })
        .collect();
    names.join(".")
}

impl Description {
    /// Notes a path's parts when one of them could be read either way.
    fn note(&mut self, parts: &[Bson]) {
        let ambiguous = parts.iter().any(|part| match part {
            Bson::String(name) => !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()),
            _ => true,
        });
        if ambiguous {
            self.disambiguated
                .insert(dotted(parts), Bson::Array(parts.to_vec()));
        }
    }

    fn set(&mut self, parts: &[Bson], value: &Bson) {
        self.updated.insert(dotted(parts), value.clone());
        self.note(parts);
    }

    fn documents(&mut self, old: &Document, new: &Document, prefix: &[Bson]) {
        let path = |key: &str| -> Parts {
            let mut parts = prefix.to_vec();
            parts.push(Bson::String(key.to_string()));
            parts
        };
        for (key, value) in new {
            let parts = path(key);
            match (old.get(key), value) {
                (Some(before), after) if before == after => {}
                (Some(Bson::Document(before)), Bson::Document(after)) => {
                    self.documents(before, after, &parts);
                }
                (Some(Bson::Array(before)), Bson::Array(after)) => {
                    self.arrays(before, after, &parts);
                }
                _ => self.set(&parts, value),
            }
        }
        for key in old.keys() {
            if !new.contains_key(key) {
                let parts = path(key);
                self.removed.push(Bson::String(dotted(&parts)));
                self.note(&parts);
            }
        }
    }

    /// An array changed in at most half of the places both sides have, or only in
    /// embedded documents, is described by its elements (those set or changed within,
    /// those appended, where it was cut); otherwise as a whole.
    fn arrays(&mut self, old: &[Bson], new: &[Bson], parts: &[Bson]) {
        let common = old.len().min(new.len());
        let changed: Vec<usize> = (0..common).filter(|&i| old[i] != new[i]).collect();
        let in_place =
            |&i: &usize| matches!((&old[i], &new[i]), (Bson::Document(_), Bson::Document(_)));
        if changed.len() * 2 > common && !changed.iter().all(in_place) {
            self.set(parts, &Bson::Array(new.to_vec()));
            return;
        }
        for i in changed.into_iter().chain(common..new.len()) {
            let mut element = parts.to_vec();
            element.push(Bson::Int32(i as i32));
            match (old.get(i), &new[i]) {
                (Some(Bson::Document(before)), Bson::Document(after)) => {
                    self.documents(before, after, &element);
                }
                (_, value) => self.set(&element, value),
            }
        }
        if new.len() < old.len() {
            self.truncated.push(Bson::Document(
                doc! { "field": dotted(parts), "newSize": new.len() as i32 },
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_update_is_described_by_dotted_paths() {
        let old = doc! { "_id": 1, "a": 1, "b": { "c": 1, "d": 2 }, "e": [1, 2], "gone": true };
        let new = doc! { "_id": 1, "a": 2, "b": { "c": 1, "d": 3, "n": 0 }, "e": [1, 2, 3] };
        let mut change = Description::default();
        change.documents(&old, &new, &[]);
        assert_eq!(
            change.updated,
            doc! { "a": 2, "b.d": 3, "b.n": 0, "e.2": 3 }
        );
        assert_eq!(change.removed, vec![Bson::String("gone".into())]);
        let mut cut = Description::default();
        cut.documents(&doc! { "a": [1, 2, 3, 4] }, &doc! { "a": [1, 9] }, &[]);
        assert_eq!(cut.updated, doc! { "a.1": 9 });
        assert_eq!(cut.disambiguated, doc! { "a.1": ["a", 1] });
        assert_eq!(
            cut.truncated,
            vec![Bson::Document(doc! { "field": "a", "newSize": 2 })]
        );
        let mut replaced = Description::default();
        replaced.documents(&doc! { "a": [1, 2] }, &doc! { "a": [3, 4] }, &[]);
        assert_eq!(replaced.updated, doc! { "a": [3, 4] });
    }

    #[test]
    fn records_are_written_only_while_an_entry_is_applied() {
        let meta = CollectionMeta {
            id: 7,
            db: "d".into(),
            name: "c".into(),
            uuid: bson::Uuid::new(),
            options: Document::new(),
            indexes: Vec::new(),
        };
        let mut batch = WriteBatch::default();
        let document = doc! { "_id": 1 }.to_vec().unwrap();
        insert(&mut batch, &meta, &document);
        assert!(batch.is_empty());
        with_entry(42, 5_000, None, || {
            insert(&mut batch, &meta, &document);
            delete(&mut batch, &meta, &doc! { "_id": 1 });
        });
        let keys: Vec<_> = batch
            .ops
            .iter()
            .map(|op| match op {
                basalt_storage::WriteOp::Put(_, key, _) => position(key),
                basalt_storage::WriteOp::Delete(..) => None,
            })
            .collect();
        assert_eq!(keys, vec![Some((42, 0)), Some((42, 1))]);
    }
}
