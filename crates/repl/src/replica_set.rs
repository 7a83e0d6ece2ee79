//! A member of a replica set: its Raft node, its role as drivers see it (`hello`,
//! `replSetGetStatus`), and the `replSet*` commands that change the set.
//!
//! Command handlers run on connection threads; they reach the async Raft node through the
//! runtime handle (`block_on`), never from inside the runtime.

use crate::config::SetConfig;
use crate::initial_sync::{self, SyncFigures};
use crate::log_store::{get, put, LogStore, Record};
use crate::network::{CopyPiece, HostConnections, Network, Peer, PeerOptions};
use crate::oplog::{self, OplogSize};
use crate::state_machine::{
    config_proposal, stored_config, Applier, StateMachine, INSTALLING_KEY, SNAPSHOT_KEY,
};
use crate::types::{decode, encode, Member, Proposal, Raft, WriteCommand};
use crate::Shared;
use basalt_error::{Error, ErrorCode, Result};
use basalt_storage::{Durability, Engine, WriteBatch};
use bson::{doc, Bson, Document};
use openraft::error::{ClientWriteError, RaftError};
use openraft::raft::{VoteRequest, VoteResponse};
use openraft::{LogId, RaftMetrics, ServerState, SnapshotPolicy};
use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::runtime::Handle;

const IDENTITY_KEY: &[u8] = b"identity";
/// How often a member asks the others how they are (for `replSetGetStatus`).
const STATUS_HEARTBEAT_MS: u64 = 500;
/// How long a member waits for another's answer to a member-to-member command.
const MEMBER_COMMAND_TIMEOUT_MS: u64 = 5_000;
/// How often a waiting write checks that this member is still primary.
const PRIMARY_CHECK_MS: u64 = 50;
/// How often a write waiting for `w: N` members checks their progress.
const REPLICATION_CHECK_MS: u64 = 10;
/// How often a causally consistent read checks whether its entry is applied here.
const APPLIED_CHECK_MS: u64 = 1;
/// How often a member checks its oplog's size.
const OPLOG_CHECK_MS: u64 = 1_000;
/// The longest a reconfig waits for the copy of the data new members start from.
const NEW_MEMBER_COPY_WAIT_SECS: u64 = 600;
/// The largest piece of a copy sent in one message.
const COPY_CHUNK_BYTES: u64 = 8 << 20;
/// How long a member may take to store a piece of a copy (the last one: to load it).
const COPY_CHUNK_TIMEOUT_MS: u64 = 120_000;

/// How a member is started: mongod's flags that concern replication.
#[derive(Clone, Debug)]
pub struct MemberOptions {
    /// The port clients and the other members use.
    pub port: u16,
    /// The data directory (`--dbpath`): copies of the data are kept in it.
    pub dbpath: PathBuf,
    /// `--oplogSizeMB`: the log's size when the member first starts.
    pub oplog_size_mb: Option<f64>,
    /// The key file and TLS of this member's connections to the others.
    pub peer_options: PeerOptions,
}

/// openraft's election timeouts (min, max) in milliseconds for a member of `config`. A
/// follower that knows a leader stands for election after openraft's leader lease (=
/// `election_timeout_max`) plus a random timeout in [min, max]: with these, 0.75 to 1 ×
/// electionTimeoutMillis after the last heartbeat, as mongod's members call an election
/// after electionTimeoutMillis.
fn election_timeouts(config: &SetConfig) -> (u64, u64) {
    let election_ms = config.election_timeout_ms();
    let heartbeat_ms = config.heartbeat_interval_ms();
    (
        (election_ms / 4).max(heartbeat_ms * 2),
        (election_ms / 2).max(heartbeat_ms * 3),
    )
}

/// A duration drawn uniformly from [min_ms, max_ms).
fn jittered(min_ms: u64, max_ms: u64) -> Duration {
    Duration::from_millis(rand::random_range(min_ms..max_ms.max(min_ms + 1)))
}

/// Which members a write concern waits for.
pub enum WriteMembers {
    /// `w: N`: that many members.
    Count(usize),
    /// `w: "<mode>"`: members with that many distinct values of each tag.
    Mode(Vec<(String, usize)>),
}

/// The position of an entry in the replicated log, as MongoDB's optime.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpTime {
    pub index: u64,
    pub term: u64,
    /// The primary's clock when the entry was proposed (never going back).
    pub wall_ms: i64,
}

impl OpTime {
    /// MongoDB's oplog timestamp: seconds of the wall clock, and the log index as the
    /// increment, so it grows with every entry.
    pub fn timestamp(&self) -> bson::Timestamp {
        bson::Timestamp {
            time: u32::try_from(self.wall_ms / 1000).unwrap_or(0),
            increment: self.index as u32,
        }
    }

    pub fn to_document(&self) -> Document {
        doc! { "ts": self.timestamp(), "t": self.term as i64 }
    }

    pub fn date(&self) -> bson::DateTime {
        bson::DateTime::from_millis(self.wall_ms)
    }
}

/// A member's state, with MongoDB's numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberState {
    /// No config yet (not initiated).
    Startup,
    /// Loading a copy of the data (initial sync): serves no reads, stands for no
    /// election.
    Startup2,
    Primary,
    Secondary,
    /// In maintenance (`replSetMaintenance`): serves no reads, stands for no election.
    Recovering,
    /// The config does not name this member.
    Removed,
    /// Another member that did not answer its last heartbeat.
    Down,
}

impl MemberState {
    pub fn number(self) -> i32 {
        match self {
            MemberState::Startup => 0,
            MemberState::Startup2 => 5,
            MemberState::Primary => 1,
            MemberState::Secondary => 2,
            MemberState::Recovering => 3,
            MemberState::Removed => 10,
            MemberState::Down => 8,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            MemberState::Startup => "STARTUP",
            MemberState::Startup2 => "STARTUP2",
            MemberState::Primary => "PRIMARY",
            MemberState::Secondary => "SECONDARY",
            MemberState::Recovering => "RECOVERING",
            MemberState::Removed => "REMOVED",
            MemberState::Down => "(not reachable/healthy)",
        }
    }
}

/// Who this member is in its set, kept on disk.
#[derive(Serialize, Deserialize)]
struct Identity {
    member_id: u64,
}

/// What the last status heartbeat learned of another member.
#[derive(Clone)]
struct PeerStatus {
    state: MemberState,
    optime: Option<(bson::Timestamp, i64, bson::DateTime)>,
    last_heartbeat: Option<bson::DateTime>,
    ping_ms: i64,
}

/// Step-downs and freezes: until when this member must not seek election.
#[derive(Default)]
struct Elections {
    stepping_down_until: Option<Instant>,
    unelectable_until: Option<Instant>,
    /// When this member last became primary, and its last applied entry then.
    elected: Option<(bson::DateTime, bson::Timestamp)>,
    last_state: Option<MemberState>,
    last_leader: Option<u64>,
    /// The electability last handed to Raft.
    electable: Option<bool>,
    /// `replSetMaintenance: true` calls not yet undone (in maintenance while above 0).
    maintenance: u32,
}

pub struct ReplicaSet {
    set_name: String,
    port: u16,
    engine: Arc<dyn Engine>,
    applier: Arc<dyn Applier>,
    runtime: Handle,
    raft: RwLock<Option<(u64, Raft)>>,
    log: RwLock<Option<LogStore>>,
    /// Where copies of the data are kept.
    snapshots: PathBuf,
    oplog_size: OplogSize,
    shared: Arc<Shared>,
    started: Instant,
    elections: Mutex<Elections>,
    peers: Mutex<BTreeMap<u64, PeerStatus>>,
    /// The key file and TLS of connections to other members.
    peer_options: PeerOptions,
    /// When the leader's last append (or heartbeat) reached this member.
    last_append: Mutex<Option<Instant>>,
    /// When this member stands for election unless an append arrives first (see
    /// `stand_when_due`).
    election_due: Mutex<Option<Instant>>,
    /// When the watcher last ran, and until when this member must not claim to be
    /// primary after it found that it had not run for long (see `is_writable_leader`).
    watched: Mutex<(Instant, Option<Instant>)>,
}

fn not_primary(message: &str) -> Error {
    Error::new(ErrorCode::NOT_WRITABLE_PRIMARY, message)
}

impl ReplicaSet {
    /// Opens the member named by `--replSet`: a member that was initiated before starts
    /// its Raft node again; one that was not waits for `replSetInitiate` (or for the
    /// member that runs it).
    pub async fn open(
        set_name: &str,
        options: &MemberOptions,
        engine: Arc<dyn Engine>,
        applier: Arc<dyn Applier>,
    ) -> Result<Arc<ReplicaSet>> {
        let snapshots = initial_sync::directory(&options.dbpath);
        initial_sync::remove_unfinished(&snapshots);
        let shared = Arc::new(Shared::default());
        recover_interrupted_sync(&engine, &shared, &*applier)?;
        let set = Arc::new(ReplicaSet {
            set_name: set_name.to_string(),
            port: options.port,
            peer_options: options.peer_options.clone(),
            oplog_size: OplogSize::open(&*engine, options.oplog_size_mb)?,
            engine,
            applier,
            runtime: Handle::current(),
            raft: RwLock::new(None),
            log: RwLock::new(None),
            snapshots,
            shared,
            started: Instant::now(),
            elections: Mutex::new(Elections::default()),
            peers: Mutex::new(BTreeMap::new()),
            last_append: Mutex::new(None),
            election_due: Mutex::new(None),
            watched: Mutex::new((Instant::now(), None)),
        });
        let identity: Option<Identity> = get(&*set.engine, IDENTITY_KEY).map_err(storage)?;
        let config = stored_config(&*set.engine).map_err(storage)?;
        if let (Some(identity), Some(document)) = (identity, config) {
            let stored_name = document.get_str("_id").unwrap_or_default();
            if stored_name != set_name {
                return Err(Error::new(
                    ErrorCode::INVALID_REPLICA_SET_CONFIG,
                    format!(
                        "this data directory belongs to replica set {stored_name}, not \
                         {set_name} (--replSet)"
                    ),
                ));
            }
            let config = SetConfig::parse(&document, set_name)?;
            set.start(identity.member_id, &config).await?;
        }
        let watcher = set.clone();
        tokio::spawn(async move { watcher.watch().await });
        let heartbeats = set.clone();
        tokio::spawn(async move { heartbeats.heartbeat().await });
        let trimmer = set.clone();
        tokio::spawn(async move { trimmer.trim_oplog().await });
        Ok(set)
    }

    pub fn set_name(&self) -> &str {
        &self.set_name
    }

    fn raft(&self) -> Option<(u64, Raft)> {
        self.raft.read().clone()
    }

    /// Starts this member's Raft node as member `id` of `config`.
    async fn start(&self, id: u64, config: &SetConfig) -> Result<Raft> {
        let (election_timeout_min, election_timeout_max) = election_timeouts(config);
        let raft_config = openraft::Config {
            cluster_name: self.set_name.clone(),
            heartbeat_interval: config.heartbeat_interval_ms(),
            election_timeout_min,
            election_timeout_max,
            // Copies are built and the log purged by oplog.rs, by size, not by count.
            snapshot_policy: SnapshotPolicy::Never,
            max_in_snapshot_log_to_keep: u64::MAX,
            snapshot_max_chunk_size: COPY_CHUNK_BYTES,
            install_snapshot_timeout: COPY_CHUNK_TIMEOUT_MS,
            ..Default::default()
        }
        .validate()
        .map_err(|e| Error::new(ErrorCode::INVALID_REPLICA_SET_CONFIG, e.to_string()))?;
        self.shared.set_config(config.document.clone());
        let state_machine = StateMachine {
            id,
            engine: self.engine.clone(),
            applier: self.applier.clone(),
            shared: self.shared.clone(),
            snapshots: self.snapshots.clone(),
            receiving: None,
        };
        let log = LogStore::new(self.engine.clone(), self.shared.clone()).map_err(storage)?;
        *self.log.write() = Some(log.clone());
        let raft = Raft::new(
            id,
            Arc::new(raft_config),
            Network {
                peer_options: self.peer_options.clone(),
            },
            log,
            state_machine,
        )
        .await
        .map_err(|e| Error::internal(format!("cannot start the replication node: {e}")))?;
        let electable = config.member(id).is_some_and(|m| m.electable());
        raft.runtime_config().elect(electable);
        *self.raft.write() = Some((id, raft.clone()));
        self.shared.bump_topology();
        Ok(raft)
    }

    fn config(&self) -> Option<Arc<SetConfig>> {
        self.shared.config()
    }

    /// A copy of Raft's metrics, for the replies that show them (status, hello); the
    /// per-command checks borrow them instead.
    fn metrics(&self) -> Option<(u64, RaftMetrics<u64, Member>)> {
        self.raft()
            .map(|(id, raft)| (id, raft.metrics().borrow().clone()))
    }

    /// This member's state as drivers see it (checked by every command on a member).
    pub fn state(&self) -> MemberState {
        let (Some((id, raft)), Some(config)) = (self.raft(), self.config()) else {
            return MemberState::Startup;
        };
        if config.member(id).is_none() {
            return MemberState::Removed;
        }
        if self.shared.sync.active() {
            return MemberState::Startup2;
        }
        if self.is_writable_leader(Leadership::of(&raft), &config) {
            MemberState::Primary
        } else if self.elections.lock().maintenance > 0 {
            MemberState::Recovering
        } else {
            MemberState::Secondary
        }
    }

    /// Leader, not stepping down, heard from a majority lately, and caught up with its
    /// own term's first entry (everything committed before it took office is applied).
    fn is_writable_leader(&self, leadership: Leadership, config: &SetConfig) -> bool {
        if !leadership.leader {
            return false;
        }
        if self
            .elections
            .lock()
            .stepping_down_until
            .is_some_and(|until| Instant::now() < until)
        {
            return false;
        }
        let voters = config.members.iter().filter(|m| m.votes > 0).count();
        let quorum_fresh = voters == 1
            || (leadership
                .millis_since_quorum_ack
                .is_some_and(|ms| ms <= config.election_timeout_ms())
                && !self.was_stalled(config));
        quorum_fresh && leadership.caught_up
    }

    /// Whether this process did not run for a while (it was paused, SIGSTOP, or starved)
    /// or just came back from such a gap. Raft's metrics are then as old as the gap: a
    /// leader paused for longer than an election may have been deposed without knowing
    /// it yet, so it must not say it is primary until its own heartbeats have had time to
    /// find out (half an election timeout; a leader that was not deposed goes on).
    fn was_stalled(&self, config: &SetConfig) -> bool {
        let grace = Duration::from_millis(config.election_timeout_ms() / 2);
        let (watched, until) = *self.watched.lock();
        watched.elapsed() > grace || until.is_some_and(|until| Instant::now() < until)
    }

    fn host_of(&self, config: &SetConfig, id: Option<u64>) -> Option<String> {
        id.and_then(|id| config.member(id)).map(|m| m.host.clone())
    }

    /// Reads on this member: a primary serves every read, a secondary those that allow
    /// it (`secondaryOk`, a read preference other than primary).
    pub fn check_readable(&self, secondary_ok: bool) -> Result<()> {
        match (self.state(), secondary_ok) {
            (MemberState::Primary, _) | (MemberState::Secondary, true) => Ok(()),
            (_, false) => Err(Error::new(
                ErrorCode::NOT_PRIMARY_NO_SECONDARY_OK,
                "not primary and secondaryOk=false",
            )),
            (_, true) => Err(Error::new(
                ErrorCode::NOT_PRIMARY_OR_SECONDARY,
                "node is not in primary or recovering state",
            )),
        }
    }

    /// A linearizable read: confirms with a majority that this member is still primary
    /// and that everything committed is applied, before the read runs. While the
    /// majority does not answer, it tries again for as long as this member says it is
    /// primary (at most an election timeout past its last majority), as mongod's
    /// linearizable read waits for its no-op write: the error comes once `hello` no
    /// longer names this member, so the driver's one retry goes to another.
    pub fn confirm_primary(&self) -> Result<()> {
        let Some((_, raft)) = self.raft() else {
            return Err(not_primary("not primary"));
        };
        let limit = self.config().map_or(Duration::from_secs(10), |c| {
            2 * Duration::from_millis(c.election_timeout_ms())
        });
        let deadline = Instant::now() + limit;
        loop {
            if self.runtime.block_on(raft.ensure_linearizable()).is_ok() {
                return Ok(());
            }
            if self.state() != MemberState::Primary || Instant::now() >= deadline {
                return Err(not_primary(
                    "not primary: could not confirm with a majority",
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Proposes a write command and waits until it is committed and applied here;
    /// returns the reply this member's state machine produced and the entry's index.
    pub fn propose(&self, command: WriteCommand) -> Result<(Vec<u8>, u64)> {
        let Some((_, raft)) = self.raft() else {
            return Err(not_primary("not primary"));
        };
        if self.state() != MemberState::Primary {
            return Err(not_primary("not primary"));
        }
        let term = raft.metrics().borrow().current_term;
        let outcome = self.runtime.block_on(async {
            let write = raft.client_write(Proposal::Command(command));
            tokio::pin!(write);
            loop {
                tokio::select! {
                    outcome = &mut write => return Some(outcome),
                    () = tokio::time::sleep(Duration::from_millis(PRIMARY_CHECK_MS)) => {
                        // The metrics' borrow ends before `state()` borrows them again.
                        let same_term = raft.metrics().borrow().current_term == term;
                        let still = same_term && self.state() == MemberState::Primary;
                        if !still {
                            return None;
                        }
                    }
                }
            }
        });
        match outcome {
            Some(Ok(response)) => Ok((response.data.reply, response.log_id.index)),
            Some(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_)))) => {
                Err(not_primary("not primary"))
            }
            Some(Err(e)) => Err(Error::new(
                ErrorCode::INTERRUPTED_DUE_TO_REPL_STATE_CHANGE,
                format!("operation was interrupted: {e}"),
            )),
            None => Err(Error::new(
                ErrorCode::INTERRUPTED_DUE_TO_REPL_STATE_CHANGE,
                "operation was interrupted because the primary stepped down; it may still \
                 be applied",
            )),
        }
    }

    /// Waits until the members that hold the log through entry `index` (this one
    /// included) satisfy the write concern `w`: a number of members, or a mode of the
    /// config's `getLastErrorModes`; for `timeout` at most (`None`: as long as it takes,
    /// as mongod without `wtimeout`). Says whether they did.
    pub fn await_replication(
        &self,
        index: u64,
        w: &WriteMembers,
        timeout: Option<Duration>,
    ) -> bool {
        let Some((id, raft)) = self.raft() else {
            return false;
        };
        let deadline = timeout.map(|timeout| Instant::now() + timeout);
        loop {
            let holders: Vec<u64> = {
                let metrics = raft.metrics();
                let metrics = metrics.borrow();
                let Some(replication) = &metrics.replication else {
                    return false;
                };
                replication
                    .iter()
                    .filter(|(member, matched)| {
                        **member == id || matched.is_some_and(|m| m.index >= index)
                    })
                    .map(|(member, _)| *member)
                    .chain(std::iter::once(id))
                    .collect::<BTreeSet<u64>>()
                    .into_iter()
                    .collect()
            };
            let satisfied = match w {
                WriteMembers::Count(members) => holders.len() >= *members,
                WriteMembers::Mode(mode) => self
                    .config()
                    .is_some_and(|config| config.satisfies(mode, &holders)),
            };
            if satisfied {
                return true;
            }
            if deadline.is_some_and(|deadline| Instant::now() >= deadline)
                || self.state() != MemberState::Primary
            {
                return false;
            }
            std::thread::sleep(Duration::from_millis(REPLICATION_CHECK_MS));
        }
    }

    /// The reply the log gave the write `txn_number` of the session `lsid` (its BSON
    /// bytes), if that is the session's last write: a transaction's commit, asked again
    /// after a failover.
    pub fn session_reply(&self, lsid: &[u8], txn_number: i64) -> Result<Option<Vec<u8>>> {
        crate::state_machine::session_reply(&*self.engine, lsid, txn_number).map_err(storage)
    }

    /// The first log entry whose oplog records this member holds: those of earlier
    /// entries were purged with them, or precede the copy of the data it loaded.
    pub fn oplog_start(&self) -> Result<u64> {
        let start = crate::log_store::get::<u64>(&*self.engine, crate::log_store::OPLOG_START_KEY)
            .map_err(storage)?;
        Ok(start.unwrap_or(0))
    }

    /// The last entry applied here (= committed: only committed entries are applied).
    pub fn applied(&self) -> OpTime {
        self.shared.applied()
    }

    /// Waits until this member has applied the log through entry `index` (what a
    /// causally consistent read's `afterClusterTime` names), for `timeout` at most; says
    /// whether it has.
    pub fn wait_applied(&self, index: u64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while self.applied().index < index {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(APPLIED_CHECK_MS));
        }
        true
    }

    pub fn topology_counter(&self) -> i64 {
        self.shared.topology_counter()
    }

    pub fn wait_topology_change(&self, seen: i64, timeout: Duration) {
        self.shared.wait_topology_change(seen, timeout);
    }

    /// Number of members whose votes count, for write concerns.
    pub fn voting_members(&self) -> usize {
        self.config()
            .map_or(0, |c| c.members.iter().filter(|m| m.votes > 0).count())
    }

    /// The write concern mode `name` of the config (`settings.getLastErrorModes`).
    pub fn write_mode(&self, name: &str) -> Option<WriteMembers> {
        self.config()?.write_mode(name).map(WriteMembers::Mode)
    }

    /// Number of members, for write concerns asking for `w: N`.
    pub fn members(&self) -> usize {
        self.config().map_or(0, |c| c.members.len())
    }

    /// The replica set fields of `hello`.
    pub fn hello_fields(&self, legacy: bool) -> Document {
        let state = self.state();
        let primary_field = if legacy {
            "ismaster"
        } else {
            "isWritablePrimary"
        };
        let mut reply = doc! {
            primary_field: state == MemberState::Primary,
            "secondary": state == MemberState::Secondary,
        };
        let (Some(config), Some((id, metrics))) = (self.config(), self.metrics()) else {
            reply.insert("info", "Does not have a valid replica set config");
            reply.insert("isreplicaset", true);
            return reply;
        };
        let visible = |m: &&crate::MemberConfig| !m.hidden;
        let hosts: Vec<String> = config
            .members
            .iter()
            .filter(visible)
            .filter(|m| m.priority > 0.0)
            .map(|m| m.host.clone())
            .collect();
        let passives: Vec<String> = config
            .members
            .iter()
            .filter(visible)
            .filter(|m| m.priority == 0.0)
            .map(|m| m.host.clone())
            .collect();
        reply.insert("hosts", hosts);
        if !passives.is_empty() {
            reply.insert("passives", passives);
        }
        reply.insert("setName", self.set_name.clone());
        reply.insert("setVersion", config.version as i32);
        if let Some(primary) = self.primary_host(state, &config, &metrics) {
            reply.insert("primary", primary);
        }
        if let Some(me) = config.member(id) {
            reply.insert("me", me.host.clone());
            if !me.tags.is_empty() {
                let tags: Document = me
                    .tags
                    .iter()
                    .map(|(name, value)| (name.clone(), Bson::String(value.clone())))
                    .collect();
                reply.insert("tags", tags);
            }
            if me.hidden {
                reply.insert("hidden", true);
            }
            if me.priority == 0.0 && !me.hidden {
                reply.insert("passive", true);
            }
        }
        if state == MemberState::Primary {
            reply.insert("electionId", election_id(metrics.current_term));
        }
        let applied = self.applied();
        reply.insert(
            "lastWrite",
            doc! {
                "opTime": applied.to_document(),
                "lastWriteDate": applied.date(),
                "majorityOpTime": applied.to_document(),
                "majorityWriteDate": applied.date(),
            },
        );
        reply
    }

    /// The primary's host as this member knows it: itself when writable, else Raft's
    /// leader as long as a heartbeat says it is primary.
    fn primary_host(
        &self,
        state: MemberState,
        config: &SetConfig,
        metrics: &RaftMetrics<u64, Member>,
    ) -> Option<String> {
        let leader = metrics.current_leader?;
        let primary = if leader == metrics.id {
            state == MemberState::Primary
        } else {
            self.peers
                .lock()
                .get(&leader)
                .is_some_and(|p| p.state == MemberState::Primary)
        };
        primary
            .then(|| self.host_of(config, Some(leader)))
            .flatten()
    }

    /// `dropConnections`: this member's connections to `hosts` (`name:port`) close and
    /// are opened anew when next used.
    pub fn drop_connections(&self, hosts: &[String]) {
        for host in hosts {
            self.peer_options.connections.drop_host(host);
        }
    }

    /// This member's connections to the others, per host (`connPoolStats`).
    pub fn peer_connections(&self) -> Vec<(String, HostConnections)> {
        self.peer_options.connections.hosts()
    }

    /// `replSetGetConfig`.
    pub fn get_config(&self) -> Result<Document> {
        let config = self.config().ok_or_else(not_initialized)?;
        let mut document = config.document.clone();
        if let Some((_, metrics)) = self.metrics() {
            document.insert("term", metrics.current_term as i64);
        }
        Ok(doc! { "config": document })
    }

    /// `replSetGetStatus`.
    pub fn status(&self) -> Result<Document> {
        let (Some(config), Some((my_id, metrics))) = (self.config(), self.metrics()) else {
            return Err(not_initialized());
        };
        let state = self.state();
        let applied = self.applied();
        let now = bson::DateTime::now();
        let peers = self.peers.lock().clone();
        let elections = self.elections.lock();
        let voters = config.members.iter().filter(|m| m.votes > 0).count();
        // A secondary replicates from the leader (Raft has no chained sync sources).
        let sync_source = metrics
            .current_leader
            .filter(|leader| *leader != my_id)
            .and_then(|leader| Some((self.host_of(&config, Some(leader))?, leader as i32)));
        let mut members = Vec::new();
        for member in &config.members {
            let mut entry = doc! { "_id": member.id as i32, "name": member.host.clone() };
            if member.id == my_id {
                entry.insert("health", 1.0);
                entry.insert("state", state.number());
                entry.insert("stateStr", state.name());
                entry.insert("uptime", self.started.elapsed().as_secs() as i64);
                entry.insert("optime", applied.to_document());
                entry.insert("optimeDate", applied.date());
                entry.insert("lastAppliedWallTime", applied.date());
                entry.insert("lastDurableWallTime", applied.date());
                if let Some((host, id)) = &sync_source {
                    entry.insert("syncSourceHost", host.clone());
                    entry.insert("syncSourceId", *id);
                }
                if let (MemberState::Primary, Some((date, optime))) = (state, elections.elected) {
                    entry.insert("electionTime", optime);
                    entry.insert("electionDate", date);
                }
                entry.insert("self", true);
            } else {
                let peer = peers
                    .get(&member.id)
                    .cloned()
                    .unwrap_or_else(PeerStatus::down);
                let healthy = peer.state != MemberState::Down;
                entry.insert("health", if healthy { 1.0 } else { 0.0 });
                entry.insert("state", peer.state.number());
                entry.insert("stateStr", peer.state.name());
                if let Some((ts, term, date)) = peer.optime {
                    entry.insert("optime", doc! { "ts": ts, "t": term });
                    entry.insert("optimeDate", date);
                    let lag_ms = applied.wall_ms - date.timestamp_millis();
                    entry.insert("lagSeconds", (lag_ms.max(0) / 1000) as i32);
                }
                if let Some(at) = peer.last_heartbeat {
                    entry.insert("lastHeartbeat", at);
                }
                entry.insert("pingMs", peer.ping_ms);
            }
            entry.insert("configVersion", config.version as i32);
            entry.insert("configTerm", metrics.current_term as i64);
            members.push(Bson::Document(entry));
        }
        let majority = (voters / 2 + 1) as i32;
        let mut reply = doc! {
            "set": self.set_name.clone(),
            "date": now,
            "myState": state.number(),
            "term": metrics.current_term as i64,
            "syncSourceHost": sync_source.as_ref().map_or(String::new(), |(host, _)| host.clone()),
            "syncSourceId": sync_source.as_ref().map_or(-1, |(_, id)| *id),
            "heartbeatIntervalMillis": config.heartbeat_interval_ms() as i64,
            "majorityVoteCount": majority,
            "writeMajorityCount": majority,
            "votingMembersCount": voters as i32,
            "writableVotingMembersCount": voters as i32,
            "optimes": {
                "lastCommittedOpTime": applied.to_document(),
                "lastCommittedWallTime": applied.date(),
                "readConcernMajorityOpTime": applied.to_document(),
                "appliedOpTime": applied.to_document(),
                "durableOpTime": applied.to_document(),
                "lastAppliedWallTime": applied.date(),
                "lastDurableWallTime": applied.date(),
            },
            "members": members,
        };
        if let Some(sync) = self.shared.sync.figures() {
            reply.insert("initialSyncStatus", initial_sync_status(&sync));
        }
        Ok(reply)
    }

    /// `replSetInitiate`: checks the config, has every other member join (all must
    /// answer, as mongod's quorum check asks), then starts the Raft group.
    pub fn initiate(&self, config: Option<&Document>, me_hosts: &[String]) -> Result<Document> {
        if self.raft().is_some() {
            return Err(Error::new(
                ErrorCode::ALREADY_INITIALIZED,
                "already initialized",
            ));
        }
        let default_config;
        let document = match config {
            Some(document) => document,
            None => {
                let host = me_hosts
                    .first()
                    .cloned()
                    .unwrap_or_else(|| format!("127.0.0.1:{}", self.port));
                default_config = doc! {
                    "_id": self.set_name.clone(),
                    "members": [{ "_id": 0, "host": host }],
                };
                &default_config
            }
        };
        let config = SetConfig::parse(document, &self.set_name)?;
        let me = self.find_me(&config, me_hosts)?;
        let others: Vec<_> = config
            .members
            .iter()
            .filter(|m| m.id != me)
            .cloned()
            .collect();
        for member in &others {
            self.send_join(&config, member.id, &member.host)?;
        }
        self.persist_identity(me, &config)?;
        self.runtime.block_on(async {
            let raft = self.start(me, &config).await?;
            let voters: BTreeMap<u64, Member> = config
                .members
                .iter()
                .filter(|m| m.votes > 0)
                .map(|m| {
                    (
                        m.id,
                        Member {
                            host: m.host.clone(),
                        },
                    )
                })
                .collect();
            raft.initialize(voters)
                .await
                .map_err(|e| Error::internal(format!("cannot initiate: {e}")))?;
            for learner in config.members.iter().filter(|m| m.votes == 0) {
                // Learners are added by the first primary; failing here is not fatal.
                let _ = raft
                    .add_learner(
                        learner.id,
                        Member {
                            host: learner.host.clone(),
                        },
                        false,
                    )
                    .await;
            }
            Ok::<_, Error>(())
        })?;
        tracing::info!(
            "replica set {} initiated with {} member(s)",
            self.set_name,
            config.members.len()
        );
        Ok(Document::new())
    }

    /// Which member of `config` this process is: the one whose host is one of the
    /// addresses it answers on.
    fn find_me(&self, config: &SetConfig, me_hosts: &[String]) -> Result<u64> {
        config
            .members
            .iter()
            .find(|m| me_hosts.iter().any(|h| h == &m.host))
            .map(|m| m.id)
            .ok_or_else(|| {
                Error::new(
                    ErrorCode::NODE_NOT_FOUND,
                    format!(
                        "No host described in new configuration with {{version: {}, term: 0}} \
                         for replica set {} maps to this node",
                        config.version, self.set_name
                    ),
                )
            })
    }

    fn persist_identity(&self, member_id: u64, config: &SetConfig) -> Result<()> {
        let mut batch = WriteBatch::default();
        put(&mut batch, IDENTITY_KEY, Identity { member_id }).map_err(storage)?;
        let bytes = config
            .document
            .to_vec()
            .map_err(|e| Error::internal(e.to_string()))?;
        batch.put(
            basalt_storage::Space::Replication,
            crate::state_machine::CONFIG_KEY.to_vec(),
            bytes,
        );
        self.engine.write(batch, Durability::Disk)
    }

    /// Asks the member at `host` to join as member `id` of `config`.
    fn send_join(&self, config: &SetConfig, id: u64, host: &str) -> Result<()> {
        let body = doc! {
            crate::RAFT_COMMAND: "join",
            "memberId": id as i64,
            "config": config.document.clone(),
            "$db": "admin",
        };
        let mut peer = Peer::new(host, self.peer_options.clone());
        let reply = self
            .runtime
            .block_on(peer.run(&body, Duration::from_millis(MEMBER_COMMAND_TIMEOUT_MS)));
        let failure = match reply {
            Ok(reply) if reply.get_f64("ok").unwrap_or(0.0) == 1.0 => return Ok(()),
            Ok(reply) => reply.get_str("errmsg").unwrap_or("refused").to_string(),
            Err(e) => e.to_string(),
        };
        Err(Error::new(
            ErrorCode::NODE_NOT_FOUND,
            format!(
                "replSetInitiate quorum check failed because not all proposed set members \
                 responded affirmatively: {host} failed with {failure}"
            ),
        ))
    }

    /// Runs a member-to-member command (`replSetRaft`): Raft's messages (their bytes
    /// from the command's `payload` document sequence), and `join`.
    pub fn handle_internal(
        &self,
        body: &Document,
        sequences: &[basalt_wire::DocumentSequence],
    ) -> Result<Document> {
        let kind = body.get_str(crate::RAFT_COMMAND).unwrap_or_default();
        if kind == "join" {
            return self.join(body);
        }
        let Some((_, raft)) = self.raft() else {
            return Err(not_initialized());
        };
        let payload = crate::network::payload_of(sequences)
            .ok_or_else(|| Error::bad_value("replSetRaft needs a payload sequence"))?;
        let payload = payload.as_slice();
        let answer = match kind {
            "append" => {
                let now = Instant::now();
                *self.last_append.lock() = Some(now);
                if let Some(config) = self.config() {
                    let (min, max) = election_timeouts(&config);
                    *self.election_due.lock() = Some(now + jittered(min + max, 2 * max));
                }
                self.answer(payload, |request| raft.append_entries(request))
            }
            "snapshot" => self.answer(payload, |piece: CopyPiece| {
                raft.install_snapshot(piece.into())
            }),
            "vote" => self.answer(payload, |request: VoteRequest<u64>| {
                let candidate = (request.vote.leader_id().term, request.last_log_id);
                async move {
                    let outcome = raft.vote(request).await;
                    if let Ok(response) = &outcome {
                        self.take_over_from(&raft, candidate, response);
                    }
                    outcome
                }
            }),
            other => Err(Error::bad_value(format!(
                "unknown replSetRaft message {other}"
            ))),
        }?;
        Ok(doc! {
            "payload": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: answer },
        })
    }

    /// After refusing a candidate whose log is behind this member's: once the leader has
    /// gone quiet here too, this member stands at once, where it can win, rather than
    /// when its own election timer fires (which openraft delays further for a member
    /// that once stood with a shorter log). It stands twice in a row: the first term is
    /// the one the candidate has voted itself in, so only the second can be granted (the
    /// candidate grants it, its log being behind). Elections are safe at any time; this
    /// only changes when one is held.
    fn take_over_from(
        &self,
        raft: &Raft,
        (term, candidate_log): (u64, Option<LogId<u64>>),
        response: &VoteResponse<u64>,
    ) {
        {
            let metrics = raft.metrics();
            let metrics = metrics.borrow();
            // A leader hears no appends: its refusal says nothing of a leader gone quiet.
            if response.vote_granted
                || response.last_log_id <= candidate_log
                || term <= metrics.current_term
                || metrics.state == ServerState::Leader
            {
                return;
            }
        }
        let (Some((id, _)), Some(config)) = (self.raft(), self.config()) else {
            return;
        };
        let lease = Duration::from_millis(election_timeouts(&config).1);
        let leader_quiet = self
            .last_append
            .lock()
            .is_some_and(|at| at.elapsed() > lease);
        if !leader_quiet || !self.may_stand(&self.elections.lock(), &config, id) {
            return;
        }
        tracing::info!("a candidate with a shorter log stood in term {term}: standing instead");
        let raft = raft.clone();
        self.runtime.spawn(async move {
            for _ in 0..2 {
                if raft.trigger().elect().await.is_err() {
                    return;
                }
            }
        });
    }

    /// Stands for election once no append has come from the leader for an election
    /// timeout (0.75–1 × electionTimeoutMillis, drawn afresh after every append), and
    /// again every 0.25–0.5 × while no leader emerges. openraft's own timer does the same,
    /// but it draws its random timeout once per process, so two members that drew close
    /// values split the vote after every failover; and it adds a full second to the
    /// timer of a member that once stood with a shorter log, for good. Both made some
    /// failovers take over 2 s; this clock has neither. (A member with a shorter log
    /// that stands first is overtaken at once: `take_over_from`.)
    fn stand_when_due(&self, raft: &Raft, config: &SetConfig) {
        if raft.metrics().borrow().state == ServerState::Leader {
            // A leader's clock is stale by the time it steps down: it waits for the
            // first append of whoever leads next.
            *self.election_due.lock() = None;
            return;
        }
        let now = Instant::now();
        {
            let mut due = self.election_due.lock();
            if !due.is_some_and(|due| now >= due) {
                return;
            }
            let (min, max) = election_timeouts(config);
            *due = Some(now + jittered(min, max));
        }
        tracing::info!("no append from a leader for an election timeout: standing");
        let raft = raft.clone();
        self.runtime.spawn(async move {
            let _ = raft.trigger().elect().await;
        });
    }

    /// Whether this member may stand for election now: electable by its config, not
    /// frozen or stepping down, not in maintenance, not loading a copy of the data.
    fn may_stand(&self, elections: &Elections, config: &SetConfig, id: u64) -> bool {
        let frozen = elections
            .unelectable_until
            .is_some_and(|until| Instant::now() < until);
        // A member loading a copy has no data to stand with, and must not disturb the
        // primary by calling an election while it loads.
        !frozen
            && elections.maintenance == 0
            && !self.shared.sync.active()
            && config.member(id).is_some_and(|m| m.electable())
    }

    /// Decodes a Raft request, has the Raft node answer it, and encodes the outcome.
    fn answer<Request, Outcome>(
        &self,
        payload: &[u8],
        call: impl FnOnce(Request) -> Outcome,
    ) -> Result<Vec<u8>>
    where
        Request: serde::de::DeserializeOwned,
        Outcome: std::future::Future,
        Outcome::Output: Serialize,
    {
        let request: Record<Request> =
            decode(payload).map_err(|e| Error::bad_value(format!("bad Raft message: {e}")))?;
        let outcome = self.runtime.block_on(call(request.value));
        encode(&Record { value: outcome }).map_err(|e| Error::internal(e.to_string()))
    }

    /// Becomes member `memberId` of the config another member is initiating (or adding
    /// this member to).
    fn join(&self, body: &Document) -> Result<Document> {
        let document = body
            .get_document("config")
            .map_err(|_| Error::bad_value("join needs a config"))?;
        let config = SetConfig::parse(document, &self.set_name)?;
        let id = body
            .get_i64("memberId")
            .ok()
            .and_then(|id| u64::try_from(id).ok())
            .ok_or_else(|| Error::bad_value("join needs a memberId"))?;
        if let Some((current, _)) = self.raft() {
            if current == id {
                return Ok(Document::new());
            }
            return Err(Error::new(
                ErrorCode::ALREADY_INITIALIZED,
                "already initialized",
            ));
        }
        self.persist_identity(id, &config)?;
        self.runtime.block_on(self.start(id, &config))?;
        tracing::info!("joined replica set {} as member {id}", self.set_name);
        Ok(Document::new())
    }

    /// `replSetStepDown`: this member stops taking writes at once, lets the others elect
    /// a primary by going quiet, and does not seek election for `step_down_secs`.
    pub fn step_down(&self, step_down_secs: u64) -> Result<Document> {
        let Some((id, raft)) = self.raft() else {
            return Err(not_initialized());
        };
        if self.state() != MemberState::Primary {
            return Err(not_primary("not primary so can't step down"));
        }
        let config = self.config().ok_or_else(not_initialized)?;
        if !config.members.iter().any(|m| m.id != id && m.electable()) {
            return Err(Error::new(
                ErrorCode::EXCEEDED_TIME_LIMIT,
                "No electable secondaries caught up as of now",
            ));
        }
        let until = Instant::now() + Duration::from_secs(step_down_secs.max(1));
        {
            let mut elections = self.elections.lock();
            elections.stepping_down_until = Some(until);
            elections.unelectable_until = Some(until);
        }
        raft.runtime_config().elect(false);
        raft.runtime_config().heartbeat(false);
        self.shared.bump_topology();
        // The others elect one of themselves once this member's heartbeats stop; this
        // member learns of the new term from its vote request.
        let wait = Duration::from_millis(config.election_timeout_ms() * 5);
        let stepped_down = self.runtime.block_on(
            raft.wait(Some(wait))
                .metrics(|m| m.state != ServerState::Leader, "step down"),
        );
        raft.runtime_config().heartbeat(true);
        let mut elections = self.elections.lock();
        elections.stepping_down_until = None;
        if stepped_down.is_err() {
            // Still the leader: it may stand again (the watcher restores electability).
            elections.unelectable_until = Some(Instant::now());
            drop(elections);
            self.shared.bump_topology();
            return Err(Error::new(
                ErrorCode::EXCEEDED_TIME_LIMIT,
                "No electable secondaries caught up as of now",
            ));
        }
        drop(elections);
        self.shared.bump_topology();
        Ok(Document::new())
    }

    /// `replSetMaintenance`: `true` puts a secondary in RECOVERING (no reads, no
    /// election), `false` undoes one `true`; the calls nest, as mongod's.
    pub fn maintenance(&self, enable: bool) -> Result<Document> {
        if self.raft().is_none() {
            return Err(not_initialized());
        }
        if self.state() == MemberState::Primary {
            return Err(Error::new(
                ErrorCode::NOT_SECONDARY,
                "primaries can't modify maintenance mode",
            ));
        }
        let mut elections = self.elections.lock();
        if enable {
            elections.maintenance += 1;
        } else if elections.maintenance == 0 {
            return Err(Error::new(
                ErrorCode::OPERATION_FAILED,
                "already out of maintenance mode",
            ));
        } else {
            elections.maintenance -= 1;
        }
        drop(elections);
        self.shared.bump_topology();
        Ok(Document::new())
    }

    /// `replSetFreeze`: no election for `secs` (0 ends a freeze).
    pub fn freeze(&self, secs: u64) -> Result<Document> {
        let Some((id, raft)) = self.raft() else {
            return Err(not_initialized());
        };
        if self.state() == MemberState::Primary {
            return Err(Error::new(
                ErrorCode::NOT_SECONDARY,
                "cannot freeze node when primary or running for election. state: Primary",
            ));
        }
        let electable = self
            .config()
            .and_then(|c| c.member(id).cloned())
            .is_some_and(|m| m.electable());
        let mut elections = self.elections.lock();
        if secs == 0 {
            elections.unelectable_until = None;
            raft.runtime_config().elect(electable);
            return Ok(doc! { "info": "unfreezing" });
        }
        elections.unelectable_until = Some(Instant::now() + Duration::from_secs(secs));
        raft.runtime_config().elect(false);
        Ok(Document::new())
    }

    /// `replSetReconfig`: members added are caught up as learners, then the voters
    /// change through Raft's joint consensus, then the new config is committed.
    pub fn reconfig(&self, document: &Document) -> Result<Document> {
        let Some((_, raft)) = self.raft() else {
            return Err(not_initialized());
        };
        if self.state() != MemberState::Primary {
            return Err(not_primary(
                "replSetReconfig should only be run on a writable PRIMARY",
            ));
        }
        let current = self.config().ok_or_else(not_initialized)?;
        let config = SetConfig::parse(document, &self.set_name)?;
        if config.version <= current.version {
            return Err(Error::new(
                ErrorCode::NEW_REPLICA_SET_CONFIGURATION_INCOMPATIBLE,
                format!(
                    "New replica set configuration version must be greater than old, but {} \
                     is not greater than {} for replica set {}",
                    config.version, current.version, self.set_name
                ),
            ));
        }
        let old: BTreeSet<u64> = current.members.iter().map(|m| m.id).collect();
        for member in config.members.iter().filter(|m| !old.contains(&m.id)) {
            self.send_join(&config, member.id, &member.host)?;
        }
        let proposal = config_proposal(&config.document)?;
        let interrupted = |e: RaftError<u64, ClientWriteError<u64, Member>>| {
            let why = match e {
                RaftError::APIError(ClientWriteError::ForwardToLeader(_)) => {
                    "this member is no longer primary".to_string()
                }
                e => e.to_string(),
            };
            Error::new(
                ErrorCode::INTERRUPTED_DUE_TO_REPL_STATE_CHANGE,
                format!("replSetReconfig was interrupted: {why}"),
            )
        };
        let adding = config.members.iter().any(|m| !old.contains(&m.id));
        self.runtime.block_on(async {
            if adding {
                self.prepare_initial_sync(&raft).await?;
            }
            for member in config.members.iter().filter(|m| !old.contains(&m.id)) {
                raft.add_learner(
                    member.id,
                    Member {
                        host: member.host.clone(),
                    },
                    true,
                )
                .await
                .map_err(interrupted)?;
            }
            let voters: BTreeSet<u64> = config
                .members
                .iter()
                .filter(|m| m.votes > 0)
                .map(|m| m.id)
                .collect();
            raft.change_membership(voters, false)
                .await
                .map_err(interrupted)?;
            raft.client_write(proposal).await.map_err(interrupted)?;
            Ok::<_, Error>(())
        })?;
        Ok(Document::new())
    }

    /// Before members are added: a copy of the data as of now for them to start from,
    /// and the log's first entry purged, so that they sync from the copy (as mongod's
    /// new members copy the data) instead of running the whole history.
    async fn prepare_initial_sync(&self, raft: &Raft) -> Result<()> {
        let (applied, purged) = {
            let metrics = raft.metrics();
            let metrics = metrics.borrow();
            (
                metrics.last_applied.map_or(0, |id| id.index),
                metrics.purged,
            )
        };
        let wait = Duration::from_secs(NEW_MEMBER_COPY_WAIT_SECS);
        oplog::copy_through(raft, applied, wait).await?;
        if purged.is_none() {
            oplog::purge_through(raft, 0, wait).await?;
        }
        Ok(())
    }

    /// This member's oplog size, in bytes (`--oplogSizeMB`, `replSetResizeOplog`).
    pub fn oplog_size_bytes(&self) -> u64 {
        self.oplog_size.bytes()
    }

    /// `replSetResizeOplog`: this member's oplog size, in force at once.
    pub fn resize_oplog(&self, megabytes: f64) -> Result<Document> {
        if self.raft().is_none() {
            return Err(not_initialized());
        }
        self.oplog_size.resize(&*self.engine, megabytes)?;
        tracing::info!("oplog size set to {megabytes} MB");
        Ok(Document::new())
    }

    /// Keeps the log within the oplog size (see `oplog.rs`).
    async fn trim_oplog(self: Arc<Self>) {
        loop {
            tokio::time::sleep(Duration::from_millis(OPLOG_CHECK_MS)).await;
            let (Some((_, raft)), Some(log)) = (self.raft(), self.log.read().clone()) else {
                continue;
            };
            oplog::trim(&raft, &log, &self.oplog_size, self.shared.log_bytes()).await;
        }
    }

    /// Follows Raft's metrics: notes elections, keeps the member's electability to its
    /// config (after a freeze or step-down ends, after a reconfig), and wakes awaitable
    /// hellos when what they report changes.
    async fn watch(self: Arc<Self>) {
        loop {
            tokio::time::sleep(Duration::from_millis(PRIMARY_CHECK_MS)).await;
            let gap = {
                let mut watched = self.watched.lock();
                let now = Instant::now();
                now.duration_since(std::mem::replace(&mut watched.0, now))
            };
            let (Some((id, raft)), Some(config)) = (self.raft(), self.config()) else {
                continue;
            };
            let grace = Duration::from_millis(config.election_timeout_ms() / 2);
            if gap > grace {
                tracing::info!("this member did not run for {} ms", gap.as_millis());
                self.watched.lock().1 = Some(Instant::now() + grace);
            }
            let state = self.state();
            let leader = raft.metrics().borrow().current_leader;
            let mut elections = self.elections.lock();
            let frozen = elections
                .unelectable_until
                .is_some_and(|until| Instant::now() < until);
            if !frozen {
                elections.unelectable_until = None;
            }
            let electable = self.may_stand(&elections, &config, id);
            if elections.electable != Some(electable) {
                elections.electable = Some(electable);
                raft.runtime_config().elect(electable);
            }
            // Standing reads Raft's metrics: not under the elections' lock, which a
            // command's `state()` may be waiting for.
            drop(elections);
            if electable {
                self.stand_when_due(&raft, &config);
            }
            let mut elections = self.elections.lock();
            if elections.last_state != Some(state) || elections.last_leader != leader {
                if state == MemberState::Primary {
                    elections.elected = Some((bson::DateTime::now(), self.applied().timestamp()));
                    tracing::info!("this member is now the primary of {}", self.set_name);
                }
                elections.last_state = Some(state);
                elections.last_leader = leader;
                drop(elections);
                self.shared.bump_topology();
            }
        }
    }

    /// Asks every other member how it is, for `replSetGetStatus` and for `primary` in
    /// hello (a leader no one has heard from is not reported).
    async fn heartbeat(self: Arc<Self>) {
        let mut connections: BTreeMap<u64, Peer> = BTreeMap::new();
        loop {
            tokio::time::sleep(Duration::from_millis(STATUS_HEARTBEAT_MS)).await;
            let (Some(config), Some((my_id, _))) = (self.config(), self.raft()) else {
                continue;
            };
            for member in config.members.iter().filter(|m| m.id != my_id) {
                let peer = connections
                    .entry(member.id)
                    .or_insert_with(|| Peer::new(&member.host, self.peer_options.clone()));
                let sent = Instant::now();
                let reply = peer
                    .run(
                        &doc! { "hello": 1, "$db": "admin" },
                        Duration::from_millis(STATUS_HEARTBEAT_MS * 2),
                    )
                    .await;
                let status = match reply {
                    Ok(reply) => peer_status(&reply, sent),
                    Err(_) => PeerStatus::down(),
                };
                let state = status.state;
                let changed = self
                    .peers
                    .lock()
                    .insert(member.id, status)
                    .is_none_or(|old| old.state != state);
                if changed {
                    self.shared.bump_topology();
                }
            }
        }
    }
}

impl PeerStatus {
    fn down() -> PeerStatus {
        PeerStatus {
            state: MemberState::Down,
            optime: None,
            last_heartbeat: None,
            ping_ms: 0,
        }
    }
}

fn peer_status(reply: &Document, sent: Instant) -> PeerStatus {
    let state = if reply.get_bool("isWritablePrimary").unwrap_or(false) {
        MemberState::Primary
    } else if reply.get_bool("secondary").unwrap_or(false) {
        MemberState::Secondary
    } else if reply.contains_key("setName") {
        // In the set, neither primary nor secondary: in maintenance.
        MemberState::Recovering
    } else {
        MemberState::Startup
    };
    let optime = reply.get_document("lastWrite").ok().and_then(|last| {
        let op = last.get_document("opTime").ok()?;
        Some((
            op.get_timestamp("ts").ok()?,
            op.get_i64("t").ok()?,
            *last.get_datetime("lastWriteDate").ok()?,
        ))
    });
    PeerStatus {
        state,
        optime,
        last_heartbeat: Some(bson::DateTime::now()),
        ping_ms: sent.elapsed().as_millis() as i64,
    }
}

/// MongoDB's electionId: an ObjectId with the largest timestamp and the term, so that
/// drivers see it grow with every election.
fn election_id(term: u64) -> bson::oid::ObjectId {
    let mut bytes = [0u8; 12];
    bytes[..4].copy_from_slice(&0x7fff_ffff_u32.to_be_bytes());
    bytes[4..].copy_from_slice(&term.to_be_bytes());
    bson::oid::ObjectId::from_bytes(bytes)
}

fn not_initialized() -> Error {
    Error::new(
        ErrorCode::NOT_YET_INITIALIZED,
        "no replset config has been received",
    )
}

fn storage(e: openraft::StorageError<u64>) -> Error {
    Error::internal(format!("replication storage: {e}"))
}

/// What [`ReplicaSet::is_writable_leader`] reads of Raft's metrics, copied out of them at
/// once: no other lock may be taken while they are borrowed. Raft's core waits for every
/// borrow to end before it publishes new metrics, and new borrows wait behind it, so a
/// borrow held while waiting for a lock whose holder borrows the metrics stops the
/// member (its commands, its elections and its Raft core) for good.
#[derive(Clone, Copy)]
struct Leadership {
    leader: bool,
    millis_since_quorum_ack: Option<u64>,
    /// Its own term's first entry is applied (everything committed before it took
    /// office is).
    caught_up: bool,
}

impl Leadership {
    fn of(raft: &Raft) -> Leadership {
        let metrics = raft.metrics();
        let metrics = metrics.borrow();
        Leadership {
            leader: metrics.state == ServerState::Leader,
            millis_since_quorum_ack: metrics.millis_since_quorum_ack,
            caught_up: metrics
                .last_applied
                .is_some_and(|applied| applied.leader_id.term == metrics.current_term),
        }
    }
}

/// `replSetGetStatus`'s `initialSyncStatus` while this member loads a copy: MongoDB's
/// figures of an initial sync (one attempt, its bytes copied of the copy's size, the time
/// left at the rate so far).
fn initial_sync_status(sync: &SyncFigures) -> Document {
    let elapsed_ms = sync.elapsed.as_millis() as i64;
    let left = sync.total_bytes.saturating_sub(sync.read_bytes);
    let remaining_ms = if sync.read_bytes == 0 {
        0
    } else {
        (elapsed_ms as f64 * left as f64 / sync.read_bytes as f64) as i64
    };
    doc! {
        "failedInitialSyncAttempts": 0,
        "maxFailedInitialSyncAttempts": 10,
        "initialSyncStart": sync.started,
        "totalInitialSyncElapsedMillis": elapsed_ms,
        "remainingInitialSyncEstimatedMillis": remaining_ms,
        "approxTotalDataSize": sync.total_bytes as i64,
        "approxTotalBytesCopied": sync.read_bytes as i64,
        "initialSyncAttempts": [],
        "appliedOps": 0,
        "totalTimeUnreachableMillis": 0,
    }
}

/// A member that crashed while loading a copy holds part of it: it clears its data and
/// its log (keeping its vote and identity) and syncs from a copy again.
fn recover_interrupted_sync(
    engine: &Arc<dyn Engine>,
    shared: &Arc<Shared>,
    applier: &dyn Applier,
) -> Result<()> {
    let marker = engine
        .snapshot()
        .get(basalt_storage::Space::Replication, INSTALLING_KEY)?;
    if marker.is_none() {
        return Ok(());
    }
    tracing::warn!("a copy of the data was being loaded when this member stopped: syncing again");
    LogStore::new(engine.clone(), shared.clone())
        .and_then(|log| log.clear())
        .map_err(storage)?;
    let mut done = WriteBatch::default();
    done.delete(basalt_storage::Space::Replication, INSTALLING_KEY.to_vec());
    done.delete(basalt_storage::Space::Replication, SNAPSHOT_KEY.to_vec());
    initial_sync::clear(&**engine, true).map_err(storage)?;
    engine.write(done, Durability::Disk)?;
    applier.reload();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use basalt_storage::{MemoryEngine, ScanStart, Space};
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Default)]
    struct CountingApplier {
        reloads: AtomicUsize,
    }

    impl Applier for CountingApplier {
        fn apply(&self, _index: u64, _term: u64, _command: &WriteCommand) -> Vec<u8> {
            Vec::new()
        }

        fn reload(&self) {
            self.reloads.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn keys(engine: &dyn Engine, space: Space) -> Vec<Vec<u8>> {
        let mut keys = Vec::new();
        engine
            .snapshot()
            .scan_prefix(space, b"", ScanStart::Beginning, &mut |key, _| {
                keys.push(key.to_vec());
                Ok(std::ops::ControlFlow::Continue(()))
            })
            .unwrap();
        keys
    }

    #[test]
    fn a_load_cut_by_a_crash_is_cleared_but_the_vote_and_identity_stay() {
        let engine: Arc<dyn Engine> = Arc::new(MemoryEngine::default());
        let mut batch = WriteBatch::default();
        batch.put(Space::Records, b"half-loaded".to_vec(), b"doc".to_vec());
        batch.put(Space::Catalog, b"meta".to_vec(), b"c".to_vec());
        for key in [
            &b"log/\0\0\0\0\0\0\0\x07"[..],
            b"applied",
            b"session/x",
            b"snapshot",
            b"installing",
            b"vote",
            b"identity",
        ] {
            batch.put(Space::Replication, key.to_vec(), b"v".to_vec());
        }
        let purged = LogId::new(openraft::CommittedLeaderId::new(1, 0), 3);
        let (key, value) = crate::log_store::record(b"purged", Some(purged)).unwrap();
        batch.put(Space::Replication, key, value);
        engine.write(batch, Durability::Process).unwrap();
        let shared = Arc::new(Shared::default());
        let applier = CountingApplier::default();
        recover_interrupted_sync(&engine, &shared, &applier).unwrap();
        assert!(keys(&*engine, Space::Records).is_empty());
        assert!(keys(&*engine, Space::Catalog).is_empty());
        assert_eq!(
            keys(&*engine, Space::Replication),
            vec![b"identity".to_vec(), b"vote".to_vec()]
        );
        assert_eq!(shared.log_bytes(), 0);
        assert_eq!(applier.reloads.load(Ordering::Relaxed), 1);

        // Without the marker, nothing is touched.
        let mut batch = WriteBatch::default();
        batch.put(Space::Records, b"kept".to_vec(), b"doc".to_vec());
        engine.write(batch, Durability::Process).unwrap();
        recover_interrupted_sync(&engine, &shared, &applier).unwrap();
        assert_eq!(keys(&*engine, Space::Records), vec![b"kept".to_vec()]);
        assert_eq!(applier.reloads.load(Ordering::Relaxed), 1);
    }
}
