//! Turns the bytes read so far from a connection into one frame, or says more are needed.
//!
//! Errors are split by what the connection can do next. When the header itself is
//! unusable (a length out of bounds, an unknown opcode) the stream has lost its framing
//! and must be closed. When the length was fine but the content was not, the bytes of
//! that message are known, so the server skips them, replies with the error to the
//! request's id and keeps the connection, as MongoDB does for a malformed OP_MSG.

use std::fmt;

use basalt_error::Error;

use crate::compression::Compressor;
use crate::header::{Header, OpCode, COMPRESSION_HEADER_SIZE_BYTES, HEADER_SIZE_BYTES};
use crate::op_msg::{self, OpMsg};
use crate::op_query::{self, OpQuery};
use crate::op_reply::{self, OpReply};
use crate::reader::protocol_error;
use crate::MAX_MESSAGE_SIZE_BYTES;

/// What [`decode`] found at the start of the buffer.
#[derive(Clone, Debug, PartialEq)]
pub enum Decoded {
    /// A whole message; the caller drops `consumed` bytes from its buffer.
    Frame { frame: Frame, consumed: usize },
    /// The buffer holds only part of a message: read more and call again.
    Incomplete,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Frame {
    /// The header as it arrived; for a compressed message its opcode is `Compressed`.
    pub header: Header,
    pub message: Message,
    /// The compressor the client used, so the reply can be compressed the same way.
    pub compressor: Option<Compressor>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    Msg(OpMsg),
    Query(OpQuery),
    Reply(OpReply),
}

#[derive(Clone, Debug, PartialEq)]
pub enum DecodeError {
    /// The stream has lost its framing: close the connection.
    Fatal(Error),
    /// One well-delimited message was invalid: skip it and keep the connection.
    Rejected(Box<Rejected>),
}

/// A message whose length was valid but whose content was not.
#[derive(Clone, Debug, PartialEq)]
pub struct Rejected {
    /// The header as it arrived; reply to its `request_id`.
    pub header: Header,
    /// The opcode the client expects the reply in terms of (inside OP_COMPRESSED, the
    /// original one): OP_MSG is answered with OP_MSG, OP_QUERY with OP_REPLY.
    pub op_code: OpCode,
    /// The client set `moreToCome` and reads no reply, so none must be sent.
    pub more_to_come: bool,
    /// The compressor of the request, when it was one Basalt knows.
    pub compressor: Option<Compressor>,
    /// The bytes of the message, to drop from the buffer.
    pub consumed: usize,
    pub error: Error,
}

impl DecodeError {
    pub fn error(&self) -> &Error {
        match self {
            DecodeError::Fatal(error) => error,
            DecodeError::Rejected(rejected) => &rejected.error,
        }
    }

    pub fn is_fatal(&self) -> bool {
        matches!(self, DecodeError::Fatal(_))
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Fatal(error) => write!(f, "fatal wire error: {error}"),
            DecodeError::Rejected(rejected) => write!(
                f,
                "invalid message (request {}): {}",
                rejected.header.request_id, rejected.error
            ),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Decodes the message at the start of `buf`, if it is all there.
///
/// A bad length is reported as soon as its four bytes are in, and an unknown opcode as
/// soon as the header is, without waiting for a body that may never come.
pub fn decode(buf: &[u8]) -> Result<Decoded, DecodeError> {
    if buf.len() < 4 {
        return Ok(Decoded::Incomplete);
    }
    let message_length = i32_at(buf, 0);
    let len = match usize::try_from(message_length) {
        Ok(len) if (HEADER_SIZE_BYTES..=MAX_MESSAGE_SIZE_BYTES).contains(&len) => len,
        _ => {
            return Err(DecodeError::Fatal(protocol_error(format!(
                "bad message length: {message_length}, must be between {HEADER_SIZE_BYTES} \
                 and {MAX_MESSAGE_SIZE_BYTES}"
            ))))
        }
    };
    if buf.len() < HEADER_SIZE_BYTES {
        return Ok(Decoded::Incomplete);
    }
    let op = i32_at(buf, 12);
    let op_code = OpCode::from_i32(op)
        .ok_or_else(|| DecodeError::Fatal(protocol_error(format!("unknown opcode {op}"))))?;
    if buf.len() < len {
        return Ok(Decoded::Incomplete);
    }
    let header = Header {
        message_length,
        request_id: i32_at(buf, 4),
        response_to: i32_at(buf, 8),
        op_code,
    };
    let message = &buf[..len];
    let frame = match op_code {
        OpCode::Compressed => decompress(header, message)?,
        _ => parse(
            header,
            op_code,
            &message[..HEADER_SIZE_BYTES],
            &message[HEADER_SIZE_BYTES..],
            None,
            len,
        )?,
    };
    Ok(Decoded::Frame {
        frame,
        consumed: len,
    })
}

/// Unwraps OP_COMPRESSED and parses the original message.
fn decompress(header: Header, message: &[u8]) -> Result<Frame, DecodeError> {
    let data_at = HEADER_SIZE_BYTES + COMPRESSION_HEADER_SIZE_BYTES;
    if message.len() < data_at {
        // Without the original opcode there is no telling how to answer.
        return Err(DecodeError::Fatal(protocol_error(
            "OP_COMPRESSED is too short for its compression header",
        )));
    }
    let original = i32_at(message, HEADER_SIZE_BYTES);
    let uncompressed_size = i32_at(message, HEADER_SIZE_BYTES + 4);
    let compressor_id = message[HEADER_SIZE_BYTES + 8];
    let op_code = OpCode::from_i32(original).ok_or_else(|| {
        DecodeError::Fatal(protocol_error(format!(
            "unknown opcode {original} inside OP_COMPRESSED"
        )))
    })?;
    let compressor = Compressor::from_id(compressor_id);
    let reject = |error: Error| {
        DecodeError::Rejected(Box::new(Rejected {
            header,
            op_code,
            more_to_come: false,
            compressor,
            consumed: message.len(),
            error,
        }))
    };
    let Some(compressor) = compressor else {
        return Err(reject(Error::bad_value(format!(
            "compressor id {compressor_id} in message is not available"
        ))));
    };
    // Bounded before anything is allocated: a zip bomb is refused by its declaration.
    let size = match usize::try_from(uncompressed_size) {
        Ok(size) if size <= MAX_MESSAGE_SIZE_BYTES - HEADER_SIZE_BYTES => size,
        _ => {
            return Err(reject(Error::bad_value(format!(
                "decompressed message would be {uncompressed_size} bytes, over the maximum \
                 message size of {MAX_MESSAGE_SIZE_BYTES}"
            ))))
        }
    };
    let payload = compressor
        .decompress(&message[data_at..], size)
        .map_err(reject)?;
    // The header the message would have had uncompressed: MongoDB computes the OP_MSG
    // checksum before compressing, so the checksum covers this one.
    let original = Header {
        message_length: (HEADER_SIZE_BYTES + size) as i32,
        op_code,
        ..header
    };
    parse(
        header,
        op_code,
        &original.to_bytes(),
        &payload,
        Some(compressor),
        message.len(),
    )
}

/// Parses an uncompressed message of a known opcode: `header_bytes` are its header as
/// sent (or as it would have been sent uncompressed), `payload` what follows, and
/// `consumed` the length of the message on the wire.
fn parse(
    header: Header,
    op_code: OpCode,
    header_bytes: &[u8],
    payload: &[u8],
    compressor: Option<Compressor>,
    consumed: usize,
) -> Result<Frame, DecodeError> {
    let parsed = match op_code {
        OpCode::Msg => op_msg::parse(header_bytes, payload).map(Message::Msg),
        OpCode::Query => op_query::parse(payload).map(Message::Query),
        OpCode::Reply => op_reply::parse(payload).map(Message::Reply),
        OpCode::Compressed => Err(protocol_error(
            "OP_COMPRESSED may not wrap another OP_COMPRESSED",
        )),
    };
    parsed
        .map(|message| Frame {
            header,
            message,
            compressor,
        })
        .map_err(|error| {
            let more_to_come = op_code == OpCode::Msg
                && payload.get(..4).is_some_and(|flags| {
                    u32::from_le_bytes([flags[0], flags[1], flags[2], flags[3]])
                        & OpMsg::MORE_TO_COME
                        != 0
                });
            DecodeError::Rejected(Box::new(Rejected {
                header,
                op_code,
                more_to_come,
                compressor,
                consumed,
                error,
            }))
        })
}

/// The little-endian int32 at `at`; the caller has checked the bounds.
fn i32_at(bytes: &[u8], at: usize) -> i32 {
    i32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::Lcg;
    use crate::{encode_op_msg, encode_op_msg_with_sequences, encode_op_query, encode_op_reply};
    use crate::{DocumentSequence, MAX_BSON_NESTING_DEPTH};
    use basalt_error::ErrorCode;
    use bson::{rawdoc, RawDocumentBuf};

    const COMPRESSORS: [Option<Compressor>; 5] = [
        None,
        Some(Compressor::Noop),
        Some(Compressor::Snappy),
        Some(Compressor::Zlib),
        Some(Compressor::Zstd),
    ];

    fn frame_of(bytes: &[u8]) -> Frame {
        match decode(bytes).unwrap() {
            Decoded::Frame { frame, consumed } => {
                assert_eq!(consumed, bytes.len());
                frame
            }
            Decoded::Incomplete => panic!("incomplete"),
        }
    }

    fn rejected(bytes: &[u8]) -> Rejected {
        match decode(bytes) {
            Err(DecodeError::Rejected(rejected)) => {
                assert_eq!(rejected.consumed, bytes.len());
                *rejected
            }
            other => panic!("expected a rejected frame, got {other:?}"),
        }
    }

    fn fatal(bytes: &[u8]) -> Error {
        match decode(bytes) {
            Err(DecodeError::Fatal(error)) => error,
            other => panic!("expected a fatal error, got {other:?}"),
        }
    }

    fn insert_body() -> RawDocumentBuf {
        rawdoc! { "insert": "coll", "ordered": true, "$db": "test", "lsid": { "id": 1_i64 } }
    }

    fn sequences() -> Vec<DocumentSequence> {
        vec![DocumentSequence {
            identifier: "documents".into(),
            documents: (0..50)
                .map(|i| rawdoc! { "_id": i, "name": format!("document number {i}") })
                .collect(),
        }]
    }

    fn hello_query() -> OpQuery {
        OpQuery {
            flags: 4,
            full_collection_name: "admin.$cmd".into(),
            number_to_skip: 0,
            number_to_return: -1,
            query: rawdoc! { "isMaster": 1, "client": { "driver": { "name": "x" } } },
            return_fields_selector: Some(rawdoc! { "ok": 1 }),
        }
    }

    #[test]
    fn op_msg_round_trips_with_every_compressor() {
        let body = insert_body();
        for compressor in COMPRESSORS {
            for flags in [
                0,
                OpMsg::CHECKSUM_PRESENT,
                OpMsg::MORE_TO_COME | OpMsg::EXHAUST_ALLOWED,
            ] {
                let bytes =
                    encode_op_msg_with_sequences(7, 3, flags, &body, &sequences(), compressor);
                let frame = frame_of(&bytes);
                assert_eq!(frame.compressor, compressor);
                assert_eq!(frame.header.request_id, 7);
                assert_eq!(frame.header.response_to, 3);
                let expected_op = if compressor.is_some() {
                    OpCode::Compressed
                } else {
                    OpCode::Msg
                };
                assert_eq!(frame.header.op_code, expected_op);
                let Message::Msg(msg) = frame.message else {
                    panic!("not an OP_MSG")
                };
                assert_eq!(msg.flags, flags);
                assert_eq!(msg.body, body);
                assert_eq!(msg.sequences, sequences());

                let plain = encode_op_msg(8, 0, flags, &body, compressor);
                let Message::Msg(msg) = frame_of(&plain).message else {
                    panic!("not an OP_MSG")
                };
                assert!(msg.sequences.is_empty());
            }
        }
    }

    #[test]
    fn op_query_round_trips_with_every_compressor() {
        for compressor in COMPRESSORS {
            let bytes = encode_op_query(11, &hello_query(), compressor);
            let frame = frame_of(&bytes);
            assert_eq!(frame.compressor, compressor);
            assert_eq!(frame.message, Message::Query(hello_query()));
        }
    }

    #[test]
    fn op_reply_round_trips_with_every_compressor() {
        let docs = [rawdoc! { "ismaster": true, "ok": 1.0 }, rawdoc! { "n": 2 }];
        let refs: Vec<&bson::RawDocument> = docs.iter().map(|d| d.as_ref()).collect();
        for compressor in COMPRESSORS {
            let bytes = encode_op_reply(12, 11, OpReply::AWAIT_CAPABLE, 99, 5, &refs, compressor);
            let frame = frame_of(&bytes);
            assert_eq!(frame.header.response_to, 11);
            assert_eq!(
                frame.message,
                Message::Reply(OpReply {
                    response_flags: OpReply::AWAIT_CAPABLE,
                    cursor_id: 99,
                    starting_from: 5,
                    documents: docs.to_vec(),
                })
            );
        }
    }

    #[test]
    fn every_prefix_is_incomplete_and_extra_bytes_are_left() {
        let body = insert_body();
        let mut messages = vec![encode_op_query(1, &hello_query(), None)];
        for compressor in COMPRESSORS {
            messages.push(encode_op_msg_with_sequences(
                1,
                0,
                OpMsg::CHECKSUM_PRESENT,
                &body,
                &sequences(),
                compressor,
            ));
        }
        for bytes in messages {
            for len in 0..bytes.len() {
                assert_eq!(
                    decode(&bytes[..len]),
                    Ok(Decoded::Incomplete),
                    "prefix {len}"
                );
            }
            // A following message in the same buffer is left alone.
            let mut two = bytes.clone();
            two.extend_from_slice(&bytes[..10]);
            match decode(&two).unwrap() {
                Decoded::Frame { consumed, .. } => assert_eq!(consumed, bytes.len()),
                Decoded::Incomplete => panic!("incomplete"),
            }
        }
    }

    #[test]
    fn bad_lengths_are_fatal_as_soon_as_read() {
        for length in [
            i32::MIN,
            -1,
            0,
            15,
            (MAX_MESSAGE_SIZE_BYTES + 1) as i32,
            i32::MAX,
        ] {
            let error = fatal(&length.to_le_bytes());
            assert_eq!(error.code, ErrorCode::PROTOCOL_ERROR);
        }
        // The largest legal length only waits for more bytes.
        let max = (MAX_MESSAGE_SIZE_BYTES as i32).to_le_bytes();
        assert_eq!(decode(&max), Ok(Decoded::Incomplete));
    }

    #[test]
    fn unknown_opcodes_are_fatal_once_the_header_is_in() {
        let mut bytes = encode_op_msg(1, 0, 0, &insert_body(), None);
        for op in [0_i32, 2001, 2002, 2005, 2010, 9999] {
            bytes[12..16].copy_from_slice(&op.to_le_bytes());
            assert_eq!(decode(&bytes[..15]), Ok(Decoded::Incomplete));
            assert_eq!(fatal(&bytes[..16]).code, ErrorCode::PROTOCOL_ERROR, "{op}");
        }
    }

    #[test]
    fn invalid_content_is_rejected_with_the_request_id() {
        let mut bytes = encode_op_msg(42, 0, OpMsg::MORE_TO_COME, &insert_body(), None);
        // Corrupt the boolean of "ordered" into a 2.
        let at = bytes.windows(8).position(|w| w == b"ordered\0").unwrap() + 8;
        bytes[at] = 2;
        let rejected = rejected(&bytes);
        assert_eq!(rejected.header.request_id, 42);
        assert_eq!(rejected.op_code, OpCode::Msg);
        assert!(rejected.more_to_come);
        assert_eq!(rejected.error.code, ErrorCode::INVALID_BSON);
        let err = DecodeError::Rejected(Box::new(rejected));
        assert!(!err.is_fatal());
        assert_eq!(err.error().code, ErrorCode::INVALID_BSON);
        assert!(err.to_string().contains("request 42"));
    }

    #[test]
    fn checksum_failure_is_rejected() {
        for compressor in COMPRESSORS {
            let good = encode_op_msg(1, 0, OpMsg::CHECKSUM_PRESENT, &insert_body(), None);
            let mut bad = good.clone();
            let last = bad.len() - 1;
            bad[last] ^= 0xff;
            // Recompress the corrupted message so only the checksum is wrong.
            let payload = &bad[HEADER_SIZE_BYTES..];
            let bad = crate::header::frame(1, 0, OpCode::Msg, payload, compressor);
            let rejected = rejected(&bad);
            assert_eq!(rejected.error.code, ErrorCode::CHECKSUM_MISMATCH);
            assert_eq!(rejected.compressor, compressor);
        }
    }

    #[test]
    fn checksum_covers_the_uncompressed_header() {
        // A checksum computed over the compressed header does not verify.
        let body = insert_body();
        let plain = encode_op_msg(1, 0, 0, &body, Some(Compressor::Noop));
        let mut payload = plain[HEADER_SIZE_BYTES + COMPRESSION_HEADER_SIZE_BYTES..].to_vec();
        payload[..4].copy_from_slice(&OpMsg::CHECKSUM_PRESENT.to_le_bytes());
        let wrong_header = Header {
            message_length: (HEADER_SIZE_BYTES + COMPRESSION_HEADER_SIZE_BYTES + payload.len() + 4)
                as i32,
            request_id: 1,
            response_to: 0,
            op_code: OpCode::Compressed,
        };
        let crc = crc32c::crc32c_append(crc32c::crc32c(&wrong_header.to_bytes()), &payload);
        payload.extend_from_slice(&crc.to_le_bytes());
        let bytes = crate::header::frame(1, 0, OpCode::Msg, &payload, Some(Compressor::Noop));
        assert_eq!(rejected(&bytes).error.code, ErrorCode::CHECKSUM_MISMATCH);
    }

    /// An OP_COMPRESSED around `payload` with hand-set header fields.
    fn compressed(original: i32, size: i32, id: u8, payload: &[u8]) -> Vec<u8> {
        let mut bytes = Vec::new();
        let total = (HEADER_SIZE_BYTES + COMPRESSION_HEADER_SIZE_BYTES + payload.len()) as i32;
        bytes.extend_from_slice(&total.to_le_bytes());
        bytes.extend_from_slice(&5_i32.to_le_bytes());
        bytes.extend_from_slice(&0_i32.to_le_bytes());
        bytes.extend_from_slice(&2012_i32.to_le_bytes());
        bytes.extend_from_slice(&original.to_le_bytes());
        bytes.extend_from_slice(&size.to_le_bytes());
        bytes.push(id);
        bytes.extend_from_slice(payload);
        bytes
    }

    #[test]
    fn compression_errors() {
        let msg = encode_op_msg(5, 0, 0, &insert_body(), None);
        let payload = &msg[HEADER_SIZE_BYTES..];
        let size = payload.len() as i32;
        frame_of(&compressed(2013, size, 0, payload));

        let unknown_compressor = rejected(&compressed(2013, size, 9, payload));
        assert_eq!(unknown_compressor.error.code, ErrorCode::BAD_VALUE);
        assert_eq!(unknown_compressor.compressor, None);
        assert_eq!(unknown_compressor.op_code, OpCode::Msg);

        for wrong in [size - 1, size + 1, -1, i32::MAX] {
            let r = rejected(&compressed(2013, wrong, 0, payload));
            assert_eq!(r.error.code, ErrorCode::BAD_VALUE, "{wrong}");
        }
        let garbage = rejected(&compressed(2013, size, 3, b"not zstd at all"));
        assert_eq!(garbage.compressor, Some(Compressor::Zstd));

        assert_eq!(
            fatal(&compressed(2002, size, 0, payload)).code,
            ErrorCode::PROTOCOL_ERROR
        );
        let nested = rejected(&compressed(2012, size, 0, payload));
        assert_eq!(nested.error.code, ErrorCode::PROTOCOL_ERROR);

        let mut short = compressed(2013, size, 0, b"");
        short.truncate(HEADER_SIZE_BYTES + 8);
        let len = short.len() as i32;
        short[..4].copy_from_slice(&len.to_le_bytes());
        assert_eq!(fatal(&short).code, ErrorCode::PROTOCOL_ERROR);
    }

    #[test]
    fn zip_bomb_is_refused_before_allocating() {
        // Declares 2 GB: refused from the header alone.
        let r = rejected(&compressed(2013, i32::MAX, 2, b"x"));
        assert_eq!(r.error.code, ErrorCode::BAD_VALUE);
        // 40 MB of zeros that claims to be 1 KB: inflation stops at the declared size.
        let bomb = Compressor::Zlib.compress(&vec![0; 40_000_000]);
        let r = rejected(&compressed(2013, 1024, 2, &bomb));
        assert_eq!(r.error.code, ErrorCode::BAD_VALUE);
        // Just over the message limit once the header is added.
        let over = (MAX_MESSAGE_SIZE_BYTES - HEADER_SIZE_BYTES + 1) as i32;
        let r = rejected(&compressed(2013, over, 2, &bomb));
        assert_eq!(r.error.code, ErrorCode::BAD_VALUE);
    }

    #[test]
    fn large_documents_follow_the_internal_limit() {
        let big = |len: usize| {
            let mut doc = RawDocumentBuf::new();
            doc.append(bson::cstr!("s"), "x".repeat(len));
            doc
        };
        let fits = big(crate::MAX_BSON_OBJECT_INTERNAL_SIZE_BYTES - 16);
        assert!(fits.as_bytes().len() <= crate::MAX_BSON_OBJECT_INTERNAL_SIZE_BYTES);
        assert!(fits.as_bytes().len() > crate::MAX_BSON_OBJECT_SIZE_BYTES);
        frame_of(&encode_op_msg(1, 0, 0, &fits, None));
        let too_big = big(crate::MAX_BSON_OBJECT_INTERNAL_SIZE_BYTES);
        let r = rejected(&encode_op_msg(1, 0, 0, &too_big, None));
        assert_eq!(r.error.code, ErrorCode::BSON_OBJECT_TOO_LARGE);
    }

    #[test]
    fn deep_nesting_is_overflow() {
        let mut doc = rawdoc! {};
        for _ in 0..=MAX_BSON_NESTING_DEPTH {
            doc = rawdoc! { "a": doc };
        }
        let r = rejected(&encode_op_msg(1, 0, 0, &doc, None));
        assert_eq!(r.error.code, ErrorCode::OVERFLOW);
    }

    /// Decodes `bytes`, checking the invariants that must hold whatever they are.
    fn decode_checked(bytes: &[u8]) {
        match decode(bytes) {
            Ok(Decoded::Frame { frame, consumed }) => {
                assert!(consumed >= HEADER_SIZE_BYTES && consumed <= bytes.len());
                if let Message::Msg(msg) = &frame.message {
                    // Validated documents are readable by the bson crate...
                    bson::Document::try_from(msg.body.as_ref()).unwrap();
                    for sequence in &msg.sequences {
                        for doc in &sequence.documents {
                            bson::Document::try_from(doc.as_ref()).unwrap();
                        }
                    }
                    // ...and what decodes re-encodes to the same message.
                    let again = encode_op_msg_with_sequences(
                        frame.header.request_id,
                        frame.header.response_to,
                        msg.flags,
                        &msg.body,
                        &msg.sequences,
                        frame.compressor,
                    );
                    assert_eq!(frame_of(&again).message, frame.message);
                }
            }
            Ok(Decoded::Incomplete) => {}
            Err(DecodeError::Fatal(_)) => {}
            Err(DecodeError::Rejected(r)) => {
                assert!(r.consumed >= HEADER_SIZE_BYTES && r.consumed <= bytes.len());
            }
        }
    }

    #[test]
    fn random_and_mutated_input_never_panics() {
        let body = rawdoc! {
            "find": "c", "filter": { "a": { "$in": [1, "x", null, 2.5] } },
            "code": bson::RawBson::JavaScriptCodeWithScope(bson::RawJavaScriptCodeWithScope {
                code: "f".into(),
                scope: rawdoc! { "s": [true] },
            }),
            "$db": "test",
        };
        let mut seeds = vec![encode_op_query(1, &hello_query(), None)];
        for compressor in COMPRESSORS {
            seeds.push(encode_op_msg_with_sequences(
                1,
                0,
                OpMsg::CHECKSUM_PRESENT,
                &body,
                &sequences()[..],
                compressor,
            ));
            seeds.push(encode_op_msg(2, 0, 0, &body, compressor));
        }
        let mut rng = Lcg(0x5eed);
        for _ in 0..4000 {
            let seed = &seeds[rng.below(seeds.len())];
            let mut bytes = seed.clone();
            match rng.below(5) {
                // Flip a few bytes anywhere.
                0 => {
                    for _ in 0..=rng.below(4) {
                        let at = rng.below(bytes.len());
                        bytes[at] = rng.next() as u8;
                    }
                }
                // Flip bytes after the header, keeping the frame length honest.
                1 => {
                    let at = HEADER_SIZE_BYTES + rng.below(bytes.len() - HEADER_SIZE_BYTES);
                    bytes[at] ^= 1 << rng.below(8);
                }
                // Truncate, then claim the truncated length.
                2 => {
                    bytes.truncate(HEADER_SIZE_BYTES + rng.below(bytes.len()));
                    let len = bytes.len() as i32;
                    bytes[..4].copy_from_slice(&len.to_le_bytes());
                }
                // Insert or remove a byte inside, then fix the length.
                3 => {
                    let at = HEADER_SIZE_BYTES + rng.below(bytes.len() - HEADER_SIZE_BYTES);
                    if rng.below(2) == 0 {
                        bytes.insert(at, rng.next() as u8);
                    } else {
                        bytes.remove(at);
                    }
                    let len = bytes.len() as i32;
                    bytes[..4].copy_from_slice(&len.to_le_bytes());
                }
                // Pure noise behind a plausible header.
                _ => {
                    let len = HEADER_SIZE_BYTES + rng.below(200);
                    bytes = (0..len).map(|_| rng.next() as u8).collect();
                    bytes[..4].copy_from_slice(&(len as i32).to_le_bytes());
                    let op: i32 = [1, 2004, 2012, 2013][rng.below(4)];
                    bytes[12..16].copy_from_slice(&op.to_le_bytes());
                }
            }
            decode_checked(&bytes);
        }
    }
}
