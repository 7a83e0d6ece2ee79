//! `drop`, `dropDatabase` and `renameCollection`.

use super::Ctx;
use crate::request::Fields;
use basalt_error::{Error, ErrorCode, Result};
use bson::{doc, Bson, Document};

pub fn drop(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let name = Fields::new(body).collection()?;
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

pub fn drop_database(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    match body.get("dropDatabase") {
        Some(v) if basalt_value::as_f64(v) == Some(1.0) => {}
        _ => return Err(Error::failed_to_parse("have to pass 1 as db parameter")),
    }
    ctx.server.catalog.drop_database(ctx.db)?;
    Ok(doc! { "dropped": ctx.db })
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
