//! The `basalt` binary: starts the server with mongod's command-line flags, or runs one
//! of the tools that talk to a server: `basalt import` (mongoimport's job) and
//! `basalt bench` (the W1–W5 benchmarks beside their peers).

use basalt_bench::{BenchArgs, ImportArgs};
use basalt_server::{bind, LogBuffer, Server, ServerOptions};
use basalt_storage::FjallEngine;
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::sync::Arc;
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
    args_conflicts_with_subcommands = true
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
}

/// The server's flags, mongod's names.
#[derive(clap::Args, Debug)]
struct Args {
    /// Port to listen on.
    #[arg(long, default_value_t = 27017)]
    port: u16,
    /// Comma-separated addresses to listen on.
    #[arg(long = "bind_ip", default_value = "127.0.0.1")]
    bind_ip: String,
    /// Listen on every IPv4 address (same as --bind_ip 0.0.0.0).
    #[arg(long = "bind_ip_all")]
    bind_ip_all: bool,
    /// Directory where the data lives; created if missing.
    #[arg(long, default_value = "./data")]
    dbpath: PathBuf,
    /// Log only warnings and errors.
    #[arg(long)]
    quiet: bool,
    /// Refuse server-side JavaScript ($where, mapReduce, $function, $accumulator).
    #[arg(long)]
    noscripting: bool,
    /// A server parameter, NAME=VALUE (repeatable). Known: ttlMonitorSleepSecs.
    #[arg(long = "setParameter", value_name = "NAME=VALUE")]
    set_parameter: Vec<String>,
}

/// The interval of the TTL monitor from `--setParameter ttlMonitorSleepSecs=N`.
fn ttl_monitor_interval_ms(parameters: &[String]) -> Result<u64, String> {
    let mut interval_ms = basalt_server::TTL_MONITOR_INTERVAL_MS;
    for parameter in parameters {
        match parameter.split_once('=') {
            Some(("ttlMonitorSleepSecs", secs)) => {
                let secs: u64 = secs
                    .parse()
                    .ok()
                    .filter(|s| *s > 0)
                    .ok_or_else(|| format!("bad ttlMonitorSleepSecs: {secs}"))?;
                interval_ms = secs * 1000;
            }
            _ => return Err(format!("unknown or malformed --setParameter {parameter}")),
        }
    }
    Ok(interval_ms)
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
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
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_filter(filter),
        )
        .with(log.clone())
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
    let options = ServerOptions {
        bind_ip,
        port: args.port,
        dbpath: args.dbpath.clone(),
        argv: std::env::args().collect(),
        scripting_enabled: !args.noscripting,
        ttl_monitor_interval_ms: ttl_monitor_interval_ms(&args.set_parameter)?,
    };
    let engine = FjallEngine::open(&args.dbpath)
        .map_err(|e| format!("cannot open storage at {}: {e}", args.dbpath.display()))?;
    let server =
        Arc::new(Server::new(Arc::new(engine), options.clone(), log).map_err(|e| e.to_string())?);
    let listeners = bind(&options).await.map_err(|e| {
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
    fn ttl_monitor_interval_from_set_parameter() {
        assert_eq!(
            ttl_monitor_interval_ms(&[]),
            Ok(basalt_server::TTL_MONITOR_INTERVAL_MS)
        );
        assert_eq!(
            ttl_monitor_interval_ms(&["ttlMonitorSleepSecs=2".into()]),
            Ok(2000)
        );
        for bad in [
            "ttlMonitorSleepSecs=0",
            "ttlMonitorSleepSecs=x",
            "nope=1",
            "nope",
        ] {
            assert!(ttl_monitor_interval_ms(&[bad.into()]).is_err(), "{bad}");
        }
    }
}
