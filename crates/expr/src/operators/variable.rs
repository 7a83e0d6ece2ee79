//! `$let`: binds variables for a sub-expression. The values are computed in the outer
//! scope (so they cannot see each other), then bound on the stack for the body.

use crate::context::{ParseContext, VarId};
use crate::env::{Env, Value};
use crate::expression::Expression;
use basalt_error::{Error, Result};
use bson::Bson;
use std::borrow::Cow;

#[derive(Debug)]
pub(crate) struct Let {
    vars: Vec<(VarId, Expression)>,
    body: Box<Expression>,
}

impl Let {
    pub(crate) fn parse(name: &str, args: &Bson, ctx: &ParseContext) -> Result<Option<Let>> {
        if name != "$let" {
            return Ok(None);
        }
        let Bson::Document(doc) = args else {
            return Err(Error::location(
                16874,
                "$let only supports an object as its argument",
            ));
        };
        let (mut vars_spec, mut body_spec) = (None, None);
        for (key, value) in doc {
            match key.as_str() {
                "vars" => vars_spec = Some(value),
                "in" => body_spec = Some(value),
                _ => {
                    return Err(Error::location(
                        16875,
                        format!("Unrecognized parameter to $let: {key}"),
                    ))
                }
            }
        }
        let vars_spec =
            vars_spec.ok_or_else(|| Error::location(16876, "Missing 'vars' parameter to $let"))?;
        let body_spec =
            body_spec.ok_or_else(|| Error::location(16877, "Missing 'in' parameter to $let"))?;
        let Bson::Document(vars_doc) = vars_spec else {
            return Err(Error::location(
                10065,
                "invalid parameter: expected an object (vars)",
            ));
        };
        let mut inner = ctx.clone();
        let mut vars = Vec::with_capacity(vars_doc.len());
        for (var, spec) in vars_doc {
            let value = Expression::parse(spec, ctx)?;
            vars.push((inner.define(var)?, value));
        }
        Ok(Some(Let {
            vars,
            body: Box::new(Expression::parse(body_spec, &inner)?),
        }))
    }

    pub(crate) fn eval<'a>(&'a self, env: &Env<'a>) -> Result<Value<'a>> {
        let values = self
            .vars
            .iter()
            .map(|(_, e)| e.eval(env))
            .collect::<Result<Vec<_>>>()?;
        Ok(bind_and_eval(&self.body, *env, &self.vars, &values)?.map(Cow::Owned))
    }
}

/// Binds `vars[i]` to `values[i]` one scope at a time, then evaluates `body`.
fn bind_and_eval<'b>(
    body: &'b Expression,
    env: Env<'b>,
    vars: &[(VarId, Expression)],
    values: &'b [Value<'_>],
) -> Result<Option<Bson>> {
    match (vars.split_first(), values.split_first()) {
        (Some(((id, _), rest_vars)), Some((value, rest_values))) => {
            let binding = env.binding(*id, value.as_deref());
            bind_and_eval(body, env.with(&binding), rest_vars, rest_values)
        }
        _ => body.eval_owned(&env),
    }
}

#[cfg(test)]
mod tests {
    use crate::expression::test_util::*;
    use bson::bson;

    #[test]
    fn let_binds_variables() {
        assert_eq!(
            value(
                bson!({"$let": {"vars": {"x": "$i", "y": 2}, "in": {"$multiply": ["$$x", "$$y"]}}})
            ),
            bson!(10)
        );
        assert_eq!(
            value(
                bson!({"$let": {"vars": {"x": 1}, "in": {"$let": {"vars": {"x": 2}, "in": "$$x"}}}})
            ),
            bson!(2)
        );
        assert_eq!(
            value(bson!({"$let": {"vars": {"x": "$nope"}, "in": {"$ifNull": ["$$x", "dflt"]}}})),
            bson!("dflt")
        );
        assert_eq!(
            value(bson!({"$let": {"vars": {"CURRENT": "$o"}, "in": "$b.c"}})),
            bson!(2)
        );
        assert_eq!(
            value(bson!({"$let": {"vars": {"d": "$docs"}, "in": "$$d.x"}})),
            bson!([1, 2])
        );
    }

    #[test]
    fn let_errors() {
        assert_eq!(error_code(bson!({"$let": {"vars": {"x": 1}}})), 16877);
        assert_eq!(error_code(bson!({"$let": {"in": 1}})), 16876);
        assert_eq!(
            error_code(bson!({"$let": {"vars": {}, "in": 1, "z": 1}})),
            16875
        );
        assert_eq!(error_code(bson!({"$let": 1})), 16874);
        assert_eq!(error_code(bson!({"$let": {"vars": {"X": 1}, "in": 1}})), 9);
        assert_eq!(
            error_code(bson!({"$let": {"vars": {"x": "$$y"}, "in": 1}})),
            17276
        );
        assert_eq!(
            error_code(bson!({"$let": {"vars": {"x": 1, "y": "$$x"}, "in": 1}})),
            17276
        );
        assert_eq!(error_code(bson!("$$x")), 17276);
    }
}
