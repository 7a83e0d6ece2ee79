//! Bitwise expression operators (MongoDB 6.3): `$bitAnd $bitOr $bitXor` over a list of
//! ints and longs, and `$bitNot` of one.
//!
//! As in MongoDB: null or missing among the operands gives null; any other non-integer
//! (a double too) is TypeMismatch; the result is an int when every operand is one, a
//! long otherwise; with no operands, the operation's identity (-1 for `$bitAnd`, 0
//! otherwise).

use crate::context::ParseContext;
use crate::env::{Env, Value};
use crate::expression::{is_nullish, parse_fixed, parse_operands, type_name, Expression};
use basalt_error::{Error, Result};
use bson::Bson;
use std::borrow::Cow;

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Combine {
    And,
    Or,
    Xor,
}

impl Combine {
    fn name(self) -> &'static str {
        match self {
            Combine::And => "$bitAnd",
            Combine::Or => "$bitOr",
            Combine::Xor => "$bitXor",
        }
    }

    fn identity(self) -> i64 {
        match self {
            Combine::And => -1,
            Combine::Or | Combine::Xor => 0,
        }
    }

    fn apply(self, a: i64, b: i64) -> i64 {
        match self {
            Combine::And => a & b,
            Combine::Or => a | b,
            Combine::Xor => a ^ b,
        }
    }
}

#[derive(Debug)]
pub(crate) enum Bitwise {
    Combine(Combine, Vec<Expression>),
    Not(Box<[Expression; 1]>),
}

impl Bitwise {
    pub(crate) fn parse(name: &str, args: &Bson, ctx: &ParseContext) -> Result<Option<Bitwise>> {
        let combine = |op| Ok(Some(Bitwise::Combine(op, parse_operands(args, ctx)?)));
        match name {
            "$bitAnd" => combine(Combine::And),
            "$bitOr" => combine(Combine::Or),
            "$bitXor" => combine(Combine::Xor),
            "$bitNot" => Ok(Some(Bitwise::Not(parse_fixed(name, args, ctx)?))),
            _ => Ok(None),
        }
    }

    pub(crate) fn eval<'a>(&'a self, env: &Env<'a>) -> Result<Value<'a>> {
        let result = match self {
            Bitwise::Combine(op, args) => {
                let mut total = op.identity();
                let mut long = false;
                for arg in args {
                    let value = arg.eval(env)?;
                    match value.as_deref() {
                        v if is_nullish(v) => return Ok(Some(Cow::Owned(Bson::Null))),
                        Some(Bson::Int32(n)) => total = op.apply(total, i64::from(*n)),
                        Some(Bson::Int64(n)) => {
                            long = true;
                            total = op.apply(total, *n);
                        }
                        other => return Err(not_an_integer(op.name(), other)),
                    }
                }
                if long {
                    Bson::Int64(total)
                } else {
                    // Every operand an int: the result fits one.
                    Bson::Int32(total as i32)
                }
            }
            Bitwise::Not(arg) => {
                let value = arg[0].eval(env)?;
                match value.as_deref() {
                    v if is_nullish(v) => Bson::Null,
                    Some(Bson::Int32(n)) => Bson::Int32(!n),
                    Some(Bson::Int64(n)) => Bson::Int64(!n),
                    other => return Err(not_an_integer("$bitNot", other)),
                }
            }
        };
        Ok(Some(Cow::Owned(result)))
    }
}

fn not_an_integer(name: &str, value: Option<&Bson>) -> Error {
    Error::type_mismatch(format!(
        "{name} only supports int and long operands, not {}",
        type_name(value)
    ))
}

#[cfg(test)]
mod tests {
    use crate::expression::test_util::{error_code, value};
    use bson::bson;

    #[test]
    fn combines_ints_and_longs() {
        assert_eq!(value(bson!({"$bitAnd": [5, 3]})), bson!(1));
        assert_eq!(value(bson!({"$bitOr": [12, 10_i64]})), bson!(14_i64));
        assert_eq!(value(bson!({"$bitXor": [5, 3]})), bson!(6));
        assert_eq!(value(bson!({"$bitAnd": []})), bson!(-1));
        assert_eq!(value(bson!({"$bitNot": 5})), bson!(-6));
        assert_eq!(value(bson!({"$bitNot": [5_i64]})), bson!(-6_i64));
        assert_eq!(value(bson!({"$bitOr": [1, null]})), bson!(null));
    }

    #[test]
    fn refuses_what_is_not_an_integer() {
        assert_eq!(error_code(bson!({"$bitAnd": [1, 1.0]})), 14);
        assert_eq!(error_code(bson!({"$bitNot": "1"})), 14);
        assert_eq!(error_code(bson!({"$bitNot": [1, 2]})), 16020);
    }
}
