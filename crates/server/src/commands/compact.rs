//! `compact` and `autoCompact`: mongod's requests to give a collection's unused space
//! back to the filesystem, checked as mongod checks them.
//!
//! Basalt's storage engine is a log-structured merge tree: it rewrites its files in the
//! background as they fill with replaced and deleted records, and a collection has no
//! file of its own to shrink. So `compact` frees nothing more than the engine already
//! does (it answers `bytesFreed: 0`, as mongod does for a collection without free
//! space), and `autoCompact` keeps the setting it is given, which the engine's own
//! compaction already satisfies.

use super::Ctx;
use crate::request::{coerced_integer, type_name};
use basalt_error::{Error, ErrorCode, Result};
use bson::{doc, Bson, Document};
use parking_lot::Mutex;

/// The largest free space target (in MB) whose bytes fit an int64.
const FREE_SPACE_TARGET_MB_MAX: i64 = i64::MAX >> 20;

pub fn compact(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let name = match body.get("compact") {
        Some(Bson::String(name))
            if !name.is_empty() && !name.starts_with('.') && !name.contains('\0') =>
        {
            name
        }
        Some(Bson::String(_)) => {
            return Err(Error::new(
                ErrorCode::INVALID_NAMESPACE,
                "Invalid namespace specified",
            ))
        }
        Some(other) => {
            return Err(Error::new(
                ErrorCode::INVALID_NAMESPACE,
                format!("collection name has invalid type {}", type_name(other)),
            ))
        }
        None => unreachable!("the command's first field names it"),
    };
    let dry_run = flag(body, "compact", "dryRun")?;
    flag(body, "compact", "force")?;
    // Beyond what int64 bytes hold, mongod reports in an int64.
    let wide = match free_space_target_mb(body, "compact")? {
        Some(target) => target >= (FREE_SPACE_TARGET_MB_MAX + 1) as f64,
        None => false,
    };
    if crate::views::get(&ctx.server.catalog, ctx.db, name)?.is_some() {
        return Err(Error::new(
            ErrorCode::COMMAND_NOT_SUPPORTED_ON_VIEW,
            format!("can't compact a view {}.{name}", ctx.db),
        ));
    }
    let time_series = crate::timeseries::get(&ctx.server.catalog, ctx.db, name).is_some();
    if ctx.server.catalog.get(ctx.db, name).is_none() && !time_series {
        return Err(Error::new(
            ErrorCode::NAMESPACE_NOT_FOUND,
            format!("collection does not exist: {}.{name}", ctx.db),
        ));
    }
    let freed = if wide { Bson::Int64(0) } else { Bson::Int32(0) };
    Ok(if dry_run {
        doc! { "estimatedBytesFreed": freed }
    } else {
        doc! { "bytesFreed": freed }
    })
}

/// The `autoCompact` setting the server was last given: its free space target and
/// whether it runs once; `None` while off.
#[derive(Default)]
pub struct AutoCompactSetting(Mutex<Option<(Option<i64>, bool)>>);

pub fn auto_compact(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let enable = match body.get("autoCompact") {
        Some(Bson::Boolean(enable)) => *enable,
        Some(Bson::Null) => {
            return Err(Error::location(
                40414,
                "BSON field 'autoCompact.autoCompact' is missing but a required field",
            ))
        }
        Some(other) => {
            return Err(Error::type_mismatch(format!(
                "BSON field 'autoCompact.autoCompact' is the wrong type '{}', expected type 'bool'",
                type_name(other)
            )))
        }
        None => unreachable!("the command's first field names it"),
    };
    let run_once = flag(body, "autoCompact", "runOnce")?;
    let target = match body.get("freeSpaceTargetMB") {
        None | Some(Bson::Null) => None,
        Some(value) => {
            let mb = coerced_integer(value).ok_or_else(|| {
                Error::type_mismatch(format!(
                    "BSON field 'autoCompact.freeSpaceTargetMB' is the wrong type '{}', expected types '[long, int, decimal, double]'",
                    type_name(value)
                ))
            })?;
            if mb < 1 || (enable && mb > FREE_SPACE_TARGET_MB_MAX) {
                return Err(Error::bad_value(format!(
                    "freeSpaceTargetMB must be between 1 and {FREE_SPACE_TARGET_MB_MAX}, not {mb}"
                )));
            }
            Some(mb)
        }
    };
    let mut setting = ctx.server.auto_compact.0.lock();
    if !enable {
        *setting = None;
        return Ok(Document::new());
    }
    let wanted = (target, run_once);
    match *setting {
        Some(current) if current != wanted => Err(Error::new(
            ErrorCode::ALREADY_INITIALIZED,
            "autoCompact is already running with other settings: turn it off first",
        )),
        _ => {
            *setting = Some(wanted);
            Ok(Document::new())
        }
    }
}

/// A boolean option (null: not given).
fn flag(body: &Document, command: &str, field: &str) -> Result<bool> {
    match body.get(field) {
        None | Some(Bson::Null) => Ok(false),
        Some(Bson::Boolean(b)) => Ok(*b),
        Some(other) => Err(Error::type_mismatch(format!(
            "BSON field '{command}.{field}' is the wrong type '{}', expected type 'bool'",
            type_name(other)
        ))),
    }
}

/// `compact`'s free space target: a number of at least 1 (not truncated).
fn free_space_target_mb(body: &Document, command: &str) -> Result<Option<f64>> {
    let value = match body.get("freeSpaceTargetMB") {
        None | Some(Bson::Null) => return Ok(None),
        Some(value) => value,
    };
    let mb = basalt_value::is_number(value)
        .then(|| basalt_value::as_f64(value))
        .flatten()
        .ok_or_else(|| {
            Error::type_mismatch(format!(
                "BSON field '{command}.freeSpaceTargetMB' is the wrong type '{}', expected types '[long, int, decimal, double]'",
                type_name(value)
            ))
        })?;
    if mb.is_nan() || mb < 1.0 {
        return Err(Error::bad_value(format!(
            "freeSpaceTargetMB must be at least 1, not {mb}"
        )));
    }
    Ok(Some(mb))
}
