//! The `basalt` binary: starts the server with mongod's command-line flags, or runs one
//! of the tools that talk to a server: `basalt import` (mongoimport's job) and
//! `basalt bench` (the W1–W5 benchmarks beside their peers).

mod config_file;

use basalt_bench::tools::{self, dump::DumpArgs, export::ExportArgs, restore::RestoreArgs};
use basalt_bench::{BenchArgs, ImportArgs};
use basalt_server::log_file::{LogFile, LogFileLayer};
use basalt_server::{bind, LogBuffer, Server, ServerOptions};
use basalt_storage::FjallEngine;
use clap::{Parser, Subcommand};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// Documents are many small allocations (field names, values); mimalloc serves them
/// markedly faster than glibc's allocator under the server's thread mix.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A document database that speaks MongoDB's wire protocol.
#[derive(Parser, Debug)]
#[command(
    name = "basalt",
    version,
    about,
    args_conflicts_with_subcommands = true,
    // A flag given twice takes its last value: the command line's over the
    // configuration file's (see config_file.rs).
    args_override_self = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    serve: Args,
}

/// Without a subcommand, `basalt` serves.
#[derive(Subcommand, Debug)]
enum Command {
    /// Load JSON, CSV or TSV into a running server (mongoimport's flags).
    Import(ImportArgs),
    /// Run the W1-W5 benchmarks on a private server, beside DuckDB and SQLite.
    Bench(BenchArgs),
    /// Write a server's collections to a dump directory or archive (mongodump's flags
    /// and formats).
    Dump(DumpArgs),
    /// Load a dump directory or archive into a server (mongorestore's flags).
    Restore(RestoreArgs),
    /// Write a collection as JSON lines, a JSON array or CSV (mongoexport's flags).
    Export(ExportArgs),
}

/// The server's flags, mongod's names.
#[derive(clap::Args, Debug)]
struct Args {
    /// mongod's YAML configuration file (net, storage, security, replication,
    /// setParameter, systemLog.quiet); flags on the command line override it.
    #[arg(long = "config", short = 'f', value_name = "FILE")]
    config: Option<PathBuf>,
    /// Port to listen on.
    #[arg(long, default_value_t = 27017)]
    port: u16,
    /// Serve the status page (/), its data (/status.json) and Prometheus metrics
    /// (/metrics) over HTTP on this port, on the --bind_ip addresses (off by default).
    #[arg(long = "httpPort", value_name = "PORT")]
    http_port: Option<u16>,
    /// Comma-separated addresses to listen on.
    #[arg(long = "bind_ip", default_value = "127.0.0.1")]
    bind_ip: String,
    /// Listen on every IPv4 address (same as --bind_ip 0.0.0.0).
    #[arg(long = "bind_ip_all")]
    bind_ip_all: bool,
    /// Directory where the data lives; created if missing.
    #[arg(long, default_value = "./data")]
    dbpath: PathBuf,
    /// Size of the block cache in GB (default: half of the memory less 1 GB, at least
    /// 0.25), as mongod's --wiredTigerCacheSizeGB.
    #[arg(long = "cacheSizeGB", value_name = "GB")]
    cache_size_gb: Option<f64>,
    /// Log only warnings and errors.
    #[arg(long)]
    quiet: bool,
    /// Write the log to this file, in mongod's JSON line format, instead of stderr.
    #[arg(long = "logpath", value_name = "PATH")]
    log_path: Option<PathBuf>,
    /// With --logpath: append to the file; without, a file already there is renamed
    /// aside first.
    #[arg(long = "logappend", requires = "log_path")]
    log_append: bool,
    /// The database profiler's level for every database: 0 off, 1 operations slower
    /// than --slowms, 2 all (mongod's `operationProfiling.mode` names also: off,
    /// slowOp, all).
    #[arg(long, value_name = "LEVEL", default_value = "0", value_parser = profile_level)]
    profile: i32,
    /// Operations slower than this (ms) are logged, and profiled at level 1.
    #[arg(
        long,
        value_name = "MS",
        default_value_t = 100,
        allow_negative_numbers = true
    )]
    slowms: i32,
    /// The fraction of slow operations logged and profiled (0 to 1).
    #[arg(long = "slowOpSampleRate", value_name = "RATE", default_value_t = 1.0, value_parser = sample_rate)]
    slow_op_sample_rate: f64,
    /// Refuse server-side JavaScript ($where, mapReduce, $function, $accumulator).
    #[arg(long)]
    noscripting: bool,
    /// Most connections open at once (capped at 80% of the open-files limit and of what
    /// vm.max_map_count allows); more are closed as they come.
    #[arg(
        long = "maxConns",
        value_name = "N",
        default_value_t = basalt_server::MAX_CONNS_DEFAULT,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    max_conns: u64,
    /// Require clients to authenticate (SCRAM-SHA-256/SCRAM-SHA-1) and authorize every
    /// command by the user's roles. Until the first user exists, a client on localhost
    /// may create it.
    #[arg(long)]
    auth: bool,
    /// Run without access control (the default; mongod's flag).
    #[arg(long, conflicts_with = "auth")]
    noauth: bool,
    /// The shared secret replica set members authenticate to each other with (6 to
    /// 1024 base64 characters; the file must not be readable by group or others).
    /// Implies --auth.
    #[arg(long = "keyFile", value_name = "PATH")]
    key_file: Option<PathBuf>,
    /// How members prove membership: keyFile (the key file's SCRAM) or x509 (their TLS
    /// certificates, which must share O, OU and DC; needs --tlsMode preferTLS or
    /// requireTLS and --tlsCAFile). x509 implies --auth.
    #[arg(long = "clusterAuthMode", value_name = "MODE", default_value = "keyFile", value_parser = ["keyFile", "x509"])]
    cluster_auth_mode: String,
    /// TLS for client connections: disabled, allowTLS, preferTLS (both accepted) or
    /// requireTLS (plain connections are closed). TLS 1.2 and 1.3 only.
    #[arg(long = "tlsMode", value_name = "MODE", default_value = "disabled", value_parser = tls_mode)]
    tls_mode: basalt_server::tls::TlsMode,
    /// PEM file with the server's certificate (chain) and its unencrypted private key.
    #[arg(long = "tlsCertificateKeyFile", value_name = "PATH")]
    tls_certificate_key_file: Option<PathBuf>,
    /// PEM file of the CA that signs client certificates: clients must then present one
    /// (for MONGODB-X509 authentication).
    #[arg(long = "tlsCAFile", value_name = "PATH")]
    tls_ca_file: Option<PathBuf>,
    /// With --tlsCAFile: clients without a certificate are accepted too.
    #[arg(long = "tlsAllowConnectionsWithoutCertificates")]
    tls_allow_connections_without_certificates: bool,
    /// Client certificates are not verified (for tests only).
    #[arg(long = "tlsAllowInvalidCertificates")]
    tls_allow_invalid_certificates: bool,
    /// Run as a member of the replica set NAME (initiate it with replSetInitiate).
    #[arg(long = "replSet", value_name = "NAME")]
    repl_set: Option<String>,
    /// The replica set member's oplog size in MB when it first starts (default 990; the
    /// oldest entries go beyond it; replSetResizeOplog changes it later).
    #[arg(long = "oplogSizeMB", value_name = "MB")]
    oplog_size_mb: Option<f64>,
    /// A server parameter, NAME=VALUE (repeatable). Known: ttlMonitorSleepSecs, scanWorkers,
    /// operationMemoryBudgetMB, enableTestCommands, transactionLifetimeLimitSeconds,
    /// transactionSizeLimitBytes, minSnapshotHistoryWindowInSeconds, peerRoutes (fault tests: HOST>VIA,... reaches the member HOST through VIA).
    #[arg(long = "setParameter", value_name = "NAME=VALUE")]
    set_parameter: Vec<String>,
}

/// The block cache from `--cacheSizeGB` (a positive number of GB), else the default.
fn cache_bytes(gb: Option<f64>) -> Result<u64, String> {
    match gb {
        Some(gb) if gb.is_finite() && gb > 0.0 => Ok((gb * 1024.0 * 1024.0 * 1024.0) as u64),
        Some(gb) => Err(format!("bad --cacheSizeGB: {gb}")),
        None => Ok(basalt_storage::default_cache_bytes()),
    }
}

/// The cache of `--cacheSizeGB` as the storage engine's block cache and the column
/// store's decoded chunks: a quarter for the chunks, at most 1 GB.
fn split_cache(cache_bytes: u64) -> (u64, u64) {
    let chunks = (cache_bytes / 4).min(basalt_catalog::CHUNK_CACHE_BYTES_MAX as u64);
    (cache_bytes - chunks, chunks)
}

/// The server parameters `--setParameter NAME=VALUE` can set.
#[derive(Debug, PartialEq)]
struct Parameters {
    /// `ttlMonitorSleepSecs`, in milliseconds.
    ttl_monitor_interval_ms: u64,
    /// `scanWorkers`: threads one collection scan may use.
    scan_workers: usize,
    /// `operationMemoryBudgetMB`, in bytes: what running operations and open cursors
    /// may hold together; `None` for the default (see [`operation_memory_budget_bytes`]).
    operation_memory_budget_bytes: Option<u64>,
    /// `enableTestCommands`: mongod's test hooks (`configureFailPoint`).
    enable_test_commands: bool,
    /// `transactionLifetimeLimitSeconds`: an open transaction older is aborted.
    transaction_lifetime_limit_secs: u64,
    /// `transactionSizeLimitBytes`: the most one transaction may write.
    transaction_size_limit_bytes: u64,
    /// `minSnapshotHistoryWindowInSeconds`: how long snapshot reads' times stay readable.
    snapshot_history_window_secs: u64,
    /// `peerRoutes=HOST>VIA,...`: this member reaches the member HOST through VIA (a
    /// fault-injecting proxy); only with `enableTestCommands`.
    peer_routes: BTreeMap<String, String>,
}

/// The memory operations may hold together: `operationMemoryBudgetMB`, else half of
/// what the block cache leaves of the machine's memory (at least 256 MB), so that the
/// cache, the operations and everything else fit.
fn operation_memory_budget_bytes(given: Option<u64>, cache_bytes: u64) -> u64 {
    const MB: u64 = 1024 * 1024;
    given.unwrap_or_else(|| {
        let memory = basalt_storage::physical_memory_mb().unwrap_or(0) * MB;
        (memory.saturating_sub(cache_bytes) / 2).max(256 * MB)
    })
}

/// The parameters given with `--setParameter`, defaults for the others.
fn parameters(given: &[String]) -> Result<Parameters, String> {
    let mut parameters = Parameters {
        ttl_monitor_interval_ms: basalt_server::TTL_MONITOR_INTERVAL_MS,
        scan_workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
        operation_memory_budget_bytes: None,
        enable_test_commands: false,
        transaction_lifetime_limit_secs: basalt_server::TRANSACTION_LIFETIME_LIMIT_SECS,
        transaction_size_limit_bytes: basalt_server::TRANSACTION_SIZE_LIMIT_BYTES,
        snapshot_history_window_secs: basalt_server::SNAPSHOT_HISTORY_WINDOW_SECS,
        peer_routes: BTreeMap::new(),
    };
    let positive = |name: &str, value: &str| {
        value
            .parse::<u64>()
            .ok()
            .filter(|v| *v > 0)
            .ok_or_else(|| format!("bad {name}: {value}"))
    };
    for parameter in given {
        match parameter.split_once('=') {
            Some((name @ "ttlMonitorSleepSecs", secs)) => {
                parameters.ttl_monitor_interval_ms = positive(name, secs)? * 1000;
            }
            Some((name @ "scanWorkers", n)) => {
                parameters.scan_workers = positive(name, n)? as usize;
            }
            Some((name @ "operationMemoryBudgetMB", mb)) => {
                parameters.operation_memory_budget_bytes = Some(positive(name, mb)? << 20);
            }
            Some((name @ "enableTestCommands", value)) => {
                parameters.enable_test_commands = match value {
                    "1" | "true" => true,
                    "0" | "false" => false,
                    _ => return Err(format!("bad {name}: {value}")),
                };
            }
            Some((name @ "transactionLifetimeLimitSeconds", secs)) => {
                parameters.transaction_lifetime_limit_secs = positive(name, secs)?;
            }
            Some((name @ "transactionSizeLimitBytes", bytes)) => {
                parameters.transaction_size_limit_bytes = positive(name, bytes)?;
            }
            Some((name @ "minSnapshotHistoryWindowInSeconds", secs)) => {
                parameters.snapshot_history_window_secs =
                    secs.parse().map_err(|_| format!("bad {name}: {secs}"))?;
            }
            Some((name @ "peerRoutes", routes)) => {
                for route in routes.split(',') {
                    let (host, via) = route
                        .split_once('>')
                        .filter(|(host, via)| !host.is_empty() && !via.is_empty())
                        .ok_or_else(|| format!("bad {name}: {route} (HOST>VIA)"))?;
                    parameters
                        .peer_routes
                        .insert(host.to_string(), via.to_string());
                }
            }
            _ => return Err(format!("unknown or malformed --setParameter {parameter}")),
        }
    }
    if !parameters.peer_routes.is_empty() && !parameters.enable_test_commands {
        return Err("peerRoutes is a test parameter: it needs enableTestCommands=1".into());
    }
    Ok(parameters)
}

fn main() -> std::process::ExitCode {
    let argv = match config_file::expand(std::env::args_os().collect()) {
        Ok(argv) => argv,
        Err(message) => {
            eprintln!("basalt: {message}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let cli = Cli::parse_from(argv);
    let outcome = match cli.command {
        None => return serve(cli.serve),
        // Lines that were not imported were listed as they happened; the exit status
        // says so too, for scripts.
        Some(Command::Import(args)) => match basalt_bench::import::run(&args) {
            Ok(summary) if summary.failures.is_empty() => Ok(()),
            Ok(summary) => Err(format!(
                "{} line(s) were not imported (listed above)",
                summary.failures.len()
            )),
            Err(e) => Err(e.message),
        },
        Some(Command::Bench(args)) => basalt_bench::bench(&args).map_err(|e| e.message),
        Some(Command::Dump(args)) => tools::dump::run(&args)
            .map(|summary| {
                if !args.quiet {
                    eprintln!(
                        "dumped {} collections, {} documents in {:.2} s",
                        summary.collections, summary.documents, summary.seconds
                    );
                }
            })
            .map_err(|e| e.message),
        Some(Command::Restore(args)) => match tools::restore::run(&args) {
            Ok(summary) => {
                if !args.quiet {
                    if args.oplog_replay {
                        eprintln!("replayed {} oplog entries", summary.oplog_entries);
                    }
                    eprintln!(
                        "{} document(s) restored successfully. {} document(s) failed to restore. ({:.0} documents/s)",
                        summary.documents,
                        summary.failed,
                        summary.docs_per_second()
                    );
                }
                match summary.failed {
                    0 => Ok(()),
                    n => Err(format!("{n} document(s) failed to restore")),
                }
            }
            Err(e) => Err(e.message),
        },
        Some(Command::Export(args)) => tools::export::run(&args).map(drop).map_err(|e| e.message),
    };
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("basalt: {message}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn serve(args: Args) -> std::process::ExitCode {
    let log = LogBuffer::default();
    let level = if args.quiet { "warn" } else { "info" };
    let filter = EnvFilter::try_from_env("BASALT_LOG").unwrap_or_else(|_| EnvFilter::new(level));
    // setParameter's verbosities replace the filter while the server runs.
    let (filter, filter_handle) = tracing_subscriber::reload::Layer::new(filter);
    log.on_filter_change(Box::new(move |directives| {
        if let Err(e) = filter_handle.reload(EnvFilter::new(directives)) {
            eprintln!("basalt: cannot change the log filter: {e}");
        }
    }));
    // The log goes to --logpath in mongod's JSON lines, else to stderr for people.
    let output: Box<dyn Layer<tracing_subscriber::Registry> + Send + Sync> = match &args.log_path {
        Some(path) => match LogFile::open(path, args.log_append) {
            Ok(file) => {
                let file = std::sync::Arc::new(file);
                log.set_file(file.clone());
                Box::new(LogFileLayer(file))
            }
            Err(e) => {
                eprintln!("basalt: cannot open --logpath {}: {e}", path.display());
                return std::process::ExitCode::FAILURE;
            }
        },
        None => Box::new(tracing_subscriber::fmt::layer().with_writer(std::io::stderr)),
    };
    tracing_subscriber::registry()
        .with(output.with_filter(filter))
        // getLog keeps what mongod logs at its default verbosity. Unfiltered, the buffer
        // also took every debug and trace record of the storage engine, formatting
        // several per query.
        .with(log.clone().with_filter(LevelFilter::INFO))
        .init();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("basalt: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args, log)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(message) => {
            tracing::error!("{message}");
            eprintln!("basalt: {message}");
            std::process::ExitCode::FAILURE
        }
    }
}

use basalt_server::tls::TlsMode;

/// `--profile`: a level, or the name mongod's configuration file gives it.
fn profile_level(value: &str) -> Result<i32, String> {
    match value {
        "0" | "off" => Ok(0),
        "1" | "slowOp" => Ok(1),
        "2" | "all" => Ok(2),
        _ => Err(format!("{value} is not one of 0, 1, 2, off, slowOp, all")),
    }
}

fn sample_rate(value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(rate) if (0.0..=1.0).contains(&rate) => Ok(rate),
        _ => Err(format!("{value} is not a number between 0 and 1")),
    }
}

fn tls_mode(name: &str) -> Result<basalt_server::tls::TlsMode, String> {
    basalt_server::tls::TlsMode::from_name(name)
        .ok_or_else(|| format!("{name} is not one of disabled, allowTLS, preferTLS, requireTLS"))
}

/// The key of `--keyFile`, refused (as by mongod) when others may read the file.
fn read_key_file(path: &std::path::Path) -> Result<String, String> {
    let metadata = std::fs::metadata(path)
        .map_err(|e| format!("cannot read --keyFile {}: {e}", path.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if metadata.permissions().mode() & 0o077 != 0 {
            return Err(format!(
                "permissions on {} are too open (chmod 600 or 400 it)",
                path.display()
            ));
        }
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read --keyFile {}: {e}", path.display()))?;
    basalt_auth::key_from_file_text(&text)
        .map_err(|e| format!("bad --keyFile {}: {}", path.display(), e.message))
}

async fn run(args: Args, log: LogBuffer) -> Result<(), String> {
    std::fs::create_dir_all(&args.dbpath)
        .map_err(|e| format!("cannot create --dbpath {}: {e}", args.dbpath.display()))?;
    let bind_ip = if args.bind_ip_all {
        vec!["0.0.0.0".to_string()]
    } else {
        args.bind_ip
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    };
    if let Some(path) = &args.config {
        tracing::info!("options from the configuration file {}", path.display());
    }
    let parameters = parameters(&args.set_parameter)?;
    let options = ServerOptions {
        bind_ip,
        port: args.port,
        dbpath: args.dbpath.clone(),
        argv: std::env::args().collect(),
        scripting_enabled: !args.noscripting,
        ttl_monitor_interval_ms: parameters.ttl_monitor_interval_ms,
        scan_workers: parameters.scan_workers,
        max_conns: args.max_conns,
        quiet: args.quiet,
        http_port: args.http_port,
        profile: basalt_server::ProfileOptions {
            level: args.profile,
            slow_ms: args.slowms,
            sample_rate: args.slow_op_sample_rate,
        },
        repl_set: args.repl_set.clone().filter(|name| !name.is_empty()),
        oplog_size_mb: args.oplog_size_mb,
        enable_test_commands: parameters.enable_test_commands,
        transaction_lifetime_limit_secs: parameters.transaction_lifetime_limit_secs,
        transaction_size_limit_bytes: parameters.transaction_size_limit_bytes,
        snapshot_history_window_secs: parameters.snapshot_history_window_secs,
        peer_routes: parameters.peer_routes,
        auth: args.auth && !args.noauth,
        key: args.key_file.as_deref().map(read_key_file).transpose()?,
        tls: basalt_server::tls::TlsOptions {
            mode: args.tls_mode,
            certificate_key_file: args.tls_certificate_key_file.clone(),
            ca_file: args.tls_ca_file.clone(),
            allow_connections_without_certificates: args.tls_allow_connections_without_certificates,
            allow_invalid_certificates: args.tls_allow_invalid_certificates,
        },
        cluster_auth_x509: args.cluster_auth_mode == "x509",
    };
    if options.cluster_auth_x509 && matches!(options.tls.mode, TlsMode::Disabled | TlsMode::Allow) {
        return Err("--clusterAuthMode x509 needs --tlsMode preferTLS or requireTLS".into());
    }
    let cache_bytes = cache_bytes(args.cache_size_gb)?;
    let budget_bytes =
        operation_memory_budget_bytes(parameters.operation_memory_budget_bytes, cache_bytes);
    basalt_memory::server_budget().set_limit_bytes(budget_bytes as usize);
    // The cache is the storage engine's blocks and the column store's decoded chunks.
    let (block_bytes, chunk_bytes) = split_cache(cache_bytes);
    basalt_catalog::set_chunk_cache_limit(chunk_bytes as usize);
    tracing::info!(
        "memory: block cache {} MB, column chunks {} MB, operations {} MB",
        block_bytes >> 20,
        chunk_bytes >> 20,
        budget_bytes >> 20
    );
    // A read-only, full, locked or corrupt data directory: the error names it, as
    // mongod refuses to start on a read-only dbpath (IllegalOperation).
    let engine =
        FjallEngine::open_with_cache(&args.dbpath, block_bytes).map_err(|e| e.to_string())?;
    let engine: Arc<dyn basalt_storage::Engine> = Arc::new(engine);
    // The catalog's writes honour the thread's write scope (a transaction, `applyOps`),
    // and on a replica set member carry the id of the log entry they apply.
    let catalog_engine: Arc<dyn basalt_storage::Engine> =
        Arc::new(basalt_repl::StampedEngine::new(engine.clone()));
    let server =
        Arc::new(Server::new(catalog_engine, options.clone(), log).map_err(|e| e.to_string())?);
    server
        .open_replica_set(engine)
        .await
        .map_err(|e| e.to_string())?;
    let listeners = bind(&options).map_err(|e| {
        format!(
            "cannot listen on {}:{}: {e}",
            options.bind_ip.join(","),
            options.port
        )
    })?;
    tracing::info!(
        "basalt {} listening on {}:{} with data in {}",
        env!("CARGO_PKG_VERSION"),
        options.bind_ip.join(","),
        options.port,
        options.dbpath.display()
    );
    server
        .serve(listeners, shutdown_signal())
        .await
        .map_err(|e| e.to_string())?;
    tracing::info!("shutdown complete");
    Ok(())
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        _ = terminate => {},
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_size() {
        assert_eq!(cache_bytes(Some(0.5)), Ok(512 * 1024 * 1024));
        assert!(cache_bytes(None).unwrap() >= 256 * 1024 * 1024);
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(cache_bytes(Some(bad)).is_err(), "{bad}");
        }
        // A quarter to the column store's chunks, at most 1 GB; the rest to blocks.
        let gb = 1 << 30;
        assert_eq!(split_cache(gb), (3 * gb / 4, gb / 4));
        assert_eq!(split_cache(10 * gb), (9 * gb, gb));
    }

    #[test]
    fn set_parameter() {
        let defaults = parameters(&[]).unwrap();
        assert_eq!(
            defaults.ttl_monitor_interval_ms,
            basalt_server::TTL_MONITOR_INTERVAL_MS
        );
        assert!(defaults.scan_workers >= 1);
        assert_eq!(
            parameters(&[
                "ttlMonitorSleepSecs=2".into(),
                "scanWorkers=3".into(),
                "operationMemoryBudgetMB=512".into(),
                "enableTestCommands=1".into(),
                "transactionLifetimeLimitSeconds=5".into(),
                "transactionSizeLimitBytes=1000".into(),
                "minSnapshotHistoryWindowInSeconds=0".into(),
                "peerRoutes=127.0.0.1:1>127.0.0.1:2,127.0.0.1:3>127.0.0.1:4".into(),
            ]),
            Ok(Parameters {
                ttl_monitor_interval_ms: 2000,
                scan_workers: 3,
                operation_memory_budget_bytes: Some(512 << 20),
                enable_test_commands: true,
                transaction_lifetime_limit_secs: 5,
                transaction_size_limit_bytes: 1000,
                snapshot_history_window_secs: 0,
                peer_routes: BTreeMap::from([
                    ("127.0.0.1:1".to_string(), "127.0.0.1:2".to_string()),
                    ("127.0.0.1:3".to_string(), "127.0.0.1:4".to_string()),
                ]),
            })
        );
        assert_eq!(operation_memory_budget_bytes(Some(1 << 30), 0), 1 << 30);
        assert!(operation_memory_budget_bytes(None, u64::MAX) >= 256 << 20);
        for bad in [
            "ttlMonitorSleepSecs=0",
            "ttlMonitorSleepSecs=x",
            "scanWorkers=0",
            "operationMemoryBudgetMB=0",
            "enableTestCommands=yes",
            "transactionLifetimeLimitSeconds=0",
            "transactionSizeLimitBytes=0",
            "minSnapshotHistoryWindowInSeconds=-1",
            "peerRoutes=127.0.0.1:1>127.0.0.1:2",
            "peerRoutes=127.0.0.1:1",
            "nope=1",
            "nope",
        ] {
            assert!(parameters(&[bad.into()]).is_err(), "{bad}");
        }
    }
}
