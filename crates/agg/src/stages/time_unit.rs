//! The time units of `$setWindowFields` range windows and `$densify` steps
//! (`millisecond` ... `year`), and adding a number of them to a date as `$dateAdd` does in
//! UTC: fixed lengths up to a week, calendar months for `month`, `quarter` and `year`
//! (a day past the end of the target month is clamped to its last day).

use basalt_error::{Error, Result};
use basalt_expr::{civil_from_days, days_from_civil};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TimeUnit {
    Millisecond,
    Second,
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Quarter,
    Year,
}

impl TimeUnit {
    pub(crate) fn parse(name: &str) -> Result<TimeUnit> {
        Ok(match name {
            "millisecond" => TimeUnit::Millisecond,
            "second" => TimeUnit::Second,
            "minute" => TimeUnit::Minute,
            "hour" => TimeUnit::Hour,
            "day" => TimeUnit::Day,
            "week" => TimeUnit::Week,
            "month" => TimeUnit::Month,
            "quarter" => TimeUnit::Quarter,
            "year" => TimeUnit::Year,
            _ => return Err(Error::bad_value(format!("unknown time unit value: {name}"))),
        })
    }

    /// The length in milliseconds of units up to a week; `None` for calendar units.
    pub(crate) fn fixed_millis(self) -> Option<i64> {
        Some(match self {
            TimeUnit::Millisecond => 1,
            TimeUnit::Second => 1_000,
            TimeUnit::Minute => 60_000,
            TimeUnit::Hour => 3_600_000,
            TimeUnit::Day => 86_400_000,
            TimeUnit::Week => 604_800_000,
            TimeUnit::Month | TimeUnit::Quarter | TimeUnit::Year => return None,
        })
    }

    /// `millis` (since the epoch) plus `amount` of this unit.
    pub(crate) fn add(self, millis: i64, amount: i64) -> i64 {
        let months = match (self.fixed_millis(), self) {
            (Some(unit), _) => return millis.saturating_add(unit.saturating_mul(amount)),
            (None, TimeUnit::Quarter) => amount.saturating_mul(3),
            (None, TimeUnit::Year) => amount.saturating_mul(12),
            (None, _) => amount,
        };
        let day = millis.div_euclid(86_400_000);
        let time_of_day = millis.rem_euclid(86_400_000);
        let (year, month, day_of_month) = civil_from_days(day);
        // Dates span about ±292 million years; clamping keeps the arithmetic in range.
        const MONTHS_MAX: i64 = 300_000_000 * 12;
        let month_index = (year * 12 + (month as i64 - 1))
            .saturating_add(months)
            .clamp(-MONTHS_MAX, MONTHS_MAX);
        let (year, month) = (
            month_index.div_euclid(12),
            month_index.rem_euclid(12) as u32 + 1,
        );
        let day_of_month = day_of_month.min(days_in_month(year, month));
        days_from_civil(year, month, day_of_month)
            .saturating_mul(86_400_000)
            .saturating_add(time_of_day)
    }
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(year: i64, month: u32, day: u32) -> i64 {
        days_from_civil(year, month, day) * 86_400_000
    }

    #[test]
    fn adds_fixed_and_calendar_units() {
        assert_eq!(TimeUnit::Hour.add(0, 2), 7_200_000);
        assert_eq!(TimeUnit::Week.add(ms(2024, 1, 1), -1), ms(2023, 12, 25));
        assert_eq!(TimeUnit::Month.add(ms(2024, 1, 31), 1), ms(2024, 2, 29));
        assert_eq!(TimeUnit::Quarter.add(ms(2023, 11, 30), 1), ms(2024, 2, 29));
        assert_eq!(
            TimeUnit::Year.add(ms(2024, 2, 29) + 5, -1),
            ms(2023, 2, 28) + 5
        );
        assert_eq!(TimeUnit::Month.add(ms(1969, 12, 15), 1), ms(1970, 1, 15));
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(TimeUnit::parse("fortnight").unwrap_err().code.0, 2);
        // Absurd amounts saturate instead of overflowing.
        assert!(TimeUnit::Year.add(0, i64::MAX) > 0);
        assert!(TimeUnit::Week.add(0, i64::MIN) < 0);
    }
}
