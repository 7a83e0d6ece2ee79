//! `$all` and `$size`: conditions on an array's contents and length.

use super::comparison::Comparison;
use super::{elem_match, is_path_operator, Predicate, RegexPredicate, ValueMatch};
use basalt_error::{Error, Result};
use bson::Bson;

/// `$all: [v1, v2]` holds when the path matches each value (so an array must contain
/// them all); `$all: [{$elemMatch: ...}, ...]` requires an element for each sub-filter.
pub(super) fn parse_all(operand: &Bson) -> Result<ValueMatch> {
    let Bson::Array(items) = operand else {
        return Err(Error::bad_value("$all needs an array"));
    };
    let is_elem_match = |v: &Bson| matches!(v, Bson::Document(d) if d.keys().next().map(String::as_str) == Some("$elemMatch"));
    let mut conditions = Vec::with_capacity(items.len());
    if items.first().is_some_and(is_elem_match) {
        for item in items {
            let Bson::Document(d) = item else {
                return Err(Error::bad_value("$all/$elemMatch has to be consistent"));
            };
            match d.iter().next() {
                Some((name, inner)) if name == "$elemMatch" => {
                    conditions.push(elem_match::parse_elem_match(inner)?);
                }
                _ => return Err(Error::bad_value("$all/$elemMatch has to be consistent")),
            }
        }
    } else {
        for item in items {
            conditions.push(match item {
                Bson::RegularExpression(re) => ValueMatch::Leaf(Predicate::Regex(
                    RegexPredicate::new(re.pattern.as_str(), re.options.as_str())?,
                )),
                Bson::Document(d) if d.keys().next().is_some_and(|k| is_path_operator(k)) => {
                    return Err(Error::bad_value("no $ expressions in $all"));
                }
                value => ValueMatch::Leaf(Predicate::Compare(Comparison::equal(value.clone()))),
            });
        }
    }
    if conditions.is_empty() {
        return Ok(ValueMatch::Always(false));
    }
    Ok(ValueMatch::and(conditions))
}

pub(super) fn parse_size(operand: &Bson) -> Result<ValueMatch> {
    let size = match operand {
        Bson::Int32(i) => i64::from(*i),
        Bson::Int64(i) => {
            if i32::try_from(*i).is_err() {
                return Err(Error::bad_value(
                    "$size must be representable as a 32-bit integer",
                ));
            }
            *i
        }
        Bson::Double(d) => {
            let whole = *d as i32;
            if f64::from(whole) != *d {
                return Err(Error::bad_value("$size must be a whole number"));
            }
            i64::from(whole)
        }
        _ => return Err(Error::bad_value("$size needs a number")),
    };
    let Ok(size) = usize::try_from(size) else {
        return Err(Error::bad_value("$size may not be negative"));
    };
    Ok(ValueMatch::Leaf(Predicate::Size(size)))
}

#[cfg(test)]
mod tests {
    use crate::Matcher;
    use bson::doc;

    fn matches(filter: bson::Document, doc: bson::Document) -> bool {
        Matcher::new(&filter).unwrap().matches(&doc)
    }

    fn error(filter: bson::Document) -> String {
        Matcher::new(&filter).unwrap_err().message
    }

    #[test]
    fn all() {
        assert!(matches(doc! {"a": {"$all": [1, 2]}}, doc! {"a": [2, 3, 1]}));
        assert!(!matches(doc! {"a": {"$all": [1, 2]}}, doc! {"a": [2, 3]}));
        assert!(matches(doc! {"a": {"$all": [1]}}, doc! {"a": 1}));
        assert!(!matches(doc! {"a": {"$all": []}}, doc! {"a": [1]}));
        assert!(matches(doc! {"a": {"$all": [[1, 2]]}}, doc! {"a": [1, 2]}));
        assert!(matches(
            doc! {"a": {"$all": [{"$elemMatch": {"b": 1}}, {"$elemMatch": {"b": 2}}]}},
            doc! {"a": [{"b": 1}, {"b": 2}]}
        ));
        assert!(!matches(
            doc! {"a": {"$all": [{"$elemMatch": {"b": 1, "c": 1}}]}},
            doc! {"a": [{"b": 1}, {"c": 1}]}
        ));
    }

    #[test]
    fn size() {
        assert!(matches(doc! {"a": {"$size": 2}}, doc! {"a": [1, [2, 3]]}));
        assert!(!matches(doc! {"a": {"$size": 2}}, doc! {"a": [[1, 2]]}));
        assert!(matches(doc! {"a": {"$size": 0}}, doc! {"a": []}));
        assert!(!matches(doc! {"a": {"$size": 0}}, doc! {}));
        assert!(matches(doc! {"a": {"$size": 2.0}}, doc! {"a": [1, 2]}));
        assert!(matches(
            doc! {"a.b": {"$size": 1}},
            doc! {"a": [{"b": [1]}]}
        ));
    }

    #[test]
    fn errors() {
        assert_eq!(error(doc! {"a": {"$all": 1}}), "$all needs an array");
        assert_eq!(
            error(doc! {"a": {"$all": [{"$elemMatch": {}}, 1]}}),
            "$all/$elemMatch has to be consistent"
        );
        assert_eq!(
            error(doc! {"a": {"$all": [{"$gt": 1}]}}),
            "no $ expressions in $all"
        );
        assert_eq!(error(doc! {"a": {"$size": "1"}}), "$size needs a number");
        assert_eq!(
            error(doc! {"a": {"$size": 1.5}}),
            "$size must be a whole number"
        );
        assert_eq!(
            error(doc! {"a": {"$size": -1}}),
            "$size may not be negative"
        );
        assert_eq!(
            error(doc! {"a": {"$size": 1i64 << 40}}),
            "$size must be representable as a 32-bit integer"
        );
    }
}
