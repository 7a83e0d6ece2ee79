//! `insert`: stores documents, generating an ObjectId `_id` where one is missing.
//!
//! Documents are checked against the collection's validator (`crate::validation`).
//! Ordered inserts stop at the first failing document; unordered ones go on and report
//! every failure. Valid documents of one command go to storage in one atomic batch.
//! Documents sent as an OP_MSG document sequence (what drivers do) stay in their wire
//! bytes all the way to storage: only `_id` is decoded.

use super::write_batch::{check_batch_size, durability, WriteErrors};
use super::Ctx;
use crate::request::Fields;
use crate::stats::Stats;
use crate::validation::Validator;
use basalt_catalog::{InsertOutcome, Writer};
use basalt_error::{Error, ErrorCode, Result};
use basalt_wire::MAX_BSON_OBJECT_SIZE_BYTES;
use bson::raw::cstr;
use bson::{doc, Bson, Document, RawDocument, RawDocumentBuf};
use std::borrow::Cow;

pub fn insert(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let fields = Fields::new(body);
    let name = fields.collection()?;
    let raw = ctx
        .raw_sequences
        .iter()
        .find(|s| s.identifier == "documents");
    let decoded = match raw {
        Some(_) => Vec::new(),
        None => fields.documents("documents")?,
    };
    check_batch_size(raw.map_or(decoded.len(), |s| s.documents.len()))?;
    let ordered = fields.bool_or("ordered", true)?;
    let durability = durability(&fields)?;
    if let Some((options, buckets)) = crate::timeseries::get(&ctx.server.catalog, ctx.db, name) {
        let encoded;
        let measurements = match raw {
            Some(sequence) => &sequence.documents,
            None => {
                encoded = decoded
                    .iter()
                    .map(|doc| bson::RawDocumentBuf::try_from(*doc).map_err(Error::from))
                    .collect::<Result<Vec<_>>>()?;
                &encoded
            }
        };
        return insert_measurements(ctx, &options, &buckets, measurements, ordered, durability);
    }
    let bypass = fields.bool_or("bypassDocumentValidation", false)?;
    // A collection this insert creates has no validator.
    let validator = match ctx.server.catalog.get(ctx.db, name) {
        Some(collection) => Validator::of(&collection.meta(), bypass)?,
        None => None,
    };
    let target = Target { ctx, name, ordered };
    let (inserted, errors) = match raw {
        Some(sequence) => target.store(
            &sequence.documents,
            |doc| {
                let ready = prepare_raw(doc)?;
                if let Some(validator) = &validator {
                    validator.check_new(&Document::try_from(ready.as_ref())?)?;
                }
                Ok(ready)
            },
            |writer, docs| writer.insert_many_raw(docs, ordered, durability),
        )?,
        None => target.store(
            &decoded,
            |doc| {
                let ready = prepare_borrowed(doc)?;
                if let Some(validator) = &validator {
                    validator.check_new(&ready)?;
                }
                Ok(ready)
            },
            |writer, docs| writer.insert_many(docs, ordered, durability),
        )?,
    };
    Stats::add(&ctx.op_counters().insert, inserted as u64);
    let mut reply = doc! { "n": inserted as i32 };
    errors.add_to(&mut reply);
    Ok(reply)
}

/// An insert into a time-series collection: its measurements go into buckets.
fn insert_measurements(
    ctx: &Ctx<'_>,
    options: &crate::timeseries::TimeSeries,
    buckets: &basalt_catalog::Collection,
    measurements: &[bson::RawDocumentBuf],
    ordered: bool,
    durability: basalt_storage::Durability,
) -> Result<Document> {
    let mut errors = WriteErrors::default();
    let mut inserted = 0i64;
    let outcomes = crate::timeseries::insert(options, buckets, measurements, ordered, durability);
    for (position, outcome) in outcomes.into_iter().enumerate() {
        match outcome {
            Ok(()) => inserted += 1,
            Err(e) => errors.push(position, e),
        }
    }
    Stats::add(&ctx.op_counters().insert, inserted as u64);
    let mut reply = doc! { "n": inserted as i32 };
    errors.add_to(&mut reply);
    Ok(reply)
}

/// Where an insert goes, and how.
struct Target<'c, 'a> {
    ctx: &'c Ctx<'a>,
    name: &'c str,
    ordered: bool,
}

impl Target<'_, '_> {
    /// Prepares each document, writes those that are ready in one batch, and says how
    /// many were inserted and which failed (by their position in the command).
    fn store<'d, In, Ready>(
        &self,
        documents: &'d [In],
        prepare: impl Fn(&'d In) -> Result<Ready>,
        write: impl Fn(&mut Writer<'_>, &[Ready]) -> Result<Vec<InsertOutcome>>,
    ) -> Result<(i64, WriteErrors)> {
        let mut errors = WriteErrors::default();
        let mut prepared = Vec::with_capacity(documents.len());
        let mut positions = Vec::with_capacity(documents.len());
        for (i, doc) in documents.iter().enumerate() {
            match prepare(doc) {
                Ok(ready) => {
                    prepared.push(ready);
                    positions.push(i);
                }
                Err(e) => {
                    errors.push(i, e);
                    if self.ordered {
                        break;
                    }
                }
            }
        }
        let mut inserted = 0i64;
        if prepared.is_empty() {
            return Ok((inserted, errors));
        }
        // The catalog's errors (a bad namespace) are the command's; a batch that could not
        // be stored (a full or read-only disk) fails each document, as in mongod, and an
        // ordered insert stops at the first.
        let stored = self
            .ctx
            .server
            .catalog
            .write(self.ctx.db, self.name, true, |writer| {
                Ok(write(writer, &prepared))
            })?
            .unwrap_or_else(|| Ok(Vec::new()));
        let outcomes = stored.unwrap_or_else(|e| {
            let failed = if self.ordered { 1 } else { positions.len() };
            vec![Err(e); failed]
        });
        for (outcome, &position) in outcomes.into_iter().zip(&positions) {
            match outcome {
                Ok(_) => inserted += 1,
                Err(e) => {
                    // An ordered batch stops at its first storage error, which comes
                    // before any later validation error: keep only that one.
                    if self.ordered {
                        errors = WriteErrors::default();
                    }
                    errors.push(position, e);
                }
            }
        }
        Ok((inserted, errors))
    }
}

/// As [`prepare_borrowed`], for a document in its wire bytes (validated by the wire
/// decoder): only `_id` is decoded, and the bytes are copied only to put `_id` first.
fn prepare_raw(doc: &RawDocumentBuf) -> Result<Cow<'_, RawDocument>> {
    let invalid = |e: bson::error::Error| Error::bad_value(format!("invalid document: {e}"));
    let first = doc.iter().next().transpose().map_err(invalid)?;
    if let Some((_, id)) = first.filter(|(key, _)| key.as_str() == "_id") {
        validate_id(&Bson::try_from(id).map_err(invalid)?)?;
        check_size_bytes(doc.as_bytes().len())?;
        return Ok(Cow::Borrowed(doc.as_ref()));
    }
    let ready = match doc.get("_id").map_err(invalid)? {
        Some(id) => {
            validate_id(&Bson::try_from(id).map_err(invalid)?)?;
            let mut ready = RawDocumentBuf::new();
            ready.append(cstr!("_id"), id);
            for element in doc.iter() {
                let (key, value) = element.map_err(invalid)?;
                if key.as_str() != "_id" {
                    ready.append(key, value);
                }
            }
            ready
        }
        None => with_generated_id(doc)?,
    };
    check_size_bytes(ready.as_bytes().len())?;
    Ok(Cow::Owned(ready))
}

/// `doc` behind a new ObjectId `_id`: its elements are copied as one block (a bulk load
/// of documents without `_id` goes through here for every document).
fn with_generated_id(doc: &RawDocument) -> Result<RawDocumentBuf> {
    const ID_ELEMENT: &[u8] = b"\x07_id\0";
    let elements = &doc.as_bytes()[4..];
    let length = 4 + ID_ELEMENT.len() + 12 + elements.len();
    let mut bytes = Vec::with_capacity(length);
    bytes.extend_from_slice(&i32::try_from(length).unwrap_or(i32::MAX).to_le_bytes());
    bytes.extend_from_slice(ID_ELEMENT);
    bytes.extend_from_slice(&basalt_value::clock::object_id().bytes());
    bytes.extend_from_slice(elements);
    RawDocumentBuf::from_bytes(bytes)
        .map_err(|e| Error::bad_value(format!("invalid document: {e}")))
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
            ready.insert("_id", basalt_value::clock::object_id());
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
    check_size_bytes(basalt_value::document_size_bytes(doc))
}

fn check_size_bytes(size: usize) -> Result<()> {
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
    fn raw_documents_get_id_first_and_are_borrowed_when_it_is() {
        let raw = |d: Document| RawDocumentBuf::try_from(&d).unwrap();
        let ready = raw(doc! {"_id": 1, "a": 2});
        assert!(matches!(prepare_raw(&ready).unwrap(), Cow::Borrowed(_)));
        let unordered = raw(doc! {"a": 2, "_id": 1, "b": 3});
        let moved = prepare_raw(&unordered).unwrap();
        assert_eq!(
            Document::try_from(moved.as_ref()).unwrap(),
            doc! {"_id": 1, "a": 2, "b": 3}
        );
        let without_id = raw(doc! {"a": 2});
        let generated = prepare_raw(&without_id).unwrap();
        let generated = Document::try_from(generated.as_ref()).unwrap();
        assert!(generated.get_object_id("_id").is_ok());
        assert_eq!(generated.keys().collect::<Vec<_>>(), ["_id", "a"]);
        assert_eq!(generated.get_i32("a").ok(), Some(2));
        for (bad, code) in [
            (doc! {"_id": [1]}, ErrorCode::BAD_VALUE),
            (
                doc! {"a": 1, "_id": {"$x": 1}},
                ErrorCode::DOLLAR_PREFIXED_FIELD_NAME,
            ),
        ] {
            assert_eq!(
                prepare_raw(&raw(bad.clone())).unwrap_err().code,
                code,
                "{bad}"
            );
        }
        let big = raw(doc! {"_id": 1, "s": "x".repeat(MAX_BSON_OBJECT_SIZE_BYTES)});
        assert_eq!(
            prepare_raw(&big).unwrap_err().code,
            ErrorCode::BSON_OBJECT_TOO_LARGE
        );
    }

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
