//! Path-level query operators: the conditions a filter puts on the values at one path
//! (`{a: {$gt: 1, $lt: 5}}`), one family per file.
//!
//! A path's condition is a small tree ([`ValueMatch`]) of predicates joined by "and" and
//! "not". The tree is evaluated in two ways. At a path of a document, a predicate holds if
//! any value the path reaches satisfies it (MongoDB's implicit array semantics), while
//! "not" negates the whole path, so `$ne: 1` means "no value is 1". Inside
//! `$elemMatch: {$gt: 1}` the same tree is applied to single array elements.

mod array;
mod bits;
mod comparison;
mod elem_match;
mod element;
mod geo;
mod json_schema;
mod logical;
mod modulo;
mod regex;

pub(crate) use element::is_truthy;
pub(crate) use geo::GeoTest;
pub use geo::NearQuery;
pub(crate) use json_schema::JsonSchema;
pub(crate) use logical::parse_logical;
pub(crate) use regex::RegexPredicate;

use crate::matcher::MatchEnv;
use basalt_error::{Error, Result};
use basalt_value::{FieldPath, Reached};
use bson::{Bson, Document};
use std::ops::ControlFlow;

/// The condition a filter puts on one path.
#[derive(Clone, Debug)]
pub(crate) enum ValueMatch {
    All(Vec<ValueMatch>),
    Not(Box<ValueMatch>),
    Always(bool),
    Leaf(Predicate),
}

/// One operator's test of a single value.
#[derive(Clone, Debug)]
pub(crate) enum Predicate {
    Compare(comparison::Comparison),
    In(comparison::InList),
    Exists,
    Type(element::TypeSet),
    Regex(RegexPredicate),
    Mod(modulo::Modulo),
    Size(usize),
    ElemMatch(elem_match::ElemMatch),
    Bits(bits::BitTest),
    Geo(geo::GeoTest),
}

/// Outcome of testing one value; array predicates also tell which element matched.
enum Check {
    Fail,
    Pass,
    PassAt(usize),
}

impl Check {
    fn from_bool(b: bool) -> Check {
        if b {
            Check::Pass
        } else {
            Check::Fail
        }
    }
}

impl ValueMatch {
    /// Whether the values at `path` in `doc` satisfy the condition. A match found inside an
    /// array records the element's position (the one a positional `$` refers to).
    pub(crate) fn matches_at(
        &self,
        path: &FieldPath,
        doc: &Document,
        env: &MatchEnv<'_>,
        position: &mut Option<usize>,
    ) -> bool {
        match self {
            ValueMatch::All(conditions) => conditions
                .iter()
                .all(|c| c.matches_at(path, doc, env, position)),
            ValueMatch::Not(inner) => !inner.matches_at(path, doc, env, &mut None),
            ValueMatch::Always(result) => *result,
            ValueMatch::Leaf(predicate) => predicate.matches_at(path, doc, env, position),
        }
    }

    /// Whether a single value (an array element under `$elemMatch`) satisfies the
    /// condition, with no array traversal.
    pub(crate) fn matches_single(&self, v: &Bson, env: &MatchEnv<'_>) -> bool {
        match self {
            ValueMatch::All(conditions) => conditions.iter().all(|c| c.matches_single(v, env)),
            ValueMatch::Not(inner) => !inner.matches_single(v, env),
            ValueMatch::Always(result) => *result,
            ValueMatch::Leaf(predicate) => !matches!(predicate.check(v, env), Check::Fail),
        }
    }

    /// Joins conditions on one path, unwrapping a single one.
    fn and(mut conditions: Vec<ValueMatch>) -> ValueMatch {
        if conditions.len() == 1 {
            conditions.remove(0)
        } else {
            ValueMatch::All(conditions)
        }
    }
}

impl Predicate {
    fn check(&self, v: &Bson, env: &MatchEnv<'_>) -> Check {
        match self {
            Predicate::Compare(c) => Check::from_bool(c.matches(v, env.collation)),
            Predicate::In(list) => Check::from_bool(list.matches(v, env.collation)),
            Predicate::Exists => Check::Pass,
            Predicate::Type(types) => Check::from_bool(types.matches(v)),
            Predicate::Regex(re) => match re.test(v) {
                Ok(matched) => Check::from_bool(matched),
                Err(e) => {
                    env.fail(e);
                    Check::Fail
                }
            },
            Predicate::Mod(m) => Check::from_bool(m.matches(v)),
            Predicate::Size(n) => {
                Check::from_bool(matches!(v, Bson::Array(items) if items.len() == *n))
            }
            Predicate::ElemMatch(e) => match e.matching_element(v, env) {
                Some(i) => Check::PassAt(i),
                None => Check::Fail,
            },
            Predicate::Bits(b) => Check::from_bool(b.matches(v)),
            Predicate::Geo(g) => Check::from_bool(g.matches(v)),
        }
    }

    /// Whether a path that reaches nothing satisfies the predicate: missing compares as
    /// null, so `{a: null}` and `{a: {$in: [null]}}` match documents without `a`.
    fn matches_missing(&self) -> bool {
        match self {
            // Null is not a string: no collation changes how it compares.
            Predicate::Compare(c) => c.matches(&Bson::Null, None),
            Predicate::In(list) => list.matches(&Bson::Null, None),
            _ => false,
        }
    }

    /// Predicates about arrays themselves see an array at the end of the path only whole;
    /// the others also try each of its elements.
    fn traverses_leaf_arrays(&self) -> bool {
        !matches!(self, Predicate::Size(_) | Predicate::ElemMatch(_))
    }

    fn matches_at(
        &self,
        path: &FieldPath,
        doc: &Document,
        env: &MatchEnv<'_>,
        position: &mut Option<usize>,
    ) -> bool {
        let flow = path.visit(doc, &mut |reached| match reached {
            Reached::Missing { array_position } => {
                if self.matches_missing() {
                    ControlFlow::Break(array_position)
                } else {
                    ControlFlow::Continue(())
                }
            }
            Reached::Value {
                value,
                array_position,
            } => {
                if let (Bson::Array(items), true) = (value, self.traverses_leaf_arrays()) {
                    for (i, item) in items.iter().enumerate() {
                        if !matches!(self.check(item, env), Check::Fail) {
                            return ControlFlow::Break(array_position.or(Some(i)));
                        }
                    }
                }
                match self.check(value, env) {
                    Check::Fail => ControlFlow::Continue(()),
                    Check::Pass => ControlFlow::Break(array_position),
                    Check::PassAt(i) => ControlFlow::Break(array_position.or(Some(i))),
                }
            }
        });
        match flow {
            ControlFlow::Break(found) => {
                if found.is_some() {
                    *position = found;
                }
                true
            }
            ControlFlow::Continue(()) => false,
        }
    }
}

/// Whether a value is an operator document (`{$gt: 1}`) rather than a value to compare
/// with: its first field starts with `$`, unless it is a DBRef (`{$ref, $id}`), which is
/// compared as a value. `allow_incomplete_dbref` accepts a lone `$ref`, `$id` or `$db`.
pub(crate) fn is_operator_document(v: &Bson, allow_incomplete_dbref: bool) -> bool {
    let Bson::Document(d) = v else {
        return false;
    };
    let Some(first) = d.keys().next() else {
        return false;
    };
    if !first.starts_with('$') {
        return false;
    }
    let has = |k: &str| d.contains_key(k);
    let dbref = if allow_incomplete_dbref {
        has("$ref") || has("$id") || has("$db")
    } else {
        has("$ref") && has("$id")
    };
    !dbref
}

/// Parses what a filter says about `path`: an operator document, a regex, or a value the
/// path must equal.
pub(crate) fn parse_path_condition(path: &str, value: &Bson) -> Result<ValueMatch> {
    match value {
        Bson::Document(ops) if is_operator_document(value, false) => parse_operators(path, ops),
        Bson::RegularExpression(re) => Ok(ValueMatch::Leaf(Predicate::Regex(RegexPredicate::new(
            re.pattern.as_str(),
            re.options.as_str(),
        )?))),
        _ => Ok(ValueMatch::Leaf(Predicate::Compare(
            comparison::Comparison::equal(value.clone()),
        ))),
    }
}

/// Parses an operator document (`{$gt: 1, $lt: 5}`) on `path`.
pub(crate) fn parse_operators(path: &str, ops: &Document) -> Result<ValueMatch> {
    if ops.contains_key("$near") || ops.contains_key("$nearSphere") {
        return geo::parse_near(ops);
    }
    if ops.contains_key("$geoIntersects") && ops.len() > 1 {
        return Err(Error::bad_value(
            "$geoIntersects cannot be combined with other operators on its field",
        ));
    }
    let mut conditions = Vec::with_capacity(ops.len());
    for (name, operand) in ops {
        let condition = match name.as_str() {
            "$eq" | "$ne" | "$gt" | "$gte" | "$lt" | "$lte" => {
                comparison::parse_comparison(path, name, operand)?
            }
            "$in" | "$nin" => comparison::parse_in(name, operand)?,
            "$not" => logical::parse_not(path, operand)?,
            "$exists" => element::parse_exists(operand),
            "$type" => element::parse_type(path, operand)?,
            "$mod" => modulo::parse_mod(operand)?,
            "$regex" => regex::parse_regex_operator(ops)?,
            "$options" => {
                if !ops.contains_key("$regex") {
                    return Err(Error::bad_value("$options needs a $regex"));
                }
                continue;
            }
            "$elemMatch" => elem_match::parse_elem_match(operand)?,
            "$all" => array::parse_all(operand)?,
            "$size" => array::parse_size(operand)?,
            "$bitsAllSet" | "$bitsAllClear" | "$bitsAnySet" | "$bitsAnyClear" => {
                bits::parse_bit_test(path, name, operand)?
            }
            "$where" => return Err(Error::bad_value("$where cannot be applied to a field")),
            "$geoWithin" | "$within" => geo::parse_within(operand)?,
            "$geoIntersects" => geo::parse_intersects(operand)?,
            "$maxDistance" | "$minDistance" => {
                return Err(Error::bad_value(format!(
                    "{name} needs a $near or $nearSphere"
                )))
            }
            _ => return Err(Error::bad_value(format!("unknown operator: {name}"))),
        };
        conditions.push(condition);
    }
    Ok(ValueMatch::and(conditions))
}

/// Whether `name` is an operator that applies to a path (as opposed to a top-level one
/// such as `$and`, or an unknown name).
pub(crate) fn is_path_operator(name: &str) -> bool {
    matches!(
        name,
        "$eq"
            | "$ne"
            | "$gt"
            | "$gte"
            | "$lt"
            | "$lte"
            | "$in"
            | "$nin"
            | "$not"
            | "$exists"
            | "$type"
            | "$mod"
            | "$regex"
            | "$options"
            | "$elemMatch"
            | "$all"
            | "$size"
            | "$bitsAllSet"
            | "$bitsAllClear"
            | "$bitsAnySet"
            | "$bitsAnyClear"
            | "$geoWithin"
            | "$geoIntersects"
            | "$within"
            | "$near"
            | "$nearSphere"
    )
}
