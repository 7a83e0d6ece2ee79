//! `listCollections`: the collections of a database as a cursor, with filter and
//! nameOnly.

use super::Ctx;
use crate::cursors::CursorSource;
use crate::request::Fields;
use basalt_error::Result;
use basalt_query::Matcher;
use bson::{doc, Document};

pub fn list_collections(ctx: &Ctx<'_>, body: &Document) -> Result<bson::RawDocumentBuf> {
    let fields = Fields::new(body);
    let name_only = fields.bool_or("nameOnly", false)?;
    let matcher = Matcher::new(fields.document_opt("filter")?.unwrap_or(&Document::new()))?;
    let batch_size = fields.cursor_batch_size()?;
    let mut entries = Vec::new();
    for collection in ctx.server.catalog.collections_of(ctx.db) {
        let meta = collection.meta();
        let full = doc! {
            "name": meta.name.clone(),
            "type": "collection",
            "options": meta.options.clone(),
            "info": { "readOnly": false, "uuid": bson::Binary::from_uuid(meta.uuid) },
            "idIndex": { "v": 2, "key": { "_id": 1 }, "name": "_id_" },
        };
        if matcher.matches(&full) {
            entries.push(if name_only {
                doc! { "name": meta.name.clone(), "type": "collection" }
            } else {
                full
            });
        }
    }
    let namespace = format!("{}.$cmd.listCollections", ctx.db);
    ctx.server.cursors.first_batch_reply(
        namespace,
        CursorSource::buffered(entries),
        batch_size,
        false,
        crate::exec::Deadline::default(),
    )
}
