//! `update`: each statement modifies the first or every matching document, or inserts
//! one (upsert) when none matches. Also the shared machinery findAndModify uses.
//!
//! A statement holds the collection's write lock from finding its matches to writing
//! them, so no other writer changes a document between the match and the update.
//!
//! The change is an update document (operators or a replacement, `basalt_query`) or, since
//! MongoDB 4.2, a pipeline of reshaping stages (`basalt_agg`) run over the one matched
//! document, whose result then replaces it as a replacement document would. The
//! command's `let` variables are visible to every filter and pipeline.

use super::insert::prepare_for_insert;
use super::write_batch::{check_batch_size, durability, WriteErrors};
use super::Ctx;
use crate::exec::{for_each_match, let_scope, AccessPath, Deadline};
use crate::request::Fields;
use crate::stats::Stats;
use crate::validation::Validator;
use basalt_agg::Pipeline;
use basalt_catalog::Writer;
use basalt_error::{Error, ErrorCode, Result};
use basalt_expr::Scope;
use basalt_query::{upsert_seed, Matcher, SortSpec, UpdateContext, UpdateSpec};
use basalt_storage::Durability;
use basalt_value::Collation;
use bson::{doc, Bson, Document};
use std::ops::ControlFlow;

/// The fields of an update statement in MongoDB 8.0: anything else is refused, as
/// mongod's parser refuses it.
const STATEMENT_FIELDS: [&str; 12] = [
    "q",
    "sort",
    "u",
    "c",
    "arrayFilters",
    "multi",
    "upsert",
    "upsertSupplied",
    "collation",
    "hint",
    "sampleId",
    "$_allowShardKeyUpdatesWithoutFullShardKeyInQuery",
];

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
    /// The command's variables, which the filter sees.
    pub scope: &'a Scope,
    pub update: Update,
    pub multi: bool,
    pub upsert: bool,
    pub sort: Option<SortSpec>,
    /// The statement's collation, for string comparisons in the filter.
    pub collation: Option<Collation>,
    /// `bypassDocumentValidation`: the collection's validator is not applied.
    pub bypass_validation: bool,
}

/// The change a statement makes.
pub(super) enum Update {
    /// Update operators or a replacement document.
    Document(UpdateSpec),
    /// A pipeline of reshaping stages whose result replaces the document.
    Pipeline(Box<Pipeline>),
}

impl Update {
    /// Parses `u` with the options that go with it: `arrayFilters` for update operators,
    /// and for a pipeline the statement's constants `c` and the command's `let`.
    pub(super) fn parse(
        u: &Bson,
        array_filters: Option<&Vec<Bson>>,
        constants: Option<&Document>,
        let_vars: Option<&Document>,
    ) -> Result<Update> {
        match u {
            Bson::Document(d) => {
                if constants.is_some() {
                    return Err(Error::location(
                        51198,
                        "Constant values may only be specified for pipeline updates",
                    ));
                }
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
                Ok(Update::Document(UpdateSpec::parse(d, filters.as_deref())?))
            }
            Bson::Array(stages) => {
                if array_filters.is_some_and(|f| !f.is_empty()) {
                    return Err(Error::failed_to_parse(
                        "arrayFilters may not be specified for pipeline-style updates",
                    ));
                }
                parse_pipeline(stages, constants, let_vars).map(|p| Update::Pipeline(Box::new(p)))
            }
            other => Err(Error::failed_to_parse(format!(
                "Update argument must be either an object or an array, not {}",
                crate::request::type_name(other)
            ))),
        }
    }

    fn is_replacement(&self) -> bool {
        matches!(self, Update::Document(UpdateSpec::Replacement(_)))
    }

    /// Applies the change to `doc`, returning whether it changed.
    fn apply(&self, doc: &mut Document, context: &UpdateContext) -> Result<bool> {
        match self {
            Update::Document(spec) => spec.apply(doc, context),
            Update::Pipeline(pipeline) => {
                let mut results = pipeline.run(std::iter::once(Ok(doc.clone())))?;
                let replacement = match (results.pop(), results.is_empty()) {
                    (Some(replacement), true) => replacement,
                    _ => {
                        return Err(Error::internal(
                            "an update pipeline must produce exactly one document",
                        ))
                    }
                };
                // Like a replacement document, except that `$`-prefixed top-level fields
                // (set with `$setField`) are allowed; `_id` is kept and may not change.
                UpdateSpec::Replacement(replacement).apply(doc, context)
            }
        }
    }
}

/// Parses an update pipeline (only stages that reshape the one document are allowed).
/// The statement's constants are values, not expressions, so they join the `let`
/// variables as literals.
fn parse_pipeline(
    stages: &[Bson],
    constants: Option<&Document>,
    let_vars: Option<&Document>,
) -> Result<Pipeline> {
    let stages = basalt_agg::stage_documents(stages)?;
    let variables = match constants {
        None => let_vars.cloned(),
        Some(constants) => {
            let mut all = let_vars.cloned().unwrap_or_default();
            for (name, value) in constants {
                all.insert(name.clone(), doc! { "$literal": value.clone() });
            }
            Some(all)
        }
    };
    Pipeline::parse_update(&stages, variables.as_ref())
}

/// Runs one statement against `db.name`, creating the collection for an upsert.
pub(super) fn execute(
    ctx: &Ctx<'_>,
    name: &str,
    statement: &Statement<'_>,
    durability: Durability,
    deadline: Deadline,
) -> Result<UpdateOutcome> {
    let matcher = Matcher::with_scope(statement.filter, statement.scope)?
        .with_collation(statement.collation.as_ref());
    let outcome = ctx
        .server
        .catalog
        .write(ctx.db, name, statement.upsert, |writer| {
            apply_statement(writer, &matcher, statement, durability, deadline.clone())
        })?;
    Ok(outcome.unwrap_or_default())
}

/// Applies a statement to the collection whose write lock `writer` holds.
fn apply_statement(
    writer: &mut Writer<'_>,
    matcher: &Matcher,
    statement: &Statement<'_>,
    durability: Durability,
    deadline: Deadline,
) -> Result<UpdateOutcome> {
    let targets = find_targets(writer, matcher, statement, deadline)?;
    let validator = Validator::of(&writer.collection().meta(), statement.bypass_validation)?;
    let mut outcome = UpdateOutcome::default();
    for (record_id, before) in targets {
        let mut after = before.clone();
        let context = UpdateContext {
            matched_array_position: matcher
                .match_details(&before)?
                .and_then(|m| m.array_position),
            now: statement.scope.values.now(),
            ..UpdateContext::new()
        };
        let changed = statement.update.apply(&mut after, &context)?;
        outcome.matched += 1;
        if changed {
            check_id_unchanged(&before, &after)?;
            check_updated_size(&after)?;
            if let Some(validator) = &validator {
                validator.check_update(&before, &after)?;
            }
            let mut replace = || writer.replace(record_id, &before, &after, durability);
            if statement.update.is_replacement() {
                // Its oplog record is the whole new document (a `replace` change event).
                basalt_catalog::oplog::replacing(replace)?;
            } else {
                replace()?;
            }
            outcome.modified += 1;
        }
        if outcome.first.is_none() {
            outcome.first = Some((before, after));
        }
    }
    if outcome.matched == 0 && statement.upsert {
        let inserted = build_upsert(statement)?;
        if let Some(validator) = &validator {
            validator.check_new(&inserted)?;
        }
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
    let path = AccessPath::choose(
        collection,
        statement.filter,
        statement.collation.as_ref(),
        None,
    )?;
    let only_first = !statement.multi && statement.sort.is_none();
    let mut found = Vec::new();
    for_each_match(
        collection,
        &*snapshot,
        matcher,
        &path,
        deadline,
        None,
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
        now: statement.scope.values.now(),
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

/// An updated document must still fit in BSON's 16 MB, with MongoDB's error.
fn check_updated_size(doc: &Document) -> Result<()> {
    if basalt_value::document_size_bytes(doc) > basalt_wire::MAX_BSON_OBJECT_SIZE_BYTES {
        return Err(Error::new(
            ErrorCode::BSON_OBJECT_TOO_LARGE,
            format!(
                "Resulting document after update is larger than {}",
                basalt_wire::MAX_BSON_OBJECT_SIZE_BYTES
            ),
        ));
    }
    Ok(())
}

pub fn update(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let fields = Fields::new(body);
    let name = fields.collection()?;
    let statements = fields.documents("updates")?;
    check_batch_size(statements.len())?;
    let ordered = fields.bool_or("ordered", true)?;
    let durability = durability(&fields)?;
    let bypass_validation = fields.bool_or("bypassDocumentValidation", false)?;
    let deadline = ctx.deadline();
    let scope = let_scope(&fields)?;
    let let_vars = fields.document_opt("let")?;
    // mongod parses every statement with the command, so an unknown field fails the
    // whole command before anything is written.
    for raw in &statements {
        if let Some(unknown) = raw.keys().find(|k| !STATEMENT_FIELDS.contains(&k.as_str())) {
            return Err(Error::location(
                40415,
                format!("BSON field 'update.updates.{unknown}' is an unknown field."),
            ));
        }
    }
    let (mut matched, mut modified) = (0u64, 0u64);
    let mut upserted = Vec::new();
    let mut errors = WriteErrors::default();
    let series = crate::timeseries::get(&ctx.server.catalog, ctx.db, name);
    for (i, raw) in statements.iter().enumerate() {
        // A time-series collection's measurements change through their buckets' meta.
        if let Some((options, buckets)) = &series {
            match crate::timeseries::update_meta(options, buckets, raw, durability) {
                Ok((n, changed)) => {
                    matched += n;
                    modified += changed;
                }
                Err(e) => {
                    errors.push(i, e);
                    if ordered {
                        break;
                    }
                }
            }
            continue;
        }
        let result = parse_statement(raw, &scope, let_vars).and_then(|statement| {
            let statement = Statement {
                bypass_validation,
                ..statement
            };
            execute(ctx, name, &statement, durability, deadline.clone())
        });
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
    Stats::add(&ctx.op_counters().update, statements.len() as u64);
    let mut reply = doc! { "n": matched as i32, "nModified": modified as i32 };
    if !upserted.is_empty() {
        reply.insert("upserted", upserted);
    }
    errors.add_to(&mut reply);
    Ok(reply)
}

fn parse_statement<'a>(
    raw: &'a Document,
    scope: &'a Scope,
    let_vars: Option<&Document>,
) -> Result<Statement<'a>> {
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
    let update = Update::parse(
        u,
        fields.array_opt("arrayFilters")?,
        fields.document_opt("c")?,
        let_vars,
    )?;
    let multi = fields.bool_or("multi", false)?;
    if multi && update.is_replacement() {
        return Err(Error::failed_to_parse(
            "multi update is not supported for replacement-style update",
        ));
    }
    let collation = fields.collation()?;
    // 8.0's `sort`: which of the matches a single-document update changes.
    let sort = fields.document_opt("sort")?.filter(|spec| !spec.is_empty());
    if multi && sort.is_some() {
        return Err(Error::failed_to_parse(
            "The 'sort' option cannot be used with multi-document updates",
        ));
    }
    let sort = sort
        .map(|spec| Ok::<_, Error>(SortSpec::new(spec)?.with_collation(collation.as_ref())))
        .transpose()?;
    Ok(Statement {
        filter,
        scope,
        update,
        multi,
        upsert: fields.bool_or("upsert", false)?,
        sort,
        collation,
        bypass_validation: false,
    })
}
