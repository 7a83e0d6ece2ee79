//! Conditional expression operators: `$cond` (array and object forms), `$ifNull` and
//! `$switch`. Only the chosen branch is evaluated, so the others may fail harmlessly.

use crate::context::ParseContext;
use crate::env::{Env, Value};
use crate::expression::{is_nullish, parse_fixed, parse_operands, type_name, Expression};
use crate::operators::boolean::truthy;
use basalt_error::{Error, Result};
use bson::Bson;

#[derive(Debug)]
pub(crate) enum Conditional {
    Cond(Box<[Expression; 3]>),
    IfNull(Vec<Expression>),
    Switch {
        branches: Vec<(Expression, Expression)>,
        default: Option<Box<Expression>>,
    },
}

impl Conditional {
    pub(crate) fn parse(
        name: &str,
        args: &Bson,
        ctx: &ParseContext,
    ) -> Result<Option<Conditional>> {
        Ok(Some(match name {
            "$cond" => match args {
                Bson::Document(doc) => {
                    let (mut cond, mut then, mut otherwise) = (None, None, None);
                    for (key, value) in doc {
                        let slot = match key.as_str() {
                            "if" => &mut cond,
                            "then" => &mut then,
                            "else" => &mut otherwise,
                            _ => {
                                return Err(Error::location(
                                    17083,
                                    format!("Unrecognized parameter to $cond: {key}"),
                                ))
                            }
                        };
                        *slot = Some(Expression::parse(value, ctx)?);
                    }
                    let cond = cond
                        .ok_or_else(|| Error::location(17080, "Missing 'if' parameter to $cond"))?;
                    let then = then.ok_or_else(|| {
                        Error::location(17081, "Missing 'then' parameter to $cond")
                    })?;
                    let otherwise = otherwise.ok_or_else(|| {
                        Error::location(17082, "Missing 'else' parameter to $cond")
                    })?;
                    Conditional::Cond(Box::new([cond, then, otherwise]))
                }
                _ => Conditional::Cond(parse_fixed(name, args, ctx)?),
            },
            "$ifNull" => {
                let args = parse_operands(args, ctx)?;
                if args.len() < 2 {
                    return Err(Error::location(
                        1257300,
                        format!("$ifNull needs at least two arguments, had: {}", args.len()),
                    ));
                }
                Conditional::IfNull(args)
            }
            "$switch" => parse_switch(args, ctx)?,
            _ => return Ok(None),
        }))
    }

    pub(crate) fn eval<'a>(&'a self, env: &Env<'a>) -> Result<Value<'a>> {
        match self {
            Conditional::Cond(args) => {
                if truthy(args[0].eval(env)?.as_deref()) {
                    args[1].eval(env)
                } else {
                    args[2].eval(env)
                }
            }
            Conditional::IfNull(args) => {
                let (last, candidates) = args.split_last().expect("at least two arguments");
                for candidate in candidates {
                    let v = candidate.eval(env)?;
                    if !is_nullish(v.as_deref()) {
                        return Ok(v);
                    }
                }
                last.eval(env)
            }
            Conditional::Switch { branches, default } => {
                for (case, then) in branches {
                    if truthy(case.eval(env)?.as_deref()) {
                        return then.eval(env);
                    }
                }
                match default {
                    Some(d) => d.eval(env),
                    None => Err(Error::location(
                        40066,
                        "$switch could not find a matching branch for an input, and no default was specified.",
                    )),
                }
            }
        }
    }
}

fn parse_switch(args: &Bson, ctx: &ParseContext) -> Result<Conditional> {
    let Bson::Document(doc) = args else {
        return Err(Error::location(
            40060,
            format!(
                "$switch requires an object as an argument, found: {}",
                type_name(Some(args))
            ),
        ));
    };
    let mut branches = Vec::new();
    let mut default = None;
    for (key, value) in doc {
        match key.as_str() {
            "branches" => {
                let Bson::Array(items) = value else {
                    return Err(Error::location(
                        40061,
                        format!(
                            "$switch expected an array for 'branches', found: {}",
                            type_name(Some(value))
                        ),
                    ));
                };
                for item in items {
                    let Bson::Document(branch) = item else {
                        return Err(Error::location(
                            40062,
                            format!(
                                "$switch expected each branch to be an object, found: {}",
                                type_name(Some(item))
                            ),
                        ));
                    };
                    let (mut case, mut then) = (None, None);
                    for (bk, bv) in branch {
                        match bk.as_str() {
                            "case" => case = Some(Expression::parse(bv, ctx)?),
                            "then" => then = Some(Expression::parse(bv, ctx)?),
                            _ => {
                                return Err(Error::location(
                                    40063,
                                    format!("$switch found an unknown argument to a branch: {bk}"),
                                ))
                            }
                        }
                    }
                    let case = case.ok_or_else(|| {
                        Error::location(
                            40064,
                            "$switch requires each branch have a 'case' expression",
                        )
                    })?;
                    let then = then.ok_or_else(|| {
                        Error::location(
                            40065,
                            "$switch requires each branch have a 'then' expression.",
                        )
                    })?;
                    branches.push((case, then));
                }
            }
            "default" => default = Some(Box::new(Expression::parse(value, ctx)?)),
            _ => {
                return Err(Error::location(
                    40067,
                    format!("$switch found an unknown argument: {key}"),
                ))
            }
        }
    }
    if branches.is_empty() {
        return Err(Error::location(
            40068,
            "$switch requires at least one branch.",
        ));
    }
    Ok(Conditional::Switch { branches, default })
}

#[cfg(test)]
mod tests {
    use crate::expression::test_util::*;
    use bson::{bson, Bson};

    #[test]
    fn cond_both_forms() {
        assert_eq!(value(bson!({"$cond": [true, 1, 2]})), bson!(1));
        assert_eq!(value(bson!({"$cond": ["$nope", 1, 2]})), bson!(2));
        assert_eq!(
            value(bson!({"$cond": {"if": {"$gt": ["$i", 3]}, "then": "big", "else": "small"}})),
            bson!("big")
        );
        assert_eq!(
            value(bson!({"$cond": [false, {"$divide": [1, 0]}, 0]})),
            bson!(0)
        );
        assert_eq!(error_code(bson!({"$cond": {"if": true, "then": 1}})), 17082);
        assert_eq!(error_code(bson!({"$cond": {"then": 1, "else": 1}})), 17080);
        assert_eq!(
            error_code(bson!({"$cond": {"if": 1, "then": 1, "else": 1, "x": 1}})),
            17083
        );
        assert_eq!(error_code(bson!({"$cond": [1, 2]})), 16020);
    }

    #[test]
    fn if_null() {
        assert_eq!(value(bson!({"$ifNull": ["$nope", "$n", 3]})), bson!(3));
        assert_eq!(value(bson!({"$ifNull": ["$i", 3]})), bson!(5));
        assert_eq!(eval(bson!({"$ifNull": ["$n", "$nope"]})).unwrap(), None);
        assert_eq!(value(bson!({"$ifNull": ["$n", null]})), Bson::Null);
        assert_eq!(error_code(bson!({"$ifNull": ["$n"]})), 1257300);
    }

    #[test]
    fn switch() {
        let spec = |i: i32| {
            bson!({"$switch": {"branches": [
                {"case": {"$eq": [i, 1]}, "then": "one"},
                {"case": {"$eq": [i, 2]}, "then": "two"},
            ], "default": "many"}})
        };
        assert_eq!(value(spec(1)), bson!("one"));
        assert_eq!(value(spec(2)), bson!("two"));
        assert_eq!(value(spec(3)), bson!("many"));
        assert_eq!(
            error_code(bson!({"$switch": {"branches": [{"case": false, "then": 1}]}})),
            40066
        );
        assert_eq!(error_code(bson!({"$switch": {"branches": []}})), 40068);
        assert_eq!(error_code(bson!({"$switch": 1})), 40060);
        assert_eq!(
            error_code(bson!({"$switch": {"branches": [{"case": 1}]}})),
            40065
        );
        assert_eq!(
            error_code(bson!({"$switch": {"branches": [{"then": 1}]}})),
            40064
        );
        assert_eq!(error_code(bson!({"$switch": {"branches": [1]}})), 40062);
        assert_eq!(
            error_code(bson!({"$switch": {"branches": [], "x": 1}})),
            40067
        );
    }
}
