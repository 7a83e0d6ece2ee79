//! Reusing the planner's choice per query shape, as MongoDB's plan cache does: queries
//! that differ only in their values (`{ts: X, st: Y}` for every X and Y) are planned
//! once, then each reuse rebuilds only the chosen index's bounds for the new values.
//!
//! A shape is the filter with each value replaced by what decides how it bounds an index
//! (its BSON type; for `$in`, the set of its elements' types; for `$exists`, whether it
//! asks for presence), plus the sort as given and the query's collation (which decides
//! the indexes its strings may use and which of them provide its sort). MongoDB's
//! shape also holds the projection, because it decides whether a plan can be covered;
//! Basalt's plans always fetch, so the projection would only split entries.
//!
//! A reuse re-checks that the cached index can still answer the query (a partial index's filter
//! depends on values), and plans afresh when it cannot. The cache itself is the
//! collection's (`basalt_catalog::PlanCache`), emptied when its indexes change.

use crate::planner::{candidate, plan_sorted, whole_index_in_order, Plan, PlanChoice};
use crate::predicate::Predicates;
use basalt_catalog::{CachedPlan, CollectionMeta, PlanCache};
use basalt_error::Result;
use basalt_value::Collation;
use bson::{Bson, Document};
use std::sync::Arc;

/// What a query asks of the planner besides its filter.
#[derive(Clone, Copy, Debug, Default)]
pub struct QueryShapeParts<'a> {
    pub sort: Option<&'a Document>,
    /// The collation the query compares strings by; `None` for binary.
    pub collation: Option<&'a Collation>,
}

/// The cache key of a query: see the module comment.
pub fn query_shape(filter: &Document, parts: QueryShapeParts<'_>) -> Vec<u8> {
    let mut shape = Vec::with_capacity(64);
    write_filter(&mut shape, filter);
    shape.push(0xFF);
    if let Some(sort) = parts.sort {
        shape.extend_from_slice(sort.to_string().as_bytes());
    }
    // No UTF-8 text holds 0xFF, so the sort and the collation cannot run together.
    shape.push(0xFF);
    if let Some(collation) = parts.collation {
        shape.extend_from_slice(collation.spec().to_string().as_bytes());
    }
    shape
}

/// The shape an index filter (`planCacheSetFilter`) applies to: the query's shape and
/// its projection, which MongoDB's index filters tell apart.
pub fn index_filter_shape(
    filter: &Document,
    parts: QueryShapeParts<'_>,
    projection: Option<&Document>,
) -> Vec<u8> {
    let mut shape = query_shape(filter, parts);
    shape.push(0xFF);
    if let Some(projection) = projection.filter(|p| !p.is_empty()) {
        shape.extend_from_slice(projection.to_string().as_bytes());
    }
    shape
}

fn write_filter(out: &mut Vec<u8>, filter: &Document) {
    for (name, value) in filter {
        out.extend_from_slice(name.as_bytes());
        out.push(0);
        write_value(out, name, value);
    }
    out.push(1);
}

fn write_value(out: &mut Vec<u8>, operator: &str, value: &Bson) {
    match (operator, value) {
        ("$and" | "$or" | "$nor", Bson::Array(branches)) => {
            out.push(b'[');
            for branch in branches {
                match branch {
                    Bson::Document(d) => write_filter(out, d),
                    other => out.push(other.element_type() as u8),
                }
            }
            out.push(b']');
        }
        ("$in" | "$nin" | "$all", Bson::Array(items)) => {
            let mut types: Vec<u8> = items.iter().map(|item| item.element_type() as u8).collect();
            types.sort_unstable();
            types.dedup();
            out.push(b'{');
            out.extend_from_slice(&types);
            out.push(b'}');
        }
        ("$exists", v) => out.push(if crate::predicate::truthy(v) {
            b'+'
        } else {
            b'-'
        }),
        (_, Bson::Document(d)) if d.keys().next().is_some_and(|k| k.starts_with('$')) => {
            out.push(b'(');
            write_filter(out, d);
            out.push(b')');
        }
        (_, other) => out.push(other.element_type() as u8),
    }
}

/// Plans a query through the collection's plan cache (no hint: a hinted query plans
/// the named index directly, and MongoDB does not cache it either). Returns the winning
/// plan and whether it returns documents in sort order.
pub fn plan_with_cache(
    cache: &PlanCache,
    (meta, generation): (&Arc<CollectionMeta>, u64),
    filter: &Document,
    parts: QueryShapeParts<'_>,
) -> Result<(Plan, bool)> {
    let collation = parts.collation;
    let shape = query_shape(filter, parts);
    let sort = parts.sort.filter(|s| !s.is_empty());
    if let Some(cached) = cache.get(&shape) {
        if let Some(reused) = reuse(&cached, &meta.indexes, filter, collation, sort) {
            return Ok(reused);
        }
    }
    let (choice, sorted) = plan_sorted(&meta.indexes, filter, collation, None, parts.sort)?;
    if let Some(entry) = to_cached(&choice, sorted, &meta.indexes) {
        let from = basalt_catalog::CachedFrom {
            query: filter.clone(),
            sort: parts.sort.cloned().unwrap_or_default(),
            created: bson::DateTime::now(),
            chosen: !choice.rejected.is_empty(),
        };
        cache.insert(generation, shape, entry, from);
    }
    Ok((choice.winner, sorted))
}

/// The cached choice with this query's values, when it still applies.
fn reuse(
    cached: &CachedPlan,
    indexes: &[basalt_catalog::IndexSpec],
    filter: &Document,
    collation: Option<&Collation>,
    sort: Option<&Document>,
) -> Option<(Plan, bool)> {
    let named = |name: &str| indexes.iter().find(|i| i.name == name);
    match cached {
        // Only cached when no index could become usable with other values.
        CachedPlan::CollectionScan => Some((Plan::CollectionScan, false)),
        CachedPlan::Index(name) => {
            let (_, mut scan) = candidate(named(name)?, &Predicates::parse(filter), collation)?;
            let sorted = sort.is_some_and(|sort| scan.serve_sort(sort, collation));
            Some((Plan::IndexScan(Box::new(scan)), sorted))
        }
        CachedPlan::IndexInSortOrder(name) => {
            let scan = whole_index_in_order(std::slice::from_ref(named(name)?), sort?, collation)?;
            Some((Plan::IndexScan(Box::new(scan)), true))
        }
    }
}

/// The cache entry for a choice, when it is one a reuse can rebuild: a union of index
/// scans is replanned each time, and a collection scan is cached only when no index is
/// partial (a partial index may serve the same shape with other values).
fn to_cached(
    choice: &PlanChoice,
    sorted: bool,
    indexes: &[basalt_catalog::IndexSpec],
) -> Option<CachedPlan> {
    match &choice.winner {
        Plan::IndexScan(scan) if sorted && !scan.bounds.leading_field_bounded() => {
            Some(CachedPlan::IndexInSortOrder(scan.index.name.clone()))
        }
        Plan::IndexScan(scan) => Some(CachedPlan::Index(scan.index.name.clone())),
        Plan::CollectionScan if indexes.iter().all(|i| i.partial.is_none()) => {
            Some(CachedPlan::CollectionScan)
        }
        Plan::CollectionScan | Plan::Or(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use basalt_catalog::IndexSpec;
    use bson::doc;

    fn spec(name: &str, key: Document) -> IndexSpec {
        IndexSpec {
            id: 1,
            name: name.into(),
            key,
            unique: false,
            sparse: false,
            multikey: false,
            expire_after_seconds: None,
            partial: None,
            collation: None,
            hidden: false,
            echoed: Document::new(),
        }
    }

    fn meta(indexes: Vec<IndexSpec>) -> Arc<CollectionMeta> {
        Arc::new(CollectionMeta {
            id: 1,
            db: "db".into(),
            name: "c".into(),
            uuid: bson::Uuid::new(),
            options: Document::new(),
            indexes,
        })
    }

    fn index_name(plan: &Plan) -> Option<&str> {
        match plan {
            Plan::IndexScan(scan) => Some(scan.index.name.as_str()),
            Plan::CollectionScan | Plan::Or(_) => None,
        }
    }

    #[test]
    fn shapes_ignore_values_but_not_what_bounds_depend_on() {
        let shape = |f: Document| query_shape(&f, QueryShapeParts::default());
        assert_eq!(
            shape(doc! { "a": 1, "b": { "$gt": 2 } }),
            shape(doc! { "a": 7, "b": { "$gt": 9 } })
        );
        assert_ne!(shape(doc! { "a": 1 }), shape(doc! { "a": "x" }));
        assert_ne!(shape(doc! { "a": 1 }), shape(doc! { "a": null }));
        assert_ne!(shape(doc! { "a": 1 }), shape(doc! { "a": [1] }));
        assert_ne!(shape(doc! { "a": 1 }), shape(doc! { "b": 1 }));
        assert_ne!(
            shape(doc! { "a": { "$exists": true } }),
            shape(doc! { "a": { "$exists": false } })
        );
        assert_eq!(
            shape(doc! { "a": { "$in": [1, 2, 3] } }),
            shape(doc! { "a": { "$in": [4] } })
        );
        let sorted = |s: Document| {
            query_shape(
                &doc! { "a": 1 },
                QueryShapeParts {
                    sort: Some(&s),
                    ..QueryShapeParts::default()
                },
            )
        };
        assert_ne!(sorted(doc! { "a": 1 }), sorted(doc! { "a": -1 }));
        let collated = |spec: Option<Document>| {
            let collation = spec.map(|s| Collation::parse(&s).unwrap().unwrap());
            query_shape(
                &doc! { "a": "x" },
                QueryShapeParts {
                    collation: collation.as_ref(),
                    ..QueryShapeParts::default()
                },
            )
        };
        let english = || Some(doc! { "locale": "en" });
        assert_eq!(collated(english()), collated(english()));
        assert_ne!(collated(english()), collated(None));
        assert_ne!(
            collated(english()),
            collated(Some(doc! { "locale": "en", "strength": 2 }))
        );
    }

    #[test]
    fn a_cached_plan_is_reused_with_new_values_and_dropped_with_the_indexes() {
        let cache = PlanCache::default();
        let indexes = meta(vec![
            spec("_id_", doc! { "_id": 1 }),
            spec("a_1", doc! { "a": 1 }),
        ]);
        let run = |filter: Document, meta: &Arc<CollectionMeta>| {
            plan_with_cache(
                &cache,
                (meta, cache.generation()),
                &filter,
                QueryShapeParts::default(),
            )
            .unwrap()
            .0
        };
        let first = run(doc! { "a": 1 }, &indexes);
        assert_eq!(index_name(&first), Some("a_1"));
        assert_eq!((cache.len(), cache.hits()), (1, 0));
        let second = run(doc! { "a": 2 }, &indexes);
        assert_eq!(cache.hits(), 1);
        let Plan::IndexScan(scan) = &second else {
            panic!("expected an index scan, got {second:?}");
        };
        assert_eq!(scan.bounds.to_explain(false), doc! { "a": ["[2, 2]"] });
        // The collection clears its cache when its indexes change; a plan naming an
        // index that is gone is replanned.
        cache.clear();
        let without = meta(vec![spec("_id_", doc! { "_id": 1 })]);
        assert_eq!(run(doc! { "a": 3 }, &without), Plan::CollectionScan);
        assert_eq!(cache.hits(), 1);
        cache.insert(
            cache.generation(),
            query_shape(&doc! { "a": 1 }, QueryShapeParts::default()),
            CachedPlan::Index("a_1".into()),
            basalt_catalog::CachedFrom {
                query: doc! { "a": 1 },
                sort: Document::new(),
                created: bson::DateTime::now(),
                chosen: true,
            },
        );
        assert_eq!(run(doc! { "a": 4 }, &without), Plan::CollectionScan);
    }

    #[test]
    fn a_partial_index_is_not_hidden_by_a_cached_collection_scan() {
        let cache = PlanCache::default();
        let mut partial = spec("a_1", doc! { "a": 1 });
        partial.partial =
            Some(basalt_catalog::PartialFilter::new(doc! { "b": { "$gt": 5 } }).unwrap());
        let indexes = meta(vec![partial]);
        let run = |filter: Document| {
            plan_with_cache(
                &cache,
                (&indexes, cache.generation()),
                &filter,
                QueryShapeParts::default(),
            )
            .unwrap()
            .0
        };
        // Same shape; only the second query's value implies the partial filter.
        assert_eq!(
            run(doc! { "a": 1, "b": { "$gt": 4 } }),
            Plan::CollectionScan
        );
        assert_eq!(
            index_name(&run(doc! { "a": 1, "b": { "$gt": 5 } })),
            Some("a_1")
        );
        // The index scan is cached, and re-checked against values that do not imply
        // the filter.
        assert_eq!(
            run(doc! { "a": 1, "b": { "$gt": 4 } }),
            Plan::CollectionScan
        );
        assert_eq!(cache.hits(), 1);
    }

    #[test]
    fn a_cached_sorted_plan_keeps_its_direction() {
        let cache = PlanCache::default();
        let indexes = meta(vec![spec("a_1", doc! { "a": 1 })]);
        let sort = doc! { "a": -1 };
        let run = |filter: Document| {
            plan_with_cache(
                &cache,
                (&indexes, cache.generation()),
                &filter,
                QueryShapeParts {
                    sort: Some(&sort),
                    ..QueryShapeParts::default()
                },
            )
            .unwrap()
        };
        for filter in [
            doc! {},
            doc! {},
            doc! { "a": { "$gt": 1 } },
            doc! { "a": { "$gt": 5 } },
        ] {
            let (plan, sorted) = run(filter);
            assert!(sorted);
            assert!(matches!(&plan, Plan::IndexScan(scan) if scan.backward));
        }
        assert_eq!((cache.len(), cache.hits()), (2, 2));
    }
}
