//! `$elemMatch`: an array with one element satisfying all the given conditions.
//!
//! Two forms exist. `{a: {$elemMatch: {$gt: 1, $lt: 5}}}` applies operators to each
//! element itself; `{a: {$elemMatch: {b: 1, c: 2}}}` applies a whole filter to each
//! element that is a document. The operand's first field decides, as in MongoDB: an
//! operator that is not a top-level one (`$and`, `$or`, ...) selects the value form.

use super::{is_operator_document, parse_operators, Predicate, ValueMatch};
use crate::matcher::{parse_filter, FilterLevel, MatchEnv, MatchExpr};
use basalt_error::{Error, Result};
use bson::{Bson, Document};

#[derive(Clone, Debug)]
pub(crate) enum ElemMatch {
    Value(Box<ValueMatch>),
    Object(Box<MatchExpr>),
}

impl ElemMatch {
    /// The index of the first element satisfying the conditions, if `v` is an array.
    pub(crate) fn matching_element(&self, v: &Bson, env: &MatchEnv<'_>) -> Option<usize> {
        let Bson::Array(items) = v else {
            return None;
        };
        items.iter().position(|item| match self {
            ElemMatch::Value(conditions) => conditions.matches_single(item, env),
            ElemMatch::Object(filter) => match item {
                Bson::Document(d) => filter.matches(d, env, &mut None),
                // MongoDB sees a nested array as a document keyed "0", "1", ...
                Bson::Array(nested) => {
                    let as_document: Document = nested
                        .iter()
                        .enumerate()
                        .map(|(i, v)| (i.to_string(), v.clone()))
                        .collect();
                    filter.matches(&as_document, env, &mut None)
                }
                _ => false,
            },
        })
    }
}

/// Operators that apply to a whole document rather than a path.
fn is_top_level_operator(name: &str) -> bool {
    matches!(
        name,
        "$and"
            | "$or"
            | "$nor"
            | "$where"
            | "$expr"
            | "$comment"
            | "$text"
            | "$jsonSchema"
            | "$alwaysTrue"
            | "$alwaysFalse"
            | "$sampleRate"
    )
}

pub(super) fn parse_elem_match(operand: &Bson) -> Result<ValueMatch> {
    let Bson::Document(inner) = operand else {
        return Err(Error::bad_value("$elemMatch needs an Object"));
    };
    let value_form = is_operator_document(operand, true)
        && inner
            .keys()
            .next()
            .is_some_and(|first| !is_top_level_operator(first));
    let elem_match = if value_form {
        ElemMatch::Value(Box::new(parse_operators("", inner)?))
    } else {
        if inner.contains_key("$where") {
            return Err(Error::bad_value(
                "$elemMatch cannot contain $where expression",
            ));
        }
        ElemMatch::Object(Box::new(parse_filter(inner, FilterLevel::Element)?))
    };
    Ok(ValueMatch::Leaf(Predicate::ElemMatch(elem_match)))
}

#[cfg(test)]
mod tests {
    use crate::Matcher;
    use bson::doc;

    fn matches(filter: bson::Document, doc: bson::Document) -> bool {
        Matcher::new(&filter).unwrap().matches(&doc)
    }

    #[test]
    fn value_form() {
        let f = doc! {"a": {"$elemMatch": {"$gte": 2, "$lt": 4}}};
        assert!(matches(f.clone(), doc! {"a": [1, 3, 5]}));
        assert!(!matches(f.clone(), doc! {"a": [1, 5]}));
        assert!(!matches(f, doc! {"a": 3}));
        assert!(matches(
            doc! {"a": {"$elemMatch": {"$not": {"$gt": 3}}}},
            doc! {"a": [5, 2]}
        ));
        assert!(matches(
            doc! {"a": {"$elemMatch": {"$elemMatch": {"$eq": 1}}}},
            doc! {"a": [[0], [1]]}
        ));
        // Elements are tested themselves: a nested array is not traversed.
        assert!(!matches(
            doc! {"a": {"$elemMatch": {"$eq": 1}}},
            doc! {"a": [[1]]}
        ));
    }

    #[test]
    fn object_form() {
        let f = doc! {"a": {"$elemMatch": {"b": 1, "c": {"$gt": 1}}}};
        assert!(matches(
            f.clone(),
            doc! {"a": [{"b": 1, "c": 0}, {"b": 1, "c": 2}]}
        ));
        assert!(!matches(
            f,
            doc! {"a": [{"b": 1, "c": 0}, {"b": 0, "c": 2}]}
        ));
        assert!(matches(
            doc! {"a": {"$elemMatch": {"$or": [{"b": 1}, {"c": 1}]}}},
            doc! {"a": [{"c": 1}]}
        ));
        assert!(matches(
            doc! {"a.b": {"$elemMatch": {"c": 1}}},
            doc! {"a": [{"b": [{"c": 1}]}]}
        ));
        assert!(matches(
            doc! {"a": {"$elemMatch": {"0": 1}}},
            doc! {"a": [[1, 2]]}
        ));
    }

    #[test]
    fn errors() {
        assert_eq!(
            Matcher::new(&doc! {"a": {"$elemMatch": 1}})
                .unwrap_err()
                .message,
            "$elemMatch needs an Object"
        );
    }
}
