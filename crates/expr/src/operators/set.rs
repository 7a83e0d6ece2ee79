//! Set expression operators, which treat arrays as sets (duplicates ignored, values
//! equal by MongoDB's comparison: `1`, `1.0` and `NumberLong(1)` are one element):
//! `$setEquals $setIntersection $setUnion $setDifference $setIsSubset $anyElementTrue
//! $allElementsTrue`. Sets come back in value order (MongoDB leaves the order unspecified).

use crate::accumulator::OrderedBson;
use crate::context::ParseContext;
use crate::env::{Env, Value};
use crate::expression::{is_nullish, parse_fixed, parse_operands, type_name, Expression};
use crate::operators::boolean::truthy;
use basalt_error::{Error, Result};
use bson::Bson;
use std::borrow::Cow;
use std::collections::BTreeSet;

#[derive(Debug)]
pub(crate) enum SetOp {
    Equals(Vec<Expression>),
    Intersection(Vec<Expression>),
    Union(Vec<Expression>),
    Difference(Box<[Expression; 2]>),
    IsSubset(Box<[Expression; 2]>),
    AnyElementTrue(Box<[Expression; 1]>),
    AllElementsTrue(Box<[Expression; 1]>),
}

impl SetOp {
    pub(crate) fn parse(name: &str, args: &Bson, ctx: &ParseContext) -> Result<Option<SetOp>> {
        Ok(Some(match name {
            "$setEquals" => {
                let operands = parse_operands(args, ctx)?;
                if operands.len() < 2 {
                    return Err(Error::location(
                        17045,
                        format!(
                            "$setEquals needs at least two arguments had: {}",
                            operands.len()
                        ),
                    ));
                }
                // A constant that is not an array is refused at parse time (mongod 8's
                // code); a value that is not one when evaluated, at run time (17044).
                if let Bson::Array(items) = args {
                    let is_constant = |item: &Bson| match item {
                        Bson::String(text) => !text.starts_with('$'),
                        Bson::Document(d) => !d.keys().next().is_some_and(|k| k.starts_with('$')),
                        _ => true,
                    };
                    if let Some(constant) = items
                        .iter()
                        .find(|item| is_constant(item) && !matches!(item, Bson::Array(_)))
                    {
                        return Err(Error::location(
                            5887502,
                            format!(
                                "All operands of $setEquals must be arrays. One argument is of type: {}",
                                type_name(Some(constant))
                            ),
                        ));
                    }
                }
                SetOp::Equals(operands)
            }
            "$setIntersection" => SetOp::Intersection(parse_operands(args, ctx)?),
            "$setUnion" => SetOp::Union(parse_operands(args, ctx)?),
            "$setDifference" => SetOp::Difference(parse_fixed(name, args, ctx)?),
            "$setIsSubset" => SetOp::IsSubset(parse_fixed(name, args, ctx)?),
            "$anyElementTrue" => SetOp::AnyElementTrue(parse_fixed(name, args, ctx)?),
            "$allElementsTrue" => SetOp::AllElementsTrue(parse_fixed(name, args, ctx)?),
            _ => return Ok(None),
        }))
    }

    pub(crate) fn eval<'a>(&'a self, env: &Env<'a>) -> Result<Value<'a>> {
        let owned = |v: Bson| Ok(Some(Cow::Owned(v)));
        match self {
            SetOp::Equals(args) => {
                let mut first: Option<BTreeSet<OrderedBson>> = None;
                for arg in args {
                    let set = set_of(arg.eval(env)?.as_deref(), |t| {
                        (
                            17044,
                            format!("All operands of $setEquals must be arrays. One argument is of type: {t}"),
                        )
                    })?;
                    match &first {
                        None => first = Some(set),
                        Some(first) if *first != set => return owned(Bson::Boolean(false)),
                        Some(_) => {}
                    }
                }
                owned(Bson::Boolean(true))
            }
            SetOp::Intersection(args) => {
                let mut result: Option<BTreeSet<OrderedBson>> = None;
                let mut null = false;
                for arg in args {
                    let value = arg.eval(env)?;
                    if is_nullish(value.as_deref()) {
                        null = true;
                        continue;
                    }
                    let set = set_of(value.as_deref(), |t| {
                        (
                            17047,
                            format!("All operands of $setIntersection must be arrays. One argument is of type: {t}"),
                        )
                    })?;
                    result = Some(match result {
                        None => set,
                        Some(so_far) => so_far.intersection(&set).cloned().collect(),
                    });
                }
                if null {
                    return owned(Bson::Null);
                }
                owned(into_array(result.unwrap_or_default()))
            }
            SetOp::Union(args) => {
                let mut union = BTreeSet::new();
                let mut null = false;
                for arg in args {
                    let value = arg.eval(env)?;
                    if is_nullish(value.as_deref()) {
                        null = true;
                        continue;
                    }
                    union.extend(set_of(value.as_deref(), |t| {
                        (
                            17043,
                            format!("All operands of $setUnion must be arrays. One argument is of type: {t}"),
                        )
                    })?);
                }
                if null {
                    return owned(Bson::Null);
                }
                owned(into_array(union))
            }
            SetOp::Difference(args) => {
                let (a, b) = (args[0].eval(env)?, args[1].eval(env)?);
                if is_nullish(a.as_deref()) || is_nullish(b.as_deref()) {
                    return owned(Bson::Null);
                }
                let a = set_of(a.as_deref(), |t| {
                    (
                        17048,
                        format!("both operands of $setDifference must be arrays. First argument is of type: {t}"),
                    )
                })?;
                let b = set_of(b.as_deref(), |t| {
                    (
                        17049,
                        format!("both operands of $setDifference must be arrays. Second argument is of type: {t}"),
                    )
                })?;
                owned(into_array(a.difference(&b).cloned().collect()))
            }
            SetOp::IsSubset(args) => {
                let a = set_of(args[0].eval(env)?.as_deref(), |t| {
                    (
                        17046,
                        format!("both operands of $setIsSubset must be arrays. First argument is of type: {t}"),
                    )
                })?;
                let b = set_of(args[1].eval(env)?.as_deref(), |t| {
                    (
                        17042,
                        format!("both operands of $setIsSubset must be arrays. Second argument is of type: {t}"),
                    )
                })?;
                owned(Bson::Boolean(a.is_subset(&b)))
            }
            SetOp::AnyElementTrue(arg) | SetOp::AllElementsTrue(arg) => {
                let any = matches!(self, SetOp::AnyElementTrue(_));
                let (name, code) = if any {
                    ("$anyElementTrue", 17041)
                } else {
                    ("$allElementsTrue", 17040)
                };
                let value = arg[0].eval(env)?;
                let Some(Bson::Array(items)) = value.as_deref() else {
                    return Err(Error::location(
                        code,
                        format!(
                            "{name}'s argument must be an array, but is {}",
                            type_name(value.as_deref())
                        ),
                    ));
                };
                let result = if any {
                    items.iter().any(|item| truthy(Some(item)))
                } else {
                    items.iter().all(|item| truthy(Some(item)))
                };
                owned(Bson::Boolean(result))
            }
        }
    }
}

/// The distinct elements of an array operand; `error` gets the type name otherwise.
fn set_of(
    value: Option<&Bson>,
    error: impl FnOnce(&str) -> (i32, String),
) -> Result<BTreeSet<OrderedBson>> {
    match value {
        // Inserted one by one, so of equal values (1, 1.0, NumberLong(1)) the first
        // seen stays, as in MongoDB (collecting would keep the last).
        Some(Bson::Array(items)) => {
            let mut set = BTreeSet::new();
            for item in items {
                set.insert(OrderedBson(item.clone()));
            }
            Ok(set)
        }
        other => {
            let (code, message) = error(type_name(other));
            Err(Error::location(code, message))
        }
    }
}

fn into_array(set: BTreeSet<OrderedBson>) -> Bson {
    Bson::Array(set.into_iter().map(|v| v.0).collect())
}

#[cfg(test)]
mod tests {
    use crate::expression::test_util::{error_code, value};
    use bson::bson;

    #[test]
    fn set_operators() {
        assert_eq!(
            value(bson!({"$setUnion": [[1, 2, 2], [3, 1.0, {"$literal": "a"}]]})),
            bson!([1, 2, 3, "a"])
        );
        assert_eq!(value(bson!({"$setUnion": [[1], null]})), bson!(null));
        assert_eq!(
            value(bson!({"$setIntersection": [[1, 2, 3], [3, 2_i64], [2, 3, 4]]})),
            bson!([2, 3])
        );
        assert_eq!(value(bson!({"$setIntersection": []})), bson!([]));
        assert_eq!(
            value(bson!({"$setDifference": [[1, 2, 3, 3], [2]]})),
            bson!([1, 3])
        );
        assert_eq!(
            value(bson!({"$setEquals": [[1, 2, 2], [2, 1], [1.0, 2]]})),
            bson!(true)
        );
        assert_eq!(value(bson!({"$setEquals": [[1], [1, 2]]})), bson!(false));
        assert_eq!(
            value(bson!({"$setIsSubset": [[1, 1], [1, 2]]})),
            bson!(true)
        );
        assert_eq!(value(bson!({"$setIsSubset": [[3], [1, 2]]})), bson!(false));
        assert_eq!(
            value(bson!({"$anyElementTrue": [[0, false, 1]]})),
            bson!(true)
        );
        assert_eq!(
            value(bson!({"$allElementsTrue": [[1, [], null]]})),
            bson!(false)
        );
        assert_eq!(value(bson!({"$allElementsTrue": [[]]})), bson!(true));
    }

    #[test]
    fn set_operator_errors() {
        assert_eq!(error_code(bson!({"$setEquals": [[1]]})), 17045);
        assert_eq!(error_code(bson!({"$setEquals": [[1], 5]})), 5887502);
        assert_eq!(error_code(bson!({"$setEquals": [[1], "$missing"]})), 17044);
        assert_eq!(error_code(bson!({"$setUnion": [[1], "x"]})), 17043);
        assert_eq!(error_code(bson!({"$setIntersection": [1]})), 17047);
        assert_eq!(error_code(bson!({"$setDifference": [1, [2]]})), 17048);
        assert_eq!(error_code(bson!({"$setDifference": [[1], 2]})), 17049);
        assert_eq!(error_code(bson!({"$setIsSubset": [null, [2]]})), 17046);
        assert_eq!(error_code(bson!({"$setIsSubset": [[1], null]})), 17042);
        assert_eq!(error_code(bson!({"$anyElementTrue": [5]})), 17041);
        assert_eq!(error_code(bson!({"$allElementsTrue": [5]})), 17040);
        assert_eq!(error_code(bson!({"$setDifference": [[1]]})), 16020);
    }
}
