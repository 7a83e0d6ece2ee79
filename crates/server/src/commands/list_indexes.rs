//! `listIndexes`: the indexes of a collection as a cursor.

use super::Ctx;
use crate::cursors::CursorSource;
use crate::request::Fields;
use basalt_error::{Error, ErrorCode, Result};
use bson::Document;

pub fn list_indexes(ctx: &Ctx<'_>, body: &Document) -> Result<bson::RawDocumentBuf> {
    let fields = Fields::new(body);
    let name = fields.collection()?;
    let Some(collection) = ctx.server.catalog.get(ctx.db, name) else {
        return Err(Error::new(
            ErrorCode::NAMESPACE_NOT_FOUND,
            format!("ns does not exist: {}.{name}", ctx.db),
        ));
    };
    let batch_size = fields.cursor_batch_size()?;
    let meta = collection.meta();
    let clustered = meta.options.contains_key("clusteredIndex");
    let specs: Vec<Document> = meta
        .indexes
        .iter()
        .map(|i| {
            let mut spec = i.to_list_document();
            if clustered && i.is_id_index() {
                spec.insert("unique", true);
                spec.insert("clustered", true);
            }
            spec
        })
        .collect();
    let namespace = format!("{}.{name}", ctx.db);
    ctx.server.cursors.first_batch_reply(
        namespace,
        CursorSource::buffered(specs),
        batch_size,
        false,
        crate::exec::Deadline::default(),
        crate::security::cursor_owner(ctx),
    )
}
