//! `drop` (of a collection or a view), `dropDatabase` and `renameCollection`.

use super::Ctx;
use crate::request::Fields;
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

fn split_namespace<'a>(value: Option<&'a Bson>, field: &str) -> Result<(&'a str, &'a str)> {
    match value {
        Some(Bson::String(ns)) => ns.split_once('.').ok_or_else(|| {
            Error::new(
                ErrorCode::INVALID_NAMESPACE,
                format!("Invalid {field} namespace: {ns}"),
            )
        }),
        _ => Err(Error::type_mismatch(format!(
            "BSON field 'renameCollection.{field}' is missing or not a string"
        ))),
    }
}

pub fn rename_collection(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let fields = Fields::new(body);
    let from = split_namespace(body.get("renameCollection"), "renameCollection")?;
    let to = split_namespace(body.get("to"), "to")?;
    let drop_target = fields.bool_or("dropTarget", false)?;
    // The views' definitions move only with their views (`create`, `collMod`, `drop`).
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
    if ctx.server.catalog.get(from.0, from.1).is_none() {
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
