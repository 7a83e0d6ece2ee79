//! `hello` (and its legacy names `isMaster`/`ismaster`): the handshake every driver
//! starts with. It tells the driver this is a writable standalone, the wire versions and
//! size limits, and agrees on message compression.

use super::Ctx;
use crate::stats::Counted;
use crate::MAX_WIRE_VERSION;
use basalt_error::Result;
use basalt_wire::{Compressor, MAX_BSON_OBJECT_SIZE_BYTES, MAX_MESSAGE_SIZE_BYTES};
use bson::{doc, Bson, Document};

/// The most write statements one insert/update/delete command may carry.
pub const MAX_WRITE_BATCH_SIZE: i32 = 100_000;
/// How long an idle logical session lives, as MongoDB's default.
pub const LOGICAL_SESSION_TIMEOUT_MINUTES: i32 = 30;

/// The longest an awaitable hello waits, whatever `maxAwaitTimeMS` asks.
const AWAIT_TIME_MS_MAX: u64 = 60_000;

/// Keeps what the handshake says of the client that the server uses later: its
/// application name (`client.application.name`, which fail points can select).
pub fn record_client(connection: &crate::connection::ConnectionInfo, body: &Document) {
    let name = body
        .get_document("client")
        .and_then(|client| client.get_document("application"))
        .and_then(|application| application.get_str("name"));
    if let Ok(name) = name {
        connection.set_app_name(name);
    }
}

pub fn hello(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    await_topology_change(ctx, body);
    let legacy = body.keys().next().is_some_and(|k| k != "hello");
    let mut reply = Document::new();
    match ctx.server.replication() {
        Some(set) => reply.extend(set.hello_fields(legacy)),
        None if legacy => {
            reply.insert("ismaster", true);
        }
        None => {
            reply.insert("isWritablePrimary", true);
        }
    }
    reply.insert("topologyVersion", topology_version(ctx));
    reply.insert("maxBsonObjectSize", MAX_BSON_OBJECT_SIZE_BYTES as i32);
    reply.insert("maxMessageSizeBytes", MAX_MESSAGE_SIZE_BYTES as i32);
    reply.insert("maxWriteBatchSize", MAX_WRITE_BATCH_SIZE);
    reply.insert("localTime", bson::DateTime::now());
    reply.insert(
        "logicalSessionTimeoutMinutes",
        LOGICAL_SESSION_TIMEOUT_MINUTES,
    );
    reply.insert("connectionId", ctx.connection.id);
    reply.insert("minWireVersion", 0);
    reply.insert("maxWireVersion", MAX_WIRE_VERSION);
    reply.insert("readOnly", false);
    // A client that says it understands `hello` is told it may use it from now on.
    if body.get_bool("helloOk").unwrap_or(false) {
        reply.insert("helloOk", true);
    }
    if let Ok(start) = body.get_document("speculativeAuthenticate") {
        if let Some(reply_to_start) = super::sasl::speculative(ctx, start) {
            reply.insert("speculativeAuthenticate", reply_to_start);
        }
    }
    if let Ok(user) = body.get_str("saslSupportedMechs") {
        if let Some(mechanisms) = super::sasl::supported_mechanisms(ctx, user) {
            reply.insert("saslSupportedMechs", mechanisms);
        }
    }
    if let Some(Bson::Array(requested)) = body.get("compression") {
        // Every compressor Basalt knows is accepted, in the client's order; replies then
        // use whichever compressor each request came in.
        let agreed: Vec<&str> = requested
            .iter()
            .filter_map(|name| name.as_str().and_then(Compressor::from_name))
            .filter(|c| *c != Compressor::Noop)
            .map(Compressor::name)
            .collect();
        reply.insert("compression", agreed);
    }
    Ok(reply)
}

/// This process's `topologyVersion`, as hello reports it (and mongod's state change
/// errors carry, so that a driver can tell a stale error from news).
pub fn topology_version(ctx: &Ctx<'_>) -> Document {
    doc! { "processId": ctx.server.process_id, "counter": topology_counter(ctx) }
}

/// The topology version's counter: a replica set member's changes with its role, its
/// primary and its config; a standalone's never does.
fn topology_counter(ctx: &Ctx<'_>) -> i64 {
    ctx.server
        .replication()
        .map_or(0, |set| set.topology_counter())
}

/// An awaitable hello (a driver's monitor sends `topologyVersion` and `maxAwaitTimeMS`)
/// is answered when the topology changes or the time is up, as mongod does: this is how
/// drivers learn of a new primary at once. A standalone's topology never changes, so it
/// waits the whole time; answering at once would make every driver's monitor ask again in
/// a tight loop, costing both sides a core.
fn await_topology_change(ctx: &Ctx<'_>, body: &Document) {
    let Some(wait_ms) = body.get("maxAwaitTimeMS").and_then(basalt_value::as_i64) else {
        return;
    };
    let counter = topology_counter(ctx);
    let current = body.get_document("topologyVersion").is_ok_and(|version| {
        version.get_object_id("processId").ok() == Some(ctx.server.process_id)
            && version.get("counter").and_then(basalt_value::as_i64) == Some(counter)
    });
    if current {
        let wait = std::time::Duration::from_millis(
            u64::try_from(wait_ms).unwrap_or(0).min(AWAIT_TIME_MS_MAX),
        );
        let _awaiting = Counted::new(&ctx.server.stats.connections.awaiting_topology_changes, 1);
        match ctx.server.replication() {
            Some(set) => set.wait_topology_change(counter, wait),
            None => std::thread::sleep(wait),
        }
    }
}
