//! `fsync` and `fsyncUnlock` (admin): make every write durable now, and with `lock`
//! hold writes back until as many `fsyncUnlock`s (`crate::fsync_lock`), so that a
//! backup can copy the files under `--dbpath` while they do not change. A replica set
//! member refuses the lock for now: its writes come through the replicated log.

use super::Ctx;
use crate::request::type_name;
use basalt_error::{Error, ErrorCode, Result};
use bson::{doc, Bson, Document};

/// `fsync`'s own fields, besides the generic arguments it accepts.
const FSYNC_FIELDS: &[&str] = &[
    "fsync",
    "lock",
    "fsyncLockAcquisitionTimeoutMillis",
    "comment",
];
/// The generic arguments `fsync` accepts (anything else is an unknown field, as mongod's
/// parser has it).
const FSYNC_GENERIC: &[&str] = &[
    "$db",
    "lsid",
    "$readPreference",
    "$clusterTime",
    "apiVersion",
    "apiStrict",
    "apiDeprecationErrors",
    "maxTimeMS",
    "readConcern",
    "writeConcern",
    "txnNumber",
    "autocommit",
    "startTransaction",
];

pub fn fsync(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    for key in body.keys() {
        if !FSYNC_FIELDS.contains(&key.as_str()) && !FSYNC_GENERIC.contains(&key.as_str()) {
            return Err(Error::location(
                40415,
                format!("BSON field 'fsync.{key}' is an unknown field."),
            ));
        }
    }
    match body.get("fsyncLockAcquisitionTimeoutMillis") {
        None | Some(Bson::Null | Bson::Int32(_)) => {}
        Some(other) => {
            return Err(Error::type_mismatch(format!(
                "BSON field 'fsync.fsyncLockAcquisitionTimeoutMillis' is the wrong type '{}', expected type 'int'",
                type_name(other)
            )))
        }
    }
    // Any number but zero locks (NaN included, as mongod reads it).
    let lock = crate::request::Fields {
        command: "fsync",
        body,
    }
    .bool_or("lock", false)?;
    if !lock {
        ctx.server.catalog.engine().sync()?;
        return Ok(doc! { "numFiles": 1 });
    }
    if ctx.server.replication().is_some() {
        // Holding back a member's writes would hold back the replicated log it applies
        // and answers for; not built yet.
        return Err(Error::new(
            ErrorCode::COMMAND_NOT_SUPPORTED,
            "fsync with lock is not supported on a replica set member by Basalt yet",
        ));
    }
    let count = ctx
        .server
        .fsync_lock
        .lock(ctx.server.catalog.engine().as_ref())?;
    Ok(doc! {
        "info": "now locked against writes, use db.fsyncUnlock() to unlock",
        "lockCount": count as i64,
        "seeAlso": "http://dochub.mongodb.org/core/fsynccommand",
    })
}

pub fn fsync_unlock(ctx: &Ctx<'_>, _body: &Document) -> Result<Document> {
    match ctx.server.fsync_lock.unlock() {
        Some(left) => Ok(doc! { "info": "fsyncUnlock completed", "lockCount": left as i64 }),
        None => Err(Error::new(
            ErrorCode::ILLEGAL_OPERATION,
            "fsyncUnlock called when not locked",
        )),
    }
}
