//! Runs the peers (`bench/peers.py`: DuckDB, SQLite JSON, PostgreSQL jsonb) on the
//! generated data and reads their timings and answers back. The script is driven with a
//! JSON plan so the queries, their SQL and the expected answers stay in the Rust workload
//! files; the answers are checked here exactly as Basalt's are.
//!
//! PostgreSQL is the server on 127.0.0.1:5432 when one lets the script in, else a private
//! one the script starts from the binaries on PATH and stops at the end; without either,
//! the peer is reported as skipped with the reason.

use crate::answer::Answer;
use crate::io_error;
use crate::measure::Samples;
use crate::report::{Outcome, Status};
use crate::workloads::Dataset;
use basalt_error::{Error, ErrorCode, Result};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The engines `bench/peers.py` knows.
pub(crate) const ENGINES: [&str; 3] = ["duckdb", "sqlite", "postgres"];

/// One peer's figures.
#[derive(Debug, Default)]
pub(crate) struct PeerRun {
    pub engine: String,
    pub version: String,
    /// Threads the engine uses for a query (for docs/s per core).
    pub threads: usize,
    /// Per dataset: load time and index (setup) time.
    pub loads: BTreeMap<String, (Duration, Duration)>,
    /// Per (dataset, query name).
    pub queries: BTreeMap<(String, String), Outcome>,
}

/// What the peer side produced: the engines that ran, and why others did not.
#[derive(Debug, Default)]
pub(crate) struct Peers {
    pub python: String,
    pub runs: Vec<PeerRun>,
    pub skipped: Vec<(String, String)>,
}

/// The script, found beside the working directory's `bench/` or given by BASALT_BENCH_DIR.
fn script() -> PathBuf {
    let dir =
        std::env::var_os("BASALT_BENCH_DIR").map_or_else(|| PathBuf::from("bench"), PathBuf::from);
    dir.join("peers.py")
}

/// `bench/.venv/bin/python` when `make bench` made it, else `python3`.
pub(crate) fn default_python() -> PathBuf {
    let venv = PathBuf::from("bench/.venv/bin/python");
    if venv.exists() {
        venv
    } else {
        PathBuf::from("python3")
    }
}

pub(crate) fn run(
    python: &Path,
    engines: &[String],
    datasets: &[Dataset],
    workdir: &Path,
    threads: usize,
    runs: usize,
    budget: Duration,
) -> Result<Peers> {
    let mut peers = Peers::default();
    let (wanted, unknown): (Vec<String>, Vec<String>) = engines
        .iter()
        .cloned()
        .partition(|e| ENGINES.contains(&e.as_str()));
    for engine in unknown {
        let reason = format!("unknown peer (known: {})", ENGINES.join(", "));
        peers.skipped.push((engine, reason));
    }
    if wanted.is_empty() || datasets.is_empty() {
        return Ok(peers);
    }
    let script = script();
    if !script.exists() {
        for engine in wanted {
            peers.skipped.push((
                engine,
                format!(
                    "{} not found (run from the repository root)",
                    script.display()
                ),
            ));
        }
        return Ok(peers);
    }
    let plan = json!({
        "engines": wanted,
        "workdir": workdir,
        "threads": threads,
        "runs": runs,
        "budget_s": budget.as_secs_f64(),
        "datasets": datasets.iter().map(|d| json!({
            "name": d.collection(),
            "file": d.peer_file,
            "docs": d.docs,
            "setup": d.peer_setup,
            "queries": d.queries.iter().map(|q| json!({
                "name": q.name,
                "variants": q.variants.iter().map(|v| json!({
                    "sql": v.sql,
                    "count_rows": matches!(v.expected, Answer::Count(_)),
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    });
    let mut child = Command::new(python)
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| io_error(format!("cannot run {}", python.display()), e))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(plan.to_string().as_bytes())
            .map_err(|e| io_error("cannot send the plan to the peers", e))?;
    }
    let output = child
        .wait_with_output()
        .map_err(|e| io_error("the peers failed", e))?;
    if !output.status.success() {
        return Err(Error::new(
            ErrorCode::OPERATION_FAILED,
            format!(
                "{} {} failed ({})",
                python.display(),
                script.display(),
                output.status
            ),
        ));
    }
    let result: Value = serde_json::from_slice(&output.stdout)
        .map_err(|e| io_error("the peers' output is not JSON", e))?;
    peers.python = result["python"].as_str().unwrap_or_default().to_string();
    if let Some(unavailable) = result["unavailable"].as_object() {
        for (engine, reason) in unavailable {
            let reason = reason.as_str().unwrap_or_default();
            let reason = if reason.starts_with("ModuleNotFoundError") {
                format!("{reason} (pip install -r bench/requirements.txt)")
            } else {
                reason.to_string()
            };
            peers.skipped.push((engine.clone(), reason));
        }
    }
    if let Some(engines) = result["engines"].as_object() {
        for (engine, figures) in engines {
            peers.runs.push(read_engine(engine, figures, datasets));
        }
    }
    Ok(peers)
}

fn read_engine(engine: &str, figures: &Value, datasets: &[Dataset]) -> PeerRun {
    let mut run = PeerRun {
        engine: engine.to_string(),
        version: figures["version"].as_str().unwrap_or_default().to_string(),
        threads: figures["threads"].as_u64().unwrap_or(1) as usize,
        ..PeerRun::default()
    };
    let seconds = |v: &Value| Duration::from_secs_f64(v.as_f64().unwrap_or(0.0).max(0.0));
    for dataset in datasets {
        let name = dataset.collection();
        let figures = &figures["datasets"][name];
        if figures.is_null() {
            continue;
        }
        run.loads.insert(
            name.to_string(),
            (seconds(&figures["load_s"]), seconds(&figures["setup_s"])),
        );
        for query in &dataset.queries {
            let result = &figures["queries"][query.name];
            if result.is_null() {
                continue;
            }
            let outcome = if let Some(error) = result["error"].as_str() {
                Outcome::failed(Status::Unsupported(error.to_string()))
            } else {
                let times = result["times_s"]
                    .as_array()
                    .map(|t| t.iter().map(seconds).collect())
                    .unwrap_or_default();
                let answers = result["answers"].as_array().cloned().unwrap_or_default();
                let with_sql = query.variants.iter().filter(|v| v.sql.is_some());
                let status = with_sql
                    .zip(answers.iter())
                    .find_map(|(variant, got)| {
                        variant.expected.check(&Answer::from_json(got)).err()
                    })
                    .map_or(Status::Correct, Status::Wrong);
                Outcome {
                    samples: Samples::new(times),
                    status,
                }
            };
            run.queries
                .insert((name.to_string(), query.name.to_string()), outcome);
        }
    }
    run
}
