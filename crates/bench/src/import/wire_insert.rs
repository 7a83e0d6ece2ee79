//! `insert` commands sent as OP_MSG document sequences straight over TCP, one connection
//! per worker, for `--mode insert` against a plain `mongodb://host:port` URI.
//!
//! The documents are already BSON when a batch is ready, so the message is those bytes
//! behind a small command body: nothing is re-serialised, no `_id` is looked for (the
//! server generates a missing one, as MongoDB does) and no per-batch map of inserted ids
//! is built — the driver's `insert_many` did all three and was a third of the importer's
//! time. Framing and the reply's decoding are `basalt-wire`'s, the server's own code.
//! URIs that need what only the driver does (credentials, TLS, several hosts, SRV) keep
//! the driver.

use super::sink::Outcome;
use crate::io_error;
use crate::raw_wire::{as_i64, message_length, plain_address, reply_body};
use basalt_error::{Error, ErrorCode, Result};
use basalt_wire::{encode_op_msg_with_sequences, DocumentSequence, HEADER_SIZE_BYTES};
use bson::{doc, Bson, Document, RawDocumentBuf};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;

/// MongoDB's `maxWriteBatchSize`: statements per insert command.
const WRITE_BATCH_SIZE_MAX: usize = 100_000;
/// Documents' bytes per message, well under the 48 MB `maxMessageSizeBytes`.
const MESSAGE_DOCUMENTS_BYTES_MAX: usize = 16 << 20;

pub(super) struct WireInsert {
    address: String,
    db: String,
    collection: String,
    ordered: bool,
    /// Idle connections; a worker takes one per batch and puts it back after.
    idle: Mutex<Vec<TcpStream>>,
    next_request_id: AtomicI32,
}

impl WireInsert {
    /// An inserter for `uri`, or `None` when the URI needs the driver.
    pub(super) fn for_uri(uri: &str, db: &str, collection: &str, ordered: bool) -> Option<Self> {
        Some(WireInsert {
            address: plain_address(uri)?,
            db: db.to_string(),
            collection: collection.to_string(),
            ordered,
            idle: Mutex::new(Vec::new()),
            next_request_id: AtomicI32::new(1),
        })
    }

    /// Inserts a batch, in as many messages as the limits need; `Err` only when the
    /// request as a whole failed. With `ordered`, a message after a failed document is
    /// not sent.
    pub(super) fn insert(&self, docs: Vec<RawDocumentBuf>) -> Result<Outcome> {
        let mut outcome = Outcome::default();
        let mut rest = docs;
        let mut offset = 0;
        while !rest.is_empty() {
            let take = message_documents(&rest);
            let tail = rest.split_off(take);
            let part = self.send(rest)?;
            outcome.written += part.written;
            outcome
                .failed
                .extend(part.failed.into_iter().map(|(i, why)| (offset + i, why)));
            if self.ordered && !outcome.failed.is_empty() {
                break;
            }
            offset += take;
            rest = tail;
        }
        Ok(outcome)
    }

    fn send(&self, docs: Vec<RawDocumentBuf>) -> Result<Outcome> {
        let count = docs.len();
        let body = RawDocumentBuf::try_from(&doc! {
            "insert": &self.collection,
            "ordered": self.ordered,
            "$db": &self.db,
        })
        .map_err(|e| Error::internal(format!("cannot encode the insert command: {e}")))?;
        let request_id = self.next_request_id.fetch_add(1, Ordering::Relaxed);
        let sequence = DocumentSequence {
            identifier: "documents".to_string(),
            documents: docs,
        };
        let message = encode_op_msg_with_sequences(request_id, 0, 0, &body, &[sequence], None);
        let mut stream = self.connection()?;
        let reply = round_trip(&mut stream, &message)
            .map_err(|e| io_error(format!("insert into {} failed", self.address), e))?;
        if let Ok(mut idle) = self.idle.lock() {
            idle.push(stream);
        }
        read_reply(&reply?, count, self.ordered)
    }

    fn connection(&self) -> Result<TcpStream> {
        if let Some(stream) = self.idle.lock().ok().and_then(|mut idle| idle.pop()) {
            return Ok(stream);
        }
        let stream = TcpStream::connect(&self.address)
            .map_err(|e| io_error(format!("cannot connect to {}", self.address), e))?;
        // A batch is one write and one small reply: do not hold the reply back.
        stream
            .set_nodelay(true)
            .map_err(|e| io_error("cannot set TCP_NODELAY", e))?;
        Ok(stream)
    }
}

/// How many of `docs` go in the next message.
fn message_documents(docs: &[RawDocumentBuf]) -> usize {
    let mut bytes = 0;
    let fit = docs
        .iter()
        .take(WRITE_BATCH_SIZE_MAX)
        .take_while(|d| {
            bytes += d.as_bytes().len();
            bytes <= MESSAGE_DOCUMENTS_BYTES_MAX
        })
        .count();
    fit.max(1)
}

/// Sends a message and reads its reply's body. The outer `Result` is the connection's,
/// the inner one the reply's framing.
fn round_trip(stream: &mut TcpStream, message: &[u8]) -> std::io::Result<Result<Document>> {
    stream.write_all(message)?;
    let mut reply = vec![0; HEADER_SIZE_BYTES];
    stream.read_exact(&mut reply)?;
    reply.resize(message_length(&reply), 0);
    stream.read_exact(&mut reply[HEADER_SIZE_BYTES..])?;
    Ok(reply_body(&reply))
}

/// The outcome of an insert command's reply (`n`, `writeErrors`), or the command's own
/// error (`ok: 0`, a write concern error).
fn read_reply(reply: &Document, count: usize, ordered: bool) -> Result<Outcome> {
    let number = |value: Option<&Bson>| value.and_then(as_i64);
    if number(reply.get("ok")) != Some(1) {
        let code = number(reply.get("code")).unwrap_or(0) as i32;
        let message = reply.get_str("errmsg").unwrap_or("insert failed");
        return Err(Error::new(
            ErrorCode(code),
            format!("insert failed: {message}"),
        ));
    }
    if let Ok(concern) = reply.get_document("writeConcernError") {
        let message = concern.get_str("errmsg").unwrap_or("write concern error");
        return Err(Error::new(
            ErrorCode::OPERATION_FAILED,
            format!("write concern error: {message}"),
        ));
    }
    let mut failed = Vec::new();
    if let Ok(errors) = reply.get_array("writeErrors") {
        for error in errors.iter().filter_map(Bson::as_document) {
            let index = number(error.get("index")).unwrap_or(0) as usize;
            let message = error.get_str("errmsg").unwrap_or("write error").to_string();
            failed.push((index, message));
        }
    }
    failed.sort_by_key(|(index, _)| *index);
    let written = number(reply.get("n")).map_or_else(
        // A server that leaves `n` out: ordered stops at the first failure.
        || match (ordered, failed.first()) {
            (true, Some((index, _))) => *index,
            _ => count - failed.len(),
        },
        |n| n as usize,
    );
    Ok(Outcome {
        written: written as u64,
        failed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_stay_within_the_limits() {
        let small = RawDocumentBuf::try_from(&doc! {"a": 1}).unwrap();
        let docs = vec![small; WRITE_BATCH_SIZE_MAX + 5];
        assert_eq!(message_documents(&docs), WRITE_BATCH_SIZE_MAX);
        let big = RawDocumentBuf::try_from(&doc! {"s": "x".repeat(6 << 20)}).unwrap();
        assert_eq!(message_documents(&vec![big.clone(); 4]), 2);
        let huge = RawDocumentBuf::try_from(&doc! {"s": "x".repeat(17 << 20)}).unwrap();
        assert_eq!(message_documents(&[huge]), 1, "one document always goes");
    }

    #[test]
    fn replies_become_outcomes_or_errors() {
        let reply = doc! {"n": 3, "ok": 1.0, "writeErrors": [
            {"index": 4, "code": 11000, "errmsg": "dup b"},
            {"index": 1, "code": 11000, "errmsg": "dup a"},
        ]};
        let outcome = read_reply(&reply, 5, false).unwrap();
        assert_eq!(outcome.written, 3);
        assert_eq!(
            outcome.failed,
            vec![(1, "dup a".to_string()), (4, "dup b".to_string())]
        );
        let refused = doc! {"ok": 0.0, "code": 26, "codeName": "NamespaceNotFound", "errmsg": "no"};
        assert_eq!(
            read_reply(&refused, 1, true).unwrap_err().code,
            ErrorCode(26)
        );
        let concern = doc! {"n": 1, "ok": 1, "writeConcernError": {"code": 64, "errmsg": "late"}};
        assert!(read_reply(&concern, 1, true).is_err());
    }
}
