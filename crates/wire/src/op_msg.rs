//! OP_MSG (opcode 2013), the message every modern driver uses for every command.
//!
//! Layout after the header: flagBits (uint32), then sections until the optional trailing
//! CRC-32C. A kind-0 section is the command body (exactly one); a kind-1 section is a
//! document sequence (`documents` of an insert, `updates`, ...) sent beside the body so
//! large batches need not be nested in one document.

use basalt_error::{Error, ErrorCode, Result};
use bson::{RawBsonRef, RawDocument, RawDocumentBuf};

use crate::compression::Compressor;
use crate::header::{frame, wire_len, Header, OpCode, HEADER_SIZE_BYTES};
use crate::reader::{protocol_error, Reader};

/// A decoded OP_MSG. Every document in it has been fully validated.
#[derive(Clone, Debug, PartialEq)]
pub struct OpMsg {
    pub flags: u32,
    pub body: RawDocumentBuf,
    pub sequences: Vec<DocumentSequence>,
}

/// A kind-1 section: documents that belong to the body field named `identifier`.
#[derive(Clone, Debug, PartialEq)]
pub struct DocumentSequence {
    pub identifier: String,
    pub documents: Vec<RawDocumentBuf>,
}

/// Bits 0-15 are "required": a receiver must reject bits it does not know there, while
/// unknown bits 16-31 are optional and ignored.
const REQUIRED_FLAGS_MASK: u32 = 0xffff;

const SECTION_BODY: u8 = 0;
const SECTION_DOCUMENT_SEQUENCE: u8 = 1;
const CHECKSUM_SIZE_BYTES: usize = 4;

impl OpMsg {
    /// The message ends with a CRC-32C of everything before it.
    pub const CHECKSUM_PRESENT: u32 = 1 << 0;
    /// The sender will send another message without waiting for a reply (requests: do
    /// not reply; replies: another reply follows, exhaust cursors).
    pub const MORE_TO_COME: u32 = 1 << 1;
    /// The client accepts exhaust replies (`MORE_TO_COME` on the server's side).
    pub const EXHAUST_ALLOWED: u32 = 1 << 16;

    pub fn checksum_present(&self) -> bool {
        self.flags & Self::CHECKSUM_PRESENT != 0
    }

    pub fn more_to_come(&self) -> bool {
        self.flags & Self::MORE_TO_COME != 0
    }

    pub fn exhaust_allowed(&self) -> bool {
        self.flags & Self::EXHAUST_ALLOWED != 0
    }

    /// The document sequence named `identifier`, if the client sent one.
    pub fn sequence(&self, identifier: &str) -> Option<&DocumentSequence> {
        self.sequences.iter().find(|s| s.identifier == identifier)
    }
}

/// Parses an uncompressed OP_MSG: `header` is its 16-byte header (which the checksum
/// covers), `payload` what follows it.
pub(crate) fn parse(header: &[u8], payload: &[u8]) -> Result<OpMsg> {
    debug_assert_eq!(header.len(), HEADER_SIZE_BYTES);
    let flags = Reader::new(payload).u32("OP_MSG flagBits")?;
    let known = OpMsg::CHECKSUM_PRESENT | OpMsg::MORE_TO_COME;
    if flags & REQUIRED_FLAGS_MASK & !known != 0 {
        return Err(Error::new(
            ErrorCode::ILLEGAL_OP_MSG_FLAG,
            format!("Message contains illegal flags value: 0b{flags:032b}"),
        ));
    }

    let sections_start = 4;
    let mut sections_end = payload.len();
    if flags & OpMsg::CHECKSUM_PRESENT != 0 {
        if sections_end < sections_start + CHECKSUM_SIZE_BYTES {
            return Err(protocol_error("OP_MSG is too short to hold its checksum"));
        }
        sections_end -= CHECKSUM_SIZE_BYTES;
        let mut stored = [0; CHECKSUM_SIZE_BYTES];
        stored.copy_from_slice(&payload[sections_end..]);
        let computed = crc32c::crc32c_append(crc32c::crc32c(header), &payload[..sections_end]);
        // Checked before the sections so corruption reads as corruption, not as some
        // confusing BSON error.
        if u32::from_le_bytes(stored) != computed {
            return Err(Error::new(
                ErrorCode::CHECKSUM_MISMATCH,
                "OP_MSG checksum does not match contents",
            ));
        }
    }

    let mut sections = Reader::new(&payload[sections_start..sections_end]);
    let mut body = None;
    let mut sequences: Vec<DocumentSequence> = Vec::new();
    while !sections.is_empty() {
        match sections.u8("section kind")? {
            SECTION_BODY => {
                if body.is_some() {
                    return Err(Error::location(40430, "Multiple body sections in message"));
                }
                body = Some(sections.document("OP_MSG body")?);
            }
            SECTION_DOCUMENT_SEQUENCE => {
                let sequence = parse_sequence(&mut sections)?;
                if sequences
                    .iter()
                    .any(|s| s.identifier == sequence.identifier)
                {
                    return Err(Error::location(
                        40431,
                        format!("Duplicate document sequence: {}", sequence.identifier),
                    ));
                }
                sequences.push(sequence);
            }
            kind => {
                return Err(Error::location(
                    40432,
                    format!("Unknown section kind {kind}"),
                ))
            }
        }
    }
    let body = body.ok_or_else(|| Error::location(40587, "OP_MSG messages must have a body"))?;
    for sequence in &sequences {
        if path_in_body(&body, &sequence.identifier) {
            return Err(Error::location(
                40433,
                format!(
                    "Duplicate field between body and document sequence {}",
                    sequence.identifier
                ),
            ));
        }
    }
    Ok(OpMsg {
        flags,
        body,
        sequences,
    })
}

fn parse_sequence(sections: &mut Reader<'_>) -> Result<DocumentSequence> {
    // The size counts itself, then the identifier and the documents.
    let size = sections.i32("document sequence size")?;
    let content_len = usize::try_from(size)
        .ok()
        .and_then(|size| size.checked_sub(4))
        .filter(|&len| len >= 1)
        .ok_or_else(|| protocol_error(format!("document sequence size {size} is invalid")))?;
    let mut content = Reader::new(sections.bytes(content_len, "document sequence")?);
    let identifier = content.cstr("document sequence identifier")?.to_string();
    let mut documents = Vec::new();
    while !content.is_empty() {
        documents.push(content.document("document sequence")?);
    }
    Ok(DocumentSequence {
        identifier,
        documents,
    })
}

/// Whether the body already holds the sequence's field, following dots through embedded
/// documents and stopping at arrays, as MongoDB does before merging the two.
fn path_in_body(body: &RawDocument, path: &str) -> bool {
    let mut current = body;
    let mut parts = path.split('.').peekable();
    while let Some(part) = parts.next() {
        let value = match current.get(part) {
            Ok(Some(value)) => value,
            _ => return false,
        };
        if parts.peek().is_none() {
            return true;
        }
        match value {
            RawBsonRef::Document(doc) => current = doc,
            RawBsonRef::Array(_) => return true,
            _ => return false,
        }
    }
    false
}

/// Encodes an OP_MSG with only a body section. With [`OpMsg::CHECKSUM_PRESENT`] in
/// `flags`, the CRC-32C is appended (computed before compression, as MongoDB does).
pub fn encode_op_msg(
    request_id: i32,
    response_to: i32,
    flags: u32,
    body: &RawDocument,
    compressor: Option<Compressor>,
) -> Vec<u8> {
    encode_op_msg_with_sequences(request_id, response_to, flags, body, &[], compressor)
}

/// Encodes an OP_MSG with a body section followed by one kind-1 section per sequence.
pub fn encode_op_msg_with_sequences(
    request_id: i32,
    response_to: i32,
    flags: u32,
    body: &RawDocument,
    sequences: &[DocumentSequence],
    compressor: Option<Compressor>,
) -> Vec<u8> {
    let mut payload = Vec::with_capacity(4 + 1 + body.as_bytes().len());
    payload.extend_from_slice(&flags.to_le_bytes());
    payload.push(SECTION_BODY);
    payload.extend_from_slice(body.as_bytes());
    for sequence in sequences {
        debug_assert!(!sequence.identifier.contains('\0'));
        let size = 4
            + sequence.identifier.len()
            + 1
            + sequence
                .documents
                .iter()
                .map(|d| d.as_bytes().len())
                .sum::<usize>();
        payload.push(SECTION_DOCUMENT_SEQUENCE);
        payload.extend_from_slice(&wire_len(size).to_le_bytes());
        payload.extend_from_slice(sequence.identifier.as_bytes());
        payload.push(0);
        for document in &sequence.documents {
            payload.extend_from_slice(document.as_bytes());
        }
    }
    if flags & OpMsg::CHECKSUM_PRESENT != 0 {
        let header = Header {
            message_length: wire_len(HEADER_SIZE_BYTES + payload.len() + CHECKSUM_SIZE_BYTES),
            request_id,
            response_to,
            op_code: OpCode::Msg,
        };
        let crc = crc32c::crc32c_append(crc32c::crc32c(&header.to_bytes()), &payload);
        payload.extend_from_slice(&crc.to_le_bytes());
    }
    frame(request_id, response_to, OpCode::Msg, &payload, compressor)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    fn sections(flags: u32, sections: &[u8]) -> Vec<u8> {
        let mut payload = flags.to_le_bytes().to_vec();
        payload.extend_from_slice(sections);
        frame(1, 0, OpCode::Msg, &payload, None)
    }

    fn body_section(doc: &RawDocument) -> Vec<u8> {
        let mut out = vec![SECTION_BODY];
        out.extend_from_slice(doc.as_bytes());
        out
    }

    fn sequence_section(identifier: &str, docs: &[&RawDocument], size_delta: i32) -> Vec<u8> {
        let size =
            4 + identifier.len() + 1 + docs.iter().map(|d| d.as_bytes().len()).sum::<usize>();
        let mut out = vec![SECTION_DOCUMENT_SEQUENCE];
        out.extend_from_slice(&(size as i32 + size_delta).to_le_bytes());
        out.extend_from_slice(identifier.as_bytes());
        out.push(0);
        for d in docs {
            out.extend_from_slice(d.as_bytes());
        }
        out
    }

    fn parse(message: &[u8]) -> Result<OpMsg> {
        super::parse(&message[..HEADER_SIZE_BYTES], &message[HEADER_SIZE_BYTES..])
    }

    fn code(message: &[u8]) -> ErrorCode {
        parse(message).unwrap_err().code
    }

    #[test]
    fn parses_body_and_sequences_in_any_order() {
        let body = rawdoc! { "insert": "c", "$db": "test" };
        let (a, b) = (rawdoc! { "_id": 1 }, rawdoc! { "_id": 2 });
        let mut bytes = sequence_section("documents", &[&a, &b], 0);
        bytes.extend(body_section(&body));
        bytes.extend(sequence_section("other", &[], 0));
        let msg = parse(&sections(0, &bytes)).unwrap();
        assert_eq!(msg.body, body);
        assert_eq!(msg.sequence("documents").unwrap().documents, vec![a, b]);
        assert!(msg.sequence("other").unwrap().documents.is_empty());
        assert!(msg.sequence("missing").is_none());
    }

    #[test]
    fn flag_helpers() {
        let msg = OpMsg {
            flags: OpMsg::MORE_TO_COME | OpMsg::EXHAUST_ALLOWED,
            body: rawdoc! {},
            sequences: vec![],
        };
        assert!(msg.more_to_come() && msg.exhaust_allowed() && !msg.checksum_present());
    }

    #[test]
    fn rejects_unknown_required_flags_only() {
        let body = body_section(&rawdoc! { "ping": 1 });
        for bit in 2..16 {
            assert_eq!(
                code(&sections(1 << bit, &body)),
                ErrorCode::ILLEGAL_OP_MSG_FLAG
            );
        }
        for bit in 16..32 {
            parse(&sections(1 << bit, &body)).unwrap();
        }
        parse(&sections(OpMsg::MORE_TO_COME, &body)).unwrap();
    }

    #[test]
    fn body_is_required_and_unique() {
        let body = body_section(&rawdoc! { "ping": 1 });
        assert_eq!(code(&sections(0, &[])), ErrorCode::location(40587));
        let only_sequence = sequence_section("documents", &[], 0);
        assert_eq!(
            code(&sections(0, &only_sequence)),
            ErrorCode::location(40587)
        );
        let twice = [body.clone(), body].concat();
        assert_eq!(code(&sections(0, &twice)), ErrorCode::location(40430));
    }

    #[test]
    fn rejects_unknown_section_kind() {
        let mut bytes = body_section(&rawdoc! { "ping": 1 });
        bytes.push(2);
        assert_eq!(code(&sections(0, &bytes)), ErrorCode::location(40432));
    }

    #[test]
    fn rejects_duplicate_sequences_and_body_fields() {
        let body = body_section(&rawdoc! { "insert": "c", "nested": { "docs": 1 }, "arr": [] });
        let seq = sequence_section("documents", &[], 0);
        let dup = [body.clone(), seq.clone(), seq].concat();
        assert_eq!(code(&sections(0, &dup)), ErrorCode::location(40431));
        for clash in ["insert", "nested.docs", "arr.x"] {
            let bytes = [body.clone(), sequence_section(clash, &[], 0)].concat();
            assert_eq!(
                code(&sections(0, &bytes)),
                ErrorCode::location(40433),
                "{clash}"
            );
        }
        for fine in ["nested.other", "insert.x", "documents"] {
            let bytes = [body.clone(), sequence_section(fine, &[], 0)].concat();
            parse(&sections(0, &bytes)).unwrap();
        }
    }

    #[test]
    fn sequence_sizes_must_agree_with_documents() {
        let body = body_section(&rawdoc! { "insert": "c" });
        let doc = rawdoc! { "_id": 1 };
        let good = [body.clone(), sequence_section("documents", &[&doc], 0)].concat();
        parse(&sections(0, &good)).unwrap();
        for delta in [-1, 1, -13, 1000] {
            let bytes = [body.clone(), sequence_section("documents", &[&doc], delta)].concat();
            assert!(parse(&sections(0, &bytes)).is_err(), "delta {delta}");
        }
        for size in [-1, 0, 4, i32::MIN, i32::MAX] {
            let mut bytes = body.clone();
            bytes.push(SECTION_DOCUMENT_SEQUENCE);
            bytes.extend_from_slice(&size.to_le_bytes());
            bytes.extend_from_slice(b"d\0");
            assert_eq!(
                code(&sections(0, &bytes)),
                ErrorCode::PROTOCOL_ERROR,
                "{size}"
            );
        }
    }

    #[test]
    fn body_length_must_agree_with_section() {
        let body = body_section(&rawdoc! { "ping": 1 });
        let mut truncated = body.clone();
        truncated.pop();
        assert_eq!(code(&sections(0, &truncated)), ErrorCode::INVALID_BSON);
        let mut trailing = body;
        trailing.push(0);
        // The extra byte is read as a second body section with no document.
        assert!(parse(&sections(0, &trailing)).is_err());
    }

    #[test]
    fn invalid_nested_bson_is_invalid_bson() {
        let mut body = rawdoc! { "a": { "b": true } }.into_bytes();
        let at = body.len() - 3;
        assert_eq!(body[at], 1);
        body[at] = 2;
        let bytes = [vec![SECTION_BODY], body].concat();
        assert_eq!(code(&sections(0, &bytes)), ErrorCode::INVALID_BSON);
    }

    #[test]
    fn checksum_is_verified() {
        let body = rawdoc! { "ping": 1 };
        let good = encode_op_msg(5, 0, OpMsg::CHECKSUM_PRESENT, &body, None);
        let msg = parse(&good).unwrap();
        assert!(msg.checksum_present());
        assert_eq!(msg.body, body);
        // Any flipped bit, including in the header, breaks it.
        for at in [0, 5, 20, good.len() - 6, good.len() - 1] {
            let mut bad = good.clone();
            bad[at] ^= 0x10;
            assert_eq!(code(&bad), ErrorCode::CHECKSUM_MISMATCH, "byte {at}");
        }
        // The flag set but no room for the checksum.
        assert_eq!(
            code(&sections(OpMsg::CHECKSUM_PRESENT, &[0])),
            ErrorCode::PROTOCOL_ERROR
        );
    }

    #[test]
    fn missing_flags_is_a_protocol_error() {
        let header_only = frame(1, 0, OpCode::Msg, &[], None);
        assert_eq!(code(&header_only), ErrorCode::PROTOCOL_ERROR);
    }
}
