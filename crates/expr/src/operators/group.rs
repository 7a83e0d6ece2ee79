//! The accumulator operators used as expressions (`$sum $avg $min $max $stdDevPop
//! $stdDevSamp` inside `$project`): with one argument that is an array they aggregate
//! its elements, otherwise they aggregate their arguments.

use crate::accumulator::{Accumulator, AccumulatorKind};
use crate::context::ParseContext;
use crate::env::{Env, Value};
use crate::expression::{parse_operands, Expression};
use basalt_error::Result;
use bson::Bson;
use std::borrow::Cow;

#[derive(Debug)]
pub(crate) struct GroupOp {
    kind: AccumulatorKind,
    args: Vec<Expression>,
}

impl GroupOp {
    pub(crate) fn parse(name: &str, args: &Bson, ctx: &ParseContext) -> Result<Option<GroupOp>> {
        let kind = match name {
            "$sum" => AccumulatorKind::Sum,
            "$avg" => AccumulatorKind::Avg,
            "$min" => AccumulatorKind::Min,
            "$max" => AccumulatorKind::Max,
            "$stdDevPop" => AccumulatorKind::StdDevPop,
            "$stdDevSamp" => AccumulatorKind::StdDevSamp,
            _ => return Ok(None),
        };
        Ok(Some(GroupOp {
            kind,
            args: parse_operands(args, ctx)?,
        }))
    }

    pub(crate) fn eval<'a>(&'a self, env: &Env<'a>) -> Result<Value<'a>> {
        let mut acc = Accumulator::new(self.kind);
        if let [only] = self.args.as_slice() {
            match only.eval(env)?.as_deref() {
                Some(Bson::Array(items)) => {
                    for item in items {
                        acc.accumulate(Some(item))?;
                    }
                }
                other => acc.accumulate(other)?,
            }
        } else {
            for arg in &self.args {
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
}
