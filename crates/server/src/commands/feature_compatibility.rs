//! The feature compatibility version (FCV): `setFeatureCompatibilityVersion` and the
//! `featureCompatibilityVersion` that `getParameter` reads.
//!
//! Basalt presents itself as MongoDB 8.0, whose FCV is "8.0" or, after a downgrade,
//! the last long-term release's "7.0". As in mongod, the version is a document of
//! `admin.system.version` (`{_id: "featureCompatibilityVersion", version}`), written
//! through the ordinary write path, so it survives a restart and a replica set's
//! members share it. A standalone records it at its first start; a replica set's
//! members without the document are at the binary's version.
//! Basalt has no feature that 8.0 adds and a 7.0 FCV would have to switch off, so the
//! setting changes what is reported, not what runs.
//!
//! mongod's checks, in its order: the fields' types (the version a string, null being
//! a missing field; `confirm` a bool or a number), then the version one of those this
//! binary knows (4926900); a change (not a re-set of the current version) needs
//! `confirm: true` (7369100). `setParameter` cannot set it (IllegalOperation).

use super::{run_internal, Ctx};
use crate::request::type_name;
use basalt_error::{Error, Result};
use bson::{doc, Bson, Document};

/// This binary's version, which a database starts at.
pub const LATEST: &str = "8.0";
/// The versions this binary can run at: the last long-term release's and its own.
const VERSIONS: &[&str] = &["7.0", LATEST];
/// Where mongod keeps it.
const COLLECTION: &str = "system.version";
const DOCUMENT_ID: &str = "featureCompatibilityVersion";
/// The command's own fields besides the generic arguments.
/// The current FCV.
pub fn current(ctx: &Ctx<'_>) -> Result<String> {
    let stored = super::read_own_document(ctx.server, "admin", COLLECTION, DOCUMENT_ID)?;
    Ok(stored
        .as_ref()
        .and_then(|stored| stored.get_str("version").ok())
        .unwrap_or(LATEST)
        .to_string())
}

/// Records the binary's version when none is recorded, as mongod does at its first
/// start (which is why `admin` is always among the databases).
pub fn record_at_start(server: &std::sync::Arc<crate::Server>) -> Result<()> {
    run_internal(
        server,
        "admin",
        doc! {
            "update": COLLECTION,
            "updates": [{
                "q": { "_id": DOCUMENT_ID },
                "u": { "$setOnInsert": { "version": LATEST } },
                "upsert": true,
            }],
        },
    )
    .map(drop)
}

/// `getParameter`'s `featureCompatibilityVersion`.
pub fn parameter(ctx: &Ctx<'_>) -> Result<Document> {
    Ok(doc! { "version": current(ctx)? })
}

pub fn set_feature_compatibility_version(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let requested = match body.get("setFeatureCompatibilityVersion") {
        Some(Bson::String(version)) => version.as_str(),
        None | Some(Bson::Null) => {
            return Err(Error::location(
                40414,
                "BSON field 'setFeatureCompatibilityVersion' is missing but a required field",
            ))
        }
        Some(other) => {
            return Err(Error::type_mismatch(format!(
                "BSON field 'setFeatureCompatibilityVersion' is the wrong type '{}', expected type 'string'",
                type_name(other)
            )))
        }
    };
    // A bool, or a number true unless zero.
    let confirmed = crate::request::Fields {
        command: "setFeatureCompatibilityVersion",
        body,
    }
    .bool_or("confirm", false)?;
    if !VERSIONS.contains(&requested) {
        return Err(Error::location(
            4926900,
            format!(
                "Invalid feature compatibility version value '{requested}'; expected '{}'. \
                 See https://docs.mongodb.com/master/release-notes/{LATEST}-compatibility/#feature-compatibility.",
                VERSIONS.join("' or '")
            ),
        ));
    }
    if current(ctx)? == requested {
        return Ok(Document::new());
    }
    if !confirmed {
        return Err(Error::location(
            7369100,
            format!(
                "Once you have upgraded to {requested}, you will not be able to downgrade FCV \
                 and binary version without support assistance. Please re-run this command \
                 with 'confirm: true' to acknowledge this and continue with the FCV upgrade \
                 or downgrade."
            ),
        ));
    }
    let mut update = doc! {
        "update": COLLECTION,
        "updates": [{
            "q": { "_id": DOCUMENT_ID },
            "u": { "_id": DOCUMENT_ID, "version": requested },
            "upsert": true,
        }],
    };
    if let Some(concern) = body.get("writeConcern") {
        update.insert("writeConcern", concern.clone());
    }
    let reply = run_internal(ctx.server, "admin", update)?;
    Ok(match reply.get("writeConcernError") {
        Some(concern_error) => doc! { "writeConcernError": concern_error.clone() },
        None => Document::new(),
    })
}
