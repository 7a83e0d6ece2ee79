//! The functions of `$setWindowFields`: accumulators over a window, and those that only
//! exist in windows — `$rank $denseRank $documentNumber` (by `sortBy` position), `$shift`
//! (another document's value), `$derivative` and `$integral` (over the `sortBy` value,
//! in a time unit for dates), `$expMovingAvg`, `$covariancePop`/`$covarianceSamp`, and the
//! gap fillers `$locf` (last value carried forward) and `$linearFill` (interpolated
//! between the neighbouring values by `sortBy` position).

use crate::pipeline::ExecContext;
use crate::stages::set_window_fields::{SortBy, Window};
use crate::stages::time_unit::parse_unit;
use basalt_error::{Error, Result};
use basalt_expr::TimeUnit;
use basalt_expr::{Accumulator, AccumulatorSpec, Expression, ParseContext};
use basalt_query::SortSpec;
use basalt_value::display::value_to_string;
use basalt_value::Number;
use bson::{Bson, Document};
use std::cmp::Ordering;

/// One sorted partition, as the functions see it.
pub(crate) struct Partition<'p> {
    pub(crate) docs: &'p [Document],
    /// Each document's `sortBy` key (empty without `sortBy`).
    pub(crate) keys: &'p [Vec<Bson>],
    pub(crate) sort: Option<&'p SortSpec>,
    pub(crate) ctx: ExecContext<'p>,
}

impl Partition<'_> {
    /// `expression` evaluated on every document; missing stays `None`.
    fn evaluate(&self, expression: &Expression) -> Result<Vec<Option<Bson>>> {
        self.docs
            .iter()
            .map(|d| expression.evaluate(d, self.ctx.vars))
            .collect()
    }

    /// The single `sortBy` value of each document.
    fn sort_values(&self) -> Vec<Bson> {
        self.keys
            .iter()
            .map(|k| k.first().cloned().unwrap_or(Bson::Null))
            .collect()
    }
}

#[derive(Debug)]
pub(crate) enum WindowFunction {
    Accumulate {
        spec: AccumulatorSpec,
        window: Window,
    },
    Rank(Rank),
    Shift {
        output: Expression,
        by: i64,
        default: Bson,
    },
    /// `$derivative` (`integral: false`) and `$integral`.
    Calculus {
        input: Expression,
        unit: Option<TimeUnit>,
        window: Window,
        integral: bool,
    },
    ExpMovingAvg {
        input: Expression,
        alpha: f64,
    },
    /// `$covariancePop`/`$covarianceSamp` of one expression whose value, per document,
    /// is the pair `[x, y]` (written as a two-element array of expressions); any other
    /// value is skipped.
    Covariance {
        pair: Expression,
        sample: bool,
        window: Window,
    },
    Locf(Expression),
    LinearFill(Expression),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rank {
    /// `$rank`: ties share the position of their first document.
    Standard,
    /// `$denseRank`: ties share one rank, and ranks have no gaps.
    Dense,
    DocumentNumber,
}

/// Parses the window-only functions; `None` for names that are accumulators.
pub(crate) fn parse(
    name: &str,
    args: &Bson,
    window: Option<Window>,
    sort: Option<&SortBy>,
    ctx: &ParseContext,
) -> Result<Option<WindowFunction>> {
    let no_window = || match window {
        Some(_) => Err(Error::failed_to_parse(format!(
            "{name} does not accept a 'window' field"
        ))),
        None => Ok(()),
    };
    let needs_sort = || match sort {
        Some(_) => Ok(()),
        None => Err(Error::failed_to_parse(format!("{name} requires a sortBy"))),
    };
    let needs_single_sort = || match sort.and_then(|s| s.single_field) {
        Some(_) => Ok(()),
        None => Err(Error::failed_to_parse(format!(
            "{name} requires a sortBy that is a single field"
        ))),
    };
    let function = match name {
        // `$setWindowFields` refuses any other argument beside them (5371601).
        "$rank" | "$denseRank" | "$documentNumber" => {
            if !matches!(args, Bson::Document(d) if d.is_empty()) {
                return Err(Error::location(
                    5371603,
                    format!("{name} must be specified with '{{}}' as the value"),
                ));
            }
            if sort.is_none_or(|s| s.single_field.is_none()) {
                return Err(Error::location(
                    5371602,
                    format!("{name} must be specified with a top level sortBy expression with exactly one element"),
                ));
            }
            WindowFunction::Rank(match name {
                "$rank" => Rank::Standard,
                "$denseRank" => Rank::Dense,
                _ => Rank::DocumentNumber,
            })
        }
        "$shift" => {
            no_window()?;
            needs_sort()?;
            let spec = object(name, args)?;
            let (mut output, mut by, mut default) = (None, None, Bson::Null);
            for (key, value) in spec {
                match key.as_str() {
                    "output" => output = Some(Expression::parse(value, ctx)?),
                    "by" => {
                        by = Some(
                            Number::from_bson(value)
                                .and_then(Number::to_i64_exact)
                                .ok_or_else(|| {
                                    Error::failed_to_parse(format!(
                                        "'$shift:by' field must be an integer, but found {}",
                                        value_to_string(value)
                                    ))
                                })?,
                        )
                    }
                    "default" => {
                        default = Expression::parse(value, ctx)?
                            .as_constant()
                            .cloned()
                            .ok_or_else(|| {
                                Error::failed_to_parse(
                                    "'$shift:default' expression must yield a constant value.",
                                )
                            })?
                    }
                    _ => {
                        return Err(Error::failed_to_parse(format!(
                            "Unknown argument in $shift: {key}"
                        )))
                    }
                }
            }
            let output = output
                .ok_or_else(|| Error::failed_to_parse("$shift requires an 'output' expression."))?;
            let by = by.ok_or_else(|| {
                Error::failed_to_parse("$shift requires 'by' as an integer value.")
            })?;
            WindowFunction::Shift {
                output,
                by,
                default,
            }
        }
        "$derivative" | "$integral" => {
            needs_single_sort()?;
            let integral = name == "$integral";
            let window = match window {
                Some(w) => w,
                None if integral => Window::WHOLE,
                None => {
                    return Err(Error::failed_to_parse(
                        "$derivative requires explicit window bounds",
                    ))
                }
            };
            let spec = object(name, args)?;
            let (mut input, mut unit) = (None, None);
            for (key, value) in spec {
                match (key.as_str(), value) {
                    ("input", v) => input = Some(Expression::parse(v, ctx)?),
                    ("unit", Bson::String(u)) => {
                        let parsed = parse_unit(u)?;
                        if parsed.utc_length_ms().is_none() {
                            return Err(Error::location(5490710, "unit must be 'week' or smaller"));
                        }
                        unit = Some(parsed);
                    }
                    ("unit", _) => {
                        return Err(Error::failed_to_parse(format!(
                            "{name} 'unit' must be a string"
                        )))
                    }
                    _ => {
                        return Err(Error::failed_to_parse(format!(
                            "{name} got unexpected argument: {key}"
                        )))
                    }
                }
            }
            let input = input.ok_or_else(|| {
                Error::failed_to_parse(format!("{name} requires an 'input' expression"))
            })?;
            WindowFunction::Calculus {
                input,
                unit,
                window,
                integral,
            }
        }
        "$expMovingAvg" => {
            no_window()?;
            needs_sort()?;
            let spec = object(name, args)?;
            let input = spec.get("input");
            let (Some(input), 2) = (input, spec.len()) else {
                return Err(Error::failed_to_parse(
                    "$expMovingAvg sub object must have exactly two fields: An 'input' field, and either an 'N' field or an 'alpha' field",
                ));
            };
            let alpha = match (spec.get("N"), spec.get("alpha")) {
                (Some(n), None) => {
                    let n = Number::from_bson(n)
                        .and_then(Number::to_i64_exact)
                        .ok_or_else(|| Error::failed_to_parse("'N' field must be an integer"))?;
                    if n <= 0 {
                        return Err(Error::failed_to_parse(format!(
                            "'N' must be greater than zero. Got {n}"
                        )));
                    }
                    2.0 / (n as f64 + 1.0)
                }
                (None, Some(a)) => {
                    let a = Number::from_bson(a)
                        .map(Number::to_f64)
                        .ok_or_else(|| Error::failed_to_parse("'alpha' must be a number"))?;
                    if a <= 0.0 || a >= 1.0 {
                        return Err(Error::failed_to_parse(format!(
                            "'alpha' must be between 0 and 1 (exclusive), found {a}"
                        )));
                    }
                    a
                }
                _ => {
                    return Err(Error::failed_to_parse(
                        "Got unrecognized field in $expMovingAvg: it takes 'input' and either 'N' or 'alpha'",
                    ))
                }
            };
            WindowFunction::ExpMovingAvg {
                input: Expression::parse(input, ctx)?,
                alpha,
            }
        }
        "$covariancePop" | "$covarianceSamp" => WindowFunction::Covariance {
            pair: Expression::parse(args, ctx)?,
            sample: name == "$covarianceSamp",
            window: window.unwrap_or(Window::WHOLE),
        },
        "$locf" => {
            no_window()?;
            WindowFunction::Locf(Expression::parse(args, ctx)?)
        }
        "$linearFill" => {
            no_window()?;
            needs_single_sort()?;
            WindowFunction::LinearFill(Expression::parse(args, ctx)?)
        }
        _ => return Ok(None),
    };
    Ok(Some(function))
}

fn object<'a>(name: &str, args: &'a Bson) -> Result<&'a Document> {
    match args {
        Bson::Document(d) => Ok(d),
        other => Err(Error::failed_to_parse(format!(
            "Argument to {name} must be an object, found {}",
            value_to_string(other)
        ))),
    }
}

fn number(value: Option<&Bson>) -> Option<f64> {
    value.and_then(Number::from_bson).map(Number::to_f64)
}

fn integer_bson(n: usize) -> Bson {
    i32::try_from(n).map_or(Bson::Int64(n as i64), Bson::Int32)
}

impl WindowFunction {
    /// The function's value for every document of the partition.
    pub(crate) fn compute(&self, p: &Partition<'_>) -> Result<Vec<Bson>> {
        let len = p.docs.len();
        match self {
            WindowFunction::Accumulate { spec, window } => {
                let args = p.evaluate(&spec.argument)?;
                let spans = window.spans(len, &p.sort_values())?;
                accumulate_windows(spec, &args, &spans)
            }
            WindowFunction::Rank(kind) => {
                let sort = p.sort.expect("ranks require a sortBy");
                let mut out = Vec::with_capacity(len);
                let (mut rank, mut dense) = (0, 0);
                for i in 0..len {
                    let tied =
                        i > 0 && sort.compare_keys(&p.keys[i - 1], &p.keys[i]) == Ordering::Equal;
                    if !tied {
                        rank = i + 1;
                        dense += 1;
                    }
                    out.push(integer_bson(match kind {
                        Rank::Standard => rank,
                        Rank::Dense => dense,
                        Rank::DocumentNumber => i + 1,
                    }));
                }
                Ok(out)
            }
            WindowFunction::Shift {
                output,
                by,
                default,
            } => (0..len as i64)
                .map(|i| {
                    match usize::try_from(i.saturating_add(*by))
                        .ok()
                        .filter(|j| *j < len)
                    {
                        Some(j) => Ok(output
                            .evaluate(&p.docs[j], p.ctx.vars)?
                            .unwrap_or(Bson::Null)),
                        None => Ok(default.clone()),
                    }
                })
                .collect(),
            WindowFunction::Calculus {
                input,
                unit,
                window,
                integral,
            } => {
                let ys = p.evaluate(input)?;
                let keys = p.sort_values();
                let xs = keys
                    .iter()
                    .map(|k| calculus_x(k, *unit))
                    .collect::<Result<Vec<f64>>>()?;
                let spans = window.spans(len, &keys)?;
                Ok(spans
                    .into_iter()
                    .map(|(start, end)| {
                        let points: Vec<(f64, f64)> = (start..end)
                            .filter_map(|j| Some((xs[j], number(ys[j].as_ref())?)))
                            .collect();
                        if *integral {
                            integral_of(&points)
                        } else {
                            derivative_of(&points)
                        }
                    })
                    .collect())
            }
            WindowFunction::ExpMovingAvg { input, alpha } => {
                let mut average: Option<f64> = None;
                Ok(p.evaluate(input)?
                    .iter()
                    .map(|v| {
                        if let Some(x) = number(v.as_ref()) {
                            average = Some(average.map_or(x, |a| x * alpha + a * (1.0 - alpha)));
                        }
                        average.map_or(Bson::Null, Bson::Double)
                    })
                    .collect())
            }
            WindowFunction::Covariance {
                pair,
                sample,
                window,
            } => {
                let points: Vec<Option<(f64, f64)>> = p
                    .evaluate(pair)?
                    .iter()
                    .map(|v| match v {
                        Some(Bson::Array(xy)) => match xy.as_slice() {
                            [x, y] => Some((number(Some(x))?, number(Some(y))?)),
                            _ => None,
                        },
                        _ => None,
                    })
                    .collect();
                let spans = window.spans(len, &p.sort_values())?;
                Ok(spans
                    .into_iter()
                    .map(|(start, end)| {
                        let pairs: Vec<(f64, f64)> =
                            points[start..end].iter().flatten().copied().collect();
                        covariance(&pairs, *sample)
                    })
                    .collect())
            }
            WindowFunction::Locf(input) => {
                let mut last = Bson::Null;
                Ok(p.evaluate(input)?
                    .into_iter()
                    .map(|v| {
                        if let Some(v) = v.filter(|v| !matches!(v, Bson::Null | Bson::Undefined)) {
                            last = v;
                        }
                        last.clone()
                    })
                    .collect())
            }
            WindowFunction::LinearFill(input) => {
                let ys = p.evaluate(input)?;
                let xs = p
                    .sort_values()
                    .iter()
                    .map(|k| {
                        calculus_x(k, None).or_else(|_| calculus_x(k, Some(TimeUnit::Millisecond)))
                    })
                    .collect::<Result<Vec<f64>>>()?;
                Ok(linear_fill(&xs, &ys))
            }
        }
    }
}

/// Each document's accumulated value over its span of `args`.
fn accumulate_windows(
    spec: &AccumulatorSpec,
    args: &[Option<Bson>],
    spans: &[(usize, usize)],
) -> Result<Vec<Bson>> {
    let mut window = SlidingWindow::new(spec, args);
    spans
        .iter()
        .map(|&(start, end)| window.value(start, end))
        .collect()
}

/// A window moving forward over `args`, aggregated with two stacks: the elements leave
/// from a stack of suffix aggregates and arrive in one running aggregate, and each answer
/// merges the two. Every element is accumulated at most twice, so a moving window costs
/// time linear in the partition whatever its width (for accumulators whose state does
/// not grow with the window). It relies on `Accumulator::merge` being exactly the
/// sequential accumulation split in two.
///
/// A state that keeps every value (`$push`, `$addToSet`, ...) would make the stack of
/// suffix states hold the window's values once per element, quadratic in its width; such
/// a window is accumulated afresh whenever its start moves, in time and memory linear in
/// its width (as its output is), and grows incrementally while its start stays.
struct SlidingWindow<'a> {
    spec: &'a AccumulatorSpec,
    args: &'a [Option<Bson>],
    /// Aggregates of `[lo, mid)`, `[lo + 1, mid)`, ...: the last is the whole front.
    front: Vec<Accumulator>,
    /// The aggregate of `[mid, hi)`.
    back: Accumulator,
    lo: usize,
    mid: usize,
    hi: usize,
}

impl<'a> SlidingWindow<'a> {
    fn new(spec: &'a AccumulatorSpec, args: &'a [Option<Bson>]) -> SlidingWindow<'a> {
        SlidingWindow {
            spec,
            args,
            front: Vec::new(),
            back: spec.new_accumulator(),
            lo: 0,
            mid: 0,
            hi: 0,
        }
    }

    /// The aggregate of `[start, end)`; windows only move forward.
    fn value(&mut self, start: usize, end: usize) -> Result<Bson> {
        let restart = if self.back.keeps_values() {
            start != self.lo
        } else {
            start < self.lo
        };
        if restart || end < self.hi {
            *self = SlidingWindow::new(self.spec, self.args);
            self.lo = start;
            self.mid = start;
            self.hi = start;
        }
        while self.hi < end {
            self.back.accumulate(self.args[self.hi].as_ref())?;
            self.hi += 1;
        }
        while self.lo < start {
            if self.front.is_empty() {
                self.flip()?;
            }
            self.front.pop();
            self.lo += 1;
        }
        let Some(front) = self.front.last() else {
            return self.back.clone().finish();
        };
        let mut result = front.clone();
        if self.mid < self.hi {
            result.merge(self.back.clone())?;
        }
        result.finish()
    }

    /// Turns the back `[mid, hi)` into the front's suffix aggregates.
    fn flip(&mut self) -> Result<()> {
        let mut stack: Vec<Accumulator> = Vec::with_capacity(self.hi - self.mid);
        for k in (self.mid..self.hi).rev() {
            let mut acc = self.spec.new_accumulator();
            acc.accumulate(self.args[k].as_ref())?;
            if let Some(later) = stack.last() {
                acc.merge(later.clone())?;
            }
            stack.push(acc);
        }
        self.front = stack;
        self.mid = self.hi;
        self.back = self.spec.new_accumulator();
        Ok(())
    }
}

/// The x coordinate of `$derivative`/`$integral`/`$linearFill`: a number, or a date in
/// `unit`s.
fn calculus_x(key: &Bson, unit: Option<TimeUnit>) -> Result<f64> {
    match (key, unit.and_then(TimeUnit::utc_length_ms)) {
        (Bson::DateTime(d), Some(ms)) => Ok(d.timestamp_millis() as f64 / ms as f64),
        (Bson::DateTime(_), None) => Err(Error::location(
            5624901,
            "For dates, a time 'unit' is required",
        )),
        (other, Some(_)) => Err(Error::location(
            5624900,
            format!(
                "With 'unit', the sortBy field must be a date, but it was {}",
                value_to_string(other)
            ),
        )),
        (other, None) => Number::from_bson(other).map(Number::to_f64).ok_or_else(|| {
            Error::location(
                5624902,
                format!(
                    "The sortBy field must be a number, but it was {}",
                    value_to_string(other)
                ),
            )
        }),
    }
}

/// Rise over run between the window's first and last points; null with fewer than two.
fn derivative_of(points: &[(f64, f64)]) -> Bson {
    match (points.first(), points.last()) {
        (Some(&(x0, y0)), Some(&(x1, y1))) if points.len() > 1 && x1 != x0 => {
            Bson::Double((y1 - y0) / (x1 - x0))
        }
        _ => Bson::Null,
    }
}

/// The trapezoidal rule over the window's points; null without any.
fn integral_of(points: &[(f64, f64)]) -> Bson {
    if points.is_empty() {
        return Bson::Null;
    }
    Bson::Double(
        points
            .windows(2)
            .map(|w| (w[0].1 + w[1].1) / 2.0 * (w[1].0 - w[0].0))
            .sum(),
    )
}

fn covariance(pairs: &[(f64, f64)], sample: bool) -> Bson {
    let n = pairs.len() as f64;
    let divisor = if sample { n - 1.0 } else { n };
    if divisor <= 0.0 {
        return Bson::Null;
    }
    let (mx, my) = pairs
        .iter()
        .fold((0.0, 0.0), |(sx, sy), (x, y)| (sx + x / n, sy + y / n));
    let co: f64 = pairs.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    Bson::Double(co / divisor)
}

/// Null and missing values interpolated between the nearest numbers before and after;
/// null where either side has none.
fn linear_fill(xs: &[f64], ys: &[Option<Bson>]) -> Vec<Bson> {
    let known: Vec<Option<f64>> = ys.iter().map(|y| number(y.as_ref())).collect();
    let mut next_known = vec![None; ys.len()];
    for i in (0..ys.len().saturating_sub(1)).rev() {
        next_known[i] = if known[i + 1].is_some() {
            Some(i + 1)
        } else {
            next_known[i + 1]
        };
    }
    let mut out = Vec::with_capacity(ys.len());
    let mut previous: Option<usize> = None;
    for (i, y) in ys.iter().enumerate() {
        if known[i].is_some() || !matches!(y, None | Some(Bson::Null | Bson::Undefined)) {
            previous = known[i].map(|_| i).or(previous);
            out.push(y.clone().unwrap_or(Bson::Null));
            continue;
        }
        out.push(match (previous, next_known[i]) {
            (Some(a), Some(b)) => {
                let (ya, yb) = (known[a].unwrap_or_default(), known[b].unwrap_or_default());
                Bson::Double(ya + (yb - ya) * (xs[i] - xs[a]) / (xs[b] - xs[a]))
            }
            _ => Bson::Null,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::stages::set_window_fields::tests::{column, run, series};
    use bson::{bson, doc, Bson, Document};

    fn sorted(output: Bson) -> Vec<Bson> {
        column(doc! {"sortBy": {"t": 1}, "output": {"f": output}}, series())
    }

    #[test]
    fn ranks() {
        let input: Vec<Document> = [5, 3, 5, 1, 3].iter().map(|s| doc! {"s": *s}).collect();
        let ranked = |f: &str| {
            column(
                doc! {"sortBy": {"s": -1}, "output": {"f": {f: {}}}},
                input.clone(),
            )
        };
        assert_eq!(
            ranked("$rank"),
            vec![bson!(1), bson!(1), bson!(3), bson!(3), bson!(5)]
        );
        assert_eq!(
            ranked("$denseRank"),
            vec![bson!(1), bson!(1), bson!(2), bson!(2), bson!(3)]
        );
        assert_eq!(
            ranked("$documentNumber"),
            vec![bson!(1), bson!(2), bson!(3), bson!(4), bson!(5)]
        );
    }

    #[test]
    fn shift_and_fills() {
        assert_eq!(
            sorted(bson!({"$shift": {"output": "$v", "by": -1, "default": "none"}})),
            vec![
                bson!("none"),
                bson!(10),
                bson!(20),
                bson!(30),
                bson!(4),
                bson!(5)
            ]
        );
        let gaps: Vec<Document> = vec![
            doc! {"t": 1, "v": 1.0},
            doc! {"t": 2},
            doc! {"t": 4, "v": null},
            doc! {"t": 5, "v": 9.0},
            doc! {"t": 6},
        ];
        let fill = |f: Bson| column(doc! {"sortBy": {"t": 1}, "output": {"f": f}}, gaps.clone());
        assert_eq!(
            fill(bson!({"$linearFill": "$v"})),
            vec![bson!(1.0), bson!(3.0), bson!(7.0), bson!(9.0), Bson::Null]
        );
        assert_eq!(
            fill(bson!({"$locf": "$v"})),
            vec![bson!(1.0), bson!(1.0), bson!(1.0), bson!(9.0), bson!(9.0)]
        );
    }

    #[test]
    fn calculus_and_statistics() {
        assert_eq!(
            sorted(bson!({"$derivative": {"input": "$v"}, "window": {"documents": [-1, 0]}})),
            vec![
                Bson::Null,
                bson!(10.0),
                bson!(10.0),
                bson!(-26.0),
                bson!(1.0),
                bson!(1.0)
            ]
        );
        assert_eq!(
            sorted(
                bson!({"$integral": {"input": "$v"}, "window": {"documents": ["unbounded", "current"]}})
            ),
            vec![
                bson!(0.0),
                bson!(15.0),
                bson!(40.0),
                bson!(57.0),
                bson!(61.5),
                bson!(67.0)
            ]
        );
        assert_eq!(
            sorted(bson!({"$expMovingAvg": {"input": "$v", "alpha": 0.5}})),
            vec![
                bson!(10.0),
                bson!(15.0),
                bson!(22.5),
                bson!(13.25),
                bson!(9.125),
                bson!(7.5625)
            ]
        );
        let cov = sorted(bson!({"$covariancePop": ["$t", "$t"], "window": {"documents": [0, 1]}}));
        assert_eq!(
            cov,
            vec![
                bson!(0.25),
                bson!(0.25),
                bson!(0.25),
                bson!(0.25),
                bson!(0.25),
                bson!(0.0)
            ]
        );
        let samp =
            sorted(bson!({"$covarianceSamp": ["$t", "$v"], "window": {"documents": [0, 0]}}));
        assert!(samp.iter().all(|v| *v == Bson::Null));
        // One expression whose value is not a pair of numbers: skipped, as is an array
        // operand of a one-operand function.
        for f in [
            bson!({"$covariancePop": "$v"}),
            bson!({"$covariancePop": ["$t", "$v", "$t"]}),
            bson!({"$stdDevPop": ["$t", "$v"]}),
        ] {
            assert!(sorted(f).iter().all(|v| *v == Bson::Null));
        }
    }

    #[test]
    fn sliding_windows_match_fresh_accumulation() {
        use super::accumulate_windows;
        use basalt_expr::{AccumulatorSpec, ParseContext, Variables};
        let docs: Vec<Document> = (0..40)
            .map(|i| doc! {"v": i * 37 % 11, "s": format!("s{}", i % 4)})
            .collect();
        let specs = [
            bson!({"$sum": "$v"}),
            bson!({"$avg": "$v"}),
            bson!({"$min": "$v"}),
            bson!({"$max": "$s"}),
            bson!({"$first": "$v"}),
            bson!({"$last": "$s"}),
            bson!({"$push": "$v"}),
            bson!({"$addToSet": "$s"}),
            bson!({"$topN": {"n": 2, "sortBy": {"v": -1}, "output": "$s"}}),
            bson!({"$lastN": {"n": 3, "input": "$v"}}),
            bson!({"$median": {"input": "$v", "method": "approximate"}}),
        ];
        // Moving windows of several widths, and windows that jump.
        let spans: Vec<Vec<(usize, usize)>> = vec![
            (0..40)
                .map(|i: usize| (i.saturating_sub(3), (i + 2).min(40)))
                .collect(),
            (0..40).map(|i| (i, 40)).collect(),
            (0..40)
                .map(|i| (i / 10 * 10, (i / 10 * 10 + 10).min(40)))
                .collect(),
            (0..40).map(|i| (i, i)).collect(),
        ];
        for spec in specs {
            let spec = AccumulatorSpec::parse("f", &spec, &ParseContext::new()).unwrap();
            let args: Vec<Option<Bson>> = docs
                .iter()
                .map(|d| spec.argument.evaluate(d, &Variables::new()).unwrap())
                .collect();
            for windows in &spans {
                let fresh: Vec<Bson> = windows
                    .iter()
                    .map(|&(start, end)| {
                        let mut acc = spec.new_accumulator();
                        for arg in &args[start..end] {
                            acc.accumulate(arg.as_ref()).unwrap();
                        }
                        acc.finish().unwrap()
                    })
                    .collect();
                assert_eq!(
                    accumulate_windows(&spec, &args, windows).unwrap(),
                    fresh,
                    "{spec:?}"
                );
            }
        }
    }

    #[test]
    fn window_function_errors() {
        let code = |spec: Document| {
            run(doc! {"$setWindowFields": spec}, vec![])
                .unwrap_err()
                .code
                .0
        };
        let sorted = |f: Bson| code(doc! {"sortBy": {"t": 1}, "output": {"f": f}});
        assert_eq!(code(doc! {"output": {"f": {"$rank": {}}}}), 5371602);
        assert_eq!(sorted(bson!({"$rank": 1})), 5371603);
        assert_eq!(
            code(doc! {"sortBy": {"a": 1, "b": 1}, "output": {"f": {"$documentNumber": {}}}}),
            5371602
        );
        assert_eq!(
            sorted(bson!({"$rank": {}, "window": {"documents": [0, 1]}})),
            5371601
        );
        assert_eq!(
            code(doc! {"output": {"f": {"$shift": {"output": 1, "by": 1}}}}),
            9
        );
        assert_eq!(sorted(bson!({"$shift": {"output": 1, "by": 1.5}})), 9);
        assert_eq!(
            sorted(bson!({"$shift": {"output": 1, "by": 1, "default": "$x"}})),
            9
        );
        assert_eq!(sorted(bson!({"$derivative": {"input": "$v"}})), 9);
        assert_eq!(
            sorted(
                bson!({"$derivative": {"input": "$v", "unit": "month"}, "window": {"documents": [0, 1]}})
            ),
            5490710
        );
        assert_eq!(sorted(bson!({"$expMovingAvg": {"input": "$v", "N": 0}})), 9);
        assert_eq!(
            sorted(bson!({"$expMovingAvg": {"input": "$v", "alpha": 1}})),
            9
        );
        assert_eq!(sorted(bson!({"$accumulator": {}})), 9);
        assert_eq!(code(doc! {"output": {"f": {"$linearFill": "$v"}}}), 9);
    }
}
