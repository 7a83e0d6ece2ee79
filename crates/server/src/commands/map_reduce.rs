//! `mapReduce`: JavaScript map, reduce and finalize (`basalt_js::MapReduce`) over the
//! documents a `query`, `sort` and `limit` select, with the output inline or written to a
//! collection (`replace`, `merge` or `reduce` into what is there, in this or another
//! database). The reply has mongod's shape plus the `counts` and `timeMillis` of the
//! older servers, which drivers still read when present.

use super::aggregate::collections::ServerCollections;
use super::write_batch::durability;
use super::Ctx;
use crate::exec::{for_each_match, AccessPath, Deadline};
use crate::request::Fields;
use basalt_agg::{Collections, MergeWrite};
use basalt_error::{Error, Result};
use basalt_js::{MapReduce, MapReduceCounts, MapReduceRun};
use basalt_query::{Matcher, SortSpec};
use bson::{doc, Bson, Document};
use std::ops::ControlFlow;
use std::time::Instant;

/// Where the results go.
enum Output {
    Inline,
    Replace { db: String, collection: String },
    Merge { db: String, collection: String },
    Reduce { db: String, collection: String },
}

pub fn map_reduce(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let started = Instant::now();
    let fields = Fields::new(body);
    let name = fields.collection()?;
    let required = |field: &str| {
        body.get(field).ok_or_else(|| {
            Error::location(
                40414,
                format!("BSON field 'mapReduce.{field}' is missing but a required field"),
            )
        })
    };
    let output = parse_output(required("out")?, ctx.db)?;
    let scope = fields.document_opt("scope")?.cloned().unwrap_or_default();
    let scope = with_stored_functions(ctx, scope)?;
    let job = MapReduce::new(
        required("map")?,
        required("reduce")?,
        body.get("finalize").filter(|f| !matches!(f, Bson::Null)),
        &scope,
    )?;
    // Accepted as mongod does; every job runs the same way here.
    fields.bool_or("jsMode", false)?;
    fields.bool_or("verbose", false)?;
    fields.bool_or("bypassDocumentValidation", false)?;
    let filter = fields.document_opt("query")?.cloned().unwrap_or_default();
    let collation = fields.collation()?;
    let limit = fields.i64_opt("limit")?.filter(|l| *l > 0);
    let sort = fields
        .document_opt("sort")?
        .map(|s| SortSpec::new(s).map(|s| s.with_collation(collation.as_ref())))
        .transpose()?;
    let deadline = Deadline::from_max_time_ms(fields.i64_opt("maxTimeMS")?);

    let mut run = job.start();
    map_inputs(
        ctx,
        name,
        &filter,
        collation.as_ref(),
        sort,
        limit,
        deadline,
        &mut run,
    )?;
    let (results, mut counts) = run.finish()?;
    let namespace = format!("{}.{name}", ctx.db);
    let collections = ServerCollections::new(ctx, body, &namespace, deadline, durability(&fields)?);
    let mut finalized = results
        .into_iter()
        .map(|(key, value)| Ok(doc! {"_id": key.clone(), "value": job.finalize(&key, value)?}));
    let result = match &output {
        Output::Inline => {
            let docs = finalized.collect::<Result<Vec<_>>>()?;
            return Ok(reply("results", docs.into(), counts, started));
        }
        Output::Replace { db, collection } => {
            collections.replace_collection(db, collection, &mut finalized)?;
            target(ctx.db, db, collection)
        }
        Output::Merge { db, collection } | Output::Reduce { db, collection } => {
            let mut merge = collections.merge_target(db, collection, &["_id".to_string()])?;
            for doc in finalized {
                let doc = doc?;
                let key = doc! {"_id": doc.get("_id").cloned().unwrap_or(Bson::Null)};
                let reduce_into = matches!(output, Output::Reduce { .. });
                merge.upsert(&key, &mut |existing| {
                    Ok(match existing {
                        None => MergeWrite::Insert(doc.clone()),
                        Some(old) if reduce_into => {
                            let id = key.get("_id").cloned().unwrap_or(Bson::Null);
                            let old_value = old.get("value").cloned().unwrap_or(Bson::Null);
                            let new_value = doc.get("value").cloned().unwrap_or(Bson::Null);
                            let reduced = job.reduce(&id, &[old_value, new_value])?;
                            counts.reduce += 1;
                            let value = job.finalize(&id, reduced)?;
                            MergeWrite::Replace(doc! {"_id": id, "value": value})
                        }
                        Some(_) => MergeWrite::Replace(doc.clone()),
                    })
                })?;
            }
            target(ctx.db, db, collection)
        }
    };
    Ok(reply("result", result, counts, started))
}

fn reply(field: &str, result: Bson, counts: MapReduceCounts, started: Instant) -> Document {
    doc! {
        field: result,
        "timeMillis": started.elapsed().as_millis() as i64,
        "counts": {
            "input": counts.input,
            "emit": counts.emit,
            "reduce": counts.reduce,
            "output": counts.output,
        },
        "ok": 1.0,
    }
}

/// `result`: the collection's name, or `{db, collection}` when it is in another database.
fn target(own_db: &str, db: &str, collection: &str) -> Bson {
    if db == own_db {
        Bson::String(collection.to_string())
    } else {
        Bson::Document(doc! {"db": db, "collection": collection})
    }
}

fn parse_output(out: &Bson, own_db: &str) -> Result<Output> {
    let spec = match out {
        Bson::String(collection) => {
            return Ok(Output::Replace {
                db: own_db.to_string(),
                collection: collection.clone(),
            })
        }
        Bson::Document(spec) => spec,
        _ => return Err(Error::bad_value("'out' has to be a string or an object")),
    };
    if spec.contains_key("inline") {
        return Ok(Output::Inline);
    }
    let db = match spec.get("db") {
        None => own_db.to_string(),
        Some(Bson::String(db)) => db.clone(),
        Some(_) => return Err(Error::bad_value("db must be a string")),
    };
    for (mode, value) in spec {
        let Bson::String(collection) = value else {
            continue;
        };
        let collection = collection.clone();
        match mode.as_str() {
            "replace" => return Ok(Output::Replace { db, collection }),
            "merge" => return Ok(Output::Merge { db, collection }),
            "reduce" => return Ok(Output::Reduce { db, collection }),
            _ => {}
        }
    }
    Err(Error::bad_value(
        "'out' has to be a string or an object with replace, merge, reduce or inline",
    ))
}

/// Maps the documents `query`, `sort` and `limit` select, in that order. Unsorted input
/// streams from the scan into `map`; sorted input is sorted whole first.
#[allow(clippy::too_many_arguments)]
fn map_inputs(
    ctx: &Ctx<'_>,
    name: &str,
    filter: &Document,
    collation: Option<&basalt_value::Collation>,
    sort: Option<SortSpec>,
    limit: Option<i64>,
    deadline: Deadline,
    run: &mut MapReduceRun<'_>,
) -> Result<()> {
    let Some(collection) = ctx.server.catalog.get(ctx.db, name) else {
        return Ok(());
    };
    let matcher = Matcher::new(filter)?.with_collation(collation);
    let path = AccessPath::choose(&collection, filter, collation, None)?;
    let limit = limit.map(|l| l as usize);
    let mut sorted = Vec::new();
    let mut seen = 0usize;
    for_each_match(
        &collection,
        &*collection.snapshot(),
        &matcher,
        &path,
        deadline,
        &mut |_, doc| {
            if sort.is_some() {
                sorted.push(doc);
                return Ok(ControlFlow::Continue(()));
            }
            run.map(&doc)?;
            seen += 1;
            Ok(if limit.is_some_and(|l| seen >= l) {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            })
        },
    )?;
    if let Some(sort) = sort {
        sort.sort_by_document(&mut sorted, |d| d);
        sorted.truncate(limit.unwrap_or(usize::MAX));
        for doc in &sorted {
            deadline.check()?;
            run.map(doc)?;
        }
    }
    Ok(())
}

/// The command's scope with the functions stored in the database's `system.js`
/// (`{_id: name, value: code}`) added, so map, reduce and finalize can call them.
pub(crate) fn with_stored_functions(ctx: &Ctx<'_>, mut scope: Document) -> Result<Document> {
    let Some(stored) = ctx.server.catalog.get(ctx.db, "system.js") else {
        return Ok(scope);
    };
    let everything = Matcher::new(&Document::new())?;
    for_each_match(
        &stored,
        &*stored.snapshot(),
        &everything,
        &AccessPath::CollectionScan,
        Deadline::from_max_time_ms(None),
        &mut |_, doc| {
            if let (Some(Bson::String(name)), Some(value)) = (doc.get("_id"), doc.get("value")) {
                if !scope.contains_key(name) {
                    scope.insert(name.clone(), value.clone());
                }
            }
            Ok(ControlFlow::Continue(()))
        },
    )?;
    Ok(scope)
}
