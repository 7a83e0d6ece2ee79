//! `$push` (with `$each`, `$position`, `$sort`, `$slice`), `$addToSet`, `$pop`, `$pull`
//! and `$pullAll`.

use super::describe_document;
use super::modifier::{Outcome, Target};
use super::tree::Env;
use crate::display::{element_to_string, type_name, value_to_string};
use crate::matcher::Matcher;
use crate::operators::is_operator_document;
use crate::sort::SortSpec;
use basalt_error::{Error, ErrorCode, Result};
use basalt_value::{as_f64, as_i64, compare_values, values_equal, ByValue};
use bson::{doc, Bson};
use std::collections::BTreeSet;

#[derive(Clone, Debug)]
pub(crate) struct Push {
    values: Vec<Bson>,
    position: Option<i64>,
    sort: Option<PushSort>,
    slice: Option<i64>,
}

#[derive(Clone, Debug)]
enum PushSort {
    /// Sort the elements themselves; `true` for descending.
    Elements { descending: bool },
    /// Sort documents by fields.
    Fields(SortSpec),
}

/// An integer-valued operand (`$slice`, `$position`).
fn integer(v: &Bson) -> Option<i64> {
    match v {
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => as_i64(v),
        _ => None,
    }
}

impl Push {
    pub(super) fn parse(operand: &Bson) -> Result<Push> {
        let mut push = Push {
            values: vec![operand.clone()],
            position: None,
            sort: None,
            slice: None,
        };
        let Bson::Document(spec) = operand else {
            return Ok(push);
        };
        if !spec.contains_key("$each") {
            return Ok(push);
        }
        for (clause, value) in spec {
            match clause.as_str() {
                "$each" => match value {
                    Bson::Array(items) => push.values = items.clone(),
                    other => {
                        return Err(Error::bad_value(format!(
                        "The argument to $each in $push must be an array but it was of type: {}",
                        type_name(other)
                    )))
                    }
                },
                "$slice" => {
                    push.slice = Some(integer(value).ok_or_else(|| {
                        Error::bad_value(format!(
                            "The value for $slice must be an integer value but was given type: {}",
                            type_name(value)
                        ))
                    })?)
                }
                "$position" => {
                    push.position = Some(integer(value).ok_or_else(|| {
                        Error::bad_value(format!(
                            "The value for $position must be an integer value, not of type: {}",
                            type_name(value)
                        ))
                    })?)
                }
                "$sort" => push.sort = Some(parse_push_sort(value)?),
                other => {
                    return Err(Error::bad_value(format!(
                        "Unrecognized clause in $push: {other}"
                    )))
                }
            }
        }
        Ok(push)
    }

    pub(super) fn apply(
        &self,
        existing: Option<&Bson>,
        target: &Target,
        env: &Env,
    ) -> Result<Outcome> {
        let mut items = match existing {
            None => Vec::new(),
            Some(Bson::Array(items)) => items.clone(),
            Some(other) => {
                return Err(Error::bad_value(format!(
                    "The field '{}' must be an array but is of type {} in document {}",
                    target.field,
                    type_name(other),
                    describe_document(env.id.as_ref())
                )))
            }
        };
        let len = items.len() as i64;
        let at = match self.position {
            None => len,
            Some(p) if p < 0 => (len + p).max(0),
            Some(p) => p.min(len),
        } as usize;
        items.splice(at..at, self.values.iter().cloned());
        match &self.sort {
            None => {}
            Some(PushSort::Elements { descending }) => items.sort_by(|a, b| {
                let ord = compare_values(a, b);
                if *descending {
                    ord.reverse()
                } else {
                    ord
                }
            }),
            Some(PushSort::Fields(spec)) => {
                let mut keyed: Vec<(Vec<Bson>, Bson)> = items
                    .into_iter()
                    .map(|item| {
                        let key = match &item {
                            Bson::Document(d) => spec.sort_key(d),
                            _ => vec![Bson::Null; spec.fields().len()],
                        };
                        (key, item)
                    })
                    .collect();
                keyed.sort_by(|a, b| spec.compare_keys(&a.0, &b.0));
                items = keyed.into_iter().map(|(_, item)| item).collect();
            }
        }
        match self.slice {
            Some(n) if n >= 0 => items.truncate(n as usize),
            Some(n) => {
                let keep = n.unsigned_abs() as usize;
                if items.len() > keep {
                    items.drain(..items.len() - keep);
                }
            }
            None => {}
        }
        Ok(Outcome::Set(Bson::Array(items)))
    }
}

fn parse_push_sort(value: &Bson) -> Result<PushSort> {
    let invalid = || {
        Error::bad_value(
            "The $sort is invalid: use 1/-1 to sort the whole element, or {field:1/-1} to sort \
             embedded fields",
        )
    };
    match value {
        Bson::Document(fields) => {
            if fields.is_empty() {
                return Err(Error::bad_value(
                    "The $sort pattern is empty when it should be a set of fields.",
                ));
            }
            for (name, order) in fields {
                if name.is_empty() || name.split('.').any(str::is_empty) {
                    return Err(Error::bad_value("The $sort field cannot be empty"));
                }
                if !matches!(as_f64(order), Some(o) if o == 1.0 || o == -1.0) {
                    return Err(Error::bad_value(
                        "The $sort element value must be either 1 or -1",
                    ));
                }
            }
            Ok(PushSort::Fields(SortSpec::new(fields)?))
        }
        _ => match as_f64(value) {
            Some(1.0) => Ok(PushSort::Elements { descending: false }),
            Some(-1.0) => Ok(PushSort::Elements { descending: true }),
            _ => Err(invalid()),
        },
    }
}

/// The values `$addToSet` adds: the operand, or the elements of `{$each: [...]}`, without
/// duplicates.
pub(super) fn parse_add_to_set(operand: &Bson) -> Result<Vec<Bson>> {
    let values = match operand {
        Bson::Document(spec) if spec.keys().next().map(String::as_str) == Some("$each") => {
            if spec.len() > 1 {
                return Err(Error::bad_value(format!(
                    "Found unexpected fields after $each in $addToSet: {}",
                    value_to_string(operand)
                )));
            }
            match spec.get("$each") {
                Some(Bson::Array(items)) => items.clone(),
                other => {
                    return Err(Error::type_mismatch(format!(
                        "The argument to $each in $addToSet must be an array but it was of type {}",
                        other.map_or("missing", type_name)
                    )))
                }
            }
        }
        single => vec![single.clone()],
    };
    let mut seen = BTreeSet::new();
    Ok(values
        .iter()
        .filter(|v| seen.insert(ByValue(v)))
        .cloned()
        .collect())
}

pub(super) fn add_to_set(
    values: &[Bson],
    existing: Option<&Bson>,
    target: &Target,
) -> Result<Outcome> {
    let present: &[Bson] = match existing {
        None => &[],
        Some(Bson::Array(items)) => items,
        Some(other) => {
            return Err(Error::bad_value(format!(
                "Cannot apply $addToSet to non-array field. Field named '{}' has non-array type {}",
                target.field,
                type_name(other)
            )))
        }
    };
    // A set of what the array holds: adding m values to n elements takes n + m log n.
    let mut members: BTreeSet<ByValue> = present.iter().map(ByValue).collect();
    let added: Vec<&Bson> = values
        .iter()
        .filter(|v| members.insert(ByValue(v)))
        .collect();
    if existing.is_some() && added.is_empty() {
        return Ok(Outcome::Keep);
    }
    let mut items = Vec::with_capacity(present.len() + added.len());
    items.extend_from_slice(present);
    items.extend(added.into_iter().cloned());
    Ok(Outcome::Set(Bson::Array(items)))
}

/// Which end `$pop` removes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PopEnd {
    First,
    Last,
}

impl PopEnd {
    pub(super) fn parse(path: &str, operand: &Bson) -> Result<PopEnd> {
        match as_f64(operand) {
            None => Err(Error::failed_to_parse(format!(
                "Expected a number in: {}",
                element_to_string(path, operand)
            ))),
            Some(1.0) => Ok(PopEnd::Last),
            Some(-1.0) => Ok(PopEnd::First),
            Some(_) => Err(Error::failed_to_parse(format!(
                "$pop expects 1 or -1, found: {}",
                value_to_string(operand)
            ))),
        }
    }

    pub(super) fn apply(self, existing: Option<&Bson>, target: &Target) -> Result<Outcome> {
        match existing {
            None => Ok(Outcome::Keep),
            Some(Bson::Array(items)) if items.is_empty() => Ok(Outcome::Keep),
            Some(Bson::Array(items)) => {
                let rest = match self {
                    PopEnd::First => &items[1..],
                    PopEnd::Last => &items[..items.len() - 1],
                };
                Ok(Outcome::Set(Bson::Array(rest.to_vec())))
            }
            Some(other) => Err(Error::new(
                ErrorCode::TYPE_MISMATCH,
                format!(
                    "Path '{}' contains an element of non-array type '{}'",
                    target.path,
                    type_name(other)
                ),
            )),
        }
    }
}

/// Which elements `$pull` removes.
#[derive(Clone, Debug)]
pub(crate) enum Pull {
    /// Elements equal to a value.
    Equal(Bson),
    /// Documents matching a filter (`{$pull: {a: {b: 1}}}`).
    Documents(Box<Matcher>),
    /// Elements satisfying operators or a regex (`{$pull: {a: {$gt: 1}}}`), matched as a
    /// field of a wrapper document so that array elements get the usual array semantics.
    Condition(Box<Matcher>),
}

impl Pull {
    pub(super) fn parse(operand: &Bson) -> Result<Pull> {
        Ok(match operand {
            Bson::Document(_) if is_operator_document(operand, false) => Pull::Condition(Box::new(
                Matcher::without_expr(&doc! {"": operand.clone()})?,
            )),
            Bson::Document(filter) => Pull::Documents(Box::new(Matcher::without_expr(filter)?)),
            Bson::RegularExpression(_) => Pull::Condition(Box::new(Matcher::without_expr(
                &doc! {"": operand.clone()},
            )?)),
            value => Pull::Equal(value.clone()),
        })
    }

    fn removes(&self, element: &Bson) -> bool {
        match self {
            Pull::Equal(value) => values_equal(value, element),
            Pull::Documents(filter) => matches!(element, Bson::Document(d) if filter.matches(d)),
            Pull::Condition(filter) => filter.matches(&doc! {"": element.clone()}),
        }
    }

    pub(super) fn apply(&self, existing: Option<&Bson>) -> Result<Outcome> {
        cull("$pull", existing, |e| self.removes(e))
    }
}

pub(super) fn parse_pull_all(operand: &Bson) -> Result<Vec<Bson>> {
    match operand {
        Bson::Array(items) => Ok(items.clone()),
        other => Err(Error::bad_value(format!(
            "$pullAll requires an array argument but was given a {}",
            type_name(other)
        ))),
    }
}

pub(super) fn pull_all(values: &[Bson], existing: Option<&Bson>) -> Result<Outcome> {
    let removed: BTreeSet<ByValue> = values.iter().map(ByValue).collect();
    cull("$pullAll", existing, |e| removed.contains(&ByValue(e)))
}

/// Removes the elements `remove` selects from an array field.
fn cull(
    operator: &str,
    existing: Option<&Bson>,
    remove: impl Fn(&Bson) -> bool,
) -> Result<Outcome> {
    match existing {
        None => Ok(Outcome::Keep),
        Some(Bson::Array(items)) => {
            let kept: Vec<Bson> = items.iter().filter(|e| !remove(e)).cloned().collect();
            Ok(if kept.len() == items.len() {
                Outcome::Keep
            } else {
                Outcome::Set(Bson::Array(kept))
            })
        }
        Some(_) => Err(Error::bad_value(format!(
            "Cannot apply {operator} to a non-array value"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use crate::update::run;
    use basalt_error::ErrorCode;
    use bson::doc;

    #[test]
    fn push() {
        let (d, _) = run(doc! {"a": [1]}, doc! {"$push": {"a": 2, "b": [3]}}).unwrap();
        assert_eq!(d, doc! {"a": [1, 2], "b": [[3]]});
        let (d, _) = run(
            doc! {"a": [1, 5]},
            doc! {"$push": {"a": {"$each": [4, 2], "$position": 1}}},
        )
        .unwrap();
        assert_eq!(d, doc! {"a": [1, 4, 2, 5]});
        let (d, _) = run(
            doc! {"a": [1, 5]},
            doc! {"$push": {"a": {"$each": [4, 2], "$sort": -1, "$slice": 3}}},
        )
        .unwrap();
        assert_eq!(d, doc! {"a": [5, 4, 2]});
        let (d, _) = run(
            doc! {"a": [{"s": 2}, {"s": 9}]},
            doc! {"$push": {"a": {"$each": [{"s": 5}], "$sort": {"s": 1}, "$slice": -2}}},
        )
        .unwrap();
        assert_eq!(d, doc! {"a": [{"s": 5}, {"s": 9}]});
        let (d, _) = run(
            doc! {"a": [1, 2]},
            doc! {"$push": {"a": {"$each": [3], "$position": -1}}},
        )
        .unwrap();
        assert_eq!(d, doc! {"a": [1, 3, 2]});
    }

    #[test]
    fn push_errors() {
        let e = run(doc! {"_id": 1, "a": 1}, doc! {"$push": {"a": 2}}).unwrap_err();
        assert_eq!(e.code, ErrorCode::BAD_VALUE);
        assert_eq!(
            e.message,
            "The field 'a' must be an array but is of type int in document {_id: 1}"
        );
        let err = |u| run(doc! {}, u).unwrap_err().message;
        assert_eq!(
            err(doc! {"$push": {"a": {"$each": 1}}}),
            "The argument to $each in $push must be an array but it was of type: int"
        );
        assert_eq!(
            err(doc! {"$push": {"a": {"$each": [1], "$bad": 1}}}),
            "Unrecognized clause in $push: $bad"
        );
        assert_eq!(
            err(doc! {"$push": {"a": {"$each": [1], "$slice": "x"}}}),
            "The value for $slice must be an integer value but was given type: string"
        );
        assert_eq!(
            err(doc! {"$push": {"a": {"$each": [1], "$sort": 2}}}),
            "The $sort is invalid: use 1/-1 to sort the whole element, or {field:1/-1} to sort \
             embedded fields"
        );
    }

    #[test]
    fn add_to_set() {
        let (d, changed) = run(doc! {"a": [1, 2]}, doc! {"$addToSet": {"a": 2.0}}).unwrap();
        assert!(!changed);
        assert_eq!(d, doc! {"a": [1, 2]});
        let (d, _) = run(
            doc! {"a": [1]},
            doc! {"$addToSet": {"a": {"$each": [1, 3, 3, 4]}}},
        )
        .unwrap();
        assert_eq!(d, doc! {"a": [1, 3, 4]});
        let (d, _) = run(doc! {}, doc! {"$addToSet": {"a": {"$each": []}}}).unwrap();
        assert_eq!(d, doc! {"a": []});
        let e = run(doc! {"a": 1}, doc! {"$addToSet": {"a": 1}}).unwrap_err();
        assert_eq!(
            e.message,
            "Cannot apply $addToSet to non-array field. Field named 'a' has non-array type int"
        );
    }

    #[test]
    fn pop() {
        let (d, _) = run(
            doc! {"a": [1, 2, 3], "b": [1, 2]},
            doc! {"$pop": {"a": 1, "b": -1}},
        )
        .unwrap();
        assert_eq!(d, doc! {"a": [1, 2], "b": [2]});
        let (_, changed) = run(doc! {"a": []}, doc! {"$pop": {"a": 1, "x": 1}}).unwrap();
        assert!(!changed);
        let e = run(doc! {}, doc! {"$pop": {"a": 2}}).unwrap_err();
        assert_eq!(e.code, ErrorCode::FAILED_TO_PARSE);
        assert_eq!(e.message, "$pop expects 1 or -1, found: 2");
        let e = run(doc! {"a": {"b": 1}}, doc! {"$pop": {"a.b": 1}}).unwrap_err();
        assert_eq!(e.code, ErrorCode::TYPE_MISMATCH);
        assert_eq!(
            e.message,
            "Path 'a.b' contains an element of non-array type 'int'"
        );
    }

    #[test]
    fn pull_and_pull_all() {
        let (d, _) = run(doc! {"a": [1, 2, 1.0, 3]}, doc! {"$pull": {"a": 1}}).unwrap();
        assert_eq!(d, doc! {"a": [2, 3]});
        let (d, _) = run(doc! {"a": [1, 5, 7]}, doc! {"$pull": {"a": {"$gte": 5}}}).unwrap();
        assert_eq!(d, doc! {"a": [1]});
        let (d, _) = run(
            doc! {"a": [{"b": 1, "c": 1}, {"b": 2}, 3]},
            doc! {"$pull": {"a": {"b": 1}}},
        )
        .unwrap();
        assert_eq!(d, doc! {"a": [{"b": 2}, 3]});
        let (d, _) = run(
            doc! {"a": [[1, 2], [3]]},
            doc! {"$pull": {"a": {"$in": [3]}}},
        )
        .unwrap();
        assert_eq!(d, doc! {"a": [[1, 2]]});
        let (d, changed) = run(doc! {"a": [1, 2, 3, 2]}, doc! {"$pullAll": {"a": [2, 3]}}).unwrap();
        assert!(changed);
        assert_eq!(d, doc! {"a": [1]});
        let (_, changed) = run(doc! {"a": [1]}, doc! {"$pull": {"a": 9}}).unwrap();
        assert!(!changed);
        let e = run(doc! {"a": 1}, doc! {"$pull": {"a": 1}}).unwrap_err();
        assert_eq!(e.message, "Cannot apply $pull to a non-array value");
        let e = run(doc! {}, doc! {"$pullAll": {"a": 1}}).unwrap_err();
        assert_eq!(
            e.message,
            "$pullAll requires an array argument but was given a int"
        );
    }
}
