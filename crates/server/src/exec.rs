//! Executes the read side of commands: which documents of a collection match a filter,
//! and the `let` variables the filter (and the rest of the command) sees.
//!
//! The only access paths today are the `_id` index, for filters that pin `_id` to one
//! value, and a collection scan in natural order. The planner of the indexes issue
//! replaces [`AccessPath::choose`]. The matcher always re-checks candidates, so an access
//! path only has to return a superset of the matches.

use crate::request::Fields;
use basalt_catalog::Collection;
use basalt_error::{Error, ErrorCode, Result};
use basalt_expr::Scope;
use basalt_query::{Matcher, Projection};
use basalt_storage::Snapshot;
use basalt_value::Collation;
use bson::{Bson, Document};
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

/// How candidate documents are found.
#[derive(Clone, Debug, PartialEq)]
pub enum AccessPath {
    /// The `_id` index, for a filter with a top-level `_id` equality.
    IdLookup(Bson),
    CollectionScan,
}

impl AccessPath {
    /// Under a collation, string-bearing `_id` values need a scan: the `_id` index
    /// orders strings bytewise, so it would miss `"abc"` when asked for `"ABC"`.
    pub fn choose(filter: &Document, collation: Option<&Collation>) -> AccessPath {
        let path = AccessPath::choose_binary(filter);
        match (&path, collation) {
            (AccessPath::IdLookup(value), Some(_)) if holds_strings(value) => {
                AccessPath::CollectionScan
            }
            _ => path,
        }
    }

    fn choose_binary(filter: &Document) -> AccessPath {
        match filter.get("_id") {
            Some(Bson::Document(d)) if d.keys().any(|k| k.starts_with('$')) => {
                match (d.len(), d.get("$eq")) {
                    (1, Some(value)) if is_point_value(value) => {
                        AccessPath::IdLookup(value.clone())
                    }
                    _ => AccessPath::CollectionScan,
                }
            }
            Some(value) if is_point_value(value) => AccessPath::IdLookup(value.clone()),
            _ => AccessPath::CollectionScan,
        }
    }
}

fn holds_strings(value: &Bson) -> bool {
    match value {
        Bson::String(_) | Bson::Symbol(_) => true,
        Bson::Document(d) => d.values().any(holds_strings),
        Bson::Array(items) => items.iter().any(holds_strings),
        _ => false,
    }
}

/// Values whose equality match is exactly an index key equality (regexes match by
/// pattern and arrays match elements, so they need a scan).
fn is_point_value(value: &Bson) -> bool {
    !matches!(
        value,
        Bson::RegularExpression(_) | Bson::Array(_) | Bson::Null | Bson::Undefined
    )
}

/// Visits the documents of `collection` that match, in natural order, starting after
/// record `after` when resuming.
pub fn for_each_match(
    collection: &Collection,
    snapshot: &dyn Snapshot,
    matcher: &Matcher,
    path: &AccessPath,
    after: Option<u64>,
    deadline: Deadline,
    visit: &mut dyn FnMut(u64, Document) -> Result<ControlFlow<()>>,
) -> Result<()> {
    match path {
        AccessPath::IdLookup(value) => {
            let meta = collection.meta();
            let Some(id_index) = meta.indexes.iter().find(|i| i.is_id_index()) else {
                return Err(Error::internal("collection without an _id index"));
            };
            let mut ids =
                collection.lookup_index(snapshot, id_index, std::slice::from_ref(value))?;
            ids.sort_unstable();
            for record_id in ids.into_iter().filter(|id| after.is_none_or(|a| *id > a)) {
                if let Some(doc) = collection.get_record(snapshot, record_id)? {
                    if matcher.try_matches(&doc)? && visit(record_id, doc)?.is_break() {
                        break;
                    }
                }
            }
            Ok(())
        }
        AccessPath::CollectionScan => {
            let mut examined = 0u64;
            collection.scan(snapshot, after, &mut |record_id, raw| {
                examined += 1;
                if examined.is_multiple_of(DEADLINE_CHECK_INTERVAL_DOCS) {
                    deadline.check()?;
                }
                let doc = Document::try_from(raw)
                    .map_err(|e| Error::internal(format!("corrupt record {record_id}: {e}")))?;
                if matcher.try_matches(&doc)? {
                    visit(record_id, doc)
                } else {
                    Ok(ControlFlow::Continue(()))
                }
            })
        }
    }
}

/// Every matching document, in natural order, up to `limit`.
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
        None,
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
    after: Option<u64>,
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
            after: None,
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
        let mut last = self.after;
        let mut error = None;
        let want = max_docs;
        let (skip, remaining, projection) = (&mut self.skip, &mut self.remaining, &self.projection);
        for_each_match(
            &self.collection,
            &*snapshot,
            &self.matcher,
            &self.path,
            self.after,
            self.deadline,
            &mut |record_id, doc| {
                if batch.len() >= want {
                    exhausted = false;
                    return Ok(ControlFlow::Break(()));
                }
                if *skip > 0 {
                    last = Some(record_id);
                    *skip -= 1;
                    return Ok(ControlFlow::Continue(()));
                }
                let out = match projection {
                    Some(p) => match p.apply(&doc) {
                        Ok(out) => out,
                        Err(e) => {
                            error = Some(e);
                            return Ok(ControlFlow::Break(()));
                        }
                    },
                    None => doc,
                };
                let size = crate::cursors::document_size_bytes(&out);
                if !batch.is_empty() && bytes + size > max_bytes {
                    // Not consumed: the next batch resumes at this record.
                    exhausted = false;
                    return Ok(ControlFlow::Break(()));
                }
                last = Some(record_id);
                bytes += size;
                batch.push(out);
                if let Some(r) = remaining.as_mut() {
                    *r -= 1;
                    if *r == 0 {
                        return Ok(ControlFlow::Break(()));
                    }
                }
                Ok(ControlFlow::Continue(()))
            },
        )?;
        if let Some(e) = error {
            return Err(e);
        }
        self.after = last;
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
