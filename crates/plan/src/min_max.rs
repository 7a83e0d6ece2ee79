//! `find`'s `min` and `max`: an index scan between two keys of the hinted index, lower
//! bound inclusive, upper bound exclusive, in the index's key order.
//!
//! The bounds are whole index keys compared as the index orders them (every BSON type
//! in its place, descending fields reversed), not conditions on values: `min: {a: 30}`
//! also reads every string and object key above 30. This is what lets a reader split a
//! collection into ranges of `_id` that together cover every document, whatever the
//! types of its `_id`s (how the Parquet export reads in partitions). The filter still
//! applies to what the scan reads.

use crate::index_bounds::{IndexBounds, KeyRange};
use crate::planner::{resolve_hint, IndexScanPlan};
use basalt_catalog::IndexSpec;
use basalt_error::{Error, ErrorCode, Result};
use bson::{Bson, Document};

/// The scan of the hinted index from `min` (inclusive) to `max` (exclusive); either may
/// be absent (that end open). MongoDB's errors: no hint (51173), bounds that are not
/// the index's fields in order (51174), `min` and `max` naming different fields
/// (51176), an empty range (51175), a `$natural` hint (NoQueryExecutionPlans).
pub fn min_max_scan(
    indexes: &[IndexSpec],
    hint: Option<&Bson>,
    min: Option<&Document>,
    max: Option<&Document>,
) -> Result<IndexScanPlan> {
    let Some(hint) = hint.filter(|h| !matches!(h, Bson::Document(d) if d.is_empty())) else {
        return Err(Error::location(
            51173,
            "When using min()/max() a hint of which index to use must be provided",
        ));
    };
    let Some(index) = resolve_hint(indexes, hint)? else {
        return Err(Error::new(
            ErrorCode::NO_QUERY_EXECUTION_PLANS,
            "error processing query: planner returned error :: caused by :: min and max are incompatible with a $natural hint",
        ));
    };
    if let (Some(min), Some(max)) = (min, max) {
        if !min.keys().eq(max.keys()) {
            return Err(Error::location(
                51176,
                "min() and max() must have the same field names",
            ));
        }
    }
    let ordinary = index
        .key
        .values()
        .all(|direction| basalt_value::as_f64(direction).is_some());
    let encode = |bound: &Document| -> Result<Vec<u8>> {
        if !ordinary || !bound.keys().eq(index.key.keys()) {
            return Err(Error::location(
                51174,
                "The index chosen is not consistent with min/max",
            ));
        }
        let values: Vec<Bson> = bound.values().cloned().collect();
        Ok(index.encode(&values))
    };
    let start = min.map(encode).transpose()?;
    let end = max.map(encode).transpose()?;
    if let (Some(start), Some(end)) = (&start, &end) {
        if start >= end {
            return Err(Error::location(51175, "max() must be greater than min()"));
        }
    }
    let every_key = IndexBounds::for_index(index, |_| &[], index.collation.as_ref());
    let mut scan = IndexScanPlan::new(index, every_key);
    scan.ranges = vec![KeyRange {
        start: start.unwrap_or_default(),
        end_exclusive: end.is_some(),
        end: end.unwrap_or_default(),
    }];
    Ok(scan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn index(key: Document) -> IndexSpec {
        let mut spec = IndexSpec::id_index(7, "a_1_b_-1");
        spec.key = key;
        spec
    }

    fn code(result: Result<IndexScanPlan>) -> i32 {
        result.unwrap_err().code.0
    }

    #[test]
    fn bounds_are_whole_keys_in_index_order() {
        let indexes = [index(doc! {"a": 1, "b": -1})];
        let hint = Bson::Document(doc! {"a": 1, "b": -1});
        let min = doc! {"a": 1, "b": 2};
        let max = doc! {"a": 2, "b": 1};
        let scan = min_max_scan(&indexes, Some(&hint), Some(&min), Some(&max)).unwrap();
        let range = &scan.ranges[0];
        assert_eq!(
            range.start,
            indexes[0].encode(&[bson::bson!(1), bson::bson!(2)])
        );
        assert!(range.end_exclusive);
        // b descends: (1, 3) sorts before (1, 2), (2, 0) after (2, 1).
        let key = |a: i32, b: i32| indexes[0].encode(&[Bson::Int32(a), Bson::Int32(b)]);
        assert!(key(1, 3) < range.start && range.start < key(1, 1));
        assert!(key(2, 1) == range.end && key(2, 0) > range.end);
        let open = min_max_scan(&indexes, Some(&hint), None, Some(&max)).unwrap();
        assert!(open.ranges[0].start.is_empty());
    }

    #[test]
    fn errors_are_mongodbs() {
        let indexes = [index(doc! {"a": 1, "b": -1}), index(doc! {"t": "text"})];
        let hint = Bson::Document(doc! {"a": 1, "b": -1});
        let a = doc! {"a": 1, "b": 1};
        assert_eq!(code(min_max_scan(&indexes, None, Some(&a), None)), 51173);
        let natural = Bson::Document(doc! {"$natural": 1});
        assert_eq!(
            code(min_max_scan(&indexes, Some(&natural), Some(&a), None)),
            291
        );
        let short = doc! {"a": 1};
        assert_eq!(
            code(min_max_scan(&indexes, Some(&hint), Some(&short), None)),
            51174
        );
        assert_eq!(
            code(min_max_scan(&indexes, Some(&hint), Some(&a), Some(&short))),
            51176
        );
        assert_eq!(
            code(min_max_scan(&indexes, Some(&hint), Some(&a), Some(&a))),
            51175
        );
        let text = Bson::Document(doc! {"t": "text"});
        let t = doc! {"t": 1};
        assert_eq!(
            code(min_max_scan(&indexes, Some(&text), Some(&t), None)),
            51174
        );
    }
}
