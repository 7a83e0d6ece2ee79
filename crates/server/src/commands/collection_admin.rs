//! `drop` (of a collection or a view), `dropDatabase` and `renameCollection`.

use super::Ctx;
use crate::request::Fields;
use basalt_catalog::validate_collection_name;
use basalt_error::{Error, ErrorCode, Result};
use bson::{doc, Bson, Document};

pub fn drop(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let fields = Fields::new(body);
    let name = fields.collection()?;
    let durability = super::write_batch::durability(&fields)?;
    if crate::views::remove(&ctx.server.catalog, ctx.db, name, durability)? {
        return Ok(doc! { "ns": format!("{}.{name}", ctx.db) });
    }
    // A time-series collection goes with its buckets.
    if crate::timeseries::get(&ctx.server.catalog, ctx.db, name).is_some() {
        let buckets = crate::timeseries::buckets_name(name);
        ctx.server.catalog.drop_collection(ctx.db, &buckets)?;
        return Ok(doc! { "ns": format!("{}.{name}", ctx.db) });
    }
    let indexes = ctx
        .server
        .catalog
        .get(ctx.db, name)
        .map(|c| c.meta().indexes.len() as i32);
    // Since MongoDB 7.0, dropping a collection that does not exist succeeds.
    ctx.server.catalog.drop_collection(ctx.db, name)?;
    let mut reply = doc! { "ns": format!("{}.{name}", ctx.db) };
    if let Some(n) = indexes {
        reply.insert("nIndexesWas", n);
    }
    Ok(reply)
}

/// `dropDatabase: 1`, whose reply is only `ok` as mongod 8.0's. The value is a number
/// that comes to 1 as mongod reads it: a double truncated, a decimal rounded.
pub fn drop_database(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let one = match body.get("dropDatabase") {
        None | Some(Bson::Null) => {
            return Err(Error::location(
                40414,
                "BSON field 'dropDatabase' is missing but a required field",
            ))
        }
        Some(value) if crate::request::coerced_integer(value).is_some() => {
            crate::request::coerced_integer(value) == Some(1)
        }
        Some(other) => {
            return Err(Error::type_mismatch(format!(
                "BSON field 'dropDatabase' is the wrong type '{}', expected types '[long, int, \
                 decimal, double]'",
                crate::request::type_name(other)
            )))
        }
    };
    if !one {
        return Err(Error::location(
            5255100,
            "Invalid value for field 'dropDatabase': must be 1",
        ));
    }
    if ctx.db == "admin" {
        return Err(Error::new(
            ErrorCode::ILLEGAL_OPERATION,
            "Dropping the 'admin' database is prohibited.",
        ));
    }
    ctx.server.catalog.drop_database(ctx.db)?;
    Ok(Document::new())
}

/// A namespace of renameCollection (`renameCollection` or `to`), checked as mongod
/// checks it: present (40414) and a string (TypeMismatch); a database and a collection
/// part with no character a name may not have (InvalidNamespace); no `$`, no more than
/// 255 bytes, and no system collection or oplog (IllegalOperation).
fn split_namespace<'a>(body: &'a Document, field: &str) -> Result<(&'a str, &'a str)> {
    let fields = Fields::new(body);
    let namespace = fields.required(field, fields.string_opt(field)?)?;
    let invalid = || {
        Error::new(
            ErrorCode::INVALID_NAMESPACE,
            format!("Invalid {field} namespace: {namespace}"),
        )
    };
    let (db, collection) = namespace.split_once('.').ok_or_else(invalid)?;
    let illegal = |why: &str| {
        Error::new(
            ErrorCode::ILLEGAL_OPERATION,
            format!("error with {field} namespace {namespace}: {why}"),
        )
    };
    // Refused before the names' own checks, with renameCollection's code.
    if namespace.contains('$') {
        return Err(illegal("a namespace may not contain '$'"));
    }
    if namespace.len() > basalt_catalog::NAMESPACE_LENGTH_MAX_BYTES {
        return Err(illegal("the namespace is longer than 255 bytes"));
    }
    validate_collection_name(db, collection).map_err(|_| invalid())?;
    // The views' definitions move only with their views (`create`, `collMod`, `drop`).
    if collection.starts_with("system.") && collection != crate::views::SYSTEM_VIEWS {
        return Err(illegal("system collections cannot be renamed"));
    }
    if db == "local" && collection.starts_with("oplog.") {
        return Err(illegal("the oplog cannot be renamed"));
    }
    Ok((db, collection))
}

/// CollectionUUIDMismatch (361) unless `namespace` is the collection with UUID
/// `expected`, with the details mongod gives.
fn check_uuid(ctx: &Ctx<'_>, namespace: (&str, &str), expected: bson::Uuid) -> Result<()> {
    let actual = ctx.server.catalog.get(namespace.0, namespace.1);
    if actual.as_ref().is_some_and(|c| c.meta().uuid == expected) {
        return Ok(());
    }
    let actual_name = ctx
        .server
        .catalog
        .collections_of(namespace.0)
        .into_iter()
        .find(|c| c.meta().uuid == expected)
        .map_or(Bson::Null, |c| Bson::String(c.meta().name.clone()));
    Err(Error::new(
        ErrorCode::COLLECTION_UUID_MISMATCH,
        format!(
            "Collection UUID {expected} does not match that of the collection {}.{}",
            namespace.0, namespace.1
        ),
    )
    .with_extra(doc! {
        "db": namespace.0,
        "collectionUUID": expected,
        "expectedCollection": namespace.1,
        "actualCollection": actual_name,
    }))
}

pub fn rename_collection(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let from = split_namespace(body, "renameCollection")?;
    let to = split_namespace(body, "to")?;
    match body.get("stayTemp") {
        None | Some(Bson::Null | Bson::Boolean(_)) => {}
        Some(other) => {
            return Err(Error::type_mismatch(format!(
            "BSON field 'renameCollection.stayTemp' is the wrong type '{}', expected type 'bool'",
            crate::request::type_name(other)
        )))
        }
    }
    let collection_uuid = match body.get("collectionUUID") {
        None | Some(Bson::Null) => None,
        Some(Bson::Binary(binary)) if binary.subtype == bson::spec::BinarySubtype::Uuid => {
            let bytes = <[u8; 16]>::try_from(binary.bytes.as_slice()).map_err(|_| {
                Error::new(
                    ErrorCode::INVALID_UUID,
                    "collectionUUID must be a UUID of 16 bytes",
                )
            })?;
            Some(bson::Uuid::from_bytes(bytes))
        }
        Some(other) => {
            return Err(Error::type_mismatch(format!(
                "BSON field 'renameCollection.collectionUUID' is the wrong type '{}', expected type 'uuid'",
                crate::request::type_name(other)
            )))
        }
    };
    // 8.0's dropTarget may name the target by its UUID: it is dropped only if it is
    // that collection, and the rename is refused when it is not.
    let (drop_target, target_uuid) = match body.get("dropTarget") {
        Some(Bson::Binary(binary)) => {
            let uuid = <[u8; 16]>::try_from(binary.bytes.as_slice())
                .ok()
                .filter(|_| binary.subtype == bson::spec::BinarySubtype::Uuid)
                .map(bson::Uuid::from_bytes)
                .ok_or_else(|| {
                    Error::new(
                        ErrorCode::INVALID_UUID,
                        "dropTarget must be a bool or a UUID (binData subtype 4 of 16 bytes)",
                    )
                })?;
            if from.0 != to.0 {
                return Err(Error::new(
                    ErrorCode::INVALID_OPTIONS,
                    "dropTarget by UUID is not allowed for a rename across databases",
                ));
            }
            (true, Some(uuid))
        }
        None => (false, None),
        Some(Bson::Boolean(drop)) => (*drop, None),
        Some(other) => {
            return Err(Error::type_mismatch(format!(
                "BSON field 'renameCollection.dropTarget' is the wrong type '{}', expected types '[bool, uuid]'",
                crate::request::type_name(other)
            )))
        }
    };
    let catalog = &ctx.server.catalog;
    if let Some(expected) = collection_uuid {
        check_uuid(ctx, from, expected)?;
    }
    if let Some(expected) = target_uuid {
        check_uuid(ctx, to, expected)?;
    }
    // A database is one name whatever its case, as mongod has it.
    if !catalog.database_names().iter().any(|db| db == to.0) {
        if let Some(existing) = catalog
            .database_names()
            .into_iter()
            .find(|db| db.eq_ignore_ascii_case(to.0))
        {
            return Err(Error::new(
                ErrorCode::DATABASE_DIFFER_CASE,
                format!("db already exists with different case already have: [{existing}] trying to create [{}]", to.0),
            ));
        }
    }
    if [from.1, to.1].contains(&crate::views::SYSTEM_VIEWS) {
        return Err(Error::new(
            ErrorCode::ILLEGAL_OPERATION,
            format!(
                "cannot rename {}: views are changed by collMod",
                crate::views::SYSTEM_VIEWS
            ),
        ));
    }
    // A view in the way is not dropped for a collection, as mongod refuses it.
    if crate::views::get(&ctx.server.catalog, to.0, to.1)?.is_some() {
        return Err(Error::new(
            ErrorCode::NAMESPACE_EXISTS,
            format!("a view already exists with the name {}.{}", to.0, to.1),
        ));
    }
    if catalog.get(from.0, from.1).is_none() {
        return Err(Error::new(
            ErrorCode::NAMESPACE_NOT_FOUND,
            format!("Source collection {}.{} does not exist", from.0, from.1),
        ));
    }
    if from == to {
        return Err(Error::new(
            ErrorCode::ILLEGAL_OPERATION,
            "Can't rename a collection to itself",
        ));
    }
    ctx.server.catalog.rename(from, to, drop_target)?;
    Ok(Document::new())
}
