//! Replica sets: one Raft group (openraft) per set, whose log holds the write commands
//! every member runs in the same order.
//!
//! The primary is Raft's leader. A write command is proposed to the log; once a majority
//! of the voting members has stored it, it is committed and every member's state machine
//! runs it through the same write path a standalone uses ([`Applier`]); the primary
//! answers the client with the reply its own state machine produced. Only committed
//! entries are ever applied, so no acknowledged write can be rolled back and there is no
//! rollback code. The replication layer knows nothing of documents or commands beyond
//! their bytes, the `lsid`/`txnNumber` of retryable writes and the set's configuration:
//! a config server set and a shard will both be replica sets of this kind.
//!
//! Members talk over their client port with the internal command `replSetRaft`
//! (`network.rs`); the log, the vote and what has been applied are kept in the storage
//! engine's replication space (`log_store.rs`, `state_machine.rs`). The log is bounded
//! as mongod's oplog is (`oplog.rs`): its oldest entries go once a copy of the data holds
//! them (`initial_sync.rs`), and that copy is what a new member starts from.

// openraft's storage traits return its `StorageError` (224 bytes); the helpers that
// build those results return it too rather than converting at every call.
#![allow(clippy::result_large_err)]

mod config;
mod initial_sync;
mod log_store;
mod network;
mod oplog;
mod replica_set;
mod stamp;
mod state_machine;
mod types;

pub use config::{MemberConfig, SetConfig};
pub use network::{HostConnections, PeerOptions, PAYLOAD_SEQUENCE, RAFT_COMMAND};
pub use replica_set::{MemberOptions, MemberState, OpTime, ReplicaSet, WriteMembers};
pub use stamp::StampedEngine;
pub use state_machine::Applier;
pub use types::{Member, Proposal, Sequence, WriteCommand};

use bson::Document;
use openraft::LogId;
use parking_lot::{Condvar, Mutex, RwLock};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What the state machine, the Raft watcher and the command handlers share.
#[derive(Default)]
pub(crate) struct Shared {
    config: RwLock<Option<Arc<SetConfig>>>,
    applied: Mutex<OpTime>,
    /// Bumped whenever what `hello` reports changes (role, primary, config), waking
    /// awaitable hellos.
    topology_counter: Mutex<i64>,
    topology_changed: Condvar,
    /// Bytes of the entries the log holds (what `--oplogSizeMB` bounds).
    log_bytes: AtomicU64,
    /// The load of a copy from the primary, while one runs: this member is in STARTUP2
    /// and must not stand for election.
    pub(crate) sync: Arc<initial_sync::SyncProgress>,
}

impl Shared {
    pub(crate) fn set_config(&self, document: Document) {
        let name = document.get_str("_id").unwrap_or_default().to_string();
        match SetConfig::parse(&document, &name) {
            Ok(config) => *self.config.write() = Some(Arc::new(config)),
            Err(e) => tracing::error!("an applied replica set config is invalid: {e}"),
        }
        self.bump_topology();
    }

    pub(crate) fn config(&self) -> Option<Arc<SetConfig>> {
        self.config.read().clone()
    }

    pub(crate) fn note_applied(&self, log_id: LogId<u64>, wall_ms: Option<i64>) {
        let mut applied = self.applied.lock();
        // Entries Raft writes itself (a new leader's first, membership) carry no time:
        // they get this member's clock, never going back.
        let wall_ms = wall_ms
            .unwrap_or_else(|| bson::DateTime::now().timestamp_millis())
            .max(applied.wall_ms);
        *applied = OpTime {
            index: log_id.index,
            term: log_id.leader_id.term,
            wall_ms,
        };
    }

    pub(crate) fn log_bytes(&self) -> u64 {
        self.log_bytes.load(Ordering::Relaxed)
    }

    /// The log's size as counted when the member starts.
    pub(crate) fn set_log_bytes(&self, bytes: u64) {
        self.log_bytes.store(bytes, Ordering::Relaxed);
    }

    /// Counts entries appended to the log.
    pub(crate) fn add_log_bytes(&self, bytes: u64) {
        self.log_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Counts entries removed from the log.
    pub(crate) fn remove_log_bytes(&self, bytes: u64) {
        let _ = self
            .log_bytes
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |total| {
                Some(total.saturating_sub(bytes))
            });
    }

    pub(crate) fn applied(&self) -> OpTime {
        *self.applied.lock()
    }

    pub(crate) fn bump_topology(&self) {
        *self.topology_counter.lock() += 1;
        self.topology_changed.notify_all();
    }

    pub(crate) fn topology_counter(&self) -> i64 {
        *self.topology_counter.lock()
    }

    /// Waits until the topology counter differs from `seen`, or the time is up.
    pub(crate) fn wait_topology_change(&self, seen: i64, timeout: Duration) {
        let deadline = std::time::Instant::now() + timeout;
        let mut counter = self.topology_counter.lock();
        while *counter == seen {
            if self
                .topology_changed
                .wait_until(&mut counter, deadline)
                .timed_out()
            {
                return;
            }
        }
    }
}
