//! How members talk: Raft's messages travel as the internal command `replSetRaft` over
//! MongoDB's wire protocol, to the port clients use, as mongod's members use their one
//! port for heartbeats and replication. One connection per peer, opened again after any
//! failure; [`PeerConnections`] counts them per host, for `connPoolStats`.

use crate::log_store::Record;
use crate::types::{decode, encode, Member, TypeConfig};
use basalt_auth::scram::ClientConversation;
use basalt_auth::Mechanism;
use basalt_wire::{Decoded, DocumentSequence, Message, OpMsg};
use bson::{doc, Document, RawDocumentBuf};
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{SnapshotMeta, Vote};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The SASL payload of a reply, or the member's refusal.
fn sasl_payload(reply: &Document) -> io::Result<Vec<u8>> {
    match reply.get("payload") {
        Some(bson::Bson::Binary(payload)) if reply.get_f64("ok").ok() == Some(1.0) => {
            Ok(payload.bytes.clone())
        }
        _ => Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "authentication with the key file refused: {}",
                reply.get_str("errmsg").unwrap_or("no payload")
            ),
        )),
    }
}

/// The name of the internal command that carries Raft's messages.
pub const RAFT_COMMAND: &str = "replSetRaft";
/// The longest a member waits to connect to another.
const CONNECT_TIMEOUT_MS: u64 = 500;

/// A connection to another member.
pub struct Peer {
    host: String,
    stream: Option<Box<dyn Stream>>,
    /// An exchange is on the stream: still set when the next begins, the last one's
    /// future was dropped midway (a caller's timeout, such as Raft's own), leaving a
    /// half-sent request or an unread reply, and the stream is closed.
    in_flight: bool,
    request_id: i32,
    options: PeerOptions,
    /// The drops of this host's connections counted when the stream was opened.
    drops_seen: u64,
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.close();
    }
}

/// How a member's connections to the others are made and secured.
#[derive(Clone, Debug, Default)]
pub struct PeerOptions {
    /// With `--keyFile`: each new connection first authenticates as the internal user.
    pub key: Option<Arc<str>>,
    /// With `--tlsMode preferTLS` or `requireTLS`: connections use TLS, presenting this
    /// member's certificate.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// With `--clusterAuthMode x509`: each new connection authenticates with that
    /// certificate (MONGODB-X509) instead of the key file.
    pub x509: bool,
    /// For fault tests only (`--setParameter peerRoutes`, with enableTestCommands):
    /// another member's address (as the set's config names it) → the address this
    /// member connects to instead, a fault-injecting proxy that can cut the two apart.
    pub routes: Arc<BTreeMap<String, String>>,
    /// Every connection of the member, counted per host, with `dropConnections`'
    /// requests.
    pub connections: Arc<PeerConnections>,
}

/// A member's connections to the others, per host (`name:port`, as the set's config
/// names it): how many were opened, are open and are in an exchange now (what
/// `connPoolStats` reports), and how many times `dropConnections` asked them to drop.
/// A connection opened before the last such request closes before its next exchange,
/// and the exchange opens a new one.
#[derive(Debug, Default)]
pub struct PeerConnections(parking_lot::Mutex<BTreeMap<String, HostConnections>>);

/// The connections to one host (see [`PeerConnections`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostConnections {
    pub created: u64,
    pub open: u64,
    pub in_use: u64,
    drops: u64,
}

impl PeerConnections {
    /// Asks the connections to `host` to close.
    pub fn drop_host(&self, host: &str) {
        self.update(host, |counts| counts.drops += 1);
    }

    /// The figures of every host this member has connected to.
    pub fn hosts(&self) -> Vec<(String, HostConnections)> {
        self.0
            .lock()
            .iter()
            .map(|(host, counts)| (host.clone(), *counts))
            .collect()
    }

    fn drops(&self, host: &str) -> u64 {
        self.0.lock().get(host).map_or(0, |counts| counts.drops)
    }

    fn update(&self, host: &str, change: impl FnOnce(&mut HostConnections)) {
        change(self.0.lock().entry(host.to_string()).or_default());
    }
}

/// A connection in an exchange, counted as in use until the exchange ends, however it
/// ends (its future may be dropped midway by a caller's timeout).
struct InUse {
    connections: Arc<PeerConnections>,
    host: String,
}

impl InUse {
    fn new(connections: Arc<PeerConnections>, host: &str) -> InUse {
        connections.update(host, |counts| counts.in_use += 1);
        InUse {
            connections,
            host: host.to_string(),
        }
    }
}

impl Drop for InUse {
    fn drop(&mut self) {
        self.connections.update(&self.host, |counts| {
            counts.in_use = counts.in_use.saturating_sub(1)
        });
    }
}

/// A connection's byte stream, plain or TLS.
trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + Sync {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + Sync> Stream for T {}

impl Peer {
    pub fn new(host: &str, options: PeerOptions) -> Peer {
        Peer {
            host: host.to_string(),
            stream: None,
            in_flight: false,
            request_id: 0,
            options,
            drops_seen: 0,
        }
    }

    /// Closes the connection, if one is open.
    fn close(&mut self) {
        if self.stream.take().is_some() {
            let connections = &self.options.connections;
            connections.update(&self.host, |counts| {
                counts.open = counts.open.saturating_sub(1)
            });
        }
    }

    /// Connects to the member, over TLS when this member uses it.
    async fn connect(&self) -> io::Result<Box<dyn Stream>> {
        let address = self.options.routes.get(&self.host).unwrap_or(&self.host);
        let connect = TcpStream::connect(address);
        let stream = tokio::time::timeout(Duration::from_millis(CONNECT_TIMEOUT_MS), connect)
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))??;
        stream.set_nodelay(true)?;
        let Some(config) = &self.options.tls else {
            return Ok(Box::new(stream));
        };
        let host = self
            .host
            .rsplit_once(':')
            .map_or(self.host.as_str(), |(h, _)| h);
        let name =
            rustls::pki_types::ServerName::try_from(host.trim_matches(['[', ']']).to_string())
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let handshake = tokio_rustls::TlsConnector::from(config.clone()).connect(name, stream);
        let tls = tokio::time::timeout(Duration::from_millis(CONNECT_TIMEOUT_MS), handshake)
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out"))??;
        Ok(Box::new(tls))
    }

    /// Sends a command to the member and returns its reply, whatever its `ok`.
    pub async fn run(&mut self, body: &Document, timeout: Duration) -> io::Result<Document> {
        self.run_with(body, &[], timeout).await
    }

    /// As [`Peer::run`], with document sequences after the body.
    async fn run_with(
        &mut self,
        body: &Document,
        sequences: &[DocumentSequence],
        timeout: Duration,
    ) -> io::Result<Document> {
        let outcome = tokio::time::timeout(timeout, self.exchange(body, sequences)).await;
        match outcome {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(e)) => {
                self.close();
                Err(e)
            }
            Err(_) => {
                // A reply may still come on this stream: it must not answer the next
                // request.
                self.close();
                Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "{} did not answer within {} ms",
                        self.host,
                        timeout.as_millis()
                    ),
                ))
            }
        }
    }

    async fn exchange(
        &mut self,
        body: &Document,
        sequences: &[DocumentSequence],
    ) -> io::Result<Document> {
        if std::mem::replace(&mut self.in_flight, true) {
            // Otherwise that reply would answer this request.
            self.close();
        }
        let connections = self.options.connections.clone();
        let drops = connections.drops(&self.host);
        if drops != self.drops_seen {
            self.close();
        }
        let _in_use = InUse::new(connections.clone(), &self.host);
        if self.stream.is_none() {
            self.drops_seen = drops;
            self.stream = Some(self.connect().await?);
            connections.update(&self.host, |counts| {
                counts.created += 1;
                counts.open += 1;
            });
            if self.options.x509 {
                self.authenticate_x509().await?;
            } else if let Some(key) = self.options.key.clone() {
                self.authenticate(&key).await?;
            }
        }
        let reply = self.round_trip(body, sequences).await?;
        self.in_flight = false;
        Ok(reply)
    }

    /// Proves this member holds the key file: SCRAM-SHA-256 as the internal user, as
    /// mongod's members authenticate to each other.
    async fn authenticate(&mut self, key: &str) -> io::Result<()> {
        let refused =
            |e: basalt_error::Error| io::Error::new(io::ErrorKind::PermissionDenied, e.message);
        let (mut scram, first) =
            ClientConversation::start(Mechanism::Sha256, basalt_auth::INTERNAL_USER, key)
                .map_err(refused)?;
        let binary = |bytes: Vec<u8>| bson::Binary {
            subtype: bson::spec::BinarySubtype::Generic,
            bytes,
        };
        let db = basalt_auth::INTERNAL_USER_DB;
        let reply = self
            .round_trip(
                &doc! {
                    "saslStart": 1,
                    "mechanism": Mechanism::Sha256.name(),
                    "payload": binary(first),
                    "options": { "skipEmptyExchange": true },
                    "$db": db,
                },
                &[],
            )
            .await?;
        let server_first = sasl_payload(&reply)?;
        let client_final = scram.respond(&server_first).map_err(refused)?;
        let reply = self
            .round_trip(
                &doc! {
                    "saslContinue": 1,
                    "conversationId": reply.get("conversationId").cloned().unwrap_or(bson::Bson::Int32(1)),
                    "payload": binary(client_final),
                    "$db": db,
                },
                &[],
            )
            .await?;
        scram.verify(&sasl_payload(&reply)?).map_err(refused)
    }

    /// Proves membership with this member's TLS certificate (MONGODB-X509), as mongod's
    /// members do under `--clusterAuthMode x509`.
    async fn authenticate_x509(&mut self) -> io::Result<()> {
        let body = doc! { "authenticate": 1, "mechanism": "MONGODB-X509", "$db": "$external" };
        let reply = self.round_trip(&body, &[]).await?;
        if reply.get_f64("ok").ok() == Some(1.0) {
            return Ok(());
        }
        Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "x.509 membership authentication refused: {}",
                reply.get_str("errmsg").unwrap_or("no reason given")
            ),
        ))
    }

    /// Sends one command on the open connection and reads its reply.
    async fn round_trip(
        &mut self,
        body: &Document,
        sequences: &[DocumentSequence],
    ) -> io::Result<Document> {
        let Some(stream) = self.stream.as_mut() else {
            return Err(io::Error::other("no connection"));
        };
        self.request_id = self.request_id.wrapping_add(1);
        let raw = RawDocumentBuf::try_from(body).map_err(io::Error::other)?;
        let message =
            basalt_wire::encode_op_msg_with_sequences(self.request_id, 0, 0, &raw, sequences, None);
        stream.write_all(&message).await?;
        let mut length = [0u8; 4];
        stream.read_exact(&mut length).await?;
        let size = usize::try_from(i32::from_le_bytes(length)).map_err(io::Error::other)?;
        if !(16..=basalt_wire::MAX_MESSAGE_SIZE_BYTES).contains(&size) {
            return Err(io::Error::other(format!("a reply of {size} bytes")));
        }
        let mut buffer = vec![0u8; size];
        buffer[..4].copy_from_slice(&length);
        stream.read_exact(&mut buffer[4..]).await?;
        match basalt_wire::decode(&buffer) {
            Ok(Decoded::Frame {
                frame:
                    basalt_wire::Frame {
                        message: Message::Msg(OpMsg { body, .. }),
                        ..
                    },
                ..
            }) => Document::try_from(body.as_ref()).map_err(io::Error::other),
            Ok(_) => Err(io::Error::other("an unexpected reply")),
            Err(e) => Err(io::Error::other(format!("{e:?}"))),
        }
    }

    /// Sends one Raft message and decodes the remote Raft's answer.
    async fn raft<
        Req: Serialize,
        Resp: DeserializeOwned,
        E: DeserializeOwned + std::error::Error,
    >(
        &mut self,
        target: u64,
        kind: &str,
        request: &Req,
        option: &RPCOption,
    ) -> Result<Resp, RPCError<u64, Member, E>> {
        let unreachable = |e: io::Error| RPCError::Unreachable(Unreachable::new(&e));
        let payload = encode(&Record { value: request })
            .map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let body = doc! { RAFT_COMMAND: kind, "$db": "admin" };
        let sequences = [payload_sequence(&payload).map_err(unreachable)?];
        let reply = self
            .run_with(&body, &sequences, option.hard_ttl())
            .await
            .map_err(unreachable)?;
        let bytes = match reply.get("payload") {
            Some(bson::Bson::Binary(binary)) => &binary.bytes,
            _ => {
                let message = reply.get_str("errmsg").unwrap_or("no payload in the reply");
                return Err(RPCError::Network(NetworkError::new(&io::Error::other(
                    message.to_string(),
                ))));
            }
        };
        let outcome: Record<Result<Resp, E>> =
            decode(bytes).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        outcome
            .value
            .map_err(|e| RPCError::RemoteError(RemoteError::new(target, e)))
    }
}

/// A piece of a copy of the data as it travels: openraft's `InstallSnapshotRequest`,
/// with its bytes encoded as one run rather than one element at a time.
#[derive(Serialize, Deserialize)]
pub(crate) struct CopyPiece {
    vote: Vote<u64>,
    meta: SnapshotMeta<u64, Member>,
    offset: u64,
    #[serde(with = "serde_bytes")]
    data: Vec<u8>,
    done: bool,
}

impl From<InstallSnapshotRequest<TypeConfig>> for CopyPiece {
    fn from(request: InstallSnapshotRequest<TypeConfig>) -> CopyPiece {
        CopyPiece {
            vote: request.vote,
            meta: request.meta,
            offset: request.offset,
            data: request.data,
            done: request.done,
        }
    }
}

impl From<CopyPiece> for InstallSnapshotRequest<TypeConfig> {
    fn from(piece: CopyPiece) -> InstallSnapshotRequest<TypeConfig> {
        InstallSnapshotRequest {
            vote: piece.vote,
            meta: piece.meta,
            offset: piece.offset,
            data: piece.data,
            done: piece.done,
        }
    }
}

/// The name of the document sequence that carries a Raft message.
pub const PAYLOAD_SEQUENCE: &str = "payload";
/// The most bytes of a Raft message one document of its sequence holds (a document is
/// at most 16 MB; a message up to 48 MB).
const PAYLOAD_PIECE_BYTES: usize = 8 << 20;

/// A Raft message as the document sequence it travels in: `{data: <binary>}` pieces.
fn payload_sequence(payload: &[u8]) -> io::Result<DocumentSequence> {
    let documents = payload
        .chunks(PAYLOAD_PIECE_BYTES)
        .map(|piece| {
            let binary = bson::Binary {
                subtype: bson::spec::BinarySubtype::Generic,
                bytes: piece.to_vec(),
            };
            RawDocumentBuf::try_from(&doc! { "data": binary }).map_err(io::Error::other)
        })
        .collect::<io::Result<Vec<_>>>()?;
    Ok(DocumentSequence {
        identifier: PAYLOAD_SEQUENCE.to_string(),
        documents,
    })
}

/// A Raft message put together from the pieces of its document sequence.
pub fn payload_of(sequences: &[DocumentSequence]) -> Option<Vec<u8>> {
    let sequence = sequences
        .iter()
        .find(|s| s.identifier == PAYLOAD_SEQUENCE)?;
    let mut payload = Vec::new();
    for document in &sequence.documents {
        payload.extend_from_slice(document.get_binary("data").ok()?.bytes);
    }
    Some(payload)
}

/// Makes a [`Peer`] per member Raft talks to.
pub struct Network {
    pub peer_options: PeerOptions,
}

/// The Raft connection to one member.
pub struct RaftPeer {
    target: u64,
    peer: Peer,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = RaftPeer;

    async fn new_client(&mut self, target: u64, node: &Member) -> RaftPeer {
        RaftPeer {
            target,
            peer: Peer::new(&node.host, self.peer_options.clone()),
        }
    }
}

impl RaftNetwork<TypeConfig> for RaftPeer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RPCError<u64, Member, RaftError<u64>>> {
        self.peer.raft(self.target, "append", &rpc, &option).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<u64>,
        RPCError<u64, Member, RaftError<u64, InstallSnapshotError>>,
    > {
        let piece = CopyPiece::from(rpc);
        self.peer
            .raft(self.target, "snapshot", &piece, &option)
            .await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<u64>,
        option: RPCOption,
    ) -> Result<VoteResponse<u64>, RPCError<u64, Member, RaftError<u64>>> {
        self.peer.raft(self.target, "vote", &rpc, &option).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A member that answers `{n}` with `{n, ok: 1}`, the first request late.
    async fn echo(listener: tokio::net::TcpListener) {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                loop {
                    let mut length = [0u8; 4];
                    if stream.read_exact(&mut length).await.is_err() {
                        return;
                    }
                    let mut buffer = vec![0u8; i32::from_le_bytes(length) as usize];
                    buffer[..4].copy_from_slice(&length);
                    stream.read_exact(&mut buffer[4..]).await.unwrap();
                    let Ok(Decoded::Frame {
                        frame:
                            basalt_wire::Frame {
                                message: Message::Msg(OpMsg { body, .. }),
                                ..
                            },
                        ..
                    }) = basalt_wire::decode(&buffer)
                    else {
                        panic!("not an OP_MSG");
                    };
                    let n = body.get_i32("n").unwrap();
                    if n == 1 {
                        tokio::time::sleep(Duration::from_millis(300)).await;
                    }
                    let reply = RawDocumentBuf::try_from(&doc! { "n": n, "ok": 1 }).unwrap();
                    let message =
                        basalt_wire::encode_op_msg_with_sequences(0, 0, 0, &reply, &[], None);
                    if stream.write_all(&message).await.is_err() {
                        return;
                    }
                }
            });
        }
    }

    #[tokio::test]
    async fn a_request_dropped_midway_does_not_leave_its_reply_to_the_next() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let host = listener.local_addr().unwrap().to_string();
        tokio::spawn(echo(listener));
        let mut peer = Peer::new(&host, PeerOptions::default());
        let long = Duration::from_secs(5);
        // The caller gives up before the reply comes, as Raft's timeouts do.
        let first = doc! { "n": 1 };
        let dropped = tokio::time::timeout(Duration::from_millis(50), peer.run(&first, long));
        assert!(dropped.await.is_err());
        let reply = peer.run(&doc! { "n": 2 }, long).await.unwrap();
        assert_eq!(reply.get_i32("n").unwrap(), 2);
        let reply = peer.run(&doc! { "n": 3 }, long).await.unwrap();
        assert_eq!(reply.get_i32("n").unwrap(), 3);
    }
}
