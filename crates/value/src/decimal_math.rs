//! Decimal128's functions that are not exact: the square root, exponential and
//! logarithms, powers and the logistic function of `$sqrt`, `$exp`, `$ln`, `$log10`,
//! `$log`, `$pow` and `$sigmoid`, and `$mod`'s remainder. MongoDB computes them in
//! decimal128 (34 significant digits), not through a double, which keeps 15: `$sqrt` of
//! `NumberDecimal("2")` is `1.414213562373095048801688724209698`.
//!
//! They run in libdecnumber, the reference implementation of the General Decimal
//! Arithmetic specification (through the `dec` crate), in a context that is IEEE
//! 754-2008's decimal128: 34 digits, rounding half to even, exponents from -6176 to 6111.
//! Each operation is rounded once, as each of MongoDB's is (a logarithm to another base
//! is two logarithms and a division, the logistic function an exponential, an addition
//! and a division, as MongoDB rewrites `$sigmoid`). Values cross between `bson`'s and
//! libdecnumber's representations as their decimal strings, which are exact.

use bson::Decimal128;
use dec::{Context, Decimal, Rounding};
use std::str::FromStr;

/// libdecnumber's working number: 12 units of 3 digits hold decimal128's 34.
pub(crate) type Wide = Decimal<12>;

/// Decimal128's arithmetic, as IEEE 754-2008 defines it.
pub(crate) fn decimal128_context() -> Context<Wide> {
    const DIGITS: usize = 34;
    const MAX_EXPONENT: isize = 6144;
    const MIN_EXPONENT: isize = -6143;
    let mut context = Context::<Wide>::default();
    context
        .set_precision(DIGITS)
        .expect("34 digits fit 12 units of 3");
    context
        .set_max_exponent(MAX_EXPONENT)
        .expect("decimal128's largest exponent is within libdecnumber's");
    context
        .set_min_exponent(MIN_EXPONENT)
        .expect("decimal128's smallest exponent is within libdecnumber's");
    context.set_clamp(true);
    context.set_rounding(Rounding::HalfEven);
    context
}

/// The sign bit of a decimal128 (the top bit of its last byte, BSON being
/// little-endian), which bson's text of a NaN leaves out.
const SIGN_BIT: u8 = 0x80;

pub(crate) fn wide(context: &mut Context<Wide>, x: Decimal128) -> Wide {
    let text = x.to_string();
    let text = if text == "NaN" && x.bytes()[15] & SIGN_BIT != 0 {
        "-NaN".to_string()
    } else {
        text
    };
    // Every decimal128 string is a valid decimal number string.
    context.parse(text).unwrap_or_else(|_| Wide::nan())
}

pub(crate) fn narrow(x: &Wide) -> Decimal128 {
    if x.is_nan() {
        // libdecnumber writes a signed NaN as "-NaN", which bson does not read: the
        // bytes of a quiet NaN, with its sign.
        let mut bytes = [0; 16];
        bytes[15] = 0x7C | if x.is_negative() { SIGN_BIT } else { 0 };
        return Decimal128::from_bytes(bytes);
    }
    Decimal128::from_str(&x.to_string())
        .unwrap_or_else(|_| Decimal128::from_str("NaN").expect("NaN parses"))
}

/// A double's exact value rounded to 34 digits (MongoDB's conversion for arithmetic with
/// decimals, unlike `$toDecimal`'s 15): `2.5` is `2.5`, `0.1` is
/// `0.1000000000000000055511151231257827`.
pub(crate) fn from_f64(context: &mut Context<Wide>, x: f64) -> Wide {
    if x.is_nan() {
        return Wide::nan();
    }
    if x.is_infinite() {
        let mut infinity = Wide::infinity();
        if x < 0.0 {
            context.neg(&mut infinity);
        }
        return infinity;
    }
    // A double's exact decimal expansion has at most 767 significant digits.
    let exact = format!("{x:.767e}");
    let (mantissa, exponent) = exact.split_once('e').unwrap_or((&exact, "0"));
    let mantissa = mantissa.trim_end_matches('0').trim_end_matches('.');
    context
        .parse(format!("{mantissa}e{exponent}"))
        .unwrap_or_else(|_| Wide::nan())
}

/// The integer nearest `x`, halves to even (how `$sample` reads a decimal size), as a
/// double: NaN for NaN, infinities kept.
pub fn round_half_even(x: Decimal128) -> f64 {
    let mut context = decimal128_context();
    let mut x = wide(&mut context, x);
    context.round(&mut x);
    x.to_string().parse().unwrap_or(f64::NAN)
}

/// Applies `f` to `x` in decimal128's context.
fn unary(x: Decimal128, f: impl FnOnce(&mut Context<Wide>, &mut Wide)) -> Decimal128 {
    let mut context = decimal128_context();
    let mut x = wide(&mut context, x);
    f(&mut context, &mut x);
    narrow(&x)
}

/// Applies `f` to `x` and `y` (the result in `x`) in decimal128's context.
fn binary(
    x: Decimal128,
    y: Decimal128,
    f: impl FnOnce(&mut Context<Wide>, &mut Wide, &Wide),
) -> Decimal128 {
    let mut context = decimal128_context();
    let mut x = wide(&mut context, x);
    let y = wide(&mut context, y);
    f(&mut context, &mut x, &y);
    narrow(&x)
}

pub fn sqrt(x: Decimal128) -> Decimal128 {
    unary(x, |context, x| context.sqrt(x))
}

pub fn exp(x: Decimal128) -> Decimal128 {
    unary(x, exp_wide)
}

/// `e^x`, with `e^-∞` a plain zero (libdecnumber gives it the smallest exponent,
/// `0E-6176`) and a result that rounds to one a plain one (not `1.000…0`), as MongoDB
/// answers both.
fn exp_wide(context: &mut Context<Wide>, x: &mut Wide) {
    if x.is_infinite() && x.is_negative() {
        *x = Wide::zero();
        return;
    }
    context.exp(x);
    if context.partial_cmp(x, &Wide::from(1)) == Some(std::cmp::Ordering::Equal) {
        *x = Wide::from(1);
    }
}

pub fn ln(x: Decimal128) -> Decimal128 {
    unary(x, |context, x| context.ln(x))
}

pub fn log10(x: Decimal128) -> Decimal128 {
    unary(x, |context, x| context.log10(x))
}

/// The logarithm of `x` to `base`: base 10 directly, any other as `ln(x) / ln(base)`.
pub fn log(x: Decimal128, base: Decimal128) -> Decimal128 {
    binary(x, base, |context, x, base| {
        if context.partial_cmp(base, &Wide::from(10)) == Some(std::cmp::Ordering::Equal) {
            context.log10(x);
            return;
        }
        let mut base = *base;
        context.ln(x);
        context.ln(&mut base);
        context.div(x, &base);
    })
}

pub fn pow(x: Decimal128, y: Decimal128) -> Decimal128 {
    binary(x, y, |context, x, y| context.pow(x, y))
}

/// The remainder of `x / y` truncated toward zero (the sign of `x`), as `$mod` gives it.
pub fn rem(x: Decimal128, y: Decimal128) -> Decimal128 {
    binary(x, y, |context, x, y| context.rem(x, y))
}

/// `1 / (1 + e^-x)`.
pub fn sigmoid(x: Decimal128) -> Decimal128 {
    unary(x, |context, x| {
        if x.is_nan() {
            // The NaN itself, sign kept (the negation below would flip it).
            return;
        }
        context.neg(x);
        exp_wide(context, x);
        let one = Wide::from(1);
        context.add(x, &one);
        let mut result = one;
        context.div(&mut result, x);
        *x = result;
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal128 {
        Decimal128::from_str(s).unwrap()
    }

    fn text(x: Decimal128) -> String {
        x.to_string()
    }

    #[test]
    fn functions_give_34_digits_rounded_half_even() {
        assert_eq!(text(sqrt(d("2"))), "1.414213562373095048801688724209698");
        assert_eq!(text(exp(d("1"))), "2.718281828459045235360287471352662");
        assert_eq!(text(ln(d("10"))), "2.302585092994045684017991454684364");
        assert_eq!(text(log10(d("2"))), "0.3010299956639811952137388947244930");
        assert_eq!(text(sigmoid(d("0"))), "0.5");
    }

    #[test]
    fn exact_results_keep_their_exponents() {
        assert_eq!(text(sqrt(d("16"))), "4");
        assert_eq!(text(sqrt(d("0.25"))), "0.5");
        assert_eq!(text(exp(d("0"))), "1");
        assert_eq!(text(exp(d("1E-6176"))), "1");
        assert_eq!(text(ln(d("1"))), "0");
        assert_eq!(text(log10(d("1000"))), "3");
        assert_eq!(text(log(d("100"), d("10"))), "2");
        assert_eq!(text(pow(d("2"), d("10"))), "1024");
        assert_eq!(text(rem(d("10.5"), d("3"))), "1.5");
        assert_eq!(text(rem(d("-7"), d("2"))), "-1");
    }

    #[test]
    fn special_values() {
        assert_eq!(text(exp(d("Infinity"))), "Infinity");
        assert_eq!(text(exp(d("-Infinity"))), "0");
        assert_eq!(text(ln(d("0"))), "-Infinity");
        assert_eq!(text(sqrt(d("NaN"))), "NaN");
        assert_eq!(text(pow(d("10"), d("7000"))), "Infinity");
        // 1 / ∞: zero with the smallest exponent, as IEEE 754's division gives it (and
        // MongoDB answers).
        assert_eq!(text(sigmoid(d("-Infinity"))), "0E-6176");
        assert_eq!(text(sigmoid(d("Infinity"))), "1");
        assert_eq!(sigmoid(d("NaN")).bytes(), d("NaN").bytes());
        assert_eq!(round_half_even(d("2.5")), 2.0);
        assert_eq!(round_half_even(d("0.51")), 1.0);
        assert_eq!(round_half_even(d("-Infinity")), f64::NEG_INFINITY);
        assert!(round_half_even(d("NaN")).is_nan());
    }
}
