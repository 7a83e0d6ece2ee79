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
    // mongod reads each option by its truth.
    let asked = |option: &str| basalt_expr::truthy(body.get(option));
    let metadata = asked("metadata");
    let repair = asked("repair");
    let others = [
        "full",
        "background",
        "repair",
        "fixMultikey",
        "checkBSONConformance",
    ];
    if metadata && others.iter().any(|option| asked(option)) {
        return Err(invalid_options(
            "Running the validate command with { metadata: true } is not supported with any \
             other options",
        ));
    }
    if asked("background") && (asked("full") || repair) {
        return Err(invalid_options(
            "Running the validate command with { background: true } is not supported with \
             { full: true } or { repair: true }",
        ));
    }
    if asked("checkBSONConformance") && repair {
        return Err(invalid_options(
            "Running the validate command with both { checkBSONConformance: true } and \
             { repair: true } is not supported",
        ));
    }
    if asked("background") && ctx.server.replication().is_none() {
        return Err(Error::new(
            ErrorCode::COMMAND_NOT_SUPPORTED,
            format!(
                "Running validate on collection {namespace} with {{ background: true }} is not \
                 supported on a standalone"
            ),
        ));
    }
    // What mongod would repair; Basalt finds what is wrong and repairs nothing
    // (`repaired` stays false).
    let repair_mode = match (repair, asked("fixMultikey")) {
        (true, _) => "FixErrors",
        (false, true) => "AdjustMultikey",
        (false, false) => "None",
    };
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
        "repairMode": repair_mode,
        "ns": namespace,
        "uuid": bson::Binary::from_uuid(collection.meta().uuid),
        "warnings": validation.warnings,
        "errors": errors,
        "extraIndexEntries": validation.extra_index_entries,
        "missingIndexEntries": validation.missing_index_entries,
    };
    // A metadata check reports no document counts.
    if !metadata {
        reply.insert("nInvalidDocuments", count(validation.invalid_documents));
        // Documents that fail the collection's validator are not looked for yet.
        reply.insert("nNonCompliantDocuments", 0_i32);
        reply.insert("nrecords", count(validation.records));
    }
    let meta = collection.meta();
    let spec = |index: &str| {
        meta.indexes
            .iter()
            .find(|spec| spec.name == index)
            .map(|spec| spec.to_list_document())
            .unwrap_or_default()
    };
    reply.insert(
        "corruptRecords",
        validation
            .corrupt_records
            .iter()
            .map(|&id| Bson::Int64(id as i64))
            .collect::<Vec<_>>(),
    );
    reply.insert("nIndexes", validation.indexes.len() as i32);
    if !metadata {
        reply.insert(
            "keysPerIndex",
            validation
                .indexes
                .iter()
                .map(|i| (i.name.clone(), count(i.keys)))
                .collect::<Document>(),
        );
    }
    reply.insert(
        "indexDetails",
        validation
            .indexes
            .iter()
            .map(|i| {
                (
                    i.name.clone(),
                    Bson::Document(index_details(i, spec(&i.name))),
                )
            })
            .collect::<Document>(),
    );
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

fn index_details(index: &IndexValidation, spec: Document) -> Document {
    let mut details = doc! { "valid": index.errors.is_empty(), "spec": spec };
    if !index.errors.is_empty() {
        details.insert("errors", index.errors.clone());
    }
    details
}

/// A count as mongod appends one: an int, a long past an int's range.
fn count(n: impl TryInto<i32> + TryInto<i64> + Copy) -> Bson {
    match n.try_into() {
        Ok(small) => Bson::Int32(small),
        Err(_) => Bson::Int64(n.try_into().unwrap_or(i64::MAX)),
    }
}

fn invalid_options(message: &str) -> Error {
    Error::new(ErrorCode::INVALID_OPTIONS, message)
}
