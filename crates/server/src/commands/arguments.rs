//! The arguments every command takes, declared as mongod declares them, and checked in
//! one place before a command runs. Each registered command is declared here (a unit
//! test in the registry holds every one to it), with how mongod parses it:
//!
//! - **strict**: an IDL command. A field it does not know is refused (40415, as mongod's
//!   parser refuses it), and a known field of the wrong type is a TypeMismatch, whether
//!   or not the command reads it (mongod parses every field before it acts);
//! - **lenient**: a command mongod reads by hand (`serverStatus`, `fsync`, `validate`,
//!   the `replSet*` commands, ...) or an IDL one declared `strict: false` (`hello`,
//!   `applyOps`, `setClusterParameter`): a field it does not know is ignored, the ones it
//!   declares are still typed.
//!
//! The generic arguments (`lsid`, `comment`, read and write concerns, ...) are every
//! command's (`request::GENERIC_COMMAND_FIELDS`, and `generic_arguments.rs` for their
//! contents); a `$` field that is not one of them is unknown too. A field declared `Any`
//! is typed by the command where it reads it (its own errors differ from a plain
//! TypeMismatch, or its type depends on other fields). The sub-documents mongod parses
//! as strict structs (`bulkWrite`'s operations, `collMod`'s `index`, the sessions and
//! users the session commands name, `getParameter`'s options) are checked by
//! [`check_struct`] against their own fields. The types and their checks are
//! `basalt_value::idl`'s, which stage parsers use too (`$listLocalSessions`).

use crate::request::GENERIC_COMMAND_FIELDS;
use basalt_error::Result;
use basalt_value::idl::check_value;
pub(crate) use basalt_value::idl::{check_struct, missing, unknown, Field, Kind};
use bson::{Bson, Document};

/// Whether mongod's parser refuses a field it does not know.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Unknown {
    Refused,
    Ignored,
}

/// The arguments of one command: its first field's (the namespace) and these groups'.
struct Declared {
    command: &'static str,
    unknown: Unknown,
    fields: &'static [&'static [Field]],
    /// The fields it must have, when the command does not check them where it reads
    /// them (null is missing).
    required: &'static [&'static str],
}

/// An IDL command: unknown fields are refused.
const fn strict(command: &'static str, fields: &'static [&'static [Field]]) -> Declared {
    Declared {
        command,
        unknown: Unknown::Refused,
        fields,
        required: &[],
    }
}

/// A command mongod reads by hand, or declares `strict: false`: unknown fields pass.
const fn lenient(command: &'static str, fields: &'static [&'static [Field]]) -> Declared {
    Declared {
        command,
        unknown: Unknown::Ignored,
        fields,
        required: &[],
    }
}

/// `declared`, with the fields it must have.
const fn requiring(mut declared: Declared, required: &'static [&'static str]) -> Declared {
    declared.required = required;
    declared
}

/// What every write command takes (mongod's `WriteCommandRequestBase`).
const WRITE_COMMAND_FIELDS: &[Field] = &[
    ("bypassDocumentValidation", Kind::SafeBool),
    ("ordered", Kind::Bool),
    ("stmtId", Kind::Any),
    ("stmtIds", Kind::Any),
    ("isTimeseriesNamespace", Kind::SafeBool),
    ("collectionUUID", Kind::Any),
    ("encryptionInformation", Kind::Document),
    ("bypassEmptyTsReplacement", Kind::SafeBool),
];

/// What update, delete and findAndModify take beside their own.
const LET_FIELDS: &[Field] = &[
    ("let", Kind::Document),
    ("runtimeConstants", Kind::Document),
];

/// What the user-management commands that write a user take.
const USER_FIELDS: &[Field] = &[
    ("pwd", Kind::String),
    ("customData", Kind::Document),
    ("roles", Kind::Array),
    ("digestPassword", Kind::SafeBool),
    ("authenticationRestrictions", Kind::Array),
    ("mechanisms", Kind::Array),
];

/// What the user-management commands that write a role take.
const ROLE_FIELDS: &[Field] = &[
    ("privileges", Kind::Array),
    ("roles", Kind::Array),
    ("authenticationRestrictions", Kind::Array),
];

/// What a search index command names its index by.
const SEARCH_INDEX_FIELDS: &[Field] = &[("name", Kind::String), ("id", Kind::String)];

const DECLARED: &[Declared] = &[
    strict(
        "listIndexes",
        &[&[
            ("cursor", Kind::Cursor),
            ("includeBuildUUIDs", Kind::SafeBool),
            ("includeIndexBuildInfo", Kind::SafeBool),
            ("rawData", Kind::SafeBool),
        ]],
    ),
    strict(
        "listDatabases",
        &[&[
            ("filter", Kind::Document),
            ("nameOnly", Kind::SafeBool),
            ("authorizedDatabases", Kind::Bool),
        ]],
    ),
    strict(
        "listCollections",
        &[&[
            ("filter", Kind::Document),
            ("cursor", Kind::Cursor),
            ("nameOnly", Kind::Bool),
            ("authorizedCollections", Kind::Bool),
            ("includePendingDrops", Kind::SafeBool),
            ("rawData", Kind::SafeBool),
        ]],
    ),
    // Read (or accepted, as mongod does, for those that mean nothing here: no
    // shards, replicas or query statistics) and typed by find itself.
    strict(
        "find",
        &[&[
            ("filter", Kind::Any),
            ("projection", Kind::Any),
            ("sort", Kind::Any),
            ("hint", Kind::Any),
            ("skip", Kind::Any),
            ("limit", Kind::Any),
            ("batchSize", Kind::Any),
            ("singleBatch", Kind::Any),
            ("collation", Kind::Any),
            ("allowDiskUse", Kind::Any),
            ("let", Kind::Any),
            ("noCursorTimeout", Kind::Any),
            ("allowPartialResults", Kind::Any),
            ("oplogReplay", Kind::Any),
            ("readOnce", Kind::Any),
            ("allowSpeculativeMajorityRead", Kind::Any),
            ("term", Kind::Any),
            ("includeQueryStatsMetrics", Kind::Any),
            ("maxTimeMSOpOnly", Kind::Any),
            ("min", Kind::Any),
            ("max", Kind::Any),
            ("returnKey", Kind::Any),
            ("showRecordId", Kind::Any),
            ("tailable", Kind::Any),
            ("awaitData", Kind::Any),
        ]],
    ),
    strict(
        "aggregate",
        &[&[
            ("pipeline", Kind::Any),
            ("explain", Kind::StrictBool),
            ("allowDiskUse", Kind::StrictBool),
            ("cursor", Kind::Cursor),
            ("bypassDocumentValidation", Kind::SafeBool),
            ("collation", Kind::Document),
            // aggregate's own hint check answers FailedToParse.
            ("hint", Kind::Any),
            ("let", Kind::Document),
            ("fromMongos", Kind::SafeBool),
            ("fromRouter", Kind::SafeBool),
            ("needsMerge", Kind::SafeBool),
            ("exchange", Kind::Document),
            ("isMapReduceCommand", Kind::SafeBool),
            ("collectionUUID", Kind::Any),
            ("encryptionInformation", Kind::Document),
            ("includeQueryStatsMetrics", Kind::SafeBool),
            ("rawData", Kind::SafeBool),
        ]],
    ),
    strict(
        "insert",
        &[
            &[
                ("documents", Kind::Array),
                ("includeQueryStatsMetrics", Kind::SafeBool),
            ],
            WRITE_COMMAND_FIELDS,
        ],
    ),
    strict(
        "update",
        &[
            &[("updates", Kind::Array)],
            WRITE_COMMAND_FIELDS,
            LET_FIELDS,
        ],
    ),
    strict(
        "delete",
        &[
            &[("deletes", Kind::Array)],
            WRITE_COMMAND_FIELDS,
            LET_FIELDS,
        ],
    ),
    strict(
        "findAndModify",
        &[
            &[
                ("query", Kind::Document),
                ("fields", Kind::Document),
                ("sort", Kind::Document),
                ("batchSize", Kind::Any),
                ("singleBatch", Kind::Bool),
                ("hint", Kind::Hint),
                ("collation", Kind::Document),
                ("arrayFilters", Kind::Array),
                ("remove", Kind::SafeBool),
                ("update", Kind::Any),
                ("upsert", Kind::SafeBool),
                ("new", Kind::SafeBool),
                ("stmtId", Kind::Any),
                ("bypassDocumentValidation", Kind::SafeBool),
                ("encryptionInformation", Kind::Document),
                ("bypassEmptyTsReplacement", Kind::SafeBool),
                ("sampleId", Kind::Any),
                ("isTimeseriesNamespace", Kind::SafeBool),
            ],
            LET_FIELDS,
        ],
    ),
    strict(
        "count",
        &[&[
            ("query", Kind::Document),
            ("limit", Kind::Any),
            ("skip", Kind::Any),
            // count's own hint check answers FailedToParse; `fields` is ignored.
            ("hint", Kind::Any),
            ("collation", Kind::Document),
            ("fields", Kind::Any),
            ("queryOptions", Kind::Document),
            ("mirrored", Kind::SafeBool),
            ("sampleId", Kind::Any),
            ("encryptionInformation", Kind::Document),
            ("rawData", Kind::SafeBool),
        ]],
    ),
    strict("drop", &[&[("collectionUUID", Kind::Any)]]),
    strict(
        "dropIndexes",
        &[&[
            ("index", Kind::Any),
            ("collectionUUID", Kind::Any),
            ("isTimeseriesNamespace", Kind::SafeBool),
        ]],
    ),
    strict("killCursors", &[&[("cursors", Kind::Any)]]),
    strict("connectionStatus", &[&[("showPrivileges", Kind::SafeBool)]]),
    strict(
        "dbStats",
        &[&[("scale", Kind::Any), ("freeStorage", Kind::SafeBool)]],
    ),
    strict(
        "distinct",
        &[&[
            ("key", Kind::Any),
            ("query", Kind::Any),
            ("collation", Kind::Any),
            ("hint", Kind::Any),
        ]],
    ),
    strict(
        "renameCollection",
        &[&[
            ("to", Kind::Any),
            ("dropTarget", Kind::Any),
            ("stayTemp", Kind::Any),
            ("collectionUUID", Kind::Any),
        ]],
    ),
    strict(
        "setFeatureCompatibilityVersion",
        &[&[("confirm", Kind::Any), ("fromConfigServer", Kind::Any)]],
    ),
    strict(
        "profile",
        &[&[
            ("slowms", Kind::Any),
            ("sampleRate", Kind::Any),
            ("filter", Kind::Any),
        ]],
    ),
    strict("setQuerySettings", &[&[("settings", Kind::Any)]]),
    strict("removeQuerySettings", &[]),
    strict("lockInfo", &[&[("includeStorageEngineDump", Kind::Any)]]),
    strict("logRotate", &[]),
    strict(
        "compact",
        &[&[
            ("dryRun", Kind::Any),
            ("force", Kind::Any),
            ("freeSpaceTargetMB", Kind::Any),
        ]],
    ),
    strict(
        "autoCompact",
        &[&[("runOnce", Kind::Any), ("freeSpaceTargetMB", Kind::Any)]],
    ),
    strict(
        "dataSize",
        &[&[
            ("keyPattern", Kind::Any),
            ("min", Kind::Any),
            ("max", Kind::Any),
            ("estimate", Kind::Any),
        ]],
    ),
    // The commands mongod 8.0 declares in IDL (strict), beside those above.
    strict("ping", &[]),
    strict("buildInfo", &[]),
    strict("getCmdLineOpts", &[]),
    strict("hostInfo", &[]),
    // A log's name is the first field (typed where it is read).
    strict("getLog", &[]),
    strict("dropConnections", &[&[("hostAndPort", Kind::Array)]]),
    strict("rotateCertificates", &[&[("message", Kind::String)]]),
    strict(
        "saslStart",
        &[&[
            ("mechanism", Kind::String),
            ("autoAuthorize", Kind::SafeBool),
            ("options", Kind::Document),
            ("payload", Kind::Any),
        ]],
    ),
    strict(
        "saslContinue",
        &[&[("conversationId", Kind::Any), ("payload", Kind::Any)]],
    ),
    strict(
        "authenticate",
        &[&[("mechanism", Kind::String), ("user", Kind::String)]],
    ),
    strict("logout", &[]),
    strict("createUser", &[USER_FIELDS]),
    strict("updateUser", &[USER_FIELDS]),
    strict("dropUser", &[]),
    strict("dropAllUsersFromDatabase", &[]),
    strict(
        "usersInfo",
        &[&[
            ("showPrivileges", Kind::SafeBool),
            ("showCredentials", Kind::SafeBool),
            ("showAuthenticationRestrictions", Kind::SafeBool),
            ("showCustomData", Kind::SafeBool),
            ("filter", Kind::Document),
        ]],
    ),
    strict("grantRolesToUser", &[&[("roles", Kind::Array)]]),
    strict("revokeRolesFromUser", &[&[("roles", Kind::Array)]]),
    strict("createRole", &[ROLE_FIELDS]),
    strict("updateRole", &[ROLE_FIELDS]),
    strict("dropRole", &[]),
    strict("dropAllRolesFromDatabase", &[]),
    strict(
        "rolesInfo",
        &[&[
            // true, false or "asUserFragment".
            ("showPrivileges", Kind::Any),
            ("showBuiltinRoles", Kind::SafeBool),
            ("showAuthenticationRestrictions", Kind::SafeBool),
        ]],
    ),
    strict("grantPrivilegesToRole", &[&[("privileges", Kind::Array)]]),
    strict(
        "revokePrivilegesFromRole",
        &[&[("privileges", Kind::Array)]],
    ),
    strict("grantRolesToRole", &[&[("roles", Kind::Array)]]),
    strict("revokeRolesFromRole", &[&[("roles", Kind::Array)]]),
    strict(
        "replSetResizeOplog",
        &[&[("size", Kind::Number), ("minRetentionHours", Kind::Number)]],
    ),
    strict(
        "setDefaultRWConcern",
        &[&[
            ("defaultReadConcern", Kind::Document),
            ("defaultWriteConcern", Kind::Document),
        ]],
    ),
    strict("getDefaultRWConcern", &[&[("inMemory", Kind::Bool)]]),
    strict("getFreeMonitoringStatus", &[]),
    strict(
        "getMore",
        &[&[
            ("collection", Kind::Any),
            ("batchSize", Kind::Any),
            ("term", Kind::Long),
            ("lastKnownCommittedOpTime", Kind::Any),
            ("includeQueryStatsMetrics", Kind::SafeBool),
        ]],
    ),
    strict("explain", &[&[("verbosity", Kind::Any)]]),
    strict(
        "mapReduce",
        &[&[
            ("map", Kind::Any),
            ("reduce", Kind::Any),
            ("out", Kind::Any),
            ("query", Kind::Document),
            ("sort", Kind::Document),
            ("collation", Kind::Document),
            ("limit", Kind::Number),
            ("finalize", Kind::Any),
            ("scope", Kind::Any),
            ("verbose", Kind::Bool),
            ("bypassDocumentValidation", Kind::Bool),
            ("jsMode", Kind::Bool),
        ]],
    ),
    strict(
        "createIndexes",
        &[&[
            ("indexes", Kind::Any),
            ("v", Kind::Number),
            ("ignoreUnknownIndexOptions", Kind::SafeBool),
            ("commitQuorum", Kind::Any),
            ("returnOnStart", Kind::SafeBool),
            ("isTimeseriesNamespace", Kind::SafeBool),
            ("collectionUUID", Kind::Any),
        ]],
    ),
    // The options create reads are typed where it reads them.
    strict(
        "create",
        &[&[
            ("capped", Kind::Any),
            ("size", Kind::Any),
            ("max", Kind::Any),
            ("idIndex", Kind::Any),
            ("storageEngine", Kind::Any),
            ("validator", Kind::Any),
            ("validationLevel", Kind::Any),
            ("validationAction", Kind::Any),
            ("indexOptionDefaults", Kind::Any),
            ("viewOn", Kind::Any),
            ("pipeline", Kind::Any),
            ("collation", Kind::Any),
            ("changeStreamPreAndPostImages", Kind::Any),
            ("timeseries", Kind::Any),
            ("clusteredIndex", Kind::Any),
            ("expireAfterSeconds", Kind::Any),
            // Refused as not supported where create reads it, once it is an object.
            ("encryptedFields", Kind::Document),
            // Read by nothing here: legacy, or internal to mongod.
            ("autoIndexId", Kind::SafeBool),
            ("flags", Kind::Number),
            ("recordIdsReplicated", Kind::SafeBool),
            ("temp", Kind::SafeBool),
        ]],
    ),
    // The options collMod reads are typed where it reads them; those it does not
    // change are refused by name there.
    strict(
        "collMod",
        &[&[
            ("index", Kind::Any),
            ("validator", Kind::Any),
            ("validationLevel", Kind::Any),
            ("validationAction", Kind::Any),
            ("viewOn", Kind::Any),
            ("pipeline", Kind::Any),
            ("changeStreamPreAndPostImages", Kind::Any),
            ("expireAfterSeconds", Kind::Any),
            ("timeseries", Kind::Any),
            ("dryRun", Kind::Any),
            ("cappedSize", Kind::Any),
            ("cappedMax", Kind::Any),
            ("collectionUUID", Kind::Any),
            ("encryptedFields", Kind::Any),
            ("recordIdsReplicated", Kind::Any),
            ("timeseriesBucketsMayHaveMixedSchemaData", Kind::Any),
            ("timeseriesBucketingParametersHaveChanged", Kind::Any),
        ]],
    ),
    strict("dropDatabase", &[]),
    requiring(
        strict(
            "validateDBMetadata",
            &[&[
                ("db", Kind::String),
                ("collection", Kind::String),
                ("apiParameters", Kind::Document),
            ]],
        ),
        &["apiParameters"],
    ),
    strict(
        "collStats",
        &[&[
            ("scale", Kind::Any),
            ("validationLevel", Kind::Any),
            ("verbose", Kind::SafeBool),
            ("waitForLock", Kind::SafeBool),
            ("numericOnly", Kind::SafeBool),
        ]],
    ),
    requiring(
        strict(
            "bulkWrite",
            &[&[
                ("ops", Kind::Array),
                ("nsInfo", Kind::Array),
                ("cursor", Kind::Cursor),
                ("bypassDocumentValidation", Kind::SafeBool),
                ("ordered", Kind::Bool),
                ("errorsOnly", Kind::Bool),
                ("let", Kind::Document),
                ("stmtId", Kind::Any),
                ("stmtIds", Kind::Any),
                ("bypassEmptyTsReplacement", Kind::SafeBool),
            ]],
        ),
        &["ops", "nsInfo"],
    ),
    strict("createSearchIndexes", &[&[("indexes", Kind::Array)]]),
    strict(
        "updateSearchIndex",
        &[SEARCH_INDEX_FIELDS, &[("definition", Kind::Document)]],
    ),
    strict("dropSearchIndex", &[SEARCH_INDEX_FIELDS]),
    strict(
        "commitTransaction",
        &[&[
            ("commitTimestamp", Kind::Any),
            ("recoveryToken", Kind::Document),
        ]],
    ),
    strict("abortTransaction", &[&[("recoveryToken", Kind::Document)]]),
    strict("endSessions", &[]),
    strict("refreshSessions", &[]),
    // mongod reads these by hand (or through a `strict: false` IDL struct).
    lenient(
        "hello",
        &[&[
            ("forShell", Kind::SafeBool),
            ("hostInfo", Kind::String),
            ("hangUpOnStepDown", Kind::SafeBool),
            ("internalClient", Kind::Document),
            ("client", Kind::Document),
            ("topologyVersion", Kind::Document),
            ("maxAwaitTimeMS", Kind::Number),
            ("helloOk", Kind::SafeBool),
            ("compression", Kind::Array),
            ("saslSupportedMechs", Kind::Any),
            ("speculativeAuthenticate", Kind::Document),
            ("loadBalanced", Kind::Bool),
        ]],
    ),
    lenient("setClusterParameter", &[]),
    lenient("getClusterParameter", &[]),
    lenient(
        "configureFailPoint",
        &[&[("mode", Kind::Any), ("data", Kind::Any)]],
    ),
    // Every other field names a parameter (setParameter refuses unknown names itself).
    lenient("getParameter", &[]),
    lenient("setParameter", &[]),
    lenient("connPoolStats", &[]),
    lenient("whatsmyuri", &[]),
    // Every other field is a filter on the operations.
    lenient("currentOp", &[]),
    lenient("killOp", &[&[("op", Kind::Any)]]),
    lenient("top", &[]),
    // Every other field turns a section on or off.
    lenient("serverStatus", &[]),
    lenient("listCommands", &[]),
    lenient("convertToCapped", &[&[("size", Kind::Any)]]),
    lenient(
        "cloneCollectionAsCapped",
        &[&[
            ("toCollection", Kind::Any),
            ("size", Kind::Any),
            ("temp", Kind::Any),
        ]],
    ),
    lenient("validate", &[]),
    lenient("dbHash", &[&[("collections", Kind::Any)]]),
    lenient("planCacheClear", &[]),
    lenient("planCacheSetFilter", &[]),
    lenient("planCacheListFilters", &[]),
    lenient("planCacheClearFilters", &[]),
    lenient("applyOps", &[]),
    lenient("startSession", &[]),
    lenient("killSessions", &[]),
    lenient("killAllSessions", &[]),
    lenient("refreshLogicalSessionCacheNow", &[]),
    lenient("fsync", &[]),
    lenient("fsyncUnlock", &[]),
    lenient("replSetInitiate", &[]),
    lenient(
        "replSetGetStatus",
        &[&[("initialSync", Kind::SafeBool), ("forShell", Kind::Any)]],
    ),
    lenient("replSetGetConfig", &[]),
    lenient("replSetReconfig", &[]),
    lenient("replSetStepDown", &[]),
    lenient("replSetFreeze", &[]),
    lenient("replSetMaintenance", &[]),
    // Basalt's own: a Raft message between replica set members.
    lenient("replSetRaft", &[]),
];

/// mongod's generic arguments whose names start with `$` beside those drivers send
/// (`request::GENERIC_COMMAND_FIELDS`): what its routers and members add. A name
/// starting with `$_` is an internal one. Any other `$` field is unknown.
const GENERIC_DOLLAR_FIELDS: &[&str] = &[
    "$audit",
    "$client",
    "$configServerState",
    "$configTime",
    "$topologyTime",
    "$gleStats",
    "$oplogQueryData",
    "$replData",
    "$queryOptions",
];

/// Checks `body`'s fields against what command `name` declares.
pub(crate) fn check(name: &str, body: &Document) -> Result<()> {
    // Every registered command is declared (the registry's tests hold it), and a name
    // that is not registered is CommandNotFound before this.
    let Some(declared) = DECLARED.iter().find(|d| d.command == name) else {
        return Ok(());
    };
    for (key, value) in body.iter().skip(1) {
        let mut fields = declared.fields.iter().flat_map(|group| group.iter());
        match fields.find(|(field, _)| field == key) {
            Some((_, kind)) => check_value(name, key, *kind, value)?,
            None if declared.unknown == Unknown::Ignored || is_generic(key) => {}
            None => return Err(unknown(&format!("{name}.{key}"))),
        }
    }
    match declared
        .required
        .iter()
        .find(|field| matches!(body.get(**field), None | Some(Bson::Null)))
    {
        Some(field) => Err(missing(name, field)),
        None => Ok(()),
    }
}

/// Whether `key` is a generic argument: one drivers send, one mongod's routers and
/// members add, or an internal `$_` one.
fn is_generic(key: &str) -> bool {
    GENERIC_COMMAND_FIELDS.contains(&key)
        || GENERIC_DOLLAR_FIELDS.contains(&key)
        || key.starts_with("$_")
}

/// The commands declared here (the registry's tests compare them with its own).
#[cfg(test)]
pub(crate) fn declared_commands() -> impl Iterator<Item = &'static str> {
    DECLARED.iter().map(|declared| declared.command)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn code(body: Document) -> Option<i32> {
        check(body.keys().next().unwrap(), &body)
            .err()
            .map(|e| e.code.0)
    }

    #[test]
    fn declared_commands_refuse_unknown_fields_and_wrong_types() {
        assert_eq!(
            code(doc! {"listIndexes": "c", "cursor": {"batchSize": 1}}),
            None
        );
        assert_eq!(
            code(doc! {"listIndexes": "c", "includeBuildUUIDs": 1}),
            None
        );
        assert_eq!(
            code(doc! {"listIndexes": "c", "includeBuildUUIDs": "x"}),
            Some(14)
        );
        assert_eq!(code(doc! {"listIndexes": "c", "filter": {}}), Some(40415));
        assert_eq!(
            code(doc! {"listIndexes": "c", "cursor": {"x": 1}}),
            Some(40415)
        );
        assert_eq!(
            code(doc! {"listDatabases": 1, "authorizedDatabases": 1}),
            Some(14)
        );
        assert_eq!(
            code(doc! {"listDatabases": 1, "nameOnly": 1, "comment": "x"}),
            None
        );
        assert_eq!(code(doc! {"listDatabases": 1, "filter": true}), Some(14));
        assert_eq!(
            code(doc! {"listCollections": 1, "$db": "x", "lsid": {}}),
            None
        );
        assert_eq!(code(doc! {"insert": "c", "documents": null}), None);
        assert_eq!(code(doc! {"insert": "c", "documents": 1}), Some(14));
        assert_eq!(code(doc! {"insert": "c", "stmtIds": [0]}), None);
        assert_eq!(code(doc! {"update": "c", "updates": [], "let": {}}), None);
        assert_eq!(code(doc! {"delete": "c", "ordered": null}), None);
        assert_eq!(code(doc! {"delete": "c", "ordered": 0}), Some(14));
        assert_eq!(code(doc! {"findAndModify": "c", "hint": {"a": 1}}), None);
        assert_eq!(code(doc! {"findAndModify": "c", "hint": [1]}), Some(9));
        assert_eq!(code(doc! {"findAndModify": "c", "hint": null}), Some(9));
        let aggregate = |field: &str, value: Bson| {
            let mut body = doc! {"aggregate": "c", "pipeline": [], "cursor": {}};
            body.insert(field, value);
            code(body)
        };
        assert_eq!(aggregate("explain", Bson::Boolean(true)), None);
        assert_eq!(aggregate("explain", Bson::Null), Some(14));
        assert_eq!(aggregate("explain", Bson::Int32(1)), Some(14));
        assert_eq!(aggregate("allowDiskUse", Bson::Int32(0)), Some(14));
        assert_eq!(
            aggregate("cursor", doc! {"BatchSize": 1}.into()),
            Some(40415)
        );
        assert_eq!(aggregate("$readPreference", doc! {}.into()), None);
        assert_eq!(aggregate("$_internalX", Bson::Int32(1)), None);
        assert_eq!(aggregate("$bogus", Bson::Int32(1)), Some(40415));
        // An IDL command with no fields of its own refuses any.
        assert_eq!(code(doc! {"ping": 1, "anything": 1}), Some(40415));
        assert_eq!(code(doc! {"ping": 1, "comment": {}}), None);
        // A command mongod reads by hand ignores what it does not know, and still types
        // what it declares.
        assert_eq!(code(doc! {"serverStatus": 1, "repl": 0}), None);
        assert_eq!(code(doc! {"hello": 1, "anything": 1}), None);
        assert_eq!(code(doc! {"hello": 1, "loadBalanced": 1}), Some(14));
        assert_eq!(code(doc! {"hello": 1, "compression": "zstd"}), Some(14));
        assert_eq!(code(doc! {"mapReduce": "c", "verbose": 1}), Some(14));
        assert_eq!(code(doc! {"mapReduce": "c", "limit": 1.5}), None);
        assert_eq!(code(doc! {"mapReduce": "c", "limit": "1"}), Some(14));
        assert_eq!(
            code(doc! {"bulkWrite": 1, "ops": [], "nsInfo": null}),
            Some(40414)
        );
        assert_eq!(code(doc! {"bulkWrite": 1, "ops": [], "nsInfo": []}), None);
    }
}
