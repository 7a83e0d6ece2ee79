//! The oplog's bound: mongod's `--oplogSizeMB` and `replSetResizeOplog`.
//!
//! The replicated log grows with every write; once it holds more than the member's oplog
//! size, its oldest entries go. Raft may only forget entries a copy of the data holds
//! (`initial_sync`), so trimming first builds a copy at the last applied entry when the
//! newest copy is older than the entries to go, then purges the oldest entries until the
//! newest half of the size remains. Openraft postpones a purge while entries are on their
//! way to a member; a member that needs purged entries is sent the copy instead. Each
//! member trims its own log, as each mongod caps its own oplog. The size is the member's
//! own setting, kept in its replication space: the flag sets it when the member first
//! starts, `replSetResizeOplog` changes it.

use crate::log_store::{get, put, LogStore};
use crate::types::Raft;
use basalt_error::{Error, ErrorCode, Result};
use basalt_storage::{Durability, Engine, WriteBatch};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The size when neither the flag nor `replSetResizeOplog` gave one (mongod's default
/// for small disks, and its smallest default).
pub const DEFAULT_OPLOG_SIZE_MB: f64 = 990.0;
/// The smallest size `replSetResizeOplog` accepts, as mongod's.
const MIN_RESIZE_MB: f64 = 990.0;
/// The largest size, as mongod's (1 PB).
const MAX_SIZE_MB: f64 = 1024.0 * 1024.0 * 1024.0;
const SIZE_KEY: &[u8] = b"oplogSizeMB";

/// The member's oplog size.
pub(crate) struct OplogSize {
    bytes: AtomicU64,
}

fn to_bytes(megabytes: f64) -> u64 {
    (megabytes * 1024.0 * 1024.0) as u64
}

impl OplogSize {
    /// The stored size, else the flag's (stored from now on), else the default.
    pub(crate) fn open(engine: &dyn Engine, flag_mb: Option<f64>) -> Result<OplogSize> {
        let stored: Option<f64> = get(engine, SIZE_KEY).map_err(storage)?;
        let megabytes = match stored {
            Some(megabytes) => megabytes,
            None => {
                let megabytes = flag_mb.unwrap_or(DEFAULT_OPLOG_SIZE_MB);
                if !(megabytes > 0.0 && megabytes <= MAX_SIZE_MB) {
                    return Err(Error::bad_value(format!(
                        "--oplogSizeMB must be positive and at most {MAX_SIZE_MB}, not {megabytes}"
                    )));
                }
                store(engine, megabytes)?;
                megabytes
            }
        };
        Ok(OplogSize {
            bytes: AtomicU64::new(to_bytes(megabytes)),
        })
    }

    pub(crate) fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// `replSetResizeOplog`'s `size`: checked as mongod does, stored, and in force at once.
    pub(crate) fn resize(&self, engine: &dyn Engine, megabytes: f64) -> Result<()> {
        if !(MIN_RESIZE_MB..=MAX_SIZE_MB).contains(&megabytes) {
            return Err(Error::new(
                ErrorCode::INVALID_OPTIONS,
                format!(
                    "oplog size in MB should be between {MIN_RESIZE_MB} and {MAX_SIZE_MB}, \
                     not {megabytes}"
                ),
            ));
        }
        store(engine, megabytes)?;
        self.bytes.store(to_bytes(megabytes), Ordering::Relaxed);
        Ok(())
    }
}

fn store(engine: &dyn Engine, megabytes: f64) -> Result<()> {
    let mut batch = WriteBatch::default();
    put(&mut batch, SIZE_KEY, megabytes).map_err(storage)?;
    engine.write(batch, Durability::Disk)
}

fn storage(e: openraft::StorageError<u64>) -> Error {
    Error::internal(format!("replication storage: {e}"))
}

fn trimming_failed(e: impl std::fmt::Display) -> Error {
    Error::internal(format!("trimming the oplog: {e}"))
}

/// Makes sure the newest copy of the data reaches entry `index`, building one at the
/// last applied entry if not; waits up to `wait` for it.
pub(crate) async fn copy_through(raft: &Raft, index: u64, wait: Duration) -> Result<()> {
    let covered = raft.metrics().borrow().snapshot.map(|s| s.index);
    if covered.is_some_and(|covered| covered >= index) {
        return Ok(());
    }
    raft.trigger().snapshot().await.map_err(trimming_failed)?;
    raft.wait(Some(wait))
        .metrics(
            |m| m.snapshot.is_some_and(|s| s.index >= index),
            "a copy of the data",
        )
        .await
        .map_err(trimming_failed)?;
    Ok(())
}

/// Purges the log through entry `upto` once a copy holds it.
pub(crate) async fn purge_through(raft: &Raft, upto: u64, wait: Duration) -> Result<()> {
    copy_through(raft, upto, wait).await?;
    raft.trigger()
        .purge_log(upto)
        .await
        .map_err(trimming_failed)
}

/// One trimming pass: when the log holds more than the oplog size, its oldest entries
/// go (through the last applied one at most) until the newest half of the size remains.
pub(crate) async fn trim(raft: &Raft, log: &LogStore, size: &OplogSize, log_bytes: u64) {
    if log_bytes <= size.bytes() {
        return;
    }
    let applied = raft
        .metrics()
        .borrow()
        .last_applied
        .map_or(0, |id| id.index);
    // It reads the oldest entries: off the runtime's workers, which run Raft.
    let upto = match tokio::task::block_in_place(|| log.purge_point(size.bytes() / 2)) {
        Ok(Some(point)) => point.min(applied),
        Ok(None) => return,
        Err(e) => {
            tracing::warn!("cannot trim the oplog: {e}");
            return;
        }
    };
    // A copy of a large database takes a while; trimming is retried on the next pass.
    if let Err(e) = purge_through(raft, upto, Duration::from_secs(600)).await {
        tracing::warn!("{e}");
    }
}
