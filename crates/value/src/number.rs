//! Numbers across BSON's four numeric types: viewing a value as a number, comparing
//! numbers of different types exactly, and arithmetic with MongoDB's type promotion.
//!
//! The result of arithmetic takes the widest operand type (int32 < int64 < double <
//! decimal). An int32 result that overflows widens to int64; an int64 result that
//! overflows either fails (update operators such as `$inc`, which MongoDB rejects) or
//! becomes a double (aggregation's `$add`), as the caller chooses with [`Int64Overflow`].

use crate::decimal::Dec;
use bson::{Bson, Decimal128};
use std::cmp::Ordering;

/// A BSON value of numeric type.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Number {
    Int32(i32),
    Int64(i64),
    Double(f64),
    Decimal(Decimal128),
}

impl Number {
    /// The number a value holds, or `None` if it is not of a numeric type.
    pub fn from_bson(v: &Bson) -> Option<Number> {
        match v {
            Bson::Int32(i) => Some(Number::Int32(*i)),
            Bson::Int64(i) => Some(Number::Int64(*i)),
            Bson::Double(d) => Some(Number::Double(*d)),
            Bson::Decimal128(d) => Some(Number::Decimal(*d)),
            _ => None,
        }
    }

    pub fn to_bson(self) -> Bson {
        match self {
            Number::Int32(i) => Bson::Int32(i),
            Number::Int64(i) => Bson::Int64(i),
            Number::Double(d) => Bson::Double(d),
            Number::Decimal(d) => Bson::Decimal128(d),
        }
    }

    /// The nearest double (decimals beyond double precision are rounded).
    pub fn to_f64(self) -> f64 {
        match self {
            Number::Int32(i) => f64::from(i),
            Number::Int64(i) => i as f64,
            Number::Double(d) => d,
            Number::Decimal(d) => Dec::parse(&d).to_f64(),
        }
    }

    /// The value as an int64 if it is integral and in range, whatever its type.
    pub fn to_i64_exact(self) -> Option<i64> {
        match self {
            Number::Int32(i) => Some(i64::from(i)),
            Number::Int64(i) => Some(i),
            Number::Double(d) => f64_to_i64_exact(d),
            Number::Decimal(d) => match Dec::parse(&d) {
                Dec::Finite {
                    negative,
                    coefficient,
                    exponent,
                } => {
                    let magnitude = if exponent >= 0 {
                        10u128
                            .checked_pow(exponent.unsigned_abs())
                            .and_then(|f| coefficient.checked_mul(f))?
                    } else {
                        let f = 10u128
                            .checked_pow(exponent.unsigned_abs())
                            .unwrap_or(u128::MAX);
                        if coefficient % f != 0 {
                            return None;
                        }
                        coefficient / f
                    };
                    let magnitude = i128::try_from(magnitude).ok()?;
                    i64::try_from(if negative { -magnitude } else { magnitude }).ok()
                }
                _ => None,
            },
        }
    }

    fn width(self) -> u8 {
        match self {
            Number::Int32(_) => 0,
            Number::Int64(_) => 1,
            Number::Double(_) => 2,
            Number::Decimal(_) => 3,
        }
    }

    fn to_dec(self) -> Dec {
        match self {
            Number::Int32(i) => Dec::from_i64(i64::from(i)),
            Number::Int64(i) => Dec::from_i64(i),
            Number::Double(d) => Dec::from_f64(d),
            Number::Decimal(d) => Dec::parse(&d),
        }
    }
}

/// `a / b` in Decimal128 arithmetic (the quotient MongoDB gives when either is a
/// decimal); `None` when `b` is zero.
pub fn decimal_divide(a: Number, b: Number) -> Option<Decimal128> {
    a.to_dec().divide(b.to_dec()).map(Dec::to_decimal128)
}

/// Whether a value is of one of BSON's numeric types.
pub fn is_number(v: &Bson) -> bool {
    Number::from_bson(v).is_some()
}

/// A numeric value as the nearest double; `None` for non-numbers.
pub fn as_f64(v: &Bson) -> Option<f64> {
    Number::from_bson(v).map(Number::to_f64)
}

/// A numeric value as an int64 if it is integral and in range (so `3.0` gives 3, `3.5`
/// gives `None`); `None` for non-numbers.
pub fn as_i64(v: &Bson) -> Option<i64> {
    Number::from_bson(v).and_then(Number::to_i64_exact)
}

fn f64_to_i64_exact(d: f64) -> Option<i64> {
    // -2^63 is exactly representable; 2^63 is the first double out of range.
    const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
    (d.fract() == 0.0 && (-TWO_POW_63..TWO_POW_63).contains(&d)).then_some(d as i64)
}

/// Compares numbers by their exact values, whatever their types (so the decimal `0.1` is
/// below the double `0.1`, which is 0.1000000000000000055...); NaN is lowest and equal to
/// itself.
pub fn compare_numbers(a: Number, b: Number) -> Ordering {
    use Number::*;
    match (a, b) {
        (Int32(x), Int32(y)) => x.cmp(&y),
        (Int32(x), Int64(y)) => i64::from(x).cmp(&y),
        (Int64(x), Int32(y)) => x.cmp(&i64::from(y)),
        (Int64(x), Int64(y)) => x.cmp(&y),
        (Int32(x), Double(y)) => compare_i64_f64(i64::from(x), y),
        (Int64(x), Double(y)) => compare_i64_f64(x, y),
        (Double(x), Int32(y)) => compare_i64_f64(i64::from(y), x).reverse(),
        (Double(x), Int64(y)) => compare_i64_f64(y, x).reverse(),
        (Double(x), Double(y)) => compare_f64(x, y),
        (Decimal(x), Double(y)) => Dec::parse(&x).compare_f64(y),
        (Double(x), Decimal(y)) => Dec::parse(&y).compare_f64(x).reverse(),
        _ => a.to_dec().compare(b.to_dec()),
    }
}

fn compare_f64(x: f64, y: f64) -> Ordering {
    match (x.is_nan(), y.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        // Neither is NaN, so partial_cmp is total here (and -0 == 0).
        _ => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
    }
}

/// Exact comparison: converting a large int64 to double would round it.
fn compare_i64_f64(x: i64, y: f64) -> Ordering {
    const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
    if y.is_nan() {
        return Ordering::Greater;
    }
    if y >= TWO_POW_63 {
        return Ordering::Less;
    }
    if y < -TWO_POW_63 {
        return Ordering::Greater;
    }
    let truncated = y.trunc();
    // In range, so the cast is exact.
    let whole = truncated as i64;
    x.cmp(&whole).then_with(|| {
        let fraction = y - truncated;
        if fraction > 0.0 {
            Ordering::Less
        } else if fraction < 0.0 {
            Ordering::Greater
        } else {
            Ordering::Equal
        }
    })
}

/// What an int64 result that does not fit in 64 bits becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Int64Overflow {
    /// The operation fails (`None`), as update operators do.
    Fail,
    /// The result is computed as a double, as aggregation expressions do.
    PromoteToDouble,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArithmeticOp {
    Add,
    Subtract,
    Multiply,
}

/// `a op b` with MongoDB's type promotion. `None` only when an int64 result overflows and
/// `overflow` is [`Int64Overflow::Fail`].
pub fn arithmetic(
    op: ArithmeticOp,
    a: Number,
    b: Number,
    overflow: Int64Overflow,
) -> Option<Number> {
    match a.width().max(b.width()) {
        0 | 1 => {
            let (Some(x), Some(y)) = (a.to_i64_exact(), b.to_i64_exact()) else {
                debug_assert!(false, "integer operands are exact");
                return None;
            };
            let result = match op {
                ArithmeticOp::Add => x.checked_add(y),
                ArithmeticOp::Subtract => x.checked_sub(y),
                ArithmeticOp::Multiply => x.checked_mul(y),
            };
            let both_int32 = a.width() == 0 && b.width() == 0;
            match result {
                Some(r) if both_int32 => {
                    Some(i32::try_from(r).map_or(Number::Int64(r), Number::Int32))
                }
                Some(r) => Some(Number::Int64(r)),
                None => match overflow {
                    Int64Overflow::Fail => None,
                    Int64Overflow::PromoteToDouble => {
                        Some(Number::Double(float_op(op, a.to_f64(), b.to_f64())))
                    }
                },
            }
        }
        2 => Some(Number::Double(float_op(op, a.to_f64(), b.to_f64()))),
        _ => {
            let (x, y) = (a.to_dec(), b.to_dec());
            let result = match op {
                ArithmeticOp::Add => x.add(y),
                ArithmeticOp::Subtract => x.add(y.negate()),
                ArithmeticOp::Multiply => x.multiply(y),
            };
            Some(Number::Decimal(result.to_decimal128()))
        }
    }
}

fn float_op(op: ArithmeticOp, x: f64, y: f64) -> f64 {
    match op {
        ArithmeticOp::Add => x + y,
        ArithmeticOp::Subtract => x - y,
        ArithmeticOp::Multiply => x * y,
    }
}

/// A number as mongod coerces a command's whole-number option: a double truncated
/// toward zero, a decimal rounded half to even, NaN as 0, values out of range
/// saturated; `None` when not a number.
pub fn coerced_integer(value: &Bson) -> Option<i64> {
    match value {
        Bson::Int32(n) => Some(i64::from(*n)),
        Bson::Int64(n) => Some(*n),
        // `as` truncates toward zero, saturates, and makes NaN 0.
        Bson::Double(n) => Some(*n as i64),
        Bson::Decimal128(_) => as_f64(value).map(|n| n.round_ties_even() as i64),
        _ => None,
    }
}

/// A statistics command's `scale` (collStats, dbStats, `$collStats`), as mongod 8
/// reads it: a number ([`coerced_integer`]) of at least 1 (BadValue), at most the
/// largest int32 (larger ones are that).
pub fn scale_factor(value: &Bson) -> basalt_error::Result<i32> {
    let scale = coerced_integer(value).ok_or_else(|| {
        basalt_error::Error::type_mismatch(format!(
            "BSON field 'scale' is the wrong type '{}', expected types '[long, int, decimal, double]'",
            crate::display::type_name(value)
        ))
    })?;
    if scale < 1 {
        return Err(basalt_error::Error::bad_value(format!(
            "BSON field 'scale' value must be >= 1, actual value '{scale}'"
        )));
    }
    Ok(i32::try_from(scale).unwrap_or(i32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    fn dec(s: &str) -> Number {
        Number::Decimal(Decimal128::from_str(s).unwrap())
    }

    fn add(a: Number, b: Number) -> Option<Number> {
        arithmetic(ArithmeticOp::Add, a, b, Int64Overflow::Fail)
    }

    #[test]
    fn views() {
        assert_eq!(as_i64(&Bson::Double(3.0)), Some(3));
        assert_eq!(as_i64(&Bson::Double(3.5)), None);
        assert_eq!(as_i64(&Bson::Double(9.3e18)), None);
        assert_eq!(as_i64(&dec("4.00").to_bson()), Some(4));
        assert_eq!(as_i64(&dec("1E+2").to_bson()), Some(100));
        assert_eq!(as_i64(&dec("4.5").to_bson()), None);
        assert_eq!(as_i64(&Bson::String("1".into())), None);
        assert_eq!(as_f64(&Bson::Int64(7)), Some(7.0));
        assert!(is_number(&dec("NaN").to_bson()));
    }

    #[test]
    fn promotion() {
        assert_eq!(
            add(Number::Int32(1), Number::Int32(2)),
            Some(Number::Int32(3))
        );
        assert_eq!(
            add(Number::Int32(i32::MAX), Number::Int32(1)),
            Some(Number::Int64(i64::from(i32::MAX) + 1))
        );
        assert_eq!(
            add(Number::Int32(1), Number::Int64(2)),
            Some(Number::Int64(3))
        );
        assert_eq!(add(Number::Int64(i64::MAX), Number::Int32(1)), None);
        assert_eq!(
            arithmetic(
                ArithmeticOp::Add,
                Number::Int64(i64::MAX),
                Number::Int32(1),
                Int64Overflow::PromoteToDouble
            ),
            Some(Number::Double(i64::MAX as f64))
        );
        assert_eq!(
            add(Number::Int32(1), Number::Double(0.5)),
            Some(Number::Double(1.5))
        );
        assert_eq!(add(Number::Int32(1), dec("0.5")), Some(dec("1.5")));
        assert_eq!(
            arithmetic(
                ArithmeticOp::Multiply,
                Number::Int32(65536),
                Number::Int32(65536),
                Int64Overflow::Fail
            ),
            Some(Number::Int64(1 << 32))
        );
        assert_eq!(
            arithmetic(
                ArithmeticOp::Subtract,
                dec("1"),
                dec("0.1"),
                Int64Overflow::Fail
            ),
            Some(dec("0.9"))
        );
    }

    #[test]
    fn mixed_comparisons() {
        assert_eq!(
            compare_numbers(dec("2"), Number::Double(2.0)),
            Ordering::Equal
        );
        assert_eq!(
            compare_numbers(Number::Double(2.5), dec("2.4")),
            Ordering::Greater
        );
        assert_eq!(
            compare_numbers(dec("9223372036854775807"), Number::Int64(i64::MAX)),
            Ordering::Equal
        );
        assert_eq!(
            compare_numbers(Number::Int32(-1), Number::Double(-0.5)),
            Ordering::Less
        );
        assert_eq!(
            compare_numbers(dec("0.1"), Number::Double(0.1)),
            Ordering::Less
        );
        assert_eq!(
            compare_numbers(Number::Double(0.3), dec("0.3")),
            Ordering::Less
        );
    }
}
