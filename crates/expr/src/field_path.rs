//! Field paths (`$a.b`, `$$ROOT.a`, `$$var.x`) and how they walk documents.
//!
//! Unlike query paths, an aggregation path that meets an array maps the rest of the path
//! over the array's elements: `$a.b` over `{a: [{b: 1}, {b: 2}, 3]}` is `[1, 2]`.
//! Elements that are not documents are dropped, nested arrays stay nested.

use crate::context::{validate_name_for_read, ParseContext, VarId};
use crate::env::{Env, Value};
use basalt_error::{Error, Result};
use bson::{Bson, Document};
use std::borrow::Cow;

/// What a field path starts from.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Base {
    /// `$$ROOT`, and `$$CURRENT` while it is not rebound.
    Root,
    /// A user variable, or a rebound `$$CURRENT`.
    Var(VarId),
    /// `$$NOW`.
    Now,
    /// `$$CLUSTER_TIME` (a replica set member's; undefined elsewhere, as in mongod).
    ClusterTime,
    /// `$$REMOVE`: always missing.
    Remove,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct FieldPath {
    pub base: Base,
    pub path: Vec<String>,
}

impl FieldPath {
    /// Parses a string that starts with `$`.
    pub fn parse(text: &str, ctx: &ParseContext) -> Result<FieldPath> {
        debug_assert!(text.starts_with('$'));
        if let Some(var) = text.strip_prefix("$$") {
            let (name, rest) = match var.split_once('.') {
                Some((name, rest)) => (name, Some(rest)),
                None => (var, None),
            };
            validate_name_for_read(name)?;
            let base = match ctx.lookup(name) {
                Some(id) => Base::Var(id),
                None => match name {
                    "ROOT" | "CURRENT" => Base::Root,
                    "NOW" => Base::Now,
                    "CLUSTER_TIME" if basalt_value::clock::has_cluster_time() => Base::ClusterTime,
                    "REMOVE" => Base::Remove,
                    _ => {
                        return Err(Error::location(
                            17276,
                            format!("Use of undefined variable: {name}"),
                        ))
                    }
                },
            };
            let path = match rest {
                Some(rest) => parse_components(rest)?,
                None => Vec::new(),
            };
            return Ok(FieldPath { base, path });
        }
        let rest = &text[1..];
        if rest.is_empty() {
            return Err(Error::location(
                16872,
                "'$' by itself is not a valid FieldPath",
            ));
        }
        let base = match ctx.lookup("CURRENT") {
            Some(id) => Base::Var(id),
            None => Base::Root,
        };
        Ok(FieldPath {
            base,
            path: parse_components(rest)?,
        })
    }

    pub fn eval<'a>(&'a self, env: &Env<'a>) -> Value<'a> {
        match &self.base {
            Base::Root => {
                if self.path.is_empty() {
                    Some(Cow::Owned(Bson::Document(env.root.clone())))
                } else {
                    walk_document(env.root, &self.path)
                }
            }
            Base::Var(id) => walk(env.lookup(*id)?, &self.path),
            Base::Now => walk_owned(Bson::DateTime(env.vars.now()), &self.path),
            Base::ClusterTime => walk_owned(Bson::Timestamp(env.vars.cluster_time()?), &self.path),
            Base::Remove => None,
        }
    }
}

fn parse_components(path: &str) -> Result<Vec<String>> {
    Ok(basalt_value::path::split_field_path(path)?
        .into_iter()
        .map(str::to_string)
        .collect())
}

/// Follows `path` from a value: documents descend, arrays map over their documents,
/// anything else is missing.
pub(crate) fn walk<'a>(value: &'a Bson, path: &[String]) -> Value<'a> {
    if path.is_empty() {
        return Some(Cow::Borrowed(value));
    }
    match value {
        Bson::Document(doc) => walk_document(doc, path),
        Bson::Array(items) => Some(Cow::Owned(Bson::Array(walk_array(items, path)))),
        _ => None,
    }
}

fn walk_owned(value: Bson, path: &[String]) -> Value<'static> {
    walk(&value, path).map(|v| Cow::Owned(v.into_owned()))
}

/// Follows a non-empty `path` from a document.
pub(crate) fn walk_document<'a>(doc: &'a Document, path: &[String]) -> Value<'a> {
    debug_assert!(!path.is_empty());
    walk(doc.get(&path[0])?, &path[1..])
}

/// The path followed from each document of an array; as in mongod's expressions, other
/// elements (nested arrays too) give nothing.
fn walk_array(items: &[Bson], path: &[String]) -> Vec<Bson> {
    items
        .iter()
        .filter_map(|item| match item {
            Bson::Document(doc) => walk_document(doc, path).map(Cow::into_owned),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::Variables;
    use bson::{bson, doc};

    fn eval(path: &str, root: &Document) -> Option<Bson> {
        let vars = Variables::new();
        let fp = FieldPath::parse(path, &ParseContext::new()).unwrap();
        fp.eval(&Env::new(root, &vars)).map(Cow::into_owned)
    }

    #[test]
    fn paths_descend_and_map_over_arrays() {
        let root = doc! {"a": {"b": 5}, "c": [{"d": 1}, {"e": 2}, 3, [{"d": 4}], {"d": [5]}]};
        assert_eq!(eval("$a.b", &root), Some(bson!(5)));
        assert_eq!(eval("$a.x", &root), None);
        assert_eq!(eval("$a.b.c", &root), None);
        assert_eq!(eval("$c.d", &root), Some(bson!([1, [5]])));
        assert_eq!(eval("$$ROOT.a", &root), Some(bson!({"b": 5})));
        assert_eq!(eval("$$CURRENT", &root), Some(Bson::Document(root.clone())));
        assert_eq!(eval("$$REMOVE", &root), None);
    }

    #[test]
    fn bad_paths_are_rejected() {
        let ctx = ParseContext::new();
        let code = |p: &str| FieldPath::parse(p, &ctx).unwrap_err().code.0;
        assert_eq!(code("$"), 16872);
        assert_eq!(code("$a..b"), 15998);
        assert_eq!(code("$a.$b"), 16410);
        assert_eq!(code("$a."), 40353);
        assert_eq!(code("$$nope"), 17276);
        assert_eq!(code("$$"), 9);
    }
}
