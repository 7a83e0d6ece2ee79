//! Exact arithmetic and comparison for Decimal128 values, which the `bson` crate stores
//! but cannot compute with.
//!
//! A decimal is decoded from its IEEE 754-2008 BID bits into a sign, an integer
//! coefficient and a power-of-ten exponent. That is enough to compare decimals with each
//! other, with integers and with doubles exactly (a double is a dyadic rational, so its full
//! decimal expansion is finite), and to add, subtract and multiply them with IEEE 754's
//! preferred exponents (so `1.1 + 2.2` is `3.3` and `1.5 * 2` is `3.0`, as MongoDB prints
//! them). Results wider than 34 digits are handed back to `bson`'s parser, which rounds
//! them. Doubles enter decimal arithmetic rounded to 15 significant digits, as MongoDB does.

use bson::Decimal128;
use std::cmp::Ordering;
use std::str::FromStr;

/// A decoded Decimal128.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Dec {
    NaN,
    Infinity {
        negative: bool,
    },
    Finite {
        negative: bool,
        coefficient: u128,
        exponent: i32,
    },
}

impl Dec {
    /// Decodes the bits directly rather than through the string form: it is exact and does
    /// not allocate, and is pinned against `bson`'s own formatting in the tests.
    pub(crate) fn parse(d: &Decimal128) -> Dec {
        const MAX_COEFFICIENT: u128 = 9_999_999_999_999_999_999_999_999_999_999_999;
        const EXPONENT_BIAS: i32 = 6176;
        let bits = u128::from_le_bytes(d.bytes());
        let negative = bits >> 127 == 1;
        let combination = (bits >> 122) & 0x1F;
        if combination == 0x1F {
            return Dec::NaN;
        }
        if combination == 0x1E {
            return Dec::Infinity { negative };
        }
        let (biased_exponent, coefficient) = if (bits >> 125) & 0b11 == 0b11 {
            // The coefficient would be at least 2^113, above the 34-digit maximum: such
            // non-canonical encodings mean zero, as in bson's formatting and in MongoDB.
            ((bits >> 111) & 0x3FFF, 0)
        } else {
            let coefficient = bits & ((1 << 113) - 1);
            let canonical = if coefficient > MAX_COEFFICIENT {
                0
            } else {
                coefficient
            };
            ((bits >> 113) & 0x3FFF, canonical)
        };
        Dec::Finite {
            negative,
            coefficient,
            exponent: biased_exponent as i32 - EXPONENT_BIAS,
        }
    }

    pub(crate) fn from_i64(v: i64) -> Dec {
        Dec::Finite {
            negative: v < 0,
            coefficient: u128::from(v.unsigned_abs()),
            exponent: 0,
        }
    }

    /// The decimal MongoDB makes of a double: rounded to 15 significant digits.
    pub(crate) fn from_f64(v: f64) -> Dec {
        if v.is_nan() {
            return Dec::NaN;
        }
        if v.is_infinite() {
            return Dec::Infinity { negative: v < 0.0 };
        }
        let text = format!("{v:.14e}");
        let (mantissa, exp) = text.split_once('e').unwrap_or((&text, "0"));
        let negative = mantissa.starts_with('-');
        let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
        Dec::Finite {
            negative,
            coefficient: digits.parse().unwrap_or(0),
            exponent: exp.parse::<i32>().unwrap_or(0) - 14,
        }
    }

    pub(crate) fn to_decimal128(self) -> Decimal128 {
        let text = match self {
            Dec::NaN => "NaN".to_string(),
            Dec::Infinity { negative } => format!("{}Infinity", sign(negative)),
            Dec::Finite {
                negative,
                coefficient,
                exponent,
            } => format!("{}{coefficient}E{exponent}", sign(negative)),
        };
        // bson rounds over-long coefficients; only exponents beyond ±6000 fail, and
        // those saturate like IEEE 754 overflow/underflow.
        Decimal128::from_str(&text).unwrap_or_else(|_| {
            let saturated = match self {
                Dec::Finite {
                    negative, exponent, ..
                } if exponent > 0 => format!("{}Infinity", sign(negative)),
                Dec::Finite { negative, .. } => format!("{}0", sign(negative)),
                _ => "NaN".to_string(),
            };
            Decimal128::from_str(&saturated).unwrap_or_else(|_| Decimal128::from_bytes([0; 16]))
        })
    }

    pub(crate) fn to_f64(self) -> f64 {
        match self {
            Dec::NaN => f64::NAN,
            Dec::Infinity { negative: true } => f64::NEG_INFINITY,
            Dec::Infinity { negative: false } => f64::INFINITY,
            Dec::Finite {
                negative,
                coefficient,
                exponent,
            } => format!("{}{coefficient}e{exponent}", sign(negative))
                .parse()
                .unwrap_or(f64::NAN),
        }
    }

    /// Total order with NaN lowest, as MongoDB sorts numbers.
    pub(crate) fn compare(self, other: Dec) -> Ordering {
        match (self, other) {
            (Dec::NaN, Dec::NaN) => Ordering::Equal,
            (Dec::NaN, _) => Ordering::Less,
            (_, Dec::NaN) => Ordering::Greater,
            _ => {
                let (sa, sb) = (self.signum(), other.signum());
                if sa != sb {
                    return sa.cmp(&sb);
                }
                let magnitude = self.compare_magnitude(other);
                if sa < 0 {
                    magnitude.reverse()
                } else {
                    magnitude
                }
            }
        }
    }

    /// Exact comparison with a double, in the same total order (NaN lowest). A finite
    /// double is an integer times a power of two, whose decimal expansion is finite, so the
    /// decimal `0.1` sorts below the double `0.1` (0.1000000000000000055...), as in MongoDB.
    pub(crate) fn compare_f64(self, x: f64) -> Ordering {
        let Dec::Finite {
            negative,
            coefficient,
            exponent,
        } = self
        else {
            // NaN and the infinities mean the same in both types.
            return self.compare(Dec::from_f64(x));
        };
        if !x.is_finite() {
            return self.compare(Dec::from_f64(x));
        }
        let x_sign: i8 = if x > 0.0 {
            1
        } else if x < 0.0 {
            -1
        } else {
            0
        };
        let sign = self.signum();
        if sign != x_sign || sign == 0 {
            return sign.cmp(&x_sign);
        }
        let mut buf = [0u8; 40];
        let all_digits = ascii_digits(coefficient, &mut buf);
        let scientific_exponent = exponent + all_digits.len() as i32 - 1;
        let magnitude =
            compare_double_with_decimal(x.abs(), scientific_exponent, trim_zeros(all_digits))
                .reverse();
        if negative {
            magnitude.reverse()
        } else {
            magnitude
        }
    }

    fn signum(self) -> i8 {
        match self {
            Dec::NaN => 0,
            Dec::Infinity { negative } => {
                if negative {
                    -1
                } else {
                    1
                }
            }
            Dec::Finite { coefficient: 0, .. } => 0,
            Dec::Finite { negative, .. } => {
                if negative {
                    -1
                } else {
                    1
                }
            }
        }
    }

    fn compare_magnitude(self, other: Dec) -> Ordering {
        match (self, other) {
            (Dec::Infinity { .. }, Dec::Infinity { .. }) => Ordering::Equal,
            (Dec::Infinity { .. }, _) => Ordering::Greater,
            (_, Dec::Infinity { .. }) => Ordering::Less,
            (
                Dec::Finite {
                    coefficient: ca,
                    exponent: ea,
                    ..
                },
                Dec::Finite {
                    coefficient: cb,
                    exponent: eb,
                    ..
                },
            ) => {
                if ca == 0 || cb == 0 {
                    return ca.cmp(&cb);
                }
                // Compare the position of the leading digit first; when it is the same,
                // aligning the exponents cannot overflow (both fit in 34+ digits).
                let adjusted = |c: u128, e: i32| e + digit_count(c) as i32;
                let by_magnitude = adjusted(ca, ea).cmp(&adjusted(cb, eb));
                if by_magnitude != Ordering::Equal {
                    return by_magnitude;
                }
                let (ca, cb) = align(ca, ea, cb, eb).unwrap_or((ca, cb));
                ca.cmp(&cb)
            }
            _ => Ordering::Equal,
        }
    }

    pub(crate) fn add(self, other: Dec) -> Dec {
        match (self, other) {
            (Dec::NaN, _) | (_, Dec::NaN) => Dec::NaN,
            (Dec::Infinity { negative: a }, Dec::Infinity { negative: b }) if a != b => Dec::NaN,
            (Dec::Infinity { .. }, _) => self,
            (_, Dec::Infinity { .. }) => other,
            (
                Dec::Finite {
                    negative: na,
                    coefficient: ca,
                    exponent: ea,
                },
                Dec::Finite {
                    negative: nb,
                    coefficient: cb,
                    exponent: eb,
                },
            ) => {
                let (ca, cb, exponent) = align_for_sum(ca, ea, cb, eb);
                let (negative, coefficient) = if na == nb {
                    // Both are below 2 * 10^38 after alignment, so the sum fits.
                    (na, ca + cb)
                } else if ca >= cb {
                    (na, ca - cb)
                } else {
                    (nb, cb - ca)
                };
                // IEEE 754: an exact zero sum of opposite signs is +0.
                finite(
                    negative && coefficient != 0,
                    &coefficient.to_string(),
                    exponent,
                )
            }
        }
    }

    pub(crate) fn negate(self) -> Dec {
        match self {
            Dec::NaN => Dec::NaN,
            Dec::Infinity { negative } => Dec::Infinity {
                negative: !negative,
            },
            Dec::Finite {
                negative,
                coefficient,
                exponent,
            } => Dec::Finite {
                negative: !negative,
                coefficient,
                exponent,
            },
        }
    }

    pub(crate) fn multiply(self, other: Dec) -> Dec {
        let negative = (self.signum() < 0) != (other.signum() < 0);
        match (self, other) {
            (Dec::NaN, _) | (_, Dec::NaN) => Dec::NaN,
            (Dec::Infinity { .. }, _) | (_, Dec::Infinity { .. }) => {
                if self.signum() == 0 || other.signum() == 0 {
                    Dec::NaN
                } else {
                    Dec::Infinity { negative }
                }
            }
            (
                Dec::Finite {
                    coefficient: ca,
                    exponent: ea,
                    ..
                },
                Dec::Finite {
                    coefficient: cb,
                    exponent: eb,
                    ..
                },
            ) => {
                let product = match ca.checked_mul(cb) {
                    Some(p) => p.to_string(),
                    None => multiply_digits(&ca.to_string(), &cb.to_string()),
                };
                finite(negative, &product, ea + eb)
            }
        }
    }
}

impl Dec {
    /// `self / other` as IEEE 754-2008 divides decimals (and MongoDB with them): an exact
    /// quotient takes the exponent nearest the preferred one (the dividend's minus the
    /// divisor's), an inexact one is rounded half-to-even to 34 digits. `None` when
    /// `other` is zero (the caller's error) or either is not a number.
    pub(crate) fn divide(self, other: Dec) -> Option<Dec> {
        let negative = (self.signum() < 0) != (other.signum() < 0);
        match (self, other) {
            (Dec::NaN, _) | (_, Dec::NaN) => None,
            (Dec::Infinity { .. }, Dec::Infinity { .. }) => Some(Dec::NaN),
            (Dec::Infinity { .. }, _) => Some(Dec::Infinity { negative }),
            (Dec::Finite { coefficient: 0, .. }, Dec::Finite { coefficient: 0, .. }) => None,
            (_, Dec::Finite { coefficient: 0, .. }) => None,
            (Dec::Finite { exponent, .. }, Dec::Infinity { .. }) => Some(Dec::Finite {
                negative,
                coefficient: 0,
                exponent: exponent.min(0),
            }),
            (
                Dec::Finite {
                    coefficient: ca,
                    exponent: ea,
                    ..
                },
                Dec::Finite {
                    coefficient: cb,
                    exponent: eb,
                    ..
                },
            ) => {
                let preferred = ea - eb;
                if ca == 0 {
                    return Some(finite(negative, "0", preferred));
                }
                // Enough digits for 34 and a rounding digit, whatever the operands.
                let shift = (PRECISION_DIGITS as u32 + 2 + digit_count(cb))
                    .saturating_sub(digit_count(ca)) as usize;
                let dividend = format!("{ca}{}", "0".repeat(shift));
                let (mut quotient, remainder) = long_division(&dividend, cb);
                let mut exponent = preferred - shift as i32;
                if remainder == 0 {
                    // Exact: as near the preferred exponent as trailing zeros allow.
                    while exponent < preferred && quotient.len() > 1 && quotient.ends_with('0') {
                        quotient.pop();
                        exponent += 1;
                    }
                } else {
                    // What was cut makes any dropped 5 round up.
                    quotient.push('1');
                    exponent -= 1;
                }
                Some(finite(negative, &quotient, exponent))
            }
        }
    }
}

/// `dividend` (decimal digits) divided by `divisor`: the quotient's digits (no leading
/// zeros, "0" for none) and the remainder. The remainder stays below the divisor, under
/// 10^34, so each step fits in a u128.
fn long_division(dividend: &str, divisor: u128) -> (String, u128) {
    let mut quotient = String::with_capacity(dividend.len());
    let mut remainder = 0u128;
    for digit in dividend.bytes() {
        remainder = remainder * 10 + u128::from(digit - b'0');
        let q = remainder / divisor;
        remainder %= divisor;
        if q > 0 || !quotient.is_empty() {
            quotient.push(char::from(b'0' + q as u8));
        }
    }
    if quotient.is_empty() {
        quotient.push('0');
    }
    (quotient, remainder)
}

/// Largest coefficient a Decimal128 holds, in digits, and its smallest exponent.
const PRECISION_DIGITS: usize = 34;
const EXPONENT_MIN: i32 = -6176;

/// A finite decimal from a coefficient's decimal digits, rounded half-to-even to what a
/// Decimal128 can hold.
fn finite(negative: bool, digits: &str, exponent: i32) -> Dec {
    let digits = digits.trim_start_matches('0');
    let mut drop = digits.len().saturating_sub(PRECISION_DIGITS);
    if exponent.saturating_add(drop as i32) < EXPONENT_MIN {
        drop = (EXPONENT_MIN - exponent) as usize;
    }
    let keep = digits.len().saturating_sub(drop);
    let (kept, dropped) = digits.split_at(keep);
    let mut coefficient: u128 = kept.parse().unwrap_or(0);
    let first_dropped = dropped.bytes().next().map_or(0, |b| b - b'0');
    let rest_nonzero = dropped.bytes().skip(1).any(|b| b != b'0');
    let exact_dropped_digits = dropped.len() == drop;
    let round_up = exact_dropped_digits
        && (first_dropped > 5 || (first_dropped == 5 && (rest_nonzero || coefficient % 2 == 1)));
    let mut exponent = exponent.saturating_add(drop as i32);
    if round_up {
        coefficient += 1;
        if coefficient == 10u128.pow(PRECISION_DIGITS as u32) {
            coefficient /= 10;
            exponent += 1;
        }
    }
    Dec::Finite {
        negative,
        coefficient,
        exponent,
    }
}

/// Schoolbook multiplication of two decimal digit strings, for products beyond u128.
fn multiply_digits(a: &str, b: &str) -> String {
    let (a, b): (Vec<u32>, Vec<u32>) = (
        a.bytes().rev().map(|d| u32::from(d - b'0')).collect(),
        b.bytes().rev().map(|d| u32::from(d - b'0')).collect(),
    );
    let mut product = vec![0u32; a.len() + b.len()];
    for (i, x) in a.iter().enumerate() {
        let mut carry = 0;
        for (j, y) in b.iter().enumerate() {
            let cell = product[i + j] + x * y + carry;
            product[i + j] = cell % 10;
            carry = cell / 10;
        }
        product[i + b.len()] += carry;
    }
    product
        .iter()
        .rev()
        .map(|d| char::from(b'0' + *d as u8))
        .collect()
}

fn sign(negative: bool) -> &'static str {
    if negative {
        "-"
    } else {
        ""
    }
}

fn digit_count(c: u128) -> u32 {
    c.checked_ilog10().map_or(1, |d| d + 1)
}

/// Compares a non-negative finite double with the positive decimal `d.ddd × 10^exponent`
/// (`digits` without trailing zeros), exactly, through the double's full decimal expansion.
pub(crate) fn compare_double_with_decimal(x: f64, exponent: i32, digits: &[u8]) -> Ordering {
    if x == 0.0 {
        return Ordering::Less;
    }
    let bits = x.to_bits();
    let biased = ((bits >> 52) & 0x7FF) as i32;
    let fraction = bits & ((1 << 52) - 1);
    let (mantissa, power_of_two) = if biased == 0 {
        (fraction, -1074)
    } else {
        (fraction | (1 << 52), biased - 1075)
    };
    // x is an odd integer times 2^power: an integer if power >= 0, else a number with
    // exactly -power decimal places, which fixed-point formatting prints exactly.
    let power = power_of_two + mantissa.trailing_zeros() as i32;
    let places = usize::try_from(-power).unwrap_or(0);
    let text = format!("{x:.places$}");
    let integer_len = text.find('.').unwrap_or(text.len());
    let all: Vec<u8> = text.bytes().filter(|&b| b != b'.').collect();
    let first = all.iter().position(|&b| b != b'0').unwrap_or(0);
    let x_exponent = integer_len as i32 - 1 - first as i32;
    x_exponent
        .cmp(&exponent)
        .then_with(|| trim_zeros(&all[first..]).cmp(digits))
}

/// The decimal digits of `n` (at least one) as ASCII, written into the end of `buf`.
pub(crate) fn ascii_digits(mut n: u128, buf: &mut [u8; 40]) -> &[u8] {
    let mut start = buf.len();
    loop {
        start -= 1;
        buf[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[start..];
        }
    }
}

pub(crate) fn trim_zeros(digits: &[u8]) -> &[u8] {
    let end = digits.iter().rposition(|&b| b != b'0').map_or(0, |i| i + 1);
    &digits[..end]
}

/// Both coefficients scaled to the smaller exponent, when that fits in u128.
fn align(ca: u128, ea: i32, cb: u128, eb: i32) -> Option<(u128, u128)> {
    let scale = |c: u128, by: i32| {
        u32::try_from(by)
            .ok()
            .and_then(|by| 10u128.checked_pow(by))
            .and_then(|f| c.checked_mul(f))
    };
    if ea >= eb {
        Some((scale(ca, ea - eb)?, cb))
    } else {
        Some((ca, scale(cb, eb - ea)?))
    }
}

/// Coefficients at a common exponent for addition. When exact alignment would overflow,
/// the operand with the larger exponent (which is then at least 10^4 times larger) is
/// widened to 38 digits and the other is cut to that exponent plus one sticky digit, so
/// that rounding the sum to 34 digits is still correct.
fn align_for_sum(ca: u128, ea: i32, cb: u128, eb: i32) -> (u128, u128, i32) {
    if let Some((x, y)) = align(ca, ea, cb, eb) {
        return (x, y, ea.min(eb));
    }
    let swapped = ea < eb;
    let ((big, big_exp), (small, small_exp)) = if swapped {
        ((cb, eb), (ca, ea))
    } else {
        ((ca, ea), (cb, eb))
    };
    let widen = 37 - digit_count(big);
    let exponent = big_exp - widen as i32;
    let big = big * 10u128.pow(widen) * 10;
    let small = match u32::try_from(exponent - small_exp)
        .ok()
        .and_then(|cut| 10u128.checked_pow(cut))
    {
        Some(divisor) => small / divisor * 10 + u128::from(small % divisor != 0),
        None => u128::from(small != 0),
    };
    if swapped {
        (small, big, exponent - 1)
    } else {
        (big, small, exponent - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Dec {
        Dec::parse(&Decimal128::from_str(s).unwrap())
    }

    fn text(v: Dec) -> String {
        v.to_decimal128().to_string()
    }

    #[test]
    fn division_is_exact_to_34_digits_at_the_preferred_exponent() {
        let quotient = |a: &str, b: &str| d(a).divide(d(b)).map(text);
        assert_eq!(
            quotient("10", "3").unwrap(),
            "3.333333333333333333333333333333333"
        );
        assert_eq!(
            quotient("100", "7").unwrap(),
            "14.28571428571428571428571428571429"
        );
        assert_eq!(quotient("60", "3").unwrap(), "20");
        assert_eq!(quotient("1", "4").unwrap(), "0.25");
        assert_eq!(quotient("6.00", "2").unwrap(), "3.00");
        assert_eq!(
            quotient("2", "3").unwrap(),
            "0.6666666666666666666666666666666667"
        );
        assert_eq!(
            quotient("9.999999999999999999999999999999999E+6144", "2").unwrap(),
            "5.000000000000000000000000000000000E+6144"
        );
        assert_eq!(quotient("-1", "8").unwrap(), "-0.125");
        assert_eq!(quotient("1", "0"), None);
        assert_eq!(quotient("0", "0"), None);
        assert_eq!(quotient("0", "5").unwrap(), "0");
    }

    #[test]
    fn arithmetic_keeps_decimal_exponents() {
        assert_eq!(text(d("1.1").add(d("2.2"))), "3.3");
        assert_eq!(text(d("1.5").multiply(d("2"))), "3.0");
        assert_eq!(text(d("1").add(d("-1"))), "0");
        assert_eq!(text(d("0.1").add(Dec::from_f64(0.5))), "0.600000000000000");
        assert_eq!(
            text(d("1E+100").add(d("1"))),
            "1.000000000000000000000000000000000E+100"
        );
        assert_eq!(text(d("Infinity").add(d("-Infinity"))), "NaN");
        // 34 nines plus one half rounds (half to even) up to the next power of ten.
        let nines = "9".repeat(34);
        assert_eq!(
            text(d(&nines).add(d("0.5"))),
            "1.000000000000000000000000000000000E+34"
        );
        assert_eq!(
            text(d(&nines).multiply(d(&nines))),
            "9.999999999999999999999999999999998E+67"
        );
        assert_eq!(
            text(d("1E+40").add(d(&format!("-{nines}")))),
            "9.999990000000000000000000000000000E+39"
        );
    }

    #[test]
    fn comparison_is_exact() {
        assert_eq!(
            d("1.0000000000000000000000000000001").compare(d("1")),
            Ordering::Greater
        );
        assert_eq!(d("1.10").compare(d("1.1")), Ordering::Equal);
        assert_eq!(d("-0").compare(d("0")), Ordering::Equal);
        assert_eq!(d("-5").compare(d("-4")), Ordering::Less);
        assert_eq!(d("NaN").compare(d("-Infinity")), Ordering::Less);
        assert_eq!(d("1E+2").compare(Dec::from_i64(100)), Ordering::Equal);
        assert_eq!(d("99").compare(Dec::from_i64(100)), Ordering::Less);
    }

    #[test]
    fn thirty_four_digits_below_one() {
        // Formatted as "0.1000...", whose leading zero is not one of the 34 digits.
        assert_eq!(
            d("0.1000000000000000055511151231257827"),
            Dec::Finite {
                negative: false,
                coefficient: 1_000_000_000_000_000_055_511_151_231_257_827,
                exponent: -34,
            }
        );
        assert_eq!(
            d("-0.0001234567890123456789012345678901234"),
            Dec::Finite {
                negative: true,
                coefficient: 1_234_567_890_123_456_789_012_345_678_901_234,
                exponent: -37,
            }
        );
    }

    #[test]
    fn bits_decode_like_bson_formats_them() {
        for text in [
            "0",
            "-0",
            "1",
            "-1",
            "1.5",
            "123.456",
            "1E+3",
            "-1.05E+3",
            "0.000001",
            "1E-7",
            "9.999999999999999999999999999999999E+6144",
            "1E-6176",
            "-5E-6176",
            "Infinity",
            "-Infinity",
            "NaN",
            "1234567890123456789012345678901234",
            "0.1000000000000000055511151231257827",
        ] {
            let decimal = Decimal128::from_str(text).unwrap();
            let decoded = Dec::parse(&decimal);
            assert_eq!(
                decoded.to_decimal128().to_string(),
                decimal.to_string(),
                "{text} decoded as {decoded:?}"
            );
        }
    }

    #[test]
    fn comparison_with_doubles_is_exact() {
        // The double 0.1 is 0.1000000000000000055511151231257827021181583404541015625.
        assert_eq!(d("0.1").compare_f64(0.1), Ordering::Less);
        assert_eq!(
            d("0.1000000000000000055511151231257827").compare_f64(0.1),
            Ordering::Less
        );
        assert_eq!(
            d("0.1000000000000000055511151231257828").compare_f64(0.1),
            Ordering::Greater
        );
        assert_eq!(d("-0.1").compare_f64(-0.1), Ordering::Greater);
        // The double 0.3 is 0.299999999999999988897769753748434595763683319091796875.
        assert_eq!(d("0.3").compare_f64(0.3), Ordering::Greater);
        assert_eq!(d("0.5").compare_f64(0.5), Ordering::Equal);
        assert_eq!(d("-2.50").compare_f64(-2.5), Ordering::Equal);
        assert_eq!(d("-0").compare_f64(0.0), Ordering::Equal);
        assert_eq!(d("0").compare_f64(-5e-324), Ordering::Greater);
        assert_eq!(d("1E-400").compare_f64(5e-324), Ordering::Less);
        assert_eq!(d("1E+400").compare_f64(f64::MAX), Ordering::Greater);
        assert_eq!(d("1E+400").compare_f64(f64::INFINITY), Ordering::Less);
        assert_eq!(
            d("-Infinity").compare_f64(f64::NEG_INFINITY),
            Ordering::Equal
        );
        assert_eq!(d("NaN").compare_f64(f64::NAN), Ordering::Equal);
        assert_eq!(d("NaN").compare_f64(f64::NEG_INFINITY), Ordering::Less);
        assert_eq!(d("-Infinity").compare_f64(f64::NAN), Ordering::Greater);
        assert_eq!(
            d("9007199254740993").compare_f64(9007199254740992.0),
            Ordering::Greater
        );
    }

    #[test]
    fn conversions() {
        assert_eq!(d("1.5E+3").to_f64(), 1500.0);
        assert_eq!(text(Dec::from_f64(0.1)), "0.100000000000000");
        assert!(d("-NaN").to_f64().is_nan());
    }
}
