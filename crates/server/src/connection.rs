//! One client connection: reads frames, runs their commands, writes replies (compressed
//! as the request was).
//!
//! Each connection has its own thread, as in mongod, reading and writing its socket
//! with blocking calls and running its commands in place. A request then costs one
//! wake-up (the socket read returning) instead of three (the reactor noticing the
//! socket, a blocking-pool thread taking the command, the reactor taking the reply), so
//! a point query is not mostly thread hand-offs. Commands may block as long as they
//! like: only their own connection waits. What an idle connection costs (about 100 KiB)
//! is mostly the allocator's per-thread state (about 80 KiB), then the stack pages its
//! thread has touched and its 4 KiB read buffer (`read_buffer.rs`); the measurements
//! behind this choice are in docs/benchmarks.md.
//!
//! A malformed message that still had a valid length gets an error reply and the
//! connection goes on; a stream whose framing is lost (bad length, unknown opcode) is
//! closed, as mongod does. Either way the server serves other connections unharmed.

mod read_buffer;

use crate::commands::{dispatch, error_reply, reads_sequence_raw, Ctx};
use crate::stats::{Counted, Stats};
use crate::tls::Transport;
use crate::Server;
use basalt_error::{Error, ErrorCode, Result};
use basalt_wire::{
    decode, encode_op_msg, encode_op_reply, Compressor, DecodeError, Decoded, DocumentSequence,
    Frame, Message, OpCode, OpMsg,
};
use bson::{Bson, Document, RawDocument, RawDocumentBuf};
use read_buffer::{reserve_frame, ReadBuffer, READ_BUFFER_IDLE_BYTES};
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicI32, AtomicI64, Ordering};
use std::sync::Arc;

/// Stack each connection's thread reserves. Commands recurse over nested documents and
/// expressions (up to BSON's 200 levels), and JavaScript may take 512 KiB more: measured,
/// the deepest such command needs about 1 MiB in a release build and 4 MiB in a debug
/// one. An overflow aborts the whole server, and only the pages a command touches
/// become resident (16 KiB for an idle connection), so the margin costs address space,
/// not memory.
pub(crate) const CONNECTION_STACK_BYTES: usize = 8 * 1024 * 1024;

/// The longest a client may take to complete its TLS handshake.
const TLS_HANDSHAKE_TIMEOUT_MS: u64 = 10_000;

static NEXT_CONNECTION_ID: AtomicI64 = AtomicI64::new(1);
static NEXT_REQUEST_ID: AtomicI32 = AtomicI32::new(1);

/// What commands may know about the connection they arrived on.
pub struct ConnectionInfo {
    pub id: i64,
    pub peer: SocketAddr,
    /// The client's application name, from its handshake (`client.application.name`).
    app_name: std::sync::OnceLock<String>,
    /// Set by a command that wants the connection closed instead of answered.
    close_requested: std::sync::atomic::AtomicBool,
    /// The server's address the client connected to.
    pub local: std::sync::OnceLock<SocketAddr>,
    /// The client's TLS certificate (DER), when it presented one.
    pub peer_certificate: std::sync::OnceLock<Vec<u8>>,
    /// Who the client authenticated as, and an authentication under way.
    pub session: parking_lot::Mutex<crate::security::Session>,
}

impl ConnectionInfo {
    pub fn new(id: i64, peer: SocketAddr) -> ConnectionInfo {
        ConnectionInfo {
            id,
            peer,
            app_name: std::sync::OnceLock::new(),
            close_requested: std::sync::atomic::AtomicBool::new(false),
            session: Default::default(),
            peer_certificate: std::sync::OnceLock::new(),
            local: std::sync::OnceLock::new(),
        }
    }

    /// The connection of work the server starts itself (no client).
    pub fn is_internal(&self) -> bool {
        self.id == 0
    }

    pub fn app_name(&self) -> Option<&str> {
        self.app_name.get().map(String::as_str)
    }

    /// Records the application name of the handshake (the first one counts).
    pub fn set_app_name(&self, name: &str) {
        let _ = self.app_name.set(name.to_string());
    }

    /// Closes the connection once the current command ends, without its reply.
    pub fn request_close(&self) {
        self.close_requested.store(true, Ordering::Relaxed);
    }

    fn close_requested(&self) -> bool {
        self.close_requested.load(Ordering::Relaxed)
    }
}

/// Starts the thread of a connection that holds one of the server's connection slots
/// (`connection_count` of them are taken, this one's included); the thread gives the
/// slot back when the connection ends.
pub(crate) fn start(
    server: &Arc<Server>,
    stream: TcpStream,
    peer: SocketAddr,
    connection_count: u64,
) -> std::io::Result<()> {
    let info = Arc::new(ConnectionInfo::new(
        NEXT_CONNECTION_ID.fetch_add(1, Ordering::Relaxed),
        peer,
    ));
    let server = server.clone();
    std::thread::Builder::new()
        .name(format!("conn{}", info.id))
        .stack_size(CONNECTION_STACK_BYTES)
        .spawn(move || serve(&server, stream, &info, connection_count))
        // Detached: the thread ends with its connection.
        .map(drop)
}

fn serve(server: &Arc<Server>, stream: TcpStream, info: &Arc<ConnectionInfo>, count: u64) {
    // mongod's messages with its attribute names, which log tools look for; --quiet
    // leaves them out, as mongod's does.
    let verbose = !server.options.quiet;
    if verbose {
        tracing::info!(
            remote = %info.peer,
            connectionId = info.id,
            connectionCount = count,
            "Connection accepted"
        );
    }
    let _listed = server.operations.connected(info);
    let _ = stream.set_nodelay(true);
    if let Ok(local) = stream.local_addr() {
        let _ = info.local.set(local);
    }
    let outcome = transport(server, stream, info)
        .and_then(|mut transport| read_loop(server, info, &mut transport));
    match outcome {
        // A message that found no memory in time: the server's doing, so said loudly.
        Err(e) if e.kind() == std::io::ErrorKind::OutOfMemory => {
            tracing::warn!(connection_id = info.id, "closing connection: {e}");
        }
        Err(e) => tracing::debug!(connection_id = info.id, "connection ended: {e}"),
        Ok(()) => {}
    }
    let count = server.stats.connections.close();
    if verbose {
        tracing::info!(
            remote = %info.peer,
            connectionId = info.id,
            connectionCount = count,
            "Connection ended"
        );
    }
}

/// The connection's byte stream: TLS when the server has it and the client starts it
/// (within [`TLS_HANDSHAKE_TIMEOUT_MS`]), plain otherwise; an error ends the connection
/// (a failed handshake, or a plain connection under `requireTLS`).
fn transport(
    server: &Arc<Server>,
    stream: TcpStream,
    info: &Arc<ConnectionInfo>,
) -> std::io::Result<Transport> {
    let Some(tls) = &server.tls else {
        return Ok(Transport::Plain(stream));
    };
    let timeout = Some(std::time::Duration::from_millis(TLS_HANDSHAKE_TIMEOUT_MS));
    stream.set_read_timeout(timeout)?;
    let transport = match tls.accept(stream) {
        Ok(Some(transport)) => transport,
        Ok(None) => {
            tracing::warn!(
                remote = %info.peer,
                "refused a connection without TLS: the server requires it (requireTLS)"
            );
            return Err(std::io::Error::other("TLS required"));
        }
        Err(e) => {
            tracing::warn!(remote = %info.peer, "TLS handshake failed: {e}");
            return Err(e);
        }
    };
    transport.tcp().set_read_timeout(None)?;
    if let Some(certificate) = transport.peer_certificate() {
        let _ = info.peer_certificate.set(certificate.to_vec());
    }
    Ok(transport)
}

fn read_loop(
    server: &Arc<Server>,
    info: &Arc<ConnectionInfo>,
    stream: &mut Transport,
) -> std::io::Result<()> {
    let held_bytes = &server.stats.connections.buffer_bytes;
    let mut buf = ReadBuffer::new(held_bytes);
    loop {
        match decode(buf.data()) {
            Ok(Decoded::Frame { frame, consumed }) => {
                let _frame_memory = reserve_frame(consumed);
                buf.consume(consumed);
                Stats::add(&server.stats.bytes_in, consumed as u64);
                Stats::add(&server.stats.requests, 1);
                let outgoing = handle_frame(server, info, frame);
                if info.close_requested() {
                    return Ok(());
                }
                if let Some(outgoing) = outgoing {
                    send(stream, &outgoing.bytes, &server.stats)?;
                    let (mut streamed, mut last_id) = (outgoing.exhaust, outgoing.request_id);
                    while let Some(hello) = streamed {
                        let next = hello.next(server, info, last_id);
                        send(stream, &next.bytes, &server.stats)?;
                        (streamed, last_id) = (next.exhaust, next.request_id);
                    }
                }
            }
            Ok(Decoded::Incomplete) => {
                if buf.fill_from(stream)? == 0 {
                    return Ok(());
                }
            }
            Err(DecodeError::Fatal(error)) => {
                tracing::warn!(connection_id = info.id, "closing connection: {error}");
                return Ok(());
            }
            Err(DecodeError::Rejected(rejected)) => {
                buf.consume(rejected.consumed);
                tracing::warn!(
                    connection_id = info.id,
                    "rejected message: {}",
                    rejected.error
                );
                if !rejected.more_to_come {
                    let reply = error_reply(&rejected.error);
                    let bytes = encode_reply(
                        rejected.op_code,
                        rejected.header.request_id,
                        &reply,
                        rejected.compressor,
                    );
                    send(stream, &bytes, &server.stats)?;
                }
            }
        }
    }
}

/// Writes a reply, counting a large one's bytes as the connection's while they are sent
/// (a slow client can hold them; small ones are not worth the shared counter).
fn send(stream: &mut Transport, reply: &[u8], stats: &Stats) -> std::io::Result<()> {
    let _held = (reply.len() > READ_BUFFER_IDLE_BYTES)
        .then(|| Counted::new(&stats.connections.buffer_bytes, reply.len() as u64));
    Stats::add(&stats.bytes_out, reply.len() as u64);
    stream.write_all(reply)
}

fn encode_reply(
    op_code: OpCode,
    response_to: i32,
    reply: &RawDocument,
    compressor: Option<Compressor>,
) -> Vec<u8> {
    encode_reply_with(op_code, response_to, 0, reply, compressor).0
}

/// Encodes a reply with OP_MSG `flags`; returns it with the request id it was given.
fn encode_reply_with(
    op_code: OpCode,
    response_to: i32,
    flags: u32,
    reply: &RawDocument,
    compressor: Option<Compressor>,
) -> (Vec<u8>, i32) {
    let request_id = NEXT_REQUEST_ID.fetch_add(1, Ordering::Relaxed);
    let bytes = match op_code {
        OpCode::Query => encode_op_reply(request_id, response_to, 0, 0, 0, &[reply], compressor),
        _ => encode_op_msg(request_id, response_to, flags, reply, compressor),
    };
    (bytes, request_id)
}

/// A reply to send, and the awaitable hello to stream after it, if any.
struct Outgoing {
    bytes: Vec<u8>,
    request_id: i32,
    exhaust: Option<Streamed>,
}

/// A request whose client allows exhaust replies (OP_MSG `exhaustAllowed`), answered
/// with `moreToCome` and then again and again on the server's own, each reply answering
/// the last, as mongod does for two requests:
/// - an awaitable hello (drivers' streaming monitors): each next reply comes when the
///   topology changes or `maxAwaitTimeMS` passes, until the client closes the connection;
/// - a `getMore` (drivers' exhaust cursors): each next reply is the cursor's next batch,
///   until the cursor is exhausted (id 0) or a batch fails.
struct Streamed {
    db: String,
    body: Document,
    compressor: Option<Compressor>,
}

impl Streamed {
    /// Streams when `request` (with `flags`) is one of the two and `reply` a success
    /// that leaves more to send.
    fn after(
        flags: u32,
        db: &str,
        request: &Document,
        reply: &RawDocument,
        compressor: Option<Compressor>,
    ) -> Option<Streamed> {
        if flags & OpMsg::EXHAUST_ALLOWED == 0
            || reply.get("ok").ok().flatten().and_then(|ok| ok.as_f64()) != Some(1.0)
        {
            return None;
        }
        let body = match request.keys().next().map(String::as_str) {
            Some("hello" | "isMaster" | "ismaster")
                if request.contains_key("topologyVersion")
                    && request.contains_key("maxAwaitTimeMS") =>
            {
                let mut body = request.clone();
                let version = reply.get_document("topologyVersion").ok()?;
                body.insert("topologyVersion", Document::try_from(version).ok()?);
                body
            }
            Some("getMore") => {
                let id = reply.get_document("cursor").ok()?.get_i64("id").ok()?;
                if id == 0 {
                    return None;
                }
                request.clone()
            }
            _ => return None,
        };
        Some(Streamed {
            db: db.to_string(),
            body,
            compressor,
        })
    }

    /// Runs the request again (a hello waits for news; a getMore reads the next batch)
    /// and encodes its reply to the last one.
    fn next(self, server: &Arc<Server>, info: &Arc<ConnectionInfo>, response_to: i32) -> Outgoing {
        let reply = run_guarded(|| {
            let ctx = Ctx {
                server,
                connection: info,
                db: &self.db,
                raw_sequences: &[],
                max_time_ms: None,
                operation: None,
            };
            dispatch(&ctx, &self.body)
        });
        let exhaust = Streamed::after(
            OpMsg::EXHAUST_ALLOWED,
            &self.db,
            &self.body,
            &reply,
            self.compressor,
        );
        let flags = if exhaust.is_some() {
            OpMsg::MORE_TO_COME
        } else {
            0
        };
        let (bytes, request_id) =
            encode_reply_with(OpCode::Msg, response_to, flags, &reply, self.compressor);
        Outgoing {
            bytes,
            request_id,
            exhaust,
        }
    }
}

/// Runs the command of one frame; `None` when the client wants no reply (moreToCome).
fn handle_frame(
    server: &Arc<Server>,
    info: &Arc<ConnectionInfo>,
    frame: Frame,
) -> Option<Outgoing> {
    let request_id = frame.header.request_id;
    let (op_code, body, more_to_come, flags) = match frame.message {
        Message::Msg(msg) => {
            let more_to_come = msg.more_to_come();
            let flags = msg.flags;
            (OpCode::Msg, command_from_op_msg(msg), more_to_come, flags)
        }
        Message::Query(query) => (
            OpCode::Query,
            command_from_op_query(query).map(|(db, body)| (db, body, Vec::new())),
            false,
            0,
        ),
        Message::Reply(_) => (
            OpCode::Msg,
            Err(Error::new(
                ErrorCode::PROTOCOL_ERROR,
                "OP_REPLY is a server's message, not a request",
            )),
            false,
            0,
        ),
    };
    let mut exhaust = None;
    let reply = match body {
        Ok((db, body, raw_sequences)) => run_guarded(|| {
            let _active = Counted::new(&server.stats.connections.active, 1);
            let ctx = Ctx {
                server,
                connection: info,
                db: &db,
                raw_sequences: &raw_sequences,
                max_time_ms: None,
                operation: None,
            };
            let reply = dispatch(&ctx, &body);
            exhaust = Streamed::after(flags, &db, &body, &reply, frame.compressor);
            reply
        }),
        Err(e) => error_reply(&e),
    };
    if more_to_come {
        return None;
    }
    // Answer in the compression the request came in; the handshake itself always
    // arrives uncompressed, so it is answered so too.
    let flags = if exhaust.is_some() {
        OpMsg::MORE_TO_COME
    } else {
        0
    };
    let (bytes, request_id) =
        encode_reply_with(op_code, request_id, flags, &reply, frame.compressor);
    Some(Outgoing {
        bytes,
        request_id,
        exhaust,
    })
}

/// Runs a command; a panic in it becomes an InternalError reply and leaves the
/// connection and the server running.
pub(crate) fn run_guarded(command: impl FnOnce() -> RawDocumentBuf) -> RawDocumentBuf {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(command)) {
        Ok(reply) => reply,
        Err(payload) => {
            let message = panic_message(payload);
            tracing::error!("command failed with an internal error: {message}");
            error_reply(&Error::internal(message))
        }
    }
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        format!("internal error: {s}")
    } else if let Some(s) = payload.downcast_ref::<String>() {
        format!("internal error: {s}")
    } else {
        "internal error".to_string()
    }
}

/// The command document of an OP_MSG: its body with each document sequence added as an
/// array field (but those the command reads raw, which come back beside it), and the
/// database from `$db`.
fn command_from_op_msg(
    msg: basalt_wire::OpMsg,
) -> Result<(String, Document, Vec<DocumentSequence>)> {
    let mut body = Document::try_from(msg.body.as_ref())?;
    let db = match body.get("$db") {
        Some(Bson::String(db)) => db.clone(),
        Some(_) => return Err(Error::type_mismatch("$db must be a string")),
        None => {
            return Err(Error::location(
                40571,
                "OP_MSG requests require a $db argument",
            ))
        }
    };
    let command = body.keys().next().cloned().unwrap_or_default();
    let mut raw = Vec::new();
    for sequence in msg.sequences {
        if body.contains_key(&sequence.identifier) {
            return Err(Error::location(
                40430,
                format!("Duplicate field name in OP_MSG: {}", sequence.identifier),
            ));
        }
        if reads_sequence_raw(&command, &sequence.identifier) {
            raw.push(sequence);
            continue;
        }
        let documents = sequence
            .documents
            .iter()
            .map(|raw| Document::try_from(raw.as_ref()).map(Bson::Document))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        body.insert(sequence.identifier, documents);
    }
    Ok((db, body, raw))
}

/// OP_QUERY survives only for the legacy handshake (`isMaster`/`hello` on `db.$cmd`);
/// MongoDB 6+ refuses every other command sent this way.
fn command_from_op_query(query: basalt_wire::OpQuery) -> Result<(String, Document)> {
    let mut body = Document::try_from(query.query.as_ref())?;
    if let Some(Bson::Document(inner)) = body.get("$query").or_else(|| body.get("query")) {
        body = inner.clone();
    }
    let Some((db, collection)) = query.full_collection_name.split_once('.') else {
        return Err(Error::new(
            ErrorCode::INVALID_NAMESPACE,
            "invalid namespace in OP_QUERY",
        ));
    };
    let name = body.keys().next().cloned().unwrap_or_default();
    if collection != "$cmd" || !["isMaster", "ismaster", "hello"].contains(&name.as_str()) {
        return Err(Error::new(
            ErrorCode::UNSUPPORTED_OP_QUERY_COMMAND,
            format!("Unsupported OP_QUERY command: {name}. The client driver may require an upgrade. For more details see https://dochub.mongodb.org/core/legacy-opcode-removal"),
        ));
    }
    Ok((db.to_string(), body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_command_becomes_an_internal_error_reply() {
        let reply = run_guarded(|| panic!("boom"));
        assert_eq!(reply.get_i32("code").unwrap(), ErrorCode::INTERNAL_ERROR.0);
        assert_eq!(reply.get_str("codeName").unwrap(), "InternalError");
        assert!(reply.get_str("errmsg").unwrap().contains("boom"));
        let after = run_guarded(|| RawDocumentBuf::try_from(&bson::doc! { "ok": 1.0 }).unwrap());
        assert_eq!(after.get_f64("ok").unwrap(), 1.0);
    }

    #[test]
    fn op_query_accepts_only_the_handshake() {
        let query = |ns: &str, body: Document| basalt_wire::OpQuery {
            flags: 0,
            full_collection_name: ns.to_string(),
            number_to_skip: 0,
            number_to_return: -1,
            query: RawDocumentBuf::try_from(&body).unwrap(),
            return_fields_selector: None,
        };
        let (db, body) =
            command_from_op_query(query("admin.$cmd", bson::doc! { "isMaster": 1 })).unwrap();
        assert_eq!(
            (db.as_str(), body.keys().next().unwrap().as_str()),
            ("admin", "isMaster")
        );
        let wrapped =
            bson::doc! { "$query": { "hello": 1 }, "$readPreference": { "mode": "primary" } };
        assert!(command_from_op_query(query("admin.$cmd", wrapped)).is_ok());
        let refused =
            command_from_op_query(query("test.$cmd", bson::doc! { "find": "c" })).unwrap_err();
        assert_eq!(refused.code, ErrorCode::UNSUPPORTED_OP_QUERY_COMMAND);
    }
}
