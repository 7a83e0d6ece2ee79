//! `distinct`: the distinct values of a field among matching documents, arrays counted
//! by their elements, in MongoDB's value order.

use super::Ctx;
use crate::exec::{for_each_match, AccessPath};
use crate::request::Fields;
use basalt_error::{Error, Result};
use basalt_query::Matcher;
use basalt_value::{DistinctValues, FieldPath};
use bson::{doc, Bson, Document};
use std::ops::ControlFlow;

/// The field whose values a distinct collects.
pub(super) fn key(body: &Document) -> Result<String> {
    match body.get("key") {
        Some(Bson::String(key)) if key.contains('\0') => Err(Error::location(
            31032,
            "Key field cannot contain an embedded null byte",
        )),
        Some(Bson::String(key)) => Ok(key.clone()),
        // Null is a field not given, as mongod's parser reads it.
        None | Some(Bson::Null) => Err(Error::location(
            40414,
            "BSON field 'distinct.key' is missing but a required field",
        )),
        Some(other) => Err(Error::type_mismatch(format!(
            "BSON field 'distinct.key' is the wrong type '{}', expected type 'string'",
            crate::request::type_name(other)
        ))),
    }
}

/// The fields of a `distinct` command besides the generic ones.
pub fn distinct(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    super::generic_arguments::refuse_write_concern("distinct", body)?;
    let fields = Fields::new(body);
    let name = fields.collection()?;
    let key = key(body)?;
    let filter = fields.document_opt("query")?.cloned().unwrap_or_default();
    let collation = fields.collation()?;
    let matcher = Matcher::new(&filter)?.with_collation(collation.as_ref());
    let deadline = ctx.deadline();
    let Some(collection) = ctx.server.catalog.get(ctx.db, name) else {
        return Ok(doc! { "values": [] });
    };
    let hint = body.get("hint");
    let chosen = AccessPath::choose(&collection, &filter, collation.as_ref(), hint)?;
    // The key alone makes the column store worth reading: its chunk holds the values.
    let reads = [key.clone()];
    let column = crate::column_scan::find_path(
        &collection,
        &filter,
        collation.as_ref(),
        hint,
        &reads,
        (&chosen).into(),
    );
    let path = match column {
        Some(find) if !matches!(chosen, AccessPath::Columns(_)) => {
            // Counted in `$indexStats` as the planner's own choices are.
            collection.note_index_use(find.index.id);
            AccessPath::Columns(Box::new(find))
        }
        Some(find) => AccessPath::Columns(Box::new(find)),
        None => chosen,
    };
    if let AccessPath::Columns(find) = &path {
        let workers = ctx.server.scan_workers();
        let found = crate::column_scan::distinct(
            &collection,
            find,
            &key,
            &matcher,
            deadline.clone(),
            workers,
        )?;
        if let Some(values) = found {
            return Ok(doc! { "values": values });
        }
    }
    let field = FieldPath::parse(&key);
    let snapshot = collection.snapshot();
    let mut values = DistinctValues::new(collation.as_ref());
    for_each_match(
        &collection,
        &*snapshot,
        &matcher,
        &path,
        deadline,
        // Only the field whose values are collected is decoded (and the filter's).
        Some(&[key.split('.').next().unwrap_or(&key).to_string()]),
        &mut |_, doc| {
            values.insert_reached(&field, &doc);
            Ok(ControlFlow::Continue(()))
        },
    )?;
    Ok(doc! { "values": values.into_vec() })
}
