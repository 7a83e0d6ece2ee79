//! A collection's plan cache: the planner's choice per query shape, as MongoDB keeps one
//! per collection. It lives beside the collection so it dies with it, and the collection
//! empties it whenever its index list changes (create, drop, collMod, an index turning
//! multikey), since a choice made over other indexes may name one that is gone or miss
//! a better one.
//!
//! The catalog only stores choices; what a shape is and how a choice is reused is the
//! planner's business (`basalt_plan::plan_cache`).

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
    plans: HashMap<Vec<u8>, CachedPlan>,
    hits: u64,
}

#[derive(Default)]
pub struct PlanCache {
    entries: Mutex<Entries>,
}

impl PlanCache {
    /// The choice cached for `shape`, counting a hit.
    pub fn get(&self, shape: &[u8]) -> Option<CachedPlan> {
        let mut entries = self.entries.lock();
        let found = entries.plans.get(shape).cloned();
        entries.hits += u64::from(found.is_some());
        found
    }

    /// The generation to hand back to [`PlanCache::insert`]; read it together with the
    /// index list the choice is planned over (`Collection::meta_for_planning`).
    pub fn generation(&self) -> u64 {
        self.entries.lock().generation
    }

    /// Stores a choice planned at `generation`, unless the cache was cleared since.
    pub fn insert(&self, generation: u64, shape: Vec<u8>, plan: CachedPlan) {
        let mut entries = self.entries.lock();
        if entries.generation != generation {
            return;
        }
        if entries.plans.len() >= ENTRIES_MAX {
            entries.plans.clear();
        }
        entries.plans.insert(shape, plan);
    }

    pub fn clear(&self) {
        let mut entries = self.entries.lock();
        entries.generation += 1;
        entries.plans.clear();
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

    #[test]
    fn index_changes_clear_the_collections_cache_and_writes_do_not() {
        let catalog = Catalog::open(Arc::new(MemoryEngine::default())).unwrap();
        let coll = catalog.get_or_create("db", "c").unwrap();
        let fill = || {
            let (_, generation) = coll.meta_for_planning();
            coll.plan_cache()
                .insert(generation, b"shape".to_vec(), CachedPlan::CollectionScan);
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
        cache.insert(before, b"s".to_vec(), CachedPlan::Index("a_1".into()));
        assert_eq!(cache.get(b"s"), Some(CachedPlan::Index("a_1".into())));
        assert_eq!(cache.hits(), 1);
        cache.clear();
        assert_eq!(cache.get(b"s"), None);
        cache.insert(before, b"s".to_vec(), CachedPlan::CollectionScan);
        assert!(cache.is_empty());
        cache.insert(
            cache.generation(),
            b"s".to_vec(),
            CachedPlan::CollectionScan,
        );
        assert_eq!(cache.get(b"s"), Some(CachedPlan::CollectionScan));
    }
}
