//! Data size, timestamp and hashing operators: `$bsonSize` (the bytes of a document as
//! BSON), `$binarySize` (of a string's UTF-8 or of binary data), `$tsSecond` and
//! `$tsIncrement` (the parts of a timestamp, as longs), and `$toHashedIndexKey` (the key
//! a hashed index stores for a value).
//!
//! Null or missing gives null; a value of another type is refused with mongod's code.

use crate::context::ParseContext;
use crate::env::{Env, Value};
use crate::expression::{is_nullish, parse_fixed, type_name, Expression};
use basalt_error::{Error, Result};
use bson::Bson;
use std::borrow::Cow;

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Measure {
    BsonSize,
    BinarySize,
    TsSecond,
    TsIncrement,
    ToHashedIndexKey,
}

#[derive(Debug)]
pub(crate) struct DataSize {
    measure: Measure,
    argument: Box<[Expression; 1]>,
}

impl DataSize {
    pub(crate) fn parse(name: &str, args: &Bson, ctx: &ParseContext) -> Result<Option<DataSize>> {
        let measure = match name {
            "$bsonSize" => Measure::BsonSize,
            "$binarySize" => Measure::BinarySize,
            "$tsSecond" => Measure::TsSecond,
            "$tsIncrement" => Measure::TsIncrement,
            "$toHashedIndexKey" => Measure::ToHashedIndexKey,
            _ => return Ok(None),
        };
        Ok(Some(DataSize {
            measure,
            argument: parse_fixed(name, args, ctx)?,
        }))
    }

    pub(crate) fn eval<'a>(&'a self, env: &Env<'a>) -> Result<Value<'a>> {
        let value = self.argument[0].eval(env)?;
        let value = value.as_deref();
        if is_nullish(value) && self.measure != Measure::ToHashedIndexKey {
            return Ok(Some(Cow::Owned(Bson::Null)));
        }
        let result = match (self.measure, value) {
            (Measure::BsonSize, Some(Bson::Document(document))) => {
                Bson::Int32(basalt_value::document_size_bytes(document) as i32)
            }
            (Measure::BsonSize, other) => {
                return Err(Error::location(
                    31393,
                    format!(
                        "$bsonSize requires a document input, found: {}",
                        type_name(other)
                    ),
                ))
            }
            (Measure::BinarySize, Some(Bson::String(text))) => Bson::Int32(text.len() as i32),
            (Measure::BinarySize, Some(Bson::Binary(binary))) => {
                Bson::Int32(binary.bytes.len() as i32)
            }
            (Measure::BinarySize, other) => {
                return Err(Error::location(
                    51276,
                    format!(
                        "$binarySize requires a string or BinData argument, found: {}",
                        type_name(other)
                    ),
                ))
            }
            (Measure::TsSecond, Some(Bson::Timestamp(ts))) => Bson::Int64(i64::from(ts.time)),
            (Measure::TsIncrement, Some(Bson::Timestamp(ts))) => {
                Bson::Int64(i64::from(ts.increment))
            }
            (Measure::TsSecond | Measure::TsIncrement, other) => {
                let name = if self.measure == Measure::TsSecond {
                    "$tsSecond"
                } else {
                    "$tsIncrement"
                };
                return Err(Error::location(
                    5687301,
                    format!(
                        "Argument to {name} must be a timestamp, but is {}",
                        type_name(other)
                    ),
                ));
            }
            // Missing hashes as null does, as a hashed index keys a document without
            // the field.
            (Measure::ToHashedIndexKey, value) => {
                basalt_value::key_string::hashed_value(value.unwrap_or(&Bson::Null), None)
            }
        };
        Ok(Some(Cow::Owned(result)))
    }
}

#[cfg(test)]
mod tests {
    use crate::expression::test_util::{error_code, value};
    use bson::{bson, Timestamp};

    #[test]
    fn measures() {
        assert_eq!(value(bson!({"$bsonSize": {"$literal": {}}})), bson!(5));
        assert_eq!(value(bson!({"$binarySize": "héllo"})), bson!(6));
        let ts = Timestamp {
            time: 7,
            increment: 3,
        };
        assert_eq!(value(bson!({"$tsSecond": ts})), bson!(7_i64));
        assert_eq!(value(bson!({"$tsIncrement": ts})), bson!(3_i64));
        assert_eq!(value(bson!({"$bsonSize": null})), bson!(null));
        assert_eq!(
            value(bson!({"$toHashedIndexKey": 1})),
            value(bson!({"$toHashedIndexKey": 1.0}))
        );
    }

    #[test]
    fn refuses_other_types() {
        assert_eq!(error_code(bson!({"$bsonSize": 1})), 31393);
        assert_eq!(error_code(bson!({"$binarySize": 1})), 51276);
        assert_eq!(error_code(bson!({"$tsSecond": 1})), 5687301);
    }
}
