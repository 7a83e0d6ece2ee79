//! Running a pipeline's head over a column store index's chunks instead of documents:
//! the `$match` stages before its first `$group` or `$count`, and that stage's partial
//! result, per row group (`basalt_columnar`), merged as [`crate::Partitioned`] merges
//! the partials of ranges of documents; the rest of the pipeline runs on the documents
//! it makes.
//!
//! A plan exists only when every path the head reads is known (no `$$ROOT`, no
//! `$where`, no operator that reads the whole document): those leaf paths are then all
//! a row's value depends on. Conditions on one path against constants run as loops
//! over typed chunks into a selection; what else the filter says, and a `$group` whose
//! key or arguments are expressions, runs per selected row on the row engine's own
//! matcher and `$group`, over a small document built from the row's values at the
//! paths read. So the answer is the row engine's by construction, and the loops only
//! make the common cases fast. Rows are visited in record order, so `$first`, `$last`
//! and `$push` see what a scan of the documents sees.

use crate::partitioned::{Partial, Partitioned, State};
use crate::stages::group::{Group, GroupKey, Groups};
use crate::stages::Stage;
use crate::Pipeline;
use basalt_columnar::{Cell, ColumnChunk, Kind, PathInfo, RowGroupHeader};
use basalt_error::Result;
use basalt_expr::{Accumulator, Variables};
use basalt_query::Matcher;
use basalt_value::summation::Summation;
use basalt_value::Number;
use bson::{Bson, Document};
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// How a pipeline's head runs over a column store index.
#[derive(Debug)]
pub struct ColumnPlan {
    /// Every path the head reads, sorted.
    paths: Vec<String>,
    /// Conditions that run as loops over chunks; all of them must hold.
    conditions: Vec<Condition>,
    /// `$expr` comparisons, after the conditions; all of them must hold.
    comparisons: Vec<ExprComparison>,
    /// The rest of the filter, for the row engine's matcher; `None` when the
    /// conditions are the whole filter.
    residual: Option<Matcher>,
    /// What the head does with the selected rows.
    head: Head,
}

/// The stage after a plan's filter.
#[derive(Debug)]
enum Head {
    /// None: the plan selects rows (a query's filter alone).
    Select,
    Count,
    /// A `$group`, fed from the cells when its key and arguments are paths, constants
    /// or expressions of a few paths (`Some`), else row by row.
    Group(Option<DirectGroup>),
}

#[derive(Debug)]
struct Condition {
    path: usize,
    test: Test,
}

#[derive(Debug)]
enum Test {
    /// `$eq` (`negated`: `$ne`) and `$in` (`$nin`) against scalar constants.
    In {
        values: Vec<Bson>,
        negated: bool,
    },
    Compare {
        op: Ordering,
        or_equal: bool,
        value: Bson,
    },
    Exists(bool),
}

/// A top-level `{$expr: {$gt: [a, b]}}` (or `$gte`, `$lt`, `$lte`, `$eq`, `$ne`) between
/// paths and numbers: compared directly where both sides are numbers, by the row
/// engine's matcher on the row's document otherwise.
#[derive(Debug)]
struct ExprComparison {
    left: Side,
    right: Side,
    /// Whether it holds when the left side is less, equal, greater.
    holds_for: [bool; 3],
    matcher: Matcher,
}

#[derive(Debug)]
struct DirectGroup {
    key: Operand,
    arguments: Vec<Operand>,
}

#[derive(Clone, Debug)]
enum Operand {
    Path(usize),
    Constant(Bson),
    /// The `$group`'s key expression or one of its arguments' (`Role`), reading the
    /// paths at these positions: evaluated by the row engine once per distinct
    /// combination of their values in a row group (dictionary evaluation).
    Expression(Role, Vec<usize>),
}

/// Which of a `$group`'s expressions an operand is.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Role {
    Key,
    Argument(usize),
}

/// Paths an expression may read to be evaluated once per combination of their values.
const EXPRESSION_INPUTS_MAX: usize = 4;

/// Distinct combinations remembered per expression and row group; past that, each
/// further row is evaluated on its own.
const EXPRESSION_MEMO_MAX: usize = 65_536;

/// One input value of an expression, exactly (1, 1.0 and NumberLong(1) differ: an
/// expression may tell them apart).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Exact<'a> {
    Missing,
    Null,
    Int32(i32),
    Int64(i64),
    Double(u64),
    Str(&'a str),
    Bool(bool),
    Date(i64),
}

fn exact(cell: Cell<'_>) -> Exact<'_> {
    match cell {
        Cell::Missing => Exact::Missing,
        Cell::Null => Exact::Null,
        Cell::Int32(n) => Exact::Int32(n),
        Cell::Int64(n) => Exact::Int64(n),
        Cell::Double(d) => Exact::Double(d.to_bits()),
        Cell::Str(s) => Exact::Str(s),
        Cell::Bool(b) => Exact::Bool(b),
        Cell::Date(ms) => Exact::Date(ms),
    }
}

/// The chunks of one row group, by position in [`ColumnPlan::paths`] (`None`: no row
/// has the path).
pub struct RowGroupColumns {
    pub rows: usize,
    pub chunks: Vec<Option<Arc<ColumnChunk>>>,
}

impl Pipeline {
    /// The plan for running this aggregation's head on a column store index, or `None`
    /// when the head is not a run of `$match` stages then `$group` (or `$bucket` or
    /// `$sortByCount`, which are `$group` then `$sort`) or `$count`, or reads paths it
    /// does not name. Uses the stages as parsed (after optimization), before a server
    /// takes the leading `$match` for its scan.
    pub fn column_plan(&self) -> Option<ColumnPlan> {
        let specs = self.specs();
        let mut filters = Vec::new();
        let mut head = None;
        for spec in specs {
            match spec.get("$match") {
                Some(Bson::Document(filter)) if spec.len() == 1 => filters.push(filter.clone()),
                _ => {
                    head = Some(filters.len());
                    break;
                }
            }
        }
        if self.variables().collation().is_some() {
            return None;
        }
        // Each `$match` before the head is one stage, so the head's stage is at its
        // position.
        match self.stages().get(head?)? {
            Stage::Group(group) => ColumnPlan::new(&filters, Some(group.spec()), &[]),
            Stage::Count(_) => ColumnPlan::new(&filters, None, &[]),
            _ => None,
        }
    }
}

impl Pipeline {
    /// The paths a pipeline that starts (after its one leading `$match`, which must
    /// have no top-level `$expr`, as that stays in the pipeline) with an inclusion
    /// `$project` reads of each document, when that `$project` names every path it
    /// reads and its output does not depend on the order of the document's fields: at
    /// most one stored field is included (`_id` counts unless excluded), the rest is
    /// computed. A server may then hand the pipeline documents made of those paths'
    /// values in the chunks instead of the stored documents. `None` otherwise.
    pub fn column_rows(&self) -> Option<Vec<String>> {
        let specs = self.specs();
        let at = match specs.first().and_then(|spec| spec.get("$match")) {
            Some(Bson::Document(filter)) if !filter.contains_key("$expr") => 1,
            Some(_) => return None,
            None => 0,
        };
        if self.variables().collation().is_some() {
            return None;
        }
        let Some(Bson::Document(project)) = specs.get(at)?.get("$project") else {
            return None;
        };
        let mut reads = BTreeSet::new();
        let mut included = 0;
        // `_id` is kept unless excluded or computed.
        let keeps_id = match project.get("_id") {
            None => true,
            Some(value) if matches!(value, Bson::Boolean(_)) || basalt_value::is_number(value) => {
                !is_exclusion(value)
            }
            Some(_) => false,
        };
        if keeps_id {
            included += 1;
            reads.insert("_id".to_string());
        }
        projection_reads(project, "", &mut reads, &mut included)?;
        (included <= 1).then(|| reads.into_iter().collect())
    }
}

/// Whether a projection's value excludes its field (`0`, `false`).
fn is_exclusion(value: &Bson) -> bool {
    match value {
        Bson::Boolean(b) => !b,
        other => basalt_value::as_f64(other) == Some(0.0),
    }
}

/// Adds the paths an inclusion projection `spec` (under `prefix`) reads, counting the
/// stored paths it includes; `None` when it excludes a field other than `_id`, or
/// computes from what it cannot name.
fn projection_reads(
    spec: &Document,
    prefix: &str,
    reads: &mut BTreeSet<String>,
    included: &mut usize,
) -> Option<()> {
    for (field, value) in spec {
        let path = match prefix {
            "" => field.clone(),
            prefix => format!("{prefix}.{field}"),
        };
        match value {
            // Included or excluded: counted by the caller.
            _ if path == "_id"
                && (matches!(value, Bson::Boolean(_)) || basalt_value::is_number(value)) => {}
            // Parts of `_id` kept: not served.
            Bson::Document(inner)
                if path == "_id" && inner.keys().next().is_some_and(|k| !k.starts_with('$')) =>
            {
                return None;
            }
            Bson::Boolean(_)
            | Bson::Int32(_)
            | Bson::Int64(_)
            | Bson::Double(_)
            | Bson::Decimal128(_) => {
                if is_exclusion(value) {
                    return None;
                }
                *included += 1;
                reads.insert(path);
            }
            Bson::Document(inner) if inner.keys().next().is_some_and(|k| !k.starts_with('$')) => {
                projection_reads(inner, &path, reads, included)?;
            }
            computed => expression_paths(computed, reads, true)?,
        }
    }
    Some(())
}

impl ColumnPlan {
    /// The plan that selects the rows matching a query's `filter` (a find's, a
    /// count's), when the filter names every path it reads, and reads `more_paths` too
    /// (a sort's, [`ColumnPlan::sort_paths`], or a distinct's key), whose values
    /// [`ColumnPlan::values`] gives for the rows it selects. (A query with a collation
    /// has none: the loops compare strings by their bytes.)
    pub fn for_filter(filter: &Document, more_paths: &[String]) -> Option<ColumnPlan> {
        let mut plan = ColumnPlan::new(std::slice::from_ref(filter), None, more_paths)?;
        plan.head = Head::Select;
        Some(plan)
    }

    /// The paths of a sort that ranks by field paths and directions only (no `$meta`).
    pub fn sort_paths(sort: &Document) -> Option<Vec<String>> {
        sort.iter()
            .map(|(path, direction)| {
                let plain = !path.starts_with('$') && basalt_value::as_f64(direction).is_some();
                plain.then(|| path.clone())
            })
            .collect()
    }

    /// The plan of a pipeline's head: `filters` (all must hold) then `group` (`None`:
    /// `$count`), reading `more_paths` besides theirs.
    fn new(
        filters: &[Document],
        group: Option<&Document>,
        more_paths: &[String],
    ) -> Option<ColumnPlan> {
        let mut paths: BTreeSet<String> = more_paths.iter().cloned().collect();
        for filter in filters {
            filter_paths(filter, &mut paths)?;
        }
        if let Some(group) = group {
            for (field, spec) in group {
                if field == "_id" {
                    expression_paths(spec, &mut paths, true)?;
                    continue;
                }
                let Bson::Document(accumulator) = spec else {
                    return None;
                };
                let (name, argument) = accumulator.iter().next()?;
                if matches!(
                    name.as_str(),
                    "$accumulator" | "$top" | "$bottom" | "$topN" | "$bottomN"
                ) {
                    return None;
                }
                expression_paths(argument, &mut paths, true)?;
            }
        }
        let paths: Vec<String> = paths.into_iter().collect();
        let position = |path: &str| paths.iter().position(|p| p == path);
        let mut conditions = Vec::new();
        let mut comparisons = Vec::new();
        let mut residual = Document::new();
        for filter in filters {
            for (key, value) in filter {
                if key == "$expr" {
                    if let Some(comparison) = expr_comparison(value, &position) {
                        comparisons.push(comparison);
                        continue;
                    }
                }
                let tests = match key.starts_with('$') {
                    true => None,
                    false => simple_tests(value),
                };
                match tests {
                    Some(tests) => conditions.extend(tests.into_iter().map(|test| Condition {
                        path: position(key).expect("a filter's path is read"),
                        test,
                    })),
                    None => {
                        let and = residual
                            .entry("$and".to_string())
                            .or_insert(Bson::Array(vec![]));
                        if let Bson::Array(parts) = and {
                            parts.push(bson::bson!({ key.clone(): value.clone() }));
                        }
                    }
                }
            }
        }
        let residual = if residual.is_empty() {
            None
        } else {
            Some(Matcher::new(&residual).ok()?)
        };
        let head = match group {
            Some(group) => Head::Group(direct_group(group, &position)),
            None => Head::Count,
        };
        Some(ColumnPlan {
            paths,
            conditions,
            comparisons,
            residual,
            head,
        })
    }
}

/// The paths a filter reads; `None` when it may read others (`$where`, `$text`, ...).
fn filter_paths(filter: &Document, paths: &mut BTreeSet<String>) -> Option<()> {
    for (key, value) in filter {
        match key.as_str() {
            "$and" | "$or" | "$nor" => {
                let Bson::Array(parts) = value else {
                    return None;
                };
                for part in parts {
                    filter_paths(part.as_document()?, paths)?;
                }
            }
            // Matched apart from the pipeline, so without its variables: none allowed.
            "$expr" => expression_paths(value, paths, false)?,
            "$comment" => {}
            operator if operator.starts_with('$') => return None,
            path => {
                paths.insert(path.to_string());
            }
        }
    }
    Some(())
}

/// The paths an expression reads; `None` when it may read the whole document, or uses
/// a variable where `variables` is false.
fn expression_paths(
    expression: &Bson,
    paths: &mut BTreeSet<String>,
    variables: bool,
) -> Option<()> {
    match expression {
        Bson::String(s) if s.starts_with("$$") => {
            let name = s[2..].split('.').next().unwrap_or("");
            if !variables || matches!(name, "ROOT" | "CURRENT") {
                return None;
            }
        }
        Bson::String(s) if s.starts_with('$') => {
            paths.insert(s[1..].to_string());
        }
        Bson::Array(items) => {
            for item in items {
                expression_paths(item, paths, variables)?;
            }
        }
        Bson::Document(doc) => {
            for (key, value) in doc {
                match key.as_str() {
                    "$literal" => {}
                    // These read the document without naming a path.
                    "$getField" | "$setField" | "$unsetField" | "$meta" | "$function" => {
                        return None
                    }
                    _ => expression_paths(value, paths, variables)?,
                }
            }
        }
        _ => {}
    }
    Some(())
}

/// A scalar a typed loop compares against.
fn is_scalar_constant(value: &Bson) -> bool {
    match value {
        Bson::Double(d) => !d.is_nan(),
        Bson::Int32(_)
        | Bson::Int64(_)
        | Bson::String(_)
        | Bson::Boolean(_)
        | Bson::DateTime(_)
        | Bson::Null => true,
        _ => false,
    }
}

/// The tests of one path's condition when they all run as loops.
fn simple_tests(condition: &Bson) -> Option<Vec<Test>> {
    let Bson::Document(operators) = condition else {
        return is_scalar_constant(condition).then(|| {
            vec![Test::In {
                values: vec![condition.clone()],
                negated: false,
            }]
        });
    };
    if operators.is_empty() || !operators.keys().all(|k| k.starts_with('$')) {
        return None;
    }
    let mut tests = Vec::new();
    for (operator, value) in operators {
        let list = |negated| match value {
            Bson::Array(items) if items.iter().all(is_scalar_constant) => Some(Test::In {
                values: items.clone(),
                negated,
            }),
            _ => None,
        };
        let compare = |op, or_equal| {
            (is_scalar_constant(value) && *value != Bson::Null).then(|| Test::Compare {
                op,
                or_equal,
                value: value.clone(),
            })
        };
        tests.push(match operator.as_str() {
            "$eq" | "$ne" if is_scalar_constant(value) => Test::In {
                values: vec![value.clone()],
                negated: operator == "$ne",
            },
            "$in" => list(false)?,
            "$nin" => list(true)?,
            "$gt" => compare(Ordering::Greater, false)?,
            "$gte" => compare(Ordering::Greater, true)?,
            "$lt" => compare(Ordering::Less, false)?,
            "$lte" => compare(Ordering::Less, true)?,
            "$exists" => Test::Exists(match value {
                Bson::Boolean(b) => *b,
                other => basalt_value::as_f64(other).is_some_and(|n| n != 0.0),
            }),
            _ => return None,
        });
    }
    Some(tests)
}

/// One side of an [`ExprComparison`].
#[derive(Debug)]
enum Side {
    Path(usize),
    Number(Cell<'static>),
}

/// A `$expr` that compares two operands, each a path or a number.
fn expr_comparison(
    expr: &Bson,
    position: &dyn Fn(&str) -> Option<usize>,
) -> Option<ExprComparison> {
    let (operator, arguments) = expr.as_document()?.iter().next()?;
    let holds_for = match operator.as_str() {
        "$gt" => [false, false, true],
        "$gte" => [false, true, true],
        "$lt" => [true, false, false],
        "$lte" => [true, true, false],
        "$eq" => [false, true, false],
        "$ne" => [true, false, true],
        _ => return None,
    };
    let operand = |value: &Bson| match value {
        Bson::String(s) if s.starts_with('$') && !s.starts_with("$$") => {
            position(&s[1..]).map(Side::Path)
        }
        Bson::Int32(n) => Some(Side::Number(Cell::Int32(*n))),
        Bson::Int64(n) => Some(Side::Number(Cell::Int64(*n))),
        Bson::Double(d) if !d.is_nan() => Some(Side::Number(Cell::Double(*d))),
        _ => None,
    };
    match arguments {
        Bson::Array(pair) if pair.len() == 2 && expr.as_document()?.len() == 1 => {
            Some(ExprComparison {
                left: operand(&pair[0])?,
                right: operand(&pair[1])?,
                holds_for,
                matcher: Matcher::new(&bson::doc! {"$expr": expr.clone()}).ok()?,
            })
        }
        _ => None,
    }
}

/// A number as a double when that is exact (a double, an int, a long within 2^53).
fn exact_f64(value: &Bson) -> Option<f64> {
    match value {
        Bson::Double(d) if !d.is_nan() => Some(*d),
        Bson::Int32(n) => Some(f64::from(*n)),
        Bson::Int64(n) if n.unsigned_abs() <= 1 << 53 => Some(*n as f64),
        _ => None,
    }
}

impl ExprComparison {
    /// As [`Test::retain_doubles`], for a comparison of two paths or a path and a
    /// number.
    fn retain_doubles(&self, chunks: &[Option<Arc<ColumnChunk>>], selected: &mut Vec<u32>) -> bool {
        let side = |side: &Side| -> Option<Result<&[f64], f64>> {
            match side {
                Side::Path(path) => chunks[*path].as_deref().and_then(dense_doubles).map(Ok),
                Side::Number(Cell::Double(d)) => Some(Err(*d)),
                Side::Number(Cell::Int32(n)) => Some(Err(f64::from(*n))),
                Side::Number(_) => None,
            }
        };
        let (Some(left), Some(right)) = (side(&self.left), side(&self.right)) else {
            return false;
        };
        let value = |side: &Result<&[f64], f64>, row: usize| match side {
            Ok(values) => values[row],
            Err(constant) => *constant,
        };
        selected.retain(|&row| {
            let (a, b) = (value(&left, row as usize), value(&right, row as usize));
            let order = if a < b {
                0
            } else if a == b {
                1
            } else {
                2
            };
            self.holds_for[order]
        });
        true
    }
}

/// Two numbers' order, exact across int, long and double; `None` unless both are.
fn compare_numbers(a: Cell<'_>, b: Cell<'_>) -> Option<Ordering> {
    Some(match (a, b) {
        (Cell::Int32(x), Cell::Int32(y)) => x.cmp(&y),
        (Cell::Double(x), Cell::Double(y)) => x.partial_cmp(&y)?,
        (Cell::Int64(x), Cell::Int64(y)) => x.cmp(&y),
        (
            Cell::Int32(_) | Cell::Int64(_) | Cell::Double(_),
            Cell::Int32(_) | Cell::Int64(_) | Cell::Double(_),
        ) => basalt_value::compare_values(&a.to_bson()?, &b.to_bson()?),
        _ => return None,
    })
}

/// A `$group` fed straight from cells: its key and every argument a path, a scalar, or
/// an expression of a few paths (not `$rand`, whose value changes from row to row).
fn direct_group(group: &Document, position: &dyn Fn(&str) -> Option<usize>) -> Option<DirectGroup> {
    let operand = |value: &Bson, role: Role| match value {
        Bson::String(s) if s.starts_with('$') && !s.starts_with("$$") => {
            position(&s[1..]).map(Operand::Path)
        }
        v if is_scalar_constant(v) => Some(Operand::Constant(v.clone())),
        v => {
            if format!("{v}").contains("$rand") {
                return None;
            }
            let mut paths = BTreeSet::new();
            expression_paths(v, &mut paths, true)?;
            let inputs = paths
                .iter()
                .map(|p| position(p))
                .collect::<Option<Vec<_>>>()?;
            (inputs.len() <= EXPRESSION_INPUTS_MAX).then_some(Operand::Expression(role, inputs))
        }
    };
    let mut key = None;
    let mut arguments = Vec::new();
    for (field, spec) in group {
        if field == "_id" {
            key = Some(operand(spec, Role::Key)?);
            continue;
        }
        let role = Role::Argument(arguments.len());
        let (name, argument) = spec.as_document()?.iter().next()?;
        arguments.push(match name.as_str() {
            "$count" => Operand::Constant(Bson::Int32(1)),
            "$sum" | "$avg" | "$min" | "$max" | "$first" | "$last" | "$push" | "$addToSet"
            | "$stdDevPop" | "$stdDevSamp" => operand(argument, role)?,
            _ => return None,
        });
    }
    Some(DirectGroup {
        key: key?,
        arguments,
    })
}

/// The class of values a typed comparison brackets by, as the query language does.
fn class(value: &Bson) -> u8 {
    match value {
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) => 1,
        Bson::String(_) => 2,
        Bson::Boolean(_) => 3,
        Bson::DateTime(_) => 4,
        _ => 0,
    }
}

fn cell_class(cell: Cell<'_>) -> u8 {
    match cell {
        Cell::Int32(_) | Cell::Int64(_) | Cell::Double(_) => 1,
        Cell::Str(_) => 2,
        Cell::Bool(_) => 3,
        Cell::Date(_) => 4,
        Cell::Null | Cell::Missing => 0,
    }
}

/// Whether two byte strings are equal, comparing short ones byte by byte in place.
fn short_eq(a: &[u8], b: &[u8]) -> bool {
    const SHORT: usize = 16;
    a.len() == b.len()
        && if a.len() <= SHORT {
            a.iter().zip(b).all(|(x, y)| x == y)
        } else {
            a == b
        }
}

/// A non-null cell against a constant of the same class.
fn compare_cell(cell: Cell<'_>, value: &Bson) -> Ordering {
    match (cell, value) {
        (Cell::Int32(a), Bson::Int32(b)) => a.cmp(b),
        (Cell::Int64(a), Bson::Int64(b)) => a.cmp(b),
        (Cell::Double(a), Bson::Double(b)) => a.partial_cmp(b).unwrap_or(Ordering::Equal),
        (Cell::Str(a), Bson::String(b)) => a.cmp(b.as_str()),
        (Cell::Bool(a), Bson::Boolean(b)) => a.cmp(b),
        (Cell::Date(a), Bson::DateTime(b)) => a.cmp(&b.timestamp_millis()),
        (cell, value) => match cell.to_bson() {
            Some(cell) => basalt_value::compare_values(&cell, value),
            None => Ordering::Less,
        },
    }
}

/// The values of a double chunk in which every row has one.
fn dense_doubles(chunk: &ColumnChunk) -> Option<&[f64]> {
    match chunk.doubles() {
        Some((values, None)) if !chunk.has_nulls() => Some(values),
        _ => None,
    }
}

impl Test {
    /// Keeps the rows of `selected` whose value passes, in one loop over a double
    /// chunk where every row has a value and the test compares with a number (doubles
    /// in chunks are never NaN, so `<` is the query's order); `false` (nothing done)
    /// otherwise.
    fn retain_typed(&self, chunk: &ColumnChunk, selected: &mut Vec<u32>) -> bool {
        self.retain_strings(chunk, selected) || self.retain_doubles(chunk, selected)
    }

    /// As [`Test::retain_doubles`], for `$eq`/`$in` (and their negations) over a string
    /// chunk where every row has a value: only the constants that are strings can be
    /// equal to one.
    fn retain_strings(&self, chunk: &ColumnChunk, selected: &mut Vec<u32>) -> bool {
        let (Test::In { values, negated }, Some(strings)) = (self, chunk.dense_strings()) else {
            return false;
        };
        let wanted: Vec<&[u8]> = values
            .iter()
            .filter_map(Bson::as_str)
            .map(str::as_bytes)
            .collect();
        // Straight from the offsets and the bytes: a library compare per row (the
        // quality codes W5 filters by are one byte each) cost more than the loop.
        let (offsets, bytes) = (strings.value_offsets(), strings.value_data());
        let passes = |row: usize| {
            let value = &bytes[offsets[row] as usize..offsets[row + 1] as usize];
            wanted.iter().any(|w| short_eq(w, value)) != *negated
        };
        if selected.len() + 1 == offsets.len() {
            // Every row is still selected (the first condition): kept in one pass.
            let mut kept = 0;
            for row in 0..selected.len() {
                selected[kept] = row as u32;
                kept += usize::from(passes(row));
            }
            selected.truncate(kept);
        } else {
            selected.retain(|&row| passes(row as usize));
        }
        true
    }

    fn retain_doubles(&self, chunk: &ColumnChunk, selected: &mut Vec<u32>) -> bool {
        let Test::Compare {
            op,
            or_equal,
            value,
        } = self
        else {
            return false;
        };
        let (Some(values), Some(bound)) = (dense_doubles(chunk), exact_f64(value)) else {
            return false;
        };
        let passes = |v: f64| match (op, or_equal) {
            (Ordering::Less, false) => v < bound,
            (Ordering::Less, true) => v <= bound,
            (Ordering::Greater, false) => v > bound,
            (_, _) => v >= bound,
        };
        selected.retain(|&row| passes(values[row as usize]));
        true
    }

    /// Whether some row of a row group where the path is `info` (`None`: no row has
    /// it) may pass, by the path's kind and bounds; `true` when they cannot tell.
    fn may_hold(&self, info: Option<&PathInfo>) -> bool {
        let Some(info) = info else {
            return self.holds(Cell::Missing);
        };
        if info.kind == Kind::Null {
            return self.holds(Cell::Null) || self.holds(Cell::Missing);
        }
        let Some((least, greatest)) = &info.bounds else {
            return true;
        };
        let order = basalt_value::compare_values;
        match self {
            Test::Compare {
                op,
                or_equal,
                value,
            } => {
                let bound = if *op == Ordering::Greater {
                    greatest
                } else {
                    least
                };
                class(value) == class(bound) && {
                    let found = order(bound, value);
                    found == *op || (*or_equal && found == Ordering::Equal)
                }
            }
            Test::In {
                values,
                negated: false,
            } => values.iter().any(|value| {
                *value == Bson::Null
                    || (class(value) == class(least)
                        && order(least, value) != Ordering::Greater
                        && order(greatest, value) != Ordering::Less)
            }),
            _ => true,
        }
    }

    fn holds(&self, cell: Cell<'_>) -> bool {
        match self {
            Test::In { values, negated } => {
                let found = values.iter().any(|value| match (cell, value) {
                    (Cell::Missing | Cell::Null, Bson::Null) => true,
                    (cell, value) => {
                        cell_class(cell) != 0
                            && cell_class(cell) == class(value)
                            && compare_cell(cell, value) == Ordering::Equal
                    }
                });
                found != *negated
            }
            Test::Compare {
                op,
                or_equal,
                value,
            } => {
                cell_class(cell) != 0 && cell_class(cell) == class(value) && {
                    let order = compare_cell(cell, value);
                    order == *op || (*or_equal && order == Ordering::Equal)
                }
            }
            Test::Exists(exists) => (cell != Cell::Missing) == *exists,
        }
    }
}

/// A group key from a cell: equal for values `$group` puts in one group (numbers by
/// value, so 1, 1.0 and NumberLong(1) agree; missing as null).
fn key_cell(cell: Cell<'_>) -> Exact<'_> {
    match cell {
        Cell::Missing | Cell::Null => Exact::Null,
        Cell::Int32(n) => Exact::Int64(i64::from(n)),
        Cell::Double(d) if d.fract() == 0.0 && d.abs() < 9.2e18 => Exact::Int64(d as i64),
        other => exact(other),
    }
}

impl ColumnPlan {
    /// The paths the head reads: a row group serves the plan when each is a leaf of
    /// chunk-held values there.
    pub fn paths(&self) -> &[String] {
        &self.paths
    }

    /// What runs as loops over chunks, for explain: the filter's conditions so run, the
    /// rest of it (matched per row), and how the `$group` is fed.
    pub fn explain(&self) -> Document {
        let mut out = Document::new();
        out.insert(
            "conditionsOnChunks",
            (self.conditions.len() + self.comparisons.len()) as i64,
        );
        out.insert("rowFilter", self.residual.is_some());
        let group = match &self.head {
            Head::Select => return out,
            Head::Count => "count",
            Head::Group(Some(_)) => "fromChunks",
            Head::Group(None) => "perRow",
        };
        out.insert("group", group);
        out
    }

    /// Whether some of the filter runs as loops over chunks (a query whose filter is
    /// all `rowFilter` gains little from reading chunks).
    pub fn has_loops(&self) -> bool {
        !self.conditions.is_empty() || !self.comparisons.is_empty()
    }

    /// Whether some row of a row group with `header` may pass the filter: false when a
    /// condition's path has no value there that passes it (its kind and bounds say so),
    /// so the row group is skipped without reading its chunks. Only for a row group
    /// that serves the plan.
    pub fn may_select(&self, header: &RowGroupHeader) -> bool {
        self.conditions.iter().all(|condition| {
            let info = header.paths.get(&self.paths[condition.path]);
            condition.test.may_hold(info)
        })
    }

    /// The value at `path` (one of [`ColumnPlan::paths`]) of each of `rows`, `None`
    /// where it is missing: in a row group that serves the plan, what a document's
    /// path reaches (it holds no array and no document there).
    pub fn values(&self, columns: &RowGroupColumns, path: &str, rows: &[u32]) -> Vec<Option<Bson>> {
        let Some(position) = self.paths.iter().position(|p| p == path) else {
            return vec![None; rows.len()];
        };
        rows.iter()
            .map(|&row| cell_of(columns, position, row as usize).to_bson())
            .collect()
    }

    /// A document of `row`'s values at the plan's paths (what a stored document whose
    /// paths hold no array and no document reaches there), for the row engine.
    pub fn row_document(&self, columns: &RowGroupColumns, row: u32) -> Document {
        let mut doc = Document::new();
        for (position, path) in self.paths.iter().enumerate() {
            set_path(
                &mut doc,
                path,
                cell_of(columns, position, row as usize).to_bson(),
            );
        }
        doc
    }

    /// The rows of one row group that pass the filter, in order.
    pub fn select(&self, columns: &RowGroupColumns) -> Result<Vec<u32>> {
        let cell = |path: usize, row: usize| cell_of(columns, path, row);
        let mut selected: Vec<u32> = (0..columns.rows as u32).collect();
        for condition in &self.conditions {
            let chunk = columns.chunks[condition.path].as_deref();
            if !chunk.is_some_and(|chunk| condition.test.retain_typed(chunk, &mut selected)) {
                selected.retain(|&row| condition.test.holds(cell(condition.path, row as usize)));
            }
        }
        let row = RowDocument::new(&self.paths, columns);
        let operand = |side: &Side, row: usize| match side {
            Side::Path(path) => cell(*path, row),
            Side::Number(number) => *number,
        };
        for comparison in &self.comparisons {
            if comparison.retain_doubles(&columns.chunks, &mut selected) {
                continue;
            }
            let mut kept = Vec::with_capacity(selected.len());
            for at in selected {
                let left = operand(&comparison.left, at as usize);
                let right = operand(&comparison.right, at as usize);
                let holds = match compare_numbers(left, right) {
                    Some(order) => comparison.holds_for[(order as i8 + 1) as usize],
                    None => comparison.matcher.try_matches(&row.at(at as usize))?,
                };
                if holds {
                    kept.push(at);
                }
            }
            selected = kept;
        }
        if let Some(residual) = &self.residual {
            let mut kept = Vec::with_capacity(selected.len());
            for at in selected {
                if residual.try_matches(&row.at(at as usize))? {
                    kept.push(at);
                }
            }
            selected = kept;
        }
        Ok(selected)
    }

    /// Runs the head over one row group's rows into `partial`.
    pub fn accumulate(
        &self,
        split: &Partitioned<'_>,
        partial: &mut Partial,
        columns: &RowGroupColumns,
    ) -> Result<()> {
        let selected = self.select(columns)?;
        let cell = |path: usize, row: usize| cell_of(columns, path, row);
        let row = RowDocument::new(&self.paths, columns);
        let vars = split.variables();
        match (split.head_stage(), &mut partial.0) {
            (_, State::Count(n)) => *n += selected.len() as i64,
            (Stage::Group(group), State::Group(groups)) => match &self.head {
                Head::Group(Some(direct)) => direct.accumulate(
                    group,
                    groups,
                    vars,
                    &self.paths,
                    &selected,
                    &columns.chunks,
                    &cell,
                )?,
                _ => {
                    for at in selected {
                        let _over_limit = group.add(groups, &row.at(at as usize), vars)?;
                    }
                }
            },
            _ => unreachable!("partials are made by Partitioned::empty"),
        }
        Ok(())
    }
}

/// Row `row`'s value at the path at `path` (missing where no row has the path).
fn cell_of(columns: &RowGroupColumns, path: usize, row: usize) -> Cell<'_> {
    match &columns.chunks[path] {
        Some(chunk) => chunk.cell(row),
        None => Cell::Missing,
    }
}

/// A row's values at the paths a plan reads, as a document for the row engine: one
/// document, its values replaced row after row (no allocation for a path present in
/// consecutive rows).
struct RowDocument<'a> {
    paths: &'a [String],
    columns: &'a RowGroupColumns,
    doc: std::cell::RefCell<Document>,
}

impl<'a> RowDocument<'a> {
    fn new(paths: &'a [String], columns: &'a RowGroupColumns) -> RowDocument<'a> {
        RowDocument {
            paths,
            columns,
            doc: std::cell::RefCell::new(Document::new()),
        }
    }

    fn at(&self, row: usize) -> std::cell::Ref<'_, Document> {
        {
            let mut doc = self.doc.borrow_mut();
            for (position, path) in self.paths.iter().enumerate() {
                set_path(
                    &mut doc,
                    path,
                    cell_of(self.columns, position, row).to_bson(),
                );
            }
        }
        self.doc.borrow()
    }
}

/// Remembered results of one expression in one row group, by its inputs' values.
struct Memo<'c, T> {
    results: FastMap<[Exact<'c>; EXPRESSION_INPUTS_MAX], T>,
}

impl<'c, T: Clone> Memo<'c, T> {
    fn new() -> Memo<'c, T> {
        Memo {
            results: FastMap::default(),
        }
    }

    /// The result for the inputs of `row`, computed by `compute` when new.
    fn get(
        &mut self,
        inputs: &[usize],
        row: usize,
        cell: &dyn Fn(usize, usize) -> Cell<'c>,
        compute: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        let mut key = [Exact::Missing; EXPRESSION_INPUTS_MAX];
        for (slot, path) in key.iter_mut().zip(inputs) {
            *slot = exact(cell(*path, row));
        }
        if let Some(found) = self.results.get(&key) {
            return Ok(found.clone());
        }
        let result = compute()?;
        if self.results.len() < EXPRESSION_MEMO_MAX {
            self.results.insert(key, result.clone());
        }
        Ok(result)
    }
}

/// The document of a row's values at `inputs` (positions in `paths`).
fn inputs_document<'c>(
    paths: &[String],
    inputs: &[usize],
    row: usize,
    cell: &dyn Fn(usize, usize) -> Cell<'c>,
) -> Document {
    let mut doc = Document::new();
    for &input in inputs {
        set_path(&mut doc, &paths[input], cell(input, row).to_bson());
    }
    doc
}

/// Hash maps keyed by cells: foldhash, as the keys come from the data, not from a
/// client that could pick colliding ones beyond what grouping by value allows anyway.
type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

impl DirectGroup {
    /// Feeds the selected rows to their groups: first each row's group (its key),
    /// then each accumulator a column at a time where a loop over a typed chunk serves
    /// it, and the others row by row. The errors are the row engine's: a row's key fails
    /// before its arguments are evaluated, so the rows after a failing key are not fed.
    #[allow(clippy::too_many_arguments)]
    fn accumulate<'c>(
        &self,
        group: &Group,
        groups: &mut Groups,
        vars: &Variables,
        paths: &[String],
        selected: &[u32],
        chunks: &[Option<Arc<ColumnChunk>>],
        cell: &dyn Fn(usize, usize) -> Cell<'c>,
    ) -> Result<()> {
        let mut local: Vec<(Bson, Vec<Accumulator>)> = Vec::new();
        let mut row_slots: Vec<u32> = Vec::with_capacity(selected.len());
        let mut key_error = None;
        match &self.key {
            Operand::Constant(key) => {
                if !selected.is_empty() {
                    local.push((key.clone(), group.new_accumulators()));
                }
                row_slots.resize(selected.len(), 0);
            }
            key => {
                let mut by_cell: FastMap<Exact<'c>, u32> = FastMap::default();
                let mut key_memo: Memo<'c, u32> = Memo::new();
                let mut by_value: BTreeMap<GroupKey, u32> = BTreeMap::new();
                let mut slot_of = |key: Bson| {
                    let key = group.group_key(key);
                    *by_value.entry(key.clone()).or_insert_with(|| {
                        local.push((key.into_value(), group.new_accumulators()));
                        local.len() as u32 - 1
                    })
                };
                for &row in selected {
                    let row = row as usize;
                    let slot = match key {
                        Operand::Path(path) => {
                            let key = cell(*path, row);
                            match by_cell.get(&key_cell(key)) {
                                Some(slot) => Ok(*slot),
                                None => {
                                    let slot = slot_of(key.to_bson().unwrap_or(Bson::Null));
                                    by_cell.insert(key_cell(key), slot);
                                    Ok(slot)
                                }
                            }
                        }
                        Operand::Expression(role, inputs) => {
                            key_memo.get(inputs, row, cell, || {
                                let doc = inputs_document(paths, inputs, row, cell);
                                let key = group.expression(*role).evaluate(&doc, vars)?;
                                Ok(slot_of(key.unwrap_or(Bson::Null)))
                            })
                        }
                        Operand::Constant(_) => unreachable!("matched above"),
                    };
                    match slot {
                        Ok(slot) => row_slots.push(slot),
                        Err(e) => {
                            key_error = Some(e);
                            break;
                        }
                    }
                }
            }
        }
        let rows = &selected[..row_slots.len()];
        let mut row_by_row = Vec::new();
        for (position, argument) in self.arguments.iter().enumerate() {
            let fed = match argument {
                Operand::Path(path) => chunks[*path].as_deref().is_some_and(|chunk| {
                    column_kernel(&mut local, position, chunk, rows, &row_slots)
                }),
                Operand::Constant(value) => {
                    constant_kernel(&mut local, position, value, &row_slots)
                }
                Operand::Expression(..) => false,
            };
            if !fed {
                row_by_row.push(position);
            }
        }
        if !row_by_row.is_empty() {
            let mut memos: Vec<Memo<'c, Option<Bson>>> =
                self.arguments.iter().map(|_| Memo::new()).collect();
            for (&row, &slot) in rows.iter().zip(&row_slots) {
                let row = row as usize;
                for &position in &row_by_row {
                    let value = match &self.arguments[position] {
                        Operand::Path(path) => cell(*path, row).to_bson(),
                        Operand::Constant(value) => Some(value.clone()),
                        Operand::Expression(role, inputs) => {
                            memos[position].get(inputs, row, cell, || {
                                let doc = inputs_document(paths, inputs, row, cell);
                                group.expression(*role).evaluate(&doc, vars)
                            })?
                        }
                    };
                    local[slot as usize].1[position].accumulate(value.as_ref())?;
                }
            }
        }
        if let Some(e) = key_error {
            return Err(e);
        }
        for (key, accumulators) in local {
            group.absorb(groups, key, accumulators)?;
        }
        Ok(())
    }
}

/// Feeds the rows of a double or int chunk to the accumulator at `position` of each
/// row's group (`slots`), when it is `$sum`, `$avg`, `$min` or `$max`, in one loop (or
/// from the chunk's summary, when all its rows go to one group); `false` (nothing fed)
/// otherwise. Integers sum exactly in any order; doubles into a
/// double-double sum per group merged into the group's, as partitions' sums merge.
fn column_kernel(
    local: &mut [(Bson, Vec<Accumulator>)],
    position: usize,
    chunk: &ColumnChunk,
    rows: &[u32],
    slots: &[u32],
) -> bool {
    if let ([_], true) = (&*local, rows.len() == chunk.rows()) {
        if let Some(summary) = chunk.summary() {
            // One group of every row: the chunk's summary is what a loop would make.
            let accumulator = &mut local[0].1[position];
            let extreme = match accumulator {
                Accumulator::Sum(_)
                | Accumulator::Avg {
                    integers_as_doubles: false,
                    ..
                } => {
                    add_to_sum(accumulator, summary.sum, summary.count);
                    return true;
                }
                Accumulator::Min(_) => &summary.least,
                Accumulator::Max(_) => &summary.greatest,
                _ => return false,
            };
            if let Some(value) = extreme {
                // A number is never refused by `$min`/`$max`.
                let _grown = accumulator.accumulate(Some(value));
            }
            return true;
        }
    }
    if let Some((values, validity)) = chunk.doubles() {
        let typed = Typed {
            values,
            validity,
            number: Number::Double,
            bson: Bson::Double,
            sum_all: |sum, values| sum.add_doubles(values),
        };
        return typed.feed(local, position, rows, slots);
    }
    if let Some((values, validity)) = chunk.int32s() {
        let typed = Typed {
            values,
            validity,
            number: Number::Int32,
            bson: Bson::Int32,
            sum_all: |sum, values| sum.add_integers(values.map(i64::from), false),
        };
        return typed.feed(local, position, rows, slots);
    }
    false
}

/// Feeds an integer constant (`{$sum: 1}`) to the `$sum` or `$avg` at `position` of
/// each row's group: its multiple, at once; `false` (nothing fed) otherwise.
fn constant_kernel(
    local: &mut [(Bson, Vec<Accumulator>)],
    position: usize,
    value: &Bson,
    slots: &[u32],
) -> bool {
    let (constant, long) = match value {
        Bson::Int32(n) => (i128::from(*n), false),
        Bson::Int64(n) => (i128::from(*n), true),
        _ => return false,
    };
    let Some((_, first)) = local.first() else {
        return true;
    };
    if !matches!(
        first[position],
        Accumulator::Sum(_)
            | Accumulator::Avg {
                integers_as_doubles: false,
                ..
            }
    ) {
        return false;
    }
    let mut rows = vec![0u64; local.len()];
    for &slot in slots {
        rows[slot as usize] += 1;
    }
    for ((_, accumulators), rows) in local.iter_mut().zip(rows) {
        if rows == 0 {
            continue;
        }
        let mut sum = Summation::default();
        sum.add_integer_total(constant * i128::from(rows), long);
        add_to_sum(&mut accumulators[position], sum, rows);
    }
    true
}

/// Merges the sum of `count` values into a `$sum` or `$avg` that saw the values before
/// them.
fn add_to_sum(accumulator: &mut Accumulator, sum: Summation, count: u64) {
    match accumulator {
        Accumulator::Sum(total) => total.merge(sum),
        Accumulator::Avg {
            sum: total,
            count: seen,
            ..
        } => {
            total.merge(sum);
            *seen += count;
        }
        _ => unreachable!("the kernels feed only $sum and $avg this way"),
    }
}

/// A typed chunk's values, which rows have one, and how a value becomes a number and
/// a BSON value.
struct Typed<'a, T> {
    values: &'a [T],
    validity: Option<&'a arrow_buffer::NullBuffer>,
    number: fn(T) -> Number,
    bson: fn(T) -> Bson,
    /// Sums many values as one at a time would (one group's fast path).
    sum_all: fn(&mut Summation, &mut dyn Iterator<Item = T>),
}

impl<T: Copy + PartialOrd> Typed<'_, T> {
    fn feed(
        &self,
        local: &mut [(Bson, Vec<Accumulator>)],
        position: usize,
        rows: &[u32],
        slots: &[u32],
    ) -> bool {
        let Some((_, first)) = local.first() else {
            return true;
        };
        let values = || {
            rows.iter()
                .zip(slots)
                .map(|(&row, &slot)| (row as usize, slot as usize))
                .filter(|(row, _)| self.validity.is_none_or(|v| v.is_valid(*row)))
                .map(|(row, slot)| (self.values[row], slot))
        };
        match &first[position] {
            Accumulator::Sum(_)
            | Accumulator::Avg {
                integers_as_doubles: false,
                ..
            } if local.len() == 1 => {
                let mut sum = Summation::default();
                let mut count = 0u64;
                (self.sum_all)(
                    &mut sum,
                    &mut values().map(|(value, _)| {
                        count += 1;
                        value
                    }),
                );
                add_to_sum(&mut local[0].1[position], sum, count);
            }
            Accumulator::Sum(_)
            | Accumulator::Avg {
                integers_as_doubles: false,
                ..
            } => {
                let mut sums = vec![(Summation::default(), 0u64); local.len()];
                for (value, slot) in values() {
                    sums[slot].0.add((self.number)(value));
                    sums[slot].1 += 1;
                }
                for ((_, accumulators), (sum, count)) in local.iter_mut().zip(sums) {
                    add_to_sum(&mut accumulators[position], sum, count);
                }
            }
            Accumulator::Min(_) | Accumulator::Max(_) => {
                let want = match &first[position] {
                    Accumulator::Min(_) => Ordering::Less,
                    _ => Ordering::Greater,
                };
                // The first of equal values, as one value at a time would keep.
                let mut best: Vec<Option<T>> = vec![None; local.len()];
                for (value, slot) in values() {
                    let better = match best[slot] {
                        None => true,
                        Some(current) => value.partial_cmp(&current) == Some(want),
                    };
                    if better {
                        best[slot] = Some(value);
                    }
                }
                for ((_, accumulators), best) in local.iter_mut().zip(best) {
                    if let Some(best) = best {
                        // A number is never refused by `$min`/`$max`.
                        let _grown = accumulators[position].accumulate(Some(&(self.bson)(best)));
                    }
                }
            }
            _ => return false,
        }
        true
    }
}

/// Sets `path` (dotted) in `doc` to `value`, or removes it for `None`, making the
/// embedded documents on the way; a value already there is overwritten in place.
fn set_path(doc: &mut Document, path: &str, value: Option<Bson>) {
    match path.split_once('.') {
        None => match (doc.get_mut(path), value) {
            (Some(slot), Some(value)) => *slot = value,
            (None, Some(value)) => {
                doc.insert(path, value);
            }
            (Some(_), None) => {
                doc.remove(path);
            }
            (None, None) => {}
        },
        Some((head, rest)) => {
            if value.is_none() && !doc.contains_key(head) {
                return;
            }
            let inner = match doc.get_mut(head) {
                Some(inner) => inner,
                None => doc
                    .entry(head.to_string())
                    .or_insert_with(|| Bson::Document(Document::new())),
            };
            if let Bson::Document(inner) = inner {
                set_path(inner, rest, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use basalt_columnar::{ColumnProjection, RowGroupBuilder};
    use bson::doc;

    /// Runs `stages` over `docs` as one row group through the plan, and through the
    /// row engine.
    fn both(stages: Vec<Document>, docs: &[Document]) -> (Vec<Document>, Vec<Document>) {
        let (columnar, whole) = try_both(stages, docs);
        (
            columnar.expect("the chunks serve the plan").unwrap(),
            whole.unwrap(),
        )
    }

    /// A run's documents, or its error's code.
    type Outcome = std::result::Result<Vec<Document>, i32>;

    /// As [`both`], errors included; `None` for the plan's outcome when the chunks do
    /// not serve it (a server reads such a row group's documents). A row group the
    /// plan's `may_select` rules out is skipped, as a server skips it.
    fn try_both(stages: Vec<Document>, docs: &[Document]) -> (Option<Outcome>, Outcome) {
        let pipeline = Pipeline::parse_aggregate(&stages, None, false, None).unwrap();
        let whole = pipeline
            .run(docs.iter().cloned().map(Ok))
            .map_err(|e| e.code.0);
        let plan = pipeline.column_plan().expect("a column plan");
        let projection = ColumnProjection::default();
        let mut builder = RowGroupBuilder::new(&projection);
        for (i, d) in docs.iter().enumerate() {
            let raw = bson::RawDocumentBuf::try_from(d).unwrap();
            builder.add(i as u64 + 1, &raw).unwrap();
        }
        let (header, chunks) = builder.finish(1).unwrap();
        if !plan.paths().iter().all(|p| header.serves(p)) {
            return (None, whole);
        }
        let chunks: HashMap<String, Arc<ColumnChunk>> =
            chunks.into_iter().map(|(p, c)| (p, Arc::new(c))).collect();
        let columns = RowGroupColumns {
            rows: header.rows,
            chunks: plan
                .paths()
                .iter()
                .map(|p| chunks.get(p).cloned())
                .collect(),
        };
        let mut rest = Pipeline::parse_aggregate(&stages, None, false, None).unwrap();
        rest.take_leading_match().unwrap();
        let split = rest.partitioned().unwrap();
        let mut partial = split.empty();
        // A row group the header rules out is not read: its partial stays empty.
        let read = match plan.may_select(&header) {
            true => plan.accumulate(&split, &mut partial, &columns),
            false => Ok(()),
        };
        let columnar = read
            .and_then(|()| {
                split
                    .finish(partial, &crate::pipeline::NoCollections)?
                    .collect::<Result<Vec<_>>>()
            })
            .map_err(|e| e.code.0);
        (Some(columnar), whole)
    }

    fn value_of(kind: u8, n: i32) -> Option<Bson> {
        match kind {
            0 => None,
            1 => Some(Bson::Null),
            2 => Some(Bson::Int32(n)),
            3 => Some(Bson::Int64(i64::from(n) << 33)),
            4 => Some(Bson::Double(f64::from(n) / 4.0)),
            5 => Some(Bson::String(format!("s{}", n % 4))),
            _ => Some(Bson::Boolean(n % 2 == 0)),
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]

        /// Random documents (each path of one type, or of several, which leaves the
        /// row group to the documents) through random heads of both engines.
        #[test]
        fn random_heads_agree(
            kinds in proptest::collection::vec(0u8..7, 3),
            rows in proptest::collection::vec((0u8..4, -20i32..20, -20i32..20, -20i32..20), 0..60),
            head in 0usize..13,
            constant in -20i32..20,
        ) {
            let docs: Vec<Document> = rows
                .iter()
                .map(|(shape, x, y, z)| {
                    let mut doc = Document::new();
                    // Shape 0 leaves a path out or nulls it; the others keep the
                    // path's kind.
                    let pick = |kind: u8, n: i32| if *shape == 0 { value_of(n.rem_euclid(2) as u8, n) } else { value_of(kind, n) };
                    if let Some(v) = pick(kinds[0], *x) { doc.insert("a", v); }
                    if let Some(v) = pick(kinds[1], *y) { doc.insert("b", v); }
                    let mut n = Document::new();
                    if let Some(v) = pick(kinds[2], *z) { n.insert("x", v); }
                    if *shape != 3 { doc.insert("n", n); }
                    doc
                })
                .collect();
            let group = |id: Bson| doc! {"$group": {"_id": id, "c": {"$sum": 1}, "s": {"$sum": "$a"}, "v": {"$avg": "$b"}, "lo": {"$min": "$n.x"}, "hi": {"$max": "$a"}, "f": {"$first": "$b"}, "l": {"$last": "$n.x"}, "set": {"$addToSet": "$a"}}};
            let stages = match head {
                0 => vec![group(Bson::Null)],
                1 => vec![group(Bson::String("$b".into()))],
                2 => vec![doc! {"$match": {"a": {"$gt": constant}}}, group(Bson::String("$n.x".into()))],
                3 => vec![doc! {"$match": {"b": {"$lte": f64::from(constant) / 4.0}, "a": {"$ne": null}}}, doc! {"$count": "c"}],
                4 => vec![doc! {"$match": {"$expr": {"$lt": ["$a", "$n.x"]}}}, group(Bson::Null)],
                5 => vec![doc! {"$match": {"n.x": {"$in": [constant, "s1", null, true]}}}, group(Bson::String("$a".into()))],
                6 => vec![doc! {"$match": {"a": {"$exists": false}}}, doc! {"$count": "c"}],
                7 => vec![group(bson::bson!({"$add": ["$a", 1]}))],
                // A key and an argument that may fail, on different rows.
                8 => vec![doc! {"$group": {"_id": {"$add": ["$n.x", 1]}, "s": {"$sum": {"$multiply": ["$b", 2]}}, "t": {"$push": {"$concat": ["$a", "!"]}}}}],
                10 => vec![doc! {"$match": {"b": {"$ne": null}}}, doc! {"$sortByCount": "$n.x"}],
                11 => vec![doc! {"$bucket": {"groupBy": "$a", "boundaries": [-20, -5, 0, 5], "default": "other", "output": {"c": {"$sum": 1}, "m": {"$max": "$b"}}}}],
                // W1's shape: projections fused into the group, keyed by an expression.
                _ => vec![
                    doc! {"$project": {"_id": 0, "m": "$b", "e": {"$multiply": ["$a", {"$cond": [{"$eq": ["$n.x", "s1"]}, 1.5, 1]}]}}},
                    doc! {"$project": {"m": 1, "band": {"$cond": [{"$lt": ["$e", constant]}, "low", "high"]}}},
                    doc! {"$group": {"_id": "$band", "c": {"$sum": 1}, "m": {"$sum": "$m"}}},
                ],
            };
            let (columnar, whole) = try_both(stages.clone(), &docs);
            if let Some(columnar) = columnar {
                proptest::prop_assert_eq!(columnar, whole, "{:?}", stages);
            }
        }
    }

    #[test]
    fn plans_match_the_row_engine() {
        let docs: Vec<Document> = (0..200)
            .map(|i| match i % 5 {
                0 => doc! {"k": "a", "v": i, "t": {"q": "1", "x": f64::from(i) / 2.0}},
                1 => doc! {"k": "b", "v": i * 1_000_000, "t": {"q": "2"}},
                2 => doc! {"k": null, "v": null, "t": {"q": "1", "x": 1.5}},
                3 => doc! {"t": 5},
                _ => doc! {"k": "a", "t": {"x": 3.0}},
            })
            .collect();
        for stages in [
            vec![
                doc! {"$group": {"_id": "$k", "n": {"$sum": 1}, "s": {"$sum": "$v"}, "m": {"$max": "$t.x"}, "f": {"$first": "$v"}, "p": {"$push": "$t.q"}}},
            ],
            vec![
                doc! {"$match": {"t.q": {"$in": ["1", null]}}},
                doc! {"$group": {"_id": null, "max": {"$max": "$t.x"}, "avg": {"$avg": "$v"}}},
            ],
            vec![
                doc! {"$match": {"v": {"$gte": 10, "$lt": 100}, "k": {"$ne": "b"}}},
                doc! {"$count": "n"},
            ],
            vec![
                doc! {"$match": {"$expr": {"$gt": ["$v", "$t.x"]}}},
                doc! {"$count": "n"},
            ],
            vec![
                doc! {"$match": {"$or": [{"k": "a"}, {"t.q": "2"}]}},
                doc! {"$group": {"_id": {"$concat": [{"$ifNull": ["$k", "-"]}, "!"]}, "n": {"$count": {}}}},
            ],
            vec![
                doc! {"$match": {"k": {"$exists": false}}},
                doc! {"$group": {"_id": "$t.q", "n": {"$sum": 1}}},
                doc! {"$sort": {"_id": 1}},
            ],
        ] {
            let (columnar, whole) = both(stages.clone(), &docs);
            assert_eq!(columnar, whole, "{stages:?}");
        }
    }

    #[test]
    fn string_lists_over_dense_chunks_match_the_row_engine() {
        let long = "a string longer than sixteen bytes";
        let docs: Vec<Document> = (0..300)
            .map(|i| {
                let s = ["a", "b", "c", long, "", "é"][i % 6];
                doc! {"s": s, "v": i as i32}
            })
            .collect();
        for filter in [
            doc! {"s": {"$in": ["a", "c", 5]}},
            doc! {"s": {"$nin": ["a", long]}},
            doc! {"s": long},
            doc! {"s": {"$in": ["", "é"]}},
            doc! {"v": {"$gte": 100}, "s": {"$in": ["b", long]}},
            doc! {"v": {"$lt": 50}, "s": {"$ne": "c"}},
        ] {
            let stages = vec![
                doc! {"$match": filter},
                doc! {"$group": {"_id": "$s", "n": {"$sum": 1}, "v": {"$sum": "$v"}}},
                doc! {"$sort": {"_id": 1}},
            ];
            let (columnar, whole) = both(stages.clone(), &docs);
            assert_eq!(columnar, whole, "{stages:?}");
        }
    }

    #[test]
    fn headers_rule_out_row_groups_no_row_of_which_passes() {
        let projection = ColumnProjection::default();
        let mut builder = RowGroupBuilder::new(&projection);
        for i in 1..=10 {
            let doc = match i {
                10 => doc! {"a": null, "d": 1.5},
                _ => doc! {"a": i, "s": format!("k{i}"), "z": null, "d": 2.5},
            };
            let raw = bson::RawDocumentBuf::try_from(&doc).unwrap();
            builder.add(i as u64, &raw).unwrap();
        }
        let (header, _) = builder.finish(1).unwrap();
        let may_select = |filter: Document| {
            let plan = ColumnPlan::for_filter(&filter, &[]).unwrap();
            (plan.may_select(&header), filter)
        };
        for (expected, filter) in [
            (false, doc! {"a": {"$gt": 9}}),
            (true, doc! {"a": {"$gte": 9}}),
            (false, doc! {"a": {"$lt": 1_i64}}),
            (true, doc! {"a": {"$lte": 1.0}}),
            (false, doc! {"a": {"$in": [0, 11.5, "x"]}}),
            (true, doc! {"a": {"$in": [0, null]}}),
            (true, doc! {"a": 4.0, "d": {"$gt": 2}}),
            (false, doc! {"a": 4.0, "d": {"$gt": 2.5}}),
            (false, doc! {"a": {"$lt": "z"}}),
            (false, doc! {"s": {"$gt": "k9"}}),
            (true, doc! {"s": {"$gte": "k9"}}),
            (false, doc! {"none": 1}),
            (true, doc! {"none": null}),
            (false, doc! {"none": {"$exists": true}}),
            (false, doc! {"z": {"$gte": 0}}),
            (true, doc! {"z": {"$exists": true}}),
            (true, doc! {"a": {"$nin": [1, 2]}}),
        ] {
            assert_eq!(may_select(filter.clone()), (expected, filter));
        }
    }

    #[test]
    fn leading_projections_name_what_they_read() {
        let rows = |stages: Vec<Document>| {
            Pipeline::parse_aggregate(&stages, None, false, None)
                .unwrap()
                .column_rows()
        };
        let strings = |paths: &[&str]| Some(paths.iter().map(|p| p.to_string()).collect());
        assert_eq!(
            rows(vec![
                doc! {"$match": {"k": "a"}},
                doc! {"$project": {"_id": 0, "k": 1, "x": {"$add": ["$t.v", "$$NOW"]}}}
            ]),
            strings(&["k", "t.v"])
        );
        assert_eq!(
            rows(vec![doc! {"$project": {"y": {"$multiply": ["$d", 2]}}}]),
            strings(&["_id", "d"])
        );
        assert_eq!(
            rows(vec![doc! {"$project": {"_id": "$k", "t": {"v": 1}}}]),
            strings(&["k", "t.v"])
        );
        for stages in [
            // Two stored fields kept: their order is the document's.
            vec![doc! {"$project": {"a": 1}}],
            vec![doc! {"$project": {"_id": 0, "a": 1, "b.c": true}}],
            vec![doc! {"$project": {"a": 0}}],
            vec![doc! {"$project": {"_id": {"a": 1}}}],
            vec![doc! {"$project": {"_id": 0, "r": "$$ROOT"}}],
            vec![
                doc! {"$match": {"$expr": {"$eq": ["$a", 1]}}},
                doc! {"$project": {"_id": 0, "a": 1}},
            ],
            vec![doc! {"$addFields": {"x": 1}}],
        ] {
            assert_eq!(rows(stages.clone()), None, "{stages:?}");
        }
    }

    #[test]
    fn heads_that_read_unnamed_paths_have_no_plan() {
        for stages in [
            vec![doc! {"$match": {"$jsonSchema": {}}}, doc! {"$count": "n"}],
            vec![doc! {"$group": {"_id": "$$ROOT"}}],
            vec![doc! {"$unwind": "$a"}, doc! {"$group": {"_id": "$a"}}],
            vec![
                doc! {"$match": {"$expr": {"$eq": ["$a", "$$NOW"]}}},
                doc! {"$count": "n"},
            ],
            vec![doc! {"$sort": {"a": 1}}, doc! {"$group": {"_id": "$a"}}],
            vec![doc! {"$match": {"a": 1}}],
            vec![
                doc! {"$match": {"a": 1}},
                doc! {"$limit": 5},
                doc! {"$count": "n"},
            ],
        ] {
            let pipeline = Pipeline::parse_aggregate(&stages, None, false, None).unwrap();
            assert!(pipeline.column_plan().is_none(), "{stages:?}");
        }
    }
}
