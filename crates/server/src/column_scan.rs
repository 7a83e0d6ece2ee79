//! Queries read through a column store index (`COLUMN_SCAN`). An aggregation's head
//! ([`basalt_agg::ColumnPlan`]) runs over each row group's chunks on the scan workers,
//! and the partial results merge in record order as a parallel scan's do. A find (or a
//! count, update, delete) selects rows by its filter over the chunks and fetches only
//! their documents, by the record ids the row group keeps ([`RECORD_IDS_PATH`]); a row
//! group where most rows pass is scanned instead, as fetching most of its documents one
//! by one would cost more.
//!
//! A row group is read from its chunks only when the snapshot holds no write to it since
//! it was built and every path the head reads is a leaf of chunk-held values there
//! (`RowGroupHeader::serves`); any other row group, and the records past the last one,
//! run through the row engine over their documents. Either way the result is the row
//! engine's, so which row groups are current only changes the speed. A served row
//! group whose header shows that no row passes the filter (a condition's path holds no
//! value of its class there, or its least and greatest values are out of range) is
//! not read at all.
//!
//! The column store is chosen when the collection has one, the pipeline (the filter)
//! has a plan, and no hint names another index; an index that pins its leading field to
//! points (an equality) reads fewer documents than any scan and keeps the query. A find
//! also needs part of its filter to run as loops over chunks (or a hint).

use crate::exec::{AccessPath, Deadline, ExecStats, Needs, RangeScan, Step};
use crate::parallel_scan::{self, RecordRange};
use basalt_agg::Pipeline;
use basalt_agg::{ColumnPlan, Partial, Partitioned, RowGroupColumns};
use basalt_catalog::{
    Collection, ColumnStoreView, IndexSpec, RECORD_IDS_PATH, ROW_GROUP_SPAN_BITS,
};
use basalt_error::{Error, Result};
use basalt_plan::{IndexScanPlan, Plan};
use basalt_query::{Matcher, SortSpec};
use basalt_storage::Snapshot;
use basalt_value::{Collation, DistinctValues, FieldPath};
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
            // A find's column scan reads as a collection scan would, only faster.
            AccessPath::CollectionScan | AccessPath::Columns(_) => Otherwise::CollectionScan,
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
    stage(collection, &index, &plan).map(Some)
}

/// The `COLUMN_SCAN` stage of `plan` over `index`.
fn stage(collection: &Collection, index: &IndexSpec, plan: &ColumnPlan) -> Result<Document> {
    let snapshot = collection.snapshot();
    let view = collection.column_store_view(&*snapshot, index.id)?;
    let last_group = collection.record_id_high_water() >> ROW_GROUP_SPAN_BITS;
    let served_groups = (0..=last_group)
        .filter(|group| served(&view, plan, *group))
        .count();
    let skipped = (0..=last_group)
        .filter(|group| skipped(&view, plan, *group))
        .count();
    let mut stage = doc! {
        "stage": "COLUMN_SCAN",
        "indexName": index.name.clone(),
        "paths": plan.paths().to_vec(),
        "rowGroups": (last_group + 1) as i64,
        "rowGroupsSkipped": skipped as i64,
        "rowGroupsFromChunks": (served_groups - skipped) as i64,
        "rowGroupsFromDocuments": (last_group + 1) as i64 - served_groups as i64,
    };
    stage.extend(plan.explain());
    Ok(stage)
}

/// Whether row group `group` can be read from its chunks for `plan`: no write reached
/// it since it was built, and every path the plan reads is a leaf of chunk-held values
/// there.
fn served(view: &ColumnStoreView, plan: &ColumnPlan, group: u64) -> bool {
    view.is_current(group)
        && plan
            .paths()
            .iter()
            .all(|path| view.groups[&group].serves(path))
}

/// Whether row group `group` is [`served`] and its header shows that no row passes
/// the plan's filter (`ColumnPlan::may_select`), so it is not read at all.
fn skipped(view: &ColumnStoreView, plan: &ColumnPlan, group: u64) -> bool {
    served(view, plan, group) && !plan.may_select(&view.groups[&group])
}

/// The chunks `plan` reads in row group `group`, when it is [`served`].
fn read_columns(
    collection: &Collection,
    snapshot: &dyn Snapshot,
    view: &ColumnStoreView,
    plan: &ColumnPlan,
    group: u64,
) -> Result<Option<RowGroupColumns>> {
    if !served(view, plan, group) {
        return Ok(None);
    }
    let chunks = plan
        .paths()
        .iter()
        .map(|path| collection.column_chunk(snapshot, view, group, path))
        .collect::<Result<Vec<_>>>()?;
    Ok(Some(RowGroupColumns {
        rows: view.groups[&group].rows,
        chunks,
    }))
}

/// What a column scan read, for explain and the profiler.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ColumnScanStats {
    pub row_groups_skipped: u64,
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
    let needs = fields.into();
    let results = over_row_groups(
        collection,
        index,
        plan,
        matcher,
        needs,
        &deadline,
        workers,
        &|group| {
            let mut stats = ColumnScanStats::default();
            match group {
                RowGroup::Skipped => {
                    stats.row_groups_skipped = 1;
                    Ok(Some((split.empty(), stats)))
                }
                RowGroup::Chunks(columns) => {
                    let mut partial = split.empty();
                    plan.accumulate(split, &mut partial, &columns)?;
                    stats.row_groups_from_chunks = 1;
                    stats.rows_from_chunks = columns.rows as u64;
                    Ok((!split.exceeds_memory(&partial)).then_some((partial, stats)))
                }
                RowGroup::Documents(scan, range) => {
                    stats.row_groups_from_documents = 1;
                    Ok(partition_partial(scan, split, range)?.map(|p| (p, stats)))
                }
            }
        },
    )?;
    let mut merged = split.empty();
    let mut total = ColumnScanStats::default();
    for result in results {
        let Some((partial, stats)) = result else {
            return Ok(None);
        };
        total.row_groups_skipped += stats.row_groups_skipped;
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

/// One row group as a column scan reads it: not at all, its chunks, or its records.
enum RowGroup<'s> {
    /// No row passes the filter ([`skipped`]).
    Skipped,
    Chunks(RowGroupColumns),
    Documents(&'s RangeScan<'s>, RecordRange),
}

/// Runs `work` over every row group of `index` in one snapshot, on the scan workers,
/// with nothing where it is [`skipped`], with the row group's chunks where it is
/// [`served`], else with its record range (the last one open-ended) and a scan of it
/// that matches `matcher` and decodes what `needs` says; the results come in record
/// order.
#[allow(clippy::too_many_arguments)]
fn over_row_groups<T: Send>(
    collection: &Collection,
    index: &IndexSpec,
    plan: &ColumnPlan,
    matcher: &Matcher,
    needs: Needs<'_>,
    deadline: &Deadline,
    workers: usize,
    work: &(dyn Fn(RowGroup<'_>) -> Result<T> + Sync),
) -> Result<Vec<T>> {
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
        needs,
    };
    parallel_scan::run_ranges(&ranges, workers, &|range| {
        deadline.check()?;
        let group = range
            .after
            .map_or(0, |after| (after + 1) >> ROW_GROUP_SPAN_BITS);
        if skipped(&view, plan, group) {
            return work(RowGroup::Skipped);
        }
        match read_columns(collection, &*snapshot, &view, plan, group)? {
            Some(columns) => work(RowGroup::Chunks(columns)),
            None => work(RowGroup::Documents(&scan, range)),
        }
    })
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
    // Time-series buckets are unpacked from their stored bytes, only the measurements
    // and fields the stages need.
    let unpack = split.leading_unpack();
    let stored = RangeScan {
        needs: Needs::StoredBytes,
        deadline: scan.deadline.clone(),
        ..*scan
    };
    let scan = if unpack.is_some() { &stored } else { scan };
    let accumulate = |partial: &mut Partial, batch: &mut Vec<Document>| {
        let input = Box::new(batch.drain(..).map(Ok));
        match unpack {
            Some(_) => split.accumulate_unpacked(partial, input),
            None => split.accumulate(partial, input),
        }
    };
    scan.visit(range, &mut ExecStats::default(), &mut |_, raw, doc| {
        match (unpack, raw) {
            (Some(unpack), Some(raw)) => batch.extend(unpack.unpack_stored(raw)?),
            // A range scan reads records, never index entries alone.
            (Some(_), None) => return Err(Error::internal("a bucket scanned without its bytes")),
            (None, _) => batch.push(doc),
        }
        if batch.len() >= PARTITION_BATCH_DOCS {
            accumulate(&mut partial, &mut batch)?;
            if split.exceeds_memory(&partial) {
                return Ok(Step::StopAfter);
            }
        }
        Ok(Step::Continue)
    })?;
    accumulate(&mut partial, &mut batch)?;
    Ok((!split.exceeds_memory(&partial)).then_some(partial))
}

/// A query's read through a column store index: the index, the filter its chunks
/// select rows by ([`ColumnPlan::for_filter`]), the paths it reads of the rows besides
/// the filter's (a sort's, a distinct's key), and for a sorted query with a limit, the
/// sort and how many of its first documents the query keeps.
#[derive(Clone, Debug, PartialEq)]
pub struct ColumnFind {
    pub index: IndexSpec,
    pub filter: Document,
    pub reads: Vec<String>,
    pub top: Option<Top>,
    /// Whether its consumer reads only the plan's paths of each match, so the rows a
    /// served row group selects are handed out as documents made from the chunks
    /// ([`Segment::Rows`]) instead of fetched.
    pub rows: bool,
}

/// The first `keep` documents by `sort`: a find (`skip` + `limit`) that the chunks rank
/// before any document is fetched.
#[derive(Clone, Debug, PartialEq)]
pub struct Top {
    pub sort: Document,
    pub keep: usize,
}

/// The most documents a [`Top`] ranks from the chunks; a query keeping more sorts the
/// documents it fetches, under the blocking sort's memory limit.
const TOP_KEEP_MAX: usize = 100_000;

impl ColumnFind {
    /// The plan its filter (and sort) has (checked when the path was chosen).
    fn plan(&self) -> Result<ColumnPlan> {
        ColumnPlan::for_filter(&self.filter, &self.reads)
            .ok_or_else(|| Error::internal("a column find's filter has no column plan"))
    }
}

/// Makes `find` rank its documents by `sort` and keep the first `keep` of them, when
/// the column store keeps the sort's paths. The blocking sort above it still sorts
/// what is fetched: a row group that is not served hands all its matching documents to
/// it, and ties between documents the chunks rank and the others are broken by record
/// order, as the sort is stable.
pub(crate) fn rank_first(find: &mut ColumnFind, sort: Option<&Document>, keep: Option<usize>) {
    let (Some(sort), Some(keep)) = (sort, keep) else {
        return;
    };
    let Some(paths) = ColumnPlan::sort_paths(sort) else {
        return;
    };
    let plan = ColumnPlan::for_filter(&find.filter, &paths);
    let kept = find.index.column_store().is_some_and(|projection| {
        plan.is_some_and(|plan| plan.paths().iter().all(|p| projection.keeps(p)))
    });
    if kept && (1..=TOP_KEEP_MAX).contains(&keep) {
        find.reads = paths;
        find.top = Some(Top {
            sort: sort.clone(),
            keep,
        });
    }
}

/// `path` handing out, for a pipeline whose leading `$project` reads only `reads`
/// ([`basalt_agg::Pipeline::column_rows`]), the rows served row groups select as
/// documents made from the chunks ([`ColumnFind::rows`]): a column find made from a
/// collection scan or taken as it is, when the column store keeps `reads` and the
/// filter's paths; `path` as it is otherwise.
pub(crate) fn with_rows(
    collection: &Collection,
    path: AccessPath,
    filter: &Document,
    hint: Option<&Bson>,
    reads: &[String],
) -> AccessPath {
    let find = match path {
        AccessPath::Columns(find) if find.top.is_none() => Some(*find),
        AccessPath::CollectionScan => None,
        other => return other,
    };
    let otherwise = Otherwise::CollectionScan;
    let chosen = find_path(collection, filter, None, hint, reads, otherwise);
    match (chosen, find) {
        (Some(mut chosen), find) if chosen.reads == reads => {
            if find.is_none() {
                // Counted in `$indexStats` as the planner's own choices are.
                collection.note_index_use(chosen.index.id);
            }
            chosen.rows = true;
            AccessPath::Columns(Box::new(chosen))
        }
        (_, Some(find)) => AccessPath::Columns(Box::new(find)),
        (_, None) => AccessPath::CollectionScan,
    }
}

/// A column find for a query the planner would read `otherwise`, when the collection's
/// column store index serves `filter` and the column store should read it: without a
/// collation (the loops compare strings by their bytes), with part of the filter run as
/// loops over chunks, or `reads` (paths the query takes from the selected rows: a
/// sort's, which may then rank them, [`rank_first`], or a distinct's key) all kept,
/// unless a hint names the index; and as [`preferred_over`] says.
pub(crate) fn find_path(
    collection: &Collection,
    filter: &Document,
    collation: Option<&Collation>,
    hint: Option<&Bson>,
    reads: &[String],
    otherwise: Otherwise<'_>,
) -> Option<ColumnFind> {
    if collation.is_some() {
        return None;
    }
    // Most collections have no column store: their queries parse no plan.
    if !collection
        .meta()
        .indexes
        .iter()
        .any(|i| i.is_column_store())
    {
        return None;
    }
    let plan = ColumnPlan::for_filter(filter, &[])?;
    let index = eligible_index(collection, &plan, hint)?;
    let hinted = hint.is_some();
    let reads_kept = !reads.is_empty()
        && ColumnPlan::for_filter(filter, reads)
            .is_some_and(|with_reads| eligible_index(collection, &with_reads, hint).is_some());
    let worth_it = hinted || plan.has_loops() || reads_kept;
    (preferred_over(otherwise, hinted) && worth_it).then(|| ColumnFind {
        index,
        filter: filter.clone(),
        reads: if reads_kept {
            reads.to_vec()
        } else {
            Vec::new()
        },
        top: None,
        rows: false,
    })
}

/// What a column find visits, in record order.
#[derive(Debug)]
pub enum Segment {
    /// The records the chunks selected in a row group: each is fetched and matched
    /// again (a later batch's snapshot may hold another version of it).
    Records(Vec<u64>),
    /// The rows the chunks selected in a row group, for a find whose consumer reads
    /// only the plan's paths ([`ColumnFind::rows`]).
    Rows(SelectedRows),
    /// A range of records read as a collection scan reads it.
    Range(RecordRange),
}

/// A row group's rows of which at most one in this many pass are fetched one by one;
/// with more, its records are scanned.
const FETCH_ONE_IN_MIN: usize = 8;

/// The segments of a column find (its first batch's work): for each row group not
/// [`skipped`], the records its chunks select, or its range where it is not served or
/// most rows pass; then the records past the last row group. With a [`Top`], a served
/// row group's selected rows are ranked by the sort's values in the chunks, and only
/// the first `keep` of all of them are fetched, however many pass.
pub(crate) fn find_segments(
    collection: &Collection,
    snapshot: &dyn Snapshot,
    find: &ColumnFind,
    deadline: &Deadline,
) -> Result<Vec<Segment>> {
    let plan = find.plan()?;
    let view = collection.column_store_view(snapshot, find.index.id)?;
    let last_group = collection.record_id_high_water() >> ROW_GROUP_SPAN_BITS;
    let mut ranked = find.top.as_ref().map(Ranking::new).transpose()?;
    let mut segments = Vec::new();
    for group in 0..=last_group {
        deadline.check()?;
        if skipped(&view, &plan, group) {
            continue;
        }
        let (after, last) = ColumnStoreView::record_range(group);
        let range = RecordRange { after, last };
        let selection = selection(collection, snapshot, &view, &plan, group)?;
        match (selection, &mut ranked) {
            (Some(selection), Some(ranked)) => ranked.offer(&plan, &selection),
            (Some(selection), None) if find.rows => {
                if !selection.records.is_empty() {
                    segments.push(Segment::Rows(SelectedRows {
                        group,
                        generation: view.groups[&group].generation,
                        rows: selection.rows,
                        records: selection.records,
                    }));
                }
            }
            (Some(selection), None)
                if selection.records.len() * FETCH_ONE_IN_MIN <= view.groups[&group].rows =>
            {
                if !selection.records.is_empty() {
                    segments.push(Segment::Records(selection.records));
                }
            }
            _ => push_range(&mut segments, range),
        }
    }
    let (_, last) = ColumnStoreView::record_range(last_group);
    let past = RecordRange {
        after: Some(last),
        last: u64::MAX,
    };
    push_range(&mut segments, past);
    Ok(match ranked {
        Some(ranked) => ranked.interleave(segments),
        None => segments,
    })
}

/// Appends a range to the segments, as part of the previous one when they meet.
fn push_range(segments: &mut Vec<Segment>, range: RecordRange) {
    match segments.last_mut() {
        Some(Segment::Range(previous)) if range.after == Some(previous.last) => {
            previous.last = range.last;
        }
        _ => segments.push(Segment::Range(range)),
    }
}

/// The rows of a row group that pass a plan's filter, with the chunks they were
/// selected from and their record ids.
struct Selection {
    columns: RowGroupColumns,
    rows: Vec<u32>,
    records: Vec<u64>,
}

/// The rows of row group `group` that pass `plan`'s filter; `None` when the group is
/// not served, or was built before row groups kept their record ids.
fn selection(
    collection: &Collection,
    snapshot: &dyn Snapshot,
    view: &ColumnStoreView,
    plan: &ColumnPlan,
    group: u64,
) -> Result<Option<Selection>> {
    let Some(columns) = read_columns(collection, snapshot, view, plan, group)? else {
        return Ok(None);
    };
    let Some(ids) = collection.column_chunk(snapshot, view, group, RECORD_IDS_PATH)? else {
        return Ok(None);
    };
    let offsets = match ids.int32s() {
        Some((offsets, None)) if offsets.len() == columns.rows => offsets,
        _ => {
            return Err(Error::internal(
                "a column store row group's record ids are corrupt",
            ))
        }
    };
    let first = group << ROW_GROUP_SPAN_BITS;
    let rows = plan.select(&columns)?;
    let records = rows
        .iter()
        .map(|&row| first + offsets[row as usize] as u64)
        .collect();
    Ok(Some(Selection {
        columns,
        rows,
        records,
    }))
}

/// The first records by a [`Top`]'s sort among the rows selected in served row groups,
/// offered in record order.
struct Ranking {
    spec: SortSpec,
    paths: Vec<String>,
    keep: usize,
    /// Each candidate's sort key and record id; trimmed to the first `keep` whenever it
    /// reaches twice that.
    best: Vec<(Vec<Bson>, u64)>,
    /// The key of the `keep`-th candidate after the last trim: a later row (so a later
    /// record) ranks after it unless its key sorts strictly before.
    bar: Option<Vec<Bson>>,
}

impl Ranking {
    fn new(top: &Top) -> Result<Ranking> {
        Ok(Ranking {
            spec: SortSpec::new(&top.sort)?,
            paths: top.sort.keys().cloned().collect(),
            keep: top.keep,
            best: Vec::new(),
            bar: None,
        })
    }

    fn offer(&mut self, plan: &ColumnPlan, selection: &Selection) {
        let mut values: Vec<std::vec::IntoIter<Option<Bson>>> = self
            .paths
            .iter()
            .map(|path| {
                plan.values(&selection.columns, path, &selection.rows)
                    .into_iter()
            })
            .collect();
        for &record in &selection.records {
            // A missing value sorts as null.
            let key: Vec<Bson> = values
                .iter_mut()
                .map(|v| v.next().flatten().unwrap_or(Bson::Null))
                .collect();
            if self
                .bar
                .as_ref()
                .is_some_and(|bar| self.spec.compare_keys(&key, bar) != std::cmp::Ordering::Less)
            {
                continue;
            }
            self.best.push((key, record));
            if self.best.len() >= 2 * self.keep {
                self.trim();
            }
        }
    }

    /// Keeps the first `keep` candidates, by key then record order.
    fn trim(&mut self) {
        let spec = &self.spec;
        self.best
            .sort_by(|(a, x), (b, y)| spec.compare_keys(a, b).then(x.cmp(y)));
        self.best.truncate(self.keep);
        if self.best.len() == self.keep {
            self.bar = self.best.last().map(|(key, _)| key.clone());
        }
    }

    /// The ranges of `segments` with the records ranked first between them, in record
    /// order.
    fn interleave(mut self, segments: Vec<Segment>) -> Vec<Segment> {
        self.trim();
        let mut records: Vec<u64> = self.best.into_iter().map(|(_, record)| record).collect();
        records.sort_unstable();
        let mut rest = records.as_slice();
        let mut out = Vec::with_capacity(segments.len() * 2 + 1);
        for segment in segments {
            if let Segment::Range(range) = &segment {
                let before = rest.partition_point(|id| range.after.is_some_and(|a| *id <= a));
                if before > 0 {
                    out.push(Segment::Records(rest[..before].to_vec()));
                    rest = &rest[before..];
                }
            }
            out.push(segment);
        }
        if !rest.is_empty() {
            out.push(Segment::Records(rest.to_vec()));
        }
        out
    }
}

/// The explain stage of a column find: `COLUMN_SCAN` as for an aggregation, with the
/// sort and the number of documents the chunks rank first when it has a [`Top`].
pub(crate) fn find_stage(collection: &Collection, find: &ColumnFind) -> Result<Document> {
    let plan = find.plan()?;
    let mut stage = stage(collection, &find.index, &plan)?;
    if let Some(top) = &find.top {
        stage.insert(
            "topK",
            doc! {"sortPattern": top.sort.clone(), "limitAmount": top.keep as i64},
        );
    }
    Ok(stage)
}

/// How many documents match a column find's filter: the rows its chunks select in the
/// row groups they serve, and a count of the matching documents elsewhere, over row
/// groups on the scan workers.
pub(crate) fn count(
    collection: &Collection,
    find: &ColumnFind,
    matcher: &Matcher,
    deadline: Deadline,
    workers: usize,
) -> Result<i64> {
    let plan = find.plan()?;
    let needs = Needs::Fields(&[]);
    let counts = over_row_groups(
        collection,
        &find.index,
        &plan,
        matcher,
        needs,
        &deadline,
        workers,
        &|group| match group {
            RowGroup::Skipped => Ok(0),
            RowGroup::Chunks(columns) => Ok(plan.select(&columns)?.len() as i64),
            RowGroup::Documents(scan, range) => scan.count(range),
        },
    )?;
    Ok(counts.into_iter().sum())
}

/// The distinct values at `key` among the documents a column find's filter matches, in
/// MongoDB's order: taken from the chunks where a row group serves the filter and the
/// key, from the documents elsewhere, over row groups on the scan workers, and merged
/// in record order, so the first of equal values (1 and 1.0) stands for them as in a
/// scan. `None` when the column store does not keep the key.
pub(crate) fn distinct(
    collection: &Collection,
    find: &ColumnFind,
    key: &str,
    matcher: &Matcher,
    deadline: Deadline,
    workers: usize,
) -> Result<Option<Vec<Bson>>> {
    let Some(plan) = ColumnPlan::for_filter(&find.filter, &[key.to_string()]) else {
        return Ok(None);
    };
    if eligible_index(collection, &plan, None).is_none_or(|index| index.id != find.index.id) {
        return Ok(None);
    }
    let path = FieldPath::parse(key);
    let top_level = [key.split('.').next().unwrap_or(key).to_string()];
    let per_group = over_row_groups(
        collection,
        &find.index,
        &plan,
        matcher,
        Needs::Fields(&top_level),
        &deadline,
        workers,
        &|group| {
            let mut values = DistinctValues::new(None);
            match group {
                RowGroup::Skipped => {}
                RowGroup::Chunks(columns) => {
                    let rows = plan.select(&columns)?;
                    for value in plan.values(&columns, key, &rows).iter().flatten() {
                        values.insert(value);
                    }
                }
                RowGroup::Documents(scan, range) => {
                    scan.visit(range, &mut ExecStats::default(), &mut |_, _, doc| {
                        values.insert_reached(&path, &doc);
                        Ok(Step::Continue)
                    })?;
                }
            }
            Ok(values.into_vec())
        },
    )?;
    let mut values = DistinctValues::new(None);
    for value in per_group.iter().flatten() {
        values.insert(value);
    }
    Ok(Some(values.into_vec()))
}

/// The rows a served row group selected for a [`ColumnFind::rows`] find, with their
/// record ids, and the build of the row group they were selected from.
#[derive(Debug)]
pub struct SelectedRows {
    group: u64,
    generation: i64,
    rows: Vec<u32>,
    pub records: Vec<u64>,
}

/// What makes the documents of a [`SelectedRows`]: the find's plan and the row group's
/// chunks it reads.
pub(crate) struct RowSource {
    plan: ColumnPlan,
    columns: RowGroupColumns,
}

impl RowSource {
    /// The document of `selected`'s row at `at`: its values at the find's paths.
    pub(crate) fn document(&self, selected: &SelectedRows, at: usize) -> Document {
        self.plan.row_document(&self.columns, selected.rows[at])
    }
}

/// The source of `selected`'s documents in `snapshot`; `None` when the snapshot (a
/// later batch's) holds another build of the row group or a write to it, so its records
/// must be fetched instead.
pub(crate) fn row_source(
    collection: &Collection,
    snapshot: &dyn Snapshot,
    find: &ColumnFind,
    selected: &SelectedRows,
) -> Result<Option<RowSource>> {
    let plan = find.plan()?;
    let view = collection.column_store_view(snapshot, find.index.id)?;
    let same_build = view
        .groups
        .get(&selected.group)
        .is_some_and(|header| header.generation == selected.generation);
    if !same_build {
        return Ok(None);
    }
    let columns = read_columns(collection, snapshot, &view, &plan, selected.group)?;
    Ok(columns.map(|columns| RowSource { plan, columns }))
}
