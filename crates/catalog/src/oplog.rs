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
//! `t` (the entry's term), `v` (2), `op` (`i`, `u`, `d`, `c`), `ns`, `ui` (the
//! collection's UUID), `o`, `o2` (`_id` of an update), `wall`, and the `lsid`/`txnNumber`
//! of a transaction's session. An update's `o` is the new document when it replaced the
//! whole document, else MongoDB's `{$v: 2, diff}` (see [`diff`]): the same form as in
//! mongod's `local.oplog.rs`, which Basalt presents these records as, and which
//! `applyOps` applies. With the collection option `changeStreamPreAndPostImages`, an
//! update's and a delete's record also holds the document before (`preImage`) and an
//! update's after (`postImage`); `local.oplog.rs` does not show them.

use crate::collection::CollectionMeta;
use basalt_storage::{Space, WriteBatch, OPLOG_PREFIX};
use bson::{cstr, doc, Bson, Document, RawBson, RawDocument, RawDocumentBuf};
use std::cell::{Cell, RefCell};

/// The log entry a thread applies.
struct Entry {
    index: u64,
    term: u64,
    wall_ms: i64,
    session: Option<(Document, i64)>,
    next: Cell<u32>,
}

thread_local! {
    static ENTRY: RefCell<Option<Entry>> = const { RefCell::new(None) };
    /// Set while an update replaces whole documents (a replacement, not operators).
    static REPLACING: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` recording the oplog of the log entry `index` of `term` (proposed at
/// `wall_ms`, for the session and transaction number given, if any).
pub fn with_entry<T>(
    (index, term): (u64, u64),
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
            term,
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
        record.append(cstr!("t"), entry.term as i64);
        record.append(cstr!("v"), 2_i64);
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

pub(crate) fn recording() -> bool {
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
        let Ok(encoded) = RawDocumentBuf::try_from(&doc! { "$v": 2, "diff": diff(old, new) })
        else {
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

/// What an update changed, in MongoDB's `$v: 2` oplog form: `d` the fields removed
/// (`{name: false}`), `u` those given a new value, `i` those added, and `s<name>` the
/// changes within an embedded document or array that exists on both sides. An array's
/// changes are `{a: true, l: <new length, when cut short>, u<index>: value, s<index>:
/// changes}`; an array changed in more than half the places both sides have (other than
/// within embedded documents) is given whole.
pub fn diff(old: &Document, new: &Document) -> Document {
    let (mut removed, mut updated, mut inserted) =
        (Document::new(), Document::new(), Document::new());
    let mut within = Vec::new();
    for (key, value) in new {
        match (old.get(key), value) {
            (Some(before), after) if before == after => {}
            (Some(Bson::Document(before)), Bson::Document(after)) => {
                within.push((format!("s{key}"), diff(before, after)));
            }
            (Some(Bson::Array(before)), Bson::Array(after)) => match array_diff(before, after) {
                Some(changes) => within.push((format!("s{key}"), changes)),
                None => {
                    updated.insert(key, value.clone());
                }
            },
            (Some(_), _) => {
                updated.insert(key, value.clone());
            }
            (None, _) => {
                inserted.insert(key, value.clone());
            }
        }
    }
    for key in old.keys().filter(|key| !new.contains_key(*key)) {
        removed.insert(key, false);
    }
    let mut changes = Document::new();
    for (name, part) in [("d", removed), ("u", updated), ("i", inserted)] {
        if !part.is_empty() {
            changes.insert(name, part);
        }
    }
    changes.extend(
        within
            .into_iter()
            .map(|(key, part)| (key, Bson::Document(part))),
    );
    changes
}

/// An array's changes (see [`diff`]), or `None` when it is better given whole.
fn array_diff(old: &[Bson], new: &[Bson]) -> Option<Document> {
    let common = old.len().min(new.len());
    let changed: Vec<usize> = (0..common).filter(|&i| old[i] != new[i]).collect();
    let in_place =
        |&i: &usize| matches!((&old[i], &new[i]), (Bson::Document(_), Bson::Document(_)));
    if changed.len() * 2 > common && !changed.iter().all(in_place) {
        return None;
    }
    let mut changes = doc! { "a": true };
    if new.len() < old.len() {
        changes.insert("l", new.len() as i32);
    }
    for i in changed.into_iter().chain(common..new.len()) {
        match (old.get(i), &new[i]) {
            (Some(Bson::Document(before)), Bson::Document(after)) => {
                changes.insert(format!("s{i}"), diff(before, after));
            }
            (_, value) => {
                changes.insert(format!("u{i}"), value.clone());
            }
        }
    }
    Some(changes)
}

/// Applies a [`diff`] to the document it was taken from (as `applyOps` does with an
/// update's `{$v: 2, diff}`). Fails on a diff that is not one.
pub fn apply_diff(document: &mut Document, diff: &Document) -> Result<(), String> {
    for (key, value) in diff {
        let fields = match value {
            Bson::Document(fields) => fields,
            _ if key == "a" => continue,
            _ => return Err(format!("diff field '{key}' is not an object")),
        };
        match key.as_str() {
            "d" => {
                for name in fields.keys() {
                    document.remove(name);
                }
            }
            "u" | "i" => {
                for (name, value) in fields {
                    document.insert(name, value.clone());
                }
            }
            _ => {
                let name = key
                    .strip_prefix('s')
                    .ok_or_else(|| format!("unknown diff field '{key}'"))?;
                match document.get_mut(name) {
                    Some(Bson::Array(array)) if fields.get_bool("a").unwrap_or(false) => {
                        apply_array_diff(array, fields)?
                    }
                    Some(Bson::Document(within)) => apply_diff(within, fields)?,
                    _ => return Err(format!("diff of '{name}', which is no document or array")),
                }
            }
        }
    }
    Ok(())
}

fn apply_array_diff(array: &mut Vec<Bson>, diff: &Document) -> Result<(), String> {
    if let Some(length) = diff.get("l") {
        let length = match length {
            Bson::Int32(n) => usize::try_from(*n).ok(),
            Bson::Int64(n) => usize::try_from(*n).ok(),
            _ => None,
        }
        .ok_or_else(|| "an array diff's 'l' must be a non-negative integer".to_string())?;
        array.resize(length, Bson::Null);
    }
    for (key, value) in diff {
        if key == "a" || key == "l" {
            continue;
        }
        let (kind, index) = key.split_at(key.len().min(1));
        let index: usize = index
            .parse()
            .map_err(|_| format!("unknown array diff field '{key}'"))?;
        if index >= array.len() {
            array.resize(index + 1, Bson::Null);
        }
        match (kind, value, &mut array[index]) {
            ("u", value, element) => *element = value.clone(),
            ("s", Bson::Document(within), Bson::Document(element)) => apply_diff(element, within)?,
            ("s", Bson::Document(within), Bson::Array(element)) => {
                apply_array_diff(element, within)?
            }
            _ => return Err(format!("array diff field '{key}' does not fit the array")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_update_is_described_as_mongodb_diffs_it() {
        let old = doc! { "_id": 1, "a": 1, "b": { "c": 1, "d": 2 }, "e": [1, 2], "gone": true };
        let new = doc! { "_id": 1, "a": 2, "b": { "c": 1, "d": 3, "n": 0 }, "e": [1, 2, 3] };
        assert_eq!(
            diff(&old, &new),
            doc! {
                "d": { "gone": false },
                "u": { "a": 2 },
                "sb": { "u": { "d": 3 }, "i": { "n": 0 } },
                "se": { "a": true, "u2": 3 },
            }
        );
        assert_eq!(
            diff(&doc! { "a": [1, 2, 3, 4] }, &doc! { "a": [1, 9] }),
            doc! { "sa": { "a": true, "l": 2, "u1": 9 } }
        );
        assert_eq!(
            diff(
                &doc! { "a": [{ "x": 1 }, 2] },
                &doc! { "a": [{ "x": 2 }, 2] }
            ),
            doc! { "sa": { "a": true, "s0": { "u": { "x": 2 } } } }
        );
        assert_eq!(
            diff(&doc! { "a": [1, 2] }, &doc! { "a": [3, 4] }),
            doc! { "u": { "a": [3, 4] } }
        );
    }

    proptest::proptest! {
        #[test]
        fn a_diff_applied_to_the_old_document_gives_the_new(
            old in proptest::collection::vec((0..4u8, 0..6i32), 0..6),
            new in proptest::collection::vec((0..4u8, 0..6i32), 0..6),
        ) {
            // Small documents whose fields are numbers, documents and arrays of them.
            let build = |fields: &[(u8, i32)]| {
                let mut document = Document::new();
                for (i, (kind, n)) in fields.iter().enumerate() {
                    let value = match kind {
                        0 => Bson::Int32(*n),
                        1 => Bson::Document(doc! { "x": *n, "y": { "z": *n % 2 } }),
                        2 => Bson::Array((0..*n).map(|k| Bson::Int32(k * (n % 3))).collect()),
                        _ => Bson::Array(vec![Bson::Document(doc! { "k": *n })]),
                    };
                    document.insert(format!("f{}", (i as i32 + n) % 5), value);
                }
                document
            };
            let (old, new) = (build(&old), build(&new));
            let mut patched = old.clone();
            apply_diff(&mut patched, &diff(&old, &new)).unwrap();
            proptest::prop_assert_eq!(patched, new);
        }
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
        with_entry((42, 3), 5_000, None, || {
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
