//! Number helpers the operators share, on top of `basalt_value::number` (which owns type
//! promotion and exact decimal addition/multiplication).
//!
//! `basalt_value` does not yet expose decimal division, rounding or transcendental
//! functions, so decimal operands of those go through `f64` and the result is read back
//! from the double's shortest text; that loses digits beyond double precision.

use basalt_value::number::{arithmetic, ArithmeticOp, Int64Overflow};
use basalt_value::Number;
use bson::{Bson, Decimal128};
use std::str::FromStr;

/// The number a value holds; `None` for missing and non-numeric values.
pub(crate) fn number(value: Option<&Bson>) -> Option<Number> {
    value.and_then(Number::from_bson)
}

/// `a op b` as aggregation computes it: int64 overflow becomes a double.
pub(crate) fn combine(op: ArithmeticOp, a: Number, b: Number) -> Number {
    arithmetic(op, a, b, Int64Overflow::PromoteToDouble).unwrap_or(Number::Double(f64::NAN))
}

/// A number as a Decimal128, as `$toDecimal` converts it (doubles keep 15 digits).
pub(crate) fn to_decimal(n: Number) -> Decimal128 {
    match n {
        // A decimal stays as it is (its sign, its exponent).
        Number::Decimal(d) => d,
        // A double becomes its 15 significant digits, as mongod converts it; zero keeps
        // its sign and no exponent.
        Number::Double(x) if x == 0.0 => {
            let zero = if x.is_sign_negative() { "-0" } else { "0" };
            Decimal128::from_str(zero).unwrap_or_else(|_| decimal_zero())
        }
        Number::Double(x) if x.is_finite() => {
            Decimal128::from_str(&format!("{x:.14e}")).unwrap_or_else(|_| decimal_zero())
        }
        Number::Double(x) => decimal_from_f64(x),
        integer => match combine(ArithmeticOp::Add, integer, Number::Decimal(decimal_zero())) {
            Number::Decimal(d) => d,
            other => decimal_from_f64(other.to_f64()),
        },
    }
}

fn decimal_zero() -> Decimal128 {
    Decimal128::from_bytes([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x40, 0x30])
}

/// The decimal written like the double's shortest round-trip text (`0.25`, not
/// `0.250000000000000`), for results computed in `f64`.
pub(crate) fn decimal_from_f64(x: f64) -> Decimal128 {
    let text = if x.is_nan() {
        "NaN".to_string()
    } else if x.is_infinite() {
        if x > 0.0 { "Infinity" } else { "-Infinity" }.to_string()
    } else {
        format!("{x:e}")
    };
    Decimal128::from_str(&text).unwrap_or_else(|_| decimal_zero())
}

/// Whether a number is zero, of any type.
pub(crate) fn is_zero(n: Number) -> bool {
    match n {
        Number::Int32(i) => i == 0,
        Number::Int64(i) => i == 0,
        Number::Double(d) => d == 0.0,
        // Exactly: the tiniest decimals are no doubles but are not zero.
        Number::Decimal(d) => {
            let text = d.to_string();
            let coefficient = text.split(['E', 'e']).next().unwrap_or_default();
            coefficient.bytes().any(|c| c.is_ascii_digit())
                && coefficient
                    .bytes()
                    .all(|c| matches!(c, b'0' | b'.' | b'-' | b'+'))
        }
    }
}

/// A value in an error message, as MongoDB prints values there.
pub(crate) fn display(value: &Bson) -> String {
    match value {
        Bson::Double(d) => format_double(*d),
        Bson::String(s) => s.clone(),
        Bson::Decimal128(d) => d.to_string(),
        other => other.to_string(),
    }
}

/// A double as MongoDB writes it in text (`$toString`, error messages): the shortest
/// digits that read back as the same double, in scientific notation below 1e-4 and from
/// 1e16 on, with a signed exponent of at least two digits (`9e-05`, `1e+16`).
pub(crate) fn format_double(d: f64) -> String {
    if d.is_nan() {
        return "NaN".to_string();
    }
    if d.is_infinite() {
        return if d > 0.0 { "Infinity" } else { "-Infinity" }.to_string();
    }
    let magnitude = d.abs();
    if magnitude != 0.0 && !(1e-4..1e16).contains(&magnitude) {
        return with_c_exponent(&format!("{d:e}"));
    }
    format!("{d}")
}

/// A double as the older string coercions write it (`$substr`, `$substrBytes`,
/// `$toLower`, `$toUpper`, `$strcasecmp`): as C++'s default stream output does, six
/// significant digits, scientific notation below 1e-4 and from 1e6 on, `nan` and `inf`.
pub(crate) fn format_double_6(d: f64) -> String {
    if d.is_nan() {
        return "nan".to_string();
    }
    if d.is_infinite() {
        return if d > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    if d == 0.0 {
        return if d.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    // The exponent once rounded to six digits decides the notation (as `%g` does).
    let scientific = format!("{d:.5e}");
    let exponent: i32 = scientific
        .split_once('e')
        .and_then(|(_, e)| e.parse().ok())
        .unwrap_or(0);
    if !(-4..6).contains(&exponent) {
        let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
        return with_c_exponent(&format!("{}e{exponent}", trim_fraction(mantissa)));
    }
    let decimals = (5 - exponent).max(0) as usize;
    trim_fraction(&format!("{d:.decimals$}")).to_string()
}

/// `1.5` from `1.50000`, `2` from `2.`: a fraction without its trailing zeros.
fn trim_fraction(text: &str) -> &str {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        text
    }
}

/// Rust's `1e16` / `9e-5` written as C writes exponents: `1e+16` / `9e-05`.
fn with_c_exponent(text: &str) -> String {
    match text.split_once('e') {
        Some((mantissa, exponent)) => {
            let (sign, digits) = match exponent.strip_prefix('-') {
                Some(digits) => ('-', digits),
                None => ('+', exponent),
            };
            format!("{mantissa}e{sign}{digits:0>2}")
        }
        None => text.to_string(),
    }
}

/// Splits decimal text (`-1.2345e3`, `12.5`, `1E+2`) into sign, digits and the exponent
/// of the last digit.
pub(crate) fn split_decimal(text: &str) -> (bool, String, i32) {
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exp) = match unsigned.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.trim_start_matches('+').parse::<i32>().unwrap_or(0)),
        None => (unsigned, 0),
    };
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    (
        negative,
        format!("{int_part}{frac_part}"),
        exp - frac_part.len() as i32,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_conversions() {
        assert_eq!(to_decimal(Number::Int32(5)).to_string(), "5");
        assert_eq!(to_decimal(Number::Int64(-7)).to_string(), "-7");
        assert_eq!(
            to_decimal(Number::Double(2.5)).to_string(),
            "2.50000000000000"
        );
        assert_eq!(to_decimal(Number::Double(-0.0)).to_string(), "-0");
        assert_eq!(
            to_decimal(Number::Double(9007199254740992.0)).to_string(),
            "9.00719925474099E+15"
        );
        assert_eq!(
            to_decimal(Number::Double(f64::MAX)).to_string(),
            "1.79769313486232E+308"
        );
        assert_eq!(decimal_from_f64(0.25).to_string(), "0.25");
        assert_eq!(decimal_from_f64(f64::INFINITY).to_string(), "Infinity");
        assert!(is_zero(Number::Decimal(decimal_zero())));
    }

    #[test]
    fn doubles_print_like_mongodb() {
        assert_eq!(format_double(1.0), "1");
        assert_eq!(format_double(2.5), "2.5");
        assert_eq!(format_double(1e21), "1e+21");
        assert_eq!(format_double(1e16), "1e+16");
        assert_eq!(format_double(9999999999999998.0), "9999999999999998");
        assert_eq!(format_double(9e-5), "9e-05");
        assert_eq!(format_double(0.0001), "0.0001");
        assert_eq!(format_double(5e-324), "5e-324");
        assert_eq!(format_double(f64::MAX), "1.7976931348623157e+308");
        assert_eq!(format_double_6(123456.789), "123457");
        assert_eq!(format_double_6(1.234567), "1.23457");
        assert_eq!(format_double_6(1e6), "1e+06");
        assert_eq!(format_double_6(999999.5), "1e+06");
        assert_eq!(format_double_6(1e-6), "1e-06");
        assert_eq!(format_double_6(0.0001), "0.0001");
        assert_eq!(format_double_6(2.5), "2.5");
        assert_eq!(format_double_6(-3.0), "-3");
        assert_eq!(format_double_6(1e20), "1e+20");
        assert_eq!(format_double_6(f64::NAN), "nan");
        assert_eq!(format_double_6(f64::NEG_INFINITY), "-inf");
        assert_eq!(format_double(-0.5), "-0.5");
    }
}
