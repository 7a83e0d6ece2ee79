//! The operations in progress, as mongod's CurOp keeps them: every command a client runs
//! is registered here while it runs, under an operation id, so that `currentOp` and
//! `$currentOp` list it and `killOp` stops it.
//!
//! What an operation shares with the scans, stages and scripts that run for it is its
//! [`Progress`], carried by its time limit ([`crate::exec::Deadline`]), which all of
//! them already check: the kill flag (a killed operation fails at its next check with
//! Interrupted, as mongod's) and the keys and documents examined, which the profiler
//! and the slow-operation log report.

use crate::connection::ConnectionInfo;
use crate::exec::Deadline;
use crate::security::UserName;
use basalt_error::{Error, ErrorCode, Result};
use bson::{doc, Bson, Document};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// What everything running for one operation shares (see the module's comment).
#[derive(Debug, Default)]
pub struct Progress {
    /// Set by `killOp`; a flag of its own so that server-side JavaScript can watch it.
    killed: Arc<AtomicBool>,
    keys_examined: AtomicU64,
    docs_examined: AtomicU64,
    /// How its first scan reads (mongod's `planSummary`: `COLLSCAN`, `IXSCAN { a: 1 }`).
    plan_summary: std::sync::OnceLock<String>,
}

/// Keys and documents examined.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Examined {
    pub keys: u64,
    pub docs: u64,
}

impl Progress {
    pub fn kill(&self) {
        self.killed.store(true, Ordering::Relaxed);
    }

    pub fn killed(&self) -> bool {
        self.killed.load(Ordering::Relaxed)
    }

    /// The flag server-side JavaScript's interrupt handler watches.
    pub fn kill_flag(&self) -> Arc<AtomicBool> {
        self.killed.clone()
    }

    /// Fails with mongod's error for a killed operation.
    pub fn check(&self) -> Result<()> {
        if self.killed() {
            return Err(Error::new(
                ErrorCode::INTERRUPTED,
                "operation was interrupted",
            ));
        }
        Ok(())
    }

    pub fn add_examined(&self, keys: u64, docs: u64) {
        if keys > 0 {
            self.keys_examined.fetch_add(keys, Ordering::Relaxed);
        }
        if docs > 0 {
            self.docs_examined.fetch_add(docs, Ordering::Relaxed);
        }
    }

    /// Notes how the operation reads, if no scan did before.
    pub fn note_plan(&self, summary: impl FnOnce() -> String) {
        if self.plan_summary.get().is_none() {
            let _ = self.plan_summary.set(summary());
        }
    }

    pub fn examined(&self) -> Examined {
        Examined {
            keys: self.keys_examined.load(Ordering::Relaxed),
            docs: self.docs_examined.load(Ordering::Relaxed),
        }
    }
}

/// One command while it runs.
pub struct Operation {
    pub opid: i32,
    pub connection: Arc<ConnectionInfo>,
    /// Its user, under access control.
    pub owner: Option<UserName>,
    /// mongod's `op`: query, getmore, insert, update, remove or command.
    pub kind: &'static str,
    pub ns: String,
    /// The command as the client sent it, less the documents of a write batch.
    pub command: Document,
    pub started: Instant,
    pub started_at: bson::DateTime,
    /// For a getMore: its cursor, as `currentOp` reports it.
    cursor: Mutex<Option<Document>>,
    /// The limit and progress the operation runs under: the command's own, or a
    /// cursor's for a getMore ([`Operation::adopt`]), with what had been examined when
    /// it was adopted.
    deadline: Mutex<(Deadline, Examined)>,
}

impl Operation {
    /// The time limit (and progress) everything run for the operation shares.
    pub fn deadline(&self) -> Deadline {
        self.deadline.lock().0.clone()
    }

    /// Runs the rest of the operation under `deadline`: a getMore continues its
    /// cursor's, which the cursor's scans hold.
    pub fn adopt(&self, deadline: &Deadline) {
        let examined = deadline.progress().examined();
        *self.deadline.lock() = (deadline.clone(), examined);
    }

    /// What this operation examined (since it adopted a cursor's limit, for a getMore).
    pub fn examined(&self) -> Examined {
        let guard = self.deadline.lock();
        let now = guard.0.progress().examined();
        Examined {
            keys: now.keys.saturating_sub(guard.1.keys),
            docs: now.docs.saturating_sub(guard.1.docs),
        }
    }

    pub fn kill(&self) {
        self.deadline.lock().0.progress().kill();
    }

    /// Notes the cursor a getMore continues.
    pub fn set_cursor(&self, cursor: Document) {
        *self.cursor.lock() = Some(cursor);
    }

    /// How the operation read (its first scan's plan), if it scanned.
    pub fn plan_summary(&self) -> Option<String> {
        self.deadline
            .lock()
            .0
            .progress()
            .plan_summary
            .get()
            .cloned()
    }

    fn killed(&self) -> bool {
        self.deadline.lock().0.progress().killed()
    }

    /// The operation as `currentOp` reports it (mongod's field names and order); with
    /// `truncate`, a command past 1 KB as a string, as mongod's `truncateOps`.
    pub fn to_document(&self, host: &str, truncate: bool) -> Document {
        let running = self.started.elapsed();
        let connection = &self.connection;
        let mut out = doc! {
            "type": "op",
            "host": host,
            "desc": format!("conn{}", connection.id),
            "connectionId": connection.id,
            "client": connection.peer.to_string(),
        };
        if let Some(name) = connection.app_name() {
            out.insert("appName", name);
        }
        if let Some(user) = &self.owner {
            out.insert(
                "effectiveUsers",
                vec![Bson::Document(doc! { "user": &user.user, "db": &user.db })],
            );
        }
        out.insert("active", true);
        out.insert(
            "currentOpTime",
            bson::DateTime::now()
                .try_to_rfc3339_string()
                .unwrap_or_default(),
        );
        out.insert("threaded", true);
        out.insert("opid", self.opid);
        if let Some(lsid) = self.command.get("lsid") {
            out.insert("lsid", lsid.clone());
        }
        out.insert("secs_running", running.as_secs() as i64);
        out.insert(
            "microsecs_running",
            i64::try_from(running.as_micros()).unwrap_or(i64::MAX),
        );
        out.insert("op", self.kind);
        out.insert("ns", &self.ns);
        out.insert("redacted", false);
        out.insert("command", shown_command(&self.command, truncate));
        if let Some(mut cursor) = self.cursor.lock().clone() {
            cursor.insert("operationUsingCursorId", self.opid);
            out.insert("cursor", cursor);
        }
        let examined = self.examined();
        out.insert("keysExamined", examined.keys as i64);
        out.insert("docsExamined", examined.docs as i64);
        if self.killed() {
            out.insert("killPending", true);
        }
        out.insert("numYields", 0);
        out.insert("locks", Document::new());
        out.insert("waitingForLock", false);
        out.insert("lockStats", Document::new());
        out
    }
}

/// A command as `currentOp` shows it: past [`TRUNCATED_COMMAND_BYTES`] with
/// `truncate`, its text cut short under `$truncated`, its comment kept beside.
fn shown_command(command: &Document, truncate: bool) -> Document {
    if !truncate {
        return command.clone();
    }
    let size = crate::cursors::encode(command).map_or(0, |raw| raw.as_bytes().len());
    if size <= TRUNCATED_COMMAND_BYTES {
        return command.clone();
    }
    let text = command.to_string();
    let cut: String = text.chars().take(TRUNCATED_COMMAND_BYTES).collect();
    let mut shown = doc! { "$truncated": format!("{cut} ...") };
    if let Some(comment) = command.get("comment") {
        shown.insert("comment", comment.clone());
    }
    shown
}

/// mongod's size past which `truncateOps` cuts a command short.
const TRUNCATED_COMMAND_BYTES: usize = 1024;

/// The operations running now, and the connections open.
#[derive(Default)]
pub struct Operations {
    next_opid: AtomicI32,
    running: Mutex<BTreeMap<i32, Arc<Operation>>>,
    connections: Mutex<BTreeMap<i64, Arc<ConnectionInfo>>>,
}

/// Keeps a connection listed while it lives.
pub struct Listed<'a> {
    operations: &'a Operations,
    id: i64,
}

impl Drop for Listed<'_> {
    fn drop(&mut self) {
        self.operations.connections.lock().remove(&self.id);
    }
}

/// Keeps an operation registered while it lives.
pub struct Registered<'a> {
    operations: &'a Operations,
    pub operation: Arc<Operation>,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.operations.running.lock().remove(&self.operation.opid);
    }
}

/// The fields of a write command that hold its batch: left out of the command an
/// operation shows, as they can be megabytes.
const BATCH_FIELDS: [&str; 3] = ["documents", "updates", "deletes"];

impl Operations {
    /// Registers the command `name` (its `body`) on `ns`, run under `deadline`.
    pub fn begin(
        &self,
        connection: &Arc<ConnectionInfo>,
        owner: Option<UserName>,
        name: &str,
        ns: String,
        body: &Document,
        deadline: Deadline,
    ) -> Registered<'_> {
        // Operation ids are 32-bit (killOp takes an int32), positive, and wrap around.
        let opid = self
            .next_opid
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                Some(if n >= i32::MAX - 1 { 0 } else { n + 1 })
            })
            .map_or(1, |before| before + 1);
        let command = body
            .iter()
            .filter(|(key, _)| !BATCH_FIELDS.contains(&key.as_str()))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        let examined = deadline.progress().examined();
        let operation = Arc::new(Operation {
            opid,
            connection: connection.clone(),
            owner,
            kind: kind_of(name),
            ns,
            command,
            started: Instant::now(),
            started_at: bson::DateTime::now(),
            cursor: Mutex::new(None),
            deadline: Mutex::new((deadline, examined)),
        });
        self.running.lock().insert(opid, operation.clone());
        Registered {
            operations: self,
            operation,
        }
    }

    /// Lists a client's connection while it is open.
    pub fn connected(&self, connection: &Arc<ConnectionInfo>) -> Listed<'_> {
        self.connections
            .lock()
            .insert(connection.id, connection.clone());
        Listed {
            operations: self,
            id: connection.id,
        }
    }

    /// The connections open that run no operation now.
    pub fn idle_connections(&self) -> Vec<Arc<ConnectionInfo>> {
        let busy: std::collections::HashSet<i64> = self
            .running
            .lock()
            .values()
            .map(|op| op.connection.id)
            .collect();
        self.connections
            .lock()
            .values()
            .filter(|c| !busy.contains(&c.id))
            .cloned()
            .collect()
    }

    /// The operations running now, oldest first.
    pub fn list(&self) -> Vec<Arc<Operation>> {
        self.running.lock().values().cloned().collect()
    }

    /// Marks the operation `opid` killed, if it is running: it stops at its next check.
    pub fn kill(&self, opid: i32) -> bool {
        let found = self.running.lock().get(&opid).cloned();
        found.map(|op| op.kill()).is_some()
    }
}

/// mongod's `op` for a command.
pub fn kind_of(command: &str) -> &'static str {
    match command {
        "find" => "query",
        "getMore" => "getmore",
        "insert" => "insert",
        "update" => "update",
        "delete" => "remove",
        _ => "command",
    }
}

/// `killOp`: `{killOp: 1, op: <opid>}` on `admin`. Killing an operation that is not
/// running (or has ended) succeeds too, as in mongod.
pub fn kill_op(operations: &Operations, body: &Document) -> Result<Document> {
    let Some(op) = body.get("op") else {
        return Err(Error::new(
            ErrorCode::NO_SUCH_KEY,
            "Missing expected field \"op\"",
        ));
    };
    let Some(number) = basalt_value::Number::from_bson(op) else {
        return Err(Error::type_mismatch(format!(
            "Expected field \"op\" to have a numeric type, but found {}",
            basalt_expr::type_name(Some(op))
        )));
    };
    let opid = match number.to_i64_exact() {
        Some(n) => n,
        None if number.to_f64().fract() == 0.0 => i64::MAX,
        None => return Err(not_integral(op)),
    };
    let Ok(opid) = i32::try_from(opid) else {
        return Err(Error::location(
            26823,
            format!("invalid op : {opid}. Op ID cannot be represented with 32 bits"),
        ));
    };
    operations.kill(opid);
    Ok(doc! { "info": "attempting to kill op" })
}

fn not_integral(op: &Bson) -> Error {
    Error::bad_value(format!(
        "Expected field \"op\" to have a value exactly representable as a 64-bit integer, \
         but found op: {op}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connection() -> Arc<ConnectionInfo> {
        Arc::new(ConnectionInfo::new(7, "127.0.0.1:5000".parse().unwrap()))
    }

    #[test]
    fn registered_operations_are_listed_killed_and_forgotten() {
        let operations = Operations::default();
        let deadline = Deadline::default();
        let body = doc! {"insert": "c", "documents": [{"a": 1}], "ordered": true};
        let registered = operations.begin(
            &connection(),
            None,
            "insert",
            "d.c".into(),
            &body,
            deadline.clone(),
        );
        let op = registered.operation.clone();
        assert_eq!(op.kind, "insert");
        assert_eq!(op.command, doc! {"insert": "c", "ordered": true});
        assert_eq!(operations.list().len(), 1);
        assert!(operations.idle_connections().is_empty());
        deadline.progress().add_examined(3, 2);
        assert_eq!(op.examined(), Examined { keys: 3, docs: 2 });
        assert!(deadline.check().is_ok());
        assert!(operations.kill(op.opid));
        assert_eq!(deadline.check().unwrap_err().code, ErrorCode::INTERRUPTED);
        assert!(op.to_document("h", false).get_bool("killPending").unwrap());
        drop(registered);
        assert!(operations.list().is_empty());
        assert!(!operations.kill(op.opid));
    }

    #[test]
    fn a_get_more_counts_from_when_it_adopted_its_cursor() {
        let operations = Operations::default();
        let cursor = Deadline::default();
        cursor.progress().add_examined(0, 100);
        let registered = operations.begin(
            &connection(),
            None,
            "getMore",
            "d.c".into(),
            &doc! {"getMore": 1_i64},
            Deadline::default(),
        );
        registered.operation.adopt(&cursor);
        cursor.progress().add_examined(0, 5);
        assert_eq!(registered.operation.examined().docs, 5);
        registered.operation.kill();
        assert!(cursor.check().is_err());
    }

    #[test]
    fn kill_op_checks_the_opid_as_mongod() {
        let operations = Operations::default();
        let code = |op: Bson| {
            kill_op(&operations, &doc! {"killOp": 1, "op": op})
                .map(|_| 0)
                .unwrap_or_else(|e| e.code.0)
        };
        assert_eq!(code(Bson::Int32(5)), 0);
        assert_eq!(code(Bson::Double(5.0)), 0);
        assert_eq!(code(Bson::Double(5.5)), 2);
        assert_eq!(code(Bson::Int64(1 << 31)), 26823);
        assert_eq!(code(Bson::Double(1e300)), 26823);
        assert_eq!(code(Bson::String("5".into())), 14);
        let missing = kill_op(&operations, &doc! {"killOp": 1}).unwrap_err();
        assert_eq!(missing.code, ErrorCode::NO_SUCH_KEY);
    }

    #[test]
    fn large_commands_are_truncated_only_when_asked() {
        let big = doc! {"find": "c", "filter": {"s": "x".repeat(2000)}, "comment": "mark"};
        assert_eq!(shown_command(&big, false), big);
        let shown = shown_command(&big, true);
        assert!(shown.get_str("$truncated").unwrap().ends_with(" ..."));
        assert_eq!(shown.get_str("comment").unwrap(), "mark");
        let small = doc! {"find": "c"};
        assert_eq!(shown_command(&small, true), small);
    }
}
