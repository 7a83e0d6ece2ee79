//! `dataSize`: the bytes and number of a collection's documents (`dataSize:
//! "db.collection"`), or of those whose key for `keyPattern` lies in `[min, max)`, as
//! mongod counts them: the documents' BSON sizes, summed.

use super::Ctx;
use crate::request::type_name;
use basalt_error::{Error, ErrorCode, Result};
use bson::{doc, Bson, Document};
use std::cmp::Ordering;
use std::ops::ControlFlow;
use std::time::Instant;

pub fn data_size(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let started = Instant::now();
    let namespace = match body.get("dataSize") {
        Some(Bson::String(namespace)) => namespace,
        Some(Bson::Null) => {
            return Err(Error::location(
                40414,
                "BSON field 'dataSize.dataSize' is missing but a required field",
            ))
        }
        Some(other) => return Err(wrong_type("dataSize", other, "string")),
        None => unreachable!("the command's first field names it"),
    };
    let Some((db, name)) = namespace
        .split_once('.')
        .filter(|(d, c)| !d.is_empty() && !c.is_empty())
    else {
        return Err(Error::new(
            ErrorCode::INVALID_NAMESPACE,
            format!("Invalid namespace specified '{namespace}'"),
        ));
    };
    let document = |field: &str| match body.get(field) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::Document(d)) => Ok(Some(d)),
        Some(other) => Err(wrong_type(field, other, "object")),
    };
    let key_pattern = document("keyPattern")?;
    let (min, max) = (document("min")?, document("max")?);
    let estimate = match body.get("estimate") {
        None | Some(Bson::Null) => None,
        Some(Bson::Boolean(b)) => Some(*b),
        Some(n) if basalt_value::is_number(n) => None,
        Some(other) => return Err(wrong_type("estimate", other, "bool")),
    };
    let range = match (key_pattern, min, max) {
        (Some(pattern), Some(min), Some(max)) => Some((pattern, min, max)),
        (Some(_), Some(_), None) | (Some(_), None, Some(_)) => {
            return Err(Error::bad_value(
                "only one of min or max specified: both or neither are needed",
            ))
        }
        (None, Some(_), Some(_)) => {
            return Err(Error::new(
                ErrorCode::OPERATION_FAILED,
                "no key pattern specified for the min and max",
            ))
        }
        _ => None,
    };
    if crate::views::get(&ctx.server.catalog, db, name)?.is_some() {
        return Err(Error::new(
            ErrorCode::COMMAND_NOT_SUPPORTED_ON_VIEW,
            format!("Namespace {namespace} is a view, not a collection"),
        ));
    }
    let (mut size, mut count) = (0i64, 0i64);
    if let Some(collection) = ctx.server.catalog.get(db, name) {
        let snapshot = collection.snapshot();
        collection.scan(&*snapshot, None, &mut |_, raw| {
            let counted = match &range {
                Some((pattern, min, max)) => {
                    let doc = Document::try_from(raw)?;
                    in_range(&doc, pattern, min, max)
                }
                None => true,
            };
            if counted {
                size += raw.as_bytes().len() as i64;
                count += 1;
            }
            Ok(ControlFlow::Continue(()))
        })?;
    }
    let mut reply = Document::new();
    if let Some(estimate) = estimate {
        reply.insert("estimate", estimate);
    }
    reply.extend(doc! {
        "size": size,
        "numObjects": count,
        "millis": started.elapsed().as_millis() as i32,
    });
    Ok(reply)
}

/// Whether the document's values for the key pattern's fields, in order, are at least
/// `min`'s and below `max`'s.
fn in_range(doc: &Document, pattern: &Document, min: &Document, max: &Document) -> bool {
    let compare = |bound: &Document| {
        for path in pattern.keys() {
            let value = basalt_value::path::get_path(doc, path).unwrap_or(&Bson::Null);
            let limit = bound.get(path).unwrap_or(&Bson::Null);
            match basalt_value::compare_values(value, limit) {
                Ordering::Equal => continue,
                other => return other,
            }
        }
        Ordering::Equal
    };
    compare(min) != Ordering::Less && compare(max) == Ordering::Less
}

fn wrong_type(field: &str, value: &Bson, expected: &str) -> Error {
    Error::type_mismatch(format!(
        "BSON field 'dataSize.{field}' is the wrong type '{}', expected type '{expected}'",
        type_name(value)
    ))
}
