//! `local.oplog.rs` on a replica set member: the member's oplog records
//! (`basalt_catalog::oplog`) as the read-only, capped collection mongod has, in MongoDB's
//! entry form (`ts`, `t`, `v`, `op`, `ns`, `ui`, `o`, `o2`, `wall`; `lsid`/`txnNumber` in
//! a transaction's), for the tools and connectors that read or tail it.
//!
//! `find` reads it in natural order (the log's), or backwards with `{$natural: -1}`, with
//! any filter, projection, sort, skip and limit; a filter `ts: {$gt | $gte: <timestamp>}`
//! starts the scan at that entry instead of the oldest. A `tailable` cursor stays open at
//! the end, and its getMores return the entries applied since; with `awaitData` they wait
//! for one up to `maxTimeMS` (1 s by default). `aggregate` and `count` read it as well.
//! Writes to it are refused, as mongod refuses them on a replica set.
//!
//! Where it differs from mongod's: a transaction's changes are entries of their own
//! (mongod writes one `applyOps` entry), and there are no `op: "n"` no-op entries.

use crate::cursors::CursorSource;
use crate::exec::Deadline;
use basalt_error::{Error, ErrorCode, Result};
use basalt_query::{Matcher, Projection};
use basalt_repl::ReplicaSet;
use basalt_storage::{Engine, ScanEnd, ScanStart, Space, OPLOG_PREFIX};
use bson::{Bson, Document, RawDocument, RawDocumentBuf};
use std::collections::VecDeque;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const DB: &str = "local";
pub const COLLECTION: &str = "oplog.rs";

/// Records read from storage at a time.
const RECORDS_PER_READ: usize = 1_000;

/// Whether `db.collection` is the oplog.
pub fn is_oplog(db: &str, collection: &str) -> bool {
    db == DB && collection == COLLECTION
}

/// The error of a write to the oplog.
pub fn refuse_write() -> Error {
    Error::new(
        ErrorCode::INVALID_NAMESPACE,
        format!("cannot write to '{DB}.{COLLECTION}'"),
    )
}

/// `collStats` of the oplog: its entries' count and bytes, and its size limit.
pub fn stats(engine: &dyn Engine, set: &ReplicaSet, scale: i64) -> Result<Document> {
    let (mut count, mut bytes) = (0_i64, 0_i64);
    engine.snapshot().scan_prefix(
        Space::Replication,
        OPLOG_PREFIX,
        ScanStart::Beginning,
        &mut |_, value| {
            count += 1;
            bytes += value.len() as i64;
            Ok(ControlFlow::Continue(()))
        },
    )?;
    let scale = scale.max(1);
    Ok(bson::doc! {
        "ns": format!("{DB}.{COLLECTION}"),
        "count": count,
        "size": bytes / scale,
        "avgObjSize": if count > 0 { bytes / count } else { 0 },
        "storageSize": bytes / scale,
        "totalIndexSize": 0_i64,
        "totalSize": bytes / scale,
        "indexSizes": {},
        "nindexes": 0,
        "scaleFactor": scale,
        "capped": true,
        "max": 0_i64,
        "maxSize": set.oplog_size_bytes() as i64 / scale,
    })
}

/// A record's place: its log entry's index and its order within it.
type Position = (u64, u32);

/// How a read moves through the oplog.
#[derive(Clone, Copy, PartialEq)]
pub enum Direction {
    Forward,
    Backward,
}

/// A read of the oplog: the entries that match a filter, shaped by a projection, in
/// one direction. Forward, it ends at the last entry applied when it was opened, unless
/// it is tailable.
pub struct OplogCursor {
    engine: Arc<dyn Engine>,
    set: Arc<ReplicaSet>,
    matcher: Matcher,
    /// Whether records the filter certainly rejects may be skipped from their bytes:
    /// when it reads neither of the image fields the records hold and entries do not.
    skips_raw: bool,
    projection: Option<Projection>,
    direction: Direction,
    tailable: bool,
    await_data: bool,
    /// The last record read (forward: the next read starts after it; backward: before).
    position: Option<Position>,
    /// Forward and not tailable: the entry it ends at.
    end: u64,
    skip: u64,
    limit: Option<u64>,
    returned: u64,
    /// Read and matched, not handed out yet.
    ready: VecDeque<Document>,
    /// No more records in its direction (a tailable cursor is never done).
    done: bool,
    deadline: Deadline,
}

/// The place a filter `ts: {$gt | $gte: t}` lets a forward read start after.
fn start_of(filter: &Document) -> Option<Position> {
    let Ok(ts) = filter.get_document("ts") else {
        return None;
    };
    let bound = |operator: &str| match ts.get(operator) {
        Some(Bson::Timestamp(time)) => Some(u64::from(time.increment)),
        _ => None,
    };
    match (bound("$gt"), bound("$gte")) {
        (Some(index), _) => Some((index, u32::MAX)),
        (None, Some(index)) => Some((index.checked_sub(1)?, u32::MAX)),
        _ => None,
    }
}

/// A record as a `local.oplog.rs` entry: without the images Basalt keeps in it for
/// change streams.
fn entry(record: &RawDocument) -> Result<Document> {
    let mut entry = Document::try_from(record)?;
    entry.remove("preImage");
    entry.remove("postImage");
    Ok(entry)
}

/// What a find or aggregate reads the oplog with.
pub struct Read {
    pub filter: Document,
    pub matcher: Matcher,
    pub projection: Option<Projection>,
    pub direction: Direction,
    pub tailable: bool,
    pub await_data: bool,
    pub skip: u64,
    pub limit: Option<u64>,
    pub deadline: Deadline,
}

impl OplogCursor {
    pub fn open(engine: Arc<dyn Engine>, set: Arc<ReplicaSet>, read: Read) -> OplogCursor {
        let position = match read.direction {
            Direction::Forward => start_of(&read.filter),
            Direction::Backward => None,
        };
        let skips_raw = read.matcher.top_level_fields().is_some_and(|fields| {
            !fields
                .iter()
                .any(|field| field == "preImage" || field == "postImage")
        });
        OplogCursor {
            end: set.applied().index,
            engine,
            set,
            skips_raw,
            matcher: read.matcher,
            projection: read.projection,
            direction: read.direction,
            tailable: read.tailable,
            await_data: read.await_data,
            position,
            skip: read.skip,
            limit: read.limit,
            returned: 0,
            ready: VecDeque::new(),
            done: false,
            deadline: read.deadline,
        }
    }

    /// Whether getMores wait for new entries.
    pub fn awaits_data(&self) -> bool {
        self.await_data
    }

    /// Whether nothing more will come.
    fn exhausted(&self) -> bool {
        self.ready.is_empty() && (self.done || self.limit.is_some_and(|l| self.returned >= l))
    }

    /// Reads the next records into `ready`; marks the cursor done at the end.
    fn read(&mut self) -> Result<()> {
        self.deadline.check()?;
        let last = match (self.direction, self.tailable) {
            (Direction::Forward, false) => self.end,
            _ => self.set.applied().index,
        };
        let snapshot = self.engine.snapshot();
        let mut records = 0;
        let mut position = self.position;
        let mut matched = Vec::new();
        let mut failure = None;
        let mut visit = |key: &[u8], value: &[u8]| {
            let Some(place) = basalt_catalog::oplog::position(key) else {
                return Ok(ControlFlow::Continue(()));
            };
            if place.0 > last {
                return Ok(ControlFlow::Break(()));
            }
            position = Some(place);
            records += 1;
            let shown = RawDocument::from_bytes(value)
                .map_err(|e| Error::internal(format!("corrupt oplog record: {e}")))
                .and_then(|raw| {
                    if self.skips_raw && self.matcher.rejects_raw(raw) {
                        return Ok(None);
                    }
                    let entry = entry(raw)?;
                    Ok(self.matcher.try_matches(&entry)?.then_some(entry))
                });
            match shown {
                Ok(Some(entry)) => matched.push(entry),
                Ok(None) => {}
                Err(e) => {
                    failure = Some(e);
                    return Ok(ControlFlow::Break(()));
                }
            }
            Ok(if records >= RECORDS_PER_READ {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            })
        };
        match self.direction {
            Direction::Forward => {
                let after = self
                    .position
                    .map(|(index, place)| basalt_catalog::oplog::key(index, place));
                let start = after
                    .as_deref()
                    .map_or(ScanStart::Beginning, ScanStart::After);
                snapshot.scan_prefix(Space::Replication, OPLOG_PREFIX, start, &mut visit)?;
            }
            Direction::Backward => {
                let before = match self.position {
                    Some((index, place)) => basalt_catalog::oplog::key(index, place),
                    None => basalt_catalog::oplog::key(last.saturating_add(1), 0),
                };
                snapshot.scan_prefix_back(
                    Space::Replication,
                    OPLOG_PREFIX,
                    ScanEnd::Before(&before),
                    &mut visit,
                )?;
            }
        }
        if let Some(failure) = failure {
            return Err(failure);
        }
        self.position = position;
        if records < RECORDS_PER_READ && !self.tailable {
            self.done = true;
        }
        for entry in matched {
            if self.skip > 0 {
                self.skip -= 1;
                continue;
            }
            self.ready.push_back(match &self.projection {
                Some(projection) => projection.apply(&entry)?,
                None => entry,
            });
        }
        Ok(())
    }

    /// The next entries, up to `max_docs` and the batch size in bytes, and whether the
    /// cursor is exhausted. A tailable cursor with `wait` waits up to it for an entry
    /// when there is none.
    pub fn next_batch(
        &mut self,
        max_docs: Option<usize>,
        wait: Option<Duration>,
    ) -> Result<(Vec<RawDocumentBuf>, bool)> {
        let max_docs = max_docs.filter(|n| *n > 0).unwrap_or(usize::MAX);
        let deadline = wait.map(|wait| Instant::now() + wait);
        let mut batch = Vec::new();
        let mut bytes = 0;
        loop {
            while batch.len() < max_docs && self.limit.is_none_or(|l| self.returned < l) {
                let Some(next) = self.ready.front() else {
                    break;
                };
                let size = basalt_value::document_size_bytes(next);
                if !batch.is_empty() && bytes + size > crate::cursors::BATCH_SIZE_BYTES_MAX {
                    return Ok((batch, false));
                }
                bytes += size;
                if let Some(next) = self.ready.pop_front() {
                    batch.push(crate::cursors::encode(&next)?);
                    self.returned += 1;
                }
            }
            let full = batch.len() >= max_docs || self.limit.is_some_and(|l| self.returned >= l);
            if full || self.done {
                return Ok((batch, self.exhausted()));
            }
            let before = self.position;
            self.read()?;
            if !self.ready.is_empty() || self.position != before {
                continue;
            }
            // A tailable cursor at the end: wait for the next entry, or return.
            let left = deadline.map_or(Duration::ZERO, |d| {
                d.saturating_duration_since(Instant::now())
            });
            if !batch.is_empty() || left.is_zero() {
                return Ok((batch, false));
            }
            let next = self
                .position
                .map_or(1, |(index, _)| index.saturating_add(1));
            self.set.wait_applied(next, left);
        }
    }
}

/// The entries one by one (for a sort, a pipeline, a count); a tailable cursor's end
/// is where the entries applied so far end.
impl Iterator for OplogCursor {
    type Item = Result<Document>;

    fn next(&mut self) -> Option<Result<Document>> {
        loop {
            if self.limit.is_some_and(|l| self.returned >= l) {
                return None;
            }
            if let Some(entry) = self.ready.pop_front() {
                self.returned += 1;
                return Some(Ok(entry));
            }
            if self.done {
                return None;
            }
            let before = self.position;
            if let Err(e) = self.read() {
                self.done = true;
                return Some(Err(e));
            }
            if self.ready.is_empty() && self.position == before {
                return None;
            }
        }
    }
}

/// The source of a find on the oplog.
pub fn source(engine: Arc<dyn Engine>, set: Arc<ReplicaSet>, read: Read) -> CursorSource {
    CursorSource::Oplog(Box::new(OplogCursor::open(engine, set, read)))
}

/// The entries that match `matcher`, in order, up to those applied now.
pub fn entries(
    engine: Arc<dyn Engine>,
    set: Arc<ReplicaSet>,
    filter: Document,
    matcher: Matcher,
    deadline: Deadline,
) -> OplogCursor {
    let read = Read {
        filter,
        matcher,
        projection: None,
        direction: Direction::Forward,
        tailable: false,
        await_data: false,
        skip: 0,
        limit: None,
        deadline,
    };
    OplogCursor::open(engine, set, read)
}
