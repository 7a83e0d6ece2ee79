//! Boolean expression operators: `$and $or $not`, and the truthiness every conditional
//! operator shares.

use crate::context::ParseContext;
use crate::env::{Env, Value};
use crate::expression::{parse_fixed, parse_operands, Expression};
use basalt_error::Result;
use bson::Bson;
use std::borrow::Cow;

#[derive(Debug)]
pub(crate) enum Boolean {
    And(Vec<Expression>),
    Or(Vec<Expression>),
    Not(Box<[Expression; 1]>),
}

impl Boolean {
    pub(crate) fn parse(name: &str, args: &Bson, ctx: &ParseContext) -> Result<Option<Boolean>> {
        Ok(Some(match name {
            "$and" => Boolean::And(parse_operands(args, ctx)?),
            "$or" => Boolean::Or(parse_operands(args, ctx)?),
            "$not" => Boolean::Not(parse_fixed(name, args, ctx)?),
            _ => return Ok(None),
        }))
    }

    pub(crate) fn eval<'a>(&'a self, env: &Env<'a>) -> Result<Value<'a>> {
        let result = match self {
            Boolean::And(args) => {
                let mut all = true;
                for arg in args {
                    if !truthy(arg.eval(env)?.as_deref()) {
                        all = false;
                        break;
                    }
                }
                all
            }
            Boolean::Or(args) => {
                let mut any = false;
                for arg in args {
                    if truthy(arg.eval(env)?.as_deref()) {
                        any = true;
                        break;
                    }
                }
                any
            }
            Boolean::Not(arg) => !truthy(arg[0].eval(env)?.as_deref()),
        };
        Ok(Some(Cow::Owned(Bson::Boolean(result))))
    }
}

/// MongoDB's truthiness: false, null, missing, undefined and numeric zero are false;
/// everything else (including empty strings and arrays) is true.
pub fn truthy(value: Option<&Bson>) -> bool {
    match value {
        None | Some(Bson::Null | Bson::Undefined | Bson::Boolean(false)) => false,
        Some(Bson::Int32(i)) => *i != 0,
        Some(Bson::Int64(i)) => *i != 0,
        Some(Bson::Double(d)) => *d != 0.0,
        Some(Bson::Decimal128(d)) => basalt_value::as_f64(&Bson::Decimal128(*d)) != Some(0.0),
        Some(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use crate::expression::test_util::*;
    use bson::bson;

    #[test]
    fn logic_and_truthiness() {
        assert_eq!(value(bson!({"$and": []})), bson!(true));
        assert_eq!(value(bson!({"$and": [1, "a", [], {}]})), bson!(true));
        assert_eq!(value(bson!({"$and": [1, 0]})), bson!(false));
        assert_eq!(value(bson!({"$and": [true, "$nope"]})), bson!(false));
        assert_eq!(value(bson!({"$or": []})), bson!(false));
        assert_eq!(value(bson!({"$or": [null, 0.0, "$t"]})), bson!(true));
        assert_eq!(value(bson!({"$not": [0]})), bson!(true));
        assert_eq!(value(bson!({"$not": "$s"})), bson!(false));
        assert_eq!(error_code(bson!({"$not": [1, 2]})), 16020);
    }

    #[test]
    fn and_short_circuits() {
        assert_eq!(
            value(bson!({"$and": [false, {"$divide": [1, 0]}]})),
            bson!(false)
        );
        assert_eq!(
            value(bson!({"$or": [true, {"$divide": [1, 0]}]})),
            bson!(true)
        );
    }
}
