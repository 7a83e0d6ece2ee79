//! Accumulators: the running aggregates of `$group` and `$setWindowFields`: `$sum $avg
//! $min $max $first $last $push $addToSet $count $stdDevPop $stdDevSamp $mergeObjects`
//! here, the ones that keep `n` chosen values (`$firstN $lastN $minN $maxN $top $bottom
//! $topN $bottomN`) in `selection.rs`, `$median`/`$percentile` in `quantile.rs`.
//!
//! An [`Accumulator`] takes values one at a time, can absorb another accumulator's
//! partial state (so partitions of a collection can be aggregated in parallel and then
//! merged in partition order), and finishes into a value. The same code computes the
//! expression forms (`{$sum: [...]}` inside `$project`). `$accumulator` runs JavaScript
//! (`javascript_accumulator.rs`).

mod quantile;
mod selection;

pub(crate) use quantile::QuantileExpression;
pub use quantile::{Quantile, QuantileSpec};
pub(crate) use selection::{parse_sort_by, KeyOrder, SelectionExpression};
pub use selection::{Selection, SelectionSpec, Selector};

use crate::context::ParseContext;
use crate::expression::{is_nullish, Expression};
use crate::javascript_accumulator::{JavaScriptAccumulator, JavaScriptState};
use crate::operators::object::merge_into;
use basalt_error::{Error, ErrorCode, Result};
use basalt_value::summation::Summation;
use basalt_value::{compare_values, value_memory_bytes, Number};
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
    /// `$concatArrays` (MongoDB 8.1): the elements of array values, in order.
    ConcatArrays,
    AddToSet,
    /// `$setUnion` (MongoDB 8.1): the set of the elements of array values.
    SetUnion,
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
            "$concatArrays" => AccumulatorKind::ConcatArrays,
            "$addToSet" => AccumulatorKind::AddToSet,
            "$setUnion" => AccumulatorKind::SetUnion,
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
        AccumulatorSpec::parse_with(field, spec, ctx, false)
    }

    /// Parses an accumulator used as a window function (`name` and its argument, of a
    /// `$setWindowFields` output): there the operand is one expression, so an array is
    /// an array value (which `$stdDevPop` and the like skip as not a number) where
    /// `$group` refuses it (40237).
    pub fn parse_window(name: &str, arg: &Bson, ctx: &ParseContext) -> Result<AccumulatorSpec> {
        let spec = Bson::Document(bson::doc! {name: arg.clone()});
        AccumulatorSpec::parse_with(name, &spec, ctx, true)
    }

    fn parse_with(
        field: &str,
        spec: &Bson,
        ctx: &ParseContext,
        array_operand: bool,
    ) -> Result<AccumulatorSpec> {
        let doc = match spec {
            Bson::Document(doc) if doc.keys().next().is_some_and(|n| n.starts_with('$')) => doc,
            _ => {
                return Err(Error::location(
                    40234,
                    format!("The field '{field}' must be an accumulator object"),
                ))
            }
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
        if let Some(selector) = Selector::from_name(name) {
            let (spec, argument) = SelectionSpec::parse(selector, name, arg, ctx)?;
            return Ok(AccumulatorSpec {
                kind: SpecKind::Selection(Arc::new(spec)),
                argument,
            });
        }
        if name == "$median" || name == "$percentile" {
            let (spec, argument) = QuantileSpec::parse(name, arg, ctx, false)?;
            return Ok(AccumulatorSpec {
                kind: SpecKind::Quantile(Arc::new(spec)),
                argument,
            });
        }
        // The others take one argument: an array is refused before the name is looked
        // up, as MongoDB does.
        if !array_operand && matches!(arg, Bson::Array(_)) {
            return Err(Error::location(
                40237,
                format!("The {name} accumulator is a unary operator"),
            ));
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
            SpecKind::Selection(spec) => Accumulator::Selection(Selection::new(spec.clone())),
            SpecKind::Quantile(spec) => Accumulator::Quantile(Quantile::new(spec.clone())),
        }
    }
}

/// A built-in aggregate, one with parameters, or `$accumulator`'s JavaScript functions.
#[derive(Debug)]
enum SpecKind {
    Builtin(AccumulatorKind),
    Selection(Arc<SelectionSpec>),
    Quantile(Arc<QuantileSpec>),
    JavaScript(Arc<JavaScriptAccumulator>),
}

/// The running state of one aggregate.
#[derive(Clone, Debug)]
pub enum Accumulator {
    Sum(Summation),
    Avg {
        sum: Summation,
        count: u64,
        /// The expression form, which adds integers as doubles.
        integers_as_doubles: bool,
    },
    Min(Option<Bson>),
    Max(Option<Bson>),
    /// `None` until a document was seen; then its value (missing becomes null).
    First(Option<Bson>),
    Last(Option<Bson>),
    /// `$push`, or with `concat` `$concatArrays`, whose values are arrays whose
    /// elements are pushed.
    Push {
        items: Vec<Bson>,
        memory_bytes: usize,
        concat: bool,
    },
    /// `$addToSet`, or with `union` `$setUnion`, whose values are arrays whose elements
    /// go into the set.
    AddToSet {
        set: BTreeSet<OrderedBson>,
        memory_bytes: usize,
        union: bool,
    },
    StdDev {
        sample: bool,
        moments: Moments,
    },
    MergeObjects(Document),
    Selection(Selection),
    Quantile(Quantile),
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
    /// The state of an accumulator used as an expression (`{$avg: [...]}`), which
    /// differs from `$group`'s only in `$avg` adding integers as doubles.
    pub(crate) fn for_expression(kind: AccumulatorKind) -> Accumulator {
        match Accumulator::new(kind) {
            Accumulator::Avg { sum, count, .. } => Accumulator::Avg {
                sum,
                count,
                integers_as_doubles: true,
            },
            other => other,
        }
    }

    pub fn new(kind: AccumulatorKind) -> Accumulator {
        match kind {
            AccumulatorKind::Sum => Accumulator::Sum(Summation::default()),
            AccumulatorKind::Avg => Accumulator::Avg {
                sum: Summation::default(),
                count: 0,
                integers_as_doubles: false,
            },
            AccumulatorKind::Min => Accumulator::Min(None),
            AccumulatorKind::Max => Accumulator::Max(None),
            AccumulatorKind::First => Accumulator::First(None),
            AccumulatorKind::Last => Accumulator::Last(None),
            AccumulatorKind::Push | AccumulatorKind::ConcatArrays => Accumulator::Push {
                items: Vec::new(),
                memory_bytes: 0,
                concat: kind == AccumulatorKind::ConcatArrays,
            },
            AccumulatorKind::AddToSet | AccumulatorKind::SetUnion => Accumulator::AddToSet {
                set: BTreeSet::new(),
                memory_bytes: 0,
                union: kind == AccumulatorKind::SetUnion,
            },
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

    /// Takes one input value (`None` is missing); returns how many bytes of memory the
    /// state grew by (negative when it shrank), which `$group` charges to its limit.
    pub fn accumulate(&mut self, value: Option<&Bson>) -> Result<isize> {
        let grown = match self {
            Accumulator::Sum(sum) => {
                if let Some(n) = value.and_then(Number::from_bson) {
                    sum.add(n);
                }
                0
            }
            Accumulator::Avg {
                sum,
                count,
                integers_as_doubles,
            } => {
                if let Some(n) = value.and_then(Number::from_bson) {
                    if *integers_as_doubles {
                        sum.add_as_double(n);
                    } else {
                        sum.add(n);
                    }
                    *count += 1;
                }
                0
            }
            Accumulator::Min(best) => match value.filter(|v| beats(best, v, Ordering::Less)) {
                Some(v) => replace(best, v.clone()),
                None => 0,
            },
            Accumulator::Max(best) => match value.filter(|v| beats(best, v, Ordering::Greater)) {
                Some(v) => replace(best, v.clone()),
                None => 0,
            },
            Accumulator::First(first) => {
                if first.is_some() {
                    return Ok(0);
                }
                replace(first, value.cloned().unwrap_or(Bson::Null))
            }
            Accumulator::Last(last) => replace(last, value.cloned().unwrap_or(Bson::Null)),
            Accumulator::Push {
                items,
                memory_bytes,
                concat,
            } => {
                let Some(v) = value else { return Ok(0) };
                let operator = if *concat { "$concatArrays" } else { "$push" };
                let mut grown = 0;
                for item in added(v, concat.then_some(operator))? {
                    let size = value_memory_bytes(item);
                    keep(operator, memory_bytes, size)?;
                    items.push(item.clone());
                    grown += size as isize;
                }
                grown
            }
            Accumulator::AddToSet {
                set,
                memory_bytes,
                union,
            } => {
                let Some(v) = value else { return Ok(0) };
                let operator = if *union { "$setUnion" } else { "$addToSet" };
                let members = added(v, union.then_some(operator))?;
                let mut grown = 0;
                for member in members {
                    let member = OrderedBson(member.clone());
                    if set.contains(&member) {
                        continue;
                    }
                    let size = value_memory_bytes(&member.0);
                    keep(operator, memory_bytes, size)?;
                    set.insert(member);
                    grown += size as isize;
                }
                grown
            }
            Accumulator::StdDev { moments, .. } => {
                if let Some(n) = value.and_then(Number::from_bson) {
                    moments.add(n.to_f64());
                }
                0
            }
            Accumulator::MergeObjects(doc) => merge_into(doc, value, 5911200)?,
            Accumulator::Selection(state) => state.accumulate(value)?,
            Accumulator::Quantile(state) => state.accumulate(value),
            Accumulator::JavaScript(state) => state.accumulate(value)?,
        };
        Ok(grown)
    }

    /// Whether the state grows with every value (kept values rather than a running
    /// figure), so that a window over it is better computed afresh than merged.
    pub fn keeps_values(&self) -> bool {
        matches!(
            self,
            Accumulator::Push { .. }
                | Accumulator::AddToSet { .. }
                | Accumulator::MergeObjects(_)
                | Accumulator::Quantile(_)
                | Accumulator::JavaScript(_)
        )
    }

    /// Absorbs the partial state of `later`, an accumulator of the same kind that saw
    /// the documents after the ones this one saw.
    pub fn merge(&mut self, later: Accumulator) -> Result<()> {
        match (self, later) {
            (Accumulator::Sum(a), Accumulator::Sum(b)) => a.merge(b),
            (
                Accumulator::Avg { sum, count, .. },
                Accumulator::Avg {
                    sum: other_sum,
                    count: other_count,
                    ..
                },
            ) => {
                sum.merge(other_sum);
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
            (
                Accumulator::Push {
                    items,
                    memory_bytes,
                    concat,
                },
                Accumulator::Push {
                    items: later,
                    memory_bytes: later_bytes,
                    ..
                },
            ) => {
                let operator = if *concat { "$concatArrays" } else { "$push" };
                keep(operator, memory_bytes, later_bytes)?;
                items.extend(later);
            }
            (
                Accumulator::AddToSet {
                    set,
                    memory_bytes,
                    union,
                },
                Accumulator::AddToSet { set: later, .. },
            ) => {
                let operator = if *union { "$setUnion" } else { "$addToSet" };
                for v in later {
                    if !set.contains(&v) {
                        keep(operator, memory_bytes, value_memory_bytes(&v.0))?;
                        set.insert(v);
                    }
                }
            }
            (Accumulator::StdDev { moments: a, .. }, Accumulator::StdDev { moments: b, .. }) => {
                a.merge(b)
            }
            (Accumulator::MergeObjects(a), Accumulator::MergeObjects(b)) => {
                for (k, v) in b {
                    a.insert(k, v);
                }
            }
            (Accumulator::Selection(a), Accumulator::Selection(b)) => a.merge(b),
            (Accumulator::Quantile(a), Accumulator::Quantile(b)) => a.merge(b),
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
            Accumulator::Sum(sum) => sum.total(),
            Accumulator::Avg { sum, count, .. } => sum.mean(count),
            Accumulator::Min(v) | Accumulator::Max(v) => v.unwrap_or(Bson::Null),
            Accumulator::First(v) | Accumulator::Last(v) => v.unwrap_or(Bson::Null),
            Accumulator::Push { items, .. } => Bson::Array(items),
            Accumulator::AddToSet { set, .. } => {
                Bson::Array(set.into_iter().map(|v| v.0).collect())
            }
            Accumulator::StdDev { sample, moments } => {
                let divisor = if sample {
                    moments.count.saturating_sub(1)
                } else {
                    moments.count
                };
                if divisor == 0 {
                    Bson::Null
                } else {
                    // Rounding may leave a tiny negative; a NaN (an infinity among the
                    // values) stays NaN, as `f64::max` would not keep it.
                    let m2 = if moments.m2 < 0.0 { 0.0 } else { moments.m2 };
                    Bson::Double((m2 / divisor as f64).sqrt())
                }
            }
            Accumulator::MergeObjects(doc) => Bson::Document(doc),
            Accumulator::Selection(state) => state.finish(),
            Accumulator::Quantile(state) => state.finish(),
            Accumulator::JavaScript(state) => state.finish()?,
        })
    }
}

/// What one value adds to a `$push` or `$addToSet`: itself; or, for the accumulators of
/// arrays (`of_arrays` names `$concatArrays` or `$setUnion`), its elements, which an
/// array must hold (TypeMismatch otherwise, null included).
fn added<'v>(value: &'v Bson, of_arrays: Option<&str>) -> Result<&'v [Bson]> {
    match (value, of_arrays) {
        (_, None) => Ok(std::slice::from_ref(value)),
        (Bson::Array(items), Some(_)) => Ok(items),
        (other, Some(operator)) => Err(Error::type_mismatch(format!(
            "{operator} requires array values, but found {}",
            crate::type_name(Some(other))
        ))),
    }
}

/// MongoDB's internalQueryMaxPushBytes and internalQueryMaxAddToSetBytes: the memory
/// the values of one `$push` or `$addToSet` may hold. They cannot spill.
pub const KEPT_VALUES_MEMORY_BYTES_MAX: usize = 100 * 1024 * 1024;

/// Counts `bytes` more for the values of `operator`, or refuses them past the limit with
/// MongoDB's error.
fn keep(operator: &str, memory_bytes: &mut usize, bytes: usize) -> Result<()> {
    let used = *memory_bytes + bytes;
    if used > KEPT_VALUES_MEMORY_BYTES_MAX {
        let used_part = if operator == "$addToSet" {
            format!(" Used: {used} bytes.")
        } else {
            String::new()
        };
        return Err(Error::new(
            ErrorCode::EXCEEDED_MEMORY_LIMIT,
            format!(
                "{operator} used too much memory and cannot spill to disk.{used_part} Memory \
                 limit: {KEPT_VALUES_MEMORY_BYTES_MAX} bytes"
            ),
        ));
    }
    *memory_bytes = used;
    Ok(())
}

/// Puts `value` in `slot`; returns the bytes of memory this added (negative when the
/// value replaced a larger one).
pub(crate) fn replace(slot: &mut Option<Bson>, value: Bson) -> isize {
    let grown = value_memory_bytes(&value) as isize;
    let shrunk = slot.as_ref().map_or(0, value_memory_bytes) as isize;
    *slot = Some(value);
    grown - shrunk
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
    use crate::context::Variables;
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
        // Compensated whole and merged from halves.
        assert_eq!(both(Sum, &some(&vec![bson!(0.1); 10])), bson!(1.0));
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
        assert_eq!(acc.accumulate(Some(&bson!(1))).unwrap_err().code.0, 5911200);
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
        // An infinity makes the variance NaN (∞ - ∞), as MongoDB's accumulator gives it.
        let infinite = run(StdDevPop, &some(&[bson!(f64::INFINITY)]));
        assert!(matches!(infinite, Bson::Double(x) if x.is_nan()));
    }

    /// Runs the accumulator of `{$op: arg}` over `values` whole and split in two halves
    /// then merged; both must agree.
    fn spec_both(spec: Bson, values: &[Bson]) -> Bson {
        let spec = AccumulatorSpec::parse("f", &spec, &ParseContext::new()).unwrap();
        let ctx = Variables::new();
        let args: Vec<Option<Bson>> = values
            .iter()
            .map(|v| {
                spec.argument
                    .evaluate(v.as_document().unwrap(), &ctx)
                    .unwrap()
            })
            .collect();
        let mut whole = spec.new_accumulator();
        for a in &args {
            whole.accumulate(a.as_ref()).unwrap();
        }
        for split in 0..=args.len() {
            let (mut left, mut right) = (spec.new_accumulator(), spec.new_accumulator());
            for a in &args[..split] {
                left.accumulate(a.as_ref()).unwrap();
            }
            for a in &args[split..] {
                right.accumulate(a.as_ref()).unwrap();
            }
            left.merge(right).unwrap();
            assert_eq!(
                left.finish().unwrap(),
                whole.clone().finish().unwrap(),
                "split at {split}"
            );
        }
        whole.finish().unwrap()
    }

    fn scores() -> Vec<Bson> {
        vec![
            bson!({"p": "a", "s": 5, "t": [1, 9]}),
            bson!({"p": "b", "s": null, "t": 4}),
            bson!({"p": "c", "s": 8}),
            bson!({"p": "d", "s": 5, "t": []}),
            bson!({"p": "e", "s": 2, "t": 3}),
        ]
    }

    #[test]
    fn first_last_min_max_n() {
        let n = |op: &str, n: i32| spec_both(bson!({op: {"n": n, "input": "$s"}}), &scores());
        assert_eq!(n("$firstN", 3), bson!([5, null, 8]));
        assert_eq!(n("$lastN", 3), bson!([8, 5, 2]));
        assert_eq!(n("$lastN", 9), bson!([5, null, 8, 5, 2]));
        assert_eq!(n("$minN", 2), bson!([2, 5]));
        assert_eq!(n("$maxN", 3), bson!([8, 5, 5]));
        assert_eq!(n("$maxN", 9), bson!([8, 5, 5, 2]));
    }

    #[test]
    fn n_may_come_from_the_documents() {
        // MongoDB lets `n` depend on the group key; the documents of a group carry it.
        let docs: Vec<Bson> = [3, 1, 4, 1, 5]
            .iter()
            .map(|v| bson!({"k": 2, "v": v}))
            .collect();
        let first = bson!({"$firstN": {"n": {"$add": ["$k", 1]}, "input": "$v"}});
        assert_eq!(spec_both(first, &docs), bson!([3, 1, 4]));
        let top = bson!({"$topN": {"n": "$k", "sortBy": {"v": -1}, "output": "$v"}});
        assert_eq!(spec_both(top, &docs), bson!([5, 4]));
        let spec = AccumulatorSpec::parse(
            "f",
            &bson!({"$maxN": {"n": "$k", "input": "$v"}}),
            &ParseContext::new(),
        )
        .unwrap();
        let mut acc = spec.new_accumulator();
        let arg = spec
            .argument
            .evaluate(&bson::doc! {"k": 0, "v": 1}, &Variables::new())
            .unwrap();
        assert_eq!(acc.accumulate(arg.as_ref()).unwrap_err().code.0, 7548606);
    }

    #[test]
    fn top_and_bottom() {
        let sorted = |op: &str, sort: Bson, n: Option<i32>| {
            let mut spec = bson!({"sortBy": sort, "output": "$p"});
            if let Some(n) = n {
                spec.as_document_mut().unwrap().insert("n", n);
            }
            spec_both(bson!({op: spec}), &scores())
        };
        assert_eq!(sorted("$top", bson!({"s": -1}), None), bson!("c"));
        // Ties keep the first document seen, for $top and for $bottom.
        assert_eq!(
            sorted("$topN", bson!({"s": -1}), Some(2)),
            bson!(["c", "a"])
        );
        assert_eq!(sorted("$bottom", bson!({"s": -1}), None), bson!("b"));
        assert_eq!(
            sorted("$bottomN", bson!({"s": -1}), Some(3)),
            bson!(["d", "e", "b"])
        );
        assert_eq!(
            sorted("$bottomN", bson!({"s": -1}), Some(4)),
            bson!(["a", "d", "e", "b"])
        );
        assert_eq!(
            sorted("$bottomN", bson!({"s": 1, "p": -1}), Some(2)),
            bson!(["a", "c"])
        );
        // An array sorts by its smallest element ascending (an empty one below null) and
        // by its largest descending; missing sorts as null.
        assert_eq!(
            sorted("$topN", bson!({"t": 1}), Some(3)),
            bson!(["d", "c", "a"])
        );
        assert_eq!(
            sorted("$topN", bson!({"t": -1}), Some(2)),
            bson!(["a", "b"])
        );
        let missing_output = spec_both(
            bson!({"$top": {"sortBy": {"s": 1}, "output": "$nope"}}),
            &scores(),
        );
        assert_eq!(missing_output, Bson::Null);
    }

    #[test]
    fn median_and_percentile() {
        let values: Vec<Bson> = [3, 1, 4, 1, 5, 9, 2, 6]
            .iter()
            .map(|v| bson!({"v": v}))
            .chain([bson!({"v": "x"}), bson!({})])
            .collect();
        let m = "approximate";
        assert_eq!(
            spec_both(bson!({"$median": {"input": "$v", "method": m}}), &values),
            bson!(3.0)
        );
        assert_eq!(
            spec_both(
                bson!({"$percentile": {"input": "$v", "p": [0.1, 0.95, 0.0], "method": m}}),
                &values
            ),
            bson!([1.0, 9.0, 1.0])
        );
        assert_eq!(
            spec_both(
                bson!({"$median": {"input": "$v", "method": m}}),
                &[bson!({})]
            ),
            Bson::Null
        );
    }

    #[test]
    fn selection_spec_errors() {
        let ctx = ParseContext::new();
        let code = |spec: Bson| AccumulatorSpec::parse("f", &spec, &ctx).unwrap_err().code.0;
        assert_eq!(code(bson!({"$topN": 1})), 5788001);
        assert_eq!(
            code(bson!({"$top": {"n": 1, "sortBy": {"a": 1}, "output": 1}})),
            5788002
        );
        assert_eq!(
            code(bson!({"$topN": {"sortBy": {"a": 1}, "output": 1}})),
            5788003
        );
        assert_eq!(code(bson!({"$top": {"sortBy": {"a": 1}}})), 5788004);
        assert_eq!(code(bson!({"$bottom": {"output": 1}})), 5788005);
        assert_eq!(
            code(bson!({"$top": {"sortBy": {"a": 2}, "output": 1}})),
            15975
        );
        assert_eq!(
            code(bson!({"$top": {"sortBy": {"a": "x"}, "output": 1}})),
            15974
        );
        assert_eq!(code(bson!({"$firstN": {"n": -1, "input": 1}})), 7548606);
        assert_eq!(code(bson!({"$firstN": {"n": "a", "input": 1}})), 7548606);
        assert_eq!(code(bson!({"$median": {"input": 1}})), 40414);
        assert_eq!(code(bson!({"$median": []})), 7436100);
        assert_eq!(
            code(bson!({"$percentile": {"input": 1, "method": "approximate"}})),
            40414
        );
        assert_eq!(code(bson!({"$percentile": 1})), 7429703);
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
        assert_eq!(code(bson!({})), 40234);
        assert_eq!(code(bson!({"sum": 1})), 40234);
        assert_eq!(code(bson!({"$foo": [1]})), 40237);
        assert_eq!(code(bson!({"$count": []})), 40237);
    }
}
