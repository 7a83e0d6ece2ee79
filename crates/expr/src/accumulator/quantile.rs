//! `$median` and `$percentile`, as accumulators and as expressions.
//!
//! MongoDB 7.0 accepts only `method: "approximate"` (a t-digest); Basalt computes the
//! percentiles exactly, with MongoDB's discrete rule (the value at rank `ceil(p·n)`, the
//! one its t-digest converges to and that its expression form returns). Only numbers count;
//! with none the answer is null (one null per requested percentile). The partial state is
//! the numbers seen, so merging partitions is concatenation.

use crate::context::ParseContext;
use crate::env::Env;
use crate::expression::Expression;
use basalt_error::{Error, ErrorCode, Result};
use basalt_value::display::{type_name, value_to_string};
use basalt_value::Number;
use bson::Bson;
use std::sync::Arc;

/// The percentiles asked for: `$median` is `$percentile` of 0.5 answered as one value.
#[derive(Debug)]
pub struct QuantileSpec {
    ps: Vec<f64>,
    median: bool,
}

impl QuantileSpec {
    /// Parses `{input, p, method}` (`{input, method}` for `$median`); `expression` picks the
    /// error code of the expression form. Returns the spec and the `input` expression.
    pub fn parse(
        name: &str,
        arg: &Bson,
        ctx: &ParseContext,
        expression: bool,
    ) -> Result<(QuantileSpec, Expression)> {
        let median = name == "$median";
        let not_object = match (median, expression) {
            (true, false) => 7436100,
            (true, true) => 7436201,
            (false, false) => 7429703,
            (false, true) => 7436200,
        };
        let Bson::Document(spec) = arg else {
            return Err(Error::location(
                not_object,
                format!(
                    "specification must be an object; found {}",
                    value_to_string(arg)
                ),
            ));
        };
        let (mut input, mut p, mut method) = (None, None, None);
        for (field, value) in spec {
            match field.as_str() {
                "input" => input = Some(value),
                "p" if !median => p = Some(value),
                "method" => method = Some(value),
                _ => {
                    return Err(Error::location(
                        40415,
                        format!("BSON field '{name}.{field}' is an unknown field."),
                    ))
                }
            }
        }
        let missing = |field: &str| {
            Error::location(
                40414,
                format!("BSON field '{name}.{field}' is missing but a required field"),
            )
        };
        let input = Expression::parse(input.ok_or_else(|| missing("input"))?, ctx)?;
        let ps = match p {
            None if median => vec![0.5],
            None => return Err(missing("p")),
            Some(p) => parse_p(p, ctx)?,
        };
        match method.ok_or_else(|| missing("method"))? {
            Bson::String(m) if m == "approximate" => {}
            Bson::String(_) => {
                return Err(Error::bad_value(
                    "Currently only 'approximate' can be used as percentile 'method'.",
                ))
            }
            other => {
                return Err(Error::new(
                    ErrorCode::TYPE_MISMATCH,
                    format!(
                        "BSON field '{name}.method' is the wrong type '{}', expected type 'string'",
                        type_name(other)
                    ),
                ))
            }
        }
        Ok((QuantileSpec { ps, median }, input))
    }

    /// The answer for these numbers, sorted ascending.
    fn answer(&self, sorted: &[f64]) -> Bson {
        let value = |p: f64| {
            if sorted.is_empty() {
                return Bson::Null;
            }
            let rank = (p * sorted.len() as f64).ceil() as usize;
            Bson::Double(sorted[rank.saturating_sub(1).min(sorted.len() - 1)])
        };
        if self.median {
            value(0.5)
        } else {
            Bson::Array(self.ps.iter().map(|p| value(*p)).collect())
        }
    }
}

/// `p`: a constant, non-empty array of numbers in [0, 1].
fn parse_p(p: &Bson, ctx: &ParseContext) -> Result<Vec<f64>> {
    let expr = Expression::parse(p, ctx)?;
    let Some(value) = expr.as_constant() else {
        return Err(Error::location(
            7750300,
            format!(
                "The $percentile 'p' field must be an array of constant values, but found value: {}.",
                value_to_string(p)
            ),
        ));
    };
    let message =
        "The $percentile 'p' field must be an array of numbers from [0.0, 1.0], but found: ";
    let items = match value {
        Bson::Array(items) if !items.is_empty() => items,
        other => {
            return Err(Error::location(
                7750301,
                format!("{message}{}", value_to_string(other)),
            ))
        }
    };
    items
        .iter()
        .map(|item| {
            let p = Number::from_bson(item).map(Number::to_f64).ok_or_else(|| {
                Error::location(7750302, format!("{message}{}", value_to_string(item)))
            })?;
            if !(0.0..=1.0).contains(&p) {
                return Err(Error::location(7750303, format!("{message}{p}")));
            }
            Ok(p)
        })
        .collect()
}

/// The running state: every number seen.
#[derive(Clone, Debug)]
pub struct Quantile {
    spec: Arc<QuantileSpec>,
    values: Vec<f64>,
}

impl Quantile {
    pub fn new(spec: Arc<QuantileSpec>) -> Quantile {
        Quantile {
            spec,
            values: Vec::new(),
        }
    }

    /// Takes one value; returns the bytes of memory the state grew by.
    pub fn accumulate(&mut self, value: Option<&Bson>) -> isize {
        match value.and_then(Number::from_bson) {
            Some(n) => {
                self.values.push(n.to_f64());
                std::mem::size_of::<f64>() as isize
            }
            None => 0,
        }
    }

    pub fn merge(&mut self, later: Quantile) {
        self.values.extend(later.values);
    }

    pub fn finish(mut self) -> Bson {
        self.values.sort_by(f64::total_cmp);
        self.spec.answer(&self.values)
    }
}

/// `{$median: {...}}` and `{$percentile: {...}}` as expressions: over an array's numbers,
/// or a single number.
#[derive(Debug)]
pub(crate) struct QuantileExpression {
    spec: QuantileSpec,
    input: Expression,
}

impl QuantileExpression {
    pub(crate) fn parse(name: &str, arg: &Bson, ctx: &ParseContext) -> Result<Option<Self>> {
        if name != "$median" && name != "$percentile" {
            return Ok(None);
        }
        let (spec, input) = QuantileSpec::parse(name, arg, ctx, true)?;
        Ok(Some(QuantileExpression { spec, input }))
    }

    pub(crate) fn eval(&self, env: &Env<'_>) -> Result<Bson> {
        let input = self.input.eval(env)?;
        let mut values: Vec<f64> = match input.as_deref() {
            Some(Bson::Array(items)) => items
                .iter()
                .filter_map(Number::from_bson)
                .map(Number::to_f64)
                .collect(),
            Some(other) => Number::from_bson(other)
                .map(Number::to_f64)
                .into_iter()
                .collect(),
            None => Vec::new(),
        };
        values.sort_by(f64::total_cmp);
        Ok(self.spec.answer(&values))
    }
}
