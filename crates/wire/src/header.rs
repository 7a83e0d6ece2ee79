//! The 16-byte header that opens every wire message, the opcodes Basalt speaks, and the
//! framing shared by all encoders (including wrapping in OP_COMPRESSED).

use crate::compression::Compressor;

/// messageLength, requestID, responseTo and opCode, each a little-endian int32.
pub const HEADER_SIZE_BYTES: usize = 16;

/// originalOpcode (int32), uncompressedSize (int32) and compressorId (uint8).
pub(crate) const COMPRESSION_HEADER_SIZE_BYTES: usize = 9;

/// The opcodes Basalt understands. Everything else (the legacy OP_INSERT family, removed
/// from MongoDB 6.0) is unknown, and MongoDB closes the connection on those.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpCode {
    Reply,
    Query,
    Compressed,
    Msg,
}

impl OpCode {
    pub fn from_i32(code: i32) -> Option<Self> {
        match code {
            1 => Some(OpCode::Reply),
            2004 => Some(OpCode::Query),
            2012 => Some(OpCode::Compressed),
            2013 => Some(OpCode::Msg),
            _ => None,
        }
    }

    pub fn as_i32(self) -> i32 {
        match self {
            OpCode::Reply => 1,
            OpCode::Query => 2004,
            OpCode::Compressed => 2012,
            OpCode::Msg => 2013,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The whole message, header included, as it is on the wire.
    pub message_length: i32,
    pub request_id: i32,
    /// The `request_id` this message answers; 0 for requests.
    pub response_to: i32,
    pub op_code: OpCode,
}

impl Header {
    pub(crate) fn to_bytes(self) -> [u8; HEADER_SIZE_BYTES] {
        let mut out = [0; HEADER_SIZE_BYTES];
        out[0..4].copy_from_slice(&self.message_length.to_le_bytes());
        out[4..8].copy_from_slice(&self.request_id.to_le_bytes());
        out[8..12].copy_from_slice(&self.response_to.to_le_bytes());
        out[12..16].copy_from_slice(&self.op_code.as_i32().to_le_bytes());
        out
    }
}

/// A length as the int32 the wire wants. Encoders are only given messages within the
/// 48 MB limit, so a larger one is a bug in the caller.
pub(crate) fn wire_len(len: usize) -> i32 {
    debug_assert!(
        len <= i32::MAX as usize,
        "wire length {len} overflows int32"
    );
    len as i32
}

/// Prepends the header to `payload` (everything after the header), wrapping the message
/// in OP_COMPRESSED when a compressor is given.
pub(crate) fn frame(
    request_id: i32,
    response_to: i32,
    op_code: OpCode,
    payload: &[u8],
    compressor: Option<Compressor>,
) -> Vec<u8> {
    let Some(compressor) = compressor else {
        let header = Header {
            message_length: wire_len(HEADER_SIZE_BYTES + payload.len()),
            request_id,
            response_to,
            op_code,
        };
        let mut out = Vec::with_capacity(HEADER_SIZE_BYTES + payload.len());
        out.extend_from_slice(&header.to_bytes());
        out.extend_from_slice(payload);
        return out;
    };
    let packed = compressor.compress(payload);
    let total = HEADER_SIZE_BYTES + COMPRESSION_HEADER_SIZE_BYTES + packed.len();
    let header = Header {
        message_length: wire_len(total),
        request_id,
        response_to,
        op_code: OpCode::Compressed,
    };
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(&header.to_bytes());
    out.extend_from_slice(&op_code.as_i32().to_le_bytes());
    out.extend_from_slice(&wire_len(payload.len()).to_le_bytes());
    out.push(compressor.id());
    out.extend_from_slice(&packed);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opcodes_round_trip() {
        for op in [
            OpCode::Reply,
            OpCode::Query,
            OpCode::Compressed,
            OpCode::Msg,
        ] {
            assert_eq!(OpCode::from_i32(op.as_i32()), Some(op));
        }
        for unknown in [0, 2001, 2002, 2005, 2010, 2011, 2014, -1] {
            assert_eq!(OpCode::from_i32(unknown), None);
        }
    }

    #[test]
    fn header_is_little_endian() {
        let header = Header {
            message_length: 0x0102_0304,
            request_id: 7,
            response_to: -1,
            op_code: OpCode::Msg,
        };
        let bytes = header.to_bytes();
        assert_eq!(&bytes[0..4], &[4, 3, 2, 1]);
        assert_eq!(&bytes[4..8], &[7, 0, 0, 0]);
        assert_eq!(&bytes[8..12], &[0xff; 4]);
        assert_eq!(&bytes[12..16], &2013_i32.to_le_bytes());
    }

    #[test]
    fn frame_wraps_in_op_compressed() {
        let plain = frame(1, 2, OpCode::Msg, b"payload", None);
        assert_eq!(plain.len(), 16 + 7);
        assert_eq!(&plain[16..], b"payload");

        let packed = frame(1, 2, OpCode::Msg, b"payload", Some(Compressor::Noop));
        assert_eq!(&packed[12..16], &2012_i32.to_le_bytes());
        assert_eq!(&packed[16..20], &2013_i32.to_le_bytes());
        assert_eq!(&packed[20..24], &7_i32.to_le_bytes());
        assert_eq!(packed[24], 0);
        assert_eq!(&packed[25..], b"payload");
        assert_eq!(
            packed.len() as i32,
            i32::from_le_bytes(packed[..4].try_into().unwrap())
        );
    }
}
