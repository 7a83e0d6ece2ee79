//! Arithmetic expression operators: `$add $subtract $multiply $divide $mod $abs $ceil
//! $floor $round $trunc $sqrt $pow $exp $ln $log $log10`.
//!
//! Results keep the widest operand type (int32 → int64 → double → decimal) and int32
//! results that overflow widen, as MongoDB does, through `basalt_value::number`. Null or
//! missing operands make the result null.

use crate::context::ParseContext;
use crate::env::{Env, Value};
use crate::expression::{
    is_nullish, parse_fixed, parse_operands, parse_ranged, type_name, Expression,
};
use crate::numeric::{
    combine, decimal_from_f64, display, is_zero, number, split_decimal, to_decimal,
};
use basalt_error::{Error, ErrorCode, Result};
use basalt_value::decimal_math;
use basalt_value::number::ArithmeticOp;
use basalt_value::Number;
use bson::{Bson, DateTime};
use std::borrow::Cow;

#[derive(Debug)]
pub(crate) enum Arithmetic {
    Add(Vec<Expression>),
    Multiply(Vec<Expression>),
    Subtract(Box<[Expression; 2]>),
    Divide(Box<[Expression; 2]>),
    Mod(Box<[Expression; 2]>),
    Pow(Box<[Expression; 2]>),
    Log(Box<[Expression; 2]>),
    Unary(Unary, Box<[Expression; 1]>),
    Round(Rounding, Vec<Expression>),
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Unary {
    Abs,
    Ceil,
    Floor,
    Sqrt,
    Exp,
    Ln,
    Log10,
    /// `$sigmoid` (MongoDB 8.2): 1 / (1 + e^-x).
    Sigmoid,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Rounding {
    /// `$round`: to nearest, ties to even.
    Round,
    /// `$trunc`: towards zero.
    Trunc,
}

impl Unary {
    fn name(self) -> &'static str {
        match self {
            Unary::Abs => "$abs",
            Unary::Ceil => "$ceil",
            Unary::Floor => "$floor",
            Unary::Sqrt => "$sqrt",
            Unary::Exp => "$exp",
            Unary::Ln => "$ln",
            Unary::Log10 => "$log10",
            Unary::Sigmoid => "$sigmoid",
        }
    }
}

impl Arithmetic {
    pub(crate) fn parse(name: &str, args: &Bson, ctx: &ParseContext) -> Result<Option<Arithmetic>> {
        let unary = |u: Unary| -> Result<Option<Arithmetic>> {
            Ok(Some(Arithmetic::Unary(u, parse_fixed(name, args, ctx)?)))
        };
        Ok(Some(match name {
            "$add" => Arithmetic::Add(parse_operands(args, ctx)?),
            "$multiply" => Arithmetic::Multiply(parse_operands(args, ctx)?),
            "$subtract" => Arithmetic::Subtract(parse_fixed(name, args, ctx)?),
            "$divide" => Arithmetic::Divide(parse_fixed(name, args, ctx)?),
            "$mod" => Arithmetic::Mod(parse_fixed(name, args, ctx)?),
            "$pow" => Arithmetic::Pow(parse_fixed(name, args, ctx)?),
            "$log" => Arithmetic::Log(parse_fixed(name, args, ctx)?),
            "$abs" => return unary(Unary::Abs),
            "$ceil" => return unary(Unary::Ceil),
            "$floor" => return unary(Unary::Floor),
            "$sqrt" => return unary(Unary::Sqrt),
            "$exp" => return unary(Unary::Exp),
            "$ln" => return unary(Unary::Ln),
            "$log10" => return unary(Unary::Log10),
            // Its argument is one expression: `[1]` is an array, not a list of arguments.
            "$sigmoid" => {
                Arithmetic::Unary(Unary::Sigmoid, Box::new([Expression::parse(args, ctx)?]))
            }
            "$round" => Arithmetic::Round(Rounding::Round, parse_ranged(name, args, ctx, 1, 2)?),
            "$trunc" => Arithmetic::Round(Rounding::Trunc, parse_ranged(name, args, ctx, 1, 2)?),
            _ => return Ok(None),
        }))
    }

    pub(crate) fn eval<'a>(&'a self, env: &Env<'a>) -> Result<Value<'a>> {
        let result = match self {
            Arithmetic::Add(args) => add(args, env)?,
            Arithmetic::Multiply(args) => multiply(args, env)?,
            Arithmetic::Subtract(args) => {
                let (a, b) = (args[0].eval(env)?, args[1].eval(env)?);
                subtract(a.as_deref(), b.as_deref())?
            }
            Arithmetic::Divide(args) => {
                let (a, b) = (args[0].eval(env)?, args[1].eval(env)?);
                divide(a.as_deref(), b.as_deref())?
            }
            Arithmetic::Mod(args) => {
                let (a, b) = (args[0].eval(env)?, args[1].eval(env)?);
                modulo(a.as_deref(), b.as_deref())?
            }
            Arithmetic::Pow(args) => {
                let (a, b) = (args[0].eval(env)?, args[1].eval(env)?);
                pow(a.as_deref(), b.as_deref())?
            }
            Arithmetic::Log(args) => {
                let (a, b) = (args[0].eval(env)?, args[1].eval(env)?);
                log(a.as_deref(), b.as_deref())?
            }
            Arithmetic::Unary(op, arg) => {
                let v = arg[0].eval(env)?;
                unary(*op, v.as_deref())?
            }
            Arithmetic::Round(mode, args) => {
                let v = args[0].eval(env)?;
                let place = match args.get(1) {
                    Some(p) => p.eval(env)?,
                    None => Some(Cow::Owned(Bson::Int32(0))),
                };
                round(*mode, v.as_deref(), place.as_deref())?
            }
        };
        Ok(Some(Cow::Owned(result)))
    }
}

fn add(args: &[Expression], env: &Env<'_>) -> Result<Bson> {
    let mut total = Number::Int32(0);
    let mut date: Option<DateTime> = None;
    for arg in args {
        let v = arg.eval(env)?;
        match v.as_deref() {
            v if is_nullish(v) => return Ok(Bson::Null),
            Some(Bson::DateTime(d)) => {
                if date.is_some() {
                    return Err(Error::location(
                        16612,
                        "only one date allowed in an $add expression",
                    ));
                }
                date = Some(*d);
            }
            other => match number(other) {
                Some(n) => total = combine(ArithmeticOp::Add, total, n),
                None => {
                    return Err(Error::location(
                        14,
                        format!(
                            "$add only supports numeric or date types, not {}",
                            type_name(other)
                        ),
                    ))
                }
            },
        }
    }
    Ok(match date {
        Some(d) => Bson::DateTime(offset_date(d, total, 1)?),
        None => total.to_bson(),
    })
}

/// `date + sign * n` milliseconds; fractional milliseconds round to nearest.
fn offset_date(date: DateTime, n: Number, sign: i64) -> Result<DateTime> {
    let ms = match n {
        Number::Int32(i) => Some(i64::from(i)),
        Number::Int64(i) => Some(i),
        other => {
            let d = other.to_f64().round();
            (d.is_finite() && d.abs() < 9.2e18).then_some(d as i64)
        }
    };
    ms.and_then(|ms| ms.checked_mul(sign))
        .and_then(|ms| date.timestamp_millis().checked_add(ms))
        .map(DateTime::from_millis)
        .ok_or_else(|| Error::new(ErrorCode::OVERFLOW, "date overflow in $add"))
}

fn multiply(args: &[Expression], env: &Env<'_>) -> Result<Bson> {
    let mut product = Number::Int32(1);
    for arg in args {
        let v = arg.eval(env)?;
        match v.as_deref() {
            v if is_nullish(v) => return Ok(Bson::Null),
            other => match number(other) {
                Some(n) => product = combine(ArithmeticOp::Multiply, product, n),
                None => {
                    return Err(Error::location(
                        14,
                        format!(
                            "$multiply only supports numeric types, not {}",
                            type_name(other)
                        ),
                    ))
                }
            },
        }
    }
    Ok(product.to_bson())
}

fn subtract(a: Option<&Bson>, b: Option<&Bson>) -> Result<Bson> {
    if is_nullish(a) || is_nullish(b) {
        return Ok(Bson::Null);
    }
    match (a, b) {
        (Some(Bson::DateTime(x)), Some(Bson::DateTime(y))) => Ok(Bson::Int64(
            x.timestamp_millis().wrapping_sub(y.timestamp_millis()),
        )),
        (Some(Bson::DateTime(x)), other) if number(other).is_some() => {
            let n = number(other).unwrap_or(Number::Int32(0));
            Ok(Bson::DateTime(offset_date(*x, n, -1)?))
        }
        _ => match (number(a), number(b)) {
            (Some(x), Some(y)) => Ok(combine(ArithmeticOp::Subtract, x, y).to_bson()),
            _ => Err(Error::location(
                14,
                format!("can't $subtract {} from {}", type_name(b), type_name(a)),
            )),
        },
    }
}

fn divide(a: Option<&Bson>, b: Option<&Bson>) -> Result<Bson> {
    if is_nullish(a) || is_nullish(b) {
        return Ok(Bson::Null);
    }
    let (Some(x), Some(y)) = (number(a), number(b)) else {
        // MongoDB 8.0's code (7.0 gave 16609).
        return Err(Error::type_mismatch(format!(
            "$divide only supports numeric types, not {} and {}",
            type_name(a),
            type_name(b)
        )));
    };
    if is_zero(y) {
        // MongoDB 8.0's code (7.0 gave 16608).
        return Err(Error::bad_value(DIVIDE_BY_ZERO));
    }
    Ok(if is_decimal(x) || is_decimal(y) {
        // Decimal arithmetic, exact to 34 digits (not through a double).
        Bson::Decimal128(
            basalt_value::number::decimal_divide(x, y)
                .ok_or_else(|| Error::bad_value(DIVIDE_BY_ZERO))?,
        )
    } else {
        Bson::Double(x.to_f64() / y.to_f64())
    })
}

/// `$divide`'s error when the divisor is zero.
pub const DIVIDE_BY_ZERO: &str = "can't $divide by zero";

fn is_decimal(n: Number) -> bool {
    matches!(n, Number::Decimal(_))
}

fn modulo(a: Option<&Bson>, b: Option<&Bson>) -> Result<Bson> {
    if is_nullish(a) || is_nullish(b) {
        return Ok(Bson::Null);
    }
    let (Some(x), Some(y)) = (number(a), number(b)) else {
        return Err(Error::location(
            16611,
            format!(
                "$mod only supports numeric types, not {} and {}",
                type_name(a),
                type_name(b)
            ),
        ));
    };
    if is_zero(y) {
        // Decimals have a code of their own.
        let code = if is_decimal(x) || is_decimal(y) {
            5733415
        } else {
            16610
        };
        return Err(Error::location(code, "can't $mod by zero"));
    }
    Ok(match (x, y) {
        (Number::Int32(p), Number::Int32(q)) => Bson::Int32(p.wrapping_rem(q)),
        (Number::Int32(_) | Number::Int64(_), Number::Int32(_) | Number::Int64(_)) => {
            let (p, q) = (x.to_i64_exact().unwrap_or(0), y.to_i64_exact().unwrap_or(1));
            Bson::Int64(p.wrapping_rem(q))
        }
        _ if is_decimal(x) || is_decimal(y) => {
            Bson::Decimal128(decimal_math::rem(to_decimal(x), to_decimal(y)))
        }
        _ => Bson::Double(x.to_f64() % y.to_f64()),
    })
}

fn unary(op: Unary, v: Option<&Bson>) -> Result<Bson> {
    if is_nullish(v) {
        return Ok(Bson::Null);
    }
    let Some(n) = number(v) else {
        if op == Unary::Sigmoid {
            return Err(Error::type_mismatch(format!(
                "$sigmoid only supports numeric types, not {}",
                type_name(v)
            )));
        }
        return Err(Error::location(
            28765,
            format!(
                "{} only supports numeric types, not {}",
                op.name(),
                type_name(v)
            ),
        ));
    };
    match op {
        Unary::Abs => match n {
            Number::Int32(i) => Ok(i
                .checked_abs()
                .map_or(Bson::Int64(-i64::from(i)), Bson::Int32)),
            Number::Int64(i) => i
                .checked_abs()
                .map(Bson::Int64)
                .ok_or_else(|| Error::location(28680, "can't take $abs of long long min")),
            Number::Double(d) => Ok(Bson::Double(d.abs())),
            Number::Decimal(d) => {
                let text = d.to_string();
                Ok(text
                    .strip_prefix('-')
                    .and_then(|t| t.parse().ok())
                    .map_or(Bson::Decimal128(d), Bson::Decimal128))
            }
        },
        Unary::Ceil | Unary::Floor => Ok(match n {
            Number::Int32(_) | Number::Int64(_) => n.to_bson(),
            _ => {
                let round = |x: f64| {
                    if op == Unary::Ceil {
                        x.ceil()
                    } else {
                        x.floor()
                    }
                };
                // Decimals are rounded through a double.
                let result = float_result(n, round, |d| {
                    decimal_from_f64(round(Number::Decimal(d).to_f64()))
                });
                // A decimal that is infinite, or too large to round, gives NaN.
                match result {
                    Bson::Decimal128(d) if d.to_string().contains("Inf") => {
                        Bson::Decimal128(decimal_from_f64(f64::NAN))
                    }
                    other => other,
                }
            }
        }),
        Unary::Sqrt => {
            if n.to_f64() < 0.0 {
                return Err(Error::location(
                    28714,
                    "$sqrt's argument must be greater than or equal to 0",
                ));
            }
            Ok(float_result(n, f64::sqrt, decimal_math::sqrt))
        }
        Unary::Exp => Ok(float_result(n, f64::exp, decimal_math::exp)),
        Unary::Sigmoid => Ok(float_result(
            n,
            |x| 1.0 / (1.0 + (-x).exp()),
            decimal_math::sigmoid,
        )),
        Unary::Ln | Unary::Log10 => {
            if n.to_f64() <= 0.0 {
                let code = if op == Unary::Ln { 28766 } else { 28761 };
                return Err(Error::location(
                    code,
                    format!(
                        "{}'s argument must be a positive number, but {}",
                        op.name(),
                        display(&n.to_bson())
                    ),
                ));
            }
            Ok(if op == Unary::Ln {
                float_result(n, f64::ln, decimal_math::ln)
            } else {
                float_result(n, f64::log10, decimal_math::log10)
            })
        }
    }
}

/// Applies `float` in double precision, or `decimal` in decimal128 (34 digits) to a
/// decimal.
fn float_result(
    n: Number,
    float: impl Fn(f64) -> f64,
    decimal: impl Fn(bson::Decimal128) -> bson::Decimal128,
) -> Bson {
    match n {
        Number::Decimal(d) => Bson::Decimal128(decimal(d)),
        _ => Bson::Double(float(n.to_f64())),
    }
}

fn pow(a: Option<&Bson>, b: Option<&Bson>) -> Result<Bson> {
    if is_nullish(a) || is_nullish(b) {
        return Ok(Bson::Null);
    }
    let base = number(a).ok_or_else(|| {
        Error::location(
            28762,
            format!("$pow's base must be numeric, not {}", type_name(a)),
        )
    })?;
    let exponent = number(b).ok_or_else(|| {
        Error::location(
            28763,
            format!("$pow's exponent must be numeric, not {}", type_name(b)),
        )
    })?;
    if is_zero(base) && exponent.to_f64() < 0.0 {
        return Err(Error::location(
            28764,
            "$pow cannot take a base of 0 and a negative exponent",
        ));
    }
    let float = || base.to_f64().powf(exponent.to_f64());
    if is_decimal(base) || is_decimal(exponent) {
        return Ok(Bson::Decimal128(decimal_math::pow(
            to_decimal(base),
            to_decimal(exponent),
        )));
    }
    let (Some(x), Some(e)) = (integer(base), integer(exponent)) else {
        return Ok(Bson::Double(float()));
    };
    let both_int32 = matches!((base, exponent), (Number::Int32(_), Number::Int32(_)));
    let exact = if e >= 0 {
        u32::try_from(e).ok().and_then(|e| x.checked_pow(e))
    } else {
        // Only ±1 have integral negative powers.
        match x {
            1 => Some(1),
            -1 => Some(if e % 2 == 0 { 1 } else { -1 }),
            _ => return Ok(Bson::Double(float())),
        }
    };
    Ok(match exact {
        Some(r) if both_int32 => i32::try_from(r).map_or(Bson::Int64(r), Bson::Int32),
        Some(r) => Bson::Int64(r),
        None => Bson::Double(float()),
    })
}

fn integer(n: Number) -> Option<i64> {
    match n {
        Number::Int32(i) => Some(i64::from(i)),
        Number::Int64(i) => Some(i),
        _ => None,
    }
}

fn log(a: Option<&Bson>, b: Option<&Bson>) -> Result<Bson> {
    if is_nullish(a) || is_nullish(b) {
        return Ok(Bson::Null);
    }
    let x = number(a).ok_or_else(|| {
        Error::location(
            28756,
            format!("$log's argument must be numeric, not {}", type_name(a)),
        )
    })?;
    let base = number(b).ok_or_else(|| {
        Error::location(
            28757,
            format!("$log's base must be numeric, not {}", type_name(b)),
        )
    })?;
    if x.to_f64() <= 0.0 || x.to_f64().is_nan() {
        return Err(Error::location(
            28758,
            format!(
                "$log's argument must be a positive number, but {}",
                display(&x.to_bson())
            ),
        ));
    }
    let bf = base.to_f64();
    if bf <= 0.0 || bf == 1.0 || bf.is_nan() {
        return Err(Error::location(
            28759,
            format!(
                "$log's base must be a positive number not equal to 1, but {}",
                display(&base.to_bson())
            ),
        ));
    }
    Ok(if is_decimal(x) || is_decimal(base) {
        Bson::Decimal128(decimal_math::log(to_decimal(x), to_decimal(base)))
    } else {
        Bson::Double(x.to_f64().ln() / bf.ln())
    })
}

fn round(mode: Rounding, v: Option<&Bson>, place: Option<&Bson>) -> Result<Bson> {
    let name = match mode {
        Rounding::Round => "$round",
        Rounding::Trunc => "$trunc",
    };
    if is_nullish(v) || is_nullish(place) {
        return Ok(Bson::Null);
    }
    // The place: a number (16004), a finite double (31109), integral (51082: a decimal
    // NaN or infinity too).
    let Some(place_number) = number(place) else {
        return Err(Error::location(
            16004,
            format!(
                "invalid argument to {name}: precision must be a number, not {}",
                type_name(place)
            ),
        ));
    };
    if matches!(place_number, Number::Double(d) if !d.is_finite()) {
        return Err(Error::location(
            31109,
            format!("Can't coerce out of range value to int in {name}'s precision"),
        ));
    }
    let place = match place_number.to_i64_exact() {
        Some(p) => p,
        None => {
            return Err(Error::location(
                51082,
                format!("precision argument to {name} must be a integral value"),
            ))
        }
    };
    if !(-20..=100).contains(&place) {
        return Err(Error::location(
            51083,
            format!("cannot apply {name} with precision value {place} value must be in [-20, 100]"),
        ));
    }
    let Some(n) = number(v) else {
        return Err(Error::location(
            51081,
            format!("{name} only supports numeric types, not {}", type_name(v)),
        ));
    };
    let place = place as i32;
    Ok(match n {
        Number::Int32(_) | Number::Int64(_) => {
            let i = integer(n).unwrap_or(0);
            if place >= 0 {
                return Ok(n.to_bson());
            }
            let rounded = round_integer(i128::from(i), -place, mode);
            match (n, i32::try_from(rounded), i64::try_from(rounded)) {
                (Number::Int32(_), Ok(r), _) => Bson::Int32(r),
                (_, _, Ok(r)) => Bson::Int64(r),
                _ => Bson::Double(rounded as f64),
            }
        }
        Number::Double(d) => {
            if !d.is_finite() || (place >= 0 && d.fract() == 0.0) {
                return Ok(Bson::Double(d));
            }
            // $round rounds the 15-digit decimal form, as MongoDB does, so 2.675 rounds to
            // 2.68 rather than to the binary neighbour's 2.67; $trunc cuts the double's
            // own value (34 digits), so 0.29 (0.28999...) truncates to 0.28.
            let text = match mode {
                Rounding::Round => format!("{d:.14e}"),
                Rounding::Trunc => format!("{d:.33e}"),
            };
            let (negative, digits, exponent) = split_decimal(&text);
            Bson::Double(
                round_decimal(negative, digits, exponent, place, mode, false)
                    .parse()
                    .unwrap_or(d),
            )
        }
        Number::Decimal(dec) => {
            let text = dec.to_string();
            if text.contains("NaN") || text.contains("Inf") {
                return Ok(Bson::Decimal128(dec));
            }
            let (negative, digits, exponent) = split_decimal(&text);
            round_decimal(negative, digits, exponent, place, mode, true)
                .parse()
                .map_or(Bson::Decimal128(dec), Bson::Decimal128)
        }
    })
}

/// Rounds `i` to a multiple of `10^power`.
fn round_integer(i: i128, power: i32, mode: Rounding) -> i128 {
    let Some(unit) = 10i128
        .checked_pow(power as u32)
        .filter(|u| *u <= 10i128.pow(30))
    else {
        return 0;
    };
    let quotient = i / unit;
    let remainder = i % unit;
    let bump = match mode {
        Rounding::Trunc => 0,
        Rounding::Round => {
            let twice = remainder.abs() * 2;
            if twice > unit || (twice == unit && quotient % 2 != 0) {
                remainder.signum()
            } else {
                0
            }
        }
    };
    (quotient + bump) * unit
}

/// Rounds `digits × 10^exponent` to `place` decimal places and writes the result as
/// text with that many places; with `pad`, a number with fewer places gets trailing
/// zeros up to them (as many as 34 digits hold), as a decimal's result does.
fn round_decimal(
    negative: bool,
    digits: String,
    exponent: i32,
    place: i32,
    mode: Rounding,
    pad: bool,
) -> String {
    // Keep the digits whose exponent is at least -place.
    let drop = (-place - exponent).max(0) as usize;
    let mut kept: Vec<u8> = digits.bytes().map(|b| b - b'0').collect();
    let dropped: Vec<u8> = if drop >= kept.len() {
        let all = std::mem::take(&mut kept);
        let mut padded = vec![0u8; drop - all.len()];
        padded.extend(all);
        padded
    } else {
        kept.split_off(kept.len() - drop)
    };
    let round_up = match mode {
        Rounding::Trunc => false,
        Rounding::Round => match dropped.first() {
            Some(&first) if first > 5 => true,
            Some(&5) => {
                dropped[1..].iter().any(|d| *d != 0) || kept.last().is_some_and(|d| d % 2 == 1)
            }
            _ => false,
        },
    };
    if round_up {
        let mut i = kept.len();
        loop {
            if i == 0 {
                kept.insert(0, 1);
                break;
            }
            i -= 1;
            if kept[i] == 9 {
                kept[i] = 0;
            } else {
                kept[i] += 1;
                break;
            }
        }
    }
    let mut new_exponent = exponent + drop as i32;
    if pad && place >= 0 && new_exponent > -place {
        const DIGITS_MAX: usize = 34;
        let zeros =
            ((new_exponent + place) as usize).min(DIGITS_MAX.saturating_sub(kept.len().max(1)));
        kept.extend(std::iter::repeat_n(0, zeros));
        new_exponent -= zeros as i32;
    }
    let body: String = if kept.is_empty() {
        "0".to_string()
    } else {
        kept.iter().map(|d| char::from(b'0' + d)).collect()
    };
    format!("{}{body}E{new_exponent}", if negative { "-" } else { "" })
}

#[cfg(test)]
mod tests {
    use crate::expression::test_util::*;
    use bson::{bson, Bson, DateTime, Decimal128};
    use std::str::FromStr;

    fn dec(s: &str) -> Bson {
        Bson::Decimal128(Decimal128::from_str(s).unwrap())
    }

    #[test]
    fn add_promotes_and_handles_dates() {
        assert_eq!(value(bson!({"$add": [1, 2]})), bson!(3));
        assert_eq!(
            value(bson!({"$add": ["$big", 1]})),
            bson!(i64::from(i32::MAX) + 1)
        );
        assert_eq!(
            value(bson!({"$add": [i64::MAX, 1]})),
            bson!(i64::MAX as f64 + 1.0)
        );
        assert_eq!(value(bson!({"$add": ["$i", "$l"]})), bson!(12_i64));
        assert_eq!(value(bson!({"$add": ["$i", "$d"]})), bson!(7.5));
        assert_eq!(value(bson!({"$add": [1, dec("0.5")]})), dec("1.5"));
        assert_eq!(value(bson!({"$add": []})), bson!(0));
        assert_eq!(value(bson!({"$add": [1, "$nope"]})), Bson::Null);
        assert_eq!(value(bson!({"$add": [1, null, "x"]})), Bson::Null);
        let d = DateTime::from_millis(1000);
        assert_eq!(
            value(bson!({"$add": [d, 500, 0.6]})),
            Bson::DateTime(DateTime::from_millis(1501))
        );
        assert_eq!(error_code(bson!({"$add": [d, d]})), 16612);
        assert_eq!(error_code(bson!({"$add": [1, "x"]})), 14);
        assert_eq!(
            error_message(bson!({"$add": [1, "x"]})),
            "$add only supports numeric or date types, not string"
        );
    }

    #[test]
    fn subtract_multiply() {
        assert_eq!(value(bson!({"$subtract": [5, 7]})), bson!(-2));
        assert_eq!(
            value(bson!({"$subtract": [i32::MIN, 1]})),
            bson!(i64::from(i32::MIN) - 1)
        );
        let (a, b) = (DateTime::from_millis(5000), DateTime::from_millis(2000));
        assert_eq!(value(bson!({"$subtract": [a, b]})), bson!(3000_i64));
        assert_eq!(
            value(bson!({"$subtract": [a, 1000]})),
            Bson::DateTime(DateTime::from_millis(4000))
        );
        assert_eq!(value(bson!({"$subtract": [null, 1]})), Bson::Null);
        assert_eq!(
            error_message(bson!({"$subtract": [1, a]})),
            "can't $subtract date from int"
        );
        assert_eq!(error_code(bson!({"$subtract": [1]})), 16020);
        assert_eq!(
            value(bson!({"$multiply": [65536, 65536]})),
            bson!(4294967296_i64)
        );
        assert_eq!(value(bson!({"$multiply": [2, 1.5]})), bson!(3.0));
        assert_eq!(error_code(bson!({"$multiply": [2, true]})), 14);
    }

    #[test]
    fn divide_and_mod() {
        assert_eq!(value(bson!({"$divide": [7, 2]})), bson!(3.5));
        assert_eq!(value(bson!({"$divide": [dec("1"), 4]})), dec("0.25"));
        assert_eq!(error_code(bson!({"$divide": [1, 0]})), 2);
        assert_eq!(error_code(bson!({"$divide": [1, "a"]})), 14);
        assert_eq!(value(bson!({"$mod": [7, 3]})), bson!(1));
        assert_eq!(value(bson!({"$mod": [-7, 3_i64]})), bson!(-1_i64));
        assert_eq!(value(bson!({"$mod": [7.5, 2]})), bson!(1.5));
        assert_eq!(error_code(bson!({"$mod": [1, 0]})), 16610);
        assert_eq!(error_code(bson!({"$mod": [dec("1"), dec("0")]})), 5733415);
        assert_eq!(error_code(bson!({"$mod": ["a", 1]})), 16611);
    }

    #[test]
    fn unary_functions() {
        assert_eq!(value(bson!({"$abs": -3})), bson!(3));
        assert_eq!(value(bson!({"$abs": i32::MIN})), bson!(2147483648_i64));
        assert_eq!(error_code(bson!({"$abs": i64::MIN})), 28680);
        assert_eq!(value(bson!({"$abs": dec("-1.5")})), dec("1.5"));
        assert_eq!(value(bson!({"$abs": [null]})), Bson::Null);
        assert_eq!(
            error_message(bson!({"$abs": "x"})),
            "$abs only supports numeric types, not string"
        );
        assert_eq!(value(bson!({"$ceil": 1.2})), bson!(2.0));
        assert_eq!(value(bson!({"$floor": -1.2})), bson!(-2.0));
        assert_eq!(value(bson!({"$floor": 5})), bson!(5));
        assert_eq!(value(bson!({"$sqrt": 16})), bson!(4.0));
        assert_eq!(error_code(bson!({"$sqrt": -1})), 28714);
        assert_eq!(value(bson!({"$exp": 0})), bson!(1.0));
        assert_eq!(value(bson!({"$sigmoid": 0})), bson!(0.5));
        assert_eq!(error_code(bson!({"$sigmoid": [1]})), 14);
        assert_eq!(value(bson!({"$sigmoid": null})), Bson::Null);
        assert_eq!(value(bson!({"$ln": 1})), bson!(0.0));
        assert_eq!(
            error_message(bson!({"$ln": -1})),
            "$ln's argument must be a positive number, but -1"
        );
        assert_eq!(value(bson!({"$log10": 1000})), bson!(3.0));
        assert_eq!(error_code(bson!({"$log10": 0})), 28761);
        assert_eq!(value(bson!({"$log": [8, 2]})), bson!(3.0));
        assert_eq!(error_code(bson!({"$log": [8, 1]})), 28759);
        assert_eq!(error_code(bson!({"$log": [0, 2]})), 28758);
        assert_eq!(error_code(bson!({"$log": ["a", 2]})), 28756);
    }

    #[test]
    fn pow_keeps_integers_when_exact() {
        assert_eq!(value(bson!({"$pow": [2, 10]})), bson!(1024));
        assert_eq!(value(bson!({"$pow": [2, 40]})), bson!(1099511627776_i64));
        assert_eq!(value(bson!({"$pow": [2, -1]})), bson!(0.5));
        assert_eq!(value(bson!({"$pow": [-1, -3]})), bson!(-1));
        assert_eq!(value(bson!({"$pow": [2.0, 2]})), bson!(4.0));
        assert_eq!(error_code(bson!({"$pow": [0, -1]})), 28764);
        assert_eq!(error_code(bson!({"$pow": ["a", 1]})), 28762);
        assert_eq!(error_code(bson!({"$pow": [1, "a"]})), 28763);
    }

    #[test]
    fn round_and_trunc() {
        assert_eq!(value(bson!({"$round": [2.5]})), bson!(2.0));
        assert_eq!(value(bson!({"$round": [3.5, 0]})), bson!(4.0));
        assert_eq!(value(bson!({"$round": [2.675, 2]})), bson!(2.68));
        assert_eq!(value(bson!({"$round": [-2.5]})), bson!(-2.0));
        assert_eq!(value(bson!({"$round": [1234, -2]})), bson!(1200));
        assert_eq!(value(bson!({"$round": [1250, -2]})), bson!(1200));
        assert_eq!(value(bson!({"$round": [1350_i64, -2]})), bson!(1400_i64));
        assert_eq!(value(bson!({"$round": [19.99, -1]})), bson!(20.0));
        assert_eq!(value(bson!({"$trunc": [7.89, 1]})), bson!(7.8));
        assert_eq!(value(bson!({"$trunc": [-7.89]})), bson!(-7.0));
        // $trunc cuts the double's own value; integral doubles stay as they are.
        assert_eq!(value(bson!({"$trunc": [0.29, 2]})), bson!(0.28));
        assert_eq!(
            value(bson!({"$round": [9007199254740992.0, 0]})),
            bson!(9007199254740992.0)
        );
        // A decimal gets the places asked for.
        assert_eq!(value(bson!({"$trunc": [dec("1.1"), 2]})), dec("1.10"));
        assert_eq!(
            value(bson!({"$trunc": [dec("1.1"), 40]})),
            dec("1.100000000000000000000000000000000")
        );
        assert_eq!(value(bson!({"$round": [dec("1.25"), 1]})), dec("1.2"));
        assert_eq!(value(bson!({"$round": [null, 1]})), Bson::Null);
        assert_eq!(error_code(bson!({"$round": [1, 101]})), 51083);
        assert_eq!(error_code(bson!({"$round": [1, 1.5]})), 51082);
        assert_eq!(error_code(bson!({"$round": [1, "2"]})), 16004);
        assert_eq!(error_code(bson!({"$trunc": [1, f64::NAN]})), 31109);
        assert_eq!(error_code(bson!({"$trunc": [1, dec("NaN")]})), 51082);
        assert_eq!(error_code(bson!({"$round": ["a", 1]})), 51081);
        assert_eq!(error_code(bson!({"$round": [1, 2, 3]})), 28667);
    }
}
