//! `listIndexes`: the indexes of a collection as a cursor.

use super::Ctx;
use crate::cursors::CursorSource;
use crate::request::Fields;
use basalt_error::{Error, ErrorCode, Result};
use bson::Document;

pub fn list_indexes(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let fields = Fields::new(body);
    let name = fields.collection()?;
    let Some(collection) = ctx.server.catalog.get(ctx.db, name) else {
        return Err(Error::new(
            ErrorCode::NAMESPACE_NOT_FOUND,
            format!("ns does not exist: {}.{name}", ctx.db),
        ));
    };
    let batch_size = fields.cursor_batch_size()?;
    let specs: Vec<Document> = collection
        .meta()
        .indexes
        .iter()
        .map(|i| i.to_list_document())
        .collect();
    let namespace = format!("{}.{name}", ctx.db);
    ctx.server.cursors.first_batch_reply(
        namespace,
        CursorSource::Buffered(specs.into()),
        batch_size,
        false,
    )
}
