//! `aggregate`: runs a pipeline over a collection, or over no collection at all
//! (`aggregate: 1`, whose pipeline starts with a stage that makes its own documents:
//! `$documents`, `$listLocalSessions`, `$currentOp`), and returns a cursor.
//!
//! A leading `$match` is pushed into the scan, so its filter also chooses the access
//! path, and so is a `$sort` after it when an index scan provides its order. A pipeline
//! that then only windows (`$skip`, `$limit`) and includes or excludes stored fields
//! runs as a `find`: the scan hands out stored bytes. Otherwise the rest of the pipeline
//! runs over the matching documents, of which the scan decodes only the fields the
//! pipeline reads. When the stages up to the first `$group`
//! or `$count` handle each document on its own and the collection is scanned whole, they
//! run on all scan workers over ranges of the collection, and the partial groups are
//! merged (`basalt_agg::Partitioned`, [`crate::parallel_scan`]). Stages that read or
//! write other collections reach them through [`collections::ServerCollections`]. A
//! pipeline ending in `$out` or `$merge` has written everything before the reply, whose
//! first batch is then empty. A one-pass pipeline's results stream to the cursor: each
//! batch is computed as the client asks for it.

pub(super) mod collections;

use super::write_batch::durability;
use super::Ctx;
use crate::cursors::CursorSource;
use crate::exec::{AccessPath, CollectionScan, Deadline, RangeScan};
use crate::parallel_scan;
use crate::request::Fields;
use basalt_agg::{Partial, Partitioned, Pipeline};
use basalt_catalog::Collection;
use basalt_error::{Error, ErrorCode, Result};
use basalt_query::Matcher;
use basalt_wire::MAX_BSON_OBJECT_INTERNAL_SIZE_BYTES;
use bson::{Bson, Document};
use collections::ServerCollections;

/// A pipeline that writes (`$out`, `$merge`) cannot read at `linearizable`, as mongod
/// refuses it (a linearizable read is a read of the primary alone).
fn refuse_linearizable_writes(body: &Document) -> Result<()> {
    match crate::replication::writing_stage(body) {
        Some(stage) if crate::replication::wants_linearizable(body) => Err(Error::new(
            basalt_error::ErrorCode::INVALID_OPTIONS,
            format!("{stage} cannot be used with a 'linearizable' read concern level"),
        )),
        _ => Ok(()),
    }
}

pub fn aggregate(ctx: &Ctx<'_>, body: &Document) -> Result<bson::RawDocumentBuf> {
    aggregate_as(ctx, body, None)
}

/// How a read of a view reports its cursor: under the view's namespace (a getMore names
/// the view), in one batch when the reader asked for one.
pub(super) struct ViewCursor {
    pub namespace: String,
    pub single_batch: bool,
}

/// `aggregate`, reporting its cursor as `view`'s when it runs for a read of a view (its
/// body then names the view's collection and holds the views' pipeline).
pub(super) fn aggregate_as(
    ctx: &Ctx<'_>,
    body: &Document,
    view: Option<ViewCursor>,
) -> Result<bson::RawDocumentBuf> {
    let fields = Fields::new(body);
    // `None`: a database-level aggregation.
    let name = match body.get("aggregate") {
        Some(Bson::String(name)) => Some(name.clone()),
        Some(v) if basalt_value::as_f64(v) == Some(1.0) => None,
        // A number other than 1 is a bad value; any other type names no collection.
        Some(v) if basalt_value::is_number(v) => {
            return Err(Error::bad_value(format!(
                "Invalid command format: the 'aggregate' field must specify a collection name or 1, not {v}"
            )))
        }
        _ => {
            return Err(Error::new(
                ErrorCode::INVALID_NAMESPACE,
                "'aggregate' must be a collection name or 1",
            ))
        }
    };
    let stages = fields.documents("pipeline")?;
    if stages
        .first()
        .is_some_and(|stage| stage.contains_key("$changeStream"))
    {
        return crate::change_streams::aggregate(ctx, body, &stages);
    }
    refuse_linearizable_writes(body)?;
    if stages
        .first()
        .is_some_and(|stage| stage.contains_key("$listSessions"))
        && (ctx.db != "config" || name.as_deref() != Some("system.sessions"))
    {
        return Err(Error::new(
            ErrorCode::INVALID_NAMESPACE,
            "$listSessions may only be run against config.system.sessions",
        ));
    }
    // The catalog is read as it is now, as mongod reads it: local read concern only.
    let level = body
        .get_document("readConcern")
        .ok()
        .and_then(|concern| concern.get_str("level").ok());
    if stages
        .first()
        .is_some_and(|stage| stage.contains_key("$listClusterCatalog"))
        && level.is_some_and(|level| level != "local")
    {
        return Err(Error::new(
            ErrorCode::INVALID_OPTIONS,
            "$listClusterCatalog only supports read concern level 'local'",
        ));
    }
    // A time-series collection's buckets are refused as the collection is (the read of
    // the collection itself unpacks them first, which the stage refuses).
    let buckets = name
        .as_deref()
        .is_some_and(|name| name.starts_with("system.buckets."));
    if buckets
        && stages
            .first()
            .is_some_and(|stage| stage.contains_key("$rankFusion"))
    {
        return Err(Error::location(
            10557301,
            "$rankFusion is not supported on time-series collections",
        ));
    }
    if fields.document_opt("cursor")?.is_none() && !fields.bool_or("explain", false)? {
        return Err(Error::failed_to_parse(
            "The 'cursor' option is required, except for aggregate with the explain argument",
        ));
    }
    if fields.bool_or("explain", false)? {
        // `explain: true` asks for the plan (queryPlanner verbosity), not the results. A
        // database-level pipeline has no plan: its stages are all there is to show.
        let mut inner = body.clone();
        inner.remove("explain");
        if name.is_none() {
            let stages: Vec<Bson> = stages
                .iter()
                .map(|s| Bson::Document((*s).clone()))
                .collect();
            inner.insert("$db", ctx.db);
            let plan = bson::doc! { "explainVersion": "1", "stages": stages, "command": inner };
            return crate::cursors::encode(&plan);
        }
        let mut plan = super::explain::explain(
            ctx,
            &bson::doc! { "explain": inner, "verbosity": "queryPlanner" },
        )?;
        plan.remove("ok");
        return crate::cursors::encode(&plan);
    }
    let batch_size = fields.cursor_batch_size()?;
    let (namespace, source, deadline) = results(ctx, body, name.as_deref())?;
    let (namespace, single_batch) = match view {
        Some(view) => (view.namespace, view.single_batch),
        None => (namespace, false),
    };
    ctx.server.cursors.first_batch_reply(
        namespace,
        source,
        batch_size,
        single_batch,
        deadline,
        crate::security::cursor_owner(ctx),
    )
}

/// The results of the pipeline of the aggregate command `body` over the collection
/// `name` (`None`: a database-level aggregation), as a cursor's source, with the
/// namespace it reports and its time limit. A read of a view gets its documents here.
pub(super) fn results(
    ctx: &Ctx<'_>,
    body: &Document,
    name: Option<&str>,
) -> Result<(String, CursorSource, Deadline)> {
    let fields = Fields::new(body);
    let stages = fields.documents("pipeline")?;
    // Checked here; `$out` and `$merge` read it when they write (`collections.rs`).
    fields.bool_or("bypassDocumentValidation", false)?;
    // Whether `$sort` may spill to disk beyond its memory limit (read by the stage).
    fields.strict_bool_or("allowDiskUse", true)?;
    let deadline = ctx.deadline();
    let durability = durability(&fields)?;
    let stages: Vec<Document> = stages.into_iter().cloned().collect();
    let collation = fields.collation()?;
    let mut pipeline = Pipeline::parse_aggregate(
        &stages,
        fields.document_opt("let")?,
        name.is_none(),
        collation.as_ref(),
    )?;
    let namespace = match name {
        Some(name) => format!("{}.{name}", ctx.db),
        None => format!("{}.$cmd.aggregate", ctx.db),
    };

    let collections = ServerCollections::new(ctx, body, &namespace, deadline.clone(), durability);
    let collection = name.and_then(|name| ctx.server.catalog.get(ctx.db, name));
    if let Some(sampled) = collection
        .as_ref()
        .map(|collection| random_sample(&mut pipeline, collection, &deadline))
        .transpose()?
        .flatten()
    {
        let source = stream_pipeline(pipeline, collections, sampled.into_iter().map(Ok));
        return Ok((namespace, source, deadline));
    }
    // A column store index reads the head of a pipeline it has a plan for (planned on
    // the whole pipeline, before its leading $match goes to the scan).
    let column = collection.as_ref().and_then(|collection| {
        let has_one = collection
            .meta()
            .indexes
            .iter()
            .any(|i| i.is_column_store());
        let plan = has_one.then(|| pipeline.column_plan()).flatten()?;
        let index = crate::column_scan::eligible_index(collection, &plan, body.get("hint"))?;
        Some((index, plan))
    });
    // A leading `$project` that reads only named paths may take documents made from
    // the chunks (planned before the leading $match goes to the scan too).
    let column_rows = collection
        .as_ref()
        .filter(|collection| {
            collection
                .meta()
                .indexes
                .iter()
                .any(|i| i.is_column_store())
        })
        .and_then(|_| pipeline.column_rows());
    // The leading $match becomes the scan's filter (and picks its access path); a
    // leading $geoNear's query too, once its geo field is known.
    let filter = match (name, pipeline.leading_geo_near()) {
        (Some(name), Some(geo_near)) => {
            let Some(collection) = &collection else {
                return Err(Error::new(
                    ErrorCode::NAMESPACE_NOT_FOUND,
                    format!("Collection {}.{name} does not exist", ctx.db),
                ));
            };
            let key = crate::geo::geo_near_key(collection, geo_near.key(), geo_near.point())?;
            geo_near.set_key(key);
            geo_near.scan_filter()
        }
        (Some(_), None) => pipeline.take_leading_match()?.unwrap_or_default(),
        (None, _) => Document::new(),
    };
    if let (Some(buckets), Some(geo_near)) = (&collection, pipeline.unpacked_geo_near()) {
        geo_near.set_key(crate::timeseries::geo_near_key(buckets, geo_near)?);
    }
    let input_fields = pipeline.input_fields().map(<[String]>::to_vec);
    let oplog = name
        .filter(|name| crate::local_oplog::is_oplog(ctx.db, name))
        .and_then(|_| ctx.server.replication());
    let source = if let Some(set) = oplog {
        let matcher = Matcher::new(&filter)?.with_collation(collation.as_ref());
        let entries = crate::local_oplog::entries(
            ctx.server.catalog.engine().clone(),
            set.clone(),
            filter,
            matcher,
            deadline.clone(),
        );
        stream_pipeline(pipeline, collections, entries)
    } else {
        match collection {
            Some(collection) => {
                let (path, sorted) = AccessPath::choose_sorted(
                    &collection,
                    &filter,
                    collation.as_ref(),
                    body.get("hint"),
                    pipeline.leading_sort(),
                    None,
                )?;
                if sorted {
                    // The index scan returns documents in the `$sort`'s order.
                    pipeline.remove_leading_sort();
                }
                // A column find ranks its rows for a `$sort` with a `$limit` and
                // fetches only the first.
                let mut path = path;
                if let AccessPath::Columns(find) = &mut path {
                    let keep = pipeline
                        .leading_sort_keep()
                        .map(|keep| usize::try_from(keep).unwrap_or(usize::MAX));
                    crate::column_scan::rank_first(find, pipeline.leading_sort(), keep);
                }
                if let Some(reads) = &column_rows {
                    path = crate::column_scan::with_rows(
                        &collection,
                        path,
                        &filter,
                        body.get("hint"),
                        reads,
                    );
                }
                let matcher = Matcher::new(&filter)?.with_collation(collation.as_ref());
                if let Some(shape) = pipeline.pass_through() {
                    let source = pass_through(ctx, collection, matcher, path, shape, &deadline)?;
                    return Ok((namespace, source, deadline));
                }
                let hinted = body.contains_key("hint");
                let column = column
                    .as_ref()
                    .filter(|_| crate::column_scan::preferred_over((&path).into(), hinted));
                let parallel = match (pipeline.partitioned(), column) {
                    (Some(split), Some((index, plan))) => crate::column_scan::run(
                        &collection,
                        index,
                        plan,
                        &matcher,
                        &split,
                        input_fields.as_deref(),
                        deadline.clone(),
                        ctx.server.scan_workers(),
                    )?
                    .map(|(merged, stats)| {
                        tracing::debug!(?stats, "column scan");
                        (split, merged)
                    }),
                    (Some(split), None) if path == AccessPath::CollectionScan => run_partitioned(
                        ctx,
                        &collection,
                        &matcher,
                        &split,
                        input_fields.as_deref(),
                        deadline.clone(),
                    )?
                    .map(|merged| (split, merged)),
                    (_, _) => None,
                };
                match parallel {
                    Some((split, merged)) => {
                        let results = split
                            .finish(merged, &collections)?
                            .map(|doc| doc.and_then(fits_in_bson))
                            .collect::<Result<Vec<_>>>()?;
                        CursorSource::buffered(results)
                    }
                    // Not splittable, or too many groups for memory: one pass (where
                    // $group can spill), streaming to the cursor.
                    None => {
                        let scan = CollectionScan::new(
                            collection,
                            matcher,
                            path,
                            None,
                            0,
                            None,
                            deadline.clone(),
                        )
                        .with_fields(input_fields);
                        // Time-series buckets are unpacked from their stored bytes.
                        let source: ResultStream<'static> = match pipeline.take_leading_unpack() {
                            Some(unpack) => {
                                Box::new(scan.into_stored_stream().flat_map(move |bucket| {
                                    match bucket.and_then(|b| unpack.unpack_stored(&b)) {
                                        Ok(measurements) => {
                                            measurements.into_iter().map(Ok).collect()
                                        }
                                        Err(e) => vec![Err(e)],
                                    }
                                }))
                            }
                            None => Box::new(scan.into_stream()),
                        };
                        stream_pipeline(pipeline, collections, source)
                    }
                }
            }
            None => {
                let results = pipeline
                    .stream(Box::new(std::iter::empty()), &collections)
                    .map(|doc| doc.and_then(fits_in_bson))
                    .collect::<Result<Vec<_>>>()?;
                CursorSource::buffered(results)
            }
        }
    };
    Ok((namespace, source, deadline))
}

/// A pipeline whose documents pass through unchanged but for a window and a plain
/// projection ([`Pipeline::pass_through`]) read as `find` reads: a scan that hands out
/// the stored bytes (or projects the fields it decodes), on the server's scan workers.
/// This is what the Spark connector sends for each partition (`$match` on an `_id`
/// range), and it streams at `find`'s rate.
fn pass_through(
    ctx: &Ctx<'_>,
    collection: std::sync::Arc<Collection>,
    matcher: Matcher,
    path: AccessPath,
    shape: basalt_agg::PassThrough,
    deadline: &Deadline,
) -> Result<CursorSource> {
    let read = shape
        .projection
        .as_ref()
        .and_then(super::find::projected_fields);
    let projection = shape
        .projection
        .as_ref()
        .map(basalt_query::Projection::new)
        .transpose()?;
    let scan = CollectionScan::new(
        collection,
        matcher,
        path,
        projection,
        shape.skip,
        shape.limit,
        deadline.clone(),
    )
    .with_fields(read)
    .with_workers(ctx.server.scan_workers());
    Ok(CursorSource::Scan(Box::new(scan)))
}

/// How much of a too-large result's first element its error shows.
const FIRST_ELEMENT_SHOWN_CHARS: usize = 100;

/// Every result must fit in a BSON document, as in MongoDB (a `$group` pushing too much,
/// a `$lookup` joining too many): results may use the 16 KB MongoDB allows beyond 16 MB
/// for its own documents, and the error reads as MongoDB's.
fn fits_in_bson(mut doc: Document) -> Result<Document> {
    basalt_expr::remove_metadata(&mut doc);
    let size = basalt_value::document_size_bytes(&doc);
    if size > MAX_BSON_OBJECT_INTERNAL_SIZE_BYTES {
        // Only the start of the first element: it may be most of the 16 MB.
        let first: String = doc.iter().next().map_or_else(String::new, |(name, value)| {
            basalt_value::display::element_to_string(name, value)
                .chars()
                .take(FIRST_ELEMENT_SHOWN_CHARS)
                .collect()
        });
        return Err(Error::new(
            ErrorCode::BSON_OBJECT_TOO_LARGE,
            format!(
                "BSONObj size: {size} (0x{size:X}) is invalid. Size must be between 0 and \
                 {MAX_BSON_OBJECT_INTERNAL_SIZE_BYTES}(16MB) First element: {first}"
            ),
        ));
    }
    Ok(doc)
}

/// What a pipeline streaming to a cursor runs with and on.
struct PipelineRun {
    pipeline: Pipeline,
    collections: ServerCollections,
}

/// The results of a pipeline streaming to a cursor, which owns what the stream
/// borrows: a getMore computes the next batch on whichever connection sends it, and a
/// pipeline with a large result is never held whole.
type ResultStream<'a> = basalt_agg::DocumentStream<'a>;

self_cell::self_cell!(
    struct PipelineCursor {
        owner: PipelineRun,
        #[covariant]
        dependent: ResultStream,
    }
);

impl Iterator for PipelineCursor {
    type Item = Result<Document>;

    fn next(&mut self) -> Option<Result<Document>> {
        self.with_dependent_mut(|_, results| results.next())
    }
}

/// A leading `$sample` of under 5 % of a collection of more than 100 documents, drawn
/// by a random cursor (as MongoDB does) instead of scanning the whole collection into a
/// reservoir: the documents, the stage then taken out of the pipeline. `None` leaves
/// the pipeline to sample as it reads.
fn random_sample(
    pipeline: &mut Pipeline,
    collection: &Collection,
    deadline: &Deadline,
) -> Result<Option<Vec<Document>>> {
    const RANDOM_CURSOR_MIN_DOCS: u64 = 100;
    const RANDOM_CURSOR_MAX_SHARE: u64 = 20;
    let Some(size) = pipeline.leading_sample() else {
        return Ok(None);
    };
    let count = collection.stats()?.count;
    if count <= RANDOM_CURSOR_MIN_DOCS || size.saturating_mul(RANDOM_CURSOR_MAX_SHARE) >= count {
        return Ok(None);
    }
    let sampled = collection.random_records(&*collection.snapshot(), size as usize)?;
    if let Some(documents) = &sampled {
        pipeline.remove_leading_sample();
        deadline.progress().add_examined(0, documents.len() as u64);
    }
    Ok(sampled)
}

/// `pipeline` over `input`, as a cursor's source.
fn stream_pipeline(
    pipeline: Pipeline,
    collections: ServerCollections,
    input: impl Iterator<Item = Result<Document>> + Send + 'static,
) -> CursorSource {
    let run = PipelineRun {
        pipeline,
        collections,
    };
    CursorSource::stream(PipelineCursor::new(run, |run| {
        let results = run.pipeline.stream(Box::new(input), &run.collections);
        Box::new(results.map(|doc| doc.and_then(fits_in_bson)))
    }))
}

/// Runs the stages before the pipeline's first `$group`/`$count`, and that stage's
/// partial form, over ranges of the collection on the server's scan workers, and
/// merges the partial results in record order. `None` when a range's groups outgrow
/// the `$group` memory limit.
fn run_partitioned(
    ctx: &Ctx<'_>,
    collection: &Collection,
    matcher: &Matcher,
    split: &Partitioned<'_>,
    fields: Option<&[String]>,
    deadline: Deadline,
) -> Result<Option<Partial>> {
    let snapshot = collection.snapshot();
    let high_water = collection.record_id_high_water();
    let scan = RangeScan {
        collection,
        snapshot: &*snapshot,
        matcher,
        deadline,
        needs: fields.into(),
    };
    let partials = parallel_scan::run(high_water, ctx.server.scan_workers(), &|range| {
        crate::column_scan::partition_partial(&scan, split, range)
    })?;
    let mut merged = split.empty();
    for partial in partials {
        let Some(partial) = partial else {
            return Ok(None);
        };
        split.merge(&mut merged, partial)?;
        if split.exceeds_memory(&merged) {
            return Ok(None);
        }
    }
    Ok(Some(merged))
}
