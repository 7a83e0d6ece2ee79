//! Array expression operators: `$size $arrayElemAt $first $last $in $concatArrays
//! $filter $map $reduce $isArray $slice $range $reverseArray $indexOfArray $zip
//! $sortArray`.
//!
//! `$filter`, `$map` and `$reduce` bind their per-element variables on the stack (see
//! `env.rs`), so iterating allocates only the output.

use crate::accumulator::{parse_sort_by, KeyOrder};
use crate::context::{ParseContext, VarId};
use crate::env::{Env, Value};
use crate::expression::{
    is_nullish, parse_fixed, parse_operands, parse_ranged, type_name, Expression,
};
use crate::limits::{check_carried_value, ArrayBuilder, BuiltMemory};
use crate::numeric::display;
use crate::operators::boolean::truthy;
use crate::operators::comparison::compare_missing_lowest;
use basalt_error::{Error, Result};
use basalt_value::Number;
use bson::{Bson, Document};
use std::borrow::Cow;
use std::cmp::Ordering;

#[derive(Debug)]
pub(crate) enum ArrayOp {
    Size(Box<[Expression; 1]>),
    ElemAt(Box<[Expression; 2]>),
    First(Box<[Expression; 1]>),
    Last(Box<[Expression; 1]>),
    In(Box<[Expression; 2]>),
    ConcatArrays(Vec<Expression>),
    Filter(Box<Filter>),
    Map(Box<Map>),
    Reduce(Box<Reduce>),
    IsArray(Box<[Expression; 1]>),
    Slice(Vec<Expression>),
    Range(Vec<Expression>),
    ReverseArray(Box<[Expression; 1]>),
    IndexOfArray(Vec<Expression>),
    Zip(Box<Zip>),
    SortArray(Box<SortArray>),
}

#[derive(Debug)]
pub(crate) struct Zip {
    inputs: Vec<Expression>,
    use_longest_length: bool,
    defaults: Vec<Expression>,
}

#[derive(Debug)]
pub(crate) struct SortArray {
    input: Expression,
    /// Field paths with their directions; no fields: the elements themselves.
    fields: Vec<String>,
    order: KeyOrder,
}

#[derive(Debug)]
pub(crate) struct Filter {
    input: Expression,
    var: VarId,
    cond: Expression,
    limit: Option<Expression>,
}

#[derive(Debug)]
pub(crate) struct Map {
    input: Expression,
    var: VarId,
    body: Expression,
}

#[derive(Debug)]
pub(crate) struct Reduce {
    input: Expression,
    initial: Expression,
    value: VarId,
    this: VarId,
    body: Expression,
}

impl ArrayOp {
    pub(crate) fn parse(name: &str, args: &Bson, ctx: &ParseContext) -> Result<Option<ArrayOp>> {
        Ok(Some(match name {
            "$size" => ArrayOp::Size(parse_fixed(name, args, ctx)?),
            "$arrayElemAt" => ArrayOp::ElemAt(parse_fixed(name, args, ctx)?),
            "$first" => ArrayOp::First(parse_fixed(name, args, ctx)?),
            "$last" => ArrayOp::Last(parse_fixed(name, args, ctx)?),
            "$in" => ArrayOp::In(parse_fixed(name, args, ctx)?),
            "$concatArrays" => ArrayOp::ConcatArrays(parse_operands(args, ctx)?),
            "$filter" => ArrayOp::Filter(Box::new(parse_filter(args, ctx)?)),
            "$map" => ArrayOp::Map(Box::new(parse_map(args, ctx)?)),
            "$reduce" => ArrayOp::Reduce(Box::new(parse_reduce(args, ctx)?)),
            "$isArray" => ArrayOp::IsArray(parse_fixed(name, args, ctx)?),
            "$slice" => ArrayOp::Slice(parse_ranged(name, args, ctx, 2, 3)?),
            "$range" => ArrayOp::Range(parse_ranged(name, args, ctx, 2, 3)?),
            "$reverseArray" => ArrayOp::ReverseArray(parse_fixed(name, args, ctx)?),
            "$indexOfArray" => ArrayOp::IndexOfArray(parse_ranged(name, args, ctx, 2, 4)?),
            "$zip" => ArrayOp::Zip(Box::new(parse_zip(args, ctx)?)),
            "$sortArray" => ArrayOp::SortArray(Box::new(parse_sort_array(args, ctx)?)),
            _ => return Ok(None),
        }))
    }

    pub(crate) fn eval<'a>(&'a self, env: &Env<'a>) -> Result<Value<'a>> {
        let owned = |v: Bson| Ok(Some(Cow::Owned(v)));
        match self {
            ArrayOp::Size(arg) => match arg[0].eval(env)?.as_deref() {
                Some(Bson::Array(items)) => owned(Bson::Int32(items.len() as i32)),
                other => Err(Error::location(
                    17124,
                    format!(
                        "The argument to $size must be an array. Type of argument is {}",
                        type_name(other)
                    ),
                )),
            },
            ArrayOp::ElemAt(args) => {
                let (array, index) = (args[0].eval(env)?, args[1].eval(env)?);
                if is_nullish(array.as_deref()) || is_nullish(index.as_deref()) {
                    return owned(Bson::Null);
                }
                let items = expect_array(array, |t| {
                    Error::location(
                        28689,
                        format!("$arrayElemAt's first argument must be an array, but is {t}"),
                    )
                })?;
                let index = index.as_deref().expect("not nullish");
                let Some(n) = Number::from_bson(index) else {
                    return Err(Error::location(
                        28690,
                        format!(
                            "$arrayElemAt's second argument must be a numeric value, but is {}",
                            type_name(Some(index))
                        ),
                    ));
                };
                let i = n.to_i64_exact().filter(|i| i32::try_from(*i).is_ok()).ok_or_else(|| {
                    Error::location(
                        28691,
                        format!(
                            "$arrayElemAt's second argument must be representable as a 32-bit integer: {}",
                            display(index)
                        ),
                    )
                })?;
                Ok(element(items, i))
            }
            ArrayOp::First(arg) | ArrayOp::Last(arg) => {
                let name = if matches!(self, ArrayOp::First(_)) {
                    "$first"
                } else {
                    "$last"
                };
                let Some(items) = nullable_array(&arg[0], env, |t| {
                    Error::location(
                        28689,
                        format!("{name}'s argument must be an array, but is {t}"),
                    )
                })?
                else {
                    return owned(Bson::Null);
                };
                Ok(element(items, if name == "$first" { 0 } else { -1 }))
            }
            ArrayOp::In(args) => {
                let needle = args[0].eval(env)?;
                let haystack = args[1].eval(env)?;
                let Some(Bson::Array(items)) = haystack.as_deref() else {
                    return Err(Error::location(
                        40081,
                        format!(
                            "$in requires an array as a second argument, found: {}",
                            type_name(haystack.as_deref())
                        ),
                    ));
                };
                let found = items.iter().any(|item| {
                    compare_missing_lowest(needle.as_deref(), Some(item), env.vars.collation())
                        == Ordering::Equal
                });
                owned(Bson::Boolean(found))
            }
            ArrayOp::ConcatArrays(args) => {
                let mut out = ArrayBuilder::new("$concatArrays");
                for arg in args {
                    let v = arg.eval(env)?;
                    match v {
                        v if is_nullish(v.as_deref()) => return owned(Bson::Null),
                        Some(Cow::Owned(Bson::Array(items))) => {
                            items.into_iter().try_for_each(|item| out.push(item))?
                        }
                        Some(Cow::Borrowed(Bson::Array(items))) => {
                            items.iter().try_for_each(|item| out.push(item.clone()))?
                        }
                        other => {
                            return Err(Error::location(
                                28664,
                                format!(
                                    "$concatArrays only supports arrays, not {}",
                                    type_name(other.as_deref())
                                ),
                            ))
                        }
                    }
                }
                owned(out.finish())
            }
            ArrayOp::Filter(f) => f.eval(env),
            ArrayOp::Map(m) => m.eval(env),
            ArrayOp::Reduce(r) => r.eval(env),
            ArrayOp::IsArray(arg) => owned(Bson::Boolean(matches!(
                arg[0].eval(env)?.as_deref(),
                Some(Bson::Array(_))
            ))),
            ArrayOp::Slice(args) => slice(args, env),
            ArrayOp::Range(args) => range(args, env),
            ArrayOp::ReverseArray(arg) => {
                let array = arg[0].eval(env)?;
                if is_nullish(array.as_deref()) {
                    return owned(Bson::Null);
                }
                let mut items = expect_array(array, |t| {
                    Error::location(
                        34435,
                        format!(
                            "The argument to $reverseArray must be an array, but was of type: {t}"
                        ),
                    )
                })?
                .into_owned();
                items.reverse();
                owned(Bson::Array(items))
            }
            ArrayOp::IndexOfArray(args) => index_of_array(args, env),
            ArrayOp::Zip(zip) => zip.eval(env),
            ArrayOp::SortArray(sort) => sort.eval(env),
        }
    }
}

fn parse_zip(args: &Bson, ctx: &ParseContext) -> Result<Zip> {
    let Bson::Document(doc) = args else {
        return Err(Error::location(
            34460,
            format!(
                "$zip only supports an object as an argument, found {}",
                type_name(Some(args))
            ),
        ));
    };
    let mut zip = Zip {
        inputs: Vec::new(),
        use_longest_length: false,
        defaults: Vec::new(),
    };
    let mut has_defaults = false;
    for (key, value) in doc {
        match key.as_str() {
            "inputs" => {
                let Bson::Array(items) = value else {
                    return Err(Error::location(
                        34461,
                        format!(
                            "inputs must be an array of expressions, found {}",
                            type_name(Some(value))
                        ),
                    ));
                };
                zip.inputs = items
                    .iter()
                    .map(|item| Expression::parse(item, ctx))
                    .collect::<Result<_>>()?;
            }
            "useLongestLength" => {
                let Bson::Boolean(b) = value else {
                    return Err(Error::location(
                        34463,
                        format!(
                            "useLongestLength must be a bool, found {}",
                            type_name(Some(value))
                        ),
                    ));
                };
                zip.use_longest_length = *b;
            }
            "defaults" => {
                let Bson::Array(items) = value else {
                    return Err(Error::location(
                        34462,
                        format!(
                            "defaults must be an array of expressions, found {}",
                            type_name(Some(value))
                        ),
                    ));
                };
                has_defaults = true;
                zip.defaults = items
                    .iter()
                    .map(|item| Expression::parse(item, ctx))
                    .collect::<Result<_>>()?;
            }
            other => {
                return Err(Error::location(
                    34464,
                    format!("$zip found an unknown argument: {other}"),
                ))
            }
        }
    }
    if zip.inputs.is_empty() {
        return Err(Error::location(
            34465,
            "$zip requires at least one input array",
        ));
    }
    if has_defaults && !zip.use_longest_length {
        return Err(Error::location(
            34466,
            "cannot specify defaults unless useLongestLength is true",
        ));
    }
    if has_defaults && zip.defaults.len() != zip.inputs.len() {
        return Err(Error::location(
            34467,
            "defaults and inputs must have the same length",
        ));
    }
    Ok(zip)
}

impl Zip {
    fn eval<'a>(&'a self, env: &Env<'a>) -> Result<Value<'a>> {
        let mut arrays = Vec::with_capacity(self.inputs.len());
        for input in &self.inputs {
            let value = input.eval(env)?;
            if is_nullish(value.as_deref()) {
                return Ok(Some(Cow::Owned(Bson::Null)));
            }
            arrays.push(expect_array(value, |t| {
                Error::location(
                    34468,
                    format!("$zip found a non-array expression in input: {t}"),
                )
            })?);
        }
        let mut defaults = Vec::with_capacity(self.defaults.len());
        for default in &self.defaults {
            defaults.push(default.eval(env)?.map_or(Bson::Null, Cow::into_owned));
        }
        let lengths = arrays.iter().map(|a| a.len());
        let rows = if self.use_longest_length {
            lengths.max()
        } else {
            lengths.min()
        }
        .unwrap_or(0);
        let zipped = (0..rows)
            .map(|row| {
                Bson::Array(
                    arrays
                        .iter()
                        .enumerate()
                        .map(|(i, array)| match array.get(row) {
                            Some(v) => v.clone(),
                            None => defaults.get(i).cloned().unwrap_or(Bson::Null),
                        })
                        .collect(),
                )
            })
            .collect();
        Ok(Some(Cow::Owned(Bson::Array(zipped))))
    }
}

fn parse_sort_array(args: &Bson, ctx: &ParseContext) -> Result<SortArray> {
    let Bson::Document(doc) = args else {
        return Err(Error::location(
            2942500,
            format!(
                "$sortArray requires an object as input, found: {}",
                type_name(Some(args))
            ),
        ));
    };
    let (mut input, mut sort_by) = (None, None);
    for (key, value) in doc {
        match key.as_str() {
            "input" => input = Some(Expression::parse(value, ctx)?),
            "sortBy" => sort_by = Some(value),
            other => {
                return Err(Error::location(
                    2942501,
                    format!("$sortArray found an unknown argument: {other}"),
                ))
            }
        }
    }
    let input = input
        .ok_or_else(|| Error::location(2942502, "$sortArray requires 'input' to be specified"))?;
    let sort_by = sort_by
        .ok_or_else(|| Error::location(2942503, "$sortArray requires 'sortBy' to be specified"))?;
    // MongoDB 8's codes: a bad sort document 2942505, a number other than 1 or -1
    // 2942506, any other type 2942507.
    let (fields, descending) = match sort_by {
        Bson::Document(d) if d.is_empty() => {
            return Err(Error::location(
                2942505,
                "$sortArray: sortBy must not be an empty document",
            ))
        }
        Bson::Document(_) => parse_sort_by(sort_by).map_err(|e| {
            Error::location(
                2942505,
                format!("$sortArray: bad sortBy document: {}", e.message),
            )
        })?,
        direction => match Number::from_bson(direction).map(Number::to_f64) {
            Some(d) if d == 1.0 || d == -1.0 => (Vec::new(), vec![d < 0.0]),
            Some(_) => {
                return Err(Error::location(
                    2942506,
                    "$sortArray: sortBy must be either 1, -1 or an object",
                ))
            }
            None => {
                return Err(Error::location(
                    2942507,
                    format!(
                        "$sortArray: sortBy must be a number or an object, not {}",
                        type_name(Some(direction))
                    ),
                ))
            }
        },
    };
    Ok(SortArray {
        input,
        fields,
        order: KeyOrder::new(descending, ctx.collation().cloned()),
    })
}

impl SortArray {
    fn eval<'a>(&'a self, env: &Env<'a>) -> Result<Value<'a>> {
        let Some(items) = nullable_array(&self.input, env, |t| {
            Error::location(
                2942504,
                format!("The input argument to $sortArray must be an array, but was of type: {t}"),
            )
        })?
        else {
            return Ok(Some(Cow::Owned(Bson::Null)));
        };
        let mut keyed: Vec<(Vec<Bson>, Bson)> = items
            .iter()
            .map(|item| (self.sort_key(item), item.clone()))
            .collect();
        keyed.sort_by(|(a, _), (b, _)| self.order.compare(a, b));
        Ok(Some(Cow::Owned(Bson::Array(
            keyed.into_iter().map(|(_, item)| item).collect(),
        ))))
    }

    /// The element itself, or the values of the sort fields in it (missing as null).
    fn sort_key(&self, item: &Bson) -> Vec<Bson> {
        if self.fields.is_empty() {
            return vec![item.clone()];
        }
        self.fields
            .iter()
            .zip(self.order.directions())
            .map(|(field, descending)| {
                let value = match item {
                    Bson::Document(doc) => basalt_value::get_path(doc, field),
                    _ => None,
                };
                self.order
                    .field_key(value.unwrap_or(&Bson::Null), *descending)
            })
            .collect()
    }
}

/// The array `expression` evaluates to, `None` when it is null or missing (the
/// operator's result is then null); `err` gets the type name of anything else.
fn nullable_array<'a>(
    expression: &'a Expression,
    env: &Env<'a>,
    err: impl FnOnce(&str) -> Error,
) -> Result<Option<Cow<'a, [Bson]>>> {
    let value = expression.eval(env)?;
    if is_nullish(value.as_deref()) {
        return Ok(None);
    }
    expect_array(value, err).map(Some)
}

/// The array inside `value`, borrowed when `value` is; `err` gets the type name.
fn expect_array<'a>(value: Value<'a>, err: impl FnOnce(&str) -> Error) -> Result<Cow<'a, [Bson]>> {
    match value {
        Some(Cow::Borrowed(Bson::Array(items))) => Ok(Cow::Borrowed(items.as_slice())),
        Some(Cow::Owned(Bson::Array(items))) => Ok(Cow::Owned(items)),
        other => Err(err(type_name(other.as_deref()))),
    }
}

/// The element at `index` (negative counts from the end), or missing.
fn element(items: Cow<'_, [Bson]>, index: i64) -> Value<'_> {
    let len = items.len() as i64;
    let i = if index < 0 { len + index } else { index };
    if i < 0 || i >= len {
        return None;
    }
    Some(match items {
        Cow::Borrowed(items) => Cow::Borrowed(&items[i as usize]),
        Cow::Owned(mut items) => Cow::Owned(items.swap_remove(i as usize)),
    })
}

/// Reads the `{input, as, ...}` object of `$filter`/`$map`, checking field names.
fn named_args<'s>(
    args: &'s Bson,
    name: &str,
    allowed: &[&str],
    not_object: (i32, String),
    unknown_code: i32,
) -> Result<&'s Document> {
    let Bson::Document(doc) = args else {
        return Err(Error::location(not_object.0, not_object.1));
    };
    if let Some(key) = doc.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(Error::location(
            unknown_code,
            format!("Unrecognized parameter to {name}: {key}"),
        ));
    }
    Ok(doc)
}

fn parse_filter(args: &Bson, ctx: &ParseContext) -> Result<Filter> {
    let doc = named_args(
        args,
        "$filter",
        &["input", "as", "cond", "limit"],
        (
            28646,
            "$filter only supports an object as its argument".to_string(),
        ),
        28647,
    )?;
    let input = doc
        .get("input")
        .ok_or_else(|| Error::location(28648, "Missing 'input' parameter to $filter"))?;
    let cond = doc
        .get("cond")
        .ok_or_else(|| Error::location(28650, "Missing 'cond' parameter to $filter"))?;
    let (inner, var) = ctx.nested(var_name(doc.get("as"))?)?;
    Ok(Filter {
        input: Expression::parse(input, ctx)?,
        var,
        cond: Expression::parse(cond, &inner)?,
        limit: doc
            .get("limit")
            .map(|l| Expression::parse(l, ctx))
            .transpose()?,
    })
}

/// The variable name given by `as`, `this` by default.
fn var_name(spec: Option<&Bson>) -> Result<&str> {
    match spec {
        None => Ok("this"),
        Some(Bson::String(s)) => Ok(s),
        Some(other) => Err(Error::failed_to_parse(format!(
            "'as' must be a string, found {}",
            type_name(Some(other))
        ))),
    }
}

impl Filter {
    fn eval<'a>(&'a self, env: &Env<'a>) -> Result<Value<'a>> {
        let Some(items) = nullable_array(&self.input, env, |t| {
            Error::location(28651, format!("input to $filter must be an array not {t}"))
        })?
        else {
            return Ok(Some(Cow::Owned(Bson::Null)));
        };
        let limit = match &self.limit {
            None => None,
            Some(l) => match l.eval(env)?.as_deref() {
                v if is_nullish(v) => None,
                Some(v) => {
                    let n = Number::from_bson(v)
                        .and_then(Number::to_i64_exact)
                        .filter(|n| i32::try_from(*n).is_ok())
                        .ok_or_else(|| {
                            Error::location(
                                327391,
                                format!("$filter: limit must be represented as a 32-bit integral value: {}", display(v)),
                            )
                        })?;
                    if n < 1 {
                        return Err(Error::location(
                            327392,
                            format!("$filter: limit must be greater than 0: {n}"),
                        ));
                    }
                    Some(n as usize)
                }
                None => unreachable!("nullish covers missing"),
            },
        };
        let mut out = Vec::new();
        for item in items.iter() {
            if limit.is_some_and(|l| out.len() >= l) {
                break;
            }
            let binding = env.binding(self.var, Some(item));
            if truthy(self.cond.eval(&env.with(&binding))?.as_deref()) {
                out.push(item.clone());
            }
        }
        Ok(Some(Cow::Owned(Bson::Array(out))))
    }
}

fn parse_map(args: &Bson, ctx: &ParseContext) -> Result<Map> {
    let doc = named_args(
        args,
        "$map",
        &["input", "as", "in"],
        (
            16878,
            "$map only supports an object as its argument".to_string(),
        ),
        16879,
    )?;
    let input = doc
        .get("input")
        .ok_or_else(|| Error::location(16880, "Missing 'input' parameter to $map"))?;
    let body = doc
        .get("in")
        .ok_or_else(|| Error::location(16882, "Missing 'in' parameter to $map"))?;
    let (inner, var) = ctx.nested(var_name(doc.get("as"))?)?;
    Ok(Map {
        input: Expression::parse(input, ctx)?,
        var,
        body: Expression::parse(body, &inner)?,
    })
}

impl Map {
    fn eval<'a>(&'a self, env: &Env<'a>) -> Result<Value<'a>> {
        let Some(items) = nullable_array(&self.input, env, |t| {
            Error::location(16883, format!("input to $map must be an array not {t}"))
        })?
        else {
            return Ok(Some(Cow::Owned(Bson::Null)));
        };
        let mut out = ArrayBuilder::with_capacity("$map", items.len());
        for item in items.iter() {
            let binding = env.binding(self.var, Some(item));
            let v = self.body.eval(&env.with(&binding))?;
            out.push(v.map_or(Bson::Null, Cow::into_owned))?;
        }
        Ok(Some(Cow::Owned(out.finish())))
    }
}

fn parse_reduce(args: &Bson, ctx: &ParseContext) -> Result<Reduce> {
    let Bson::Document(doc) = args else {
        return Err(Error::location(
            40075,
            format!(
                "$reduce requires an object as an argument, found: {}",
                type_name(Some(args))
            ),
        ));
    };
    let (mut input, mut initial, mut body) = (None, None, None);
    for (key, value) in doc {
        match key.as_str() {
            "input" => input = Some(value),
            "initialValue" => initial = Some(value),
            "in" => body = Some(value),
            _ => {
                return Err(Error::location(
                    40076,
                    format!("$reduce found an unknown argument: {key}"),
                ))
            }
        }
    }
    let input =
        input.ok_or_else(|| Error::location(40077, "$reduce requires 'input' to be specified"))?;
    let initial = initial
        .ok_or_else(|| Error::location(40078, "$reduce requires 'initialValue' to be specified"))?;
    let body =
        body.ok_or_else(|| Error::location(40079, "$reduce requires 'in' to be specified"))?;
    let (with_value, value) = ctx.nested("value")?;
    let (inner, this) = with_value.nested("this")?;
    Ok(Reduce {
        input: Expression::parse(input, ctx)?,
        initial: Expression::parse(initial, ctx)?,
        value,
        this,
        body: Expression::parse(body, &inner)?,
    })
}

impl Reduce {
    fn eval<'a>(&'a self, env: &Env<'a>) -> Result<Value<'a>> {
        let Some(items) = nullable_array(&self.input, env, |t| {
            Error::location(
                40080,
                format!("$reduce requires that 'input' be an array, found: {t}"),
            )
        })?
        else {
            return Ok(Some(Cow::Owned(Bson::Null)));
        };
        let mut acc = self.initial.eval_owned(env)?;
        let mut memory = BuiltMemory::new("$reduce");
        for item in items.iter() {
            let value = env.binding(self.value, acc.as_ref());
            let with_value = env.with(&value);
            let this = with_value.binding(self.this, Some(item));
            acc = self.body.eval_owned(&with_value.with(&this))?;
            if let Some(carried) = &acc {
                check_carried_value(carried, &mut memory)?;
            }
        }
        Ok(acc.map(Cow::Owned))
    }
}

/// A 32-bit integral argument, with MongoDB's messages for the wrong type and for
/// values that do not fit.
fn int32_arg(v: Option<&Bson>, type_error: (i32, &str), range_error: (i32, &str)) -> Result<i64> {
    let n = v.and_then(Number::from_bson).ok_or_else(|| {
        Error::location(type_error.0, format!("{}{}", type_error.1, type_name(v)))
    })?;
    n.to_i64_exact()
        .filter(|i| i32::try_from(*i).is_ok())
        .ok_or_else(|| {
            Error::location(
                range_error.0,
                format!("{}{}", range_error.1, v.map_or_else(String::new, display)),
            )
        })
}

fn slice<'a>(args: &'a [Expression], env: &Env<'a>) -> Result<Value<'a>> {
    let values = args
        .iter()
        .map(|a| a.eval(env))
        .collect::<Result<Vec<_>>>()?;
    if values.iter().any(|v| is_nullish(v.as_deref())) {
        return Ok(Some(Cow::Owned(Bson::Null)));
    }
    let mut values = values.into_iter();
    let items = expect_array(values.next().flatten(), |t| {
        Error::location(
            28724,
            format!("First argument to $slice must be an array, but is of type: {t}"),
        )
    })?;
    let second = values.next().flatten();
    let second = int32_arg(
        second.as_deref(),
        (
            28725,
            "Second argument to $slice must be a numeric value, but is of type: ",
        ),
        (
            28726,
            "Second argument to $slice can't be represented as a 32-bit integer: ",
        ),
    )?;
    let len = items.len() as i64;
    let (start, count) = match values.next().flatten() {
        None if second >= 0 => (0, second),
        None => ((len + second).max(0), -second),
        Some(third) => {
            let n = int32_arg(
                Some(&third),
                (
                    28727,
                    "Third argument to $slice must be numeric, but is of type: ",
                ),
                (
                    28728,
                    "Third argument to $slice can't be represented as a 32-bit integer: ",
                ),
            )?;
            if n <= 0 {
                return Err(Error::location(
                    28729,
                    format!("Third argument to $slice must be positive: {n}"),
                ));
            }
            let start = if second < 0 {
                (len + second).max(0)
            } else {
                second.min(len)
            };
            (start, n)
        }
    };
    let start = start.min(len) as usize;
    let end = (start as i64 + count).min(len) as usize;
    Ok(Some(Cow::Owned(Bson::Array(items[start..end].to_vec()))))
}

fn range<'a>(args: &'a [Expression], env: &Env<'a>) -> Result<Value<'a>> {
    let start = args[0].eval(env)?;
    let start = int32_arg(
        start.as_deref(),
        (34443, "$range requires a numeric starting value, found value of type: "),
        (34444, "$range requires a starting value that can be represented as a 32-bit integer, found value: "),
    )?;
    let end = args[1].eval(env)?;
    let end = int32_arg(
        end.as_deref(),
        (34445, "$range requires a numeric ending value, found value of type: "),
        (34446, "$range requires an ending value that can be represented as a 32-bit integer, found value: "),
    )?;
    let step = match args.get(2) {
        Some(s) => {
            let s = s.eval(env)?;
            int32_arg(
                s.as_deref(),
                (34447, "$range requires a numeric step value, found value of type: "),
                (34448, "$range requires a step value that can be represented as a 32-bit integer, found value: "),
            )?
        }
        None => 1,
    };
    if step == 0 {
        return Err(Error::location(
            34449,
            "$range requires a non-zero step value",
        ));
    }
    let count = (((end - start) + step - step.signum()) / step).max(0) as usize;
    // MongoDB's formula: the vector and one value per element, counted before it is
    // allocated and held while the array is made.
    let mut memory = BuiltMemory::new("$range");
    memory.add(std::mem::size_of::<Vec<Bson>>() + count * std::mem::size_of::<Bson>())?;
    let mut out = Vec::with_capacity(count);
    let mut i = start;
    while (step > 0 && i < end) || (step < 0 && i > end) {
        out.push(Bson::Int32(i as i32));
        i += step;
    }
    Ok(Some(Cow::Owned(Bson::Array(out))))
}

fn index_of_array<'a>(args: &'a [Expression], env: &Env<'a>) -> Result<Value<'a>> {
    let Some(items) = nullable_array(&args[0], env, |t| {
        Error::location(
            40090,
            format!("$indexOfArray requires an array as a first argument, found: {t}"),
        )
    })?
    else {
        return Ok(Some(Cow::Owned(Bson::Null)));
    };
    let needle = args[1].eval(env)?;
    let bound = |i: usize, what: &str| -> Result<Option<usize>> {
        let Some(e) = args.get(i) else {
            return Ok(None);
        };
        let v = e.eval(env)?;
        match v.as_deref().and_then(Number::from_bson).and_then(Number::to_i64_exact) {
            Some(n) if n < 0 => Err(Error::location(
                9711601,
                format!("$indexOfArray requires a nonnegative {what} index, found: {n}"),
            )),
            Some(n) => Ok(Some(n as usize)),
            None => Err(Error::location(
                9711600,
                format!(
                    "$indexOfArray requires an integral {what} index, found a value of type: {}, with value: {}",
                    type_name(v.as_deref()),
                    v.as_deref().map_or_else(|| "missing".to_string(), display)
                ),
            )),
        }
    };
    let start = bound(2, "starting")?.unwrap_or(0);
    let end = bound(3, "ending")?.unwrap_or(items.len()).min(items.len());
    let collation = env.vars.collation();
    let found = (start..end).find(|&i| {
        compare_missing_lowest(needle.as_deref(), Some(&items[i]), collation) == Ordering::Equal
    });
    Ok(Some(Cow::Owned(Bson::Int32(
        found.map_or(-1, |i| i as i32),
    ))))
}

#[cfg(test)]
mod tests {
    use crate::expression::test_util::*;
    use bson::{bson, Bson};

    #[test]
    fn zip_rows_and_defaults() {
        assert_eq!(
            value(bson!({"$zip": {"inputs": ["$arr", ["a", "b"]]}})),
            bson!([[1, "a"], [2, "b"]])
        );
        assert_eq!(
            value(
                bson!({"$zip": {"inputs": ["$arr", ["a"]], "useLongestLength": true, "defaults": [0, "z"]}})
            ),
            bson!([[1, "a"], [2, "z"], [3, "z"]])
        );
        assert_eq!(
            value(bson!({"$zip": {"inputs": [[1], []], "useLongestLength": true}})),
            bson!([[1, null]])
        );
        assert_eq!(
            value(bson!({"$zip": {"inputs": ["$arr", "$nope"]}})),
            Bson::Null
        );
        for (spec, code) in [
            (bson!({"$zip": 1}), 34460),
            (bson!({"$zip": {"inputs": 1}}), 34461),
            (bson!({"$zip": {"inputs": [[1]], "defaults": 1}}), 34462),
            (
                bson!({"$zip": {"inputs": [[1]], "useLongestLength": 1}}),
                34463,
            ),
            (bson!({"$zip": {"inputs": [[1]], "x": 1}}), 34464),
            (bson!({"$zip": {"inputs": []}}), 34465),
            (bson!({"$zip": {"inputs": [[1]], "defaults": [1]}}), 34466),
            (
                bson!({"$zip": {"inputs": [[1]], "useLongestLength": true, "defaults": [1, 2]}}),
                34467,
            ),
            (bson!({"$zip": {"inputs": [[1], "$s"]}}), 34468),
        ] {
            assert_eq!(error_code(spec.clone()), code, "{spec}");
        }
    }

    #[test]
    fn sort_array_by_value_and_fields() {
        assert_eq!(
            value(bson!({"$sortArray": {"input": [3, "a", 1, null, 2.5], "sortBy": 1}})),
            bson!([null, 1, 2.5, 3, "a"])
        );
        assert_eq!(
            value(bson!({"$sortArray": {"input": "$arr", "sortBy": -1}})),
            bson!([3, 2, 1])
        );
        assert_eq!(
            value(bson!({"$sortArray": {
                "input": [{"n": "b", "a": 2}, {"n": "a", "a": 2}, {"n": "c", "a": 1}],
                "sortBy": {"a": -1, "n": 1},
            }})),
            bson!([{"n": "a", "a": 2}, {"n": "b", "a": 2}, {"n": "c", "a": 1}])
        );
        assert_eq!(
            value(bson!({"$sortArray": {"input": "$nope", "sortBy": 1}})),
            Bson::Null
        );
        for (spec, code) in [
            (bson!({"$sortArray": 1}), 2942500),
            (
                bson!({"$sortArray": {"input": [], "sortBy": 1, "x": 1}}),
                2942501,
            ),
            (bson!({"$sortArray": {"sortBy": 1}}), 2942502),
            (bson!({"$sortArray": {"input": []}}), 2942503),
            (bson!({"$sortArray": {"input": [], "sortBy": 2}}), 2942506),
            (
                bson!({"$sortArray": {"input": [], "sortBy": "up"}}),
                2942507,
            ),
            (bson!({"$sortArray": {"input": [], "sortBy": {}}}), 2942505),
            (bson!({"$sortArray": {"input": "$s", "sortBy": 1}}), 2942504),
            (
                bson!({"$sortArray": {"input": [], "sortBy": {"a": 2}}}),
                2942505,
            ),
        ] {
            assert_eq!(error_code(spec.clone()), code, "{spec}");
        }
    }

    #[test]
    fn size_elem_first_last() {
        assert_eq!(value(bson!({"$size": "$arr"})), bson!(3));
        assert_eq!(
            error_message(bson!({"$size": "$nope"})),
            "The argument to $size must be an array. Type of argument is missing"
        );
        assert_eq!(value(bson!({"$arrayElemAt": ["$arr", 0]})), bson!(1));
        assert_eq!(value(bson!({"$arrayElemAt": ["$arr", -1]})), bson!(3));
        assert_eq!(eval(bson!({"$arrayElemAt": ["$arr", 5]})).unwrap(), None);
        assert_eq!(value(bson!({"$arrayElemAt": ["$nope", 0]})), Bson::Null);
        assert_eq!(error_code(bson!({"$arrayElemAt": ["$i", 0]})), 28689);
        assert_eq!(error_code(bson!({"$arrayElemAt": ["$arr", "a"]})), 28690);
        assert_eq!(error_code(bson!({"$arrayElemAt": ["$arr", 1.5]})), 28691);
        assert_eq!(value(bson!({"$first": "$arr"})), bson!(1));
        assert_eq!(value(bson!({"$last": "$docs.x"})), bson!(2));
        assert_eq!(eval(bson!({"$first": [[]]})).unwrap(), None);
        assert_eq!(value(bson!({"$first": "$nope"})), Bson::Null);
        assert_eq!(
            error_message(bson!({"$last": "$i"})),
            "$last's argument must be an array, but is int"
        );
    }

    #[test]
    fn membership_and_concat() {
        assert_eq!(value(bson!({"$in": [2.0, "$arr"]})), bson!(true));
        assert_eq!(value(bson!({"$in": ["$nope", [null]]})), bson!(false));
        assert_eq!(error_code(bson!({"$in": [1, "$nope"]})), 40081);
        assert_eq!(
            value(bson!({"$concatArrays": ["$arr", [4], []]})),
            bson!([1, 2, 3, 4])
        );
        assert_eq!(
            value(bson!({"$concatArrays": ["$arr", "$nope"]})),
            Bson::Null
        );
        assert_eq!(error_code(bson!({"$concatArrays": ["$arr", 1]})), 28664);
        assert_eq!(value(bson!({"$isArray": "$arr"})), bson!(true));
        assert_eq!(value(bson!({"$isArray": [[1]]})), bson!(true));
        assert_eq!(value(bson!({"$isArray": "$i"})), bson!(false));
        assert_eq!(value(bson!({"$reverseArray": "$arr"})), bson!([3, 2, 1]));
        assert_eq!(value(bson!({"$reverseArray": null})), Bson::Null);
        assert_eq!(error_code(bson!({"$reverseArray": 1})), 34435);
    }

    #[test]
    fn filter_map_reduce() {
        assert_eq!(
            value(bson!({"$filter": {"input": "$arr", "as": "n", "cond": {"$gte": ["$$n", 2]}}})),
            bson!([2, 3])
        );
        assert_eq!(
            value(
                bson!({"$filter": {"input": "$arr", "cond": {"$gte": ["$$this", 2]}, "limit": 1}})
            ),
            bson!([2])
        );
        assert_eq!(
            value(bson!({"$filter": {"input": null, "cond": true}})),
            Bson::Null
        );
        assert_eq!(
            error_code(bson!({"$filter": {"input": 1, "cond": true}})),
            28651
        );
        assert_eq!(
            error_code(bson!({"$filter": {"input": [], "cond": true, "limit": 0}})),
            327392
        );
        assert_eq!(error_code(bson!({"$filter": {"input": []}})), 28650);
        assert_eq!(error_code(bson!({"$filter": {"cond": 1}})), 28648);
        assert_eq!(
            error_code(bson!({"$filter": {"input": [], "cond": 1, "x": 1}})),
            28647
        );
        assert_eq!(error_code(bson!({"$filter": 1})), 28646);
        assert_eq!(
            value(bson!({"$map": {"input": "$docs", "as": "d", "in": {"$add": ["$$d.x", "$i"]}}})),
            bson!([6, 7])
        );
        assert_eq!(
            value(bson!({"$map": {"input": "$arr", "in": "$$this.nope"}})),
            bson!([null, null, null])
        );
        assert_eq!(error_code(bson!({"$map": {"input": "$i", "in": 1}})), 16883);
        assert_eq!(error_code(bson!({"$map": {"input": "$arr"}})), 16882);
        assert_eq!(
            error_code(bson!({"$map": {"input": "$arr", "in": "$$n"}})),
            17276
        );
        assert_eq!(
            value(
                bson!({"$reduce": {"input": "$arr", "initialValue": 0, "in": {"$add": ["$$value", "$$this"]}}})
            ),
            bson!(6)
        );
        assert_eq!(
            value(
                bson!({"$reduce": {"input": [[1], [2, 3]], "initialValue": [], "in": {"$concatArrays": ["$$value", "$$this"]}}})
            ),
            bson!([1, 2, 3])
        );
        assert_eq!(
            value(bson!({"$reduce": {"input": "$nope", "initialValue": 0, "in": 1}})),
            Bson::Null
        );
        assert_eq!(
            error_code(bson!({"$reduce": {"input": 1, "initialValue": 0, "in": 1}})),
            40080
        );
        assert_eq!(
            error_code(bson!({"$reduce": {"input": [], "in": 1}})),
            40078
        );
    }

    #[test]
    fn slice_range_index_of() {
        assert_eq!(value(bson!({"$slice": ["$arr", 2]})), bson!([1, 2]));
        assert_eq!(value(bson!({"$slice": ["$arr", -2]})), bson!([2, 3]));
        assert_eq!(value(bson!({"$slice": ["$arr", 1, 1]})), bson!([2]));
        assert_eq!(value(bson!({"$slice": ["$arr", -5, 2]})), bson!([1, 2]));
        assert_eq!(value(bson!({"$slice": ["$arr", 5, 2]})), bson!([]));
        assert_eq!(value(bson!({"$slice": ["$nope", 1]})), Bson::Null);
        assert_eq!(error_code(bson!({"$slice": [1, 1]})), 28724);
        assert_eq!(error_code(bson!({"$slice": ["$arr", "a"]})), 28725);
        assert_eq!(error_code(bson!({"$slice": ["$arr", 1, 0]})), 28729);
        assert_eq!(value(bson!({"$range": [0, 5]})), bson!([0, 1, 2, 3, 4]));
        assert_eq!(value(bson!({"$range": [0, 10, 3]})), bson!([0, 3, 6, 9]));
        assert_eq!(value(bson!({"$range": [5, 0, -2]})), bson!([5, 3, 1]));
        assert_eq!(value(bson!({"$range": [5, 0]})), bson!([]));
        assert_eq!(error_code(bson!({"$range": [0, 5, 0]})), 34449);
        assert_eq!(error_code(bson!({"$range": [0.5, 5]})), 34444);
        assert_eq!(error_code(bson!({"$range": ["a", 5]})), 34443);
        assert_eq!(value(bson!({"$indexOfArray": ["$arr", 2]})), bson!(1));
        assert_eq!(value(bson!({"$indexOfArray": [[1, 2, 1], 1, 1]})), bson!(2));
        assert_eq!(
            value(bson!({"$indexOfArray": [[1, 2, 1], 1, 1, 2]})),
            bson!(-1)
        );
        assert_eq!(value(bson!({"$indexOfArray": [null, 1]})), Bson::Null);
        assert_eq!(error_code(bson!({"$indexOfArray": [1, 1]})), 40090);
        assert_eq!(error_code(bson!({"$indexOfArray": [[], 1, -1]})), 9711601);
        assert_eq!(error_code(bson!({"$indexOfArray": [[], 1, 1.5]})), 9711600);
    }
}
