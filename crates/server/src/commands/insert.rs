//! `insert`: stores documents, generating an ObjectId `_id` where one is missing.
//!
//! Ordered inserts stop at the first failing document; unordered ones go on and report
//! every failure. Valid documents of one command go to storage in one atomic batch.

use super::write_batch::{check_batch_size, durability, WriteErrors};
use super::Ctx;
use crate::request::Fields;
use crate::stats::Stats;
use basalt_error::{Error, ErrorCode, Result};
use basalt_wire::MAX_BSON_OBJECT_SIZE_BYTES;
use bson::{doc, Bson, Document};
use std::borrow::Cow;

pub fn insert(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let fields = Fields::new(body);
    let name = fields.collection()?;
    let documents = fields.documents("documents")?;
    check_batch_size(documents.len())?;
    let ordered = fields.bool_or("ordered", true)?;
    let durability = durability(&fields)?;

    let mut errors = WriteErrors::default();
    let mut prepared = Vec::with_capacity(documents.len());
    let mut positions = Vec::with_capacity(documents.len());
    for (i, doc) in documents.iter().enumerate() {
        match prepare_borrowed(doc) {
            Ok(ready) => {
                prepared.push(ready);
                positions.push(i);
            }
            Err(e) => {
                errors.push(i, e);
                if ordered {
                    break;
                }
            }
        }
    }
    let mut inserted = 0i64;
    if !prepared.is_empty() {
        let outcomes = ctx
            .server
            .catalog
            .write(ctx.db, name, true, |writer| {
                writer.insert_many(&prepared, ordered, durability)
            })?
            .unwrap_or_default();
        for (outcome, &position) in outcomes.into_iter().zip(&positions) {
            match outcome {
                Ok(_) => inserted += 1,
                Err(e) => {
                    // An ordered batch stops at its first storage error, which comes
                    // before any later validation error: keep only that one.
                    if ordered {
                        errors = WriteErrors::default();
                    }
                    errors.push(position, e);
                }
            }
        }
    }
    Stats::add(&ctx.server.stats.insert, inserted as u64);
    let mut reply = doc! { "n": inserted as i32 };
    errors.add_to(&mut reply);
    Ok(reply)
}

/// Checks a document for storage and puts `_id` first, generating one if missing.
pub fn prepare_for_insert(doc: &Document) -> Result<Document> {
    prepare_borrowed(doc).map(Cow::into_owned)
}

/// As [`prepare_for_insert`], without copying a document that is ready as it is (drivers
/// put `_id` first already).
fn prepare_borrowed(doc: &Document) -> Result<Cow<'_, Document>> {
    if let Some((_, id)) = doc.iter().next().filter(|(key, _)| *key == "_id") {
        validate_id(id)?;
        check_document_size(doc)?;
        return Ok(Cow::Borrowed(doc));
    }
    let mut ready = Document::new();
    match doc.get("_id") {
        Some(id) => {
            validate_id(id)?;
            ready.insert("_id", id.clone());
        }
        None => {
            ready.insert("_id", bson::oid::ObjectId::new());
        }
    }
    for (key, value) in doc {
        if key != "_id" {
            ready.insert(key.clone(), value.clone());
        }
    }
    check_document_size(&ready)?;
    Ok(Cow::Owned(ready))
}

pub fn check_document_size(doc: &Document) -> Result<()> {
    let size = basalt_value::document_size_bytes(doc);
    if size > MAX_BSON_OBJECT_SIZE_BYTES {
        return Err(Error::new(
            ErrorCode::BSON_OBJECT_TOO_LARGE,
            format!("object to insert too large. size in bytes: {size}, max size: {MAX_BSON_OBJECT_SIZE_BYTES}"),
        ));
    }
    Ok(())
}

/// `_id` may be any value but an array, a regex or undefined, and a document `_id` may
/// not hold `$`-prefixed field names (but for a DBRef's), at any depth.
pub fn validate_id(id: &Bson) -> Result<()> {
    let what = match id {
        Bson::Array(_) => "array",
        Bson::RegularExpression(_) => "regex",
        Bson::Undefined => "undefined",
        Bson::Document(d) => {
            return dollar_prefixed_field(d).map_or(Ok(()), |name| {
                Err(Error::new(
                    ErrorCode::DOLLAR_PREFIXED_FIELD_NAME,
                    format!(
                        "_id fields may not contain '$'-prefixed fields: {name} is not valid for storage."
                    ),
                ))
            })
        }
        _ => return Ok(()),
    };
    Err(Error::new(
        ErrorCode::BAD_VALUE,
        format!("can't use an {what} for _id"),
    ))
}

/// The first `$`-prefixed field name in `doc` or below, other than a DBRef's leading
/// `$ref` (a string) and `$id`, optionally followed by `$db` (a string).
fn dollar_prefixed_field(doc: &Document) -> Option<&str> {
    let mut fields = doc.iter().peekable();
    let is_dbref = matches!(doc.iter().next(), Some((k, Bson::String(_))) if k == "$ref")
        && doc.keys().nth(1).is_some_and(|k| k == "$id");
    if is_dbref {
        fields.next();
        fields.next();
        fields.next_if(|(k, v)| *k == "$db" && matches!(v, Bson::String(_)));
    }
    fields.find_map(|(name, value)| {
        if name.starts_with('$') {
            return Some(name.as_str());
        }
        dollar_prefixed_in_value(value)
    })
}

fn dollar_prefixed_in_value(value: &Bson) -> Option<&str> {
    match value {
        Bson::Document(d) => dollar_prefixed_field(d),
        Bson::Array(items) => items.iter().find_map(dollar_prefixed_in_value),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_values() {
        assert!(validate_id(&Bson::Int32(1)).is_ok());
        assert!(validate_id(&bson::bson!({"a.b": 1, "c": {"d": [1, {"e": 2}]}})).is_ok());
        assert!(validate_id(&bson::bson!({"$ref": "c", "$id": 1, "$db": "d"})).is_ok());
        assert_eq!(
            validate_id(&bson::bson!([1])).unwrap_err().message,
            "can't use an array for _id"
        );
        let e = validate_id(&bson::bson!({"$a": 1})).unwrap_err();
        assert_eq!(e.code, ErrorCode::DOLLAR_PREFIXED_FIELD_NAME);
        assert_eq!(
            e.message,
            "_id fields may not contain '$'-prefixed fields: $a is not valid for storage."
        );
        for nested in [
            bson::bson!({"a": {"$b": 1}}),
            bson::bson!({"a": [{"$b": 1}]}),
            bson::bson!({"a": 1, "$ref": "c", "$id": 1}),
            bson::bson!({"$ref": 1, "$id": 1}),
        ] {
            assert_eq!(
                validate_id(&nested).unwrap_err().code,
                ErrorCode::DOLLAR_PREFIXED_FIELD_NAME,
                "{nested}"
            );
        }
    }
}
