//! Comparison expression operators: `$eq $ne $gt $gte $lt $lte $cmp`.
//!
//! They compare any two values in MongoDB's cross-type order (so `{$gt: ["a", 5]}` is
//! true), with missing below every value including null, as aggregation does, and
//! strings under the command's collation.

use crate::context::ParseContext;
use crate::env::{Env, Value};
use crate::expression::{parse_fixed, Expression};
use basalt_error::Result;
use basalt_value::{compare_values_with, Collation};
use bson::Bson;
use std::borrow::Cow;
use std::cmp::Ordering;

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Cmp {
    Eq,
    Ne,
    Gt,
    Gte,
    Lt,
    Lte,
    Compare,
}

#[derive(Debug)]
pub(crate) struct Comparison {
    op: Cmp,
    args: Box<[Expression; 2]>,
}

impl Comparison {
    pub(crate) fn parse(name: &str, args: &Bson, ctx: &ParseContext) -> Result<Option<Comparison>> {
        let op = match name {
            "$eq" => Cmp::Eq,
            "$ne" => Cmp::Ne,
            "$gt" => Cmp::Gt,
            "$gte" => Cmp::Gte,
            "$lt" => Cmp::Lt,
            "$lte" => Cmp::Lte,
            "$cmp" => Cmp::Compare,
            _ => return Ok(None),
        };
        Ok(Some(Comparison {
            op,
            args: parse_fixed(name, args, ctx)?,
        }))
    }

    pub(crate) fn eval<'a>(&'a self, env: &Env<'a>) -> Result<Value<'a>> {
        let a = self.args[0].eval(env)?;
        let b = self.args[1].eval(env)?;
        let ord = compare_missing_lowest(a.as_deref(), b.as_deref(), env.vars.collation());
        let result = match self.op {
            Cmp::Eq => Bson::Boolean(ord == Ordering::Equal),
            Cmp::Ne => Bson::Boolean(ord != Ordering::Equal),
            Cmp::Gt => Bson::Boolean(ord == Ordering::Greater),
            Cmp::Gte => Bson::Boolean(ord != Ordering::Less),
            Cmp::Lt => Bson::Boolean(ord == Ordering::Less),
            Cmp::Lte => Bson::Boolean(ord != Ordering::Greater),
            Cmp::Compare => Bson::Int32(ord as i32),
        };
        Ok(Some(Cow::Owned(result)))
    }
}

/// MongoDB's order with missing as the lowest value of all, strings under `collation`.
pub(crate) fn compare_missing_lowest(
    a: Option<&Bson>,
    b: Option<&Bson>,
    collation: Option<&Collation>,
) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(x), Some(y)) => compare_values_with(x, y, collation),
    }
}

#[cfg(test)]
mod tests {
    use crate::expression::test_util::*;
    use bson::bson;

    #[test]
    fn compares_across_types() {
        assert_eq!(value(bson!({"$eq": [1, 1.0]})), bson!(true));
        assert_eq!(value(bson!({"$eq": ["$i", 5_i64]})), bson!(true));
        assert_eq!(value(bson!({"$ne": ["$i", 5]})), bson!(false));
        assert_eq!(value(bson!({"$gt": ["a", 5]})), bson!(true));
        assert_eq!(value(bson!({"$gte": [5, 5]})), bson!(true));
        assert_eq!(value(bson!({"$lt": ["$d", "$i"]})), bson!(true));
        assert_eq!(value(bson!({"$lte": [[1, 2], [1, 3]]})), bson!(true));
        assert_eq!(value(bson!({"$cmp": ["b", "a"]})), bson!(1));
        assert_eq!(value(bson!({"$cmp": [1, 2]})), bson!(-1));
        assert_eq!(value(bson!({"$cmp": [{"a": 1}, {"a": 1}]})), bson!(0));
    }

    #[test]
    fn missing_sorts_below_null() {
        assert_eq!(value(bson!({"$eq": ["$nope", null]})), bson!(false));
        assert_eq!(value(bson!({"$lt": ["$nope", null]})), bson!(true));
        assert_eq!(value(bson!({"$eq": ["$nope", "$other"]})), bson!(true));
        assert_eq!(value(bson!({"$gt": ["$n", "$nope"]})), bson!(true));
    }

    #[test]
    fn arity_is_checked() {
        assert_eq!(error_code(bson!({"$eq": [1]})), 16020);
        assert_eq!(
            error_message(bson!({"$cmp": [1, 2, 3]})),
            "Expression $cmp takes exactly 2 arguments. 3 were passed in."
        );
    }
}
