//! The table a bench run prints: loads, queries, W4 and the connection storm, each peer
//! beside Basalt with Basalt's ratio to it (peer time / Basalt time, so above 1 means
//! Basalt is faster).

use super::{format_duration, format_rate, format_ratio, rate, Report, Status};
use crate::measure::Samples;
use crate::workloads::conns::StormResult;
use std::fmt::Write;

pub(crate) fn to_table(report: &Report) -> String {
    let m = &report.machine;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "basalt bench --size {} --seed {}: {} cores ({}), {:.1} GiB, {}; basalt {} at {} ({} scan worker{})",
        report.size,
        report.seed,
        m.cores,
        m.cpu,
        m.memory_gib,
        m.os,
        m.basalt_version,
        m.git_commit,
        report.scan_workers,
        if report.scan_workers == 1 { "" } else { "s" }
    );
    let peers: Vec<String> = report
        .peers
        .runs
        .iter()
        .map(|r| {
            format!(
                "{} {} ({} thread{})",
                r.engine,
                r.version,
                r.threads,
                if r.threads == 1 { "" } else { "s" }
            )
        })
        .collect();
    let _ = writeln!(
        out,
        "peers: {}",
        if peers.is_empty() {
            "none".to_string()
        } else {
            peers.join(", ")
        }
    );
    for (engine, reason) in &report.peers.skipped {
        let _ = writeln!(out, "  {engine} skipped: {reason}");
    }
    let _ = writeln!(
        out,
        "(3.1x): Basalt is 3.1 times faster than the peer, (1/13): 13 times slower;\n\
         docs/s/core = documents scanned / best time / threads the engine used"
    );
    if !report.datasets.is_empty() {
        out.push('\n');
        out.push_str(&loads(report));
        out.push('\n');
        out.push_str(&queries(report));
    }
    if let Some(kv) = &report.kv {
        out.push('\n');
        let _ = writeln!(
            out,
            "W4 key-value: {} threads, {} keys of 32 B, values 100-1900 B ({:.0} MB)",
            crate::workloads::w4_kv::THREADS,
            kv.puts.ops,
            kv.value_bytes as f64 / 1e6
        );
        let mut rows = vec![header(&[
            "phase", "ops/s", "p50", "p90", "p99", "p99.9", "max",
        ])];
        let phases = [
            ("put", &kv.puts),
            ("get by _id", &kv.gets),
            ("put, column store index", &kv.column_store_puts),
        ];
        for (name, phase) in phases {
            let mut row = vec![name.to_string(), format_rate(phase.ops_per_second())];
            row.extend(percentiles(&phase.latencies));
            rows.push(row);
        }
        out.push_str(&grid(&rows));
    }
    if let Some(storm) = &report.storm {
        out.push('\n');
        out.push_str(&storm_table(storm));
    }
    if let Some(tools) = &report.tools {
        let _ = writeln!(
            out,
            "\nTools on W1 ({} documents, archive {:.0} MB, Parquet {:.0} MB): {}",
            tools.documents,
            tools.archive_bytes as f64 / 1e6,
            tools.parquet_bytes as f64 / 1e6,
            match &tools.status {
                Status::Correct => "restored and exported documents checked".to_string(),
                Status::Wrong(why) | Status::Unsupported(why) => format!("WRONG: {why}"),
            }
        );
        let mut rows = vec![header(&["", "docs/s"])];
        for (name, docs_per_second) in tools.rates() {
            rows.push(vec![name.to_string(), format_rate(docs_per_second)]);
        }
        out.push_str(&grid(&rows));
    }
    let _ = writeln!(
        out,
        "\ngenerated in {:.1} s; whole run {:.1} s",
        report.generate.as_secs_f64(),
        report.total.as_secs_f64()
    );
    out
}

fn loads(report: &Report) -> String {
    let mut head = vec![
        "load".to_string(),
        "docs".into(),
        "MB".into(),
        "Basalt docs/s".into(),
    ];
    for run in &report.peers.runs {
        head.push(format!("{} docs/s", run.engine));
    }
    let mut rows = vec![head];
    let mut notes = Vec::new();
    for d in &report.datasets {
        let basalt = rate(d.docs, d.load);
        let mut row = vec![
            format!("{} {}", d.id.name(), d.title),
            d.docs.to_string(),
            format!("{:.0}", d.bytes as f64 / 1e6),
            format_rate(basalt),
        ];
        for run in &report.peers.runs {
            row.push(match run.loads.get(d.id.name()) {
                Some((load, _)) => {
                    let peer = rate(d.docs, *load);
                    format!("{} ({})", format_rate(peer), format_ratio(basalt / peer))
                }
                None => "-".into(),
            });
        }
        rows.push(row);
        for (keys, took) in &d.indexes {
            notes.push(format!(
                "  {}: index {keys} built in {} after the load",
                d.id.name(),
                format_duration(*took)
            ));
        }
        let storage = d.storage;
        notes.push(format!(
            "  {}: on disk {:.1} MB of records ({} of its {:.1} MB of BSON) and {:.1} MB of indexes (collStats)",
            d.id.name(),
            storage.storage_bytes as f64 / 1e6,
            format_ratio(storage.storage_bytes as f64 / storage.bson_bytes.max(1) as f64),
            storage.bson_bytes as f64 / 1e6,
            storage.index_bytes as f64 / 1e6,
        ));
        if let Some(bytes) = storage.column_store_bytes {
            notes.push(format!(
                "  {}: column store index {:.1} MB on disk ({} of the BSON)",
                d.id.name(),
                bytes as f64 / 1e6,
                format_ratio(bytes as f64 / storage.bson_bytes.max(1) as f64),
            ));
        }
        if let Some(again) = &d.column_store_load {
            notes.push(format!(
                "  {}: loaded again with a column store index in {} ({} docs/s, {:.2}x the load's time); every row group current {}",
                d.id.name(),
                format_duration(again.load),
                format_rate(rate(d.docs, again.load)),
                again.load.as_secs_f64() / d.load.as_secs_f64().max(1e-9),
                match again.current_after {
                    Some(after) => format!("{} after", format_duration(after)),
                    None => "not within the wait".to_string(),
                },
            ));
        }
        if let Some(ts) = &d.time_series_load {
            notes.push(format!(
                "  {}: loaded again into a time-series collection in {} ({} docs/s); its buckets {:.1} MB on disk ({} of the BSON; the documents' {}), indexes {:.1} MB",
                d.id.name(),
                format_duration(ts.load),
                format_rate(rate(d.docs, ts.load)),
                ts.storage_bytes as f64 / 1e6,
                format_ratio(ts.storage_bytes as f64 / storage.bson_bytes.max(1) as f64),
                format_ratio(storage.storage_bytes as f64 / storage.bson_bytes.max(1) as f64),
                ts.index_bytes as f64 / 1e6,
            ));
            for keys in &ts.refused_indexes {
                notes.push(format!(
                    "  {}: the time-series collection refused index {keys}",
                    d.id.name()
                ));
            }
        }
        if d.load_failures > 0 {
            notes.push(format!(
                "  {}: {} lines failed to load",
                d.id.name(),
                d.load_failures
            ));
        }
    }
    let mut out = grid(&rows);
    for note in notes {
        out.push_str(&note);
        out.push('\n');
    }
    out
}

fn queries(report: &Report) -> String {
    let mut head = vec![
        "query".to_string(),
        "runs".into(),
        "Basalt best".into(),
        "median".into(),
        "docs/s/core".into(),
    ];
    for run in &report.peers.runs {
        head.push(format!("{} best", run.engine));
    }
    head.push("answers".into());
    let mut rows = vec![head];
    let mut notes = Vec::new();
    let cores = report.scan_workers as f64;
    for d in &report.datasets {
        for q in &d.queries {
            let label = q.label(d.id);
            let mut row = vec![label.clone(), q.basalt.samples.len().to_string()];
            match q.basalt.best() {
                Some(best) => {
                    row.push(format_duration(best));
                    row.push(format_duration(q.basalt.samples.median()));
                    row.push(match q.scanned_docs {
                        Some(docs) => format_rate(rate(docs, best) / cores),
                        None => format!("{} q/s", format_rate(rate(1, q.basalt.samples.median()))),
                    });
                }
                None => row.extend(["-".to_string(), "-".into(), "-".into()]),
            }
            let mut answers = vec![status_word(&q.basalt.status, "Basalt", &label, &mut notes)];
            for run in &report.peers.runs {
                let Some(outcome) = report.peer_outcome(&run.engine, d.id, q.name) else {
                    row.push("-".into());
                    continue;
                };
                row.push(match (outcome.best(), q.basalt.best()) {
                    (Some(peer), Some(basalt)) => format!(
                        "{} ({})",
                        format_duration(peer),
                        format_ratio(peer.as_secs_f64() / basalt.as_secs_f64().max(1e-12))
                    ),
                    (Some(peer), None) => format_duration(peer),
                    (None, _) => "-".into(),
                });
                answers.push(status_word(
                    &outcome.status,
                    &run.engine,
                    &label,
                    &mut notes,
                ));
            }
            row.push(answers.join("/"));
            rows.push(row);
        }
    }
    let mut out = grid(&rows);
    let _ = writeln!(
        out,
        "  answers: Basalt{}",
        report
            .peers
            .runs
            .iter()
            .map(|r| format!("/{}", r.engine))
            .collect::<String>()
    );
    for note in notes {
        out.push_str(&note);
        out.push('\n');
    }
    out
}

fn storm_table(storm: &StormResult) -> String {
    let mut out = format!(
        "Connection storm: {} connections at once, hello on each ({} run{})\n",
        storm.connections,
        storm.storms.len(),
        if storm.storms.len() == 1 { "" } else { "s" }
    );
    let mut rows = vec![header(&[
        "", "best", "median", "conns/s", "p50", "p90", "p99", "p99.9", "max", "RSS/conn",
    ])];
    let mut row = vec![
        "all answered".to_string(),
        format_duration(storm.storms.best()),
        format_duration(storm.storms.median()),
        format_rate(storm.connections_per_second()),
    ];
    row.extend(percentiles(&storm.latencies));
    row.push(
        storm
            .resident_bytes_per_connection
            .map_or("-".into(), |bytes| format!("{:.0} KiB", bytes / 1024.0)),
    );
    rows.push(row);
    out.push_str(&grid(&rows));
    let _ = writeln!(
        out,
        "  p50-max: one connection's connect to answer; RSS/conn: the server's resident memory growth per open connection in the first run"
    );
    let mut notes = Vec::new();
    status_word(&storm.status, "Basalt", "connection storm", &mut notes);
    for note in notes {
        out.push_str(&note);
        out.push('\n');
    }
    out
}

/// `ok`, `WRONG` or `unsupported`, with the details as a note.
fn status_word(status: &Status, engine: &str, query: &str, notes: &mut Vec<String>) -> String {
    match status {
        Status::Correct => "ok".into(),
        Status::Wrong(why) => {
            notes.push(format!("  {query}: {engine} answered WRONG: {why}"));
            "WRONG".into()
        }
        Status::Unsupported(why) => {
            notes.push(format!("  {query}: {engine} unsupported: {why}"));
            "unsupported".into()
        }
    }
}

fn percentiles(samples: &Samples) -> Vec<String> {
    [50.0, 90.0, 99.0, 99.9]
        .iter()
        .map(|p| format_duration(samples.percentile(*p)))
        .chain(std::iter::once(format_duration(samples.max())))
        .collect()
}

fn header(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// Columns padded to their widest cell: the first left-aligned, the others right-aligned.
fn grid(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(c, cell)| {
                if c == 0 {
                    format!("{cell:<w$}", w = widths[c])
                } else {
                    format!("{cell:>w$}", w = widths[c])
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_aligns_columns() {
        let rows = vec![
            vec!["query".to_string(), "best".to_string()],
            vec!["w1 banding".to_string(), "12.3 ms".to_string()],
        ];
        assert_eq!(grid(&rows), "query          best\nw1 banding  12.3 ms\n");
    }
}
