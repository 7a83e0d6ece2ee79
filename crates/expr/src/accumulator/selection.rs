//! The accumulators that keep `n` chosen values: `$firstN $lastN` (by arrival), `$minN
//! $maxN` (by value, ignoring null and missing) and `$top $bottom $topN $bottomN` (by a
//! `sortBy` order, keeping the output of the first or last documents in it).
//!
//! As in MongoDB, `$top`/`$bottom` evaluate one argument per document that carries both
//! the output and the sort fields (`[output, "$field0", "$field1", ...]`), so the sort key
//! comes from the same evaluation as the output. A sort field that reaches an array sorts
//! by its smallest element ascending and its largest descending. Ties keep the value seen
//! first. Partial states merge exactly: the entries kept by a later partition are offered
//! to the earlier one in their order, which keeps the first-seen rule across partitions.

use crate::context::ParseContext;
use crate::expression::{is_nullish, Expression};
use basalt_error::{Error, Result};
use basalt_value::display::value_to_string;
use basalt_value::{compare_values_with, value_memory_bytes, Collation, Number};
use bson::Bson;
use std::cmp::Ordering;
use std::collections::VecDeque;
use std::sync::Arc;

/// Which of the selecting accumulators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selector {
    FirstN,
    LastN,
    MinN,
    MaxN,
    Top,
    Bottom,
    TopN,
    BottomN,
}

impl Selector {
    pub fn from_name(name: &str) -> Option<Selector> {
        Some(match name {
            "$firstN" => Selector::FirstN,
            "$lastN" => Selector::LastN,
            "$minN" => Selector::MinN,
            "$maxN" => Selector::MaxN,
            "$top" => Selector::Top,
            "$bottom" => Selector::Bottom,
            "$topN" => Selector::TopN,
            "$bottomN" => Selector::BottomN,
            _ => return None,
        })
    }

    /// `$top` and `$bottom` answer one value rather than an array.
    fn single(self) -> bool {
        matches!(self, Selector::Top | Selector::Bottom)
    }

    fn sorted(self) -> bool {
        matches!(
            self,
            Selector::Top | Selector::Bottom | Selector::TopN | Selector::BottomN
        )
    }

    fn keep(self) -> Keep {
        match self {
            Selector::FirstN => Keep::Earliest,
            Selector::LastN => Keep::Latest,
            Selector::MinN | Selector::Top | Selector::TopN => Keep::Smallest,
            Selector::MaxN | Selector::Bottom | Selector::BottomN => Keep::Largest,
        }
    }
}

/// Which `n` entries an accumulator keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Keep {
    Earliest,
    Latest,
    Smallest,
    Largest,
}

/// The order of `$top`/`$bottom` (one direction per `sortBy` field) or of `$minN`/`$maxN`
/// (one ascending field: the value itself).
#[derive(Clone, Debug)]
pub struct KeyOrder {
    descending: Vec<bool>,
    collation: Option<Collation>,
}

impl KeyOrder {
    /// One direction per sort field, strings compared under `collation`.
    pub(crate) fn new(descending: Vec<bool>, collation: Option<Collation>) -> KeyOrder {
        KeyOrder {
            descending,
            collation,
        }
    }

    /// Whether each sort field is descending.
    pub(crate) fn directions(&self) -> &[bool] {
        &self.descending
    }

    pub(crate) fn compare(&self, a: &[Bson], b: &[Bson]) -> Ordering {
        for ((x, y), descending) in a.iter().zip(b).zip(&self.descending) {
            let ord = compare_values_with(x, y, self.collation.as_ref());
            let ord = if *descending { ord.reverse() } else { ord };
            if ord != Ordering::Equal {
                return ord;
            }
        }
        Ordering::Equal
    }

    /// The value standing for a sort field: an array by its extreme element (an empty
    /// array below null, as undefined), anything else itself.
    pub(crate) fn field_key(&self, value: &Bson, descending: bool) -> Bson {
        let Bson::Array(items) = value else {
            return value.clone();
        };
        let extreme = if descending {
            items
                .iter()
                .max_by(|a, b| compare_values_with(a, b, self.collation.as_ref()))
        } else {
            items
                .iter()
                .min_by(|a, b| compare_values_with(a, b, self.collation.as_ref()))
        };
        extreme.cloned().unwrap_or(Bson::Undefined)
    }
}

/// What every accumulator of one `$group` field shares: the selector, `n` and the order.
#[derive(Debug)]
pub struct SelectionSpec {
    selector: Selector,
    /// `None` when `n` is an expression over the group's documents (MongoDB lets it
    /// depend on the group key): the argument is then `[n, argument]`, and each group
    /// takes `n` from its first document.
    n: Option<usize>,
    order: KeyOrder,
}

impl SelectionSpec {
    /// Parses `{$firstN: {n, input}}`, `{$top: {sortBy, output}}`, ... as an accumulator.
    /// Returns the spec and the argument to evaluate per document.
    pub fn parse(
        selector: Selector,
        name: &str,
        arg: &Bson,
        ctx: &ParseContext,
    ) -> Result<(SelectionSpec, Expression)> {
        let parsed = parse_arguments(selector, name, arg, ctx)?;
        let (n, argument) = match parsed.n {
            None => (Some(1), parsed.argument),
            Some(n_spec) => match Expression::parse(&n_spec, ctx)?.as_constant() {
                Some(n) => (Some(accumulator_n(Some(n))?), parsed.argument),
                None => (None, Bson::Array(vec![n_spec, parsed.argument])),
            },
        };
        let spec = SelectionSpec {
            selector,
            n,
            order: parsed.order,
        };
        Ok((spec, Expression::parse(&argument, ctx)?))
    }
}

/// The checked arguments of a selecting operator.
struct SelectionArguments {
    /// The `n` expression; `None` for `$top`/`$bottom`, whose `n` is 1.
    n: Option<Bson>,
    /// The expression evaluated per document: the input, or for `$top`/`$bottom`
    /// `[output, "$sortField0", ...]`.
    argument: Bson,
    order: KeyOrder,
}

fn parse_arguments(
    selector: Selector,
    name: &str,
    arg: &Bson,
    ctx: &ParseContext,
) -> Result<SelectionArguments> {
    let (not_object, unknown, missing_n, missing_input) = match selector {
        Selector::FirstN | Selector::LastN => (5787801, 5787901, 5787906, 5787907),
        Selector::MinN | Selector::MaxN => (5787900, 5787901, 5787906, 5787907),
        _ => (5788001, 5788002, 5788003, 5788004),
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
    let input_name = if selector.sorted() { "output" } else { "input" };
    let (mut n, mut input, mut sort_by) = (None, None, None);
    for (field, value) in spec {
        match field.as_str() {
            "n" if !selector.single() => n = Some(value.clone()),
            "sortBy" if selector.sorted() => sort_by = Some(value),
            f if f == input_name => input = Some(value),
            _ if selector.sorted() => {
                return Err(Error::location(
                    unknown,
                    format!("Unknown argument to {name} '{field}'"),
                ))
            }
            _ => {
                return Err(Error::location(
                    unknown,
                    format!("Unknown argument for 'n' operator: {field}"),
                ))
            }
        }
    }
    if n.is_none() && !selector.single() {
        return Err(Error::location(missing_n, "Missing value for 'n'"));
    }
    let input = input.ok_or_else(|| {
        Error::location(missing_input, format!("Missing value for '{input_name}'"))
    })?;
    let collation = ctx.collation().cloned();
    let (argument, order) = if selector.sorted() {
        let sort_by =
            sort_by.ok_or_else(|| Error::location(5788005, "Missing value for 'sortBy'"))?;
        let (fields, descending) = parse_sort_by(sort_by)?;
        let mut items = vec![input.clone()];
        items.extend(fields.into_iter().map(|f| Bson::String(format!("${f}"))));
        (
            Bson::Array(items),
            KeyOrder {
                descending,
                collation,
            },
        )
    } else {
        (
            input.clone(),
            KeyOrder {
                descending: vec![false],
                collation,
            },
        )
    };
    Ok(SelectionArguments { n, argument, order })
}

/// The fields and directions of a `sortBy` object, with `$sort`'s errors.
pub(crate) fn parse_sort_by(spec: &Bson) -> Result<(Vec<String>, Vec<bool>)> {
    let Bson::Document(spec) = spec else {
        return Err(Error::location(
            10065,
            format!(
                "invalid parameter: expected an object (sortBy), found {}",
                value_to_string(spec)
            ),
        ));
    };
    let mut fields = Vec::with_capacity(spec.len());
    let mut descending = Vec::with_capacity(spec.len());
    for (field, direction) in spec {
        // `$`-prefixed names are fields here ($sortArray sorts by them), so only empty
        // components are refused.
        if field.is_empty() || field.split('.').any(str::is_empty) {
            return Err(Error::location(
                40352,
                "FieldPath cannot be constructed with empty string",
            ));
        }
        match Number::from_bson(direction).map(Number::to_f64) {
            Some(d) if d == 1.0 || d == -1.0 => descending.push(d < 0.0),
            Some(_) => {
                return Err(Error::location(
                    15975,
                    "$sort key ordering must be 1 (for ascending) or -1 (for descending)",
                ))
            }
            None => {
                return Err(Error::location(
                    15974,
                    format!(
                        "Illegal key in $sort specification: {field}: {}",
                        value_to_string(direction)
                    ),
                ))
            }
        }
        fields.push(field.clone());
    }
    Ok((fields, descending))
}

/// MongoDB's check of `n`: a positive integral number.
fn validate_n(value: Option<&Bson>) -> Result<usize> {
    let shown = || value.map_or("missing".to_string(), value_to_string);
    let number = value.and_then(Number::from_bson).ok_or_else(|| {
        Error::location(
            5787902,
            format!(
                "Value for 'n' must be of integral type, but found {}",
                shown()
            ),
        )
    })?;
    let n = number.to_f64();
    if n.fract() != 0.0 || !n.is_finite() {
        return Err(Error::location(
            5787903,
            format!(
                "Value for 'n' must be of integral type, but found {}",
                shown()
            ),
        ));
    }
    if n <= 0.0 {
        return Err(Error::location(
            5787908,
            format!("'n' must be greater than 0, found {n}"),
        ));
    }
    Ok(n.min(usize::MAX as f64) as usize)
}

/// [`validate_n`] for the accumulators (`$group`, windows), which report every invalid
/// `n` under one code in MongoDB 8.0 (the array expressions keep the detailed ones).
fn accumulator_n(value: Option<&Bson>) -> Result<usize> {
    validate_n(value).map_err(|e| Error::location(7548606, e.message))
}

/// The running state: the kept entries, each a sort key and the value to output.
#[derive(Clone, Debug)]
pub struct Selection {
    spec: Arc<SelectionSpec>,
    /// How many entries to keep; `None` until the first document of a group whose `n`
    /// is an expression.
    n: Option<usize>,
    entries: VecDeque<(Vec<Bson>, Bson)>,
}

impl Selection {
    pub fn new(spec: Arc<SelectionSpec>) -> Selection {
        Selection {
            n: spec.n,
            spec,
            entries: VecDeque::new(),
        }
    }

    /// A state with its own `n`, for the expression forms whose `n` is evaluated per
    /// document.
    fn with_n(selector: Selector, n: usize, order: &KeyOrder) -> Selection {
        Selection::new(Arc::new(SelectionSpec {
            selector,
            n: Some(n),
            order: order.clone(),
        }))
    }

    /// Takes one value; returns the bytes of memory the kept entries grew by.
    pub fn accumulate(&mut self, value: Option<&Bson>) -> Result<isize> {
        let value = match (self.spec.n, value) {
            (Some(_), value) => value,
            (None, Some(Bson::Array(pair))) if pair.len() == 2 => {
                if self.n.is_none() {
                    self.n = Some(accumulator_n(Some(&pair[0]))?);
                }
                Some(&pair[1])
            }
            (None, _) => return Err(Error::internal("$firstN-style argument without its n")),
        };
        let spec = &self.spec;
        let (key, output) = match spec.selector {
            Selector::FirstN | Selector::LastN => {
                (Vec::new(), value.cloned().unwrap_or(Bson::Null))
            }
            Selector::MinN | Selector::MaxN => {
                let Some(v) = value.filter(|v| !is_nullish(Some(v))) else {
                    return Ok(0);
                };
                (vec![v.clone()], v.clone())
            }
            _ => {
                let Some(Bson::Array(parts)) = value else {
                    return Ok(0);
                };
                let Some((output, fields)) = parts.split_first() else {
                    return Ok(0);
                };
                let key = fields
                    .iter()
                    .zip(&spec.order.descending)
                    .map(|(f, d)| spec.order.field_key(f, *d))
                    .collect();
                (key, output.clone())
            }
        };
        Ok(self.add(key, output))
    }

    /// Offers an entry; returns the bytes of memory the kept entries grew by.
    fn add(&mut self, key: Vec<Bson>, output: Bson) -> isize {
        let Some(n) = self.n else {
            return 0;
        };
        let size = |key: &[Bson], output: &Bson| {
            (key.iter().map(value_memory_bytes).sum::<usize>() + value_memory_bytes(output))
                as isize
        };
        let added = size(&key, &output);
        let order = &self.spec.order;
        let entries = &mut self.entries;
        match self.spec.selector.keep() {
            Keep::Earliest => {
                if entries.len() >= n {
                    return 0;
                }
                entries.push_back((key, output));
                added
            }
            Keep::Latest => {
                entries.push_back((key, output));
                if entries.len() > n {
                    return added - entries.pop_front().map_or(0, |(k, o)| size(&k, &o));
                }
                added
            }
            Keep::Smallest | Keep::Largest => {
                let mut removed = 0;
                if entries.len() == n {
                    let smallest = self.spec.selector.keep() == Keep::Smallest;
                    let (boundary, wanted) = if smallest {
                        (entries.back(), Ordering::Less)
                    } else {
                        (entries.front(), Ordering::Greater)
                    };
                    match boundary {
                        Some((k, _)) if order.compare(&key, k) == wanted => {}
                        _ => return 0,
                    }
                    let dropped = if smallest {
                        entries.pop_back()
                    } else {
                        entries.pop_front()
                    };
                    removed = dropped.map_or(0, |(k, o)| size(&k, &o));
                }
                let at = entries.partition_point(|(k, _)| order.compare(k, &key).is_le());
                entries.insert(at, (key, output));
                added - removed
            }
        }
    }

    /// Absorbs the state of an accumulator that saw the documents after this one's.
    pub fn merge(&mut self, later: Selection) {
        self.n = self.n.or(later.n);
        for (key, output) in later.entries {
            self.add(key, output);
        }
    }

    pub fn finish(self) -> Bson {
        let selector = self.spec.selector;
        let mut values: Vec<Bson> = self.entries.into_iter().map(|(_, v)| v).collect();
        if selector == Selector::MaxN {
            values.reverse();
        }
        if selector.single() {
            return values.into_iter().next().unwrap_or(Bson::Null);
        }
        Bson::Array(values)
    }
}

/// `{$firstN: {n, input}}` and its siblings as expressions: `input` must be an array,
/// `n` is evaluated with the document.
#[derive(Debug)]
pub(crate) struct SelectionExpression {
    selector: Selector,
    n: Expression,
    input: Expression,
    order: KeyOrder,
}

impl SelectionExpression {
    pub(crate) fn parse(name: &str, arg: &Bson, ctx: &ParseContext) -> Result<Option<Self>> {
        let selector = match Selector::from_name(name) {
            Some(s @ (Selector::FirstN | Selector::LastN | Selector::MinN | Selector::MaxN)) => s,
            _ => return Ok(None),
        };
        let parsed = parse_arguments(selector, name, arg, ctx)?;
        let n = parsed
            .n
            .ok_or_else(|| Error::internal("the n forms are parsed with n"))?;
        Ok(Some(SelectionExpression {
            selector,
            n: Expression::parse(&n, ctx)?,
            input: Expression::parse(&parsed.argument, ctx)?,
            order: parsed.order,
        }))
    }

    pub(crate) fn eval(&self, env: &crate::env::Env<'_>) -> Result<Bson> {
        let n = validate_n(self.n.eval_owned(env)?.as_ref())?;
        let input = self.input.eval(env)?;
        let Some(Bson::Array(items)) = input.as_deref() else {
            return Err(Error::location(5788200, "Input must be an array"));
        };
        let mut selection = Selection::with_n(self.selector, n, &self.order);
        for item in items {
            selection.accumulate(Some(item))?;
        }
        Ok(selection.finish())
    }
}
