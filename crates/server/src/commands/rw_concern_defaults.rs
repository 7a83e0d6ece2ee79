//! The cluster-wide default read and write concerns of a replica set:
//! `setDefaultRWConcern` and `getDefaultRWConcern`.
//!
//! As in MongoDB the defaults are a document in `config.settings`
//! (`_id: "ReadWriteConcernDefaults"`), written through the replicated log like any
//! write, so every member (and the next primary) has them. The default write concern
//! applies to writes that give none (a `w: N` above a majority then waits for N members,
//! see `replication::write_concern_error`); the default read concern is stored and
//! reported, and every level it may name (`local`, `available`, `majority`) reads the
//! same committed data here. Without a stored default the implicit ones are MongoDB 5+'s:
//! `{w: "majority"}` and `{level: "local"}`. A standalone has neither command, as mongod.

use super::Ctx;
use basalt_error::{Error, ErrorCode, Result};
use basalt_repl::MemberState;
use bson::{doc, Bson, Document};
use parking_lot::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};

const SETTINGS_DB: &str = "config";
const SETTINGS: &str = "settings";
const DEFAULTS_ID: &str = "ReadWriteConcernDefaults";

/// Read concern levels a default may name.
const DEFAULT_READ_LEVELS: [&str; 3] = ["local", "available", "majority"];

fn not_on_standalone(ctx: &Ctx<'_>, command: &str) -> Result<()> {
    match ctx.server.replication() {
        Some(_) => Ok(()),
        None => Err(Error::new(
            ErrorCode::ILLEGAL_OPERATION,
            format!("'{command}' is not supported on standalone nodes."),
        )),
    }
}

/// The stored defaults document, if any has been set.
fn stored(ctx: &Ctx<'_>) -> Result<Option<Document>> {
    let found = super::find_internal(
        ctx.server,
        SETTINGS_DB,
        SETTINGS,
        doc! { "_id": DEFAULTS_ID },
    )
    .map_err(|e| Error::internal(format!("reading the default concerns: {}", e.message)))?;
    Ok(found.into_iter().next())
}

/// The defaults as last read, kept until a write to the `config` database (which
/// reaches every member through the log) makes them stale: a write that gives no
/// concern asks for them, and must not run a query each time.
#[derive(Default)]
pub struct Cache {
    /// Bumped by every invalidation; a read that saw another generation is not kept.
    generation: AtomicU64,
    /// `Some(defaults)` once read (`Some(None)`: none are stored).
    defaults: RwLock<Option<Option<Document>>>,
}

impl Cache {
    pub fn invalidate(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        *self.defaults.write() = None;
    }
}

/// The stored default write concern, for a write that gives none.
pub fn default_write_concern(ctx: &Ctx<'_>) -> Option<Document> {
    let cache = &ctx.server.rw_concern_defaults;
    // Bound first: a guard in the `match` head would live through the arms.
    let cached = cache.defaults.read().clone();
    let defaults = match cached {
        Some(defaults) => defaults,
        None => {
            let generation = cache.generation.load(Ordering::SeqCst);
            let defaults = stored(ctx).ok()?;
            let mut cached = cache.defaults.write();
            if cache.generation.load(Ordering::SeqCst) == generation {
                *cached = Some(defaults.clone());
            }
            defaults
        }
    };
    defaults?
        .get_document("defaultWriteConcern")
        .ok()
        .cloned()
        .filter(|concern| !concern.is_empty())
}

fn check_read_concern(concern: &Document) -> Result<()> {
    for (key, value) in concern {
        match (key.as_str(), value) {
            ("level", Bson::String(level)) if DEFAULT_READ_LEVELS.contains(&level.as_str()) => {}
            ("level", Bson::String(level)) => {
                return Err(Error::bad_value(format!(
                    "level: '{level}' is not supported as a global default read concern"
                )))
            }
            _ => {
                return Err(Error::bad_value(format!(
                    "'{key}' is not supported in a default read concern: only 'level' is"
                )))
            }
        }
    }
    Ok(())
}

fn check_write_concern(concern: &Document) -> Result<()> {
    for (key, value) in concern {
        match key.as_str() {
            "w" if basalt_value::as_i64(value) == Some(0) => {
                return Err(Error::bad_value(
                    "The global default write concern cannot be w: 0",
                ))
            }
            "w" if basalt_value::is_number(value) || matches!(value, Bson::String(_)) => {}
            "wtimeout" if basalt_value::as_i64(value).is_some_and(|ms| ms >= 0) => {}
            "j" if matches!(value, Bson::Boolean(_)) => {}
            _ => {
                return Err(Error::bad_value(format!(
                    "'{key}: {value}' is not a valid default write concern setting"
                )))
            }
        }
    }
    Ok(())
}

/// A default given to `setDefaultRWConcern`: `None` when absent, checked otherwise.
fn given(
    body: &Document,
    field: &str,
    check: fn(&Document) -> Result<()>,
) -> Result<Option<Document>> {
    match body.get(field) {
        None => Ok(None),
        Some(Bson::Document(concern)) => check(concern).map(|()| Some(concern.clone())),
        Some(_) => Err(Error::type_mismatch(format!("{field} must be an object"))),
    }
}

pub fn set_default_rw_concern(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    not_on_standalone(ctx, "setDefaultRWConcern")?;
    let read = given(body, "defaultReadConcern", check_read_concern)?;
    let mut write = given(body, "defaultWriteConcern", check_write_concern)?;
    if read.is_none() && write.is_none() {
        return Err(Error::bad_value(
            "At least one of the \"defaultReadConcern\" or \"defaultWriteConcern\" fields must \
             be present",
        ));
    }
    if let Some(concern) = write.as_mut().filter(|c| !c.is_empty()) {
        if !concern.contains_key("wtimeout") {
            concern.insert("wtimeout", 0);
        }
    }
    let set = ctx
        .server
        .replication()
        .ok_or_else(|| Error::internal("no replica set"))?;
    if set.state() != MemberState::Primary {
        return Err(Error::new(ErrorCode::NOT_WRITABLE_PRIMARY, "not primary"));
    }
    let mut defaults = stored(ctx)?.unwrap_or_else(|| doc! { "_id": DEFAULTS_ID });
    for (field, concern) in [("defaultReadConcern", read), ("defaultWriteConcern", write)] {
        match concern {
            Some(concern) if concern.is_empty() => {
                defaults.remove(field);
            }
            Some(concern) => {
                defaults.insert(field, concern);
            }
            None => {}
        }
    }
    defaults.insert("updateOpTime", set.applied().timestamp());
    defaults.insert("updateWallClockTime", bson::DateTime::now());
    super::run_internal(
        ctx.server,
        SETTINGS_DB,
        doc! {
            "update": SETTINGS,
            "updates": [{ "q": { "_id": DEFAULTS_ID }, "u": defaults, "upsert": true }],
        },
    )?;
    get_default_rw_concern(ctx, &Document::new())
}

pub fn get_default_rw_concern(ctx: &Ctx<'_>, _body: &Document) -> Result<Document> {
    not_on_standalone(ctx, "getDefaultRWConcern")?;
    let defaults = stored(ctx)?.unwrap_or_default();
    let mut reply = Document::new();
    let mut source =
        |field: &str, source_field: &str, implicit: Document| match defaults.get_document(field) {
            Ok(concern) => {
                reply.insert(field, concern.clone());
                reply.insert(source_field, "global");
            }
            Err(_) => {
                reply.insert(field, implicit);
                reply.insert(source_field, "implicit");
            }
        };
    source(
        "defaultReadConcern",
        "defaultReadConcernSource",
        doc! { "level": "local" },
    );
    source(
        "defaultWriteConcern",
        "defaultWriteConcernSource",
        doc! { "w": "majority", "wtimeout": 0 },
    );
    for field in ["updateOpTime", "updateWallClockTime"] {
        if let Some(value) = defaults.get(field) {
            reply.insert(field, value.clone());
        }
    }
    reply.insert("localUpdateWallClockTime", bson::DateTime::now());
    Ok(reply)
}
