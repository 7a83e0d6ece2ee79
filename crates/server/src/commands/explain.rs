//! `explain`: how `find`, `aggregate`, `count`, `distinct`, `update` and `delete` would
//! find their documents, in MongoDB's shape (`queryPlanner.winningPlan` as a stage tree,
//! `rejectedPlans`, and with more verbosity `executionStats` from actually running the
//! read side — never the writes of an update or delete).

use super::Ctx;
use crate::exec::{covers, execute, plan_choice, AccessPath, Deadline, ExecStats, Position, Step};
use crate::request::Fields;
use crate::COMPATIBLE_MONGODB_VERSION;
use basalt_error::{Error, ErrorCode, Result};
use basalt_plan::Plan;
use basalt_query::Matcher;
use basalt_value::Collation;
use bson::{doc, Bson, Document};
use std::time::Instant;

/// MongoDB runs each candidate plan for a trial of this many results when it compares
/// them; allPlansExecution reports that trial for the rejected plans.
const TRIAL_RESULTS_MAX: u64 = 101;
/// A blocking SORT stage's memory limit as MongoDB reports it.
const SORT_MEMORY_LIMIT_BYTES: i64 = 100 * 1024 * 1024;

#[derive(Clone, Copy, PartialEq, PartialOrd)]
enum Verbosity {
    QueryPlanner,
    ExecutionStats,
    AllPlansExecution,
}

/// The read side of the explained command.
struct Query<'a> {
    collection: &'a str,
    filter: Document,
    hint: Option<&'a Bson>,
    sort: Option<&'a Document>,
    projection: Option<&'a Document>,
    skip: u64,
    limit: Option<u64>,
    /// The stage above the plan for counts and writes (COUNT, UPDATE, DELETE).
    root: Option<&'static str>,
    /// Aggregation stages after the leading `$match`, which run outside the plan.
    rest_of_pipeline: Option<Vec<Bson>>,
    /// The top-level fields the command reads of each match (`None`: whole documents),
    /// which decide whether an index scan is covered.
    reads: Option<Vec<String>>,
    /// The paths a column store's chunks would give the command besides its filter's: a
    /// sort's (to rank the matches) or a distinct's key.
    column_reads: Vec<String>,
    /// A find's `min` and `max`, which fix its plan to a scan of the hinted index.
    min_max: Option<super::find::MinMax<'a>>,
}

pub fn explain(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let inner = match body.get("explain") {
        Some(Bson::Document(inner)) => inner,
        _ => {
            return Err(Error::type_mismatch(
                "BSON field 'explain.explain' is the wrong type, expected type 'object'",
            ))
        }
    };
    let verbosity = match body.get("verbosity") {
        None | Some(Bson::Null) => Verbosity::AllPlansExecution,
        Some(Bson::String(v)) if v == "queryPlanner" => Verbosity::QueryPlanner,
        Some(Bson::String(v)) if v == "executionStats" => Verbosity::ExecutionStats,
        Some(Bson::String(v)) if v == "allPlansExecution" => Verbosity::AllPlansExecution,
        Some(Bson::String(_)) => {
            return Err(Error::bad_value(
                "verbosity string must be one of {'queryPlanner', 'executionStats', 'allPlansExecution'}",
            ))
        }
        Some(other) => {
            return Err(Error::type_mismatch(format!(
                "BSON field 'explain.verbosity' is the wrong type '{}', expected type 'string'",
                crate::request::type_name(other)
            )))
        }
    };
    let mut query = parse_query(inner)?;
    let fields = Fields::new(inner);
    let collation = fields.collation()?;
    let namespace = format!("{}.{}", ctx.db, query.collection);
    let plan_cache_shape = crate::query_shape::plan_cache_shape_hash(
        &query.filter,
        query.sort,
        query.projection,
        inner.get_document("collation").ok(),
        query.rest_of_pipeline.as_deref().unwrap_or_default(),
    );
    let mut planner = doc! {
        "namespace": namespace,
        "indexFilterSet": false,
        "parsedQuery": query.filter.clone(),
        "planCacheShapeHash": &plan_cache_shape,
        "queryHash": &plan_cache_shape,
        "maxIndexedOrSolutionsReached": false,
        "maxIndexedAndSolutionsReached": false,
        "maxScansToExplodeReached": false,
    };
    let mut execution = None;
    match ctx.server.catalog.get(ctx.db, query.collection) {
        None => {
            planner.insert("winningPlan", doc! { "stage": "EOF" });
            planner.insert("rejectedPlans", Vec::<Bson>::new());
            if verbosity >= Verbosity::ExecutionStats {
                execution = Some(doc! {
                    "executionSuccess": true,
                    "nReturned": 0,
                    "executionTimeMillis": 0,
                    "totalKeysExamined": 0,
                    "totalDocsExamined": 0,
                    "executionStages": { "stage": "EOF", "nReturned": 0 },
                });
            }
        }
        Some(collection) => {
            let filtered = crate::exec::filtered_indexes(
                &collection,
                &query.filter,
                query.sort,
                collation.as_ref(),
                query.projection,
            );
            planner.insert("indexFilterSet", filtered.is_some());
            let (choice, index_sorted) = match query.min_max {
                Some((min, max)) => {
                    let indexes = &collection.meta().indexes;
                    let scan = basalt_plan::min_max_scan(indexes, query.hint, min, max)?;
                    let winner = Plan::IndexScan(Box::new(scan));
                    let rejected = Vec::new();
                    (basalt_plan::PlanChoice { winner, rejected }, false)
                }
                None => plan_choice(
                    &collection,
                    &query.filter,
                    collation.as_ref(),
                    query.hint,
                    query.sort,
                    query.projection,
                )?,
            };
            if index_sorted {
                // The index scan returns documents in order: no SORT stage.
                query.sort = None;
            }
            // A blocking sort reads its fields of each document too, as find runs it.
            query.reads = query
                .reads
                .take()
                .map(|reads| super::find::with_sort_fields(reads, query.sort));
            let matcher = Matcher::new(&query.filter)?.with_collation(collation.as_ref());
            if let Some(rest) = &query.rest_of_pipeline {
                query.reads = parse_rest(rest, &fields, collation.as_ref())?
                    .1
                    .input_fields()
                    .map(<[String]>::to_vec);
            }
            // A find through a column store index fetches what its chunks select.
            let column = match (&filtered, query.min_max, index_sorted) {
                (None, None, false) => crate::column_scan::find_path(
                    &collection,
                    &query.filter,
                    collation.as_ref(),
                    query.hint,
                    &query.column_reads,
                    (&choice.winner).into(),
                ),
                _ => None,
            };
            let mut column = column;
            if let Some(find) = &mut column {
                let keep = query.limit.map(|limit| (limit + query.skip) as usize);
                crate::column_scan::rank_first(find, query.sort, keep);
            }
            let column_stage = column
                .as_ref()
                .map(|find| crate::column_scan::find_stage(&collection, find))
                .transpose()?;
            let winner_path = match column {
                Some(find) => AccessPath::Columns(Box::new(find)),
                None => AccessPath::from(choice.winner.clone()),
            };
            let winner = |run: Option<&Run>| match &column_stage {
                Some(stage) => query.column_stages(stage, run),
                None => query.stages(&choice.winner, &matcher, run),
            };
            planner.insert("winningPlan", winner(None));
            if let Some(rest) = &query.rest_of_pipeline {
                let mut specs = vec![doc! {"$match": query.filter.clone()}];
                specs.extend(basalt_agg::stage_documents(rest)?);
                let column = crate::column_scan::explain(
                    &collection,
                    &specs,
                    fields.document_opt("let")?,
                    query.hint,
                    (&choice.winner).into(),
                )?;
                if let Some(column) = column {
                    planner.insert("winningPlan", column);
                }
            }
            planner.insert(
                "rejectedPlans",
                choice
                    .rejected
                    .iter()
                    .map(|p| Bson::Document(query.stages(p, &matcher, None)))
                    .collect::<Vec<_>>(),
            );
            if verbosity >= Verbosity::ExecutionStats {
                let wanted = match query.sort {
                    Some(_) => None,
                    None => query.limit.map(|l| l + query.skip),
                };
                let run = run_plan(&collection, &matcher, &winner_path, wanted, &query)?;
                let mut stats = doc! {
                    "executionSuccess": true,
                    "nReturned": run.returned as i64,
                    "executionTimeMillis": run.millis,
                    "totalKeysExamined": run.stats.keys_examined as i64,
                    "totalDocsExamined": run.stats.docs_examined as i64,
                    "executionStages": winner(Some(&run)),
                };
                if verbosity == Verbosity::AllPlansExecution {
                    let mut all = Vec::new();
                    let trials = std::iter::once((winner_path.clone(), None))
                        .chain(choice.rejected.iter().map(|p| (p.clone().into(), Some(p))));
                    for (path, rejected) in trials {
                        let trial = run_plan(
                            &collection,
                            &matcher,
                            &path,
                            Some(TRIAL_RESULTS_MAX),
                            &query,
                        )?;
                        let stages = match rejected {
                            Some(plan) => query.stages(plan, &matcher, Some(&trial)),
                            None => winner(Some(&trial)),
                        };
                        all.push(Bson::Document(doc! {
                            "nReturned": trial.returned as i64,
                            "executionTimeMillisEstimate": trial.millis,
                            "totalKeysExamined": trial.stats.keys_examined as i64,
                            "totalDocsExamined": trial.stats.docs_examined as i64,
                            "executionStages": stages,
                        }));
                    }
                    stats.insert("allPlansExecution", all);
                }
                execution = Some(stats);
            }
        }
    }
    let mut cursor_stage = doc! { "queryPlanner": planner };
    if let Some(execution) = execution {
        cursor_stage.insert("executionStats", execution);
    }
    let mut reply = doc! { "explainVersion": "1" };
    if let Some(hash) = crate::query_shape::query_shape_hash(ctx.db, inner) {
        reply.insert("queryShapeHash", hash);
    }
    match &query.rest_of_pipeline {
        Some(rest) if !rest.is_empty() => {
            let mut stages = vec![Bson::Document(doc! { "$cursor": cursor_stage })];
            stages.extend(rest.iter().cloned());
            reply.insert("stages", stages);
        }
        _ => reply.extend(cursor_stage),
    }
    if let Some(split) = split_pipeline(ctx, &query, inner)? {
        reply.insert("splitPipeline", split);
    }
    let mut command = inner.clone();
    command.insert("$db", ctx.db);
    reply.insert("command", command);
    reply.insert(
        "serverInfo",
        doc! {
            "host": crate::commands::host_info::host_name(),
            "port": i32::from(ctx.server.options.port),
            "version": COMPATIBLE_MONGODB_VERSION,
            "gitVersion": "basalt",
        },
    );
    reply.insert("ok", 1.0);
    Ok(reply)
}

fn parse_query(inner: &Document) -> Result<Query<'_>> {
    let fields = Fields::new(inner);
    let Some(command) = inner.keys().next() else {
        return Err(Error::bad_value("explain needs a command to explain"));
    };
    // The explained command's arguments are checked as when it runs.
    super::arguments::check(command, inner)?;
    let mut query = Query {
        collection: "",
        filter: Document::new(),
        hint: inner.get("hint"),
        sort: None,
        projection: None,
        skip: 0,
        limit: None,
        root: None,
        rest_of_pipeline: None,
        reads: None,
        column_reads: Vec::new(),
        min_max: None,
    };
    match command.as_str() {
        "find" => {
            // Refused as the find itself would refuse them.
            super::find::check_fields(inner, fields.collection()?, false)?;
            query.filter = fields.document_opt("filter")?.cloned().unwrap_or_default();
            query.sort = fields.document_opt("sort")?.filter(|s| !s.is_empty());
            query.projection = fields.document_opt("projection")?.filter(|p| !p.is_empty());
            query.skip = fields.non_negative_opt("skip")?.unwrap_or(0) as u64;
            query.limit = fields
                .non_negative_opt("limit")?
                .filter(|n| *n > 0)
                .map(|n| n as u64);
            query.reads = query.projection.and_then(super::find::projected_fields);
            query.min_max = super::find::min_max(&fields)?;
            query.column_reads = query
                .sort
                .and_then(basalt_agg::ColumnPlan::sort_paths)
                .unwrap_or_default();
        }
        "count" | "distinct" => {
            query.filter = fields.document_opt("query")?.cloned().unwrap_or_default();
            query.reads = Some(match fields.string_opt("key")? {
                Some(key) => vec![key.split('.').next().unwrap_or(key).to_string()],
                None => Vec::new(),
            });
            query.column_reads = fields
                .string_opt("key")?
                .map(str::to_string)
                .into_iter()
                .collect();
            if command == "count" {
                query.root = Some("COUNT");
                query.skip = super::count::count_skip(&fields)? as u64;
                query.limit = super::count::count_limit(&fields)?.map(|l| l as u64);
            }
        }
        "update" | "delete" => {
            let (list, root) = if command == "update" {
                ("updates", "UPDATE")
            } else {
                ("deletes", "DELETE")
            };
            let statements = fields.documents(list)?;
            let [statement] = statements.as_slice() else {
                return Err(Error::new(
                    ErrorCode::INVALID_LENGTH,
                    format!("explained {command} must have exactly one statement in '{list}'"),
                ));
            };
            query.filter = Fields::new(statement)
                .document_opt("q")?
                .cloned()
                .unwrap_or_default();
            query.hint = statement.get("hint");
            query.root = Some(root);
        }
        "aggregate" => {
            let mut stages = fields.array_opt("pipeline")?.cloned().unwrap_or_default();
            // Shown as they run: after the optimizer's rewrites (a time-series read's
            // `$match` inside its unpacking as `eventFilter`, fused `$project` + `$group`).
            if let Ok(specs) = basalt_agg::stage_documents(&stages) {
                stages = basalt_agg::optimize(specs)
                    .into_iter()
                    .map(Bson::Document)
                    .collect();
            }
            let leading_match = match stages.first() {
                Some(Bson::Document(stage)) if stage.len() == 1 => match stage.get("$match") {
                    Some(Bson::Document(filter)) => Some(filter.clone()),
                    _ => None,
                },
                _ => None,
            };
            if let Some(filter) = leading_match {
                query.filter = filter;
                stages.remove(0);
            }
            query.rest_of_pipeline = Some(stages);
        }
        other => {
            return Err(Error::new(
                ErrorCode::COMMAND_NOT_SUPPORTED,
                format!("Explain for the {other} command is not supported"),
            ))
        }
    }
    query.collection = fields.collection()?;
    Ok(query)
}

/// What running a plan did.
struct Run {
    returned: u64,
    matched: u64,
    stats: ExecStats,
    millis: i64,
}

/// Runs the read side of `plan`, stopping after `wanted` matches when given.
fn run_plan(
    collection: &basalt_catalog::Collection,
    matcher: &Matcher,
    path: &AccessPath,
    wanted: Option<u64>,
    query: &Query<'_>,
) -> Result<Run> {
    let started = Instant::now();
    let snapshot = collection.snapshot();
    let mut stats = ExecStats::default();
    let mut matched = 0u64;
    execute(
        collection,
        &*snapshot,
        matcher,
        path,
        &mut Position::default(),
        &mut stats,
        Deadline::from_max_time_ms(None),
        query.reads.as_deref().into(),
        &mut |_, _, _| {
            matched += 1;
            Ok(if wanted.is_some_and(|w| matched >= w) {
                Step::StopAfter
            } else {
                Step::Continue
            })
        },
    )?;
    let after_skip = matched.saturating_sub(query.skip);
    Ok(Run {
        returned: query.limit.map_or(after_skip, |l| after_skip.min(l)),
        matched,
        stats,
        millis: started.elapsed().as_millis() as i64,
    })
}

impl Query<'_> {
    /// Whether the command would run `plan` from index entries alone.
    fn is_covered(&self, plan: &Plan, matcher: &Matcher) -> bool {
        match plan {
            Plan::IndexScan(scan) => covers(&scan.index, matcher, self.reads.as_deref().into()),
            _ => false,
        }
    }

    /// The stage tree of a plan, annotated with execution figures when `run` is given.
    fn stages(&self, plan: &Plan, matcher: &Matcher, run: Option<&Run>) -> Document {
        let covered = self.is_covered(plan, matcher);
        let annotate = |stage: Document, returned: u64| annotated(stage, returned, run);
        let stage = match plan {
            Plan::CollectionScan => {
                let mut scan = plan.to_explain(&self.filter);
                if let Some(run) = run {
                    scan.insert("docsExamined", run.stats.docs_examined as i64);
                }
                annotate(scan, run.map_or(0, |r| r.matched))
            }
            Plan::IndexScan(_) | Plan::Or(_) => {
                let mut scan = plan.scan_stage();
                if let (Some(run), Plan::IndexScan(_)) = (run, plan) {
                    scan.insert("keysExamined", run.stats.keys_examined as i64);
                }
                if covered {
                    // The entries' values answer the filter and the command: no FETCH.
                    if !self.filter.is_empty() {
                        scan.insert("filter", self.filter.clone());
                    }
                    annotate(scan, run.map_or(0, |r| r.matched))
                } else {
                    let scan = annotate(scan, run.map_or(0, |r| r.stats.docs_examined));
                    let mut fetch = doc! { "stage": "FETCH" };
                    if !self.filter.is_empty() {
                        fetch.insert("filter", self.filter.clone());
                    }
                    if let Some(run) = run {
                        fetch.insert("docsExamined", run.stats.docs_examined as i64);
                    }
                    fetch.insert("inputStage", scan);
                    annotate(fetch, run.map_or(0, |r| r.matched))
                }
            }
        };
        self.outer_stages(stage, covered, run)
    }

    /// The stage tree of a find through a column store index: a FETCH of the records
    /// its `COLUMN_SCAN` selects (or scans, where it does not serve).
    fn column_stages(&self, column_scan: &Document, run: Option<&Run>) -> Document {
        let mut fetch = doc! { "stage": "FETCH" };
        if !self.filter.is_empty() {
            fetch.insert("filter", self.filter.clone());
        }
        if let Some(run) = run {
            fetch.insert("docsExamined", run.stats.docs_examined as i64);
        }
        fetch.insert("inputStage", column_scan.clone());
        let fetch = annotated(fetch, run.map_or(0, |r| r.matched), run);
        self.outer_stages(fetch, false, run)
    }

    /// The stages above the one that finds documents: sort or limit, skip, projection,
    /// and the command's own.
    fn outer_stages(&self, mut stage: Document, covered: bool, run: Option<&Run>) -> Document {
        let annotate = |stage: Document, returned: u64| annotated(stage, returned, run);
        let returned = run.map_or(0, |r| r.returned);
        let wrap = |name: &str, extra: Document, input: Document| {
            let mut outer = doc! { "stage": name };
            outer.extend(extra);
            outer.insert("inputStage", input);
            annotate(outer, returned)
        };
        if let Some(sort) = self.sort {
            let mut extra = doc! {
                "sortPattern": sort.clone(),
                "memLimit": SORT_MEMORY_LIMIT_BYTES,
                "type": "simple",
            };
            if let Some(limit) = self.limit {
                extra.insert("limitAmount", (limit + self.skip) as i64);
            }
            stage = wrap("SORT", extra, stage);
        } else if let Some(limit) = self.limit {
            stage = wrap("LIMIT", doc! { "limitAmount": limit as i64 }, stage);
        }
        if self.skip > 0 {
            stage = wrap("SKIP", doc! { "skipAmount": self.skip as i64 }, stage);
        }
        if let Some(projection) = self.projection {
            let name = if covered {
                "PROJECTION_COVERED"
            } else {
                "PROJECTION_DEFAULT"
            };
            stage = wrap(name, doc! { "transformBy": projection.clone() }, stage);
        }
        if let Some(root) = self.root {
            stage = wrap(root, Document::new(), stage);
        }
        stage
    }
}

/// A stage with the documents it returned and the run's time, when it ran.
fn annotated(mut stage: Document, returned: u64, run: Option<&Run>) -> Document {
    if let Some(run) = run {
        stage.insert("nReturned", returned as i64);
        stage.insert("executionTimeMillisEstimate", run.millis);
    }
    stage
}

/// The stages of an aggregation after its leading `$match`, as they run: optimized, as
/// MongoDB's explain shows them, and parsed.
fn parse_rest(
    rest: &[Bson],
    fields: &Fields<'_>,
    collation: Option<&Collation>,
) -> Result<(Vec<Document>, basalt_agg::Pipeline)> {
    let specs = basalt_agg::optimize(basalt_agg::stage_documents(rest)?);
    let pipeline = basalt_agg::Pipeline::parse_aggregate(
        &specs,
        fields.document_opt("let")?,
        false,
        collation,
    )?;
    Ok((specs, pipeline))
}

/// For an aggregation that runs on several scan workers, how it is split, in the shape
/// of MongoDB's sharded explain: the stages each range of the collection runs
/// (`shardsPart`, ending in the partial `$group`/`$count`), those that run once over the
/// merged result (`mergerPart`), and how many workers and ranges.
fn split_pipeline(ctx: &Ctx<'_>, query: &Query<'_>, inner: &Document) -> Result<Option<Document>> {
    let Some(rest) = &query.rest_of_pipeline else {
        return Ok(None);
    };
    let Some(collection) = ctx.server.catalog.get(ctx.db, query.collection) else {
        return Ok(None);
    };
    let fields = Fields::new(inner);
    let collation = fields.collation()?;
    // Planned as the run would be, but not counted as a use of an index.
    let (choice, _) = plan_choice(
        &collection,
        &query.filter,
        collation.as_ref(),
        query.hint,
        None,
        None,
    )?;
    let (specs, pipeline) = parse_rest(rest, &fields, collation.as_ref())?;
    let Some(split) = pipeline.partitioned() else {
        return Ok(None);
    };
    if choice.winner != Plan::CollectionScan {
        return Ok(None);
    }
    let head = split.per_document_stages();
    let workers = ctx.server.scan_workers();
    Ok(Some(doc! {
        "shardsPart": specs[..=head].to_vec(),
        "mergerPart": specs[head + 1..].to_vec(),
        "workers": workers as i64,
        "ranges": crate::parallel_scan::range_count(collection.record_id_high_water(), workers) as i64,
    }))
}
