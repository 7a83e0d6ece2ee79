//! Sort specifications (`{a: 1, b: -1}`) and MongoDB's order of documents under them.
//!
//! A document's key for one field is taken from every value the path reaches: an array is
//! represented by its smallest element when ascending and its largest when descending, an
//! empty array sorts below null, and a missing field sorts as null. Keys are extracted
//! once per document ([`SortSpec::sort_key`]) so that sorting compares cheap vectors.
//!
//! When several sort fields run through the same array (`{"a.x": 1, "a.y": 1}` over
//! `a: [{x: 1, y: 9}, {x: 2, y: 0}]`), MongoDB takes their values from one element: the
//! element whose values make the smallest key tuple under the sort, here `(1, 9)` rather
//! than the per-field extremes `(1, 0)`. Below that shared array each field's value is
//! again its own extreme. Fields through different arrays are keyed independently
//! (MongoDB refuses to sort such "parallel arrays"; Basalt sorts them).
//!
//! Under a collation, strings (also inside documents and arrays) sort by it, both when an
//! array's extreme is picked and when keys are compared.

use crate::display::element_to_string;
use crate::text::TEXT_SCORE_FIELD;
use basalt_error::{Error, Result};
use basalt_value::{as_f64, compare_values_with, Collation, FieldPath, Reached};
use bson::{Bson, Document};
use std::cmp::Ordering;
use std::ops::ControlFlow;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Ascending,
    Descending,
}

/// A sort direction's number: a double cut toward zero, other numbers as they are.
fn whole_direction(order: &Bson) -> Option<f64> {
    match order {
        Bson::Double(d) => Some(d.trunc()),
        other => as_f64(other),
    }
}

/// The `$meta` kinds a sort may name besides `textScore` (sorted by here): Atlas
/// Search's, `$geoNear`'s and `$sample`'s.
const SORTABLE_META: &[&str] = &[
    "randVal",
    "searchScore",
    "vectorSearchScore",
    "geoNearDistance",
    "score",
];

#[derive(Clone, Debug)]
pub struct SortSpec {
    fields: Vec<(FieldPath, Direction)>,
    /// The collation strings sort under; `None` is binary order.
    collation: Option<Collation>,
}

impl SortSpec {
    pub fn new(spec: &Document) -> Result<SortSpec> {
        let mut fields = Vec::with_capacity(spec.len());
        for (name, order) in spec {
            let direction =
                match order {
                    // The text score, highest first, as MongoDB sorts it.
                    Bson::Document(meta) if meta.get_str("$meta").ok() == Some("textScore") => {
                        basalt_value::path::split_field_path(name)?;
                        fields.push((FieldPath::parse(TEXT_SCORE_FIELD), Direction::Descending));
                        continue;
                    }
                    Bson::Document(meta) if meta.contains_key("$meta") && meta.len() > 1 => {
                        return Err(Error::failed_to_parse(
                            "Cannot have additional keys in a $meta sort specification",
                        ))
                    }
                    Bson::Document(meta) if meta.contains_key("$meta") => {
                        let kind = meta.get_str("$meta").unwrap_or_default();
                        // Kinds a sort may name whose metadata Basalt never has.
                        if SORTABLE_META.contains(&kind) {
                            return Err(Error::location(
                                17308,
                                format!("Unsupported argument to $meta: {meta}"),
                            ));
                        }
                        return Err(Error::location(
                            31138,
                            format!("Illegal $meta sort: {meta}"),
                        ));
                    }
                    Bson::Document(_) => {
                        return Err(Error::location(
                            17312,
                            "$meta is the only expression supported by $sort right now",
                        ))
                    }
                    // A double is taken whole (toward zero), as mongod 8 takes it.
                    _ => match whole_direction(order) {
                        Some(1.0) => Direction::Ascending,
                        Some(-1.0) => Direction::Descending,
                        Some(_) => return Err(Error::location(
                            15975,
                            "$sort key ordering must be 1 (for ascending) or -1 (for descending)",
                        )),
                        None => {
                            return Err(Error::location(
                                15974,
                                format!(
                                    "Illegal key in $sort specification: {}",
                                    element_to_string(name, order)
                                ),
                            ))
                        }
                    },
                };
            // The direction is checked first, then the path (mongod's order).
            basalt_value::path::split_field_path(name)?;
            fields.push((FieldPath::parse(name), direction));
        }
        Ok(SortSpec {
            fields,
            collation: None,
        })
    }

    /// The same order with strings sorted under `collation` (the command's `collation`
    /// option; `None` for binary order).
    pub fn with_collation(mut self, collation: Option<&Collation>) -> SortSpec {
        self.collation = collation.cloned();
        self
    }

    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// The sort fields in order, for planners that look for a matching index.
    pub fn fields(&self) -> &[(FieldPath, Direction)] {
        &self.fields
    }

    /// The values `doc` sorts by, one per sort field.
    pub fn sort_key(&self, doc: &Document) -> Vec<Bson> {
        let collation = self.collation.as_ref();
        let mut key: Vec<Bson> = self
            .fields
            .iter()
            .map(|(path, direction)| field_key(path, *direction, doc, collation))
            .collect();
        if self.fields.len() > 1 {
            self.key_shared_arrays(doc, &mut key);
        }
        key
    }

    /// Re-keys the fields that share an array from the single element that sorts first.
    fn key_shared_arrays(&self, doc: &Document, key: &mut [Bson]) {
        let arrays: Vec<Option<(usize, &Vec<Bson>)>> = self
            .fields
            .iter()
            .map(|(path, _)| first_array(path, doc))
            .collect();
        for (first, found) in arrays.iter().enumerate() {
            let Some((depth, items)) = found else {
                continue;
            };
            let shares = |other: &Option<(usize, &Vec<Bson>)>| {
                other.is_some_and(|(d, a)| d == *depth && std::ptr::eq(a, *items))
            };
            // Each group is handled once, from its first field.
            if arrays[..first].iter().any(shares) || items.is_empty() {
                continue;
            }
            let group: Vec<usize> = (first..arrays.len())
                .filter(|&i| shares(&arrays[i]))
                .collect();
            if group.len() < 2 {
                continue;
            }
            let tuples = items.iter().map(|element| {
                group
                    .iter()
                    .map(|&i| {
                        let (path, direction) = &self.fields[i];
                        element_key(path, *depth, *direction, element, self.collation.as_ref())
                    })
                    .collect::<Vec<Bson>>()
            });
            let best = tuples.min_by(|a, b| {
                for ((x, y), &i) in a.iter().zip(b).zip(&group) {
                    let ord = compare_values_with(x, y, self.collation.as_ref());
                    let ord = match self.fields[i].1 {
                        Direction::Ascending => ord,
                        Direction::Descending => ord.reverse(),
                    };
                    if ord != Ordering::Equal {
                        return ord;
                    }
                }
                Ordering::Equal
            });
            if let Some(best) = best {
                for (value, &i) in best.into_iter().zip(&group) {
                    key[i] = value;
                }
            }
        }
    }

    /// Compares two keys made by [`SortSpec::sort_key`].
    pub fn compare_keys(&self, a: &[Bson], b: &[Bson]) -> Ordering {
        for ((x, y), (_, direction)) in a.iter().zip(b).zip(&self.fields) {
            let ord = compare_values_with(x, y, self.collation.as_ref());
            let ord = match direction {
                Direction::Ascending => ord,
                Direction::Descending => ord.reverse(),
            };
            if ord != Ordering::Equal {
                return ord;
            }
        }
        Ordering::Equal
    }

    /// Sorts items by the documents they carry, computing each sort key once (a stable
    /// sort, so ties keep their order).
    pub fn sort_by_document<T>(&self, items: &mut Vec<T>, document: impl Fn(&T) -> &Document) {
        let mut keyed: Vec<(Vec<Bson>, T)> = items
            .drain(..)
            .map(|item| (self.sort_key(document(&item)), item))
            .collect();
        keyed.sort_by(|(a, _), (b, _)| self.compare_keys(a, b));
        items.extend(keyed.into_iter().map(|(_, item)| item));
    }

    /// Compares two documents; prefer [`SortSpec::sort_by_document`] when sorting many.
    pub fn compare(&self, a: &Document, b: &Document) -> Ordering {
        self.compare_keys(&self.sort_key(a), &self.sort_key(b))
    }
}

/// The value standing for `doc` at `path`: the extreme (by direction) of what it reaches.
/// A missing field stands as null and an empty array as undefined (just below null).
fn field_key(
    path: &FieldPath,
    direction: Direction,
    doc: &Document,
    collation: Option<&Collation>,
) -> Bson {
    static NULL: Bson = Bson::Null;
    static UNDEFINED: Bson = Bson::Undefined;
    let mut best: Option<&Bson> = None;
    let _ = path.visit(doc, &mut |reached| {
        let candidates = match reached {
            Reached::Missing { .. } => std::slice::from_ref(&NULL),
            Reached::Value {
                value: Bson::Array(items),
                ..
            } if items.is_empty() => std::slice::from_ref(&UNDEFINED),
            Reached::Value {
                value: Bson::Array(items),
                ..
            } => items.as_slice(),
            Reached::Value { value, .. } => std::slice::from_ref(value),
        };
        for candidate in candidates {
            let better = best.is_none_or(|current| {
                let ord = compare_values_with(candidate, current, collation);
                match direction {
                    Direction::Ascending => ord == Ordering::Less,
                    Direction::Descending => ord == Ordering::Greater,
                }
            });
            if better {
                best = Some(candidate);
            }
        }
        ControlFlow::<()>::Continue(())
    });
    best.cloned().unwrap_or(Bson::Null)
}

/// The first array `path` runs through in `doc` (numeric components index arrays instead
/// of traversing them), with the number of path components that lead to it.
fn first_array<'a>(path: &FieldPath, doc: &'a Document) -> Option<(usize, &'a Vec<Bson>)> {
    let mut components = path.components();
    let mut current = doc.get(components.next()?)?;
    let mut depth = 1;
    loop {
        let next = components.next();
        match (current, next) {
            (Bson::Array(items), Some(name)) => match basalt_value::path::array_index(name) {
                Some(index) => current = items.get(index)?,
                None => return Some((depth, items)),
            },
            (Bson::Array(items), None) => return Some((depth, items)),
            (Bson::Document(d), Some(name)) => current = d.get(name)?,
            _ => return None,
        }
        depth += 1;
    }
}

/// The value standing for one element of a shared array at the rest of `path` (after
/// its first `depth` components).
fn element_key(
    path: &FieldPath,
    depth: usize,
    direction: Direction,
    element: &Bson,
    collation: Option<&Collation>,
) -> Bson {
    let rest: Vec<&str> = path.components().skip(depth).collect();
    match element {
        _ if rest.is_empty() => element.clone(),
        Bson::Document(d) => field_key(&FieldPath::parse(&rest.join(".")), direction, d, collation),
        _ => Bson::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn sorted(spec: Document, docs: Vec<Document>) -> Vec<i32> {
        let spec = SortSpec::new(&spec).unwrap();
        let mut keyed: Vec<_> = docs.iter().map(|d| (spec.sort_key(d), d)).collect();
        keyed.sort_by(|a, b| spec.compare_keys(&a.0, &b.0));
        keyed
            .iter()
            .map(|(_, d)| d.get_i32("_id").unwrap())
            .collect()
    }

    #[test]
    fn arrays_use_their_extremes() {
        let docs = vec![
            doc! {"_id": 1, "a": [1, 10]},
            doc! {"_id": 2, "a": 5},
            doc! {"_id": 3, "a": [3, 7]},
        ];
        assert_eq!(sorted(doc! {"a": 1}, docs.clone()), vec![1, 3, 2]);
        assert_eq!(sorted(doc! {"a": -1}, docs), vec![1, 3, 2]);
    }

    #[test]
    fn missing_null_and_empty_arrays() {
        let docs = vec![
            doc! {"_id": 1, "a": 1},
            doc! {"_id": 2},
            doc! {"_id": 3, "a": []},
            doc! {"_id": 4, "a": "x"},
        ];
        assert_eq!(sorted(doc! {"a": 1}, docs.clone()), vec![3, 2, 1, 4]);
        assert_eq!(sorted(doc! {"a": -1}, docs), vec![4, 1, 2, 3]);
    }

    #[test]
    fn compound_and_nested() {
        let docs = vec![
            doc! {"_id": 1, "a": {"b": 2}, "c": 1},
            doc! {"_id": 2, "a": [{"b": 1}, {"b": 3}], "c": 1},
            doc! {"_id": 3, "a": {"b": 2}, "c": 0},
        ];
        assert_eq!(sorted(doc! {"c": 1, "a.b": 1}, docs.clone()), vec![3, 2, 1]);
        assert_eq!(sorted(doc! {"c": 1, "a.b": -1}, docs), vec![3, 2, 1]);
        let spec = SortSpec::new(&doc! {"a.b": 1}).unwrap();
        assert_eq!(
            spec.sort_key(&doc! {"a": [{"b": 3}, {"c": 1}]}),
            vec![Bson::Null]
        );
    }

    #[test]
    fn fields_through_one_array_take_one_element() {
        let docs = vec![
            doc! {"_id": 1, "a": [{"x": 1, "y": 9}, {"x": 2, "y": 0}]},
            doc! {"_id": 2, "a": [{"x": 1, "y": 5}]},
            doc! {"_id": 3, "a": {"x": 1, "y": 7}},
        ];
        // Per-field extremes would key _id 1 as (1, 0) and put it first.
        assert_eq!(
            sorted(doc! {"a.x": 1, "a.y": 1}, docs.clone()),
            vec![2, 3, 1]
        );
        assert_eq!(
            sorted(doc! {"a.x": -1, "a.y": 1}, docs.clone()),
            vec![1, 2, 3]
        );
        let spec = SortSpec::new(&doc! {"a.x": 1, "_id": 1, "a.y": -1}).unwrap();
        assert_eq!(
            spec.sort_key(&docs[0]),
            vec![Bson::Int32(1), Bson::Int32(1), Bson::Int32(9)]
        );
        // Different arrays stay independent; a numeric component indexes, not traverses.
        let spec = SortSpec::new(&doc! {"a.x": 1, "b": -1}).unwrap();
        let doc = doc! {"a": [{"x": 3}, {"x": 2}], "b": [1, 4]};
        assert_eq!(spec.sort_key(&doc), vec![Bson::Int32(2), Bson::Int32(4)]);
        let spec = SortSpec::new(&doc! {"a.0.x": 1, "a.y": 1}).unwrap();
        let doc = doc! {"a": [{"x": 5, "y": 2}, {"x": 1, "y": 1}]};
        assert_eq!(spec.sort_key(&doc)[1], Bson::Int32(1));
    }

    #[test]
    fn strings_sort_under_a_collation() {
        let docs = vec![
            doc! {"_id": 1, "a": "b"},
            doc! {"_id": 2, "a": "B"},
            doc! {"_id": 3, "a": "a"},
            doc! {"_id": 4, "a": ["C", "á"]},
            doc! {"_id": 5, "a": 10},
        ];
        assert_eq!(sorted(doc! {"a": 1}, docs.clone()), vec![5, 2, 4, 3, 1]);
        let collation = Collation::parse(&doc! {"locale": "en", "strength": 1})
            .unwrap()
            .unwrap();
        let spec = SortSpec::new(&doc! {"a": 1, "_id": -1})
            .unwrap()
            .with_collation(Some(&collation));
        let mut collated = docs.clone();
        spec.sort_by_document(&mut collated, |d| d);
        // "á" is the smallest of _id 4's strings and ties with "a"; "b" ties with "B".
        let ids: Vec<i32> = collated.iter().map(|d| d.get_i32("_id").unwrap()).collect();
        assert_eq!(ids, vec![5, 4, 3, 2, 1]);
        let descending = SortSpec::new(&doc! {"a": -1})
            .unwrap()
            .with_collation(Some(&collation));
        assert_eq!(
            descending.sort_key(&docs[3]),
            vec![Bson::String("C".into())]
        );
    }

    #[test]
    fn errors() {
        let err = |spec: Document| SortSpec::new(&spec).unwrap_err();
        let bad_order = err(doc! {"a": 2});
        assert_eq!(
            bad_order.message,
            "$sort key ordering must be 1 (for ascending) or -1 (for descending)"
        );
        assert_eq!(bad_order.code.0, 15975);
        assert_eq!(
            err(doc! {"a": "x"}).message,
            "Illegal key in $sort specification: a: \"x\""
        );
        assert_eq!(err(doc! {"a": {"$meta": "searchScore"}}).code.0, 17308);
        // The text score sorts highest first.
        let by_score = SortSpec::new(&doc! {"s": {"$meta": "textScore"}}).unwrap();
        let scored = |score: f64| doc! {TEXT_SCORE_FIELD: score};
        assert_eq!(
            by_score.compare(&scored(2.0), &scored(1.0)),
            std::cmp::Ordering::Less
        );
        assert!(SortSpec::new(&doc! {"a": 1.0, "b": -1i64}).is_ok());
    }
}
