//! The accumulator operators used as expressions (`$sum $avg $min $max $stdDevPop
//! $stdDevSamp` inside `$project`): with one argument that is an array they aggregate
//! its elements, otherwise they aggregate their arguments. Also the array forms of the
//! selecting accumulators (`{$firstN: {n, input}}`, `$lastN $minN $maxN`) and
//! `$median`/`$percentile` over an array.

use crate::accumulator::{Accumulator, AccumulatorKind, QuantileExpression, SelectionExpression};
use crate::context::ParseContext;
use crate::env::{Env, Value};
use crate::expression::{parse_operands, Expression};
use basalt_error::Result;
use bson::Bson;
use std::borrow::Cow;

#[derive(Debug)]
pub(crate) enum GroupOp {
    Aggregate {
        kind: AccumulatorKind,
        args: Vec<Expression>,
    },
    Selection(Box<SelectionExpression>),
    Quantile(Box<QuantileExpression>),
}

impl GroupOp {
    pub(crate) fn parse(name: &str, args: &Bson, ctx: &ParseContext) -> Result<Option<GroupOp>> {
        if let Some(op) = SelectionExpression::parse(name, args, ctx)? {
            return Ok(Some(GroupOp::Selection(Box::new(op))));
        }
        if let Some(op) = QuantileExpression::parse(name, args, ctx)? {
            return Ok(Some(GroupOp::Quantile(Box::new(op))));
        }
        let kind = match name {
            "$sum" => AccumulatorKind::Sum,
            "$avg" => AccumulatorKind::Avg,
            "$min" => AccumulatorKind::Min,
            "$max" => AccumulatorKind::Max,
            "$stdDevPop" => AccumulatorKind::StdDevPop,
            "$stdDevSamp" => AccumulatorKind::StdDevSamp,
            _ => return Ok(None),
        };
        Ok(Some(GroupOp::Aggregate {
            kind,
            args: parse_operands(args, ctx)?,
        }))
    }

    pub(crate) fn eval<'a>(&'a self, env: &Env<'a>) -> Result<Value<'a>> {
        let (kind, args) = match self {
            GroupOp::Aggregate { kind, args } => (*kind, args),
            GroupOp::Selection(op) => return Ok(Some(Cow::Owned(op.eval(env)?))),
            GroupOp::Quantile(op) => return Ok(Some(Cow::Owned(op.eval(env)?))),
        };
        let mut acc = Accumulator::for_expression(kind);
        if let [only] = args.as_slice() {
            match only.eval(env)?.as_deref() {
                Some(Bson::Array(items)) => {
                    for item in items {
                        acc.accumulate(Some(item))?;
                    }
                }
                other => {
                    acc.accumulate(other)?;
                }
            }
        } else {
            for arg in args {
                acc.accumulate(arg.eval(env)?.as_deref())?;
            }
        }
        Ok(Some(Cow::Owned(acc.finish()?)))
    }
}

#[cfg(test)]
mod tests {
    use crate::expression::test_util::*;
    use bson::{bson, Bson};

    #[test]
    fn accumulators_as_expressions() {
        assert_eq!(value(bson!({"$sum": "$arr"})), bson!(6));
        assert_eq!(value(bson!({"$sum": ["$i", "$d", "$s"]})), bson!(7.5));
        assert_eq!(value(bson!({"$sum": "$nope"})), bson!(0));
        assert_eq!(value(bson!({"$avg": "$arr"})), bson!(2.0));
        assert_eq!(value(bson!({"$avg": "$s"})), Bson::Null);
        assert_eq!(value(bson!({"$max": ["$i", "$l", null]})), bson!(7_i64));
        assert_eq!(value(bson!({"$min": "$docs.x"})), bson!(1));
        assert_eq!(value(bson!({"$stdDevPop": [[1, 3]]})), bson!(1.0));
    }

    #[test]
    fn selections_as_expressions() {
        let arr = bson!([3, null, 1, 2]);
        let n =
            |op: &str, n: Bson| value(bson!({op: {"n": n, "input": {"$literal": arr.clone()}}}));
        assert_eq!(n("$firstN", bson!(2)), bson!([3, null]));
        assert_eq!(n("$lastN", bson!(2_i64)), bson!([1, 2]));
        assert_eq!(n("$minN", bson!(2.0)), bson!([1, 2]));
        assert_eq!(n("$maxN", bson!(10)), bson!([3, 2, 1]));
        assert_eq!(
            value(bson!({"$firstN": {"n": "$i", "input": "$arr"}})),
            bson!([1, 2, 3])
        );
        assert_eq!(
            error_code(bson!({"$firstN": {"n": 1, "input": "$i"}})),
            5788200
        );
        assert_eq!(
            error_code(bson!({"$firstN": {"n": 0, "input": "$arr"}})),
            5787908
        );
        assert_eq!(
            error_code(bson!({"$lastN": {"n": 1.5, "input": "$arr"}})),
            5787903
        );
        assert_eq!(
            error_code(bson!({"$maxN": {"n": "x", "input": "$arr"}})),
            5787902
        );
        assert_eq!(error_code(bson!({"$minN": {"n": 1}})), 5787907);
        assert_eq!(error_code(bson!({"$minN": {"input": []}})), 5787906);
        assert_eq!(
            error_code(bson!({"$minN": {"n": 1, "input": [], "x": 1}})),
            5787901
        );
        assert_eq!(error_code(bson!({"$firstN": [1]})), 5787801);
        assert_eq!(error_code(bson!({"$maxN": 1})), 5787900);
    }

    #[test]
    fn quantiles_as_expressions() {
        let m = "approximate";
        assert_eq!(
            value(bson!({"$median": {"input": [4, 1, "x", 3, 2], "method": m}})),
            bson!(2.0)
        );
        assert_eq!(
            value(bson!({"$percentile": {"input": "$arr", "p": [0, 0.5, 0.9, 1], "method": m}})),
            bson!([1.0, 2.0, 3.0, 3.0])
        );
        assert_eq!(
            value(bson!({"$median": {"input": "$i", "method": m}})),
            bson!(5.0)
        );
        assert_eq!(
            value(bson!({"$percentile": {"input": "$s", "p": [0.5, 0.1], "method": m}})),
            bson!([null, null])
        );
        assert_eq!(error_code(bson!({"$median": 1})), 7436201);
        assert_eq!(error_code(bson!({"$percentile": 1})), 7436200);
        assert_eq!(error_code(bson!({"$median": {"input": 1}})), 40414);
        assert_eq!(
            error_code(bson!({"$median": {"input": 1, "method": "exact"}})),
            2
        );
        assert_eq!(
            error_code(bson!({"$median": {"input": 1, "method": 1}})),
            14
        );
        assert_eq!(
            error_code(bson!({"$median": {"input": 1, "p": [0.5], "method": m}})),
            40415
        );
        let p = |p: Bson| error_code(bson!({"$percentile": {"input": 1, "p": p, "method": m}}));
        assert_eq!(p(bson!("$arr")), 7750300);
        assert_eq!(p(bson!([])), 7750301);
        assert_eq!(p(bson!(["a"])), 7750302);
        assert_eq!(p(bson!([1.5])), 7750303);
    }
}
