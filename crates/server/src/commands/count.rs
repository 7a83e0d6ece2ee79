//! `count`: how many documents match, after skip and limit.

use super::Ctx;
use crate::exec::{for_each_match, AccessPath, Deadline, Needs, RangeScan};
use crate::parallel_scan;
use crate::request::Fields;
use basalt_catalog::Collection;
use basalt_error::{Error, Result};
use basalt_query::Matcher;
use bson::{doc, Document};
use std::ops::ControlFlow;

pub fn count(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let fields = Fields::new(body);
    let name = fields.collection()?;
    let filter = fields.document_opt("query")?.cloned().unwrap_or_default();
    let collation = fields.collation()?;
    let matcher = Matcher::new(&filter)?.with_collation(collation.as_ref());
    let skip = count_skip(&fields)?;
    let limit = count_limit(&fields)?;
    let deadline = ctx.deadline();
    let wanted = limit.map(|l| l.saturating_add(skip));
    if let Some(set) = ctx
        .server
        .replication()
        .filter(|_| crate::local_oplog::is_oplog(ctx.db, name))
    {
        let entries = crate::local_oplog::entries(
            ctx.server.catalog.engine().clone(),
            set.clone(),
            filter,
            matcher,
            deadline,
        );
        let mut matched = 0i64;
        for entry in entries.take(wanted.map_or(usize::MAX, |w| w as usize)) {
            entry?;
            matched += 1;
        }
        return Ok(counted(matched - skip));
    }
    let Some(collection) = ctx.server.catalog.get(ctx.db, name) else {
        return Ok(doc! { "n": 0 });
    };
    // Without a filter the kept document count answers, as MongoDB answers from its
    // collection metadata.
    let matched = if filter.is_empty() && body.get("hint").is_none() {
        let total = collection.stats()?.count as i64;
        wanted.map_or(total, |w| total.min(w))
    } else {
        let path = AccessPath::choose(&collection, &filter, collation.as_ref(), body.get("hint"))?;
        count_matches(
            &collection,
            &matcher,
            &path,
            wanted,
            deadline,
            ctx.server.scan_workers(),
        )?
    };
    Ok(counted(matched - skip))
}

/// The reply of a count of `n` (never below 0).
fn counted(n: i64) -> Document {
    let n = n.max(0);
    doc! { "n": i32::try_from(n).map_or(bson::Bson::Int64(n), bson::Bson::Int32) }
}

/// A count's `limit` (`None` for none or 0), read as mongod 8 reads it: a number (else
/// BadValue, null included) that is whole and fits a long (else FailedToParse); a
/// negative one counts like a positive one, and the one long without a positive
/// counterpart is BadValue.
pub(crate) fn count_limit(fields: &Fields) -> Result<Option<i64>> {
    let Some(value) = fields.body.get("limit") else {
        return Ok(None);
    };
    if !basalt_value::is_number(value) {
        return Err(Error::bad_value(format!(
            "The 'limit' of a count must be a number, not {}",
            crate::request::type_name(value)
        )));
    }
    let limit = basalt_value::Number::from_bson(value)
        .and_then(|n| n.to_i64_exact())
        .ok_or_else(|| {
            Error::failed_to_parse(format!(
                "The 'limit' of a count must be a whole number that fits a long, not {value}"
            ))
        })?;
    if limit == i64::MIN {
        return Err(Error::bad_value(
            "The 'limit' of a count cannot be the smallest long (-9223372036854775808)",
        ));
    }
    Ok(Some(limit.abs()).filter(|l| *l > 0))
}

/// A count's `skip`, read as mongod 8 reads it: absent or null is none; a number is
/// taken whole (a double cut toward zero, a decimal rounded half to even) and must not
/// be negative (BadValue); anything else is TypeMismatch.
pub(crate) fn count_skip(fields: &Fields) -> Result<i64> {
    let value = match fields.body.get("skip") {
        None | Some(bson::Bson::Null) => return Ok(0),
        Some(value) => value,
    };
    let skip = crate::request::coerced_integer(value).ok_or_else(|| {
        Error::type_mismatch(format!(
            "BSON field 'count.skip' is the wrong type '{}', expected types '[long, int, decimal, double]'",
            crate::request::type_name(value)
        ))
    })?;
    // -inf saturates to the smallest long; a NaN is 0.
    if skip < 0 {
        return Err(Error::bad_value(format!(
            "BSON field 'skip' value must be >= 0, actual value '{skip}'"
        )));
    }
    Ok(skip)
}

/// Matches of a filter, stopping at `wanted`.
fn count_matches(
    collection: &Collection,
    matcher: &Matcher,
    path: &AccessPath,
    wanted: Option<i64>,
    deadline: Deadline,
    workers: usize,
) -> Result<i64> {
    if let (AccessPath::Columns(find), None) = (path, wanted) {
        return crate::column_scan::count(collection, find, matcher, deadline, workers);
    }
    let snapshot = collection.snapshot();
    if *path == AccessPath::CollectionScan && wanted.is_none() {
        // Counted on all scan workers, each over its ranges of the collection.
        let high_water = collection.record_id_high_water();
        let scan = RangeScan {
            collection,
            snapshot: &*snapshot,
            matcher,
            deadline,
            needs: Needs::Fields(&[]),
        };
        let counts = parallel_scan::run(high_water, workers, &|range| scan.count(range))?;
        return Ok(counts.into_iter().sum());
    }
    let mut matched = 0i64;
    for_each_match(
        collection,
        &*snapshot,
        matcher,
        path,
        deadline,
        // Counting needs no field beyond the filter's.
        Some(&[]),
        &mut |_, _| {
            matched += 1;
            Ok(if wanted.is_some_and(|w| matched >= w) {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            })
        },
    )?;
    Ok(matched)
}
