//! Dates as text: `$dateToString` renders MongoDB's `%` format specifiers, and
//! `$dateFromString` parses them back (or, without a format, the ISO 8601 forms). The ISO
//! helpers also serve `$toDate` and `$toString`.

use super::calendar::{days_from_civil, days_in_month, iso_year_start, Civil, DAY_MS};
use super::zone::{parse_offset_minutes, Zone};
use super::{date_millis, date_value, parse_args, required, TimezoneArg};
use crate::context::ParseContext;
use crate::env::{Env, Value};
use crate::expression::{is_nullish, type_name, Expression};
use crate::numeric::display;
use basalt_error::{Error, ErrorCode, Result};
use bson::Bson;
use std::borrow::Cow;
use std::fmt::Write;

/// The default format of `$dateToString` in UTC, and in any other zone.
const ISO_FORMAT: &str = "%Y-%m-%dT%H:%M:%S.%LZ";
const ISO_FORMAT_LOCAL: &str = "%Y-%m-%dT%H:%M:%S.%L";

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

/// `{$dateToString: {date, format, timezone, onNull}}`.
#[derive(Debug)]
pub(crate) struct DateToString {
    date: Expression,
    format: Option<Expression>,
    timezone: TimezoneArg,
    on_null: Option<Expression>,
}

impl DateToString {
    pub(crate) fn parse(args: &Bson, ctx: &ParseContext) -> Result<DateToString> {
        let name = "$dateToString";
        let [date, format, timezone, on_null] = parse_args(
            name,
            args,
            ctx,
            ["date", "format", "timezone", "onNull"],
            (18629, "only supports an object as its argument"),
            18534,
        )?;
        let date = required(date, 18628, "Missing 'date' parameter to $dateToString")?;
        if let Some(f) = format.as_ref().and_then(Expression::as_constant) {
            format_string(Some(f), Direction::ToString)?;
        }
        Ok(DateToString {
            date,
            format,
            timezone: TimezoneArg::parse(timezone)?,
            on_null,
        })
    }

    pub(crate) fn eval<'a>(&'a self, env: &Env<'a>) -> Result<Value<'a>> {
        // MongoDB validates the format and the zone before looking at the date, and
        // lets a null date (onNull) win over a null zone or format.
        let format = match &self.format {
            Some(f) => Some(format_string(f.eval(env)?.as_deref(), Direction::ToString)?),
            None => None,
        };
        let zone = self.timezone.eval(env)?;
        let d = self.date.eval(env)?;
        if is_nullish(d.as_deref()) {
            return match &self.on_null {
                Some(e) => e.eval(env),
                None => Ok(Some(Cow::Owned(Bson::Null))),
            };
        }
        let Some(zone) = zone else {
            return Ok(Some(Cow::Owned(Bson::Null)));
        };
        let format = match &format {
            None if zone.is_utc() => ISO_FORMAT,
            None => ISO_FORMAT_LOCAL,
            Some(Some(f)) => f.as_str(),
            Some(None) => return Ok(Some(Cow::Owned(Bson::Null))),
        };
        let ms = date_millis(d.as_deref())?;
        let offset_minutes = zone.offset_ms(ms) / 60_000;
        let civil = Civil::from_millis(zone.to_local(ms));
        Ok(Some(Cow::Owned(Bson::String(render(
            format,
            &civil,
            offset_minutes,
        )?))))
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Direction {
    ToString,
    FromString,
}

/// A `format` argument: checked to be a string of known specifiers, `None` when null.
fn format_string(value: Option<&Bson>, direction: Direction) -> Result<Option<String>> {
    match value {
        v if is_nullish(v) => Ok(None),
        Some(Bson::String(f)) => {
            let allowed: &[char] = match direction {
                Direction::ToString => &[
                    'Y', 'm', 'd', 'H', 'M', 'S', 'L', 'j', 'w', 'u', 'U', 'V', 'G', 'z', 'Z', 'b',
                    'B', '%',
                ],
                Direction::FromString => &[
                    'Y', 'm', 'd', 'H', 'M', 'S', 'L', 'j', 'u', 'V', 'G', 'z', 'Z', 'b', 'B', '%',
                ],
            };
            for spec in specifiers(f) {
                match spec {
                    None => {
                        return Err(Error::location(
                            18535,
                            "Unmatched '%' at end of format string",
                        ))
                    }
                    Some(c) if !allowed.contains(&c) => {
                        return Err(Error::location(
                            18536,
                            format!("Invalid format character '%{c}' in format string"),
                        ))
                    }
                    Some(_) => {}
                }
            }
            Ok(Some(f.clone()))
        }
        other => {
            let (code, op) = match direction {
                Direction::ToString => (18533, "$dateToString"),
                Direction::FromString => (40684, "$dateFromString"),
            };
            Err(Error::location(
                code,
                format!(
                    "{op} requires that 'format' be a string, found: {} with value {}",
                    type_name(other),
                    other.map_or_else(String::new, display)
                ),
            ))
        }
    }
}

/// The characters after each `%` of a format; `None` for a `%` that ends it.
fn specifiers(format: &str) -> impl Iterator<Item = Option<char>> + '_ {
    let mut chars = format.chars();
    std::iter::from_fn(move || loop {
        match chars.next()? {
            '%' => return Some(chars.next()),
            _ => continue,
        }
    })
}

/// Renders `format`'s `%` specifiers (already validated).
fn render(format: &str, c: &Civil, offset_minutes: i64) -> Result<String> {
    let mut out = String::with_capacity(format.len() + 8);
    let mut chars = format.chars();
    let sign = if offset_minutes < 0 { '-' } else { '+' };
    let abs = offset_minutes.abs();
    while let Some(ch) = chars.next() {
        if ch != '%' {
            out.push(ch);
            continue;
        }
        let spec = chars.next();
        // Writing to a String cannot fail.
        let _ = match spec {
            Some('Y') => write!(out, "{:04}", c.year),
            Some('m') => write!(out, "{:02}", c.month),
            Some('d') => write!(out, "{:02}", c.day),
            Some('H') => write!(out, "{:02}", c.hour),
            Some('M') => write!(out, "{:02}", c.minute),
            Some('S') => write!(out, "{:02}", c.second),
            Some('L') => write!(out, "{:03}", c.millis),
            Some('j') => write!(out, "{:03}", c.day_of_year),
            Some('w') => write!(out, "{}", c.day_of_week),
            Some('u') => write!(out, "{}", c.iso_day_of_week()),
            Some('U') => write!(out, "{:02}", c.week()),
            Some('V') => write!(out, "{:02}", c.iso_week().1),
            Some('G') => write!(out, "{:04}", c.iso_week().0),
            Some('z') => write!(out, "{sign}{:02}{:02}", abs / 60, abs % 60),
            Some('Z') => write!(out, "{sign}{abs}"),
            Some('b') => write!(out, "{}", &MONTHS[c.month as usize - 1][..3]),
            Some('B') => write!(out, "{}", MONTHS[c.month as usize - 1]),
            Some('%') => write!(out, "%"),
            other => {
                debug_assert!(false, "unvalidated format specifier {other:?}");
                return Err(Error::location(
                    18536,
                    "Invalid format character in format string",
                ));
            }
        };
    }
    Ok(out)
}

/// A timestamp as the older string coercions (`$substr`, `$toLower`, ...) write it, as
/// mongod's `Timestamp::toString`: `Jul 20 18:40:00:1` (UTC, then the increment).
pub(crate) fn format_timestamp(seconds: u32, increment: u32) -> String {
    let c = Civil::from_millis(i64::from(seconds) * 1000);
    format!(
        "{} {:>2} {:02}:{:02}:{:02}:{increment}",
        &MONTHS[c.month as usize - 1][..3],
        c.day,
        c.hour,
        c.minute,
        c.second
    )
}

/// A date as `$toString` writes it: `2018-03-27T16:58:51.538Z`.
pub(crate) fn format_iso(ms: i64) -> String {
    render(ISO_FORMAT, &Civil::from_millis(ms), 0).unwrap_or_default()
}

/// Parses the ISO 8601 forms MongoDB accepts for `$toDate`: a date, optionally with a
/// time (`T` or spaces and tabs between them), fractional seconds and a `Z` or
/// `±hh[:mm]` offset (spaces may come before it); whitespace, NUL and no-break spaces
/// around it are ignored, as mongod's parser ignores them.
pub(crate) fn parse_date(text: &str) -> Option<i64> {
    let text = text.trim_matches(|c| matches!(c, '\0' | '\u{A0}') || c.is_ascii_whitespace());
    parse_iso(text).map(|(local, offset)| local - offset.unwrap_or(0))
}

/// Whether `c` separates the parts of a date string: a space or a tab.
fn is_blank(c: char) -> bool {
    c == ' ' || c == '\t'
}

/// `text` as a number when it is only ASCII digits.
fn digits(text: Option<&str>) -> Option<u32> {
    let text = text?;
    (!text.is_empty() && text.bytes().all(|c| c.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}

/// An ISO 8601 date-time: its local milliseconds and the offset it names, if any.
fn parse_iso(text: &str) -> Option<(i64, Option<i64>)> {
    let b = text.as_bytes();
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let year = i64::from(digits(text.get(0..4))?);
    let month = digits(text.get(5..7))?;
    let day = digits(text.get(8..10))?;
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    let mut ms = days_from_civil(year, month, day) * DAY_MS;
    let mut rest = &text[10..];
    let time = match rest.strip_prefix('T') {
        Some(time) => Some(time),
        None if rest.starts_with(is_blank) => Some(rest.trim_start_matches(is_blank)),
        None => None,
    };
    if let Some(time) = time {
        let tb = time.as_bytes();
        if tb.len() < 5 || tb[2] != b':' {
            return None;
        }
        let hour = digits(time.get(0..2))?;
        let minute = digits(time.get(3..5))?;
        let mut consumed = 5;
        let mut second = 0;
        let mut millis = 0;
        if tb.get(5) == Some(&b':') {
            second = digits(time.get(6..8))?;
            consumed = 8;
            if tb.get(8) == Some(&b'.') {
                let fraction: String = time[9..].chars().take_while(char::is_ascii_digit).collect();
                if fraction.is_empty() {
                    return None;
                }
                let padded = format!("{fraction:0<3}");
                millis = padded[..3].parse().ok()?;
                consumed = 9 + fraction.len();
            }
        }
        if hour > 23 || minute > 59 || second > 59 {
            return None;
        }
        ms += i64::from(hour) * 3_600_000
            + i64::from(minute) * 60_000
            + i64::from(second) * 1000
            + i64::from(millis);
        rest = time[consumed..].trim_start_matches(is_blank);
    }
    match rest {
        "" => Some((ms, None)),
        "Z" => Some((ms, Some(0))),
        offset => parse_offset_minutes(offset).map(|m| (ms, Some(m * 60_000))),
    }
}

/// `{$dateFromString: {dateString, format, timezone, onError, onNull}}`.
#[derive(Debug)]
pub(crate) struct DateFromString {
    date_string: Expression,
    format: Option<Expression>,
    timezone: TimezoneArg,
    on_error: Option<Expression>,
    on_null: Option<Expression>,
}

impl DateFromString {
    pub(crate) fn parse(args: &Bson, ctx: &ParseContext) -> Result<DateFromString> {
        let name = "$dateFromString";
        let [date_string, format, timezone, on_error, on_null] = parse_args(
            name,
            args,
            ctx,
            ["dateString", "format", "timezone", "onError", "onNull"],
            (40540, "only supports an object as its argument"),
            40541,
        )?;
        let date_string = required(
            date_string,
            40542,
            "Missing 'dateString' parameter to $dateFromString",
        )?;
        if let Some(f) = format.as_ref().and_then(Expression::as_constant) {
            format_string(Some(f), Direction::FromString)?;
        }
        Ok(DateFromString {
            date_string,
            format,
            timezone: TimezoneArg::parse(timezone)?,
            on_error,
            on_null,
        })
    }

    pub(crate) fn eval<'a>(&'a self, env: &Env<'a>) -> Result<Value<'a>> {
        let text = self.date_string.eval(env)?;
        let format = match &self.format {
            Some(f) => Some(format_string(
                f.eval(env)?.as_deref(),
                Direction::FromString,
            )?),
            None => None,
        };
        let zone = self.timezone.eval(env)?;
        if is_nullish(text.as_deref()) {
            return match &self.on_null {
                Some(e) => e.eval(env),
                None => Ok(Some(Cow::Owned(Bson::Null))),
            };
        }
        let parsed = match text.as_deref() {
            Some(Bson::String(s)) => match (zone, format) {
                (None, _) | (_, Some(None)) => return Ok(Some(Cow::Owned(Bson::Null))),
                (Some(zone), Some(Some(format))) => from_string(s, &zone, Some(&format)),
                (Some(zone), None) => from_string(s, &zone, None),
            },
            other => Err(Error::new(
                ErrorCode::CONVERSION_FAILURE,
                format!(
                    "$dateFromString requires that 'dateString' be a string, found: {} with value {}",
                    type_name(other),
                    other.map_or_else(String::new, display)
                ),
            )),
        };
        match parsed {
            Ok(ms) => Ok(date_value(ms).map(Cow::Owned)),
            Err(e) if e.code == ErrorCode::CONVERSION_FAILURE => match &self.on_error {
                Some(on_error) => on_error.eval(env),
                None => Err(e),
            },
            Err(e) => Err(e),
        }
    }
}

/// The instant `text` names, read with `format` (or as ISO 8601) in `zone` unless it
/// carries its own offset.
fn from_string(text: &str, zone: &Zone, format: Option<&str>) -> Result<i64> {
    let fail = |why: &str| {
        Error::new(
            ErrorCode::CONVERSION_FAILURE,
            format!("Error parsing date string '{text}'; {why}"),
        )
    };
    let (local, offset) = match format {
        Some(format) => match parse_with_format(text, format).map_err(|why| fail(&why))? {
            Some(parsed) => parsed,
            None => {
                return Err(Error::new(
                    ErrorCode::CONVERSION_FAILURE,
                    format!(
                        "an incomplete date/time string has been found, with elements missing: \"{text}\""
                    ),
                ))
            }
        },
        None => parse_iso(text).ok_or_else(|| fail("could not parse it as an ISO 8601 date"))?,
    };
    match offset {
        None => Ok(zone.to_utc(local)),
        Some(_) if !zone.is_utc() => Err(Error::new(
            ErrorCode::CONVERSION_FAILURE,
            "you cannot pass in a date/time string with GMT offset together with a timezone argument",
        )),
        Some(offset) => Ok(local - offset),
    }
}

/// Fields read by a format. A date needs its year, month and day (or ISO week date, or
/// year and day of year); the time may be absent altogether, but not in part.
#[derive(Default)]
struct Fields {
    year: Option<i64>,
    month: Option<i64>,
    day: Option<i64>,
    day_of_year: Option<i64>,
    iso_year: Option<i64>,
    iso_week: Option<i64>,
    iso_day: Option<i64>,
    hms: [Option<i64>; 3],
    millis: i64,
    offset_ms: Option<i64>,
}

/// Reads `text` with `format`'s specifiers: local milliseconds and the offset it names,
/// or `None` when fields are missing.
fn parse_with_format(
    text: &str,
    format: &str,
) -> std::result::Result<Option<(i64, Option<i64>)>, String> {
    let mut f = Fields::default();
    let mut rest = text;
    let mut chars = format.chars();
    while let Some(ch) = chars.next() {
        if ch != '%' {
            rest = rest
                .strip_prefix(ch)
                .ok_or_else(|| format!("expected '{ch}' at '{rest}'"))?;
            continue;
        }
        let spec = chars.next().unwrap_or('%');
        let mut digits = |max: usize| take_digits(&mut rest, max, spec).map(|(v, _)| v);
        match spec {
            'Y' => f.year = Some(digits(4)?),
            'm' => f.month = Some(digits(2)?),
            'd' => f.day = Some(digits(2)?),
            'H' => f.hms[0] = Some(digits(2)?),
            'M' => f.hms[1] = Some(digits(2)?),
            'S' => f.hms[2] = Some(digits(2)?),
            'L' => {
                let (v, n) = take_digits(&mut rest, 3, spec)?;
                f.millis = v * 10_i64.pow(3 - n as u32);
            }
            'j' => f.day_of_year = Some(digits(3)?),
            'G' => f.iso_year = Some(digits(4)?),
            'V' => f.iso_week = Some(digits(2)?),
            'u' => f.iso_day = Some(digits(1)?),
            'b' | 'B' => {
                let month = MONTHS
                    .iter()
                    .position(|m| {
                        let name = if spec == 'b' { &m[..3] } else { m };
                        rest.get(..name.len())
                            .is_some_and(|r| r.eq_ignore_ascii_case(name))
                    })
                    .ok_or_else(|| format!("expected a month name at '{rest}'"))?;
                let len = if spec == 'b' { 3 } else { MONTHS[month].len() };
                rest = &rest[len..];
                f.month = Some(month as i64 + 1);
            }
            'z' | 'Z' => {
                let end = rest
                    .char_indices()
                    .skip(1)
                    .find(|(_, c)| !c.is_ascii_digit() && *c != ':')
                    .map_or(rest.len(), |(i, _)| i);
                let (zone_text, tail) = rest.split_at(end);
                let minutes = if spec == 'Z' && zone_text.len() > 1 {
                    // `%Z` is the offset in minutes, as `$dateToString` writes it.
                    zone_text.parse::<i64>().ok()
                } else {
                    parse_offset_minutes(zone_text)
                };
                f.offset_ms = Some(
                    minutes.ok_or_else(|| format!("bad time zone offset '{zone_text}'"))? * 60_000,
                );
                rest = tail;
            }
            _ => rest = rest.strip_prefix('%').ok_or("expected '%'")?,
        }
    }
    if !rest.is_empty() {
        return Err(format!("trailing data '{rest}'"));
    }
    let [hour, minute, second] = match f.hms {
        [None, None, None] => [0; 3],
        [Some(h), Some(m), Some(s)] => [h, m, s],
        _ => return Ok(None),
    };
    if hour > 23 || minute > 59 || second > 59 {
        return Err("the parsed time was invalid".to_string());
    }
    let invalid = || Err("the parsed date was invalid".to_string());
    let days = if let Some(iso_year) = f.iso_year {
        let (week, day) = (f.iso_week.unwrap_or(1), f.iso_day.unwrap_or(1));
        if !(1..=53).contains(&week) || !(1..=7).contains(&day) {
            return invalid();
        }
        iso_year_start(iso_year) + (week - 1) * 7 + day - 1
    } else {
        let Some(year) = f.year else {
            return Ok(None);
        };
        match (f.day_of_year, f.month, f.day) {
            (Some(day_of_year), _, _) => {
                let len = days_from_civil(year + 1, 1, 1) - days_from_civil(year, 1, 1);
                if !(1..=len).contains(&day_of_year) {
                    return invalid();
                }
                days_from_civil(year, 1, 1) + day_of_year - 1
            }
            (None, Some(month), Some(day)) => {
                if !(1..=12).contains(&month)
                    || day < 1
                    || day > i64::from(days_in_month(year, month as u32))
                {
                    return invalid();
                }
                days_from_civil(year, month as u32, day as u32)
            }
            _ => return Ok(None),
        }
    };
    let local = days * DAY_MS + hour * 3_600_000 + minute * 60_000 + second * 1000 + f.millis;
    Ok(Some((local, f.offset_ms)))
}

/// Up to `max` leading digits of `rest`, consumed: their value and how many there were.
fn take_digits(
    rest: &mut &str,
    max: usize,
    spec: char,
) -> std::result::Result<(i64, usize), String> {
    let n = rest
        .bytes()
        .take(max)
        .take_while(u8::is_ascii_digit)
        .count();
    let value = rest[..n]
        .parse()
        .map_err(|_| format!("expected a number for %{spec} at '{rest}'"))?;
    *rest = &rest[n..];
    Ok((value, n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expression::test_util::*;
    use crate::operators::date::millis;
    use bson::{bson, DateTime};

    fn date(year: i64, month: u32, day: u32, hms: (u32, u32, u32), ms: u32) -> Bson {
        Bson::DateTime(DateTime::from_millis(millis(year, month, day, hms, ms)))
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
        // An Olson zone: the default format drops the `Z`, offsets follow the instant.
        assert_eq!(
            value(bson!({"$dateToString": {"date": d.clone(), "timezone": "America/New_York"}})),
            bson!("2014-01-01T03:15:39.736")
        );
        assert_eq!(
            value(
                bson!({"$dateToString": {"date": date(2014, 7, 1, (8, 0, 0), 0), "format": "%H %z %Z", "timezone": "Europe/London"}})
            ),
            bson!("09 +0100 +60")
        );
        assert_eq!(
            value(bson!({"$dateToString": {"date": "$nope", "onNull": "none"}})),
            bson!("none")
        );
        assert_eq!(
            value(bson!({"$dateToString": {"date": "$nope", "format": "$nope", "onNull": 0}})),
            bson!(0)
        );
        assert_eq!(value(bson!({"$dateToString": {"date": "$n"}})), Bson::Null);
        assert_eq!(
            value(bson!({"$dateToString": {"date": d.clone(), "format": "$nope"}})),
            Bson::Null
        );
        let code = |spec| error_code(bson!({ "$dateToString": spec }));
        assert_eq!(code(bson!({"date": d.clone(), "format": "%q"})), 18536);
        assert_eq!(code(bson!({"date": d.clone(), "format": "%"})), 18535);
        assert_eq!(code(bson!({"date": d.clone(), "format": 1})), 18533);
        assert_eq!(code(bson!({"format": "%Y"})), 18628);
        assert_eq!(code(bson!({"date": d.clone(), "x": 1})), 18534);
        assert_eq!(code(bson!({"date": d, "timezone": "Nowhere/Land"})), 40485);
        assert_eq!(code(bson!("x")), 18629);
    }

    #[test]
    fn date_from_string() {
        let parse = |spec| value(bson!({ "$dateFromString": spec }));
        assert_eq!(
            parse(bson!({"dateString": "2017-02-08T12:10:40.787"})),
            date(2017, 2, 8, (12, 10, 40), 787)
        );
        assert_eq!(
            parse(bson!({"dateString": "2017-02-08T12:10:40.787", "timezone": "America/New_York"})),
            date(2017, 2, 8, (17, 10, 40), 787)
        );
        assert_eq!(
            parse(bson!({"dateString": "2017-02-08T12:10:40+05:30"})),
            date(2017, 2, 8, (6, 40, 40), 0)
        );
        assert_eq!(
            parse(bson!({"dateString": "15-06-2018", "format": "%d-%m-%Y"})),
            date(2018, 6, 15, (0, 0, 0), 0)
        );
        assert_eq!(
            parse(bson!({"dateString": "2020-194 14:24:45.46", "format": "%Y-%j %H:%M:%S.%L"})),
            date(2020, 7, 12, (14, 24, 45), 460)
        );
        assert_eq!(
            parse(bson!({"dateString": "2017-W06-3", "format": "%G-W%V-%u"})),
            date(2017, 2, 8, (0, 0, 0), 0)
        );
        assert_eq!(
            parse(bson!({"dateString": "8 february 2017 +0100", "format": "%d %B %Y %z"})),
            date(2017, 2, 7, (23, 0, 0), 0)
        );
        assert_eq!(
            parse(bson!({"dateString": "Feb 8 2017 -60", "format": "%b %d %Y %Z"})),
            date(2017, 2, 8, (1, 0, 0), 0)
        );
        assert_eq!(parse(bson!({"dateString": "$nope", "onNull": 0})), bson!(0));
        assert_eq!(parse(bson!({"dateString": "$nope"})), Bson::Null);
        assert_eq!(
            parse(bson!({"dateString": "2017-02-30", "onError": "bad"})),
            bson!("bad")
        );
        assert_eq!(
            parse(bson!({"dateString": 5, "onError": "bad"})),
            bson!("bad")
        );
        assert_eq!(
            parse(bson!({"dateString": "2017-02-08", "timezone": "$nope"})),
            Bson::Null
        );
        let code = |spec| error_code(bson!({ "$dateFromString": spec }));
        assert_eq!(code(bson!({"dateString": "2017-02-30"})), 241);
        assert_eq!(
            code(bson!({"dateString": "2017-02", "format": "%Y-%m"})),
            241
        );
        assert_eq!(
            code(bson!({"dateString": "2017-02-01 10", "format": "%Y-%m-%d %H"})),
            241
        );
        assert_eq!(code(bson!({"dateString": "tomorrow"})), 241);
        assert_eq!(code(bson!({"dateString": 5})), 241);
        assert_eq!(
            code(bson!({"dateString": "2017-02-08T12:00Z", "timezone": "Europe/London"})),
            241
        );
        assert_eq!(
            code(bson!({"dateString": "8", "format": "%d", "x": 1})),
            40541
        );
        assert_eq!(code(bson!({"format": "%d"})), 40542);
        assert_eq!(code(bson!({"dateString": "8", "format": 1})), 40684);
        assert_eq!(code(bson!({"dateString": "8", "format": "%w"})), 18536);
        assert_eq!(code(bson!({"dateString": "8", "format": "%d%"})), 18535);
        assert_eq!(error_code(bson!({"$dateFromString": "x"})), 40540);
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
        // Whitespace around it, runs of blanks between its parts, and before the zone.
        let noon = parse_date("2024-06-15T12:30:45Z");
        assert!(noon.is_some());
        for lenient in [
            " 2024-06-15T12:30:45Z",
            "\u{A0}2024-06-15T12:30:45Z\0",
            "2024-06-15  12:30:45Z\n",
            "2024-06-15\t12:30:45 Z",
        ] {
            assert_eq!(parse_date(lenient), noon, "{lenient:?}");
        }
        assert_eq!(
            parse_date("2018-03-20 11:00:06 +0500"),
            parse_date("2018-03-20T06:00:06Z")
        );
        assert_eq!(parse_date("yesterday"), None);
        assert_eq!(format_iso(-1), "1969-12-31T23:59:59.999Z");
    }
}
