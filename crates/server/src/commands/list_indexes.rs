//! `listIndexes`: the indexes of a collection as a cursor.

use super::Ctx;
use crate::cursors::CursorSource;
use crate::request::Fields;
use basalt_error::{Error, ErrorCode, Result};
use bson::Document;

pub fn list_indexes(ctx: &Ctx<'_>, body: &Document) -> Result<bson::RawDocumentBuf> {
    let fields = Fields::new(body);
    let name = fields.collection()?;
    let batch_size = fields.cursor_batch_size()?;
    let Some(collection) = ctx.server.catalog.get(ctx.db, name) else {
        // A time-series collection has MongoDB's default index on its meta and time,
        // kept on its buckets.
        if let Some((series, _)) = crate::timeseries::get(&ctx.server.catalog, ctx.db, name) {
            return ctx.server.cursors.first_batch_reply(
                format!("{}.{name}", ctx.db),
                CursorSource::buffered(vec![series.default_index()]),
                batch_size,
                false,
                crate::exec::Deadline::default(),
                crate::security::cursor_owner(ctx),
            );
        }
        return Err(Error::new(
            ErrorCode::NAMESPACE_NOT_FOUND,
            format!("ns does not exist: {}.{name}", ctx.db),
        ));
    };
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
