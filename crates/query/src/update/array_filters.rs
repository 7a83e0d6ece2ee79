//! `arrayFilters`: the conditions that select elements for `$[<identifier>]`.
//!
//! Each filter names one identifier as the first component of all its paths
//! (`{"x.grade": {$gte: 85}}` for `$[x]`); an element is selected when the filter matches
//! a document holding the element under that identifier.

use crate::matcher::Matcher;
use basalt_error::{Error, Result};
use bson::{Bson, Document};
use std::collections::BTreeSet;

#[derive(Clone, Debug, Default)]
pub(crate) struct ArrayFilters {
    filters: Vec<(String, Matcher)>,
}

impl ArrayFilters {
    pub(super) fn parse(filters: &[Document]) -> Result<ArrayFilters> {
        let mut parsed: Vec<(String, Matcher)> = Vec::with_capacity(filters.len());
        for filter in filters {
            let mut names = BTreeSet::new();
            top_level_names(filter, &mut names);
            let mut names = names.into_iter();
            let Some(identifier) = names.next() else {
                return Err(Error::failed_to_parse(
                    "Cannot use an expression without a top-level field name in arrayFilters",
                ));
            };
            if let Some(other) = names.next() {
                return Err(Error::failed_to_parse(format!(
                    "Error parsing array filter :: caused by :: Expected a single top-level \
                     field name, found '{identifier}' and '{other}'"
                )));
            }
            let valid = identifier.starts_with(|c: char| c.is_ascii_lowercase())
                && identifier.chars().all(|c| c.is_ascii_alphanumeric());
            if !valid {
                return Err(Error::failed_to_parse(format!(
                    "Error parsing array filter :: caused by :: The top-level field name must \
                     be an alphanumeric string beginning with a lowercase letter, found \
                     '{identifier}'"
                )));
            }
            if parsed.iter().any(|(id, _)| *id == identifier) {
                return Err(Error::failed_to_parse(format!(
                    "Found multiple array filters with the same top-level field name {identifier}"
                )));
            }
            parsed.push((identifier, Matcher::without_expr(filter)?));
        }
        Ok(ArrayFilters { filters: parsed })
    }

    pub(super) fn contains(&self, identifier: &str) -> bool {
        self.filters.iter().any(|(id, _)| id == identifier)
    }

    /// Whether the filter for `identifier` selects `element`.
    pub(super) fn matches(&self, identifier: &str, element: &Bson) -> bool {
        self.filters
            .iter()
            .find(|(id, _)| id == identifier)
            .is_some_and(|(id, filter)| {
                let mut wrapper = Document::new();
                wrapper.insert(id.clone(), element.clone());
                filter.matches(&wrapper)
            })
    }

    /// Every filter must be used by some `$[<identifier>]` of the update.
    pub(super) fn check_all_used(&self, update: &Document) -> Result<()> {
        let mut used = BTreeSet::new();
        for fields in update.values() {
            if let Bson::Document(fields) = fields {
                for (path, operand) in fields {
                    collect_identifiers(path, &mut used);
                    if let Bson::String(target) = operand {
                        collect_identifiers(target, &mut used);
                    }
                }
            }
        }
        for (identifier, _) in &self.filters {
            if !used.contains(identifier.as_str()) {
                return Err(Error::failed_to_parse(format!(
                    "The array filter for identifier '{identifier}' was not used in the update {}",
                    crate::display::value_to_string(&Bson::Document(update.clone()))
                )));
            }
        }
        Ok(())
    }
}

fn collect_identifiers<'a>(path: &'a str, used: &mut BTreeSet<&'a str>) {
    for component in path.split('.') {
        if let Some(id) = component
            .strip_prefix("$[")
            .and_then(|c| c.strip_suffix(']'))
        {
            used.insert(id);
        }
    }
}

/// The first components of the paths a filter constrains, looking inside `$and`, `$or`
/// and `$nor`.
fn top_level_names(filter: &Document, names: &mut BTreeSet<String>) {
    for (key, value) in filter {
        match key.as_str() {
            "$and" | "$or" | "$nor" => {
                if let Bson::Array(items) = value {
                    for item in items {
                        if let Bson::Document(d) = item {
                            top_level_names(d, names);
                        }
                    }
                }
            }
            k if k.starts_with('$') => {}
            k => {
                names.insert(k.split('.').next().unwrap_or(k).to_string());
            }
        }
    }
}
