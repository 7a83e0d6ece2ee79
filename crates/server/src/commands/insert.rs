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
        match prepare_for_insert(doc) {
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
        let collection = ctx.server.catalog.get_or_create(ctx.db, name)?;
        let outcomes = collection
            .writer()
            .insert_many(&prepared, ordered, durability)?;
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
    Ok(ready)
}

pub fn check_document_size(doc: &Document) -> Result<()> {
    let size = doc.to_vec()?.len();
    if size > MAX_BSON_OBJECT_SIZE_BYTES {
        return Err(Error::new(
            ErrorCode::BSON_OBJECT_TOO_LARGE,
            format!("object to insert too large. size in bytes: {size}, max size: {MAX_BSON_OBJECT_SIZE_BYTES}"),
        ));
    }
    Ok(())
}

/// `_id` may be any value but an array, a regex or undefined.
pub fn validate_id(id: &Bson) -> Result<()> {
    let what = match id {
        Bson::Array(_) => "array",
        Bson::RegularExpression(_) => "regex",
        Bson::Undefined => "undefined",
        _ => return Ok(()),
    };
    Err(Error::new(
        ErrorCode::BAD_VALUE,
        format!("can't use an {what} for _id"),
    ))
}
