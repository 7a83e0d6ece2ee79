//! `/metrics` in Prometheus' text exposition format: operation counters, each
//! command's latency histogram, connections, cursors, network, memory (process,
//! operations' budget, block cache), storage, scan workers and, on a replica set
//! member, each member's replication lag.

use crate::stats::{Stats, LATENCY_BUCKETS_MICROS};
use crate::Server;
use std::fmt::Write;

/// One metric family: its help and type lines, then its samples.
struct Family<'a> {
    out: &'a mut String,
}

impl Family<'_> {
    fn start<'a>(out: &'a mut String, name: &str, kind: &str, help: &str) -> Family<'a> {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        Family { out }
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        let _ = write!(self.out, "{name}");
        if !labels.is_empty() {
            let labels: Vec<String> = labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
                .collect();
            let _ = write!(self.out, "{{{}}}", labels.join(","));
        }
        let _ = writeln!(self.out, " {value}");
    }
}

/// A label value as the format wants it: backslash, quote and newline escaped.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

pub fn render(server: &Server) -> String {
    let mut out = String::new();
    let stats = &server.stats;
    let get = |counter| Stats::get(counter) as f64;

    let mut f = Family::start(
        &mut out,
        "basalt_uptime_seconds",
        "gauge",
        "Seconds since the server started.",
    );
    f.sample(
        "basalt_uptime_seconds",
        &[],
        server.started.elapsed().as_secs_f64(),
    );

    let mut f = Family::start(
        &mut out,
        "basalt_opcounters_total",
        "counter",
        "Operations since start by type, as serverStatus opcounters.",
    );
    for (kind, counter) in stats.operations.by_type() {
        f.sample("basalt_opcounters_total", &[("type", kind)], get(counter));
    }

    let name = "basalt_command_duration_seconds";
    let mut f = Family::start(
        &mut out,
        name,
        "histogram",
        "Time each command took, by command.",
    );
    for (command, histogram) in stats.latencies.all() {
        let (buckets, count, sum) = histogram.snapshot();
        for (bound, cumulative) in LATENCY_BUCKETS_MICROS.iter().zip(&buckets) {
            let le = format!("{}", *bound as f64 / 1e6);
            f.sample(
                &format!("{name}_bucket"),
                &[("command", command), ("le", &le)],
                *cumulative as f64,
            );
        }
        f.sample(
            &format!("{name}_bucket"),
            &[("command", command), ("le", "+Inf")],
            count as f64,
        );
        f.sample(
            &format!("{name}_sum"),
            &[("command", command)],
            sum as f64 / 1e6,
        );
        f.sample(
            &format!("{name}_count"),
            &[("command", command)],
            count as f64,
        );
    }

    let connections = &stats.connections;
    let mut f = Family::start(
        &mut out,
        "basalt_connections",
        "gauge",
        "Client connections open now, and of those running a command.",
    );
    f.sample(
        "basalt_connections",
        &[("state", "current")],
        get(&connections.current),
    );
    f.sample(
        "basalt_connections",
        &[("state", "active")],
        get(&connections.active),
    );
    let mut f = Family::start(
        &mut out,
        "basalt_connections_created_total",
        "counter",
        "Client connections accepted since start.",
    );
    f.sample(
        "basalt_connections_created_total",
        &[],
        get(&connections.total_created),
    );
    let mut f = Family::start(
        &mut out,
        "basalt_connections_rejected_total",
        "counter",
        "Connections closed at once because --maxConns were open.",
    );
    f.sample(
        "basalt_connections_rejected_total",
        &[],
        get(&connections.rejected),
    );

    let mut f = Family::start(
        &mut out,
        "basalt_network_bytes_total",
        "counter",
        "Bytes of messages received and sent.",
    );
    f.sample(
        "basalt_network_bytes_total",
        &[("direction", "in")],
        get(&stats.bytes_in),
    );
    f.sample(
        "basalt_network_bytes_total",
        &[("direction", "out")],
        get(&stats.bytes_out),
    );
    let mut f = Family::start(
        &mut out,
        "basalt_network_requests_total",
        "counter",
        "Messages received.",
    );
    f.sample("basalt_network_requests_total", &[], get(&stats.requests));

    let mut f = Family::start(
        &mut out,
        "basalt_cursors_open",
        "gauge",
        "Cursors waiting for their next getMore.",
    );
    f.sample(
        "basalt_cursors_open",
        &[],
        server.cursors.open_count() as f64,
    );
    let mut f = Family::start(
        &mut out,
        "basalt_operations_running",
        "gauge",
        "Commands running now.",
    );
    f.sample(
        "basalt_operations_running",
        &[],
        server.operations.list().len() as f64,
    );

    let budget = basalt_memory::server_budget();
    let mut f = Family::start(
        &mut out,
        "basalt_memory_bytes",
        "gauge",
        "Memory: the process's resident set, what operations hold of their budget, the budget, \
         connection buffers, the engine's block cache (configured, held) and memtables.",
    );
    f.sample(
        "basalt_memory_bytes",
        &[("kind", "resident")],
        resident_bytes() as f64,
    );
    f.sample(
        "basalt_memory_bytes",
        &[("kind", "operations_held")],
        budget.reserved_bytes() as f64,
    );
    f.sample(
        "basalt_memory_bytes",
        &[("kind", "operations_budget")],
        budget.limit_bytes() as f64,
    );
    f.sample(
        "basalt_memory_bytes",
        &[("kind", "connection_buffers")],
        get(&connections.buffer_bytes),
    );
    let cache = server.catalog.engine().cache();
    for (kind, bytes) in [
        ("block_cache_capacity", cache.capacity_bytes),
        ("block_cache_held", cache.cached_bytes),
        ("memtables", cache.dirty_bytes),
    ] {
        f.sample("basalt_memory_bytes", &[("kind", kind)], bytes as f64);
    }

    let mut f = Family::start(
        &mut out,
        "basalt_storage_bytes",
        "gauge",
        "Bytes of files under --dbpath (tables, journal, spill files).",
    );
    f.sample(
        "basalt_storage_bytes",
        &[],
        directory_bytes(&server.options.dbpath) as f64,
    );
    let mut f = Family::start(
        &mut out,
        "basalt_collections",
        "gauge",
        "Collections in all databases.",
    );
    let collections: usize = server
        .catalog
        .database_names()
        .iter()
        .map(|db| server.catalog.collections_of(db).len())
        .sum();
    f.sample("basalt_collections", &[], collections as f64);
    let mut f = Family::start(
        &mut out,
        "basalt_scan_workers",
        "gauge",
        "Threads one collection scan may use (scanWorkers).",
    );
    f.sample(
        "basalt_scan_workers",
        &[],
        server.options.scan_workers as f64,
    );

    if let Some(set) = server.replication() {
        replication_lag(&mut out, set);
    }
    out
}

/// Each member's lag behind the primary (by the last entry each applied), in seconds.
fn replication_lag(out: &mut String, set: &basalt_repl::ReplicaSet) {
    let Ok(status) = set.status() else {
        return;
    };
    let members: Vec<&bson::Document> = status
        .get_array("members")
        .map(|m| m.iter().filter_map(bson::Bson::as_document).collect())
        .unwrap_or_default();
    let applied = |m: &bson::Document| {
        m.get_datetime("optimeDate")
            .ok()
            .map(|d| d.timestamp_millis())
    };
    let primary = members
        .iter()
        .find(|m| m.get_str("stateStr").ok() == Some("PRIMARY"))
        .and_then(|m| applied(m));
    let mut f = Family::start(
        out,
        "basalt_replication_lag_seconds",
        "gauge",
        "How far each member's applied log is behind the primary's.",
    );
    for member in &members {
        if let (Some(primary), Some(at), Ok(name)) =
            (primary, applied(member), member.get_str("name"))
        {
            let lag = (primary - at).max(0) as f64 / 1000.0;
            f.sample("basalt_replication_lag_seconds", &[("member", name)], lag);
        }
    }
}

/// The process's resident memory.
pub fn resident_bytes() -> u64 {
    crate::stats::process_memory_bytes().0
}

/// The bytes of the files under `path`, all levels down.
fn directory_bytes(path: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries
        .filter_map(|entry| entry.ok())
        .map(|entry| match entry.metadata() {
            Ok(meta) if meta.is_dir() => directory_bytes(&entry.path()),
            Ok(meta) => meta.len(),
            Err(_) => 0,
        })
        .sum()
}
