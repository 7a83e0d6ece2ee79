//! `lockInfo` (admin): the locks held and waited for, in mongod's shape (`{lockInfo:
//! [{resourceId, granted, pending}]}`).
//!
//! Basalt's one lock that outlives a single statement is the global lock of a
//! standalone: the fsync locks hold it shared (S), the write commands running hold it
//! intent-exclusive (IX), and while an fsync lock is held the writes wait for it
//! (pending IX). Reads take no lock (they read a snapshot); a write's lock on its
//! collection lasts one batch and a transaction's on the documents it wrote is a
//! write conflict check, neither a lock mongod's clients would wait on, so neither is
//! listed.

use super::Ctx;
use basalt_error::Result;
use bson::{doc, Bson, Document};

/// The global resource, as mongod names it.
const GLOBAL_RESOURCE: &str = "{1: Global, 1}";

fn request(mode: &str) -> Bson {
    Bson::Document(doc! {
        "mode": mode,
        "convertMode": "NONE",
        "enqueueAtFront": false,
        "compatibleFirst": false,
    })
}

pub fn lock_info(ctx: &Ctx<'_>, _body: &Document) -> Result<Document> {
    let state = ctx.server.fsync_lock.state();
    let granted: Vec<Bson> = std::iter::repeat_n(request("S"), state.fsync_locks as usize)
        .chain(std::iter::repeat_n(
            request("IX"),
            state.running_writes as usize,
        ))
        .collect();
    let pending: Vec<Bson> =
        std::iter::repeat_n(request("IX"), state.waiting_writes as usize).collect();
    let mut entries = Vec::new();
    if !granted.is_empty() || !pending.is_empty() {
        entries.push(doc! {
            "resourceId": GLOBAL_RESOURCE,
            "granted": granted,
            "pending": pending,
        });
    }
    Ok(doc! { "lockInfo": entries })
}
