//! `validateDBMetadata`: which collections, indexes and views of a database (or of every
//! database) would break the Stable API version the command names, before an
//! application turns `apiStrict` on. Under version 1 strict: text and sparse indexes,
//! and views whose pipelines use stages outside version 1, as mongod reports them
//! (APIStrictError entries in `apiVersionErrors`).

use super::api_version::is_version_1_stage;
use super::Ctx;
use crate::request::{type_name, GENERIC_COMMAND_FIELDS};
use basalt_catalog::validate_collection_name;
use basalt_error::{Error, ErrorCode, Result};
use bson::{doc, Bson, Document};

/// Its own fields, besides the generic arguments.
const FIELDS: &[&str] = &["validateDBMetadata", "apiParameters", "db", "collection"];

/// What `apiParameters` may hold.
const API_PARAMETERS: &[&str] = &["version", "strict", "deprecationErrors"];

pub fn validate_db_metadata(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    for key in body.keys() {
        if !FIELDS.contains(&key.as_str()) && !GENERIC_COMMAND_FIELDS.contains(&key.as_str()) {
            return Err(unknown_field(key));
        }
    }
    let parameters = match body.get("apiParameters") {
        None | Some(Bson::Null) => return Err(missing("validateDBMetadata.apiParameters")),
        Some(Bson::Document(parameters)) => parameters,
        Some(other) => return Err(wrong_type("apiParameters", other, "object")),
    };
    for key in parameters.keys() {
        if !API_PARAMETERS.contains(&key.as_str()) {
            return Err(unknown_field(&format!("apiParameters.{key}")));
        }
    }
    // Only version 1 has rules; any other version has none to break.
    let version_1 = match parameters.get("version") {
        None | Some(Bson::Null) => return Err(missing("validateDBMetadata.apiParameters.version")),
        Some(Bson::String(version)) => version == "1",
        Some(other) => return Err(wrong_type("apiParameters.version", other, "string")),
    };
    let mut strict = false;
    for flag in ["strict", "deprecationErrors"] {
        match parameters.get(flag) {
            None | Some(Bson::Null) => {}
            Some(Bson::Boolean(value)) => strict |= flag == "strict" && *value,
            Some(other) => return Err(wrong_type(&format!("apiParameters.{flag}"), other, "bool")),
        }
    }
    let name_of = |field: &str| match body.get(field) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::String(name)) => Ok(Some(name.as_str())),
        Some(other) => Err(wrong_type(field, other, "string")),
    };
    let (db, collection) = (name_of("db")?, name_of("collection")?);
    let databases = match db {
        Some("") => {
            return Err(Error::location(
                28539,
                "validateDBMetadata: 'db' cannot be empty",
            ))
        }
        Some(db) => vec![db.to_string()],
        None if ctx.db == "admin" => ctx.server.catalog.database_names(),
        None => vec![ctx.db.to_string()],
    };
    if let Some(collection) = collection {
        validate_collection_name(databases.first().map_or(ctx.db, String::as_str), collection)?;
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

fn unknown_field(field: &str) -> Error {
    Error::location(
        40415,
        format!("BSON field 'validateDBMetadata.{field}' is an unknown field."),
    )
}

fn missing(field: &str) -> Error {
    Error::location(
        40414,
        format!("BSON field '{field}' is missing but a required field"),
    )
}

fn wrong_type(field: &str, value: &Bson, expected: &str) -> Error {
    Error::type_mismatch(format!(
        "BSON field 'validateDBMetadata.{field}' is the wrong type '{}', expected type '{expected}'",
        type_name(value)
    ))
}
