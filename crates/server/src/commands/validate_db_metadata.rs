//! `validateDBMetadata`: which collections, indexes and views of a database (or of every
//! database) would break the Stable API version the command names, before an
//! application turns `apiStrict` on. Under version 1 strict: text and sparse indexes,
//! and views whose pipelines use stages outside version 1, as mongod reports them
//! (APIStrictError entries in `apiVersionErrors`).

use super::api_version::is_version_1_stage;
use super::arguments::{check_struct, Field, Kind};
use super::Ctx;
use basalt_catalog::DATABASE_NAME_LENGTH_MAX_BYTES;
use basalt_error::{Error, ErrorCode, Result};
use bson::{doc, Document};

/// What `apiParameters` may hold (mongod's strict `APIParamsForCmd`).
const API_PARAMETERS: &[Field] = &[
    ("version", Kind::String),
    ("strict", Kind::StrictBool),
    ("deprecationErrors", Kind::StrictBool),
];

pub fn validate_db_metadata(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    // An object, present, and `db` and `collection` strings, as arguments.rs checked.
    let parameters = body
        .get_document("apiParameters")
        .cloned()
        .unwrap_or_default();
    check_struct(
        "validateDBMetadata.apiParameters",
        &parameters,
        API_PARAMETERS,
        &["version"],
    )?;
    // Only version 1 has rules; any other version has none to break.
    let version_1 = parameters
        .get_str("version")
        .is_ok_and(|version| version == "1");
    let strict = basalt_expr::truthy(parameters.get("strict"));
    let (db, collection) = (body.get_str("db").ok(), body.get_str("collection").ok());
    let databases = match db {
        Some(db) => {
            check_database_name(db)?;
            vec![db.to_string()]
        }
        None if ctx.db == "admin" => ctx.server.catalog.database_names(),
        None => vec![ctx.db.to_string()],
    };
    if let Some(collection) = collection {
        // mongod checks only what no namespace can hold here: `$` and long names pass.
        if collection.is_empty() || collection.starts_with('.') || collection.contains('\0') {
            return Err(Error::new(
                ErrorCode::INVALID_NAMESPACE,
                format!("Invalid collection name: '{collection}'"),
            ));
        }
    }
    let mut errors = Vec::new();
    if strict && version_1 {
        for db in &databases {
            metadata_errors(ctx, db, collection, &mut errors)?;
        }
    }
    Ok(doc! { "apiVersionErrors": errors })
}

/// The API version 1 errors of `db` (of its `collection` alone when given).
fn metadata_errors(
    ctx: &Ctx<'_>,
    db: &str,
    collection: Option<&str>,
    errors: &mut Vec<Document>,
) -> Result<()> {
    let catalog = &ctx.server.catalog;
    let wanted = |name: &str| collection.is_none_or(|c| c == name);
    for found in catalog.collections_of(db) {
        let meta = found.meta();
        if !wanted(&meta.name) {
            continue;
        }
        for index in &meta.indexes {
            if index.text().is_some() || index.sparse {
                errors.push(strict_error(
                    &meta.namespace(),
                    format!(
                        "The index with name {} is not allowed in API version 1.",
                        index.name
                    ),
                ));
            }
        }
    }
    for view in crate::views::list(catalog, db)? {
        if !wanted(&view.name) {
            continue;
        }
        let outside = view
            .pipeline
            .iter()
            .filter_map(|stage| stage.keys().next())
            .find(|stage| !is_version_1_stage(stage));
        if let Some(stage) = outside {
            errors.push(strict_error(
                &format!("{db}.{}", view.name),
                format!("{stage} is not allowed with 'apiStrict: true' in API Version 1"),
            ));
        }
    }
    Ok(())
}

fn strict_error(namespace: &str, message: String) -> Document {
    doc! {
        "ns": namespace,
        "code": ErrorCode::API_STRICT_ERROR.0,
        "codeName": ErrorCode::API_STRICT_ERROR.name(),
        "errmsg": message,
    }
}

/// A database name as validateDBMetadata checks it: not empty (28539); no dot or null
/// byte, at most 63 bytes (InvalidNamespace); no slash, backslash, space or double
/// quote (13280, InvalidDBName); `$` is allowed here.
fn check_database_name(db: &str) -> Result<()> {
    if db.is_empty() {
        return Err(Error::location(
            28539,
            "validateDBMetadata: 'db' cannot be empty",
        ));
    }
    if db.contains(['.', '\0']) || db.len() > DATABASE_NAME_LENGTH_MAX_BYTES {
        return Err(Error::new(
            ErrorCode::INVALID_NAMESPACE,
            format!("Invalid database name: '{db}'"),
        ));
    }
    if db.contains(['/', '\\', ' ', '"']) {
        return Err(Error::location(
            13280,
            format!("Invalid database name: '{db}'"),
        ));
    }
    Ok(())
}
