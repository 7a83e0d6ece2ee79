//! `listCollections`: the collections, views and time-series collections of a database
//! as a cursor, with filter and nameOnly.

use super::Ctx;
use crate::cursors::CursorSource;
use crate::request::Fields;
use basalt_auth::{Action, Resource};
use basalt_error::Result;
use basalt_query::Matcher;
use bson::{doc, Document};

pub fn list_collections(ctx: &Ctx<'_>, body: &Document) -> Result<bson::RawDocumentBuf> {
    let fields = Fields::new(body);
    let name_only = fields.bool_or("nameOnly", false)?;
    let matcher = Matcher::new(fields.document_opt("filter")?.unwrap_or(&Document::new()))?;
    let batch_size = fields.cursor_batch_size()?;
    // Under access control a user without listCollections may list the names of the
    // collections it has privileges on, when it asks for just that (as mongosh does).
    let visible =
        crate::security::visible(ctx, &Resource::database(ctx.db), Action::ListCollections)?;
    if visible.is_some() && !(name_only && fields.bool_or("authorizedCollections", false)?) {
        return Err(crate::security::not_authorized(ctx.db, body));
    }
    let mut entries = Vec::new();
    for collection in ctx.server.catalog.collections_of(ctx.db) {
        let meta = collection.meta();
        if visible
            .as_ref()
            .is_some_and(|v| !v.shows(ctx.db, Some(&meta.name)))
        {
            continue;
        }
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
    for view in crate::views::list(&ctx.server.catalog, ctx.db)? {
        if visible
            .as_ref()
            .is_some_and(|v| !v.shows(ctx.db, Some(&view.name)))
        {
            continue;
        }
        let full = doc! {
            "name": view.name.clone(),
            "type": "view",
            "options": view.options(),
            "info": { "readOnly": true },
        };
        if matcher.matches(&full) {
            entries.push(if name_only {
                doc! { "name": view.name, "type": "view" }
            } else {
                full
            });
        }
    }
    for (name, series, bucket_options) in crate::timeseries::list(&ctx.server.catalog, ctx.db) {
        if visible
            .as_ref()
            .is_some_and(|v| !v.shows(ctx.db, Some(&name)))
        {
            continue;
        }
        let mut options = doc! { "timeseries": series.to_document() };
        if let Some(seconds) = bucket_options.get("expireAfterSeconds") {
            options.insert("expireAfterSeconds", seconds.clone());
        }
        let full = doc! {
            "name": name.clone(),
            "type": "timeseries",
            "options": options,
            "info": { "readOnly": false },
        };
        if matcher.matches(&full) {
            entries.push(if name_only {
                doc! { "name": name, "type": "timeseries" }
            } else {
                full
            });
        }
    }
    // A replica set member's oplog, a capped collection without an `_id` index.
    if let Some(set) = ctx.server.replication().filter(|_| {
        ctx.db == crate::local_oplog::DB
            && visible
                .as_ref()
                .is_none_or(|v| v.shows(ctx.db, Some(crate::local_oplog::COLLECTION)))
    }) {
        let full = doc! {
            "name": crate::local_oplog::COLLECTION,
            "type": "collection",
            "options": { "capped": true, "size": set.oplog_size_bytes() as i64 },
            "info": { "readOnly": false },
        };
        if matcher.matches(&full) {
            entries.push(if name_only {
                doc! { "name": crate::local_oplog::COLLECTION, "type": "collection" }
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
        crate::security::cursor_owner(ctx),
    )
}
