//! Query settings (MongoDB 8.0): `setQuerySettings` and `removeQuerySettings` attach
//! settings to a query shape (`query_shape.rs`), `$querySettings` lists them, and every
//! `find`, `aggregate` and `distinct` of that shape runs under them: `reject: true`
//! refuses it (QueryRejectedBySettings, 411), `indexHints` restrict the indexes the
//! planner may use on each namespace named, as an index filter does.
//!
//! As in mongod, the settings are one cluster parameter, `querySettings`, a document of
//! `config.clusterParameters` (`{_id: "querySettings", settingsArray, clusterParameterTime}`)
//! written through the ordinary write path, so a replica set's members share them. A
//! member keeps them in memory and reads them again after any write to that collection
//! (the server's own, or one it applies for its set: see [`note_write`]); a shape is
//! hashed only when some settings exist.

use crate::commands::{cluster_parameters, Ctx};
use crate::request::{type_name, Fields};
use basalt_error::{Error, ErrorCode, Result};
use bson::{doc, Bson, Document};
use parking_lot::RwLock;
use std::cell::RefCell;
use std::sync::Arc;

const PARAMETER: &str = "querySettings";
/// A query shape hash: a SHA-256 in hexadecimal.
const HASH_DIGITS: usize = 64;

/// One shape's settings: `{queryShapeHash, settings, representativeQuery}`.
type Entry = Document;

/// The indexes a query may use on one collection: database, collection, allowed.
type IndexHint = (String, String, Vec<Bson>);

/// The settings this member holds, read again after a change.
#[derive(Default)]
pub struct QuerySettings {
    entries: RwLock<Option<Arc<Vec<Entry>>>>,
}

impl QuerySettings {
    fn entries(&self, ctx: &Ctx<'_>) -> Result<Arc<Vec<Entry>>> {
        if let Some(entries) = self.entries.read().clone() {
            return Ok(entries);
        }
        let entries = Arc::new(read_stored(ctx)?.0);
        *self.entries.write() = Some(entries.clone());
        Ok(entries)
    }
}

/// Forgets the settings held, when a write changed `config.clusterParameters`.
pub fn note_write(ctx: &Ctx<'_>, collection: Option<&str>) {
    if ctx.db == cluster_parameters::DATABASE && collection == Some(cluster_parameters::COLLECTION)
    {
        *ctx.server.query_settings.entries.write() = None;
    }
}

fn hash_of(entry: &Entry) -> Option<&str> {
    entry.get_str("queryShapeHash").ok()
}

/// The stored settings, and the stored parameter (for the time of the next change).
fn read_stored(ctx: &Ctx<'_>) -> Result<(Vec<Entry>, Option<Document>)> {
    let stored = cluster_parameters::read_stored(ctx, PARAMETER)?;
    let entries = stored
        .as_ref()
        .and_then(|stored| stored.get_array("settingsArray").ok())
        .map(|array| {
            array
                .iter()
                .filter_map(Bson::as_document)
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    Ok((entries, stored))
}

/// Stores the settings (the write forgets those held, [`note_write`]).
fn write_stored(ctx: &Ctx<'_>, entries: Vec<Entry>, previous: Option<Document>) -> Result<()> {
    cluster_parameters::store(
        ctx,
        PARAMETER,
        doc! { "settingsArray": entries },
        previous.as_ref(),
    )
}

/// What a command names its query by: a representative query, or a shape's hash.
enum Named {
    Query { hash: String, query: Document },
    Hash(String),
}

impl Named {
    fn hash(&self) -> &str {
        match self {
            Named::Query { hash, .. } | Named::Hash(hash) => hash,
        }
    }
}

/// The query a command names (its first field), checked as mongod checks it.
fn named(command: &str, value: Option<&Bson>) -> Result<Named> {
    match value {
        Some(Bson::String(hash)) => {
            if hash.is_empty() {
                return Err(Error::new(
                    ErrorCode::INVALID_LENGTH,
                    "a query shape hash cannot be empty",
                ));
            }
            // removeQuerySettings checks the length first, setQuerySettings the whole.
            if command == "removeQuerySettings" && hash.len() != HASH_DIGITS {
                return Err(Error::new(
                    ErrorCode::INVALID_LENGTH,
                    format!("a query shape hash has {HASH_DIGITS} digits, not {}", hash.len()),
                ));
            }
            if hash.len() != HASH_DIGITS || !hash.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err(Error::bad_value(format!(
                    "'{hash}' is not a query shape hash: {HASH_DIGITS} hexadecimal digits"
                )));
            }
            Ok(Named::Hash(hash.to_ascii_uppercase()))
        }
        Some(Bson::Document(query)) if query.is_empty() => Err(Error::location(
            7746402,
            "an empty document is not a query supported by query settings",
        )),
        Some(Bson::Document(query)) => {
            let db = match query.get("$db") {
                None | Some(Bson::Null) => {
                    return Err(Error::location(
                        40414,
                        format!("BSON field '{command}.$db' is missing but a required field"),
                    ))
                }
                Some(Bson::String(db)) => db.as_str(),
                Some(other) => {
                    return Err(Error::type_mismatch(format!(
                        "BSON field '{command}.$db' is the wrong type '{}', expected type 'string'",
                        type_name(other)
                    )))
                }
            };
            if db.is_empty() {
                return Err(Error::new(
                    ErrorCode::INVALID_NAMESPACE,
                    "Invalid database name: ''",
                ));
            }
            let name = query.keys().next().map(String::as_str).unwrap_or_default();
            if !["find", "distinct", "aggregate"].contains(&name) {
                return Err(Error::location(
                    7746402,
                    format!("{name} command is not supported by query settings"),
                ));
            }
            let collection = query.get_str(name).unwrap_or_default();
            if matches!(db, "admin" | "local" | "config") || collection.starts_with("system.") {
                return Err(Error::location(
                    8584900,
                    format!("Setting query settings on {db}.{collection} is not allowed"),
                ));
            }
            let mut shaped = query.clone();
            shaped.remove("$db");
            let hash = crate::query_shape::query_shape_hash(db, &shaped).ok_or_else(|| {
                Error::location(7746402, format!("{name} has no query shape"))
            })?;
            Ok(Named::Query {
                hash,
                query: query.clone(),
            })
        }
        Some(other) => Err(Error::type_mismatch(format!(
            "BSON field '{command}.{command}' is the wrong type '{}', expected types '[string, object]'",
            type_name(other)
        ))),
        None => Err(Error::location(
            40414,
            format!("BSON field '{command}.{command}' is missing but a required field"),
        )),
    }
}

/// Whether a find reads one document by its `_id` (mongod's IDHACK), which index hints
/// cannot apply to.
fn is_id_lookup(query: &Document) -> bool {
    query.contains_key("find")
        && query.get_document("filter").is_ok_and(|filter| {
            filter.len() == 1
                && filter.get("_id").is_some_and(|id| {
                    !matches!(
                        id,
                        Bson::Document(_) | Bson::Array(_) | Bson::RegularExpression(_)
                    )
                })
        })
}

/// The `settings` of setQuerySettings, checked, as they are stored.
fn parsed_settings(value: Option<&Bson>) -> Result<Document> {
    let settings = match value {
        None | Some(Bson::Null) => {
            return Err(Error::location(
                40414,
                "BSON field 'setQuerySettings.settings' is missing but a required field",
            ))
        }
        Some(Bson::Document(settings)) => settings,
        Some(other) => {
            return Err(Error::type_mismatch(format!(
            "BSON field 'setQuerySettings.settings' is the wrong type '{}', expected type 'object'",
            type_name(other)
        )))
        }
    };
    if settings.is_empty() {
        return Err(Error::location(8727502, "settings cannot be empty"));
    }
    let wrong_type = |field: &str, value: &Bson, expected: &str| {
        Error::type_mismatch(format!(
            "BSON field 'setQuerySettings.settings.{field}' is the wrong type '{}', expected type '{expected}'",
            type_name(value)
        ))
    };
    let mut parsed = Document::new();
    for (field, value) in settings {
        match (field.as_str(), value) {
            (field, Bson::Null) if field != "reject" => {}
            ("indexHints", hints) => {
                let hints = match hints {
                    Bson::Array(hints) => hints.clone(),
                    Bson::Document(_) => vec![hints.clone()],
                    other => return Err(wrong_type("indexHints", other, "array")),
                };
                let hints = hints
                    .iter()
                    .map(parsed_index_hint)
                    .collect::<Result<Vec<_>>>()?;
                let hints: Vec<Bson> = hints.into_iter().flatten().map(Bson::Document).collect();
                if !hints.is_empty() {
                    parsed.insert("indexHints", hints);
                }
            }
            ("queryFramework", Bson::String(framework)) => {
                if !["classic", "sbe"].contains(&framework.as_str()) {
                    return Err(Error::bad_value(format!(
                        "Enumeration value '{framework}' for field 'queryFramework' is not a valid value."
                    )));
                }
                parsed.insert("queryFramework", framework);
            }
            ("queryFramework", other) => return Err(wrong_type("queryFramework", other, "string")),
            ("reject", Bson::Boolean(reject)) => {
                if *reject {
                    parsed.insert("reject", true);
                }
            }
            ("reject", other) => return Err(wrong_type("reject", other, "bool")),
            ("comment", comment) => {
                parsed.insert("comment", comment.clone());
            }
            (unknown, _) => {
                return Err(Error::location(
                    40415,
                    format!(
                        "BSON field 'setQuerySettings.settings.{unknown}' is an unknown field."
                    ),
                ))
            }
        }
    }
    Ok(parsed)
}

/// One `indexHints` entry: `{ns: {db, coll}, allowedIndexes}`; `None` when it allows no
/// index (which is no setting).
fn parsed_index_hint(hint: &Bson) -> Result<Option<Document>> {
    let Bson::Document(hint) = hint else {
        return Err(Error::type_mismatch(format!(
            "BSON field 'setQuerySettings.settings.indexHints' is the wrong type '{}', expected type 'object'",
            type_name(hint)
        )));
    };
    // Null is a missing field, as mongod's parser has it.
    let fields = Fields {
        command: "indexHints",
        body: hint,
    };
    let ns = fields.required("ns", fields.document_opt("ns")?)?;
    let ns_fields = Fields {
        command: "indexHints.ns",
        body: ns,
    };
    for (field, code) in [("db", 8727500), ("coll", 8727501)] {
        if ns_fields.string_opt(field)?.is_none() {
            return Err(Error::location(
                code,
                format!("'ns.{field}' must be given in index hints"),
            ));
        }
    }
    let allowed = match hint.get("allowedIndexes") {
        Some(Bson::Null) => None,
        _ => fields.array_opt("allowedIndexes")?,
    };
    let allowed = fields.required("allowedIndexes", allowed)?;
    if let Some(bad) = allowed
        .iter()
        .find(|index| !matches!(index, Bson::String(_) | Bson::Document(_)))
    {
        return Err(Error::failed_to_parse(format!(
            "an allowed index is a key pattern or a name, not {}",
            type_name(bad)
        )));
    }
    if allowed.is_empty() {
        return Ok(None);
    }
    Ok(Some(doc! {
        "ns": { "db": ns.get_str("db").unwrap_or_default(), "coll": ns.get_str("coll").unwrap_or_default() },
        "allowedIndexes": allowed.clone(),
    }))
}

/// Settings that change nothing: no index hint, rejection or query framework.
fn is_empty(settings: &Document) -> bool {
    !["indexHints", "reject", "queryFramework"]
        .iter()
        .any(|setting| settings.contains_key(*setting))
}

pub fn set_query_settings(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let named = named("setQuerySettings", body.get("setQuerySettings"))?;
    let given = parsed_settings(body.get("settings"))?;
    let (mut entries, stored) = read_stored(ctx)?;
    let existing = entries
        .iter()
        .position(|entry| hash_of(entry) == Some(named.hash()));
    // A change merges into the settings there are: what it does not name stays.
    let mut settings = existing
        .and_then(|at| entries[at].get_document("settings").ok().cloned())
        .unwrap_or_default();
    for (field, value) in given {
        settings.insert(field, value);
    }
    if body
        .get_document("settings")
        .is_ok_and(|s| s.get("reject") == Some(&Bson::Boolean(false)))
    {
        settings.remove("reject");
    }
    if is_empty(&settings) {
        return Err(Error::location(
            7746604,
            "settings must hint indexes, choose a query framework or reject the query; use \
             removeQuerySettings to remove them",
        ));
    }
    let representative = match (&named, existing) {
        (Named::Query { query, .. }, _) => query.clone(),
        (Named::Hash(_), Some(at)) => entries[at]
            .get_document("representativeQuery")
            .cloned()
            .unwrap_or_default(),
        (Named::Hash(hash), None) => {
            return Err(Error::bad_value(format!(
                "New query settings can only be created with a query, not a query shape \
                 hash ({hash})"
            )))
        }
    };
    if settings.contains_key("indexHints") && is_id_lookup(&representative) {
        return Err(Error::location(
            7746606,
            "Index hints cannot be set on a query that reads one document by its _id",
        ));
    }
    let entry = doc! {
        "queryShapeHash": named.hash(),
        "settings": settings.clone(),
        "representativeQuery": representative.clone(),
    };
    match existing {
        Some(at) => entries[at] = entry,
        None => entries.push(entry),
    }
    write_stored(ctx, entries, stored)?;
    Ok(doc! {
        "queryShapeHash": named.hash(),
        "settings": settings,
        "representativeQuery": representative,
    })
}

pub fn remove_query_settings(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let named = named("removeQuerySettings", body.get("removeQuerySettings"))?;
    let (mut entries, stored) = read_stored(ctx)?;
    let before = entries.len();
    entries.retain(|entry| hash_of(entry) != Some(named.hash()));
    if entries.len() != before {
        write_stored(ctx, entries, stored)?;
    }
    Ok(Document::new())
}

/// `$querySettings`: every shape's settings, with its debug shape when asked.
pub fn list(ctx: &Ctx<'_>, debug_shape: bool) -> Result<Vec<Document>> {
    let entries = ctx.server.query_settings.entries(ctx)?;
    Ok(entries
        .iter()
        .map(|entry| {
            let mut entry = entry.clone();
            if debug_shape {
                let query = entry.get_document("representativeQuery").ok().cloned();
                if let Some(mut query) = query {
                    let db = query.get_str("$db").unwrap_or_default().to_string();
                    query.remove("$db");
                    if let Some(shape) = crate::query_shape::query_shape(&db, &query) {
                        entry.insert("debugQueryShape", shape);
                    }
                }
            }
            entry
        })
        .collect())
}

thread_local! {
    /// The index hints of the query this thread runs: the allowed indexes by database
    /// and collection.
    static HINTS: RefCell<Vec<IndexHint>> = const { RefCell::new(Vec::new()) };
}

/// Runs a find, aggregate or distinct (or its explain) under the settings of its
/// shape: refused when they reject it, else with their index hints in force for `run`.
/// Costs nothing while no settings exist.
pub fn apply<T>(ctx: &Ctx<'_>, name: &str, body: &Document, run: impl FnOnce() -> T) -> Result<T> {
    // An explained query is planned under its settings, and not refused.
    let (explained, body) = match (name, body.get("explain")) {
        ("explain", Some(Bson::Document(inner))) => (true, inner),
        _ => (false, body),
    };
    let name = body.keys().next().map(String::as_str).unwrap_or_default();
    if !matches!(name, "find" | "aggregate" | "distinct") || ctx.connection.is_internal() {
        return Ok(run());
    }
    let entries = ctx.server.query_settings.entries(ctx)?;
    if entries.is_empty() {
        return Ok(run());
    }
    let mut query = body.clone();
    for generic in crate::request::GENERIC_COMMAND_FIELDS {
        query.remove(*generic);
    }
    let Some(hash) = crate::query_shape::query_shape_hash(ctx.db, &query) else {
        return Ok(run());
    };
    let Some(settings) = entries
        .iter()
        .find(|entry| hash_of(entry) == Some(hash.as_str()))
        .and_then(|entry| entry.get_document("settings").ok())
    else {
        return Ok(run());
    };
    if settings.get_bool("reject").unwrap_or(false) && !explained {
        return Err(Error::new(
            ErrorCode::QUERY_REJECTED_BY_SETTINGS,
            "Query rejected by admin query settings",
        ));
    }
    let hints: Vec<IndexHint> = settings
        .get_array("indexHints")
        .map(|hints| {
            hints
                .iter()
                .filter_map(Bson::as_document)
                .filter_map(|hint| {
                    let ns = hint.get_document("ns").ok()?;
                    Some((
                        ns.get_str("db").ok()?.to_string(),
                        ns.get_str("coll").ok()?.to_string(),
                        hint.get_array("allowedIndexes").ok()?.clone(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    struct Restore(Vec<IndexHint>);
    impl Drop for Restore {
        fn drop(&mut self) {
            HINTS.with(|hints| *hints.borrow_mut() = std::mem::take(&mut self.0));
        }
    }
    let _restore = Restore(HINTS.with(|current| current.replace(hints)));
    Ok(run())
}

/// The indexes the query settings of the running query allow on `db.collection`, if
/// they restrict them.
pub fn allowed_indexes(db: &str, collection: &str) -> Option<Vec<Bson>> {
    HINTS.with(|hints| {
        hints
            .borrow()
            .iter()
            .find(|(d, c, _)| d == db && c == collection)
            .map(|(_, _, allowed)| allowed.clone())
    })
}
