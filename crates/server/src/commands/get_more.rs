//! `getMore`: the next batch of an open cursor.

use super::Ctx;
use crate::change_streams::AWAIT_DATA_DEFAULT;
use crate::cursors::{cursor_reply, CursorSource};
use crate::request::Fields;
use basalt_error::{Error, Result};
use bson::{Bson, Document, RawDocumentBuf};
use std::time::Duration;

pub fn get_more(ctx: &Ctx<'_>, body: &Document) -> Result<RawDocumentBuf> {
    let fields = Fields::new(body);
    let id = match body.get("getMore") {
        Some(Bson::Int64(n)) => *n,
        Some(Bson::Int32(n)) => i64::from(*n),
        Some(other) => {
            return Err(Error::type_mismatch(format!(
                "BSON field 'getMore.getMore' is the wrong type '{}', expected type 'long'",
                crate::request::type_name(other)
            )))
        }
        None => return Err(Error::failed_to_parse("getMore needs a cursor id")),
    };
    let collection = fields.string_opt("collection")?.ok_or_else(|| {
        Error::location(
            40414,
            "BSON field 'getMore.collection' is missing but a required field",
        )
    })?;
    let batch_size = fields.batch_size_opt("batchSize")?;
    let namespace = format!("{}.{collection}", ctx.db);
    let owner = crate::security::cursor_owner(ctx);
    let mut cursor = ctx.server.cursors.take(id, &namespace, owner.as_ref())?;
    let limit = batch_size.filter(|n| *n > 0);
    if let CursorSource::ChangeStream(stream) = &mut cursor.source {
        // An awaitData cursor: maxTimeMS is how long to wait for a change.
        let wait = ctx
            .max_time_ms
            .filter(|ms| *ms > 0)
            .map_or(AWAIT_DATA_DEFAULT, |ms| Duration::from_millis(ms as u64));
        let (batch, token) = stream.next_batch(limit, Some(wait))?;
        let reply_id = if stream.is_exhausted() {
            0
        } else {
            ctx.server.cursors.restore(id, cursor);
            id
        };
        return crate::change_streams::reply(reply_id, &namespace, batch, false, token);
    }
    let given_max_time = body.get("maxTimeMS").is_some_and(|v| *v != Bson::Null);
    if cursor.source.awaits_data() {
        // A tailable awaitData cursor: maxTimeMS is how long to wait for a document
        // (0: not at all).
        let wait = match ctx.max_time_ms.filter(|ms| *ms > 0) {
            Some(ms) => Duration::from_millis(ms as u64),
            None if given_max_time => Duration::ZERO,
            None => AWAIT_DATA_DEFAULT,
        };
        let (batch, exhausted) = cursor.source.next_batch_waiting(limit, wait)?;
        let reply_id = if exhausted {
            0
        } else {
            ctx.server.cursors.restore(id, cursor);
            id
        };
        return cursor_reply(reply_id, &namespace, batch, false);
    }
    if given_max_time {
        // Only tailable awaitData cursors take one, as in MongoDB.
        ctx.server.cursors.restore(id, cursor);
        return Err(Error::bad_value(
            "cannot set maxTimeMS on getMore command for a non-awaitData cursor",
        ));
    }
    // The getMore runs under the cursor's limit and progress: killOp reaches its scans.
    if let Some(operation) = ctx.operation {
        operation.adopt(cursor.deadline());
        operation.set_cursor(cursor.describe(id));
    }
    // Out of time (or killed): the cursor is not put back, as MongoDB kills it.
    cursor.resume()?;
    // Server-side JavaScript of this batch gets what is left of the command's time.
    let stored = crate::system_js::stored_functions(&ctx.server.catalog, ctx.db);
    let remaining = cursor.deadline().remaining_ms();
    let scope = cursor.scope();
    let kill_flag = Some(cursor.deadline().progress().kill_flag());
    let outcome = basalt_js::with_command(remaining, kill_flag, stored, || match scope {
        Some(scope) => basalt_storage::with_write_scope(scope, || cursor.source.next_batch(limit)),
        None => cursor.source.next_batch(limit),
    });
    let (batch, exhausted) = outcome?;
    let reply_id = if exhausted {
        0
    } else {
        ctx.server.cursors.restore(id, cursor);
        id
    };
    cursor_reply(reply_id, &namespace, batch, false)
}
