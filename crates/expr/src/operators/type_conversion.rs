//! Type expression operators: `$type $isNumber $convert` and its shorthands `$toInt
//! $toLong $toDouble $toDecimal $toString $toBool $toDate $toObjectId $toUUID`.
//!
//! Conversions follow MongoDB 8.0's table, binData's in [`bin_data`]; a failed
//! conversion is `ConversionFailure` (241) unless `$convert` names an `onError` value.

mod bin_data;

use crate::context::ParseContext;
use crate::env::{Env, Value};
use crate::expression::{is_nullish, parse_fixed, type_name, Expression};
use crate::numeric::{display, format_double, split_decimal, to_decimal};
use crate::operators::date::{format_iso, parse_date};
use basalt_error::{Error, ErrorCode, Result};
use basalt_value::Number;
use bin_data::Format;
use bson::oid::ObjectId;
use bson::{Bson, DateTime, Decimal128};
use std::borrow::Cow;
use std::str::FromStr;

#[derive(Debug)]
pub(crate) enum TypeOp {
    Type(Box<[Expression; 1]>),
    IsNumber(Box<[Expression; 1]>),
    Convert(Box<Convert>),
}

#[derive(Debug)]
pub(crate) struct Convert {
    input: Expression,
    to: To,
    /// How strings stand for binData's bytes; required between the two.
    format: Option<Expression>,
    /// The order of a number's bytes in binData: little-endian unless "big".
    byte_order: Option<Expression>,
    on_error: Option<Expression>,
    on_null: Option<Expression>,
}

#[derive(Debug)]
enum To {
    Fixed(Target),
    Computed(Expression),
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Target {
    Double,
    String,
    ObjectId,
    Bool,
    Date,
    Int,
    Long,
    Decimal,
    /// binData of a subtype, checked once the input is known not to be null.
    BinData(Subtype),
    /// A real BSON type that nothing converts to.
    Other(&'static str),
}

/// The `subtype` of `to: {type: "binData", subtype}`, or why it is refused.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Subtype {
    Valid(u8),
    /// Not an integer (4341106).
    Fractional,
    /// Out of 0–9 and 128–255 (4341107).
    OutOfRange,
    /// Not a number (4341108).
    WrongType,
}

impl Subtype {
    fn from_bson(value: Option<&Bson>) -> Subtype {
        let Some(value) = value else {
            return Subtype::Valid(0);
        };
        let Some(n) = Number::from_bson(value) else {
            return Subtype::WrongType;
        };
        let n = n.to_f64();
        if n.fract() != 0.0 || !n.is_finite() {
            return Subtype::Fractional;
        }
        match n as i64 {
            n @ (0..=9 | 128..=255) => Subtype::Valid(n as u8),
            _ => Subtype::OutOfRange,
        }
    }

    fn get(self) -> Result<u8> {
        let (code, why) = match self {
            Subtype::Valid(n) => return Ok(n),
            Subtype::Fractional => (4341106, "must be an integer"),
            Subtype::OutOfRange => (4341107, "must be a valid binary subtype (0-9 or 128-255)"),
            Subtype::WrongType => (4341108, "must be a number"),
        };
        Err(Error::location(
            code,
            format!("In $convert, 'to.subtype' {why}"),
        ))
    }
}

impl Target {
    fn name(self) -> &'static str {
        match self {
            Target::Double => "double",
            Target::String => "string",
            Target::ObjectId => "objectId",
            Target::Bool => "bool",
            Target::Date => "date",
            Target::Int => "int",
            Target::Long => "long",
            Target::Decimal => "decimal",
            Target::BinData(_) => "binData",
            Target::Other(name) => name,
        }
    }

    /// The target named by `$convert`'s `to`: a type name or a BSON type number, or an
    /// object `{type, subtype}` (the subtype of binData; ignored for other types).
    fn from_spec(to: &Bson) -> Result<Target> {
        if let Bson::Document(spec) = to {
            let kind = spec
                .get("type")
                .filter(|t| !matches!(t, Bson::Null | Bson::Document(_)))
                .ok_or_else(|| {
                    Error::failed_to_parse("$convert's 'to' object must name a 'type'")
                })?;
            return Ok(match Target::from_spec(kind)? {
                Target::BinData(_) => Target::BinData(Subtype::from_bson(spec.get("subtype"))),
                other => other,
            });
        }
        const NAMES: [(&str, i32); 21] = [
            ("double", 1),
            ("string", 2),
            ("object", 3),
            ("array", 4),
            ("binData", 5),
            ("undefined", 6),
            ("objectId", 7),
            ("bool", 8),
            ("date", 9),
            ("null", 10),
            ("regex", 11),
            ("dbPointer", 12),
            ("javascript", 13),
            ("symbol", 14),
            ("javascriptWithScope", 15),
            ("int", 16),
            ("timestamp", 17),
            ("long", 18),
            ("decimal", 19),
            ("minKey", -1),
            ("maxKey", 127),
        ];
        let code = match to {
            Bson::String(name) => NAMES
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, c)| *c)
                .ok_or_else(|| Error::bad_value(format!("Unknown type name: {name}")))?,
            other => match Number::from_bson(other) {
                Some(n) => n
                    .to_i64_exact()
                    .and_then(|c| i32::try_from(c).ok())
                    .ok_or_else(|| {
                        Error::failed_to_parse(format!(
                            "In $convert, numeric value for 'to' is not an integer: {}",
                            display(other)
                        ))
                    })?,
                None => {
                    return Err(Error::failed_to_parse(format!(
                        "$convert's 'to' argument must be a string or number, but is {}",
                        type_name(Some(other))
                    )))
                }
            },
        };
        Ok(match code {
            1 => Target::Double,
            2 => Target::String,
            7 => Target::ObjectId,
            8 => Target::Bool,
            5 => Target::BinData(Subtype::Valid(0)),
            9 => Target::Date,
            16 => Target::Int,
            18 => Target::Long,
            19 => Target::Decimal,
            other => match NAMES.iter().find(|(_, c)| *c == other) {
                Some((name, _)) => Target::Other(name),
                None => {
                    return Err(Error::failed_to_parse(format!(
                        "In $convert, numeric value for 'to' does not correspond to a BSON type: {other}"
                    )))
                }
            },
        })
    }
}

impl TypeOp {
    pub(crate) fn parse(name: &str, args: &Bson, ctx: &ParseContext) -> Result<Option<TypeOp>> {
        let shorthand = |target: Target| -> Result<Option<TypeOp>> {
            if let Bson::Array(items) = args {
                if items.len() != 1 {
                    return Err(Error::location(
                        50723,
                        format!("{name} requires a single argument, got {}", items.len()),
                    ));
                }
            }
            let [input] = *parse_fixed::<1>(name, args, ctx)?;
            // `$toString` writes binData as `format: "auto"` does; `$toUUID` reads UUIDs.
            let format = match name {
                "$toString" => Some("auto"),
                "$toUUID" => Some("uuid"),
                _ => None,
            };
            Ok(Some(TypeOp::Convert(Box::new(Convert {
                input,
                to: To::Fixed(target),
                format: format.map(|f| Expression::constant(Bson::String(f.into()))),
                byte_order: None,
                on_error: None,
                on_null: None,
            }))))
        };
        Ok(Some(match name {
            "$type" => TypeOp::Type(parse_fixed(name, args, ctx)?),
            "$isNumber" => TypeOp::IsNumber(parse_fixed(name, args, ctx)?),
            "$convert" => TypeOp::Convert(Box::new(parse_convert(args, ctx)?)),
            "$toInt" => return shorthand(Target::Int),
            "$toLong" => return shorthand(Target::Long),
            "$toDouble" => return shorthand(Target::Double),
            "$toDecimal" => return shorthand(Target::Decimal),
            "$toString" => return shorthand(Target::String),
            "$toBool" => return shorthand(Target::Bool),
            "$toDate" => return shorthand(Target::Date),
            "$toObjectId" => return shorthand(Target::ObjectId),
            "$toUUID" => return shorthand(Target::BinData(Subtype::Valid(4))),
            _ => return Ok(None),
        }))
    }

    pub(crate) fn eval<'a>(&'a self, env: &Env<'a>) -> Result<Value<'a>> {
        match self {
            TypeOp::Type(arg) => {
                let v = arg[0].eval(env)?;
                Ok(Some(Cow::Owned(Bson::String(
                    type_name(v.as_deref()).to_string(),
                ))))
            }
            TypeOp::IsNumber(arg) => {
                let v = arg[0].eval(env)?;
                Ok(Some(Cow::Owned(Bson::Boolean(
                    v.as_deref().is_some_and(basalt_value::is_number),
                ))))
            }
            TypeOp::Convert(c) => c.eval(env),
        }
    }
}

fn parse_convert(args: &Bson, ctx: &ParseContext) -> Result<Convert> {
    let Bson::Document(doc) = args else {
        return Err(Error::failed_to_parse(format!(
            "$convert expects an object of named arguments but found: {}",
            type_name(Some(args))
        )));
    };
    let (mut input, mut to, mut on_error, mut on_null) = (None, None, None, None);
    let (mut format, mut byte_order) = (None, None);
    for (key, value) in doc {
        match key.as_str() {
            "input" => input = Some(Expression::parse(value, ctx)?),
            "to" => to = Some(Expression::parse(value, ctx)?),
            "format" => format = Some(Expression::parse(value, ctx)?),
            "byteOrder" => byte_order = Some(Expression::parse(value, ctx)?),
            "onError" => on_error = Some(Expression::parse(value, ctx)?),
            "onNull" => on_null = Some(Expression::parse(value, ctx)?),
            _ => {
                return Err(Error::failed_to_parse(format!(
                    "$convert found an unknown argument: {key}"
                )))
            }
        }
    }
    let input =
        input.ok_or_else(|| Error::failed_to_parse("Missing 'input' parameter to $convert"))?;
    let to = to.ok_or_else(|| Error::failed_to_parse("Missing 'to' parameter to $convert"))?;
    let to = match to.as_constant() {
        Some(spec) if !is_nullish(Some(spec)) => To::Fixed(Target::from_spec(spec)?),
        _ => To::Computed(to),
    };
    Ok(Convert {
        input,
        to,
        format,
        byte_order,
        on_error,
        on_null,
    })
}

impl Convert {
    fn eval<'a>(&'a self, env: &Env<'a>) -> Result<Value<'a>> {
        // A null `to` gives null, unless the input is null too: then `onNull` applies.
        let target = match &self.to {
            To::Fixed(t) => Some(*t),
            To::Computed(e) => {
                let spec = e.eval(env)?;
                match spec.as_deref() {
                    s if is_nullish(s) => None,
                    Some(s) => Some(Target::from_spec(s)?),
                    None => unreachable!("nullish covers missing"),
                }
            }
        };
        let input = self.input.eval(env)?;
        let Some(value) = input.as_deref().filter(|v| !is_nullish(Some(v))) else {
            return match &self.on_null {
                Some(e) => e.eval(env),
                None => Ok(Some(Cow::Owned(Bson::Null))),
            };
        };
        let Some(target) = target else {
            return Ok(Some(Cow::Owned(Bson::Null)));
        };
        let subtype = match target {
            Target::BinData(subtype) => Some(subtype.get()?),
            _ => None,
        };
        let format = self.format(env)?;
        let big_endian = self.big_endian(env)?;
        let textual = matches!(
            (value, target),
            (Bson::String(_), Target::BinData(_)) | (Bson::Binary(_), Target::String)
        );
        if textual && format.is_none() {
            return Err(Error::location(
                4341115,
                "Format must be specified when converting between 'string' and 'binData'",
            ));
        }
        let converted = match (value, target, subtype) {
            (_, _, Some(subtype)) => bin_data::to_bin_data(value, subtype, format, big_endian),
            (Bson::Binary(bin), Target::String, _) => {
                bin_data::to_text(value, bin, format.unwrap_or(Format::Auto)).map(Bson::String)
            }
            (Bson::Binary(bin), Target::Int | Target::Long | Target::Double, _) => {
                bin_data::to_number(value, bin, target, big_endian)
            }
            _ => convert(value, target),
        };
        match converted {
            Ok(v) => Ok(Some(Cow::Owned(v))),
            Err(failure) => match &self.on_error {
                Some(e) => e.eval(env),
                None => Err(failure.into_error()),
            },
        }
    }
}

impl Convert {
    /// `format`, checked; `None` when not given (or null).
    fn format(&self, env: &Env<'_>) -> Result<Option<Format>> {
        let Some(expression) = &self.format else {
            return Ok(None);
        };
        match expression.eval(env)?.as_deref() {
            v if is_nullish(v) => Ok(None),
            Some(Bson::String(name)) => Format::from_name(name).map(Some).ok_or_else(|| {
                Error::location(
                    4341125,
                    format!("Invalid format value for $convert: {name}"),
                )
            }),
            other => Err(Error::location(
                4341114,
                format!(
                    "$convert's 'format' argument must be a string, but is {}",
                    type_name(other)
                ),
            )),
        }
    }

    /// Whether `byteOrder` is "big" (checked; little-endian by default).
    fn big_endian(&self, env: &Env<'_>) -> Result<bool> {
        let Some(expression) = &self.byte_order else {
            return Ok(false);
        };
        match expression.eval(env)?.as_deref() {
            v if is_nullish(v) => Ok(false),
            Some(Bson::String(order)) if order == "little" => Ok(false),
            Some(Bson::String(order)) if order == "big" => Ok(true),
            Some(Bson::String(order)) => Err(Error::location(
                9130002,
                format!("Invalid byteOrder value for $convert: {order}"),
            )),
            other => Err(Error::location(
                9130001,
                format!(
                    "$convert's 'byteOrder' argument must be a string, but is {}",
                    type_name(other)
                ),
            )),
        }
    }
}

/// Why a conversion failed: the message before and after MongoDB's fixed
/// "in $convert with no onError value" phrase, and its code (ConversionFailure unless
/// said otherwise).
pub(crate) struct Failure {
    reason: String,
    detail: Option<String>,
    code: ErrorCode,
}

impl Failure {
    fn new(reason: impl Into<String>, detail: Option<String>) -> Failure {
        Failure {
            reason: reason.into(),
            detail,
            code: ErrorCode::CONVERSION_FAILURE,
        }
    }

    fn with_detail(mut self, detail: impl Into<String>) -> Failure {
        self.detail = Some(detail.into());
        self
    }

    fn with_code(mut self, code: ErrorCode) -> Failure {
        self.code = code;
        self
    }

    fn into_error(self) -> Error {
        let mut message = format!("{} in $convert with no onError value", self.reason);
        if let Some(detail) = self.detail {
            message.push_str(": ");
            message.push_str(&detail);
        }
        Error::new(self.code, message)
    }
}

/// A finite decimal truncated toward zero, exactly; `None` past what an i128 holds.
fn truncated_decimal(decimal: &bson::Decimal128) -> Option<i128> {
    let (negative, digits, scale) = split_decimal(&decimal.to_string());
    // The value is digits × 10^scale.
    let kept = if scale < 0 {
        let drop = scale.unsigned_abs() as usize;
        digits
            .get(..digits.len().saturating_sub(drop))
            .unwrap_or("")
    } else {
        &digits
    };
    let mut value: i128 = if kept.is_empty() {
        0
    } else {
        kept.parse().ok()?
    };
    for _ in 0..scale.max(0) {
        value = value.checked_mul(10)?;
    }
    Some(if negative { -value } else { value })
}

/// Converts a value that is not null, missing or undefined.
pub(crate) fn convert(value: &Bson, target: Target) -> std::result::Result<Bson, Failure> {
    let unsupported = || {
        Failure::new(
            format!(
                "Unsupported conversion from {} to {}",
                type_name(Some(value)),
                target.name()
            ),
            None,
        )
    };
    let overflow = || {
        Failure::new(
            "Conversion would overflow target type",
            Some(display(value)),
        )
    };
    let number = Number::from_bson(value);
    Ok(match target {
        Target::Double => match value {
            Bson::Boolean(b) => Bson::Double(f64::from(u8::from(*b))),
            Bson::DateTime(d) => Bson::Double(d.timestamp_millis() as f64),
            Bson::String(s) => Bson::Double(parse_double(s)?),
            Bson::Decimal128(_) => {
                let d = number.map_or(f64::NAN, Number::to_f64);
                let text = value.to_string();
                if d.is_infinite() && !text.contains("Inf") {
                    return Err(overflow());
                }
                Bson::Double(d)
            }
            _ => Bson::Double(number.ok_or_else(unsupported)?.to_f64()),
        },
        Target::Int | Target::Long => {
            let wide = match value {
                Bson::Boolean(b) => i64::from(*b),
                Bson::Int32(i) => i64::from(*i),
                Bson::Int64(i) => *i,
                Bson::DateTime(d) if target == Target::Long => d.timestamp_millis(),
                Bson::String(s) => parse_integer(s, target)?,
                Bson::Double(_) | Bson::Decimal128(_) => {
                    let d = number.map_or(f64::NAN, Number::to_f64);
                    if d.is_nan() {
                        return Err(Failure::new(
                            "Attempt to convert NaN value to integer type",
                            Some(display(value)),
                        ));
                    }
                    if d.is_infinite() {
                        return Err(Failure::new(
                            "Attempt to convert infinity value to integer type",
                            Some(display(value)),
                        ));
                    }
                    match value {
                        // A decimal truncated exactly: the longs near the ends are no
                        // doubles.
                        Bson::Decimal128(decimal) => truncated_decimal(decimal)
                            .and_then(|t| i64::try_from(t).ok())
                            .ok_or_else(overflow)?,
                        _ => {
                            let t = d.trunc();
                            if !(-TWO_POW_63..TWO_POW_63).contains(&t) {
                                return Err(overflow());
                            }
                            t as i64
                        }
                    }
                }
                _ => return Err(unsupported()),
            };
            if target == Target::Int {
                Bson::Int32(i32::try_from(wide).map_err(|_| overflow())?)
            } else {
                Bson::Int64(wide)
            }
        }
        Target::Decimal => match value {
            Bson::Boolean(b) => Bson::Decimal128(to_decimal(Number::Int32(i32::from(*b)))),
            Bson::DateTime(d) => Bson::Decimal128(to_decimal(Number::Int64(d.timestamp_millis()))),
            Bson::String(s) => Bson::Decimal128(parse_decimal(s)?),
            _ => Bson::Decimal128(to_decimal(number.ok_or_else(unsupported)?)),
        },
        Target::String => Bson::String(match value {
            Bson::String(s) => s.clone(),
            Bson::Double(d) => format_double(*d),
            Bson::Int32(i) => i.to_string(),
            Bson::Int64(i) => i.to_string(),
            Bson::Decimal128(d) => d.to_string(),
            Bson::Boolean(b) => b.to_string(),
            Bson::ObjectId(oid) => oid.to_hex(),
            Bson::DateTime(d) => format_iso(d.timestamp_millis()),
            _ => return Err(unsupported()),
        }),
        Target::Bool => Bson::Boolean(match number {
            Some(n) => !crate::numeric::is_zero(n),
            None => match value {
                Bson::Boolean(b) => *b,
                _ => true,
            },
        }),
        Target::Date => Bson::DateTime(DateTime::from_millis(match value {
            Bson::DateTime(d) => d.timestamp_millis(),
            Bson::Int64(ms) => *ms,
            Bson::Double(_) | Bson::Decimal128(_) => {
                let d = number.map_or(f64::NAN, Number::to_f64);
                if !d.is_finite() {
                    return Err(Failure::new(
                        format!("Attempt to convert {} to date", display(value)),
                        None,
                    ));
                }
                if !(-9.2e18..9.2e18).contains(&d) {
                    return Err(overflow());
                }
                d.trunc() as i64
            }
            Bson::String(s) => parse_date(s)
                .ok_or_else(|| Failure::new(format!("Error parsing date string '{s}'"), None))?,
            Bson::ObjectId(oid) => super::date::object_id_millis(oid),
            Bson::Timestamp(ts) => i64::from(ts.time) * 1000,
            _ => return Err(unsupported()),
        })),
        Target::ObjectId => match value {
            Bson::ObjectId(oid) => Bson::ObjectId(*oid),
            Bson::String(s) => Bson::ObjectId(ObjectId::parse_str(s).map_err(|_| {
                Failure::new(
                    format!("Failed to parse objectId '{s}'"),
                    Some(if s.len() != 24 {
                        format!(
                            "Invalid string length for parsing to OID, expected 24 but found {}",
                            s.len()
                        )
                    } else {
                        "Invalid character found in hex string".to_string()
                    }),
                )
            })?),
            _ => return Err(unsupported()),
        },
        Target::BinData(_) | Target::Other(_) => return Err(unsupported()),
    })
}

/// 2^63, the first double beyond int64.
const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;

fn parse_failure(s: &str, detail: &str) -> Failure {
    Failure::new(
        format!("Failed to parse number '{s}'"),
        Some(detail.to_string()),
    )
}

/// A string as `$toDouble` reads it, as C's `strtod` (which mongod uses): decimal or
/// hexadecimal (`0x1.8p1`) notation, `inf`, `nan`; a number out of the doubles' range
/// (`1e309`, `1e-400`) is a failure.
fn parse_double(s: &str) -> std::result::Result<f64, Failure> {
    let whole = || parse_failure(s, "Did not consume whole string.");
    if s.is_empty() || s.trim() != s {
        return Err(whole());
    }
    let (negative, body) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let magnitude = match body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        Some(hex) => parse_hex_float(hex).ok_or_else(whole)?,
        None => {
            let value = body.parse::<f64>().map_err(|_| whole())?;
            let mantissa = body.split(['e', 'E']).next().unwrap_or_default();
            let named = body
                .bytes()
                .any(|c| c.is_ascii_alphabetic() && !matches!(c, b'e' | b'E'));
            let nonzero = mantissa.bytes().any(|c| matches!(c, b'1'..=b'9'));
            if !named && (value.is_infinite() || (value == 0.0 && nonzero)) {
                return Err(parse_failure(s, "Out of range"));
            }
            value
        }
    };
    Ok(if negative { -magnitude } else { magnitude })
}

/// The digits of a hexadecimal float after its `0x`: `1.8p1`, `ff`, `1p-1`.
fn parse_hex_float(hex: &str) -> Option<f64> {
    let (digits, exponent) = match hex.split_once(['p', 'P']) {
        Some((digits, exponent)) => (digits, exponent.parse::<i32>().ok()?),
        None => (hex, 0),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let mut value = 0f64;
    for c in whole.chars() {
        value = value * 16.0 + f64::from(c.to_digit(16)?);
    }
    let mut scale = 1.0 / 16.0;
    for c in fraction.chars() {
        value += f64::from(c.to_digit(16)?) * scale;
        scale /= 16.0;
    }
    Some(value * 2f64.powi(exponent))
}

fn parse_integer(s: &str, target: Target) -> std::result::Result<i64, Failure> {
    let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
    if let Some(bad) = digits.chars().find(|c| !c.is_ascii_digit()) {
        return Err(parse_failure(
            s,
            &format!("Bad digit \"{bad}\" while parsing {s}"),
        ));
    }
    if digits.is_empty() {
        return Err(parse_failure(s, "No digits"));
    }
    let wide = s.parse::<i64>().map_err(|_| parse_failure(s, "Overflow"))?;
    if target == Target::Int && i32::try_from(wide).is_err() {
        return Err(parse_failure(s, "Overflow"));
    }
    Ok(wide)
}

fn parse_decimal(s: &str) -> std::result::Result<Decimal128, Failure> {
    let looks_numeric = s.chars().any(|c| c.is_ascii_alphanumeric())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+'));
    looks_numeric
        .then(|| cut_decimal(s).or_else(|| Decimal128::from_str(s).ok()))
        .flatten()
        .ok_or_else(|| parse_failure(s, "Failed to parse string to decimal"))
}

/// A decimal string of more than 34 significant digits cut to its first 34, as mongod
/// reads one (`None` for one of 34 or fewer).
fn cut_decimal(s: &str) -> Option<Decimal128> {
    const DIGITS_MAX: usize = 34;
    let (sign, body) = match s.strip_prefix(['-', '+']) {
        Some(rest) => (&s[..1], rest),
        None => ("", s),
    };
    let (mantissa, exponent) = match body.split_once(['e', 'E']) {
        Some((mantissa, exponent)) => (mantissa, exponent.parse::<i64>().ok()?),
        None => (body, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = format!("{whole}{fraction}");
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let digits = digits.trim_start_matches('0');
    if digits.len() <= DIGITS_MAX {
        return None;
    }
    let (kept, dropped) = digits.split_at(DIGITS_MAX);
    let exponent = exponent - fraction.len() as i64 + dropped.len() as i64;
    Decimal128::from_str(&format!("{sign}{kept}E{exponent}")).ok()
}

#[cfg(test)]
mod tests {
    use crate::expression::test_util::*;
    use bson::oid::ObjectId;
    use bson::{bson, Bson, DateTime, Decimal128};
    use std::str::FromStr;

    fn dec(s: &str) -> Bson {
        Bson::Decimal128(Decimal128::from_str(s).unwrap())
    }

    #[test]
    fn type_and_is_number() {
        assert_eq!(value(bson!({"$type": "$i"})), bson!("int"));
        assert_eq!(value(bson!({"$type": "$nope"})), bson!("missing"));
        assert_eq!(value(bson!({"$type": [["$arr"]]})), bson!("array"));
        assert_eq!(value(bson!({"$type": "$o"})), bson!("object"));
        assert_eq!(value(bson!({"$isNumber": "$d"})), bson!(true));
        assert_eq!(value(bson!({"$isNumber": "$s"})), bson!(false));
        assert_eq!(value(bson!({"$isNumber": "$nope"})), bson!(false));
    }

    #[test]
    fn strings_read_as_strtod_reads_them() {
        assert_eq!(value(bson!({"$toDouble": "+0x1.8p1"})), bson!(3.0));
        assert_eq!(value(bson!({"$toDouble": "-0X1P-1"})), bson!(-0.5));
        assert_eq!(value(bson!({"$toDouble": "0xff"})), bson!(255.0));
        assert_eq!(value(bson!({"$toDouble": "2.5e3"})), bson!(2500.0));
        assert_eq!(
            value(bson!({"$toDouble": "-inf"})),
            bson!(f64::NEG_INFINITY)
        );
        for out_of_range in ["1e309", "1e-400", "0x", "0x1.g"] {
            assert_eq!(error_code(bson!({"$toDouble": out_of_range})), 241);
        }
        assert_eq!(value(bson!({"$toDouble": "0e-400"})), bson!(0.0));
    }

    #[test]
    fn decimals_convert_exactly() {
        // The ends of the longs, which doubles cannot hold.
        assert_eq!(
            value(bson!({"$toLong": dec("9223372036854775807.999")})),
            Bson::Int64(i64::MAX)
        );
        assert_eq!(
            value(bson!({"$toLong": dec("-9223372036854775808")})),
            Bson::Int64(i64::MIN)
        );
        assert_eq!(
            error_code(bson!({"$toLong": dec("9223372036854775808")})),
            241
        );
        assert_eq!(value(bson!({"$toInt": dec("1.5E+1")})), bson!(15));
        assert_eq!(value(bson!({"$toInt": dec("-0.9")})), bson!(0));
        // Not zero, though no double tells it from zero.
        assert_eq!(value(bson!({"$toBool": dec("1E-6176")})), bson!(true));
        assert_eq!(value(bson!({"$toBool": dec("-0E+3")})), bson!(false));
        assert_eq!(
            value(bson!({"$toDecimal": "12345678901234567890123456789012345"})),
            dec("1.234567890123456789012345678901234E+34")
        );
        assert_eq!(
            value(bson!({"$toDecimal": "1.00000000000000000000000000000000099999"})),
            dec("1.000000000000000000000000000000000")
        );
        assert_eq!(
            value(bson!({"$toDecimal": "-99999999999999999999999999999999999"})),
            dec("-9.999999999999999999999999999999999E+34")
        );
        assert_eq!(error_code(bson!({"$toDecimal": "+"})), 241);
        // A decimal passes through as it is.
        assert_eq!(value(bson!({"$toDecimal": dec("-0")})), dec("-0"));
        assert_eq!(value(bson!({"$toDecimal": dec("1E-6176")})), dec("1E-6176"));
    }

    #[test]
    fn to_numbers() {
        assert_eq!(value(bson!({"$toInt": "12"})), bson!(12));
        assert_eq!(value(bson!({"$toInt": 2.9})), bson!(2));
        assert_eq!(value(bson!({"$toInt": -2.9})), bson!(-2));
        assert_eq!(value(bson!({"$toInt": true})), bson!(1));
        assert_eq!(value(bson!({"$toInt": "$nope"})), Bson::Null);
        assert_eq!(error_code(bson!({"$toInt": "1.5"})), 241);
        assert_eq!(error_code(bson!({"$toInt": 1e10})), 241);
        assert_eq!(error_code(bson!({"$toInt": f64::NAN})), 241);
        assert_eq!(
            error_message(bson!({"$toInt": "abc"})),
            "Failed to parse number 'abc' in $convert with no onError value: Bad digit \"a\" while parsing abc"
        );
        assert_eq!(
            value(bson!({"$toLong": "9000000000"})),
            bson!(9000000000_i64)
        );
        let date = DateTime::from_millis(1234);
        assert_eq!(value(bson!({"$toLong": date})), bson!(1234_i64));
        assert_eq!(
            error_message(bson!({"$toInt": date})),
            "Unsupported conversion from date to int in $convert with no onError value"
        );
        assert_eq!(value(bson!({"$toDouble": "1.5"})), bson!(1.5));
        assert_eq!(value(bson!({"$toDouble": 3_i64})), bson!(3.0));
        assert_eq!(value(bson!({"$toDouble": dec("2.5")})), bson!(2.5));
        assert_eq!(error_code(bson!({"$toDouble": "1.5x"})), 241);
        assert_eq!(value(bson!({"$toDecimal": 5})), dec("5"));
        assert_eq!(value(bson!({"$toDecimal": 2.5})), dec("2.50000000000000"));
        assert_eq!(value(bson!({"$toDecimal": "1.10"})), dec("1.10"));
    }

    #[test]
    fn to_string_bool_date_object_id() {
        assert_eq!(value(bson!({"$toString": 5})), bson!("5"));
        assert_eq!(value(bson!({"$toString": 2.5})), bson!("2.5"));
        assert_eq!(value(bson!({"$toString": 3.0})), bson!("3"));
        assert_eq!(value(bson!({"$toString": true})), bson!("true"));
        let date = DateTime::from_millis(1_522_169_931_538);
        assert_eq!(
            value(bson!({"$toString": date})),
            bson!("2018-03-27T16:58:51.538Z")
        );
        assert_eq!(error_code(bson!({"$toString": [[1]]})), 241);
        assert_eq!(error_code(bson!({"$toString": []})), 50723);
        assert_eq!(error_code(bson!({"$toInt": [1, 2]})), 50723);
        assert_eq!(value(bson!({"$toBool": 0})), bson!(false));
        assert_eq!(value(bson!({"$toBool": ""})), bson!(true));
        assert_eq!(value(bson!({"$toBool": dec("0")})), bson!(false));
        assert_eq!(
            value(bson!({"$toDate": 1_522_169_931_538_i64})),
            Bson::DateTime(date)
        );
        assert_eq!(
            value(bson!({"$toDate": "2018-03-27T16:58:51.538Z"})),
            Bson::DateTime(date)
        );
        assert_eq!(error_code(bson!({"$toDate": 5})), 241);
        let oid = ObjectId::parse_str("5ab9cbfa31c2ab715d42129e").unwrap();
        assert_eq!(
            value(bson!({"$toObjectId": "5ab9cbfa31c2ab715d42129e"})),
            Bson::ObjectId(oid)
        );
        assert_eq!(
            value(bson!({"$toDate": oid})),
            Bson::DateTime(DateTime::from_millis(1_522_125_818_000))
        );
        assert_eq!(error_code(bson!({"$toObjectId": "abc"})), 241);
    }

    #[test]
    fn convert_options() {
        assert_eq!(
            value(bson!({"$convert": {"input": "x", "to": "int", "onError": -1}})),
            bson!(-1)
        );
        assert_eq!(
            value(bson!({"$convert": {"input": "$nope", "to": "int", "onNull": 0}})),
            bson!(0)
        );
        // A null `to`: null, or `onNull` when the input is null too.
        assert_eq!(
            value(bson!({"$convert": {"input": 1, "to": null, "onNull": 0}})),
            Bson::Null
        );
        assert_eq!(
            value(bson!({"$convert": {"input": null, "to": "$nope", "onNull": 0}})),
            bson!(0)
        );
        assert_eq!(
            value(bson!({"$convert": {"input": "7", "to": 16}})),
            bson!(7)
        );
        assert_eq!(
            value(bson!({"$convert": {"input": "7", "to": {"$concat": ["in", "t"]}}})),
            bson!(7)
        );
        assert_eq!(
            value(bson!({"$convert": {"input": "7", "to": null}})),
            Bson::Null
        );
        assert_eq!(
            error_code(bson!({"$convert": {"input": 1, "to": "foo"}})),
            2
        );
        assert_eq!(error_code(bson!({"$convert": {"input": 1, "to": 100}})), 9);
        assert_eq!(error_code(bson!({"$convert": {"input": 1}})), 9);
        assert_eq!(error_code(bson!({"$convert": {"to": "int"}})), 9);
        assert_eq!(
            error_code(bson!({"$convert": {"input": 1, "to": "int", "x": 1}})),
            9
        );
        assert_eq!(
            error_code(bson!({"$convert": {"input": 1, "to": "array"}})),
            241
        );
    }
}
