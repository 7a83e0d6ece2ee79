//! A collection's default collation (the `collation` option of `create`): a command
//! that reads or changes its documents without a collation of its own runs under it, as
//! in MongoDB — its filter, sort and string comparisons, and so its choice of index (an
//! index made without a collation takes the collection's, see `create_indexes.rs`).
//! `{locale: "simple"}` in the command opts out.
//!
//! Applied once, before the command runs: the command document gets the collection's
//! collation, and so does each statement of an `update` or `delete` that has none.

use super::Ctx;
use bson::{Bson, Document};

/// Commands whose filters and sorts read a collection under a collation.
const COLLATED_COMMANDS: &[&str] = &[
    "find",
    "aggregate",
    "count",
    "distinct",
    "findAndModify",
    "findandmodify",
    "mapReduce",
    "mapreduce",
];

/// Write commands whose statements each carry their own collation.
const COLLATED_STATEMENTS: &[(&str, &str)] = &[("update", "updates"), ("delete", "deletes")];

/// `body` under its collection's default collation, or `None` when that changes
/// nothing (no such collection, no default collation, or collations of its own).
pub fn with_default_collation(ctx: &Ctx<'_>, body: &Document) -> Option<Document> {
    let (command, target) = body.iter().next()?;
    if command == "explain" {
        let Bson::Document(inner) = target else {
            return None;
        };
        let inner = with_default_collation(ctx, inner)?;
        let mut explained = body.clone();
        explained.insert("explain", inner);
        return Some(explained);
    }
    let statements = COLLATED_STATEMENTS
        .iter()
        .find(|(name, _)| name == command)
        .map(|(_, list)| *list);
    if statements.is_none() && !COLLATED_COMMANDS.contains(&command.as_str()) {
        return None;
    }
    let Bson::String(name) = target else {
        return None;
    };
    let collation = ctx
        .server
        .catalog
        .get(ctx.db, name)?
        .meta()
        .options
        .get_document("collation")
        .ok()?
        .clone();
    let mut defaulted = body.clone();
    match statements {
        None if body.contains_key("collation") => return None,
        None => {
            defaulted.insert("collation", collation);
        }
        Some(list) => {
            let Ok(statements) = defaulted.get_array_mut(list) else {
                return None;
            };
            for statement in statements {
                if let Bson::Document(statement) = statement {
                    if !statement.contains_key("collation") {
                        statement.insert("collation", collation.clone());
                    }
                }
            }
        }
    }
    Some(defaulted)
}
