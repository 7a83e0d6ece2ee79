//! Executes the read side of commands: which documents of a collection match a filter,
//! and the `let` variables the filter (and the rest of the command) sees.
//!
//! The access path is the planner's (`basalt_plan`): a collection scan in natural order,
//! or an index scan over key ranges that fetches each record. The matcher always
//! re-checks candidates, so an access path only has to return a superset of the matches.

use crate::column_scan::{ColumnFind, Segment};
use crate::operations::Progress;
use crate::parallel_scan::{self, RecordRange};
use crate::request::Fields;
use basalt_agg::ColumnPlan;
use basalt_catalog::{Collection, IndexSpec, TEXT_KEY_FIELD};
use basalt_error::{Error, ErrorCode, Result};
use basalt_expr::Scope;
use basalt_plan::{IndexScanPlan, KeyCheck, KeyRange, Plan, PlanChoice};
use basalt_query::text::{TextIndex, TextQuery, TEXT_SCORE_FIELD};
use basalt_query::{Matcher, Projection};
use basalt_storage::Snapshot;
use basalt_value::Collation;
use bson::{doc, Bson, Document, RawDocument, RawDocumentBuf};
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often (in documents examined) a scan looks at its deadline.
const DEADLINE_CHECK_INTERVAL_DOCS: u64 = 256;

/// A `maxTimeMS` limit, and the [`Progress`] of the operation it bounds (whether
/// `killOp` stopped it, what it examined). It bounds processing time, not a cursor's
/// life: a cursor moves it on by the time it sat idle between batches
/// ([`Deadline::extend`]), as in MongoDB. Clones share the limit and the progress, so
/// every scan and stage of one command sees the same ones.
#[derive(Clone, Debug, Default)]
pub struct Deadline {
    limit: Option<Arc<parking_lot::Mutex<Instant>>>,
    progress: Arc<Progress>,
}

impl Deadline {
    pub fn from_max_time_ms(max_time_ms: Option<i64>) -> Deadline {
        Deadline {
            limit: max_time_ms.filter(|ms| *ms > 0).map(|ms| {
                Arc::new(parking_lot::Mutex::new(
                    Instant::now() + Duration::from_millis(ms as u64),
                ))
            }),
            progress: Arc::default(),
        }
    }

    /// Fails once the time is up (MaxTimeMSExpired) or the operation was killed
    /// (Interrupted).
    pub fn check(&self) -> Result<()> {
        match &self.limit {
            Some(at) if Instant::now() >= *at.lock() => Err(Error::new(
                ErrorCode::MAX_TIME_MS_EXPIRED,
                "operation exceeded time limit",
            )),
            _ => self.progress.check(),
        }
    }

    /// The operation's progress.
    pub fn progress(&self) -> &Progress {
        &self.progress
    }

    /// The time left in whole milliseconds (at least 1), when there is a limit: what
    /// server-side JavaScript run for a later batch may take.
    pub fn remaining_ms(&self) -> Option<i64> {
        let at = *self.limit.as_ref()?.lock();
        let left = at.saturating_duration_since(Instant::now()).as_millis();
        Some(i64::try_from(left).unwrap_or(i64::MAX).max(1))
    }

    /// Moves the limit on by `idle`, time the command's cursor spent waiting for the
    /// client.
    pub fn extend(&self, idle: Duration) {
        if let Some(at) = &self.limit {
            *at.lock() += idle;
        }
    }
}

/// The variables of a command with a `let` option (find, update, delete, findAndModify):
/// its values are evaluated once and every `$expr`, projection and update pipeline of the
/// command sees them, with one `$$NOW`.
pub fn let_scope(fields: &Fields<'_>) -> Result<Scope> {
    match fields.document_opt("let")? {
        Some(let_vars) => Scope::with_let(let_vars),
        None => Ok(Scope::new()),
    }
}

/// How candidate documents are found: the planner's choice (`basalt_plan`).
#[derive(Clone, Debug, PartialEq)]
pub enum AccessPath {
    CollectionScan,
    IndexScan(Box<IndexScanPlan>),
    /// The union of index scans for a top-level `$or`.
    Or(Vec<IndexScanPlan>),
    /// The records a geo index's cells reach (`crate::geo::cell_scans`), each fetched
    /// once in record order: a collection scan's order, from a fraction of its reads.
    Cells(Box<crate::geo::CellScan>),
    /// The records a column store index's chunks select, fetched in record order
    /// (`crate::column_scan`).
    Columns(Box<ColumnFind>),
}

impl AccessPath {
    /// mongod's `planSummary` of the path: `COLLSCAN`, `IXSCAN { a: 1 }`, or the index
    /// scans of an `$or`, comma-separated.
    pub fn summary(&self) -> String {
        let ixscan = |index: &IndexSpec| {
            let fields: Vec<String> = index
                .key
                .iter()
                .map(|(field, value)| format!("{field}: {value}"))
                .collect();
            format!("IXSCAN {{ {} }}", fields.join(", "))
        };
        match self {
            AccessPath::CollectionScan => "COLLSCAN".to_string(),
            AccessPath::IndexScan(scan) => ixscan(&scan.index),
            AccessPath::Or(scans) => scans
                .iter()
                .map(|scan| ixscan(&scan.index))
                .collect::<Vec<_>>()
                .join(", "),
            AccessPath::Cells(cells) => ixscan(&cells.index),
            AccessPath::Columns(_) => "COLUMN_SCAN".to_string(),
        }
    }

    /// The planner's choice for `filter` over the collection's current indexes, or the
    /// index (or `$natural` scan) a `hint` names.
    pub fn choose(
        collection: &Collection,
        filter: &Document,
        collation: Option<&Collation>,
        hint: Option<&Bson>,
    ) -> Result<AccessPath> {
        Ok(AccessPath::choose_sorted(collection, filter, collation, hint, None, None)?.0)
    }

    /// As [`AccessPath::choose`] for a sorted query; also says whether the path
    /// returns documents in `sort` order already (an index scan in key order). Unhinted
    /// queries go through the collection's plan cache, keyed by their shape (filter
    /// without values, sort, collation).
    pub fn choose_sorted(
        collection: &Collection,
        filter: &Document,
        collation: Option<&Collation>,
        hint: Option<&Bson>,
        sort: Option<&Document>,
        projection: Option<&Document>,
    ) -> Result<(AccessPath, bool)> {
        let filtered = filtered_indexes(collection, filter, sort, collation, projection);
        if filtered.is_some() || hint.is_some_and(|h| !is_empty_hint(h)) {
            let (choice, sorted) =
                plan_choice(collection, filter, collation, hint, sort, projection)?;
            let mut path = AccessPath::from(choice.winner);
            if filtered.is_none() && !sorted {
                path = path.or_column_store(collection, filter, collation, hint, sort);
            }
            path.note_index_uses(collection);
            return Ok((path, sorted));
        }
        if let Some(cells) = crate::geo::cell_scans(collection, filter)? {
            let path = AccessPath::Cells(Box::new(cells));
            path.note_index_uses(collection);
            return Ok((path, false));
        }
        let planned = text_planning_filter(collection, filter)?;
        let (meta, generation) = collection.meta_for_planning();
        let parts = basalt_plan::QueryShapeParts { sort, collation };
        let (plan, sorted) = basalt_plan::plan_with_cache(
            collection.plan_cache(),
            (&meta, generation),
            planned.as_ref().unwrap_or(filter),
            parts,
        )?;
        let mut path = AccessPath::from(plan);
        if !sorted {
            path = path.or_column_store(collection, filter, collation, None, sort);
        }
        path.note_index_uses(collection);
        Ok((path, sorted))
    }

    /// A column store find instead of this path when the collection's column store
    /// index serves the filter and should read it (`crate::column_scan::find_path`).
    fn or_column_store(
        self,
        collection: &Collection,
        filter: &Document,
        collation: Option<&Collation>,
        hint: Option<&Bson>,
        sort: Option<&Document>,
    ) -> AccessPath {
        let otherwise = (&self).into();
        let reads = sort.and_then(ColumnPlan::sort_paths).unwrap_or_default();
        match crate::column_scan::find_path(collection, filter, collation, hint, &reads, otherwise)
        {
            Some(find) => AccessPath::Columns(Box::new(find)),
            None => self,
        }
    }

    /// Counts this operation in the `$indexStats` of every index the path reads.
    fn note_index_uses(&self, collection: &Collection) {
        match self {
            AccessPath::CollectionScan => {}
            AccessPath::IndexScan(scan) => collection.note_index_use(scan.index.id),
            AccessPath::Or(scans) => scans
                .iter()
                .for_each(|scan| collection.note_index_use(scan.index.id)),
            AccessPath::Cells(cells) => collection.note_index_use(cells.index.id),
            AccessPath::Columns(find) => collection.note_index_use(find.index.id),
        }
    }
}

/// The collection's text index, if it has one.
fn text_index(collection: &Collection) -> Option<std::sync::Arc<TextIndex>> {
    collection
        .meta()
        .indexes
        .iter()
        .find_map(IndexSpec::text)
        .map(std::sync::Arc::new)
}

/// The filter the planner sees for a `$text` search: its words as conditions on the
/// text index's terms (`_fts`), so that it reads only the documents holding one of
/// them; a search of phrases alone scans the collection. IndexNotFound without a text
/// index, as in MongoDB. `None` for a filter without `$text`.
fn text_planning_filter(collection: &Collection, filter: &Document) -> Result<Option<Document>> {
    let Some(search) = filter.get("$text") else {
        return Ok(None);
    };
    let Some(index) = text_index(collection) else {
        return Err(Error::new(
            ErrorCode::INDEX_NOT_FOUND,
            "text index required for $text query",
        ));
    };
    let terms = TextQuery::parse(search)?.index_terms(&index);
    let mut planned = Document::new();
    for (name, value) in filter {
        if name != "$text" {
            planned.insert(name.clone(), value.clone());
        } else if !terms.is_empty() {
            let terms: Vec<Bson> = terms.iter().cloned().map(Bson::String).collect();
            planned.insert(TEXT_KEY_FIELD, doc! { "$in": terms });
        }
    }
    Ok(Some(planned))
}

/// `hint: {}` is no hint, as in MongoDB.
fn is_empty_hint(hint: &Bson) -> bool {
    matches!(hint, Bson::Document(d) if d.is_empty())
}

impl From<Plan> for AccessPath {
    fn from(plan: Plan) -> AccessPath {
        match plan {
            Plan::CollectionScan => AccessPath::CollectionScan,
            Plan::IndexScan(scan) => AccessPath::IndexScan(scan),
            Plan::Or(scans) => AccessPath::Or(scans),
        }
    }
}

/// Every plan considered for a query, the winner first (for explain), and whether the
/// winner provides `sort`. Planned afresh, as MongoDB's explain does, not from the cache.
pub fn plan_choice(
    collection: &Collection,
    filter: &Document,
    collation: Option<&Collation>,
    hint: Option<&Bson>,
    sort: Option<&Document>,
    projection: Option<&Document>,
) -> Result<(PlanChoice, bool)> {
    // An index filter set for the query's shape decides the indexes, over any hint.
    if let Some(indexes) = filtered_indexes(collection, filter, sort, collation, projection) {
        return basalt_plan::plan_sorted(&indexes, filter, collation, None, sort);
    }
    let hint = hint.filter(|h| !is_empty_hint(h));
    // A geo query reads its cells (shown as the union of their scans).
    if hint.is_none() {
        if let Some(cells) = crate::geo::cell_scans(collection, filter)? {
            let choice = PlanChoice {
                winner: Plan::Or(cells.scans),
                rejected: Vec::new(),
            };
            return Ok((choice, false));
        }
    }
    let planned = text_planning_filter(collection, filter)?;
    let filter = planned.as_ref().unwrap_or(filter);
    let meta = collection.planning_meta();
    basalt_plan::plan_sorted(&meta.indexes, filter, collation, hint, sort)
}

/// The indexes a query may use when they are restricted: by the index hints of the
/// query settings of the running query (`query_settings.rs`), else by an index filter
/// (`planCacheSetFilter`) set for its shape. Those named (by key pattern or name) that
/// exist and are not hidden.
pub fn filtered_indexes(
    collection: &Collection,
    filter: &Document,
    sort: Option<&Document>,
    collation: Option<&Collation>,
    projection: Option<&Document>,
) -> Option<Vec<IndexSpec>> {
    let hinted = {
        let meta = collection.meta();
        crate::query_settings::allowed_indexes(&meta.db, &meta.name)
    };
    let allowed = match hinted {
        Some(allowed) => allowed,
        None => {
            let parts = basalt_plan::QueryShapeParts {
                sort: sort.filter(|s| !s.is_empty()),
                collation,
            };
            let shape = basalt_plan::index_filter_shape(filter, parts, projection);
            collection.plan_cache().filter(&shape)?.indexes
        }
    };
    let meta = collection.planning_meta();
    Some(
        meta.indexes
            .iter()
            .filter(|index| allowed.iter().any(|named| names_index(named, index)))
            .cloned()
            .collect(),
    )
}

/// Whether an index filter's entry (a key pattern or a name) names `index`.
fn names_index(named: &Bson, index: &IndexSpec) -> bool {
    match named {
        Bson::String(name) => *name == index.name,
        Bson::Document(key) => index.has_key_pattern(key),
        _ => false,
    }
}

/// What a scan examined, for explain's executionStats.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ExecStats {
    pub keys_examined: u64,
    pub docs_examined: u64,
}

/// Where a resumable scan stopped: the last record (collection scan) or index entry
/// (index scan, in which branch of an `$or` union) it consumed, and for a multikey
/// index or a union the records already seen, so a document reached through several
/// keys is returned once.
#[derive(Clone, Debug, Default)]
pub struct Position {
    after_record: Option<u64>,
    /// The last record a collection scan may visit (a partition's end).
    last_record: Option<u64>,
    after_entry: Option<Vec<u8>>,
    branch: usize,
    seen: HashSet<u64>,
    /// The records a scan of cells reaches, in order, found by its first batch.
    cell_records: Option<Arc<CellRecords>>,
    /// What a column store find reads, in order, found by its first batch.
    column_segments: Option<Arc<Vec<Segment>>>,
}

impl Position {
    /// A collection scan of the records after `after` up to `last`.
    pub fn records(after: Option<u64>, last: u64) -> Position {
        Position {
            after_record: after,
            last_record: Some(last),
            ..Position::default()
        }
    }
}

/// What a visitor did with a matching document.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Step {
    /// Consumed it; go on.
    Continue,
    /// Consumed it; stop.
    StopAfter,
    /// Did not consume it (a full batch): stop, and resume at it next time.
    StopBefore,
}

/// What a consumer of matches needs of each document; a scan decodes nothing more.
#[derive(Clone, Copy, Debug)]
pub enum Needs<'a> {
    /// All of it, decoded.
    Document,
    /// These top-level fields decoded (beside those the filter reads). An index scan
    /// whose entries store them all, and all the filter reads, fetches no document: a
    /// covered query.
    Fields(&'a [String]),
    /// Its stored bytes, decoded only as far as the filter reads.
    StoredBytes,
}

impl<'a> Needs<'a> {
    /// The top-level fields to decode beside the filter's (`None`: all).
    fn decoded(self) -> Option<&'a [String]> {
        match self {
            Needs::Document => None,
            Needs::Fields(fields) => Some(fields),
            Needs::StoredBytes => Some(&[]),
        }
    }
}

impl<'a> From<Option<&'a [String]>> for Needs<'a> {
    fn from(fields: Option<&'a [String]>) -> Needs<'a> {
        fields.map_or(Needs::Document, Needs::Fields)
    }
}

/// What a scan hands each matching record to: its id, its stored bytes (`None` for an
/// entry of a covered index scan, which reads no record), and the part of it decoded for
/// the filter and the consumer (see [`Needs`]).
pub type Visitor<'v> = dyn FnMut(u64, Option<&RawDocument>, Document) -> Result<Step> + 'v;

/// Visits the documents of `collection` that match, in the access path's order
/// (natural order, or index key order).
pub fn for_each_match(
    collection: &Collection,
    snapshot: &dyn Snapshot,
    matcher: &Matcher,
    path: &AccessPath,
    deadline: Deadline,
    fields: Option<&[String]>,
    visit: &mut dyn FnMut(u64, Document) -> Result<ControlFlow<()>>,
) -> Result<()> {
    execute(
        collection,
        snapshot,
        matcher,
        path,
        &mut Position::default(),
        &mut ExecStats::default(),
        deadline,
        fields.into(),
        &mut |record_id, _, doc| {
            Ok(match visit(record_id, doc)? {
                ControlFlow::Continue(()) => Step::Continue,
                ControlFlow::Break(()) => Step::StopAfter,
            })
        },
    )
}

/// Visits the matching documents from `position` on, moving it past each consumed
/// one, and counts what was examined, in `stats` and in the operation's progress
/// (the deadline's). The visitor gets what it `needs` of each.
#[allow(clippy::too_many_arguments)]
pub fn execute(
    collection: &Collection,
    snapshot: &dyn Snapshot,
    matcher: &Matcher,
    path: &AccessPath,
    position: &mut Position,
    stats: &mut ExecStats,
    deadline: Deadline,
    needs: Needs<'_>,
    visit: &mut Visitor<'_>,
) -> Result<()> {
    let before = *stats;
    let operation = deadline.clone();
    operation.progress().note_plan(|| path.summary());
    let result = execute_unrecorded(
        collection, snapshot, matcher, path, position, stats, deadline, needs, visit,
    );
    operation.progress().add_examined(
        stats.keys_examined - before.keys_examined,
        stats.docs_examined - before.docs_examined,
    );
    result
}

#[allow(clippy::too_many_arguments)]
fn execute_unrecorded(
    collection: &Collection,
    snapshot: &dyn Snapshot,
    matcher: &Matcher,
    path: &AccessPath,
    position: &mut Position,
    stats: &mut ExecStats,
    deadline: Deadline,
    needs: Needs<'_>,
    visit: &mut Visitor<'_>,
) -> Result<()> {
    // A `$text` search runs under the collection's text index, and each match carries
    // its score on to whatever reads it (`{$meta: "textScore"}`).
    if matcher.text_query().is_some() && !matcher.has_text_index() {
        let searching = matcher.clone().with_text_index(text_index(collection));
        let scored = &mut |record_id, raw: Option<&RawDocument>, mut doc: Document| {
            if let Some(score) = searching.text_score(&doc) {
                doc.insert(TEXT_SCORE_FIELD, score);
            }
            visit(record_id, raw, doc)
        };
        let (position, stats) = (position, stats);
        return execute_unrecorded(
            collection, snapshot, &searching, path, position, stats, deadline, needs, scored,
        );
    }
    // Checked at every pass too, not only every DEADLINE_CHECK_INTERVAL_DOCS documents
    // or keys: a cursor's small batches each start a pass.
    deadline.check()?;
    let fields = needs.decoded();
    match path {
        AccessPath::IndexScan(scan) => {
            // An index may have turned multikey since the plan was made (a cursor's
            // later batch): from then on a record may be reached through several keys.
            let multikey = scan.index.multikey
                || collection
                    .meta()
                    .indexes
                    .iter()
                    .any(|index| index.id == scan.index.id && index.multikey);
            let run = IndexRun {
                collection,
                snapshot,
                matcher,
                deadline,
                dedup: multikey,
                decoded_fields: decoded_fields(matcher, fields),
                covered: covers(&scan.index, matcher, needs),
            };
            run.scan(scan, position, stats, visit).map(|_| ())
        }
        AccessPath::Or(scans) => {
            let run = IndexRun {
                collection,
                snapshot,
                matcher,
                deadline,
                dedup: true,
                decoded_fields: decoded_fields(matcher, fields),
                covered: false,
            };
            for (branch, scan) in scans.iter().enumerate().skip(position.branch) {
                if branch > position.branch {
                    position.branch = branch;
                    position.after_entry = None;
                }
                if run.scan(scan, position, stats, visit)? == Scanned::Stopped {
                    break;
                }
            }
            Ok(())
        }
        AccessPath::Cells(cells) => {
            let records = match &position.cell_records {
                Some(records) => records.clone(),
                None => {
                    let records =
                        Arc::new(cell_records(collection, snapshot, &cells.scans, stats)?);
                    position.cell_records = Some(records.clone());
                    records
                }
            };
            let start = match position.after_record {
                Some(after) => records.entries.partition_point(|(id, _)| *id <= after),
                None => 0,
            };
            // An entry storing its document's indexed values answers for it when they
            // are all the filter and the consumer read; entries storing the same values
            // (observations at one place) are tested once.
            let stored_fields: Vec<&str> = cells.index.stored_fields().collect();
            let answers = matcher.top_level_fields().is_some_and(|read| {
                let wanted = needs.decoded().unwrap_or(&[]);
                matches!(needs, Needs::Fields(_))
                    && read
                        .iter()
                        .chain(wanted)
                        .all(|f| stored_fields.contains(&f.as_str()))
            });
            // A consumer that reads no field (a count) is handed an empty document
            // instead of a copy of the entry's.
            let reads_nothing = needs.decoded().is_some_and(<[String]>::is_empty);
            let mut tested: HashMap<&[u8], Option<Document>> = HashMap::new();
            for &(record_id, at) in &records.entries[start..] {
                let stored = records.stored(at);
                stats.docs_examined += 1;
                if stats
                    .docs_examined
                    .is_multiple_of(DEADLINE_CHECK_INTERVAL_DOCS)
                {
                    deadline.check()?;
                }
                let step = if answers && !stored.is_empty() {
                    let matching = match tested.entry(stored) {
                        Entry::Occupied(tested) => tested.into_mut(),
                        Entry::Vacant(untested) => {
                            let corrupt = |e| Error::internal(format!("corrupt index entry: {e}"));
                            let doc = Document::try_from(
                                RawDocument::from_bytes(stored).map_err(corrupt)?,
                            )
                            .map_err(corrupt)?;
                            untested.insert(matcher.try_matches(&doc)?.then_some(doc))
                        }
                    };
                    let handed = match matching {
                        Some(_) if reads_nothing => Some(Document::new()),
                        matching => matching.clone(),
                    };
                    match handed {
                        Some(doc) => visit(record_id, None, doc)?,
                        None => Step::Continue,
                    }
                } else {
                    let Some(bytes) = collection.get_record_bytes(snapshot, record_id)? else {
                        continue;
                    };
                    let corrupt = |e| Error::internal(format!("corrupt record {record_id}: {e}"));
                    let raw = RawDocument::from_bytes(&bytes).map_err(corrupt)?;
                    let doc = Document::try_from(raw).map_err(corrupt)?;
                    if matcher.try_matches(&doc)? {
                        visit(record_id, Some(raw), doc)?
                    } else {
                        Step::Continue
                    }
                };
                if step != Step::StopBefore {
                    position.after_record = Some(record_id);
                }
                if step != Step::Continue {
                    break;
                }
            }
            Ok(())
        }
        AccessPath::CollectionScan => scan_records(
            collection, snapshot, matcher, position, stats, &deadline, fields, visit,
        ),
        AccessPath::Columns(find) => {
            let segments = match &position.column_segments {
                Some(segments) => segments.clone(),
                None => {
                    let segments = Arc::new(crate::column_scan::find_segments(
                        collection, snapshot, find, &deadline,
                    )?);
                    position.column_segments = Some(segments.clone());
                    segments
                }
            };
            let read = RecordReading::new(matcher, fields);
            let resume = |records: &[u64], after: Option<u64>| match after {
                Some(after) => records.partition_point(|id| *id <= after),
                None => 0,
            };
            for segment in segments.iter() {
                deadline.check()?;
                let records = match segment {
                    // Rows made from the chunks while the snapshot holds the build they
                    // were selected from; else their records, fetched and matched.
                    Segment::Rows(selected) => {
                        match crate::column_scan::row_source(collection, snapshot, find, selected)?
                        {
                            None => Some(&selected.records),
                            Some(source) => {
                                let start = resume(&selected.records, position.after_record);
                                for at in start..selected.records.len() {
                                    let record_id = selected.records[at];
                                    let doc = source.document(selected, at);
                                    let step = visit(record_id, None, doc)?;
                                    if step != Step::StopBefore {
                                        position.after_record = Some(record_id);
                                    }
                                    if step != Step::Continue {
                                        return Ok(());
                                    }
                                }
                                None
                            }
                        }
                    }
                    Segment::Records(records) => Some(records),
                    Segment::Range(_) => None,
                };
                if let Some(records) = records {
                    let start = resume(records, position.after_record);
                    for &record_id in &records[start..] {
                        stats.docs_examined += 1;
                        let Some(bytes) = collection.get_record_bytes(snapshot, record_id)? else {
                            continue;
                        };
                        let corrupt =
                            |e| Error::internal(format!("corrupt record {record_id}: {e}"));
                        let raw = RawDocument::from_bytes(&bytes).map_err(corrupt)?;
                        let step = match read.matching(matcher, record_id, raw)? {
                            Some(doc) => visit(record_id, Some(raw), doc)?,
                            None => Step::Continue,
                        };
                        if step != Step::StopBefore {
                            position.after_record = Some(record_id);
                        }
                        if step != Step::Continue {
                            return Ok(());
                        }
                    }
                }
                let Segment::Range(range) = segment else {
                    continue;
                };
                if position
                    .after_record
                    .is_some_and(|after| after >= range.last)
                {
                    continue;
                }
                let mut within =
                    Position::records(position.after_record.max(range.after), range.last);
                let mut stopped = false;
                scan_records(
                    collection,
                    snapshot,
                    matcher,
                    &mut within,
                    stats,
                    &deadline,
                    fields,
                    &mut |record_id, raw, doc| {
                        let step = visit(record_id, raw, doc)?;
                        stopped = step != Step::Continue;
                        Ok(step)
                    },
                )?;
                position.after_record = within.after_record;
                if stopped {
                    return Ok(());
                }
            }
            Ok(())
        }
    }
}

/// How a scan tests a record and decodes a match: on the fields the filter reads,
/// decoded alone; a match then decoded whole, or only as far as the visitor needs it
/// (the fields both need decoded once).
struct RecordReading {
    read_fields: Option<Vec<String>>,
    decoded_fields: Option<Vec<String>>,
}

impl RecordReading {
    fn new(matcher: &Matcher, wanted: Option<&[String]>) -> RecordReading {
        let read_fields = matcher.top_level_fields();
        let decoded_fields = match (&read_fields, wanted) {
            (Some(read), Some(wanted)) => {
                let mut both = read.clone();
                both.extend(wanted.iter().filter(|f| !read.contains(f)).cloned());
                Some(both)
            }
            _ => None,
        };
        RecordReading {
            read_fields,
            decoded_fields,
        }
    }

    /// The record, decoded as far as needed, when it matches.
    fn matching(
        &self,
        matcher: &Matcher,
        record_id: u64,
        raw: &RawDocument,
    ) -> Result<Option<Document>> {
        let corrupt =
            |e: bson::error::Error| Error::internal(format!("corrupt record {record_id}: {e}"));
        if matcher.rejects_raw(raw) {
            return Ok(None);
        }
        Ok(if let Some(decoded) = &self.decoded_fields {
            let doc = basalt_value::raw::decode_named(raw, decoded).map_err(corrupt)?;
            matcher.try_matches(&doc)?.then_some(doc)
        } else if let Some(read) = &self.read_fields {
            let tested = basalt_value::raw::decode_named(raw, read).map_err(corrupt)?;
            if matcher.try_matches(&tested)? {
                Some(Document::try_from(raw).map_err(corrupt)?)
            } else {
                None
            }
        } else {
            let doc = Document::try_from(raw).map_err(corrupt)?;
            matcher.try_matches(&doc)?.then_some(doc)
        })
    }
}

/// The collection scan from `position` on (to its last record, if it has one).
#[allow(clippy::too_many_arguments)]
fn scan_records(
    collection: &Collection,
    snapshot: &dyn Snapshot,
    matcher: &Matcher,
    position: &mut Position,
    stats: &mut ExecStats,
    deadline: &Deadline,
    fields: Option<&[String]>,
    visit: &mut Visitor<'_>,
) -> Result<()> {
    let read = RecordReading::new(matcher, fields);
    let last_record = position.last_record.unwrap_or(u64::MAX);
    collection.scan(snapshot, position.after_record, &mut |record_id, raw| {
        if record_id > last_record {
            return Ok(ControlFlow::Break(()));
        }
        stats.docs_examined += 1;
        if stats
            .docs_examined
            .is_multiple_of(DEADLINE_CHECK_INTERVAL_DOCS)
        {
            deadline.check()?;
        }
        let step = match read.matching(matcher, record_id, raw)? {
            Some(doc) => visit(record_id, Some(raw), doc)?,
            None => Step::Continue,
        };
        if step != Step::StopBefore {
            position.after_record = Some(record_id);
        }
        Ok(match step {
            Step::Continue => ControlFlow::Continue(()),
            Step::StopAfter | Step::StopBefore => ControlFlow::Break(()),
        })
    })
}

/// The records a scan of cells reaches, in id order, each once, with the values their
/// entry stores (none for a document with several cells), kept in one buffer.
#[derive(Debug, Default)]
struct CellRecords {
    /// Record id, and where its stored values start and end in `stored`.
    entries: Vec<(u64, (u32, u32))>,
    stored: Vec<u8>,
}

impl CellRecords {
    fn stored(&self, (start, end): (u32, u32)) -> &[u8] {
        &self.stored[start as usize..end as usize]
    }
}

/// Reads the entries of the cells' scans (see [`CellRecords`]).
fn cell_records(
    collection: &Collection,
    snapshot: &dyn Snapshot,
    scans: &[IndexScanPlan],
    stats: &mut ExecStats,
) -> Result<CellRecords> {
    let mut records = CellRecords::default();
    for scan in scans {
        for range in &scan.ranges {
            collection.scan_index(
                snapshot,
                &scan.index,
                range.common_prefix(),
                Some(&range.start),
                &mut |entry, stored| {
                    let Some(key) = entry.len().checked_sub(8).map(|n| &entry[..n]) else {
                        return Err(Error::internal("index entry without a record id"));
                    };
                    stats.keys_examined += 1;
                    if range.is_past_end(key) {
                        return Ok(ControlFlow::Break(()));
                    }
                    if scan.key_filter.check(key, false) == KeyCheck::InBounds {
                        let mut id = [0u8; 8];
                        id.copy_from_slice(&entry[key.len()..]);
                        let start = records.stored.len() as u32;
                        records.stored.extend_from_slice(stored);
                        let end = records.stored.len() as u32;
                        records.entries.push((u64::from_be_bytes(id), (start, end)));
                    }
                    Ok(ControlFlow::Continue(()))
                },
            )?;
        }
    }
    records.entries.sort_unstable_by_key(|(id, _)| *id);
    records.entries.dedup_by_key(|(id, _)| *id);
    Ok(records)
}

/// Whether an index scan ran to its end or a visitor stopped it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Scanned {
    Finished,
    Stopped,
}

/// What every index scan of one execution shares.
struct IndexRun<'a> {
    collection: &'a Collection,
    snapshot: &'a dyn Snapshot,
    matcher: &'a Matcher,
    deadline: Deadline,
    /// Whether a record may be reached more than once (multikey index, `$or` union).
    dedup: bool,
    /// The top-level fields to decode of each fetched record (`None`: all of it).
    decoded_fields: Option<Vec<String>>,
    /// Whether entries answer for their documents (see [`covers`]).
    covered: bool,
}

/// Whether a scan of `index` can hand out documents made of the values its entries
/// store, reading no record: when they hold every field the filter and the consumer
/// read, and no array (a multikey index's entry holds one element). Entries written
/// before indexes stored values hold none; their records are read.
pub fn covers(index: &IndexSpec, matcher: &Matcher, needs: Needs<'_>) -> bool {
    let Needs::Fields(wanted) = needs else {
        return false;
    };
    let Some(read) = matcher.top_level_fields() else {
        return false;
    };
    let stored: Vec<&str> = index.stored_fields().collect();
    !index.multikey
        && !stored.is_empty()
        && read
            .iter()
            .chain(wanted)
            .all(|f| stored.contains(&f.as_str()))
}

/// The top-level fields an index scan decodes of each record: those the filter reads
/// and those the consumer wants, when both are known.
fn decoded_fields(matcher: &Matcher, wanted: Option<&[String]>) -> Option<Vec<String>> {
    let mut fields = matcher.top_level_fields()?;
    for field in wanted? {
        if !fields.contains(field) {
            fields.push(field.clone());
        }
    }
    Some(fields)
}

impl IndexRun<'_> {
    /// Scans the plan's key ranges in order (last to first, each from its end, for a
    /// backward scan), seeking past keys its bounds rule out, fetching each record once
    /// and re-checking it with the matcher.
    fn scan(
        &self,
        scan: &IndexScanPlan,
        position: &mut Position,
        stats: &mut ExecStats,
        visit: &mut Visitor<'_>,
    ) -> Result<Scanned> {
        let backward = scan.backward;
        let ranges: Box<dyn Iterator<Item = &KeyRange>> = if backward {
            Box::new(scan.ranges.iter().rev())
        } else {
            Box::new(scan.ranges.iter())
        };
        for range in ranges {
            // Where to read from: the range's first key in scan order, or just past the
            // last entry consumed when a previous batch stopped inside this range.
            let mut from = match &position.after_entry {
                Some(entry) if backward => match range.upper_limit() {
                    Some(limit) if entry.as_slice() >= limit.as_slice() => Some(limit),
                    _ if range.is_before_start(entry) => continue,
                    _ => Some(entry.clone()),
                },
                Some(entry) if entry.as_slice() >= range.start.as_slice() => {
                    if range.is_past_end(entry) {
                        continue;
                    }
                    Some(entry.clone())
                }
                // Entries extend the range start, so "after the start" is "from it".
                _ if backward => range.upper_limit(),
                _ => Some(range.start.clone()),
            };
            loop {
                match self.scan_from(scan, range, from.as_deref(), position, stats, visit)? {
                    Resume::Stopped => return Ok(Scanned::Stopped),
                    Resume::RangeDone => break,
                    Resume::Seek(target) => from = Some(target),
                }
            }
        }
        Ok(Scanned::Finished)
    }

    /// Reads one storage iterator of `range` from `from` on, until the range ends, a
    /// visitor stops, or a key out of bounds says where the next allowed one is. Entries
    /// in bounds are read a few ahead of their records' fetch ([`IndexRun::fetch_pending`]).
    fn scan_from(
        &self,
        scan: &IndexScanPlan,
        range: &KeyRange,
        from: Option<&[u8]>,
        position: &mut Position,
        stats: &mut ExecStats,
        visit: &mut Visitor<'_>,
    ) -> Result<Resume> {
        let backward = scan.backward;
        let mut outcome = Resume::RangeDone;
        let mut pending = Vec::new();
        let mut read_ahead = 1;
        // Keys read in this pass, for the deadline; a key counts as examined when it is
        // rejected or its entry is used, not when it is only read ahead.
        let mut read = 0u64;
        let mut on_entry = |entry: &[u8], stored: &[u8]| -> Result<ControlFlow<()>> {
            read += 1;
            if read.is_multiple_of(DEADLINE_CHECK_INTERVAL_DOCS) {
                self.deadline.check()?;
            }
            let Some(key) = entry.len().checked_sub(8).map(|n| &entry[..n]) else {
                return Err(Error::internal("index entry without a record id"));
            };
            let out_of_range = if backward {
                range.is_before_start(key)
            } else {
                range.is_past_end(key)
            };
            if out_of_range {
                stats.keys_examined += 1;
                return Ok(ControlFlow::Break(()));
            }
            match scan.key_filter.check(key, backward) {
                KeyCheck::InBounds => {}
                KeyCheck::SeekAfter(target) | KeyCheck::SeekBefore(target) => {
                    stats.keys_examined += 1;
                    let beyond = if backward {
                        target.as_slice() <= range.start.as_slice()
                    } else {
                        range.is_past_end(&target)
                    };
                    // A new iterator at the target: reading the keys up to it instead
                    // only pays for gaps of a dozen keys or so (measured on W5: a
                    // seek costs about 4 µs, a key read about 0.25 µs).
                    if !beyond {
                        outcome = Resume::Seek(target);
                    }
                    return Ok(ControlFlow::Break(()));
                }
            }
            let record_id = u64::from_be_bytes(
                entry[key.len()..]
                    .try_into()
                    .map_err(|_| Error::internal("index entry without a record id"))?,
            );
            pending.push(PendingEntry {
                entry: entry.to_vec(),
                record_id,
                stored: if self.covered {
                    stored.to_vec()
                } else {
                    Vec::new()
                },
            });
            if pending.len() < read_ahead {
                return Ok(ControlFlow::Continue(()));
            }
            // Read ahead more as the scan goes on: a query that wants one document
            // reads no entry past it, a long one fetches in runs.
            read_ahead = (read_ahead * 2).min(INDEX_READ_AHEAD_ENTRIES);
            if self.fetch_pending(&mut pending, position, stats, visit)? == Scanned::Stopped {
                outcome = Resume::Stopped;
                return Ok(ControlFlow::Break(()));
            }
            Ok(ControlFlow::Continue(()))
        };
        let prefix = range.common_prefix();
        if backward {
            self.collection.scan_index_back(
                self.snapshot,
                &scan.index,
                prefix,
                from,
                &mut on_entry,
            )?;
        } else {
            self.collection
                .scan_index(self.snapshot, &scan.index, prefix, from, &mut on_entry)?;
        }
        if !matches!(outcome, Resume::Stopped)
            && self.fetch_pending(&mut pending, position, stats, visit)? == Scanned::Stopped
        {
            outcome = Resume::Stopped;
        }
        Ok(outcome)
    }

    /// Fetches, checks and visits the records of the index entries read ahead, in their
    /// order, and empties `pending`. Records close together in id order (a run whose
    /// gaps are at most [`RECORD_RUN_GAP`]) are read in one pass of a record scan rather
    /// than one point read each: index order often follows insertion order (a
    /// timestamp), and a point read costs about ten sequential ones.
    fn fetch_pending(
        &self,
        pending: &mut Vec<PendingEntry>,
        position: &mut Position,
        stats: &mut ExecStats,
        visit: &mut Visitor<'_>,
    ) -> Result<Scanned> {
        let entries = std::mem::take(pending);
        // The records of the current run, by id, each taken when its entry comes.
        let mut fetched: Vec<(u64, Option<Vec<u8>>)> = Vec::new();
        for (i, pending) in entries.iter().enumerate() {
            let record_id = pending.record_id;
            if self.dedup && !position.seen.insert(record_id) {
                stats.keys_examined += 1;
                continue;
            }
            let step = if pending.stored.is_empty() {
                self.fetch(&entries[i..], &mut fetched, stats, visit)?
            } else {
                let corrupt = |e| Error::internal(format!("corrupt index entry: {e}"));
                let doc =
                    Document::try_from(RawDocument::from_bytes(&pending.stored).map_err(corrupt)?)
                        .map_err(corrupt)?;
                if self.matcher.try_matches(&doc)? {
                    visit(record_id, None, doc)?
                } else {
                    Step::Continue
                }
            };
            if step == Step::StopBefore {
                // Not consumed: the next batch examines it again.
                if self.dedup {
                    position.seen.remove(&record_id);
                }
                return Ok(Scanned::Stopped);
            }
            stats.keys_examined += 1;
            let last = position.after_entry.get_or_insert_with(Vec::new);
            last.clear();
            last.extend_from_slice(&pending.entry);
            if step == Step::StopAfter {
                return Ok(Scanned::Stopped);
            }
        }
        Ok(Scanned::Finished)
    }

    /// Reads, checks and visits the record of the first of `entries`, reading the run
    /// of records it starts into `fetched` unless it is there already.
    fn fetch(
        &self,
        entries: &[PendingEntry],
        fetched: &mut Vec<(u64, Option<Vec<u8>>)>,
        stats: &mut ExecStats,
        visit: &mut Visitor<'_>,
    ) -> Result<Step> {
        let record_id = entries[0].record_id;
        let bytes = match fetched.binary_search_by_key(&record_id, |(id, _)| *id) {
            Ok(at) => fetched[at].1.take(),
            Err(_) => {
                let run_end = record_run_end(entries);
                if run_end > 1 {
                    *fetched = self.read_record_run(&entries[..run_end])?;
                    fetched
                        .binary_search_by_key(&record_id, |(id, _)| *id)
                        .ok()
                        .and_then(|at| fetched[at].1.take())
                } else {
                    self.collection.get_record_bytes(self.snapshot, record_id)?
                }
            }
        };
        let Some(bytes) = bytes else {
            return Ok(Step::Continue);
        };
        stats.docs_examined += 1;
        let corrupt = |e| Error::internal(format!("corrupt record {record_id}: {e}"));
        let raw = RawDocument::from_bytes(&bytes).map_err(corrupt)?;
        let doc = match &self.decoded_fields {
            Some(fields) => basalt_value::raw::decode_named(raw, fields),
            None => Document::try_from(raw),
        }
        .map_err(corrupt)?;
        Ok(if self.matcher.try_matches(&doc)? {
            visit(record_id, Some(raw), doc)?
        } else {
            Step::Continue
        })
    }

    /// The records of a run of entries (ids ascending), read by one record scan from
    /// the first to the last; by id.
    fn read_record_run(&self, run: &[PendingEntry]) -> Result<Vec<(u64, Option<Vec<u8>>)>> {
        let (first, last) = (run[0].record_id, run[run.len() - 1].record_id);
        let mut wanted = run.iter().map(|e| e.record_id).peekable();
        let mut found = Vec::with_capacity(run.len());
        self.collection.scan(
            self.snapshot,
            first.checked_sub(1),
            &mut |record_id, raw| {
                while wanted.next_if(|id| *id < record_id).is_some() {}
                if wanted.next_if_eq(&record_id).is_some() {
                    found.push((record_id, Some(raw.as_bytes().to_vec())));
                }
                Ok(if record_id >= last {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                })
            },
        )?;
        Ok(found)
    }
}

/// An index entry read ahead of its record: the entry (where a scan resumes), its
/// record id, and for a covered scan the values it stores.
struct PendingEntry {
    entry: Vec<u8>,
    record_id: u64,
    stored: Vec<u8>,
}

/// Index entries an index scan reads ahead of fetching their records, at most.
const INDEX_READ_AHEAD_ENTRIES: usize = 64;

/// The largest step between the record ids of a run read by one record scan (records
/// skipped in between are read for nothing).
const RECORD_RUN_GAP: u64 = 8;

/// How many of `entries`, from the first, form a run of record ids read by one scan.
fn record_run_end(entries: &[PendingEntry]) -> usize {
    1 + entries
        .windows(2)
        .map(|pair| (pair[0].record_id, pair[1].record_id))
        .take_while(|(a, b)| a < b && b - a <= RECORD_RUN_GAP)
        .count()
}

/// How an index scan's pass over one storage iterator ended.
enum Resume {
    /// The range has no more keys to read.
    RangeDone,
    /// A visitor stopped the scan.
    Stopped,
    /// The next key the bounds allow is past (backward: below) these bytes.
    Seek(Vec<u8>),
}

/// Every matching document, in the access path's order, up to `limit`.
pub fn collect_matches(
    collection: &Collection,
    matcher: &Matcher,
    path: &AccessPath,
    limit: Option<usize>,
    deadline: Deadline,
) -> Result<Vec<(u64, Document)>> {
    let snapshot = collection.snapshot();
    let mut found = Vec::new();
    if limit == Some(0) {
        return Ok(found);
    }
    for_each_match(
        collection,
        &*snapshot,
        matcher,
        path,
        deadline,
        None,
        &mut |id, doc| {
            found.push((id, doc));
            Ok(if limit.is_some_and(|l| found.len() >= l) {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            })
        },
    )?;
    Ok(found)
}

/// What the batches of a [`CollectionScan`] hold: decoded documents for a consumer inside
/// the server (a sort, a pipeline), or encoded ones for a cursor's reply, which take an
/// unprojected record's stored bytes as they are, decoding only what the filter reads.
pub trait BatchItem: Sized + Send {
    /// Whether the scan may hand over only the record's bytes and the filter's fields.
    const FROM_STORED_BYTES: bool;

    /// The item for a match: its stored bytes (`None` when a decoding consumer did not
    /// keep them, or a covered scan read none), its decoded fields, and the find's
    /// projection.
    fn shape(
        raw: Option<&RawDocument>,
        doc: Document,
        projection: Option<&Projection>,
    ) -> Result<Self>;

    /// Its size in a reply, for the 16 MiB batch limit.
    fn size_bytes(&self) -> usize;
}

impl BatchItem for Document {
    const FROM_STORED_BYTES: bool = false;

    fn shape(
        _: Option<&RawDocument>,
        doc: Document,
        projection: Option<&Projection>,
    ) -> Result<Self> {
        match projection {
            Some(p) => p.apply(&doc),
            None => Ok(doc),
        }
    }

    fn size_bytes(&self) -> usize {
        basalt_value::document_size_bytes(self)
    }
}

impl BatchItem for RawDocumentBuf {
    const FROM_STORED_BYTES: bool = true;

    fn shape(
        raw: Option<&RawDocument>,
        doc: Document,
        projection: Option<&Projection>,
    ) -> Result<Self> {
        match (projection, raw) {
            (None, Some(raw)) => Ok(raw.to_owned()),
            (Some(p), _) => crate::cursors::encode(&p.apply(&doc)?),
            (None, None) => crate::cursors::encode(&doc),
        }
    }

    fn size_bytes(&self) -> usize {
        self.as_bytes().len()
    }
}

/// A resumable unsorted find: skip, limit and projection applied as documents stream
/// out; each batch reads a fresh snapshot from where the last one stopped.
pub struct CollectionScan {
    pub collection: Arc<Collection>,
    pub matcher: Matcher,
    pub path: AccessPath,
    pub projection: Option<Projection>,
    pub skip: u64,
    /// Documents still to return, when the find had a limit.
    pub remaining: Option<u64>,
    pub deadline: Deadline,
    /// The top-level fields the consumer reads (`None`: all), for a collection scan to
    /// decode only those.
    fields: Option<Vec<String>>,
    /// Threads a collection scan with a filter may use to fill a batch.
    workers: usize,
    /// A tailable cursor's scan of a capped collection: never exhausted, it goes on
    /// with the records inserted after its end; with `awaitData`, a getMore at the end
    /// waits for one.
    tailing: Option<Tailing>,
    position: Position,
    /// Keys and documents examined so far (explain's executionStats).
    pub stats: ExecStats,
}

impl CollectionScan {
    pub fn new(
        collection: Arc<Collection>,
        matcher: Matcher,
        path: AccessPath,
        projection: Option<Projection>,
        skip: u64,
        limit: Option<u64>,
        deadline: Deadline,
    ) -> CollectionScan {
        CollectionScan {
            collection,
            matcher,
            path,
            projection,
            skip,
            remaining: limit,
            deadline,
            fields: None,
            workers: 1,
            tailing: None,
            position: Position::default(),
            stats: ExecStats::default(),
        }
    }

    /// Hands out only the top-level `fields` of each document (all with `None`).
    pub fn with_fields(mut self, fields: Option<Vec<String>>) -> CollectionScan {
        self.fields = fields;
        self
    }

    /// Lets a collection scan with a filter fill its batches on `workers` threads.
    pub fn with_workers(mut self, workers: usize) -> CollectionScan {
        self.workers = workers;
        self
    }

    /// Makes the scan a tailable cursor's (in natural order, on one thread).
    pub fn tailing(mut self, await_data: bool) -> CollectionScan {
        self.tailing = Some(Tailing { await_data });
        self.workers = 1;
        self
    }

    /// Whether a getMore at the end waits for new records (a tailable `awaitData` scan).
    pub fn awaits_data(&self) -> bool {
        self.tailing.is_some_and(|tailing| tailing.await_data)
    }

    /// CappedPositionLost when a tailing scan's last record was removed to make room:
    /// the records after it may be gone unread, as in MongoDB.
    fn check_tail_position(&self, snapshot: &dyn Snapshot) -> Result<()> {
        let (Some(_), Some(last)) = (self.tailing, self.position.after_record) else {
            return Ok(());
        };
        match self.collection.get_record_bytes(snapshot, last)? {
            Some(_) => Ok(()),
            None => Err(Error::new(
                ErrorCode::CAPPED_POSITION_LOST,
                format!(
                    "CollectionScan died due to position in capped collection being deleted. \
                     Last seen record id: RecordId({last})"
                ),
            )),
        }
    }

    /// Waits up to `wait` for a record past the last one the scan read.
    pub fn wait_for_records(&self, wait: std::time::Duration) {
        let last = self.position.after_record.unwrap_or(0);
        self.collection.wait_for_records_after(last, wait);
    }

    /// Whether batches of `T` are the records' stored bytes: then a scan decodes only
    /// the fields the filter reads.
    fn passes_stored_bytes<T: BatchItem>(&self) -> bool {
        T::FROM_STORED_BYTES && self.projection.is_none()
    }

    /// What batches of `T` need of each match, given the consumer's fields.
    fn needs<'f, T: BatchItem>(&self, fields: Option<&'f [String]>) -> Needs<'f> {
        if self.passes_stored_bytes::<T>() {
            Needs::StoredBytes
        } else {
            fields.into()
        }
    }

    /// Up to `max_docs` results and about `max_bytes` (one always fits), and whether the
    /// scan is exhausted.
    pub fn next_batch<T: BatchItem>(
        &mut self,
        max_docs: usize,
        max_bytes: usize,
    ) -> Result<(Vec<T>, bool)> {
        let mut batch = Vec::new();
        if self.remaining == Some(0) {
            return Ok((batch, true));
        }
        if self.workers > 1 && self.path == AccessPath::CollectionScan && !self.matcher.is_empty() {
            return self.next_batch_parallel(max_docs, max_bytes);
        }
        let snapshot = self.collection.snapshot();
        self.check_tail_position(&*snapshot)?;
        let fields = self.fields.clone();
        let needs = self.needs::<T>(fields.as_deref());
        let mut bytes = 0usize;
        let mut exhausted = true;
        let mut error = None;
        let (skip, remaining, projection) = (&mut self.skip, &mut self.remaining, &self.projection);
        execute(
            &self.collection,
            &*snapshot,
            &self.matcher,
            &self.path,
            &mut self.position,
            &mut self.stats,
            self.deadline.clone(),
            needs,
            &mut |_, raw, doc| {
                if batch.len() >= max_docs {
                    exhausted = false;
                    return Ok(Step::StopBefore);
                }
                if *skip > 0 {
                    *skip -= 1;
                    return Ok(Step::Continue);
                }
                let out = match T::shape(raw, doc, projection.as_ref()) {
                    Ok(out) => out,
                    Err(e) => {
                        error = Some(e);
                        return Ok(Step::StopBefore);
                    }
                };
                let size = out.size_bytes();
                if !batch.is_empty() && bytes + size > max_bytes {
                    // Not consumed: the next batch resumes at this record.
                    exhausted = false;
                    return Ok(Step::StopBefore);
                }
                bytes += size;
                batch.push(out);
                if let Some(r) = remaining.as_mut() {
                    *r -= 1;
                    if *r == 0 {
                        return Ok(Step::StopAfter);
                    }
                }
                Ok(Step::Continue)
            },
        )?;
        if let Some(e) = error {
            return Err(e);
        }
        let done = (exhausted && self.tailing.is_none()) || self.remaining == Some(0);
        Ok((batch, done))
    }
}

/// How a tailable scan goes on (see [`CollectionScan::tailing`]).
#[derive(Clone, Copy)]
struct Tailing {
    await_data: bool,
}

/// What every range of a parallel collection scan shares (`crate::parallel_scan`): one
/// snapshot, the filter, the deadline and what the consumer needs of each match.
pub struct RangeScan<'a> {
    pub collection: &'a Collection,
    pub snapshot: &'a dyn Snapshot,
    pub matcher: &'a Matcher,
    pub deadline: Deadline,
    pub needs: Needs<'a>,
}

impl RangeScan<'_> {
    /// Visits the matches among the records of `range`, in record order.
    pub fn visit(
        &self,
        range: RecordRange,
        stats: &mut ExecStats,
        visit: &mut Visitor<'_>,
    ) -> Result<()> {
        execute(
            self.collection,
            self.snapshot,
            self.matcher,
            &AccessPath::CollectionScan,
            &mut Position::records(range.after, range.last),
            stats,
            self.deadline.clone(),
            self.needs,
            visit,
        )
    }

    /// How many records of `range` match.
    pub fn count(&self, range: RecordRange) -> Result<i64> {
        let mut matched = 0i64;
        self.visit(range, &mut ExecStats::default(), &mut |_, _, _| {
            matched += 1;
            Ok(Step::Continue)
        })?;
        Ok(matched)
    }
}

/// Records each worker scans per round of a parallel batch.
const PARALLEL_BATCH_RANGE_RECORDS: u64 = 16_384;

/// A match a worker of a parallel batch found: its id, its decoded fields and, when the
/// batch passes stored bytes on, a copy of them.
type FoundMatch = (u64, Document, Option<RawDocumentBuf>);

/// What one range of a parallel batch found.
struct RangeMatches {
    matches: Vec<FoundMatch>,
    /// Whether the range was scanned to its end (not cut short at the batch's need).
    complete: bool,
    stats: ExecStats,
}

impl CollectionScan {
    /// `next_batch` for a selective collection scan: rounds of consecutive record ranges,
    /// one per worker, scanned at once; their matches are taken in record order until
    /// the batch is full. A range after the one that filled the batch was scanned for
    /// nothing, which is the price of not knowing in advance where the matches are.
    fn next_batch_parallel<T: BatchItem>(
        &mut self,
        max_docs: usize,
        max_bytes: usize,
    ) -> Result<(Vec<T>, bool)> {
        let snapshot = self.collection.snapshot();
        let high_water = self.collection.record_id_high_water();
        let keep_bytes = self.passes_stored_bytes::<T>();
        let fields = self.fields.clone();
        let needs = self.needs::<T>(fields.as_deref());
        let mut batch = Vec::new();
        let mut bytes = 0usize;
        loop {
            let start = self.position.after_record.unwrap_or(0);
            if start >= high_water {
                return Ok((batch, true));
            }
            let ranges: Vec<RecordRange> = (0..self.workers as u64)
                .map(|i| start + i * PARALLEL_BATCH_RANGE_RECORDS)
                .take_while(|after| *after < high_water)
                .map(|after| RecordRange {
                    after: Some(after),
                    last: (after + PARALLEL_BATCH_RANGE_RECORDS).min(high_water),
                })
                .collect();
            // Enough matches from one range fill the batch (after the skip).
            let room = max_docs - batch.len();
            let need = self.skip as usize
                + self
                    .remaining
                    .map_or(room, |r| room.min(usize::try_from(r).unwrap_or(usize::MAX)));
            let scan = RangeScan {
                collection: &self.collection,
                snapshot: &*snapshot,
                matcher: &self.matcher,
                deadline: self.deadline.clone(),
                needs,
            };
            let found = parallel_scan::run_ranges(&ranges, self.workers, &|range| {
                let mut matches = Vec::new();
                let mut stats = ExecStats::default();
                scan.visit(range, &mut stats, &mut |record_id, raw, doc| {
                    let raw = raw.filter(|_| keep_bytes).map(ToOwned::to_owned);
                    matches.push((record_id, doc, raw));
                    Ok(if matches.len() >= need {
                        Step::StopAfter
                    } else {
                        Step::Continue
                    })
                })?;
                Ok(RangeMatches {
                    complete: matches.len() < need,
                    matches,
                    stats,
                })
            })?;
            for (range, found) in ranges.iter().zip(found) {
                self.stats.keys_examined += found.stats.keys_examined;
                self.stats.docs_examined += found.stats.docs_examined;
                for (record_id, doc, raw) in found.matches {
                    if batch.len() >= max_docs {
                        return Ok((batch, false));
                    }
                    if self.skip > 0 {
                        self.skip -= 1;
                        self.position.after_record = Some(record_id);
                        continue;
                    }
                    let out = T::shape(raw.as_deref(), doc, self.projection.as_ref())?;
                    let size = out.size_bytes();
                    if !batch.is_empty() && bytes + size > max_bytes {
                        // Not consumed: the next batch starts at this record.
                        return Ok((batch, false));
                    }
                    bytes += size;
                    batch.push(out);
                    self.position.after_record = Some(record_id);
                    if let Some(r) = self.remaining.as_mut() {
                        *r -= 1;
                        if *r == 0 {
                            return Ok((batch, true));
                        }
                    }
                }
                if !found.complete {
                    // Cut short at the batch's need: full, unless matches were skipped.
                    break;
                }
                self.position.after_record = Some(range.last);
            }
            if batch.len() >= max_docs {
                let done = self.position.after_record.unwrap_or(0) >= high_water;
                return Ok((batch, done));
            }
        }
    }
}

/// Documents a streaming consumer (the aggregation pipeline) pulls at a time.
const STREAM_BATCH_DOCS: usize = 1024;

impl CollectionScan {
    /// The scan as an iterator, read in batches: a consumer that stops early (`$limit`)
    /// stops the scan too.
    pub fn into_stream(self) -> ScanStream<Document> {
        self.into_stream_of()
    }

    /// The scan as an iterator of the matching records' stored bytes (decoded only as
    /// far as the filter reads).
    pub fn into_stored_stream(self) -> ScanStream<RawDocumentBuf> {
        self.into_stream_of()
    }

    fn into_stream_of<T: BatchItem>(self) -> ScanStream<T> {
        ScanStream {
            scan: self,
            buffered: std::collections::VecDeque::new(),
            done: false,
        }
    }
}

pub struct ScanStream<T> {
    scan: CollectionScan,
    buffered: std::collections::VecDeque<T>,
    done: bool,
}

impl<T: BatchItem> Iterator for ScanStream<T> {
    type Item = Result<T>;

    fn next(&mut self) -> Option<Result<T>> {
        loop {
            if let Some(doc) = self.buffered.pop_front() {
                return Some(Ok(doc));
            }
            if self.done {
                return None;
            }
            match self.scan.next_batch::<T>(STREAM_BATCH_DOCS, usize::MAX) {
                Ok((batch, exhausted)) => {
                    self.buffered.extend(batch);
                    self.done = exhausted;
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_runs_are_ascending_ids_with_small_gaps() {
        let entries = |ids: &[u64]| -> Vec<PendingEntry> {
            ids.iter()
                .map(|&record_id| PendingEntry {
                    entry: Vec::new(),
                    record_id,
                    stored: Vec::new(),
                })
                .collect()
        };
        assert_eq!(record_run_end(&entries(&[5])), 1);
        assert_eq!(record_run_end(&entries(&[5, 6, 7, 15, 40, 41])), 4);
        assert_eq!(record_run_end(&entries(&[5, 14])), 1);
        // Descending or repeated ids end a run: each is read on its own.
        assert_eq!(record_run_end(&entries(&[7, 6, 5])), 1);
        assert_eq!(record_run_end(&entries(&[7, 7])), 1);
    }
}
