//! A quick test of a stored (raw BSON) document against the simple comparisons of a
//! filter, before the document is decoded: most documents of a selective scan fail one
//! of them and are never decoded at all.
//!
//! Only top-level conjuncts (also inside a top-level `$and`) of the form `{path: scalar}`
//! or `{path: {$eq|$lt|$lte|$gt|$gte|$in: scalars}}` take part. The test answers "certainly no match" or "maybe":
//! wherever the raw value could make MongoDB's rules subtle (an array on the path,
//! NaN, a null operand, strings under a collation) it answers "maybe", and the full
//! matcher decides on the decoded document. A "maybe" is never wrong, so the filter it
//! is built from is still applied whole.

use basalt_value::raw::Field;
use basalt_value::{canonical_type_rank, compare_values};
use bson::spec::ElementType;
use bson::{Bson, Document, RawBsonRef, RawDocument};
use std::cmp::Ordering;

#[derive(Clone, Debug)]
enum Test {
    /// Equal to one of these.
    In(Vec<Bson>),
    /// Ordered as `wanted` (or equal, with `or_equal`) relative to `operand`.
    Compare {
        wanted: Ordering,
        or_equal: bool,
        operand: Bson,
    },
}

impl Test {
    fn operands(&self) -> &[Bson] {
        match self {
            Test::In(candidates) => candidates,
            Test::Compare { operand, .. } => std::slice::from_ref(operand),
        }
    }

    /// Whether `value` (present on the path) fails the test.
    fn fails(&self, value: &Bson) -> bool {
        match self {
            Test::In(candidates) => !candidates
                .iter()
                .any(|c| same_bracket_order(value, c) == Some(Ordering::Equal)),
            Test::Compare {
                wanted,
                or_equal,
                operand,
            } => match same_bracket_order(value, operand) {
                Some(Ordering::Equal) => !or_equal,
                Some(order) => order != *wanted,
                None => true,
            },
        }
    }
}

#[derive(Clone, Debug)]
struct Condition {
    path: Vec<String>,
    test: Test,
}

/// The simple comparisons of a filter, testable on raw documents.
#[derive(Clone, Debug, Default)]
pub struct RawFilter {
    conditions: Vec<Condition>,
}

/// A constant the raw test can compare against without MongoDB's special cases.
fn plain_scalar(value: &Bson) -> bool {
    match value {
        Bson::Double(d) => !d.is_nan(),
        Bson::String(_)
        | Bson::Int32(_)
        | Bson::Int64(_)
        | Bson::Boolean(_)
        | Bson::DateTime(_)
        | Bson::ObjectId(_) => true,
        _ => false,
    }
}

impl RawFilter {
    /// The simple comparisons of `filter`.
    pub fn new(filter: &Document) -> RawFilter {
        let mut raw = RawFilter::default();
        raw.add(filter);
        raw
    }

    fn add(&mut self, filter: &Document) {
        for (key, value) in filter {
            if key == "$and" {
                if let Bson::Array(branches) = value {
                    for branch in branches {
                        if let Bson::Document(branch) = branch {
                            self.add(branch);
                        }
                    }
                }
                continue;
            }
            if key.starts_with('$') || key.split('.').any(|part| part.is_empty()) {
                continue;
            }
            let path: Vec<String> = key.split('.').map(str::to_string).collect();
            let mut push = |test| {
                self.conditions.push(Condition {
                    path: path.clone(),
                    test,
                })
            };
            let operators = match value {
                Bson::Document(ops) if ops.keys().next().is_some_and(|k| k.starts_with('$')) => ops,
                v if plain_scalar(v) => {
                    push(Test::In(vec![v.clone()]));
                    continue;
                }
                _ => continue,
            };
            for (op, operand) in operators {
                let compare = |wanted, or_equal| Test::Compare {
                    wanted,
                    or_equal,
                    operand: operand.clone(),
                };
                let test = match (op.as_str(), operand) {
                    ("$in", Bson::Array(items)) if items.iter().all(plain_scalar) => {
                        Test::In(items.clone())
                    }
                    (_, v) if !plain_scalar(v) => continue,
                    ("$eq", v) => Test::In(vec![v.clone()]),
                    ("$lt", _) => compare(Ordering::Less, false),
                    ("$lte", _) => compare(Ordering::Less, true),
                    ("$gt", _) => compare(Ordering::Greater, false),
                    ("$gte", _) => compare(Ordering::Greater, true),
                    _ => continue,
                };
                push(test);
            }
        }
    }

    /// Leaves out the comparisons with strings, which compare under a collation.
    pub fn without_strings(mut self) -> RawFilter {
        self.conditions.retain(|c| {
            !c.test
                .operands()
                .iter()
                .any(|v| matches!(v, Bson::String(_)))
        });
        self
    }

    /// True when `doc` certainly fails the filter.
    pub fn rejects(&self, doc: &RawDocument) -> bool {
        self.conditions
            .iter()
            .any(|condition| match value_at(doc, &condition.path) {
                // No operand is null, so a missing value fails every test.
                Reach::Missing => true,
                Reach::Value(value) => condition.test.fails(&value),
                Reach::Unknown => false,
            })
    }
}

/// How `a` compares with `b` when both are of one type bracket (numbers, strings, ...),
/// `None` when they are not, which no comparison operator matches.
fn same_bracket_order(a: &Bson, b: &Bson) -> Option<Ordering> {
    (canonical_type_rank(a) == canonical_type_rank(b)).then(|| compare_values(a, b))
}

enum Reach {
    Value(Bson),
    Missing,
    /// Something the raw test leaves to the matcher (an array, a NaN, a null, ...).
    Unknown,
}

fn value_at(doc: &RawDocument, path: &[String]) -> Reach {
    let mut current = doc;
    for (i, part) in path.iter().enumerate() {
        let value = match basalt_value::raw::get(current, part) {
            Field::Value(value) => value,
            Field::Missing => return Reach::Missing,
            // The full decode reports it.
            Field::Damaged => return Reach::Unknown,
        };
        if i + 1 == path.len() {
            return scalar(value);
        }
        match value {
            RawBsonRef::Document(inner) => current = inner,
            // The path stops at a scalar: the rest of it is missing.
            v if !matches!(v.element_type(), ElementType::Array) => return Reach::Missing,
            _ => return Reach::Unknown,
        }
    }
    Reach::Unknown
}

fn scalar(value: RawBsonRef<'_>) -> Reach {
    let owned = match value {
        RawBsonRef::Double(d) if !d.is_nan() => Bson::Double(d),
        RawBsonRef::String(s) => Bson::String(s.to_string()),
        RawBsonRef::Int32(i) => Bson::Int32(i),
        RawBsonRef::Int64(i) => Bson::Int64(i),
        RawBsonRef::Boolean(b) => Bson::Boolean(b),
        RawBsonRef::DateTime(d) => Bson::DateTime(d),
        RawBsonRef::ObjectId(o) => Bson::ObjectId(o),
        _ => return Reach::Unknown,
    };
    Reach::Value(owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Matcher;
    use bson::{doc, rawdoc};

    #[test]
    fn rejects_only_what_the_matcher_rejects() {
        let docs = [
            rawdoc! {"a": 1, "b": "x", "n": {"c": 4.5}},
            rawdoc! {"a": 7_i64, "b": "y", "n": {"c": 10}},
            rawdoc! {"a": [1, 9], "b": ["x"], "n": [{"c": 4}]},
            rawdoc! {"a": "1", "b": 3, "n": 5},
            rawdoc! {"a": f64::NAN, "b": null},
            rawdoc! {"z": 1},
            rawdoc! {"a": 2.0, "b": "x", "n": {"c": bson::Decimal128::from_bytes([0; 16])}},
        ];
        let filters = [
            doc! {"a": {"$lt": 5}},
            doc! {"a": {"$gte": 2, "$lte": 7}},
            doc! {"a": 1, "b": "x"},
            doc! {"b": {"$in": ["x", "z"]}},
            doc! {"n.c": {"$gt": 4}},
            doc! {"$and": [{"a": {"$eq": 7}}, {"n.c": 10}]},
            doc! {"a": {"$ne": 1}, "b": {"$exists": true}},
            doc! {"a": {"$lt": f64::NAN}},
        ];
        for filter in &filters {
            let raw = RawFilter::new(filter);
            let matcher = Matcher::new(filter).unwrap();
            for doc in &docs {
                let decoded = Document::try_from(doc.as_ref()).unwrap();
                if raw.rejects(doc) {
                    assert!(!matcher.matches(&decoded), "{filter} rejected {decoded}");
                }
            }
        }
        let selective = RawFilter::new(&doc! {"a": {"$lt": 5}, "n.c": {"$gt": 4}});
        assert!(!selective.rejects(&docs[0]));
        assert!(selective.rejects(&docs[1]));
        assert!(selective.rejects(&docs[3]));
        assert!(selective.rejects(&docs[5]));
        assert!(
            !selective.rejects(&docs[2]),
            "arrays are left to the matcher"
        );
    }

    #[test]
    fn collation_leaves_strings_to_the_matcher() {
        let raw = RawFilter::new(&doc! {"b": "X", "a": 1}).without_strings();
        assert!(!raw.rejects(&rawdoc! {"b": "x", "a": 1}));
        assert!(raw.rejects(&rawdoc! {"b": "x", "a": 2}));
        assert!(!RawFilter::new(&doc! {"b": "X"})
            .without_strings()
            .rejects(&rawdoc! {"b": "y"}));
    }
}
