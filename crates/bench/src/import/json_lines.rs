//! One line of NDJSON / Extended JSON (canonical or relaxed) to one BSON document.
//!
//! The JSON tokens are written straight into BSON bytes in one pass, with no tree in
//! between: a JSON-to-`Value`-to-`Document`-to-bytes route costs several allocations per
//! field, and parsing is the importer's own hot path. Only an object whose first key
//! starts with `$` (`{"$date": ...}`, `{"$oid": ...}`, ...) is collected whole and handed to
//! the bson crate's Extended JSON conversion, so every wrapper it knows is understood the
//! same way as everywhere else in the ecosystem.

use basalt_error::{Error, Result};
use bson::{Bson, RawDocumentBuf};
use serde::de::{DeserializeSeed, Error as _, MapAccess, SeqAccess, Visitor};
use std::fmt;

const TYPE_DOUBLE: u8 = 0x01;
const TYPE_STRING: u8 = 0x02;
const TYPE_DOCUMENT: u8 = 0x03;
const TYPE_ARRAY: u8 = 0x04;
const TYPE_BOOLEAN: u8 = 0x08;
const TYPE_DATE_TIME: u8 = 0x09;
const TYPE_NULL: u8 = 0x0a;
const TYPE_INT32: u8 = 0x10;
const TYPE_INT64: u8 = 0x12;

/// Parses one line holding one JSON object. The line's UTF-8 is checked once, whole
/// (one pass of the standard library's word-at-a-time check), rather than string by
/// string as `from_slice` does; a line that is not UTF-8 goes the slice way, which says
/// where it breaks.
pub(crate) fn parse(line: &[u8]) -> Result<RawDocumentBuf> {
    let mut out = Vec::with_capacity(line.len() + 16);
    match std::str::from_utf8(line) {
        Ok(text) => write_line(&mut serde_json::Deserializer::from_str(text), &mut out),
        Err(_) => write_line(&mut serde_json::Deserializer::from_slice(line), &mut out),
    }
    .map_err(|e| Error::failed_to_parse(format!("invalid JSON: {e}")))?;
    RawDocumentBuf::from_bytes(out).map_err(|e| Error::failed_to_parse(e.to_string()))
}

fn write_line<'de, R: serde_json::de::Read<'de>>(
    de: &mut serde_json::Deserializer<R>,
    out: &mut Vec<u8>,
) -> serde_json::Result<()> {
    TopLevel { out }.deserialize(&mut *de)?;
    de.end()
}

/// The line's object: a document, never an Extended JSON value.
struct TopLevel<'a> {
    out: &'a mut Vec<u8>,
}

impl<'de> DeserializeSeed<'de> for TopLevel<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for TopLevel<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        write_document(map, self.out, false).map(|_| ())
    }
}

/// Writes the members of a JSON object as a BSON document. With `extjson`, an object whose
/// first key starts with `$` is an Extended JSON value instead: nothing is written and it
/// comes back converted.
fn write_document<'de, A: MapAccess<'de>>(
    mut map: A,
    out: &mut Vec<u8>,
    extjson: bool,
) -> Result<Option<Bson>, A::Error> {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    let mut first = true;
    loop {
        let type_pos = out.len();
        out.push(0);
        let Some(dollar) = map.next_key_seed(Key { out: &mut *out })? else {
            out.truncate(type_pos);
            break;
        };
        if first && extjson && dollar {
            let key = String::from_utf8_lossy(&out[type_pos + 1..out.len() - 1]).into_owned();
            out.truncate(start);
            let value: serde_json::Value = map.next_value()?;
            let mut next = map.next_key::<String>()?;
            if let (None, "$date", serde_json::Value::String(text)) = (&next, key.as_str(), &value)
            {
                if let Some(millis) = utc_millis(text) {
                    return Ok(Some(Bson::DateTime(bson::DateTime::from_millis(millis))));
                }
            }
            let mut object = serde_json::Map::new();
            object.insert(key, value);
            while let Some(key) = next {
                object.insert(key, map.next_value()?);
                next = map.next_key()?;
            }
            return extended_value(object).map(Some).map_err(A::Error::custom);
        }
        first = false;
        map.next_value_seed(Value {
            out: &mut *out,
            type_pos,
        })?;
    }
    out.push(0);
    patch_length(out, start);
    Ok(None)
}

/// Converts an Extended JSON wrapper. Relaxed dates, by far the most common wrapper in
/// exported data, are read directly; everything else goes through the bson crate.
fn extended_value(object: serde_json::Map<String, serde_json::Value>) -> bson::error::Result<Bson> {
    if object.len() == 1 {
        if let Some(serde_json::Value::String(text)) = object.get("$date") {
            if let Ok(date) = bson::DateTime::parse_rfc3339_str(text) {
                return Ok(Bson::DateTime(date));
            }
        }
    }
    Bson::try_from(object)
}

/// Milliseconds since the epoch of a relaxed Extended JSON date in the form exports
/// write, `YYYY-MM-DDTHH:MM:SS[.f|.ff|.fff]Z`; `None` for any other form (which
/// [`extended_value`] then parses in full). A `$date` per document or two is common, and
/// the general RFC 3339 route through a JSON map and the `time` crate cost a tenth of the
/// importer's time on such data.
fn utc_millis(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| -> Option<i64> {
        b.get(range)?.iter().try_fold(0i64, |n, &c| {
            c.is_ascii_digit().then(|| n * 10 + i64::from(c - b'0'))
        })
    };
    let separators = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')];
    if b.len() < 20 || separators.iter().any(|&(i, c)| b[i] != c) || b[b.len() - 1] != b'Z' {
        return None;
    }
    let (year, month, day) = (digits(0..4)?, digits(5..7)?, digits(8..10)?);
    let (hour, minute, second) = (digits(11..13)?, digits(14..16)?, digits(17..19)?);
    let millis = match &b[19..b.len() - 1] {
        [] => 0,
        [b'.', fraction @ ..] if (1..=3).contains(&fraction.len()) => {
            digits(20..b.len() - 1)? * 10i64.pow(3 - fraction.len() as u32)
        }
        _ => return None,
    };
    const MONTH_DAYS: [i64; 12] = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let valid = (1..=12).contains(&month)
        && year >= 1
        && day >= 1
        && day <= MONTH_DAYS[month as usize - 1] + i64::from(month == 2 && leap)
        && hour < 24
        && minute < 60
        && second < 60;
    if !valid {
        return None;
    }
    // Days from 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    let days = era * 146_097 + day_of_era - 719_468;
    Some(((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + millis)
}

fn patch_length(out: &mut [u8], start: usize) {
    let len = (out.len() - start) as i32;
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
}

/// Writes a field name as a C string; says whether it starts with `$`.
struct Key<'a> {
    out: &'a mut Vec<u8>,
}

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = bool;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<bool, E> {
        if key.as_bytes().contains(&0) {
            return Err(E::custom("field names cannot contain the NUL character"));
        }
        self.out.extend_from_slice(key.as_bytes());
        self.out.push(0);
        Ok(key.starts_with('$'))
    }
}

/// Writes one value; its type byte goes to `type_pos`, reserved by the caller before the
/// field name.
struct Value<'a> {
    out: &'a mut Vec<u8>,
    type_pos: usize,
}

impl Value<'_> {
    fn int(self, i: i64) {
        // Extended JSON's rule (and mongoimport's): int32 when it fits.
        match i32::try_from(i) {
            Ok(small) => {
                self.out[self.type_pos] = TYPE_INT32;
                self.out.extend_from_slice(&small.to_le_bytes());
            }
            Err(_) => {
                self.out[self.type_pos] = TYPE_INT64;
                self.out.extend_from_slice(&i.to_le_bytes());
            }
        }
    }
}

impl<'de> DeserializeSeed<'de> for Value<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Value<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<(), E> {
        self.out[self.type_pos] = TYPE_BOOLEAN;
        self.out.push(u8::from(b));
        Ok(())
    }

    fn visit_i64<E>(self, i: i64) -> Result<(), E> {
        self.int(i);
        Ok(())
    }

    fn visit_u64<E>(self, u: u64) -> Result<(), E> {
        match i64::try_from(u) {
            Ok(i) => self.int(i),
            Err(_) => {
                self.out[self.type_pos] = TYPE_DOUBLE;
                self.out.extend_from_slice(&(u as f64).to_le_bytes());
            }
        }
        Ok(())
    }

    fn visit_f64<E>(self, x: f64) -> Result<(), E> {
        self.out[self.type_pos] = TYPE_DOUBLE;
        self.out.extend_from_slice(&x.to_le_bytes());
        Ok(())
    }

    fn visit_str<E>(self, s: &str) -> Result<(), E> {
        self.out[self.type_pos] = TYPE_STRING;
        self.out
            .extend_from_slice(&(s.len() as i32 + 1).to_le_bytes());
        self.out.extend_from_slice(s.as_bytes());
        self.out.push(0);
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        self.out[self.type_pos] = TYPE_NULL;
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.out[self.type_pos] = TYPE_ARRAY;
        let start = self.out.len();
        self.out.extend_from_slice(&[0; 4]);
        for index in 0usize.. {
            let type_pos = self.out.len();
            self.out.push(0);
            self.out.extend_from_slice(index.to_string().as_bytes());
            self.out.push(0);
            let element = Value {
                out: &mut *self.out,
                type_pos,
            };
            if seq.next_element_seed(element)?.is_none() {
                self.out.truncate(type_pos);
                break;
            }
        }
        self.out.push(0);
        patch_length(self.out, start);
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        match write_document(map, self.out, true)? {
            None => self.out[self.type_pos] = TYPE_DOCUMENT,
            Some(value) => {
                append_value(self.out, self.type_pos, value).map_err(A::Error::custom)?
            }
        }
        Ok(())
    }
}

/// Appends an Extended JSON value converted by the bson crate, by letting the crate
/// encode it as the only field of a document and taking that field's bytes.
fn append_value(out: &mut Vec<u8>, type_pos: usize, value: Bson) -> Result<(), String> {
    if let Bson::DateTime(date) = value {
        out[type_pos] = TYPE_DATE_TIME;
        out.extend_from_slice(&date.timestamp_millis().to_le_bytes());
        return Ok(());
    }
    let mut doc = bson::Document::new();
    doc.insert("", value);
    let bytes = doc.to_vec().map_err(|e| e.to_string())?;
    // length (4) · type (1) · empty name's NUL (1) · value · document's NUL (1)
    out[type_pos] = bytes[4];
    out.extend_from_slice(&bytes[6..bytes.len() - 1]);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, oid::ObjectId, DateTime, Decimal128, Document};
    use rand::{RngExt, SeedableRng};

    fn parsed(line: &str) -> Document {
        Document::try_from(parse(line.as_bytes()).expect("parses").as_ref()).expect("valid BSON")
    }

    #[test]
    fn json_types_become_their_bson_types() {
        let doc = parsed(
            r#"{"i": 1, "l": 8589934592, "d": 1.5, "whole": 2.0, "s": "é\"x", "t": true,
                "n": null, "a": [1, "two", [3]], "o": {"p": {"q": -4}}, "big": 18446744073709551615}"#,
        );
        assert_eq!(
            doc,
            doc! {
                "i": 1, "l": 8_589_934_592i64, "d": 1.5, "whole": 2.0, "s": "é\"x", "t": true,
                "n": null, "a": [1, "two", [3]], "o": {"p": {"q": -4}},
                "big": 18_446_744_073_709_551_615u64 as f64,
            }
        );
    }

    #[test]
    fn field_order_is_kept() {
        let keys: Vec<String> = parsed(r#"{"z": 1, "a": 2, "m": {"y": 1, "b": 2}}"#)
            .keys()
            .cloned()
            .collect();
        assert_eq!(keys, ["z", "a", "m"]);
    }

    #[test]
    fn extended_json_wrappers_become_bson_types() {
        let oid = ObjectId::parse_str("5f1d7f3c9d1e8a0b4c3d2e1f").expect("oid");
        let doc = parsed(
            r#"{"_id": {"$oid": "5f1d7f3c9d1e8a0b4c3d2e1f"},
                "relaxed": {"$date": "2020-01-02T03:04:05.678Z"},
                "canonical": {"$date": {"$numberLong": "1577934245678"}},
                "long": {"$numberLong": "7"}, "int": {"$numberInt": "7"},
                "dec": {"$numberDecimal": "1.10"}, "inArray": [{"$numberLong": "1"}]}"#,
        );
        let when = DateTime::from_millis(1_577_934_245_678);
        assert_eq!(
            doc,
            doc! {
                "_id": oid, "relaxed": when, "canonical": when, "long": 7i64, "int": 7,
                "dec": "1.10".parse::<Decimal128>().expect("decimal"), "inArray": [1i64],
            }
        );
    }

    #[test]
    fn export_dates_read_directly_match_the_full_parser() {
        let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(7);
        for _ in 0..20_000 {
            let text = format!(
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}{}Z",
                rng.random_range(1..=9999),
                rng.random_range(1..=12),
                rng.random_range(1..=31),
                rng.random_range(0..24),
                rng.random_range(0..60),
                rng.random_range(0..60),
                [
                    String::new(),
                    format!(".{}", rng.random_range(0..10)),
                    format!(".{:02}", rng.random_range(0..100)),
                    format!(".{:03}", rng.random_range(0..1000))
                ][rng.random_range(0..4)],
            );
            let full = DateTime::parse_rfc3339_str(&text).ok();
            assert_eq!(
                utc_millis(&text),
                full.map(|d| d.timestamp_millis()),
                "{text}"
            );
        }
        for other in [
            "2020-01-02T03:04:05.6789Z",
            "2020-01-02T03:04:05+01:00",
            "2020-01-02 03:04:05Z",
            "2020-1-02T03:04:05Z",
            "2020-01-02T03:04:60Z",
        ] {
            assert_eq!(utc_millis(other), None, "{other}");
        }
        let doc = parsed(
            r#"{"d": {"$date": "2020-01-02T03:04:05.6789+01:00"}, "e": {"$date": "1969-12-31T23:59:59.999Z"}}"#,
        );
        assert_eq!(
            doc,
            doc! {"d": DateTime::from_millis(1_577_930_645_678), "e": DateTime::from_millis(-1)}
        );
    }

    #[test]
    fn a_dollar_key_after_the_first_is_an_ordinary_field() {
        assert_eq!(
            parsed(r#"{"a": {"x": 1, "$y": 2}}"#),
            doc! {"a": {"x": 1, "$y": 2}}
        );
    }

    #[test]
    fn bad_lines_are_errors_that_say_where() {
        let message = |line: &str| parse(line.as_bytes()).expect_err(line).message;
        assert!(message(r#"{"a": 1,}"#).contains("column"));
        assert!(message(r#"{"a": 1} trailing"#).contains("trailing"));
        assert!(message("[1, 2]").contains("JSON object"));
        assert!(message(r#"{"a\u0000b": 1}"#).contains("NUL"));
        assert!(message(r#"{"d": {"$date": "yesterday"}}"#).contains("invalid JSON"));
    }
}
