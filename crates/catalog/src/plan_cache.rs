//! A collection's plan cache: the planner's choice per query shape, as MongoDB keeps one
//! per collection. It lives beside the collection so it dies with it, and the collection
//! empties it whenever its index list changes (create, drop, collMod, an index turning
//! multikey), since a choice made over other indexes may name one that is gone or miss
//! a better one.
//!
//! The catalog only stores choices; what a shape is and how a choice is reused is the
//! planner's business (`basalt_plan::plan_cache`).

use bson::{Bson, Document};
use parking_lot::Mutex;
use std::collections::HashMap;

/// Shapes kept at most; a full cache is emptied rather than tracked for recency, since
/// refilling costs one planning per shape.
const ENTRIES_MAX: usize = 5000;

/// What the planner chose for one query shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CachedPlan {
    CollectionScan,
    /// A scan of the named index over the bounds of the query's values.
    Index(String),
    /// A scan of the whole named index, for its key order (no condition bounds it).
    IndexInSortOrder(String),
}

#[derive(Default)]
struct Entries {
    /// Bumped by every clear: a choice planned before a clear is not stored after it.
    generation: u64,
    plans: HashMap<Vec<u8>, (CachedPlan, CachedFrom)>,
    hits: u64,
}

/// The query a cached choice was first planned for, and when (for `$planCacheStats`).
#[derive(Clone, Debug, PartialEq)]
pub struct CachedFrom {
    pub query: Document,
    pub sort: Document,
    pub created: bson::DateTime,
    /// Whether the planner chose among several plans. MongoDB caches only such
    /// choices; Basalt keeps the others too (they spare a replanning) but does not
    /// list them.
    pub chosen: bool,
}

#[derive(Default)]
pub struct PlanCache {
    entries: Mutex<Entries>,
    /// The index filters set on the collection (`planCacheSetFilter`), by shape.
    filters: Mutex<Vec<(Vec<u8>, IndexFilter)>>,
}

/// An index filter (`planCacheSetFilter`): the indexes queries of one shape may use,
/// and the shape as it was given (for `planCacheListFilters`).
#[derive(Clone, Debug, PartialEq)]
pub struct IndexFilter {
    pub query: Document,
    pub sort: Document,
    pub projection: Document,
    pub collation: Option<Document>,
    /// Key patterns or index names.
    pub indexes: Vec<Bson>,
}

impl PlanCache {
    /// The choice cached for `shape`, counting a hit.
    pub fn get(&self, shape: &[u8]) -> Option<CachedPlan> {
        let mut entries = self.entries.lock();
        let found = entries.plans.get(shape).map(|(plan, _)| plan.clone());
        entries.hits += u64::from(found.is_some());
        found
    }

    /// The generation to hand back to [`PlanCache::insert`]; read it together with the
    /// index list the choice is planned over (`Collection::meta_for_planning`).
    pub fn generation(&self) -> u64 {
        self.entries.lock().generation
    }

    /// Stores a choice planned at `generation`, unless the cache was cleared since.
    pub fn insert(&self, generation: u64, shape: Vec<u8>, plan: CachedPlan, from: CachedFrom) {
        let mut entries = self.entries.lock();
        if entries.generation != generation {
            return;
        }
        if entries.plans.len() >= ENTRIES_MAX {
            entries.plans.clear();
        }
        entries.plans.insert(shape, (plan, from));
    }

    /// Every cached choice among several plans: its shape, the choice and the query it
    /// came from.
    pub fn entries(&self) -> Vec<(Vec<u8>, CachedPlan, CachedFrom)> {
        let entries = self.entries.lock();
        entries
            .plans
            .iter()
            .filter(|(_, (_, from))| from.chosen)
            .map(|(shape, (plan, from))| (shape.clone(), plan.clone(), from.clone()))
            .collect()
    }

    pub fn clear(&self) {
        let mut entries = self.entries.lock();
        entries.generation += 1;
        entries.plans.clear();
    }

    /// Sets the index filter of `shape`, replacing the one it had; cached choices are
    /// forgotten, since some may use other indexes.
    pub fn set_filter(&self, shape: Vec<u8>, filter: IndexFilter) {
        let mut filters = self.filters.lock();
        match filters.iter_mut().find(|(s, _)| *s == shape) {
            Some((_, existing)) => *existing = filter,
            None => filters.push((shape, filter)),
        }
        drop(filters);
        self.clear();
    }

    /// The index filter of `shape`, if one is set.
    pub fn filter(&self, shape: &[u8]) -> Option<IndexFilter> {
        let filters = self.filters.lock();
        filters
            .iter()
            .find(|(s, _)| s == shape)
            .map(|(_, filter)| filter.clone())
    }

    /// Every index filter, in the order they were set.
    pub fn filters(&self) -> Vec<IndexFilter> {
        self.filters.lock().iter().map(|(_, f)| f.clone()).collect()
    }

    /// Removes the index filter of `shape`, or all of them.
    pub fn clear_filters(&self, shape: Option<&[u8]>) {
        match shape {
            Some(shape) => self.filters.lock().retain(|(s, _)| s != shape),
            None => self.filters.lock().clear(),
        }
        self.clear();
    }

    /// Forgets the cached choice for one shape.
    pub fn remove(&self, shape: &[u8]) {
        self.entries.lock().plans.remove(shape);
    }

    /// Shapes cached now.
    pub fn len(&self) -> usize {
        self.entries.lock().plans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Lookups answered from the cache since the collection was opened.
    pub fn hits(&self) -> u64 {
        self.entries.lock().hits
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Catalog, IndexSpec};
    use basalt_storage::{Durability, MemoryEngine};
    use bson::doc;
    use std::sync::Arc;

    fn from() -> CachedFrom {
        CachedFrom {
            query: doc! {},
            sort: doc! {},
            created: bson::DateTime::now(),
            chosen: true,
        }
    }

    #[test]
    fn index_changes_clear_the_collections_cache_and_writes_do_not() {
        let catalog = Catalog::open(Arc::new(MemoryEngine::default())).unwrap();
        let coll = catalog.get_or_create("db", "c").unwrap();
        let fill = || {
            let (_, generation) = coll.meta_for_planning();
            coll.plan_cache().insert(
                generation,
                b"shape".to_vec(),
                CachedPlan::CollectionScan,
                from(),
            );
            assert_eq!(coll.plan_cache().len(), 1);
        };
        let spec = IndexSpec {
            key: doc! { "a": 1 },
            unique: false,
            ..IndexSpec::id_index(0, "a_1")
        };
        fill();
        catalog.add_index(&coll, spec).unwrap();
        assert!(coll.plan_cache().is_empty());
        fill();
        // A plain write leaves the indexes alone; one that makes an index multikey
        // changes how its bounds are built.
        let mut writer = coll.writer();
        writer
            .insert_many(&[doc! { "_id": 1, "a": 1 }], true, Durability::Process)
            .unwrap();
        assert_eq!(coll.plan_cache().len(), 1);
        writer
            .insert_many(&[doc! { "_id": 2, "a": [1, 2] }], true, Durability::Process)
            .unwrap();
        drop(writer);
        assert!(coll.plan_cache().is_empty());
        fill();
        catalog.remove_index(&coll, "a_1").unwrap();
        assert!(coll.plan_cache().is_empty());
    }

    #[test]
    fn a_clear_refuses_choices_planned_before_it() {
        let cache = PlanCache::default();
        let before = cache.generation();
        cache.insert(
            before,
            b"s".to_vec(),
            CachedPlan::Index("a_1".into()),
            from(),
        );
        assert_eq!(cache.get(b"s"), Some(CachedPlan::Index("a_1".into())));
        assert_eq!(cache.hits(), 1);
        cache.clear();
        assert_eq!(cache.get(b"s"), None);
        cache.insert(before, b"s".to_vec(), CachedPlan::CollectionScan, from());
        assert!(cache.is_empty());
        cache.insert(
            cache.generation(),
            b"s".to_vec(),
            CachedPlan::CollectionScan,
            from(),
        );
        assert_eq!(cache.get(b"s"), Some(CachedPlan::CollectionScan));
    }
}
