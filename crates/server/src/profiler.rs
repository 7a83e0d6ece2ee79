//! The database profiler and the slow-operation log, as mongod's: the `profile` command
//! sets a database's level (0 off, 1 operations slower than `slowms`, 2 all), the
//! server-wide `slowms` and `sampleRate`, and a database's `filter` (a query on the
//! entries that decides, instead of `slowms` and `sampleRate`, which are kept).
//! Profiled operations are written to `<db>.system.profile`, a 1 MB capped collection
//! created on first use, with mongod's entry fields. Operations slower than `slowms`
//! (sampled at `sampleRate`), or those the filter takes, are also logged as "Slow
//! query", whatever the level.
//!
//! Entries are written by the server as its own client (`commands::run_internal`): on a
//! replica set the primary's entries go through the log like any write, and a secondary
//! keeps none (mongod keeps them locally there).

use crate::commands::Ctx;
use crate::operations::Operation;
use crate::Server;
use basalt_error::{Error, ErrorCode, Result};
use basalt_query::Matcher;
use bson::{doc, Bson, Document, RawBsonRef, RawDocument, RawDocumentBuf};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

/// The size of a `system.profile` collection the profiler creates (mongod's).
const PROFILE_COLLECTION_BYTES: i64 = 1024 * 1024;
pub const PROFILE_COLLECTION: &str = "system.profile";

/// A database's profiling settings: those at an operation's start apply to it, as in
/// mongod (the `profile` command that turns profiling off is still profiled).
#[derive(Clone, Default)]
pub struct DatabaseProfile {
    level: i32,
    /// The filter as given back by `profile` (normalized), and as a matcher.
    filter: Option<Arc<(Document, Matcher)>>,
}

pub struct Profiler {
    settings: parking_lot::RwLock<Settings>,
    /// The latest slow operations' entries, newest last (the status page's list).
    recent_slow: Mutex<std::collections::VecDeque<Document>>,
}

/// How many slow operations the status page lists.
const RECENT_SLOW_MAX: usize = 50;

struct Settings {
    /// The level of databases that have not set their own (mongod's `--profile`).
    default_level: i32,
    slow_ms: i32,
    sample_rate: f64,
    databases: HashMap<String, DatabaseProfile>,
}

impl Profiler {
    /// A profiler with the command line's settings.
    pub fn new(options: crate::ProfileOptions) -> Profiler {
        Profiler {
            settings: parking_lot::RwLock::new(Settings {
                default_level: options.level,
                slow_ms: options.slow_ms,
                sample_rate: options.sample_rate,
                databases: HashMap::new(),
            }),
            recent_slow: Mutex::new(std::collections::VecDeque::new()),
        }
    }

    /// The latest slow operations, newest first.
    pub fn recent_slow(&self) -> Vec<Document> {
        self.recent_slow.lock().iter().rev().cloned().collect()
    }

    fn note_slow(&self, entry: &Document) {
        let mut recent = self.recent_slow.lock();
        if recent.len() == RECENT_SLOW_MAX {
            recent.pop_front();
        }
        recent.push_back(entry.clone());
    }

    pub fn database(&self, db: &str) -> DatabaseProfile {
        let settings = self.settings.read();
        settings
            .databases
            .get(db)
            .cloned()
            .unwrap_or(DatabaseProfile {
                level: settings.default_level,
                filter: None,
            })
    }
}

/// `profile`: `{profile: <level>, slowms, sampleRate, filter}` on a database; level -1
/// (or one out of range) only reads. The reply holds the settings as they were.
pub fn profile(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let level = match body.get("profile") {
        None | Some(Bson::Null) => {
            return Err(Error::location(
                40414,
                "BSON field 'profile.profile' is missing but a required field",
            ))
        }
        Some(value) => truncated(value, "profile")?,
    };
    let slow_ms = match body.get("slowms") {
        None | Some(Bson::Null) => None,
        Some(value) => Some(truncated(value, "slowms")?),
    };
    let sample_rate = match body.get("sampleRate") {
        None | Some(Bson::Null) => None,
        Some(value) => {
            let rate = basalt_value::as_f64(value).ok_or_else(|| {
                Error::type_mismatch(format!(
                    "BSON field 'profile.sampleRate' is the wrong type '{}', expected types \
                     '[long, int, decimal, double]'",
                    basalt_expr::type_name(Some(value))
                ))
            })?;
            // Written so that NaN is refused too.
            if !(0.0..=1.0).contains(&rate) {
                return Err(Error::bad_value(format!(
                    "'sampleRate' must be between 0.0 and 1.0 inclusive, but is {rate}"
                )));
            }
            Some(rate)
        }
    };
    let filter = match body.get("filter") {
        None => None,
        Some(Bson::String(unset)) if unset == "unset" => Some(None),
        Some(Bson::Document(filter)) => {
            let matcher = Matcher::new(filter)?;
            Some(Some(Arc::new((normalized(filter), matcher))))
        }
        Some(_) => {
            return Err(Error::bad_value(
                "Expected an object or the string \"unset\" for 'filter'",
            ))
        }
    };

    let profiler = &ctx.server.profiler;
    let mut settings = profiler.settings.write();
    let default_level = settings.default_level;
    let before = settings
        .databases
        .get(ctx.db)
        .cloned()
        .unwrap_or(DatabaseProfile {
            level: default_level,
            filter: None,
        });
    let mut reply = doc! {
        "was": before.level,
        "slowms": settings.slow_ms,
        "sampleRate": settings.sample_rate,
    };
    if let Some(filter) = before.filter.as_ref().map(|f| &f.0) {
        reply.insert("filter", filter.clone());
        reply.insert(
            "note",
            "When a filter expression is set, slowms and sampleRate are not used for \
             profiling and slow-query log lines.",
        );
    }
    if let Some(ms) = slow_ms {
        settings.slow_ms = ms;
    }
    if let Some(rate) = sample_rate {
        settings.sample_rate = rate;
    }
    let database = settings
        .databases
        .entry(ctx.db.to_string())
        .or_insert(before);
    if (0..=2).contains(&level) {
        database.level = level;
    }
    if let Some(filter) = filter {
        database.filter = filter;
    }
    Ok(reply)
}

/// A numeric field as mongod reads it: truncated to an int32.
fn truncated(value: &Bson, field: &str) -> Result<i32> {
    match basalt_value::Number::from_bson(value) {
        Some(n) => {
            let n = n.to_f64().trunc();
            Ok(n.clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32)
        }
        None => Err(Error::type_mismatch(format!(
            "BSON field 'profile.{field}' is the wrong type '{}', expected types \
             '[long, int, decimal, double]'",
            basalt_expr::type_name(Some(value))
        ))),
    }
}

/// A filter as mongod gives it back, parsed and serialized: equality is `$eq`, and a
/// document of several conditions an `$and` of them.
fn normalized(filter: &Document) -> Document {
    let conditions: Vec<Document> = filter
        .iter()
        .map(|(field, value)| {
            let value = match (field.starts_with('$'), value) {
                (true, Bson::Array(parts)) => Bson::Array(
                    parts
                        .iter()
                        .map(|part| match part {
                            Bson::Document(part) => Bson::Document(normalized(part)),
                            other => other.clone(),
                        })
                        .collect(),
                ),
                (false, Bson::Document(operators))
                    if operators.keys().next().is_some_and(|k| k.starts_with('$')) =>
                {
                    value.clone()
                }
                (false, _) => Bson::Document(doc! { "$eq": value.clone() }),
                (true, _) => value.clone(),
            };
            doc! { field.clone(): value }
        })
        .collect();
    match conditions.len() {
        1 => conditions.into_iter().next().unwrap_or_default(),
        _ => doc! { "$and": conditions },
    }
}

/// What a finished command's reply says, for its profile entry.
pub enum Outcome<'r> {
    Document(&'r Document),
    Encoded(&'r RawDocumentBuf),
    Failed(&'r Error),
}

/// After a command ran: writes its profile entry and logs it as slow, as the
/// database's settings at its start (`database`) ask. `name` is the command,
/// `operation` the registered operation.
pub fn record(
    ctx: &Ctx<'_>,
    database: DatabaseProfile,
    name: &str,
    operation: &Operation,
    outcome: Outcome<'_>,
) {
    if ctx.connection.is_internal() || operation.ns.ends_with(PROFILE_COLLECTION) {
        return;
    }
    let profiler = &ctx.server.profiler;
    let millis = operation.started.elapsed().as_millis();
    let (slow, sampled) = {
        let settings = profiler.settings.read();
        let slow = millis >= u128::try_from(settings.slow_ms.max(0)).unwrap_or(0);
        let rate = settings.sample_rate;
        (slow, rate >= 1.0 || (slow && rand::random::<f64>() < rate))
    };
    // Without a filter: slow and sampled operations are logged, and profiled at level 1.
    if database.filter.is_none() && database.level < 2 && !(slow && sampled) {
        return;
    }
    let entry = entry(ctx, name, operation, &outcome);
    let taken = match &database.filter {
        Some(filter) => filter.1.matches(&entry),
        None => slow && sampled,
    };
    if taken {
        // What is held in memory (the recent slow operations, getLog's lines) keeps a
        // large command cut short.
        let logged = with_command_cut(&entry);
        profiler.note_slow(&logged);
        // mongod's slow-query line: the entry's fields are the line's `attr`.
        let attr = Bson::Document(logged).into_relaxed_extjson();
        tracing::info!(
            target: "basalt_server::commands",
            attr = %attr,
            "Slow query"
        );
    }
    if database.level == 2 || (database.level == 1 && taken) {
        write(ctx.server, ctx.db, entry);
    }
}

/// How much of a command a log line keeps (mongod's default `maxLogSizeKB`, 10 KB).
const LOGGED_COMMAND_MAX_BYTES: usize = 10 * 1024;

/// `entry` with its command, when its JSON is longer than a log line keeps, replaced by
/// `{$truncated: <the JSON's first 10 KB>}`: a slow insert of large documents would
/// otherwise be held whole, 1,024 times over, in getLog's lines.
fn with_command_cut(entry: &Document) -> Document {
    let mut entry = entry.clone();
    if let Some(command) = entry.get("command") {
        let json = command.clone().into_relaxed_extjson().to_string();
        if json.len() > LOGGED_COMMAND_MAX_BYTES {
            let mut cut = LOGGED_COMMAND_MAX_BYTES;
            while !json.is_char_boundary(cut) {
                cut -= 1;
            }
            entry.insert("command", doc! { "$truncated": &json[..cut] });
        }
    }
    entry
}

/// The profile entry of an operation, with mongod's fields.
fn entry(ctx: &Ctx<'_>, name: &str, operation: &Operation, outcome: &Outcome<'_>) -> Document {
    let examined = operation.examined();
    let mut entry = doc! {
        "op": operation.kind,
        "ns": &operation.ns,
        "command": operation.command.clone(),
        "keysExamined": examined.keys as i64,
        "docsExamined": examined.docs as i64,
    };
    let encoded;
    let reply: Option<&RawDocument> = match outcome {
        Outcome::Document(reply) => {
            encoded = crate::cursors::encode(reply).ok();
            encoded.as_deref()
        }
        Outcome::Encoded(reply) => Some(reply),
        Outcome::Failed(_) => None,
    };
    if let Some(reply) = reply {
        add_reply_figures(name, reply, &mut entry);
    }
    if let Some(summary) = operation.plan_summary() {
        entry.insert("planSummary", summary);
    }
    entry.insert("numYield", 0);
    entry.insert("locks", Document::new());
    entry.insert("flowControl", Document::new());
    match outcome {
        Outcome::Failed(error) => {
            entry.insert("ok", 0.0);
            entry.insert("errMsg", error.message.clone());
            entry.insert("errName", error.code.name());
            entry.insert("errCode", error.code.0);
        }
        Outcome::Document(_) | Outcome::Encoded(_) => {
            let length = reply.map_or(0, |reply| reply.as_bytes().len());
            entry.insert("responseLength", length as i64);
        }
    }
    entry.insert("protocol", "op_msg");
    entry.insert(
        "millis",
        i64::try_from(operation.started.elapsed().as_millis()).unwrap_or(i64::MAX),
    );
    entry.insert("ts", operation.started_at);
    entry.insert("client", ctx.connection.peer.ip().to_string());
    if let Some(name) = ctx.connection.app_name() {
        entry.insert("appName", name);
    }
    let user = crate::security::cursor_owner(ctx);
    entry.insert(
        "allUsers",
        user.iter()
            .map(|u| Bson::Document(doc! { "user": u.user.clone(), "db": u.db.clone() }))
            .collect::<Vec<_>>(),
    );
    entry.insert(
        "user",
        user.map(|u| format!("{}@{}", u.user, u.db))
            .unwrap_or_default(),
    );
    entry
}

/// The counts a reply gives: documents returned, written, matched.
fn add_reply_figures(name: &str, reply: &RawDocument, entry: &mut Document) {
    // Read from the encoded reply: a getMore's is up to 16 MB of documents, of which
    // only the count matters here.
    if let Ok(cursor) = reply.get_document("cursor") {
        let batch = cursor
            .get_array("firstBatch")
            .or_else(|_| cursor.get_array("nextBatch"))
            .map_or(0, |batch| batch.into_iter().count());
        if cursor.get_i64("id").ok() == Some(0) {
            entry.insert("cursorExhausted", true);
        }
        entry.insert("nreturned", batch as i64);
        return;
    }
    let count = |field: &str| match reply.get(field) {
        Ok(Some(RawBsonRef::Int32(n))) => i64::from(n),
        Ok(Some(RawBsonRef::Int64(n))) => n,
        _ => 0,
    };
    match name {
        "insert" => {
            entry.insert("ninserted", count("n"));
        }
        "update" => {
            entry.insert("nMatched", count("n"));
            entry.insert("nModified", count("nModified"));
        }
        "delete" => {
            entry.insert("ndeleted", count("n"));
        }
        _ => {}
    }
}

/// Appends an entry to `db.system.profile`, creating it (capped) when missing. A
/// failure (a secondary, a full disk) loses the entry, never the operation.
fn write(server: &Arc<Server>, db: &str, entry: Document) {
    if server.catalog.get(db, PROFILE_COLLECTION).is_none() {
        let created = crate::commands::run_internal(
            server,
            db,
            doc! {
                "create": PROFILE_COLLECTION,
                "capped": true,
                "size": PROFILE_COLLECTION_BYTES,
            },
        );
        if let Err(e) = created {
            if e.code != ErrorCode::NAMESPACE_EXISTS {
                tracing::debug!("no profile collection in {db}: {}", e.message);
                return;
            }
        }
    }
    let written = crate::commands::run_internal(
        server,
        db,
        doc! { "insert": PROFILE_COLLECTION, "documents": [entry] },
    );
    if let Err(e) = written {
        tracing::debug!("profile entry not written in {db}: {}", e.message);
    }
}

#[cfg(test)]
mod tests {
    use super::normalized;
    use bson::doc;

    #[test]
    fn filters_come_back_as_mongod_serializes_them() {
        assert_eq!(
            normalized(&doc! {"op": "query"}),
            doc! {"op": {"$eq": "query"}}
        );
        assert_eq!(
            normalized(&doc! {"op": "query", "millis": {"$gt": 5}}),
            doc! {"$and": [{"op": {"$eq": "query"}}, {"millis": {"$gt": 5}}]}
        );
        assert_eq!(
            normalized(&doc! {"$or": [{"ns": "a.b"}]}),
            doc! {"$or": [{"ns": {"$eq": "a.b"}}]}
        );
    }
}
