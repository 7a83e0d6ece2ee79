//! MongoDB's wire protocol: framing and parsing of OP_MSG, OP_QUERY, OP_REPLY and
//! OP_COMPRESSED, and the encoders for what the server sends back.
//!
//! Does no I/O: [`decode`] takes the bytes a connection has read so far and returns a
//! frame or `Incomplete`, so the whole decoder can be fuzzed without sockets. Every BSON
//! document that comes out of it has been fully validated ([`validate_document`]), so the
//! rest of the server can read documents in place without re-checking them.

mod compression;
mod decode;
mod header;
mod op_msg;
mod op_query;
mod op_reply;
mod reader;
#[cfg(test)]
mod test_rng;
mod validate;

pub use compression::Compressor;
pub use decode::{decode, DecodeError, Decoded, Frame, Message, Rejected};
pub use header::{Header, OpCode, HEADER_SIZE_BYTES};
pub use op_msg::{encode_op_msg, encode_op_msg_with_sequences, DocumentSequence, OpMsg};
pub use op_query::{encode_op_query, OpQuery};
pub use op_reply::{encode_op_reply, OpReply};
pub use validate::{validate_document, MAX_BSON_NESTING_DEPTH};

/// The largest message, header included, that the server accepts (`maxMessageSizeBytes`
/// in `hello`). A longer declared length closes the connection.
pub const MAX_MESSAGE_SIZE_BYTES: usize = 48_000_000;

/// The largest document a user may store (`maxBsonObjectSize` in `hello`). Enforced per
/// document by the server, not by the decoder: command bodies may be larger.
pub const MAX_BSON_OBJECT_SIZE_BYTES: usize = 16 * 1024 * 1024;

/// The largest document the wire accepts: a user document plus 16 KiB of command
/// overhead around it (MongoDB's `BSONObjMaxInternalSize`).
pub const MAX_BSON_OBJECT_INTERNAL_SIZE_BYTES: usize = MAX_BSON_OBJECT_SIZE_BYTES + 16 * 1024;
