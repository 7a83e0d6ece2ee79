//! What travels through the replicated log, and the Raft type configuration built on it.
//!
//! An entry carries a write command as the client sent it (plus the wall-clock time the
//! primary chose for it), not the documents it changed: every member runs the same
//! commands in the same order through the same write path, so the reply the primary
//! sends is the one its own state machine produced, and concurrent writers are ordered by
//! the log instead of by locks held across a network round trip.

use serde::{Deserialize, Serialize};

openraft::declare_raft_types!(
    /// The Raft types of a replica set.
    pub TypeConfig:
        D = Proposal,
        R = Applied,
        NodeId = u64,
        Node = Member,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = tokio::fs::File,
        AsyncRuntime = openraft::TokioRuntime,
);

/// The Raft handle of a member.
pub type Raft = openraft::Raft<TypeConfig>;

/// What Raft knows of a member: where it listens. The rest of its configuration
/// (priority, votes, hidden) is in the replica set's config document.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    pub host: String,
}

/// One entry of the replicated log.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Proposal {
    /// A write command, run by every member in log order.
    Command(WriteCommand),
    /// A new replica set configuration document (`replSetReconfig`), BSON.
    Config(#[serde(with = "serde_bytes")] Vec<u8>),
}

/// A write command as the client sent it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WriteCommand {
    /// The database from `$db`.
    pub db: String,
    /// The command document, BSON.
    #[serde(with = "serde_bytes")]
    pub body: Vec<u8>,
    /// OP_MSG document sequences (an insert's `documents`), each document BSON.
    pub sequences: Vec<Sequence>,
    /// The primary's clock when it proposed the command: `$$NOW`, `$currentDate` and
    /// generated ObjectIds use it on every member, so they all store the same values.
    pub wall_ms: i64,
    /// Where the entry's statements begin in the client's command: a large command is
    /// proposed as several entries, and a retried one is answered per entry.
    pub first_statement: u32,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Sequence {
    pub identifier: String,
    pub documents: Vec<serde_bytes::ByteBuf>,
}

/// What applying an entry produced: the command's reply, BSON.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Applied {
    #[serde(with = "serde_bytes")]
    pub reply: Vec<u8>,
}

/// Encodes a value for the log, the Raft messages or the member's own records: postcard,
/// compact and fast, and unlike BSON able to hold Raft's maps keyed by member id.
pub(crate) fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, std::io::Error> {
    postcard::to_stdvec(value).map_err(std::io::Error::other)
}

pub(crate) fn decode<'de, T: Deserialize<'de>>(bytes: &'de [u8]) -> Result<T, std::io::Error> {
    postcard::from_bytes(bytes).map_err(std::io::Error::other)
}
