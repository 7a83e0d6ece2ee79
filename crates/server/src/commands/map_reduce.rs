//! `mapReduce`: JavaScript map, reduce and finalize (`basalt_js::MapReduce`) over the
//! documents a `query`, `sort` and `limit` select, with the output inline or written to a
//! collection (`replace`, `merge` or `reduce` into what is there, in this or another
//! database). The reply has mongod's shape plus the `counts` and `timeMillis` of the
//! older servers, which drivers still read when present.

use super::aggregate::collections::ServerCollections;
use super::write_batch::durability;
use super::Ctx;
use crate::exec::{execute, AccessPath, Deadline, ExecStats, Position, Step};
use crate::request::Fields;
use basalt_agg::{Collections, MergeWrite};
use basalt_error::{Error, ErrorCode, Result};
use basalt_js::{MapReduce, MapReduceCounts, MapReduceRun};
use basalt_query::{Matcher, SortSpec};
use bson::{doc, Bson, Document};
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
    let sort_spec = fields.document_opt("sort")?;
    let sort = sort_spec
        .map(|s| SortSpec::new(s).map(|s| s.with_collation(collation.as_ref())))
        .transpose()?;
    // What `map` reads and the sort orders by is all a collection scan has to decode.
    let read_fields = job.map_fields_read().map(|map_reads| {
        let mut read = map_reads.to_vec();
        for path in sort_spec.iter().flat_map(|s| s.keys()) {
            let top = path.split('.').next().unwrap_or(path);
            if !read.iter().any(|f| f == top) {
                read.push(top.to_string());
            }
        }
        read
    });
    let deadline = ctx.deadline();

    let mut run = job.start();
    map_inputs(
        ctx,
        name,
        &filter,
        collation.as_ref(),
        sort,
        limit,
        deadline.clone(),
        read_fields.as_deref(),
        &mut run,
    )?;
    let (results, mut counts) = run.finish()?;
    let namespace = format!("{}.{name}", ctx.db);
    let collections = ServerCollections::new(
        ctx,
        body,
        &namespace,
        deadline.clone(),
        durability(&fields)?,
    );
    let mut finalized = results
        .into_iter()
        .map(|(key, value)| Ok(doc! {"_id": key.clone(), "value": job.finalize(&key, value)?}));
    let result = match &output {
        Output::Inline => {
            let docs = finalized.collect::<Result<Vec<_>>>()?;
            return Ok(reply("results", docs.into(), counts, started));
        }
        Output::Replace { db, collection } => {
            collections.replace_collection(db, collection, None, &mut finalized)?;
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

/// `out` as mongod parses it, with its errors: a collection name, `{inline: 1}` alone, or
/// one of `replace`, `merge` and `reduce` with an optional `db` (and the accepted, no
/// longer meaningful `sharded: true` and `nonAtomic: true`).
fn parse_output(out: &Bson, own_db: &str) -> Result<Output> {
    let spec = match out {
        Bson::String(collection) => {
            return Ok(Output::Replace {
                db: own_db.to_string(),
                collection: collection.clone(),
            })
        }
        Bson::Document(spec) => spec,
        _ => {
            return Err(Error::bad_value(
                "'out' must be either a string or an object",
            ))
        }
    };
    if let Some(inline) = spec.get("inline") {
        if spec.len() != 1 {
            return Err(Error::new(
                ErrorCode::INVALID_OPTIONS,
                "'inline' must be specified alone",
            ));
        }
        if basalt_value::as_f64(inline) != Some(1.0) {
            return Err(Error::bad_value("'inline' takes only numeric '1'"));
        }
        return Ok(Output::Inline);
    }
    let mut expected_fields = 1;
    for flag in ["sharded", "nonAtomic"] {
        if let Some(value) = spec.get(flag) {
            match value {
                Bson::Boolean(true) => expected_fields += 1,
                Bson::Boolean(false) => {
                    return Err(Error::bad_value(format!("{flag} field value must be true")))
                }
                _ => {
                    return Err(Error::bad_value(format!(
                        "{flag} field value must be boolean"
                    )))
                }
            }
        }
    }
    let Some((mode, collection)) = ["replace", "merge", "reduce"]
        .into_iter()
        .find_map(|mode| spec.get(mode).map(|name| (mode, name)))
    else {
        return Err(Error::bad_value(
            "'out' requires 'replace', 'merge' or 'reduce'",
        ));
    };
    let Bson::String(collection) = collection else {
        return Err(Error::bad_value(format!(
            "'{mode}' supports only string consisting of output collection name"
        )));
    };
    let db = match spec.get("db") {
        None => own_db.to_string(),
        Some(Bson::String(db)) if matches!(db.as_str(), "admin" | "local" | "config") => {
            return Err(Error::new(
                ErrorCode::COMMAND_NOT_SUPPORTED,
                "cannot target internal database as output",
            ))
        }
        Some(Bson::String(db)) => {
            expected_fields += 1;
            db.clone()
        }
        Some(_) => return Err(Error::bad_value("db field value must be string")),
    };
    if spec.len() != expected_fields {
        return Err(Error::bad_value(
            "'out' supports only output type with collection name, optional 'sharded' and \
             optional 'db'",
        ));
    }
    let collection = collection.clone();
    Ok(match mode {
        "replace" => Output::Replace { db, collection },
        "merge" => Output::Merge { db, collection },
        _ => Output::Reduce { db, collection },
    })
}

/// Maps the documents `query`, `sort` and `limit` select, in that order. Unsorted input
/// streams from the scan into `map`; sorted input is sorted whole first. A collection
/// scan decodes only `read_fields` of each document (all with `None`).
#[allow(clippy::too_many_arguments)]
fn map_inputs(
    ctx: &Ctx<'_>,
    name: &str,
    filter: &Document,
    collation: Option<&basalt_value::Collation>,
    sort: Option<SortSpec>,
    limit: Option<i64>,
    deadline: Deadline,
    read_fields: Option<&[String]>,
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
    execute(
        &collection,
        &*collection.snapshot(),
        &matcher,
        &path,
        &mut Position::default(),
        &mut ExecStats::default(),
        deadline.clone(),
        read_fields.into(),
        &mut |_, _, doc| {
            if sort.is_some() {
                sorted.push(doc);
                return Ok(Step::Continue);
            }
            run.map(doc)?;
            seen += 1;
            Ok(if limit.is_some_and(|l| seen >= l) {
                Step::StopAfter
            } else {
                Step::Continue
            })
        },
    )?;
    if let Some(sort) = sort {
        sort.sort_by_document(&mut sorted, |d| d);
        sorted.truncate(limit.unwrap_or(usize::MAX));
        for doc in sorted {
            deadline.check()?;
            run.map(doc)?;
        }
    }
    Ok(())
}
