//! Writes parsed batches to the server: `insert` commands straight over the wire
//! (`wire_insert.rs`) for `--mode insert` where the URI allows, else the official Rust
//! driver's `insert_many`; an `update` command of replacement upserts for `--mode upsert`.
//!
//! Each worker thread blocks on its own request while the driver's connection pool
//! carries them in parallel, so the workers stay plain threads that parse between
//! requests. A failure of one document comes back with its index in the batch; a
//! failure of the whole request (no server) ends the import.

use super::wire_insert::WireInsert;
use crate::io_error;
use crate::tools::Connection;
use basalt_error::{Error, ErrorCode, Result};
use bson::{doc, Bson, Document, RawDocumentBuf};
use mongodb::error::ErrorKind;
use mongodb::{Collection, Database};
use std::future::IntoFuture;

/// What the import does with each document.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Insert new documents; a duplicate `_id` is a failed line.
    Insert,
    /// Replace the document with the same `--upsertFields`, or insert it.
    Upsert,
}

pub(crate) struct Sink {
    connection: Connection,
    db: Database,
    collection: Collection<RawDocumentBuf>,
    mode: Mode,
    upsert_fields: Vec<String>,
    ordered: bool,
    /// Inserts over the wire without the driver, where the URI allows.
    wire: Option<WireInsert>,
}

/// The result of one batch.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub written: u64,
    /// Documents not written: index in the batch, and why.
    pub failed: Vec<(usize, String)>,
}

impl Sink {
    /// Connects and checks that the server answers. `ordered` stops a batch at its first
    /// failing document (`--stopOnError`).
    pub(crate) fn connect(
        uri: &str,
        db: &str,
        collection: &str,
        mode: Mode,
        upsert_fields: &[String],
        ordered: bool,
        connections: usize,
    ) -> Result<Sink> {
        let connection = Connection::open(uri, "basalt import", Some(connections.max(10)))?;
        let db = connection.client.database(db);
        Ok(Sink {
            wire: WireInsert::for_uri(uri, db.name(), collection, ordered),
            collection: db.collection(collection),
            connection,
            db,
            mode,
            upsert_fields: upsert_fields.to_vec(),
            ordered,
        })
    }

    /// Runs one driver action to its end on this thread.
    fn block<A: IntoFuture>(&self, action: A) -> A::Output {
        self.connection.block(action)
    }

    pub(super) fn drop_collection(&self) -> Result<()> {
        self.block(self.collection.drop())
            .map_err(|e| server_error("cannot drop the collection", e))
    }

    /// Writes one batch; `Err` only when the request as a whole failed.
    pub(crate) fn write(&self, docs: Vec<RawDocumentBuf>) -> Result<Outcome> {
        if docs.is_empty() {
            return Ok(Outcome::default());
        }
        match (self.mode, &self.wire) {
            (Mode::Insert, Some(wire)) => wire.insert(docs),
            (Mode::Insert, None) => self.insert(&docs),
            (Mode::Upsert, _) => self.upsert(&docs),
        }
    }

    fn insert(&self, docs: &[RawDocumentBuf]) -> Result<Outcome> {
        let result = self.block(self.collection.insert_many(docs).ordered(self.ordered));
        let error = match result {
            Ok(_) => {
                return Ok(Outcome {
                    written: docs.len() as u64,
                    failed: Vec::new(),
                })
            }
            Err(e) => e,
        };
        let ErrorKind::InsertMany(failure) = error.kind.as_ref() else {
            return Err(server_error("insert failed", error));
        };
        if let Some(concern) = &failure.write_concern_error {
            return Err(Error::new(
                ErrorCode::OPERATION_FAILED,
                format!("write concern error: {}", concern.message),
            ));
        }
        let failed: Vec<(usize, String)> = failure
            .write_errors
            .iter()
            .flatten()
            .map(|e| (e.index, e.message.clone()))
            .collect();
        // An ordered batch stops at its first failure: nothing after it was written.
        let written = if self.ordered {
            failed.first().map_or(docs.len(), |(index, _)| *index)
        } else {
            docs.len() - failed.len()
        };
        Ok(Outcome {
            written: written as u64,
            failed,
        })
    }

    fn upsert(&self, docs: &[RawDocumentBuf]) -> Result<Outcome> {
        let mut outcome = Outcome::default();
        let mut updates = Vec::with_capacity(docs.len());
        // updates[i] is docs[positions[i]]: documents without the upsert fields are left
        // out and reported.
        let mut positions = Vec::with_capacity(docs.len());
        for (index, raw) in docs.iter().enumerate() {
            let doc = Document::try_from(raw.as_ref())
                .map_err(|e| Error::failed_to_parse(e.to_string()))?;
            match upsert_filter(&doc, &self.upsert_fields) {
                Ok(filter) => {
                    updates.push(doc! {"q": filter, "u": doc, "upsert": true});
                    positions.push(index);
                }
                Err(message) => {
                    outcome.failed.push((index, message));
                    if self.ordered {
                        break;
                    }
                }
            }
        }
        if updates.is_empty() {
            return Ok(outcome);
        }
        let command = doc! {
            "update": self.collection.name(),
            "updates": updates,
            "ordered": self.ordered,
        };
        let reply = self
            .block(self.db.run_command(command))
            .map_err(|e| server_error("upsert failed", e))?;
        outcome.written = match reply.get("n").cloned() {
            Some(Bson::Int32(n)) => n as u64,
            Some(Bson::Int64(n)) => n as u64,
            _ => 0,
        };
        if let Ok(errors) = reply.get_array("writeErrors") {
            for error in errors.iter().filter_map(Bson::as_document) {
                let index = error.get_i32("index").unwrap_or(0) as usize;
                let message = error.get_str("errmsg").unwrap_or("write error").to_string();
                outcome
                    .failed
                    .push((positions.get(index).copied().unwrap_or(index), message));
            }
        }
        outcome.failed.sort_by_key(|(index, _)| *index);
        Ok(outcome)
    }
}

/// `{field: value, ...}` of the upsert fields (dotted paths reach into documents).
fn upsert_filter(doc: &Document, fields: &[String]) -> std::result::Result<Document, String> {
    let mut filter = Document::new();
    for field in fields {
        let mut value = None;
        let mut current = Some(doc);
        for (i, part) in field.split('.').enumerate() {
            let found = current.and_then(|d| d.get(part));
            if i == field.split('.').count() - 1 {
                value = found;
            } else {
                current = found.and_then(Bson::as_document);
            }
        }
        match value {
            Some(v) => {
                filter.insert(field.clone(), v.clone());
            }
            None => return Err(format!("document has no upsert field '{field}'")),
        }
    }
    Ok(filter)
}

fn server_error(doing: &str, e: mongodb::error::Error) -> Error {
    match e.kind.as_ref() {
        ErrorKind::Command(c) => Error::new(ErrorCode(c.code), format!("{doing}: {}", c.message)),
        _ => io_error(doing, e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upsert_filters_take_dotted_fields() {
        let doc = doc! {"_id": 1, "a": {"b": "x"}, "c": 2};
        let fields = |f: &[&str]| f.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(upsert_filter(&doc, &fields(&["_id"])), Ok(doc! {"_id": 1}));
        assert_eq!(
            upsert_filter(&doc, &fields(&["a.b", "c"])),
            Ok(doc! {"a.b": "x", "c": 2})
        );
        assert!(upsert_filter(&doc, &fields(&["a.z"])).is_err());
        assert!(upsert_filter(&doc, &fields(&["c.d"])).is_err());
    }
}
