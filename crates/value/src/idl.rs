//! mongod's IDL types as its parsers check them: how a field is typed, the fields a
//! struct may and must have, and the errors a parser gives (TypeMismatch for a wrong
//! type, 40415 for an unknown field, 40414 for a missing one). The server declares every
//! command's arguments with these (its `commands/arguments.rs`); the sub-documents and
//! stage specs mongod parses as strict structs are checked by [`check_struct`].

use crate::display::type_name;
use crate::number::coerced_integer;
use basalt_error::{Error, ErrorCode, Result};
use bson::spec::BinarySubtype;
use bson::{Bson, Document};

/// How mongod's IDL types a field. Null is as if the field were not given, except
/// where a kind says otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `bool`: true or false, nothing else.
    Bool,
    /// true or false, not even null (`aggregate`'s `explain` and `allowDiskUse`).
    StrictBool,
    /// `safeBool` / `optionalBool`: a boolean or a number (non-zero is true).
    SafeBool,
    /// An object.
    Document,
    /// A cursor's options: an object whose only field is `batchSize`, a number.
    Cursor,
    /// An array; its elements are the command's to check.
    Array,
    /// A string.
    String,
    /// `safeInt` / `safeInt64`: any number.
    Number,
    /// `long`: a 64-bit integer, no other number.
    Long,
    /// `uuid`: a binary of subtype 4, 16 bytes long (InvalidUUID otherwise).
    Uuid,
    /// `indexHint`: an index's name or its key pattern. mongod parses it itself: anything
    /// else, null too, is FailedToParse.
    Hint,
    /// Any value, null included: the command checks it where it reads it.
    Any,
}

/// A field's name and type.
pub type Field = (&'static str, Kind);

/// Checks a sub-document mongod parses as a strict struct: `path` names it in errors
/// (`bulkWrite.ops.update`), `fields` are all it may have, `required` those it must
/// have (null is missing, except for an `Any` field, whose reader types null).
pub fn check_struct(
    path: &str,
    document: &Document,
    fields: &[Field],
    required: &[&str],
) -> Result<()> {
    for (key, value) in document {
        match fields.iter().find(|(field, _)| field == key) {
            Some((_, kind)) => check_value(path, key, *kind, value)?,
            None => return Err(unknown(&format!("{path}.{key}"))),
        }
    }
    for name in required {
        let typed_by_reader = fields.contains(&(name, Kind::Any));
        match document.get(*name) {
            Some(Bson::Null) if !typed_by_reader => return Err(missing(path, name)),
            None => return Err(missing(path, name)),
            Some(_) => {}
        }
    }
    Ok(())
}

/// Checks the `value` of field `key` of `path` against its `kind`.
pub fn check_value(path: &str, key: &str, kind: Kind, value: &Bson) -> Result<()> {
    let number = matches!(
        value,
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_)
    );
    let (fits, expected) = match kind {
        Kind::Any => return Ok(()),
        Kind::Cursor => return check_cursor(path, key, value),
        Kind::StrictBool => (matches!(value, Bson::Boolean(_)), "type 'bool'"),
        Kind::Hint => {
            return match value {
                Bson::String(_) | Bson::Document(_) => Ok(()),
                _ => Err(Error::failed_to_parse(format!(
                    "BSON field '{path}.{key}' is the wrong type '{}', expected types '[string, \
                     object]'",
                    type_name(value)
                ))),
            }
        }
        _ if *value == Bson::Null => return Ok(()),
        Kind::Bool => (matches!(value, Bson::Boolean(_)), "type 'bool'"),
        Kind::SafeBool => (number || matches!(value, Bson::Boolean(_)), "type 'bool'"),
        Kind::Document => (matches!(value, Bson::Document(_)), "type 'object'"),
        Kind::Array => (matches!(value, Bson::Array(_)), "type 'array'"),
        Kind::String => (matches!(value, Bson::String(_)), "type 'string'"),
        Kind::Number => (number, "types '[long, int, decimal, double]'"),
        Kind::Long => (matches!(value, Bson::Int64(_)), "type 'long'"),
        Kind::Uuid => match value {
            Bson::Binary(uuid) if uuid.subtype == BinarySubtype::Uuid && uuid.bytes.len() != 16 => {
                return Err(Error::new(
                    ErrorCode::INVALID_UUID,
                    format!(
                        "BSON field '{path}.{key}' is not a UUID: it has {} bytes, not 16",
                        uuid.bytes.len()
                    ),
                ))
            }
            _ => (
                matches!(value, Bson::Binary(uuid) if uuid.subtype == BinarySubtype::Uuid),
                "type 'binData' of subtype UUID (4)",
            ),
        },
    };
    if fits {
        return Ok(());
    }
    Err(wrong_type(path, key, value, expected))
}

fn wrong_type(path: &str, key: &str, value: &Bson, expected: &str) -> Error {
    Error::type_mismatch(format!(
        "BSON field '{path}.{key}' is the wrong type '{}', expected {expected}",
        type_name(value)
    ))
}

/// A command's `cursor`: an object (or null) whose only field is a valid `batchSize`.
fn check_cursor(path: &str, key: &str, value: &Bson) -> Result<()> {
    let cursor = match value {
        Bson::Null => return Ok(()),
        Bson::Document(cursor) => cursor,
        other => return Err(wrong_type(path, key, other, "type 'object'")),
    };
    batch_size(path, cursor.get("batchSize"))?;
    match cursor.keys().find(|field| *field != "batchSize") {
        Some(field) => Err(unknown(&format!("{path}.{key}.{field}"))),
        None => Ok(()),
    }
}

/// A batch size of `command` as mongod reads it, a safe int64 ([`coerced_integer`]: a
/// double's fraction cut, a decimal rounded half to even, NaN 0, infinities saturated)
/// that must then be non-negative.
pub fn batch_size(command: &str, value: Option<&Bson>) -> Result<Option<usize>> {
    let n = match value {
        None | Some(Bson::Null) => return Ok(None),
        Some(v) => coerced_integer(v)
            .ok_or_else(|| wrong_type(command, "batchSize", v, "type 'number'"))?,
    };
    if n < 0 {
        return Err(Error::bad_value(format!(
            "BSON field 'batchSize' value must be >= 0, actual value '{n}'"
        )));
    }
    Ok(Some(usize::try_from(n).unwrap_or(usize::MAX)))
}

/// 40415: a field mongod's parser does not know at `path`.
pub fn unknown(path: &str) -> Error {
    Error::location(40415, format!("BSON field '{path}' is an unknown field."))
}

/// 40414: `path` has no `field`, which it must have.
pub fn missing(path: &str, field: &str) -> Error {
    Error::location(
        40414,
        format!("BSON field '{path}.{field}' is missing but a required field"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn structs_refuse_unknown_fields_and_need_their_required_ones() {
        const FIELDS: &[Field] = &[("name", Kind::String), ("mods", Kind::Any)];
        let check = |document: Document| {
            check_struct("cmd.op", &document, FIELDS, &["name", "mods"])
                .err()
                .map(|e| (e.code.0, e.message))
        };
        assert_eq!(check(doc! {"name": "a", "mods": null}), None);
        assert_eq!(
            check(doc! {"name": "a", "mods": {}, "x": 1}),
            Some((40415, "BSON field 'cmd.op.x' is an unknown field.".into()))
        );
        assert_eq!(
            check(doc! {"name": null, "mods": {}}),
            Some((
                40414,
                "BSON field 'cmd.op.name' is missing but a required field".into()
            ))
        );
        assert_eq!(check(doc! {"name": "a"}).map(|(code, _)| code), Some(40414));
        assert_eq!(
            check(doc! {"name": 1, "mods": {}}),
            Some((
                14,
                "BSON field 'cmd.op.name' is the wrong type 'int', expected type 'string'".into()
            ))
        );
    }

    #[test]
    fn kinds_take_what_mongod_takes() {
        let code = |kind: Kind, value: Bson| {
            check_value("cmd", "f", kind, &value)
                .err()
                .map(|e| e.code.0)
        };
        let uuid = |len: usize, subtype| {
            Bson::Binary(bson::Binary {
                subtype,
                bytes: vec![0; len],
            })
        };
        assert_eq!(code(Kind::Uuid, uuid(16, BinarySubtype::Uuid)), None);
        assert_eq!(code(Kind::Uuid, uuid(8, BinarySubtype::Uuid)), Some(207));
        assert_eq!(code(Kind::Uuid, uuid(16, BinarySubtype::UuidOld)), Some(14));
        assert_eq!(code(Kind::Long, Bson::Int64(1)), None);
        assert_eq!(code(Kind::Long, Bson::Int32(1)), Some(14));
        assert_eq!(code(Kind::SafeBool, Bson::Double(0.5)), None);
        assert_eq!(code(Kind::SafeBool, Bson::String("x".into())), Some(14));
        assert_eq!(code(Kind::Bool, Bson::Int32(1)), Some(14));
        assert_eq!(code(Kind::Bool, Bson::Null), None);
        assert_eq!(code(Kind::StrictBool, Bson::Null), Some(14));

        assert_eq!(
            code(Kind::Number, Bson::Decimal128("1.5".parse().unwrap())),
            None
        );
        assert_eq!(code(Kind::Cursor, doc! {"batchSize": 2.5}.into()), None);
        assert_eq!(code(Kind::Cursor, doc! {"batchSize": -1}.into()), Some(2));
        assert_eq!(code(Kind::Cursor, doc! {"batchSize": "1"}.into()), Some(14));
        assert_eq!(code(Kind::Cursor, doc! {"batch": 1}.into()), Some(40415));
        assert_eq!(code(Kind::Cursor, Bson::Int32(1)), Some(14));
        let not_an_object = check_value("cmd", "cursor", Kind::Cursor, &Bson::from("x"));
        assert!(not_an_object
            .unwrap_err()
            .message
            .ends_with("expected type 'object'"));
        assert_eq!(code(Kind::Any, Bson::Null), None);
        assert_eq!(code(Kind::Hint, Bson::String("a_1".into())), None);
        assert_eq!(code(Kind::Hint, Bson::Null), Some(9));
        assert_eq!(code(Kind::Hint, Bson::Int32(1)), Some(9));
    }
}
