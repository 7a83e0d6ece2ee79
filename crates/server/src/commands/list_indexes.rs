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
        // A time-series collection's indexes are its buckets', shown with the keys they
        // were asked for (see `crate::timeseries`).
        if let Some((series, buckets)) = crate::timeseries::get(&ctx.server.catalog, ctx.db, name) {
            let specs = buckets
                .meta()
                .indexes
                .iter()
                .filter(|index| {
                    !index.is_id_index() && !crate::timeseries::is_internal_index(&index.name)
                })
                .filter_map(|index| {
                    let mut spec = index.to_list_document();
                    spec.insert("key", series.user_key(&index.key)?);
                    Some(spec)
                })
                .collect();
            return ctx.server.cursors.first_batch_reply(
                format!("{}.{name}", ctx.db),
                CursorSource::buffered(specs),
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
