//! Change streams (`aggregate` with a leading `$changeStream`) on a replica set member:
//! the changes of one collection, one database or the whole deployment
//! (`allChangesForCluster`), read from the member's oplog (`basalt_catalog::oplog`) as
//! MongoDB's change events, through the stages that follow (`$match`, `$project`, ...).
//!
//! The cursor is tailable: a getMore reads the records applied since its last one and,
//! when there are none, waits for the next entry to be applied, up to `maxTimeMS`
//! (awaitData, 1 s by default). Every batch carries a `postBatchResumeToken`. A resume
//! token is `{_data: hex}` of the log entry's index and the record's place in it, so
//! tokens sort as the events do and mean the same on every member: a stream resumes
//! (`resumeAfter`, `startAfter`) on whichever member is primary after a failover. A
//! collection's stream ends with an `invalidate` event when the collection is dropped
//! or renamed, or its database dropped; a database's, when the database is dropped.
//!
//! Pre- and post-images (`fullDocumentBeforeChange`, `fullDocument: whenAvailable |
//! required`) come from the oplog records of collections with
//! `changeStreamPreAndPostImages`. With `showExpandedEvents`, the DDL events `create`,
//! `createIndexes`, `dropIndexes` and `modify` too. A stream that would start before the
//! oldest entry the member holds gets ChangeStreamHistoryLost (286).

use crate::commands::Ctx;
use crate::Server;
use basalt_agg::Pipeline;
use basalt_error::{Error, ErrorCode, Result};
use basalt_repl::ReplicaSet;
use basalt_storage::{Engine, ScanStart, Space, OPLOG_PREFIX};
use bson::{doc, Bson, Document, RawDocument, RawDocumentBuf};
use std::collections::HashSet;
use std::ops::ControlFlow;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// How long a getMore waits for a change without a `maxTimeMS` (mongod's default).
pub const AWAIT_DATA_DEFAULT: Duration = Duration::from_millis(1_000);

/// Oplog records read per batch at most.
const RECORDS_PER_BATCH: usize = 10_000;

/// What a stream watches.
#[derive(Clone, Debug)]
enum Watched {
    Collection { db: String, collection: String },
    Database(String),
    Cluster,
}

/// `fullDocument` (of update events) and `fullDocumentBeforeChange`.
#[derive(Clone, Copy, PartialEq)]
enum Image {
    /// Not shown (`default` / `off`).
    Off,
    /// The document as it is when the event is read.
    UpdateLookup,
    /// The image kept with the change (`changeStreamPreAndPostImages`), else null.
    WhenAvailable,
    /// The image kept with the change, else an error.
    Required,
}

fn image_option(options: &Document, field: &str, off: &str) -> Result<Image> {
    match options.get(field) {
        None => Ok(Image::Off),
        Some(Bson::String(mode)) => match mode.as_str() {
            mode if mode == off => Ok(Image::Off),
            "updateLookup" if field == "fullDocument" => Ok(Image::UpdateLookup),
            "whenAvailable" => Ok(Image::WhenAvailable),
            "required" => Ok(Image::Required),
            _ => Err(Error::bad_value(format!(
                "'{mode}' is not a valid value for {field}"
            ))),
        },
        Some(_) => Err(Error::type_mismatch(format!("{field} must be a string"))),
    }
}

/// Where a stream is: after this record (log entry index, place in the entry).
type Position = (u64, u32);

/// What an event says besides its token, time and session.
struct Change {
    operation_type: &'static str,
    ns: Document,
    fields: Document,
    /// Whether it ends the stream (an `invalidate` event follows it).
    invalidates: bool,
}

impl Change {
    /// A change to a collection (or its documents).
    fn of_document(
        operation_type: &'static str,
        db: &str,
        collection: &str,
        fields: Document,
    ) -> Change {
        Change {
            operation_type,
            ns: doc! { "db": db, "coll": collection },
            fields,
            invalidates: false,
        }
    }
}

pub struct ChangeStream {
    server: Weak<Server>,
    engine: Arc<dyn Engine>,
    set: Arc<ReplicaSet>,
    watched: Watched,
    full_document: Image,
    before_change: Image,
    show_expanded_events: bool,
    pipeline: Option<Pipeline>,
    position: Position,
    /// Set once the invalidate event has been handed out: the cursor then ends.
    invalidated: bool,
}

/// A resume token: the record's place, hex-encoded so that tokens sort as events do.
fn token(position: Position) -> Document {
    let mut bytes = position.0.to_be_bytes().to_vec();
    bytes.extend_from_slice(&position.1.to_be_bytes());
    let data: String = bytes.iter().map(|b| format!("{b:02X}")).collect();
    doc! { "_data": data }
}

/// The place a resume token names, with mongod's errors: a token is an object
/// (TypeMismatch) with a `_data` string (40647), of hexadecimal digits (FailedToParse)
/// that do not end early (Overflow) and name a place (BadValue).
fn position_of(token: &Bson) -> Result<Position> {
    let data = match token {
        Bson::Document(token) => match token.get("_data") {
            Some(Bson::String(data)) => data,
            _ => {
                return Err(Error::location(
                    40647,
                    "Bad resume token: _data of missing or of wrong type",
                ))
            }
        },
        other => {
            return Err(Error::type_mismatch(format!(
                "a resume token must be an object, not {}",
                crate::request::type_name(other)
            )))
        }
    };
    if data.len() % 2 != 0 || !data.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(Error::failed_to_parse(format!(
            "resume token string was not a valid hex string: {data}"
        )));
    }
    if data.len() < 24 {
        return Err(Error::new(
            ErrorCode::OVERFLOW,
            "invalid resume token: it ends early",
        ));
    }
    if data.len() != 24 {
        return Err(Error::bad_value("invalid resume token"));
    }
    let bytes: Vec<u8> = (0..12)
        .map(|i| u8::from_str_radix(&data[2 * i..2 * i + 2], 16))
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| Error::bad_value("invalid resume token"))?;
    let index = u64::from_be_bytes(bytes[..8].try_into().unwrap_or_default());
    let place = u32::from_be_bytes(bytes[8..].try_into().unwrap_or_default());
    Ok((index, place))
}

/// `aggregate` with `$changeStream` first: opens the stream and returns its first batch.
pub fn aggregate(ctx: &Ctx<'_>, body: &Document, stages: &[&Document]) -> Result<RawDocumentBuf> {
    let Some(set) = ctx.server.replication() else {
        return Err(Error::location(
            40573,
            "The $changeStream stage is only supported on replica sets",
        ));
    };
    let options = match stages[0].get("$changeStream") {
        Some(Bson::Document(options)) => options,
        _ => {
            return Err(Error::location(
                6188500,
                "$changeStream stage expects a document as argument",
            ))
        }
    };
    let all_for_cluster = options.get_bool("allChangesForCluster").unwrap_or(false);
    let watched = match body.get("aggregate") {
        Some(Bson::String(collection)) => Watched::Collection {
            db: ctx.db.to_string(),
            collection: collection.clone(),
        },
        _ if all_for_cluster && ctx.db == "admin" => Watched::Cluster,
        _ if all_for_cluster => {
            return Err(Error::new(
                ErrorCode::INVALID_OPTIONS,
                "$changeStream may only be run with allChangesForCluster on the admin database",
            ))
        }
        _ if ctx.db == "admin" => {
            return Err(Error::new(
                ErrorCode::INVALID_NAMESPACE,
                "$changeStream may not be opened on the internal admin database",
            ))
        }
        _ => Watched::Database(ctx.db.to_string()),
    };
    let full_document = image_option(options, "fullDocument", "default")?;
    let before_change = image_option(options, "fullDocumentBeforeChange", "off")?;
    let applied = set.applied();
    let position = match (
        options.get("resumeAfter"),
        options.get("startAfter"),
        options.get("startAtOperationTime"),
    ) {
        (Some(token), None, None) | (None, Some(token), None) => position_of(token)?,
        (None, None, Some(Bson::Timestamp(time))) => {
            (u64::from(time.increment).saturating_sub(1), u32::MAX)
        }
        (None, None, Some(_)) => {
            return Err(Error::type_mismatch(
                "startAtOperationTime must be a timestamp",
            ))
        }
        (None, None, None) => (applied.index, u32::MAX),
        _ => {
            return Err(Error::location(
                40674,
                "Only one type of resume option is allowed, but multiple were found.",
            ))
        }
    };
    // The records after the position must all still be there.
    if position.0.saturating_add(1) < set.oplog_start()? {
        return Err(Error::new(
            ErrorCode::CHANGE_STREAM_HISTORY_LOST,
            "Resume of change stream was not possible, as the resume point may no longer be \
             in the oplog.",
        )
        .with_extra(doc! { "errorLabels": ["NonResumableChangeStreamError"] }));
    }
    let following: Vec<Document> = stages[1..].iter().map(|stage| (*stage).clone()).collect();
    if following
        .iter()
        .any(|stage| stage.contains_key("$changeStream"))
    {
        return Err(Error::location(
            40602,
            "$changeStream is only valid as the first stage in a pipeline",
        ));
    }
    let pipeline = if following.is_empty() {
        None
    } else {
        Some(Pipeline::parse(&following, body.get_document("let").ok())?)
    };
    check_following_stages(&following)?;
    let mut stream = ChangeStream {
        server: Arc::downgrade(ctx.server),
        engine: ctx.server.catalog.engine().clone(),
        set: set.clone(),
        watched: watched.clone(),
        full_document,
        before_change,
        show_expanded_events: options.get_bool("showExpandedEvents").unwrap_or(false),
        pipeline,
        position,
        invalidated: false,
    };
    let batch_size = body
        .get_document("cursor")
        .ok()
        .and_then(|cursor| cursor.get("batchSize"))
        .and_then(basalt_value::as_i64)
        .map(|n| n.max(0) as usize);
    let (batch, token) = stream.next_batch(batch_size, None)?;
    let namespace = match &watched {
        Watched::Collection { db, collection } => format!("{db}.{collection}"),
        Watched::Database(db) => format!("{db}.$cmd.aggregate"),
        Watched::Cluster => "admin.$cmd.aggregate".to_string(),
    };
    let id = if stream.invalidated {
        0
    } else {
        ctx.server.cursors.open(
            namespace.clone(),
            crate::cursors::CursorSource::ChangeStream(Box::new(stream)),
            ctx.deadline(),
            crate::security::cursor_owner(ctx),
        )
    };
    reply(id, &namespace, batch, true, token)
}

/// The stages a change stream's events may go through, as mongod allows them: those
/// that change or filter one event at a time (`$fill` without a sort, which is a
/// `$set`). Another is IllegalOperation.
const FOLLOWING_STAGES: &[&str] = &[
    "$match",
    "$project",
    "$addFields",
    "$set",
    "$unset",
    "$replaceRoot",
    "$replaceWith",
    "$redact",
    "$changeStreamSplitLargeEvent",
];

fn check_following_stages(stages: &[Document]) -> Result<()> {
    for stage in stages {
        let Some((name, spec)) = stage.iter().next() else {
            continue;
        };
        let allowed = FOLLOWING_STAGES.contains(&name.as_str())
            || (name == "$fill"
                && spec
                    .as_document()
                    .is_some_and(|fill| !fill.contains_key("sortBy")));
        if !allowed && name.starts_with('$') {
            return Err(Error::new(
                ErrorCode::ILLEGAL_OPERATION,
                format!("Stage {name} is not permitted in a $changeStream pipeline"),
            ));
        }
    }
    Ok(())
}

/// A change stream cursor's reply: the batch, with `postBatchResumeToken`.
pub fn reply(
    id: i64,
    namespace: &str,
    batch: Vec<RawDocumentBuf>,
    first: bool,
    resume_token: Document,
) -> Result<RawDocumentBuf> {
    let reply = crate::cursors::cursor_reply(id, namespace, batch, first)?;
    let mut reply = Document::try_from(reply.as_ref())?;
    if let Ok(cursor) = reply.get_document_mut("cursor") {
        cursor.insert("postBatchResumeToken", resume_token);
    }
    crate::cursors::encode(&reply)
}

impl ChangeStream {
    /// Whether the stream has ended (after its invalidate event).
    pub fn is_exhausted(&self) -> bool {
        self.invalidated
    }

    /// The next events, up to `max_docs`, waiting up to `wait` for the first one when
    /// there is none yet; with the resume token of where the batch ends.
    pub fn next_batch(
        &mut self,
        max_docs: Option<usize>,
        wait: Option<Duration>,
    ) -> Result<(Vec<RawDocumentBuf>, Document)> {
        let max_docs = max_docs.filter(|n| *n > 0).unwrap_or(usize::MAX);
        let deadline = wait.map(|wait| Instant::now() + wait);
        loop {
            let events = self.read(max_docs)?;
            if !events.is_empty() || self.invalidated {
                let batch = events
                    .iter()
                    .map(crate::cursors::encode)
                    .collect::<Result<Vec<_>>>()?;
                return Ok((batch, token(self.position)));
            }
            let Some(deadline) = deadline else {
                return Ok((Vec::new(), token(self.position)));
            };
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok((Vec::new(), token(self.position)));
            }
            self.set
                .wait_applied(self.position.0.saturating_add(1), left);
        }
    }

    /// Reads records after the stream's position: the events they make, through the
    /// stream's stages. The position moves past every record read, matching or not; at
    /// the end it is at the last entry applied.
    fn read(&mut self, max_docs: usize) -> Result<Vec<Document>> {
        let applied = self.set.applied().index;
        let snapshot = self.engine.snapshot();
        let start = basalt_catalog::oplog::key(self.position.0, self.position.1);
        let mut events = Vec::new();
        let mut last = None;
        let mut records = 0;
        let mut failure = None;
        // Whether the scan stopped before the last applied entry's records.
        let mut stopped_early = false;
        snapshot.scan_prefix(
            Space::Replication,
            OPLOG_PREFIX,
            ScanStart::After(&start),
            &mut |key, value| {
                let Some(position) = basalt_catalog::oplog::position(key) else {
                    return Ok(ControlFlow::Continue(()));
                };
                if position.0 > applied {
                    return Ok(ControlFlow::Break(()));
                }
                last = Some(position);
                records += 1;
                let shown = RawDocument::from_bytes(value)
                    .map_err(|e| Error::internal(format!("corrupt oplog record: {e}")))
                    .and_then(|raw| match self.may_show(raw) {
                        true => self.event(&Document::try_from(raw)?, position),
                        false => Ok(None),
                    });
                match shown {
                    Ok(None) => {}
                    Ok(Some((event, invalidate))) => {
                        events.push(event);
                        if let Some(invalidate) = invalidate {
                            events.push(invalidate);
                            self.invalidated = true;
                            stopped_early = true;
                            return Ok(ControlFlow::Break(()));
                        }
                    }
                    Err(e) => {
                        failure = Some(e);
                        return Ok(ControlFlow::Break(()));
                    }
                }
                stopped_early = events.len() >= max_docs || records >= RECORDS_PER_BATCH;
                Ok(if stopped_early {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                })
            },
        )?;
        if let Some(failure) = failure {
            return Err(failure);
        }
        self.position = match last {
            Some(last) if stopped_early => last,
            _ => self.position.max((applied, u32::MAX)),
        };
        if self.full_document == Image::UpdateLookup {
            for event in &mut events {
                self.look_up(event)?;
            }
        }
        let Some(pipeline) = &self.pipeline else {
            return Ok(events);
        };
        let data = |event: &Document| {
            event
                .get_document("_id")
                .and_then(|id| id.get_str("_data"))
                .map(str::to_string)
                .ok()
        };
        let tokens: HashSet<String> = events.iter().filter_map(data).collect();
        let events = pipeline.run(events.into_iter().map(Ok))?;
        // A stage that changed an event's `_id` took away its resume token.
        if events
            .iter()
            .any(|event| data(event).is_none_or(|token| !tokens.contains(&token)))
        {
            return Err(Error::new(
                ErrorCode::CHANGE_STREAM_FATAL_ERROR,
                "Encountered an event whose _id field, which contains the resume token, was \
                 modified by the pipeline. Modifying the _id field of an event makes it \
                 impossible to resume the stream from that point. Only transformations that \
                 retain the unmodified _id field are allowed.",
            )
            .with_extra(doc! { "errorLabels": ["NonResumableChangeStreamError"] }));
        }
        Ok(events)
    }

    /// Whether a namespace `db.collection` is watched.
    fn watches(&self, db: &str, collection: &str) -> bool {
        match &self.watched {
            Watched::Collection {
                db: watched_db,
                collection: watched,
            } => db == watched_db && collection == watched,
            Watched::Database(watched) => db == watched && !collection.starts_with("system."),
            Watched::Cluster => {
                !["admin", "config", "local"].contains(&db) && !collection.starts_with("system.")
            }
        }
    }

    /// Whether an oplog record may make an event of this stream, read from its bytes:
    /// a document change in a namespace not watched is skipped without decoding it.
    fn may_show(&self, record: &RawDocument) -> bool {
        match (record.get_str("op"), record.get_str("ns")) {
            (Ok(op @ ("i" | "u" | "d")), Ok(ns)) => {
                let (db, collection) = ns.split_once('.').unwrap_or((ns, ""));
                self.watches(db, collection) || self.shows_view_creation(op, collection)
            }
            _ => true,
        }
    }

    /// The event of an oplog record, if the stream shows it, and the invalidate event
    /// that follows it when it ends the stream.
    fn event(
        &self,
        record: &Document,
        position: Position,
    ) -> Result<Option<(Document, Option<Document>)>> {
        let ns = record.get_str("ns").unwrap_or("");
        let (db, collection) = ns.split_once('.').unwrap_or((ns, ""));
        let o = record.get_document("o").cloned().unwrap_or_default();
        let op = record.get_str("op").unwrap_or("");
        let view_creation = self.shows_view_creation(op, collection);
        let change = match op {
            "i" if view_creation => self.view_created(db, &o),
            "i" | "u" | "d" if !self.watches(db, collection) => None,
            "i" => Some(Change::of_document(
                "insert",
                db,
                collection,
                doc! {
                    "fullDocument": o.clone(),
                    "documentKey": { "_id": o.get("_id").cloned().unwrap_or(Bson::Null) },
                },
            )),
            "u" => Some(self.update(db, collection, record, o)),
            "d" => Some(Change::of_document(
                "delete",
                db,
                collection,
                doc! { "documentKey": o },
            )),
            "c" => self.command(db, &o),
            _ => None,
        };
        let Some(change) = change else {
            return Ok(None);
        };
        let time = |field: &str| record.get(field).cloned().unwrap_or(Bson::Null);
        let mut event = doc! {
            "_id": token(position),
            "operationType": change.operation_type,
            "clusterTime": time("ts"),
            "wallTime": time("wall"),
            "ns": change.ns,
        };
        event.extend(change.fields);
        self.add_images(record, &mut event)?;
        if self.show_expanded_events && !view_creation {
            if let Some(uuid) = record.get("ui") {
                event.insert("collectionUUID", uuid.clone());
            }
        }
        for field in ["lsid", "txnNumber"] {
            if let Some(value) = record.get(field) {
                event.insert(field, value.clone());
            }
        }
        let invalidate = change.invalidates.then(|| {
            doc! {
                "_id": token(position),
                "operationType": "invalidate",
                "clusterTime": time("ts"),
                "wallTime": time("wall"),
            }
        });
        Ok(Some((event, invalidate)))
    }

    /// Whether a record is a view's creation that this stream shows: with
    /// `showExpandedEvents`, an insert into `system.views` (see `crate::views`).
    fn shows_view_creation(&self, op: &str, collection: &str) -> bool {
        self.show_expanded_events && op == "i" && collection == crate::views::SYSTEM_VIEWS
    }

    /// The `create` event of a view, from its definition inserted in `system.views`.
    fn view_created(&self, db: &str, definition: &Document) -> Option<Change> {
        let name = definition
            .get_str("_id")
            .ok()?
            .strip_prefix(db)?
            .strip_prefix('.')?;
        if !self.watches(db, name) {
            return None;
        }
        let mut description = Document::new();
        for field in ["viewOn", "pipeline", "collation"] {
            if let Some(value) = definition.get(field) {
                description.insert(field, value.clone());
            }
        }
        let fields = doc! { "operationDescription": description };
        Some(Change::of_document("create", db, name, fields))
    }

    /// An update record's event: `update` with its description, or `replace` with the
    /// new document.
    fn update(&self, db: &str, collection: &str, record: &Document, o: Document) -> Change {
        let key = record.get_document("o2").cloned().unwrap_or_default();
        if !o.contains_key("$v") {
            let fields = doc! { "fullDocument": o, "documentKey": key };
            return Change::of_document("replace", db, collection, fields);
        }
        let mut change = Description::default();
        change.document(o.get_document("diff").unwrap_or(&Document::new()), &[]);
        let mut description = doc! {
            "updatedFields": change.updated,
            "removedFields": change.removed,
            "truncatedArrays": change.truncated,
        };
        if self.show_expanded_events && !change.disambiguated.is_empty() {
            description.insert("disambiguatedPaths", change.disambiguated);
        }
        let fields = doc! { "updateDescription": description, "documentKey": key };
        Change::of_document("update", db, collection, fields)
    }

    /// A command record's event (`drop`, `rename`, `dropDatabase`; with
    /// `showExpandedEvents` `create`, `createIndexes`, `dropIndexes`, `modify`), when
    /// the stream shows it.
    fn command(&self, db: &str, o: &Document) -> Option<Change> {
        let on_collection = |name: &str| matches!(&self.watched, Watched::Collection { db: d, collection } if d == db && collection == name);
        if let Ok(collection) = o.get_str("drop") {
            let mut change = Change::of_document("drop", db, collection, Document::new());
            change.invalidates = on_collection(collection);
            return self.watches(db, collection).then_some(change);
        }
        if let Ok(from) = o.get_str("renameCollection") {
            let (from_db, from_collection) = from.split_once('.').unwrap_or((from, ""));
            let to = o.get_str("to").unwrap_or("");
            let (to_db, to_collection) = to.split_once('.').unwrap_or((to, ""));
            let to = doc! { "db": to_db, "coll": to_collection };
            let mut fields = doc! { "to": to.clone() };
            if self.show_expanded_events {
                let mut description = doc! { "to": to };
                if let Some(target) = o.get("dropTarget") {
                    description.insert("dropTarget", target.clone());
                }
                fields.insert("operationDescription", description);
            }
            let mut change = Change::of_document("rename", from_db, from_collection, fields);
            change.invalidates = on_collection(from_collection);
            return self.watches(from_db, from_collection).then_some(change);
        }
        if o.contains_key("dropDatabase") {
            let shown = match &self.watched {
                Watched::Collection { db: d, .. } | Watched::Database(d) => d == db,
                Watched::Cluster => true,
            };
            return shown.then(|| Change {
                operation_type: "dropDatabase",
                ns: doc! { "db": db },
                fields: Document::new(),
                invalidates: !matches!(self.watched, Watched::Cluster),
            });
        }
        let expanded = [
            ("create", "create"),
            ("createIndexes", "createIndexes"),
            ("dropIndexes", "dropIndexes"),
            ("collMod", "modify"),
        ];
        let (command, operation_type) = expanded
            .into_iter()
            .find(|(command, _)| o.contains_key(*command))?;
        let collection = o.get_str(command).ok()?;
        if !self.show_expanded_events || !self.watches(db, collection) {
            return None;
        }
        let description = if command == "create" {
            doc! { "idIndex": { "v": 2, "key": { "_id": 1 }, "name": "_id_" } }
        } else if let Ok(spec) = o.get_document("spec") {
            doc! { "indexes": [spec.clone()] }
        } else if let Ok(index) = o.get_document("index") {
            doc! { "index": index.clone() }
        } else {
            Document::new()
        };
        let fields = doc! { "operationDescription": description };
        Some(Change::of_document(operation_type, db, collection, fields))
    }

    /// `fullDocument` of an update event and `fullDocumentBeforeChange` of an update,
    /// replace or delete event, from the images kept with the change.
    fn add_images(&self, record: &Document, event: &mut Document) -> Result<()> {
        let kind = event.get_str("operationType").unwrap_or("").to_string();
        let mut add = |mode: Image, field: &str, image: &str| -> Result<()> {
            let value = match (mode, record.get_document(image)) {
                (Image::Off | Image::UpdateLookup, _) => return Ok(()),
                (_, Ok(image)) => Bson::Document(image.clone()),
                (Image::WhenAvailable, Err(_)) => Bson::Null,
                (Image::Required, Err(_)) => {
                    return Err(Error::new(
                        ErrorCode::NO_MATCHING_DOCUMENT,
                        format!(
                            "Change stream was configured to require a {} for all update, \
                             delete and replace events, but it was not found for event: {}",
                            if image == "preImage" {
                                "pre-image"
                            } else {
                                "post-image"
                            },
                            event.get_document("_id").cloned().unwrap_or_default()
                        ),
                    ))
                }
            };
            event.insert(field, value);
            Ok(())
        };
        if kind == "update" {
            add(self.full_document, "fullDocument", "postImage")?;
        }
        if ["update", "replace", "delete"].contains(&kind.as_str()) {
            add(self.before_change, "fullDocumentBeforeChange", "preImage")?;
        }
        Ok(())
    }

    /// `fullDocument: updateLookup`: an update event gets the document as it is now.
    fn look_up(&self, event: &mut Document) -> Result<()> {
        if event.get_str("operationType").ok() != Some("update") {
            return Ok(());
        }
        let Some(server) = self.server.upgrade() else {
            return Ok(());
        };
        let ns = event.get_document("ns").cloned().unwrap_or_default();
        let (db, collection) = (
            ns.get_str("db").unwrap_or(""),
            ns.get_str("coll").unwrap_or(""),
        );
        let key = event
            .get_document("documentKey")
            .cloned()
            .unwrap_or_default();
        let found = crate::commands::find_internal(&server, db, collection, key)?;
        event.insert(
            "fullDocument",
            found.into_iter().next().map_or(Bson::Null, Bson::Document),
        );
        Ok(())
    }
}

/// An update event's `updateDescription`, read from the oplog record's diff
/// (`basalt_catalog::oplog::diff`): dotted paths of the values set, of the fields
/// removed, and the arrays cut short.
#[derive(Default)]
struct Description {
    updated: Document,
    removed: Vec<Bson>,
    truncated: Vec<Bson>,
    /// The paths with a numeric part, as their parts: array indexes as integers, field
    /// names as strings (`disambiguatedPaths`: `a.1` says neither).
    disambiguated: Document,
}

fn dotted(parts: &[Bson]) -> String {
    let names: Vec<String> = parts
        .iter()
        .map(|part| match part {
            Bson::String(name) => name.clone(),
            other => other.to_string(),
        })
        .collect();
    names.join(".")
}

fn with_part(parts: &[Bson], part: Bson) -> Vec<Bson> {
    let mut parts = parts.to_vec();
    parts.push(part);
    parts
}

impl Description {
    /// Notes a path's parts when one of them could be read either way.
    fn note(&mut self, parts: &[Bson]) {
        let ambiguous = parts.iter().any(|part| match part {
            Bson::String(name) => !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()),
            _ => true,
        });
        if ambiguous {
            self.disambiguated
                .insert(dotted(parts), Bson::Array(parts.to_vec()));
        }
    }

    fn set(&mut self, parts: &[Bson], value: &Bson) {
        self.updated.insert(dotted(parts), value.clone());
        self.note(parts);
    }

    /// The changes within a document (or an array: `{a: true, ...}`) at `parts`.
    fn document(&mut self, diff: &Document, parts: &[Bson]) {
        if diff.get_bool("a").unwrap_or(false) {
            return self.array(diff, parts);
        }
        for (key, value) in diff {
            let Bson::Document(fields) = value else {
                continue;
            };
            match key.as_str() {
                "d" => {
                    for name in fields.keys() {
                        let path = with_part(parts, Bson::String(name.clone()));
                        self.removed.push(Bson::String(dotted(&path)));
                        self.note(&path);
                    }
                }
                "u" | "i" => {
                    for (name, value) in fields {
                        self.set(&with_part(parts, Bson::String(name.clone())), value);
                    }
                }
                _ => {
                    if let Some(name) = key.strip_prefix('s') {
                        self.document(fields, &with_part(parts, Bson::String(name.into())));
                    }
                }
            }
        }
    }

    fn array(&mut self, diff: &Document, parts: &[Bson]) {
        for (key, value) in diff {
            if key == "l" {
                if let Some(size) = basalt_value::as_i64(value) {
                    self.truncated.push(Bson::Document(
                        doc! { "field": dotted(parts), "newSize": size as i32 },
                    ));
                }
                continue;
            }
            let (kind, index) = key.split_at(key.len().min(1));
            let Ok(index) = index.parse::<i32>() else {
                continue;
            };
            let path = with_part(parts, Bson::Int32(index));
            match (kind, value) {
                ("u", value) => self.set(&path, value),
                ("s", Bson::Document(within)) => self.document(within, &path),
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_update_description_is_read_from_the_diff() {
        let old = doc! { "_id": 1, "a": 1, "b": { "c": 1, "d": 2 }, "e": [1, 2], "gone": true };
        let new = doc! { "_id": 1, "a": 2, "b": { "c": 1, "d": 3, "n": 0 }, "e": [1, 2, 3] };
        let mut change = Description::default();
        change.document(&basalt_catalog::oplog::diff(&old, &new), &[]);
        assert_eq!(
            change.updated,
            doc! { "a": 2, "b.d": 3, "b.n": 0, "e.2": 3 }
        );
        assert_eq!(change.removed, vec![Bson::String("gone".into())]);
        assert_eq!(change.disambiguated, doc! { "e.2": ["e", 2] });
        let mut cut = Description::default();
        let diff = basalt_catalog::oplog::diff(
            &doc! { "a": [1, 2, 3, { "x": 1, "7": 0 }, 5] },
            &doc! { "a": [1, 9, 3, { "x": 2 }] },
        );
        cut.document(&diff, &[]);
        assert_eq!(cut.updated, doc! { "a.1": 9, "a.3.x": 2 });
        assert_eq!(cut.removed, vec![Bson::String("a.3.7".into())]);
        assert_eq!(
            cut.truncated,
            vec![Bson::Document(doc! { "field": "a", "newSize": 4 })]
        );
        assert_eq!(
            cut.disambiguated,
            doc! { "a.1": ["a", 1], "a.3.7": ["a", 3, "7"], "a.3.x": ["a", 3, "x"] }
        );
    }
}
