//! The results as JSON: everything in the table plus the machine, versions, sizes,
//! checksums of the generated data and every raw timing, so runs can be compared later.

use super::{rate, Outcome, Report, Status};
use crate::measure::{millis, Samples};
use serde_json::{json, Map, Value};

pub(crate) fn to_json(report: &Report) -> Value {
    let m = &report.machine;
    json!({
        "machine": {
            "cpu": m.cpu,
            "cores": m.cores,
            "basalt_scan_workers": report.scan_workers,
            "memory_gib": m.memory_gib,
            "os": m.os,
            "kernel": m.kernel,
        },
        "versions": {
            "basalt": m.basalt_version,
            "git_commit": m.git_commit,
            "python": report.peers.python,
            "peers": report.peers.runs.iter().map(|r| (r.engine.clone(), json!(r.version))).collect::<serde_json::Map<_, _>>(),
        },
        "run": {
            "size": report.size,
            "seed": report.seed,
            "runs_per_query": report.runs,
            "generate_s": report.generate.as_secs_f64(),
            "total_s": report.total.as_secs_f64(),
            "all_answers_correct": report.all_correct(),
        },
        "peers_skipped": report.peers.skipped.iter().map(|(e, why)| (e.clone(), json!(why))).collect::<serde_json::Map<_, _>>(),
        "workloads": report.datasets.iter().map(|d| json!({
            "id": d.id.name(),
            "title": d.title,
            "docs": d.docs,
            "bytes": d.bytes,
            "checksum_fnv1a": format!("{:016x}", d.checksum),
            "load": {
                "basalt_s": d.load.as_secs_f64(),
                "basalt_docs_per_s": rate(d.docs, d.load),
                "failures": d.load_failures,
                "with_column_store": d.column_store_load.as_ref().map(|again| json!({
                    "basalt_s": again.load.as_secs_f64(),
                    "current_after_s": again.current_after.map(|after| after.as_secs_f64()),
                })),
                "time_series": d.time_series_load.as_ref().map(|ts| json!({
                    "basalt_s": ts.load.as_secs_f64(),
                    "storage_size_bytes": ts.storage_bytes,
                    "total_index_size_bytes": ts.index_bytes,
                    "refused_indexes": ts.refused_indexes,
                })),
                "indexes": d.indexes.iter().map(|(keys, took)| json!({"keys": keys, "build_s": took.as_secs_f64()})).collect::<Vec<_>>(),
                "storage": {
                    "bson_bytes": d.storage.bson_bytes,
                    "storage_size_bytes": d.storage.storage_bytes,
                    "total_index_size_bytes": d.storage.index_bytes,
                    "column_store_bytes": d.storage.column_store_bytes,
                },
                "peers": report.peers.runs.iter().filter_map(|r| {
                    let (load, setup) = r.loads.get(d.id.name())?;
                    Some((r.engine.clone(), json!({
                        "load_s": load.as_secs_f64(),
                        "docs_per_s": rate(d.docs, *load),
                        "index_s": setup.as_secs_f64(),
                    })))
                }).collect::<serde_json::Map<_, _>>(),
            },
            "queries": d.queries.iter().map(|q| json!({
                "name": q.name,
                "layout": q.layout.name(),
                "scanned_docs": q.scanned_docs,
                "basalt": outcome(&q.basalt, q.scanned_docs, report.scan_workers),
                "peers": report.peers.runs.iter().filter_map(|r| {
                    let o = report.peer_outcome(&r.engine, d.id, q.name)?;
                    Some((r.engine.clone(), outcome(o, q.scanned_docs, r.threads)))
                }).collect::<serde_json::Map<_, _>>(),
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "w4": report.kv.as_ref().map(|kv| json!({
            "threads": crate::workloads::w4_kv::THREADS,
            "keys": kv.puts.ops,
            "value_bytes": kv.value_bytes,
            "put": phase(kv.puts.ops_per_second(), &kv.puts.latencies),
            "get": phase(kv.gets.ops_per_second(), &kv.gets.latencies),
            "put_column_store": phase(kv.column_store_puts.ops_per_second(), &kv.column_store_puts.latencies),
        })),
        "tools": report.tools.as_ref().map(|tools| {
            let (word, detail) = status(&tools.status);
            json!({
                "documents": tools.documents,
                "archive_bytes": tools.archive_bytes,
                "status": word,
                "detail": detail,
                "dump_docs_per_s": tools.rates()[0].1,
                "restore_docs_per_s": tools.rates()[1].1,
                "export_docs_per_s": tools.rates()[2].1,
                "parquet_docs_per_s": tools.rates()[3].1,
                "parquet_bytes": tools.parquet_bytes,
                "find_partitions_docs_per_s": tools.rates()[4].1,
                "aggregate_partitions_docs_per_s": tools.rates()[5].1,
            })
        }),
        "conns": report.storm.as_ref().map(|storm| {
            let (word, detail) = status(&storm.status);
            json!({
            "connections": storm.connections,
            "status": word,
            "detail": detail,
            "runs_ms_sorted": storm.storms.sorted().iter().map(|d| millis(*d)).collect::<Vec<_>>(),
            "best_ms": millis(storm.storms.best()),
            "median_ms": millis(storm.storms.median()),
            "connections_per_s": storm.connections_per_second(),
            "connection": latencies(&storm.latencies),
            "resident_bytes_per_connection": storm.resident_bytes_per_connection,
            })
        }),
    })
}

/// A status's word and details.
fn status(status: &Status) -> (&'static str, Option<String>) {
    match status {
        Status::Correct => ("correct", None),
        Status::Wrong(why) => ("wrong", Some(why.clone())),
        Status::Unsupported(why) => ("unsupported", Some(why.clone())),
    }
}

fn outcome(o: &Outcome, scanned: Option<u64>, threads: usize) -> Value {
    let (status, detail) = status(&o.status);
    json!({
        "status": status,
        "detail": detail,
        "runs_ms_sorted": o.samples.sorted().iter().map(|d| millis(*d)).collect::<Vec<_>>(),
        "best_ms": o.best().map(millis),
        "median_ms": o.best().map(|_| millis(o.samples.median())),
        "docs_per_s_per_core": o.best().zip(scanned).map(|(best, docs)| rate(docs, best) / threads.max(1) as f64),
    })
}

fn phase(ops_per_s: f64, samples: &Samples) -> Value {
    let mut phase = Map::from_iter([("ops_per_s".to_string(), json!(ops_per_s))]);
    phase.extend(latencies(samples));
    Value::Object(phase)
}

fn latencies(samples: &Samples) -> Map<String, Value> {
    [
        ("p50_ms", samples.percentile(50.0)),
        ("p90_ms", samples.percentile(90.0)),
        ("p99_ms", samples.percentile(99.0)),
        ("p99_9_ms", samples.percentile(99.9)),
        ("max_ms", samples.max()),
    ]
    .into_iter()
    .map(|(name, d)| (name.to_string(), json!(millis(d))))
    .collect()
}
