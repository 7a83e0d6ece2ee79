//! What insert, update and delete share: the statement-count limit, the write concern's
//! durability, and the `writeErrors` part of the reply.

use super::hello::MAX_WRITE_BATCH_SIZE;
use crate::request::Fields;
use basalt_error::{Error, ErrorCode, Result};
use basalt_storage::Durability;
use bson::{Bson, Document};

/// Refuses batches outside 1..=maxWriteBatchSize, as mongod does.
pub fn check_batch_size(statements: usize) -> Result<()> {
    if statements == 0 || statements > MAX_WRITE_BATCH_SIZE as usize {
        return Err(Error::new(
            ErrorCode::INVALID_LENGTH,
            format!("Write batch sizes must be between 1 and {MAX_WRITE_BATCH_SIZE}. Got {statements} operations."),
        ));
    }
    Ok(())
}

/// `writeConcern: {j: true}` (or `fsync: true`) waits for the disk; every other
/// acknowledged write waits for the OS, which survives a killed process.
pub fn durability(fields: &Fields<'_>) -> Result<Durability> {
    let Some(concern) = fields.document_opt("writeConcern")? else {
        return Ok(Durability::Process);
    };
    let wants_disk = [concern.get("j"), concern.get("fsync")]
        .into_iter()
        .flatten()
        .any(|v| {
            matches!(v, Bson::Boolean(true)) || basalt_value::as_f64(v).is_some_and(|n| n != 0.0)
        });
    Ok(if wants_disk {
        Durability::Disk
    } else {
        Durability::Process
    })
}

/// Per-statement errors of a write command, reported in statement order.
#[derive(Default)]
pub struct WriteErrors(Vec<(usize, Error)>);

impl WriteErrors {
    pub fn push(&mut self, index: usize, error: Error) {
        self.0.push((index, error));
    }

    /// Adds `writeErrors` to the reply when there are any.
    pub fn add_to(mut self, reply: &mut Document) {
        if self.0.is_empty() {
            return;
        }
        self.0.sort_by_key(|(index, _)| *index);
        let entries: Vec<Bson> = self
            .0
            .iter()
            .map(|(index, e)| Bson::Document(e.to_write_error(*index)))
            .collect();
        reply.insert("writeErrors", entries);
    }
}
