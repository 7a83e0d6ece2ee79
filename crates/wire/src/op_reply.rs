//! OP_REPLY (opcode 1), the legacy reply. The server sends it only to answer an OP_QUERY
//! handshake; decoding it lets tests and fuzz seeds read what the server wrote.

use basalt_error::Result;
use bson::{RawDocument, RawDocumentBuf};

use crate::compression::Compressor;
use crate::header::{frame, wire_len, OpCode};
use crate::reader::{protocol_error, Reader};

#[derive(Clone, Debug, PartialEq)]
pub struct OpReply {
    pub response_flags: i32,
    pub cursor_id: i64,
    pub starting_from: i32,
    pub documents: Vec<RawDocumentBuf>,
}

impl OpReply {
    /// The query failed; the single document is `{$err: ...}`.
    pub const QUERY_FAILURE: i32 = 1 << 1;
    /// The server supports `awaitData`; MongoDB sets it on every reply.
    pub const AWAIT_CAPABLE: i32 = 1 << 3;
}

/// Parses what follows the header of an OP_REPLY; `numberReturned` must match the
/// documents actually present.
pub(crate) fn parse(payload: &[u8]) -> Result<OpReply> {
    let mut r = Reader::new(payload);
    let response_flags = r.i32("OP_REPLY responseFlags")?;
    let cursor_id = r.i64("OP_REPLY cursorID")?;
    let starting_from = r.i32("OP_REPLY startingFrom")?;
    let number_returned = r.i32("OP_REPLY numberReturned")?;
    let mut documents = Vec::new();
    while !r.is_empty() {
        documents.push(r.document("OP_REPLY document")?);
    }
    if usize::try_from(number_returned).ok() != Some(documents.len()) {
        return Err(protocol_error(format!(
            "OP_REPLY numberReturned is {number_returned} but it holds {} documents",
            documents.len()
        )));
    }
    Ok(OpReply {
        response_flags,
        cursor_id,
        starting_from,
        documents,
    })
}

pub fn encode_op_reply(
    request_id: i32,
    response_to: i32,
    response_flags: i32,
    cursor_id: i64,
    starting_from: i32,
    documents: &[&RawDocument],
    compressor: Option<Compressor>,
) -> Vec<u8> {
    let mut payload = Vec::new();
    payload.extend_from_slice(&response_flags.to_le_bytes());
    payload.extend_from_slice(&cursor_id.to_le_bytes());
    payload.extend_from_slice(&starting_from.to_le_bytes());
    payload.extend_from_slice(&wire_len(documents.len()).to_le_bytes());
    for document in documents {
        payload.extend_from_slice(document.as_bytes());
    }
    frame(request_id, response_to, OpCode::Reply, &payload, compressor)
}

#[cfg(test)]
mod tests {
    use super::*;
    use basalt_error::ErrorCode;
    use bson::rawdoc;

    #[test]
    fn parses_what_it_encodes() {
        let (a, b) = (rawdoc! { "ok": 1.0 }, rawdoc! { "x": "y" });
        let bytes = encode_op_reply(3, 9, OpReply::AWAIT_CAPABLE, 42, 0, &[&a, &b], None);
        let reply = parse(&bytes[16..]).unwrap();
        assert_eq!(reply.response_flags, OpReply::AWAIT_CAPABLE);
        assert_eq!(reply.cursor_id, 42);
        assert_eq!(reply.documents, vec![a, b]);
    }

    #[test]
    fn number_returned_must_match() {
        let doc = rawdoc! { "ok": 1.0 };
        let mut bytes = encode_op_reply(3, 9, 0, 0, 0, &[&doc], None);
        bytes[16 + 16] = 2;
        assert_eq!(
            parse(&bytes[16..]).unwrap_err().code,
            ErrorCode::PROTOCOL_ERROR
        );
        bytes[16 + 16..16 + 20].copy_from_slice(&(-1_i32).to_le_bytes());
        assert_eq!(
            parse(&bytes[16..]).unwrap_err().code,
            ErrorCode::PROTOCOL_ERROR
        );
    }

    #[test]
    fn truncated_header_is_a_protocol_error() {
        assert_eq!(parse(&[0; 19]).unwrap_err().code, ErrorCode::PROTOCOL_ERROR);
        parse(&[0; 20]).unwrap();
    }
}
