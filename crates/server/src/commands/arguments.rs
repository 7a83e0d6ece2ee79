//! The arguments commands take, declared as mongod's IDL declares them, and checked in
//! one place before a command runs: a field the command does not know is refused
//! (40415, as mongod's parser refuses it), and a known field of the wrong type is a
//! TypeMismatch, whether or not the command reads the field (mongod parses every field
//! before it acts). The generic arguments (`lsid`, `comment`, read and write concerns,
//! ...) are every command's (`request::GENERIC_COMMAND_FIELDS`, and
//! `generic_arguments.rs` for their contents).
//!
//! A command declared here needs no field checks of its own; the others still check
//! theirs where they read them (`refuse_unknown_fields` and the typed readers of
//! `request::Fields`), and move here as they are touched.

use crate::request::{Fields, GENERIC_COMMAND_FIELDS};
use basalt_error::{Error, Result};
use bson::{Bson, Document};

/// How mongod's IDL types a field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// `bool`: true or false (or null, which is absent), nothing else.
    Bool,
    /// `safeBool` / `optionalBool`: a boolean, a number (non-zero is true) or null.
    SafeBool,
    /// An object (or null).
    Document,
    /// A cursor's options: an object whose only field is `batchSize`, a number.
    Cursor,
}

/// The arguments of one command: its first field's (the namespace) and these.
struct Declared {
    command: &'static str,
    fields: &'static [(&'static str, Kind)],
}

const DECLARED: &[Declared] = &[
    Declared {
        command: "listIndexes",
        fields: &[
            ("cursor", Kind::Cursor),
            ("includeBuildUUIDs", Kind::SafeBool),
            ("includeIndexBuildInfo", Kind::SafeBool),
            ("rawData", Kind::SafeBool),
        ],
    },
    Declared {
        command: "listDatabases",
        fields: &[
            ("filter", Kind::Document),
            ("nameOnly", Kind::SafeBool),
            ("authorizedDatabases", Kind::Bool),
        ],
    },
    Declared {
        command: "listCollections",
        fields: &[
            ("filter", Kind::Document),
            ("cursor", Kind::Cursor),
            ("nameOnly", Kind::SafeBool),
            ("authorizedCollections", Kind::Bool),
            ("includePendingDrops", Kind::SafeBool),
            ("rawData", Kind::SafeBool),
        ],
    },
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
            .find(|(field, _)| field == key)
            .map(|(_, kind)| *kind);
        match kind {
            Some(Kind::Bool) if !matches!(value, Bson::Boolean(_) | Bson::Null) => {
                return Err(Error::type_mismatch(format!(
                    "BSON field '{name}.{key}' is the wrong type '{}', expected type 'bool'",
                    crate::request::type_name(value)
                )))
            }
            Some(Kind::Bool) => {}
            Some(Kind::SafeBool) => fields.bool_or(key, false).map(drop)?,
            Some(Kind::Document) => fields.document_opt(key).map(drop)?,
            Some(Kind::Cursor) => check_cursor(name, &fields, value)?,
            None if GENERIC_COMMAND_FIELDS.contains(&key.as_str()) || key.starts_with('$') => {}
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
        // A command not declared here is its own to check.
        assert_eq!(code(doc! {"ping": 1, "anything": 1}), None);
    }
}
