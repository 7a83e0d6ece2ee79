//! `$eq`, `$ne`, `$gt`, `$gte`, `$lt`, `$lte`, `$in` and `$nin`.
//!
//! Comparisons only hold between values of the same canonical type ("type bracketing"):
//! `{$gt: 5}` never matches a string. The exceptions are MinKey and MaxKey operands, which
//! bound every type, and NaN, which equals only NaN and is neither above nor below
//! anything.
//!
//! Under a collation, strings (also inside documents and arrays) compare by it; regexes in
//! `$in` still match bytes, as in MongoDB.

use super::{Predicate, RegexPredicate, ValueMatch};
use crate::operators::is_operator_document;
use basalt_error::{Error, Result};
use basalt_value::{as_f64, canonical_type_rank, compare_values, compare_values_with, Collation};
use bson::Bson;
use std::cmp::Ordering;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CompareOp {
    Eq,
    Gt,
    Gte,
    Lt,
    Lte,
}

#[derive(Clone, Debug)]
pub(crate) struct Comparison {
    op: CompareOp,
    operand: Bson,
}

impl Comparison {
    pub(crate) fn equal(operand: Bson) -> Comparison {
        Comparison {
            op: CompareOp::Eq,
            operand,
        }
    }

    pub(crate) fn matches(&self, v: &Bson, collation: Option<&Collation>) -> bool {
        compare_bracketed(self.op, v, &self.operand, collation)
    }
}

/// `v op operand` under MongoDB's query rules (type bracketing, NaN, MinKey/MaxKey), with
/// strings compared under `collation`.
fn compare_bracketed(
    op: CompareOp,
    v: &Bson,
    operand: &Bson,
    collation: Option<&Collation>,
) -> bool {
    if canonical_type_rank(v) != canonical_type_rank(operand) {
        return match operand {
            Bson::MaxKey => matches!(op, CompareOp::Lt | CompareOp::Lte),
            Bson::MinKey => matches!(op, CompareOp::Gt | CompareOp::Gte),
            _ => false,
        };
    }
    let is_nan = |x: &Bson| as_f64(x).is_some_and(f64::is_nan);
    let (nan_left, nan_right) = (is_nan(v), is_nan(operand));
    if nan_left || nan_right {
        return nan_left
            && nan_right
            && matches!(op, CompareOp::Eq | CompareOp::Gte | CompareOp::Lte);
    }
    let ord = compare_values_with(v, operand, collation);
    match op {
        CompareOp::Eq => ord == Ordering::Equal,
        CompareOp::Gt => ord == Ordering::Greater,
        CompareOp::Gte => ord != Ordering::Less,
        CompareOp::Lt => ord == Ordering::Less,
        CompareOp::Lte => ord != Ordering::Greater,
    }
}

/// The values of `$in`: equalities kept sorted for binary search, and regexes.
#[derive(Clone, Debug)]
pub(crate) struct InList {
    equalities: Vec<Bson>,
    regexes: Vec<RegexPredicate>,
}

impl InList {
    pub(crate) fn parse(values: &[Bson]) -> Result<InList> {
        let mut equalities = Vec::with_capacity(values.len());
        let mut regexes = Vec::new();
        for v in values {
            if is_operator_document(v, false) {
                return Err(Error::bad_value("cannot nest $ under $in"));
            }
            match v {
                Bson::RegularExpression(re) => regexes.push(RegexPredicate::new(
                    re.pattern.as_str(),
                    re.options.as_str(),
                )?),
                _ => equalities.push(v.clone()),
            }
        }
        equalities.sort_by(compare_values);
        equalities.dedup_by(|a, b| compare_values(a, b) == Ordering::Equal);
        Ok(InList {
            equalities,
            regexes,
        })
    }

    pub(crate) fn matches(&self, v: &Bson, collation: Option<&Collation>) -> bool {
        // Equal in sort order and of the same bracket is exactly `$eq`'s equality (NaN
        // aside, which sorts equal to NaN and is equal to it too).
        let equal = match (collation, v) {
            // The list is sorted in binary order, which a collation reorders only where
            // strings are compared: those values are looked for one by one.
            (Some(_), Bson::String(_) | Bson::Symbol(_) | Bson::Document(_) | Bson::Array(_)) => {
                self.equalities
                    .iter()
                    .any(|candidate| compare_values_with(candidate, v, collation).is_eq())
            }
            _ => self
                .equalities
                .binary_search_by(|candidate| compare_values(candidate, v))
                .is_ok(),
        };
        equal || self.regexes.iter().any(|re| re.matches(v))
    }
}

pub(super) fn parse_comparison(path: &str, name: &str, operand: &Bson) -> Result<ValueMatch> {
    let op = match name {
        "$eq" | "$ne" => CompareOp::Eq,
        "$gt" => CompareOp::Gt,
        "$gte" => CompareOp::Gte,
        "$lt" => CompareOp::Lt,
        _ => CompareOp::Lte,
    };
    if let Bson::RegularExpression(_) = operand {
        if name == "$ne" {
            return Err(Error::bad_value("Can't have regex as arg to $ne."));
        }
        if op != CompareOp::Eq {
            return Err(Error::bad_value(format!(
                "Can't have RegEx as arg to predicate over field '{path}'."
            )));
        }
    }
    let leaf = ValueMatch::Leaf(Predicate::Compare(Comparison {
        op,
        operand: operand.clone(),
    }));
    Ok(if name == "$ne" {
        ValueMatch::Not(Box::new(leaf))
    } else {
        leaf
    })
}

pub(super) fn parse_in(name: &str, operand: &Bson) -> Result<ValueMatch> {
    let Bson::Array(values) = operand else {
        return Err(Error::bad_value(format!("{name} needs an array")));
    };
    let leaf = ValueMatch::Leaf(Predicate::In(InList::parse(values)?));
    Ok(if name == "$nin" {
        ValueMatch::Not(Box::new(leaf))
    } else {
        leaf
    })
}

#[cfg(test)]
mod tests {
    use crate::Matcher;
    use bson::{doc, Bson};

    fn matches(filter: bson::Document, doc: bson::Document) -> bool {
        Matcher::new(&filter).unwrap().matches(&doc)
    }

    fn error(filter: bson::Document) -> String {
        Matcher::new(&filter).unwrap_err().message
    }

    #[test]
    fn equality_and_arrays() {
        assert!(matches(doc! {"a": 1}, doc! {"a": 1.0}));
        assert!(matches(doc! {"a": 1}, doc! {"a": [3, 1]}));
        assert!(matches(doc! {"a": [1, 2]}, doc! {"a": [1, 2]}));
        assert!(matches(doc! {"a": [1, 2]}, doc! {"a": [[1, 2], 3]}));
        assert!(!matches(doc! {"a": [1, 2]}, doc! {"a": [2, 1]}));
        assert!(matches(doc! {"a.b": 1}, doc! {"a": [{"b": 2}, {"b": 1}]}));
        assert!(matches(doc! {"a": {"b": 1}}, doc! {"a": {"b": 1}}));
        assert!(!matches(doc! {"a": {"b": 1}}, doc! {"a": {"b": 1, "c": 2}}));
    }

    #[test]
    fn null_matches_missing_but_not_undefined() {
        assert!(matches(doc! {"a": null}, doc! {}));
        assert!(matches(doc! {"a": null}, doc! {"a": null}));
        assert!(!matches(doc! {"a": null}, doc! {"a": Bson::Undefined}));
        assert!(matches(doc! {"a.b": null}, doc! {"a": 4}));
        assert!(matches(doc! {"a.b": null}, doc! {"a": [{"b": 3}, {}]}));
        assert!(!matches(doc! {"a.b": null}, doc! {"a": [1, 2]}));
        assert!(!matches(doc! {"a.b": null}, doc! {"a": []}));
        assert!(matches(doc! {"a": {"$ne": null}}, doc! {"a": 0}));
        assert!(!matches(doc! {"a": {"$ne": null}}, doc! {}));
        assert!(matches(doc! {"a": {"$gte": null}}, doc! {}));
        assert!(!matches(doc! {"a": {"$gt": null}}, doc! {}));
    }

    #[test]
    fn type_bracketing() {
        assert!(!matches(doc! {"a": {"$gt": 5}}, doc! {"a": "x"}));
        assert!(matches(doc! {"a": {"$gt": 5}}, doc! {"a": 5.5}));
        assert!(matches(doc! {"a": {"$lt": "b"}}, doc! {"a": "a"}));
        assert!(matches(doc! {"a": {"$gt": 5}}, doc! {"a": [1, 7]}));
        assert!(matches(doc! {"a": {"$gt": Bson::MinKey}}, doc! {"a": "x"}));
        assert!(matches(
            doc! {"a": {"$lte": Bson::MaxKey}},
            doc! {"a": {"x": 1}}
        ));
        assert!(!matches(doc! {"a": {"$gt": Bson::MaxKey}}, doc! {"a": 1}));
        assert!(matches(
            doc! {"a": {"$gt": 1, "$lt": 3}},
            doc! {"a": [0, 5]}
        ));
        assert!(!matches(
            doc! {"a": {"$elemMatch": {"$gt": 1, "$lt": 3}}},
            doc! {"a": [0, 5]}
        ));
    }

    #[test]
    fn nan() {
        assert!(matches(doc! {"a": f64::NAN}, doc! {"a": f64::NAN}));
        assert!(!matches(doc! {"a": {"$lt": 0}}, doc! {"a": f64::NAN}));
        assert!(!matches(doc! {"a": {"$gt": f64::NAN}}, doc! {"a": 1}));
        assert!(matches(
            doc! {"a": {"$gte": f64::NAN}},
            doc! {"a": f64::NAN}
        ));
    }

    #[test]
    fn in_and_nin() {
        assert!(matches(doc! {"a": {"$in": [1, "x"]}}, doc! {"a": "x"}));
        assert!(matches(doc! {"a": {"$in": [null]}}, doc! {}));
        assert!(matches(
            doc! {"a": {"$in": [bson::Regex { pattern: "^x".to_string().try_into().unwrap(), options: "".to_string().try_into().unwrap() }]}},
            doc! {"a": ["y", "xy"]}
        ));
        assert!(!matches(doc! {"a": {"$in": []}}, doc! {"a": 1}));
        assert!(matches(doc! {"a": {"$nin": [1, 2]}}, doc! {"a": 3}));
        assert!(!matches(doc! {"a": {"$nin": [1, 2]}}, doc! {"a": [3, 2]}));
        assert!(matches(doc! {"a": {"$nin": [1]}}, doc! {}));
    }

    #[test]
    fn errors() {
        assert_eq!(error(doc! {"a": {"$in": 1}}), "$in needs an array");
        assert_eq!(error(doc! {"a": {"$nin": {}}}), "$nin needs an array");
        assert_eq!(
            error(doc! {"a": {"$in": [{"$gt": 1}]}}),
            "cannot nest $ under $in"
        );
        assert_eq!(error(doc! {"a": {"$foo": 1}}), "unknown operator: $foo");
        let re = bson::Regex {
            pattern: "x".to_string().try_into().unwrap(),
            options: "".to_string().try_into().unwrap(),
        };
        assert_eq!(
            error(doc! {"a": {"$ne": re.clone()}}),
            "Can't have regex as arg to $ne."
        );
        assert_eq!(
            error(doc! {"a": {"$gt": re}}),
            "Can't have RegEx as arg to predicate over field 'a'."
        );
        assert_eq!(
            Matcher::new(&doc! {"a": {"$in": 1}}).unwrap_err().code,
            basalt_error::ErrorCode::BAD_VALUE
        );
    }

    #[test]
    fn strings_compare_under_a_collation() {
        let collation = basalt_value::Collation::parse(&doc! {"locale": "en_US", "strength": 2})
            .unwrap()
            .unwrap();
        let collated = |filter: bson::Document, doc: bson::Document| {
            Matcher::new(&filter)
                .unwrap()
                .with_collation(Some(&collation))
                .matches(&doc)
        };
        assert!(collated(doc! {"a": "PING"}, doc! {"a": "ping"}));
        assert!(!matches(doc! {"a": "PING"}, doc! {"a": "ping"}));
        assert!(!collated(doc! {"a": "PING"}, doc! {"a": "péng"}));
        assert!(collated(
            doc! {"a": {"$in": ["x", "PING"]}},
            doc! {"a": ["ping"]}
        ));
        assert!(!collated(
            doc! {"a": {"$nin": ["PING"]}},
            doc! {"a": "ping"}
        ));
        assert!(!collated(doc! {"a": {"$ne": "PING"}}, doc! {"a": "ping"}));
        assert!(collated(doc! {"a": {"$in": [1, "x"]}}, doc! {"a": 1.0}));
        // "B" sorts after "a" under the collation, before it in binary order.
        assert!(collated(doc! {"a": {"$gt": "a"}}, doc! {"a": "B"}));
        assert!(!matches(doc! {"a": {"$gt": "a"}}, doc! {"a": "B"}));
        assert!(collated(doc! {"a": {"b": "X"}}, doc! {"a": {"b": "x"}}));
        assert!(collated(doc! {"a": ["X", "y"]}, doc! {"a": ["x", "Y"]}));
        assert!(collated(
            doc! {"a": {"$all": ["X", "Y"]}},
            doc! {"a": ["y", "x"]}
        ));
        assert!(collated(
            doc! {"a": {"$elemMatch": {"$eq": "X"}}},
            doc! {"a": ["x"]}
        ));
        assert!(collated(
            doc! {"a": {"$elemMatch": {"b": "X"}}},
            doc! {"a": [{"b": "x"}]}
        ));
        // Regexes match bytes whatever the collation.
        let regex = bson::Regex {
            pattern: "^P".to_string().try_into().unwrap(),
            options: "".to_string().try_into().unwrap(),
        };
        assert!(!collated(doc! {"a": regex.clone()}, doc! {"a": "ping"}));
        assert!(!collated(doc! {"a": {"$in": [regex]}}, doc! {"a": "ping"}));
    }

    #[test]
    fn dbref_documents_are_values() {
        let dbref = doc! {"$ref": "c", "$id": 1};
        assert!(matches(doc! {"a": dbref.clone()}, doc! {"a": dbref}));
    }
}
