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
//!
//! Raft's snapshots are the copies of [`crate::initial_sync`]: built from an engine
//! snapshot when the oplog is trimmed, sent to members that need entries it no longer
//! holds, and loaded there in place of their data.

use crate::initial_sync::{self, SESSION_PREFIX};
use crate::log_store::{get, put, read_error, record, write_error, Record};
use crate::stamp;
use crate::types::{decode, Applied, Member, Proposal, TypeConfig, WriteCommand};
use crate::Shared;
use basalt_error::{Error, ErrorCode};
use basalt_storage::{Durability, Engine, Space, WriteBatch};
use bson::{Document, RawDocument};
use openraft::storage::{RaftSnapshotBuilder, RaftStateMachine, Snapshot};
use openraft::{Entry, EntryPayload, LogId, SnapshotMeta, StorageError, StoredMembership};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

const APPLIED_KEY: &[u8] = b"applied";
const MEMBERSHIP_KEY: &[u8] = b"membership";
pub(crate) const CONFIG_KEY: &[u8] = b"config";
/// The member's newest copy: its meta and file name (the member's own, not replicated).
pub(crate) const SNAPSHOT_KEY: &[u8] = b"snapshot";
/// Present while a copy is being loaded: a member that finds it at start clears its
/// data and log and syncs again.
pub(crate) const INSTALLING_KEY: &[u8] = b"installing";

/// Runs a committed write command on this member: the server's write path.
pub trait Applier: Send + Sync + 'static {
    /// Runs the command, the log entry at `index` of `term`, and returns its whole reply
    /// (`ok` included), BSON.
    fn apply(&self, index: u64, term: u64, command: &WriteCommand) -> Vec<u8>;

    /// Reads the member's data afresh (its catalog) after a copy replaced it.
    fn reload(&self);
}

/// A copy this member holds: what it contains and where it is.
#[derive(Serialize, Deserialize)]
struct StoredSnapshot {
    meta: SnapshotMeta<u64, Member>,
    file: String,
}

/// A retryable write's outcome, kept per logical session: the reply of each of its log
/// entries (a large command is several), by the index of the entry's first statement.
#[derive(Serialize, Deserialize)]
struct SessionRecord {
    txn_number: i64,
    replies: Vec<(u32, serde_bytes::ByteBuf)>,
}

pub struct StateMachine {
    /// This member's id in the set.
    pub(crate) id: u64,
    pub(crate) engine: Arc<dyn Engine>,
    pub(crate) applier: Arc<dyn Applier>,
    pub(crate) shared: Arc<Shared>,
    /// Where copies are kept (`initial_sync::directory`).
    pub(crate) snapshots: PathBuf,
    /// The copy from the primary being received, if one is.
    pub(crate) receiving: Option<Receiving>,
}

/// A copy being received: its file, and its load when it is loaded as it arrives.
pub(crate) struct Receiving {
    path: PathBuf,
    streaming: Option<initial_sync::StreamingLoad>,
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

/// The reply of a session's write `txn_number` (of its first entry), when that is the
/// session's last one: how a commit retried on another primary learns its outcome.
pub(crate) fn session_reply(
    engine: &dyn Engine,
    lsid: &[u8],
    txn_number: i64,
) -> Result<Option<Vec<u8>>, StorageError<u64>> {
    let record = get::<SessionRecord>(engine, &session_key(lsid))?;
    Ok(record
        .filter(|record| record.txn_number == txn_number)
        .and_then(|record| record.replies.into_iter().find(|(first, _)| *first == 0))
        .map(|(_, reply)| reply.into_vec()))
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
        let mut earlier = None;
        if let Some((lsid, txn_number)) = &statement {
            if let Some(record) = get::<SessionRecord>(&*self.engine, &session_key(lsid))? {
                if record.txn_number == *txn_number {
                    let answered = record
                        .replies
                        .iter()
                        .find(|(first, _)| *first == command.first_statement);
                    if let Some((_, reply)) = answered {
                        return Ok((reply.to_vec(), false));
                    }
                    earlier = Some(record);
                } else if record.txn_number > *txn_number {
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
            self.applier
                .apply(log_id.index, log_id.leader_id.term, command)
        });
        if let Some((lsid, txn_number)) = statement {
            let mut record = earlier.unwrap_or(SessionRecord {
                txn_number,
                replies: Vec::new(),
            });
            record.replies.push((
                command.first_statement,
                serde_bytes::ByteBuf::from(reply.clone()),
            ));
            let mut batch = WriteBatch::default();
            batch.put(Space::Replication, applied.0, applied.1);
            put(&mut batch, &session_key(&lsid), record)?;
            self.engine
                .write(batch, Durability::Process)
                .map_err(write_error)?;
            return Ok((reply, true));
        }
        Ok((reply, stamped))
    }

    /// This member's `secondaryDelaySecs`.
    fn delay(&self) -> Duration {
        let delay_secs = self
            .shared
            .config()
            .and_then(|config| config.member(self.id).map(|member| member.delay_secs))
            .unwrap_or(0);
        Duration::from_secs(delay_secs)
    }

    /// Applies entries in order, returning their replies.
    fn apply_entries(
        &self,
        entries: &[Entry<TypeConfig>],
    ) -> Result<Vec<Applied>, StorageError<u64>> {
        let mut replies = Vec::with_capacity(entries.len());
        let mut last_stamped = true;
        for entry in entries {
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
    type SnapshotBuilder = SnapshotBuilder;

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
        // Entries apply to the member's data as it is: not to part of a copy.
        if self
            .receiving
            .as_ref()
            .is_some_and(|r| r.streaming.is_some())
        {
            tokio::task::block_in_place(|| self.abandon_streaming())?;
        }
        let delay = self.delay();
        if delay.is_zero() {
            // Commands run the server's blocking write path; this task's thread is lent
            // to it.
            return tokio::task::block_in_place(|| self.apply_entries(&entries));
        }
        // A delayed member (`secondaryDelaySecs`) applies each entry once that long has
        // passed since the primary proposed it; it holds them in its log meanwhile.
        let mut replies = Vec::with_capacity(entries.len());
        for entry in entries {
            if let EntryPayload::Normal(Proposal::Command(command)) = &entry.payload {
                let due = command.wall_ms.saturating_add(delay.as_millis() as i64);
                let wait = due.saturating_sub(bson::DateTime::now().timestamp_millis());
                if wait > 0 {
                    tokio::time::sleep(Duration::from_millis(wait as u64)).await;
                }
            }
            let applied = tokio::task::block_in_place(|| self.apply_entries(&[entry]))?;
            replies.extend(applied);
        }
        Ok(replies)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        SnapshotBuilder {
            engine: self.engine.clone(),
            snapshots: self.snapshots.clone(),
        }
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<tokio::fs::File>, StorageError<u64>> {
        tokio::task::block_in_place(|| self.abandon_receiving())?;
        let path = initial_sync::new_file(&self.snapshots, "receiving").map_err(write_error)?;
        let file = tokio::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .await
            .map_err(write_error)?;
        let streaming = tokio::task::block_in_place(|| self.start_streaming(&path))?;
        self.receiving = Some(Receiving { path, streaming });
        Ok(Box::new(file))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, Member>,
        snapshot: Box<tokio::fs::File>,
    ) -> Result<(), StorageError<u64>> {
        snapshot.sync_all().await.map_err(write_error)?;
        drop(snapshot);
        let received = self
            .receiving
            .take()
            .ok_or_else(|| write_error("a copy to install that was not received"))?;
        let path = self.snapshots.join(snapshot_file_name(meta));
        std::fs::rename(&received.path, &path).map_err(write_error)?;
        let started = std::time::Instant::now();
        let loaded = tokio::task::block_in_place(|| self.install(meta, &path, received.streaming));
        self.shared.sync.end();
        let count = loaded?;
        tracing::info!(
            "loaded the copy {} ({count} records) in {} ms after it arrived",
            meta.snapshot_id,
            started.elapsed().as_millis()
        );
        initial_sync::remove_superseded(&self.snapshots, &path);
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<u64>> {
        let Some(stored) = get::<StoredSnapshot>(&*self.engine, SNAPSHOT_KEY)? else {
            return Ok(None);
        };
        let file = tokio::fs::File::open(self.snapshots.join(&stored.file))
            .await
            .map_err(read_error)?;
        Ok(Some(Snapshot {
            meta: stored.meta,
            snapshot: Box::new(file),
        }))
    }
}

impl StateMachine {
    /// A member with no data loads a copy while it arrives: marks the load (a crash
    /// meanwhile makes it sync again) and starts it.
    fn start_streaming(
        &self,
        path: &Path,
    ) -> Result<Option<initial_sync::StreamingLoad>, StorageError<u64>> {
        if !initial_sync::holds_no_data(&*self.engine)? {
            return Ok(None);
        }
        self.write_marker()?;
        self.shared.sync.begin();
        tracing::info!("loading a copy of the data from the primary as it arrives");
        initial_sync::StreamingLoad::start(self.engine.clone(), path, self.shared.sync.clone())
            .map(Some)
            .map_err(write_error)
    }

    /// Stops receiving a copy (another comes instead): its file goes, and its load.
    fn abandon_receiving(&mut self) -> Result<(), StorageError<u64>> {
        self.abandon_streaming()?;
        if let Some(receiving) = self.receiving.take() {
            let _ = std::fs::remove_file(&receiving.path);
        }
        Ok(())
    }

    /// Stops loading the copy being received as it arrives (log entries are applied
    /// meanwhile, or another copy comes): what the load stored goes, with the marker. A
    /// copy whose transfer goes on is then loaded whole once it is there.
    fn abandon_streaming(&mut self) -> Result<(), StorageError<u64>> {
        let Some(streaming) = self.receiving.as_mut().and_then(|r| r.streaming.take()) else {
            return Ok(());
        };
        tracing::warn!("the load of the copy being received was abandoned");
        streaming.abandon()?;
        let mut unmark = WriteBatch::default();
        unmark.delete(Space::Replication, INSTALLING_KEY.to_vec());
        self.engine
            .write(unmark, Durability::Disk)
            .map_err(write_error)?;
        self.shared.sync.end();
        Ok(())
    }

    fn write_marker(&self) -> Result<(), StorageError<u64>> {
        let mut marker = WriteBatch::default();
        marker.put(Space::Replication, INSTALLING_KEY.to_vec(), Vec::new());
        self.engine
            .write(marker, Durability::Disk)
            .map_err(write_error)
    }

    /// Installs a received copy in place of this member's data: the rest of a load
    /// that ran as it arrived, or the whole load (also when that one failed), under the
    /// marker that makes a crash meanwhile start the sync over.
    fn install(
        &self,
        meta: &SnapshotMeta<u64, Member>,
        path: &Path,
        streaming: Option<initial_sync::StreamingLoad>,
    ) -> Result<u64, StorageError<u64>> {
        let streamed = match streaming {
            Some(streaming) => match streaming.finish(self.installed(meta)?) {
                Ok(count) => Some(count),
                Err(e) => {
                    tracing::warn!("the copy loaded as it arrived failed ({e}): loading it again");
                    None
                }
            },
            None => None,
        };
        let count = match streamed {
            Some(count) => count,
            None => {
                tracing::info!("loading the copy {} from the primary", meta.snapshot_id);
                self.write_marker()?;
                self.shared.sync.begin();
                initial_sync::load(
                    &*self.engine,
                    path,
                    self.installed(meta)?,
                    &self.shared.sync,
                )?
            }
        };
        self.applier.reload();
        if let Some(config) = stored_config(&*self.engine)? {
            self.shared.set_config(config);
        }
        if let Some(log_id) = meta.last_log_id {
            self.shared.note_applied(log_id, None);
        }
        Ok(count)
    }

    /// What is written with a copy's replicated state: the marker's removal, where the
    /// oplog starts (the records of the entries the copy stands for are not in it) and
    /// the copy as this member's newest.
    fn installed(&self, meta: &SnapshotMeta<u64, Member>) -> Result<WriteBatch, StorageError<u64>> {
        let mut last = WriteBatch::default();
        last.delete(Space::Replication, INSTALLING_KEY.to_vec());
        let after_copy = meta.last_log_id.map_or(0, |id| id.index).saturating_add(1);
        put(&mut last, crate::log_store::OPLOG_START_KEY, after_copy)?;
        put(
            &mut last,
            SNAPSHOT_KEY,
            StoredSnapshot {
                meta: meta.clone(),
                file: snapshot_file_name(meta),
            },
        )?;
        Ok(last)
    }
}

fn snapshot_file_name(meta: &SnapshotMeta<u64, Member>) -> String {
    format!("{}{}", initial_sync::COPY_PREFIX, meta.snapshot_id)
}

/// Builds a copy of the member's data as of now (its last applied entry).
pub struct SnapshotBuilder {
    engine: Arc<dyn Engine>,
    snapshots: PathBuf,
}

impl SnapshotBuilder {
    /// Writes the copy and records it as the member's newest; returns its meta and file.
    fn build(&self) -> Result<(SnapshotMeta<u64, Member>, PathBuf), StorageError<u64>> {
        let started = std::time::Instant::now();
        let snapshot = self.engine.snapshot();
        let stored = |key: &[u8]| snapshot.get(Space::Replication, key).map_err(read_error);
        let last_log_id: Option<LogId<u64>> = match stored(APPLIED_KEY)? {
            Some(bytes) => decode::<Record<_>>(&bytes).map_err(read_error)?.value,
            None => None,
        };
        let last_membership: StoredMembership<u64, Member> = match stored(MEMBERSHIP_KEY)? {
            Some(bytes) => decode::<Record<_>>(&bytes).map_err(read_error)?.value,
            None => StoredMembership::default(),
        };
        let building = initial_sync::new_file(&self.snapshots, "building").map_err(write_error)?;
        let count = initial_sync::write(&*snapshot, &building)?;
        let unique = building
            .file_name()
            .and_then(|name| name.to_str())
            .and_then(|name| name.rsplit('-').next())
            .unwrap_or_default()
            .to_string();
        let meta = SnapshotMeta {
            snapshot_id: format!("{}-{unique}", last_log_id.map_or(0, |id| id.index)),
            last_log_id,
            last_membership,
        };
        let path = self.snapshots.join(snapshot_file_name(&meta));
        std::fs::rename(&building, &path).map_err(write_error)?;
        let mut batch = WriteBatch::default();
        put(
            &mut batch,
            SNAPSHOT_KEY,
            StoredSnapshot {
                meta: meta.clone(),
                file: snapshot_file_name(&meta),
            },
        )?;
        self.engine
            .write(batch, Durability::Disk)
            .map_err(write_error)?;
        tracing::info!(
            "built the copy {} ({count} records) in {} ms, for the oplog's trimming and new \
             members",
            meta.snapshot_id,
            started.elapsed().as_millis()
        );
        Ok((meta, path))
    }
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<u64>> {
        let builder = SnapshotBuilder {
            engine: self.engine.clone(),
            snapshots: self.snapshots.clone(),
        };
        let (meta, path) = tokio::task::spawn_blocking(move || builder.build())
            .await
            .map_err(write_error)??;
        let file = tokio::fs::File::open(&path).await.map_err(read_error)?;
        // Older copies go; one being sent stays readable through its open file.
        initial_sync::remove_superseded(&self.snapshots, &path);
        Ok(Snapshot {
            meta,
            snapshot: Box::new(file),
        })
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
