//! Aggregations read through a column store index (`COLUMN_SCAN`): the pipeline's head
//! ([`basalt_agg::ColumnPlan`]) runs over each row group's chunks on the scan workers,
//! and the partial results merge in record order as a parallel scan's do.
//!
//! A row group is read from its chunks only when the snapshot holds no write to it since
//! it was built and every path the head reads is a leaf of chunk-held values there
//! (`RowGroupHeader::serves`); any other row group, and the records past the last one,
//! run through the row engine over their documents. Either way the result is the row
//! engine's, so which row groups are current only changes the speed.
//!
//! The column store is chosen when the collection has one, the pipeline has a plan,
//! and no hint names another index; an index that pins its leading field to points
//! (an equality) reads fewer documents than any scan and keeps the query.

use crate::exec::{AccessPath, Deadline, ExecStats, RangeScan, Step};
use crate::parallel_scan::{self, RecordRange};
use basalt_agg::Pipeline;
use basalt_agg::{ColumnPlan, Partial, Partitioned, RowGroupColumns};
use basalt_catalog::{Collection, ColumnStoreView, IndexSpec, ROW_GROUP_SPAN_BITS};
use basalt_error::Result;
use basalt_plan::{IndexScanPlan, Plan};
use basalt_query::Matcher;
use bson::{doc, Bson, Document};

/// The column store index that may read a pipeline with `plan`: the collection's, when
/// it keeps every path the plan reads and no hint names something else.
pub(crate) fn eligible_index(
    collection: &Collection,
    plan: &ColumnPlan,
    hint: Option<&Bson>,
) -> Option<IndexSpec> {
    let meta = collection.meta();
    let index = meta.indexes.iter().find(|i| i.is_column_store())?;
    let projection = index.column_store()?;
    if !plan.paths().iter().all(|path| projection.keeps(path)) {
        return None;
    }
    match hint {
        None => Some(index.clone()),
        Some(hint) => basalt_plan::resolve_hint(&meta.indexes, hint)
            .ok()
            .flatten()
            .filter(|named| named.id == index.id)
            .cloned(),
    }
}

/// How the planner would read a query without the column store.
pub(crate) enum Otherwise<'a> {
    CollectionScan,
    IndexScan(&'a IndexScanPlan),
    /// Several index scans, or a geo index's cells.
    Other,
}

impl<'a> From<&'a AccessPath> for Otherwise<'a> {
    fn from(path: &'a AccessPath) -> Otherwise<'a> {
        match path {
            AccessPath::CollectionScan => Otherwise::CollectionScan,
            AccessPath::IndexScan(scan) => Otherwise::IndexScan(scan),
            AccessPath::Or(_) | AccessPath::Cells(_) => Otherwise::Other,
        }
    }
}

impl<'a> From<&'a Plan> for Otherwise<'a> {
    fn from(plan: &'a Plan) -> Otherwise<'a> {
        match plan {
            Plan::CollectionScan => Otherwise::CollectionScan,
            Plan::IndexScan(scan) => Otherwise::IndexScan(scan),
            Plan::Or(_) => Otherwise::Other,
        }
    }
}

/// Whether the column store should read a query the planner would read `otherwise`
/// (`hinted`: the hint named the column store).
pub(crate) fn preferred_over(otherwise: Otherwise<'_>, hinted: bool) -> bool {
    match otherwise {
        Otherwise::CollectionScan => true,
        Otherwise::IndexScan(scan) => hinted || scan.bounds.selectivity().0 == 0,
        Otherwise::Other => hinted,
    }
}

/// Explain's `COLUMN_SCAN` stage for an aggregation whose stages (its leading `$match`
/// included) are `specs`, when the column store would read it: the index, the paths
/// read, what runs as loops over chunks, and how many row groups are read from their
/// chunks and how many from documents as things stand.
pub(crate) fn explain(
    collection: &Collection,
    specs: &[Document],
    let_vars: Option<&Document>,
    hint: Option<&Bson>,
    otherwise: Otherwise<'_>,
) -> Result<Option<Document>> {
    if !collection
        .meta()
        .indexes
        .iter()
        .any(|i| i.is_column_store())
    {
        return Ok(None);
    }
    let specs = basalt_agg::optimize(specs.to_vec());
    let pipeline = Pipeline::parse_aggregate(&specs, let_vars, false, None)?;
    let Some(plan) = pipeline.column_plan() else {
        return Ok(None);
    };
    let Some(index) = eligible_index(collection, &plan, hint) else {
        return Ok(None);
    };
    if !preferred_over(otherwise, hint.is_some()) {
        return Ok(None);
    }
    let snapshot = collection.snapshot();
    let view = collection.column_store_view(&*snapshot, index.id)?;
    let last_group = collection.record_id_high_water() >> ROW_GROUP_SPAN_BITS;
    let from_chunks = (0..=last_group)
        .filter(|group| {
            view.is_current(*group) && plan.paths().iter().all(|p| view.groups[group].serves(p))
        })
        .count();
    let mut stage = doc! {
        "stage": "COLUMN_SCAN",
        "indexName": index.name.clone(),
        "paths": plan.paths().to_vec(),
        "rowGroups": (last_group + 1) as i64,
        "rowGroupsFromChunks": from_chunks as i64,
        "rowGroupsFromDocuments": (last_group + 1) as i64 - from_chunks as i64,
    };
    stage.extend(plan.explain());
    Ok(Some(stage))
}

/// What a column scan read, for explain and the profiler.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ColumnScanStats {
    pub row_groups_from_chunks: u64,
    pub row_groups_from_documents: u64,
    pub rows_from_chunks: u64,
}

/// The record range of row group `group`; the last one is open-ended.
fn group_range(group: u64, last_group: u64) -> RecordRange {
    let (after, last) = ColumnStoreView::record_range(group);
    RecordRange {
        after,
        last: if group == last_group { u64::MAX } else { last },
    }
}

/// Runs `plan` and the partial form of `split`'s head over every row group. `None`
/// when a row group's groups outgrow the `$group` memory limit (the caller then runs
/// the pipeline in one pass).
#[allow(clippy::too_many_arguments)]
pub(crate) fn run(
    collection: &Collection,
    index: &IndexSpec,
    plan: &ColumnPlan,
    matcher: &Matcher,
    split: &Partitioned<'_>,
    fields: Option<&[String]>,
    deadline: Deadline,
    workers: usize,
) -> Result<Option<(Partial, ColumnScanStats)>> {
    let snapshot = collection.snapshot();
    let view = collection.column_store_view(&*snapshot, index.id)?;
    let last_group = collection.record_id_high_water() >> ROW_GROUP_SPAN_BITS;
    let ranges: Vec<RecordRange> = (0..=last_group)
        .map(|group| group_range(group, last_group))
        .collect();
    let scan = RangeScan {
        collection,
        snapshot: &*snapshot,
        matcher,
        deadline: deadline.clone(),
        needs: fields.into(),
    };
    let results = parallel_scan::run_ranges(&ranges, workers, &|range| {
        let group = range
            .after
            .map_or(0, |after| (after + 1) >> ROW_GROUP_SPAN_BITS);
        let mut stats = ColumnScanStats::default();
        let served = view.is_current(group)
            && plan
                .paths()
                .iter()
                .all(|path| view.groups[&group].serves(path));
        if !served {
            stats.row_groups_from_documents = 1;
            return Ok(partition_partial(&scan, split, range)?.map(|p| (p, stats)));
        }
        deadline.check()?;
        let header = &view.groups[&group];
        let chunks = plan
            .paths()
            .iter()
            .map(|path| collection.column_chunk(&*snapshot, &view, group, path))
            .collect::<Result<Vec<_>>>()?;
        let columns = RowGroupColumns {
            rows: header.rows,
            chunks,
        };
        let mut partial = split.empty();
        plan.accumulate(split, &mut partial, &columns)?;
        stats.row_groups_from_chunks = 1;
        stats.rows_from_chunks = columns.rows as u64;
        Ok((!split.exceeds_memory(&partial)).then_some((partial, stats)))
    })?;
    let mut merged = split.empty();
    let mut total = ColumnScanStats::default();
    for result in results {
        let Some((partial, stats)) = result else {
            return Ok(None);
        };
        total.row_groups_from_chunks += stats.row_groups_from_chunks;
        total.row_groups_from_documents += stats.row_groups_from_documents;
        total.rows_from_chunks += stats.rows_from_chunks;
        split.merge(&mut merged, partial)?;
        if split.exceeds_memory(&merged) {
            return Ok(None);
        }
    }
    Ok(Some((merged, total)))
}

/// Documents a partition hands to the pipeline's stages at a time.
const PARTITION_BATCH_DOCS: usize = 1024;

/// The partial result of `split` over the documents of `range`; `None` when its groups
/// outgrow the `$group` memory limit.
pub(crate) fn partition_partial(
    scan: &RangeScan<'_>,
    split: &Partitioned<'_>,
    range: RecordRange,
) -> Result<Option<Partial>> {
    let mut partial = split.empty();
    let mut batch = Vec::with_capacity(PARTITION_BATCH_DOCS);
    scan.visit(range, &mut ExecStats::default(), &mut |_, _, doc| {
        batch.push(doc);
        if batch.len() == PARTITION_BATCH_DOCS {
            split.accumulate(&mut partial, Box::new(batch.drain(..).map(Ok)))?;
            if split.exceeds_memory(&partial) {
                return Ok(Step::StopAfter);
            }
        }
        Ok(Step::Continue)
    })?;
    split.accumulate(&mut partial, Box::new(batch.into_iter().map(Ok)))?;
    Ok((!split.exceeds_memory(&partial)).then_some(partial))
}
