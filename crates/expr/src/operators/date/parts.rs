//! Calendar fields of a date: the one-field extractors (`$year`, `$month`, … `$isoDayOfWeek`),
//! `$dateToParts` (all fields at once, calendar or ISO week form) and its inverse
//! `$dateFromParts`, which lets out-of-range fields carry over (month 14 is February of
//! the next year, minute -1 the last minute of the previous hour) as MongoDB does.

use super::calendar::{days_from_month_index, iso_year_start, Civil, DAY_MS};
use super::{date_millis, date_value, integral, parse_args, required, TimezoneArg};
use crate::context::ParseContext;
use crate::env::Env;
use crate::expression::{is_nullish, type_name, Expression};
use crate::numeric::display;
use basalt_error::{Error, Result};
use bson::{doc, Bson};

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Part {
    Year,
    Month,
    DayOfMonth,
    Hour,
    Minute,
    Second,
    Millisecond,
    DayOfWeek,
    DayOfYear,
    Week,
    IsoWeek,
    IsoWeekYear,
    IsoDayOfWeek,
}

/// `{$year: <date>}`, `{$year: [<date>]}` or `{$year: {date, timezone}}`, and the others.
#[derive(Debug)]
pub(crate) struct DatePart {
    part: Part,
    date: Expression,
    timezone: TimezoneArg,
}

impl DatePart {
    pub(crate) fn parse(name: &str, args: &Bson, ctx: &ParseContext) -> Result<Option<DatePart>> {
        let part = match name {
            "$year" => Part::Year,
            "$month" => Part::Month,
            "$dayOfMonth" => Part::DayOfMonth,
            "$hour" => Part::Hour,
            "$minute" => Part::Minute,
            "$second" => Part::Second,
            "$millisecond" => Part::Millisecond,
            "$dayOfWeek" => Part::DayOfWeek,
            "$dayOfYear" => Part::DayOfYear,
            "$week" => Part::Week,
            "$isoWeek" => Part::IsoWeek,
            "$isoWeekYear" => Part::IsoWeekYear,
            "$isoDayOfWeek" => Part::IsoDayOfWeek,
            _ => return Ok(None),
        };
        let (date, timezone) = match args {
            Bson::Document(doc) if doc.keys().next().is_some_and(|k| !k.starts_with('$')) => {
                let (mut date, mut timezone) = (None, None);
                for (key, value) in doc {
                    let slot = match key.as_str() {
                        "date" => &mut date,
                        "timezone" => &mut timezone,
                        _ => {
                            return Err(Error::location(
                                40535,
                                format!("unrecognized option to {name}: \"{key}\""),
                            ))
                        }
                    };
                    *slot = Some(Expression::parse(value, ctx)?);
                }
                let date = required(
                    date,
                    40539,
                    format!("missing 'date' argument to {name}, provided: {doc}"),
                )?;
                (date, timezone)
            }
            Bson::Array(items) => {
                if items.len() != 1 {
                    return Err(Error::location(
                        40536,
                        format!(
                            "{name} accepts exactly one argument if given an array, but was given {}",
                            items.len()
                        ),
                    ));
                }
                (Expression::parse(&items[0], ctx)?, None)
            }
            other => (Expression::parse(other, ctx)?, None),
        };
        Ok(Some(DatePart {
            part,
            date,
            timezone: TimezoneArg::parse(timezone)?,
        }))
    }

    pub(crate) fn eval(&self, env: &Env<'_>) -> Result<Option<Bson>> {
        let d = self.date.eval(env)?;
        if is_nullish(d.as_deref()) {
            return Ok(None);
        }
        let ms = date_millis(d.as_deref())?;
        let Some(zone) = self.timezone.eval(env)? else {
            return Ok(None);
        };
        Ok(Some(get(&Civil::from_millis(zone.to_local(ms)), self.part)))
    }
}

fn get(c: &Civil, part: Part) -> Bson {
    let int = |v: u32| Bson::Int32(v as i32);
    match part {
        Part::Year => Bson::Int32(c.year as i32),
        Part::Month => int(c.month),
        Part::DayOfMonth => int(c.day),
        Part::Hour => int(c.hour),
        Part::Minute => int(c.minute),
        Part::Second => int(c.second),
        Part::Millisecond => int(c.millis),
        Part::DayOfWeek => int(c.day_of_week),
        Part::DayOfYear => int(c.day_of_year),
        Part::Week => int(c.week()),
        Part::IsoWeek => int(c.iso_week().1),
        Part::IsoWeekYear => Bson::Int64(c.iso_week().0),
        Part::IsoDayOfWeek => int(c.iso_day_of_week()),
    }
}

/// `{$dateToParts: {date, timezone, iso8601}}`.
#[derive(Debug)]
pub(crate) struct DateToParts {
    date: Expression,
    timezone: TimezoneArg,
    iso8601: Option<Expression>,
}

impl DateToParts {
    pub(crate) fn parse(args: &Bson, ctx: &ParseContext) -> Result<DateToParts> {
        let name = "$dateToParts";
        let [date, timezone, iso8601] = parse_args(
            name,
            args,
            ctx,
            ["date", "timezone", "iso8601"],
            (40524, "only supports an object as its argument"),
            40520,
        )?;
        let date = required(date, 40522, "Missing 'date' parameter to $dateToParts")?;
        if let Some(flag) = iso8601.as_ref().and_then(Expression::as_constant) {
            iso8601_flag(Some(flag))?;
        }
        Ok(DateToParts {
            date,
            timezone: TimezoneArg::parse(timezone)?,
            iso8601,
        })
    }

    pub(crate) fn eval(&self, env: &Env<'_>) -> Result<Option<Bson>> {
        let date = self.date.eval(env)?;
        let Some(zone) = self.timezone.eval(env)? else {
            return Ok(None);
        };
        let iso = match &self.iso8601 {
            Some(e) => iso8601_flag(e.eval(env)?.as_deref())?,
            None => Some(false),
        };
        let Some(iso) = iso else {
            return Ok(None);
        };
        if is_nullish(date.as_deref()) {
            return Ok(None);
        }
        let c = Civil::from_millis(zone.to_local(date_millis(date.as_deref())?));
        let int = |v: u32| v as i32;
        Ok(Some(Bson::Document(if iso {
            let (year, week) = c.iso_week();
            doc! {
                "isoWeekYear": year as i32, "isoWeek": int(week),
                "isoDayOfWeek": int(c.iso_day_of_week()), "hour": int(c.hour),
                "minute": int(c.minute), "second": int(c.second), "millisecond": int(c.millis),
            }
        } else {
            doc! {
                "year": c.year as i32, "month": int(c.month), "day": int(c.day),
                "hour": int(c.hour), "minute": int(c.minute), "second": int(c.second),
                "millisecond": int(c.millis),
            }
        })))
    }
}

fn iso8601_flag(value: Option<&Bson>) -> Result<Option<bool>> {
    match value {
        v if is_nullish(v) => Ok(None),
        Some(Bson::Boolean(b)) => Ok(Some(*b)),
        other => Err(Error::location(
            40521,
            format!(
                "iso8601 must evaluate to a bool, found {}",
                type_name(other)
            ),
        )),
    }
}

/// `{$dateFromParts: {year, month, day, hour, minute, second, millisecond, timezone}}` or
/// the ISO week form with `isoWeekYear`, `isoWeek`, `isoDayOfWeek`.
#[derive(Debug)]
pub(crate) struct DateFromParts {
    /// `year`/`month`/`day`, or `isoWeekYear`/`isoWeek`/`isoDayOfWeek`.
    date: [Option<Expression>; 3],
    iso: bool,
    /// `hour`, `minute`, `second`, `millisecond`.
    time: [Option<Expression>; 4],
    timezone: TimezoneArg,
}

/// Fields other than the year must fit in 16 bits, as MongoDB requires so that date
/// tables are not walked for huge values.
const PART_RANGE: std::ops::RangeInclusive<i64> = (i16::MIN as i64)..=(i16::MAX as i64);

impl DateFromParts {
    pub(crate) fn parse(args: &Bson, ctx: &ParseContext) -> Result<DateFromParts> {
        let name = "$dateFromParts";
        let [year, month, day, hour, minute, second, millisecond, iso_year, iso_week, iso_day, timezone] =
            parse_args(
                name,
                args,
                ctx,
                [
                    "year",
                    "month",
                    "day",
                    "hour",
                    "minute",
                    "second",
                    "millisecond",
                    "isoWeekYear",
                    "isoWeek",
                    "isoDayOfWeek",
                    "timezone",
                ],
                (40519, "only supports an object as its argument"),
                40518,
            )?;
        let has_iso = iso_year.is_some() || iso_week.is_some() || iso_day.is_some();
        if year.is_some() && has_iso {
            return Err(Error::location(
                40489,
                "$dateFromParts does not allow mixing natural dates with ISO dates",
            ));
        }
        if iso_year.is_some() && (month.is_some() || day.is_some()) {
            return Err(Error::location(
                40525,
                "$dateFromParts does not allow mixing ISO dates with natural dates",
            ));
        }
        if year.is_none() && iso_year.is_none() {
            return Err(Error::location(
                40516,
                "$dateFromParts requires either 'year' or 'isoWeekYear' to be present",
            ));
        }
        let iso = iso_year.is_some();
        let date = if iso {
            [iso_year, iso_week, iso_day]
        } else {
            [year, month, day]
        };
        Ok(DateFromParts {
            date,
            iso,
            time: [hour, minute, second, millisecond],
            timezone: TimezoneArg::parse(timezone)?,
        })
    }

    pub(crate) fn eval(&self, env: &Env<'_>) -> Result<Option<Bson>> {
        let mut time = [0_i64; 4];
        for (i, (name, bounded)) in [
            ("hour", true),
            ("minute", true),
            ("second", false),
            ("millisecond", false),
        ]
        .into_iter()
        .enumerate()
        {
            match int_part(self.time[i].as_ref(), env, name, 0, bounded)? {
                Some(v) => time[i] = v,
                None => return Ok(None),
            }
        }
        let Some(zone) = self.timezone.eval(env)? else {
            return Ok(None);
        };
        let names = if self.iso {
            ["isoWeekYear", "isoWeek", "isoDayOfWeek"]
        } else {
            ["year", "month", "day"]
        };
        let mut date = [1970_i64, 1, 1];
        for i in 0..3 {
            match int_part(self.date[i].as_ref(), env, names[i], date[i], i > 0)? {
                Some(v) => date[i] = v,
                None => return Ok(None),
            }
        }
        let [year, second_field, third_field] = date;
        if !(1..=9999).contains(&year) {
            let code = if self.iso { 31095 } else { 40523 };
            return Err(Error::location(
                code,
                format!(
                    "'{}' must evaluate to an integer in the range 1 to 9999, found {year}",
                    names[0]
                ),
            ));
        }
        let days = if self.iso {
            iso_year_start(year) + (second_field - 1) * 7 + third_field - 1
        } else {
            days_from_month_index(year * 12 + second_field - 1, third_field)
        };
        let [hour, minute, second, millisecond] = time;
        let local = (days * DAY_MS)
            .saturating_add(hour * 3_600_000 + minute * 60_000)
            .saturating_add(second.saturating_mul(1000))
            .saturating_add(millisecond);
        Ok(date_value(zone.to_utc(local)))
    }
}

/// One numeric field of `$dateFromParts`: its default when absent, `None` when null.
fn int_part(
    e: Option<&Expression>,
    env: &Env<'_>,
    name: &str,
    default: i64,
    bounded: bool,
) -> Result<Option<i64>> {
    let Some(e) = e else {
        return Ok(Some(default));
    };
    let v = e.eval(env)?;
    if is_nullish(v.as_deref()) {
        return Ok(None);
    }
    let n = integral(v.as_deref()).ok_or_else(|| {
        Error::location(
            40515,
            format!(
                "'{name}' must evaluate to an integer, found {} with value {}",
                type_name(v.as_deref()),
                v.as_deref().map_or_else(String::new, display)
            ),
        )
    })?;
    if bounded && !PART_RANGE.contains(&n) {
        return Err(Error::location(
            31034,
            format!(
                "'{name}' must evaluate to a value in the range [{}, {}]; value {n} is not in range",
                PART_RANGE.start(),
                PART_RANGE.end()
            ),
        ));
    }
    Ok(Some(n))
}

#[cfg(test)]
mod tests {
    use crate::expression::test_util::*;
    use crate::operators::date::millis;
    use bson::{bson, doc, oid::ObjectId, Bson, DateTime, Timestamp};

    fn date(year: i64, month: u32, day: u32, hms: (u32, u32, u32), ms: u32) -> Bson {
        Bson::DateTime(DateTime::from_millis(millis(year, month, day, hms, ms)))
    }

    #[test]
    fn parts() {
        let d = date(2014, 1, 1, (8, 15, 39), 736);
        let root = doc! {"d": d.clone()};
        let get = |op: &str| eval_in(bson!({op: "$d"}), &root).unwrap().unwrap();
        assert_eq!(get("$year"), bson!(2014));
        assert_eq!(get("$month"), bson!(1));
        assert_eq!(get("$dayOfMonth"), bson!(1));
        assert_eq!(get("$hour"), bson!(8));
        assert_eq!(get("$minute"), bson!(15));
        assert_eq!(get("$second"), bson!(39));
        assert_eq!(get("$millisecond"), bson!(736));
        assert_eq!(get("$dayOfWeek"), bson!(4));
        assert_eq!(get("$dayOfYear"), bson!(1));
        assert_eq!(get("$week"), bson!(0));
        assert_eq!(get("$isoWeek"), bson!(1));
        assert_eq!(get("$isoWeekYear"), bson!(2014_i64));
        assert_eq!(get("$isoDayOfWeek"), bson!(3));
        assert_eq!(
            value(bson!({"$isoWeek": date(2016, 1, 1, (0, 0, 0), 0)})),
            bson!(53)
        );
        assert_eq!(
            value(bson!({"$year": [date(1969, 12, 31, (23, 0, 0), 0)]})),
            bson!(1969)
        );
        assert_eq!(
            value(bson!({"$hour": {"date": d.clone(), "timezone": "+05:30"}})),
            bson!(13)
        );
        assert_eq!(
            value(bson!({"$hour": {"date": d.clone(), "timezone": "-0900"}})),
            bson!(23)
        );
        // New York is on EST (-5) in January and EDT (-4) in July.
        assert_eq!(
            value(bson!({"$hour": {"date": d.clone(), "timezone": "America/New_York"}})),
            bson!(3)
        );
        assert_eq!(
            value(
                bson!({"$hour": {"date": date(2014, 7, 1, (8, 0, 0), 0), "timezone": "America/New_York"}})
            ),
            bson!(4)
        );
        assert_eq!(
            value(bson!({"$year": Bson::Timestamp(Timestamp { time: 0, increment: 1 })})),
            bson!(1970)
        );
        let oid = ObjectId::parse_str("5ab9cbfa31c2ab715d42129e").unwrap();
        assert_eq!(value(bson!({"$month": oid})), bson!(3));
        assert_eq!(value(bson!({"$year": "$nope"})), Bson::Null);
        assert_eq!(
            value(bson!({"$year": {"date": d, "timezone": "$nope"}})),
            Bson::Null
        );
        assert_eq!(value(bson!({"$year": {"$toDate": 0_i64}})), bson!(1970));
    }

    #[test]
    fn part_errors() {
        assert_eq!(error_code(bson!({"$year": "x"})), 16006);
        assert_eq!(
            error_message(bson!({"$year": 5})),
            "can't convert from BSON type int to Date"
        );
        assert_eq!(error_code(bson!({"$year": {"date": 1, "zone": 1}})), 40535);
        assert_eq!(error_code(bson!({"$year": {"timezone": "UTC"}})), 40539);
        assert_eq!(
            error_code(bson!({"$year": {"date": "$nope", "timezone": "Mars/Base"}})),
            40485
        );
        assert_eq!(
            error_code(bson!({"$year": {"date": "$$NOW", "timezone": 5}})),
            40517
        );
        assert_eq!(error_code(bson!({"$year": [1, 2]})), 40536);
    }

    #[test]
    fn date_to_parts() {
        let d = date(2017, 1, 1, (1, 29, 9), 123);
        assert_eq!(
            value(bson!({"$dateToParts": {"date": d.clone()}})),
            bson!({"year": 2017, "month": 1, "day": 1, "hour": 1, "minute": 29, "second": 9, "millisecond": 123})
        );
        assert_eq!(
            value(bson!({"$dateToParts": {"date": d.clone(), "timezone": "America/New_York"}})),
            bson!({"year": 2016, "month": 12, "day": 31, "hour": 20, "minute": 29, "second": 9, "millisecond": 123})
        );
        assert_eq!(
            value(bson!({"$dateToParts": {"date": d.clone(), "iso8601": true}})),
            bson!({"isoWeekYear": 2016, "isoWeek": 52, "isoDayOfWeek": 7, "hour": 1, "minute": 29, "second": 9, "millisecond": 123})
        );
        assert_eq!(
            value(bson!({"$dateToParts": {"date": "$nope"}})),
            Bson::Null
        );
        assert_eq!(
            value(bson!({"$dateToParts": {"date": d.clone(), "iso8601": "$nope"}})),
            Bson::Null
        );
        assert_eq!(error_code(bson!({"$dateToParts": 1})), 40524);
        assert_eq!(
            error_code(bson!({"$dateToParts": {"date": d.clone(), "x": 1}})),
            40520
        );
        assert_eq!(error_code(bson!({"$dateToParts": {}})), 40522);
        assert_eq!(
            error_code(bson!({"$dateToParts": {"date": d, "iso8601": 1}})),
            40521
        );
        assert_eq!(error_code(bson!({"$dateToParts": {"date": 1}})), 16006);
    }

    #[test]
    fn date_from_parts() {
        assert_eq!(
            value(
                bson!({"$dateFromParts": {"year": 2017, "month": 2, "day": 8, "hour": 12, "minute": 0, "second": 0, "millisecond": 6}})
            ),
            date(2017, 2, 8, (12, 0, 0), 6)
        );
        assert_eq!(
            value(bson!({"$dateFromParts": {"year": 2017}})),
            date(2017, 1, 1, (0, 0, 0), 0)
        );
        // Out-of-range parts carry over into the next larger unit.
        assert_eq!(
            value(bson!({"$dateFromParts": {"year": 2017, "month": 14, "day": 1, "hour": 12}})),
            date(2018, 2, 1, (12, 0, 0), 0)
        );
        assert_eq!(
            value(bson!({"$dateFromParts": {"year": 2017, "month": 0, "day": 0}})),
            date(2016, 11, 30, (0, 0, 0), 0)
        );
        assert_eq!(
            value(bson!({"$dateFromParts": {"year": 2017, "minute": -1, "millisecond": 1500}})),
            date(2016, 12, 31, (23, 59, 1), 500)
        );
        assert_eq!(
            value(
                bson!({"$dateFromParts": {"isoWeekYear": 2017, "isoWeek": 6, "isoDayOfWeek": 3, "hour": 12, "minute": 0, "second": 0, "millisecond": 0}})
            ),
            date(2017, 2, 8, (12, 0, 0), 0)
        );
        assert_eq!(
            value(
                bson!({"$dateFromParts": {"year": 2016, "month": 12, "day": 31, "hour": 23, "minute": 46, "second": 12, "timezone": "America/New_York"}})
            ),
            date(2017, 1, 1, (4, 46, 12), 0)
        );
        assert_eq!(
            value(bson!({"$dateFromParts": {"year": 2017, "month": "$nope"}})),
            Bson::Null
        );
        assert_eq!(error_code(bson!({"$dateFromParts": 1})), 40519);
        assert_eq!(
            error_code(bson!({"$dateFromParts": {"year": 2017, "x": 1}})),
            40518
        );
        assert_eq!(error_code(bson!({"$dateFromParts": {"month": 1}})), 40516);
        assert_eq!(
            error_code(bson!({"$dateFromParts": {"year": 2017, "isoWeek": 1}})),
            40489
        );
        assert_eq!(
            error_code(bson!({"$dateFromParts": {"isoWeekYear": 2017, "month": 1}})),
            40525
        );
        assert_eq!(error_code(bson!({"$dateFromParts": {"year": 0}})), 40523);
        assert_eq!(
            error_code(bson!({"$dateFromParts": {"isoWeekYear": 10000}})),
            31095
        );
        assert_eq!(
            error_code(bson!({"$dateFromParts": {"year": 2017, "month": 40000}})),
            31034
        );
        assert_eq!(
            error_code(bson!({"$dateFromParts": {"year": 2017, "second": 1.5}})),
            40515
        );
        assert_eq!(
            error_code(bson!({"$dateFromParts": {"year": "2017"}})),
            40515
        );
    }
}
