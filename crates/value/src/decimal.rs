//! Exact arithmetic and comparison for Decimal128 values, which the `bson` crate stores
//! but cannot compute with.
//!
//! A decimal is read from its canonical string form into a sign, an integer coefficient
//! and a power-of-ten exponent. That is enough to compare decimals with each other and with
//! integers exactly, and to add, subtract and multiply them with IEEE 754's preferred
//! exponents (so `1.1 + 2.2` is `3.3` and `1.5 * 2` is `3.0`, as MongoDB prints them).
//! Results wider than 34 digits are handed back to `bson`'s parser, which rounds them.
//! Doubles enter decimal arithmetic rounded to 15 significant digits, as MongoDB does.

use bson::Decimal128;
use std::cmp::Ordering;
use std::str::FromStr;

/// A parsed Decimal128.
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
    pub(crate) fn parse(d: &Decimal128) -> Dec {
        let text = d.to_string();
        let (negative, unsigned) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text.as_str()),
        };
        match unsigned {
            "NaN" => return Dec::NaN,
            "Infinity" => return Dec::Infinity { negative },
            _ => {}
        }
        let (mantissa, exp) = match unsigned.split_once('E') {
            Some((m, e)) => (m, e.parse::<i32>().unwrap_or(0)),
            None => (unsigned, 0),
        };
        let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        let digits = format!("{int_part}{frac_part}");
        debug_assert!(digits.len() <= 34, "Decimal128 has at most 34 digits");
        Dec::Finite {
            negative,
            coefficient: digits.parse().unwrap_or(0),
            exponent: exp - frac_part.len() as i32,
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
    fn conversions() {
        assert_eq!(d("1.5E+3").to_f64(), 1500.0);
        assert_eq!(text(Dec::from_f64(0.1)), "0.100000000000000");
        assert!(d("-NaN").to_f64().is_nan());
    }
}
