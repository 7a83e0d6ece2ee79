//! The connection storm: `--connections` clients (5,000 by default) connect at once and
//! each sends `hello`, as an application fleet does when it starts or its pools refill
//! after a failover. Measured: the wall time from the first connect until every
//! connection has its answer, each connection's time from connect to answer, and how
//! much the server's resident memory grew per connection while they were all open (from
//! serverStatus, as any client sees it). Every answer must be `ok: 1`; a connection
//! refused, closed or unanswered makes the run's answer wrong.
//!
//! Raw sockets framed by `crates/wire`, not the driver: a driver's pool and monitors
//! would be what was measured.

use crate::io_error;
use crate::measure::{repeat, Samples};
use crate::raw_wire::{as_i64, message_length, reply_body};
use crate::report::Status;
use basalt_error::{Error, ErrorCode, Result};
use basalt_wire::{encode_op_msg, HEADER_SIZE_BYTES};
use bson::{doc, rawdoc, Document};
use mongodb::Database;
use std::future::IntoFuture;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinSet;

pub(crate) const CONNECTIONS_DEFAULT: usize = 5_000;
/// How long a storm may take before its unanswered connections count as failed.
const STORM_TIMEOUT_S: u64 = 60;
/// How long the server may take to let a storm's connections go.
const CLOSE_TIMEOUT_S: u64 = 30;
/// Between polls of the server's figures after a storm.
const SETTLE_POLL_MS: u64 = 100;
/// Polls in a row with the same resident memory that say the server has settled.
const SETTLED_POLLS: usize = 3;
/// Descriptors the bench needs beyond the storm's sockets.
const SPARE_FILES: u64 = 64;

#[derive(Debug)]
pub(crate) struct StormResult {
    pub connections: usize,
    /// Wall time of each storm.
    pub storms: Samples,
    /// Each connection's time from connect to answer, over all storms.
    pub latencies: Samples,
    /// Growth of the server's resident memory per open connection during the first
    /// storm (later ones reuse what the allocator kept); `None` when the server does not
    /// report its memory.
    pub resident_bytes_per_connection: Option<f64>,
    pub status: Status,
}

impl StormResult {
    pub(crate) fn connections_per_second(&self) -> f64 {
        self.connections as f64 / self.storms.best().as_secs_f64().max(1e-9)
    }
}

/// Runs storms of `connections` (fewer if this process may not open that many sockets)
/// against `address` (`host:port`), `runs` times or until `budget` is spent; `db` reads
/// the server's counters between them.
pub(crate) fn run(
    db: &Database,
    runtime: &tokio::runtime::Runtime,
    address: &str,
    connections: usize,
    runs: usize,
    budget: Duration,
) -> Result<StormResult> {
    let open_files = rlimit::increase_nofile_limit(u64::MAX)
        .map_err(|e| io_error("cannot raise the open files limit", e))?;
    let allowed = usize::try_from(open_files.saturating_sub(SPARE_FILES)).unwrap_or(usize::MAX);
    if allowed < connections {
        eprintln!(
            "basalt: the open files limit ({open_files}) allows a storm of {allowed} connections, not {connections}"
        );
    }
    let connections = connections.min(allowed);
    let target = runtime
        .block_on(tokio::net::lookup_host(address))
        .ok()
        .and_then(|mut addrs| addrs.next())
        .ok_or_else(|| io_error("cannot resolve", address))?;
    let mut latencies = Vec::with_capacity(connections * runs);
    let mut resident = None;
    let mut status = Status::Correct;
    let storms = repeat(runs, budget, |_| {
        let before = runtime.block_on(connection_figures(db))?;
        let (open, storm) = runtime.block_on(open_at_once(target, connections));
        let during = runtime.block_on(connection_figures(db))?;
        drop(open);
        if let (None, Some(before_mb), Some(during_mb)) =
            (resident, before.resident_mb, during.resident_mb)
        {
            resident = Some((during_mb - before_mb) as f64 * 1024.0 * 1024.0 / connections as f64);
        }
        runtime.block_on(wait_until_closed(db, before.current))?;
        if let (Status::Correct, Some(why)) = (&status, storm.failure) {
            status = Status::Wrong(why);
        }
        latencies.extend(storm.latencies);
        Ok::<_, Error>(storm.elapsed)
    })?;
    Ok(StormResult {
        connections,
        storms,
        latencies: Samples::new(latencies),
        resident_bytes_per_connection: resident,
        status,
    })
}

struct Storm {
    elapsed: Duration,
    latencies: Vec<Duration>,
    /// What went wrong, for the first connection it went wrong on, and how many did.
    failure: Option<String>,
}

/// Opens `connections` connections at once and sends hello on each; they stay open
/// until the returned sockets are dropped.
async fn open_at_once(target: SocketAddr, connections: usize) -> (Vec<TcpStream>, Storm) {
    let started = Instant::now();
    let mut tasks = JoinSet::new();
    for i in 0..connections {
        let request_id = i32::try_from(i + 1).unwrap_or(i32::MAX);
        tasks.spawn(connect_and_hello(target, request_id));
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(STORM_TIMEOUT_S);
    let mut open = Vec::with_capacity(connections);
    let mut latencies = Vec::with_capacity(connections);
    let mut first_failure = None;
    while let Ok(Some(joined)) = tokio::time::timeout_at(deadline, tasks.join_next()).await {
        match joined {
            Ok(Ok((stream, took))) => {
                open.push(stream);
                latencies.push(took);
            }
            Ok(Err(why)) => {
                first_failure.get_or_insert(why);
            }
            Err(panicked) => {
                first_failure.get_or_insert(panicked.to_string());
            }
        }
    }
    let elapsed = started.elapsed();
    if !tasks.is_empty() {
        first_failure.get_or_insert(format!("no answer within {STORM_TIMEOUT_S} s"));
    }
    tasks.abort_all();
    let failed = connections - open.len();
    let failure = first_failure.map(|why| {
        format!("{failed} of {connections} connections got no hello answer; the first: {why}")
    });
    (
        open,
        Storm {
            elapsed,
            latencies,
            failure,
        },
    )
}

async fn connect_and_hello(
    target: SocketAddr,
    request_id: i32,
) -> std::result::Result<(TcpStream, Duration), String> {
    let started = Instant::now();
    let mut stream = TcpStream::connect(target)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    // Closing sends a reset: no TIME_WAIT is left behind, so repeated storms of
    // thousands do not run out of ports.
    socket2::SockRef::from(&stream)
        .set_linger(Some(Duration::ZERO))
        .map_err(|e| format!("SO_LINGER: {e}"))?;
    let hello = rawdoc! { "hello": 1, "$db": "admin" };
    stream
        .write_all(&encode_op_msg(request_id, 0, 0, &hello, None))
        .await
        .map_err(|e| format!("send: {e}"))?;
    let mut reply = vec![0; HEADER_SIZE_BYTES];
    let closed = |e: std::io::Error| format!("closed without an answer ({e})");
    stream.read_exact(&mut reply).await.map_err(closed)?;
    reply.resize(message_length(&reply), 0);
    stream
        .read_exact(&mut reply[HEADER_SIZE_BYTES..])
        .await
        .map_err(closed)?;
    let body = reply_body(&reply).map_err(|e| e.message)?;
    if body.get("ok").and_then(as_i64) != Some(1) {
        return Err(format!("answered {body}"));
    }
    Ok((stream, started.elapsed()))
}

/// What serverStatus says of connections and memory.
struct ConnectionFigures {
    current: i64,
    resident_mb: Option<i64>,
}

async fn connection_figures(db: &Database) -> Result<ConnectionFigures> {
    let status = db
        .client()
        .database("admin")
        .run_command(doc! {"serverStatus": 1})
        .into_future()
        .await
        .map_err(|e| io_error("serverStatus failed", e))?;
    let field = |section: &str, name: &str| {
        status
            .get_document(section)
            .ok()
            .and_then(|s: &Document| s.get(name))
            .and_then(as_i64)
    };
    Ok(ConnectionFigures {
        current: field("connections", "current").unwrap_or(0),
        resident_mb: field("mem", "resident"),
    })
}

/// Waits until the server has seen a storm's connections close and let them go (its
/// resident memory stops falling as their threads end), so the next storm neither starts
/// beside the last one's teardown nor is measured with it.
async fn wait_until_closed(db: &Database, current_before: i64) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(CLOSE_TIMEOUT_S);
    let mut resident = Vec::new();
    loop {
        let figures = connection_figures(db).await?;
        resident.push(figures.resident_mb);
        let settled = resident.len() >= SETTLED_POLLS
            && resident[resident.len() - SETTLED_POLLS..]
                .windows(2)
                .all(|w| w[0] == w[1]);
        if figures.current <= current_before && settled {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(Error::new(
                ErrorCode::OPERATION_FAILED,
                format!(
                    "the server had not let the storm's connections go after {CLOSE_TIMEOUT_S} s"
                ),
            ));
        }
        tokio::time::sleep(Duration::from_millis(SETTLE_POLL_MS)).await;
    }
}
