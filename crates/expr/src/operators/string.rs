//! String expression operators: `$concat $substr $substrBytes $substrCP $toLower
//! $toUpper $strLenBytes $strLenCP $split $trim $ltrim $rtrim $indexOfBytes $indexOfCP
//! $strcasecmp $regexMatch $regexFind $regexFindAll $replaceOne $replaceAll`.
//!
//! Byte-based operators count UTF-8 bytes and refuse to cut a character; `CP`
//! operators count code points. Case mapping is ASCII-only, as in MongoDB.

use crate::context::ParseContext;
use crate::env::{Env, Value};
use crate::expression::{
    is_nullish, parse_fixed, parse_operands, parse_ranged, type_name, Expression,
};
use crate::limits::{check_string_size, ArrayBuilder};
use crate::numeric::{display, format_double, format_double_6};
use crate::operators::date::{format_iso, format_timestamp};
use basalt_error::{Error, Result};
use basalt_value::pattern::{Captures, Pattern, PatternError};
use basalt_value::Number;
use bson::{doc, Bson};
use std::borrow::Cow;

#[derive(Debug)]
pub(crate) enum StringOp {
    Concat(Vec<Expression>),
    SubstrBytes(&'static str, Box<[Expression; 3]>),
    SubstrCP(Box<[Expression; 3]>),
    ToLower(Box<[Expression; 1]>),
    ToUpper(Box<[Expression; 1]>),
    StrLenBytes(Box<[Expression; 1]>),
    StrLenCP(Box<[Expression; 1]>),
    Split(Box<[Expression; 2]>),
    Trim(Box<Trim>),
    IndexOf {
        code_points: bool,
        args: Vec<Expression>,
    },
    Strcasecmp(Box<[Expression; 2]>),
    Regex(Box<RegexOp>),
    Replace(Box<Replace>),
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum TrimKind {
    Both,
    Start,
    End,
}

#[derive(Debug)]
pub(crate) struct Trim {
    kind: TrimKind,
    input: Expression,
    chars: Option<Expression>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum RegexMode {
    Match,
    Find,
    FindAll,
}

#[derive(Debug)]
pub(crate) struct RegexOp {
    mode: RegexMode,
    input: Expression,
    regex: Expression,
    options: Option<Expression>,
    /// Compiled once when the pattern and options are constants.
    compiled: Option<Pattern>,
}

#[derive(Debug)]
pub(crate) struct Replace {
    all: bool,
    input: Expression,
    find: Expression,
    replacement: Expression,
}

impl StringOp {
    pub(crate) fn parse(name: &str, args: &Bson, ctx: &ParseContext) -> Result<Option<StringOp>> {
        Ok(Some(match name {
            "$concat" => StringOp::Concat(parse_operands(args, ctx)?),
            "$substr" | "$substrBytes" => {
                StringOp::SubstrBytes("$substrBytes", parse_fixed(name, args, ctx)?)
            }
            "$substrCP" => StringOp::SubstrCP(parse_fixed(name, args, ctx)?),
            "$toLower" => StringOp::ToLower(parse_fixed(name, args, ctx)?),
            "$toUpper" => StringOp::ToUpper(parse_fixed(name, args, ctx)?),
            "$strLenBytes" => StringOp::StrLenBytes(parse_fixed(name, args, ctx)?),
            "$strLenCP" => StringOp::StrLenCP(parse_fixed(name, args, ctx)?),
            "$split" => StringOp::Split(parse_fixed(name, args, ctx)?),
            "$trim" => StringOp::Trim(Box::new(parse_trim(TrimKind::Both, name, args, ctx)?)),
            "$ltrim" => StringOp::Trim(Box::new(parse_trim(TrimKind::Start, name, args, ctx)?)),
            "$rtrim" => StringOp::Trim(Box::new(parse_trim(TrimKind::End, name, args, ctx)?)),
            "$indexOfBytes" => StringOp::IndexOf {
                code_points: false,
                args: parse_ranged(name, args, ctx, 2, 4)?,
            },
            "$indexOfCP" => StringOp::IndexOf {
                code_points: true,
                args: parse_ranged(name, args, ctx, 2, 4)?,
            },
            "$strcasecmp" => StringOp::Strcasecmp(parse_fixed(name, args, ctx)?),
            "$regexMatch" => {
                StringOp::Regex(Box::new(parse_regex(RegexMode::Match, name, args, ctx)?))
            }
            "$regexFind" => {
                StringOp::Regex(Box::new(parse_regex(RegexMode::Find, name, args, ctx)?))
            }
            "$regexFindAll" => {
                StringOp::Regex(Box::new(parse_regex(RegexMode::FindAll, name, args, ctx)?))
            }
            "$replaceOne" => StringOp::Replace(Box::new(parse_replace(false, args, ctx)?)),
            "$replaceAll" => StringOp::Replace(Box::new(parse_replace(true, args, ctx)?)),
            _ => return Ok(None),
        }))
    }

    pub(crate) fn eval<'a>(&'a self, env: &Env<'a>) -> Result<Value<'a>> {
        let result = match self {
            StringOp::Concat(args) => {
                let mut out = String::new();
                for arg in args {
                    let v = arg.eval(env)?;
                    match v.as_deref() {
                        v if is_nullish(v) => return Ok(Some(Cow::Owned(Bson::Null))),
                        Some(Bson::String(s)) => {
                            check_string_size(out.len() + s.len())?;
                            out.push_str(s);
                        }
                        other => {
                            return Err(Error::location(
                                16702,
                                format!("$concat only supports strings, not {}", type_name(other)),
                            ))
                        }
                    }
                }
                Bson::String(out)
            }
            StringOp::SubstrBytes(name, args) => {
                let s = args[0].eval(env)?;
                let s = coerce_to_string(s.as_deref())?;
                let (start, len) = (args[1].eval(env)?, args[2].eval(env)?);
                Bson::String(substr_bytes(name, &s, start.as_deref(), len.as_deref())?)
            }
            StringOp::SubstrCP(args) => {
                let s = args[0].eval(env)?;
                let s = coerce_to_string(s.as_deref())?;
                let (start, len) = (args[1].eval(env)?, args[2].eval(env)?);
                Bson::String(substr_cp(&s, start.as_deref(), len.as_deref())?)
            }
            StringOp::ToLower(arg) => {
                let s = arg[0].eval(env)?;
                Bson::String(coerce_to_string(s.as_deref())?.to_ascii_lowercase())
            }
            StringOp::ToUpper(arg) => {
                let s = arg[0].eval(env)?;
                Bson::String(coerce_to_string(s.as_deref())?.to_ascii_uppercase())
            }
            StringOp::StrLenBytes(arg) => match arg[0].eval(env)?.as_deref() {
                Some(Bson::String(s)) => length(s.len()),
                other => {
                    return Err(Error::location(
                        34473,
                        format!(
                            "$strLenBytes requires a string argument, found: {}",
                            type_name(other)
                        ),
                    ))
                }
            },
            StringOp::StrLenCP(arg) => match arg[0].eval(env)?.as_deref() {
                Some(Bson::String(s)) => length(s.chars().count()),
                other => {
                    return Err(Error::location(
                        34471,
                        format!(
                            "$strLenCP requires a string argument, found: {}",
                            type_name(other)
                        ),
                    ))
                }
            },
            StringOp::Split(args) => {
                let (s, sep) = (args[0].eval(env)?, args[1].eval(env)?);
                split(s.as_deref(), sep.as_deref())?
            }
            StringOp::Trim(trim) => trim.eval(env)?,
            StringOp::IndexOf { code_points, args } => index_of(*code_points, args, env)?,
            StringOp::Strcasecmp(args) => {
                let (a, b) = (args[0].eval(env)?, args[1].eval(env)?);
                let a = coerce_to_string(a.as_deref())?.to_ascii_lowercase();
                let b = coerce_to_string(b.as_deref())?.to_ascii_lowercase();
                Bson::Int32(a.cmp(&b) as i32)
            }
            StringOp::Regex(op) => op.eval(env)?,
            StringOp::Replace(op) => op.eval(env)?,
        };
        Ok(Some(Cow::Owned(result)))
    }
}

fn length(n: usize) -> Bson {
    i32::try_from(n).map_or(Bson::Int64(n as i64), Bson::Int32)
}

/// The string form of a scalar, for operators that accept non-strings (`$substr`,
/// `$toLower`, `$strcasecmp`); null and missing become the empty string.
pub(crate) fn coerce_to_string(value: Option<&Bson>) -> Result<Cow<'_, str>> {
    Ok(match value {
        None | Some(Bson::Null | Bson::Undefined) => Cow::Borrowed(""),
        Some(Bson::String(s) | Bson::Symbol(s) | Bson::JavaScriptCode(s)) => Cow::Borrowed(s),
        Some(Bson::Int32(i)) => Cow::Owned(i.to_string()),
        Some(Bson::Int64(i)) => Cow::Owned(i.to_string()),
        Some(Bson::Double(d)) => Cow::Owned(format_double_6(*d)),
        Some(Bson::Decimal128(d)) => Cow::Owned(d.to_string()),
        Some(Bson::DateTime(d)) => Cow::Owned(format_iso(d.timestamp_millis())),
        Some(Bson::Timestamp(ts)) => Cow::Owned(format_timestamp(ts.time, ts.increment)),
        other => {
            return Err(Error::location(
                16007,
                format!(
                    "can't convert from BSON type {} to String",
                    type_name(other)
                ),
            ))
        }
    })
}

/// A number as `$substrBytes` takes it for an index or a length: a double truncated (one
/// that is no 32-bit integer is refused, 31109), a decimal rounded half to even (one that
/// is no 32-bit integer becomes the smallest: a negative index, a length to the end), as
/// mongod's conversions to int do.
fn index_of_number(n: Number) -> Result<i64> {
    let int32 = f64::from(i32::MIN)..=f64::from(i32::MAX);
    Ok(match n {
        Number::Decimal(_) => {
            let rounded = n.to_f64().round_ties_even();
            if int32.contains(&rounded) {
                rounded as i64
            } else {
                i64::from(i32::MIN)
            }
        }
        Number::Double(d) => {
            let truncated = d.trunc();
            if !int32.contains(&truncated) {
                return Err(Error::location(
                    31109,
                    format!(
                        "Can't coerce out of range value {} to int",
                        format_double(d)
                    ),
                ));
            }
            truncated as i64
        }
        _ => n.to_f64() as i64,
    })
}

fn substr_bytes(name: &str, s: &str, start: Option<&Bson>, len: Option<&Bson>) -> Result<String> {
    let start = start.and_then(Number::from_bson).ok_or_else(|| {
        Error::location(
            16034,
            format!(
                "{name}:  starting index must be a numeric type (is BSON type {})",
                type_name(start)
            ),
        )
    })?;
    let len = len.and_then(Number::from_bson).ok_or_else(|| {
        Error::location(
            16035,
            format!(
                "{name}:  length must be a numeric type (is BSON type {})",
                type_name(len)
            ),
        )
    })?;
    let start = index_of_number(start)?;
    let len = index_of_number(len)?;
    if start < 0 {
        return Err(Error::location(
            50752,
            format!("{name}:  starting index must be non-negative (got: {start})"),
        ));
    }
    let start = start as usize;
    if start >= s.len() {
        return Ok(String::new());
    }
    let end = if len < 0 {
        s.len()
    } else {
        start.saturating_add(len as usize).min(s.len())
    };
    if !s.is_char_boundary(start) {
        return Err(Error::location(
            28656,
            format!("{name}:  Invalid range, starting index is a UTF-8 continuation byte."),
        ));
    }
    if !s.is_char_boundary(end) {
        return Err(Error::location(
            28657,
            format!("{name}:  Invalid range, ending index is in the middle of a UTF-8 character."),
        ));
    }
    Ok(s[start..end].to_string())
}

fn substr_cp(s: &str, start: Option<&Bson>, len: Option<&Bson>) -> Result<String> {
    let int32 =
        |v: Option<&Bson>, what: &str, numeric_code: i32, integral_code: i32| -> Result<i64> {
            let n = v.and_then(Number::from_bson).ok_or_else(|| {
                Error::location(
                    numeric_code,
                    format!(
                        "$substrCP: {what} must be a numeric type (is BSON type {})",
                        type_name(v)
                    ),
                )
            })?;
            n.to_i64_exact()
                .filter(|i| i32::try_from(*i).is_ok())
                .ok_or_else(|| {
                    Error::location(
                        integral_code,
                        format!(
                            "$substrCP: {what} cannot be represented as a 32-bit integral value"
                        ),
                    )
                })
        };
    let start = int32(start, "starting index", 34450, 34451)?;
    let len = int32(len, "length", 34452, 34453)?;
    if len < 0 {
        return Err(Error::location(
            34454,
            "$substrCP: length must be a nonnegative integer.",
        ));
    }
    if start < 0 {
        return Err(Error::location(
            34455,
            "$substrCP: the starting index must be nonnegative integer.",
        ));
    }
    Ok(s.chars().skip(start as usize).take(len as usize).collect())
}

fn split(s: Option<&Bson>, sep: Option<&Bson>) -> Result<Bson> {
    // Null or missing in either place gives null before any type is checked.
    if is_nullish(s) || is_nullish(sep) {
        return Ok(Bson::Null);
    }
    let Some(Bson::String(s)) = s else {
        return Err(Error::location(
            40085,
            format!(
                "$split requires an expression that evaluates to a string as a first argument, found: {}",
                type_name(s)
            ),
        ));
    };
    let Some(Bson::String(sep)) = sep else {
        return Err(Error::location(
            10503900,
            format!(
                "$split requires an expression that evaluates to a string as a second argument, found: {}",
                type_name(sep)
            ),
        ));
    };
    if sep.is_empty() {
        return Err(Error::location(
            40087,
            "$split requires a non-empty separator",
        ));
    }
    let mut parts = ArrayBuilder::new("$split");
    for part in s.split(sep.as_str()) {
        parts.push(Bson::String(part.to_string()))?;
    }
    Ok(parts.finish())
}

fn parse_trim(kind: TrimKind, name: &str, args: &Bson, ctx: &ParseContext) -> Result<Trim> {
    let Bson::Document(doc) = args else {
        return Err(Error::location(
            50696,
            format!(
                "{name} only supports an object as an argument, found {}",
                type_name(Some(args))
            ),
        ));
    };
    let (mut input, mut chars) = (None, None);
    for (key, value) in doc {
        match key.as_str() {
            "input" => input = Some(Expression::parse(value, ctx)?),
            "chars" => chars = Some(Expression::parse(value, ctx)?),
            _ => {
                return Err(Error::location(
                    50694,
                    format!("{name} found an unknown argument: {key}"),
                ))
            }
        }
    }
    let input =
        input.ok_or_else(|| Error::location(50695, format!("{name} requires an 'input' field")))?;
    Ok(Trim { kind, input, chars })
}

/// What `$trim` removes by default: ASCII whitespace, NUL, the no-break space and the
/// Unicode spaces U+1680 and U+2000 to U+200A (not the line and paragraph separators, nor
/// U+202F, U+205F or U+3000).
fn is_default_trim(c: char) -> bool {
    matches!(
        c,
        '\0' | ' ' | '\t' | '\n' | '\u{0B}' | '\u{0C}' | '\r' | '\u{A0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200A}'
    )
}

impl Trim {
    fn name(&self) -> &'static str {
        match self.kind {
            TrimKind::Both => "$trim",
            TrimKind::Start => "$ltrim",
            TrimKind::End => "$rtrim",
        }
    }

    fn eval(&self, env: &Env<'_>) -> Result<Bson> {
        let input = self.input.eval(env)?;
        let s = match input.as_deref() {
            v if is_nullish(v) => return Ok(Bson::Null),
            Some(Bson::String(s)) => s,
            Some(other) => {
                return Err(Error::location(
                    50699,
                    format!(
                        "{} requires its input to be a string, got {} (of type {}) instead.",
                        self.name(),
                        display(other),
                        type_name(Some(other))
                    ),
                ))
            }
            None => unreachable!("nullish covers missing"),
        };
        let chars = match &self.chars {
            None => None,
            Some(e) => match e.eval(env)?.as_deref() {
                v if is_nullish(v) => return Ok(Bson::Null),
                Some(Bson::String(c)) => Some(c.chars().collect::<Vec<_>>()),
                Some(other) => {
                    return Err(Error::location(
                        50700,
                        format!(
                            "{} requires 'chars' to be a string, got {} (of type {}) instead.",
                            self.name(),
                            display(other),
                            type_name(Some(other))
                        ),
                    ))
                }
                None => unreachable!("nullish covers missing"),
            },
        };
        let strip = |c: char| match &chars {
            Some(set) => set.contains(&c),
            None => is_default_trim(c),
        };
        let trimmed = match self.kind {
            TrimKind::Both => s.trim_matches(strip),
            TrimKind::Start => s.trim_start_matches(strip),
            TrimKind::End => s.trim_end_matches(strip),
        };
        Ok(Bson::String(trimmed.to_string()))
    }
}

fn index_of(code_points: bool, args: &[Expression], env: &Env<'_>) -> Result<Bson> {
    let (name, string_code, substring_code) = if code_points {
        ("$indexOfCP", 40093, 40094)
    } else {
        ("$indexOfBytes", 40091, 40092)
    };
    let s = args[0].eval(env)?;
    let s = match s.as_deref() {
        v if is_nullish(v) => return Ok(Bson::Null),
        Some(Bson::String(s)) => s.as_str(),
        other => {
            return Err(Error::location(
                string_code,
                format!(
                    "{name} requires a string as the first argument, found: {}",
                    type_name(other)
                ),
            ))
        }
    };
    let sub = args[1].eval(env)?;
    let Some(Bson::String(sub)) = sub.as_deref() else {
        return Err(Error::location(
            substring_code,
            format!(
                "{name} requires a string as the second argument, found: {}",
                type_name(sub.as_deref())
            ),
        ));
    };
    // Work in code points or bytes uniformly through a vector of unit offsets.
    let units: Vec<usize> = if code_points {
        s.char_indices().map(|(i, _)| i).chain([s.len()]).collect()
    } else {
        (0..=s.len()).collect()
    };
    let count = units.len() - 1;
    let bound = |i: usize, what: &str| -> Result<Option<usize>> {
        let Some(e) = args.get(i) else {
            return Ok(None);
        };
        let v = e.eval(env)?;
        let n = v
            .as_deref()
            .and_then(Number::from_bson)
            .and_then(Number::to_i64_exact)
            .filter(|n| i32::try_from(*n).is_ok());
        match n {
            Some(n) if n < 0 => Err(Error::location(
                40097,
                format!("{name} requires a nonnegative {what} index, found: {n}"),
            )),
            Some(n) => Ok(Some(n as usize)),
            None => Err(Error::location(
                40096,
                format!(
                    "{name} requires an integral {what} index, found a value of type: {}, with value: {}",
                    type_name(v.as_deref()),
                    v.as_deref().map_or_else(|| "missing".to_string(), display)
                ),
            )),
        }
    };
    let start = bound(2, "starting")?.unwrap_or(0);
    let end = bound(3, "ending")?.unwrap_or(count).min(count);
    if start > end || start > count {
        return Ok(Bson::Int32(-1));
    }
    // $indexOfCP looks at the code points before `end` (an empty substring is found in
    // an empty string only); $indexOfBytes at the offsets up to it.
    let last = if code_points {
        if s.is_empty() && sub.is_empty() {
            return Ok(Bson::Int32(0));
        }
        match end.checked_sub(1) {
            Some(last) if start <= last => last,
            _ => return Ok(Bson::Int32(-1)),
        }
    } else {
        end
    };
    for unit in start..=last {
        let offset = units[unit];
        if offset + sub.len() > units[end] {
            break;
        }
        if s.as_bytes()[offset..].starts_with(sub.as_bytes()) {
            return Ok(length(unit));
        }
    }
    Ok(Bson::Int32(-1))
}

fn parse_regex(mode: RegexMode, name: &str, args: &Bson, ctx: &ParseContext) -> Result<RegexOp> {
    let Bson::Document(doc) = args else {
        return Err(Error::location(
            51103,
            format!(
                "{name} expects an object of named arguments but found: {}",
                type_name(Some(args))
            ),
        ));
    };
    let (mut input, mut regex, mut options) = (None, None, None);
    for (key, value) in doc {
        match key.as_str() {
            "input" => input = Some(Expression::parse(value, ctx)?),
            "regex" => regex = Some(Expression::parse(value, ctx)?),
            "options" => options = Some(Expression::parse(value, ctx)?),
            _ => {
                return Err(Error::location(
                    31024,
                    format!("{name} found an unknown argument: {key}"),
                ))
            }
        }
    }
    let input = input
        .ok_or_else(|| Error::location(31022, format!("{name} requires 'input' parameter")))?;
    let regex = regex
        .ok_or_else(|| Error::location(31023, format!("{name} requires 'regex' parameter")))?;
    let mut op = RegexOp {
        mode,
        input,
        regex,
        options,
        compiled: None,
    };
    let constant_options = match &op.options {
        None => Some(None),
        Some(o) => o.as_constant().map(Some),
    };
    if let (Some(pattern), Some(options)) = (op.regex.as_constant(), constant_options) {
        op.compiled = op.compile(Some(pattern), options)?;
    }
    Ok(op)
}

impl RegexOp {
    fn name(&self) -> &'static str {
        match self.mode {
            RegexMode::Match => "$regexMatch",
            RegexMode::Find => "$regexFind",
            RegexMode::FindAll => "$regexFindAll",
        }
    }

    /// Compiles the pattern; `None` when it is null (nothing matches).
    fn compile(&self, pattern: Option<&Bson>, options: Option<&Bson>) -> Result<Option<Pattern>> {
        let name = self.name();
        // mongod's order: the options' type, their conflict with a regex's own flags and
        // a null byte in them come before a null or mistyped regex.
        let options = match options {
            o if is_nullish(o) => None,
            Some(Bson::String(o)) => Some(o.as_str()),
            _ => {
                return Err(Error::location(
                    51106,
                    format!("{name} needs 'options' to be of type string"),
                ))
            }
        };
        let (pattern, inline_flags) = match pattern {
            Some(Bson::RegularExpression(r)) => (Some(r.pattern.as_str()), r.options.as_str()),
            Some(Bson::String(p)) => (Some(p.as_str()), ""),
            p if is_nullish(p) => (None, ""),
            _ => {
                return Err(Error::location(
                    51105,
                    format!("{name} needs 'regex' to be of type string or regex"),
                ))
            }
        };
        if options.is_some() && !inline_flags.is_empty() {
            return Err(Error::location(
                51107,
                format!(
                    "{name}: found regex option(s) specified in both 'regex' and 'option' fields"
                ),
            ));
        }
        if options.is_some_and(|o| o.contains('\0')) {
            return Err(Error::location(
                51110,
                format!("{name}: regular expression options cannot contain an embedded null byte"),
            ));
        }
        let flags = options.unwrap_or(inline_flags);
        let Some(pattern) = pattern else {
            return Ok(None);
        };
        if pattern.contains('\0') {
            return Err(Error::location(
                51109,
                format!("{name}: regular expression cannot contain an embedded null byte"),
            ));
        }
        match Pattern::new(pattern, flags) {
            Ok(pattern) => Ok(Some(pattern)),
            Err(PatternError::BadOption(other)) => Err(Error::location(
                51108,
                format!("{name} invalid flag in regex options: {other}"),
            )),
            Err(PatternError::Invalid(reason) | PatternError::Matching(_, reason)) => Err(
                Error::location(51111, format!("Invalid Regex in {name}: {reason}")),
            ),
        }
    }

    /// MongoDB's error for a match PCRE2 could not finish (its match limit, say).
    fn matching_error(&self, e: PatternError) -> Error {
        let (code, reason) = match e {
            PatternError::Matching(code, reason) => (code, reason),
            other => (0, format!("{other:?}")),
        };
        Error::location(
            51156,
            format!(
                "Error occurred while executing the regular expression in {}. Result code: {code} ({reason})",
                self.name()
            ),
        )
    }

    fn eval(&self, env: &Env<'_>) -> Result<Bson> {
        let compiled;
        let regex = match &self.compiled {
            Some(r) => Some(r),
            None => {
                let pattern = self.regex.eval(env)?;
                let options = match &self.options {
                    Some(o) => o.eval(env)?,
                    None => None,
                };
                compiled = self.compile(pattern.as_deref(), options.as_deref())?;
                compiled.as_ref()
            }
        };
        let input = self.input.eval(env)?;
        let input = match input.as_deref() {
            v if is_nullish(v) => None,
            Some(Bson::String(s)) => Some(s.as_str()),
            _ => {
                return Err(Error::location(
                    51104,
                    format!("{} needs 'input' to be of type string", self.name()),
                ))
            }
        };
        let (Some(regex), Some(input)) = (regex, input) else {
            return Ok(match self.mode {
                RegexMode::Match => Bson::Boolean(false),
                RegexMode::Find => Bson::Null,
                RegexMode::FindAll => Bson::Array(Vec::new()),
            });
        };
        let failed = |e| self.matching_error(e);
        Ok(match self.mode {
            RegexMode::Match => Bson::Boolean(regex.is_match(input).map_err(failed)?),
            RegexMode::Find => match regex.captures_at(input, 0).map_err(failed)? {
                None => Bson::Null,
                Some(c) => found(input, &c, input[..c.whole().0].chars().count()),
            },
            RegexMode::FindAll => {
                // Code points are counted from the previous match on, not from the
                // start each time: many matches in a long string stay linear.
                let (mut counted_bytes, mut counted_chars) = (0, 0);
                let mut matches = ArrayBuilder::new("$regexFindAll");
                let mut from = 0;
                // Searches start at every code point (after an empty match, the next
                // one), not past the input's end, as mongod's loop.
                while from < input.len() || (from == 0 && input.is_empty()) {
                    let Some(caps) = regex.captures_at(input, from).map_err(failed)? else {
                        break;
                    };
                    let (start, end) = caps.whole();
                    counted_chars += input[counted_bytes..start].chars().count();
                    counted_bytes = start;
                    matches.push(found(input, &caps, counted_chars))?;
                    // After an empty match, the next search starts one character on.
                    from = if end > start {
                        end
                    } else {
                        end + input[end..].chars().next().map_or(1, char::len_utf8)
                    };
                }
                matches.finish()
            }
        })
    }
}

/// `{match, idx, captures}` for one match of `input` that starts `idx` code points into
/// it.
fn found(input: &str, caps: &Captures, idx: usize) -> Bson {
    let (start, end) = caps.whole();
    let captures: Vec<Bson> = caps
        .groups()
        .iter()
        .map(|g| g.map_or(Bson::Null, |(s, e)| Bson::String(input[s..e].to_string())))
        .collect();
    Bson::Document(doc! {"match": &input[start..end], "idx": idx as i32, "captures": captures})
}

fn parse_replace(all: bool, args: &Bson, ctx: &ParseContext) -> Result<Replace> {
    let name = if all { "$replaceAll" } else { "$replaceOne" };
    let Bson::Document(doc) = args else {
        return Err(Error::location(
            51751,
            format!(
                "{name} requires an object as an argument, found: {}",
                type_name(Some(args))
            ),
        ));
    };
    let (mut input, mut find, mut replacement) = (None, None, None);
    for (key, value) in doc {
        let slot = match key.as_str() {
            "input" => &mut input,
            "find" => &mut find,
            "replacement" => &mut replacement,
            _ => {
                return Err(Error::location(
                    51750,
                    format!("{name} found an unknown argument: {key}"),
                ))
            }
        };
        *slot = Some(Expression::parse(value, ctx)?);
    }
    let missing = |code: i32, field: &str| {
        Error::location(code, format!("{name} requires '{field}' to be specified"))
    };
    Ok(Replace {
        all,
        input: input.ok_or_else(|| missing(51749, "input"))?,
        find: find.ok_or_else(|| missing(51748, "find"))?,
        replacement: replacement.ok_or_else(|| missing(51747, "replacement"))?,
    })
}

impl Replace {
    fn eval(&self, env: &Env<'_>) -> Result<Bson> {
        let name = if self.all {
            "$replaceAll"
        } else {
            "$replaceOne"
        };
        let values = [
            (self.input.eval(env)?, "input", 10503904),
            (self.find.eval(env)?, "find", 10503901),
            (self.replacement.eval(env)?, "replacement", 10503902),
        ];
        let mut strings = Vec::with_capacity(3);
        let mut null = false;
        for (v, field, code) in &values {
            match v.as_deref() {
                v if is_nullish(v) => null = true,
                Some(Bson::String(s)) => strings.push(s.as_str()),
                Some(other) => {
                    return Err(Error::location(
                        *code,
                        format!(
                            "{name} requires that '{field}' be a string, found: {}",
                            display(other)
                        ),
                    ))
                }
                None => unreachable!("nullish covers missing"),
            }
        }
        if null {
            return Ok(Bson::Null);
        }
        let (input, find, replacement) = (strings[0], strings[1], strings[2]);
        if replacement.len() > find.len() {
            let replaced = if self.all {
                input.matches(find).count()
            } else {
                usize::from(input.contains(find))
            };
            check_string_size(input.len() + replaced * (replacement.len() - find.len()))?;
        }
        Ok(Bson::String(if self.all {
            input.replace(find, replacement)
        } else {
            input.replacen(find, replacement, 1)
        }))
    }
}

#[cfg(test)]
mod tests {
    use crate::expression::test_util::*;
    use bson::{bson, Bson};

    #[test]
    fn concat_and_case() {
        assert_eq!(
            value(bson!({"$concat": ["a", "$s", "b"]})),
            bson!("ahéllob")
        );
        assert_eq!(value(bson!({"$concat": []})), bson!(""));
        assert_eq!(value(bson!({"$concat": ["a", "$nope"]})), Bson::Null);
        assert_eq!(
            error_message(bson!({"$concat": ["a", 1]})),
            "$concat only supports strings, not int"
        );
        assert_eq!(value(bson!({"$toUpper": "$s"})), bson!("HéLLO"));
        assert_eq!(value(bson!({"$toLower": "AbC"})), bson!("abc"));
        assert_eq!(value(bson!({"$toLower": 12})), bson!("12"));
        assert_eq!(value(bson!({"$toUpper": "$nope"})), bson!(""));
        assert_eq!(error_code(bson!({"$toUpper": [[1]]})), 16007);
        // Numbers and timestamps as mongod's older coercions write them.
        assert_eq!(value(bson!({"$toLower": 123456.789})), bson!("123457"));
        // Indexes that are no 32-bit integers: a double is refused, before a negative
        // start is; a decimal is the smallest integer.
        assert_eq!(error_code(bson!({"$substrBytes": ["abc", 1e20, 1]})), 31109);
        assert_eq!(
            error_code(bson!({"$substrBytes": ["abc", -1, f64::NAN]})),
            31109
        );
        let nan = Bson::Decimal128("NaN".parse().unwrap());
        assert_eq!(
            value(bson!({"$substrBytes": ["hello", 1, nan]})),
            bson!("ello")
        );
        assert_eq!(value(bson!({"$toUpper": 1e20})), bson!("1E+20"));
        let ts = Bson::Timestamp(bson::Timestamp {
            time: 1721500800,
            increment: 1,
        });
        assert_eq!(value(bson!({"$toLower": ts})), bson!("jul 20 18:40:00:1"));
        let ts = Bson::Timestamp(bson::Timestamp {
            time: 1704067200,
            increment: 42,
        });
        assert_eq!(value(bson!({"$toUpper": ts})), bson!("JAN  1 00:00:00:42"));
    }

    #[test]
    fn substrings_and_lengths() {
        assert_eq!(value(bson!({"$substr": ["abcdef", 1, 3]})), bson!("bcd"));
        assert_eq!(
            value(bson!({"$substrBytes": ["abcdef", 4, -1]})),
            bson!("ef")
        );
        assert_eq!(value(bson!({"$substrBytes": ["abc", 10, 1]})), bson!(""));
        assert_eq!(value(bson!({"$substrBytes": [123, 0, 2]})), bson!("12"));
        assert_eq!(error_code(bson!({"$substrBytes": ["$s", 2, 1]})), 28656);
        assert_eq!(error_code(bson!({"$substrBytes": ["$s", 0, 2]})), 28657);
        assert_eq!(error_code(bson!({"$substrBytes": ["a", "x", 1]})), 16034);
        assert_eq!(error_code(bson!({"$substrBytes": ["a", 0, "x"]})), 16035);
        assert_eq!(value(bson!({"$substrCP": ["$s", 1, 2]})), bson!("él"));
        assert_eq!(error_code(bson!({"$substrCP": ["a", -1, 1]})), 34455);
        assert_eq!(error_code(bson!({"$substrCP": ["a", 0, -1]})), 34454);
        assert_eq!(error_code(bson!({"$substrCP": ["a", 0.5, 1]})), 34451);
        assert_eq!(value(bson!({"$strLenBytes": "$s"})), bson!(6));
        assert_eq!(value(bson!({"$strLenCP": "$s"})), bson!(5));
        assert_eq!(
            error_message(bson!({"$strLenBytes": "$nope"})),
            "$strLenBytes requires a string argument, found: missing"
        );
        assert_eq!(error_code(bson!({"$strLenCP": 1})), 34471);
    }

    #[test]
    fn split_trim_index() {
        assert_eq!(
            value(bson!({"$split": ["a,b,,c", ","]})),
            bson!(["a", "b", "", "c"])
        );
        assert_eq!(value(bson!({"$split": ["$nope", ","]})), Bson::Null);
        assert_eq!(error_code(bson!({"$split": [1, ","]})), 40085);
        assert_eq!(error_code(bson!({"$split": ["a", 1]})), 10503900);
        assert_eq!(value(bson!({"$split": [1, null]})), Bson::Null);
        assert_eq!(error_code(bson!({"$split": ["a", ""]})), 40087);
        assert_eq!(value(bson!({"$trim": {"input": "  a b \n"}})), bson!("a b"));
        assert_eq!(
            value(bson!({"$ltrim": {"input": "xxaxx", "chars": "x"}})),
            bson!("axx")
        );
        assert_eq!(
            value(bson!({"$rtrim": {"input": "xxaxx", "chars": "x"}})),
            bson!("xxa")
        );
        assert_eq!(value(bson!({"$trim": {"input": null}})), Bson::Null);
        assert_eq!(
            error_message(bson!({"$trim": {"input": 1}})),
            "$trim requires its input to be a string, got 1 (of type int) instead."
        );
        assert_eq!(error_code(bson!({"$trim": {"chars": "a"}})), 50695);
        assert_eq!(error_code(bson!({"$trim": {"input": "a", "x": 1}})), 50694);
        assert_eq!(error_code(bson!({"$trim": "a"})), 50696);
        assert_eq!(
            value(bson!({"$indexOfBytes": ["cafeteria", "e"]})),
            bson!(3)
        );
        assert_eq!(
            value(bson!({"$indexOfBytes": ["cafeteria", "e", 4]})),
            bson!(5)
        );
        assert_eq!(
            value(bson!({"$indexOfBytes": ["cafeteria", "e", 0, 3]})),
            bson!(-1)
        );
        assert_eq!(value(bson!({"$indexOfBytes": ["abc", ""]})), bson!(0));
        assert_eq!(value(bson!({"$indexOfBytes": ["$nope", "a"]})), Bson::Null);
        assert_eq!(value(bson!({"$indexOfCP": ["$s", "l"]})), bson!(2));
        assert_eq!(value(bson!({"$indexOfBytes": ["$s", "l"]})), bson!(3));
        assert_eq!(error_code(bson!({"$indexOfBytes": [1, "a"]})), 40091);
        assert_eq!(error_code(bson!({"$indexOfBytes": ["a", 1]})), 40092);
        assert_eq!(error_code(bson!({"$indexOfBytes": ["a", "a", -1]})), 40097);
        assert_eq!(error_code(bson!({"$indexOfBytes": ["a", "a", 1.5]})), 40096);
        let beyond_int32 = Bson::Int64(1 << 31);
        assert_eq!(
            error_code(bson!({"$indexOfBytes": ["a", "a", beyond_int32]})),
            40096
        );
        assert_eq!(error_code(bson!({"$indexOfCP": [1, "a"]})), 40093);
        assert_eq!(error_code(bson!({"$indexOfCP": ["a", 1]})), 40094);
        // An empty substring: found at the last offset in bytes, before the end in code
        // points.
        assert_eq!(value(bson!({"$indexOfBytes": ["hello", "", 5]})), bson!(5));
        assert_eq!(value(bson!({"$indexOfCP": ["hello", "", 5]})), bson!(-1));
        assert_eq!(value(bson!({"$indexOfCP": ["hello", "", 2, 2]})), bson!(-1));
        assert_eq!(value(bson!({"$indexOfCP": ["hello", "", 4]})), bson!(4));
        assert_eq!(value(bson!({"$indexOfCP": ["", ""]})), bson!(0));
        assert_eq!(value(bson!({"$strcasecmp": ["ABC", "abc"]})), bson!(0));
        assert_eq!(value(bson!({"$strcasecmp": ["a", "B"]})), bson!(-1));
    }

    #[test]
    fn regex_and_replace() {
        assert_eq!(
            value(bson!({"$regexMatch": {"input": "$s", "regex": "^H", "options": "i"}})),
            bson!(true)
        );
        assert_eq!(
            value(bson!({"$regexMatch": {"input": "$s", "regex": "^H"}})),
            bson!(false)
        );
        assert_eq!(
            value(
                bson!({"$regexMatch": {"input": "abc", "regex": Bson::RegularExpression(bson::Regex { pattern: "B".try_into().unwrap(), options: "i".try_into().unwrap() })}})
            ),
            bson!(true)
        );
        assert_eq!(
            value(bson!({"$regexMatch": {"input": "$nope", "regex": "a"}})),
            bson!(false)
        );
        assert_eq!(
            value(bson!({"$regexMatch": {"input": "abc", "regex": {"$concat": ["b", "c"]}}})),
            bson!(true)
        );
        assert_eq!(
            error_code(bson!({"$regexMatch": {"input": 1, "regex": "a"}})),
            51104
        );
        assert_eq!(
            error_code(bson!({"$regexMatch": {"input": "a", "regex": 1}})),
            51105
        );
        assert_eq!(
            error_code(bson!({"$regexMatch": {"input": "a", "regex": "("}})),
            51111
        );
        assert_eq!(
            error_code(bson!({"$regexMatch": {"input": "a", "regex": "a", "options": "z"}})),
            51108
        );
        assert_eq!(error_code(bson!({"$regexMatch": {"regex": "a"}})), 31022);
        assert_eq!(error_code(bson!({"$regexMatch": {"input": "a"}})), 31023);
        assert_eq!(error_code(bson!({"$regexMatch": "a"})), 51103);
        assert_eq!(
            value(bson!({"$regexFind": {"input": "héllo world", "regex": "(o) (w)"}})),
            bson!({"match": "o w", "idx": 4, "captures": ["o", "w"]})
        );
        assert_eq!(
            value(bson!({"$regexFind": {"input": "abc", "regex": "z"}})),
            Bson::Null
        );
        assert_eq!(
            value(bson!({"$regexFindAll": {"input": "a1b2", "regex": "[0-9]"}})),
            bson!([{"match": "1", "idx": 1, "captures": []}, {"match": "2", "idx": 3, "captures": []}])
        );
        assert_eq!(
            value(bson!({"$replaceOne": {"input": "aXbX", "find": "X", "replacement": "-"}})),
            bson!("a-bX")
        );
        assert_eq!(
            value(bson!({"$replaceAll": {"input": "aXbX", "find": "X", "replacement": "-"}})),
            bson!("a-b-")
        );
        assert_eq!(
            value(bson!({"$replaceAll": {"input": null, "find": "X", "replacement": "-"}})),
            Bson::Null
        );
        assert_eq!(
            error_code(bson!({"$replaceOne": {"input": 1, "find": "X", "replacement": "-"}})),
            10503904
        );
        assert_eq!(
            error_code(bson!({"$replaceOne": {"input": "a", "find": "X"}})),
            51747
        );
    }
}
