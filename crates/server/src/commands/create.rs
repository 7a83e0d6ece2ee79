//! `create`: makes a collection explicitly, with options.
//!
//! Capped collections, validators, views and time series are not built yet; asking for
//! one is refused with a clear error rather than silently creating a plain collection
//! that would behave differently. A clustered collection (`clusteredIndex` on `_id`) is
//! accepted: its `_id` index carries the given name and is reported as clustered, while
//! records keep insertion order on disk (MongoDB leaves natural order unspecified).

use super::Ctx;
use crate::request::{is_requested, Fields, GENERIC_COMMAND_FIELDS};
use basalt_error::{Error, ErrorCode, Result};
use bson::{doc, Bson, Document};

/// Options accepted and kept (reported back by listCollections).
const KEPT_OPTIONS: &[&str] = &[
    "storageEngine",
    "indexOptionDefaults",
    "collation",
    "validationLevel",
    "validationAction",
    "changeStreamPreAndPostImages",
    "clusteredIndex",
];
/// Options that ask for collection kinds Basalt does not have yet.
const UNSUPPORTED_OPTIONS: &[&str] = &[
    "capped",
    "viewOn",
    "pipeline",
    "timeseries",
    "validator",
    "encryptedFields",
    "expireAfterSeconds",
];
/// Legacy create fields that mean nothing without the options above.
const IGNORED_FIELDS: &[&str] = &["size", "max", "flags", "autoIndexId"];

pub fn create(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let fields = Fields::new(body);
    let name = fields.collection()?;
    let mut options = Document::new();
    for (key, value) in body.iter().skip(1) {
        if UNSUPPORTED_OPTIONS.contains(&key.as_str()) && is_requested(value) {
            return Err(Error::new(
                ErrorCode::COMMAND_NOT_SUPPORTED,
                format!("create with option '{key}' is not supported by Basalt yet"),
            ));
        }
        if key == "clusteredIndex" {
            options.insert(key.clone(), clustered_index(value)?);
        } else if key == "changeStreamPreAndPostImages" {
            options.insert(key.clone(), pre_and_post_images(value)?);
        } else if KEPT_OPTIONS.contains(&key.as_str()) {
            options.insert(key.clone(), value.clone());
        } else if !GENERIC_COMMAND_FIELDS.contains(&key.as_str())
            && !IGNORED_FIELDS.contains(&key.as_str())
            && !UNSUPPORTED_OPTIONS.contains(&key.as_str())
        {
            return Err(Error::location(
                40415,
                format!("BSON field 'create.{key}' is an unknown field."),
            ));
        }
    }
    match ctx.server.catalog.create(ctx.db, name, options.clone()) {
        Ok(_) => Ok(Document::new()),
        // MongoDB 7 treats re-creating an existing collection with the same options as
        // success, and with different options as NamespaceExists.
        Err(e) if e.code == ErrorCode::NAMESPACE_EXISTS => {
            let existing = ctx
                .server
                .catalog
                .get(ctx.db, name)
                .map(|c| c.meta().options.clone());
            if existing.as_ref() == Some(&options) {
                Ok(Document::new())
            } else {
                Err(Error::new(
                    ErrorCode::NAMESPACE_EXISTS,
                    format!(
                        "Collection {}.{name} already exists with different options",
                        ctx.db
                    ),
                ))
            }
        }
        Err(e) => Err(e),
    }
}

/// Validates `clusteredIndex`: MongoDB clusters only by `{_id: 1}`, uniquely.
fn clustered_index(value: &Bson) -> Result<Bson> {
    let Bson::Document(spec) = value else {
        return Err(Error::type_mismatch("'clusteredIndex' must be an object"));
    };
    let key_is_id = spec
        .get_document("key")
        .is_ok_and(|k| k == &doc! { "_id": 1 });
    if !key_is_id {
        return Err(Error::location(
            6053000,
            "The clusteredIndex option is only supported for key: {_id: 1}",
        ));
    }
    if !spec.get_bool("unique").unwrap_or(false) {
        return Err(Error::location(
            6053001,
            "The clusteredIndex option requires unique: true",
        ));
    }
    let mut kept = spec.clone();
    kept.insert("v", 2);
    Ok(Bson::Document(kept))
}

/// Validates `changeStreamPreAndPostImages: {enabled: <bool>}`. Change streams are not
/// served yet, so the setting is only kept and reported.
pub fn pre_and_post_images(value: &Bson) -> Result<Bson> {
    match value {
        Bson::Document(d) if d.len() == 1 && matches!(d.get("enabled"), Some(Bson::Boolean(_))) => {
            Ok(value.clone())
        }
        _ => Err(Error::failed_to_parse(
            "'changeStreamPreAndPostImages' must be an object {enabled: <bool>}",
        )),
    }
}
