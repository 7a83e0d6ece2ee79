//! Time zones as MongoDB names them: UTC, fixed offsets (`+05:30`, `-0800`, `+03`) and
//! Olson names (`Europe/London`). Olson rules come from jiff's bundled copy of the tz
//! database, so results do not depend on the host's `/usr/share/zoneinfo`.

use basalt_error::{Error, Result};
use jiff::tz::TimeZone;
use jiff::Timestamp;

/// A zone that maps instants to local wall-clock time.
#[derive(Clone, Debug)]
pub(crate) enum Zone {
    /// A fixed offset from UTC, in minutes; `Fixed(0)` is UTC.
    Fixed(i64),
    Olson(TimeZone),
}

impl Zone {
    pub(crate) const UTC: Zone = Zone::Fixed(0);

    /// Looks a `timezone` argument up; unknown names fail with MongoDB's 40485.
    pub(crate) fn parse(name: &str) -> Result<Zone> {
        if name == "UTC" {
            return Ok(Zone::UTC);
        }
        if let Some(minutes) = parse_offset_minutes(name) {
            return Ok(Zone::Fixed(minutes));
        }
        // jiff matches names case-insensitively; MongoDB's database does not.
        match TimeZone::get(name) {
            Ok(tz) if tz.iana_name() == Some(name) => Ok(Zone::Olson(tz)),
            _ => Err(Error::location(
                40485,
                format!("unrecognized time zone identifier: \"{name}\""),
            )),
        }
    }

    /// Whether this is UTC itself, for which `$dateToString`'s default format ends in `Z`.
    pub(crate) fn is_utc(&self) -> bool {
        matches!(self, Zone::Fixed(0))
    }

    /// The zone's offset from UTC at instant `utc_ms`, in milliseconds.
    pub(crate) fn offset_ms(&self, utc_ms: i64) -> i64 {
        match self {
            Zone::Fixed(minutes) => minutes * 60_000,
            Zone::Olson(tz) => {
                // Outside jiff's range (±9999 years) the nearest representable rules apply.
                let clamped = utc_ms.clamp(
                    Timestamp::MIN.as_millisecond(),
                    Timestamp::MAX.as_millisecond(),
                );
                let ts = Timestamp::from_millisecond(clamped).unwrap_or(Timestamp::UNIX_EPOCH);
                i64::from(tz.to_offset(ts).seconds()) * 1000
            }
        }
    }

    /// Local wall-clock milliseconds (since 1970-01-01T00:00 local) of an instant.
    pub(crate) fn to_local(&self, utc_ms: i64) -> i64 {
        utc_ms.saturating_add(self.offset_ms(utc_ms))
    }

    /// The instant of a local wall-clock time. A time skipped by a forward transition
    /// maps past the gap, and a repeated one to its first occurrence, as timelib does.
    pub(crate) fn to_utc(&self, local_ms: i64) -> i64 {
        let guess = local_ms.saturating_sub(self.offset_ms(local_ms));
        let offset = self.offset_ms(guess);
        let candidate = local_ms.saturating_sub(offset);
        if self.offset_ms(candidate) == offset {
            candidate
        } else {
            local_ms.saturating_sub(self.offset_ms(candidate))
        }
    }
}

/// `+hh`, `+hhmm` or `+hh:mm` (or with `-`), in minutes. Like MongoDB, the digits are not
/// range-checked.
pub(crate) fn parse_offset_minutes(text: &str) -> Option<i64> {
    let sign = match text.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let digits = |range: std::ops::Range<usize>| -> Option<i64> {
        let s = text.get(range)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    let (h, m) = match text.len() {
        3 => (digits(1..3)?, 0),
        5 => (digits(1..3)?, digits(3..5)?),
        6 if text.as_bytes()[3] == b':' => (digits(1..3)?, digits(4..6)?),
        _ => return None,
    };
    Some(sign * (h * 60 + m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn olson_zones_follow_daylight_saving() {
        let ny = Zone::parse("America/New_York").unwrap();
        // 2021-01-15T12:00Z is EST (-5h), 2021-07-15T12:00Z is EDT (-4h).
        assert_eq!(ny.offset_ms(1_610_712_000_000), -5 * 3_600_000);
        assert_eq!(ny.offset_ms(1_626_350_400_000), -4 * 3_600_000);
        assert!(!ny.is_utc());
        // 2021-03-14 02:30 local does not exist in New York; it maps to 03:30 EDT.
        let gap_local = 1_615_689_000_000; // 2021-03-14T02:30 as wall-clock millis
        assert_eq!(ny.to_utc(gap_local), 1_615_707_000_000); // 07:30Z
        let local = ny.to_local(1_626_350_400_000);
        assert_eq!(ny.to_utc(local), 1_626_350_400_000);
    }

    #[test]
    fn names_and_offsets() {
        assert!(Zone::parse("UTC").unwrap().is_utc());
        assert_eq!(Zone::parse("+05:30").unwrap().offset_ms(0), 330 * 60_000);
        assert_eq!(Zone::parse("-0800").unwrap().offset_ms(0), -480 * 60_000);
        assert_eq!(Zone::parse("+03").unwrap().offset_ms(0), 180 * 60_000);
        assert_eq!(
            Zone::parse("Europe/London").unwrap().offset_ms(0),
            3_600_000
        );
        assert_eq!(Zone::parse("GMT").unwrap().offset_ms(0), 0);
        // Links and Etc zones (whose sign is inverted by POSIX convention) resolve too.
        assert_eq!(
            Zone::parse("US/Eastern").unwrap().offset_ms(0),
            -5 * 3_600_000
        );
        assert_eq!(
            Zone::parse("Etc/GMT+5").unwrap().offset_ms(0),
            -5 * 3_600_000
        );
        assert_eq!(
            Zone::parse("Asia/Kolkata").unwrap().offset_ms(0),
            330 * 60_000
        );
        for bad in [
            "Mars/Base",
            "+5",
            "+0:530",
            "+05:3",
            "Z",
            "america/new_york",
            "",
        ] {
            assert_eq!(Zone::parse(bad).unwrap_err().code.0, 40485, "{bad}");
        }
    }
}
