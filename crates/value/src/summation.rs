//! `$sum` and `$avg` as MongoDB computes them, to the last digit and type.
//!
//! Integers and doubles are summed in double-double arithmetic (a pair of doubles whose
//! sum is the running total, each addition compensated for its rounding error), so
//! `0.1 + 0.2 + 0.3` is `0.6` and a sum of int64s that overflows on the way but ends in
//! range is exact; decimals are summed apart in decimal128. The result takes the widest
//! type of the inputs: an int32 sum stays an int32 while it fits (an int64, then a
//! double, beyond), an int64 sum an int64, and with any decimal input the total is the
//! decimals' sum plus the other inputs' total converted to 34 digits (so a double's
//! binary inexactness shows: `0.1` adds `0.1000000000000000055511151231257827`).
//!
//! `$avg` sums the same way and divides in decimal128 when a decimal was among its
//! inputs. (Its expression form adds every non-decimal input as a double: in MongoDB
//! 8.0 `{$avg: [int64 max, int64 min]}` is `0.0` where the `$group` accumulator gives
//! `-0.5`; [`Summation::add_as_double`].)

use crate::decimal_math::{self, Wide};
use crate::number::Number;
use bson::Bson;

/// A running sum of doubles kept as `sum + addend` (double-double), with infinities and
/// NaNs apart, as IEEE arithmetic on them does not compensate.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct DoubleDouble {
    sum: f64,
    addend: f64,
    special: f64,
}

/// `a + b` and its rounding error, exactly (Knuth's two-sum).
fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let sum = a + b;
    let b_virtual = sum - a;
    let a_virtual = sum - b_virtual;
    (sum, (a - a_virtual) + (b - b_virtual))
}

impl DoubleDouble {
    fn add_f64(&mut self, x: f64) {
        if !x.is_finite() {
            self.special += x;
            return;
        }
        let (high, low) = two_sum(self.sum, x);
        if !high.is_finite() {
            // The sum overflowed: from here on it is that infinity.
            self.special += high;
            return;
        }
        let (sum, addend) = two_sum(high, self.addend + low);
        self.sum = sum;
        self.addend = addend;
    }

    /// Adds an int64 exactly: its high and low 32 bits are each a double.
    fn add_i64(&mut self, x: i64) {
        let high = x & !0xFFFF_FFFF;
        self.add_f64(high as f64);
        self.add_f64((x - high) as f64);
    }

    fn merge(&mut self, other: DoubleDouble) {
        self.special += other.special;
        self.add_f64(other.sum);
        self.add_f64(other.addend);
    }

    fn is_special(&self) -> bool {
        self.special != 0.0 || self.special.is_nan()
    }

    fn to_f64(self) -> f64 {
        if self.is_special() {
            self.special
        } else {
            self.sum + self.addend
        }
    }

    /// The total as an int64 when it is one (the inputs were integers and it is in
    /// range).
    fn to_i64(self) -> Option<i64> {
        if self.is_special() || self.sum.fract() != 0.0 || self.addend.fract() != 0.0 {
            return None;
        }
        // Both parts are integers below 2^64 in magnitude (or the sum overflowed i128's
        // conversion, which saturates out of i64's range).
        i64::try_from(self.sum as i128 + self.addend as i128).ok()
    }

    /// The total in decimal128: the two parts converted to 34 digits and added, as
    /// MongoDB converts a double-double (a zero total is a plain `0`).
    fn to_decimal(self, context: &mut dec::Context<Wide>) -> Wide {
        let mut total = Wide::zero();
        let (sum, addend) = if self.is_special() {
            (self.special, 0.0)
        } else {
            (self.sum, self.addend)
        };
        if sum != 0.0 {
            for part in [sum, addend] {
                let part = decimal_math::from_f64(context, part);
                context.add(&mut total, &part);
            }
        }
        total
    }
}

/// The widest numeric type among a sum's inputs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
enum Widest {
    #[default]
    Int32,
    Int64,
    Double,
    Decimal,
}

/// The running state of `$sum` or `$avg`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Summation {
    widest: Widest,
    non_decimal: DoubleDouble,
    /// The decimals' sum, from a plain `0`; `None` until a decimal is added.
    decimal: Option<Wide>,
}

impl Summation {
    /// Adds a number as `$sum` does: integers exactly, doubles compensated, decimals in
    /// decimal128.
    pub fn add(&mut self, n: Number) {
        match n {
            Number::Int32(i) => self.non_decimal.add_i64(i64::from(i)),
            Number::Int64(i) => {
                self.widest = self.widest.max(Widest::Int64);
                self.non_decimal.add_i64(i);
            }
            Number::Double(x) => {
                self.widest = self.widest.max(Widest::Double);
                self.non_decimal.add_f64(x);
            }
            Number::Decimal(d) => {
                self.widest = Widest::Decimal;
                let mut context = decimal_math::decimal128_context();
                let d = decimal_math::wide(&mut context, d);
                let total = self.decimal.get_or_insert_with(Wide::zero);
                context.add(total, &d);
            }
        }
    }

    /// Adds integers as `add` would one by one (`long`: some were int64s): their total,
    /// exact in any order, added at once.
    pub fn add_integers(&mut self, values: impl IntoIterator<Item = i64>, long: bool) {
        let (mut total, mut any) = (0i128, false);
        for value in values {
            total += i128::from(value);
            any = true;
        }
        if any {
            self.add_integer_total(total, long);
        }
    }

    /// Adds an exact integer total, as [`Summation::add_integers`].
    pub fn add_integer_total(&mut self, total: i128, long: bool) {
        if long {
            self.widest = self.widest.max(Widest::Int64);
        }
        // Each part is a double exactly: below 2^32, and the rest's 32 low bits zero (a
        // total of up to 2^85 has at most 53 significant bits left).
        let high = total & !0xFFFF_FFFF;
        self.non_decimal.add_f64(high as f64);
        self.non_decimal.add_f64((total - high) as f64);
    }

    /// Adds doubles as `add` would one by one, in four double-double lanes merged at the
    /// end, which keeps the additions from waiting on each other. The total agrees with
    /// one lane's to about 2^-100 of its magnitude, far below a double's last bit.
    pub fn add_doubles(&mut self, values: impl IntoIterator<Item = f64>) {
        let mut lanes = [DoubleDouble::default(); 4];
        let mut count = 0;
        for x in values {
            lanes[count % 4].add_f64(x);
            count += 1;
        }
        if count > 0 {
            self.widest = self.widest.max(Widest::Double);
            for lane in lanes {
                self.non_decimal.merge(lane);
            }
        }
    }

    /// Adds a number as the expression `$avg` does: decimals as decimals, anything else
    /// as a double.
    pub fn add_as_double(&mut self, n: Number) {
        match n {
            Number::Decimal(_) => self.add(n),
            other => self.add(Number::Double(other.to_f64())),
        }
    }

    /// Absorbs the sum of other inputs (a partition's, or a window's part).
    pub fn merge(&mut self, other: Summation) {
        self.widest = self.widest.max(other.widest);
        self.non_decimal.merge(other.non_decimal);
        if let Some(other) = other.decimal {
            let mut context = decimal_math::decimal128_context();
            let total = self.decimal.get_or_insert_with(Wide::zero);
            context.add(total, &other);
        }
    }

    /// The decimal total: the decimals' sum first (a NaN among them is the one that
    /// shows, sign included), then the other inputs'.
    fn decimal_total(&self, context: &mut dec::Context<Wide>) -> Wide {
        let mut total = self.decimal.unwrap_or_else(Wide::zero);
        let rest = self.non_decimal.to_decimal(context);
        context.add(&mut total, &rest);
        total
    }

    /// `$sum`'s result, in the widest type of the inputs (an integer sum out of its
    /// type's range widens).
    pub fn total(&self) -> Bson {
        match self.widest {
            Widest::Int32 | Widest::Int64 => match self.non_decimal.to_i64() {
                Some(i) if self.widest == Widest::Int32 => {
                    i32::try_from(i).map_or(Bson::Int64(i), Bson::Int32)
                }
                Some(i) => Bson::Int64(i),
                None => Bson::Double(self.non_decimal.to_f64()),
            },
            Widest::Double => Bson::Double(self.non_decimal.to_f64()),
            Widest::Decimal => {
                let mut context = decimal_math::decimal128_context();
                Bson::Decimal128(decimal_math::narrow(&self.decimal_total(&mut context)))
            }
        }
    }

    /// `$avg`'s result over `count` inputs: null for none, a decimal when a decimal
    /// was among them, a double otherwise.
    pub fn mean(&self, count: u64) -> Bson {
        if count == 0 {
            return Bson::Null;
        }
        if self.decimal.is_none() {
            return Bson::Double(self.non_decimal.to_f64() / count as f64);
        }
        let mut context = decimal_math::decimal128_context();
        let mut total = self.decimal_total(&mut context);
        let count = context.from_u64(count);
        context.div(&mut total, &count);
        Bson::Decimal128(decimal_math::narrow(&total))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_sum_as_values_one_by_one() {
        let doubles: Vec<f64> = (0..1000).map(|i| f64::from(i) * 0.1 - 7.3).collect();
        let mut one_by_one = Summation::default();
        doubles
            .iter()
            .for_each(|d| one_by_one.add(Number::Double(*d)));
        let mut batch = Summation::default();
        batch.add_doubles(doubles.iter().copied());
        assert_eq!(batch.total(), one_by_one.total());
        for (values, long) in [
            (vec![i64::from(i32::MAX), 1], false),
            (vec![i64::MAX, 5, -10], true),
        ] {
            let mut one_by_one = Summation::default();
            for v in &values {
                one_by_one.add(if long {
                    Number::Int64(*v)
                } else {
                    Number::Int32(*v as i32)
                });
            }
            let mut batch = Summation::default();
            batch.add_integers(values.iter().copied(), long);
            assert_eq!(batch.total(), one_by_one.total());
        }
        let mut empty = Summation::default();
        empty.add_doubles([]);
        empty.add_integers([], true);
        assert_eq!(empty.total(), Bson::Int32(0));
    }

    use bson::Decimal128;
    use std::str::FromStr;

    fn d(s: &str) -> Number {
        Number::Decimal(Decimal128::from_str(s).unwrap())
    }

    fn sum(values: &[Number]) -> Bson {
        let mut s = Summation::default();
        values.iter().for_each(|n| s.add(*n));
        s.total()
    }

    fn avg(values: &[Number]) -> Bson {
        let mut s = Summation::default();
        values.iter().for_each(|n| s.add(*n));
        s.mean(values.len() as u64)
    }

    fn text(b: Bson) -> String {
        match b {
            Bson::Decimal128(d) => d.to_string(),
            other => panic!("not a decimal: {other:?}"),
        }
    }

    #[test]
    fn doubles_are_compensated() {
        let tenths = [Number::Double(0.1); 10];
        assert_eq!(sum(&tenths), Bson::Double(1.0));
        let three = [0.1, 0.2, 0.3].map(Number::Double);
        assert_eq!(sum(&three), Bson::Double(0.6));
        let overflow = [Number::Double(f64::MAX), Number::Double(f64::MAX)];
        assert_eq!(sum(&overflow), Bson::Double(f64::INFINITY));
        let cancel = [
            Number::Double(f64::INFINITY),
            Number::Double(f64::NEG_INFINITY),
        ];
        assert!(matches!(sum(&cancel), Bson::Double(x) if x.is_nan()));
    }

    #[test]
    fn integers_keep_their_type_and_recover_from_overflow() {
        let ints = [Number::Int32(i32::MAX), Number::Int32(1), Number::Int32(-1)];
        assert_eq!(sum(&ints), Bson::Int32(i32::MAX));
        let ints = [Number::Int32(i32::MAX), Number::Int32(1)];
        assert_eq!(sum(&ints), Bson::Int64(i64::from(i32::MAX) + 1));
        let longs = [Number::Int64(i64::MAX), Number::Int64(1), Number::Int64(-1)];
        assert_eq!(sum(&longs), Bson::Int64(i64::MAX));
        let longs = [Number::Int64(i64::MAX), Number::Int64(1)];
        assert_eq!(sum(&longs), Bson::Double(9_223_372_036_854_775_808.0));
        assert_eq!(sum(&[]), Bson::Int32(0));
    }

    #[test]
    fn decimals_keep_their_digits() {
        assert_eq!(text(sum(&[d("1E-6176"), d("1E-6176")])), "2E-6176");
        assert_eq!(text(sum(&[d("1E-6176"), d("-1E-6176")])), "0E-6176");
        assert_eq!(text(sum(&[Number::Double(2.5), d("3.5")])), "6.0");
        assert_eq!(text(sum(&[Number::Double(1.0), d("0")])), "1");
        assert_eq!(
            text(sum(&[Number::Double(0.1), d("0")])),
            "0.1000000000000000055511151231257827"
        );
        let overflow = [Number::Int64(i64::MAX), Number::Int64(1), d("0")];
        assert_eq!(text(sum(&overflow)), "9223372036854775808");
    }

    #[test]
    fn a_decimal_nan_keeps_its_sign() {
        let negative_nan = Decimal128::from_bytes({
            let mut b = [0; 16];
            b[15] = 0xFC;
            b
        });
        let Bson::Decimal128(total) =
            sum(&[Number::Double(f64::NAN), Number::Decimal(negative_nan)])
        else {
            panic!("not a decimal")
        };
        assert_eq!(total.bytes()[15], 0xFC);
    }

    #[test]
    fn averages() {
        let extremes = [Number::Int64(i64::MAX), Number::Int64(i64::MIN)];
        assert_eq!(avg(&extremes), Bson::Double(-0.5));
        let mut as_doubles = Summation::default();
        extremes.iter().for_each(|n| as_doubles.add_as_double(*n));
        assert_eq!(as_doubles.mean(2), Bson::Double(0.0));
        assert_eq!(text(avg(&[Number::Double(4.0), d("6.0")])), "5.0");
        assert_eq!(text(avg(&[Number::Double(2.0), d("4")])), "3");
        assert_eq!(
            text(avg(&[Number::Double(0.1), d("0.2")])),
            "0.1500000000000000027755575615628914"
        );
        assert_eq!(text(avg(&[d("Infinity"), d("-Infinity")])), "NaN");
        assert_eq!(avg(&[]), Bson::Null);
    }
}
