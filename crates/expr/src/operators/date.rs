//! Date expression operators: `$year $month $dayOfMonth $hour $minute $second
//! $millisecond $dayOfWeek $dayOfYear $week $isoWeek $isoWeekYear $isoDayOfWeek
//! $dateToString`, and the calendar arithmetic `$toDate`/`$toString` share.
//!
//! Time zones are UTC (`UTC`, `GMT`, `Z`) or fixed offsets (`+05:30`, `-0800`, `+03`).
//! Olson names (`Europe/London`) need a time zone database, which Basalt does not ship
//! yet; they are rejected as unrecognised, as MongoDB rejects unknown names.

use crate::context::ParseContext;
use crate::env::{Env, Value};
use crate::expression::{is_nullish, type_name, Expression};
use crate::numeric::display;
use basalt_error::{Error, Result};
use bson::Bson;
use std::borrow::Cow;
use std::fmt::Write;

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

#[derive(Debug)]
pub(crate) enum DateOp {
    Part {
        part: Part,
        date: Box<Expression>,
        timezone: Option<Box<Expression>>,
    },
    ToString(Box<DateToString>),
}

#[derive(Debug)]
pub(crate) struct DateToString {
    date: Expression,
    format: Option<Expression>,
    timezone: Option<Expression>,
    on_null: Option<Expression>,
}

/// The default of `$dateToString`'s `format`.
const ISO_FORMAT: &str = "%Y-%m-%dT%H:%M:%S.%LZ";

impl DateOp {
    pub(crate) fn parse(name: &str, args: &Bson, ctx: &ParseContext) -> Result<Option<DateOp>> {
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
            "$dateToString" => {
                return Ok(Some(DateOp::ToString(Box::new(parse_to_string(
                    args, ctx,
                )?))))
            }
            _ => return Ok(None),
        };
        let (date, timezone) = match args {
            Bson::Document(doc) if doc.keys().next().is_some_and(|k| !k.starts_with('$')) => {
                let (mut date, mut timezone) = (None, None);
                for (key, value) in doc {
                    match key.as_str() {
                        "date" => date = Some(Box::new(Expression::parse(value, ctx)?)),
                        "timezone" => timezone = Some(Box::new(Expression::parse(value, ctx)?)),
                        _ => {
                            return Err(Error::location(
                                40535,
                                format!("unrecognized option to {name}: \"{key}\""),
                            ))
                        }
                    }
                }
                let date = date.ok_or_else(|| {
                    Error::location(
                        40539,
                        format!("missing 'date' argument to {name}, provided: {doc}"),
                    )
                })?;
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
                (Box::new(Expression::parse(&items[0], ctx)?), None)
            }
            other => (Box::new(Expression::parse(other, ctx)?), None),
        };
        if let Some(Bson::String(tz)) = timezone.as_deref().and_then(Expression::as_constant) {
            parse_timezone(tz)?;
        }
        Ok(Some(DateOp::Part {
            part,
            date,
            timezone,
        }))
    }

    pub(crate) fn eval<'a>(&'a self, env: &Env<'a>) -> Result<Value<'a>> {
        match self {
            DateOp::Part {
                part,
                date,
                timezone,
            } => {
                let d = date.eval(env)?;
                if is_nullish(d.as_deref()) {
                    return Ok(Some(Cow::Owned(Bson::Null)));
                }
                let Some(offset) = eval_timezone(timezone.as_deref(), env)? else {
                    return Ok(Some(Cow::Owned(Bson::Null)));
                };
                let ms = date_millis(d.as_deref())?;
                let parts = Civil::from_millis(ms + offset.millis());
                Ok(Some(Cow::Owned(parts.get(*part))))
            }
            DateOp::ToString(spec) => spec.eval(env),
        }
    }
}

fn parse_to_string(args: &Bson, ctx: &ParseContext) -> Result<DateToString> {
    let Bson::Document(doc) = args else {
        return Err(Error::location(
            18629,
            "$dateToString only supports an object as its argument",
        ));
    };
    let (mut date, mut format, mut timezone, mut on_null) = (None, None, None, None);
    for (key, value) in doc {
        let slot = match key.as_str() {
            "date" => &mut date,
            "format" => &mut format,
            "timezone" => &mut timezone,
            "onNull" => &mut on_null,
            _ => {
                return Err(Error::location(
                    18534,
                    format!("Unrecognized argument to $dateToString: {key}"),
                ))
            }
        };
        *slot = Some(Expression::parse(value, ctx)?);
    }
    let date =
        date.ok_or_else(|| Error::location(18628, "Missing 'date' parameter to $dateToString"))?;
    if let Some(f) = format.as_ref().and_then(Expression::as_constant) {
        validate_format(f)?;
    }
    if let Some(Bson::String(tz)) = timezone.as_ref().and_then(Expression::as_constant) {
        parse_timezone(tz)?;
    }
    Ok(DateToString {
        date,
        format,
        timezone,
        on_null,
    })
}

fn validate_format(format: &Bson) -> Result<()> {
    match format {
        Bson::String(f) => render(f, &Civil::from_millis(0), Offset(0)).map(|_| ()),
        f if is_nullish(Some(f)) => Ok(()),
        other => Err(Error::location(
            18533,
            format!(
                "$dateToString requires that 'format' be a string, found: {} with value {}",
                type_name(Some(other)),
                display(other)
            ),
        )),
    }
}

impl DateToString {
    fn eval<'a>(&'a self, env: &Env<'a>) -> Result<Value<'a>> {
        let format = match &self.format {
            Some(f) => {
                let v = f.eval(env)?;
                if is_nullish(v.as_deref()) {
                    return Ok(Some(Cow::Owned(Bson::Null)));
                }
                let v = v.expect("not nullish").into_owned();
                validate_format(&v)?;
                match v {
                    Bson::String(s) => Cow::Owned(s),
                    _ => unreachable!("validated as a string"),
                }
            }
            None => Cow::Borrowed(ISO_FORMAT),
        };
        let Some(offset) = eval_timezone(self.timezone.as_ref(), env)? else {
            return Ok(Some(Cow::Owned(Bson::Null)));
        };
        let d = self.date.eval(env)?;
        if is_nullish(d.as_deref()) {
            return match &self.on_null {
                Some(e) => e.eval(env),
                None => Ok(Some(Cow::Owned(Bson::Null))),
            };
        }
        let ms = date_millis(d.as_deref())?;
        let civil = Civil::from_millis(ms + offset.millis());
        Ok(Some(Cow::Owned(Bson::String(render(
            &format, &civil, offset,
        )?))))
    }
}

/// The instant a date-like value stands for, in milliseconds since the epoch.
pub(crate) fn date_millis(value: Option<&Bson>) -> Result<i64> {
    match value {
        Some(Bson::DateTime(d)) => Ok(d.timestamp_millis()),
        Some(Bson::Timestamp(ts)) => Ok(i64::from(ts.time) * 1000),
        Some(Bson::ObjectId(oid)) => Ok(oid.timestamp().timestamp_millis()),
        other => Err(Error::location(
            16006,
            format!("can't convert from BSON type {} to Date", type_name(other)),
        )),
    }
}

/// A fixed offset from UTC, in minutes.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Offset(i64);

impl Offset {
    fn millis(self) -> i64 {
        self.0 * 60_000
    }
}

/// The offset named by an optional `timezone` argument; `None` when it is null.
fn eval_timezone(tz: Option<&Expression>, env: &Env<'_>) -> Result<Option<Offset>> {
    let Some(tz) = tz else {
        return Ok(Some(Offset(0)));
    };
    let v = tz.eval(env)?;
    match v.as_deref() {
        v if is_nullish(v) => Ok(None),
        Some(Bson::String(name)) => parse_timezone(name).map(Some),
        other => Err(Error::location(
            40517,
            format!(
                "timezone must evaluate to a string, found {}",
                type_name(other)
            ),
        )),
    }
}

fn parse_timezone(name: &str) -> Result<Offset> {
    if matches!(name, "UTC" | "GMT" | "Z" | "Etc/UTC" | "Etc/GMT") {
        return Ok(Offset(0));
    }
    parse_offset(name).ok_or_else(|| {
        Error::location(
            40485,
            format!("unrecognized time zone identifier: \"{name}\""),
        )
    })
}

/// `+hh`, `+hhmm` or `+hh:mm` (or with `-`).
fn parse_offset(text: &str) -> Option<Offset> {
    let (sign, rest) = match text.as_bytes().first()? {
        b'+' => (1, &text[1..]),
        b'-' => (-1, &text[1..]),
        _ => return None,
    };
    let digits: String = rest.chars().filter(|c| *c != ':').collect();
    if !digits.chars().all(|c| c.is_ascii_digit()) || rest.matches(':').count() > 1 {
        return None;
    }
    let (h, m) = match digits.len() {
        2 => (digits.parse::<i64>().ok()?, 0),
        4 => (
            digits[..2].parse::<i64>().ok()?,
            digits[2..].parse::<i64>().ok()?,
        ),
        _ => return None,
    };
    (h <= 23 && m <= 59).then_some(Offset(sign * (h * 60 + m)))
}

/// A moment split into calendar fields (proleptic Gregorian, as MongoDB uses).
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
    pub fn from_millis(ms: i64) -> Civil {
        let days = ms.div_euclid(86_400_000);
        let in_day = ms.rem_euclid(86_400_000);
        let (year, month, day) = civil_from_days(days);
        Civil {
            year,
            month,
            day,
            hour: (in_day / 3_600_000) as u32,
            minute: (in_day / 60_000 % 60) as u32,
            second: (in_day / 1000 % 60) as u32,
            millis: (in_day % 1000) as u32,
            // 1970-01-01 was a Thursday.
            day_of_week: ((days + 4).rem_euclid(7) + 1) as u32,
            day_of_year: (days - days_from_civil(year, 1, 1) + 1) as u32,
        }
    }

    fn iso_day_of_week(&self) -> u32 {
        (self.day_of_week + 5) % 7 + 1
    }

    /// The ISO 8601 week-numbering year and week.
    fn iso_week(&self) -> (i64, u32) {
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
    fn week(&self) -> u32 {
        (self.day_of_year + 6 - (self.day_of_week - 1)) / 7
    }

    fn get(&self, part: Part) -> Bson {
        let int = |v: u32| Bson::Int32(v as i32);
        match part {
            Part::Year => Bson::Int32(self.year as i32),
            Part::Month => int(self.month),
            Part::DayOfMonth => int(self.day),
            Part::Hour => int(self.hour),
            Part::Minute => int(self.minute),
            Part::Second => int(self.second),
            Part::Millisecond => int(self.millis),
            Part::DayOfWeek => int(self.day_of_week),
            Part::DayOfYear => int(self.day_of_year),
            Part::Week => int(self.week()),
            Part::IsoWeek => int(self.iso_week().1),
            Part::IsoWeekYear => Bson::Int64(self.iso_week().0),
            Part::IsoDayOfWeek => int(self.iso_day_of_week()),
        }
    }
}

fn iso_weeks_in_year(year: i64) -> u32 {
    // A year has 53 ISO weeks when it starts on a Thursday, or on a Wednesday in a leap
    // year.
    let jan1 = Civil::from_millis(days_from_civil(year, 1, 1) * 86_400_000);
    let leap = days_from_civil(year + 1, 1, 1) - days_from_civil(year, 1, 1) == 366;
    match jan1.day_of_week {
        5 => 53,
        4 if leap => 53,
        _ => 52,
    }
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

/// Renders `format`'s `%` specifiers.
fn render(format: &str, c: &Civil, offset: Offset) -> Result<String> {
    let mut out = String::with_capacity(format.len() + 8);
    let mut chars = format.chars();
    while let Some(ch) = chars.next() {
        if ch != '%' {
            out.push(ch);
            continue;
        }
        let Some(spec) = chars.next() else {
            return Err(Error::location(
                18535,
                "Unmatched '%' at end of format string",
            ));
        };
        // Writing to a String cannot fail.
        let _ = match spec {
            'Y' => write!(out, "{:04}", c.year),
            'm' => write!(out, "{:02}", c.month),
            'd' => write!(out, "{:02}", c.day),
            'H' => write!(out, "{:02}", c.hour),
            'M' => write!(out, "{:02}", c.minute),
            'S' => write!(out, "{:02}", c.second),
            'L' => write!(out, "{:03}", c.millis),
            'j' => write!(out, "{:03}", c.day_of_year),
            'w' => write!(out, "{}", c.day_of_week),
            'u' => write!(out, "{}", c.iso_day_of_week()),
            'U' => write!(out, "{:02}", c.week()),
            'V' => write!(out, "{:02}", c.iso_week().1),
            'G' => write!(out, "{:04}", c.iso_week().0),
            'z' => write!(
                out,
                "{}{:02}{:02}",
                if offset.0 < 0 { '-' } else { '+' },
                offset.0.abs() / 60,
                offset.0.abs() % 60
            ),
            'Z' => write!(
                out,
                "{}{}",
                if offset.0 < 0 { '-' } else { '+' },
                offset.0.abs()
            ),
            'b' => write!(out, "{}", &MONTHS[c.month as usize - 1][..3]),
            'B' => write!(out, "{}", MONTHS[c.month as usize - 1]),
            '%' => write!(out, "%"),
            other => {
                return Err(Error::location(
                    18536,
                    format!("Invalid format character '%{other}' in format string"),
                ))
            }
        };
    }
    Ok(out)
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// A date as `$toString` writes it: `2018-03-27T16:58:51.538Z`.
pub(crate) fn format_iso(ms: i64) -> String {
    render(ISO_FORMAT, &Civil::from_millis(ms), Offset(0)).unwrap_or_default()
}

/// Parses the ISO 8601 forms MongoDB accepts for `$toDate`: a date, optionally with a
/// time (`T` or a space), fractional seconds and a `Z` or `±hh[:mm]` offset.
pub(crate) fn parse_date(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    let num = |range: std::ops::Range<usize>| -> Option<u32> {
        let s = text.get(range)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let year = i64::from(num(0..4)?);
    let month = num(5..7)?;
    let day = num(8..10)?;
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    let mut ms = days_from_civil(year, month, day) * 86_400_000;
    let mut rest = &text[10..];
    if let Some(time) = rest.strip_prefix(['T', ' ']) {
        let tb = time.as_bytes();
        if tb.len() < 5 || tb[2] != b':' {
            return None;
        }
        let hour = num(11..13)?;
        let minute = num(14..16)?;
        let mut consumed = 5;
        let mut second = 0;
        let mut millis = 0;
        if tb.get(5) == Some(&b':') {
            second = num(17..19)?;
            consumed = 8;
            if tb.get(8) == Some(&b'.') {
                let digits: String = time[9..].chars().take_while(char::is_ascii_digit).collect();
                if digits.is_empty() {
                    return None;
                }
                let padded = format!("{digits:0<3}");
                millis = padded[..3].parse().ok()?;
                consumed = 9 + digits.len();
            }
        }
        if hour > 23 || minute > 59 || second > 59 {
            return None;
        }
        ms += i64::from(hour) * 3_600_000
            + i64::from(minute) * 60_000
            + i64::from(second) * 1000
            + i64::from(millis);
        rest = &time[consumed..];
    }
    match rest {
        "" | "Z" => Some(ms),
        offset => parse_offset(offset).map(|o| ms - o.millis()),
    }
}

fn days_in_month(year: i64, month: u32) -> u32 {
    let next = if month == 12 {
        days_from_civil(year + 1, 1, 1)
    } else {
        days_from_civil(year, month + 1, 1)
    };
    (next - days_from_civil(year, month, 1)) as u32
}

/// Used by tests of other families to build dates from calendar fields.
#[cfg(test)]
pub(crate) fn millis(year: i64, month: u32, day: u32, hms: (u32, u32, u32), ms: u32) -> i64 {
    days_from_civil(year, month, day) * 86_400_000
        + i64::from(hms.0) * 3_600_000
        + i64::from(hms.1) * 60_000
        + i64::from(hms.2) * 1000
        + i64::from(ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expression::test_util::*;
    use bson::{bson, doc, oid::ObjectId, DateTime, Timestamp};

    fn date(year: i64, month: u32, day: u32, hms: (u32, u32, u32), ms: u32) -> Bson {
        Bson::DateTime(DateTime::from_millis(millis(year, month, day, hms, ms)))
    }

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
        assert_eq!(
            value(bson!({"$year": Bson::Timestamp(Timestamp { time: 0, increment: 1 })})),
            bson!(1970)
        );
        let oid = ObjectId::parse_str("5ab9cbfa31c2ab715d42129e").unwrap();
        assert_eq!(value(bson!({"$month": oid})), bson!(3));
        assert_eq!(value(bson!({"$year": "$nope"})), Bson::Null);
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
        assert_eq!(error_code(bson!({"$year": [1, 2]})), 40536);
    }

    #[test]
    fn date_to_string() {
        let d = date(2014, 1, 1, (8, 15, 39), 736);
        assert_eq!(
            value(bson!({"$dateToString": {"date": d.clone()}})),
            bson!("2014-01-01T08:15:39.736Z")
        );
        assert_eq!(
            value(
                bson!({"$dateToString": {"date": d.clone(), "format": "%Y/%m/%d %H:%M:%S %j %w %u %U %V %G %% %b %B"}})
            ),
            bson!("2014/01/01 08:15:39 001 4 3 00 01 2014 % Jan January")
        );
        assert_eq!(
            value(
                bson!({"$dateToString": {"date": d.clone(), "format": "%H:%M %z %Z", "timezone": "-04:30"}})
            ),
            bson!("03:45 -0430 -270")
        );
        assert_eq!(
            value(bson!({"$dateToString": {"date": "$nope", "onNull": "none"}})),
            bson!("none")
        );
        assert_eq!(value(bson!({"$dateToString": {"date": "$n"}})), Bson::Null);
        assert_eq!(
            error_code(bson!({"$dateToString": {"date": d.clone(), "format": "%q"}})),
            18536
        );
        assert_eq!(
            error_code(bson!({"$dateToString": {"date": d.clone(), "format": "%"}})),
            18535
        );
        assert_eq!(
            error_code(bson!({"$dateToString": {"date": d.clone(), "format": 1}})),
            18533
        );
        assert_eq!(
            error_code(bson!({"$dateToString": {"format": "%Y"}})),
            18628
        );
        assert_eq!(
            error_code(bson!({"$dateToString": {"date": d, "x": 1}})),
            18534
        );
        assert_eq!(error_code(bson!({"$dateToString": "x"})), 18629);
    }

    #[test]
    fn parses_iso_dates() {
        assert_eq!(
            parse_date("2018-03-27"),
            Some(millis(2018, 3, 27, (0, 0, 0), 0))
        );
        assert_eq!(
            parse_date("2018-03-27T16:58:51.538Z"),
            Some(millis(2018, 3, 27, (16, 58, 51), 538))
        );
        assert_eq!(
            parse_date("2018-03-27 16:58"),
            Some(millis(2018, 3, 27, (16, 58, 0), 0))
        );
        assert_eq!(
            parse_date("2018-03-27T16:58:51+02:00"),
            Some(millis(2018, 3, 27, (14, 58, 51), 0))
        );
        assert_eq!(parse_date("2018-02-30"), None);
        assert_eq!(parse_date("yesterday"), None);
        assert_eq!(format_iso(-1), "1969-12-31T23:59:59.999Z");
    }
}
