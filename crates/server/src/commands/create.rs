//! `create`: makes a collection explicitly, with options.
//!
//! Capped collections, validators, views, time series and clustered collections are not
//! built yet; asking for one is refused with a clear error rather than silently creating
//! a plain collection that would behave differently.

use super::Ctx;
use crate::request::Fields;
use basalt_error::{Error, ErrorCode, Result};
use bson::{Bson, Document};

/// Options accepted and kept (reported back by listCollections).
const KEPT_OPTIONS: &[&str] = &[
    "storageEngine",
    "indexOptionDefaults",
    "collation",
    "validationLevel",
    "validationAction",
];
/// Options that ask for collection kinds Basalt does not have yet.
const UNSUPPORTED_OPTIONS: &[&str] = &[
    "capped",
    "viewOn",
    "pipeline",
    "timeseries",
    "clusteredIndex",
    "validator",
    "changeStreamPreAndPostImages",
    "encryptedFields",
];
/// Fields every command may carry that are not options.
const GENERIC_FIELDS: &[&str] = &[
    "lsid",
    "$db",
    "$readPreference",
    "$clusterTime",
    "apiVersion",
    "apiStrict",
    "apiDeprecationErrors",
    "writeConcern",
    "comment",
    "txnNumber",
    "autocommit",
    "startTransaction",
    "size",
    "max",
    "flags",
    "autoIndexId",
];

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
        if KEPT_OPTIONS.contains(&key.as_str()) {
            options.insert(key.clone(), value.clone());
        } else if !GENERIC_FIELDS.contains(&key.as_str())
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

fn is_requested(value: &Bson) -> bool {
    !matches!(value, Bson::Boolean(false) | Bson::Null)
}
