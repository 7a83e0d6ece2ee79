//! The time units of `$setWindowFields` range windows and `$densify` steps
//! (`millisecond` ... `year`, `basalt_expr::TimeUnit`, which also adds them to dates as
//! `$dateAdd` does in UTC), with these stages' error for an unknown unit.

use basalt_error::{Error, Result};
use basalt_expr::TimeUnit;

/// The unit named `name`; BadValue otherwise.
pub(crate) fn parse_unit(name: &str) -> Result<TimeUnit> {
    TimeUnit::from_name(name)
        .ok_or_else(|| Error::bad_value(format!("unknown time unit value: {name}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use basalt_expr::{civil_from_days, days_from_civil};

    fn ms(year: i64, month: u32, day: u32) -> i64 {
        days_from_civil(year, month, day) * 86_400_000
    }

    #[test]
    fn adds_fixed_and_calendar_units() {
        assert_eq!(TimeUnit::Hour.add_utc(0, 2), 7_200_000);
        assert_eq!(TimeUnit::Week.add_utc(ms(2024, 1, 1), -1), ms(2023, 12, 25));
        assert_eq!(TimeUnit::Month.add_utc(ms(2024, 1, 31), 1), ms(2024, 2, 29));
        assert_eq!(
            TimeUnit::Quarter.add_utc(ms(2023, 11, 30), 1),
            ms(2024, 2, 29)
        );
        assert_eq!(
            TimeUnit::Year.add_utc(ms(2024, 2, 29) + 5, -1),
            ms(2023, 2, 28) + 5
        );
        assert_eq!(
            TimeUnit::Month.add_utc(ms(1969, 12, 15), 1),
            ms(1970, 1, 15)
        );
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(parse_unit("fortnight").unwrap_err().code.0, 2);
        // Absurd amounts saturate instead of overflowing.
        assert!(TimeUnit::Year.add_utc(0, i64::MAX) > 0);
        assert!(TimeUnit::Week.add_utc(0, i64::MIN) < 0);
    }
}
