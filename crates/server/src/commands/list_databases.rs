//! `listDatabases`: every database with its size, optionally filtered or names only;
//! under access control, only those the user may see.

use super::Ctx;
use crate::request::Fields;
use basalt_auth::{Action, Resource};
use basalt_error::Result;
use basalt_query::Matcher;
use bson::{doc, Bson, Document};

pub fn list_databases(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let fields = Fields::new(body);
    let name_only = fields.bool_or("nameOnly", false)?;
    let matcher = Matcher::new(fields.document_opt("filter")?.unwrap_or(&Document::new()))?;
    // Under access control a user without listDatabases sees the databases it has
    // privileges in, unless it asks for all of them (authorizedDatabases: false).
    let visible = crate::security::visible(ctx, &Resource::Cluster, Action::ListDatabases)?;
    if visible.is_some() && !fields.bool_or("authorizedDatabases", true)? {
        return Err(crate::security::not_authorized(ctx.db, body));
    }
    let mut databases = Vec::new();
    let mut total_size = 0i64;
    for db in ctx.server.catalog.database_names() {
        if visible.as_ref().is_some_and(|v| !v.shows(&db, None)) {
            continue;
        }
        // With nameOnly the filter sees the name alone, as in MongoDB.
        if name_only {
            let entry = doc! { "name": db };
            if matcher.matches(&entry) {
                databases.push(Bson::Document(entry));
            }
            continue;
        }
        let size = super::stats::database_disk_bytes(ctx, &db);
        let entry = doc! { "name": db.clone(), "sizeOnDisk": size, "empty": size == 0 };
        if !matcher.matches(&entry) {
            continue;
        }
        total_size += size;
        databases.push(Bson::Document(entry));
    }
    if name_only {
        return Ok(doc! { "databases": databases });
    }
    Ok(doc! {
        "databases": databases,
        "totalSize": total_size,
        "totalSizeMb": total_size / (1024 * 1024),
    })
}
