//! The types of CSV/TSV columns, as mongoimport's `--columnsHaveTypes` writes them
//! (`name.int32()`, `born.date(2006-01-02)`, `blob.binary(hex)`), and `auto()`: the type
//! inference used for every column without that flag (int32, int64, double, else string).
//!
//! Date layouts come in mongoimport's three dialects: Go reference times (`date`,
//! `date_go`: `2006-01-02T15:04:05Z07:00`), Microsoft's (`date_ms`: `yyyy-MM-dd HH:mm:ss`)
//! and Oracle's (`date_oracle`: `YYYY-MM-DD HH24:MI:SS`). All three compile to the same
//! tokens, so one parser reads them.

use basalt_error::{Error, Result};
use base64::Engine as _;
use bson::{spec::BinarySubtype, Binary, Bson, DateTime, Decimal128};

/// How a column's text becomes a BSON value.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum ColumnType {
    Auto,
    String,
    Int32,
    Int64,
    Double,
    Decimal,
    Boolean,
    Date(Vec<Token>),
    Binary(Encoding),
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Encoding {
    Base64,
    Hex,
}

/// One piece of a date layout.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Token {
    Year,
    /// Month, day, hour, minute, second: `width` digits exactly, or 1–2 when `None`.
    Month(Option<usize>),
    Day(Option<usize>),
    Hour,
    Minute,
    Second,
    /// Fractional seconds after a separator: exactly `n` digits, or any number if `None`.
    Fraction(Option<usize>),
    MonthAbbreviation,
    /// `Z` or a `±hh:mm` / `±hhmm` offset; `z_allowed` for Go's `Z07:00` form.
    Zone {
        z_allowed: bool,
    },
    Literal(char),
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

impl ColumnType {
    /// Splits `name.type(argument)` into the field name and its type.
    pub(super) fn parse_spec(spec: &str) -> Result<(String, ColumnType)> {
        let bad = |why: &str| Error::bad_value(format!("bad typed field '{spec}': {why}"));
        // The argument may itself hold dots and parentheses (a date layout): the type is
        // the word between the first `(` and the dot before it.
        let split = spec.match_indices('(').map(|(i, _)| i).find_map(|open| {
            let dot = spec[..open].rfind('.')?;
            let word = &spec[dot + 1..open];
            let is_word =
                !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            is_word.then_some((dot, open))
        });
        let Some((dot, open)) = split.filter(|_| spec.ends_with(')')) else {
            return Err(bad("expected name.type(), e.g. age.int32()"));
        };
        let (name, type_name, argument) = (
            &spec[..dot],
            &spec[dot + 1..open],
            &spec[open + 1..spec.len() - 1],
        );
        if name.is_empty() {
            return Err(bad("empty field name"));
        }
        let no_argument = |t: ColumnType| {
            if argument.is_empty() {
                Ok(t)
            } else {
                Err(bad("this type takes no argument"))
            }
        };
        let column_type = match type_name {
            "auto" => no_argument(ColumnType::Auto)?,
            "string" => no_argument(ColumnType::String)?,
            "int32" => no_argument(ColumnType::Int32)?,
            "int64" => no_argument(ColumnType::Int64)?,
            "double" => no_argument(ColumnType::Double)?,
            "decimal" => no_argument(ColumnType::Decimal)?,
            "boolean" => no_argument(ColumnType::Boolean)?,
            "date" | "date_go" => ColumnType::Date(go_layout(argument).map_err(|e| bad(&e))?),
            "date_ms" => ColumnType::Date(ms_layout(argument).map_err(|e| bad(&e))?),
            "date_oracle" => ColumnType::Date(oracle_layout(argument).map_err(|e| bad(&e))?),
            "binary" => ColumnType::Binary(match argument {
                "base64" => Encoding::Base64,
                "hex" => Encoding::Hex,
                _ => return Err(bad("binary() takes base64 or hex")),
            }),
            other => return Err(bad(&format!("unknown type {other}()"))),
        };
        Ok((name.to_string(), column_type))
    }

    /// Converts one field's text.
    pub(super) fn convert(&self, text: &str) -> Result<Bson> {
        let bad = |what: &str| Error::failed_to_parse(format!("cannot read \"{text}\" as {what}"));
        Ok(match self {
            ColumnType::Auto => infer(text),
            ColumnType::String => Bson::String(text.to_string()),
            ColumnType::Int32 => Bson::Int32(text.trim().parse().map_err(|_| bad("int32"))?),
            ColumnType::Int64 => Bson::Int64(text.trim().parse().map_err(|_| bad("int64"))?),
            ColumnType::Double => Bson::Double(text.trim().parse().map_err(|_| bad("double"))?),
            ColumnType::Decimal => Bson::Decimal128(
                text.trim()
                    .parse::<Decimal128>()
                    .map_err(|_| bad("decimal"))?,
            ),
            ColumnType::Boolean => Bson::Boolean(match text.trim() {
                "1" | "t" | "T" | "true" | "TRUE" | "True" => true,
                "0" | "f" | "F" | "false" | "FALSE" | "False" => false,
                _ => return Err(bad("boolean")),
            }),
            ColumnType::Date(tokens) => Bson::DateTime(
                parse_date(tokens, text.trim()).ok_or_else(|| bad("a date of this layout"))?,
            ),
            ColumnType::Binary(encoding) => Bson::Binary(Binary {
                subtype: BinarySubtype::Generic,
                bytes: match encoding {
                    Encoding::Base64 => base64::engine::general_purpose::STANDARD
                        .decode(text.trim())
                        .map_err(|_| bad("base64"))?,
                    Encoding::Hex => decode_hex(text.trim()).ok_or_else(|| bad("hex"))?,
                },
            }),
        })
    }
}

/// mongoimport's inference: the narrowest number the text spells, else the text.
fn infer(text: &str) -> Bson {
    // Rust's float parser also reads "inf" and "NaN"; mongoimport keeps those as strings.
    let numeric = text.bytes().any(|b| b.is_ascii_digit())
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E'));
    if numeric {
        if let Ok(i) = text.parse::<i32>() {
            return Bson::Int32(i);
        }
        if let Ok(i) = text.parse::<i64>() {
            return Bson::Int64(i);
        }
        if let Ok(x) = text.parse::<f64>() {
            return Bson::Double(x);
        }
    }
    Bson::String(text.to_string())
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Compiles a layout by trying `patterns` (longest first) at each position; any other
/// character is literal, except letters other than ISO 8601's `T`: those are elements
/// this parser does not know (weekdays, 12-hour clocks, zone names) and must not be
/// mistaken for text.
fn compile(layout: &str, patterns: &[(&str, Token)]) -> std::result::Result<Vec<Token>, String> {
    if layout.is_empty() {
        return Err("a date type needs a layout, e.g. date(2006-01-02)".to_string());
    }
    let mut tokens = Vec::new();
    let mut rest = layout;
    'outer: while let Some(c) = rest.chars().next() {
        for (pattern, token) in patterns {
            if let Some(after) = rest.strip_prefix(pattern) {
                tokens.push(token.clone());
                rest = after;
                continue 'outer;
            }
        }
        if c.is_ascii_alphabetic() && c != 'T' {
            return Err(format!("unsupported layout element at \"{rest}\""));
        }
        tokens.push(Token::Literal(c));
        rest = &rest[c.len_utf8()..];
    }
    Ok(tokens)
}

fn go_layout(layout: &str) -> std::result::Result<Vec<Token>, String> {
    compile(
        layout,
        &[
            ("2006", Token::Year),
            ("Z07:00", Token::Zone { z_allowed: true }),
            ("Z0700", Token::Zone { z_allowed: true }),
            ("-07:00", Token::Zone { z_allowed: false }),
            ("-0700", Token::Zone { z_allowed: false }),
            (".000000000", Token::Fraction(Some(9))),
            (".000000", Token::Fraction(Some(6))),
            (".000", Token::Fraction(Some(3))),
            (".999999999", Token::Fraction(None)),
            (".999999", Token::Fraction(None)),
            (".999", Token::Fraction(None)),
            ("Jan", Token::MonthAbbreviation),
            ("01", Token::Month(Some(2))),
            ("02", Token::Day(Some(2))),
            ("15", Token::Hour),
            ("04", Token::Minute),
            ("05", Token::Second),
            ("1", Token::Month(None)),
            ("2", Token::Day(None)),
        ],
    )
}

fn ms_layout(layout: &str) -> std::result::Result<Vec<Token>, String> {
    compile(
        layout,
        &[
            ("yyyy", Token::Year),
            ("MMM", Token::MonthAbbreviation),
            ("MM", Token::Month(Some(2))),
            ("M", Token::Month(None)),
            ("dd", Token::Day(Some(2))),
            ("d", Token::Day(None)),
            ("HH", Token::Hour),
            ("mm", Token::Minute),
            ("ss", Token::Second),
            (".fff", Token::Fraction(Some(3))),
            ("zzz", Token::Zone { z_allowed: false }),
            ("K", Token::Zone { z_allowed: true }),
        ],
    )
}

fn oracle_layout(layout: &str) -> std::result::Result<Vec<Token>, String> {
    compile(
        layout,
        &[
            ("YYYY", Token::Year),
            ("MON", Token::MonthAbbreviation),
            ("Mon", Token::MonthAbbreviation),
            ("MM", Token::Month(Some(2))),
            ("DD", Token::Day(Some(2))),
            ("HH24", Token::Hour),
            ("MI", Token::Minute),
            ("SS", Token::Second),
            (".FF", Token::Fraction(None)),
            ("TZH:TZM", Token::Zone { z_allowed: false }),
        ],
    )
}

/// Reads `text` against a compiled layout; `None` when it does not fit or names no real
/// moment (February 30th).
fn parse_date(tokens: &[Token], text: &str) -> Option<DateTime> {
    let mut rest = text.as_bytes();
    let (mut year, mut month, mut day) = (1970i64, 1i64, 1i64);
    let (mut hour, mut minute, mut second, mut nanos, mut offset_s) =
        (0i64, 0i64, 0i64, 0i64, 0i64);
    for token in tokens {
        match token {
            Token::Year => year = digits(&mut rest, 4, 4)?,
            Token::Month(width) => month = digits_of(&mut rest, *width)?,
            Token::Day(width) => day = digits_of(&mut rest, *width)?,
            Token::Hour => hour = digits(&mut rest, 2, 2)?,
            Token::Minute => minute = digits(&mut rest, 2, 2)?,
            Token::Second => second = digits(&mut rest, 2, 2)?,
            Token::Fraction(width) => {
                let (&separator, after) = rest.split_first()?;
                if separator != b'.' && separator != b',' {
                    if width.is_none() {
                        continue; // Go's .999 is optional
                    }
                    return None;
                }
                rest = after;
                let n = rest.iter().take_while(|b| b.is_ascii_digit()).count();
                if n == 0 || width.is_some_and(|w| w != n) {
                    return None;
                }
                let kept = n.min(9);
                let value: i64 = std::str::from_utf8(&rest[..kept]).ok()?.parse().ok()?;
                nanos = value * 10i64.pow(9 - kept as u32);
                rest = &rest[n..];
            }
            Token::MonthAbbreviation => {
                let name = rest.get(..3)?;
                month = MONTHS
                    .iter()
                    .position(|m| m.as_bytes().eq_ignore_ascii_case(name))?
                    as i64
                    + 1;
                rest = &rest[3..];
            }
            Token::Zone { z_allowed } => {
                if *z_allowed && rest.first() == Some(&b'Z') {
                    rest = &rest[1..];
                    continue;
                }
                let sign = match rest.first()? {
                    b'+' => 1,
                    b'-' => -1,
                    _ => return None,
                };
                rest = &rest[1..];
                let hours = digits(&mut rest, 2, 2)?;
                if rest.first() == Some(&b':') {
                    rest = &rest[1..];
                }
                let minutes = digits(&mut rest, 2, 2)?;
                offset_s = sign * (hours * 3600 + minutes * 60);
            }
            Token::Literal(c) => {
                let mut buf = [0u8; 4];
                rest = rest.strip_prefix(c.encode_utf8(&mut buf).as_bytes())?;
            }
        }
    }
    let valid = rest.is_empty()
        && (1..=12).contains(&month)
        && (1..=days_in_month(year, month)).contains(&day)
        && hour < 24
        && minute < 60
        && second < 60;
    if !valid {
        return None;
    }
    let seconds =
        days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset_s;
    Some(DateTime::from_millis(seconds * 1000 + nanos / 1_000_000))
}

fn digits_of(rest: &mut &[u8], width: Option<usize>) -> Option<i64> {
    match width {
        Some(w) => digits(rest, w, w),
        None => digits(rest, 1, 2),
    }
}

/// Reads between `min` and `max` ASCII digits.
fn digits(rest: &mut &[u8], min: usize, max: usize) -> Option<i64> {
    let n = rest
        .iter()
        .take(max)
        .take_while(|b| b.is_ascii_digit())
        .count();
    if n < min {
        return None;
    }
    let value = rest[..n]
        .iter()
        .fold(0i64, |v, b| v * 10 + i64::from(b - b'0'));
    *rest = &rest[n..];
    Some(value)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
pub(crate) fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(spec: &str) -> (String, ColumnType) {
        ColumnType::parse_spec(spec).expect(spec)
    }

    fn date(spec: &str, text: &str) -> Result<Bson> {
        typed(spec).1.convert(text)
    }

    fn millis(iso: &str) -> Bson {
        Bson::DateTime(DateTime::parse_rfc3339_str(iso).expect("iso"))
    }

    #[test]
    fn specs_name_a_field_and_a_type() {
        assert_eq!(typed("age.int32()"), ("age".into(), ColumnType::Int32));
        assert_eq!(typed("a.b.double()"), ("a.b".into(), ColumnType::Double));
        assert_eq!(typed("x.auto()").1, ColumnType::Auto);
        assert_eq!(
            typed("blob.binary(hex)").1,
            ColumnType::Binary(Encoding::Hex)
        );
        let (name, t) = typed("when.date(2006-01-02 15:04:05.000)");
        assert_eq!(name, "when");
        assert!(matches!(t, ColumnType::Date(_)));
        for bad in [
            "age",
            "age.int32",
            "age.int33()",
            ".int32()",
            "a.int32(x)",
            "d.date()",
            "d.date(Monday)",
        ] {
            assert!(ColumnType::parse_spec(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn inference_picks_the_narrowest_number() {
        assert_eq!(infer("42"), Bson::Int32(42));
        assert_eq!(infer("-3000000000"), Bson::Int64(-3_000_000_000));
        assert_eq!(infer("1.5e3"), Bson::Double(1500.0));
        for text in ["", "abc", "NaN", "inf", "12abc", "-", "1-2"] {
            assert_eq!(infer(text), Bson::String(text.into()), "{text}");
        }
    }

    #[test]
    fn typed_values_convert_or_say_why_not() {
        assert_eq!(
            typed("a.int64()").1.convert(" 7 ").expect("int"),
            Bson::Int64(7)
        );
        assert_eq!(
            typed("a.boolean()").1.convert("T").expect("bool"),
            Bson::Boolean(true)
        );
        assert_eq!(
            typed("a.string()").1.convert("007").expect("s"),
            Bson::String("007".into())
        );
        assert_eq!(
            typed("a.binary(hex)").1.convert("00ff").expect("hex"),
            Bson::Binary(Binary {
                subtype: BinarySubtype::Generic,
                bytes: vec![0, 255]
            })
        );
        let e = typed("a.int32()")
            .1
            .convert("x1")
            .expect_err("not a number");
        assert!(e.message.contains("\"x1\" as int32"), "{}", e.message);
        assert!(typed("a.int32()").1.convert("3000000000").is_err());
    }

    #[test]
    fn dates_follow_their_layouts() {
        assert_eq!(
            date("d.date(2006-01-02)", "2021-03-04").expect("go"),
            millis("2021-03-04T00:00:00Z")
        );
        assert_eq!(
            date(
                "d.date_go(2006-01-02T15:04:05Z07:00)",
                "2021-03-04T05:06:07+01:30"
            )
            .expect("zone"),
            millis("2021-03-04T03:36:07Z")
        );
        assert_eq!(
            date(
                "d.date(02 Jan 2006 15:04:05.000)",
                "09 feb 2020 23:59:58.125"
            )
            .expect("abbrev"),
            millis("2020-02-09T23:59:58.125Z")
        );
        assert_eq!(
            date("d.date_ms(yyyy-MM-dd HH:mm:ss)", "1999-12-31 23:59:59").expect("ms"),
            millis("1999-12-31T23:59:59Z")
        );
        assert_eq!(
            date(
                "d.date_oracle(YYYY-MM-DD HH24:MI:SS)",
                "1969-07-20 20:17:40"
            )
            .expect("oracle"),
            millis("1969-07-20T20:17:40Z")
        );
        for text in ["2021-02-30", "2021-13-01", "2021-1-01", "2021-01-01x", ""] {
            assert!(date("d.date(2006-01-02)", text).is_err(), "{text}");
        }
    }
}
