//! Calendar arithmetic on dates: `$dateAdd`/`$dateSubtract` (move by whole units),
//! `$dateDiff` (count unit boundaries crossed between two dates) and `$dateTrunc`
//! (round down to a multiple of a unit, counted from 2000-01-01 as MongoDB does).
//!
//! Units of a day or more work on the wall clock of the `timezone`, so a day across a
//! daylight-saving change is 23 or 25 hours; months clamp to their last day.

use super::calendar::{
    civil_from_days, day_of_week, days_from_civil, days_from_month_index, days_in_month, Civil,
    DAY_MS,
};
use super::{as_date, date_value, integral, parse_args, required, TimezoneArg};
use crate::context::ParseContext;
use crate::env::Env;
use crate::expression::{is_nullish, type_name, Expression};
use crate::numeric::display;
use basalt_error::{Error, Result};
use bson::Bson;

/// A time unit of the date operators, `$setWindowFields` range windows and `$densify`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeUnit {
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
    /// The unit's length when it is a fixed number of milliseconds (an hour or less).
    fn fixed_ms(self) -> Option<i64> {
        match self {
            TimeUnit::Millisecond => Some(1),
            TimeUnit::Second => Some(1000),
            TimeUnit::Minute => Some(60_000),
            TimeUnit::Hour => Some(3_600_000),
            _ => None,
        }
    }

    /// The unit MongoDB names `name`.
    pub fn from_name(name: &str) -> Option<TimeUnit> {
        TimeUnit::ALL.into_iter().find(|u| u.name() == name)
    }

    const ALL: [TimeUnit; 9] = [
        TimeUnit::Millisecond,
        TimeUnit::Second,
        TimeUnit::Minute,
        TimeUnit::Hour,
        TimeUnit::Day,
        TimeUnit::Week,
        TimeUnit::Month,
        TimeUnit::Quarter,
        TimeUnit::Year,
    ];

    /// The length in milliseconds of units up to a week in UTC (no daylight-saving
    /// change); `None` for calendar units.
    pub fn utc_length_ms(self) -> Option<i64> {
        match self {
            TimeUnit::Day => Some(DAY_MS),
            TimeUnit::Week => Some(7 * DAY_MS),
            unit => unit.fixed_ms(),
        }
    }

    /// `millis` (since the epoch) plus `amount` of this unit in UTC, as `$dateAdd`
    /// counts: a day past the end of the target month is clamped to its last day;
    /// results beyond the representable dates saturate.
    pub fn add_utc(self, millis: i64, amount: i64) -> i64 {
        let Some(months_per_unit) = self.months() else {
            let unit = self.utc_length_ms().unwrap_or(1);
            return millis.saturating_add(unit.saturating_mul(amount));
        };
        let day = millis.div_euclid(DAY_MS);
        let time_of_day = millis.rem_euclid(DAY_MS);
        let (year, month, day_of_month) = civil_from_days(day);
        // Dates span about ±292 million years; clamping keeps the arithmetic in range.
        const MONTHS_MAX: i64 = 300_000_000 * 12;
        let month_index = (year * 12 + (i64::from(month) - 1))
            .saturating_add(amount.saturating_mul(months_per_unit))
            .clamp(-MONTHS_MAX, MONTHS_MAX);
        let (year, month) = (
            month_index.div_euclid(12),
            month_index.rem_euclid(12) as u32 + 1,
        );
        let day_of_month = day_of_month.min(days_in_month(year, month));
        days_from_civil(year, month, day_of_month)
            .saturating_mul(DAY_MS)
            .saturating_add(time_of_day)
    }

    fn name(self) -> &'static str {
        match self {
            TimeUnit::Millisecond => "millisecond",
            TimeUnit::Second => "second",
            TimeUnit::Minute => "minute",
            TimeUnit::Hour => "hour",
            TimeUnit::Day => "day",
            TimeUnit::Week => "week",
            TimeUnit::Month => "month",
            TimeUnit::Quarter => "quarter",
            TimeUnit::Year => "year",
        }
    }

    /// The largest amount `$dateAdd` accepts for the unit (exclusive): roughly the span
    /// of all dates, so the calendar arithmetic cannot overflow before the final check.
    fn max_amount(self) -> i64 {
        const MAX_DAYS: i64 = (u64::MAX / DAY_MS as u64) as i64 + 1;
        const MAX_YEARS: i64 = MAX_DAYS / 365 + 1;
        match self {
            TimeUnit::Year => MAX_YEARS,
            TimeUnit::Quarter => MAX_YEARS * 4,
            TimeUnit::Month => MAX_YEARS * 12,
            TimeUnit::Week => MAX_DAYS / 7,
            TimeUnit::Day => MAX_DAYS,
            TimeUnit::Hour => MAX_DAYS * 24,
            TimeUnit::Minute => MAX_DAYS * 24 * 60,
            TimeUnit::Second | TimeUnit::Millisecond => MAX_DAYS * 24 * 3600,
        }
    }

    /// The unit's length in months, for the calendar units of a month or more.
    fn months(self) -> Option<i64> {
        match self {
            TimeUnit::Month => Some(1),
            TimeUnit::Quarter => Some(3),
            TimeUnit::Year => Some(12),
            _ => None,
        }
    }
}

/// A `unit` argument; `None` when it is null.
fn time_unit(value: Option<&Bson>, op: &str) -> Result<Option<TimeUnit>> {
    let name = match value {
        v if is_nullish(v) => return Ok(None),
        Some(Bson::String(s)) => s.as_str(),
        other => {
            return Err(Error::location(
                5439013,
                format!(
                    "{op} requires 'unit' to be a string, but got {}",
                    type_name(other)
                ),
            ))
        }
    };
    match TimeUnit::from_name(name) {
        Some(unit) => Ok(Some(unit)),
        None => Err(Error::failed_to_parse(format!(
            "{op} parameter 'unit' value parsing failed :: caused by :: unknown time unit value: {name}"
        ))),
    }
}

/// The first day of the week for `unit` (`startOfWeek` only matters for weeks; Sunday by
/// default); `None` when `startOfWeek` is null.
fn first_day_of_week(
    unit: TimeUnit,
    start_of_week: Option<&Expression>,
    env: &Env<'_>,
    op: &str,
) -> Result<Option<u32>> {
    if unit != TimeUnit::Week {
        return Ok(Some(1));
    }
    eval_or(start_of_week, env, 1, |v| parse_start_of_week(v, op))
}

/// A `startOfWeek` argument as a day of week, 1 (Sunday) to 7 (Saturday); `None` when null.
fn parse_start_of_week(value: Option<&Bson>, op: &str) -> Result<Option<u32>> {
    let name = match value {
        v if is_nullish(v) => return Ok(None),
        Some(Bson::String(s)) => s,
        other => {
            return Err(Error::location(
                5439015,
                format!(
                    "{op} requires 'startOfWeek' to be a string, but got {}",
                    type_name(other)
                ),
            ))
        }
    };
    const DAYS: [&str; 7] = [
        "sunday",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
    ];
    let lower = name.to_ascii_lowercase();
    DAYS.iter()
        .position(|d| *d == lower || d[..3] == lower)
        .map(|i| Some(i as u32 + 1))
        .ok_or_else(|| {
            Error::location(
                5439016,
                format!(
                    "{op} parameter 'startOfWeek' value cannot be recognized as a day of a week: {name}"
                ),
            )
        })
}

/// The day number that starts the week containing day `days`.
fn week_start(days: i64, first_day: u32) -> i64 {
    days - i64::from((day_of_week(days) + 7 - first_day) % 7)
}

/// Evaluates an optional argument that defaults when absent; `None` when it is null.
fn eval_or<T>(
    e: Option<&Expression>,
    env: &Env<'_>,
    default: T,
    convert: impl Fn(Option<&Bson>) -> Result<Option<T>>,
) -> Result<Option<T>> {
    match e {
        None => Ok(Some(default)),
        Some(e) => convert(e.eval(env)?.as_deref()),
    }
}

/// Checks a constant argument at parse time, as MongoDB does.
fn check_constant<T>(
    e: Option<&Expression>,
    check: impl Fn(Option<&Bson>) -> Result<T>,
) -> Result<()> {
    match e.and_then(Expression::as_constant) {
        Some(v) => check(Some(v)).map(|_| ()),
        None => Ok(()),
    }
}

/// A date argument of `$dateDiff`/`$dateTrunc`.
fn date_arg(value: Option<&Bson>, op: &str, param: &str) -> Result<i64> {
    as_date(value).ok_or_else(|| {
        Error::location(
            5166307,
            format!(
                "{op} requires '{param}' to be a date, but got {}",
                type_name(value)
            ),
        )
    })
}

/// `{$dateAdd: {startDate, unit, amount, timezone}}`, and `$dateSubtract`.
#[derive(Debug)]
pub(crate) struct DateAdd {
    op: &'static str,
    start_date: Expression,
    unit: Expression,
    amount: Expression,
    timezone: TimezoneArg,
}

impl DateAdd {
    pub(crate) fn parse(name: &str, args: &Bson, ctx: &ParseContext) -> Result<DateAdd> {
        let op = if name == "$dateAdd" {
            "$dateAdd"
        } else {
            "$dateSubtract"
        };
        let [start_date, unit, amount, timezone] = parse_args(
            op,
            args,
            ctx,
            ["startDate", "unit", "amount", "timezone"],
            (5166400, "expects an object as its argument"),
            5166401,
        )?;
        let (Some(start_date), Some(unit), Some(amount)) = (start_date, unit, amount) else {
            return Err(Error::location(
                5166402,
                format!("{op} requires startDate, unit, and amount to be present"),
            ));
        };
        check_constant(Some(&unit), |v| time_unit(v, op))?;
        Ok(DateAdd {
            op,
            start_date,
            unit,
            amount,
            timezone: TimezoneArg::parse(timezone)?,
        })
    }

    pub(crate) fn eval(&self, env: &Env<'_>) -> Result<Option<Bson>> {
        let start = self.start_date.eval(env)?;
        if is_nullish(start.as_deref()) {
            return Ok(None);
        }
        let Some(unit) = time_unit(self.unit.eval(env)?.as_deref(), self.op)? else {
            return Ok(None);
        };
        let amount = self.amount.eval(env)?;
        if is_nullish(amount.as_deref()) {
            return Ok(None);
        }
        let Some(zone) = self.timezone.eval(env)? else {
            return Ok(None);
        };
        let start = as_date(start.as_deref()).ok_or_else(|| {
            Error::location(
                5166403,
                format!("{} requires startDate to be convertible to a date", self.op),
            )
        })?;
        let mut amount = integral(amount.as_deref()).ok_or_else(|| {
            Error::location(
                5166405,
                format!("{} expects integer amount of time units", self.op),
            )
        })?;
        if self.op == "$dateSubtract" {
            amount = amount.checked_neg().ok_or_else(|| {
                Error::location(
                    6045000,
                    format!("invalid $dateSubtract 'amount' parameter value: {amount}"),
                )
            })?;
        }
        let overflow = || Error::location(5166406, "dateAdd overflowed");
        if unit != TimeUnit::Millisecond
            && amount.unsigned_abs() >= unit.max_amount().unsigned_abs()
        {
            return Err(Error::location(
                5976500,
                format!(
                    "invalid dateAdd 'amount' parameter value: {amount} {}",
                    unit.name()
                ),
            ));
        }
        let moved = if let Some(unit_ms) = unit.fixed_ms() {
            amount
                .checked_mul(unit_ms)
                .and_then(|delta| start.checked_add(delta))
        } else {
            let local = zone.to_local(start);
            let (days, in_day) = (local.div_euclid(DAY_MS), local.rem_euclid(DAY_MS));
            let new_days = match unit.months() {
                None if unit == TimeUnit::Week => days + amount * 7,
                None => days + amount,
                Some(months) => {
                    let (year, month, day) = civil_from_days(days);
                    let index = year * 12 + i64::from(month) - 1 + amount * months;
                    let (y, mo) = (index.div_euclid(12), index.rem_euclid(12) as u32 + 1);
                    days_from_civil(y, mo, day.min(days_in_month(y, mo)))
                }
            };
            new_days
                .checked_mul(DAY_MS)
                .and_then(|ms| ms.checked_add(in_day))
                .map(|local| zone.to_utc(local))
        };
        moved.map(date_value).ok_or_else(overflow)
    }
}

/// `{$dateDiff: {startDate, endDate, unit, timezone, startOfWeek}}`.
#[derive(Debug)]
pub(crate) struct DateDiff {
    start_date: Expression,
    end_date: Expression,
    unit: Expression,
    timezone: TimezoneArg,
    start_of_week: Option<Expression>,
}

impl DateDiff {
    pub(crate) fn parse(args: &Bson, ctx: &ParseContext) -> Result<DateDiff> {
        let op = "$dateDiff";
        let [start_date, end_date, unit, timezone, start_of_week] = parse_args(
            op,
            args,
            ctx,
            ["startDate", "endDate", "unit", "timezone", "startOfWeek"],
            (5166301, "only supports an object as its argument"),
            5166302,
        )?;
        let start_date = required(
            start_date,
            5166303,
            "Missing 'startDate' parameter to $dateDiff",
        )?;
        let end_date = required(
            end_date,
            5166304,
            "Missing 'endDate' parameter to $dateDiff",
        )?;
        let unit = required(unit, 5166305, "Missing 'unit' parameter to $dateDiff")?;
        check_constant(Some(&unit), |v| time_unit(v, op))?;
        check_constant(start_of_week.as_ref(), |v| parse_start_of_week(v, op))?;
        Ok(DateDiff {
            start_date,
            end_date,
            unit,
            timezone: TimezoneArg::parse(timezone)?,
            start_of_week,
        })
    }

    pub(crate) fn eval(&self, env: &Env<'_>) -> Result<Option<Bson>> {
        let op = "$dateDiff";
        let start = self.start_date.eval(env)?;
        if is_nullish(start.as_deref()) {
            return Ok(None);
        }
        let end = self.end_date.eval(env)?;
        if is_nullish(end.as_deref()) {
            return Ok(None);
        }
        let Some(unit) = time_unit(self.unit.eval(env)?.as_deref(), op)? else {
            return Ok(None);
        };
        let Some(first_day) = first_day_of_week(unit, self.start_of_week.as_ref(), env, op)? else {
            return Ok(None);
        };
        let Some(zone) = self.timezone.eval(env)? else {
            return Ok(None);
        };
        let start_utc = date_arg(start.as_deref(), op, "startDate")?;
        let end_utc = date_arg(end.as_deref(), op, "endDate")?;
        let (start, end) = (zone.to_local(start_utc), zone.to_local(end_utc));
        let diff = if unit == TimeUnit::Millisecond {
            end_utc
                .checked_sub(start_utc)
                .ok_or_else(|| Error::location(5166308, "dateDiff overflowed"))?
        } else if let Some(unit_ms) = unit.fixed_ms() {
            // Boundaries of the wall clock, corrected by the change of offset between the
            // two dates so that a daylight-saving change neither adds nor loses hours.
            let correction = (zone.offset_ms(start_utc) - zone.offset_ms(end_utc)) / unit_ms;
            end.div_euclid(unit_ms) - start.div_euclid(unit_ms) + correction
        } else {
            let (start_days, end_days) = (start.div_euclid(DAY_MS), end.div_euclid(DAY_MS));
            match unit.months() {
                None if unit == TimeUnit::Day => end_days - start_days,
                None => (week_start(end_days, first_day) - week_start(start_days, first_day)) / 7,
                Some(months) => {
                    let index = |days| {
                        let (year, month, _) = civil_from_days(days);
                        (year * 12 + i64::from(month) - 1).div_euclid(months)
                    };
                    index(end_days) - index(start_days)
                }
            }
        };
        Ok(Some(Bson::Int64(diff)))
    }
}

/// `{$dateTrunc: {date, unit, binSize, timezone, startOfWeek}}`.
#[derive(Debug)]
pub(crate) struct DateTrunc {
    date: Expression,
    unit: Expression,
    bin_size: Option<Expression>,
    timezone: TimezoneArg,
    start_of_week: Option<Expression>,
}

/// Bins of `$dateTrunc` count from 2000-01-01T00:00 local time.
const REFERENCE_YEAR: i64 = 2000;

impl DateTrunc {
    pub(crate) fn parse(args: &Bson, ctx: &ParseContext) -> Result<DateTrunc> {
        let op = "$dateTrunc";
        let [date, unit, bin_size, timezone, start_of_week] = parse_args(
            op,
            args,
            ctx,
            ["date", "unit", "binSize", "timezone", "startOfWeek"],
            (5439007, "only supports an object as its argument"),
            5439008,
        )?;
        let date = required(date, 5439009, "Missing 'date' parameter to $dateTrunc")?;
        let unit = required(unit, 5439010, "Missing 'unit' parameter to $dateTrunc")?;
        check_constant(Some(&unit), |v| time_unit(v, op))?;
        check_constant(bin_size.as_ref(), bin_size_of)?;
        check_constant(start_of_week.as_ref(), |v| parse_start_of_week(v, op))?;
        Ok(DateTrunc {
            date,
            unit,
            bin_size,
            timezone: TimezoneArg::parse(timezone)?,
            start_of_week,
        })
    }

    pub(crate) fn eval(&self, env: &Env<'_>) -> Result<Option<Bson>> {
        let op = "$dateTrunc";
        let date = self.date.eval(env)?;
        if is_nullish(date.as_deref()) {
            return Ok(None);
        }
        let Some(bin) = eval_or(self.bin_size.as_ref(), env, 1, bin_size_of)? else {
            return Ok(None);
        };
        let Some(unit) = time_unit(self.unit.eval(env)?.as_deref(), op)? else {
            return Ok(None);
        };
        let Some(first_day) = first_day_of_week(unit, self.start_of_week.as_ref(), env, op)? else {
            return Ok(None);
        };
        let Some(zone) = self.timezone.eval(env)? else {
            return Ok(None);
        };
        let utc = date_arg(date.as_deref(), op, "date")?;
        let overflow = |code| Error::location(code, "dateTrunc overflowed");
        let reference_days = days_from_civil(REFERENCE_YEAR, 1, 1);
        let truncated = if let Some(unit_ms) = unit.fixed_ms() {
            // Bins of an hour or less are fixed lengths from the instant of 2000-01-01
            // local midnight, whatever offset the zone has now.
            let reference_utc = zone.to_utc(reference_days * DAY_MS);
            let step = bin.checked_mul(unit_ms).ok_or_else(|| overflow(5439002))?;
            let shifted = utc
                .checked_sub(reference_utc)
                .ok_or_else(|| overflow(5439000))?;
            utc.checked_sub(shifted.rem_euclid(step))
                .ok_or_else(|| overflow(5439001))?
        } else {
            if bin > 100_000_000_000 {
                return Err(Error::location(
                    5439006,
                    "dateTrunc unsupported binSize value",
                ));
            }
            let floor_to = |value: i64, origin: i64, step: i64| {
                value - (i128::from(value) - i128::from(origin)).rem_euclid(i128::from(step)) as i64
            };
            let local = zone.to_local(utc);
            let days = local.div_euclid(DAY_MS);
            let start_days = match unit.months() {
                None if unit == TimeUnit::Day => floor_to(days, reference_days, bin),
                None => floor_to(days, week_start(reference_days + 6, first_day), bin * 7),
                Some(months) => {
                    let c = Civil::from_millis(local);
                    let index = c.year * 12 + i64::from(c.month) - 1;
                    let start = floor_to(index, REFERENCE_YEAR * 12, bin * months);
                    days_from_month_index(start, 1)
                }
            };
            let local_start = start_days
                .checked_mul(DAY_MS)
                .ok_or_else(|| overflow(5439004))?;
            zone.to_utc(local_start)
        };
        Ok(date_value(truncated))
    }
}

/// A `binSize` argument; `None` when it is null.
fn bin_size_of(value: Option<&Bson>) -> Result<Option<i64>> {
    if is_nullish(value) {
        return Ok(None);
    }
    let bin = integral(value).ok_or_else(|| {
        Error::location(
            5439017,
            format!(
                "$dateTrunc requires 'binSize' to be a 64-bit integer, but got value '{}' of type {}",
                value.map_or_else(String::new, display),
                type_name(value)
            ),
        )
    })?;
    if bin <= 0 {
        return Err(Error::location(
            5439018,
            format!("$dateTrunc requires 'binSize' to be greater than 0, but got value {bin}"),
        ));
    }
    Ok(Some(bin))
}

#[cfg(test)]
mod tests {
    use crate::expression::test_util::*;
    use crate::operators::date::millis;
    use bson::{bson, Bson, DateTime};

    fn date(year: i64, month: u32, day: u32, hms: (u32, u32, u32), ms: u32) -> Bson {
        Bson::DateTime(DateTime::from_millis(millis(year, month, day, hms, ms)))
    }

    fn ymd(year: i64, month: u32, day: u32) -> Bson {
        date(year, month, day, (0, 0, 0), 0)
    }

    #[test]
    fn date_add_and_subtract() {
        let add = |start: Bson, unit: &str, amount: i64| {
            value(bson!({"$dateAdd": {"startDate": start, "unit": unit, "amount": amount}}))
        };
        // Months clamp to the last day of the target month.
        assert_eq!(add(ymd(2020, 1, 31), "month", 1), ymd(2020, 2, 29));
        assert_eq!(add(ymd(2021, 3, 31), "quarter", 1), ymd(2021, 6, 30));
        assert_eq!(add(ymd(2020, 2, 29), "year", 1), ymd(2021, 2, 28));
        assert_eq!(add(ymd(2020, 2, 29), "month", -14), ymd(2018, 12, 29));
        assert_eq!(add(ymd(2020, 12, 30), "week", 1), ymd(2021, 1, 6));
        assert_eq!(
            add(ymd(2020, 12, 31), "hour", 25),
            date(2021, 1, 1, (1, 0, 0), 0)
        );
        assert_eq!(
            add(ymd(2021, 1, 1), "millisecond", -1),
            date(2020, 12, 31, (23, 59, 59), 999)
        );
        assert_eq!(
            value(
                bson!({"$dateSubtract": {"startDate": ymd(2021, 3, 1), "unit": "day", "amount": 1.0}})
            ),
            ymd(2021, 2, 28)
        );
        // A day across New York's spring-forward keeps the wall-clock time (23 hours);
        // 24 hours do not.
        let noon_before = date(2021, 3, 13, (17, 0, 0), 0);
        let in_ny = |unit: &str| {
            value(
                bson!({"$dateAdd": {"startDate": noon_before.clone(), "unit": unit, "amount": 1, "timezone": "America/New_York"}}),
            )
        };
        assert_eq!(in_ny("day"), date(2021, 3, 14, (16, 0, 0), 0));
        assert_eq!(
            value(
                bson!({"$dateAdd": {"startDate": noon_before, "unit": "hour", "amount": 24, "timezone": "America/New_York"}})
            ),
            date(2021, 3, 14, (17, 0, 0), 0)
        );
        assert_eq!(
            value(bson!({"$dateAdd": {"startDate": "$nope", "unit": "day", "amount": 1}})),
            Bson::Null
        );
        assert_eq!(
            value(
                bson!({"$dateAdd": {"startDate": ymd(2021, 1, 1), "unit": "day", "amount": null}})
            ),
            Bson::Null
        );
        let code = |op: &str, spec: Bson| error_code(bson!({ op: spec }));
        assert_eq!(code("$dateAdd", bson!(1)), 5166400);
        assert_eq!(
            code(
                "$dateAdd",
                bson!({"startDate": 1, "unit": "day", "amount": 1, "x": 1})
            ),
            5166401
        );
        assert_eq!(
            code("$dateSubtract", bson!({"startDate": 1, "unit": "day"})),
            5166402
        );
        assert_eq!(
            code("$dateAdd", bson!({"startDate": 1, "unit": 5, "amount": 1})),
            5439013
        );
        assert_eq!(
            code(
                "$dateAdd",
                bson!({"startDate": 1, "unit": "decade", "amount": 1})
            ),
            9
        );
        assert_eq!(
            code(
                "$dateAdd",
                bson!({"startDate": "x", "unit": "day", "amount": 1})
            ),
            5166403
        );
        assert_eq!(
            code(
                "$dateAdd",
                bson!({"startDate": ymd(2021, 1, 1), "unit": "day", "amount": 1.5})
            ),
            5166405
        );
        assert_eq!(
            code(
                "$dateSubtract",
                bson!({"startDate": ymd(2021, 1, 1), "unit": "day", "amount": i64::MIN})
            ),
            6045000
        );
        let add_code = |unit: &str, amount: i64| {
            code(
                "$dateAdd",
                bson!({"startDate": ymd(2021, 1, 1), "unit": unit, "amount": amount}),
            )
        };
        assert_eq!(add_code("day", i64::MAX), 5976500);
        assert_eq!(add_code("year", 600_000_000), 5976500);
        assert_eq!(add_code("second", i64::MAX), 5976500);
        assert_eq!(add_code("day", 200_000_000_000), 5166406);
        assert_eq!(add_code("millisecond", i64::MAX), 5166406);
    }

    #[test]
    fn date_diff_counts_boundaries() {
        let diff = |start: Bson, end: Bson, unit: &str| {
            value(bson!({"$dateDiff": {"startDate": start, "endDate": end, "unit": unit}}))
        };
        let (a, b) = (
            date(2020, 12, 31, (23, 59, 0), 0),
            date(2021, 1, 1, (0, 1, 0), 0),
        );
        for (unit, expected) in [
            ("year", 1_i64),
            ("quarter", 1),
            ("month", 1),
            ("week", 0),
            ("day", 1),
            ("hour", 1),
            ("minute", 2),
            ("second", 120),
            ("millisecond", 120_000),
        ] {
            assert_eq!(
                diff(a.clone(), b.clone(), unit),
                Bson::Int64(expected),
                "{unit}"
            );
        }
        assert_eq!(diff(b.clone(), a.clone(), "year"), Bson::Int64(-1));
        // Midnight to midnight across New York's spring-forward is a day of 23 hours.
        let ny_midnights = bson!({
            "startDate": date(2021, 3, 14, (5, 0, 0), 0),
            "endDate": date(2021, 3, 15, (4, 0, 0), 0),
            "timezone": "America/New_York",
        });
        for (unit, expected) in [("day", 1_i64), ("hour", 23), ("minute", 23 * 60)] {
            let mut spec = ny_midnights.as_document().unwrap().clone();
            spec.insert("unit", unit);
            assert_eq!(
                value(bson!({"$dateDiff": spec})),
                Bson::Int64(expected),
                "{unit}"
            );
        }
        // Saturday to Sunday crosses a Sunday-started week but not a Monday-started one.
        assert_eq!(
            diff(ymd(2021, 1, 2), ymd(2021, 1, 3), "week"),
            Bson::Int64(1)
        );
        assert_eq!(
            value(
                bson!({"$dateDiff": {"startDate": ymd(2021, 1, 2), "endDate": ymd(2021, 1, 3), "unit": "week", "startOfWeek": "MON"}})
            ),
            Bson::Int64(0)
        );
        // Days are counted on the wall clock of the zone.
        let (start, end) = (
            date(2021, 1, 1, (3, 0, 0), 0),
            date(2021, 1, 1, (6, 0, 0), 0),
        );
        assert_eq!(diff(start.clone(), end.clone(), "day"), Bson::Int64(0));
        assert_eq!(
            value(
                bson!({"$dateDiff": {"startDate": start, "endDate": end, "unit": "day", "timezone": "America/New_York"}})
            ),
            Bson::Int64(1)
        );
        assert_eq!(
            value(
                bson!({"$dateDiff": {"startDate": a.clone(), "endDate": "$nope", "unit": "day"}})
            ),
            Bson::Null
        );
        let code = |spec: Bson| error_code(bson!({ "$dateDiff": spec }));
        assert_eq!(code(bson!([1])), 5166301);
        assert_eq!(
            code(bson!({"startDate": 1, "endDate": 1, "unit": "day", "x": 1})),
            5166302
        );
        assert_eq!(code(bson!({"endDate": 1, "unit": "day"})), 5166303);
        assert_eq!(code(bson!({"startDate": 1, "unit": "day"})), 5166304);
        assert_eq!(code(bson!({"startDate": 1, "endDate": 1})), 5166305);
        assert_eq!(
            code(bson!({"startDate": "x", "endDate": b.clone(), "unit": "day"})),
            5166307
        );
        assert_eq!(
            code(bson!({"startDate": a.clone(), "endDate": b.clone(), "unit": "eon"})),
            9
        );
        assert_eq!(
            code(
                bson!({"startDate": a.clone(), "endDate": b.clone(), "unit": "week", "startOfWeek": "funday"})
            ),
            5439016
        );
        assert_eq!(
            code(bson!({"startDate": a, "endDate": b, "unit": "week", "startOfWeek": 1})),
            5439015
        );
    }

    #[test]
    fn date_trunc() {
        let t = date(2021, 3, 20, (11, 30, 5), 200);
        let trunc = |unit: &str, bin: i64| {
            value(bson!({"$dateTrunc": {"date": t.clone(), "unit": unit, "binSize": bin}}))
        };
        assert_eq!(trunc("second", 1), date(2021, 3, 20, (11, 30, 5), 0));
        assert_eq!(trunc("minute", 15), date(2021, 3, 20, (11, 30, 0), 0));
        assert_eq!(trunc("hour", 1), date(2021, 3, 20, (11, 0, 0), 0));
        assert_eq!(trunc("hour", 2), date(2021, 3, 20, (10, 0, 0), 0));
        assert_eq!(trunc("day", 1), ymd(2021, 3, 20));
        assert_eq!(trunc("week", 1), ymd(2021, 3, 14));
        assert_eq!(trunc("month", 1), ymd(2021, 3, 1));
        assert_eq!(trunc("month", 6), ymd(2021, 1, 1));
        assert_eq!(trunc("quarter", 1), ymd(2021, 1, 1));
        assert_eq!(trunc("year", 1), ymd(2021, 1, 1));
        assert_eq!(trunc("year", 5), ymd(2020, 1, 1));
        // Weeks count from the first start-of-week day on or after 2000-01-01.
        let saturday = ymd(2021, 3, 27);
        assert_eq!(
            value(bson!({"$dateTrunc": {"date": saturday.clone(), "unit": "week"}})),
            ymd(2021, 3, 21)
        );
        assert_eq!(
            value(bson!({"$dateTrunc": {"date": saturday.clone(), "unit": "week", "binSize": 2}})),
            ymd(2021, 3, 14)
        );
        assert_eq!(
            value(
                bson!({"$dateTrunc": {"date": saturday, "unit": "week", "startOfWeek": "monday"}})
            ),
            ymd(2021, 3, 22)
        );
        // 03:00Z is still the 19th in New York (EDT, -4): midnight there is 04:00Z.
        assert_eq!(
            value(
                bson!({"$dateTrunc": {"date": date(2021, 3, 20, (3, 0, 0), 0), "unit": "day", "timezone": "America/New_York"}})
            ),
            date(2021, 3, 19, (4, 0, 0), 0)
        );
        // Two-hour bins count from 2000-01-01 local midnight (05:00Z, under EST), so in
        // summer they start at odd hours of EDT.
        assert_eq!(
            value(
                bson!({"$dateTrunc": {"date": date(2021, 7, 1, (14, 30, 0), 0), "unit": "hour", "binSize": 2, "timezone": "America/New_York"}})
            ),
            date(2021, 7, 1, (13, 0, 0), 0)
        );
        assert_eq!(
            error_code(
                bson!({"$dateTrunc": {"date": t.clone(), "unit": "day", "binSize": 200_000_000_000_i64}})
            ),
            5439006
        );
        let far_past = Bson::DateTime(DateTime::from_millis(-(1 << 62)));
        assert_eq!(
            error_code(
                bson!({"$dateTrunc": {"date": far_past, "unit": "year", "binSize": 100_000_000_000_i64}})
            ),
            5439004
        );
        assert_eq!(
            value(bson!({"$dateTrunc": {"date": t.clone(), "unit": "day", "binSize": null}})),
            Bson::Null
        );
        let code = |spec: Bson| error_code(bson!({ "$dateTrunc": spec }));
        assert_eq!(code(bson!("x")), 5439007);
        assert_eq!(code(bson!({"date": 1, "unit": "day", "x": 1})), 5439008);
        assert_eq!(code(bson!({"unit": "day"})), 5439009);
        assert_eq!(code(bson!({"date": 1})), 5439010);
        assert_eq!(
            code(bson!({"date": t.clone(), "unit": "day", "binSize": 1.5})),
            5439017
        );
        assert_eq!(
            code(bson!({"date": t.clone(), "unit": "day", "binSize": 0})),
            5439018
        );
        assert_eq!(code(bson!({"date": "x", "unit": "day"})), 5166307);
        assert_eq!(code(bson!({"date": t.clone(), "unit": "days"})), 9);
        assert_eq!(
            code(bson!({"date": t, "unit": "day", "timezone": "Bad/Zone"})),
            40485
        );
    }

    /// Extreme dates and amounts give a value or MongoDB's error, never a panic.
    #[test]
    fn extremes_do_not_panic() {
        let units = [
            "millisecond",
            "second",
            "minute",
            "hour",
            "day",
            "week",
            "month",
            "quarter",
            "year",
        ];
        for ms in [i64::MIN, -(1 << 62), -1, 0, 1 << 62, i64::MAX] {
            let d = Bson::DateTime(DateTime::from_millis(ms));
            for zone in ["UTC", "+14:00", "America/New_York"] {
                for unit in units {
                    for n in [i64::MIN, -1, 1, 100_000_000_000, i64::MAX] {
                        for op in ["$dateAdd", "$dateSubtract"] {
                            let _ = eval(
                                bson!({op: {"startDate": d.clone(), "unit": unit, "amount": n, "timezone": zone}}),
                            );
                        }
                        let _ = eval(
                            bson!({"$dateTrunc": {"date": d.clone(), "unit": unit, "binSize": n.max(1), "timezone": zone}}),
                        );
                    }
                    let _ = eval(
                        bson!({"$dateDiff": {"startDate": d.clone(), "endDate": Bson::DateTime(DateTime::from_millis(-ms.saturating_add(1))), "unit": unit, "timezone": zone}}),
                    );
                }
                let _ = eval(bson!({"$dateToParts": {"date": d.clone(), "timezone": zone}}));
                let _ = eval(bson!({"$dateToString": {"date": d.clone(), "timezone": zone}}));
            }
        }
    }
}
