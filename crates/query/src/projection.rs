//! Find projections (`{a: 1, "b.c": 1}`, `{a: 0}`, `{a: {$slice: 2}}`, `{"a.$": 1}`,
//! `{x: "$a"}`, `{x: {$add: ["$a", 1]}}`), with MongoDB 4.4+ rules.
//!
//! A projection is either an inclusion (only the named fields, plus `_id` unless it is
//! excluded) or an exclusion (everything but the named fields); mixing the two is an error
//! except for `_id`. Values other than numbers and booleans are computed fields:
//! aggregation expressions (`basalt_expr`) evaluated against the whole document, which
//! see the command's `let` variables. `$slice` keeps the kind of the rest of the
//! projection, `$elemMatch` and the positional `a.$` make it an inclusion. The positional
//! form needs the query's matcher, which tells which array element matched: build it with
//! [`Projection::with_query`].

use crate::display::{element_to_string, type_name};
use crate::matcher::Matcher;
use basalt_error::{Error, Result};
use basalt_expr::{Expression, Scope, Variables};
use basalt_value::as_i64;
use bson::{doc, Bson, Document};
use std::sync::Arc;

/// A parsed find projection.
#[derive(Clone, Debug)]
pub struct Projection {
    inclusion: bool,
    fields: Vec<(String, Node)>,
    query: Option<Matcher>,
    /// The values computed fields see: `$$NOW` and the command's `let` variables.
    vars: Variables,
}

#[derive(Clone, Debug)]
enum Node {
    Include,
    Exclude,
    Children(Vec<(String, Node)>),
    Slice { skip: Option<i64>, limit: i64 },
    ElemMatch(Box<Matcher>),
    Positional,
    Computed(Arc<Expression>),
}

/// Where the positional `$` stands while a document is projected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Position {
    /// The query matched without an array position.
    Unknown,
    /// The element the next array on the positional path must be cut to.
    Pending(usize),
    /// An outer array already used the position.
    Used,
}

impl Projection {
    /// Parses a projection that does not use the positional `$` or `let` variables.
    pub fn new(spec: &Document) -> Result<Projection> {
        Projection::parse(spec, None, &Scope::new())
    }

    /// Parses a projection for the query `query`, which the positional `$` refers to, in
    /// the `scope` of the command's variables.
    pub fn with_query(spec: &Document, query: &Matcher, scope: &Scope) -> Result<Projection> {
        Projection::parse(spec, Some(query), scope)
    }

    /// Whether the projection keeps only named fields (as opposed to dropping them).
    pub fn is_inclusion(&self) -> bool {
        self.inclusion
    }

    /// The projected form of `doc`.
    pub fn apply(&self, doc: &Document) -> Result<Document> {
        let position = match &self.query {
            Some(query) if contains_positional(&self.fields) => {
                match query.match_details(doc)?.and_then(|m| m.array_position) {
                    Some(i) => Position::Pending(i),
                    None => Position::Unknown,
                }
            }
            _ => Position::Unknown,
        };
        if self.inclusion {
            let mut out = include(&self.fields, doc, doc, position)?;
            add_computed(&self.fields, &mut out, doc, &self.vars)?;
            Ok(out)
        } else {
            Ok(exclude(&self.fields, doc))
        }
    }

    fn parse(spec: &Document, query: Option<&Matcher>, scope: &Scope) -> Result<Projection> {
        let mut ctx = Parser {
            query,
            scope,
            kind: None,
            id_included: false,
            id_specified: false,
            has_slice: false,
            has_elem_match: false,
            has_positional: false,
        };
        let mut fields = Vec::new();
        for (name, value) in spec {
            ctx.id_specified |= name == "_id" || name.starts_with("_id.");
            ctx.parse_element(name, value, None, &mut fields)?;
        }
        let inclusion = match ctx.kind {
            Some(kind) => kind == Kind::Inclusion,
            // Only `_id` and find-only operators: MongoDB's compatibility rules.
            None if ctx.has_slice => ctx.id_included,
            None => ctx.has_elem_match || ctx.id_included,
        };
        if inclusion && !ctx.id_specified {
            fields.push(("_id".to_string(), Node::Include));
        }
        if !inclusion && ctx.id_included {
            fields.retain(|(name, _)| name != "_id");
        }
        Ok(Projection {
            inclusion,
            fields,
            query: query.cloned(),
            vars: scope.values.clone(),
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Inclusion,
    Exclusion,
}

/// The state of parsing one projection.
struct Parser<'q> {
    query: Option<&'q Matcher>,
    /// The names expressions may use.
    scope: &'q Scope,
    kind: Option<Kind>,
    id_included: bool,
    id_specified: bool,
    has_slice: bool,
    has_elem_match: bool,
    has_positional: bool,
}

impl Parser<'_> {
    fn parse_element(
        &mut self,
        name: &str,
        value: &Bson,
        parent_path: Option<&str>,
        siblings: &mut Vec<(String, Node)>,
    ) -> Result<()> {
        let positional = positional_prefix(name);
        if let Bson::Document(sub) = value {
            if positional.is_some() {
                return Err(Error::location(
                    31271,
                    "positional projection cannot be used with an expression or sub object",
                ));
            }
            return self.parse_sub_object(name, sub, parent_path, siblings);
        }
        let is_flag = basalt_value::number::is_number(value) || matches!(value, Bson::Boolean(_));
        if !is_flag {
            if positional.is_some() {
                return Err(Error::location(
                    31308,
                    "positional projection cannot be used with a literal",
                ));
            }
            let expression = Expression::parse(value, &self.scope.names)?;
            add_node(siblings, name, Node::Computed(Arc::new(expression)))?;
            return self.set_kind(Kind::Inclusion, || {
                Error::location(
                    31310,
                    format!(
                        "Cannot use an expression {} in an exclusion projection",
                        element_to_string(name, value)
                    ),
                )
            });
        }
        let top_level_id = name == "_id" && parent_path.is_none();
        if !crate::operators::is_truthy(value) {
            add_node(siblings, name, Node::Exclude)?;
            if top_level_id {
                return Ok(());
            }
            return self.set_kind(Kind::Exclusion, || {
                Error::location(
                    31254,
                    format!("Cannot do exclusion on field {name} in inclusion projection"),
                )
            });
        }
        match positional {
            None => {
                add_node(siblings, name, Node::Include)?;
                if top_level_id {
                    self.id_included = true;
                }
            }
            Some(prefix) => self.parse_positional(name, prefix, parent_path, siblings)?,
        }
        if top_level_id {
            return Ok(());
        }
        self.set_kind(Kind::Inclusion, || {
            Error::location(
                31253,
                format!("Cannot do inclusion on field {name} in exclusion projection"),
            )
        })
    }

    fn parse_positional(
        &mut self,
        name: &str,
        prefix: &str,
        parent_path: Option<&str>,
        siblings: &mut Vec<(String, Node)>,
    ) -> Result<()> {
        if self.has_positional {
            return Err(Error::location(
                31276,
                "Cannot specify more than one positional projection per query.",
            ));
        }
        if self.has_elem_match {
            return Err(Error::location(
                31256,
                "Cannot specify positional operator and $elemMatch.",
            ));
        }
        let Some(query) = self.query else {
            return Err(Error::location(
                51050,
                "Projections with a positional operator require a matcher",
            ));
        };
        let full = parent_path.unwrap_or(name);
        let first = full.split('.').next().unwrap_or_default();
        if !query.constrains_field(first) {
            return Err(Error::location(
                31277,
                format!("Positional projection '{name}' does not match the query document."),
            ));
        }
        if name.ends_with(".$.") {
            return Err(Error::location(31270, "Path cannot end with '.$.'"));
        }
        let rest = &name[prefix.len()..];
        let rest = rest.strip_prefix(".$").unwrap_or(rest);
        if rest == ".$" || rest.contains(".$.") || rest.ends_with(".$") {
            return Err(Error::location(
                31287,
                format!("Cannot use positional operator twice: {name}"),
            ));
        }
        add_node(siblings, prefix, Node::Positional)?;
        self.has_positional = true;
        Ok(())
    }

    fn parse_sub_object(
        &mut self,
        name: &str,
        sub: &Document,
        parent_path: Option<&str>,
        siblings: &mut Vec<(String, Node)>,
    ) -> Result<()> {
        if let (1, Some((op, arg))) = (sub.len(), sub.iter().next()) {
            if op.starts_with('$') {
                return self.parse_expression(name, op, arg, sub, parent_path, siblings);
            }
        }
        let full = match parent_path {
            Some(parent) => format!("{parent}.{name}"),
            None => name.to_string(),
        };
        let mut children = Vec::new();
        for (child, value) in sub {
            self.parse_element(child, value, Some(&full), &mut children)?;
        }
        add_node(siblings, name, Node::Children(children))
    }

    fn parse_expression(
        &mut self,
        name: &str,
        op: &str,
        arg: &Bson,
        whole: &Document,
        parent_path: Option<&str>,
        siblings: &mut Vec<(String, Node)>,
    ) -> Result<()> {
        match op {
            "$slice" => {
                let node = parse_slice(arg)?;
                add_node(siblings, name, node)?;
                self.has_slice = true;
                Ok(())
            }
            "$elemMatch" => {
                if !matches!(arg, Bson::Document(_)) {
                    return Err(Error::location(
                        31274,
                        format!(
                            "elemMatch: Invalid argument, object required, but got {}",
                            type_name(arg)
                        ),
                    ));
                }
                if self.has_positional {
                    return Err(Error::location(
                        31255,
                        "Cannot specify positional operator and $elemMatch.",
                    ));
                }
                if parent_path.is_some() || name.contains('.') {
                    return Err(Error::location(
                        31275,
                        "Cannot use $elemMatch projection on a nested field.",
                    ));
                }
                let matcher = Matcher::new(&doc! { name: Bson::Document(whole.clone()) })?;
                add_node(siblings, name, Node::ElemMatch(Box::new(matcher)))?;
                self.has_elem_match = true;
                Ok(())
            }
            _ => {
                let expression = Expression::parse_document(whole, &self.scope.names)?;
                add_node(siblings, name, Node::Computed(Arc::new(expression)))?;
                self.set_kind(Kind::Inclusion, || {
                    Error::location(
                        31252,
                        "Cannot use expression other than $meta in exclusion projection",
                    )
                })
            }
        }
    }

    fn set_kind(&mut self, kind: Kind, conflict: impl FnOnce() -> Error) -> Result<()> {
        match self.kind {
            Some(existing) if existing != kind => Err(conflict()),
            _ => {
                self.kind = Some(kind);
                Ok(())
            }
        }
    }
}

/// The part of `name` before its first positional `$` (`"a.b"` for `"a.b.$"`).
fn positional_prefix(name: &str) -> Option<&str> {
    if let Some(i) = name.find(".$.") {
        return Some(&name[..i]);
    }
    name.strip_suffix(".$")
}

fn parse_slice(arg: &Bson) -> Result<Node> {
    let as_int = |v: &Bson| {
        as_i64(v)
            .or_else(|| basalt_value::as_f64(v).map(|d| d as i64))
            .map(|i| i.clamp(i64::from(i32::MIN), i64::from(i32::MAX)))
    };
    match arg {
        Bson::Array(items) => {
            if items.len() != 2 {
                return Err(Error::location(
                    31272,
                    "$slice array argument should be of form [skip, limit]",
                ));
            }
            let skip = as_int(&items[0]).ok_or_else(|| {
                Error::location(
                    31257,
                    format!(
                        "$slice expects the skip argument to be a number, got {}",
                        type_name(&items[0])
                    ),
                )
            })?;
            let limit = as_int(&items[1]).ok_or_else(|| {
                Error::location(
                    31258,
                    format!(
                        "$slice expects the limit argument to be a number, got {}",
                        type_name(&items[1])
                    ),
                )
            })?;
            if limit <= 0 {
                return Err(Error::location(
                    31259,
                    format!("$slice limit must be positive, got {limit}"),
                ));
            }
            Ok(Node::Slice {
                skip: Some(skip),
                limit,
            })
        }
        _ => match as_int(arg) {
            Some(limit) => Ok(Node::Slice { skip: None, limit }),
            None => Err(Error::location(
                31273,
                "$slice only supports numbers and [skip, limit] arrays",
            )),
        },
    }
}

/// Adds `node` at the dotted `name` under `siblings`, creating intermediate levels and
/// rejecting paths named twice or inside one another.
fn add_node(siblings: &mut Vec<(String, Node)>, name: &str, node: Node) -> Result<()> {
    let components: Vec<String> = basalt_value::path::split_field_path(name)?
        .into_iter()
        .map(str::to_string)
        .collect();
    let mut level = siblings;
    for (i, component) in components.iter().enumerate() {
        let last = i + 1 == components.len();
        let existing = level.iter().position(|(n, _)| n == component);
        if last {
            if existing.is_some() {
                return Err(Error::location(31250, format!("Path collision at {name}")));
            }
            level.push((component.clone(), node));
            return Ok(());
        }
        let index = match existing {
            Some(index) => index,
            None => {
                level.push((component.clone(), Node::Children(Vec::new())));
                level.len() - 1
            }
        };
        level = match &mut level[index].1 {
            Node::Children(children) => children,
            _ => {
                return Err(Error::location(
                    31249,
                    format!(
                        "Path collision at {name} remaining portion {}",
                        components[1..].join(".")
                    ),
                ))
            }
        };
    }
    Ok(())
}

fn contains_positional(nodes: &[(String, Node)]) -> bool {
    nodes.iter().any(|(_, node)| match node {
        Node::Positional => true,
        Node::Children(children) => contains_positional(children),
        _ => false,
    })
}

fn contains_computed(nodes: &[(String, Node)]) -> bool {
    nodes.iter().any(|(_, node)| match node {
        Node::Computed(_) => true,
        Node::Children(children) => contains_computed(children),
        _ => false,
    })
}

fn find<'a>(nodes: &'a [(String, Node)], field: &str) -> Option<&'a Node> {
    nodes.iter().find(|(n, _)| n == field).map(|(_, node)| node)
}

/// The fields of `doc` an inclusion keeps, in document order (computed fields are added
/// afterwards by [`add_computed`]).
fn include(
    nodes: &[(String, Node)],
    doc: &Document,
    root: &Document,
    position: Position,
) -> Result<Document> {
    let mut out = Document::new();
    for (field, value) in doc {
        let Some(node) = find(nodes, field) else {
            continue;
        };
        let projected = match node {
            Node::Include => Some(value.clone()),
            Node::Exclude | Node::Computed(_) => None,
            Node::Children(children) => match value {
                Bson::Document(d) => Some(Bson::Document(include(children, d, root, position)?)),
                Bson::Array(items) => Some(include_array(children, items, root, position)?),
                _ => None,
            },
            Node::Slice { skip, limit } => Some(slice(value, *skip, *limit)),
            Node::ElemMatch(matcher) => matcher
                .match_details(root)?
                .and_then(|m| m.array_position)
                .and_then(|i| match value {
                    Bson::Array(items) => items.get(i).map(|e| Bson::Array(vec![e.clone()])),
                    _ => None,
                }),
            Node::Positional => Some(positional_element(value, position)?),
        };
        if let Some(projected) = projected {
            out.insert(field.clone(), projected);
        }
    }
    Ok(out)
}

/// Arrays met on an inclusion path keep only their projected documents (and nested
/// arrays); the first one on a positional path is cut to the matched element.
fn include_array(
    nodes: &[(String, Node)],
    items: &[Bson],
    root: &Document,
    position: Position,
) -> Result<Bson> {
    let selected: Vec<&Bson> = match position {
        Position::Pending(i) if contains_positional(nodes) => match items.get(i) {
            Some(item) => vec![item],
            None => return Err(positional_not_found()),
        },
        _ => items.iter().collect(),
    };
    let inner = if matches!(position, Position::Pending(_)) && contains_positional(nodes) {
        Position::Used
    } else {
        position
    };
    let mut out = Vec::with_capacity(selected.len());
    for item in selected {
        match item {
            Bson::Document(d) => out.push(Bson::Document(include(nodes, d, root, inner)?)),
            Bson::Array(nested) => out.push(include_array(nodes, nested, root, inner)?),
            _ => {}
        }
    }
    Ok(Bson::Array(out))
}

fn positional_element(value: &Bson, position: Position) -> Result<Bson> {
    match (value, position) {
        (Bson::Array(items), Position::Pending(i)) => items
            .get(i)
            .map(|e| Bson::Array(vec![e.clone()]))
            .ok_or_else(positional_not_found),
        (Bson::Array(_), Position::Unknown) => Err(positional_not_found()),
        _ => Ok(value.clone()),
    }
}

fn positional_not_found() -> Error {
    Error::location(
        51246,
        "positional operator '.$' couldn't find a matching element in the array",
    )
}

/// Sets the computed fields of an inclusion, in projection order, on `out` (the included
/// part of the document at this level); a field whose expression is missing is omitted.
fn add_computed(
    nodes: &[(String, Node)],
    out: &mut Document,
    root: &Document,
    vars: &Variables,
) -> Result<()> {
    for (field, node) in nodes {
        match node {
            Node::Computed(expression) => {
                if let Some(value) = expression.evaluate(root, vars)? {
                    out.insert(field.clone(), value);
                }
            }
            Node::Children(children) if contains_computed(children) => match out.get_mut(field) {
                Some(Bson::Document(d)) => add_computed(children, d, root, vars)?,
                Some(Bson::Array(items)) => {
                    for item in items {
                        if let Bson::Document(d) = item {
                            add_computed(children, d, root, vars)?;
                        }
                    }
                }
                _ => {
                    let mut d = Document::new();
                    add_computed(children, &mut d, root, vars)?;
                    out.insert(field.clone(), d);
                }
            },
            _ => {}
        }
    }
    Ok(())
}

/// The fields of `doc` an exclusion keeps.
fn exclude(nodes: &[(String, Node)], doc: &Document) -> Document {
    let mut out = Document::new();
    for (field, value) in doc {
        let kept = match find(nodes, field) {
            None | Some(Node::Include) => Some(value.clone()),
            Some(Node::Children(children)) => Some(exclude_value(children, value)),
            Some(Node::Slice { skip, limit }) => Some(slice(value, *skip, *limit)),
            Some(_) => None,
        };
        if let Some(kept) = kept {
            out.insert(field.clone(), kept);
        }
    }
    out
}

fn exclude_value(nodes: &[(String, Node)], value: &Bson) -> Bson {
    match value {
        Bson::Document(d) => Bson::Document(exclude(nodes, d)),
        Bson::Array(items) => Bson::Array(items.iter().map(|v| exclude_value(nodes, v)).collect()),
        other => other.clone(),
    }
}

/// `$slice` of an array (other values pass through unchanged).
fn slice(value: &Bson, skip: Option<i64>, limit: i64) -> Bson {
    let Bson::Array(items) = value else {
        return value.clone();
    };
    let len = items.len() as i64;
    let (start, count) = match skip {
        None if limit >= 0 => (0, limit),
        None => (len.saturating_add(limit).max(0), limit.saturating_neg()),
        Some(skip) if skip >= 0 => (skip.min(len), limit),
        Some(skip) => (len.saturating_add(skip).max(0), limit),
    };
    let end = start.saturating_add(count).min(len);
    Bson::Array(items[start as usize..end.max(start) as usize].to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project(spec: Document, doc: Document) -> Document {
        Projection::new(&spec).unwrap().apply(&doc).unwrap()
    }

    fn error(spec: Document) -> Error {
        Projection::new(&spec).unwrap_err()
    }

    #[test]
    fn inclusion_keeps_named_fields_and_id() {
        let d = doc! {"_id": 1, "a": 1, "b": {"c": 1, "d": 2}, "e": 3};
        assert_eq!(project(doc! {"a": 1}, d.clone()), doc! {"_id": 1, "a": 1});
        assert_eq!(
            project(doc! {"a": true, "_id": 0}, d.clone()),
            doc! {"a": 1}
        );
        assert_eq!(
            project(doc! {"b.c": 1}, d.clone()),
            doc! {"_id": 1, "b": {"c": 1}}
        );
        assert_eq!(
            project(doc! {"b": {"d": 1}, "e": 1}, d.clone()),
            doc! {"_id": 1, "b": {"d": 2}, "e": 3}
        );
        assert_eq!(project(doc! {"_id": 1}, d.clone()), doc! {"_id": 1});
        assert_eq!(
            project(
                doc! {"x.y": 1},
                doc! {"_id": 1, "x": [{"y": 1, "z": 2}, 5, [{"y": 3}]]}
            ),
            doc! {"_id": 1, "x": [{"y": 1}, [{"y": 3}]]}
        );
    }

    #[test]
    fn exclusion_drops_named_fields() {
        let d = doc! {"_id": 1, "a": 1, "b": {"c": 1, "d": 2}};
        assert_eq!(
            project(doc! {"a": 0}, d.clone()),
            doc! {"_id": 1, "b": {"c": 1, "d": 2}}
        );
        assert_eq!(
            project(doc! {"b.c": 0, "_id": 0}, d.clone()),
            doc! {"a": 1, "b": {"d": 2}}
        );
        assert_eq!(
            project(doc! {"_id": 0}, d.clone()),
            doc! {"a": 1, "b": {"c": 1, "d": 2}}
        );
        assert_eq!(
            project(doc! {"a": 0, "_id": 1}, d),
            doc! {"_id": 1, "b": {"c": 1, "d": 2}}
        );
        assert_eq!(
            project(doc! {"x.y": 0}, doc! {"x": [{"y": 1, "z": 2}, 5]}),
            doc! {"x": [{"z": 2}, 5]}
        );
    }

    #[test]
    fn mixing_is_rejected() {
        let e = error(doc! {"a": 1, "b": 0});
        assert_eq!(e.code.0, 31254);
        assert_eq!(
            e.message,
            "Cannot do exclusion on field b in inclusion projection"
        );
        let e = error(doc! {"a": 0, "b": 1});
        assert_eq!(e.code.0, 31253);
        assert_eq!(
            e.message,
            "Cannot do inclusion on field b in exclusion projection"
        );
        assert_eq!(error(doc! {"a": 0, "b": "x"}).code.0, 31310);
        assert_eq!(error(doc! {"a": 1, "a.b": 1}).code.0, 31249);
        assert_eq!(error(doc! {"a.b": 1, "a": 1}).code.0, 31250);
        assert_eq!(error(doc! {"$a": 1}).code.0, 16410);
    }

    #[test]
    fn slice() {
        let d = doc! {"_id": 1, "a": [1, 2, 3, 4, 5], "b": 1};
        assert_eq!(
            project(doc! {"a": {"$slice": 2}}, d.clone()),
            doc! {"_id": 1, "a": [1, 2], "b": 1}
        );
        assert_eq!(
            project(doc! {"a": {"$slice": -2}}, d.clone()),
            doc! {"_id": 1, "a": [4, 5], "b": 1}
        );
        assert_eq!(
            project(doc! {"a": {"$slice": [1, 2]}, "_id": 0}, d.clone()),
            doc! {"a": [2, 3], "b": 1}
        );
        assert_eq!(
            project(doc! {"a": {"$slice": [-2, 5]}, "b": 1}, d.clone()),
            doc! {"_id": 1, "a": [4, 5], "b": 1}
        );
        assert_eq!(
            project(doc! {"a": {"$slice": [10, 2]}, "_id": 1}, d.clone()),
            doc! {"_id": 1, "a": []}
        );
        // The extreme longs take the whole array or nothing, without overflowing.
        assert_eq!(
            project(doc! {"a": {"$slice": i64::MIN}, "_id": 0}, d.clone()),
            doc! {"a": [1, 2, 3, 4, 5], "b": 1}
        );
        assert_eq!(
            project(
                doc! {"a": {"$slice": [i64::MAX, i64::MAX]}, "_id": 0},
                d.clone()
            ),
            doc! {"a": [], "b": 1}
        );
        assert_eq!(
            project(doc! {"a": {"$slice": [i64::MIN, i64::MAX]}, "_id": 0}, d),
            doc! {"a": [1, 2, 3, 4, 5], "b": 1}
        );
        assert_eq!(error(doc! {"a": {"$slice": [1, 0]}}).code.0, 31259);
        assert_eq!(error(doc! {"a": {"$slice": "x"}}).code.0, 31273);
        assert_eq!(error(doc! {"a": {"$slice": [1]}}).code.0, 31272);
    }

    #[test]
    fn elem_match() {
        let d = doc! {"_id": 1, "a": [{"b": 1}, {"b": 2}, {"b": 2}], "c": 1};
        assert_eq!(
            project(doc! {"a": {"$elemMatch": {"b": 2}}}, d.clone()),
            doc! {"_id": 1, "a": [{"b": 2}]}
        );
        assert_eq!(
            project(doc! {"a": {"$elemMatch": {"b": 3}}, "c": 1}, d),
            doc! {"_id": 1, "c": 1}
        );
        assert_eq!(error(doc! {"a.b": {"$elemMatch": {"b": 3}}}).code.0, 31275);
        assert_eq!(error(doc! {"a": {"$elemMatch": 1}}).code.0, 31274);
    }

    #[test]
    fn positional() {
        let scope = Scope::new();
        let query = Matcher::new(&doc! {"a.b": 2}).unwrap();
        let p = Projection::with_query(&doc! {"a.$": 1}, &query, &scope).unwrap();
        assert_eq!(
            p.apply(&doc! {"_id": 1, "a": [{"b": 1}, {"b": 2, "c": 3}], "x": 1})
                .unwrap(),
            doc! {"_id": 1, "a": [{"b": 2, "c": 3}]}
        );
        let query = Matcher::new(&doc! {"a.b": 2}).unwrap();
        let p = Projection::with_query(&doc! {"a.b.$": 1}, &query, &scope).unwrap();
        assert_eq!(
            p.apply(&doc! {"_id": 1, "a": [{"b": 1, "c": 0}, {"b": 2, "c": 3}]})
                .unwrap(),
            doc! {"_id": 1, "a": [{"b": 2}]}
        );
        assert_eq!(error(doc! {"a.$": 1}).code.0, 51050);
        let unrelated = Matcher::new(&doc! {"x": 1}).unwrap();
        assert_eq!(
            Projection::with_query(&doc! {"a.$": 1}, &unrelated, &scope)
                .unwrap_err()
                .code
                .0,
            31277
        );
        assert_eq!(
            Projection::with_query(&doc! {"a.$": 1, "b.$": 1}, &query, &scope)
                .unwrap_err()
                .code
                .0,
            31276
        );
        let p = Projection::with_query(
            &doc! {"a.$": 1},
            &Matcher::new(&doc! {"a": {"$size": 1}}).unwrap(),
            &scope,
        )
        .unwrap();
        assert_eq!(p.apply(&doc! {"a": [1]}).unwrap_err().code.0, 51246);
    }

    #[test]
    fn computed_fields() {
        let d = doc! {"_id": 1, "a": {"b": 5}, "c": [{"d": 1}, {"d": 2}]};
        assert_eq!(
            project(
                doc! {"x": "$a.b", "y": "lit", "z": {"$literal": 1}},
                d.clone()
            ),
            doc! {"_id": 1, "x": 5, "y": "lit", "z": 1}
        );
        assert_eq!(
            project(doc! {"ds": "$c.d", "missing": "$nope", "_id": 0}, d.clone()),
            doc! {"ds": [1, 2]}
        );
        assert_eq!(
            project(doc! {"a.k": [1, "$a.b"], "a.b": 1}, d.clone()),
            doc! {"_id": 1, "a": {"b": 5, "k": [1, 5]}}
        );
        assert_eq!(
            project(doc! {"n": {"p": "$a.b", "q": null}, "_id": 0}, d),
            doc! {"n": {"p": 5, "q": null}}
        );
    }

    #[test]
    fn expressions() {
        let d = doc! {"_id": 1, "a": 2, "b": {"c": 3}, "s": "x"};
        assert_eq!(
            project(
                doc! {"sum": {"$add": ["$a", "$b.c"]}, "b.twice": {"$multiply": ["$b.c", 2]}},
                d.clone()
            ),
            doc! {"_id": 1, "sum": 5, "b": {"twice": 6}}
        );
        assert_eq!(
            project(
                doc! {"_id": 0, "o": {"$setField": {"field": {"$literal": "$k"}, "value": "$a", "input": {}}}},
                d.clone()
            ),
            doc! {"o": {"$k": 2}}
        );
        assert_eq!(
            project(
                doc! {"_id": 0, "gone": "$$REMOVE", "r": "$$ROOT.s"},
                d.clone()
            ),
            doc! {"r": "x"}
        );
        assert_eq!(error(doc! {"a": 0, "b": {"$add": [1, 2]}}).code.0, 31252);
        assert_eq!(error(doc! {"b": {"$bogus": 1}}).code.0, 168);
        let p = Projection::new(&doc! {"x": {"$add": ["$s", 1]}}).unwrap();
        assert_eq!(p.apply(&d).unwrap_err().code.0, 14);
    }

    #[test]
    fn let_variables() {
        let scope = Scope::with_let(&doc! {"k": 10}).unwrap();
        let query = Matcher::with_scope(&doc! {}, &scope).unwrap();
        let p = Projection::with_query(
            &doc! {"_id": 0, "x": {"$add": ["$a", "$$k"]}, "k": "$$k"},
            &query,
            &scope,
        )
        .unwrap();
        assert_eq!(p.apply(&doc! {"a": 1}).unwrap(), doc! {"x": 11, "k": 10});
        assert_eq!(error(doc! {"x": "$$k"}).code.0, 17276);
    }
}
