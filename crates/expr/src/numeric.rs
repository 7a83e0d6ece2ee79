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
    match combine(ArithmeticOp::Add, n, Number::Decimal(decimal_zero())) {
        Number::Decimal(d) => d,
        other => decimal_from_f64(other.to_f64()),
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
        Number::Decimal(_) => n.to_f64() == 0.0,
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

/// A double as MongoDB writes it in text: no trailing `.0`, exponents as `1e+21`.
pub(crate) fn format_double(d: f64) -> String {
    if d.is_nan() {
        return "NaN".to_string();
    }
    if d.is_infinite() {
        return if d > 0.0 { "Infinity" } else { "-Infinity" }.to_string();
    }
    let magnitude = d.abs();
    if magnitude != 0.0 && !(1e-5..1e21).contains(&magnitude) {
        let text = format!("{d:e}");
        return match text.split_once('e') {
            Some((m, e)) if !e.starts_with('-') => format!("{m}e+{e}"),
            _ => text,
        };
    }
    format!("{d}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_conversions() {
        assert_eq!(to_decimal(Number::Int32(5)).to_string(), "5");
        assert_eq!(to_decimal(Number::Int64(-7)).to_string(), "-7");
        assert_eq!(decimal_from_f64(0.25).to_string(), "0.25");
        assert_eq!(decimal_from_f64(f64::INFINITY).to_string(), "Infinity");
        assert!(is_zero(Number::Decimal(decimal_zero())));
    }

    #[test]
    fn doubles_print_like_mongodb() {
        assert_eq!(format_double(1.0), "1");
        assert_eq!(format_double(2.5), "2.5");
        assert_eq!(format_double(1e21), "1e+21");
        assert_eq!(format_double(-0.5), "-0.5");
    }
}
