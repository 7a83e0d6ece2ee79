//! `serverStatus`: what monitoring tools poll. One function per section; the sections
//! MongoDB has keep its field names, order and types, and what only Basalt can tell is
//! in a section of its own, `basalt`.

use super::Ctx;
use crate::stats::Stats;
use crate::{Server, COMPATIBLE_MONGODB_VERSION};
use basalt_error::Result;
use bson::{doc, Bson, Document};

/// serverStatus: every section, less those the command turns off (`{metrics: 0}`, a
/// false value as mongod reads one), plus `mirroredReads` when it is asked for.
pub fn server_status(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let mut reply = sections(ctx)?;
    for (section, toggle) in body.iter().skip(1) {
        match (section.as_str(), basalt_expr::truthy(Some(toggle))) {
            ("mirroredReads", true) => {
                // A standalone or a member that mirrors no reads to its secondaries.
                reply.insert("mirroredReads", doc! { "seen": 0_i64, "sent": 0_i64 });
            }
            (_, false) if matches!(reply.get(section), Some(Bson::Document(_))) => {
                reply.remove(section);
            }
            _ => {}
        }
    }
    Ok(reply)
}

fn sections(ctx: &Ctx<'_>) -> Result<Document> {
    let server = ctx.server;
    let stats = &server.stats;
    let uptime = server.started.elapsed();
    let (resident, virtual_mb) = memory_mb();
    Ok(doc! {
        "host": super::host_info::host_name(),
        "version": COMPATIBLE_MONGODB_VERSION,
        "process": "mongod",
        "pid": std::process::id() as i64,
        "uptime": uptime.as_secs_f64().floor(),
        "uptimeMillis": uptime.as_millis() as i64,
        "uptimeEstimate": uptime.as_secs() as i64,
        "localTime": bson::DateTime::now(),
        "asserts": stats.asserts.document(),
        "connections": connections(server),
        "extra_info": extra_info(),
        "globalLock": global_lock(server),
        "locks": {},
        "logicalSessionRecordCache": {
            "activeSessionsCount": server.sessions.count() as i32,
        },
        "network": network(server),
        "opcounters": stats.operations.document(),
        "opcountersRepl": stats.replicated.document(),
        "mem": { "bits": 64, "resident": resident, "virtual": virtual_mb, "supported": true },
        "metrics": { "cursor": { "open": { "total": server.cursors.open_count() as i64 } } },
        "storageEngine": { "name": "fjall", "supportsCommittedReads": true, "persistent": true },
        "wiredTiger": wired_tiger(server),
        "catalogStats": catalog_stats(server)?,
        "basalt": basalt(server),
    })
}

/// mongod's `extra_info` on Linux: the process's page faults and its user and system
/// CPU time, from /proc/self/stat.
fn extra_info() -> Document {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
    // Counted from the state, the third field of the line: majflt is the 12th field,
    // utime and stime (in clock ticks, 100 a second on Linux) the 14th and 15th.
    let field = |n: usize| {
        fields
            .get(n - 3)
            .and_then(|f| f.parse::<i64>().ok())
            .unwrap_or(0)
    };
    let ticks_to_micros = |ticks: i64| ticks * 10_000;
    doc! {
        "note": "fields vary by platform",
        "page_faults": field(12),
        "user_time_us": ticks_to_micros(field(14)),
        "system_time_us": ticks_to_micros(field(15)),
    }
}

/// MongoDB's `catalogStats`: the collections and views of the users' databases, and
/// of `admin`, `config` and `local` and `system.*` collections apart (internal).
fn catalog_stats(server: &Server) -> Result<Document> {
    let catalog = &server.catalog;
    let (mut collections, mut capped, mut clustered, mut views) = (0i32, 0i32, 0i32, 0i32);
    let (mut internal_collections, mut internal_views) = (0i32, 0i32);
    for db in catalog.database_names() {
        let internal_db = ["admin", "config", "local"].contains(&db.as_str());
        for collection in catalog.collections_of(&db) {
            let meta = collection.meta();
            if internal_db || meta.name.starts_with("system.") {
                internal_collections += 1;
            } else {
                collections += 1;
                capped += i32::from(meta.capped().is_some());
                clustered += i32::from(meta.options.contains_key("clusteredIndex"));
            }
        }
        let defined = crate::views::list(catalog, &db)?.len() as i32;
        if internal_db {
            internal_views += defined;
        } else {
            views += defined;
        }
    }
    Ok(doc! {
        "collections": collections,
        "capped": capped,
        "clustered": clustered,
        "timeseries": 0,
        "views": views,
        "internalCollections": internal_collections,
        "internalViews": internal_views,
    })
}

/// MongoDB 8.0's `connections`, int32 but `loadBalanced`. Every connection has a thread
/// of its own (`threaded`); exhaust hellos and load balancers are not supported.
fn connections(server: &Server) -> Document {
    let connections = &server.stats.connections;
    let count = |counter| i32::try_from(Stats::get(counter)).unwrap_or(i32::MAX);
    let current = count(&connections.current);
    let limit = i32::try_from(server.connection_limit).unwrap_or(i32::MAX);
    doc! {
        "current": current,
        "available": limit.saturating_sub(current),
        "totalCreated": count(&connections.total_created),
        "rejected": count(&connections.rejected),
        "active": count(&connections.active),
        "threaded": current,
        "exhaustIsMaster": 0,
        "exhaustHello": 0,
        "awaitingTopologyChanges": count(&connections.awaiting_topology_changes),
        "loadBalanced": 0_i64,
    }
}

/// mongod's `globalLock`: Basalt has no global lock, so nothing ever queues for it;
/// the active clients are the operations running, as readers or writers.
fn global_lock(server: &Server) -> Document {
    let (mut readers, mut writers) = (0i32, 0i32);
    // A hello waiting for a topology change holds nothing (drivers' monitors).
    let waiting = |op: &crate::operations::Operation| {
        matches!(
            op.command.keys().next().map(String::as_str),
            Some("hello" | "isMaster" | "ismaster")
        )
    };
    for op in server.operations.list().iter().filter(|op| !waiting(op)) {
        match op.kind {
            "insert" | "update" | "remove" => writers += 1,
            _ => readers += 1,
        }
    }
    doc! {
        "totalTime": i64::try_from(server.started.elapsed().as_micros()).unwrap_or(i64::MAX),
        "currentQueue": { "total": 0, "readers": 0, "writers": 0 },
        "activeClients": { "total": readers + writers, "readers": readers, "writers": writers },
    }
}

/// mongod's `network`: bytes of the messages received and sent (before compression is
/// undone; the same as the physical bytes here), and the messages received.
fn network(server: &Server) -> Document {
    let stats = &server.stats;
    doc! {
        "bytesIn": Stats::get(&stats.bytes_in),
        "bytesOut": Stats::get(&stats.bytes_out),
        "physicalBytesIn": Stats::get(&stats.bytes_in),
        "physicalBytesOut": Stats::get(&stats.bytes_out),
        "numSlowDNSOperations": 0_i64,
        "numSlowSSLOperations": 0_i64,
        "numRequests": Stats::get(&stats.requests),
    }
}

/// What Basalt reports beyond MongoDB's sections, int64 throughout.
/// The figures of WiredTiger's section that tools read (mongostat's `used` and `dirty`,
/// with `-o` since the engine is not named wiredTiger), from the engine's block cache
/// and memtables.
fn wired_tiger(server: &Server) -> Document {
    let cache = server.catalog.engine().cache();
    doc! {
        "cache": {
            "maximum bytes configured": cache.capacity_bytes as i64,
            "bytes currently in the cache": cache.cached_bytes as i64,
            "tracked dirty bytes in the cache": cache.dirty_bytes as i64,
        },
    }
}

fn basalt(server: &Server) -> Document {
    doc! {
        "connections": {
            "bufferBytes": Stats::get(&server.stats.connections.buffer_bytes),
            "threadStackBytes": crate::connection::CONNECTION_STACK_BYTES as i64,
        },
        "memory": operation_memory(),
    }
}

/// What operations hold of the server's memory budget: sort buffers, groups, joins,
/// windows, cursors' results, JavaScript runtimes.
fn operation_memory() -> Document {
    let budget = basalt_memory::server_budget();
    doc! {
        "operationBudgetBytes": budget.limit_bytes() as i64,
        "operationBytesHeld": budget.reserved_bytes() as i64,
        "operationBytesPeak": budget.peak_bytes() as i64,
        "reservationsRefused": budget.refusals() as i64,
    }
}

/// Resident and virtual memory of this process in MiB.
fn memory_mb() -> (i64, i64) {
    let (resident, virtual_bytes) = crate::stats::process_memory_bytes();
    ((resident >> 20) as i64, (virtual_bytes >> 20) as i64)
}
