//! Applies committed log entries, in order, on every member: write commands through the
//! server's own write path (the [`Applier`]), configurations and membership into the
//! member's records.
//!
//! A command's writes carry the id of its entry in the same atomic batch (see
//! [`crate::stamp`]), so after a crash a member resumes after the last entry whose writes
//! are on disk and never runs a command twice. The table of retryable writes (MongoDB's
//! `config.transactions`) is replicated state kept here: a statement retried with the
//! same `lsid` and `txnNumber` gets its first reply instead of running again, on whichever
//! member is primary when the retry arrives.

use crate::log_store::{get, put, read_error, record, write_error};
use crate::stamp;
use crate::types::{Applied, Proposal, TypeConfig, WriteCommand};
use crate::Shared;
use basalt_error::{Error, ErrorCode};
use basalt_storage::{Durability, Engine, Space, WriteBatch};
use bson::{Document, RawDocument};
use openraft::storage::{RaftSnapshotBuilder, RaftStateMachine, Snapshot};
use openraft::{Entry, EntryPayload, LogId, SnapshotMeta, StorageError, StoredMembership};
use serde::{Deserialize, Serialize};
use std::io::Cursor;
use std::sync::Arc;

const APPLIED_KEY: &[u8] = b"applied";
const MEMBERSHIP_KEY: &[u8] = b"membership";
pub(crate) const CONFIG_KEY: &[u8] = b"config";
const SESSION_PREFIX: &[u8] = b"session/";

/// Runs a committed write command on this member: the server's write path.
pub trait Applier: Send + Sync + 'static {
    /// Runs the command, the log entry at `index`, and returns its whole reply (`ok`
    /// included), BSON.
    fn apply(&self, index: u64, command: &WriteCommand) -> Vec<u8>;
}

/// A retryable write's outcome, kept per logical session.
#[derive(Serialize, Deserialize)]
struct SessionRecord {
    txn_number: i64,
    #[serde(with = "serde_bytes")]
    reply: Vec<u8>,
}

pub struct StateMachine {
    pub(crate) engine: Arc<dyn Engine>,
    pub(crate) applier: Arc<dyn Applier>,
    pub(crate) shared: Arc<Shared>,
}

/// The logical session and statement number of a retryable write: its `lsid` (as stored
/// bytes) and `txnNumber`, when it has both and is not part of a transaction.
fn retryable_statement(body: &RawDocument) -> Option<(Vec<u8>, i64)> {
    let lsid = body.get_document("lsid").ok()?;
    let txn_number = body.get_i64("txnNumber").ok()?;
    if body.get("autocommit").ok().flatten().is_some() {
        return None;
    }
    Some((lsid.as_bytes().to_vec(), txn_number))
}

fn session_key(lsid: &[u8]) -> Vec<u8> {
    let mut key = SESSION_PREFIX.to_vec();
    key.extend_from_slice(lsid);
    key
}

fn error_reply(error: Error) -> Vec<u8> {
    error.to_command_reply().to_vec().unwrap_or_default()
}

impl StateMachine {
    /// Runs one write command, or answers a retried one from the session table.
    fn apply_command(
        &self,
        log_id: LogId<u64>,
        command: &WriteCommand,
    ) -> Result<(Vec<u8>, bool), StorageError<u64>> {
        let applied = record(APPLIED_KEY, Some(log_id))?;
        let statement = RawDocument::from_bytes(&command.body)
            .ok()
            .and_then(retryable_statement);
        if let Some((lsid, txn_number)) = &statement {
            let key = session_key(lsid);
            if let Some(record) = get::<SessionRecord>(&*self.engine, &key)? {
                if record.txn_number == *txn_number {
                    return Ok((record.reply, false));
                }
                if record.txn_number > *txn_number {
                    let too_old = error_reply(Error::new(
                        ErrorCode::TRANSACTION_TOO_OLD,
                        format!(
                            "Retryable write with txnNumber {txn_number} is prohibited on \
                             session because a newer retryable write with txnNumber {} has \
                             already started on this session.",
                            record.txn_number
                        ),
                    ));
                    return Ok((too_old, false));
                }
            }
        }
        let (reply, stamped) = stamp::with_stamp(vec![applied.clone()], || {
            self.applier.apply(log_id.index, command)
        });
        if let Some((lsid, txn_number)) = statement {
            let mut batch = WriteBatch::default();
            batch.put(Space::Replication, applied.0, applied.1);
            put(
                &mut batch,
                &session_key(&lsid),
                SessionRecord {
                    txn_number,
                    reply: reply.clone(),
                },
            )?;
            self.engine
                .write(batch, Durability::Process)
                .map_err(write_error)?;
            return Ok((reply, true));
        }
        Ok((reply, stamped))
    }

    /// Applies one entry; says whether its id reached the disk with its writes.
    fn apply_entry(&self, entry: &Entry<TypeConfig>) -> Result<(Applied, bool), StorageError<u64>> {
        let mut batch = WriteBatch::default();
        match &entry.payload {
            EntryPayload::Blank => return Ok((Applied::default(), false)),
            EntryPayload::Normal(Proposal::Command(command)) => {
                let (reply, stamped) = self.apply_command(entry.log_id, command)?;
                return Ok((Applied { reply }, stamped));
            }
            EntryPayload::Normal(Proposal::Config(config)) => {
                let document = Document::from_reader(config.as_slice()).map_err(write_error)?;
                batch.put(Space::Replication, CONFIG_KEY.to_vec(), config.clone());
                self.shared.set_config(document);
            }
            EntryPayload::Membership(membership) => {
                let stored = StoredMembership::new(Some(entry.log_id), membership.clone());
                put(&mut batch, MEMBERSHIP_KEY, &stored)?;
            }
        }
        put(&mut batch, APPLIED_KEY, Some(entry.log_id))?;
        self.engine
            .write(batch, Durability::Process)
            .map_err(write_error)?;
        Ok((Applied::default(), true))
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = NoSnapshots;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<u64>>, StoredMembership<u64, crate::Member>), StorageError<u64>> {
        let applied: Option<LogId<u64>> = get(&*self.engine, APPLIED_KEY)?.flatten();
        let membership = get(&*self.engine, MEMBERSHIP_KEY)?.unwrap_or_default();
        Ok((applied, membership))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Applied>, StorageError<u64>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + Send,
        I::IntoIter: Send,
    {
        let entries: Vec<Entry<TypeConfig>> = entries.into_iter().collect();
        // Commands run the server's blocking write path; this task's thread is lent to it.
        tokio::task::block_in_place(|| {
            let mut replies = Vec::with_capacity(entries.len());
            let mut last_stamped = true;
            for entry in &entries {
                let (applied, stamped) = self.apply_entry(entry)?;
                replies.push(applied);
                last_stamped = stamped;
                let wall_ms = match &entry.payload {
                    EntryPayload::Normal(Proposal::Command(command)) => Some(command.wall_ms),
                    _ => None,
                };
                self.shared.note_applied(entry.log_id, wall_ms);
            }
            // Entries that wrote nothing: their ids are recorded once, after the last.
            if let (false, Some(last)) = (last_stamped, entries.last()) {
                let mut batch = WriteBatch::default();
                put(&mut batch, APPLIED_KEY, Some(last.log_id))?;
                self.engine
                    .write(batch, Durability::Process)
                    .map_err(write_error)?;
            }
            Ok(replies)
        })
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        NoSnapshots
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<u64>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        _meta: &SnapshotMeta<u64, crate::Member>,
        _snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<u64>> {
        Err(write_error(
            "snapshots are not taken: members catch up from the whole log",
        ))
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<u64>> {
        Ok(None)
    }
}

/// The log is never compacted yet (the snapshot policy is `Never` and nothing purges), so
/// no snapshot is ever asked for; one asked for anyway fails rather than being faked.
pub struct NoSnapshots;

impl RaftSnapshotBuilder<TypeConfig> for NoSnapshots {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<u64>> {
        Err(read_error(
            "snapshots are not taken: members catch up from the whole log",
        ))
    }
}

/// The configuration document this member last applied, if any.
pub(crate) fn stored_config(engine: &dyn Engine) -> Result<Option<Document>, StorageError<u64>> {
    match engine
        .snapshot()
        .get(Space::Replication, CONFIG_KEY)
        .map_err(read_error)?
    {
        Some(bytes) => Ok(Some(
            Document::from_reader(bytes.as_slice()).map_err(read_error)?,
        )),
        None => Ok(None),
    }
}

/// Encodes a config document as a log entry's payload.
pub(crate) fn config_proposal(config: &Document) -> Result<Proposal, Error> {
    config
        .to_vec()
        .map(Proposal::Config)
        .map_err(|e| Error::internal(format!("cannot encode the config: {e}")))
}
