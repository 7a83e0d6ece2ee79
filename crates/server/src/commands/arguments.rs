//! The arguments commands take, declared as mongod's IDL declares them, and checked in
//! one place before a command runs: a field the command does not know is refused
//! (40415, as mongod's parser refuses it), and a known field of the wrong type is a
//! TypeMismatch, whether or not the command reads the field (mongod parses every field
//! before it acts). The generic arguments (`lsid`, `comment`, read and write concerns,
//! ...) are every command's (`request::GENERIC_COMMAND_FIELDS`, and
//! `generic_arguments.rs` for their contents); a `$` field that is not one of them is
//! unknown too.
//!
//! A field declared `Any` is typed by the command where it reads it (its own errors
//! differ from a plain TypeMismatch). A command not declared here still checks its
//! fields where it reads them (`create`, `collMod`, `fsync`, `bulkWrite`'s own
//! field specs, ...), and moves here as it is touched.

use crate::request::{Fields, GENERIC_COMMAND_FIELDS};
use basalt_error::{Error, Result};
use bson::{Bson, Document};

/// How mongod's IDL types a field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// `bool`: true or false (or null, which is absent), nothing else.
    Bool,
    /// true or false, not even null (`aggregate`'s `explain` and `allowDiskUse`).
    StrictBool,
    /// `safeBool` / `optionalBool`: a boolean, a number (non-zero is true) or null.
    SafeBool,
    /// An object (or null).
    Document,
    /// A cursor's options: an object whose only field is `batchSize`, a number.
    Cursor,
    /// An array (or null); its elements are the command's to check.
    Array,
    /// `indexHint`: an index's name or its key pattern (or null).
    Hint,
    /// Any value: the command checks it where it reads it.
    Any,
}

/// A field's name and type.
type Field = (&'static str, Kind);

/// The arguments of one command: its first field's (the namespace) and these groups'.
struct Declared {
    command: &'static str,
    fields: &'static [&'static [Field]],
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

const DECLARED: &[Declared] = &[
    Declared {
        command: "listIndexes",
        fields: &[&[
            ("cursor", Kind::Cursor),
            ("includeBuildUUIDs", Kind::SafeBool),
            ("includeIndexBuildInfo", Kind::SafeBool),
            ("rawData", Kind::SafeBool),
        ]],
    },
    Declared {
        command: "listDatabases",
        fields: &[&[
            ("filter", Kind::Document),
            ("nameOnly", Kind::SafeBool),
            ("authorizedDatabases", Kind::Bool),
        ]],
    },
    Declared {
        command: "listCollections",
        fields: &[&[
            ("filter", Kind::Document),
            ("cursor", Kind::Cursor),
            ("nameOnly", Kind::SafeBool),
            ("authorizedCollections", Kind::Bool),
            ("includePendingDrops", Kind::SafeBool),
            ("rawData", Kind::SafeBool),
        ]],
    },
    Declared {
        command: "find",
        // Read (or accepted, as mongod does, for those that mean nothing here: no
        // shards, replicas or query statistics) and typed by find itself.
        fields: &[&[
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
    },
    Declared {
        command: "aggregate",
        fields: &[&[
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
    },
    Declared {
        command: "insert",
        fields: &[
            &[
                ("documents", Kind::Array),
                ("includeQueryStatsMetrics", Kind::SafeBool),
            ],
            WRITE_COMMAND_FIELDS,
        ],
    },
    Declared {
        command: "update",
        fields: &[
            &[("updates", Kind::Array)],
            WRITE_COMMAND_FIELDS,
            LET_FIELDS,
        ],
    },
    Declared {
        command: "delete",
        fields: &[
            &[("deletes", Kind::Array)],
            WRITE_COMMAND_FIELDS,
            LET_FIELDS,
        ],
    },
    Declared {
        command: "findAndModify",
        fields: &[
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
    },
    Declared {
        command: "count",
        fields: &[&[
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
    },
    Declared {
        command: "drop",
        fields: &[&[("collectionUUID", Kind::Any)]],
    },
    Declared {
        command: "dropIndexes",
        fields: &[&[
            ("index", Kind::Any),
            ("collectionUUID", Kind::Any),
            ("isTimeseriesNamespace", Kind::SafeBool),
        ]],
    },
    Declared {
        command: "killCursors",
        fields: &[&[("cursors", Kind::Any)]],
    },
    Declared {
        command: "connectionStatus",
        fields: &[&[("showPrivileges", Kind::SafeBool)]],
    },
    Declared {
        command: "dbStats",
        fields: &[&[("scale", Kind::Any), ("freeStorage", Kind::SafeBool)]],
    },
    Declared {
        command: "distinct",
        fields: &[&[
            ("key", Kind::Any),
            ("query", Kind::Any),
            ("collation", Kind::Any),
            ("hint", Kind::Any),
        ]],
    },
    Declared {
        command: "renameCollection",
        fields: &[&[
            ("to", Kind::Any),
            ("dropTarget", Kind::Any),
            ("stayTemp", Kind::Any),
            ("collectionUUID", Kind::Any),
        ]],
    },
    Declared {
        command: "setFeatureCompatibilityVersion",
        fields: &[&[("confirm", Kind::Any), ("fromConfigServer", Kind::Any)]],
    },
    Declared {
        command: "profile",
        fields: &[&[
            ("slowms", Kind::Any),
            ("sampleRate", Kind::Any),
            ("filter", Kind::Any),
        ]],
    },
    Declared {
        command: "setQuerySettings",
        fields: &[&[("settings", Kind::Any)]],
    },
    Declared {
        command: "removeQuerySettings",
        fields: &[],
    },
    Declared {
        command: "lockInfo",
        fields: &[&[("includeStorageEngineDump", Kind::Any)]],
    },
    Declared {
        command: "logRotate",
        fields: &[],
    },
    Declared {
        command: "compact",
        fields: &[&[
            ("dryRun", Kind::Any),
            ("force", Kind::Any),
            ("freeSpaceTargetMB", Kind::Any),
        ]],
    },
    Declared {
        command: "autoCompact",
        fields: &[&[("runOnce", Kind::Any), ("freeSpaceTargetMB", Kind::Any)]],
    },
    Declared {
        command: "dataSize",
        fields: &[&[
            ("keyPattern", Kind::Any),
            ("min", Kind::Any),
            ("max", Kind::Any),
            ("estimate", Kind::Any),
        ]],
    },
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

/// Checks `body`'s fields against what command `name` declares; a command not declared
/// here passes.
pub(crate) fn check(name: &str, body: &Document) -> Result<()> {
    let Some(declared) = DECLARED.iter().find(|d| d.command == name) else {
        return Ok(());
    };
    let fields = Fields::new(body);
    for (key, value) in body.iter().skip(1) {
        let kind = declared
            .fields
            .iter()
            .flat_map(|group| group.iter())
            .find(|(field, _)| field == key)
            .map(|(_, kind)| *kind);
        let wrong_type = |expected: &str| {
            Err(Error::type_mismatch(format!(
                "BSON field '{name}.{key}' is the wrong type '{}', expected {expected}",
                crate::request::type_name(value)
            )))
        };
        match kind {
            Some(Kind::Bool) if !matches!(value, Bson::Boolean(_) | Bson::Null) => {
                return wrong_type("type 'bool'")
            }
            Some(Kind::Hint)
                if !matches!(value, Bson::String(_) | Bson::Document(_) | Bson::Null) =>
            {
                return wrong_type("types '[string, object]'")
            }
            Some(Kind::SafeBool) => fields.bool_or(key, false).map(drop)?,
            Some(Kind::StrictBool) => fields.strict_bool_or(key, false).map(drop)?,
            Some(Kind::Document) => fields.document_opt(key).map(drop)?,
            Some(Kind::Cursor) => check_cursor(name, &fields, value)?,
            Some(Kind::Array) if *value != Bson::Null => fields.array_opt(key).map(drop)?,
            Some(Kind::Bool | Kind::Hint | Kind::Array | Kind::Any) => {}
            None if GENERIC_COMMAND_FIELDS.contains(&key.as_str())
                || GENERIC_DOLLAR_FIELDS.contains(&key.as_str())
                || key.starts_with("$_") => {}
            None => return Err(unknown(&format!("{name}.{key}"))),
        }
    }
    Ok(())
}

fn check_cursor(name: &str, fields: &Fields<'_>, value: &Bson) -> Result<()> {
    fields.cursor_batch_size()?;
    if let Bson::Document(cursor) = value {
        if let Some(key) = cursor.keys().find(|key| *key != "batchSize") {
            return Err(unknown(&format!("{name}.cursor.{key}")));
        }
    }
    Ok(())
}

fn unknown(path: &str) -> Error {
    Error::location(40415, format!("BSON field '{path}' is an unknown field."))
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
        assert_eq!(code(doc! {"findAndModify": "c", "hint": [1]}), Some(14));
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
        // A command not declared here is its own to check.
        assert_eq!(code(doc! {"ping": 1, "anything": 1}), None);
    }
}
