//! `killCursors`: closes cursors a client no longer needs.

use super::Ctx;
use crate::request::Fields;
use basalt_error::{Error, Result};
use bson::{doc, Bson, Document};

pub fn kill_cursors(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let fields = Fields::new(body);
    fields.collection()?;
    let ids = fields.array_opt("cursors")?.ok_or_else(|| {
        Error::location(
            40414,
            "BSON field 'killCursors.cursors' is missing but a required field",
        )
    })?;
    let owner = crate::security::cursor_owner(ctx);
    let (mut killed, mut not_found) = (Vec::new(), Vec::new());
    for id in ids {
        let id = match id {
            Bson::Int64(n) => *n,
            Bson::Int32(n) => i64::from(*n),
            _ => {
                return Err(Error::type_mismatch(
                    "BSON field 'killCursors.cursors' must hold longs",
                ))
            }
        };
        if ctx.server.cursors.kill(id, owner.as_ref())? {
            killed.push(id);
        } else {
            not_found.push(id);
        }
    }
    Ok(doc! {
        "cursorsKilled": killed,
        "cursorsNotFound": not_found,
        "cursorsAlive": Vec::<i64>::new(),
        "cursorsUnknown": Vec::<i64>::new(),
    })
}
