//! Date expression operators, as MongoDB 7.0 defines them: the field extractors
//! (`$year` … `$isoDayOfWeek`, in `parts`), `$dateToParts`/`$dateFromParts` (`parts`),
//! `$dateToString`/`$dateFromString` (`format`), and `$dateAdd`, `$dateSubtract`,
//! `$dateDiff`, `$dateTrunc` (`arithmetic`).
//!
//! Every operator that takes a `timezone` accepts UTC, fixed offsets and Olson names
//! (`zone`). Calendar maths is on local wall-clock milliseconds (`calendar`), converted
//! from and to instants through the zone.

mod arithmetic;
mod calendar;
mod format;
mod parts;
mod zone;

pub use arithmetic::TimeUnit;
#[cfg(test)]
pub(crate) use calendar::millis;
pub use calendar::{civil_from_days, days_from_civil};
pub(crate) use format::{format_iso, format_timestamp, parse_date};

use crate::context::ParseContext;
use crate::env::{Env, Value};
use crate::expression::{is_nullish, type_name, Expression};
use basalt_error::{Error, Result};
use basalt_value::Number;
use bson::Bson;
use zone::Zone;

#[derive(Debug)]
pub(crate) enum DateOp {
    Part(Box<parts::DatePart>),
    ToParts(Box<parts::DateToParts>),
    FromParts(Box<parts::DateFromParts>),
    ToString(Box<format::DateToString>),
    FromString(Box<format::DateFromString>),
    Add(Box<arithmetic::DateAdd>),
    Diff(Box<arithmetic::DateDiff>),
    Trunc(Box<arithmetic::DateTrunc>),
}

impl DateOp {
    pub(crate) fn parse(name: &str, args: &Bson, ctx: &ParseContext) -> Result<Option<DateOp>> {
        Ok(Some(match name {
            "$dateToParts" => DateOp::ToParts(Box::new(parts::DateToParts::parse(args, ctx)?)),
            "$dateFromParts" => {
                DateOp::FromParts(Box::new(parts::DateFromParts::parse(args, ctx)?))
            }
            "$dateToString" => DateOp::ToString(Box::new(format::DateToString::parse(args, ctx)?)),
            "$dateFromString" => {
                DateOp::FromString(Box::new(format::DateFromString::parse(args, ctx)?))
            }
            "$dateAdd" | "$dateSubtract" => {
                DateOp::Add(Box::new(arithmetic::DateAdd::parse(name, args, ctx)?))
            }
            "$dateDiff" => DateOp::Diff(Box::new(arithmetic::DateDiff::parse(args, ctx)?)),
            "$dateTrunc" => DateOp::Trunc(Box::new(arithmetic::DateTrunc::parse(args, ctx)?)),
            _ => match parts::DatePart::parse(name, args, ctx)? {
                Some(op) => DateOp::Part(Box::new(op)),
                None => return Ok(None),
            },
        }))
    }

    pub(crate) fn eval<'a>(&'a self, env: &Env<'a>) -> Result<Value<'a>> {
        let value = match self {
            DateOp::Part(op) => op.eval(env)?,
            DateOp::ToParts(op) => op.eval(env)?,
            DateOp::FromParts(op) => op.eval(env)?,
            DateOp::ToString(op) => return op.eval(env),
            DateOp::FromString(op) => return op.eval(env),
            DateOp::Add(op) => op.eval(env)?,
            DateOp::Diff(op) => op.eval(env)?,
            DateOp::Trunc(op) => op.eval(env)?,
        };
        Ok(Some(std::borrow::Cow::Owned(value.unwrap_or(Bson::Null))))
    }
}

/// The named arguments of an operator whose argument is an object, in the order of
/// `keys`. `not_object` is MongoDB's code and message for a non-object argument,
/// `unknown` its code for an unrecognised name.
fn parse_args<const N: usize>(
    name: &str,
    args: &Bson,
    ctx: &ParseContext,
    keys: [&str; N],
    not_object: (i32, &str),
    unknown: i32,
) -> Result<[Option<Expression>; N]> {
    let Bson::Document(doc) = args else {
        return Err(Error::location(
            not_object.0,
            format!("{name} {}", not_object.1),
        ));
    };
    let mut slots = [const { None }; N];
    for (key, value) in doc {
        let Some(i) = keys.iter().position(|k| k == key) else {
            return Err(Error::location(
                unknown,
                format!("Unrecognized argument to {name}: {key}"),
            ));
        };
        slots[i] = Some(Expression::parse(value, ctx)?);
    }
    Ok(slots)
}

/// A required argument, or MongoDB's error for its absence.
fn required(slot: Option<Expression>, code: i32, message: impl Into<String>) -> Result<Expression> {
    slot.ok_or_else(|| Error::location(code, message))
}

/// The instant a date-like value stands for, in milliseconds since the epoch.
pub(crate) fn date_millis(value: Option<&Bson>) -> Result<i64> {
    as_date(value).ok_or_else(|| {
        Error::location(
            16006,
            format!("can't convert from BSON type {} to Date", type_name(value)),
        )
    })
}

/// A Date, Timestamp or ObjectId as milliseconds since the epoch (MongoDB's
/// `coercibleToDate`); an ObjectId with the high bit of its seconds set is before 1970.
fn as_date(value: Option<&Bson>) -> Option<i64> {
    match value {
        Some(Bson::DateTime(d)) => Some(d.timestamp_millis()),
        Some(Bson::Timestamp(ts)) => Some(i64::from(ts.time) * 1000),
        Some(Bson::ObjectId(oid)) => Some(object_id_millis(oid)),
        _ => None,
    }
}

/// The time in an ObjectId, in milliseconds since the epoch: its seconds are a signed
/// 32-bit number, as mongod reads them.
pub(crate) fn object_id_millis(oid: &bson::oid::ObjectId) -> i64 {
    let [a, b, c, d, ..] = oid.bytes();
    i64::from(i32::from_be_bytes([a, b, c, d])) * 1000
}

fn date_value(ms: i64) -> Option<Bson> {
    Some(Bson::DateTime(bson::DateTime::from_millis(ms)))
}

/// An integral number (of any numeric type) as an i64 (MongoDB's `integral64Bit`).
fn integral(value: Option<&Bson>) -> Option<i64> {
    value
        .and_then(Number::from_bson)
        .and_then(|n| n.to_i64_exact())
}

/// A `timezone` argument: absent (UTC), a constant resolved at parse time, or an
/// expression resolved per document.
#[derive(Debug)]
enum TimezoneArg {
    Constant(Option<Zone>),
    Dynamic(Expression),
}

impl TimezoneArg {
    fn parse(slot: Option<Expression>) -> Result<TimezoneArg> {
        match slot {
            None => Ok(TimezoneArg::Constant(Some(Zone::UTC))),
            Some(e) => match e.as_constant() {
                Some(v) => Ok(TimezoneArg::Constant(zone_of(Some(v))?)),
                None => Ok(TimezoneArg::Dynamic(e)),
            },
        }
    }

    /// The zone, or `None` when the argument is null or missing (the result is then null).
    fn eval(&self, env: &Env<'_>) -> Result<Option<Zone>> {
        match self {
            TimezoneArg::Constant(zone) => Ok(zone.clone()),
            TimezoneArg::Dynamic(e) => zone_of(e.eval(env)?.as_deref()),
        }
    }
}

fn zone_of(value: Option<&Bson>) -> Result<Option<Zone>> {
    match value {
        v if is_nullish(v) => Ok(None),
        Some(Bson::String(name)) => Zone::parse(name).map(Some),
        other => Err(Error::location(
            40517,
            format!(
                "timezone must evaluate to a string, found {}",
                type_name(other)
            ),
        )),
    }
}
