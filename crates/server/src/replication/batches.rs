//! A large write command as several log entries, as mongod's oplog holds a large insert
//! as many entries rather than one.
//!
//! An entry must reach the other members within one heartbeat interval (Raft's append
//! deadline), so an insert, update or delete whose statements exceed [`ENTRY_BYTES`] is
//! proposed in pieces of consecutive statements, one entry each, one after the other;
//! the client gets one reply merged from theirs (counts added, the indexes of write
//! errors and upserts made the command's own). An ordered command stops at the first
//! piece with a write error, as it would stop at the statement. The split depends only
//! on the command, so a retried command is split the same way, and the table of
//! retryable writes answers the pieces that already ran (each piece is recorded under
//! the index of its first statement).

use basalt_repl::Sequence;
use basalt_wire::DocumentSequence;
use bson::{Bson, Document, RawBsonRef, RawDocument, RawDocumentBuf};

/// The most statement bytes one log entry holds (a single larger statement is an
/// entry of its own).
pub(super) const ENTRY_BYTES: usize = 4 << 20;

/// One entry's share of a command: the command with its share of the statements (in
/// the body, or as a document sequence for the commands that read theirs in wire bytes),
/// encoded, and the index of the first one in the command.
pub(super) struct Piece {
    pub body: Vec<u8>,
    pub sequences: Vec<Sequence>,
    pub first_statement: u32,
}

/// The field that holds a write command's statements.
fn statements_field(name: &str) -> Option<&'static str> {
    match name {
        "insert" => Some("documents"),
        "update" => Some("updates"),
        "delete" => Some("deletes"),
        _ => None,
    }
}

/// The statements' bytes, borrowed from the sequence or the encoded body.
fn statements<'a>(
    field: &str,
    body: &'a RawDocument,
    sequences: &'a [DocumentSequence],
) -> Option<Vec<&'a [u8]>> {
    match sequences.iter().find(|s| s.identifier == field) {
        Some(sequence) => Some(sequence.documents.iter().map(|d| d.as_bytes()).collect()),
        None => body
            .get_array(field)
            .ok()?
            .into_iter()
            .map(|item| match item.ok()? {
                RawBsonRef::Document(d) => Some(d.as_bytes()),
                _ => None,
            })
            .collect(),
    }
}

/// The pieces of a command (`body` as encoded) too large for one entry; `None` when it
/// fits in one (or is not a list of statements, or its statements are malformed: the
/// command's handler then reports that, as it would on a standalone). Nothing is copied
/// unless the command is split.
pub(super) fn split(
    name: &str,
    body: &RawDocument,
    sequences: &[DocumentSequence],
) -> Option<Vec<Piece>> {
    let field = statements_field(name)?;
    let statements = statements(field, body, sequences)?;
    if statements.iter().map(|s| s.len()).sum::<usize>() <= ENTRY_BYTES {
        return None;
    }
    let mut rest = Document::try_from(body).ok()?;
    rest.remove(field);
    let others: Vec<Sequence> = sequences
        .iter()
        .filter(|s| s.identifier != field)
        .map(to_sequence)
        .collect();
    let as_sequence = crate::commands::reads_sequence_raw(name, field);
    let mut pieces = Vec::new();
    let mut first = 0usize;
    while first < statements.len() {
        let mut end = first + 1;
        let mut bytes = statements[first].len();
        while end < statements.len() && bytes + statements[end].len() <= ENTRY_BYTES {
            bytes += statements[end].len();
            end += 1;
        }
        let share = &statements[first..end];
        let mut sequences = others.clone();
        let mut body = rest.clone();
        if as_sequence {
            sequences.push(Sequence {
                identifier: field.to_string(),
                documents: share
                    .iter()
                    .map(|s| serde_bytes::ByteBuf::from(s.to_vec()))
                    .collect(),
            });
        } else {
            let decoded = share
                .iter()
                .map(|s| Document::from_reader(*s).map(Bson::Document))
                .collect::<Result<Vec<_>, _>>()
                .ok()?;
            body.insert(field, decoded);
        }
        pieces.push(Piece {
            body: body.to_vec().ok()?,
            sequences,
            first_statement: u32::try_from(first).unwrap_or(u32::MAX),
        });
        first = end;
    }
    Some(pieces)
}

/// A document sequence as a log entry holds it.
pub(super) fn to_sequence(sequence: &DocumentSequence) -> Sequence {
    Sequence {
        identifier: sequence.identifier.clone(),
        documents: sequence
            .documents
            .iter()
            .map(|d| serde_bytes::ByteBuf::from(d.as_bytes().to_vec()))
            .collect(),
    }
}

/// The replies of a command's pieces, merged into the command's.
#[derive(Default)]
pub(super) struct Merged {
    last: Option<Document>,
    failed: Option<RawDocumentBuf>,
    n: i64,
    n_modified: Option<i64>,
    upserted: Vec<Bson>,
    write_errors: Vec<Bson>,
}

fn number(reply: &Document, field: &str) -> Option<i64> {
    reply.get(field).and_then(basalt_value::as_i64)
}

/// The entries of an array of the reply, with their `index` moved by `offset`.
fn reindexed(reply: &Document, field: &str, offset: u32) -> Vec<Bson> {
    let Ok(items) = reply.get_array(field) else {
        return Vec::new();
    };
    items
        .iter()
        .map(|item| match item {
            Bson::Document(entry) => {
                let mut entry = entry.clone();
                let index = number(&entry, "index").unwrap_or(0) + i64::from(offset);
                entry.insert("index", i32::try_from(index).unwrap_or(i32::MAX));
                Bson::Document(entry)
            }
            other => other.clone(),
        })
        .collect()
}

impl Merged {
    /// Adds the reply of the piece whose first statement is `first`; says whether the
    /// next piece is to run (not after a failed command, nor after a write error of an
    /// ordered one).
    pub fn add(&mut self, first: u32, raw: RawDocumentBuf, ordered: bool) -> bool {
        let Ok(reply) = Document::try_from(raw.as_ref()) else {
            self.failed = Some(raw);
            return false;
        };
        if reply.get("ok").and_then(basalt_value::as_f64) != Some(1.0) {
            if self.last.is_none() {
                self.failed = Some(raw);
            } else {
                // Earlier pieces ran: the failure is the write error of this piece's
                // first statement.
                let mut error = bson::doc! { "index": i32::try_from(first).unwrap_or(i32::MAX) };
                for field in ["code", "codeName", "errmsg"] {
                    if let Some(value) = reply.get(field) {
                        error.insert(field, value.clone());
                    }
                }
                self.write_errors.push(Bson::Document(error));
            }
            return false;
        }
        self.n += number(&reply, "n").unwrap_or(0);
        if let Some(modified) = number(&reply, "nModified") {
            *self.n_modified.get_or_insert(0) += modified;
        }
        self.upserted.extend(reindexed(&reply, "upserted", first));
        let errors = reindexed(&reply, "writeErrors", first);
        let had_errors = !errors.is_empty();
        self.write_errors.extend(errors);
        self.last = Some(reply);
        !(ordered && had_errors)
    }

    /// The command's reply: a failed piece's own, else the last piece's with the counts
    /// and lists of all of them.
    pub fn into_reply(self) -> Result<RawDocumentBuf, basalt_error::Error> {
        if let Some(failed) = self.failed {
            return Ok(failed);
        }
        let mut reply = self.last.unwrap_or_default();
        let narrow = |n: i64| i32::try_from(n).unwrap_or(i32::MAX);
        reply.insert("n", narrow(self.n));
        if let Some(modified) = self.n_modified {
            reply.insert("nModified", narrow(modified));
        }
        reply.remove("upserted");
        if !self.upserted.is_empty() {
            reply.insert("upserted", self.upserted);
        }
        reply.remove("writeErrors");
        if !self.write_errors.is_empty() {
            reply.insert("writeErrors", self.write_errors);
        }
        crate::cursors::encode(&reply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn statements(count: usize, bytes: usize) -> Vec<RawDocumentBuf> {
        (0..count)
            .map(|i| {
                RawDocumentBuf::try_from(&doc! { "_id": i as i32, "pad": "x".repeat(bytes) })
                    .unwrap()
            })
            .collect()
    }

    #[test]
    fn only_large_commands_are_split_and_the_split_is_stable() {
        let small = DocumentSequence {
            identifier: "documents".into(),
            documents: statements(10, 100),
        };
        let body = RawDocumentBuf::try_from(&doc! { "insert": "c", "ordered": true }).unwrap();
        assert!(split("insert", &body, std::slice::from_ref(&small)).is_none());
        assert!(split("find", &body, std::slice::from_ref(&small)).is_none());

        let large = DocumentSequence {
            identifier: "documents".into(),
            documents: statements(30, 512 << 10),
        };
        let pieces = split("insert", &body, std::slice::from_ref(&large)).unwrap();
        assert!(pieces.len() >= 4, "{}", pieces.len());
        let mut next = 0u32;
        for piece in &pieces {
            assert_eq!(piece.first_statement, next);
            let sequence = &piece.sequences[0];
            let bytes: usize = sequence.documents.iter().map(|d| d.len()).sum();
            assert!(bytes <= ENTRY_BYTES);
            next += sequence.documents.len() as u32;
        }
        assert_eq!(next, 30);
        let again = split("insert", &body, &[large]).unwrap();
        let firsts = |p: &[Piece]| p.iter().map(|p| p.first_statement).collect::<Vec<_>>();
        assert_eq!(firsts(&pieces), firsts(&again));

        // Statements of commands that read them decoded stay in the body.
        let in_body = RawDocumentBuf::try_from(&doc! {
            "delete": "c",
            "deletes": (0..20).map(|i| doc! { "q": { "pad": "y".repeat(300 << 10), "i": i }, "limit": 0 }).collect::<Vec<_>>(),
        })
        .unwrap();
        let pieces = split("delete", &in_body, &[]).unwrap();
        assert!(pieces.len() >= 2);
        let shares: usize = pieces
            .iter()
            .map(|p| {
                let body = Document::from_reader(p.body.as_slice()).unwrap();
                body.get_array("deletes").unwrap().len()
            })
            .sum();
        assert_eq!(shares, 20);
        assert!(pieces.iter().all(|p| p.sequences.is_empty()));
    }

    #[test]
    fn replies_merge_with_the_command_s_indexes() {
        let encode = |d: Document| RawDocumentBuf::try_from(&d).unwrap();
        let mut merged = Merged::default();
        assert!(merged.add(0, encode(doc! { "n": 3, "nModified": 2, "ok": 1.0 }), true));
        let with_error = doc! {
            "n": 1, "nModified": 1, "ok": 1.0,
            "upserted": [{ "index": 0, "_id": 7 }],
            "writeErrors": [{ "index": 1, "code": 11000, "errmsg": "dup" }],
        };
        assert!(
            !merged.add(3, encode(with_error.clone()), true),
            "ordered stops"
        );
        let reply = Document::try_from(merged.into_reply().unwrap().as_ref()).unwrap();
        assert_eq!(reply.get_i32("n").unwrap(), 4);
        assert_eq!(reply.get_i32("nModified").unwrap(), 3);
        let upserted = reply.get_array("upserted").unwrap();
        assert_eq!(
            upserted[0].as_document().unwrap().get_i32("index").unwrap(),
            3
        );
        let errors = reply.get_array("writeErrors").unwrap();
        assert_eq!(
            errors[0].as_document().unwrap().get_i32("index").unwrap(),
            4
        );

        let mut unordered = Merged::default();
        assert!(
            unordered.add(0, encode(with_error), false),
            "unordered goes on"
        );
        let failed = encode(doc! { "ok": 0.0, "code": 2, "errmsg": "bad" });
        let mut first_failed = Merged::default();
        assert!(!first_failed.add(0, failed.clone(), true));
        assert_eq!(first_failed.into_reply().unwrap(), failed);
    }
}
