//! `findAndModify`: updates (with an update document or a pipeline), replaces or removes
//! one document and returns it (before or after the change), with sort, projection,
//! upsert and `let` variables.

use super::delete::{delete_matching, Deletion};
use super::update::{execute, Statement, Update};
use super::write_batch::durability;
use super::Ctx;
use crate::exec::let_scope;
use crate::request::Fields;
use crate::stats::Stats;
use basalt_error::{Error, Result};
use basalt_query::{Matcher, Projection, SortSpec};
use bson::{doc, Bson, Document};

pub fn find_and_modify(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let fields = Fields::new(body);
    let name = fields.collection()?;
    let empty = Document::new();
    let filter = fields.document_opt("query")?.unwrap_or(&empty);
    let collation = fields.collation()?;
    let sort = fields
        .document_opt("sort")?
        .filter(|s| !s.is_empty())
        .map(|spec| Ok::<_, Error>(SortSpec::new(spec)?.with_collation(collation.as_ref())))
        .transpose()?;
    let scope = let_scope(&fields)?;
    // The positional `$` of the projection refers to this query.
    let query = Matcher::with_scope(filter, &scope)?;
    let projection = fields
        .document_opt("fields")?
        .filter(|p| !p.is_empty())
        .map(|spec| Projection::with_query(spec, &query, &scope))
        .transpose()?;
    let remove = fields.bool_or("remove", false)?;
    let return_new = fields.bool_or("new", false)?;
    let upsert = fields.bool_or("upsert", false)?;
    let update = body.get("update").filter(|u| !matches!(u, Bson::Null));
    let durability = durability(&fields)?;
    let deadline = ctx.deadline();

    let (value, last_error) = match (remove, update) {
        (true, Some(_)) => {
            return Err(Error::failed_to_parse(
                "Cannot specify both an update and remove=true",
            ))
        }
        (false, None) => {
            return Err(Error::failed_to_parse(
                "Either an update or remove=true must be specified",
            ))
        }
        (true, None) => {
            if upsert {
                return Err(Error::failed_to_parse(
                    "Cannot specify both upsert=true and remove=true ",
                ));
            }
            if return_new {
                return Err(Error::failed_to_parse(
                    "Cannot specify both new=true and remove=true; 'remove' always returns the deleted document",
                ));
            }
            let deletion = Deletion {
                filter,
                scope: &scope,
                first: true,
                sort: sort.as_ref(),
                collation: collation.as_ref(),
            };
            let deleted = match crate::timeseries::get(&ctx.server.catalog, ctx.db, name) {
                // A time-series collection's measurement is removed from its bucket.
                Some((options, buckets)) => {
                    crate::timeseries::delete(&options, &buckets, filter, true, durability)?
                }
                None => delete_matching(ctx, name, &deletion, durability, deadline)?,
            };
            Stats::add(&ctx.op_counters().delete, deleted.len() as u64);
            let n = deleted.len() as i32;
            (deleted.into_iter().next(), doc! { "n": n })
        }
        (false, Some(u)) => {
            let statement = Statement {
                filter,
                scope: &scope,
                update: Update::parse(
                    u,
                    // An array or null, as arguments.rs checked.
                    fields.body.get_array("arrayFilters").ok(),
                    None,
                    fields.document_opt("let")?,
                )?,
                multi: false,
                upsert,
                sort,
                collation: collation.clone(),
                bypass_validation: fields.bool_or("bypassDocumentValidation", false)?,
            };
            let outcome = execute(ctx, name, &statement, durability, deadline)?;
            Stats::add(&ctx.op_counters().update, 1);
            match (outcome.first, outcome.upserted) {
                (Some((before, after)), _) => (
                    Some(if return_new { after } else { before }),
                    doc! { "n": 1, "updatedExisting": true },
                ),
                (None, Some(inserted)) => {
                    let id = inserted.get("_id").cloned().unwrap_or(Bson::Null);
                    (
                        return_new.then_some(inserted),
                        doc! { "n": 1, "updatedExisting": false, "upserted": id },
                    )
                }
                (None, None) => (None, doc! { "n": 0, "updatedExisting": false }),
            }
        }
    };
    let value = match (value, &projection) {
        (Some(doc), Some(p)) => Bson::Document(p.apply(&doc)?),
        (Some(doc), None) => Bson::Document(doc),
        (None, _) => Bson::Null,
    };
    Ok(doc! { "lastErrorObject": last_error, "value": value })
}
