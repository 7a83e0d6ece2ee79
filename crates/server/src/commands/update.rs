//! `update`: each statement modifies the first or every matching document, or inserts
//! one (upsert) when none matches. Also the shared machinery findAndModify uses.
//!
//! A statement holds the collection's write lock from finding its matches to writing
//! them, so no other writer changes a document between the match and the update.

use super::insert::{check_document_size, prepare_for_insert};
use super::write_batch::{check_batch_size, durability, WriteErrors};
use super::Ctx;
use crate::exec::{for_each_match, AccessPath, Deadline};
use crate::request::Fields;
use crate::stats::Stats;
use basalt_catalog::Writer;
use basalt_error::{Error, ErrorCode, Result};
use basalt_query::{upsert_seed, Matcher, SortSpec, UpdateContext, UpdateSpec};
use basalt_storage::Durability;
use bson::{doc, Bson, Document};
use std::ops::ControlFlow;

/// What one update statement did.
#[derive(Default)]
pub(super) struct UpdateOutcome {
    pub matched: u64,
    pub modified: u64,
    /// The first document updated: its version before and after.
    pub first: Option<(Document, Document)>,
    /// The document an upsert inserted.
    pub upserted: Option<Document>,
}

/// One parsed statement: which documents, what change, and how many.
pub(super) struct Statement<'a> {
    pub filter: &'a Document,
    pub update: UpdateSpec,
    pub multi: bool,
    pub upsert: bool,
    pub sort: Option<SortSpec>,
}

/// Runs one statement against `db.name`, creating the collection for an upsert.
pub(super) fn execute(
    ctx: &Ctx<'_>,
    name: &str,
    statement: &Statement<'_>,
    durability: Durability,
    deadline: Deadline,
) -> Result<UpdateOutcome> {
    let matcher = Matcher::new(statement.filter)?;
    let collection = match ctx.server.catalog.get(ctx.db, name) {
        Some(c) => c,
        None if statement.upsert => ctx.server.catalog.get_or_create(ctx.db, name)?,
        None => return Ok(UpdateOutcome::default()),
    };
    let mut writer = collection.writer();
    let targets = find_targets(&writer, &matcher, statement, deadline)?;
    let mut outcome = UpdateOutcome::default();
    for (record_id, before) in targets {
        let mut after = before.clone();
        let context = UpdateContext {
            matched_array_position: matcher
                .match_details(&before)
                .and_then(|m| m.array_position),
            ..UpdateContext::new()
        };
        let changed = statement.update.apply(&mut after, &context)?;
        outcome.matched += 1;
        if changed {
            check_id_unchanged(&before, &after)?;
            check_document_size(&after)?;
            writer.replace(record_id, &before, &after, durability)?;
            outcome.modified += 1;
        }
        if outcome.first.is_none() {
            outcome.first = Some((before, after));
        }
    }
    if outcome.matched == 0 && statement.upsert {
        let inserted = build_upsert(statement)?;
        let result = writer.insert_many(std::slice::from_ref(&inserted), true, durability)?;
        result
            .into_iter()
            .next()
            .unwrap_or_else(|| Err(Error::internal("upsert inserted nothing")))?;
        outcome.upserted = Some(inserted);
    }
    Ok(outcome)
}

/// The records a statement changes, in the order it changes them.
fn find_targets(
    writer: &Writer<'_>,
    matcher: &Matcher,
    statement: &Statement<'_>,
    deadline: Deadline,
) -> Result<Vec<(u64, Document)>> {
    let collection = writer.collection();
    let snapshot = collection.snapshot();
    let path = AccessPath::choose(statement.filter);
    let only_first = !statement.multi && statement.sort.is_none();
    let mut found = Vec::new();
    for_each_match(
        collection,
        &*snapshot,
        matcher,
        &path,
        None,
        deadline,
        &mut |id, doc| {
            found.push((id, doc));
            Ok(if only_first {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            })
        },
    )?;
    if let Some(sort) = &statement.sort {
        sort.sort_by_document(&mut found, |(_, doc)| doc);
        if !statement.multi {
            found.truncate(1);
        }
    }
    Ok(found)
}

/// The document an upsert inserts: the query's equality fields, then the update.
fn build_upsert(statement: &Statement<'_>) -> Result<Document> {
    let mut seeded = upsert_seed(statement.filter)?;
    let context = UpdateContext {
        is_upsert_insert: true,
        ..UpdateContext::new()
    };
    statement.update.apply(&mut seeded, &context)?;
    prepare_for_insert(&seeded)
}

fn check_id_unchanged(before: &Document, after: &Document) -> Result<()> {
    match (before.get("_id"), after.get("_id")) {
        (Some(a), Some(b)) if basalt_value::values_equal(a, b) && a.element_type() == b.element_type() => Ok(()),
        (None, None) => Ok(()),
        (_, after_id) => Err(Error::new(
            ErrorCode::IMMUTABLE_FIELD,
            format!(
                "After applying the update, the (immutable) field '_id' was found to have been altered to _id: {}",
                after_id.map_or("missing".to_string(), |v| v.to_string())
            ),
        )),
    }
}

/// Parses `u` (an update document or a pipeline) with its options.
pub(super) fn parse_update(u: &Bson, array_filters: Option<&Vec<Bson>>) -> Result<UpdateSpec> {
    let filters: Option<Vec<Document>> = array_filters
        .map(|items| {
            items
                .iter()
                .map(|f| match f {
                    Bson::Document(d) => Ok(d.clone()),
                    _ => Err(Error::type_mismatch(
                        "arrayFilters must be an array of objects",
                    )),
                })
                .collect::<Result<Vec<_>>>()
        })
        .transpose()?;
    match u {
        Bson::Document(d) => UpdateSpec::parse(d, filters.as_deref()),
        Bson::Array(_) => Err(Error::new(
            ErrorCode::COMMAND_NOT_SUPPORTED,
            "pipeline-style updates are not supported by Basalt yet",
        )),
        other => Err(Error::failed_to_parse(format!(
            "Update argument must be either an object or an array, not {}",
            crate::request::type_name(other)
        ))),
    }
}

pub fn update(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let fields = Fields::new(body);
    let name = fields.collection()?;
    let statements = fields.documents("updates")?;
    check_batch_size(statements.len())?;
    let ordered = fields.bool_or("ordered", true)?;
    let durability = durability(&fields)?;
    let deadline = Deadline::from_max_time_ms(fields.i64_opt("maxTimeMS")?);
    let (mut matched, mut modified) = (0u64, 0u64);
    let mut upserted = Vec::new();
    let mut errors = WriteErrors::default();
    for (i, raw) in statements.iter().enumerate() {
        let result =
            parse_statement(raw).and_then(|s| execute(ctx, name, &s, durability, deadline));
        match result {
            Ok(outcome) => {
                matched += outcome.matched;
                modified += outcome.modified;
                if let Some(doc) = outcome.upserted {
                    matched += 1;
                    upserted.push(doc! { "index": i as i32, "_id": doc.get("_id").cloned().unwrap_or(Bson::Null) });
                }
            }
            Err(e) => {
                errors.push(i, e);
                if ordered {
                    break;
                }
            }
        }
    }
    Stats::add(&ctx.server.stats.update, statements.len() as u64);
    let mut reply = doc! { "n": matched as i32, "nModified": modified as i32 };
    if !upserted.is_empty() {
        reply.insert("upserted", upserted);
    }
    errors.add_to(&mut reply);
    Ok(reply)
}

fn parse_statement(raw: &Document) -> Result<Statement<'_>> {
    let fields = Fields {
        command: "update.updates",
        body: raw,
    };
    let filter = fields.document_opt("q")?.ok_or_else(|| {
        Error::location(
            40414,
            "BSON field 'update.updates.q' is missing but a required field",
        )
    })?;
    let u = raw.get("u").ok_or_else(|| {
        Error::location(
            40414,
            "BSON field 'update.updates.u' is missing but a required field",
        )
    })?;
    let update = parse_update(u, fields.array_opt("arrayFilters")?)?;
    let multi = fields.bool_or("multi", false)?;
    if multi && matches!(update, UpdateSpec::Replacement(_)) {
        return Err(Error::failed_to_parse(
            "multi update is not supported for replacement-style update",
        ));
    }
    Ok(Statement {
        filter,
        update,
        multi,
        upsert: fields.bool_or("upsert", false)?,
        sort: None,
    })
}
