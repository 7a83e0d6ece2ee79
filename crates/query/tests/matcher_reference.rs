//! Property test: the matcher agrees with a deliberately naive reference implementation on
//! random small documents and filters built from `$eq`, `$gt`, `$lt`, `$in`, `$exists`,
//! `$and` and `$or` over a few fields holding values of mixed types; and its test of
//! stored bytes never rejects a matching document.

use basalt_query::Matcher;
use basalt_value::{canonical_type_rank, compare_values};
use bson::{doc, Bson, Document};
use proptest::prelude::*;
use std::cmp::Ordering;

const FIELDS: [&str; 3] = ["a", "b", "c"];

#[derive(Clone, Debug)]
enum Filter {
    Eq(&'static str, Bson),
    Gt(&'static str, Bson),
    Lt(&'static str, Bson),
    In(&'static str, Vec<Bson>),
    Exists(&'static str, bool),
    And(Vec<Filter>),
    Or(Vec<Filter>),
}

impl Filter {
    fn to_document(&self) -> Document {
        match self {
            Filter::Eq(f, v) => doc! { *f: {"$eq": v.clone()} },
            Filter::Gt(f, v) => doc! { *f: {"$gt": v.clone()} },
            Filter::Lt(f, v) => doc! { *f: {"$lt": v.clone()} },
            Filter::In(f, vs) => doc! { *f: {"$in": vs.clone()} },
            Filter::Exists(f, b) => doc! { *f: {"$exists": *b} },
            Filter::And(fs) => {
                doc! {"$and": fs.iter().map(|f| Bson::Document(f.to_document())).collect::<Vec<_>>()}
            }
            Filter::Or(fs) => {
                doc! {"$or": fs.iter().map(|f| Bson::Document(f.to_document())).collect::<Vec<_>>()}
            }
        }
    }

    /// The reference: a field's candidates are its value, plus the elements of an array;
    /// a comparison holds if some candidate of the operand's type bracket compares right;
    /// a missing field equals null.
    fn reference(&self, doc: &Document) -> bool {
        let candidates = |f: &str| -> Option<Vec<Bson>> {
            let v = doc.get(f)?;
            let mut all = vec![v.clone()];
            if let Bson::Array(items) = v {
                all.extend(items.iter().cloned());
            }
            Some(all)
        };
        let compare = |f: &str, operand: &Bson, wanted: Ordering| match candidates(f) {
            None => wanted == Ordering::Equal && *operand == Bson::Null,
            Some(values) => values.iter().any(|v| {
                canonical_type_rank(v) == canonical_type_rank(operand)
                    && compare_values(v, operand) == wanted
            }),
        };
        match self {
            Filter::Eq(f, v) => compare(f, v, Ordering::Equal),
            Filter::Gt(f, v) => compare(f, v, Ordering::Greater),
            Filter::Lt(f, v) => compare(f, v, Ordering::Less),
            Filter::In(f, vs) => vs.iter().any(|v| compare(f, v, Ordering::Equal)),
            Filter::Exists(f, b) => doc.contains_key(*f) == *b,
            Filter::And(fs) => fs.iter().all(|f| f.reference(doc)),
            Filter::Or(fs) => fs.iter().any(|f| f.reference(doc)),
        }
    }
}

fn scalar() -> impl Strategy<Value = Bson> {
    prop_oneof![
        Just(Bson::Null),
        (-2i32..3).prop_map(Bson::Int32),
        (-2i64..3).prop_map(Bson::Int64),
        (-4i32..5).prop_map(|h| Bson::Double(f64::from(h) / 2.0)),
        prop_oneof![Just("a"), Just("b"), Just("")].prop_map(|s| Bson::String(s.to_string())),
        any::<bool>().prop_map(Bson::Boolean),
    ]
}

fn value() -> impl Strategy<Value = Bson> {
    prop_oneof![
        3 => scalar(),
        1 => prop::collection::vec(scalar(), 0..4).prop_map(Bson::Array),
    ]
}

fn document() -> impl Strategy<Value = Document> {
    prop::collection::vec(prop::option::of(value()), FIELDS.len()).prop_map(|values| {
        FIELDS
            .iter()
            .zip(values)
            .filter_map(|(f, v)| Some((f.to_string(), v?)))
            .collect()
    })
}

fn field() -> impl Strategy<Value = &'static str> {
    prop::sample::select(FIELDS.to_vec())
}

fn filter() -> impl Strategy<Value = Filter> {
    let leaf = prop_oneof![
        (field(), value()).prop_map(|(f, v)| Filter::Eq(f, v)),
        (field(), scalar()).prop_map(|(f, v)| Filter::Gt(f, v)),
        (field(), scalar()).prop_map(|(f, v)| Filter::Lt(f, v)),
        (field(), prop::collection::vec(scalar(), 0..3)).prop_map(|(f, vs)| Filter::In(f, vs)),
        (field(), any::<bool>()).prop_map(|(f, b)| Filter::Exists(f, b)),
    ];
    leaf.prop_recursive(2, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 1..4).prop_map(Filter::And),
            prop::collection::vec(inner, 1..4).prop_map(Filter::Or),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn matcher_agrees_with_reference(f in filter(), d in document()) {
        let matcher = Matcher::new(&f.to_document()).unwrap();
        prop_assert_eq!(matcher.matches(&d), f.reference(&d), "filter {:?} doc {:?}", f.to_document(), d);
    }

    /// The test on stored bytes before decoding never rejects a document that matches.
    #[test]
    fn raw_rejection_implies_no_match(f in filter(), d in document()) {
        let matcher = Matcher::new(&f.to_document()).unwrap();
        let raw = bson::RawDocumentBuf::try_from(&d).unwrap();
        if matcher.rejects_raw(&raw) {
            prop_assert!(!f.reference(&d), "filter {:?} rejected doc {:?}", f.to_document(), d);
        }
    }
}
