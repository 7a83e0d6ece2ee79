//! `bulkWrite` (MongoDB 8.0): inserts, updates and deletes across collections in one
//! command on `admin`, each operation naming its collection by its index in `nsInfo`.
//!
//! The operations run in order, each as the `insert`, `update` or `delete` of its
//! namespace through the ordinary command path, so each is authorized, validated,
//! replicated and counted as that command is; an `ordered` bulkWrite stops at its first
//! failed operation. The reply is mongod's: the totals (`nErrors`, `nInserted`,
//! `nMatched`, `nModified`, `nUpserted`, `nDeleted`) and a cursor of one result per
//! operation that ran (`{ok, idx, n, nModified, upserted}` or the error), only the
//! errors with `errorsOnly`.
//!
//! As a retryable write (with `txnNumber`), each operation carries the session's
//! `txnNumber` and its index as `stmtId`, as mongos hands a shard its statements: the
//! table of retryable writes records each operation's reply under its statement, so a
//! retried bulkWrite runs only the operations that did not run, and answers the others
//! as they were answered. In a multi-document transaction each operation is a statement
//! of the transaction (its `lsid`, `txnNumber` and `autocommit`).

use super::arguments::{check_struct, missing, unknown, Field, Kind as Type};
use super::{dispatch, Ctx};
use crate::request::Fields;
use basalt_error::{Error, ErrorCode, Result};
use basalt_repl::MemberState;
use bson::{doc, Bson, Document};

/// The fields of each kind of operation (mongod's strict `BulkWriteInsertOp`, ...), the
/// first the index of its namespace in `nsInfo`, and those each must have.
const INSERT_FIELDS: &[Field] = &[("insert", Type::Any), ("document", Type::Document)];
const UPDATE_FIELDS: &[Field] = &[
    ("update", Type::Any),
    ("filter", Type::Document),
    ("updateMods", Type::Any),
    ("arrayFilters", Type::Array),
    ("multi", Type::Bool),
    ("hint", Type::Hint),
    ("upsert", Type::Bool),
    ("upsertSupplied", Type::SafeBool),
    ("collation", Type::Document),
    ("sort", Type::Document),
    ("constants", Type::Document),
    ("sampleId", Type::Any),
];
const DELETE_FIELDS: &[Field] = &[
    ("delete", Type::Any),
    ("filter", Type::Document),
    ("multi", Type::Bool),
    ("hint", Type::Hint),
    ("collation", Type::Document),
    ("sampleId", Type::Any),
];
/// An entry of `nsInfo` (mongod's `NamespaceInfoEntry`).
const NAMESPACE_FIELDS: &[Field] = &[
    ("ns", Type::String),
    ("collectionUUID", Type::Any),
    ("encryptionInformation", Type::Any),
    ("isTimeseriesNamespace", Type::SafeBool),
];

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Insert,
    Update,
    Delete,
}

/// One operation: its kind, its namespace and the statement its command runs.
struct Operation {
    kind: Kind,
    db: String,
    collection: String,
    statement: Document,
}

/// The namespaces of `nsInfo`, as (db, collection).
fn namespaces(fields: &Fields<'_>) -> Result<Vec<(String, String)>> {
    let entries = fields.documents("nsInfo")?;
    if entries.is_empty() {
        return Err(Error::bad_value("bulkWrite nsInfo must not be empty"));
    }
    entries
        .into_iter()
        .map(|entry| {
            check_struct("bulkWrite.nsInfo", entry, NAMESPACE_FIELDS, &["ns"])?;
            let ns = entry.get_str("ns").unwrap_or_default();
            match ns.split_once('.') {
                Some((db, collection)) if !db.is_empty() && !collection.is_empty() => {
                    Ok((db.to_string(), collection.to_string()))
                }
                _ => Err(Error::new(
                    ErrorCode::INVALID_NAMESPACE,
                    format!("Invalid namespace specified '{ns}'"),
                )),
            }
        })
        .collect()
}

/// One entry of `ops`, checked, as the statement of its command.
fn operation(index: usize, op: &Document, namespaces: &[(String, String)]) -> Result<Operation> {
    let (kind, field, fields, required): (_, _, _, &[&str]) =
        match op.keys().next().map(String::as_str) {
            Some("insert") => (Kind::Insert, "insert", INSERT_FIELDS, &["document"]),
            Some("update") => (
                Kind::Update,
                "update",
                UPDATE_FIELDS,
                &["filter", "updateMods"],
            ),
            Some("delete") => (Kind::Delete, "delete", DELETE_FIELDS, &["filter"]),
            Some(other) => return Err(unknown(&format!("bulkWrite.ops.{other}"))),
            None => {
                return Err(Error::failed_to_parse(format!(
                    "bulkWrite ops.{index} is empty: each is {{insert: ...}}, {{update: ...}} or \
                 {{delete: ...}}"
                )))
            }
        };
    let path = format!("bulkWrite.ops.{field}");
    check_struct(&path, op, fields, required)?;
    // mongod parses it itself, and refuses it as unparseable, null too.
    match op.get("updateMods") {
        Some(mods) if !matches!(mods, Bson::Document(_) | Bson::Array(_)) => {
            return Err(Error::failed_to_parse(format!(
                "BSON field '{path}.updateMods' is the wrong type '{}', expected type 'object, \
                 array'",
                crate::request::type_name(mods)
            )))
        }
        _ => {}
    }
    let target = match op.get(field) {
        None | Some(Bson::Null) => return Err(missing(&path, field)),
        Some(value) => basalt_value::as_i64(value).ok_or_else(|| {
            Error::type_mismatch(format!(
                "BSON field 'bulkWrite.ops.{field}' is the wrong type '{}', expected type 'int'",
                crate::request::type_name(value)
            ))
        })?,
    };
    let (db, collection) = usize::try_from(target)
        .ok()
        .and_then(|i| namespaces.get(i))
        .ok_or_else(|| {
            Error::bad_value(format!(
                "BulkWrite ops entry {index} has an invalid nsInfo index."
            ))
        })?;
    // Present and objects, as checked above.
    let document = |name: &str| {
        op.get_document(name)
            .cloned()
            .map_err(|_| missing(&path, name))
    };
    let statement = match kind {
        Kind::Insert => document("document")?,
        Kind::Update => {
            let mut statement = doc! { "q": document("filter")? };
            let mods = op
                .get("updateMods")
                .ok_or_else(|| missing(&path, "updateMods"))?;
            statement.insert("u", mods.clone());
            for (name, as_name) in [
                ("arrayFilters", "arrayFilters"),
                ("multi", "multi"),
                ("hint", "hint"),
                ("upsert", "upsert"),
                ("collation", "collation"),
                ("sort", "sort"),
                ("constants", "c"),
            ] {
                match op.get(name) {
                    None | Some(Bson::Null) => {}
                    Some(value) => {
                        statement.insert(as_name, value.clone());
                    }
                }
            }
            statement
        }
        Kind::Delete => {
            let mut statement = doc! { "q": document("filter")? };
            let multi = matches!(op.get("multi"), Some(Bson::Boolean(true)));
            statement.insert("limit", if multi { 0 } else { 1 });
            for name in ["hint", "collation"] {
                match op.get(name) {
                    None | Some(Bson::Null) => {}
                    Some(value) => {
                        statement.insert(name, value.clone());
                    }
                }
            }
            statement
        }
    };
    Ok(Operation {
        kind,
        db: db.clone(),
        collection: collection.clone(),
        statement,
    })
}

/// The totals of the reply.
#[derive(Default)]
struct Totals {
    errors: i32,
    inserted: i32,
    matched: i32,
    modified: i32,
    upserted: i32,
    deleted: i32,
}

/// The result entry of operation `index` from its command's reply; updates `totals`.
fn result(index: usize, kind: Kind, reply: &Document, totals: &mut Totals) -> Document {
    let number = |name: &str| reply.get(name).and_then(basalt_value::as_i64).unwrap_or(0) as i32;
    let failure = if reply.get("ok").and_then(basalt_value::as_f64) != Some(1.0) {
        Some(reply.clone())
    } else {
        reply
            .get_array("writeErrors")
            .ok()
            .and_then(|errors| errors.first())
            .and_then(Bson::as_document)
            .cloned()
    };
    if let Some(failure) = failure {
        totals.errors += 1;
        let mut entry = doc! { "ok": 0.0, "idx": index as i32 };
        for name in [
            "code",
            "codeName",
            "errmsg",
            "errInfo",
            "keyPattern",
            "keyValue",
        ] {
            if let Some(value) = failure.get(name) {
                entry.insert(name, value.clone());
            }
        }
        return entry;
    }
    let n = number("n");
    let mut entry = doc! { "ok": 1.0, "idx": index as i32, "n": n };
    match kind {
        Kind::Insert => totals.inserted += n,
        Kind::Delete => totals.deleted += n,
        Kind::Update => {
            let modified = number("nModified");
            entry.insert("nModified", modified);
            totals.modified += modified;
            match reply.get_array("upserted").ok().and_then(|u| u.first()) {
                Some(Bson::Document(upserted)) => {
                    totals.upserted += 1;
                    let id = upserted.get("_id").cloned().unwrap_or(Bson::Null);
                    entry.insert("upserted", doc! { "_id": id });
                    totals.matched += n - 1;
                }
                _ => totals.matched += n,
            }
        }
    }
    entry
}

pub fn bulk_write(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let fields = Fields::new(body);
    let ops = fields.documents("ops")?;
    super::write_batch::check_batch_size(ops.len())?;
    let namespaces = namespaces(&fields)?;
    let flag = |name: &str, default: bool| match body.get(name) {
        Some(Bson::Boolean(value)) => *value,
        _ => default,
    };
    let ordered = flag("ordered", true);
    let errors_only = flag("errorsOnly", false);
    // A number counts by its truth, as mongod takes it.
    let bypass = match body.get("bypassDocumentValidation") {
        Some(Bson::Boolean(bypass)) => *bypass,
        Some(number) => basalt_value::as_f64(number).is_some_and(|n| n != 0.0),
        None => false,
    };
    let variables = body.get_document("let").ok();
    fields.cursor_batch_size()?;
    let operations = ops
        .iter()
        .enumerate()
        .map(|(index, op)| operation(index, op, &namespaces))
        .collect::<Result<Vec<_>>>()?;
    if let Some(set) = ctx.server.replication() {
        if set.state() != MemberState::Primary {
            return Err(Error::new(ErrorCode::NOT_WRITABLE_PRIMARY, "not primary"));
        }
    }
    let mut totals = Totals::default();
    let mut results = Vec::new();
    let mut write_concern_error = None;
    for (index, operation) in operations.into_iter().enumerate() {
        let name = &operation.collection;
        let mut command = match operation.kind {
            Kind::Insert => doc! { "insert": name, "documents": [operation.statement] },
            Kind::Update => doc! { "update": name, "updates": [operation.statement] },
            Kind::Delete => doc! { "delete": name, "deletes": [operation.statement] },
        };
        if bypass {
            command.insert("bypassDocumentValidation", true);
        }
        if let (Some(variables), Kind::Update | Kind::Delete) = (variables, operation.kind) {
            command.insert("let", variables.clone());
        }
        for generic in [
            "writeConcern",
            "comment",
            "lsid",
            "maxTimeMS",
            "txnNumber",
            "autocommit",
        ] {
            if let Some(value) = body.get(generic) {
                command.insert(generic, value.clone());
            }
        }
        if body.contains_key("txnNumber") && !body.contains_key("autocommit") {
            command.insert("stmtId", index as i32);
        }
        command.insert("$db", operation.db.as_str());
        let sub = Ctx {
            db: &operation.db,
            ..*ctx
        };
        let reply = Document::try_from(dispatch(&sub, &command).as_ref())?;
        if let Ok(error) = reply.get_document("writeConcernError") {
            write_concern_error = Some(error.clone());
        }
        let entry = result(index, operation.kind, &reply, &mut totals);
        let failed = entry.get_f64("ok").ok() != Some(1.0);
        if failed || !errors_only {
            results.push(Bson::Document(entry));
        }
        if failed && ordered {
            break;
        }
    }
    let mut reply = doc! {
        "cursor": { "id": 0_i64, "firstBatch": results, "ns": "admin.$cmd.bulkWrite" },
        "nErrors": totals.errors,
        "nInserted": totals.inserted,
        "nMatched": totals.matched,
        "nModified": totals.modified,
        "nUpserted": totals.upserted,
        "nDeleted": totals.deleted,
    };
    if let Some(error) = write_concern_error {
        reply.insert("writeConcernError", error);
    }
    Ok(reply)
}
