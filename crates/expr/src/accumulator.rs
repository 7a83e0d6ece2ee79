//! Accumulators: the running aggregates of `$group` (and later `$setWindowFields`):
//! `$sum $avg $min $max $first $last $push $addToSet $count $stdDevPop $stdDevSamp
//! $mergeObjects`.
//!
//! An [`Accumulator`] takes values one at a time, can absorb another accumulator's
//! partial state (so partitions of a collection can be aggregated in parallel and then
//! merged in partition order), and finishes into a value. The same code computes the
//! expression forms (`{$sum: [...]}` inside `$project`). `$accumulator` runs JavaScript
//! (`javascript_accumulator.rs`).

use crate::context::ParseContext;
use crate::expression::{is_nullish, Expression};
use crate::javascript_accumulator::{JavaScriptAccumulator, JavaScriptState};
use crate::numeric::{combine, decimal_from_f64};
use crate::operators::object::merge_into;
use basalt_error::{Error, ErrorCode, Result};
use basalt_value::number::ArithmeticOp;
use basalt_value::{compare_values, Number};
use bson::{Bson, Document};
use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::sync::Arc;

/// Which aggregate an accumulator computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccumulatorKind {
    Sum,
    Avg,
    Min,
    Max,
    First,
    Last,
    Push,
    AddToSet,
    StdDevPop,
    StdDevSamp,
    MergeObjects,
}

impl AccumulatorKind {
    /// The kind named by a `$group` operator such as `$sum`; `$count` is `$sum` of 1.
    pub fn from_name(name: &str) -> Option<AccumulatorKind> {
        Some(match name {
            "$sum" | "$count" => AccumulatorKind::Sum,
            "$avg" => AccumulatorKind::Avg,
            "$min" => AccumulatorKind::Min,
            "$max" => AccumulatorKind::Max,
            "$first" => AccumulatorKind::First,
            "$last" => AccumulatorKind::Last,
            "$push" => AccumulatorKind::Push,
            "$addToSet" => AccumulatorKind::AddToSet,
            "$stdDevPop" => AccumulatorKind::StdDevPop,
            "$stdDevSamp" => AccumulatorKind::StdDevSamp,
            "$mergeObjects" => AccumulatorKind::MergeObjects,
            _ => return None,
        })
    }
}

/// One output field of `$group`: `{field: {$op: <expression>}}`.
#[derive(Debug)]
pub struct AccumulatorSpec {
    kind: SpecKind,
    /// Evaluated per input document; its value is fed to the accumulator.
    pub argument: Expression,
}

impl AccumulatorSpec {
    /// Parses the value of one `$group` output field named `field`.
    pub fn parse(field: &str, spec: &Bson, ctx: &ParseContext) -> Result<AccumulatorSpec> {
        let Bson::Document(doc) = spec else {
            return Err(Error::location(
                40234,
                format!("The field '{field}' must be an accumulator object"),
            ));
        };
        if doc.len() != 1 {
            return Err(Error::location(
                40238,
                format!("The field '{field}' must specify one accumulator"),
            ));
        }
        let (name, arg) = doc.iter().next().expect("one field");
        if name == "$accumulator" {
            let (javascript, argument) = JavaScriptAccumulator::parse(arg, ctx)?;
            return Ok(AccumulatorSpec {
                kind: SpecKind::JavaScript(javascript),
                argument,
            });
        }
        let kind = AccumulatorKind::from_name(name)
            .ok_or_else(|| Error::location(15952, format!("unknown group operator '{name}'")))?;
        let argument = if name == "$count" {
            match arg {
                Bson::Document(d) if d.is_empty() => Expression::constant(Bson::Int32(1)),
                _ => {
                    return Err(Error::new(
                        ErrorCode::TYPE_MISMATCH,
                        "$count takes no arguments, i.e. $count:{}",
                    ))
                }
            }
        } else {
            if matches!(arg, Bson::Array(_)) {
                return Err(Error::location(
                    40237,
                    format!("The {name} accumulator is a unary operator"),
                ));
            }
            Expression::parse(arg, ctx)?
        };
        Ok(AccumulatorSpec {
            kind: SpecKind::Builtin(kind),
            argument,
        })
    }

    pub fn new_accumulator(&self) -> Accumulator {
        match &self.kind {
            SpecKind::Builtin(kind) => Accumulator::new(*kind),
            SpecKind::JavaScript(functions) => {
                Accumulator::JavaScript(JavaScriptState::new(functions.clone()))
            }
        }
    }
}

/// A built-in aggregate, or `$accumulator`'s JavaScript functions.
#[derive(Debug)]
enum SpecKind {
    Builtin(AccumulatorKind),
    JavaScript(Arc<JavaScriptAccumulator>),
}

/// The running state of one aggregate.
#[derive(Clone, Debug)]
pub enum Accumulator {
    Sum(Number),
    Avg {
        sum: Number,
        count: u64,
    },
    Min(Option<Bson>),
    Max(Option<Bson>),
    /// `None` until a document was seen; then its value (missing becomes null).
    First(Option<Bson>),
    Last(Option<Bson>),
    Push(Vec<Bson>),
    AddToSet(BTreeSet<OrderedBson>),
    StdDev {
        sample: bool,
        moments: Moments,
    },
    MergeObjects(Document),
    JavaScript(JavaScriptState),
}

/// Count, mean and sum of squared deviations (Welford), mergeable by Chan's formula.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Moments {
    count: u64,
    mean: f64,
    m2: f64,
}

impl Moments {
    fn add(&mut self, x: f64) {
        self.count += 1;
        let delta = x - self.mean;
        self.mean += delta / self.count as f64;
        self.m2 += delta * (x - self.mean);
    }

    fn merge(&mut self, other: Moments) {
        if other.count == 0 {
            return;
        }
        let total = self.count + other.count;
        let delta = other.mean - self.mean;
        self.m2 +=
            other.m2 + delta * delta * (self.count as f64 * other.count as f64) / total as f64;
        self.mean += delta * other.count as f64 / total as f64;
        self.count = total;
    }
}

/// A value ordered and deduplicated by MongoDB's comparison (so `1` and `1.0` are one
/// `$addToSet` member).
#[derive(Clone, Debug)]
pub struct OrderedBson(pub Bson);

impl PartialEq for OrderedBson {
    fn eq(&self, other: &Self) -> bool {
        compare_values(&self.0, &other.0) == Ordering::Equal
    }
}
impl Eq for OrderedBson {}
impl PartialOrd for OrderedBson {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for OrderedBson {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_values(&self.0, &other.0)
    }
}

impl Accumulator {
    pub fn new(kind: AccumulatorKind) -> Accumulator {
        match kind {
            AccumulatorKind::Sum => Accumulator::Sum(Number::Int32(0)),
            AccumulatorKind::Avg => Accumulator::Avg {
                sum: Number::Int32(0),
                count: 0,
            },
            AccumulatorKind::Min => Accumulator::Min(None),
            AccumulatorKind::Max => Accumulator::Max(None),
            AccumulatorKind::First => Accumulator::First(None),
            AccumulatorKind::Last => Accumulator::Last(None),
            AccumulatorKind::Push => Accumulator::Push(Vec::new()),
            AccumulatorKind::AddToSet => Accumulator::AddToSet(BTreeSet::new()),
            AccumulatorKind::StdDevPop => Accumulator::StdDev {
                sample: false,
                moments: Moments::default(),
            },
            AccumulatorKind::StdDevSamp => Accumulator::StdDev {
                sample: true,
                moments: Moments::default(),
            },
            AccumulatorKind::MergeObjects => Accumulator::MergeObjects(Document::new()),
        }
    }

    /// Takes one input value; `None` is missing.
    pub fn accumulate(&mut self, value: Option<&Bson>) -> Result<()> {
        match self {
            Accumulator::Sum(sum) => {
                if let Some(n) = value.and_then(Number::from_bson) {
                    *sum = combine(ArithmeticOp::Add, *sum, n);
                }
            }
            Accumulator::Avg { sum, count } => {
                if let Some(n) = value.and_then(Number::from_bson) {
                    *sum = combine(ArithmeticOp::Add, *sum, n);
                    *count += 1;
                }
            }
            Accumulator::Min(best) => {
                if let Some(v) = value.filter(|v| beats(best, v, Ordering::Less)) {
                    *best = Some(v.clone());
                }
            }
            Accumulator::Max(best) => {
                if let Some(v) = value.filter(|v| beats(best, v, Ordering::Greater)) {
                    *best = Some(v.clone());
                }
            }
            Accumulator::First(first) => {
                if first.is_none() {
                    *first = Some(value.cloned().unwrap_or(Bson::Null));
                }
            }
            Accumulator::Last(last) => *last = Some(value.cloned().unwrap_or(Bson::Null)),
            Accumulator::Push(items) => {
                if let Some(v) = value {
                    items.push(v.clone());
                }
            }
            Accumulator::AddToSet(set) => {
                if let Some(v) = value {
                    set.insert(OrderedBson(v.clone()));
                }
            }
            Accumulator::StdDev { moments, .. } => {
                if let Some(n) = value.and_then(Number::from_bson) {
                    moments.add(n.to_f64());
                }
            }
            Accumulator::MergeObjects(doc) => merge_into(doc, value)?,
            Accumulator::JavaScript(state) => state.accumulate(value)?,
        }
        Ok(())
    }

    /// Absorbs the partial state of `later`, an accumulator of the same kind that saw
    /// the documents after the ones this one saw.
    pub fn merge(&mut self, later: Accumulator) -> Result<()> {
        match (self, later) {
            (Accumulator::Sum(a), Accumulator::Sum(b)) => *a = combine(ArithmeticOp::Add, *a, b),
            (
                Accumulator::Avg { sum, count },
                Accumulator::Avg {
                    sum: other_sum,
                    count: other_count,
                },
            ) => {
                *sum = combine(ArithmeticOp::Add, *sum, other_sum);
                *count += other_count;
            }
            (Accumulator::Min(best), Accumulator::Min(other)) => {
                if let Some(v) = other.filter(|v| beats(best, v, Ordering::Less)) {
                    *best = Some(v);
                }
            }
            (Accumulator::Max(best), Accumulator::Max(other)) => {
                if let Some(v) = other.filter(|v| beats(best, v, Ordering::Greater)) {
                    *best = Some(v);
                }
            }
            (Accumulator::First(a), Accumulator::First(b)) => {
                if a.is_none() {
                    *a = b;
                }
            }
            (Accumulator::Last(a), Accumulator::Last(b)) => {
                if b.is_some() {
                    *a = b;
                }
            }
            (Accumulator::Push(a), Accumulator::Push(b)) => a.extend(b),
            (Accumulator::AddToSet(a), Accumulator::AddToSet(b)) => a.extend(b),
            (Accumulator::StdDev { moments: a, .. }, Accumulator::StdDev { moments: b, .. }) => {
                a.merge(b)
            }
            (Accumulator::MergeObjects(a), Accumulator::MergeObjects(b)) => {
                for (k, v) in b {
                    a.insert(k, v);
                }
            }
            (Accumulator::JavaScript(a), Accumulator::JavaScript(b)) => a.merge(b)?,
            (me, other) => {
                return Err(Error::internal(format!(
                    "cannot merge accumulator {other:?} into {me:?}"
                )))
            }
        }
        Ok(())
    }

    /// The aggregate's value; `$accumulator`'s finalize may fail.
    pub fn finish(self) -> Result<Bson> {
        Ok(match self {
            Accumulator::Sum(sum) => sum.to_bson(),
            Accumulator::Avg { count: 0, .. } => Bson::Null,
            Accumulator::Avg { sum, count } => {
                let mean = sum.to_f64() / count as f64;
                match sum {
                    Number::Decimal(_) => Bson::Decimal128(decimal_from_f64(mean)),
                    _ => Bson::Double(mean),
                }
            }
            Accumulator::Min(v) | Accumulator::Max(v) => v.unwrap_or(Bson::Null),
            Accumulator::First(v) | Accumulator::Last(v) => v.unwrap_or(Bson::Null),
            Accumulator::Push(items) => Bson::Array(items),
            Accumulator::AddToSet(set) => Bson::Array(set.into_iter().map(|v| v.0).collect()),
            Accumulator::StdDev { sample, moments } => {
                let divisor = if sample {
                    moments.count.saturating_sub(1)
                } else {
                    moments.count
                };
                if divisor == 0 {
                    Bson::Null
                } else {
                    Bson::Double((moments.m2.max(0.0) / divisor as f64).sqrt())
                }
            }
            Accumulator::MergeObjects(doc) => Bson::Document(doc),
            Accumulator::JavaScript(state) => state.finish()?,
        })
    }
}

/// Whether `candidate` should replace the current extreme of a `$min`/`$max`, which
/// ignore null and missing.
fn beats(best: &Option<Bson>, candidate: &Bson, want: Ordering) -> bool {
    if is_nullish(Some(candidate)) {
        return false;
    }
    match best {
        None => true,
        Some(current) => compare_values(candidate, current) == want,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{bson, Decimal128};
    use std::str::FromStr;

    fn run(kind: AccumulatorKind, values: &[Option<Bson>]) -> Bson {
        let mut acc = Accumulator::new(kind);
        for v in values {
            acc.accumulate(v.as_ref()).unwrap();
        }
        acc.finish().unwrap()
    }

    /// Splits the input in two, accumulates each half and merges: must equal `run`.
    fn run_split(kind: AccumulatorKind, values: &[Option<Bson>]) -> Bson {
        let (left, right) = values.split_at(values.len() / 2);
        let mut a = Accumulator::new(kind);
        let mut b = Accumulator::new(kind);
        for v in left {
            a.accumulate(v.as_ref()).unwrap();
        }
        for v in right {
            b.accumulate(v.as_ref()).unwrap();
        }
        a.merge(b).unwrap();
        a.finish().unwrap()
    }

    fn both(kind: AccumulatorKind, values: &[Option<Bson>]) -> Bson {
        let whole = run(kind, values);
        assert_eq!(whole, run_split(kind, values), "{kind:?} merge differs");
        whole
    }

    fn some(values: &[Bson]) -> Vec<Option<Bson>> {
        values.iter().cloned().map(Some).collect()
    }

    #[test]
    fn sum_and_avg() {
        use AccumulatorKind::*;
        assert_eq!(
            both(Sum, &some(&[bson!(1), bson!(2), bson!("x")])),
            bson!(3)
        );
        assert_eq!(
            both(Sum, &some(&[bson!(i32::MAX), bson!(1)])),
            bson!(2147483648_i64)
        );
        assert_eq!(both(Sum, &some(&[bson!(1), bson!(2.5)])), bson!(3.5));
        assert_eq!(both(Sum, &[]), bson!(0));
        let dec = Bson::Decimal128(Decimal128::from_str("1.5").unwrap());
        assert_eq!(
            both(Sum, &some(&[bson!(1), dec])),
            Bson::Decimal128(Decimal128::from_str("2.5").unwrap())
        );
        assert_eq!(
            both(Avg, &some(&[bson!(1), bson!(2), bson!(null)])),
            bson!(1.5)
        );
        assert_eq!(both(Avg, &[None]), Bson::Null);
    }

    #[test]
    fn min_max_first_last() {
        use AccumulatorKind::*;
        let values = vec![
            None,
            Some(bson!(3)),
            Some(Bson::Null),
            Some(bson!("a")),
            Some(bson!(1)),
        ];
        assert_eq!(both(Min, &values), bson!(1));
        assert_eq!(both(Max, &values), bson!("a"));
        assert_eq!(both(Min, &[None, Some(Bson::Null)]), Bson::Null);
        assert_eq!(both(First, &values), Bson::Null);
        assert_eq!(both(Last, &values), bson!(1));
        assert_eq!(both(First, &some(&[bson!(7), bson!(8)])), bson!(7));
    }

    #[test]
    fn push_add_to_set_merge_objects() {
        use AccumulatorKind::*;
        let values = vec![Some(bson!(2)), None, Some(bson!(1)), Some(bson!(2.0))];
        assert_eq!(both(Push, &values), bson!([2, 1, 2.0]));
        assert_eq!(both(AddToSet, &values), bson!([1, 2]));
        assert_eq!(
            both(
                MergeObjects,
                &[
                    Some(bson!({"a": 1})),
                    None,
                    Some(Bson::Null),
                    Some(bson!({"b": 2, "a": 3}))
                ]
            ),
            bson!({"a": 3, "b": 2})
        );
        let mut acc = Accumulator::new(MergeObjects);
        assert_eq!(acc.accumulate(Some(&bson!(1))).unwrap_err().code.0, 40400);
    }

    #[test]
    fn standard_deviation() {
        use AccumulatorKind::*;
        let values = some(&[
            bson!(2),
            bson!(4),
            bson!(4),
            bson!(4),
            bson!(5),
            bson!(5),
            bson!(7),
            bson!(9),
        ]);
        assert_eq!(both(StdDevPop, &values), bson!(2.0));
        let samp = both(StdDevSamp, &values).as_f64().unwrap();
        assert!((samp - 2.138_089_935_299_395).abs() < 1e-12);
        assert_eq!(both(StdDevSamp, &some(&[bson!(1)])), Bson::Null);
        assert_eq!(both(StdDevPop, &some(&[bson!("x")])), Bson::Null);
    }

    #[test]
    fn specs() {
        let ctx = ParseContext::new();
        let spec = AccumulatorSpec::parse("n", &bson!({"$count": {}}), &ctx).unwrap();
        assert!(matches!(spec.kind, SpecKind::Builtin(AccumulatorKind::Sum)));
        assert_eq!(spec.argument.as_constant(), Some(&bson!(1)));
        let code = |spec: Bson| AccumulatorSpec::parse("f", &spec, &ctx).unwrap_err().code.0;
        assert_eq!(code(bson!(1)), 40234);
        assert_eq!(code(bson!({"$sum": 1, "$avg": 1})), 40238);
        assert_eq!(code(bson!({"$foo": 1})), 15952);
        assert_eq!(code(bson!({"$sum": [1, 2]})), 40237);
        assert_eq!(code(bson!({"$count": 1})), 14);
    }
}
