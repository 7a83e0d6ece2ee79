//! The Basalt server: listeners speaking MongoDB's wire protocol, the command registry,
//! cursors and server-wide state.
//!
//! A thread per listening socket accepts connections (`listener.rs`), each connection then
//! has a thread of its own that reads, runs and answers its commands, so a long scan never
//! stalls other connections, and a panic inside one command becomes an InternalError
//! reply instead of taking the server down. tokio runs the background tasks.

mod blocking_sort;
mod change_streams;
mod cluster_time;
mod column_scan;
mod commands;
mod connection;
mod cursors;
mod exec;
mod fail_points;
mod fsync_lock;
mod geo;
mod http_interface;
mod listener;
mod local_oplog;
mod log_buffer;
pub mod log_file;
mod operations;
mod parallel_scan;
mod parameters;
mod profiler;
mod query_settings;
mod query_shape;
mod replication;
mod request;
mod security;
mod sessions;
mod snapshot_reads;
mod stats;
mod system_js;
mod timeseries;
pub mod tls;
mod top;
mod transactions;
mod ttl_monitor;
mod validation;
mod views;

pub use listener::{bind, MAX_CONNS_DEFAULT};
pub use log_buffer::{FilterHook, LogBuffer};
pub use snapshot_reads::HISTORY_WINDOW_SECS as SNAPSHOT_HISTORY_WINDOW_SECS;
pub use transactions::LIFETIME_LIMIT_SECS as TRANSACTION_LIFETIME_LIMIT_SECS;
pub use transactions::SIZE_LIMIT_BYTES as TRANSACTION_SIZE_LIMIT_BYTES;
pub use ttl_monitor::TTL_MONITOR_INTERVAL_MS;

use basalt_catalog::Catalog;
use basalt_error::Result;
use basalt_storage::Engine;
use cursors::CursorManager;
use stats::Stats;
use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// MongoDB's wire version for 8.0, which drivers use to pick the features they send
/// (25: the `bulkWrite` command).
pub const MAX_WIRE_VERSION: i32 = 25;
/// The MongoDB release whose behaviour Basalt follows, as buildInfo reports it.
pub const COMPATIBLE_MONGODB_VERSION: &str = "8.0.0";
/// How often idle cursors are looked for.
const CURSOR_REAP_INTERVAL_MS: u64 = 60_000;
/// Time between column store merge passes.
const COLUMN_STORE_MERGE_INTERVAL_MS: u64 = 1_000;

/// How the server was started, for getCmdLineOpts and logs.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    pub bind_ip: Vec<String>,
    pub port: u16,
    pub dbpath: PathBuf,
    /// The command line as given, for getCmdLineOpts.
    pub argv: Vec<String>,
    /// Whether `$where`, `mapReduce`, `$function` and `$accumulator` may run JavaScript
    /// (false with mongod's `--noscripting`).
    pub scripting_enabled: bool,
    /// Time between TTL monitor passes (mongod's `ttlMonitorSleepSecs` parameter).
    pub ttl_monitor_interval_ms: u64,
    /// Threads one collection scan may use (`scanWorkers` parameter; default: the
    /// machine's cores).
    pub scan_workers: usize,
    /// mongod's `--maxConns`: the most connections open at once (capped further by the
    /// open-file and memory-map limits, see `listener::connection_limit`).
    pub max_conns: u64,
    /// mongod's `--quiet`: connections opening and closing are not logged.
    pub quiet: bool,
    /// mongod's `--profile`, `--slowms` and `--slowOpSampleRate`.
    pub profile: ProfileOptions,
    /// The HTTP interface's port (`--httpPort`): the status page and `/metrics`.
    pub http_port: Option<u16>,
    /// mongod's `--replSet`: the name of the replica set this member belongs to.
    pub repl_set: Option<String>,
    /// mongod's `--oplogSizeMB`: the member's oplog size when it first starts.
    pub oplog_size_mb: Option<f64>,
    /// mongod's `enableTestCommands` parameter: `configureFailPoint` is available.
    pub enable_test_commands: bool,
    /// mongod's `transactionLifetimeLimitSeconds`: an open transaction older than this
    /// is aborted.
    pub transaction_lifetime_limit_secs: u64,
    /// mongod's `transactionSizeLimitBytes`: a transaction writing more is refused with
    /// TransactionTooLarge.
    pub transaction_size_limit_bytes: u64,
    /// mongod's `minSnapshotHistoryWindowInSeconds`: how long a snapshot read's time can
    /// be read again.
    pub snapshot_history_window_secs: u64,
    /// For fault tests (`peerRoutes`, only with `enableTestCommands`): the address this
    /// member connects to for each other member named here (see
    /// `basalt_repl::PeerOptions::routes`).
    pub peer_routes: BTreeMap<String, String>,
    /// mongod's `--auth`: clients must authenticate, and commands are authorized.
    pub auth: bool,
    /// The key of mongod's `--keyFile` (its text without whitespace): members prove
    /// they hold it to each other; implies `auth`.
    pub key: Option<String>,
    /// `--tlsMode` and the files TLS needs.
    pub tls: tls::TlsOptions,
    /// mongod's `--clusterAuthMode x509`: members prove membership with their TLS
    /// certificates (same O, OU and DC as this member's) instead of the key file;
    /// implies `auth`.
    pub cluster_auth_x509: bool,
}

/// The profiler's settings at start (`profile` changes them at run time).
#[derive(Clone, Copy, Debug)]
pub struct ProfileOptions {
    /// The level of every database: 0 off, 1 slow operations, 2 all.
    pub level: i32,
    /// Operations slower than this many milliseconds are slow.
    pub slow_ms: i32,
    /// The fraction of slow operations logged and profiled.
    pub sample_rate: f64,
}

impl Default for ProfileOptions {
    fn default() -> ProfileOptions {
        ProfileOptions {
            level: 0,
            slow_ms: 100,
            sample_rate: 1.0,
        }
    }
}

/// Everything the connections share.
pub struct Server {
    pub catalog: Catalog,
    cursors: CursorManager,
    stats: Stats,
    /// Connections beyond this many are closed at once (`listener::connection_limit`).
    connection_limit: u64,
    started: Instant,
    options: ServerOptions,
    log: LogBuffer,
    /// Identifies this process in hello's topologyVersion.
    process_id: bson::oid::ObjectId,
    /// The connection of the work the server starts itself: committed commands from the
    /// replicated log, the TTL monitor's deletes on a primary.
    internal_connection: Arc<connection::ConnectionInfo>,
    /// This member's replica set, with `--replSet` (set once, right after start).
    replication: std::sync::OnceLock<Arc<basalt_repl::ReplicaSet>>,
    /// Test hooks (`configureFailPoint`, with `enableTestCommands`).
    fail_points: fail_points::FailPoints,
    /// Parameters `setParameter` changes (the log's verbosity among them).
    parameters: parameters::RuntimeParameters,
    /// A replica set's default read and write concerns, as last read.
    rw_concern_defaults: commands::rw_concern_defaults::Cache,
    /// Open multi-document transactions, per logical session.
    transactions: Arc<transactions::Transactions>,
    /// The logical sessions seen (`sessions.rs`).
    sessions: sessions::LogicalSessions,
    /// The keys that sign `$clusterTime` under access control.
    cluster_time_keys: cluster_time::ClusterTimeKeys,
    /// Snapshots kept for reads at `readConcern: snapshot`.
    snapshot_history: snapshot_reads::SnapshotHistory,
    /// Access control.
    security: security::Security,
    /// TLS for client connections, unless `--tlsMode disabled`.
    tls: Option<tls::Tls>,
    /// `fsync` with `lock`: writes held back while it is held.
    fsync_lock: fsync_lock::FsyncLock,
    /// The `autoCompact` setting.
    auto_compact: commands::AutoCompactSetting,
    /// The commands running now (`currentOp`, `killOp`).
    operations: operations::Operations,
    /// Time spent per collection (`top`).
    top: top::Top,
    /// The database profiler's settings (`profile`).
    profiler: profiler::Profiler,
    /// The query settings of query shapes (`query_settings.rs`).
    query_settings: query_settings::QuerySettings,
}

impl Server {
    pub fn new(engine: Arc<dyn Engine>, options: ServerOptions, log: LogBuffer) -> Result<Server> {
        // Process-wide, as mongod's setting is: the parsers that need it have no server.
        basalt_js::set_scripting_enabled(options.scripting_enabled);
        let security = security::Security::new(
            options.auth || options.cluster_auth_x509,
            options.key.clone(),
        )?;
        let tls = tls::Tls::new(&options.tls)?;
        let profiler = profiler::Profiler::new(options.profile);
        Ok(Server {
            security,
            tls,
            catalog: Catalog::open(engine)?,
            cursors: CursorManager::default(),
            stats: Stats::default(),
            connection_limit: listener::connection_limit(options.max_conns),
            started: Instant::now(),
            parameters: parameters::RuntimeParameters::new(options.quiet, log.clone()),
            options,
            log,
            process_id: bson::oid::ObjectId::new(),
            internal_connection: Arc::new(connection::ConnectionInfo::new(
                0,
                std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
            )),
            replication: std::sync::OnceLock::new(),
            fail_points: fail_points::FailPoints::default(),
            rw_concern_defaults: Default::default(),
            transactions: Default::default(),
            sessions: Default::default(),
            cluster_time_keys: Default::default(),
            snapshot_history: Default::default(),
            fsync_lock: Default::default(),
            auto_compact: Default::default(),
            operations: Default::default(),
            top: Default::default(),
            profiler,
            query_settings: query_settings::QuerySettings::default(),
        })
    }

    /// With `--replSet`: opens this member of the set. `engine` is the disk engine the
    /// catalog's [`basalt_repl::StampedEngine`] wraps.
    pub async fn open_replica_set(self: &Arc<Self>, engine: Arc<dyn Engine>) -> Result<()> {
        let Some(name) = self.options.repl_set.clone() else {
            return Ok(());
        };
        let applier = Arc::new(replication::ServerApplier::new(Arc::downgrade(self)));
        let member = basalt_repl::MemberOptions {
            port: self.options.port,
            dbpath: self.options.dbpath.clone(),
            oplog_size_mb: self.options.oplog_size_mb,
            peer_options: basalt_repl::PeerOptions {
                key: self.security.key().map(Arc::from),
                tls: tls::member_client_config(&self.options.tls)?,
                x509: self.options.cluster_auth_x509,
                routes: Arc::new(self.options.peer_routes.clone()),
                connections: Default::default(),
            },
        };
        let set = basalt_repl::ReplicaSet::open(&name, &member, engine, applier).await?;
        let clock = set.clone();
        basalt_value::clock::set_cluster_time_source(move || clock.applied().timestamp());
        let _ = self.replication.set(set);
        Ok(())
    }

    pub(crate) fn replication(&self) -> Option<&Arc<basalt_repl::ReplicaSet>> {
        self.replication.get()
    }

    /// Threads one collection scan may use.
    pub(crate) fn scan_workers(&self) -> usize {
        self.options.scan_workers
    }

    /// Starts accepting connections (the listener threads run until the process ends),
    /// and when `shutdown` resolves makes every write durable.
    pub async fn serve(
        self: Arc<Self>,
        listeners: Vec<TcpListener>,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> Result<()> {
        if self.replication().is_none() {
            let server = self.clone();
            tokio::task::spawn_blocking(move || {
                commands::feature_compatibility::record_at_start(&server)
            })
            .await
            .map_err(|e| basalt_error::Error::internal(e.to_string()))??;
        }
        listener::accept_on(&self, listeners)
            .map_err(|e| basalt_error::Error::internal(format!("cannot start a listener: {e}")))?;
        if let Some(port) = self.options.http_port {
            let listeners = listener::bind_port(&self.options, port)
                .and_then(|listeners| http_interface::start(&self, listeners).map(|()| port))
                .map_err(|e| {
                    basalt_error::Error::internal(format!(
                        "cannot listen on --httpPort {port}: {e}"
                    ))
                })?;
            tracing::info!("status page and metrics on http port {listeners}");
        }
        let reaper = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(CURSOR_REAP_INTERVAL_MS));
            loop {
                tick.tick().await;
                reaper.cursors.reap_idle();
            }
        });
        let ttl = self.clone();
        tokio::spawn(ttl_monitor::run(ttl, self.options.ttl_monitor_interval_ms));
        let merger = self.clone();
        tokio::spawn(async move {
            // Written records fold into their column store row groups (see
            // `basalt_catalog::Collection::merge_column_store`).
            let mut tick =
                tokio::time::interval(Duration::from_millis(COLUMN_STORE_MERGE_INTERVAL_MS));
            loop {
                tick.tick().await;
                let pass = merger.clone();
                match tokio::task::spawn_blocking(move || pass.catalog.merge_column_stores()).await
                {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => tracing::warn!("column store merge failed: {e}"),
                    Err(e) => tracing::warn!("column store merge panicked: {e}"),
                }
            }
        });
        tokio::spawn(sessions::run(self.clone()));
        tokio::spawn(cluster_time::run(self.clone()));
        shutdown.await;
        tracing::info!("shutting down: flushing storage");
        let catalog_engine = self.catalog.engine().clone();
        tokio::task::spawn_blocking(move || catalog_engine.sync())
            .await
            .map_err(|e| basalt_error::Error::internal(e.to_string()))??;
        Ok(())
    }
}
