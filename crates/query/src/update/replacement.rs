//! Replacement-style updates: the new document replaces the old one whole, keeping its
//! `_id` (which a replacement may repeat but not change).

use super::identical;
use crate::display::element_to_string;
use basalt_error::{Error, ErrorCode, Result};
use bson::Document;

/// Top-level field names of a replacement may not start with `$`, which would make them
/// look like update operators.
pub(super) fn validate(replacement: &Document) -> Result<()> {
    match replacement.keys().find(|k| k.starts_with('$')) {
        Some(name) => Err(Error::new(
            ErrorCode::DOLLAR_PREFIXED_FIELD_NAME,
            format!(
                "The dollar ($) prefixed field '{name}' in '{name}' is not allowed in the \
                 context of an update's replacement document. Consider using an aggregation \
                 pipeline with $replaceWith."
            ),
        )),
        None => Ok(()),
    }
}

pub(super) fn apply(replacement: &Document, doc: &mut Document) -> Result<bool> {
    let mut replaced = Document::new();
    match (doc.get("_id"), replacement.get("_id")) {
        (Some(old), Some(new)) if !identical(old, new) => {
            return Err(Error::new(
                ErrorCode::IMMUTABLE_FIELD,
                format!(
                    "After applying the update, the (immutable) field '_id' was found to have \
                     been altered to {}",
                    element_to_string("_id", new)
                ),
            ))
        }
        (Some(id), _) | (None, Some(id)) => {
            replaced.insert("_id", id.clone());
        }
        (None, None) => {}
    }
    for (key, value) in replacement {
        if key != "_id" {
            replaced.insert(key.clone(), value.clone());
        }
    }
    let changed = !identical(
        &bson::Bson::Document(replaced.clone()),
        &bson::Bson::Document(doc.clone()),
    );
    *doc = replaced;
    Ok(changed)
}
