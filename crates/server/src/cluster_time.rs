//! Signed `$clusterTime` under access control, as mongod's (its "logical time
//! validator" and "keys collection manager").
//!
//! Every reply of a replica set member carries `$clusterTime`; clients hand the newest
//! they saw to the next member they talk to. With access control on, the time comes
//! with a proof that a member produced it: an HMAC-SHA1 of the timestamp under a key the
//! members share (`signature: {hash, keyId}`), so a client cannot make up a time. The
//! keys live where mongod keeps them, in `admin.system.keys` (`{_id: keyId, purpose:
//! "HMAC", key, expiresAt}`): the primary creates one (random, then written through the
//! log, so every member holds the same) and the next one half a key's life before the
//! current expires; members read them into memory. A key signs once this member has
//! known it for [`KEY_SETTLE`], so the other members hold it too by the time a client
//! shows them its proof. Until then replies carry no `$clusterTime` (mongod gossips none
//! before it has keys); without access control they carry mongod's empty signature
//! (zero hash, key 0).
//!
//! A `$clusterTime` a client sends that is no later than this member's own time needs no
//! proof (mongod skips it too); a later one must be signed by a known key, else
//! KeyNotFound (211) or TimeProofMismatch (183), unless the user may
//! `advanceClusterTime`. Basalt's cluster time is its log position, which gossip never
//! moves, so the check guards what a member believes of its clients' times, as mongod's.

use crate::commands::Ctx;
use crate::Server;
use basalt_auth::{Action, Mechanism, Resource};
use basalt_error::{Error, ErrorCode, Result};
use bson::spec::BinarySubtype;
use bson::{doc, Binary, Bson, Document, RawDocumentBuf, Timestamp};
use parking_lot::RwLock;
use std::sync::Arc;
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;

/// Where the keys are.
const KEYS_DB: &str = "admin";
const KEYS_COLLECTION: &str = "system.keys";
/// How long a key signs (mongod's `keyRotationIntervalSecs` default: 90 days).
const KEY_LIFE_SECS: u32 = 90 * 24 * 3600;
/// How often members read the keys again and the primary sees whether one is due.
pub const REFRESH_INTERVAL: Duration = Duration::from_secs(1);
/// How long a member knows a key before it signs with it.
const KEY_SETTLE: Duration = Duration::from_secs(2);

/// One signing key.
#[derive(Clone)]
struct Key {
    id: i64,
    secret: Vec<u8>,
    expires: Timestamp,
    /// When this member first read it.
    known_since: Instant,
}

/// The keys this member knows, oldest first.
#[derive(Default)]
pub struct ClusterTimeKeys {
    keys: RwLock<Vec<Key>>,
}

fn seconds_now() -> u32 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    u32::try_from(now.as_secs()).unwrap_or(u32::MAX)
}

/// The proof of `time` under `secret`: HMAC-SHA1 of the timestamp as one 64-bit
/// little-endian number (seconds high, increment low), as mongod computes it.
fn proof(secret: &[u8], time: Timestamp) -> Vec<u8> {
    let value = (u64::from(time.time) << 32) | u64::from(time.increment);
    Mechanism::Sha1.hmac(secret, &value.to_le_bytes())
}

fn later(a: Timestamp, b: Timestamp) -> bool {
    (a.time, a.increment) > (b.time, b.increment)
}

impl ClusterTimeKeys {
    /// The signature of `time`, by the oldest key not yet expired that has settled;
    /// `None` when there is none.
    pub fn signature(&self, time: Timestamp) -> Option<RawDocumentBuf> {
        let keys = self.keys.read();
        let now = seconds_now();
        let key = keys
            .iter()
            .find(|k| k.expires.time > now && k.known_since.elapsed() >= KEY_SETTLE)?;
        Some(signature_document(key.id, proof(&key.secret, time)))
    }

    /// Reads the keys from `admin.system.keys` again.
    fn reload(&self, server: &Arc<Server>) -> Result<()> {
        let stored = crate::commands::find_internal(server, KEYS_DB, KEYS_COLLECTION, doc! {})?;
        let mut keys: Vec<Key> = stored.iter().filter_map(parse_key).collect();
        keys.sort_by_key(|k| (k.expires.time, k.id));
        let mut known = self.keys.write();
        for key in &mut keys {
            if let Some(before) = known.iter().find(|k| k.id == key.id) {
                key.known_since = before.known_since;
            }
        }
        *known = keys;
        Ok(())
    }

    /// On the primary: writes a new key when none signs for more than half a key's life.
    fn create_when_due(&self, server: &Arc<Server>) -> Result<()> {
        let now = seconds_now();
        let horizon = now.saturating_add(KEY_LIFE_SECS / 2);
        if self.keys.read().iter().any(|k| k.expires.time > horizon) {
            return Ok(());
        }
        let starts = self
            .keys
            .read()
            .iter()
            .map(|k| k.expires.time)
            .max()
            .unwrap_or(now)
            .max(now);
        let secret: [u8; 20] = rand::random();
        let key = doc! {
            "_id": i64::from(starts) << 32 | i64::from(rand::random::<u16>()),
            "purpose": "HMAC",
            "key": Binary { subtype: BinarySubtype::Generic, bytes: secret.to_vec() },
            "expiresAt": Timestamp { time: starts.saturating_add(KEY_LIFE_SECS), increment: 0 },
        };
        crate::commands::run_internal(
            server,
            KEYS_DB,
            doc! { "insert": KEYS_COLLECTION, "documents": [key] },
        )?;
        self.reload(server)
    }

    /// Checks a `$clusterTime` a client sent (see the module's note).
    pub fn check(&self, ctx: &Ctx<'_>, body: &Document, own: Timestamp) -> Result<()> {
        let Some(given) = body.get("$clusterTime") else {
            return Ok(());
        };
        let malformed = || {
            Error::bad_value("$clusterTime must be {clusterTime: <timestamp>, signature: {hash: <binData>, keyId: <long>}}")
        };
        let Bson::Document(given) = given else {
            return Err(malformed());
        };
        let Ok(time) = given.get_timestamp("clusterTime") else {
            return Err(malformed());
        };
        if !later(time, own)
            || crate::security::allows(ctx, &Resource::Cluster, Action::AdvanceClusterTime)?
        {
            return Ok(());
        }
        let signature = given.get_document("signature").map_err(|_| malformed())?;
        let hash = match signature.get("hash") {
            Some(Bson::Binary(hash)) => hash.bytes.clone(),
            _ => return Err(malformed()),
        };
        let id = signature
            .get("keyId")
            .and_then(basalt_value::as_i64)
            .ok_or_else(malformed)?;
        let secret = match self.secret(id) {
            Some(secret) => secret,
            None => {
                // Perhaps written since the last refresh.
                self.reload(ctx.server)?;
                self.secret(id).ok_or_else(|| {
                    Error::new(
                        ErrorCode::KEY_NOT_FOUND,
                        format!(
                            "No keys found for HMAC that is valid for time: {time:?} with id: {id}"
                        ),
                    )
                })?
            }
        };
        if bool::from(proof(&secret, time).ct_eq(&hash)) {
            Ok(())
        } else {
            Err(Error::new(
                ErrorCode::TIME_PROOF_MISMATCH,
                "Time proof mismatch",
            ))
        }
    }

    fn secret(&self, id: i64) -> Option<Vec<u8>> {
        self.keys
            .read()
            .iter()
            .find(|k| k.id == id)
            .map(|k| k.secret.clone())
    }
}

fn parse_key(doc: &Document) -> Option<Key> {
    if doc.get_str("purpose").ok()? != "HMAC" {
        return None;
    }
    Some(Key {
        id: doc.get("_id").and_then(basalt_value::as_i64)?,
        secret: match doc.get("key")? {
            Bson::Binary(key) if !key.bytes.is_empty() => key.bytes.clone(),
            _ => return None,
        },
        expires: doc.get_timestamp("expiresAt").ok()?,
        known_since: Instant::now(),
    })
}

/// `{hash, keyId}`.
pub fn signature_document(id: i64, hash: Vec<u8>) -> RawDocumentBuf {
    bson::rawdoc! {
        "hash": Binary { subtype: BinarySubtype::Generic, bytes: hash },
        "keyId": id,
    }
}

/// Keeps the keys of a replica set member under access control: reads them every
/// [`REFRESH_INTERVAL`], and on the primary creates one when due.
pub async fn run(server: Arc<Server>) {
    if !server.security.enabled || server.replication().is_none() {
        return;
    }
    let mut tick = tokio::time::interval(REFRESH_INTERVAL);
    loop {
        tick.tick().await;
        let pass = server.clone();
        let outcome = tokio::task::spawn_blocking(move || {
            let keys = &pass.cluster_time_keys;
            keys.reload(&pass)?;
            match pass.replication() {
                Some(set) if set.state() == basalt_repl::MemberState::Primary => {
                    keys.create_when_due(&pass)
                }
                _ => Ok(()),
            }
        })
        .await;
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::debug!("cluster time keys: {e}"),
            Err(e) => tracing::warn!("cluster time keys: the refresh panicked: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_depends_on_the_key_and_the_time() {
        let time = Timestamp {
            time: 1_700_000_000,
            increment: 42,
        };
        let a = proof(b"key one", time);
        assert_eq!(a.len(), 20);
        assert_eq!(a, proof(b"key one", time));
        assert_ne!(a, proof(b"key two", time));
        assert_ne!(
            a,
            proof(
                b"key one",
                Timestamp {
                    time: 1_700_000_000,
                    increment: 43
                }
            )
        );
    }

    #[test]
    fn a_key_signs_once_settled_and_until_it_expires() {
        let time = Timestamp {
            time: 1,
            increment: 1,
        };
        let key = |expires: u32, known_since: Instant| Key {
            id: 7,
            secret: b"secret".to_vec(),
            expires: Timestamp {
                time: expires,
                increment: 0,
            },
            known_since,
        };
        let keys = ClusterTimeKeys::default();
        assert!(keys.signature(time).is_none());
        *keys.keys.write() = vec![key(u32::MAX, Instant::now())];
        assert!(keys.signature(time).is_none(), "not settled yet");
        let settled = Instant::now() - KEY_SETTLE;
        *keys.keys.write() = vec![key(1, settled)];
        assert!(keys.signature(time).is_none(), "expired");
        *keys.keys.write() = vec![key(u32::MAX, settled)];
        let signature = keys.signature(time).unwrap();
        assert_eq!(signature.get_i64("keyId").unwrap(), 7);
        let hash = signature.get_binary("hash").unwrap();
        assert_eq!(hash.bytes, proof(b"secret", time));
    }
}
