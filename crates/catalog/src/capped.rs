//! Capped collections: a collection with a size bound in bytes (`size`) and optionally
//! in documents (`max`), whose oldest documents go as new ones arrive, so that it keeps
//! the most recent ones in insertion order (a log, a queue tailed by a consumer).
//!
//! The bounds are the collection's options, as `create` stores them. A writer that
//! inserts into a capped collection removes, under the same write lock, the oldest
//! documents past a bound (each removal a delete like any other: index entries, oplog
//! record), so every replica set member removes the same ones. The newest document
//! always stays, even alone past `size`. Readers that tail the collection (tailable
//! `awaitData` cursors) wait on [`Collection::wait_for_records_after`], which each
//! insert into a capped collection wakes.

use crate::collection::{Collection, CollectionMeta, Writer};
use basalt_error::Result;
use basalt_storage::Durability;
use bson::Document;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

/// The smallest size bound a capped collection gets, whatever `size` says (MongoDB's).
const MIN_SIZE_BYTES: u64 = 4096;

/// A capped collection's bounds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CappedBounds {
    pub size_bytes: u64,
    pub max_documents: Option<u64>,
}

impl CollectionMeta {
    /// The bounds of a capped collection; `None` for any other.
    pub fn capped(&self) -> Option<CappedBounds> {
        if !self.options.get_bool("capped").unwrap_or(false) {
            return None;
        }
        let number = |field: &str| self.options.get(field).and_then(basalt_value::as_i64);
        Some(CappedBounds {
            size_bytes: number("size").map_or(MIN_SIZE_BYTES, |size| {
                (size.max(0) as u64).max(MIN_SIZE_BYTES)
            }),
            max_documents: number("max").filter(|max| *max > 0).map(|max| max as u64),
        })
    }
}

impl CappedBounds {
    /// Whether `count` documents of `bytes` in all are more than the bounds allow and
    /// one can go (the newest always stays).
    fn exceeded(&self, count: u64, bytes: u64) -> bool {
        count > 1 && (bytes > self.size_bytes || self.max_documents.is_some_and(|max| count > max))
    }
}

impl Writer<'_> {
    /// Removes the oldest documents of a capped collection until it is within `bounds`.
    pub fn trim_capped(&mut self, bounds: CappedBounds, durability: Durability) -> Result<()> {
        let stats = self.collection().stats_under_write_lock()?;
        let (mut count, mut bytes) = (stats.count, stats.data_size_bytes);
        if !bounds.exceeded(count, bytes) {
            return Ok(());
        }
        let collection = self.collection();
        let snapshot = collection.snapshot();
        let mut oldest = Vec::new();
        collection.scan(&*snapshot, None, &mut |record_id, raw| {
            if !bounds.exceeded(count, bytes) {
                return Ok(ControlFlow::Break(()));
            }
            count -= 1;
            bytes = bytes.saturating_sub(raw.as_bytes().len() as u64);
            oldest.push((record_id, Document::try_from(raw)?));
            Ok(ControlFlow::Continue(()))
        })?;
        for (record_id, document) in oldest {
            self.delete(record_id, &document, durability)?;
        }
        Ok(())
    }
}

impl Collection {
    /// Waits until a record after `record_id` exists, or `timeout` passes (a tailable
    /// `awaitData` cursor at the end of a capped collection).
    pub fn wait_for_records_after(&self, record_id: u64, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let (lock, inserted) = self.insert_signal();
        let mut guard = lock.lock();
        while self.record_id_high_water() <= record_id {
            if inserted.wait_until(&mut guard, deadline).timed_out() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn bounds(options: Document) -> Option<CappedBounds> {
        CollectionMeta {
            id: 1,
            db: "db".into(),
            name: "c".into(),
            uuid: bson::Uuid::new(),
            options,
            indexes: Vec::new(),
        }
        .capped()
    }

    #[test]
    fn bounds_come_from_the_options() {
        assert_eq!(bounds(doc! {}), None);
        assert_eq!(bounds(doc! { "capped": false, "size": 10_000 }), None);
        assert_eq!(
            bounds(doc! { "capped": true, "size": 10_240_i64, "max": 5 }),
            Some(CappedBounds {
                size_bytes: 10_240,
                max_documents: Some(5)
            })
        );
        // Below 4096 bytes the bound is 4096, as in MongoDB.
        assert_eq!(
            bounds(doc! { "capped": true, "size": 256 }).map(|b| b.size_bytes),
            Some(4096)
        );
    }

    #[test]
    fn the_newest_document_always_stays() {
        let bounds = CappedBounds {
            size_bytes: 100,
            max_documents: Some(3),
        };
        assert!(!bounds.exceeded(1, 1_000_000));
        assert!(bounds.exceeded(2, 101));
        assert!(bounds.exceeded(4, 10));
        assert!(!bounds.exceeded(3, 100));
    }
}
