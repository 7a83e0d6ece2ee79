//! The server's side of replica sets (`--replSet`): which commands go through the
//! replicated log, which reads a secondary may serve, how a committed command is run on
//! every member, and the `replSet*` commands.
//!
//! A write command is not run where it arrives: the primary proposes it as it came, and
//! it runs when it is committed, on every member, through [`ServerApplier`] and the same
//! command handlers a standalone uses. Nothing it does depends on the member: the clock
//! and generated ObjectIds are fixed by the log entry (`basalt_value::clock`).

mod batches;

use crate::commands::{dispatch, Ctx};
use crate::Server;
use basalt_error::{Error, ErrorCode, Result};
use basalt_repl::{Applier, MemberState, ReplicaSet, Sequence, WriteCommand, WriteMembers};
use basalt_wire::DocumentSequence;
use bson::{doc, Bson, Document, RawDocumentBuf};
use std::cell::Cell;
use std::sync::{Arc, Weak};

/// What a command is to a replica set member.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Changes data or the catalog: proposed to the log by the primary.
    Write,
    /// Reads data: a secondary serves it only with secondaryOk.
    Read,
    /// Anything else (handshakes, status, cursors already open).
    Other,
}

/// The role of the command `name` with this body.
pub fn role_of(name: &str, body: &Document) -> Role {
    match name {
        "insert"
        | "update"
        | "delete"
        | "findAndModify"
        | "create"
        | "drop"
        | "dropDatabase"
        | "createIndexes"
        | "dropIndexes"
        | "collMod"
        | "renameCollection"
        | "applyOps"
        | "convertToCapped"
        | "cloneCollectionAsCapped" => Role::Write,
        "aggregate" if writing_stage(body).is_some() => Role::Write,
        "mapReduce" if !map_reduce_inline(body) => Role::Write,
        "find" | "aggregate" | "count" | "distinct" | "mapReduce" | "listCollections"
        | "listIndexes" | "listDatabases" | "collStats" | "dbStats" | "explain" => Role::Read,
        _ => Role::Other,
    }
}

/// Whether a write command changes `local.oplog.rs`, which only the member itself
/// writes.
fn writes_oplog(db: &str, name: &str, body: &Document) -> bool {
    let named = |value: Option<&Bson>, full: bool| match value {
        Some(Bson::String(target)) if full => target
            .split_once('.')
            .is_some_and(|(d, c)| crate::local_oplog::is_oplog(d, c)),
        Some(Bson::String(target)) => crate::local_oplog::is_oplog(db, target),
        _ => false,
    };
    match name {
        "renameCollection" => named(body.get(name), true) || named(body.get("to"), true),
        "applyOps" | "dropDatabase" => false,
        _ => named(body.get(name), false),
    }
}

/// The stage an aggregation ends in when it writes: `$out` or `$merge`.
pub fn writing_stage(body: &Document) -> Option<&str> {
    let stage = body.get_array("pipeline").ok()?.last()?.as_document()?;
    stage
        .keys()
        .next()
        .map(String::as_str)
        .filter(|name| *name == "$out" || *name == "$merge")
}

fn map_reduce_inline(body: &Document) -> bool {
    match body.get("out") {
        Some(Bson::Document(out)) => out.contains_key("inline"),
        _ => false,
    }
}

/// Whether the client lets a secondary answer: a read preference other than `primary`.
fn secondary_ok(body: &Document) -> bool {
    body.get_document("$readPreference")
        .ok()
        .and_then(|preference| preference.get_str("mode").ok())
        .is_some_and(|mode| mode != "primary")
}

/// Whether the command reads at `readConcern: linearizable`.
pub fn wants_linearizable(body: &Document) -> bool {
    body.get_document("readConcern")
        .ok()
        .and_then(|concern| concern.get_str("level").ok())
        == Some("linearizable")
}

thread_local! {
    /// Set while this thread runs a committed command, so it runs instead of being
    /// proposed again.
    static APPLYING: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread runs a committed command from the log.
pub fn applying() -> bool {
    APPLYING.with(Cell::get)
}

/// What happens to a command on a replica set member before its handler runs: `Some`
/// with the whole reply when it was proposed to the log; `None` when it runs here.
pub fn route(
    ctx: &Ctx<'_>,
    set: &ReplicaSet,
    name: &str,
    body: &Document,
) -> Result<Option<RawDocumentBuf>> {
    match role_of(name, body) {
        Role::Write if !applying() => {
            if writes_oplog(ctx.db, name, body) {
                return Err(crate::local_oplog::refuse_write());
            }
            propose(ctx, set, name, body).map(Some)
        }
        Role::Read => {
            if wants_linearizable(body) {
                set.check_readable(false)?;
                set.confirm_primary()?;
            } else {
                set.check_readable(secondary_ok(body))?;
            }
            wait_for_cluster_time(ctx, set, body)?;
            Ok(None)
        }
        _ => Ok(None),
    }
}

/// The longest a read waits for `afterClusterTime` without a `maxTimeMS` of its own.
const AFTER_CLUSTER_TIME_WAIT_MS: u64 = 60_000;

/// A causally consistent read (`readConcern.afterClusterTime`, which drivers send after
/// a session's earlier operation): waits until this member has applied the entry that
/// time names, so a session reads its own writes on a secondary too. Cluster times are
/// the members' oplog timestamps, whose increment is the entry's index.
pub(crate) fn wait_for_cluster_time(
    ctx: &Ctx<'_>,
    set: &ReplicaSet,
    body: &Document,
) -> Result<()> {
    let Ok(concern) = body.get_document("readConcern") else {
        return Ok(());
    };
    let Some(after) = concern.get("afterClusterTime") else {
        return Ok(());
    };
    let Bson::Timestamp(after) = after else {
        return Err(Error::type_mismatch(
            "BSON field 'readConcern.afterClusterTime' is the wrong type, expected type 'timestamp'",
        ));
    };
    let wait_ms = ctx
        .max_time_ms
        .or_else(|| body.get("maxTimeMS").and_then(basalt_value::as_i64))
        .filter(|ms| *ms > 0)
        .map_or(AFTER_CLUSTER_TIME_WAIT_MS, |ms| ms as u64);
    if set.wait_applied(
        u64::from(after.increment),
        std::time::Duration::from_millis(wait_ms),
    ) {
        Ok(())
    } else {
        Err(Error::new(
            ErrorCode::MAX_TIME_MS_EXPIRED,
            format!("operation exceeded time limit waiting for afterClusterTime {after}"),
        ))
    }
}

/// Adds what a replica set member's every reply carries for causal consistency, as
/// mongod's: `operationTime` (the last entry applied here, which a write's own entry is
/// by the time it is answered) and `$clusterTime` (the same time, signed under access
/// control once there is a key, see `cluster_time.rs`; without access control with
/// mongod's empty signature).
pub fn with_cluster_time(server: &Server, set: &ReplicaSet, reply: &mut RawDocumentBuf) {
    let time = set.applied().timestamp();
    reply.append(bson::cstr!("operationTime"), time);
    let signature = match server.cluster_time_keys.signature(time) {
        Some(signature) => signature,
        // Under access control, no time is gossiped before it can be signed.
        None if server.security.enabled => return,
        None => crate::cluster_time::signature_document(0, vec![0; 20]),
    };
    reply.append(
        bson::cstr!("$clusterTime"),
        bson::rawdoc! { "clusterTime": time, "signature": signature },
    );
}

/// Proposes a write command (in pieces when it is large, see `batches.rs`) and returns
/// the reply its application produced here, with a write concern error added when the
/// set cannot satisfy the concern asked for.
pub(crate) fn propose(
    ctx: &Ctx<'_>,
    set: &ReplicaSet,
    name: &str,
    body: &Document,
) -> Result<RawDocumentBuf> {
    let encoded = body
        .to_vec()
        .map_err(|e| Error::internal(format!("cannot encode the command: {e}")))?;
    let raw = bson::RawDocument::from_bytes(&encoded)
        .map_err(|e| Error::internal(format!("cannot encode the command: {e}")))?;
    // A retryable write's statements are numbered from its `stmtId` (a bulkWrite's
    // operation gives its index), else from 0.
    let first = body
        .get_i32("stmtId")
        .ok()
        .and_then(|first| u32::try_from(first).ok())
        .unwrap_or(0);
    let (reply, last_index) = match batches::split(name, raw, ctx.raw_sequences) {
        None => {
            let sequences = ctx.raw_sequences.iter().map(batches::to_sequence).collect();
            propose_entry(ctx, set, encoded, sequences, first)?
        }
        Some(pieces) => {
            let ordered = body.get_bool("ordered").unwrap_or(true);
            let mut merged = batches::Merged::default();
            let mut last_index = 0;
            for piece in pieces {
                let statement = first.saturating_add(piece.first_statement);
                let (reply, index) =
                    propose_entry(ctx, set, piece.body, piece.sequences, statement)?;
                last_index = index;
                if !merged.add(piece.first_statement, reply, ordered) {
                    break;
                }
            }
            (merged.into_reply()?, last_index)
        }
    };
    match write_concern_error(ctx, set, body, last_index) {
        None => Ok(reply),
        Some(error) => {
            let mut reply = Document::try_from(reply.as_ref())?;
            reply.insert("writeConcernError", error);
            crate::cursors::encode(&reply)
        }
    }
}

/// Proposes one log entry (`body` encoded) and waits for its reply; returns it with the
/// entry's index.
fn propose_entry(
    ctx: &Ctx<'_>,
    set: &ReplicaSet,
    body: Vec<u8>,
    sequences: Vec<Sequence>,
    first_statement: u32,
) -> Result<(RawDocumentBuf, u64)> {
    let command = WriteCommand {
        db: ctx.db.to_string(),
        body,
        sequences,
        wall_ms: bson::DateTime::now().timestamp_millis(),
        first_statement,
    };
    let (reply, index) = set.propose(command)?;
    let reply = RawDocumentBuf::from_bytes(reply)
        .map_err(|e| Error::internal(format!("an applied command's reply: {e}")))?;
    Ok((reply, index))
}

/// The `writeConcernError` of a write that is done (as mongod, the write stays):
/// UnsatisfiableWriteConcern (100) for `w` above the number of members,
/// UnknownReplWriteConcern (79) for a mode the config's `getLastErrorModes` does not
/// define, and WriteConcernFailed (64, `errInfo.wtimeout`) when the members holding the
/// write's last entry are fewer than `w: N`, or lack the distinct tag values of the mode
/// `w` names, within `wtimeout` (or the command's `maxTimeMS`). `w: "majority"`
/// and any `w` up to a majority are satisfied by the commit the write waited for. A write
/// that gives no concern has the set's default one.
fn write_concern_error(
    ctx: &Ctx<'_>,
    set: &ReplicaSet,
    body: &Document,
    last_index: u64,
) -> Option<Document> {
    // A write without a concern gets the set's default (setDefaultRWConcern), if any.
    let concern = match body.get_document("writeConcern") {
        Ok(concern) => concern.clone(),
        Err(_) => crate::commands::rw_concern_defaults::default_write_concern(ctx)?,
    };
    let concern = &concern;
    let members = match concern.get("w")? {
        w if basalt_value::is_number(w) => {
            let wanted = basalt_value::as_i64(w).unwrap_or(0);
            if wanted > set.members() as i64 {
                return Some(concern_error(
                    ErrorCode::UNSATISFIABLE_WRITE_CONCERN,
                    "Not enough data-bearing nodes",
                    concern,
                ));
            }
            if wanted <= (set.voting_members() / 2 + 1) as i64 {
                return None;
            }
            WriteMembers::Count(wanted as usize)
        }
        Bson::String(mode) if mode != "majority" => match set.write_mode(mode) {
            Some(members) => members,
            None => {
                return Some(concern_error(
                    ErrorCode::UNKNOWN_REPL_WRITE_CONCERN,
                    &format!(
                        "No write concern mode named '{mode}' found in replica set configuration"
                    ),
                    concern,
                ))
            }
        },
        _ => return None,
    };
    if set.await_replication(last_index, &members, wtimeout(body, concern)) {
        return None;
    }
    let message = if set.state() == MemberState::Primary {
        "waiting for replication timed out"
    } else {
        "primary stepped down while waiting for replication"
    };
    Some(doc! {
        "code": ErrorCode::WRITE_CONCERN_FAILED.0,
        "codeName": ErrorCode::WRITE_CONCERN_FAILED.name(),
        "errmsg": message,
        "errInfo": { "wtimeout": true, "writeConcern": concern.clone() },
    })
}

/// A `writeConcernError` the write concern itself causes.
fn concern_error(code: ErrorCode, message: &str, concern: &Document) -> Document {
    doc! {
        "code": code.0,
        "codeName": code.name(),
        "errmsg": message,
        "errInfo": { "writeConcern": concern.clone() },
    }
}

/// How long a write may wait for `w: N` members: `wtimeout` (0 or absent: no limit, as
/// mongod), at most the command's `maxTimeMS`.
fn wtimeout(body: &Document, concern: &Document) -> Option<std::time::Duration> {
    let positive = |value: Option<&Bson>| value.and_then(basalt_value::as_i64).filter(|ms| *ms > 0);
    let wtimeout = positive(concern.get("wtimeout"));
    let max_time = positive(body.get("maxTimeMS"));
    [wtimeout, max_time]
        .into_iter()
        .flatten()
        .min()
        .map(|ms| std::time::Duration::from_millis(ms as u64))
}

/// Codes after which a driver may retry a retryable write (the retryable writes
/// specification's list), with the label MongoDB adds.
const RETRYABLE_WRITE_CODES: &[ErrorCode] = &[
    ErrorCode::INTERRUPTED_AT_SHUTDOWN,
    ErrorCode::INTERRUPTED_DUE_TO_REPL_STATE_CHANGE,
    ErrorCode::NOT_WRITABLE_PRIMARY,
    ErrorCode::NOT_PRIMARY_NO_SECONDARY_OK,
    ErrorCode::NOT_PRIMARY_OR_SECONDARY,
    ErrorCode::PRIMARY_STEPPED_DOWN,
    ErrorCode::SHUTDOWN_IN_PROGRESS,
    ErrorCode::HOST_NOT_FOUND,
    ErrorCode::HOST_UNREACHABLE,
    ErrorCode::NETWORK_TIMEOUT,
    ErrorCode::SOCKET_EXCEPTION,
    ErrorCode::EXCEEDED_TIME_LIMIT,
];

/// Errors that say the server's role changed or it is shutting down (drivers' "not
/// primary" and "node is recovering" errors).
pub fn is_state_change(code: ErrorCode) -> bool {
    [
        ErrorCode::NOT_WRITABLE_PRIMARY,
        ErrorCode::NOT_PRIMARY_NO_SECONDARY_OK,
        ErrorCode::NOT_PRIMARY_OR_SECONDARY,
        ErrorCode::PRIMARY_STEPPED_DOWN,
        ErrorCode::INTERRUPTED_DUE_TO_REPL_STATE_CHANGE,
        ErrorCode::INTERRUPTED_AT_SHUTDOWN,
        ErrorCode::SHUTDOWN_IN_PROGRESS,
    ]
    .contains(&code)
}

/// A retryable write: a write command (or a bulkWrite, whose operations are write
/// commands) with a `txnNumber`, outside a transaction.
fn retryable_write(name: &str, body: &Document) -> bool {
    (role_of(name, body) == Role::Write || name == "bulkWrite")
        && body.contains_key("txnNumber")
        && !crate::transactions::in_transaction(body)
}

/// The labels mongod gives an error with `code` of this command: `RetryableWriteError`
/// for a retryable write (or a transaction's commit or abort, which drivers retry once)
/// failing with a code drivers may retry; `TransientTransactionError` for a statement of
/// a transaction that a retry of the whole transaction may cure (a write conflict, a
/// transaction gone, a primary that stepped down).
pub fn error_labels(name: &str, body: &Document, code: ErrorCode) -> Vec<&'static str> {
    let retryable_code = RETRYABLE_WRITE_CODES.contains(&code);
    if !crate::transactions::in_transaction(body) {
        return if retryable_write(name, body) && retryable_code {
            vec!["RetryableWriteError"]
        } else {
            Vec::new()
        };
    }
    let transient = [
        ErrorCode::WRITE_CONFLICT,
        ErrorCode::NO_SUCH_TRANSACTION,
        ErrorCode::LOCK_TIMEOUT,
        ErrorCode::SNAPSHOT_UNAVAILABLE,
        ErrorCode::PREPARED_TRANSACTION_IN_PROGRESS,
    ]
    .contains(&code);
    match name {
        "commitTransaction" | "abortTransaction" if retryable_code => vec!["RetryableWriteError"],
        "commitTransaction" | "abortTransaction" if transient => vec!["TransientTransactionError"],
        "commitTransaction" | "abortTransaction" => Vec::new(),
        _ if transient || retryable_code => vec!["TransientTransactionError"],
        _ => Vec::new(),
    }
}

/// Adds the labels mongod gives this error of the command ([`error_labels`]), unless
/// it has labels already.
pub fn label_retryable(name: &str, body: &Document, error: Error) -> Error {
    if error.extra.contains_key("errorLabels") {
        return error;
    }
    let labels = error_labels(name, body, error.code);
    if labels.is_empty() {
        return error;
    }
    error.with_extra(doc! { "errorLabels": labels })
}

/// The labels mongod puts on the reply of a write whose write concern failed with
/// `code`: a retryable write's, or a transaction's commit or abort (whose write concern
/// it is), as [`error_labels`] gives them.
pub fn write_concern_error_labels(name: &str, body: &Document, code: i32) -> Vec<&'static str> {
    let statement_of_transaction = crate::transactions::in_transaction(body)
        && !matches!(name, "commitTransaction" | "abortTransaction");
    if statement_of_transaction {
        return Vec::new();
    }
    error_labels(name, body, ErrorCode(code))
}

/// Runs committed commands on this member.
pub struct ServerApplier {
    server: Weak<Server>,
}

impl ServerApplier {
    pub fn new(server: Weak<Server>) -> ServerApplier {
        ServerApplier { server }
    }
}

impl Applier for ServerApplier {
    fn apply(&self, index: u64, term: u64, command: &WriteCommand) -> Vec<u8> {
        let Some(server) = self.server.upgrade() else {
            return Vec::new();
        };
        let reply = match Document::from_reader(command.body.as_slice()) {
            Ok(body) => run_applied(&server, (index, term), command, &body),
            Err(e) => crate::commands::error_reply(&Error::internal(format!(
                "a replicated command that cannot be decoded: {e}"
            ))),
        };
        // The default concerns live in `config.settings`: once a write there is done,
        // the cached ones are stale.
        if command.db == "config" {
            server.rw_concern_defaults.invalidate();
        }
        reply.into_bytes()
    }

    fn reload(&self) {
        if let Some(server) = self.server.upgrade() {
            server.rw_concern_defaults.invalidate();
            if let Err(e) = server.catalog.reload() {
                tracing::error!("cannot read the catalog of the copy just loaded: {e}");
            }
        }
    }
}

fn run_applied(
    server: &Arc<Server>,
    (index, term): (u64, u64),
    command: &WriteCommand,
    body: &Document,
) -> RawDocumentBuf {
    let sequences: Vec<DocumentSequence> = command
        .sequences
        .iter()
        .map(|s| DocumentSequence {
            identifier: s.identifier.clone(),
            documents: s
                .documents
                .iter()
                .filter_map(|d| RawDocumentBuf::from_bytes(d.to_vec()).ok())
                .collect(),
        })
        .collect();
    let ctx = Ctx {
        server,
        connection: &server.internal_connection,
        db: &command.db,
        raw_sequences: &sequences,
        max_time_ms: None,
        operation: None,
    };
    APPLYING.with(|applying| applying.set(true));
    // Its effects are recorded in the oplog, with the session of a transaction's commit
    // (which its change events carry).
    let session = match (body.get_document("lsid"), body.get("txnNumber")) {
        (Ok(lsid), Some(number)) if body.contains_key("applyOps") => {
            basalt_value::as_i64(number).map(|n| (lsid.clone(), n))
        }
        _ => None,
    };
    let reply = crate::connection::run_guarded(|| {
        basalt_catalog::oplog::with_entry((index, term), command.wall_ms, session, || {
            basalt_value::clock::with_fixed(command.wall_ms, index, || dispatch(&ctx, body))
        })
    });
    APPLYING.with(|applying| applying.set(false));
    reply
}

/// The TTL monitor's pass on a member: only the primary expires documents, with a
/// `delete` per TTL index proposed to the log like any write, so every member deletes
/// the same documents (as MongoDB's TTL monitor runs on the primary and its deletes
/// replicate). Returns how many were deleted.
pub fn expire_documents(
    server: &Arc<Server>,
    set: &ReplicaSet,
    now: bson::DateTime,
) -> Result<u64> {
    if set.state() != MemberState::Primary {
        return Ok(0);
    }
    let mut deleted = 0;
    for db in server.catalog.database_names() {
        for collection in server.catalog.collections_of(&db) {
            let meta = collection.meta();
            for filter in meta
                .indexes
                .iter()
                .filter_map(|i| basalt_catalog::expired_filter(i, now))
            {
                let run = |body: Document| -> Result<u64> {
                    let ctx = Ctx {
                        server,
                        connection: &server.internal_connection,
                        db: &db,
                        raw_sequences: &[],
                        max_time_ms: None,
                        operation: None,
                    };
                    let reply = dispatch(&ctx, &body);
                    if reply.get_f64("ok").ok() != Some(1.0) {
                        let message = reply.get_str("errmsg").unwrap_or("no reply");
                        return Err(Error::internal(format!(
                            "expiring {db}.{}: {message}",
                            meta.name
                        )));
                    }
                    Ok(reply.get_i32("n").map_or(0, |n| n.max(0) as u64))
                };
                // Nothing expired, nothing proposed: the log only grows by real deletes.
                let any = run(doc! {
                    "count": meta.name.clone(), "query": filter.clone(), "limit": 1, "$db": db.clone(),
                })?;
                if any > 0 {
                    deleted += run(doc! {
                        "delete": meta.name.clone(),
                        "deletes": [{ "q": filter, "limit": 0 }],
                        "$db": db.clone(),
                    })?;
                }
            }
        }
    }
    Ok(deleted)
}

/// The addresses this member answers on, as a config names them (`host:port`).
pub fn my_hosts(server: &Server) -> Vec<String> {
    let port = server.options.port;
    let mut hosts = vec![format!("127.0.0.1:{port}"), format!("localhost:{port}")];
    for ip in &server.options.bind_ip {
        hosts.push(format!("{ip}:{port}"));
    }
    if let Ok(name) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
        hosts.push(format!("{}:{port}", name.trim()));
    }
    hosts.dedup();
    hosts
}

fn replica_set<'a>(ctx: &'a Ctx<'_>) -> Result<&'a Arc<ReplicaSet>> {
    ctx.server.replication().ok_or_else(|| {
        Error::new(
            ErrorCode::NO_REPLICATION_ENABLED,
            "This node was not started with replication enabled.",
        )
    })
}

fn seconds(body: &Document, field: &str, default: u64) -> Result<u64> {
    match body.get(field) {
        None => Ok(default),
        Some(value) => basalt_value::as_f64(value)
            .filter(|v| *v >= 0.0 && v.is_finite())
            .map(|v| v as u64)
            .ok_or_else(|| Error::bad_value(format!("{field} must be a non-negative number"))),
    }
}

pub fn repl_set_initiate(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let set = replica_set(ctx)?;
    let config = match body.get("replSetInitiate") {
        Some(Bson::Document(config)) => Some(config),
        _ => None,
    };
    set.initiate(config, &my_hosts(ctx.server))
}

pub fn repl_set_get_status(ctx: &Ctx<'_>, _body: &Document) -> Result<Document> {
    replica_set(ctx)?.status()
}

pub fn repl_set_get_config(ctx: &Ctx<'_>, _body: &Document) -> Result<Document> {
    replica_set(ctx)?.get_config()
}

pub fn repl_set_reconfig(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let config = body
        .get_document("replSetReconfig")
        .map_err(|_| Error::type_mismatch("replSetReconfig needs a config document"))?;
    replica_set(ctx)?.reconfig(config)
}

pub fn repl_set_step_down(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let secs = match body.get("replSetStepDown") {
        Some(value) if basalt_value::is_number(value) => seconds(body, "replSetStepDown", 60)?,
        _ => 60,
    };
    replica_set(ctx)?.step_down(secs)
}

pub fn repl_set_freeze(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let secs = seconds(body, "replSetFreeze", 0)?;
    replica_set(ctx)?.freeze(secs)
}

/// `replSetResizeOplog`: `size` in MB (at least 990, as mongod's). mongod's
/// `minRetentionHours` is refused rather than ignored: entries go by size only.
pub fn repl_set_resize_oplog(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    if let Some(hours) = body.get("minRetentionHours") {
        if basalt_value::as_f64(hours) != Some(0.0) {
            return Err(Error::new(
                ErrorCode::INVALID_OPTIONS,
                "minRetentionHours is not supported: the oplog is bounded by size only",
            ));
        }
    }
    let size = match body.get("size") {
        Some(size) if basalt_value::is_number(size) => basalt_value::as_f64(size).unwrap_or(0.0),
        Some(_) => return Err(Error::type_mismatch("size must be a number")),
        None => {
            return Err(Error::new(
                ErrorCode::INVALID_OPTIONS,
                "replSetResizeOplog needs a size or a minRetentionHours",
            ))
        }
    };
    replica_set(ctx)?.resize_oplog(size)
}

/// `replSetMaintenance: <bool>`.
pub fn repl_set_maintenance(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let enable = match body.get("replSetMaintenance") {
        Some(Bson::Boolean(enable)) => *enable,
        Some(value) if basalt_value::is_number(value) => basalt_value::as_f64(value) != Some(0.0),
        _ => return Err(Error::type_mismatch("replSetMaintenance must be a boolean")),
    };
    replica_set(ctx)?.maintenance(enable)
}

/// `replSetRaft`: another member's Raft message, or its request to join.
pub fn repl_set_raft(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    replica_set(ctx)?.handle_internal(body, ctx.raw_sequences)
}
