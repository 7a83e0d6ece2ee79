//! The field trees behind `$project`, `$addFields`/`$set` and `$unset`.
//!
//! A specification is parsed into a tree of field names (dotted paths become nested
//! nodes) whose leaves include, exclude or compute a field. Applying it walks the
//! document and the tree together; documents inside arrays are projected element by
//! element, as MongoDB does. Computed fields see the whole input document, so each
//! expression is evaluated once per document however many array elements receive it.

use basalt_error::{Error, Result};
use basalt_expr::{Expression, ParseContext, Variables};
use bson::{Bson, Document};

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Mode {
    /// Keep only named fields (and `_id`), plus computed ones.
    Inclusion,
    /// Keep everything but the named fields.
    Exclusion,
    /// Keep everything and set the computed fields (`$addFields`/`$set`).
    AddFields,
}

#[derive(Debug)]
pub(crate) struct Projection {
    mode: Mode,
    root: Tree,
    expressions: Vec<Expression>,
}

#[derive(Debug, Default)]
struct Tree {
    fields: Vec<(String, Node)>,
    /// Whether some leaf below computes a value (so the node produces output even where
    /// the input has nothing).
    computes: bool,
}

#[derive(Debug)]
enum Node {
    Include,
    Exclude,
    /// Index into `Projection::expressions`.
    Computed(usize),
    Nested(Tree),
}

impl Tree {
    fn get(&self, name: &str) -> Option<&Node> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, node)| node)
    }

    /// Adds `node` at `path`, creating intermediate nodes.
    fn insert(&mut self, path: &[&str], node: Node, full: &str) -> Result<()> {
        if matches!(node, Node::Computed(_)) {
            self.computes = true;
        }
        let collision = || Error::location(31250, format!("Path collision at {full}"));
        let (first, rest) = path.split_first().expect("paths are not empty");
        let position = self.fields.iter().position(|(n, _)| n == first);
        if rest.is_empty() {
            if position.is_some() {
                return Err(collision());
            }
            self.fields.push((first.to_string(), node));
            return Ok(());
        }
        let index = match position {
            Some(i) => i,
            None => {
                self.fields
                    .push((first.to_string(), Node::Nested(Tree::default())));
                self.fields.len() - 1
            }
        };
        match &mut self.fields[index].1 {
            Node::Nested(child) => child.insert(rest, node, full),
            _ => Err(collision()),
        }
    }
}

/// Splits and checks a projected field path.
fn components(path: &str) -> Result<Vec<&str>> {
    basalt_value::path::split_field_path(path)
}

/// Whether a specification value is an operator expression (`{$op: ...}`) rather than a
/// nested specification.
fn is_operator_object(doc: &Document) -> bool {
    doc.keys().next().is_some_and(|k| k.starts_with('$'))
}

/// What one leaf of a `$project` specification asks for.
enum Leaf {
    Include,
    Exclude,
    Computed(Expression),
}

impl Projection {
    /// Parses a `$project` specification.
    pub fn parse_project(spec: &Document, ctx: &ParseContext) -> Result<Projection> {
        if spec.is_empty() {
            return Err(Error::location(
                51272,
                "Invalid $project :: caused by :: projection specification must have at least one field",
            ));
        }
        let mut leaves = Vec::new();
        collect_project(spec, "", ctx, &mut leaves)?;
        // The first non-_id leaf decides the mode; only `_id` may disagree with it.
        let mode = leaves
            .iter()
            .find(|(path, _)| path != "_id")
            .or(leaves.first())
            .map(|(_, leaf)| match leaf {
                Leaf::Exclude => Mode::Exclusion,
                _ => Mode::Inclusion,
            })
            .unwrap_or(Mode::Inclusion);
        let mut projection = Projection {
            mode,
            root: Tree::default(),
            expressions: Vec::new(),
        };
        let mut id_specified = false;
        for (path, leaf) in leaves {
            let is_id = path == "_id";
            id_specified |= is_id;
            let node = match (mode, leaf) {
                (_, Leaf::Include) if mode == Mode::Exclusion && is_id => continue,
                (Mode::Exclusion, Leaf::Include) => {
                    return Err(Error::location(
                        31253,
                        format!("Invalid $project :: caused by :: Cannot do inclusion on field {path} in exclusion projection"),
                    ))
                }
                (Mode::Exclusion, Leaf::Computed(_)) => {
                    return Err(Error::location(
                        31252,
                        format!("Invalid $project :: caused by :: Cannot use expression other than $meta in exclusion projection (field {path})"),
                    ))
                }
                (Mode::Inclusion, Leaf::Exclude) if !is_id => {
                    return Err(Error::location(
                        31254,
                        format!("Invalid $project :: caused by :: Cannot do exclusion on field {path} in inclusion projection"),
                    ))
                }
                (_, Leaf::Include) => Node::Include,
                (_, Leaf::Exclude) => Node::Exclude,
                (_, Leaf::Computed(e)) => {
                    projection.expressions.push(e);
                    Node::Computed(projection.expressions.len() - 1)
                }
            };
            projection.root.insert(&components(&path)?, node, &path)?;
        }
        if mode == Mode::Inclusion && !id_specified {
            projection
                .root
                .fields
                .insert(0, ("_id".to_string(), Node::Include));
        }
        Ok(projection)
    }

    /// Parses an `$addFields`/`$set` specification: every leaf is an expression.
    pub fn parse_add_fields(spec: &Document, ctx: &ParseContext) -> Result<Projection> {
        let mut projection = Projection {
            mode: Mode::AddFields,
            root: Tree::default(),
            expressions: Vec::new(),
        };
        projection.add_computed(spec, "", ctx)?;
        Ok(projection)
    }

    fn add_computed(&mut self, spec: &Document, prefix: &str, ctx: &ParseContext) -> Result<()> {
        for (key, value) in spec {
            let path = if prefix.is_empty() {
                key.clone()
            } else {
                format!("{prefix}.{key}")
            };
            components(key)?;
            match value {
                Bson::Document(d) if !d.is_empty() && !is_operator_object(d) => {
                    self.add_computed(d, &path, ctx)?
                }
                other => {
                    self.expressions.push(Expression::parse(other, ctx)?);
                    let node = Node::Computed(self.expressions.len() - 1);
                    self.root.insert(&components(&path)?, node, &path)?;
                }
            }
        }
        Ok(())
    }

    /// An exclusion of `paths`, as `$unset` asks.
    pub fn exclusion(paths: &[String]) -> Result<Projection> {
        let mut root = Tree::default();
        for path in paths {
            root.insert(&components(path)?, Node::Exclude, path)?;
        }
        Ok(Projection {
            mode: Mode::Exclusion,
            root,
            expressions: Vec::new(),
        })
    }

    /// The projection as a `find` projection (dotted paths to 1 or 0), when it only
    /// includes or excludes stored fields: a server may then apply it in the scan, to
    /// the fields it decodes, instead of to whole documents. `None` when it computes.
    pub(crate) fn plain_spec(&self) -> Option<Document> {
        fn walk(tree: &Tree, prefix: &str, spec: &mut Document) -> Option<()> {
            for (name, node) in &tree.fields {
                let path = if prefix.is_empty() {
                    name.clone()
                } else {
                    format!("{prefix}.{name}")
                };
                match node {
                    Node::Include => spec.insert(path, 1),
                    Node::Exclude => spec.insert(path, 0),
                    Node::Nested(child) => {
                        walk(child, &path, spec)?;
                        continue;
                    }
                    Node::Computed(_) => return None,
                };
            }
            Some(())
        }
        if self.mode == Mode::AddFields || !self.expressions.is_empty() {
            return None;
        }
        let mut spec = Document::new();
        walk(&self.root, "", &mut spec)?;
        Some(spec)
    }

    pub fn apply(&self, doc: Document, vars: &Variables) -> Result<Document> {
        let values = self
            .expressions
            .iter()
            .map(|e| e.evaluate(&doc, vars))
            .collect::<Result<Vec<_>>>()?;
        Ok(match self.mode {
            Mode::Inclusion => include(&self.root, &doc, &values),
            Mode::Exclusion => exclude(&self.root, doc),
            Mode::AddFields => add_fields(&self.root, doc, &values),
        })
    }
}

fn collect_project(
    spec: &Document,
    prefix: &str,
    ctx: &ParseContext,
    out: &mut Vec<(String, Leaf)>,
) -> Result<()> {
    for (key, value) in spec {
        components(key)?;
        let path = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        let leaf = match value {
            Bson::Boolean(b) => {
                if *b {
                    Leaf::Include
                } else {
                    Leaf::Exclude
                }
            }
            v if basalt_value::is_number(v) => {
                if basalt_expr::truthy(Some(v)) {
                    Leaf::Include
                } else {
                    Leaf::Exclude
                }
            }
            Bson::Document(d) if d.is_empty() => {
                return Err(Error::location(
                    51270,
                    format!("Invalid $project :: caused by :: An empty sub-projection is not a valid value. Found empty object at path {path}"),
                ))
            }
            Bson::Document(d) if !is_operator_object(d) => {
                collect_project(d, &path, ctx, out)?;
                continue;
            }
            other => Leaf::Computed(Expression::parse(other, ctx)?),
        };
        out.push((path, leaf));
    }
    Ok(())
}

fn include(tree: &Tree, doc: &Document, values: &[Option<Bson>]) -> Document {
    let mut out = Document::new();
    for (key, value) in doc {
        match tree.get(key) {
            Some(Node::Include) => {
                out.insert(key.clone(), value.clone());
            }
            Some(Node::Nested(child)) => match value {
                Bson::Document(d) => {
                    out.insert(key.clone(), Bson::Document(include(child, d, values)));
                }
                Bson::Array(items) => {
                    out.insert(
                        key.clone(),
                        Bson::Array(include_array(child, items, values)),
                    );
                }
                _ => {}
            },
            _ => {}
        }
    }
    for (key, node) in &tree.fields {
        match node {
            Node::Computed(i) => {
                if let Some(v) = &values[*i] {
                    out.insert(key.clone(), v.clone());
                }
            }
            Node::Nested(child) if child.computes && !out.contains_key(key) => {
                out.insert(
                    key.clone(),
                    Bson::Document(include(child, &Document::new(), values)),
                );
            }
            _ => {}
        }
    }
    out
}

fn include_array(tree: &Tree, items: &[Bson], values: &[Option<Bson>]) -> Vec<Bson> {
    items
        .iter()
        .filter_map(|item| match item {
            Bson::Document(d) => Some(Bson::Document(include(tree, d, values))),
            Bson::Array(inner) => Some(Bson::Array(include_array(tree, inner, values))),
            _ if tree.computes => Some(Bson::Document(include(tree, &Document::new(), values))),
            _ => None,
        })
        .collect()
}

fn exclude(tree: &Tree, doc: Document) -> Document {
    let mut out = Document::new();
    for (key, value) in doc {
        match tree.get(&key) {
            Some(Node::Exclude) => {}
            Some(Node::Nested(child)) => {
                out.insert(key, exclude_value(child, value));
            }
            _ => {
                out.insert(key, value);
            }
        }
    }
    out
}

fn exclude_value(tree: &Tree, value: Bson) -> Bson {
    match value {
        Bson::Document(d) => Bson::Document(exclude(tree, d)),
        Bson::Array(items) => {
            Bson::Array(items.into_iter().map(|v| exclude_value(tree, v)).collect())
        }
        other => other,
    }
}

fn add_fields(tree: &Tree, mut doc: Document, values: &[Option<Bson>]) -> Document {
    for (key, node) in &tree.fields {
        match node {
            Node::Computed(i) => match &values[*i] {
                Some(v) => {
                    doc.insert(key.clone(), v.clone());
                }
                // A field set to missing (`$$REMOVE`) is removed.
                None => {
                    doc.remove(key);
                }
            },
            Node::Nested(child) => match doc.get_mut(key) {
                Some(slot) => {
                    let current = std::mem::take(slot);
                    *slot = add_fields_value(child, current, values);
                }
                None => {
                    doc.insert(
                        key.clone(),
                        Bson::Document(add_fields(child, Document::new(), values)),
                    );
                }
            },
            Node::Include | Node::Exclude => debug_assert!(false, "$addFields only computes"),
        }
    }
    doc
}

fn add_fields_value(tree: &Tree, value: Bson, values: &[Option<Bson>]) -> Bson {
    match value {
        Bson::Document(d) => Bson::Document(add_fields(tree, d, values)),
        Bson::Array(items) => Bson::Array(
            items
                .into_iter()
                .map(|item| add_fields_value(tree, item, values))
                .collect(),
        ),
        _ => Bson::Document(add_fields(tree, Document::new(), values)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn project(spec: Document, input: Document) -> Result<Document> {
        Projection::parse_project(&spec, &ParseContext::new())?.apply(input, &Variables::new())
    }

    fn add(spec: Document, input: Document) -> Document {
        Projection::parse_add_fields(&spec, &ParseContext::new())
            .unwrap()
            .apply(input, &Variables::new())
            .unwrap()
    }

    #[test]
    fn inclusion_keeps_id_and_input_order() {
        let input =
            doc! {"_id": 1, "a": 1, "b": {"c": 2, "d": 3}, "e": [{"c": 1, "x": 0}, 5, {"x": 1}]};
        assert_eq!(
            project(doc! {"b.c": 1, "a": true}, input.clone()).unwrap(),
            doc! {"_id": 1, "a": 1, "b": {"c": 2}}
        );
        assert_eq!(
            project(doc! {"_id": 0, "e.c": 1}, input.clone()).unwrap(),
            doc! {"e": [{"c": 1}, {}]}
        );
        assert_eq!(
            project(doc! {"b": {"d": 1}}, input.clone()).unwrap(),
            doc! {"_id": 1, "b": {"d": 3}}
        );
        assert_eq!(
            project(
                doc! {"sum": {"$add": ["$a", 1]}, "a": 1, "gone": "$nope"},
                input.clone()
            )
            .unwrap(),
            doc! {"_id": 1, "a": 1, "sum": 2}
        );
        assert_eq!(
            project(doc! {"e.y": {"$literal": 7}, "_id": 0}, input).unwrap(),
            doc! {"e": [{"y": 7}, {"y": 7}, {"y": 7}]}
        );
    }

    #[test]
    fn exclusion_and_unset() {
        let input = doc! {"_id": 1, "a": 1, "b": {"c": 2, "d": 3}, "e": [{"c": 1}, 5]};
        assert_eq!(
            project(doc! {"a": 0, "b.c": 0}, input.clone()).unwrap(),
            doc! {"_id": 1, "b": {"d": 3}, "e": [{"c": 1}, 5]}
        );
        assert_eq!(
            project(doc! {"_id": 0}, input.clone()).unwrap(),
            doc! {"a": 1, "b": {"c": 2, "d": 3}, "e": [{"c": 1}, 5]}
        );
        assert_eq!(
            project(doc! {"e.c": 0, "_id": 1}, input.clone()).unwrap(),
            doc! {"_id": 1, "a": 1, "b": {"c": 2, "d": 3}, "e": [{}, 5]}
        );
        let unset = Projection::exclusion(&["a".to_string(), "b.d".to_string()]).unwrap();
        assert_eq!(
            unset.apply(input, &Variables::new()).unwrap(),
            doc! {"_id": 1, "b": {"c": 2}, "e": [{"c": 1}, 5]}
        );
    }

    #[test]
    fn project_errors() {
        let code = |spec: Document| project(spec, doc! {}).unwrap_err().code.0;
        assert_eq!(code(doc! {}), 51272);
        assert_eq!(code(doc! {"a": 1, "b": 0}), 31254);
        assert_eq!(code(doc! {"a": 0, "b": 1}), 31253);
        assert_eq!(code(doc! {"a": 0, "b": "$x"}), 31252);
        assert_eq!(code(doc! {"a": 1, "a.b": 1}), 31250);
        assert_eq!(code(doc! {"$a": 1}), 16410);
        assert_eq!(code(doc! {"a..b": 1}), 15998);
        assert_eq!(code(doc! {"a": {}}), 51270);
        assert_eq!(code(doc! {"a": {"$foo": 1}}), 168);
    }

    #[test]
    fn add_fields_merges_into_subdocuments() {
        let input = doc! {"_id": 1, "a": {"c": 1}, "n": 5, "arr": [{"x": 1}, 2]};
        assert_eq!(
            add(
                doc! {"a": {"b": 5}, "n": {"$multiply": ["$n", 2]}, "z": "$a.c"},
                input.clone()
            ),
            doc! {"_id": 1, "a": {"c": 1, "b": 5}, "n": 10, "arr": [{"x": 1}, 2], "z": 1}
        );
        assert_eq!(
            add(doc! {"arr.y": "$n", "n": "$$REMOVE"}, input.clone()),
            doc! {"_id": 1, "a": {"c": 1}, "arr": [{"x": 1, "y": 5}, {"y": 5}]}
        );
        assert_eq!(
            add(doc! {"n.m": 1}, input),
            doc! {"_id": 1, "a": {"c": 1}, "n": {"m": 1}, "arr": [{"x": 1}, 2]}
        );
    }
}
