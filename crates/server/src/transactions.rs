//! Multi-document transactions on a replica set member: MongoDB's `startTransaction`,
//! `autocommit: false`, `commitTransaction` and `abortTransaction`, per logical session.
//!
//! A transaction runs on the primary inside a write scope (`basalt_storage::Buffered`):
//! its statements read one snapshot of the data, taken at its first statement, with its
//! own writes on top, and their writes stay in memory. Conflicts are found as MongoDB
//! finds them, at the write (first writer wins): a document, or a key of a unique index,
//! that another open transaction wrote, or a document that changed since the snapshot,
//! fails the statement with WriteConflict (label `TransientTransactionError`) and aborts
//! the transaction.
//!
//! Commit turns what the transaction changed into document operations by `_id`
//! (`applyOps`: deletes, replacements, inserts; each delete and replacement carries a hash
//! of the version the transaction read) and proposes them to the log as one entry, with
//! the session's `lsid` and `txnNumber`: every member applies it as one atomic batch,
//! or, when a document changed after all (a write outside any transaction came first),
//! not at all, and the commit fails with WriteConflict. The reply is kept in the
//! replicated session table, so a commit retried on a new primary learns the outcome.
//!
//! A commit larger than one entry should carry ([`CHUNK_BYTES`] of operations) goes as a
//! chain, as mongod splits a large transaction into several oplog entries: the first
//! chunks are staged as documents of `config.system.transactionChunks` (ordinary
//! replicated inserts, so a member that joins meanwhile copies them too), then the commit
//! entry names how many there are; each member applies the staged chunks and its own
//! operations in its one batch, and deletes the staged documents in the same batch. A
//! chain a failover cut short commits nothing; its staged documents expire through the
//! collection's TTL index. The whole transaction is bounded by
//! `transactionSizeLimitBytes` (TransactionTooLarge), since its writes are held in memory
//! until the commit.
//!
//! Collections and indexes a transaction creates (`create`, `createIndexes`, an insert
//! into a missing collection) are its own until it commits, as in MongoDB 4.4+
//! (`basalt_catalog::Uncommitted`): its statements see them, nobody else does, an abort
//! leaves no trace, and the commit's `applyOps` creates them first, in the same atomic
//! batch as the documents. Indexes go only on a collection the transaction created, while
//! it is empty (OperationNotSupportedInTransaction otherwise, as mongod).

use crate::commands::Ctx;
use basalt_catalog::{Collection, Uncommitted};
use basalt_error::{Error, ErrorCode, Result};
use basalt_repl::{MemberState, ReplicaSet};
use basalt_storage::{outside_write_scope, Buffered, Engine, Snapshot, Space, WriteBatch};
use basalt_storage::{WriteOp, WriteScope};
use bson::{doc, Bson, Document};
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// mongod's `transactionLifetimeLimitSeconds` default: an open transaction older than
/// this is aborted (when next touched, or when another needs what it holds).
pub const LIFETIME_LIMIT_SECS: u64 = 60;

/// The default of `transactionSizeLimitBytes`, the most a transaction may write (records
/// and index entries, keys and values). mongod has no default limit; Basalt holds a
/// transaction's writes in memory until the commit (and again while it is applied), so
/// one transaction must not take the server's memory.
pub const SIZE_LIMIT_BYTES: u64 = 256 << 20;

/// The most operations (encoded) one log entry of a commit carries; more go as a chain.
const CHUNK_BYTES: usize = 4 << 20;

/// Where the first chunks of a chained commit wait for its commit entry.
pub const CHUNKS_DB: &str = "config";
pub const CHUNKS_COLLECTION: &str = "system.transactionChunks";
/// How long a staged chunk whose commit never came is kept (its TTL index).
const CHUNK_EXPIRY_SECS: i32 = 3600;

/// How long a session with no transaction open is remembered after its last statement
/// (mongod's `logicalSessionTimeoutMinutes`).
const SESSION_IDLE_LIMIT: Duration = Duration::from_secs(30 * 60);

/// How often the sessions are swept (see `Transactions::sweep`).
const SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// The commands a transaction may run (MongoDB's list, less those Basalt lacks).
const ALLOWED: &[&str] = &[
    "find",
    "getMore",
    "killCursors",
    "aggregate",
    "distinct",
    "insert",
    "update",
    "delete",
    "bulkWrite",
    "findAndModify",
    "create",
    "createIndexes",
    "commitTransaction",
    "abortTransaction",
];

/// The open transactions of the member, by session, and the keys they wrote.
pub struct Transactions {
    sessions: Mutex<HashMap<Vec<u8>, Arc<Mutex<Session>>>>,
    /// A record key (`r` + key) or a unique index key without its record id (`i` + key),
    /// and the open transaction that wrote it first.
    locks: Mutex<HashMap<Vec<u8>, Weak<Transaction>>>,
    /// When the sessions were last swept for expired transactions and idle sessions.
    swept: Mutex<Instant>,
}

impl Default for Transactions {
    fn default() -> Transactions {
        Transactions {
            sessions: Mutex::default(),
            locks: Mutex::default(),
            swept: Mutex::new(Instant::now()),
        }
    }
}

/// A logical session's last transaction.
struct Session {
    txn_number: i64,
    state: State,
    last_used: Instant,
}

#[derive(Clone)]
enum State {
    Active(Arc<Transaction>),
    /// Committed, with the commit's reply (given again to a retried commit).
    Committed(Document),
    /// Aborted, or a commit whose outcome this member did not learn (it stepped down
    /// meanwhile): a retried commit finds it in the replicated session table.
    Ended,
}

pub struct Transaction {
    txn_number: i64,
    writes: Buffered,
    started: Instant,
    /// When it started, by the clock, for `$currentOp`.
    started_at: bson::DateTime,
    /// Its first statement's read concern, and the user who started it.
    read_concern: Option<Document>,
    owner: Option<crate::security::UserName>,
    /// `transactionLifetimeLimitSeconds` when it started.
    lifetime: Duration,
    /// `transactionSizeLimitBytes` when it started.
    size_limit: u64,
    /// The unique indexes when it started: their keys are locked as records are.
    unique_indexes: HashSet<u64>,
    engine: Arc<dyn Engine>,
    /// The collections it created.
    uncommitted: Arc<Uncommitted>,
    /// The keys it locked, released when it ends.
    locked: Mutex<Vec<Vec<u8>>>,
    ended: AtomicBool,
    /// The error a write of the current statement met (a conflict, the size limit):
    /// the statement's error, whatever its handler made of it (a write error entry).
    failure: Mutex<Option<Error>>,
}

impl Transaction {
    fn is_over(&self) -> bool {
        self.ended.load(Ordering::SeqCst) || self.started.elapsed() > self.lifetime
    }
}

/// An open transaction between its statements (see [`Transactions::open`]).
pub struct OpenTransaction {
    pub lsid: Document,
    pub owner: Option<crate::security::UserName>,
    /// `$currentOp`'s `transaction` figures.
    pub transaction: Document,
}

/// What to do with a command of a transaction.
pub enum Statement {
    /// Its whole reply (commit, abort).
    Done(Document),
    /// Run it inside the transaction's scope, then [`Scope::finish`].
    Run(Arc<Scope>),
}

/// The write scope of one transaction's statement.
pub struct Scope {
    transaction: Arc<Transaction>,
    table: Arc<Transactions>,
}

fn write_conflict() -> Error {
    Error::new(
        ErrorCode::WRITE_CONFLICT,
        "Write conflict during plan execution and yielding is disabled. :: Please retry your \
         operation or multi-document transaction.",
    )
}

/// Adds the label MongoDB gives a transaction's errors that a retry of the whole
/// transaction may cure.
pub fn transient(error: Error) -> Error {
    error.with_extra(doc! { "errorLabels": ["TransientTransactionError"] })
}

fn no_such_transaction(message: String) -> Error {
    transient(Error::new(ErrorCode::NO_SUCH_TRANSACTION, message))
}

impl WriteScope for Scope {
    fn snapshot(&self) -> Box<dyn Snapshot> {
        self.transaction.writes.snapshot()
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        let txn = &self.transaction;
        let pending = txn.writes.pending();
        // What is stored now, read once per batch and only for a record the snapshot
        // has (a new record's id is the transaction's alone).
        let mut stored: Option<Box<dyn Snapshot>> = None;
        for op in &batch.ops {
            let (space, key) = match op {
                WriteOp::Put(space, key, _) | WriteOp::Delete(space, key) => (*space, key),
            };
            let lock = match space {
                // A record written before in this transaction is locked already, or new.
                Space::Records if pending.get(space, key).is_some() => continue,
                Space::Records => {
                    let Some(read) = txn.writes.base().get(space, key)? else {
                        continue;
                    };
                    let now =
                        stored.get_or_insert_with(|| outside_write_scope(|| txn.engine.snapshot()));
                    if now.get(space, key)?.as_ref() != Some(&read) {
                        return Err(self.refuse(transient(write_conflict())));
                    }
                    [b"r".as_slice(), key].concat()
                }
                Space::Indexes if key.len() >= 16 && self.unique_index(key) => {
                    [b"i".as_slice(), &key[..key.len() - 8]].concat()
                }
                _ => continue,
            };
            if !self.table.lock(txn, lock) {
                return Err(self.refuse(transient(write_conflict())));
            }
        }
        txn.writes.write(batch)?;
        if txn.writes.pending().bytes() as u64 > txn.size_limit {
            return Err(self.refuse(Error::new(
                ErrorCode::TRANSACTION_TOO_LARGE,
                format!(
                    "Total size of all transaction operations must be less than \
                     transactionSizeLimitBytes ({} bytes)",
                    txn.size_limit
                ),
            )));
        }
        Ok(())
    }

    fn provisional(&self) -> bool {
        true
    }
}

impl Scope {
    /// The catalog changes of the transaction, which its statements see.
    pub fn uncommitted(&self) -> Arc<Uncommitted> {
        self.transaction.uncommitted.clone()
    }

    fn unique_index(&self, key: &[u8]) -> bool {
        let id = u64::from_be_bytes(key[..8].try_into().unwrap_or_default());
        self.transaction.unique_indexes.contains(&id)
    }

    /// Ends a statement: one that failed (or has write errors) aborts the transaction,
    /// as in MongoDB; the error a write met becomes the statement's error.
    pub fn finish(&self, failed: bool) -> Option<Error> {
        let failure = self.transaction.failure.lock().take();
        if failed || failure.is_some() {
            self.table.end(&self.transaction);
        }
        failure
    }

    /// Refuses a write with `error`, which the statement then fails with.
    fn refuse(&self, error: Error) -> Error {
        *self.transaction.failure.lock() = Some(error.clone());
        error
    }
}

impl Transactions {
    fn session(&self, lsid: &[u8]) -> Arc<Mutex<Session>> {
        let mut sessions = self.sessions.lock();
        let mut swept = self.swept.lock();
        if swept.elapsed() >= SWEEP_INTERVAL {
            *swept = Instant::now();
            self.sweep(&mut sessions);
        }
        sessions
            .entry(lsid.to_vec())
            .or_insert_with(|| {
                Arc::new(Mutex::new(Session {
                    txn_number: -1,
                    state: State::Ended,
                    last_used: Instant::now(),
                }))
            })
            .clone()
    }

    /// Aborts the transactions past their lifetime (freeing what they wrote and the
    /// keys they hold) and forgets the sessions idle for longer than mongod keeps them.
    /// Sessions busy with a statement are left for the next sweep.
    fn sweep(&self, sessions: &mut HashMap<Vec<u8>, Arc<Mutex<Session>>>) {
        sessions.retain(|_, session| {
            let Some(mut session) = session.try_lock() else {
                return true;
            };
            if let State::Active(txn) = &session.state {
                if !txn.is_over() {
                    return true;
                }
                let txn = txn.clone();
                self.end(&txn);
                session.state = State::Ended;
            }
            session.last_used.elapsed() < SESSION_IDLE_LIMIT
        });
    }

    /// The open transactions, as `$currentOp` lists them between their statements
    /// (`idleSessions`): each one's session, user and `transaction` figures.
    pub fn open(&self) -> Vec<OpenTransaction> {
        let sessions: Vec<(Vec<u8>, Arc<Mutex<Session>>)> = self
            .sessions
            .lock()
            .iter()
            .map(|(lsid, session)| (lsid.clone(), session.clone()))
            .collect();
        let mut open = Vec::new();
        for (lsid, session) in sessions {
            // A session locked now is running a statement, which `$currentOp` lists as
            // an operation.
            let Some(session) = session.try_lock() else {
                continue;
            };
            let State::Active(txn) = &session.state else {
                continue;
            };
            let (Ok(lsid), false) = (Document::from_reader(lsid.as_slice()), txn.is_over()) else {
                continue;
            };
            let micros = |d: Duration| i64::try_from(d.as_micros()).unwrap_or(i64::MAX);
            let open_for = txn.started.elapsed();
            let mut parameters = doc! {"txnNumber": txn.txn_number, "autocommit": false};
            if let Some(concern) = &txn.read_concern {
                parameters.insert("readConcern", concern.clone());
            }
            let expiry = txn.started_at.timestamp_millis()
                + i64::try_from(txn.lifetime.as_millis()).unwrap_or(i64::MAX / 2);
            let iso = |at: bson::DateTime| at.try_to_rfc3339_string().unwrap_or_default();
            open.push(OpenTransaction {
                lsid,
                owner: txn.owner.clone(),
                transaction: doc! {
                    "parameters": parameters,
                    "startWallClockTime": iso(txn.started_at),
                    "timeOpenMicros": micros(open_for),
                    // Since its last statement began (its first began before it opened).
                    "timeInactiveMicros": micros(session.last_used.elapsed().min(open_for)),
                    "expiryTime": iso(bson::DateTime::from_millis(expiry)),
                },
            });
        }
        open
    }

    /// Takes `key` for `txn`; false when another open transaction holds it.
    fn lock(&self, txn: &Arc<Transaction>, key: Vec<u8>) -> bool {
        let mut locks = self.locks.lock();
        match locks.get(&key).and_then(Weak::upgrade) {
            Some(holder) if Arc::ptr_eq(&holder, txn) => true,
            Some(holder) if !holder.is_over() => false,
            _ => {
                txn.locked.lock().push(key.clone());
                locks.insert(key, Arc::downgrade(txn));
                true
            }
        }
    }

    /// Ends a transaction: its keys are free again.
    fn end(&self, txn: &Arc<Transaction>) {
        txn.ended.store(true, Ordering::SeqCst);
        let mut locks = self.locks.lock();
        for key in txn.locked.lock().drain(..) {
            if locks
                .get(&key)
                .is_some_and(|holder| holder.as_ptr() == Arc::as_ptr(txn))
            {
                locks.remove(&key);
            }
        }
    }

    /// Forgets the sessions named (endSessions, killSessions), aborting their open
    /// transactions.
    pub fn end_sessions(&self, lsids: &[Vec<u8>]) {
        let removed: Vec<_> = {
            let mut sessions = self.sessions.lock();
            lsids
                .iter()
                .filter_map(|lsid| sessions.remove(lsid))
                .collect()
        };
        for session in removed {
            if let State::Active(txn) = &session.lock().state {
                self.end(txn);
            }
        }
    }

    /// Forgets every session (killAllSessions).
    pub fn end_all_sessions(&self) {
        let lsids: Vec<Vec<u8>> = self.sessions.lock().keys().cloned().collect();
        self.end_sessions(&lsids);
    }
}

/// Whether a command belongs to a transaction: it says `autocommit` (drivers send
/// `autocommit: false` with every statement of one, and only then).
pub fn in_transaction(body: &Document) -> bool {
    body.contains_key("autocommit")
}

/// Refuses a transaction's statement on a server that is no replica set member, as
/// mongod does.
pub fn refuse_on_standalone(body: &Document) -> Result<()> {
    if in_transaction(body) || body.contains_key("startTransaction") {
        return Err(Error::new(
            ErrorCode::ILLEGAL_OPERATION,
            "Transaction numbers are only allowed on a replica set member or mongos",
        ));
    }
    Ok(())
}

/// The session and number a transaction's statement names.
fn identity(body: &Document) -> Result<(Vec<u8>, i64)> {
    match body.get("autocommit") {
        Some(Bson::Boolean(false)) => {}
        Some(Bson::Boolean(true)) => {
            return Err(Error::new(
                ErrorCode::INVALID_OPTIONS,
                "autocommit:true is not supported",
            ))
        }
        _ => {
            return Err(Error::type_mismatch(
                "BSON field 'autocommit' is the wrong type, expected type 'bool'",
            ))
        }
    }
    if matches!(body.get("startTransaction"), Some(Bson::Boolean(false))) {
        return Err(Error::new(
            ErrorCode::INVALID_OPTIONS,
            "Specifying startTransaction=false is not allowed.",
        ));
    }
    let lsid = body
        .get_document("lsid")
        .map_err(|_| {
            Error::new(
                ErrorCode::INVALID_OPTIONS,
                "Transaction numbers are only allowed on sessions",
            )
        })?
        .to_vec()?;
    let txn_number = match body.get("txnNumber") {
        Some(Bson::Int64(n)) => *n,
        Some(Bson::Int32(n)) => i64::from(*n),
        _ => {
            return Err(Error::new(
                ErrorCode::INVALID_OPTIONS,
                "'autocommit' field requires a transaction number to also be specified",
            ))
        }
    };
    Ok((lsid, txn_number))
}

/// Decides what a transaction's statement does (see [`Statement`]): starts the
/// transaction, commits or aborts it, or hands back the scope to run the statement in.
pub fn statement(
    ctx: &Ctx<'_>,
    set: &ReplicaSet,
    name: &str,
    body: &Document,
) -> Result<Statement> {
    let (lsid, txn_number) = identity(body)?;
    let table = &ctx.server.transactions;
    let session = table.session(&lsid);
    let mut session = session.lock();
    session.last_used = Instant::now();
    if txn_number < session.txn_number {
        return Err(Error::new(
            ErrorCode::TRANSACTION_TOO_OLD,
            format!(
                "Cannot start transaction {txn_number} on session because a newer transaction \
                 {} has already started.",
                session.txn_number
            ),
        ));
    }
    if body.get_bool("startTransaction").unwrap_or(false) {
        if txn_number == session.txn_number {
            return Err(Error::new(
                ErrorCode::CONFLICTING_OPERATION_IN_PROGRESS,
                format!("Transaction {txn_number} has already been started on this session"),
            ));
        }
        if let State::Active(older) = &session.state {
            table.end(older);
        }
        let txn = begin(ctx, set, body, txn_number)?;
        session.txn_number = txn_number;
        session.state = State::Active(txn);
    }
    let state = if txn_number == session.txn_number {
        session.state.clone()
    } else {
        State::Ended
    };
    let txn = match state {
        State::Active(txn) if txn.started.elapsed() > txn.lifetime => {
            table.end(&txn);
            session.state = State::Ended;
            return Err(no_such_transaction(format!(
                "Transaction {txn_number} has been aborted because it exceeded \
                 transactionLifetimeLimitSeconds"
            )));
        }
        State::Active(txn) if txn.ended.load(Ordering::SeqCst) => {
            session.state = State::Ended;
            return Err(no_such_transaction(format!(
                "Transaction {txn_number} has been aborted."
            )));
        }
        State::Active(txn) => txn,
        // A retried commit gets the first one's answer; anything else is too late.
        State::Committed(reply) if name == "commitTransaction" => {
            return Ok(Statement::Done(reply));
        }
        State::Committed(_) => {
            return Err(Error::new(
                ErrorCode::TRANSACTION_COMMITTED,
                format!("Transaction {txn_number} has been committed."),
            ));
        }
        State::Ended => {
            if name == "commitTransaction" {
                if let Some(reply) = set.session_reply(&lsid, txn_number)? {
                    let reply = Document::from_reader(reply.as_slice())?;
                    return committed_reply(reply).map(Statement::Done);
                }
            }
            return Err(no_such_transaction(format!(
                "Given transaction number {txn_number} does not match any in-progress \
                 transactions."
            )));
        }
    };
    if !body.get_bool("startTransaction").unwrap_or(false) && body.contains_key("readConcern") {
        return Err(Error::new(
            ErrorCode::INVALID_OPTIONS,
            "Only the first command in a transaction may specify a readConcern",
        ));
    }
    match name {
        "commitTransaction" => {
            let outcome = commit(ctx, set, &lsid, &txn, body);
            table.end(&txn);
            session.state = match &outcome {
                Ok(reply) => State::Committed(reply.clone()),
                Err(_) => State::Ended,
            };
            return outcome.map(Statement::Done);
        }
        "abortTransaction" => {
            table.end(&txn);
            session.state = State::Ended;
            return Ok(Statement::Done(Document::new()));
        }
        _ => {}
    }
    if body.contains_key("writeConcern") {
        return Err(Error::new(
            ErrorCode::INVALID_OPTIONS,
            "Cannot set write concern after starting a transaction.",
        ));
    }
    if !ALLOWED.contains(&name) {
        table.end(&txn);
        session.state = State::Ended;
        return Err(Error::new(
            ErrorCode::OPERATION_NOT_SUPPORTED_IN_TRANSACTION,
            format!("Cannot run '{name}' in a multi-document transaction."),
        ));
    }
    check_primary(set)?;
    drop(session);
    Ok(Statement::Run(Arc::new(Scope {
        transaction: txn,
        table: table.clone(),
    })))
}

/// Every collection of every database.
fn every_collection<'a>(ctx: &'a Ctx<'_>) -> impl Iterator<Item = Arc<Collection>> + 'a {
    let catalog = &ctx.server.catalog;
    catalog
        .database_names()
        .into_iter()
        .flat_map(|db| catalog.collections_of(&db))
}

/// NotWritablePrimary, which a retry of the whole transaction may cure, unless this
/// member is primary.
fn check_primary(set: &ReplicaSet) -> Result<()> {
    if set.state() == MemberState::Primary {
        return Ok(());
    }
    Err(transient(Error::new(
        ErrorCode::NOT_WRITABLE_PRIMARY,
        "not primary",
    )))
}

/// A transaction's first statement: checks its read concern, waits for the cluster time
/// it names, and takes the snapshot.
fn begin(
    ctx: &Ctx<'_>,
    set: &ReplicaSet,
    body: &Document,
    txn_number: i64,
) -> Result<Arc<Transaction>> {
    check_primary(set)?;
    if let Ok(concern) = body.get_document("readConcern") {
        match concern.get("level") {
            None | Some(Bson::String(_)) => {}
            Some(_) => return Err(Error::type_mismatch("readConcern.level must be a string")),
        }
        let level = concern.get_str("level").unwrap_or("local");
        if !["local", "majority", "snapshot"].contains(&level) {
            return Err(Error::new(
                ErrorCode::INVALID_OPTIONS,
                format!("The readConcern level must be either 'local' (default), 'majority' or 'snapshot' in order to run in a transaction, not '{level}'"),
            ));
        }
    }
    crate::replication::wait_for_cluster_time(ctx, set, body)?;
    let engine = ctx.server.catalog.engine().clone();
    let unique_indexes = every_collection(ctx)
        .flat_map(|collection| {
            let meta = collection.meta();
            meta.indexes
                .iter()
                .filter(|index| index.unique)
                .map(|index| index.id)
                .collect::<Vec<_>>()
        })
        .collect();
    Ok(Arc::new(Transaction {
        txn_number,
        writes: Buffered::new(Arc::from(engine.snapshot()), true),
        started: Instant::now(),
        started_at: bson::DateTime::now(),
        read_concern: body.get_document("readConcern").ok().cloned(),
        owner: crate::security::cursor_owner(ctx),
        lifetime: Duration::from_secs(ctx.server.options.transaction_lifetime_limit_secs),
        size_limit: ctx.server.options.transaction_size_limit_bytes,
        unique_indexes,
        engine,
        uncommitted: Arc::default(),
        locked: Mutex::default(),
        ended: AtomicBool::new(false),
        failure: Mutex::default(),
    }))
}

/// The reply of a commit as the log gave it: without `ok`, or its error.
fn committed_reply(mut reply: Document) -> Result<Document> {
    if reply.get("ok").and_then(basalt_value::as_f64) == Some(1.0) {
        reply.remove("ok");
        reply.remove("applied");
        reply.remove("results");
        return Ok(reply);
    }
    let code = reply.get_i32("code").unwrap_or(ErrorCode::INTERNAL_ERROR.0);
    let message = reply
        .get_str("errmsg")
        .unwrap_or("commit failed")
        .to_string();
    // A document inserted after the snapshot (the `_id` the transaction inserts), or a
    // collection the transaction creates, is a write conflict, as a changed document is.
    let conflicts = [
        ErrorCode::WRITE_CONFLICT,
        ErrorCode::DUPLICATE_KEY,
        ErrorCode::NAMESPACE_EXISTS,
    ];
    if conflicts.contains(&ErrorCode(code)) {
        return Err(transient(Error::new(ErrorCode::WRITE_CONFLICT, message)));
    }
    Err(Error::new(ErrorCode(code), message))
}

/// Commits: proposes the transaction's changes as one `applyOps` entry.
fn commit(
    ctx: &Ctx<'_>,
    set: &ReplicaSet,
    lsid: &[u8],
    txn: &Transaction,
    body: &Document,
) -> Result<Document> {
    let operations = changes(ctx, txn)?;
    if operations.is_empty() {
        return Ok(Document::new());
    }
    let lsid = Document::from_reader(lsid)?;
    let mut chunks = chunks(operations)?;
    let last = chunks.pop().unwrap_or_default();
    let unknown =
        |e: Error| e.with_extra(doc! { "errorLabels": ["UnknownTransactionCommitResult"] });
    let mut entry = doc! {
        "applyOps": last,
        "lsid": &lsid,
        "txnNumber": txn.txn_number,
        "$db": "admin",
    };
    if !chunks.is_empty() {
        entry.insert("stagedChunks", chunks.len() as i32);
        stage(ctx.server, &lsid, txn.txn_number, chunks).map_err(unknown)?;
    }
    if let Ok(concern) = body.get_document("writeConcern") {
        entry.insert("writeConcern", concern.clone());
    }
    let internal = Ctx {
        server: ctx.server,
        connection: &ctx.server.internal_connection,
        db: "admin",
        raw_sequences: &[],
        max_time_ms: None,
        operation: None,
    };
    let reply = crate::replication::propose(&internal, set, "applyOps", &entry).map_err(unknown)?;
    committed_reply(Document::try_from(reply.as_ref())?)
}

/// The operations in runs of at most [`CHUNK_BYTES`] (a larger operation alone).
fn chunks(operations: Vec<Bson>) -> Result<Vec<Vec<Bson>>> {
    let mut chunks = vec![Vec::new()];
    let mut bytes = 0;
    for operation in operations {
        let size = match &operation {
            Bson::Document(op) => op.to_vec()?.len(),
            _ => 0,
        };
        if bytes + size > CHUNK_BYTES && bytes > 0 {
            chunks.push(Vec::new());
            bytes = 0;
        }
        bytes += size;
        if let Some(chunk) = chunks.last_mut() {
            chunk.push(operation);
        }
    }
    Ok(chunks)
}

/// The `_id` of a transaction's staged chunk.
pub fn chunk_id(lsid: &Document, txn_number: i64, seq: i32) -> Document {
    doc! { "lsid": lsid.clone(), "txnNumber": txn_number, "seq": seq }
}

/// Stages the first chunks of a chained commit (see the module's note), each through
/// the log as an insert into [`CHUNKS_COLLECTION`].
fn stage(
    server: &Arc<crate::Server>,
    lsid: &Document,
    txn_number: i64,
    chunks: Vec<Vec<Bson>>,
) -> Result<()> {
    let index = doc! {
        "key": { "stagedAt": 1 },
        "name": "stagedAt_1",
        "expireAfterSeconds": CHUNK_EXPIRY_SECS,
    };
    crate::commands::run_internal(
        server,
        CHUNKS_DB,
        doc! { "createIndexes": CHUNKS_COLLECTION, "indexes": [index] },
    )?;
    for (seq, operations) in chunks.into_iter().enumerate() {
        let staged = doc! {
            "_id": chunk_id(lsid, txn_number, seq as i32),
            "applyOps": operations,
            "stagedAt": bson::DateTime::now(),
        };
        crate::commands::run_internal(
            server,
            CHUNKS_DB,
            doc! { "insert": CHUNKS_COLLECTION, "documents": [staged] },
        )?;
    }
    Ok(())
}

/// What the transaction changed, as `applyOps` operations: the collections it created
/// and their indexes, then deletes, then replacements, then inserts (so a document
/// deleted and inserted again under its `_id`, or a unique value moved from one document
/// to another, applies in an order that holds).
fn changes(ctx: &Ctx<'_>, txn: &Transaction) -> Result<Vec<Bson>> {
    let created = txn.uncommitted.collections();
    let namespaces: HashMap<u64, String> = every_collection(ctx)
        .chain(created.iter().cloned())
        .map(|collection| {
            let meta = collection.meta();
            (meta.id, meta.namespace())
        })
        .collect();
    let mut catalog_changes = Vec::new();
    for collection in &created {
        let meta = collection.meta();
        let ns = format!("{}.$cmd", meta.db);
        let mut create = doc! { "create": &meta.name };
        create.extend(meta.options.clone());
        catalog_changes.push(Bson::Document(doc! { "op": "c", "ns": &ns, "o": create }));
        for index in meta.indexes.iter().filter(|index| !index.is_id_index()) {
            let mut spec = doc! { "createIndexes": &meta.name };
            spec.extend(index.to_list_document());
            catalog_changes.push(Bson::Document(doc! { "op": "c", "ns": &ns, "o": spec }));
        }
    }
    let pending = txn.writes.pending();
    let base = txn.writes.base();
    let (mut deletes, mut updates, mut inserts) = (Vec::new(), Vec::new(), Vec::new());
    for (key, after) in pending.changes(Space::Records) {
        let collection_id = u64::from_be_bytes(key[..8].try_into().unwrap_or_default());
        let Some(ns) = namespaces.get(&collection_id) else {
            // Dropped while the transaction ran.
            return Err(transient(write_conflict()));
        };
        let before = base.get(Space::Records, key)?;
        let decode = |bytes: &[u8]| Document::from_reader(bytes);
        match (before, after) {
            (None, None) => {}
            (None, Some(after)) => inserts.push(Bson::Document(
                doc! { "op": "i", "ns": ns, "o": decode(after)? },
            )),
            (Some(before), after) => {
                let id = bson::RawDocument::from_bytes(&before)
                    .ok()
                    .and_then(|raw| raw.get("_id").ok().flatten())
                    .and_then(|id| Bson::try_from(id).ok())
                    .unwrap_or(Bson::Null);
                let hash = pre_image_hash(&before);
                match after {
                    None => deletes.push(Bson::Document(doc! {
                        "op": "d", "ns": ns, "o": { "_id": id }, "preImageHash": hash,
                    })),
                    Some(after) => updates.push(Bson::Document(doc! {
                        "op": "u", "ns": ns, "o": decode(after)?, "o2": { "_id": id },
                        "preImageHash": hash,
                    })),
                }
            }
        }
    }
    catalog_changes.extend(deletes);
    catalog_changes.extend(updates);
    catalog_changes.extend(inserts);
    Ok(catalog_changes)
}

/// The hash by which `applyOps` checks that a document is still the version a
/// transaction read (xxh3, the same on every member and build).
pub fn pre_image_hash(document: &[u8]) -> i64 {
    xxhash_rust::xxh3::xxh3_64(document) as i64
}

/// The `lsid`s a command names (`endSessions: [lsid, ...]`), as stored bytes.
pub fn named_sessions(body: &Document, field: &str) -> Vec<Vec<u8>> {
    body.get_array(field)
        .map(|lsids| {
            lsids
                .iter()
                .filter_map(Bson::as_document)
                .filter_map(|lsid| lsid.to_vec().ok())
                .collect()
        })
        .unwrap_or_default()
}
