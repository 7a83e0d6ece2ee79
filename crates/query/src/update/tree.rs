//! The tree of paths an operator update touches, and its application to a document.
//!
//! Paths are parsed into components: field names (which also index arrays when numeric),
//! the positional `$` (the element the query matched), `$[]` (every element) and
//! `$[<identifier>]` (the elements an array filter selects). Two operators on the same
//! path, or on paths one of which contains the other, conflict. Applying walks the tree
//! and the document together, creating missing parents only for operators that create
//! fields (`$set` does, `$unset` does not).

use super::array_filters::ArrayFilters;
use super::modifier::{Modifier, Outcome, Target};
use super::{identical, immutable_field_error};
use crate::display::element_to_string;
use basalt_error::{Error, ErrorCode, Result};
use bson::{Bson, Document};

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Component {
    Field(String),
    /// `$`
    Positional,
    /// `$[]`
    AllElements,
    /// `$[<identifier>]`
    Filtered(String),
}

impl Component {
    fn text(&self) -> String {
        match self {
            Component::Field(name) => name.clone(),
            Component::Positional => "$".to_string(),
            Component::AllElements => "$[]".to_string(),
            Component::Filtered(id) => format!("$[{id}]"),
        }
    }

    /// Application order: numeric field names numerically, then other names bytewise,
    /// then the positional forms.
    fn order_key(&self) -> (u8, u64, &str) {
        match self {
            Component::Field(name) => match name.parse::<u64>() {
                Ok(n) if !name.starts_with('+') => (0, n, name),
                _ => (1, 0, name),
            },
            Component::Positional => (2, 0, ""),
            Component::AllElements => (3, 0, ""),
            Component::Filtered(id) => (4, 0, id),
        }
    }
}

/// Parses and checks an update path such as `a.$[x].b`.
fn parse_path(path: &str, filters: &ArrayFilters) -> Result<Vec<Component>> {
    if path.is_empty() {
        return Err(Error::new(
            ErrorCode::EMPTY_FIELD_NAME,
            "An empty update path is not valid.",
        ));
    }
    let mut components = Vec::new();
    let mut positional_count = 0;
    for (i, part) in path.split('.').enumerate() {
        if part.is_empty() {
            return Err(Error::new(
                ErrorCode::EMPTY_FIELD_NAME,
                format!(
                    "The update path '{path}' contains an empty field name, which is not allowed."
                ),
            ));
        }
        let component = if part == "$" {
            positional_count += 1;
            Component::Positional
        } else if part == "$[]" {
            Component::AllElements
        } else if let Some(id) = part.strip_prefix("$[").and_then(|p| p.strip_suffix(']')) {
            if !filters.contains(id) {
                return Err(Error::bad_value(format!(
                    "No array filter found for identifier '{id}' in path '{path}'"
                )));
            }
            Component::Filtered(id.to_string())
        } else if part.starts_with('$') {
            return Err(Error::new(
                ErrorCode::DOLLAR_PREFIXED_FIELD_NAME,
                format!(
                    "The dollar ($) prefixed field '{part}' in '{path}' is not valid for storage."
                ),
            ));
        } else {
            Component::Field(part.to_string())
        };
        if i == 0 {
            match component {
                Component::Positional => {
                    return Err(Error::bad_value(format!(
                        "Cannot have positional (i.e. '$') element in the first position in path '{path}'"
                    )))
                }
                Component::AllElements | Component::Filtered(_) => {
                    return Err(Error::bad_value(format!(
                        "Cannot have array filter identifier (i.e. '$[<id>]') element in the first position in path '{path}'"
                    )))
                }
                Component::Field(_) => {}
            }
        }
        components.push(component);
    }
    if positional_count > 1 {
        return Err(Error::bad_value(format!(
            "Too many positional (i.e. '$') elements found in path '{path}'"
        )));
    }
    Ok(components)
}

#[derive(Clone, Debug, Default)]
pub(super) struct UpdateTree {
    root: Node,
}

#[derive(Clone, Debug, Default)]
struct Node {
    modifier: Option<Modifier>,
    children: Vec<(Component, Node)>,
}

/// Per-document state while applying.
pub(super) struct Env<'a> {
    pub ctx: &'a super::UpdateContext,
    pub filters: &'a ArrayFilters,
    /// The values `$rename` sources held before the update, by rename index.
    pub renamed: Vec<Option<Bson>>,
    /// The document's `_id` before the update, if it had one (it may not change).
    pub id: Option<Bson>,
}

impl UpdateTree {
    /// Adds `modifier` at `path`, rejecting paths that collide with earlier ones.
    pub(super) fn insert(
        &mut self,
        path: &str,
        modifier: Modifier,
        filters: &ArrayFilters,
    ) -> Result<()> {
        let components = parse_path(path, filters)?;
        let conflict = |upto: usize| {
            let at: Vec<String> = components[..upto].iter().map(Component::text).collect();
            Error::new(
                ErrorCode::CONFLICTING_UPDATE_OPERATORS,
                format!(
                    "Updating the path '{path}' would create a conflict at '{}'",
                    at.join(".")
                ),
            )
        };
        let mut node = &mut self.root;
        for (i, component) in components.iter().enumerate() {
            if node.modifier.is_some() {
                return Err(conflict(i));
            }
            let index = match node.children.iter().position(|(c, _)| c == component) {
                Some(index) => index,
                None => {
                    node.children.push((component.clone(), Node::default()));
                    node.children.len() - 1
                }
            };
            node = &mut node.children[index].1;
        }
        if node.modifier.is_some() || !node.children.is_empty() {
            return Err(conflict(components.len()));
        }
        node.modifier = Some(modifier);
        Ok(())
    }

    /// Orders every level for application, once parsing is complete.
    pub(super) fn finish(&mut self) {
        self.root.sort();
    }

    pub(super) fn apply(&self, doc: &mut Document, env: &mut Env) -> Result<bool> {
        apply_document(&self.root, doc, env, &mut Vec::new())
    }
}

impl Node {
    fn sort(&mut self) {
        self.children
            .sort_by(|(a, _), (b, _)| a.order_key().cmp(&b.order_key()));
        for (_, child) in &mut self.children {
            child.sort();
        }
    }

    /// Whether applying this subtree to a missing field would create it.
    fn creates(&self, env: &Env) -> bool {
        self.modifier.as_ref().is_some_and(|m| m.creates(env))
            || self.children.iter().any(|(_, child)| child.creates(env))
    }

    /// Whether two subtrees applied to the same element would update one path twice
    /// (`a.$[]` and `a.0`); subtrees on different fields below it (`a.$[].x` and
    /// `a.0.y`) do not collide. Array components are compared as written, so a collision
    /// only visible in the data below a second array is not detected.
    fn collides_with(&self, other: &Node) -> bool {
        self.modifier.is_some()
            || other.modifier.is_some()
            || self.children.iter().any(|(c, child)| {
                other
                    .children
                    .iter()
                    .any(|(d, theirs)| c == d && child.collides_with(theirs))
            })
    }

    fn has_array_children(&self) -> bool {
        self.children
            .iter()
            .any(|(c, _)| !matches!(c, Component::Field(_)))
    }
}

fn apply_document(
    node: &Node,
    doc: &mut Document,
    env: &mut Env,
    path: &mut Vec<String>,
) -> Result<bool> {
    let mut changed = false;
    for (component, child) in &node.children {
        match component {
            Component::Field(name) => {
                path.push(name.clone());
                changed |= apply_to_field(child, doc, name, env, path)?;
                path.pop();
            }
            _ if !child.creates(env) => {}
            Component::Positional => return Err(positional_not_found()),
            _ => {
                let name = path.last().cloned().unwrap_or_default();
                return Err(Error::bad_value(format!(
                    "Cannot apply array updates to non-array element {}",
                    element_to_string(&name, &Bson::Document(doc.clone()))
                )));
            }
        }
    }
    Ok(changed)
}

fn apply_array(
    node: &Node,
    items: &mut Vec<Bson>,
    env: &mut Env,
    path: &mut Vec<String>,
) -> Result<bool> {
    // Which elements each child updates is decided on the array as it was, as MongoDB
    // does; two children updating one element must not collide below it.
    let mut targets: Vec<(usize, &Node)> = Vec::new();
    for (component, child) in &node.children {
        let indexes: Vec<usize> = match component {
            Component::Field(name) => match basalt_value::path::array_index(name) {
                Some(index) => vec![index],
                None if child.creates(env) => {
                    let parent = path.last().cloned().unwrap_or_default();
                    return Err(Error::new(
                        ErrorCode::PATH_NOT_VIABLE,
                        format!(
                            "Cannot create field '{name}' in element {{{}}}",
                            element_to_string(&parent, &Bson::Array(items.clone()))
                        ),
                    ));
                }
                None => continue,
            },
            Component::Positional => {
                vec![env
                    .ctx
                    .matched_array_position
                    .ok_or_else(positional_not_found)?]
            }
            Component::AllElements => (0..items.len()).collect(),
            Component::Filtered(id) => (0..items.len())
                .filter(|&i| env.filters.matches(id, &items[i]))
                .collect(),
        };
        for index in indexes {
            if targets
                .iter()
                .any(|(i, other)| *i == index && other.collides_with(child))
            {
                return Err(Error::new(
                    ErrorCode::CONFLICTING_UPDATE_OPERATORS,
                    format!(
                        "Update created a conflict at '{}'",
                        path.iter()
                            .cloned()
                            .chain([index.to_string()])
                            .collect::<Vec<_>>()
                            .join(".")
                    ),
                ));
            }
            targets.push((index, child));
        }
    }
    let mut changed = false;
    for (index, child) in targets {
        path.push(index.to_string());
        changed |= apply_to_element(child, items, index, env, path)?;
        path.pop();
    }
    Ok(changed)
}

/// Applies `node` to the field `name` of `doc`.
fn apply_to_field(
    node: &Node,
    doc: &mut Document,
    name: &str,
    env: &mut Env,
    path: &mut Vec<String>,
) -> Result<bool> {
    if let Some(modifier) = &node.modifier {
        let outcome = run_modifier(modifier, doc.get(name), name, env, path)?;
        return Ok(match outcome {
            Outcome::Keep => false,
            Outcome::Set(value) => {
                doc.insert(name, value);
                true
            }
            Outcome::Remove => doc.remove(name).is_some(),
        });
    }
    match doc.get_mut(name) {
        Some(existing) => descend(node, existing, name, env, path),
        None if node.creates(env) => {
            if node.has_array_children() {
                return Err(array_path_missing(path));
            }
            let mut created = Document::new();
            apply_document(node, &mut created, env, path)?;
            doc.insert(name, created);
            Ok(true)
        }
        None => Ok(false),
    }
}

/// Applies `node` to element `index` of `items`; setting past the end pads with nulls and
/// removing an element leaves null in its place, as MongoDB does.
fn apply_to_element(
    node: &Node,
    items: &mut Vec<Bson>,
    index: usize,
    env: &mut Env,
    path: &mut Vec<String>,
) -> Result<bool> {
    let name = index.to_string();
    if let Some(modifier) = &node.modifier {
        let outcome = run_modifier(modifier, items.get(index), &name, env, path)?;
        return Ok(match outcome {
            Outcome::Keep => false,
            Outcome::Set(value) => {
                if index >= items.len() {
                    items.resize(index + 1, Bson::Null);
                }
                items[index] = value;
                true
            }
            Outcome::Remove => match items.get_mut(index) {
                Some(slot) if *slot != Bson::Null => {
                    *slot = Bson::Null;
                    true
                }
                _ => false,
            },
        });
    }
    match items.get_mut(index) {
        Some(existing) => descend(node, existing, &name, env, path),
        None if node.creates(env) => {
            if node.has_array_children() {
                return Err(array_path_missing(path));
            }
            let mut created = Document::new();
            apply_document(node, &mut created, env, path)?;
            items.resize(index, Bson::Null);
            items.push(Bson::Document(created));
            Ok(true)
        }
        None => Ok(false),
    }
}

/// Continues below an existing value that the path goes through.
fn descend(
    node: &Node,
    existing: &mut Bson,
    name: &str,
    env: &mut Env,
    path: &mut Vec<String>,
) -> Result<bool> {
    match existing {
        Bson::Document(d) => apply_document(node, d, env, path),
        Bson::Array(items) => apply_array(node, items, env, path),
        other if node.creates(env) => {
            let next = node
                .children
                .first()
                .map(|(c, _)| c.text())
                .unwrap_or_default();
            Err(Error::new(
                ErrorCode::PATH_NOT_VIABLE,
                format!(
                    "Cannot create field '{next}' in element {{{}}}",
                    element_to_string(name, other)
                ),
            ))
        }
        _ => Ok(false),
    }
}

fn run_modifier(
    modifier: &Modifier,
    existing: Option<&Bson>,
    field: &str,
    env: &Env,
    path: &[String],
) -> Result<Outcome> {
    let dotted = path.join(".");
    let outcome = modifier.apply(
        existing,
        &Target {
            field,
            path: &dotted,
        },
        env,
    )?;
    let changes = match (&outcome, existing) {
        (Outcome::Keep, _) | (Outcome::Remove, None) => false,
        (Outcome::Set(new), Some(old)) => !identical(new, old),
        _ => true,
    };
    if !changes {
        return Ok(Outcome::Keep);
    }
    if path.first().map(String::as_str) == Some("_id") && env.id.is_some() {
        return Err(immutable_field_error(&dotted));
    }
    Ok(outcome)
}

fn positional_not_found() -> Error {
    Error::bad_value("The positional operator did not find the match needed from the query.")
}

fn array_path_missing(path: &[String]) -> Error {
    Error::bad_value(format!(
        "The path '{}' must exist in the document in order to apply array updates.",
        path.join(".")
    ))
}

#[cfg(test)]
mod tests {
    use crate::update::{run, run_with, UpdateContext, UpdateSpec};
    use basalt_error::ErrorCode;
    use bson::{doc, Document};

    fn at(position: usize) -> UpdateContext {
        UpdateContext {
            matched_array_position: Some(position),
            ..UpdateContext::new()
        }
    }

    #[test]
    fn positional_operator() {
        let (d, _) = run_with(
            doc! {"a": [{"b": 1}, {"b": 2}]},
            doc! {"$set": {"a.$.b": 9}},
            None,
            &at(1),
        )
        .unwrap();
        assert_eq!(d, doc! {"a": [{"b": 1}, {"b": 9}]});
        let (d, _) =
            run_with(doc! {"a": [1, 2]}, doc! {"$inc": {"a.$": 10}}, None, &at(0)).unwrap();
        assert_eq!(d, doc! {"a": [11, 2]});
        let e = run(doc! {"a": [1]}, doc! {"$set": {"a.$": 1}}).unwrap_err();
        assert_eq!(
            e.message,
            "The positional operator did not find the match needed from the query."
        );
    }

    #[test]
    fn all_elements() {
        let (d, _) = run(
            doc! {"a": [{"b": 1}, {"b": 2}], "c": [1, 2]},
            doc! {"$inc": {"a.$[].b": 1, "c.$[]": 10}},
        )
        .unwrap();
        assert_eq!(d, doc! {"a": [{"b": 2}, {"b": 3}], "c": [11, 12]});
        let e = run(doc! {}, doc! {"$set": {"a.$[]": 1}}).unwrap_err();
        assert_eq!(
            e.message,
            "The path 'a' must exist in the document in order to apply array updates."
        );
        let e = run(doc! {"a": {"b": 1}}, doc! {"$set": {"a.$[]": 1}}).unwrap_err();
        assert_eq!(
            e.message,
            "Cannot apply array updates to non-array element a: { b: 1 }"
        );
    }

    #[test]
    fn array_filters() {
        let filters = [doc! {"x.g": {"$gte": 5}}, doc! {"y": 1}];
        let (d, _) = run_with(
            doc! {"a": [{"g": 4}, {"g": 6}], "b": [1, 2, 1]},
            doc! {"$set": {"a.$[x].ok": true, "b.$[y]": 0}},
            Some(&filters),
            &UpdateContext::new(),
        )
        .unwrap();
        assert_eq!(
            d,
            doc! {"a": [{"g": 4}, {"g": 6, "ok": true}], "b": [0, 2, 0]}
        );
        let parse = |update: Document, filters: &[Document]| {
            UpdateSpec::parse(&update, Some(filters)).unwrap_err()
        };
        let e = parse(doc! {"$set": {"a.$[z]": 1}}, &[doc! {"x": 1}]);
        assert_eq!(
            e.message,
            "No array filter found for identifier 'z' in path 'a.$[z]'"
        );
        let e = parse(doc! {"$set": {"a": 1}}, &[doc! {"x": 1}]);
        assert_eq!(e.code, ErrorCode::FAILED_TO_PARSE);
        assert!(e
            .message
            .starts_with("The array filter for identifier 'x' was not used"));
        let e = parse(
            doc! {"$set": {"a.$[x]": 1}},
            &[doc! {"x": 1}, doc! {"x": 2}],
        );
        assert_eq!(
            e.message,
            "Found multiple array filters with the same top-level field name x"
        );
        let e = parse(doc! {"$set": {"a.$[X]": 1}}, &[doc! {"X": 1}]);
        assert!(e
            .message
            .contains("must be an alphanumeric string beginning with a lowercase letter"));
        let e = parse(doc! {"$set": {"a.$[x]": 1}}, &[doc! {"x": 1, "y": 1}]);
        assert!(e
            .message
            .contains("Expected a single top-level field name, found 'x' and 'y'"));
    }

    #[test]
    fn path_errors() {
        let err = |u| UpdateSpec::parse(&u, None).unwrap_err();
        let e = err(doc! {"$set": {"": 1}});
        assert_eq!(e.code, ErrorCode::EMPTY_FIELD_NAME);
        let e = err(doc! {"$set": {"a..b": 1}});
        assert_eq!(
            e.message,
            "The update path 'a..b' contains an empty field name, which is not allowed."
        );
        assert_eq!(
            err(doc! {"$set": {"$": 1}}).message,
            "Cannot have positional (i.e. '$') element in the first position in path '$'"
        );
        assert_eq!(
            err(doc! {"$set": {"a.$.b.$": 1}}).message,
            "Too many positional (i.e. '$') elements found in path 'a.$.b.$'"
        );
        assert_eq!(
            err(doc! {"$set": {"a.$b": 1}}).code,
            ErrorCode::DOLLAR_PREFIXED_FIELD_NAME
        );
    }
}
