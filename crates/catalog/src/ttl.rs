//! TTL expiry: deleting the documents whose indexed date (or earliest date, for an
//! array of dates) is more than the index's `expireAfterSeconds` in the past, as
//! MongoDB's TTL monitor does. Non-date values never expire.
//!
//! Candidates come from the TTL index itself — only its date keys below the cutoff are
//! read — and each is re-checked under the collection's write lock before it goes, so a
//! document updated meanwhile is kept.

use crate::{Catalog, Collection, IndexSpec};
use basalt_error::Result;
use basalt_storage::Durability;
use bson::{Bson, DateTime};
use std::ops::ControlFlow;

/// Deletions made under one hold of a collection's write lock, so writers are not
/// starved during a large expiry.
const TTL_DELETE_BATCH_DOCS: usize = 1000;

impl Catalog {
    /// Deletes every expired document of every TTL index, as of `now`; returns how
    /// many were deleted.
    pub fn expire_documents(&self, now: DateTime) -> Result<u64> {
        let mut deleted = 0;
        for db in self.database_names() {
            for collection in self.collections_of(&db) {
                let meta = collection.meta();
                for index in meta
                    .indexes
                    .iter()
                    .filter(|i| i.expire_after_seconds.is_some())
                {
                    deleted += self.expire_index(&collection, index, now)?;
                }
            }
        }
        Ok(deleted)
    }

    fn expire_index(
        &self,
        collection: &Collection,
        index: &IndexSpec,
        now: DateTime,
    ) -> Result<u64> {
        let Some(cutoff) = cutoff_ms(index, now) else {
            return Ok(0);
        };
        let candidates = expired_candidates(collection, index, cutoff)?;
        let meta = collection.meta();
        let mut deleted = 0;
        for chunk in candidates.chunks(TTL_DELETE_BATCH_DOCS) {
            let done = self.write(&meta.db, &meta.name, false, |writer| {
                let mut n = 0;
                for &record_id in chunk {
                    if let Some(doc) = writer.current(record_id)? {
                        if is_expired(index, &doc, cutoff)? {
                            writer.delete(record_id, &doc, Durability::Process)?;
                            n += 1;
                        }
                    }
                }
                Ok(n)
            })?;
            deleted += done.unwrap_or(0);
        }
        Ok(deleted)
    }
}

/// Record ids whose key in the TTL index is a date before `cutoff_ms`: the date keys
/// sort together and by time, so they are one range of the index (read from its far
/// end for a descending index).
fn expired_candidates(
    collection: &Collection,
    index: &IndexSpec,
    cutoff_ms: i64,
) -> Result<Vec<u64>> {
    let cutoff = index.encode(&[Bson::DateTime(DateTime::from_millis(cutoff_ms))]);
    let descending = index.is_descending_field(0);
    let dates = &cutoff[..1];
    let snapshot = collection.snapshot();
    let mut ids = Vec::new();
    let after = descending.then_some(cutoff.as_slice());
    collection.scan_index(&*snapshot, index, dates, after, &mut |entry, _| {
        if !descending && entry >= cutoff.as_slice() {
            return Ok(ControlFlow::Break(()));
        }
        if let Some(tail) = entry.len().checked_sub(8).map(|n| &entry[n..]) {
            ids.extend(tail.try_into().ok().map(u64::from_be_bytes));
        }
        Ok(ControlFlow::Continue(()))
    })?;
    ids.sort_unstable();
    ids.dedup();
    Ok(ids)
}

/// Whether the document's indexed date (the earliest, for an array) is before the cutoff.
/// The instant before which a TTL index's dates have expired, as of `now`; `None` for
/// an index without `expireAfterSeconds`.
fn cutoff_ms(index: &IndexSpec, now: DateTime) -> Option<i64> {
    let seconds = index.expire_after_seconds?;
    Some(
        now.timestamp_millis()
            .saturating_sub(seconds.saturating_mul(1000)),
    )
}

/// The filter of the documents a TTL index says have expired as of `now` (a date below
/// the cutoff in an indexed field, within the index's partial filter): what a replica
/// set's primary deletes through the replicated log, where a standalone deletes them
/// itself (`Catalog::expire_documents`). `$lt` with a date matches dates only, as
/// expiry ignores other values, and an array with any date before the cutoff.
pub fn expired_filter(index: &IndexSpec, now: DateTime) -> Option<bson::Document> {
    let cutoff = DateTime::from_millis(cutoff_ms(index, now)?);
    let expired: Vec<Bson> = index
        .key
        .keys()
        .map(|field| Bson::Document(bson::doc! { field: { "$lt": cutoff } }))
        .collect();
    let mut conditions = vec![Bson::Document(bson::doc! { "$or": expired })];
    if let Some(partial) = &index.partial {
        conditions.push(Bson::Document(partial.expression.clone()));
    }
    Some(bson::doc! { "$and": conditions })
}

fn is_expired(index: &IndexSpec, doc: &bson::Document, cutoff_ms: i64) -> Result<bool> {
    Ok(index.keys_for(doc)?.iter().any(|key| {
        key.values
            .iter()
            .any(|v| matches!(v, Bson::DateTime(d) if d.timestamp_millis() < cutoff_ms))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use basalt_storage::MemoryEngine;
    use bson::doc;
    use std::sync::Arc;

    fn ttl_index(key: bson::Document, seconds: i64) -> IndexSpec {
        IndexSpec {
            id: 0,
            name: "ttl".into(),
            key,
            unique: false,
            sparse: false,
            multikey: false,
            expire_after_seconds: Some(seconds),
            partial: None,
            collation: None,
            hidden: false,
            echoed: bson::Document::new(),
        }
    }

    #[test]
    fn expires_past_dates_and_arrays_by_their_earliest_date() {
        for direction in [1, -1] {
            let cat = Catalog::open(Arc::new(MemoryEngine::default())).unwrap();
            let coll = cat.get_or_create("test", "c").unwrap();
            let now = DateTime::from_millis(1_000_000_000);
            let at = |ms: i64| Bson::DateTime(DateTime::from_millis(ms));
            let docs = [
                doc! { "_id": 1, "t": at(1_000_000_000 - 120_000) },
                doc! { "_id": 2, "t": at(1_000_000_000 - 30_000) },
                doc! { "_id": 3, "t": [at(1_000_000_000 + 50_000), at(1_000_000_000 - 90_000)] },
                doc! { "_id": 4, "t": "not a date" },
                doc! { "_id": 5 },
            ];
            coll.writer()
                .insert_many(&docs, true, Durability::Process)
                .unwrap();
            cat.add_index(&coll, ttl_index(doc! { "t": direction }, 60))
                .unwrap();
            assert_eq!(
                cat.expire_documents(now).unwrap(),
                2,
                "direction {direction}"
            );
            let snapshot = coll.snapshot();
            let mut left = Vec::new();
            coll.scan(&*snapshot, None, &mut |_, raw| {
                left.push(raw.get_i32("_id").unwrap());
                Ok(ControlFlow::Continue(()))
            })
            .unwrap();
            assert_eq!(left, vec![2, 4, 5]);
        }
    }
}
