//! `$and`, `$or` and `$nor` (which join whole filters) and `$not` (which negates the
//! conditions on one path).

use super::{parse_operators, Predicate, RegexPredicate, ValueMatch};
use crate::matcher::{parse_filter, FilterLevel, MatchExpr};
use basalt_error::{Error, Result};
use bson::Bson;

/// Parses `$and`, `$or` or `$nor` with its array of filters, which are at the `level` of
/// the filter holding them.
pub(crate) fn parse_logical(
    name: &str,
    operand: &Bson,
    level: FilterLevel<'_>,
) -> Result<MatchExpr> {
    let Bson::Array(items) = operand else {
        return Err(Error::bad_value(format!("{name} must be an array")));
    };
    if items.is_empty() {
        return Err(Error::bad_value("$and/$or/$nor must be a nonempty array"));
    }
    let mut children = Vec::with_capacity(items.len());
    for item in items {
        let Bson::Document(filter) = item else {
            return Err(Error::bad_value(
                "$or/$and/$nor entries need to be full objects",
            ));
        };
        children.push(parse_filter(filter, level)?);
    }
    // A single child stands for itself, as MongoDB's optimiser rewrites it; this keeps
    // the positional `$` working through `{$or: [{a: 1}]}`.
    if children.len() == 1 && name != "$nor" {
        return Ok(children.remove(0));
    }
    Ok(match name {
        "$and" => MatchExpr::And(children),
        "$or" => MatchExpr::Or(children),
        _ => MatchExpr::Nor(children),
    })
}

/// Parses `$not` on `path`: a regex or an operator document.
pub(super) fn parse_not(path: &str, operand: &Bson) -> Result<ValueMatch> {
    let inner = match operand {
        Bson::RegularExpression(re) => ValueMatch::Leaf(Predicate::Regex(RegexPredicate::new(
            re.pattern.as_str(),
            re.options.as_str(),
        )?)),
        Bson::Document(ops) if ops.is_empty() => {
            return Err(Error::bad_value("$not cannot be empty"))
        }
        Bson::Document(ops) => parse_operators(path, ops)?,
        _ => return Err(Error::bad_value("$not needs a regex or a document")),
    };
    Ok(ValueMatch::Not(Box::new(inner)))
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
    fn and_or_nor() {
        let d = doc! {"a": 1, "b": 2};
        assert!(matches(doc! {"$and": [{"a": 1}, {"b": 2}]}, d.clone()));
        assert!(!matches(doc! {"$and": [{"a": 1}, {"b": 3}]}, d.clone()));
        assert!(matches(doc! {"$or": [{"a": 5}, {"b": 2}]}, d.clone()));
        assert!(!matches(doc! {"$or": [{"a": 5}, {"b": 5}]}, d.clone()));
        assert!(matches(doc! {"$nor": [{"a": 5}, {"b": 5}]}, d.clone()));
        assert!(!matches(doc! {"$nor": [{"a": 1}]}, d.clone()));
        assert!(matches(
            doc! {"$or": [{"$and": [{"a": 1}, {"b": 2}]}, {"c": 1}]},
            d
        ));
    }

    #[test]
    fn not() {
        assert!(matches(doc! {"a": {"$not": {"$gt": 5}}}, doc! {"a": 3}));
        assert!(matches(doc! {"a": {"$not": {"$gt": 5}}}, doc! {}));
        assert!(!matches(
            doc! {"a": {"$not": {"$gt": 5}}},
            doc! {"a": [1, 9]}
        ));
        let re = bson::Regex {
            pattern: "^a".to_string().try_into().unwrap(),
            options: "".to_string().try_into().unwrap(),
        };
        assert!(matches(doc! {"a": {"$not": re.clone()}}, doc! {"a": "ba"}));
        assert!(!matches(doc! {"a": {"$not": re}}, doc! {"a": "ab"}));
    }

    #[test]
    fn errors() {
        assert_eq!(
            error(doc! {"$and": []}),
            "$and/$or/$nor must be a nonempty array"
        );
        assert_eq!(error(doc! {"$or": 1}), "$or must be an array");
        assert_eq!(
            error(doc! {"$nor": [1]}),
            "$or/$and/$nor entries need to be full objects"
        );
        assert_eq!(
            error(doc! {"a": {"$not": 1}}),
            "$not needs a regex or a document"
        );
        assert_eq!(error(doc! {"a": {"$not": {}}}), "$not cannot be empty");
        assert_eq!(
            error(doc! {"a": {"$not": {"$bad": 1}}}),
            "unknown operator: $bad"
        );
    }
}
