//! `dbHash`: a hash of each collection of the database (and of them all), which replica
//! set members compare to check that they hold the same data.
//!
//! Each collection's hash is an MD5 over its documents' BSON: the digests of the
//! documents, sorted, hashed together, so that it depends on what the collection holds
//! and not on the order its records have on a member. The database's `md5` hashes the
//! collections' names and hashes in name order. Views are not collections (their
//! definitions in `system.views` are); a time-series collection is its buckets. The
//! reply is mongod's: `host`, `collections`, `capped`, `uuids`, `md5`, `timeMillis`,
//! `fromCache`. `collections` names the collections to hash (an empty list or any
//! other type: all of them), each a string (BadValue otherwise).

use super::Ctx;
use basalt_error::{Error, Result};
use bson::{doc, Bson, Document};
use md5::{Digest, Md5};
use std::ops::ControlFlow;
use std::time::Instant;

fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn db_hash(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let started = Instant::now();
    let wanted: Option<Vec<&str>> = match body.get("collections") {
        Some(Bson::Array(names)) if !names.is_empty() => Some(
            names
                .iter()
                .map(|name| match name {
                    Bson::String(name) => Ok(name.as_str()),
                    other => Err(Error::bad_value(format!(
                        "collections entries must be strings, not {}",
                        crate::request::type_name(other)
                    ))),
                })
                .collect::<Result<_>>()?,
        ),
        _ => None,
    };
    let mut collections: Vec<_> = ctx
        .server
        .catalog
        .collections_of(ctx.db)
        .into_iter()
        .filter(|c| {
            wanted
                .as_ref()
                .is_none_or(|names| names.contains(&c.meta().name.as_str()))
        })
        .collect();
    collections.sort_by(|a, b| a.meta().name.cmp(&b.meta().name));
    let deadline = ctx.deadline();
    let (mut hashes, mut uuids, mut capped) = (Document::new(), Document::new(), Vec::new());
    let mut whole = Md5::new();
    for collection in collections {
        let meta = collection.meta();
        let snapshot = collection.snapshot();
        let mut digests = Vec::new();
        collection.scan(&*snapshot, None, &mut |_, raw| {
            deadline.check()?;
            digests.push(Md5::digest(raw.as_bytes()));
            Ok(ControlFlow::Continue(()))
        })?;
        digests.sort_unstable();
        let mut hasher = Md5::new();
        for digest in &digests {
            hasher.update(digest);
        }
        let hash = hex(&hasher.finalize());
        whole.update(meta.name.as_bytes());
        whole.update(hash.as_bytes());
        if meta.capped().is_some() {
            capped.push(Bson::String(meta.name.clone()));
        }
        uuids.insert(meta.name.clone(), meta.uuid);
        hashes.insert(meta.name.clone(), hash);
    }
    Ok(doc! {
        "host": format!("{}:{}", super::host_info::host_name(), ctx.server.options.port),
        "collections": hashes,
        "capped": capped,
        "uuids": uuids,
        "md5": hex(&whole.finalize()),
        "timeMillis": i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX),
        "fromCache": Vec::<Bson>::new(),
    })
}
