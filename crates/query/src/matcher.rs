//! The query filter matcher: parses a filter document once into an expression tree and
//! tests documents against it.
//!
//! Top-level parsing lives here (fields, `$and`/`$or`/`$nor`, `$comment`); what a filter
//! says about one path is parsed and evaluated by [`crate::operators`]. Besides a yes/no
//! answer, matching reports the array position a positional `$` projection or update
//! refers to: the index, in the first array a matching path went through, of the element
//! that matched.

use crate::operators::{not_supported, parse_logical, parse_path_condition, ValueMatch};
use basalt_error::{Error, Result};
use basalt_value::FieldPath;
use bson::{Bson, Document};

/// A parsed query filter.
#[derive(Clone, Debug)]
pub struct Matcher {
    root: MatchExpr,
}

/// What a successful match found out about the document.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Matched {
    /// The position a positional `$` refers to, when the filter matched inside an array.
    pub array_position: Option<usize>,
}

impl Matcher {
    /// Parses a filter, failing with MongoDB's error for malformed ones.
    pub fn new(filter: &Document) -> Result<Matcher> {
        Ok(Matcher {
            root: parse_filter(filter)?,
        })
    }

    pub fn matches(&self, doc: &Document) -> bool {
        self.root.matches(doc, &mut None)
    }

    /// Like [`Matcher::matches`], also reporting the matched array position.
    pub fn match_details(&self, doc: &Document) -> Option<Matched> {
        let mut array_position = None;
        self.root
            .matches(doc, &mut array_position)
            .then_some(Matched { array_position })
    }

    /// Whether some condition of the filter is on a path whose first component is
    /// `field` (a positional projection `a.$` needs one on `a`).
    pub fn constrains_field(&self, field: &str) -> bool {
        self.root.constrains_field(field)
    }
}

/// A parsed filter.
#[derive(Clone, Debug)]
pub(crate) enum MatchExpr {
    And(Vec<MatchExpr>),
    Or(Vec<MatchExpr>),
    Nor(Vec<MatchExpr>),
    Path(FieldPath, ValueMatch),
    Always(bool),
}

impl MatchExpr {
    /// Whether `doc` matches; a match inside an array records its position. As in
    /// MongoDB, branches of `$or` and `$nor` do not report positions.
    pub(crate) fn matches(&self, doc: &Document, position: &mut Option<usize>) -> bool {
        match self {
            MatchExpr::And(children) => children.iter().all(|c| c.matches(doc, position)),
            MatchExpr::Or(children) => children.iter().any(|c| c.matches(doc, &mut None)),
            MatchExpr::Nor(children) => !children.iter().any(|c| c.matches(doc, &mut None)),
            MatchExpr::Path(path, condition) => condition.matches_at(path, doc, position),
            MatchExpr::Always(result) => *result,
        }
    }

    fn constrains_field(&self, field: &str) -> bool {
        match self {
            MatchExpr::And(children) | MatchExpr::Or(children) | MatchExpr::Nor(children) => {
                children.iter().any(|c| c.constrains_field(field))
            }
            MatchExpr::Path(path, _) => path.components().next() == Some(field),
            MatchExpr::Always(_) => false,
        }
    }
}

/// Parses a filter document (top level, or nested in `$and` and friends).
pub(crate) fn parse_filter(filter: &Document) -> Result<MatchExpr> {
    let mut children = Vec::with_capacity(filter.len());
    for (name, value) in filter {
        if let Some(operator) = name.strip_prefix('$') {
            match operator {
                "and" | "or" | "nor" => children.push(parse_logical(name, value)?),
                "comment" => {}
                "alwaysTrue" | "alwaysFalse" => {
                    if basalt_value::as_i64(value) != Some(1) {
                        return Err(Error::failed_to_parse(format!(
                            "{name} must be an integer value of 1"
                        )));
                    }
                    children.push(MatchExpr::Always(operator == "alwaysTrue"));
                }
                // DBRef fields are matched as ordinary fields.
                "ref" | "id" | "db" => children.push(MatchExpr::Path(
                    FieldPath::parse(name),
                    parse_path_condition(name, &equality_only(value))?,
                )),
                "expr" | "where" | "text" | "jsonSchema" | "sampleRate" => {
                    return Err(not_supported(name))
                }
                _ => {
                    return Err(Error::bad_value(format!(
                        "unknown top level operator: {name}. If you have a field name that \
                         starts with a '$' symbol, consider using $getField or $setField."
                    )))
                }
            }
            continue;
        }
        children.push(MatchExpr::Path(
            FieldPath::parse(name),
            parse_path_condition(name, value)?,
        ));
    }
    Ok(if children.len() == 1 {
        children.remove(0)
    } else {
        MatchExpr::And(children)
    })
}

/// A DBRef field's value is compared as is, even if it looks like an operator document.
fn equality_only(value: &Bson) -> Bson {
    match value {
        Bson::Document(_) => bson::bson!({ "$eq": value.clone() }),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn empty_filter_matches_everything() {
        assert!(Matcher::new(&doc! {}).unwrap().matches(&doc! {"a": 1}));
    }

    #[test]
    fn top_level_errors() {
        let err = Matcher::new(&doc! {"$foo": 1}).unwrap_err();
        assert_eq!(err.code, basalt_error::ErrorCode::BAD_VALUE);
        assert!(err.message.starts_with("unknown top level operator: $foo."));
        assert_eq!(
            Matcher::new(&doc! {"$expr": {"$eq": [1, 1]}})
                .unwrap_err()
                .message,
            "$expr is not supported yet"
        );
        assert_eq!(
            Matcher::new(&doc! {"a": {"$where": "x"}})
                .unwrap_err()
                .message,
            "$where cannot be applied to a field"
        );
    }

    #[test]
    fn comment_is_ignored() {
        let m = Matcher::new(&doc! {"a": 1, "$comment": "why"}).unwrap();
        assert!(m.matches(&doc! {"a": 1}));
    }

    #[test]
    fn array_position_of_the_match() {
        let details =
            |filter: Document, doc: Document| Matcher::new(&filter).unwrap().match_details(&doc);
        let at = |i| {
            Some(Matched {
                array_position: Some(i),
            })
        };
        assert_eq!(details(doc! {"a": 5}, doc! {"a": [1, 5]}), at(1));
        assert_eq!(
            details(doc! {"a.b": 5}, doc! {"a": [{"b": 1}, {"b": 5}]}),
            at(1)
        );
        assert_eq!(
            details(doc! {"a.b": 5}, doc! {"a": [{"b": [4]}, {"b": [6, 5]}]}),
            at(1)
        );
        assert_eq!(
            details(doc! {"a": {"$elemMatch": {"$gt": 2}}}, doc! {"a": [1, 3]}),
            at(1)
        );
        assert_eq!(
            details(doc! {"a": 5}, doc! {"a": 5}),
            Some(Matched::default())
        );
        assert_eq!(details(doc! {"a": 6}, doc! {"a": 5}), None);
        assert_eq!(
            details(
                doc! {"x": 1, "a": {"$gt": 2}},
                doc! {"x": 1, "a": [1, 2, 3]}
            ),
            at(2)
        );
    }
}
