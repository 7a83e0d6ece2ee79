//! `$inc`, `$mul`, `$min`, `$max` and `$bit`.
//!
//! `$inc` and `$mul` follow MongoDB's numeric promotion (int32 overflow widens to int64;
//! int64 overflow is an error, not a silent double). On a missing field `$inc` sets the
//! operand and `$mul` sets a zero of the operand's type. `$min`/`$max` compare across
//! types in MongoDB's sort order. `$bit` applies `and`/`or`/`xor` with integers in the
//! order given, on an int32 or int64 (a missing field counts as 0 of the operand's type);
//! an int64 on either side makes an int64.

use super::describe_document;
use super::modifier::{Outcome, Target};
use super::tree::Env;
use crate::display::{element_to_string, type_name};
use basalt_error::{Error, ErrorCode, Result};
use basalt_value::compare_values;
use basalt_value::number::{arithmetic, ArithmeticOp, Int64Overflow, Number};
use bson::{Bson, Decimal128};
use std::cmp::Ordering;
use std::str::FromStr;

/// `$bit`'s operations, applied in order.
#[derive(Clone, Debug)]
pub(crate) struct Bitwise {
    operations: Vec<(BitOp, Bson)>,
}

#[derive(Clone, Copy, Debug)]
enum BitOp {
    And,
    Or,
    Xor,
}

impl Bitwise {
    pub(super) fn parse(path: &str, operand: &Bson) -> Result<Bitwise> {
        let Bson::Document(operations) = operand else {
            return Err(Error::bad_value(format!(
                "The $bit modifier is not compatible with a {}. You must pass in an embedded \
                 document: {{$bit: {{field: {{and/or/xor: #}}}}",
                type_name(operand)
            )));
        };
        if operations.is_empty() {
            return Err(Error::bad_value(format!(
                "You must pass in at least one bitwise operation. The format is: {{$bit: \
                 {{field: {{and/or/xor: #}}}}}} for {path}"
            )));
        }
        let mut parsed = Vec::with_capacity(operations.len());
        for (name, value) in operations {
            let op = match name.as_str() {
                "and" => BitOp::And,
                "or" => BitOp::Or,
                "xor" => BitOp::Xor,
                other => {
                    return Err(Error::bad_value(format!(
                        "The $bit modifier only supports 'and', 'or', and 'xor', not '{other}' \
                         which is an unknown operator: {{{}}}",
                        element_to_string(name, value)
                    )))
                }
            };
            if !matches!(value, Bson::Int32(_) | Bson::Int64(_)) {
                return Err(Error::bad_value(format!(
                    "The $bit modifier field must be an Integer(32/64 bit); a '{}' is not \
                     supported here: {{{}}}",
                    type_name(value),
                    element_to_string(name, value)
                )));
            }
            parsed.push((op, value.clone()));
        }
        Ok(Bitwise { operations: parsed })
    }

    pub(super) fn apply(
        &self,
        existing: Option<&Bson>,
        target: &Target,
        env: &Env,
    ) -> Result<Outcome> {
        let mut current = match existing {
            None => match self.operations.first() {
                Some((_, Bson::Int64(_))) => Bson::Int64(0),
                _ => Bson::Int32(0),
            },
            Some(value @ (Bson::Int32(_) | Bson::Int64(_))) => value.clone(),
            Some(other) => {
                return Err(Error::bad_value(format!(
                    "Cannot apply $bit to a value of non-integral type.{} has the field {} of \
                     non-integer type {}",
                    describe_document(env.id.as_ref()),
                    target.field,
                    type_name(other)
                )))
            }
        };
        for (op, operand) in &self.operations {
            let apply = |a: i64, b: i64| match op {
                BitOp::And => a & b,
                BitOp::Or => a | b,
                BitOp::Xor => a ^ b,
            };
            current = match (&current, operand) {
                (Bson::Int32(a), Bson::Int32(b)) => {
                    Bson::Int32(apply(i64::from(*a), i64::from(*b)) as i32)
                }
                (a, b) => {
                    let widen = |v: &Bson| match v {
                        Bson::Int32(n) => i64::from(*n),
                        Bson::Int64(n) => *n,
                        _ => 0,
                    };
                    Bson::Int64(apply(widen(a), widen(b)))
                }
            };
        }
        Ok(Outcome::Set(current))
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Arithmetic {
    operator: &'static str,
    op: ArithmeticOp,
    operand: Number,
}

impl Arithmetic {
    pub(super) fn parse(operator: &str, path: &str, operand: &Bson) -> Result<Arithmetic> {
        let (operator, op, verb) = if operator == "$inc" {
            ("$inc", ArithmeticOp::Add, "increment")
        } else {
            ("$mul", ArithmeticOp::Multiply, "multiply")
        };
        let Some(operand) = Number::from_bson(operand) else {
            return Err(Error::type_mismatch(format!(
                "Cannot {verb} with non-numeric argument: {{{}}}",
                element_to_string(path, operand)
            )));
        };
        Ok(Arithmetic {
            operator,
            op,
            operand,
        })
    }

    pub(super) fn apply(
        &self,
        existing: Option<&Bson>,
        target: &Target,
        env: &Env,
    ) -> Result<Outcome> {
        let Some(existing) = existing else {
            return Ok(Outcome::Set(match self.op {
                ArithmeticOp::Multiply => zero_like(self.operand).to_bson(),
                _ => self.operand.to_bson(),
            }));
        };
        let Some(current) = Number::from_bson(existing) else {
            return Err(Error::new(
                ErrorCode::TYPE_MISMATCH,
                format!(
                    "Cannot apply {} to a value of non-numeric type. {} has the field '{}' of \
                     non-numeric type {}",
                    self.operator,
                    describe_document(env.id.as_ref()),
                    target.field,
                    type_name(existing)
                ),
            ));
        };
        match arithmetic(self.op, current, self.operand, Int64Overflow::Fail) {
            Some(result) => Ok(Outcome::Set(result.to_bson())),
            None => Err(Error::bad_value(format!(
                "Failed to apply {} operations to current value ({}) for document {}",
                self.operator,
                typed_number(current),
                describe_document(env.id.as_ref())
            ))),
        }
    }
}

/// Zero in the type of `n`, which `$mul` stores in a missing field.
fn zero_like(n: Number) -> Number {
    match n {
        Number::Int32(_) => Number::Int32(0),
        Number::Int64(_) => Number::Int64(0),
        Number::Double(_) => Number::Double(0.0),
        Number::Decimal(_) => {
            Number::Decimal(Decimal128::from_str("0").unwrap_or(Decimal128::from_bytes([0; 16])))
        }
    }
}

/// A number with its type, as MongoDB quotes it in arithmetic errors.
fn typed_number(n: Number) -> String {
    match n {
        Number::Int32(i) => format!("(NumberInt){i}"),
        Number::Int64(i) => format!("(NumberLong){i}"),
        Number::Double(d) => format!("(NumberDouble){d}"),
        Number::Decimal(d) => format!("(NumberDecimal){d}"),
    }
}

/// `$min` (keep the smaller) or `$max` (keep the larger).
#[derive(Clone, Debug)]
pub(crate) struct Bound {
    keep_larger: bool,
    operand: Bson,
}

impl Bound {
    pub(super) fn new(operator: &str, operand: &Bson) -> Bound {
        Bound {
            keep_larger: operator == "$max",
            operand: operand.clone(),
        }
    }

    pub(super) fn apply(&self, existing: Option<&Bson>) -> Outcome {
        let wanted = if self.keep_larger {
            Ordering::Greater
        } else {
            Ordering::Less
        };
        match existing {
            Some(current) if compare_values(&self.operand, current) != wanted => Outcome::Keep,
            _ => Outcome::Set(self.operand.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::update::run;
    use basalt_error::ErrorCode;
    use bson::{doc, Bson, Decimal128};
    use std::str::FromStr;

    #[test]
    fn bit_applies_its_operations_in_order_and_widens_to_int64() {
        let (d, _) = run(
            doc! {"a": 13, "b": 1, "c": 5i64},
            doc! {"$bit": {"a": {"and": 10}, "b": {"or": 6i64, "xor": 2i64}, "c": {"and": 4}, "n": {"or": 3}}},
        )
        .unwrap();
        assert_eq!(d, doc! {"a": 8, "b": 5i64, "c": 4i64, "n": 3});
        let code = |update| run(doc! {"a": 1.5}, update).unwrap_err().code;
        assert_eq!(code(doc! {"$bit": {"a": {"and": 1}}}), ErrorCode::BAD_VALUE);
        assert_eq!(code(doc! {"$bit": {"b": {"not": 1}}}), ErrorCode::BAD_VALUE);
        assert_eq!(
            code(doc! {"$bit": {"b": {"and": 1.0}}}),
            ErrorCode::BAD_VALUE
        );
        assert_eq!(code(doc! {"$bit": {"b": {}}}), ErrorCode::BAD_VALUE);
    }

    #[test]
    fn inc_promotes() {
        let (d, _) = run(
            doc! {"a": 1, "b": i32::MAX, "c": 1.5},
            doc! {"$inc": {"a": 2, "b": 1, "c": 1, "n": 5i64}},
        )
        .unwrap();
        assert_eq!(
            d,
            doc! {"a": 3, "b": i64::from(i32::MAX) + 1, "c": 2.5, "n": 5i64}
        );
        let dec = |s: &str| Bson::Decimal128(Decimal128::from_str(s).unwrap());
        let (d, _) = run(doc! {"a": dec("1.1")}, doc! {"$inc": {"a": dec("2.2")}}).unwrap();
        assert_eq!(d.get("a"), Some(&dec("3.3")));
    }

    #[test]
    fn inc_errors() {
        let e = run(doc! {"_id": 1, "a": "x"}, doc! {"$inc": {"a": 1}}).unwrap_err();
        assert_eq!(e.code, ErrorCode::TYPE_MISMATCH);
        assert_eq!(
            e.message,
            "Cannot apply $inc to a value of non-numeric type. {_id: 1} has the field 'a' of \
             non-numeric type string"
        );
        let e = run(doc! {}, doc! {"$inc": {"a": "x"}}).unwrap_err();
        assert_eq!(e.code, ErrorCode::TYPE_MISMATCH);
        assert_eq!(
            e.message,
            "Cannot increment with non-numeric argument: {a: \"x\"}"
        );
        let e = run(doc! {"_id": "m", "a": i64::MAX}, doc! {"$inc": {"a": 1}}).unwrap_err();
        assert_eq!(e.code, ErrorCode::BAD_VALUE);
        assert_eq!(
            e.message,
            "Failed to apply $inc operations to current value ((NumberLong)9223372036854775807) \
             for document {_id: \"m\"}"
        );
    }

    #[test]
    fn mul() {
        let (d, _) = run(
            doc! {"a": 3},
            doc! {"$mul": {"a": 2.5, "b": 2i64, "c": 1.5}},
        )
        .unwrap();
        assert_eq!(d, doc! {"a": 7.5, "b": 0i64, "c": 0.0});
        let e = run(doc! {}, doc! {"$mul": {"a": null}}).unwrap_err();
        assert_eq!(
            e.message,
            "Cannot multiply with non-numeric argument: {a: null}"
        );
    }

    #[test]
    fn min_and_max() {
        let (d, changed) = run(
            doc! {"a": 5, "b": 5},
            doc! {"$min": {"a": 3}, "$max": {"b": 3, "c": 1}},
        )
        .unwrap();
        assert!(changed);
        assert_eq!(d, doc! {"a": 3, "b": 5, "c": 1});
        let (_, changed) = run(doc! {"a": 5}, doc! {"$max": {"a": 5.0}}).unwrap();
        assert!(!changed);
        // Cross-type: strings sort above numbers.
        let (d, _) = run(doc! {"a": 5}, doc! {"$max": {"a": "x"}}).unwrap();
        assert_eq!(d, doc! {"a": "x"});
    }
}
