//! Update specifications: operator updates (`{$set: {a: 1}, $inc: {n: 1}}`) and
//! replacement documents, parsed once and applied to each matched document.
//!
//! An operator update is parsed into one tree of paths (see [`tree`]), which is how
//! MongoDB detects conflicting operators (`$set: {a: 1}` with `$inc: {"a.b": 1}`) and why,
//! since MongoDB 5.0, fields are visited in name order (numeric names numerically) rather
//! than in the order the update lists them. Each operator family lives in its own file.
//! Applying reports whether the document changed, which is what `nModified` counts:
//! setting a field to the value it already has is not a change.
//!
//! Pipeline-style updates (an array of stages) run in the aggregation crate, which sits
//! above this one; the server applies their result as a [`UpdateSpec::Replacement`].

mod arithmetic;
mod array;
mod array_filters;
mod field;
mod modifier;
mod replacement;
mod tree;
mod upsert;

pub use upsert::upsert_seed;

use crate::display::{type_name, value_to_string};
use array_filters::ArrayFilters;
use basalt_error::{Error, ErrorCode, Result};
use bson::{Bson, Document};
use modifier::Modifier;
use tree::UpdateTree;

/// A parsed update.
#[derive(Clone, Debug)]
pub enum UpdateSpec {
    /// A document that replaces the matched one (keeping its `_id`).
    Replacement(Document),
    /// Update operators.
    Operators(OperatorUpdate),
}

/// Parsed update operators, ready to apply.
#[derive(Clone, Debug)]
pub struct OperatorUpdate {
    tree: UpdateTree,
    filters: ArrayFilters,
    /// `$rename` pairs (source, target); their values are read before anything changes.
    renames: Vec<(String, String)>,
}

/// What an update needs to know besides the document.
#[derive(Clone, Debug)]
pub struct UpdateContext {
    /// The document is being inserted by an upsert (`$setOnInsert` applies).
    pub is_upsert_insert: bool,
    /// The array position the query matched, for the positional `$`.
    pub matched_array_position: Option<usize>,
    /// The time `$currentDate` sets.
    pub now: bson::DateTime,
}

impl UpdateContext {
    /// A context for updating an existing document, at the current time.
    pub fn new() -> UpdateContext {
        UpdateContext {
            is_upsert_insert: false,
            matched_array_position: None,
            now: basalt_value::clock::now(),
        }
    }
}

impl Default for UpdateContext {
    fn default() -> UpdateContext {
        UpdateContext::new()
    }
}

impl UpdateSpec {
    /// Parses an update document. `array_filters` are the command's `arrayFilters`, which
    /// the `$[<identifier>]` operators of the update refer to.
    pub fn parse(update: &Document, array_filters: Option<&[Document]>) -> Result<UpdateSpec> {
        let is_operators = update.keys().next().is_some_and(|k| k.starts_with('$'));
        if !is_operators {
            if array_filters.is_some_and(|f| !f.is_empty()) {
                return Err(Error::failed_to_parse(
                    "arrayFilters may not be specified for replacement-style updates",
                ));
            }
            replacement::validate(update)?;
            return Ok(UpdateSpec::Replacement(update.clone()));
        }
        let filters = ArrayFilters::parse(array_filters.unwrap_or_default())?;
        let mut tree = UpdateTree::default();
        let mut renames = Vec::new();
        for (operator, fields) in update {
            if !modifier::is_update_operator(operator) {
                return Err(Error::failed_to_parse(format!(
                    "Unknown modifier: {operator}. Expected a valid update modifier or \
                     pipeline-style update specified as an array"
                )));
            }
            let Bson::Document(fields) = fields else {
                return Err(Error::failed_to_parse(format!(
                    "Modifiers operate on fields but we found type {} instead. For example: \
                     {{$mod: {{<field>: ...}}}} not {{{operator}: {}}}",
                    type_name(fields),
                    value_to_string(fields)
                )));
            };
            if fields.is_empty() {
                return Err(Error::failed_to_parse(format!(
                    "'{operator}' is empty. You must specify a field like so: \
                     {{{operator}: {{<field>: ...}}}}"
                )));
            }
            for (path, operand) in fields {
                if operator == "$rename" {
                    let target = field::parse_rename(path, operand)?;
                    tree.insert(path, Modifier::RenameSource, &filters)?;
                    tree.insert(&target, Modifier::RenameTarget(renames.len()), &filters)?;
                    renames.push((path.clone(), target));
                } else {
                    let modifier = Modifier::parse(operator, path, operand)?;
                    tree.insert(path, modifier, &filters)?;
                }
            }
        }
        filters.check_all_used(update)?;
        tree.finish();
        Ok(UpdateSpec::Operators(OperatorUpdate {
            tree,
            filters,
            renames,
        }))
    }

    /// Applies the update to `doc`, returning whether it changed.
    pub fn apply(&self, doc: &mut Document, ctx: &UpdateContext) -> Result<bool> {
        match self {
            UpdateSpec::Replacement(replacement) => replacement::apply(replacement, doc),
            UpdateSpec::Operators(update) => update.apply(doc, ctx),
        }
    }
}

impl OperatorUpdate {
    fn apply(&self, doc: &mut Document, ctx: &UpdateContext) -> Result<bool> {
        let renamed = self
            .renames
            .iter()
            .map(|(source, target)| field::read_rename_source(doc, source, target))
            .collect::<Result<Vec<_>>>()?;
        let mut env = tree::Env {
            ctx,
            filters: &self.filters,
            renamed,
            id: doc.get("_id").cloned(),
        };
        self.tree.apply(doc, &mut env)
    }
}

/// Whether two values are the same BSON, type and bits included (so `1` and `1.0`
/// differ, and a NaN equals itself): setting one over the other is not a change.
pub(crate) fn identical(a: &Bson, b: &Bson) -> bool {
    match (a, b) {
        (Bson::Double(x), Bson::Double(y)) => x.to_bits() == y.to_bits(),
        (Bson::Document(x), Bson::Document(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y.iter())
                    .all(|((kx, vx), (ky, vy))| kx == ky && identical(vx, vy))
        }
        (Bson::Array(x), Bson::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(vx, vy)| identical(vx, vy))
        }
        _ => a == b,
    }
}

/// `{_id: <value>}` as MongoDB names a document in update errors.
pub(crate) fn describe_document(id: Option<&Bson>) -> String {
    match id {
        Some(id) => format!("{{_id: {}}}", value_to_string(id)),
        None => "{}".to_string(),
    }
}

/// The error for updating a field that MongoDB keeps immutable.
pub(crate) fn immutable_field_error(path: &str) -> Error {
    Error::new(
        ErrorCode::IMMUTABLE_FIELD,
        format!("Performing an update on the path '{path}' would modify the immutable field '_id'"),
    )
}

/// Test helper: applies `update` to `doc` with a default context.
#[cfg(test)]
pub(crate) fn run(doc: Document, update: Document) -> Result<(Document, bool)> {
    run_with(doc, update, None, &UpdateContext::new())
}

#[cfg(test)]
pub(crate) fn run_with(
    mut doc: Document,
    update: Document,
    array_filters: Option<&[Document]>,
    ctx: &UpdateContext,
) -> Result<(Document, bool)> {
    let spec = UpdateSpec::parse(&update, array_filters)?;
    let changed = spec.apply(&mut doc, ctx)?;
    Ok((doc, changed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn parse_error(update: Document) -> Error {
        UpdateSpec::parse(&update, None).unwrap_err()
    }

    #[test]
    fn parse_errors() {
        let e = parse_error(doc! {"$foo": {"a": 1}});
        assert_eq!(e.code, ErrorCode::FAILED_TO_PARSE);
        assert_eq!(
            e.message,
            "Unknown modifier: $foo. Expected a valid update modifier or pipeline-style update \
             specified as an array"
        );
        let e = parse_error(doc! {"$set": {}});
        assert_eq!(e.code, ErrorCode::FAILED_TO_PARSE);
        assert_eq!(
            e.message,
            "'$set' is empty. You must specify a field like so: {$set: {<field>: ...}}"
        );
        assert_eq!(
            parse_error(doc! {"$set": 1}).code,
            ErrorCode::FAILED_TO_PARSE
        );
        assert_eq!(
            parse_error(doc! {"$set": {"a": 1}, "b": 2}).code,
            ErrorCode::FAILED_TO_PARSE
        );
        let e = parse_error(doc! {"a": 1, "$set": {"b": 2}});
        assert_eq!(e.code, ErrorCode::DOLLAR_PREFIXED_FIELD_NAME);
    }

    #[test]
    fn conflicts() {
        let e = parse_error(doc! {"$set": {"a": 1}, "$inc": {"a.b": 1}});
        assert_eq!(e.code, ErrorCode::CONFLICTING_UPDATE_OPERATORS);
        assert_eq!(
            e.message,
            "Updating the path 'a.b' would create a conflict at 'a'"
        );
        let e = parse_error(doc! {"$set": {"a.b": 1}, "$unset": {"a": 1}});
        assert_eq!(
            e.message,
            "Updating the path 'a' would create a conflict at 'a'"
        );
        let e = parse_error(doc! {"$set": {"a": 1}, "$inc": {"a": 1}});
        assert_eq!(
            e.message,
            "Updating the path 'a' would create a conflict at 'a'"
        );
        assert!(UpdateSpec::parse(&doc! {"$set": {"a.b": 1, "a.c": 2}}, None).is_ok());
    }

    #[test]
    fn conflicts_found_while_applying() {
        let e = run(doc! {"a": [1, 2]}, doc! {"$set": {"a.$[]": 0, "a.1": 5}}).unwrap_err();
        assert_eq!(e.code, ErrorCode::CONFLICTING_UPDATE_OPERATORS);
        assert_eq!(e.message, "Update created a conflict at 'a.1'");
        let e = run(
            doc! {"x": {"a": [{"b": 1}]}},
            doc! {"$set": {"x.a.$[].b": 0}, "$inc": {"x.a.0.b": 1}},
        )
        .unwrap_err();
        assert_eq!(e.message, "Update created a conflict at 'x.a.0'");
        let (d, _) = run(
            doc! {"a": [{"b": 1}, {"b": 2}]},
            doc! {"$set": {"a.$[].c": 0, "a.1.b": 5}},
        )
        .unwrap();
        assert_eq!(d, doc! {"a": [{"b": 1, "c": 0}, {"b": 5, "c": 0}]});
        // Indexes past the end of the array do not meet `$[]`.
        let (d, _) = run(doc! {"a": [1]}, doc! {"$set": {"a.$[]": 0, "a.2": 5}}).unwrap();
        assert_eq!(d, doc! {"a": [0, null, 5]});
    }

    #[test]
    fn fields_are_created_in_name_order() {
        let (d, changed) = run(
            doc! {"_id": 1},
            doc! {"$set": {"b": 1, "a": 1, "10": 1, "9": 1}, "$inc": {"aa": 1}},
        )
        .unwrap();
        assert!(changed);
        assert_eq!(d, doc! {"_id": 1, "9": 1, "10": 1, "a": 1, "aa": 1, "b": 1});
    }

    #[test]
    fn no_op_updates_are_not_changes() {
        let (_, changed) = run(doc! {"a": 1}, doc! {"$set": {"a": 1}}).unwrap();
        assert!(!changed);
        let (_, changed) = run(doc! {"a": 1}, doc! {"$set": {"a": 1.0}}).unwrap();
        assert!(changed);
        let (_, changed) = run(doc! {"a": 1}, doc! {"$unset": {"b": ""}}).unwrap();
        assert!(!changed);
        let (_, changed) = run(doc! {"a": 1}, doc! {"$inc": {"a": 0}}).unwrap();
        assert!(!changed);
    }

    #[test]
    fn id_is_immutable() {
        let e = run(doc! {"_id": 1}, doc! {"$set": {"_id": 2}}).unwrap_err();
        assert_eq!(e.code, ErrorCode::IMMUTABLE_FIELD);
        assert_eq!(
            e.message,
            "Performing an update on the path '_id' would modify the immutable field '_id'"
        );
        let e = run(doc! {"_id": {"a": 1}}, doc! {"$set": {"_id.a": 2}}).unwrap_err();
        assert_eq!(
            e.message,
            "Performing an update on the path '_id.a' would modify the immutable field '_id'"
        );
        assert!(run(doc! {"_id": 1}, doc! {"$set": {"_id": 1}}).is_ok());
        let e = run(doc! {"_id": 1}, doc! {"$unset": {"_id": 1}}).unwrap_err();
        assert_eq!(e.code, ErrorCode::IMMUTABLE_FIELD);
        // An upsert whose query had no _id may set one.
        assert!(run(doc! {}, doc! {"$set": {"_id": 5}}).is_ok());
    }

    #[test]
    fn replacement() {
        let (d, changed) = run(doc! {"_id": 1, "a": 1}, doc! {"b": 2}).unwrap();
        assert!(changed);
        assert_eq!(d, doc! {"_id": 1, "b": 2});
        let (d, _) = run(doc! {"_id": 1, "a": 1}, doc! {"b": 2, "_id": 1}).unwrap();
        assert_eq!(d, doc! {"_id": 1, "b": 2});
        let (_, changed) = run(doc! {"_id": 1, "a": 1}, doc! {"a": 1}).unwrap();
        assert!(!changed);
        let e = run(doc! {"_id": 1}, doc! {"_id": 2}).unwrap_err();
        assert_eq!(e.code, ErrorCode::IMMUTABLE_FIELD);
        assert_eq!(
            e.message,
            "After applying the update, the (immutable) field '_id' was found to have been \
             altered to _id: 2"
        );
        let filters = [doc! {"x": 1}];
        assert_eq!(
            UpdateSpec::parse(&doc! {"a": 1}, Some(&filters))
                .unwrap_err()
                .code,
            ErrorCode::FAILED_TO_PARSE
        );
    }
}
