//! `$setWindowFields`: adds fields computed over a window of neighbouring documents.
//!
//! Documents are grouped by `partitionBy` (missing and null are one partition; partitions
//! come out in key order, as after MongoDB's implicit sort) through a sort that spills
//! past 100 MB (`keyed_sort.rs`), so only one partition is held in memory at a time;
//! each partition is sorted by `sortBy`, and every output field is computed for every document from the input
//! documents (outputs do not see each other). A window is `documents: [lower, upper]`
//! (positions relative to the document) or `range: [lower, upper]` (values of the single
//! ascending `sortBy` field relative to the document's, in a time `unit` for dates);
//! without one an accumulator sees the whole partition.
//!
//! Accumulators (`$sum`, `$topN`, `$median`, ...) come from `basalt_expr`; windows only
//! move forward, so they are aggregated by merging partial states (two stacks, linear in
//! the partition whatever the window's width). The functions that only exist in windows,
//! and that aggregation, are in `window_functions.rs`.

use crate::field_path;
use crate::pipeline::{DocumentStream, ExecContext};
use crate::stages::keyed_sort::{KeyedDocuments, KeyedSort};
use crate::stages::time_unit::parse_unit;
use crate::stages::window_functions::{self, WindowFunction};
use crate::stages::{drain, finished};
use basalt_error::{Error, ErrorCode, Result};
use basalt_expr::TimeUnit;
use basalt_expr::{AccumulatorSpec, Expression, OrderedBson, ParseContext};
use basalt_memory::Reservation;
use basalt_query::SortSpec;
use basalt_value::display::{type_name, value_to_string};
use basalt_value::Number;
use bson::{Bson, Document};
use std::collections::VecDeque;

#[derive(Debug)]
pub(crate) struct SetWindowFields {
    partition_by: Option<Expression>,
    sort: Option<SortBy>,
    outputs: Vec<(Vec<String>, WindowFunction)>,
}

/// The stage's `sortBy`: the order, and whether it is a single field.
#[derive(Debug)]
pub(crate) struct SortBy {
    pub(crate) spec: SortSpec,
    /// `Some(ascending)` when `sortBy` has exactly one field, as range windows (which
    /// also need it ascending), the ranking and the calculus functions require.
    pub(crate) single_field: Option<bool>,
}

/// One side of a window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Bound<T> {
    Unbounded,
    Current,
    At(T),
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Window {
    Documents(Bound<i64>, Bound<i64>),
    Range(Bound<f64>, Bound<f64>, Option<TimeUnit>),
}

impl Window {
    pub(crate) const WHOLE: Window = Window::Documents(Bound::Unbounded, Bound::Unbounded);

    /// Parses the `window` field of an output, given the stage's `sortBy`.
    pub(crate) fn parse(spec: &Bson, sort: Option<&SortBy>) -> Result<Window> {
        let Bson::Document(spec) = spec else {
            return Err(Error::failed_to_parse("'window' field must be an object"));
        };
        let (documents, range, unit) = (spec.get("documents"), spec.get("range"), spec.get("unit"));
        if documents.is_some() && range.is_some() {
            return Err(Error::failed_to_parse(
                "Window bounds can specify either 'documents' or 'unit', not both.",
            ));
        }
        if range.is_none() && unit.is_some() {
            return Err(Error::failed_to_parse(
                "Window bounds can only specify 'unit' with range-based bounds.",
            ));
        }
        if let Some(documents) = documents {
            if spec.len() != 1 {
                return Err(Error::failed_to_parse(
                    "'window' field that specifies documents cannot have other fields",
                ));
            }
            let [lower, upper] = pair(documents)?;
            let integer = |v: &Bson| {
                Number::from_bson(v)
                    .and_then(Number::to_i64_exact)
                    .ok_or_else(|| {
                        Error::failed_to_parse("Numeric document-based bounds must be an integer")
                    })
            };
            let (lower, upper) = (bound(lower, integer)?, bound(upper, integer)?);
            check_forward(lower, upper, 0)?;
            let window = Window::Documents(lower, upper);
            if window != Window::WHOLE && sort.is_none() {
                return Err(Error::location(
                    5339901,
                    "Document-based bounds require a sortBy",
                ));
            }
            return Ok(window);
        }
        let Some(range) = range else {
            if !spec.is_empty() {
                return Err(Error::failed_to_parse(
                    "'window' field can only contain 'documents' as the only argument or 'range' with an optional 'unit' field",
                ));
            }
            return Ok(Window::WHOLE);
        };
        let unit = match unit {
            None => None,
            Some(Bson::String(u)) => Some(parse_unit(u)?),
            Some(_) => return Err(Error::failed_to_parse("'unit' must be a string")),
        };
        if spec.len() != 1 + usize::from(unit.is_some()) {
            return Err(Error::failed_to_parse(
                "'window' field that specifies range cannot have other fields besides 'unit'",
            ));
        }
        let [lower, upper] = pair(range)?;
        let number = |v: &Bson| {
            let n = Number::from_bson(v).ok_or_else(|| {
                Error::failed_to_parse("Range-based bounds expression must be a number")
            })?;
            if unit.is_some() && n.to_i64_exact().is_none() {
                return Err(Error::failed_to_parse(
                    "With 'unit', range-based bounds must be an integer",
                ));
            }
            Ok(n.to_f64())
        };
        let (lower, upper) = (bound(lower, number)?, bound(upper, number)?);
        check_forward(lower, upper, 0.0)?;
        match sort.and_then(|s| s.single_field) {
            None => Err(Error::location(
                5339902,
                "Range-based bounds require sortBy a single field",
            )),
            Some(false) => Err(Error::location(
                8947401,
                "Range-based bounds require an ascending sortBy",
            )),
            Some(true) => Ok(Window::Range(lower, upper, unit)),
        }
    }

    /// For each document of a partition, the half-open range of positions in its window.
    /// `keys` are the `sortBy` values, needed by range windows.
    pub(crate) fn spans(&self, len: usize, keys: &[Bson]) -> Result<Vec<(usize, usize)>> {
        match *self {
            Window::Documents(lower, upper) => Ok((0..len)
                .map(|i| {
                    let at = |b: Bound<i64>, unbounded: i64| match b {
                        Bound::Unbounded => unbounded,
                        Bound::Current => i as i64,
                        Bound::At(k) => (i as i64).saturating_add(k),
                    };
                    let start = at(lower, 0).clamp(0, len as i64) as usize;
                    let end = at(upper, len as i64 - 1)
                        .saturating_add(1)
                        .clamp(0, len as i64) as usize;
                    (start, end.max(start))
                })
                .collect()),
            Window::Range(lower, upper, unit) => {
                let values = keys
                    .iter()
                    .map(|k| range_value(k, unit))
                    .collect::<Result<Vec<f64>>>()?;
                Ok(values
                    .iter()
                    .map(|&v| {
                        let offset = |b: Bound<f64>| match (b, unit) {
                            (Bound::At(d), Some(unit)) => unit.add_utc(v as i64, d as i64) as f64,
                            (Bound::At(d), None) => v + d,
                            _ => v,
                        };
                        let start = match lower {
                            Bound::Unbounded => 0,
                            b => values.partition_point(|&w| w < offset(b)),
                        };
                        let end = match upper {
                            Bound::Unbounded => values.len(),
                            b => values.partition_point(|&w| w <= offset(b)),
                        };
                        (start, end.max(start))
                    })
                    .collect())
            }
        }
    }
}

/// The position of a document in a range window: its number, or its date in milliseconds
/// when the window has a unit.
fn range_value(key: &Bson, unit: Option<TimeUnit>) -> Result<f64> {
    match (key, unit) {
        (Bson::DateTime(d), Some(_)) => Ok(d.timestamp_millis() as f64),
        (other, Some(_)) => Err(Error::location(
            5429513,
            format!(
                "Invalid range: Expected the sortBy field to be a Date, but it was {}",
                type_name(other)
            ),
        )),
        (other, None) => Number::from_bson(other).map(Number::to_f64).ok_or_else(|| {
            Error::location(
                5429413,
                format!(
                    "Invalid range: Expected the sortBy field to be a number, but it was {}",
                    type_name(other)
                ),
            )
        }),
    }
}

fn pair(spec: &Bson) -> Result<[&Bson; 2]> {
    match spec {
        Bson::Array(items) if items.len() == 2 => Ok([&items[0], &items[1]]),
        other => Err(Error::failed_to_parse(format!(
            "Window bounds must be a 2-element array: {}",
            value_to_string(other)
        ))),
    }
}

fn bound<T>(spec: &Bson, value: impl Fn(&Bson) -> Result<T>) -> Result<Bound<T>> {
    match spec {
        Bson::String(s) if s == "unbounded" => Ok(Bound::Unbounded),
        Bson::String(s) if s == "current" => Ok(Bound::Current),
        Bson::String(_) => Err(Error::failed_to_parse(
            "Window bounds must be 'unbounded', 'current', or a number.",
        )),
        other => Ok(Bound::At(value(other)?)),
    }
}

/// Numeric bounds (`current` counting as zero) must not be reversed.
fn check_forward<T: PartialOrd + Copy + std::fmt::Display>(
    lower: Bound<T>,
    upper: Bound<T>,
    zero: T,
) -> Result<()> {
    let numeric = |b: Bound<T>| match b {
        Bound::Current => Some(zero),
        Bound::At(v) => Some(v),
        Bound::Unbounded => None,
    };
    if let (Some(l), Some(u)) = (numeric(lower), numeric(upper)) {
        if l > u {
            return Err(Error::location(
                5339900,
                format!("Lower bound must not exceed upper bound: [{l}, {u}]"),
            ));
        }
    }
    Ok(())
}

impl SetWindowFields {
    pub(crate) fn parse(spec: &Bson, ctx: &ParseContext) -> Result<SetWindowFields> {
        let Bson::Document(spec) = spec else {
            return Err(Error::failed_to_parse(format!(
                "the $setWindowFields stage specification must be an object, found {}",
                type_name(spec)
            )));
        };
        let (mut partition_by, mut sort, mut output) = (None, None, None);
        for (name, value) in spec {
            match name.as_str() {
                "partitionBy" => partition_by = Some(Expression::parse(value, ctx)?),
                "sortBy" => {
                    let Bson::Document(keys) = value else {
                        return Err(wrong_type("sortBy", value, "object"));
                    };
                    // An empty `sortBy` is a sort that leaves the order as it is (document
                    // windows accept it; the rank functions, wanting one field, do not).
                    let spec = SortSpec::new(keys)?.with_collation(ctx.collation());
                    let single_field = match keys.iter().collect::<Vec<_>>().as_slice() {
                        [(_, direction)] => {
                            Some(Number::from_bson(direction).is_some_and(|n| n.to_f64() > 0.0))
                        }
                        _ => None,
                    };
                    sort = Some(SortBy { spec, single_field });
                }
                "output" => match value {
                    Bson::Document(fields) => output = Some(fields),
                    other => return Err(wrong_type("output", other, "object")),
                },
                _ => {
                    return Err(Error::location(
                        40415,
                        format!("BSON field '$setWindowFields.{name}' is an unknown field."),
                    ))
                }
            }
        }
        let output = output.ok_or_else(|| {
            Error::location(
                40414,
                "BSON field '$setWindowFields.output' is missing but a required field",
            )
        })?;
        let outputs = output
            .iter()
            .map(|(name, spec)| {
                let path = field_path::split(name)?;
                Ok((path, parse_function(spec, sort.as_ref(), ctx)?))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(SetWindowFields {
            partition_by,
            sort,
            outputs,
        })
    }

    pub(crate) fn apply<'a>(
        &'a self,
        input: DocumentStream<'a>,
        ctx: ExecContext<'a>,
    ) -> DocumentStream<'a> {
        let sorted =
            KeyedSort::new(ctx.collections.spill_directory(), None).and_then(|mut sort| {
                drain(input, |doc| {
                    let key = match &self.partition_by {
                        Some(e) => e.evaluate(&doc, ctx.vars)?.unwrap_or(Bson::Null),
                        None => Bson::Null,
                    };
                    if matches!(key, Bson::Array(_)) {
                        return Err(Error::new(
                        ErrorCode::TYPE_MISMATCH,
                        "An expression used to partition cannot evaluate to value of type array",
                    ));
                    }
                    sort.push(key, doc)
                })?;
                sort.finish()
            });
        match sorted {
            Ok(sorted) => Box::new(Partitions {
                stage: self,
                ctx,
                sorted,
                ready: VecDeque::new(),
                memory: Reservation::default(),
            }),
            Err(e) => finished(Err(e)),
        }
    }

    /// The next partition's documents, in input order, with their memory reserved;
    /// empty after the last.
    fn next_partition(
        sorted: &mut KeyedDocuments,
        memory: &mut Reservation,
    ) -> Result<Vec<Document>> {
        let mut docs = Vec::new();
        let Some(key) = sorted.peek_key()?.map(OrderedBson) else {
            return Ok(docs);
        };
        while let Some(next) = sorted.peek_key()? {
            if OrderedBson(next) != key {
                break;
            }
            if let Some(doc) = sorted.next_document()? {
                memory.reserve_for(
                    basalt_value::document_memory_bytes(&doc),
                    "$setWindowFields",
                )?;
                docs.push(doc);
            }
        }
        Ok(docs)
    }

    /// Sorts one partition and adds the output fields to its documents.
    fn partition(&self, docs: &mut Vec<Document>, ctx: ExecContext<'_>) -> Result<Vec<Document>> {
        let keys: Vec<Vec<Bson>> = match &self.sort {
            Some(sort) => {
                sort.spec.sort_by_document(docs, |d| d);
                docs.iter().map(|d| sort.spec.sort_key(d)).collect()
            }
            None => vec![Vec::new(); docs.len()],
        };
        let partition = window_functions::Partition {
            docs,
            keys: &keys,
            sort: self.sort.as_ref().map(|s| &s.spec),
            ctx,
        };
        let columns = self
            .outputs
            .iter()
            .map(|(_, function)| function.compute(&partition))
            .collect::<Result<Vec<Vec<Bson>>>>()?;
        let mut out = std::mem::take(docs);
        for ((path, _), column) in self.outputs.iter().zip(columns) {
            for (doc, value) in out.iter_mut().zip(column) {
                field_path::set(doc, path, value);
            }
        }
        Ok(out)
    }
}

fn wrong_type(field: &str, value: &Bson, expected: &str) -> Error {
    Error::new(
        ErrorCode::TYPE_MISMATCH,
        format!(
            "BSON field '$setWindowFields.{field}' is the wrong type '{}', expected type '{expected}'",
            type_name(value)
        ),
    )
}

/// Parses one output field: `{<$function>: <args>, window: {...}}`.
fn parse_function(
    spec: &Bson,
    sort: Option<&SortBy>,
    ctx: &ParseContext,
) -> Result<WindowFunction> {
    let Bson::Document(spec) = spec else {
        return Err(Error::failed_to_parse(format!(
            "The field must be a window function object, found {}",
            value_to_string(spec)
        )));
    };
    let Some((name, args)) = spec.iter().find(|(k, _)| k.starts_with('$')) else {
        return Err(Error::failed_to_parse(format!(
            "Expected a $-prefixed window function{}",
            spec.keys()
                .next()
                .map_or(String::new(), |k| format!(", {k}"))
        )));
    };
    let mut window = None;
    for (key, value) in spec {
        if key != name && matches!(name.as_str(), "$rank" | "$denseRank" | "$documentNumber") {
            return Err(Error::location(
                5371601,
                "Rank style window functions take no other arguments",
            ));
        }
        if key == "window" {
            window = Some(Window::parse(value, sort)?);
        } else if key != name {
            return Err(Error::failed_to_parse(format!(
                "{name} got unexpected argument: {key}"
            )));
        }
    }
    if let Some(function) = window_functions::parse(name, args, window, sort, ctx)? {
        return Ok(function);
    }
    if matches!(name.as_str(), "$accumulator" | "$mergeObjects") {
        return Err(unrecognized(name));
    }
    let spec = AccumulatorSpec::parse_window(name, args, ctx).map_err(|e| {
        if e.code.0 == 15952 {
            unrecognized(name)
        } else {
            e
        }
    })?;
    Ok(WindowFunction::Accumulate {
        spec,
        window: window.unwrap_or(Window::WHOLE),
    })
}

fn unrecognized(name: &str) -> Error {
    Error::failed_to_parse(format!("Unrecognized window function, {name}"))
}

/// The output of `$setWindowFields`: the input sorted by partition key (spilling past
/// 100 MB), one partition at a time in memory, within the server's memory budget.
struct Partitions<'a> {
    stage: &'a SetWindowFields,
    ctx: ExecContext<'a>,
    sorted: KeyedDocuments,
    /// Output documents of the current partition not handed out yet.
    ready: VecDeque<Document>,
    /// The current partition's share of the server's memory budget.
    memory: Reservation,
}

impl Iterator for Partitions<'_> {
    type Item = Result<Document>;

    fn next(&mut self) -> Option<Result<Document>> {
        while self.ready.is_empty() {
            self.memory.clear();
            let mut docs = match SetWindowFields::next_partition(&mut self.sorted, &mut self.memory)
            {
                Ok(docs) if docs.is_empty() => return None,
                Ok(docs) => docs,
                Err(e) => return Some(Err(e)),
            };
            let out = match self.stage.partition(&mut docs, self.ctx) {
                Ok(out) => out,
                Err(e) => return Some(Err(e)),
            };
            // The outputs carry the window values too: count them as they are.
            self.memory.clear();
            let held: usize = out.iter().map(basalt_value::document_memory_bytes).sum();
            if let Err(exhausted) = self.memory.record(held) {
                return Some(Err(exhausted.to_error("$setWindowFields")));
            }
            self.ready.extend(out);
        }
        self.ready.pop_front().map(Ok)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use crate::pipeline::Pipeline;
    use bson::{bson, doc, Bson, Document};

    pub(crate) fn run(
        stage: Document,
        input: Vec<Document>,
    ) -> basalt_error::Result<Vec<Document>> {
        Pipeline::parse(&[stage], None)?.run(input.into_iter().map(Ok))
    }

    /// Runs `$setWindowFields` with one output `f` over `input`, returning `f` per document.
    pub(crate) fn column(spec: Document, input: Vec<Document>) -> Vec<Bson> {
        run(doc! {"$setWindowFields": spec}, input)
            .unwrap()
            .iter()
            .map(|d| d.get("f").cloned().unwrap_or(Bson::Null))
            .collect()
    }

    pub(crate) fn series() -> Vec<Document> {
        // Out of order on purpose: the stage sorts each partition.
        [
            (3, 30, "a"),
            (1, 10, "a"),
            (2, 20, "a"),
            (5, 5, "b"),
            (4, 4, "b"),
            (6, 6, "a"),
        ]
        .iter()
        .map(|(t, v, p)| doc! {"t": *t, "v": *v, "p": *p})
        .collect()
    }

    #[test]
    fn partitions_sort_and_accumulate() {
        let out = run(
            doc! {"$setWindowFields": {"partitionBy": "$p", "sortBy": {"t": 1},
                "output": {"total": {"$sum": "$v"}, "run.sum": {"$sum": "$v", "window": {"documents": ["unbounded", "current"]}}}}},
            series(),
        )
        .unwrap();
        assert_eq!(
            out,
            vec![
                doc! {"t": 1, "v": 10, "p": "a", "total": 66, "run": {"sum": 10}},
                doc! {"t": 2, "v": 20, "p": "a", "total": 66, "run": {"sum": 30}},
                doc! {"t": 3, "v": 30, "p": "a", "total": 66, "run": {"sum": 60}},
                doc! {"t": 6, "v": 6, "p": "a", "total": 66, "run": {"sum": 66}},
                doc! {"t": 4, "v": 4, "p": "b", "total": 9, "run": {"sum": 4}},
                doc! {"t": 5, "v": 5, "p": "b", "total": 9, "run": {"sum": 9}},
            ]
        );
    }

    #[test]
    fn document_and_range_windows() {
        let sorted =
            |output: Bson| column(doc! {"sortBy": {"t": 1}, "output": {"f": output}}, series());
        assert_eq!(
            sorted(bson!({"$push": "$v", "window": {"documents": [-1, 1]}})),
            vec![
                bson!([10, 20]),
                bson!([10, 20, 30]),
                bson!([20, 30, 4]),
                bson!([30, 4, 5]),
                bson!([4, 5, 6]),
                bson!([5, 6])
            ]
        );
        assert_eq!(
            sorted(bson!({"$sum": "$v", "window": {"documents": [1, 2]}})),
            vec![
                bson!(50),
                bson!(34),
                bson!(9),
                bson!(11),
                bson!(6),
                bson!(0)
            ]
        );
        // range: t within [t - 1.5, t]
        assert_eq!(
            sorted(bson!({"$push": "$t", "window": {"range": [-1.5, "current"]}})),
            vec![
                bson!([1]),
                bson!([1, 2]),
                bson!([2, 3]),
                bson!([3, 4]),
                bson!([4, 5]),
                bson!([5, 6])
            ]
        );
        assert_eq!(
            sorted(
                bson!({"$topN": {"n": 2, "sortBy": {"v": -1}, "output": "$t"},
                "window": {"range": [0, "unbounded"]}})
            ),
            vec![
                bson!([3, 2]),
                bson!([3, 2]),
                bson!([3, 6]),
                bson!([6, 5]),
                bson!([6, 5]),
                bson!([6])
            ]
        );
    }

    #[test]
    fn time_unit_ranges() {
        let day = 86_400_000_i64;
        let input: Vec<Document> = [0, 1, 3, 7]
            .iter()
            .map(|d| doc! {"at": bson::DateTime::from_millis(d * day), "n": 1})
            .collect();
        assert_eq!(
            column(
                doc! {"sortBy": {"at": 1}, "output": {"f": {"$sum": "$n", "window": {"range": [-2, 0], "unit": "day"}}}},
                input.clone()
            ),
            vec![bson!(1), bson!(2), bson!(2), bson!(1)]
        );
        let err = run(
            doc! {"$setWindowFields": {"sortBy": {"n": 1}, "output": {"f": {"$sum": "$n", "window": {"range": [-2, 0], "unit": "day"}}}}},
            input,
        );
        assert_eq!(err.unwrap_err().code.0, 5429513);
        let err = run(
            doc! {"$setWindowFields": {"sortBy": {"p": 1}, "output": {"f": {"$sum": "$v", "window": {"range": [-2, 0]}}}}},
            series(),
        );
        assert_eq!(err.unwrap_err().code.0, 5429413);
    }

    #[test]
    fn parse_errors() {
        let code = |spec: Bson| {
            run(doc! {"$setWindowFields": spec}, vec![])
                .unwrap_err()
                .code
                .0
        };
        let with = |output: Bson| code(bson!({"sortBy": {"t": 1}, "output": {"f": output}}));
        assert_eq!(code(bson!(1)), 9);
        assert_eq!(code(bson!({"partitionBy": "$p"})), 40414);
        assert_eq!(code(bson!({"output": {}, "x": 1})), 40415);
        assert_eq!(code(bson!({"output": 1})), 14);
        assert_eq!(with(bson!({"$summ": "$v"})), 9);
        assert_eq!(with(bson!({"window": {}})), 9);
        assert_eq!(with(bson!({"$sum": "$v", "other": 1})), 9);
        assert_eq!(
            with(bson!({"$sum": "$v", "window": {"documents": [1, -1]}})),
            5339900
        );
        assert_eq!(with(bson!({"$sum": "$v", "window": {"documents": [0]}})), 9);
        assert_eq!(
            with(bson!({"$sum": "$v", "window": {"documents": ["x", 1]}})),
            9
        );
        assert_eq!(
            with(bson!({"$sum": "$v", "window": {"documents": [0, 1], "range": [0, 1]}})),
            9
        );
        assert_eq!(
            with(bson!({"$sum": "$v", "window": {"range": [0, 1], "unit": "eon"}})),
            2
        );
        assert_eq!(
            code(bson!({"output": {"f": {"$sum": "$v", "window": {"documents": [0, 1]}}}})),
            5339901
        );
        assert_eq!(
            code(
                bson!({"sortBy": {"a": 1, "b": 1}, "output": {"f": {"$sum": "$v", "window": {"range": [0, 1]}}}})
            ),
            5339902
        );
        assert_eq!(
            code(
                bson!({"sortBy": {"a": -1}, "output": {"f": {"$sum": "$v", "window": {"range": [0, 1]}}}})
            ),
            8947401
        );
        // An empty sortBy is no order: the rank functions want one field.
        assert_eq!(
            code(bson!({"sortBy": {}, "output": {"f": {"$documentNumber": {}}}})),
            5371602
        );
        assert_eq!(
            code(bson!({"sortBy": {"t": 1}, "output": {"f": {"$rank": {}, "unit": "day"}}})),
            5371601
        );
        let by_array = run(
            doc! {"$setWindowFields": {"partitionBy": "$list", "output": {"f": {"$sum": 1}}}},
            vec![doc! {"list": [1, 2]}],
        );
        assert_eq!(by_array.unwrap_err().code.0, 14);
    }
}
