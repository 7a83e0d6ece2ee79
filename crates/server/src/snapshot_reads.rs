//! Reads at `readConcern: {level: "snapshot"}` outside transactions (a snapshot session's
//! `find`, `aggregate` and `distinct`): the first one reads the member's data as of its
//! last applied entry and reports that time as `atClusterTime`; the next ones name it and
//! read the same data again.
//!
//! The storage engine has no reads at a past time, only snapshots held from the moment
//! they were taken. So a snapshot read keeps the one it takes here, by the log index it
//! stands for, for `minSnapshotHistoryWindowInSeconds` (300 s, as mongod); a later read
//! naming that time gets it back. A time that no read took a snapshot at, older than the
//! last applied entry, is SnapshotTooOld (239) where mongod could still read it; a time
//! ahead of the member is waited for, as `afterClusterTime` is.
//!
//! The statement runs in a write scope over the snapshot (`basalt_storage::Buffered`),
//! which its cursor keeps for its getMores.

use crate::commands::Ctx;
use basalt_error::{Error, ErrorCode, Result};
use basalt_repl::ReplicaSet;
use basalt_storage::Snapshot;
use bson::{Bson, Document, Timestamp};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// mongod's `minSnapshotHistoryWindowInSeconds` default.
pub const HISTORY_WINDOW_SECS: u64 = 300;

/// The most snapshots kept at once: each holds back the engine's cleanup of the versions
/// it sees.
const HISTORY_MAX: usize = 1_000;

/// How many times a snapshot is taken again when an entry was applied meanwhile.
const ATTEMPTS: usize = 100;

/// The commands that read at a snapshot outside a transaction, as in MongoDB.
const SNAPSHOT_COMMANDS: &[&str] = &["find", "aggregate", "distinct"];

struct Kept {
    time: Timestamp,
    taken: Instant,
    snapshot: Arc<dyn Snapshot>,
}

/// The snapshots snapshot reads took, oldest first.
#[derive(Default)]
pub struct SnapshotHistory {
    kept: Mutex<VecDeque<Kept>>,
}

/// The `atClusterTime` a snapshot read names, if any.
pub fn at_cluster_time(body: &Document) -> Result<Option<Timestamp>> {
    let concern = body.get_document("readConcern").ok();
    match concern.and_then(|concern| concern.get("atClusterTime")) {
        None => Ok(None),
        Some(Bson::Timestamp(time)) => Ok(Some(*time)),
        Some(_) => Err(Error::type_mismatch(
            "BSON field 'readConcern.atClusterTime' is the wrong type, expected type 'timestamp'",
        )),
    }
}

/// Whether the command `name` (outside a transaction) reads at `readConcern: {level:
/// "snapshot"}`; InvalidOptions for a command that cannot, as mongod. A getMore reads
/// in its cursor's scope, whatever concern it repeats.
pub fn reads_at_snapshot(name: &str, body: &Document) -> Result<bool> {
    let level = body
        .get_document("readConcern")
        .ok()
        .and_then(|concern| concern.get_str("level").ok());
    if level != Some("snapshot") || name == "getMore" {
        return Ok(false);
    }
    if !SNAPSHOT_COMMANDS.contains(&name) || crate::replication::writing_stage(body).is_some() {
        return Err(Error::new(
            ErrorCode::INVALID_OPTIONS,
            format!(
                "Command {name} does not support {{ readConcern: {{ level: \"snapshot\" }} }} \
                 outside a transaction"
            ),
        ));
    }
    Ok(true)
}

impl SnapshotHistory {
    /// The snapshot at `at` (or at the last applied entry), and its time.
    pub fn snapshot(
        &self,
        ctx: &Ctx<'_>,
        set: &ReplicaSet,
        at: Option<Timestamp>,
    ) -> Result<(Arc<dyn Snapshot>, Timestamp)> {
        let window = Duration::from_secs(ctx.server.options.snapshot_history_window_secs);
        let mut kept = self.kept.lock();
        while kept
            .front()
            .is_some_and(|oldest| oldest.taken.elapsed() > window)
            || kept.len() > HISTORY_MAX
        {
            kept.pop_front();
        }
        if let Some(at) = at {
            if let Some(found) = kept.iter().find(|k| k.time.increment == at.increment) {
                return Ok((found.snapshot.clone(), found.time));
            }
            let applied = set.applied().index;
            if u64::from(at.increment) > applied {
                drop(kept);
                let wait = ctx
                    .max_time_ms
                    .filter(|ms| *ms > 0)
                    .map_or(Duration::from_secs(60), |ms| {
                        Duration::from_millis(ms as u64)
                    });
                if !set.wait_applied(u64::from(at.increment), wait) {
                    return Err(Error::new(
                        ErrorCode::MAX_TIME_MS_EXPIRED,
                        format!("operation exceeded time limit waiting for atClusterTime {at}"),
                    ));
                }
                kept = self.kept.lock();
            } else if u64::from(at.increment) < applied {
                return Err(Error::new(
                    ErrorCode::SNAPSHOT_TOO_OLD,
                    format!(
                        "Read timestamp {at} is older than the oldest available timestamp: no \
                         snapshot was kept at it"
                    ),
                ));
            }
        }
        let engine = ctx.server.catalog.engine();
        for _ in 0..ATTEMPTS {
            let before = set.applied();
            let snapshot: Arc<dyn Snapshot> = Arc::from(engine.snapshot());
            if set.applied().index == before.index {
                let time = before.timestamp();
                kept.push_back(Kept {
                    time,
                    taken: Instant::now(),
                    snapshot: snapshot.clone(),
                });
                return Ok((snapshot, time));
            }
        }
        Err(Error::new(
            ErrorCode::SNAPSHOT_UNAVAILABLE,
            "could not take a snapshot between two applied entries",
        ))
    }
}
