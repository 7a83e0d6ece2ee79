//! Executes the read side of commands: which documents of a collection match a filter,
//! and the `let` variables the filter (and the rest of the command) sees.
//!
//! The access path is the planner's (`basalt_plan`): a collection scan in natural order,
//! or an index scan over key ranges that fetches each record. The matcher always
//! re-checks candidates, so an access path only has to return a superset of the matches.

use crate::request::Fields;
use basalt_catalog::Collection;
use basalt_error::{Error, ErrorCode, Result};
use basalt_expr::Scope;
use basalt_plan::{IndexScanPlan, KeyCheck, Plan, PlanChoice};
use basalt_query::{Matcher, Projection};
use basalt_storage::Snapshot;
use basalt_value::Collation;
use bson::{Bson, Document};
use std::collections::HashSet;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often (in documents examined) a scan looks at its deadline.
const DEADLINE_CHECK_INTERVAL_DOCS: u64 = 256;

/// A `maxTimeMS` limit.
#[derive(Clone, Copy, Debug)]
pub struct Deadline(Option<Instant>);

impl Deadline {
    pub fn from_max_time_ms(max_time_ms: Option<i64>) -> Deadline {
        Deadline(
            max_time_ms
                .filter(|ms| *ms > 0)
                .map(|ms| Instant::now() + Duration::from_millis(ms as u64)),
        )
    }

    pub fn check(&self) -> Result<()> {
        match self.0 {
            Some(at) if Instant::now() >= at => Err(Error::new(
                ErrorCode::MAX_TIME_MS_EXPIRED,
                "operation exceeded time limit",
            )),
            _ => Ok(()),
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
}

impl AccessPath {
    /// The planner's choice for `filter` over the collection's current indexes, or the
    /// index (or `$natural` scan) a `hint` names.
    pub fn choose(
        collection: &Collection,
        filter: &Document,
        collation: Option<&Collation>,
        hint: Option<&Bson>,
    ) -> Result<AccessPath> {
        Ok(plan_choice(collection, filter, collation, hint, None)?
            .0
            .winner
            .into())
    }

    /// As [`AccessPath::choose`] for a sorted query; also says whether the path
    /// returns documents in `sort` order already (an index scan in key order).
    pub fn choose_sorted(
        collection: &Collection,
        filter: &Document,
        collation: Option<&Collation>,
        hint: Option<&Bson>,
        sort: Option<&Document>,
    ) -> Result<(AccessPath, bool)> {
        let (choice, sorted) = plan_choice(collection, filter, collation, hint, sort)?;
        Ok((choice.winner.into(), sorted))
    }
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
/// winner provides `sort`.
pub fn plan_choice(
    collection: &Collection,
    filter: &Document,
    collation: Option<&Collation>,
    hint: Option<&Bson>,
    sort: Option<&Document>,
) -> Result<(PlanChoice, bool)> {
    let meta = collection.meta();
    let hint = hint.filter(|h| !matches!(h, Bson::Document(d) if d.is_empty()));
    basalt_plan::plan_sorted(&meta.indexes, filter, collation.is_some(), hint, sort)
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
    after_entry: Option<Vec<u8>>,
    branch: usize,
    seen: HashSet<u64>,
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

/// The top-level `fields` of a record, decoded on their own.
fn fields_of(raw: &bson::RawDocument, fields: &[String]) -> bson::error::Result<Document> {
    let mut partial = Document::new();
    if fields.is_empty() {
        return Ok(partial);
    }
    for element in raw.iter() {
        let (key, value) = element?;
        let key = key.as_str();
        if fields.iter().any(|f| f == key) {
            partial.insert(key, Bson::try_from(value)?);
        }
    }
    Ok(partial)
}

/// Visits the documents of `collection` that match, in the access path's order
/// (natural order, or index key order).
pub fn for_each_match(
    collection: &Collection,
    snapshot: &dyn Snapshot,
    matcher: &Matcher,
    path: &AccessPath,
    deadline: Deadline,
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
        &mut |record_id, doc| {
            Ok(match visit(record_id, doc)? {
                ControlFlow::Continue(()) => Step::Continue,
                ControlFlow::Break(()) => Step::StopAfter,
            })
        },
    )
}

/// Visits the matching documents from `position` on, moving it past each consumed
/// one, and counts what was examined.
#[allow(clippy::too_many_arguments)]
pub fn execute(
    collection: &Collection,
    snapshot: &dyn Snapshot,
    matcher: &Matcher,
    path: &AccessPath,
    position: &mut Position,
    stats: &mut ExecStats,
    deadline: Deadline,
    visit: &mut dyn FnMut(u64, Document) -> Result<Step>,
) -> Result<()> {
    match path {
        AccessPath::IndexScan(scan) => {
            let dedup = scan.index.multikey;
            let run = IndexRun {
                collection,
                snapshot,
                matcher,
                deadline,
                dedup,
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
        AccessPath::CollectionScan => {
            // Records are tested on the fields the filter reads, decoded alone; only
            // the matches are decoded whole.
            let read_fields = matcher.top_level_fields();
            collection.scan(snapshot, position.after_record, &mut |record_id, raw| {
                stats.docs_examined += 1;
                if stats
                    .docs_examined
                    .is_multiple_of(DEADLINE_CHECK_INTERVAL_DOCS)
                {
                    deadline.check()?;
                }
                let corrupt = |e: bson::error::Error| {
                    Error::internal(format!("corrupt record {record_id}: {e}"))
                };
                let matched = match &read_fields {
                    Some(fields) => {
                        matcher.try_matches(&fields_of(raw, fields).map_err(corrupt)?)?
                    }
                    None => true,
                };
                let step = if !matched {
                    Step::Continue
                } else {
                    let doc = Document::try_from(raw).map_err(corrupt)?;
                    if read_fields.is_some() || matcher.try_matches(&doc)? {
                        visit(record_id, doc)?
                    } else {
                        Step::Continue
                    }
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
    }
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
}

impl IndexRun<'_> {
    /// Scans the plan's key ranges in order, seeking past keys its bounds rule out,
    /// fetching each record once and re-checking it with the matcher.
    fn scan(
        &self,
        scan: &IndexScanPlan,
        position: &mut Position,
        stats: &mut ExecStats,
        visit: &mut dyn FnMut(u64, Document) -> Result<Step>,
    ) -> Result<Scanned> {
        let IndexRun {
            collection,
            snapshot,
            matcher,
            deadline,
            dedup,
        } = *self;
        for range in &scan.ranges {
            // Entries extend the range start, so "after the start" is "from the start".
            let mut after = match &position.after_entry {
                Some(entry) if entry.as_slice() >= range.start.as_slice() => {
                    if range.is_past_end(entry) {
                        continue;
                    }
                    entry.clone()
                }
                _ => range.start.clone(),
            };
            loop {
                let mut seek = None;
                let mut stopped = false;
                let mut range_done = false;
                collection.scan_index(
                    snapshot,
                    &scan.index,
                    range.common_prefix(),
                    Some(&after),
                    &mut |entry| {
                        stats.keys_examined += 1;
                        if stats
                            .keys_examined
                            .is_multiple_of(DEADLINE_CHECK_INTERVAL_DOCS)
                        {
                            deadline.check()?;
                        }
                        let Some(key) = entry.len().checked_sub(8).map(|n| &entry[..n]) else {
                            return Err(Error::internal("index entry without a record id"));
                        };
                        if range.is_past_end(key) {
                            range_done = true;
                            return Ok(ControlFlow::Break(()));
                        }
                        if let KeyCheck::SeekAfter(target) = scan.key_filter.check(key) {
                            seek = Some(target);
                            return Ok(ControlFlow::Break(()));
                        }
                        let record_id = u64::from_be_bytes(
                            entry[key.len()..]
                                .try_into()
                                .map_err(|_| Error::internal("index entry without a record id"))?,
                        );
                        if dedup && !position.seen.insert(record_id) {
                            return Ok(ControlFlow::Continue(()));
                        }
                        let step = match collection.get_record(snapshot, record_id)? {
                            Some(doc) => {
                                stats.docs_examined += 1;
                                if matcher.try_matches(&doc)? {
                                    visit(record_id, doc)?
                                } else {
                                    Step::Continue
                                }
                            }
                            None => Step::Continue,
                        };
                        if step == Step::StopBefore {
                            if dedup {
                                position.seen.remove(&record_id);
                            }
                        } else {
                            let last = position.after_entry.get_or_insert_with(Vec::new);
                            last.clear();
                            last.extend_from_slice(entry);
                        }
                        Ok(match step {
                            Step::Continue => ControlFlow::Continue(()),
                            Step::StopAfter | Step::StopBefore => {
                                stopped = true;
                                ControlFlow::Break(())
                            }
                        })
                    },
                )?;
                if stopped {
                    return Ok(Scanned::Stopped);
                }
                match seek {
                    Some(target) if !range_done && !range.is_past_end(&target) => after = target,
                    _ => break,
                }
            }
        }
        Ok(Scanned::Finished)
    }
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
            position: Position::default(),
            stats: ExecStats::default(),
        }
    }

    pub fn next_batch(
        &mut self,
        max_docs: usize,
        max_bytes: usize,
    ) -> Result<(Vec<Document>, bool)> {
        let mut batch = Vec::new();
        if self.remaining == Some(0) {
            return Ok((batch, true));
        }
        let snapshot = self.collection.snapshot();
        let mut bytes = 0usize;
        let mut exhausted = true;
        let mut error = None;
        let want = max_docs;
        let (skip, remaining, projection) = (&mut self.skip, &mut self.remaining, &self.projection);
        execute(
            &self.collection,
            &*snapshot,
            &self.matcher,
            &self.path,
            &mut self.position,
            &mut self.stats,
            self.deadline,
            &mut |_, doc| {
                if batch.len() >= want {
                    exhausted = false;
                    return Ok(Step::StopBefore);
                }
                if *skip > 0 {
                    *skip -= 1;
                    return Ok(Step::Continue);
                }
                let out = match projection {
                    Some(p) => match p.apply(&doc) {
                        Ok(out) => out,
                        Err(e) => {
                            error = Some(e);
                            return Ok(Step::StopBefore);
                        }
                    },
                    None => doc,
                };
                let size = basalt_value::document_size_bytes(&out);
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
        let done = exhausted || self.remaining == Some(0);
        Ok((batch, done))
    }
}

/// Documents a streaming consumer (the aggregation pipeline) pulls at a time.
const STREAM_BATCH_DOCS: usize = 1024;

impl CollectionScan {
    /// The scan as an iterator, read in batches: a consumer that stops early (`$limit`)
    /// stops the scan too.
    pub fn into_stream(self) -> ScanStream {
        ScanStream {
            scan: self,
            buffered: std::collections::VecDeque::new(),
            done: false,
        }
    }
}

pub struct ScanStream {
    scan: CollectionScan,
    buffered: std::collections::VecDeque<Document>,
    done: bool,
}

impl Iterator for ScanStream {
    type Item = Result<Document>;

    fn next(&mut self) -> Option<Result<Document>> {
        loop {
            if let Some(doc) = self.buffered.pop_front() {
                return Some(Ok(doc));
            }
            if self.done {
                return None;
            }
            match self.scan.next_batch(STREAM_BATCH_DOCS, usize::MAX) {
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
