//! `delete`: each statement removes the first (`limit: 1`) or every (`limit: 0`)
//! matching document. The command's `let` variables are visible to every filter.

use super::write_batch::{check_batch_size, durability, WriteErrors};
use super::Ctx;
use crate::exec::{collect_matches, let_scope, AccessPath, Deadline};
use crate::request::Fields;
use crate::stats::Stats;
use basalt_error::{Error, Result};
use basalt_expr::Scope;
use basalt_query::{Matcher, SortSpec};
use basalt_storage::Durability;
use basalt_value::Collation;
use bson::{doc, Document};

/// Which documents one delete removes.
pub(super) struct Deletion<'a> {
    pub filter: &'a Document,
    /// The command's variables, which the filter sees.
    pub scope: &'a Scope,
    /// Only the first match (in `sort` order when given) rather than all of them.
    pub first: bool,
    pub sort: Option<&'a SortSpec>,
    /// The statement's collation, for string comparisons in the filter.
    pub collation: Option<&'a Collation>,
}

/// Deletes the documents of `db.name` a deletion selects and returns them.
pub(super) fn delete_matching(
    ctx: &Ctx<'_>,
    name: &str,
    deletion: &Deletion<'_>,
    durability: Durability,
    deadline: Deadline,
) -> Result<Vec<Document>> {
    let Deletion {
        filter,
        scope,
        first,
        sort,
        collation,
    } = *deletion;
    let matcher = Matcher::with_scope(filter, scope)?.with_collation(collation);
    let limit = if first && sort.is_none() {
        Some(1)
    } else {
        None
    };
    let deleted = ctx.server.catalog.write(ctx.db, name, false, |writer| {
        let path = AccessPath::choose(writer.collection(), filter, collation, None)?;
        let mut targets = collect_matches(
            writer.collection(),
            &matcher,
            &path,
            limit,
            deadline.clone(),
        )?;
        if let Some(sort) = sort {
            sort.sort_by_document(&mut targets, |(_, doc)| doc);
            if first {
                targets.truncate(1);
            }
        }
        let mut deleted = Vec::with_capacity(targets.len());
        for (record_id, doc) in targets {
            writer.delete(record_id, &doc, durability)?;
            deleted.push(doc);
        }
        Ok(deleted)
    })?;
    Ok(deleted.unwrap_or_default())
}

pub fn delete(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let fields = Fields::new(body);
    let name = fields.collection()?;
    let statements = fields.documents("deletes")?;
    check_batch_size(statements.len())?;
    let ordered = fields.bool_or("ordered", true)?;
    let durability = durability(&fields)?;
    let deadline = ctx.deadline();
    let scope = let_scope(&fields)?;
    let series = crate::timeseries::get(&ctx.server.catalog, ctx.db, name);
    let mut removed = 0u64;
    let mut errors = WriteErrors::default();
    for (i, statement) in statements.iter().enumerate() {
        let result = parse_statement(statement).and_then(|(filter, first, collation)| {
            // A time-series collection's measurements are deleted from their buckets.
            if let Some((options, buckets)) = &series {
                return crate::timeseries::delete(options, buckets, filter, first, durability)
                    .map(|deleted| deleted.len() as u64);
            }
            let deletion = Deletion {
                filter,
                scope: &scope,
                first,
                sort: None,
                collation: collation.as_ref(),
            };
            delete_matching(ctx, name, &deletion, durability, deadline.clone())
                .map(|deleted| deleted.len() as u64)
        });
        match result {
            Ok(deleted) => removed += deleted,
            Err(e) => {
                errors.push(i, e);
                if ordered {
                    break;
                }
            }
        }
    }
    Stats::add(&ctx.op_counters().delete, removed);
    let mut reply = doc! { "n": removed as i32 };
    errors.add_to(&mut reply);
    Ok(reply)
}

/// The filter of a statement, whether it deletes only the first match, and its
/// collation.
fn parse_statement(statement: &Document) -> Result<(&Document, bool, Option<Collation>)> {
    let fields = Fields {
        command: "delete.deletes",
        body: statement,
    };
    let filter = fields.document_opt("q")?.ok_or_else(|| {
        Error::location(
            40414,
            "BSON field 'delete.deletes.q' is missing but a required field",
        )
    })?;
    let limit = fields.i64_opt("limit")?.ok_or_else(|| {
        Error::location(
            40414,
            "BSON field 'delete.deletes.limit' is missing but a required field",
        )
    })?;
    match limit {
        0 => Ok((filter, false, fields.collation()?)),
        1 => Ok((filter, true, fields.collation()?)),
        other => Err(Error::failed_to_parse(format!(
            "The limit field in delete objects must be 0 or 1. Got {other}"
        ))),
    }
}
