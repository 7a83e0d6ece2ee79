//! Equality joins against another collection, for `$lookup` (`localField` =
//! `foreignField`) and `$graphLookup` (`connectToField`).
//!
//! MongoDB runs these as a query `{<foreign path>: {$in: [<values>]}}` per input
//! document. Here the foreign documents are read once and indexed by the keys they offer
//! such a query (a hash join), so each input document costs a few hash probes instead of
//! a collection scan. Values are compared by their order-preserving key encoding, under
//! which `1`, `1.0` and `NumberLong(1)` are one key, as MongoDB's equality has them. When
//! the foreign documents exceed [`JOIN_INDEX_BYTES_MAX`] of BSON, or the server's memory
//! budget has no room for them, the join falls back to reading them again for every
//! probe, so memory stays bounded. Matches stream out one at a time, so a key that
//! matches most of a large collection is never held as one vector.

use crate::pipeline::DocumentStream;
use basalt_error::Result;
use basalt_memory::Reservation;
use basalt_query::Matcher;
use basalt_value::key_string::encode_value_with;
use basalt_value::{document_memory_bytes, document_size_bytes, Collation};
use basalt_value::{FieldPath, Reached};
use bson::{Bson, Document};
use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;

/// The most document bytes a join keeps in memory, as MongoDB's hash join before it
/// spills (100 MiB).
pub(crate) const JOIN_INDEX_BYTES_MAX: usize = 100 * 1024 * 1024;

/// The encoded key of one value.
pub(crate) type Key = Vec<u8>;

/// Strings key by their sort key under `collation`, so values it finds equal meet.
pub(crate) fn key(value: &Bson, collation: Option<&Collation>) -> Key {
    let mut out = Vec::new();
    encode_value_with(&mut out, value, false, collation);
    out
}

/// The values a document offers at `path` to an equality query `{path: {$eq: v}}`: every
/// value the path reaches and the elements of arrays among them. Where the path reaches
/// nothing, null is offered when `missing_is_null` (a query for null matches missing
/// fields; `$graphLookup` excludes them).
pub(crate) fn offered_keys(
    doc: &Document,
    path: &FieldPath,
    missing_is_null: bool,
    collation: Option<&Collation>,
) -> Vec<Key> {
    let mut keys = Vec::new();
    let _ = path.visit(doc, &mut |reached| {
        match reached {
            Reached::Value { value, .. } => {
                keys.push(key(value, collation));
                if let Bson::Array(items) = value {
                    keys.extend(items.iter().map(|item| key(item, collation)));
                }
            }
            Reached::Missing { .. } if missing_is_null => keys.push(key(&Bson::Null, collation)),
            Reached::Missing { .. } => {}
        }
        ControlFlow::<()>::Continue(())
    });
    keys
}

/// The values a document looks for at `path`: every value the path reaches, arrays
/// standing for their elements.
pub(crate) fn sought_values(doc: &Document, path: &FieldPath) -> Vec<Bson> {
    let mut values = Vec::new();
    let _ = path.visit(doc, &mut |reached| {
        if let Reached::Value { value, .. } = reached {
            match value {
                Bson::Array(items) => values.extend(items.iter().cloned()),
                other => values.push(other.clone()),
            }
        }
        ControlFlow::<()>::Continue(())
    });
    values
}

/// Reads the foreign documents (again, when the join could not keep them in memory).
pub(crate) type Source<'a> = Box<dyn Fn() -> Result<DocumentStream<'a>> + Send + Sync + 'a>;

pub(crate) struct Join<'a> {
    path: FieldPath,
    missing_is_null: bool,
    /// Only foreign documents that match take part (`restrictSearchWithMatch`).
    filter: Option<&'a Matcher>,
    /// What the keys of strings compare under.
    collation: Option<Collation>,
    source: Source<'a>,
    /// `None` when the foreign documents did not fit in memory.
    index: Option<Index>,
}

#[derive(Default)]
struct Index {
    docs: Vec<Document>,
    /// Positions in `docs`, ascending, of the documents offering each key.
    positions: HashMap<Key, Vec<usize>>,
    /// The index's share of the server's memory budget.
    memory: Reservation,
}

impl<'a> Join<'a> {
    /// Reads the foreign documents and indexes them by the keys they offer at `path`.
    /// Its keys are made with [`key`] under `collation`, as the keys it is asked for
    /// must be.
    pub(crate) fn open(
        path: FieldPath,
        missing_is_null: bool,
        filter: Option<&'a Matcher>,
        collation: Option<&Collation>,
        source: Source<'a>,
    ) -> Result<Join<'a>> {
        Join::open_within(
            path,
            missing_is_null,
            filter,
            collation,
            source,
            JOIN_INDEX_BYTES_MAX,
        )
    }

    fn open_within(
        path: FieldPath,
        missing_is_null: bool,
        filter: Option<&'a Matcher>,
        collation: Option<&Collation>,
        source: Source<'a>,
        bytes_max: usize,
    ) -> Result<Join<'a>> {
        let mut join = Join {
            path,
            missing_is_null,
            filter,
            collation: collation.cloned(),
            source,
            index: None,
        };
        let mut index = Index::default();
        let mut bytes = 0usize;
        for doc in (join.source)()? {
            let doc = doc?;
            if !join.takes_part(&doc) {
                continue;
            }
            bytes += document_size_bytes(&doc);
            if bytes > bytes_max || index.memory.reserve(document_memory_bytes(&doc)).is_err() {
                return Ok(join);
            }
            let position = index.docs.len();
            let collation = join.collation.as_ref();
            for key in offered_keys(&doc, &join.path, join.missing_is_null, collation) {
                let positions = index.positions.entry(key).or_default();
                if positions.last() != Some(&position) {
                    positions.push(position);
                }
            }
            index.docs.push(doc);
        }
        join.index = Some(index);
        Ok(join)
    }

    fn takes_part(&self, doc: &Document) -> bool {
        self.filter.is_none_or(|f| f.matches(doc))
    }

    /// The foreign documents offering any of `keys`, each once, in natural order, made
    /// as they are pulled.
    pub(crate) fn matching(&self, keys: HashSet<Key>) -> Result<DocumentStream<'_>> {
        if keys.is_empty() {
            return Ok(Box::new(std::iter::empty()));
        }
        match &self.index {
            Some(index) => {
                let mut positions: Vec<usize> = keys
                    .iter()
                    .filter_map(|k| index.positions.get(k))
                    .flatten()
                    .copied()
                    .collect();
                positions.sort_unstable();
                positions.dedup();
                Ok(Box::new(
                    positions.into_iter().map(|p| Ok(index.docs[p].clone())),
                ))
            }
            None => Ok(Box::new((self.source)()?.filter(move |doc| {
                doc.as_ref().map_or(true, |doc| {
                    self.takes_part(doc)
                        && offered_keys(
                            doc,
                            &self.path,
                            self.missing_is_null,
                            self.collation.as_ref(),
                        )
                        .iter()
                        .any(|k| keys.contains(k))
                })
            }))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn keys(values: &[Bson]) -> HashSet<Key> {
        values.iter().map(|v| key(v, None)).collect()
    }

    #[test]
    fn offered_and_sought_values_follow_query_equality() {
        let path = FieldPath::parse("a.b");
        let doc = doc! {"a": [{"b": 1}, {"b": [2, 3]}, {"c": 0}]};
        let offered: HashSet<Key> = offered_keys(&doc, &path, true, None).into_iter().collect();
        assert!(offered.contains(&key(&Bson::Int64(1), None)));
        assert!(offered.contains(&key(&Bson::Double(2.0), None)));
        assert!(offered.contains(&key(&bson::bson!([2, 3]), None)));
        assert!(
            offered.contains(&key(&Bson::Null, None)),
            "{{c: 0}} lacks a.b"
        );
        assert!(!offered_keys(&doc, &path, false, None).contains(&key(&Bson::Null, None)));
        assert_eq!(
            sought_values(&doc, &path),
            vec![Bson::Int32(1), Bson::Int32(2), Bson::Int32(3)]
        );
    }

    #[test]
    fn matches_in_natural_order_once_in_memory_or_not() {
        let docs = vec![
            doc! {"_id": 1, "k": [1, 2]},
            doc! {"_id": 2, "k": 2},
            doc! {"_id": 3},
            doc! {"_id": 4, "k": "x"},
        ];
        let ids = |found: DocumentStream<'_>| -> Vec<i32> {
            found.map(|d| d.unwrap().get_i32("_id").unwrap()).collect()
        };
        for bytes_max in [JOIN_INDEX_BYTES_MAX, 0] {
            let docs = docs.clone();
            let source: Source<'_> =
                Box::new(move || Ok(Box::new(docs.clone().into_iter().map(Ok))));
            let join =
                Join::open_within(FieldPath::parse("k"), true, None, None, source, bytes_max)
                    .unwrap();
            assert_eq!(join.index.is_some(), bytes_max > 0);
            assert_eq!(
                ids(join
                    .matching(keys(&[Bson::Int32(2), Bson::Double(1.0)]))
                    .unwrap()),
                vec![1, 2]
            );
            assert_eq!(ids(join.matching(keys(&[Bson::Null])).unwrap()), vec![3]);
            assert!(ids(join.matching(HashSet::new()).unwrap()).is_empty());
        }
        let filter = Matcher::new(&doc! {"_id": {"$gt": 1}}).unwrap();
        let source: Source<'_> =
            Box::new(|| Ok(Box::new(std::iter::once(Ok(doc! {"_id": 1, "k": 2})))));
        let filtered =
            Join::open(FieldPath::parse("k"), true, Some(&filter), None, source).unwrap();
        assert!(ids(filtered.matching(keys(&[Bson::Int32(2)])).unwrap()).is_empty());
    }
}
