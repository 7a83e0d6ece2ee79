//! Reading command fields with MongoDB's checks and error messages.
//!
//! Commands are BSON documents whose fields drivers fill in many numeric types; these
//! helpers accept what mongod accepts (any number where a number is expected) and name
//! the command and field in errors the way mongod's IDL parser does.

use basalt_error::{Error, ErrorCode, Result};
use basalt_value::as_f64 as number;
use basalt_value::Collation;
use bson::{Bson, Document};

/// Fields any command may carry besides its own: sessions, read preference, API
/// versioning, write concern, comments, transactions.
pub const GENERIC_COMMAND_FIELDS: &[&str] = &[
    "lsid",
    "$db",
    "$readPreference",
    "$clusterTime",
    "apiVersion",
    "apiStrict",
    "apiDeprecationErrors",
    "writeConcern",
    "readConcern",
    "comment",
    "txnNumber",
    "autocommit",
    "startTransaction",
    "maxTimeMS",
];

pub use basalt_value::display::type_name;

pub use basalt_value::number::coerced_integer;

/// Whether an option is asked for: given, and not `false` or null (how drivers send an
/// option left off).
pub fn is_requested(value: &Bson) -> bool {
    !matches!(value, Bson::Boolean(false) | Bson::Null)
}

fn wrong_type(command: &str, field: &str, value: &Bson, expected: &str) -> Error {
    Error::type_mismatch(format!(
        "BSON field '{command}.{field}' is the wrong type '{}', expected type{expected}",
        type_name(value)
    ))
}

/// A command's view of its own body.
pub struct Fields<'a> {
    pub command: &'a str,
    pub body: &'a Document,
}

impl<'a> Fields<'a> {
    pub fn new(body: &'a Document) -> Fields<'a> {
        let command = body.keys().next().map(String::as_str).unwrap_or("");
        Fields { command, body }
    }

    /// The collection named by the command's first field.
    pub fn collection(&self) -> Result<&'a str> {
        match self.body.get(self.command) {
            Some(Bson::String(name)) if !name.is_empty() => Ok(name),
            Some(Bson::String(_)) => Err(Error::new(
                ErrorCode::INVALID_NAMESPACE,
                "Invalid namespace specified",
            )),
            Some(other) => Err(Error::new(
                ErrorCode::INVALID_NAMESPACE,
                format!("collection name has invalid type {}", type_name(other)),
            )),
            None => Err(Error::failed_to_parse("missing collection name")),
        }
    }

    pub fn bool_or(&self, field: &str, default: bool) -> Result<bool> {
        match self.body.get(field) {
            None | Some(Bson::Null) => Ok(default),
            Some(Bson::Boolean(b)) => Ok(*b),
            Some(v @ (Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_))) => {
                Ok(number(v) != Some(0.0))
            }
            Some(other) => Err(wrong_type(self.command, field, other, " 'bool'")),
        }
    }

    /// A boolean field that takes nothing else, not even null (`aggregate`'s
    /// `allowDiskUse`, as mongod 8.0).
    pub fn strict_bool_or(&self, field: &str, default: bool) -> Result<bool> {
        match self.body.get(field) {
            None => Ok(default),
            Some(Bson::Boolean(b)) => Ok(*b),
            Some(other) => Err(wrong_type(self.command, field, other, " 'bool'")),
        }
    }

    /// An integral number field (any numeric type, as mongod accepts).
    pub fn i64_opt(&self, field: &str) -> Result<Option<i64>> {
        match self.body.get(field) {
            None | Some(Bson::Null) => Ok(None),
            Some(v @ (Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_))) => {
                let n = number(v).unwrap_or(0.0);
                if n.fract() != 0.0 || !n.is_finite() {
                    return Err(Error::bad_value(format!(
                        "Field '{field}' has a non-integral value: {n}"
                    )));
                }
                Ok(Some(n as i64))
            }
            Some(other) => Err(wrong_type(
                self.command,
                field,
                other,
                "s '[long, int, decimal, double]'",
            )),
        }
    }

    pub fn non_negative_opt(&self, field: &str) -> Result<Option<i64>> {
        match self.i64_opt(field)? {
            Some(n) if n < 0 => Err(Error::bad_value(format!(
                "BSON field '{field}' value must be >= 0, actual value '{n}'"
            ))),
            other => Ok(other),
        }
    }

    pub fn document_opt(&self, field: &str) -> Result<Option<&'a Document>> {
        match self.body.get(field) {
            None | Some(Bson::Null) => Ok(None),
            Some(Bson::Document(d)) => Ok(Some(d)),
            Some(other) => Err(wrong_type(self.command, field, other, " 'object'")),
        }
    }

    pub fn array_opt(&self, field: &str) -> Result<Option<&'a Vec<Bson>>> {
        match self.body.get(field) {
            None => Ok(None),
            Some(Bson::Array(a)) => Ok(Some(a)),
            Some(other) => Err(wrong_type(self.command, field, other, " 'array'")),
        }
    }

    /// A required field's value: `value` (as a `*_opt` read it), or 40414 for a field
    /// that is missing.
    pub fn required<T>(&self, field: &str, value: Option<T>) -> Result<T> {
        value.ok_or_else(|| {
            Error::location(
                40414,
                format!(
                    "BSON field '{}.{field}' is missing but a required field",
                    self.command
                ),
            )
        })
    }

    /// An array field whose every element must be a document.
    pub fn documents(&self, field: &str) -> Result<Vec<&'a Document>> {
        let items = self.required(field, self.array_opt(field)?)?;
        items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                Bson::Document(d) => Ok(d),
                other => Err(wrong_type(
                    self.command,
                    &format!("{field}.{i}"),
                    other,
                    " 'object'",
                )),
            })
            .collect()
    }

    /// The command's `collation`; `None` for the simple (binary) one.
    pub fn collation(&self) -> Result<Option<Collation>> {
        Ok(self
            .document_opt("collation")?
            .map(Collation::parse)
            .transpose()?
            .flatten())
    }

    /// `cursor.batchSize` of commands that return a cursor (aggregate, listCollections).
    pub fn cursor_batch_size(&self) -> Result<Option<usize>> {
        match self.document_opt("cursor")? {
            Some(cursor) => basalt_value::idl::batch_size(self.command, cursor.get("batchSize")),
            None => Ok(None),
        }
    }

    /// A batch size given as the command's own field (`getMore`'s `batchSize`).
    pub fn batch_size_opt(&self, field: &str) -> Result<Option<usize>> {
        basalt_value::idl::batch_size(self.command, self.body.get(field))
    }

    pub fn string_opt(&self, field: &str) -> Result<Option<&'a str>> {
        match self.body.get(field) {
            None | Some(Bson::Null) => Ok(None),
            Some(Bson::String(s)) => Ok(Some(s)),
            Some(other) => Err(wrong_type(self.command, field, other, " 'string'")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn numbers_of_any_type_and_wrong_types() {
        let body = doc! { "find": "c", "limit": 5.0, "skip": "x", "single": 1 };
        let f = Fields::new(&body);
        assert_eq!(f.collection().unwrap(), "c");
        assert_eq!(f.i64_opt("limit").unwrap(), Some(5));
        let err = f.i64_opt("skip").unwrap_err();
        assert_eq!(err.code, ErrorCode::TYPE_MISMATCH);
        assert!(err
            .message
            .contains("'find.skip' is the wrong type 'string'"));
        assert!(f.bool_or("single", false).unwrap());
    }
}
