//! Dotted field paths (`"a.b.0.c"`) and the values they reach in a document.
//!
//! Two readings exist in MongoDB. [`get_path`] is the literal one used by updates and
//! `$getField`-like lookups: each component is a field of a document or, when the current
//! value is an array and the component is a number, an index into it. [`FieldPath::visit`]
//! is the query reading: an array met in the middle of a path is traversed implicitly, so
//! `{"a.b": 1}` matches `{a: [{b: 1}]}`, and a numeric component after an array means both
//! "the element at that index" and "the field with that name in each element". The visit
//! reports values at the end of the path without expanding them, because the consumers
//! differ: the matcher tries an array at the end of the path both whole and element by
//! element, sort keys use only its elements, `$size` only the whole array. It also reports
//! where the path found nothing, because `null` and `$exists` care.

use basalt_error::{Error, Result};
use bson::{Bson, Document};
use std::ops::ControlFlow;

/// The most components a field path may have (MongoDB's).
pub const FIELD_PATH_COMPONENTS_MAX: usize = 200;

/// Splits a field path (without a leading `$`) into its components, checked in
/// MongoDB's order: not empty (40352), not ending with `.` (40353), no empty component
/// (15998), none starting with `$` (16410) or holding a NUL (16411), at most
/// [`FIELD_PATH_COMPONENTS_MAX`] of them (15). Every stage, sort and projection that
/// names a field checks it here.
pub fn split_field_path(path: &str) -> Result<Vec<&str>> {
    if path.is_empty() {
        return Err(Error::location(
            40352,
            "FieldPath cannot be constructed with empty string",
        ));
    }
    if path.ends_with('.') {
        return Err(Error::location(40353, "FieldPath must not end with a '.'."));
    }
    let components: Vec<&str> = path.split('.').collect();
    for component in &components {
        if component.is_empty() {
            return Err(Error::location(
                15998,
                "FieldPath field names may not be empty strings.",
            ));
        }
        if component.starts_with('$') {
            return Err(Error::location(
                16410,
                format!(
                    "FieldPath field names may not start with '$'. Consider using $getField or \
                     $setField. (in '{path}')"
                ),
            ));
        }
        if component.contains('\0') {
            return Err(Error::location(
                16411,
                "FieldPath field names may not contain '\\0'.",
            ));
        }
    }
    if components.len() > FIELD_PATH_COMPONENTS_MAX {
        return Err(Error::location(15, "FieldPath is too long"));
    }
    Ok(components)
}

/// What a path reaches, one occurrence at a time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Reached<'a> {
    /// A value at the end of the path. An array here is reported once, whole.
    Value {
        value: &'a Bson,
        /// Index of the element of the first array the path went through, if any: the
        /// position a positional `$` projection or update refers to.
        array_position: Option<usize>,
    },
    /// The path ended at a document without the field, or ran into a scalar before its
    /// end. Elements of arrays that are not documents report nothing, as in MongoDB 7.0
    /// (so `{"a.b": null}` does not match `{a: [1, 2]}`).
    Missing { array_position: Option<usize> },
}

impl Reached<'_> {
    pub fn array_position(&self) -> Option<usize> {
        match self {
            Reached::Value { array_position, .. } | Reached::Missing { array_position } => {
                *array_position
            }
        }
    }
}

/// A dotted path split into components once, so matching many documents does not re-split.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldPath {
    dotted: String,
    components: Vec<Component>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Component {
    name: String,
    /// Set when the name is a plain decimal number, so it may index an array.
    index: Option<usize>,
}

impl FieldPath {
    pub fn parse(dotted: &str) -> FieldPath {
        let components = dotted
            .split('.')
            .map(|name| Component {
                name: name.to_string(),
                index: array_index(name),
            })
            .collect();
        FieldPath {
            dotted: dotted.to_string(),
            components,
        }
    }

    pub fn as_str(&self) -> &str {
        &self.dotted
    }

    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.components.iter().map(|c| c.name.as_str())
    }

    pub fn len(&self) -> usize {
        self.components.len()
    }

    pub fn is_empty(&self) -> bool {
        self.components.is_empty()
    }

    /// The literal lookup of [`get_path`].
    pub fn get<'a>(&self, doc: &'a Document) -> Option<&'a Bson> {
        let (first, rest) = self.components.split_first()?;
        let mut current = doc.get(&first.name)?;
        for component in rest {
            current = match current {
                Bson::Document(d) => d.get(&component.name)?,
                Bson::Array(items) => items.get(component.index?)?,
                _ => return None,
            };
        }
        Some(current)
    }

    /// Calls `f` for every occurrence the path reaches with implicit array traversal,
    /// stopping early when `f` breaks.
    pub fn visit<'a, B>(
        &self,
        doc: &'a Document,
        f: &mut impl FnMut(Reached<'a>) -> ControlFlow<B>,
    ) -> ControlFlow<B> {
        visit_document(doc, &self.components, None, f)
    }

    /// Every occurrence [`FieldPath::visit`] reports, collected.
    pub fn reached<'a>(&self, doc: &'a Document) -> Vec<Reached<'a>> {
        let mut out = Vec::new();
        let _ = self.visit(doc, &mut |r| {
            out.push(r);
            ControlFlow::<()>::Continue(())
        });
        out
    }
}

/// The value at a dotted path, read literally: components name document fields or, on
/// arrays, numeric indexes. No implicit traversal of arrays.
pub fn get_path<'a>(doc: &'a Document, path: &str) -> Option<&'a Bson> {
    FieldPath::parse(path).get(doc)
}

/// A component MongoDB accepts as an array index: decimal digits only, no sign, and no
/// leading zero unless it is "0" itself (so "01" is only ever a field name).
pub fn array_index(name: &str) -> Option<usize> {
    let digits_only = !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit());
    if !digits_only || (name.len() > 1 && name.starts_with('0')) {
        return None;
    }
    name.parse().ok()
}

fn visit_document<'a, B>(
    doc: &'a Document,
    components: &[Component],
    array_position: Option<usize>,
    f: &mut impl FnMut(Reached<'a>) -> ControlFlow<B>,
) -> ControlFlow<B> {
    let Some((first, rest)) = components.split_first() else {
        debug_assert!(false, "a path has at least one component");
        return ControlFlow::Continue(());
    };
    match doc.get(&first.name) {
        Some(value) => visit_value(value, rest, array_position, f),
        None => f(Reached::Missing { array_position }),
    }
}

/// Continues the path `rest` from `value`, which the path has reached so far.
fn visit_value<'a, B>(
    value: &'a Bson,
    rest: &[Component],
    array_position: Option<usize>,
    f: &mut impl FnMut(Reached<'a>) -> ControlFlow<B>,
) -> ControlFlow<B> {
    let Some(next) = rest.first() else {
        return f(Reached::Value {
            value,
            array_position,
        });
    };
    match value {
        Bson::Document(d) => visit_document(d, rest, array_position, f),
        Bson::Array(items) => {
            if let Some(element) = next.index.and_then(|i| items.get(i)) {
                let position = array_position.or(next.index);
                visit_value(element, &rest[1..], position, f)?;
            }
            for (i, element) in items.iter().enumerate() {
                // Nested arrays and scalars are not traversed implicitly.
                if let Bson::Document(d) = element {
                    visit_document(d, rest, array_position.or(Some(i)), f)?;
                }
            }
            ControlFlow::Continue(())
        }
        _ => f(Reached::Missing { array_position }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{bson, doc};

    fn values(doc: &Document, path: &str) -> Vec<(Option<Bson>, Option<usize>)> {
        FieldPath::parse(path)
            .reached(doc)
            .into_iter()
            .map(|r| match r {
                Reached::Value {
                    value,
                    array_position,
                } => (Some(value.clone()), array_position),
                Reached::Missing { array_position } => (None, array_position),
            })
            .collect()
    }

    #[test]
    fn literal_lookup() {
        let d = doc! {"a": {"b": [10, {"c": 1}]}, "x.y": 1};
        assert_eq!(get_path(&d, "a.b.0"), Some(&Bson::Int32(10)));
        assert_eq!(get_path(&d, "a.b.1.c"), Some(&Bson::Int32(1)));
        assert_eq!(get_path(&d, "a.b.c"), None);
        assert_eq!(get_path(&d, "a.b.01"), None);
        assert_eq!(get_path(&d, "a.z"), None);
        assert_eq!(get_path(&d, "x.y"), None);
    }

    #[test]
    fn arrays_in_the_middle_are_traversed() {
        let d = doc! {"a": [{"b": 1}, {"c": 2}, 5, [{"b": 9}], {"b": [3, 4]}]};
        assert_eq!(
            values(&d, "a.b"),
            vec![
                (Some(bson!(1)), Some(0)),
                (None, Some(1)),
                (Some(bson!([3, 4])), Some(4)),
            ]
        );
    }

    #[test]
    fn numeric_components_index_and_name() {
        let d = doc! {"a": [{"0": "field"}, "second"]};
        assert_eq!(
            values(&d, "a.0"),
            vec![
                (Some(bson!({"0": "field"})), Some(0)),
                (Some(bson!("field")), Some(0)),
            ]
        );
        assert_eq!(
            values(&d, "a.1"),
            vec![(Some(bson!("second")), Some(1)), (None, Some(0))]
        );
    }

    #[test]
    fn missing_and_scalars() {
        assert_eq!(values(&doc! {}, "a.b"), vec![(None, None)]);
        assert_eq!(values(&doc! {"a": 4}, "a.b"), vec![(None, None)]);
        assert_eq!(values(&doc! {"a": [1, 2]}, "a.b"), vec![]);
        assert_eq!(
            values(&doc! {"a": [1, 2]}, "a"),
            vec![(Some(bson!([1, 2])), None)]
        );
    }

    #[test]
    fn first_array_position_is_the_outermost() {
        let d = doc! {"a": [{"b": [{"c": 1}]}, {"b": [{"c": 2}, {"c": 3}]}]};
        let got = values(&d, "a.b.c");
        assert_eq!(got.last(), Some(&(Some(bson!(3)), Some(1))));
    }

    #[test]
    fn visit_stops_early() {
        let d = doc! {"a": [{"b": 1}, {"b": 2}]};
        let mut seen = 0;
        let flow = FieldPath::parse("a.b").visit(&d, &mut |_| {
            seen += 1;
            ControlFlow::Break(())
        });
        assert_eq!(flow, ControlFlow::Break(()));
        assert_eq!(seen, 1);
    }
}
