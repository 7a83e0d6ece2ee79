//! Logical sessions (`lsid`), as mongod's logical session cache keeps them: every command
//! that names a session marks it used, with its user under access control;
//! `$listLocalSessions` lists what this server holds. Every
//! [`REFRESH_INTERVAL`] (mongod's `logicalSessionRefreshMillis`, 5 minutes), and at once on
//! `refreshLogicalSessionCacheNow`, a standalone or a primary writes them to
//! `config.system.sessions` as `{_id: {id, uid}, lastUse, user: {name}}`, which
//! `$listSessions` reads and whose TTL index (`lsidTTLIndex`, 30 minutes after `lastUse`,
//! `localLogicalSessionTimeoutMinutes`) removes the sessions no longer used;
//! `endSessions`/`killSessions` forget sessions here and delete their documents at the
//! next refresh. Sessions unused for 30 minutes leave the cache too.
//!
//! `uid` is the SHA-256 of the user's `name@db` (of the empty string without one), as
//! mongod computes it.

use crate::security::UserName;
use crate::Server;
use basalt_error::Result;
use basalt_repl::MemberState;
use bson::{doc, Bson, Document};
use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the cache is written to `config.system.sessions`.
pub const REFRESH_INTERVAL: Duration = Duration::from_secs(300);

/// How long a session is kept after its last use (`localLogicalSessionTimeoutMinutes`).
const SESSION_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// Sessions written per `update` command.
const WRITE_BATCH: usize = 1_000;

/// A session's key: its `id` (the UUID's bytes) and its user's digest.
type Key = (Vec<u8>, [u8; 32]);

struct Used {
    id: Bson,
    user: Option<UserName>,
    last_use: bson::DateTime,
    at: Instant,
}

#[derive(Default)]
pub struct LogicalSessions {
    cache: Mutex<HashMap<Key, Used>>,
    /// Ended sessions whose documents the next refresh deletes (`_id`s).
    ended: Mutex<Vec<Document>>,
}

/// MongoDB's `uid` of a user: the SHA-256 of `name@db`, of "" for no user.
pub fn user_digest(user: Option<&UserName>) -> [u8; 32] {
    // Without access control every command's session has this one: computed once.
    static ANONYMOUS: std::sync::LazyLock<[u8; 32]> =
        std::sync::LazyLock::new(|| Sha256::digest(b"").into());
    match user {
        None => *ANONYMOUS,
        Some(u) => Sha256::digest(format!("{}@{}", u.user, u.db).as_bytes()).into(),
    }
}

fn binary(bytes: &[u8]) -> Bson {
    Bson::Binary(bson::Binary {
        subtype: bson::spec::BinarySubtype::Generic,
        bytes: bytes.to_vec(),
    })
}

fn key_of(lsid: &Document, user: Option<&UserName>) -> Option<(Key, Bson)> {
    let id = lsid.get("id")?;
    let Bson::Binary(bytes) = id else {
        return None;
    };
    Some(((bytes.bytes.clone(), user_digest(user)), id.clone()))
}

impl LogicalSessions {
    /// Marks the session `lsid` used now by `user`.
    pub fn touch(&self, lsid: &Document, user: Option<UserName>) {
        let Some((key, id)) = key_of(lsid, user.as_ref()) else {
            return;
        };
        let now = bson::DateTime::now();
        let mut cache = self.cache.lock();
        let used = cache.entry(key).or_insert_with(|| Used {
            id,
            user,
            last_use: now,
            at: Instant::now(),
        });
        used.last_use = now;
        used.at = Instant::now();
    }

    /// Forgets the sessions (`endSessions`, `killSessions`: their `lsid` documents) of
    /// `user`; their documents go at the next refresh.
    pub fn end(&self, lsids: &[Document], user: Option<&UserName>) {
        let mut cache = self.cache.lock();
        let mut ended = self.ended.lock();
        for lsid in lsids {
            if let Some((key, id)) = key_of(lsid, user) {
                cache.remove(&key);
                ended.push(doc! { "id": id, "uid": binary(&key.1) });
            }
        }
    }

    /// Forgets every session (`killAllSessions`), or with `users` those of these
    /// users; returns their `lsid`s (`{id}`).
    pub fn end_all(&self, users: Option<&[UserName]>) -> Vec<Document> {
        let mut cache = self.cache.lock();
        let keys: Vec<Key> = cache
            .iter()
            .filter(|(_, used)| {
                users.is_none_or(|users| used.user.as_ref().is_some_and(|u| users.contains(u)))
            })
            .map(|(key, _)| key.clone())
            .collect();
        let mut lsids = Vec::with_capacity(keys.len());
        let mut ended = self.ended.lock();
        for key in keys {
            if let Some(used) = cache.remove(&key) {
                ended.push(doc! { "id": used.id.clone(), "uid": binary(&key.1) });
                lsids.push(doc! { "id": used.id });
            }
        }
        lsids
    }

    /// How many sessions are held (serverStatus's
    /// `logicalSessionRecordCache.activeSessionsCount`).
    pub fn count(&self) -> usize {
        let mut cache = self.cache.lock();
        cache.retain(|_, used| used.at.elapsed() < SESSION_TIMEOUT);
        cache.len()
    }

    /// The sessions held, as `config.system.sessions` documents.
    pub fn list(&self) -> Vec<Document> {
        let mut cache = self.cache.lock();
        cache.retain(|_, used| used.at.elapsed() < SESSION_TIMEOUT);
        cache
            .iter()
            .map(|((_, uid), used)| record(&used.id, uid, used.user.as_ref(), used.last_use))
            .collect()
    }

    /// Writes the sessions held to `config.system.sessions` (creating its TTL index) and
    /// deletes the ended ones there. Only a standalone or a primary writes; a secondary
    /// keeps its sessions for `$listLocalSessions`.
    pub fn refresh(&self, server: &Arc<Server>) -> Result<()> {
        if server
            .replication()
            .is_some_and(|set| set.state() != MemberState::Primary)
        {
            return Ok(());
        }
        let sessions = self.list();
        let ended = std::mem::take(&mut *self.ended.lock());
        if sessions.is_empty() && ended.is_empty() {
            return Ok(());
        }
        let run = |body: Document| crate::commands::run_internal(server, "config", body);
        run(doc! {
            "createIndexes": "system.sessions",
            "indexes": [{
                "key": { "lastUse": 1 },
                "name": "lsidTTLIndex",
                "expireAfterSeconds": SESSION_TIMEOUT.as_secs() as i32,
            }],
        })?;
        for chunk in sessions.chunks(WRITE_BATCH) {
            let updates: Vec<Document> = chunk
                .iter()
                .map(|session| {
                    let mut fields = session.clone();
                    let id = fields.remove("_id").unwrap_or(Bson::Null);
                    doc! { "q": { "_id": id }, "u": { "$set": fields }, "upsert": true }
                })
                .collect();
            run(doc! { "update": "system.sessions", "updates": updates, "ordered": false })?;
        }
        for chunk in ended.chunks(WRITE_BATCH) {
            let deletes: Vec<Document> = chunk
                .iter()
                .map(|id| doc! { "q": { "_id": id.clone() }, "limit": 1 })
                .collect();
            run(doc! { "delete": "system.sessions", "deletes": deletes, "ordered": false })?;
        }
        Ok(())
    }
}

/// A session as `config.system.sessions` holds it.
fn record(id: &Bson, uid: &[u8], user: Option<&UserName>, last_use: bson::DateTime) -> Document {
    let mut record = doc! {
        "_id": { "id": id.clone(), "uid": binary(uid) },
        "lastUse": last_use,
    };
    if let Some(user) = user {
        record.insert(
            "user",
            doc! { "name": format!("{}@{}", user.user, user.db) },
        );
    }
    record
}

/// Runs refreshes forever, every [`REFRESH_INTERVAL`].
pub async fn run(server: Arc<Server>) {
    let mut tick = tokio::time::interval(REFRESH_INTERVAL);
    tick.tick().await;
    loop {
        tick.tick().await;
        let pass = server.clone();
        let outcome = tokio::task::spawn_blocking(move || pass.sessions.refresh(&pass)).await;
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!("logical session refresh failed: {e}"),
            Err(e) => tracing::warn!("logical session refresh panicked: {e}"),
        }
    }
}
