//! The generic arguments every command may carry (mongod's `GenericArguments`),
//! parsed as mongod parses them before the command itself: `readConcern` and
//! `writeConcern` documents with their fields, and `maxTimeMS`. What a read or write
//! concern then asks of a replica set is `replication`'s to honour.

use super::Ctx;
use basalt_error::{Error, ErrorCode, Result};
use bson::Document;

/// The read concern levels there are.
const READ_LEVELS: &[&str] = &["local", "majority", "linearizable", "available", "snapshot"];

/// Where a concern came from (`provenance`), as mongod names it; a write concern may
/// also be the server's own default for internal writes.
const READ_PROVENANCES: &[&str] = &[
    "clientSupplied",
    "implicitDefault",
    "customDefault",
    "getLastErrorDefaults",
];
const WRITE_PROVENANCES: &[&str] = &[
    "clientSupplied",
    "implicitDefault",
    "customDefault",
    "getLastErrorDefaults",
    "internalWriteDefault",
];

/// The generic fields every command may carry, typed as mongod types them:
/// `readConcern` and `writeConcern` are objects (or null), `maxTimeMS` a number; and
/// the read concern's own fields (see [`check_read_concern`]).
pub(super) fn check(ctx: &Ctx<'_>, name: &str, body: &Document) -> Result<()> {
    for field in ["readConcern", "writeConcern"] {
        match body.get(field) {
            None | Some(bson::Bson::Null) => {}
            Some(bson::Bson::Document(concern)) if field == "readConcern" => {
                // A transaction's statement on a standalone is refused as such first,
                // and a writing pipeline for its read concern (mongod parses both
                // before it looks at the node it runs on).
                let standalone = ctx.server.replication().is_none()
                    && !body.contains_key("txnNumber")
                    && crate::replication::writing_stage(body).is_none();
                check_read_concern(concern, standalone)?;
            }
            Some(bson::Bson::Document(concern)) => {
                check_write_concern(concern, ctx.server.replication().is_none())?;
            }
            Some(other) => {
                return Err(Error::type_mismatch(format!(
                    "BSON field '{name}.{field}' is the wrong type '{}', expected type 'object'",
                    crate::request::type_name(other)
                )))
            }
        }
    }
    max_time_ms(body).map(drop)
}

/// For a command that takes no write concern: a `writeConcern` document (null is no
/// write concern) is InvalidOptions, as mongod answers.
pub(super) fn refuse_write_concern(name: &str, body: &Document) -> Result<()> {
    if let Some(bson::Bson::Document(_)) = body.get("writeConcern") {
        return Err(Error::new(
            ErrorCode::INVALID_OPTIONS,
            format!("Command {name} does not support writeConcern"),
        ));
    }
    Ok(())
}

/// For a command that takes no write concern and reads only at `local` (mongod's
/// maintenance commands): a `writeConcern` document or another read concern level (or
/// a point in time to read at) is InvalidOptions, checked before the concerns' fields.
pub(super) fn check_local_concerns_only(name: &str, body: &Document) -> Result<()> {
    refuse_write_concern(name, body)?;
    check_local_read_concern(name, body)
}

/// For a command that reads only at `local` (a collection's renames and conversions,
/// which take a write concern): another read concern level, or a point in time to read
/// at, is InvalidOptions.
pub(super) fn check_local_read_concern(name: &str, body: &Document) -> Result<()> {
    use bson::Bson;
    let Some(Bson::Document(concern)) = body.get("readConcern") else {
        return Ok(());
    };
    if let Some(Bson::String(level)) = concern.get("level") {
        if level != "local" && READ_LEVELS.contains(&level.as_str()) {
            return Err(Error::new(
                ErrorCode::INVALID_OPTIONS,
                format!("Command {name} does not support read concern level {level}"),
            ));
        }
    }
    if let Some(Bson::Timestamp(_)) = concern.get("atClusterTime") {
        return Err(Error::new(
            ErrorCode::INVALID_OPTIONS,
            format!("Command {name} does not support reading at a point in time"),
        ));
    }
    Ok(())
}

/// A `writeConcern` document as mongod parses it: `w` a number of members (0–50; on a
/// standalone at most 1), a mode name (on a standalone only "majority") or a non-empty
/// object of tag counts (any numbers); `j` a boolean or number; `wtimeout` at most
/// 2^31 − 1 when a number; `provenance` one of mongod's; nothing else. What the members
/// can satisfy is the replica set's to check.
fn check_write_concern(concern: &Document, standalone: bool) -> Result<()> {
    use bson::Bson;
    // A number of members as mongod takes it: a double by its whole part, a decimal
    // rounded half to even; NaN and the infinities are none.
    let members = |value: &Bson| {
        let n = basalt_value::as_f64(value).filter(|n| n.is_finite())?;
        Some(match value {
            Bson::Decimal128(_) => n.round_ties_even(),
            _ => n.trunc(),
        })
    };
    for (field, value) in concern {
        match (field.as_str(), value) {
            ("w", Bson::Null) => {
                return Err(Error::bad_value("w: null is not a write concern"));
            }
            ("w", Bson::String(mode)) if standalone && mode != "majority" => {
                return Err(Error::bad_value(format!(
                    "No write concern mode named '{mode}' found: this node is no replica set member"
                )));
            }
            ("w", Bson::String(_)) => {}
            ("w", Bson::Document(tags))
                if !tags.is_empty() && tags.values().all(|n| basalt_value::as_f64(n).is_some()) => {}
            ("w", number) if members(number).is_some_and(|n| (0.0..=50.0).contains(&n)) => {
                if standalone && members(number) > Some(1.0) {
                    return Err(Error::bad_value("cannot use 'w' > 1 with a standalone"));
                }
            }
            ("w", other) => {
                return Err(Error::failed_to_parse(format!(
                    "w has to be a number from 0 to 50, a mode name or an object of tag counts; found: {other}"
                )))
            }
            ("j" | "fsync", Bson::Boolean(_) | Bson::Null) => {}
            ("j" | "fsync", number) if basalt_value::as_f64(number).is_some() => {}
            ("j" | "fsync", other) => {
                return Err(Error::type_mismatch(format!(
                    "BSON field 'writeConcern.{field}' is the wrong type '{}', expected type 'bool'",
                    crate::request::type_name(other)
                )))
            }
            ("wtimeout", number)
                if basalt_value::as_f64(number).is_some_and(|n| n > f64::from(i32::MAX)) =>
            {
                return Err(Error::failed_to_parse(format!(
                    "wtimeout must be at most {}; found: {number}",
                    i32::MAX
                )))
            }
            ("wtimeout" | "getLastError" | "wOpTime" | "wElectionId", _) => {}
            ("provenance", Bson::Null) => {}
            ("provenance", Bson::String(p)) if WRITE_PROVENANCES.contains(&p.as_str()) => {}
            ("provenance", Bson::String(p)) => {
                return Err(Error::bad_value(format!(
                    "'{p}' is not a valid writeConcern provenance"
                )))
            }
            ("provenance", other) => {
                return Err(Error::type_mismatch(format!(
                    "BSON field 'writeConcern.provenance' is the wrong type '{}', expected type 'string'",
                    crate::request::type_name(other)
                )))
            }
            (other, _) => {
                return Err(Error::location(
                    40415,
                    format!("BSON field 'writeConcern.{other}' is an unknown field."),
                ))
            }
        }
    }
    Ok(())
}

/// A `readConcern` document as mongod parses it: `level` one of its levels (a
/// standalone has no `linearizable` or `snapshot`: NotAReplicaSet), `afterClusterTime`
/// and `atClusterTime` timestamps, not null (the latter only at `snapshot`; a standalone has no
/// cluster time: IllegalOperation), `provenance` one of mongod's, nothing else.
fn check_read_concern(concern: &Document, standalone: bool) -> Result<()> {
    use bson::Bson;
    let wrong_type = |field: &str, value: &Bson, expected: &str| {
        Error::type_mismatch(format!(
            "BSON field 'readConcern.{field}' is the wrong type '{}', expected type '{expected}'",
            crate::request::type_name(value)
        ))
    };
    let level = match concern.get("level") {
        None | Some(Bson::Null) => None,
        Some(Bson::String(level)) if READ_LEVELS.contains(&level.as_str()) => Some(level.as_str()),
        Some(Bson::String(level)) => {
            return Err(Error::bad_value(format!(
                "{level} is not a valid read concern level"
            )))
        }
        Some(other) => return Err(wrong_type("level", other, "string")),
    };
    if standalone && matches!(level, Some("linearizable" | "snapshot")) {
        return Err(Error::new(
            ErrorCode::NOT_A_REPLICA_SET,
            format!(
                "node needs to be a replica set member to use read concern level {}",
                level.unwrap_or_default()
            ),
        ));
    }
    for (field, value) in concern {
        match (field.as_str(), value) {
            // A timestamp, not even null.
            ("afterClusterTime" | "atClusterTime", Bson::Null) => {
                return Err(wrong_type(field, value, "timestamp"))
            }
            ("level", _) | (_, Bson::Null) => {}
            ("afterClusterTime", Bson::Timestamp(_)) if standalone => {
                return Err(Error::new(
                    ErrorCode::ILLEGAL_OPERATION,
                    "afterClusterTime is not allowed on a standalone: it has no cluster time",
                ))
            }
            ("afterClusterTime", Bson::Timestamp(_)) | ("afterOpTime", Bson::Document(_)) => {}
            ("atClusterTime", Bson::Timestamp(_)) if level != Some("snapshot") => {
                return Err(Error::new(
                    ErrorCode::INVALID_OPTIONS,
                    "readConcern atClusterTime is only valid with level snapshot",
                ))
            }
            ("atClusterTime", Bson::Timestamp(_)) => {}
            ("afterClusterTime" | "atClusterTime", other) => {
                return Err(wrong_type(field, other, "timestamp"))
            }
            ("afterOpTime", other) => return Err(wrong_type(field, other, "object")),
            ("provenance", Bson::String(p)) if READ_PROVENANCES.contains(&p.as_str()) => {}
            ("provenance", Bson::String(p)) => {
                return Err(Error::bad_value(format!(
                    "'{p}' is not a valid readConcern provenance"
                )))
            }
            ("provenance", other) => return Err(wrong_type(field, other, "string")),
            (other, _) => {
                return Err(Error::location(
                    40415,
                    format!("BSON field 'readConcern.{other}' is an unknown field."),
                ))
            }
        }
    }
    Ok(())
}

pub(super) fn max_time_ms(body: &Document) -> Result<Option<i64>> {
    let value = match body.get("maxTimeMS") {
        None | Some(bson::Bson::Null) => return Ok(None),
        Some(value) => value,
    };
    let Some(number) = basalt_value::as_f64(value) else {
        return Err(Error::type_mismatch(format!(
            "maxTimeMS must be a number, not {}",
            crate::request::type_name(value)
        )));
    };
    // Not a whole number, or one no 64-bit integer holds (mongod converts first).
    let whole_type = matches!(value, bson::Bson::Int32(_) | bson::Bson::Int64(_));
    let representable = (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&number);
    if !whole_type && (number.fract() != 0.0 || !representable) {
        return Err(Error::failed_to_parse("maxTimeMS has non-integral value"));
    }
    if !(0.0..=f64::from(i32::MAX)).contains(&number) {
        return Err(Error::bad_value("maxTimeMS is out of range"));
    }
    Ok(Some(number as i64))
}
