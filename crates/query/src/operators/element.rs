//! `$exists` and `$type`: conditions on whether a value is there and what type it has.

use super::{Predicate, ValueMatch};
use basalt_error::{Error, ErrorCode, Result};
use basalt_value::{as_f64, is_number};
use bson::Bson;

/// `$exists: <truthy>` holds when the path reaches a value; a falsy operand negates it.
pub(super) fn parse_exists(operand: &Bson) -> ValueMatch {
    let exists = ValueMatch::Leaf(Predicate::Exists);
    if is_truthy(operand) {
        exists
    } else {
        ValueMatch::Not(Box::new(exists))
    }
}

/// MongoDB's truthiness of an operand: false, zero, null and undefined are false.
pub(crate) fn is_truthy(v: &Bson) -> bool {
    match v {
        Bson::Boolean(b) => *b,
        Bson::Null | Bson::Undefined => false,
        _ => as_f64(v).is_none_or(|n| n != 0.0),
    }
}

/// The BSON type code of a value, as `$type` numbers types.
pub(crate) fn type_code(v: &Bson) -> i32 {
    match v {
        Bson::Double(_) => 1,
        Bson::String(_) => 2,
        Bson::Document(_) => 3,
        Bson::Array(_) => 4,
        Bson::Binary(_) => 5,
        Bson::Undefined => 6,
        Bson::ObjectId(_) => 7,
        Bson::Boolean(_) => 8,
        Bson::DateTime(_) => 9,
        Bson::Null => 10,
        Bson::RegularExpression(_) => 11,
        Bson::DbPointer(_) => 12,
        Bson::JavaScriptCode(_) => 13,
        Bson::Symbol(_) => 14,
        Bson::JavaScriptCodeWithScope(_) => 15,
        Bson::Int32(_) => 16,
        Bson::Timestamp(_) => 17,
        Bson::Int64(_) => 18,
        Bson::Decimal128(_) => 19,
        Bson::MinKey => -1,
        Bson::MaxKey => 127,
    }
}

/// The type code for one of MongoDB's type aliases ("number" is handled apart).
fn alias_code(alias: &str) -> Option<i32> {
    Some(match alias {
        "double" => 1,
        "string" => 2,
        "object" => 3,
        "array" => 4,
        "binData" => 5,
        "undefined" => 6,
        "objectId" => 7,
        "bool" => 8,
        "date" => 9,
        "null" => 10,
        "regex" => 11,
        "dbPointer" => 12,
        "javascript" => 13,
        "symbol" => 14,
        "javascriptWithScope" => 15,
        "int" => 16,
        "timestamp" => 17,
        "long" => 18,
        "decimal" => 19,
        "minKey" => -1,
        "maxKey" => 127,
        _ => return None,
    })
}

/// A set of BSON types, as `$type` takes them.
#[derive(Clone, Debug, Default)]
pub(crate) struct TypeSet {
    codes: Vec<i32>,
    all_numbers: bool,
}

impl TypeSet {
    /// Parses a type alias, a type code, or an array of them.
    pub(crate) fn parse(operand: &Bson) -> Result<TypeSet> {
        let mut set = TypeSet::default();
        match operand {
            Bson::Array(items) => {
                for item in items {
                    set.add(item)?;
                }
            }
            single => set.add(single)?,
        }
        Ok(set)
    }

    fn add(&mut self, v: &Bson) -> Result<()> {
        match v {
            Bson::String(alias) if alias == "number" => self.all_numbers = true,
            Bson::String(alias) => match alias_code(alias) {
                Some(code) => self.codes.push(code),
                None => {
                    return Err(Error::bad_value(format!(
                        "Unknown type name alias: {alias}"
                    )))
                }
            },
            _ if is_number(v) => {
                let n = as_f64(v).unwrap_or(f64::NAN);
                let valid =
                    (n == -1.0 || n == 127.0 || (1.0..=19.0).contains(&n)) && n.fract() == 0.0;
                if !valid {
                    return Err(Error::bad_value(format!(
                        "Invalid numerical type code: {n}"
                    )));
                }
                self.codes.push(n as i32);
            }
            _ => {
                return Err(Error::new(
                    ErrorCode::TYPE_MISMATCH,
                    "type must be represented as a number or a string",
                ))
            }
        }
        Ok(())
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.codes.is_empty() && !self.all_numbers
    }

    pub(crate) fn matches(&self, v: &Bson) -> bool {
        (self.all_numbers && is_number(v)) || self.codes.contains(&type_code(v))
    }
}

pub(super) fn parse_type(path: &str, operand: &Bson) -> Result<ValueMatch> {
    let set = TypeSet::parse(operand)?;
    if set.is_empty() {
        return Err(Error::failed_to_parse(format!(
            "{path} must match at least one type"
        )));
    }
    Ok(ValueMatch::Leaf(Predicate::Type(set)))
}

#[cfg(test)]
mod tests {
    use crate::Matcher;
    use basalt_error::ErrorCode;
    use bson::{doc, Bson};

    fn matches(filter: bson::Document, doc: bson::Document) -> bool {
        Matcher::new(&filter).unwrap().matches(&doc)
    }

    #[test]
    fn exists() {
        assert!(matches(doc! {"a": {"$exists": true}}, doc! {"a": null}));
        assert!(!matches(doc! {"a": {"$exists": true}}, doc! {}));
        assert!(matches(doc! {"a": {"$exists": 0}}, doc! {}));
        assert!(matches(doc! {"a.b": {"$exists": false}}, doc! {"a": 4}));
        assert!(matches(
            doc! {"a.b": {"$exists": true}},
            doc! {"a": [{"c": 1}, {"b": 2}]}
        ));
        assert!(!matches(
            doc! {"a.b": {"$exists": true}},
            doc! {"a": [1, 2]}
        ));
        assert!(matches(doc! {"a": {"$exists": 1}}, doc! {"a": []}));
    }

    #[test]
    fn type_by_alias_code_and_number() {
        assert!(matches(doc! {"a": {"$type": "string"}}, doc! {"a": "x"}));
        assert!(matches(doc! {"a": {"$type": 2}}, doc! {"a": "x"}));
        assert!(matches(doc! {"a": {"$type": 2.0}}, doc! {"a": "x"}));
        assert!(matches(doc! {"a": {"$type": "number"}}, doc! {"a": 1i64}));
        assert!(matches(
            doc! {"a": {"$type": ["bool", "int"]}},
            doc! {"a": 1}
        ));
        assert!(matches(doc! {"a": {"$type": "array"}}, doc! {"a": [1]}));
        assert!(matches(doc! {"a": {"$type": "int"}}, doc! {"a": ["x", 1]}));
        assert!(matches(
            doc! {"a": {"$type": "minKey"}},
            doc! {"a": Bson::MinKey}
        ));
        assert!(!matches(doc! {"a": {"$type": "null"}}, doc! {}));
        assert!(matches(doc! {"a": {"$type": "null"}}, doc! {"a": null}));
    }

    #[test]
    fn type_errors() {
        let err = |f: bson::Document| Matcher::new(&f).unwrap_err();
        assert_eq!(
            err(doc! {"a": {"$type": "foo"}}).message,
            "Unknown type name alias: foo"
        );
        assert_eq!(
            err(doc! {"a": {"$type": 100}}).message,
            "Invalid numerical type code: 100"
        );
        assert_eq!(
            err(doc! {"a": {"$type": 1.5}}).message,
            "Invalid numerical type code: 1.5"
        );
        let empty = err(doc! {"a.b": {"$type": []}});
        assert_eq!(empty.message, "a.b must match at least one type");
        assert_eq!(empty.code, ErrorCode::FAILED_TO_PARSE);
        assert_eq!(
            err(doc! {"a": {"$type": {}}}).code,
            ErrorCode::TYPE_MISMATCH
        );
    }
}
