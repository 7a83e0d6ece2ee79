//! `validate`: checks that every record of a collection is a valid document and that
//! each index has exactly the entries its documents call for
//! (`Collection::validate`), and answers in MongoDB 8.0's shape.
//!
//! `full: true` runs the same checks: they read every block of the collection's
//! records and index entries, each verified against its checksum as it is loaded, which
//! is what WiredTiger's verify adds to a full validation.

use super::Ctx;
use crate::request::Fields;
use basalt_catalog::{IndexValidation, Validation};
use basalt_error::{Error, ErrorCode, Result};
use bson::{doc, Bson, Document};

/// What mongod adds to the reply about a collection that is not valid.
const ADVICE: &str = "A corrupt namespace has been detected. See \
                      http://dochub.mongodb.org/core/data-recovery for recovery steps.";

pub fn validate(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let name = Fields::new(body).collection()?;
    let namespace = format!("{}.{name}", ctx.db);
    let Some(collection) = ctx.server.catalog.get(ctx.db, name) else {
        return Err(Error::new(
            ErrorCode::NAMESPACE_NOT_FOUND,
            format!("Collection '{namespace}' does not exist to validate."),
        ));
    };
    let mut validation = collection.validate()?;
    // mongod keeps its per-index results in a map ordered by name.
    validation.indexes.sort_by(|a, b| a.name.cmp(&b.name));
    let valid = validation.is_valid();
    let errors = errors(&validation);
    let mut reply = doc! {
        "valid": valid,
        "repaired": false,
        "ns": namespace,
        "uuid": bson::Binary::from_uuid(collection.meta().uuid),
        "warnings": validation.warnings,
        "errors": errors,
        "extraIndexEntries": validation.extra_index_entries,
        "missingIndexEntries": validation.missing_index_entries,
        "nInvalidDocuments": validation.invalid_documents as i64,
        // Basalt has no schema validators yet, so no document can fail one.
        "nNonCompliantDocuments": 0_i64,
        "nrecords": validation.records as i64,
        "corruptRecords": validation.corrupt_records.iter().map(|&id| Bson::Int64(id as i64)).collect::<Vec<_>>(),
        "nIndexes": validation.indexes.len() as i32,
        "keysPerIndex": validation.indexes.iter().map(|i| (i.name.clone(), Bson::Int64(i.keys as i64))).collect::<Document>(),
        "indexDetails": validation.indexes.iter().map(|i| (i.name.clone(), Bson::Document(index_details(i)))).collect::<Document>(),
    };
    if !valid {
        reply.insert("advice", ADVICE);
    }
    Ok(reply)
}

/// The collection's errors, then "Found errors in <index>" for each index that has
/// some, as mongod lists them.
fn errors(validation: &Validation) -> Vec<String> {
    let found = validation
        .indexes
        .iter()
        .filter(|i| !i.errors.is_empty())
        .map(|i| format!("Found errors in {}", i.name));
    validation.errors.iter().cloned().chain(found).collect()
}

fn index_details(index: &IndexValidation) -> Document {
    let mut details = doc! { "valid": index.errors.is_empty() };
    if !index.errors.is_empty() {
        details.insert("errors", index.errors.clone());
    }
    details
}
