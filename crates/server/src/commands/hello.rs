//! `hello` (and its legacy names `isMaster`/`ismaster`): the handshake every driver
//! starts with. It tells the driver this is a writable standalone, the wire versions and
//! size limits, and agrees on message compression.

use super::Ctx;
use crate::MAX_WIRE_VERSION;
use basalt_error::Result;
use basalt_wire::{Compressor, MAX_BSON_OBJECT_SIZE_BYTES, MAX_MESSAGE_SIZE_BYTES};
use bson::{doc, Bson, Document};

/// The most write statements one insert/update/delete command may carry.
pub const MAX_WRITE_BATCH_SIZE: i32 = 100_000;
/// How long an idle logical session lives, as MongoDB's default.
pub const LOGICAL_SESSION_TIMEOUT_MINUTES: i32 = 30;

pub fn hello(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let legacy = body.keys().next().is_some_and(|k| k != "hello");
    let mut reply = Document::new();
    if legacy {
        reply.insert("ismaster", true);
    } else {
        reply.insert("isWritablePrimary", true);
    }
    reply.insert(
        "topologyVersion",
        doc! { "processId": ctx.server.process_id, "counter": 0_i64 },
    );
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
