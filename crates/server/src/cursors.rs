//! Open cursors: what `getMore` continues, killed by `killCursors` or after 10 minutes
//! idle, as in MongoDB.
//!
//! A cursor over a plain collection scan keeps no documents: it remembers the last
//! record id (or index entry) it returned and resumes the scan from there on a fresh
//! snapshot at the next batch (records keep their id when updated, so nothing is
//! returned twice). A sorted find streams out of its sorter (spilled runs merged as they
//! are read), an aggregation out of its pipeline, a batch at a time; small listings are
//! buffered. A cursor's idle time does not count toward the command's `maxTimeMS`.
//!
//! Batches are encoded documents: an unprojected find hands out the records' stored bytes
//! as they are, and a reply is assembled from them without decoding them.

use crate::exec::{CollectionScan, Deadline};
use crate::security::UserName;
use basalt_error::{Error, ErrorCode, Result};
use basalt_memory::Reservation;
use bson::{doc, Document, RawDocumentBuf};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::iter::Peekable;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// MongoDB closes a cursor nobody asked for in this long (cursorTimeoutMillis).
pub const CURSOR_IDLE_TIMEOUT_MS: u64 = 600_000;
/// A batch stops growing at this many bytes of documents (16 MiB, as in MongoDB).
pub const BATCH_SIZE_BYTES_MAX: usize = 16 * 1024 * 1024;
/// Documents in a first batch when the client gives no batchSize.
pub const FIRST_BATCH_DOCS_DEFAULT: usize = 101;

/// Documents a cursor hands out as the client asks for them.
pub type DocumentStream = Peekable<Box<dyn Iterator<Item = Result<Document>> + Send>>;

/// Where a cursor's documents come from.
pub enum CursorSource {
    /// Documents produced by an iterator: computed ahead (aggregation output, listings)
    /// or read on demand (a sorted result merged from spilled runs).
    Stream(Box<DocumentStream>),
    Scan(Box<CollectionScan>),
    /// A change stream: tailable, its getMores wait for changes (`change_streams.rs`).
    ChangeStream(Box<crate::change_streams::ChangeStream>),
    /// A read of `local.oplog.rs`, maybe tailable (`local_oplog.rs`).
    Oplog(Box<crate::local_oplog::OplogCursor>),
}

impl CursorSource {
    /// A source over documents already computed, whose memory counts in the server's
    /// budget until they are handed out (or the cursor is dropped).
    pub fn buffered(docs: Vec<Document>) -> CursorSource {
        let mut memory = Reservation::default();
        // The documents exist already: count them even past the budget, which then
        // makes other work spill or wait.
        let _ = memory.record(docs.iter().map(basalt_value::document_memory_bytes).sum());
        CursorSource::stream(Buffered {
            docs: docs.into_iter(),
            memory,
        })
    }

    pub fn stream(docs: impl Iterator<Item = Result<Document>> + Send + 'static) -> CursorSource {
        let boxed: Box<dyn Iterator<Item = Result<Document>> + Send> = Box::new(docs);
        CursorSource::Stream(Box::new(boxed.peekable()))
    }

    /// Whether a getMore waits for data to come (a tailable `awaitData` cursor, whose
    /// getMore's `maxTimeMS` is how long).
    pub fn awaits_data(&self) -> bool {
        match self {
            CursorSource::Scan(scan) => scan.awaits_data(),
            CursorSource::Oplog(oplog) => oplog.awaits_data(),
            CursorSource::Stream(_) | CursorSource::ChangeStream(_) => false,
        }
    }

    /// As [`CursorSource::next_batch`], waiting up to `wait` for a document when there
    /// is none yet and the source awaits data.
    pub fn next_batch_waiting(
        &mut self,
        max_docs: Option<usize>,
        wait: std::time::Duration,
    ) -> Result<(Vec<RawDocumentBuf>, bool)> {
        match self {
            CursorSource::Oplog(oplog) => oplog.next_batch(max_docs, Some(wait)),
            CursorSource::Scan(scan) if scan.awaits_data() => {
                let first = self.next_batch(max_docs)?;
                if !first.0.is_empty() {
                    return Ok(first);
                }
                if let CursorSource::Scan(scan) = self {
                    scan.wait_for_records(wait);
                }
                self.next_batch(max_docs)
            }
            _ => self.next_batch(max_docs),
        }
    }

    /// Pulls up to `max_docs` documents and at most `BATCH_SIZE_BYTES_MAX` bytes (one
    /// document always fits). Returns the batch and whether the source is exhausted.
    pub fn next_batch(&mut self, max_docs: Option<usize>) -> Result<(Vec<RawDocumentBuf>, bool)> {
        let max_docs = max_docs.unwrap_or(usize::MAX);
        match self {
            CursorSource::Stream(docs) => {
                let mut batch = Vec::new();
                let mut bytes = 0;
                while batch.len() < max_docs {
                    let size = match docs.peek() {
                        None => break,
                        Some(Ok(next)) => basalt_value::document_size_bytes(next),
                        Some(Err(_)) => 0,
                    };
                    if !batch.is_empty() && bytes + size > BATCH_SIZE_BYTES_MAX {
                        break;
                    }
                    bytes += size;
                    if let Some(next) = docs.next() {
                        batch.push(encode(&next?)?);
                    }
                }
                Ok((batch, docs.peek().is_none()))
            }
            CursorSource::Scan(scan) => {
                scan.next_batch::<RawDocumentBuf>(max_docs, BATCH_SIZE_BYTES_MAX)
            }
            CursorSource::ChangeStream(stream) => {
                let (batch, _) = stream.next_batch(Some(max_docs), None)?;
                Ok((batch, stream.is_exhausted()))
            }
            CursorSource::Oplog(oplog) => oplog.next_batch(Some(max_docs), None),
        }
    }
}

/// Documents computed ahead, with their share of the server's memory budget.
struct Buffered {
    docs: std::vec::IntoIter<Document>,
    memory: Reservation,
}

impl Iterator for Buffered {
    type Item = Result<Document>;

    fn next(&mut self) -> Option<Result<Document>> {
        // Each document handed out gives back its share of what is left: no second
        // walk over it to measure it again.
        let share = self.memory.used_bytes() / (self.docs.len().max(1));
        let doc = self.docs.next()?;
        self.memory.shrink(share);
        Some(Ok(doc))
    }
}

pub struct Cursor {
    pub namespace: String,
    pub source: CursorSource,
    /// The command's `maxTimeMS`, which the cursor's idle time does not count toward.
    deadline: Deadline,
    last_used: Instant,
    created: bson::DateTime,
    /// Batches handed out after the first, for `currentOp`.
    batches: u32,
    /// The user who opened it, under access control: only that user may use it.
    owner: Option<UserName>,
    /// The write scope it was opened in (a transaction's, a snapshot read's): its
    /// getMores read the same data.
    scope: Option<Arc<dyn basalt_storage::WriteScope>>,
}

impl Cursor {
    /// Readies the cursor for its next batch: the time it sat idle since the last one
    /// moves its time limit on. Fails with MaxTimeMSExpired when no time is left.
    pub fn resume(&mut self) -> Result<()> {
        self.deadline.extend(self.last_used.elapsed());
        self.deadline.check()
    }

    /// The command's time limit, which the cursor's batches share.
    pub fn deadline(&self) -> &Deadline {
        &self.deadline
    }

    /// The cursor as `currentOp` describes it (mongod's `cursor` fields).
    pub fn describe(&self, id: i64) -> Document {
        let idle_ms = i64::try_from(self.last_used.elapsed().as_millis()).unwrap_or(i64::MAX);
        doc! {
            "cursorId": id,
            "createdDate": self.created,
            "lastAccessDate": bson::DateTime::from_millis(
                bson::DateTime::now().timestamp_millis().saturating_sub(idle_ms),
            ),
            "nBatchesReturned": i64::from(self.batches) + 1,
            "noCursorTimeout": false,
            "tailable": self.source.awaits_data(),
            "awaitData": self.source.awaits_data(),
        }
    }

    /// The write scope the cursor was opened in, which its batches are read in.
    pub fn scope(&self) -> Option<Arc<dyn basalt_storage::WriteScope>> {
        self.scope.clone()
    }
}

#[derive(Default)]
pub struct CursorManager {
    cursors: Mutex<HashMap<i64, Cursor>>,
}

impl CursorManager {
    /// Registers a cursor and returns its id (never 0, which means "no cursor").
    pub fn open(
        &self,
        namespace: String,
        source: CursorSource,
        deadline: Deadline,
        owner: Option<UserName>,
    ) -> i64 {
        let mut cursors = self.cursors.lock();
        let id = loop {
            let candidate = (rand::random::<u64>() >> 1) as i64;
            if candidate != 0 && !cursors.contains_key(&candidate) {
                break candidate;
            }
        };
        cursors.insert(
            id,
            Cursor {
                namespace,
                source,
                deadline,
                last_used: Instant::now(),
                created: bson::DateTime::now(),
                batches: 0,
                owner,
                scope: basalt_storage::write_scope(),
            },
        );
        id
    }

    /// Takes a cursor out for a getMore; it is put back with [`CursorManager::restore`]
    /// unless exhausted. A concurrent getMore on the same cursor finds it missing.
    pub fn take(&self, id: i64, namespace: &str, user: Option<&UserName>) -> Result<Cursor> {
        let mut cursors = self.cursors.lock();
        match cursors.get(&id) {
            Some(cursor) if cursor.owner.as_ref() != user => Err(not_owner(id)),
            None => Err(Error::new(
                ErrorCode::CURSOR_NOT_FOUND,
                format!("cursor id {id} not found"),
            )),
            Some(cursor) if cursor.namespace != namespace => Err(Error::new(
                ErrorCode::UNAUTHORIZED,
                format!(
                    "Requested getMore on namespace '{namespace}', but cursor belongs to a different namespace {}",
                    cursor.namespace
                ),
            )),
            Some(_) => Ok(cursors.remove(&id).expect("cursor checked above")),
        }
    }

    /// The first batch of `source` as a command reply's `cursor`, with a cursor opened
    /// for the rest unless the source is exhausted or the client wants a single batch.
    /// `batch_size` bounds the first batch only: a getMore without one returns what fits
    /// in a reply, as mongod does. `deadline` is the command's time limit, which later
    /// batches keep.
    pub fn first_batch_reply(
        &self,
        namespace: String,
        mut source: CursorSource,
        batch_size: Option<usize>,
        single_batch: bool,
        deadline: Deadline,
        owner: Option<UserName>,
    ) -> Result<RawDocumentBuf> {
        let (batch, exhausted) =
            source.next_batch(Some(batch_size.unwrap_or(FIRST_BATCH_DOCS_DEFAULT)))?;
        let id = if exhausted || single_batch {
            0
        } else {
            self.open(namespace.clone(), source, deadline, owner)
        };
        cursor_reply(id, &namespace, batch, true)
    }

    pub fn restore(&self, id: i64, mut cursor: Cursor) {
        cursor.last_used = Instant::now();
        cursor.batches += 1;
        self.cursors.lock().insert(id, cursor);
    }

    /// Kills the cursor; false when there was none with this id. Only its owner may.
    pub fn kill(&self, id: i64, user: Option<&UserName>) -> Result<bool> {
        let mut cursors = self.cursors.lock();
        match cursors.get(&id) {
            None => Ok(false),
            Some(cursor) if cursor.owner.as_ref() != user => Err(not_owner(id)),
            Some(_) => Ok(cursors.remove(&id).is_some()),
        }
    }

    /// The cursors waiting for their next getMore, as `$currentOp`'s `idleCursor`s.
    pub fn idle(&self, host: &str) -> Vec<Document> {
        self.cursors
            .lock()
            .iter()
            .map(|(id, cursor)| {
                doc! {
                    "type": "idleCursor",
                    "host": host,
                    "ns": &cursor.namespace,
                    "cursor": cursor.describe(*id),
                }
            })
            .collect()
    }

    pub fn open_count(&self) -> usize {
        self.cursors.lock().len()
    }

    pub fn reap_idle(&self) {
        let timeout = Duration::from_millis(CURSOR_IDLE_TIMEOUT_MS);
        self.cursors
            .lock()
            .retain(|_, cursor| cursor.last_used.elapsed() < timeout);
    }
}

/// MongoDB's refusal of a cursor opened by another user.
fn not_owner(id: i64) -> Error {
    Error::new(
        ErrorCode::UNAUTHORIZED,
        format!("cursor id {id} was not created by the authenticated user"),
    )
}

/// A document in its wire bytes; a document BSON cannot hold (a key with a NUL byte,
/// say) is an error rather than a panic.
pub fn encode(doc: &Document) -> Result<RawDocumentBuf> {
    RawDocumentBuf::try_from(doc)
        .map_err(|e| Error::internal(format!("document not encodable: {e}")))
}

/// The `cursor` sub-document of find/aggregate/getMore/listCollections replies
/// (`{cursor: {firstBatch | nextBatch: [...], id, ns}}`) around a batch of encoded
/// documents, written into one buffer so that a batch's bytes are copied once, with room
/// for the `ok` the dispatcher appends. (Built with bson's appends, a 500 KB batch was
/// copied three times over: into the array, the cursor document, the reply.)
pub fn cursor_reply(
    id: i64,
    namespace: &str,
    batch: Vec<RawDocumentBuf>,
    first: bool,
) -> Result<RawDocumentBuf> {
    const DOCUMENT: u8 = 0x03;
    const ARRAY: u8 = 0x04;
    const STRING: u8 = 0x02;
    const INT64: u8 = 0x12;
    let key: &[u8] = if first {
        b"firstBatch\0"
    } else {
        b"nextBatch\0"
    };
    let batch_bytes: usize = batch.iter().map(|d| d.as_bytes().len() + 8).sum();
    let mut out = Vec::with_capacity(batch_bytes + namespace.len() + 64);
    let reply = begin_document(&mut out);
    out.push(DOCUMENT);
    out.extend_from_slice(b"cursor\0");
    let cursor = begin_document(&mut out);
    out.push(ARRAY);
    out.extend_from_slice(key);
    let array = begin_document(&mut out);
    for (index, doc) in batch.iter().enumerate() {
        out.push(DOCUMENT);
        out.extend_from_slice(index.to_string().as_bytes());
        out.push(0);
        out.extend_from_slice(doc.as_bytes());
    }
    end_document(&mut out, array);
    out.push(INT64);
    out.extend_from_slice(b"id\0");
    out.extend_from_slice(&id.to_le_bytes());
    out.push(STRING);
    out.extend_from_slice(b"ns\0");
    let length = i32::try_from(namespace.len() + 1)
        .map_err(|_| Error::internal("namespace too long for a reply"))?;
    out.extend_from_slice(&length.to_le_bytes());
    out.extend_from_slice(namespace.as_bytes());
    out.push(0);
    end_document(&mut out, cursor);
    end_document(&mut out, reply);
    RawDocumentBuf::from_bytes(out).map_err(|e| Error::internal(format!("cursor reply: {e}")))
}

/// Starts a document (or array) in `out`: its length is written by [`end_document`].
fn begin_document(out: &mut Vec<u8>) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    start
}

/// Ends the document begun at `start`: its terminator and its length (a reply is at
/// most two 16 MiB documents, far below `i32::MAX`).
fn end_document(out: &mut Vec<u8>, start: usize) {
    out.push(0);
    let length = (out.len() - start) as i32;
    out[start..start + 4].copy_from_slice(&length.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn cursor_replies_are_the_documents_bson_would_build() {
        let docs: Vec<Document> = vec![doc! { "a": 1 }, doc! { "b": { "c": [1, "x"] } }, doc! {}];
        let encoded: Vec<RawDocumentBuf> = docs.iter().map(|d| encode(d).unwrap()).collect();
        for (first, key) in [(true, "firstBatch"), (false, "nextBatch")] {
            let reply = cursor_reply(42, "db.c\u{e9}", encoded.clone(), first).unwrap();
            let expected =
                doc! { "cursor": { key: docs.clone(), "id": 42_i64, "ns": "db.c\u{e9}" } };
            assert_eq!(reply.as_bytes(), encode(&expected).unwrap().as_bytes());
        }
        let empty = cursor_reply(0, "db.c", Vec::new(), true).unwrap();
        let expected = doc! { "cursor": { "firstBatch": [], "id": 0_i64, "ns": "db.c" } };
        assert_eq!(empty.as_bytes(), encode(&expected).unwrap().as_bytes());
    }

    #[test]
    fn buffered_batches_and_lifecycle() {
        let docs: Vec<Document> = (0..5).map(|i| doc! { "i": i }).collect();
        let manager = CursorManager::default();
        let id = manager.open(
            "db.c".into(),
            CursorSource::buffered(docs),
            Deadline::default(),
            Some(UserName::new("ann", "admin")),
        );
        assert_ne!(id, 0);
        let ann = UserName::new("ann", "admin");
        assert_eq!(
            manager.take(id, "db.c", None).err().map(|e| e.code),
            Some(ErrorCode::UNAUTHORIZED)
        );
        let mut cursor = manager.take(id, "db.c", Some(&ann)).unwrap();
        let (batch, done) = cursor.source.next_batch(Some(3)).unwrap();
        assert_eq!((batch.len(), done), (3, false));
        manager.restore(id, cursor);
        assert_eq!(
            manager
                .take(id, "other.c", Some(&ann))
                .err()
                .map(|e| e.code),
            Some(ErrorCode::UNAUTHORIZED)
        );
        let bob = UserName::new("bob", "admin");
        assert!(manager.kill(id, Some(&bob)).is_err());
        assert!(manager.kill(id, Some(&ann)).unwrap());
        assert_eq!(
            manager.take(id, "db.c", Some(&ann)).err().map(|e| e.code),
            Some(ErrorCode::CURSOR_NOT_FOUND)
        );
    }
}
