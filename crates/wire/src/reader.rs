//! A bounds-checked cursor over the bytes of one message.
//!
//! Every field of a wire message is read through here so that a short or lying message
//! becomes an `Err` with a MongoDB code rather than an out-of-bounds panic.

use basalt_error::{Error, ErrorCode, Result};
use bson::{RawDocument, RawDocumentBuf};

use crate::validate::validate_document;
use crate::MAX_BSON_OBJECT_INTERNAL_SIZE_BYTES;

pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.pos == self.buf.len()
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(crate) fn bytes(&mut self, len: usize, what: &str) -> Result<&'a [u8]> {
        if len > self.remaining() {
            return Err(protocol_error(format!(
                "message ends inside {what}: need {len} bytes, {} left",
                self.remaining()
            )));
        }
        let bytes = &self.buf[self.pos..self.pos + len];
        self.pos += len;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let mut out = [0; N];
        out.copy_from_slice(self.bytes(N, what)?);
        Ok(out)
    }

    pub(crate) fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.array::<1>(what)?[0])
    }

    pub(crate) fn i32(&mut self, what: &str) -> Result<i32> {
        self.array(what).map(i32::from_le_bytes)
    }

    pub(crate) fn u32(&mut self, what: &str) -> Result<u32> {
        self.array(what).map(u32::from_le_bytes)
    }

    pub(crate) fn i64(&mut self, what: &str) -> Result<i64> {
        self.array(what).map(i64::from_le_bytes)
    }

    /// A NUL-terminated UTF-8 string, as used for namespaces and sequence identifiers.
    pub(crate) fn cstr(&mut self, what: &str) -> Result<&'a str> {
        let rest = &self.buf[self.pos..];
        let len = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| protocol_error(format!("{what} is not NUL-terminated")))?;
        let text = std::str::from_utf8(&rest[..len])
            .map_err(|_| protocol_error(format!("{what} is not valid UTF-8")))?;
        self.pos += len + 1;
        Ok(text)
    }

    /// One BSON document whose declared length must fit in what is left, fully validated.
    pub(crate) fn document(&mut self, what: &str) -> Result<RawDocumentBuf> {
        let declared = match self.buf.get(self.pos..self.pos + 4) {
            Some(len) => i32::from_le_bytes([len[0], len[1], len[2], len[3]]),
            None => {
                return Err(invalid_bson(format!(
                    "{what}: {} bytes left, too few for a BSON document",
                    self.remaining()
                )))
            }
        };
        if declared < 5 {
            return Err(invalid_bson(format!(
                "{what}: BSON document length {declared} is below the minimum of 5"
            )));
        }
        let len = declared as usize;
        if len > MAX_BSON_OBJECT_INTERNAL_SIZE_BYTES {
            return Err(Error::new(
                ErrorCode::BSON_OBJECT_TOO_LARGE,
                format!(
                    "BSONObj size: {len} (0x{len:X}) is invalid. Size must be between 0 and \
                     {MAX_BSON_OBJECT_INTERNAL_SIZE_BYTES}(16MB)"
                ),
            ));
        }
        if len > self.remaining() {
            return Err(invalid_bson(format!(
                "{what}: BSON document length {len} exceeds the {} bytes left in its section",
                self.remaining()
            )));
        }
        let bytes = self.bytes(len, what)?;
        let doc =
            RawDocument::from_bytes(bytes).map_err(|e| invalid_bson(format!("{what}: {e}")))?;
        validate_document(doc)?;
        Ok(doc.to_owned())
    }
}

pub(crate) fn protocol_error(message: impl Into<String>) -> Error {
    Error::new(ErrorCode::PROTOCOL_ERROR, message)
}

pub(crate) fn invalid_bson(message: impl Into<String>) -> Error {
    Error::new(ErrorCode::INVALID_BSON, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    #[test]
    fn integers_are_little_endian_and_bounded() {
        let bytes = [1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 7];
        let mut r = Reader::new(&bytes);
        assert_eq!(r.i32("a").unwrap(), 1);
        assert_eq!(r.u32("b").unwrap(), u32::MAX);
        assert_eq!(r.remaining(), 1);
        let err = r.i64("c").unwrap_err();
        assert_eq!(err.code, ErrorCode::PROTOCOL_ERROR);
        assert_eq!(r.u8("d").unwrap(), 7);
        assert!(r.is_empty());
    }

    #[test]
    fn cstr_needs_terminator_and_utf8() {
        assert_eq!(Reader::new(b"db.c\0x").cstr("ns").unwrap(), "db.c");
        assert!(Reader::new(b"db.c").cstr("ns").is_err());
        assert!(Reader::new(b"\xff\0").cstr("ns").is_err());
    }

    #[test]
    fn document_length_must_fit_section() {
        let doc = rawdoc! { "a": 1 };
        let mut bytes = doc.as_bytes().to_vec();
        let mut r = Reader::new(&bytes);
        assert_eq!(r.document("body").unwrap(), doc);

        bytes.pop();
        let err = Reader::new(&bytes).document("body").unwrap_err();
        assert_eq!(err.code, ErrorCode::INVALID_BSON);

        let err = Reader::new(&[4, 0, 0, 0, 0]).document("body").unwrap_err();
        assert_eq!(err.code, ErrorCode::INVALID_BSON);

        let too_big = ((MAX_BSON_OBJECT_INTERNAL_SIZE_BYTES + 1) as i32).to_le_bytes();
        let err = Reader::new(&too_big).document("body").unwrap_err();
        assert_eq!(err.code, ErrorCode::BSON_OBJECT_TOO_LARGE);
    }
}
