//! Full structural validation of a BSON document.
//!
//! `RawDocument::from_bytes` checks only the outer length and terminator; the elements are
//! parsed lazily, so a malformed nested value would surface as an error (or worse, a
//! surprise) deep inside a command. The server validates every document it receives once,
//! here, like MongoDB's `validateBSON`, and afterwards reads them in place with confidence.
//!
//! The walk is iterative with an explicit stack, so hostile nesting cannot overflow the
//! thread's stack; depth is capped at MongoDB's default maximum.

use basalt_error::{Error, ErrorCode, Result};
use bson::RawDocument;

use crate::reader::invalid_bson;

/// How many documents may nest inside the top-level one (MongoDB's
/// `BSONDepth::kDefaultMaxAllowableDepth`).
pub const MAX_BSON_NESTING_DEPTH: usize = 200;

/// The smallest code-with-scope value: total length, an empty string, an empty document.
const MIN_CODE_WITH_SCOPE_SIZE_BYTES: usize = 4 + 5 + 5;

/// Checks every element of `doc`, recursively: known type tags, lengths that agree with
/// their container, NUL-terminated UTF-8 keys and strings, booleans that are 0 or 1,
/// consistent code-with-scope and old-binary lengths, and nesting within
/// [`MAX_BSON_NESTING_DEPTH`]. Errors are `InvalidBSON` (22), or `Overflow` (15) for depth.
pub fn validate_document(doc: &RawDocument) -> Result<()> {
    Walker {
        bytes: doc.as_bytes(),
    }
    .walk()
}

/// A field name the walker found (valid UTF-8), as error messages show it.
#[derive(Clone, Copy)]
struct FieldName<'a>(&'a [u8]);

impl std::fmt::Display for FieldName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&String::from_utf8_lossy(self.0))
    }
}

/// Whether `bytes` are UTF-8; field names and most strings are ASCII, which is checked a
/// word at a time before the full decoder is asked.
fn is_utf8(bytes: &[u8]) -> bool {
    bytes.is_ascii() || std::str::from_utf8(bytes).is_ok()
}

struct Walker<'a> {
    bytes: &'a [u8],
}

/// One open document; `end` is one past its terminating NUL.
struct Open {
    end: usize,
}

impl Walker<'_> {
    fn walk(&self) -> Result<()> {
        let total = self.bytes.len();
        let declared = self.i32_at(0, total, "document length")?;
        if declared < 5 || declared as usize != total {
            return Err(invalid_bson(format!(
                "document length {declared} disagrees with its {total} bytes"
            )));
        }
        if self.bytes[total - 1] != 0 {
            return Err(invalid_bson("document is not terminated with EOO"));
        }

        let mut stack = vec![Open { end: total }];
        let mut pos = 4;
        while let Some(open) = stack.last() {
            // Every value must end before the terminator of the document holding it.
            let limit = open.end - 1;
            let tag = self.bytes[pos];
            if tag == 0 {
                if pos != limit {
                    return Err(invalid_bson("incorrect BSON length: EOO before the end"));
                }
                pos += 1;
                stack.pop();
                continue;
            }
            let key = FieldName(self.cstr_at(pos + 1, limit, "field name")?);
            pos += 1 + key.0.len() + 1;
            let value_at = pos;
            pos = match tag {
                0x01 | 0x09 | 0x11 | 0x12 => self.fixed(pos, 8, limit, key)?,
                0x10 => self.fixed(pos, 4, limit, key)?,
                0x07 => self.fixed(pos, 12, limit, key)?,
                0x13 => self.fixed(pos, 16, limit, key)?,
                0x06 | 0x0A | 0x7F | 0xFF => pos,
                0x08 => {
                    let end = self.fixed(pos, 1, limit, key)?;
                    if self.bytes[pos] > 1 {
                        return Err(invalid_bson(format!(
                            "field '{key}': boolean is neither false nor true"
                        )));
                    }
                    end
                }
                0x02 | 0x0D | 0x0E => self.string_at(pos, limit, key)?,
                0x0C => {
                    let end = self.string_at(pos, limit, key)?;
                    self.fixed(end, 12, limit, key)?
                }
                0x0B => {
                    let pattern = self.cstr_at(pos, limit, "regex pattern")?;
                    let options_at = pos + pattern.len() + 1;
                    let options = self.cstr_at(options_at, limit, "regex options")?;
                    options_at + options.len() + 1
                }
                0x05 => self.binary_at(pos, limit, key)?,
                0x03 | 0x04 => {
                    let end = self.nested_at(pos, limit, key)?;
                    push(&mut stack, end)?;
                    // Walk into the child; its bytes are contiguous, so when it pops, `pos`
                    // is exactly where the parent resumes.
                    pos + 4
                }
                0x0F => {
                    let declared = self.i32_at(pos, limit, "code with scope length")?;
                    let cws_len = usize::try_from(declared).unwrap_or(0);
                    if cws_len < MIN_CODE_WITH_SCOPE_SIZE_BYTES || cws_len > limit - value_at {
                        return Err(invalid_bson(format!(
                            "field '{key}': code with scope length {declared} is invalid"
                        )));
                    }
                    let cws_end = value_at + cws_len;
                    let scope_at = self.string_at(pos + 4, cws_end, key)?;
                    let scope_end = self.nested_at(scope_at, cws_end, key)?;
                    if scope_end != cws_end {
                        return Err(invalid_bson(format!(
                            "field '{key}': code with scope length disagrees with its parts"
                        )));
                    }
                    push(&mut stack, scope_end)?;
                    scope_at + 4
                }
                other => {
                    return Err(invalid_bson(format!(
                        "field '{key}': unrecognized BSON type {other}"
                    )))
                }
            };
        }
        debug_assert_eq!(pos, total);
        Ok(())
    }

    fn i32_at(&self, at: usize, limit: usize, what: &str) -> Result<i32> {
        match self.bytes.get(at..at + 4) {
            Some(b) if at + 4 <= limit => Ok(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            _ => Err(invalid_bson(format!(
                "{what} runs past the end of its document"
            ))),
        }
    }

    /// A value of `len` bytes at `at`; returns where it ends.
    fn fixed(&self, at: usize, len: usize, limit: usize, key: FieldName<'_>) -> Result<usize> {
        if at + len > limit {
            return Err(invalid_bson(format!(
                "field '{key}': value runs past the end of its document"
            )));
        }
        Ok(at + len)
    }

    /// A NUL-terminated UTF-8 string starting at `at` whose terminator lies before `limit`.
    fn cstr_at(&self, at: usize, limit: usize, what: &str) -> Result<&[u8]> {
        let region = self.bytes.get(at..limit).unwrap_or_default();
        let len = memchr::memchr(0, region)
            .ok_or_else(|| invalid_bson(format!("{what} is not NUL-terminated")))?;
        let text = &region[..len];
        if !is_utf8(text) {
            return Err(invalid_bson(format!("{what} is not valid UTF-8")));
        }
        Ok(text)
    }

    /// A length-prefixed UTF-8 string (string, code, symbol); returns where it ends.
    fn string_at(&self, at: usize, limit: usize, key: FieldName<'_>) -> Result<usize> {
        let declared = self.i32_at(at, limit, "string length")?;
        let len = usize::try_from(declared).unwrap_or(0);
        if len == 0 || len > limit - (at + 4) {
            return Err(invalid_bson(format!(
                "field '{key}': string length {declared} is invalid"
            )));
        }
        let body = &self.bytes[at + 4..at + 4 + len];
        if body[len - 1] != 0 {
            return Err(invalid_bson(format!(
                "field '{key}': string is not NUL-terminated"
            )));
        }
        if !is_utf8(&body[..len - 1]) {
            return Err(invalid_bson(format!(
                "field '{key}': string is not valid UTF-8"
            )));
        }
        Ok(at + 4 + len)
    }

    fn binary_at(&self, at: usize, limit: usize, key: FieldName<'_>) -> Result<usize> {
        let declared = self.i32_at(at, limit, "binary length")?;
        let len = usize::try_from(declared).map_err(|_| {
            invalid_bson(format!(
                "field '{key}': binary length {declared} is negative"
            ))
        })?;
        let data_at = at + 5;
        let end = self.fixed(at, 5 + len, limit, key)?;
        // Subtype 2 ("old binary") repeats the length inside; readers rely on it agreeing.
        if self.bytes[at + 4] == 0x02 {
            let inner = self.i32_at(data_at, end, "old binary inner length")?;
            if usize::try_from(inner).ok() != len.checked_sub(4) {
                return Err(invalid_bson(format!(
                    "field '{key}': old binary inner length {inner} disagrees with {len}"
                )));
            }
        }
        Ok(end)
    }

    /// The header of an embedded document at `at` that must end by `limit`; returns its end.
    /// Its elements are checked by the main walk.
    fn nested_at(&self, at: usize, limit: usize, key: FieldName<'_>) -> Result<usize> {
        let declared = self.i32_at(at, limit, "embedded document length")?;
        let len = usize::try_from(declared).unwrap_or(0);
        if len < 5 || len > limit - at {
            return Err(invalid_bson(format!(
                "field '{key}': embedded document length {declared} is invalid"
            )));
        }
        if self.bytes[at + len - 1] != 0 {
            return Err(invalid_bson(format!(
                "field '{key}': embedded document is not terminated with EOO"
            )));
        }
        Ok(at + len)
    }
}

fn push(stack: &mut Vec<Open>, end: usize) -> Result<()> {
    // The stack also holds the top-level document, which is not nesting.
    if stack.len() > MAX_BSON_NESTING_DEPTH {
        return Err(Error::new(
            ErrorCode::OVERFLOW,
            "BSONObj exceeds maximum nested object depth",
        ));
    }
    stack.push(Open { end });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::oid::ObjectId;
    use bson::spec::BinarySubtype;
    use bson::{rawdoc, Binary, DateTime, Decimal128, Regex, Timestamp};

    /// Wraps element bytes in a document header and terminator.
    fn doc(elements: &[u8]) -> Vec<u8> {
        let len = (4 + elements.len() + 1) as i32;
        let mut out = len.to_le_bytes().to_vec();
        out.extend_from_slice(elements);
        out.push(0);
        out
    }

    fn check(bytes: &[u8]) -> Result<()> {
        let doc = RawDocument::from_bytes(bytes).map_err(Error::from)?;
        validate_document(doc)
    }

    fn code_of(bytes: &[u8]) -> ErrorCode {
        check(bytes).unwrap_err().code
    }

    #[test]
    fn accepts_every_type() {
        let scope = rawdoc! { "x": 1 };
        let doc = rawdoc! {
            "double": 1.5,
            "string": "héllo",
            "doc": { "a": { "b": [1, 2, { "c": null }] } },
            "array": [1, "two", [3]],
            "binary": Binary { subtype: BinarySubtype::Generic, bytes: vec![1, 2, 3] },
            "old": Binary { subtype: BinarySubtype::BinaryOld, bytes: vec![9, 9] },
            "undefined": bson::RawBson::Undefined,
            "oid": ObjectId::new(),
            "bool": true,
            "date": DateTime::from_millis(5),
            "null": null,
            "regex": Regex { pattern: "^a".try_into().unwrap(), options: "i".try_into().unwrap() },
            "code": bson::RawBson::JavaScriptCode("f()".into()),
            "symbol": bson::RawBson::Symbol("s".into()),
            "cws": bson::RawBson::JavaScriptCodeWithScope(bson::RawJavaScriptCodeWithScope {
                code: "g()".into(),
                scope,
            }),
            "int": 7,
            "ts": Timestamp { time: 1, increment: 2 },
            "long": 8_i64,
            "decimal": Decimal128::from_bytes([0; 16]),
            "min": bson::RawBson::MinKey,
            "max": bson::RawBson::MaxKey,
            "empty": {},
        };
        validate_document(&doc).unwrap();
        // Every element must also be readable by the bson crate once validated.
        for element in doc.iter() {
            element.unwrap();
        }
    }

    #[test]
    fn whatever_validates_the_bson_crate_can_read() {
        let original = rawdoc! {
            "s": "text", "d": { "a": [1, 2.5, { "b": null }] }, "t": true, "i": 1_i64,
            "bin": Binary { subtype: BinarySubtype::BinaryOld, bytes: vec![1, 2] },
            "re": Regex { pattern: "x".try_into().unwrap(), options: "".try_into().unwrap() },
            "cws": bson::RawBson::JavaScriptCodeWithScope(bson::RawJavaScriptCodeWithScope {
                code: "c".into(),
                scope: rawdoc! { "z": "y" },
            }),
        }
        .into_bytes();
        let mut rng = crate::test_rng::Lcg(7);
        let mut accepted = 0;
        for _ in 0..5000 {
            let mut bytes = original.clone();
            for _ in 0..=rng.below(3) {
                let at = rng.below(bytes.len());
                bytes[at] = match rng.below(3) {
                    0 => rng.next() as u8,
                    1 => bytes[at].wrapping_add(1),
                    _ => bytes[at].wrapping_sub(1),
                };
            }
            let Ok(doc) = RawDocument::from_bytes(&bytes) else {
                continue;
            };
            if validate_document(doc).is_ok() {
                accepted += 1;
                bson::Document::try_from(doc).unwrap();
            }
        }
        // Some mutations (changed values, renamed keys) stay valid; the test must see them.
        assert!(accepted > 100, "{accepted}");
    }

    #[test]
    fn accepts_db_pointer() {
        // 0x0C: namespace string then a 12-byte ObjectId.
        let mut el = b"\x0cp\0".to_vec();
        el.extend_from_slice(&3_i32.to_le_bytes());
        el.extend_from_slice(b"db\0");
        el.extend_from_slice(&[7; 12]);
        check(&doc(&el)).unwrap();
    }

    #[test]
    fn rejects_unknown_type_and_bad_bool() {
        assert_eq!(code_of(&doc(b"\x14a\0")), ErrorCode::INVALID_BSON);
        assert_eq!(code_of(&doc(b"\x08a\0\x02")), ErrorCode::INVALID_BSON);
        check(&doc(b"\x08a\0\x01")).unwrap();
    }

    #[test]
    fn rejects_bad_keys() {
        assert_eq!(code_of(&doc(b"\x0a\xff\0")), ErrorCode::INVALID_BSON);
        // A multi-byte character is decoded in full; one cut short is not UTF-8.
        check(&doc(b"\x0acl\xc3\xa9\0")).unwrap();
        assert_eq!(code_of(&doc(b"\x0acl\xc3\0")), ErrorCode::INVALID_BSON);
        // The key runs into the document's terminator.
        assert_eq!(code_of(&doc(b"\x0aabc")), ErrorCode::INVALID_BSON);
    }

    #[test]
    fn rejects_bad_strings() {
        let string = |len: i32, body: &[u8]| {
            let mut el = b"\x02s\0".to_vec();
            el.extend_from_slice(&len.to_le_bytes());
            el.extend_from_slice(body);
            doc(&el)
        };
        check(&string(3, b"ok\0")).unwrap();
        assert_eq!(code_of(&string(0, b"")), ErrorCode::INVALID_BSON);
        assert_eq!(code_of(&string(-1, b"")), ErrorCode::INVALID_BSON);
        assert_eq!(code_of(&string(3, b"okx")), ErrorCode::INVALID_BSON);
        assert_eq!(code_of(&string(3, b"\xff\xfe\0")), ErrorCode::INVALID_BSON);
        assert_eq!(code_of(&string(30, b"ok\0")), ErrorCode::INVALID_BSON);
        // Interior NULs are legal in BSON strings.
        check(&string(4, b"a\0b\0")).unwrap();
    }

    #[test]
    fn rejects_fixed_values_past_the_end() {
        assert_eq!(code_of(&doc(b"\x10i\0\x01\x00")), ErrorCode::INVALID_BSON);
        assert_eq!(
            code_of(&doc(b"\x07o\0\x01\x02\x03")),
            ErrorCode::INVALID_BSON
        );
        assert_eq!(code_of(&doc(b"\x0br\0abc")), ErrorCode::INVALID_BSON);
        assert_eq!(code_of(&doc(b"\x0br\0a\0b")), ErrorCode::INVALID_BSON);
    }

    #[test]
    fn rejects_nested_lengths_that_disagree() {
        let inner = rawdoc! { "a": 1 };
        let mut el = b"\x03d\0".to_vec();
        el.extend_from_slice(inner.as_bytes());
        check(&doc(&el)).unwrap();

        // Declared one byte longer than it is: swallows the parent's terminator.
        let mut longer = el.clone();
        longer[3] += 1;
        assert_eq!(code_of(&doc(&longer)), ErrorCode::INVALID_BSON);

        // Declared one byte shorter: its EOO is not where its length says.
        let mut shorter = el.clone();
        shorter[3] -= 1;
        assert_eq!(code_of(&doc(&shorter)), ErrorCode::INVALID_BSON);

        // An EOO in the middle of the nested elements.
        let mut early = b"\x03d\0".to_vec();
        early.extend_from_slice(&12_i32.to_le_bytes());
        early.extend_from_slice(b"\x0aa\0\0\x0ab\0\0");
        assert_eq!(code_of(&doc(&early)), ErrorCode::INVALID_BSON);

        // Too short to be a document.
        let mut tiny = b"\x04d\0".to_vec();
        tiny.extend_from_slice(&4_i32.to_le_bytes());
        assert_eq!(code_of(&doc(&tiny)), ErrorCode::INVALID_BSON);
    }

    #[test]
    fn rejects_bad_binary() {
        let binary = |len: i32, subtype: u8, data: &[u8]| {
            let mut el = b"\x05b\0".to_vec();
            el.extend_from_slice(&len.to_le_bytes());
            el.push(subtype);
            el.extend_from_slice(data);
            doc(&el)
        };
        check(&binary(2, 0, b"ab")).unwrap();
        assert_eq!(code_of(&binary(-1, 0, b"")), ErrorCode::INVALID_BSON);
        assert_eq!(code_of(&binary(9, 0, b"ab")), ErrorCode::INVALID_BSON);
        check(&binary(6, 2, b"\x02\0\0\0ab")).unwrap();
        assert_eq!(
            code_of(&binary(6, 2, b"\x03\0\0\0ab")),
            ErrorCode::INVALID_BSON
        );
        assert_eq!(code_of(&binary(2, 2, b"ab")), ErrorCode::INVALID_BSON);
    }

    #[test]
    fn rejects_bad_code_with_scope() {
        let cws = |total: i32, code: &[u8], scope: &[u8]| {
            let mut el = b"\x0fc\0".to_vec();
            el.extend_from_slice(&total.to_le_bytes());
            el.extend_from_slice(&(code.len() as i32).to_le_bytes());
            el.extend_from_slice(code);
            el.extend_from_slice(scope);
            doc(&el)
        };
        let scope = rawdoc! { "x": 1 };
        let right = (4 + 4 + 3 + scope.as_bytes().len()) as i32;
        check(&cws(right, b"f(\0", scope.as_bytes())).unwrap();
        assert_eq!(
            code_of(&cws(right + 1, b"f(\0", scope.as_bytes())),
            ErrorCode::INVALID_BSON
        );
        assert_eq!(
            code_of(&cws(right - 1, b"f(\0", scope.as_bytes())),
            ErrorCode::INVALID_BSON
        );
        assert_eq!(code_of(&cws(13, b"\0", b"")), ErrorCode::INVALID_BSON);
        let mut bad_scope = scope.as_bytes().to_vec();
        bad_scope[4] = 0x42;
        assert_eq!(
            code_of(&cws(right, b"f(\0", &bad_scope)),
            ErrorCode::INVALID_BSON
        );
    }

    fn nested(depth: usize) -> Vec<u8> {
        let mut bytes = rawdoc! {}.into_bytes();
        for _ in 0..depth {
            let mut el = b"\x03a\0".to_vec();
            el.extend_from_slice(&bytes);
            bytes = doc(&el);
        }
        bytes
    }

    #[test]
    fn limits_nesting_depth() {
        check(&nested(MAX_BSON_NESTING_DEPTH)).unwrap();
        assert_eq!(
            code_of(&nested(MAX_BSON_NESTING_DEPTH + 1)),
            ErrorCode::OVERFLOW
        );
    }

    #[test]
    fn deep_hostile_nesting_does_not_overflow_the_stack() {
        // Headers claiming a million levels: rejected at the depth limit, not by recursion.
        let levels = 1_000_000;
        // Each level is a length, an element header and (at the end) a terminator.
        let total = levels * 8 + 5;
        let mut bytes = Vec::with_capacity(total);
        for level in 0..levels {
            bytes.extend_from_slice(&((total - level * 8) as i32).to_le_bytes());
            bytes.extend_from_slice(b"\x03a\0");
        }
        bytes.extend_from_slice(&5_i32.to_le_bytes());
        bytes.push(0);
        bytes.resize(total, 0);
        assert_eq!(code_of(&bytes), ErrorCode::OVERFLOW);
    }
}
