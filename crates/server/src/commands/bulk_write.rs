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

use super::{dispatch, Ctx};
use crate::request::{Fields, GENERIC_COMMAND_FIELDS};
use basalt_error::{Error, ErrorCode, Result};
use basalt_repl::MemberState;
use bson::{doc, Bson, Document};

/// The BSON types a field may have.
#[derive(Clone, Copy, PartialEq)]
enum Type {
    Object,
    Array,
    Bool,
    String,
    Number,
}

impl Type {
    fn of(value: &Bson) -> Option<Type> {
        Some(match value {
            Bson::Document(_) => Type::Object,
            Bson::Array(_) => Type::Array,
            Bson::Boolean(_) => Type::Bool,
            Bson::String(_) => Type::String,
            Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => Type::Number,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Type::Object => "object",
            Type::Array => "array",
            Type::Bool => "bool",
            Type::String => "string",
            Type::Number => "number",
        }
    }
}

/// A field of the command or of an operation: its name, the types it takes, and whether
/// it is required (null counts as missing, as mongod's parser has it).
type FieldSpec = (&'static str, &'static [Type], bool);

/// The fields of each kind of operation, besides the namespace index.
const INSERT_FIELDS: &[FieldSpec] = &[("document", &[Type::Object], true)];
const UPDATE_FIELDS: &[FieldSpec] = &[
    ("filter", &[Type::Object], true),
    ("updateMods", &[Type::Object, Type::Array], true),
    ("arrayFilters", &[Type::Array], false),
    ("multi", &[Type::Bool], false),
    ("hint", &[Type::Object, Type::String], false),
    ("upsert", &[Type::Bool], false),
    ("collation", &[Type::Object], false),
    ("sort", &[Type::Object], false),
    ("constants", &[Type::Object], false),
];
const DELETE_FIELDS: &[FieldSpec] = &[
    ("filter", &[Type::Object], true),
    ("multi", &[Type::Bool], false),
    ("hint", &[Type::Object, Type::String], false),
    ("collation", &[Type::Object], false),
];
/// The command's own typed fields.
const COMMAND_FIELDS: &[FieldSpec] = &[
    ("ops", &[Type::Array], true),
    ("nsInfo", &[Type::Array], true),
    ("ordered", &[Type::Bool], false),
    (
        "bypassDocumentValidation",
        &[Type::Bool, Type::Number],
        false,
    ),
    ("errorsOnly", &[Type::Bool], false),
    ("let", &[Type::Object], false),
    ("cursor", &[Type::Object], false),
    ("writeConcern", &[Type::Object], false),
];

/// Checks `document`'s fields against `specs` (`path` names them in errors); refuses
/// fields it does not list, besides `also`.
fn check_fields(document: &Document, path: &str, specs: &[FieldSpec], also: &[&str]) -> Result<()> {
    for (key, value) in document {
        let Some((_, types, _)) = specs.iter().find(|(name, _, _)| name == key) else {
            if also.contains(&key.as_str()) {
                continue;
            }
            return Err(unknown_field(&format!("{path}.{key}")));
        };
        // mongod parses these two itself, and refuses them as unparseable, null too.
        let parsed = key == "updateMods" || key == "hint";
        if matches!(value, Bson::Null) && !parsed {
            continue;
        }
        if !Type::of(value).is_some_and(|t| types.contains(&t)) {
            let expected: Vec<&str> = types.iter().map(|t| t.name()).collect();
            let message = format!(
                "BSON field '{path}.{key}' is the wrong type '{}', expected type '{}'",
                crate::request::type_name(value),
                expected.join(", ")
            );
            return Err(if parsed {
                Error::failed_to_parse(message)
            } else {
                Error::type_mismatch(message)
            });
        }
    }
    for (name, _, required) in specs {
        if *required && matches!(document.get(*name), None | Some(Bson::Null)) {
            return Err(missing(&format!("{path}.{name}")));
        }
    }
    Ok(())
}

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

fn missing(field: &str) -> Error {
    Error::location(
        40414,
        format!("BSON field '{field}' is missing but a required field"),
    )
}

fn unknown_field(field: &str) -> Error {
    Error::location(40415, format!("BSON field '{field}' is an unknown field."))
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
            check_fields(
                entry,
                "bulkWrite.nsInfo",
                &[("ns", &[Type::String], true)],
                &["collectionUUID", "encryptionInformation"],
            )?;
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
    let (kind, field, specs) = match op.keys().next().map(String::as_str) {
        Some("insert") => (Kind::Insert, "insert", INSERT_FIELDS),
        Some("update") => (Kind::Update, "update", UPDATE_FIELDS),
        Some("delete") => (Kind::Delete, "delete", DELETE_FIELDS),
        Some(other) => return Err(unknown_field(&format!("bulkWrite.ops.{other}"))),
        None => {
            return Err(Error::failed_to_parse(format!(
                "bulkWrite ops.{index} is empty: each is {{insert: ...}}, {{update: ...}} or \
                 {{delete: ...}}"
            )))
        }
    };
    check_fields(op, &format!("bulkWrite.ops.{field}"), specs, &[field])?;
    let target = match op.get(field) {
        None | Some(Bson::Null) => return Err(missing(&format!("bulkWrite.ops.{field}"))),
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
    let document = |name: &str| {
        match op.get(name) {
        Some(Bson::Document(d)) => Ok(d.clone()),
        Some(other) => Err(Error::type_mismatch(format!(
            "BSON field 'bulkWrite.ops.{field}.{name}' is the wrong type '{}', expected type 'object'",
            crate::request::type_name(other)
        ))),
        None => Err(missing(&format!("bulkWrite.ops.{field}.{name}"))),
    }
    };
    let statement = match kind {
        Kind::Insert => document("document")?,
        Kind::Update => {
            let mut statement = doc! { "q": document("filter")? };
            let mods = op
                .get("updateMods")
                .ok_or_else(|| missing("bulkWrite.ops.update.updateMods"))?;
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
    let mut also = GENERIC_COMMAND_FIELDS.to_vec();
    also.push("bulkWrite");
    check_fields(body, "bulkWrite", COMMAND_FIELDS, &also)?;
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
