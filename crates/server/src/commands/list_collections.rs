//! `listCollections`: the collections, views and time-series collections of a database
//! as a cursor, with filter and nameOnly.

use super::Ctx;
use crate::cursors::CursorSource;
use crate::request::Fields;
use crate::Server;
use basalt_auth::{Action, Resource};
use basalt_error::Result;
use basalt_query::Matcher;
use bson::{doc, Bson, Document};

pub fn list_collections(ctx: &Ctx<'_>, body: &Document) -> Result<bson::RawDocumentBuf> {
    let fields = Fields::new(body);
    let name_only = fields.bool_or("nameOnly", false)?;
    let matcher = Matcher::new(fields.document_opt("filter")?.unwrap_or(&Document::new()))?;
    let batch_size = fields.cursor_batch_size()?;
    // A bool (or null) by now (`arguments.rs`).
    let authorized_only = matches!(body.get("authorizedCollections"), Some(Bson::Boolean(true)));
    // Under access control a user without listCollections may list the names of the
    // collections it has privileges on, when it asks for just that (as mongosh does).
    let visible =
        crate::security::visible(ctx, &Resource::database(ctx.db), Action::ListCollections)?;
    if visible.is_some() && !(name_only && authorized_only) {
        return Err(crate::security::not_authorized(ctx.db, body));
    }
    let shows = |name: &str| visible.as_ref().is_none_or(|v| v.shows(ctx.db, Some(name)));
    let entries = catalog_entries(ctx.server, ctx.db, &shows)?
        .into_iter()
        // With nameOnly the filter sees what is listed, the name and type alone.
        .map(|entry| match name_only {
            true => doc! {
                "name": entry.get("name").cloned().unwrap_or(Bson::Null),
                "type": entry.get("type").cloned().unwrap_or(Bson::Null),
            },
            false => entry,
        })
        .filter(|entry| matcher.matches(entry))
        .collect();
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

/// What `listCollections` says of each collection, view and time-series collection of
/// `db` that `shows` lets through (and, on a replica set member, of its oplog), with
/// every field (`$listClusterCatalog` builds on them).
pub(crate) fn catalog_entries(
    server: &Server,
    db: &str,
    shows: &dyn Fn(&str) -> bool,
) -> Result<Vec<Document>> {
    let mut entries = Vec::new();
    for collection in server.catalog.collections_of(db) {
        let meta = collection.meta();
        if shows(&meta.name) {
            entries.push(doc! {
                "name": meta.name.clone(),
                "type": "collection",
                "options": meta.options.clone(),
                "info": { "readOnly": false, "uuid": bson::Binary::from_uuid(meta.uuid) },
                "idIndex": { "v": 2, "key": { "_id": 1 }, "name": "_id_" },
            });
        }
    }
    for view in crate::views::list(&server.catalog, db)? {
        if shows(&view.name) {
            entries.push(doc! {
                "name": view.name.clone(),
                "type": "view",
                "options": view.options(),
                "info": { "readOnly": true },
            });
        }
    }
    for (name, series, bucket_options) in crate::timeseries::list(&server.catalog, db) {
        if !shows(&name) {
            continue;
        }
        let mut options = doc! { "timeseries": series.to_document() };
        if let Some(seconds) = bucket_options.get("expireAfterSeconds") {
            options.insert("expireAfterSeconds", seconds.clone());
        }
        entries.push(doc! {
            "name": name,
            "type": "timeseries",
            "options": options,
            "info": { "readOnly": false },
        });
    }
    // A replica set member's oplog, a capped collection without an `_id` index.
    if let Some(set) = server
        .replication()
        .filter(|_| db == crate::local_oplog::DB && shows(crate::local_oplog::COLLECTION))
    {
        entries.push(doc! {
            "name": crate::local_oplog::COLLECTION,
            "type": "collection",
            "options": { "capped": true, "size": set.oplog_size_bytes() as i64 },
            "info": { "readOnly": false },
        });
    }
    Ok(entries)
}
