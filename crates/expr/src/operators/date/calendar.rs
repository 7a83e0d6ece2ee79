//! Proleptic Gregorian calendar arithmetic (the calendar MongoDB uses for every date):
//! day numbers, calendar fields of a moment, ISO 8601 weeks.

pub(crate) const DAY_MS: i64 = 86_400_000;

/// A moment split into calendar fields.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Civil {
    pub year: i64,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    pub millis: u32,
    /// 1 (Sunday) to 7 (Saturday).
    pub day_of_week: u32,
    /// 1 to 366.
    pub day_of_year: u32,
}

impl Civil {
    /// The fields of local wall-clock milliseconds since 1970-01-01T00:00.
    pub fn from_millis(ms: i64) -> Civil {
        let days = ms.div_euclid(DAY_MS);
        let in_day = ms.rem_euclid(DAY_MS);
        let (year, month, day) = civil_from_days(days);
        Civil {
            year,
            month,
            day,
            hour: (in_day / 3_600_000) as u32,
            minute: (in_day / 60_000 % 60) as u32,
            second: (in_day / 1000 % 60) as u32,
            millis: (in_day % 1000) as u32,
            day_of_week: day_of_week(days),
            day_of_year: (days - days_from_civil(year, 1, 1) + 1) as u32,
        }
    }

    /// 1 (Monday) to 7 (Sunday).
    pub fn iso_day_of_week(&self) -> u32 {
        (self.day_of_week + 5) % 7 + 1
    }

    /// The ISO 8601 week-numbering year and week.
    pub fn iso_week(&self) -> (i64, u32) {
        let week = (self.day_of_year as i64 - self.iso_day_of_week() as i64 + 10) / 7;
        if week < 1 {
            (self.year - 1, iso_weeks_in_year(self.year - 1))
        } else if week > i64::from(iso_weeks_in_year(self.year)) {
            (self.year + 1, 1)
        } else {
            (self.year, week as u32)
        }
    }

    /// Week of the year with weeks starting on Sunday, 0 before the first Sunday.
    pub fn week(&self) -> u32 {
        (self.day_of_year + 6 - (self.day_of_week - 1)) / 7
    }
}

/// 1 (Sunday) to 7 (Saturday) of a day number; 1970-01-01 was a Thursday.
pub(crate) fn day_of_week(days: i64) -> u32 {
    ((days + 4).rem_euclid(7) + 1) as u32
}

fn iso_weeks_in_year(year: i64) -> u32 {
    // A year has 53 ISO weeks when it starts on a Thursday, or on a Wednesday in a leap
    // year.
    let leap = days_in_month(year, 2) == 29;
    match day_of_week(days_from_civil(year, 1, 1)) {
        5 => 53,
        4 if leap => 53,
        _ => 52,
    }
}

/// The day number of the Monday that starts ISO week 1 of `year` (the week with 4 January).
pub(crate) fn iso_year_start(year: i64) -> i64 {
    let jan4 = days_from_civil(year, 1, 4);
    jan4 - i64::from((day_of_week(jan4) + 5) % 7)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The (year, month, day) of a day number since 1970-01-01.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

pub(crate) fn days_in_month(year: i64, month: u32) -> u32 {
    let next = if month == 12 {
        days_from_civil(year + 1, 1, 1)
    } else {
        days_from_civil(year, month + 1, 1)
    };
    (next - days_from_civil(year, month, 1)) as u32
}

/// The day number of month `month0` (months since year 0, January = 0) and day `day`,
/// letting a day past the month's end carry into the next months.
pub(crate) fn days_from_month_index(month0: i64, day: i64) -> i64 {
    let (year, month) = (month0.div_euclid(12), month0.rem_euclid(12) as u32 + 1);
    days_from_civil(year, month, 1) + day - 1
}

/// Local milliseconds of a calendar date and time-of-day, for building dates in tests.
#[cfg(test)]
pub(crate) fn millis(year: i64, month: u32, day: u32, hms: (u32, u32, u32), ms: u32) -> i64 {
    days_from_civil(year, month, day) * DAY_MS
        + i64::from(hms.0) * 3_600_000
        + i64::from(hms.1) * 60_000
        + i64::from(hms.2) * 1000
        + i64::from(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calendar_round_trips() {
        for days in [-800_000_i64, -1, 0, 1, 59, 365, 11_016, 20_000, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        let c = Civil::from_millis(millis(2016, 2, 29, (13, 5, 7), 89));
        assert_eq!(
            (c.year, c.month, c.day, c.hour, c.minute, c.second, c.millis),
            (2016, 2, 29, 13, 5, 7, 89)
        );
        assert_eq!(c.day_of_week, 2); // a Monday
        assert_eq!(c.day_of_year, 60);
    }

    #[test]
    fn iso_weeks() {
        // ISO 2016 starts on Monday 2016-01-04; ISO 2015 on Monday 2014-12-29.
        assert_eq!(iso_year_start(2016), days_from_civil(2016, 1, 4));
        assert_eq!(iso_year_start(2015), days_from_civil(2014, 12, 29));
        assert_eq!(iso_weeks_in_year(2015), 53);
        assert_eq!(iso_weeks_in_year(2016), 52);
        assert_eq!(
            days_from_month_index(2021 * 12 + 13, 1),
            days_from_civil(2022, 2, 1)
        );
        assert_eq!(
            days_from_month_index(2021 * 12, 32),
            days_from_civil(2021, 2, 1)
        );
    }
}
