//! `cloneCollectionAsCapped` and `convertToCapped`: a capped copy of a collection, under
//! a new name or in its place.
//!
//! Both copy the documents in natural order into a new capped collection, which keeps
//! the newest ones that fit (see `basalt_catalog`'s `capped.rs`). `convertToCapped`
//! copies into a temporary collection and renames it over the original, as mongod
//! does, so the original's secondary indexes are not kept (its `_id` index is).

use super::create::capped_size;
use super::write_batch::durability;
use super::Ctx;
use crate::exec::{AccessPath, CollectionScan};
use crate::request::Fields;
use basalt_catalog::{validate_collection_name, Collection};
use basalt_error::{Error, ErrorCode, Result};
use basalt_query::Matcher;
use basalt_storage::Durability;
use bson::{doc, Bson, Document};

/// The longest namespace (`db.collection`) in bytes.
const MAX_NAMESPACE_BYTES: usize = 255;

/// Documents copied per insert batch.
const COPY_BATCH_DOCS: usize = 1000;

/// `system.*` names a capped copy may have; other `system.` names are the server's.
const ALLOWED_SYSTEM_NAMES: &[&str] = &[
    "system.users",
    "system.views",
    "system.js",
    "system.profile",
];

pub fn clone_collection_as_capped(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let source = collection_name(body, "cloneCollectionAsCapped")?;
    let target = collection_name(body, "toCollection")?;
    if target.starts_with("system.") && !ALLOWED_SYSTEM_NAMES.contains(&target) {
        return Err(Error::new(
            ErrorCode::INVALID_NAMESPACE,
            format!("Invalid collection name: {}.{target}", ctx.db),
        ));
    }
    let options = capped_options(body)?;
    let source = existing(ctx, source)?;
    if crate::views::get(&ctx.server.catalog, ctx.db, target)?.is_some() {
        return Err(crate::views::not_a_collection(ctx.db, target));
    }
    let copy = ctx.server.catalog.create(ctx.db, target, options)?;
    copy_documents(ctx, &source, &copy, durability(&Fields::new(body))?)?;
    Ok(Document::new())
}

pub fn convert_to_capped(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    // The name is taken literally (a `$` in it is no field path): only what cannot be a
    // namespace is refused; a name no collection has is NamespaceNotFound below.
    let name = match body.get("convertToCapped") {
        Some(Bson::String(name))
            if !name.is_empty() && ctx.db.len() + 1 + name.len() <= MAX_NAMESPACE_BYTES =>
        {
            name.as_str()
        }
        _ => {
            return Err(Error::new(
                ErrorCode::INVALID_NAMESPACE,
                "convertToCapped needs the name of a collection of this database",
            ))
        }
    };
    if name == crate::views::SYSTEM_VIEWS {
        return Err(Error::bad_value(
            "cannot convert system.views, which holds the definitions of views",
        ));
    }
    let options = capped_options(body)?;
    let source = existing(ctx, name)?;
    let catalog = &ctx.server.catalog;
    let temp = format!("tmp.convertToCapped.{}", bson::Uuid::new());
    let copy = catalog.create(ctx.db, &temp, options)?;
    let converted = copy_documents(ctx, &source, &copy, durability(&Fields::new(body))?)
        .and_then(|()| catalog.rename((ctx.db, &temp), (ctx.db, name), true));
    if converted.is_err() {
        // The copy holds nothing anyone reads; the failure to report is the copy's.
        let _ = catalog.drop_collection(ctx.db, &temp);
    }
    converted.map(|()| Document::new())
}

/// A collection name given in `field`: a string (TypeMismatch otherwise) that is a
/// valid collection name (InvalidNamespace otherwise).
fn collection_name<'b>(body: &'b Document, field: &str) -> Result<&'b str> {
    let command = body.keys().next().map_or("", String::as_str);
    match body.get(field) {
        Some(Bson::String(name)) => {
            let db = body.get_str("$db").unwrap_or("db");
            validate_collection_name(db, name)?;
            Ok(name)
        }
        other => Err(Error::type_mismatch(format!(
            "BSON field '{command}.{field}' is the wrong type '{}', expected type 'string'",
            other.map_or("missing", crate::request::type_name)
        ))),
    }
}

/// The collection `name` of the command's database; NamespaceNotFound when missing.
fn existing(ctx: &Ctx<'_>, name: &str) -> Result<std::sync::Arc<Collection>> {
    ctx.server.catalog.get(ctx.db, name).ok_or_else(|| {
        Error::new(
            ErrorCode::NAMESPACE_NOT_FOUND,
            format!("source collection {}.{name} does not exist", ctx.db),
        )
    })
}

/// The options of the capped copy: `size`, a positive number (InvalidOptions
/// otherwise) of bytes, as `create` takes it.
fn capped_options(body: &Document) -> Result<Document> {
    let size = body
        .get("size")
        .and_then(crate::request::coerced_integer)
        .filter(|size| *size >= 1)
        .ok_or_else(|| {
            Error::new(
                ErrorCode::INVALID_OPTIONS,
                "a capped collection needs a 'size' of at least 1 byte",
            )
        })?;
    Ok(doc! { "capped": true, "size": capped_size(&Bson::Int64(size))? })
}

/// Inserts `source`'s documents into `copy` in natural order, in batches.
fn copy_documents(
    ctx: &Ctx<'_>,
    source: &std::sync::Arc<Collection>,
    copy: &Collection,
    durability: Durability,
) -> Result<()> {
    let scan = CollectionScan::new(
        source.clone(),
        Matcher::new(&Document::new())?,
        AccessPath::CollectionScan,
        None,
        0,
        None,
        ctx.deadline(),
    );
    let mut batch = Vec::with_capacity(COPY_BATCH_DOCS);
    let insert = |batch: &mut Vec<Document>| -> Result<()> {
        let outcomes = copy.writer().insert_many(batch, true, durability)?;
        batch.clear();
        outcomes.into_iter().try_for_each(|o| o.map(|_| ()))
    };
    for document in scan.into_stream() {
        batch.push(document?);
        if batch.len() == COPY_BATCH_DOCS {
            insert(&mut batch)?;
        }
    }
    if !batch.is_empty() {
        insert(&mut batch)?;
    }
    Ok(())
}
