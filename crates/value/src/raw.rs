//! Finding fields in stored BSON documents without validating them again.
//!
//! Every document was validated when it came in over the wire, so a scan looking for two
//! fields of forty need not check every key's UTF-8 and every value's layout the way
//! `bson::RawDocument`'s iterator does (a third of a scan's time, measured). This walker
//! only steps over elements by their declared sizes, checking bounds so that damaged
//! bytes give `None`, never a panic or an out-of-bounds read. Values are handed out as
//! `bson::RawBsonRef`; types this walker does not build itself are looked up through
//! `bson`'s validating reader.

use bson::oid::ObjectId;
use bson::{DateTime, Decimal128, RawBsonRef, RawDocument};

/// What a lookup of a field found.
#[derive(Debug, PartialEq)]
pub enum Field<'a> {
    Value(RawBsonRef<'a>),
    Missing,
    /// The bytes are damaged (bson's validating reader says how).
    Damaged,
}

/// The value of top-level field `name` of `doc`.
pub fn get<'a>(doc: &'a RawDocument, name: &str) -> Field<'a> {
    let mut found = Field::Missing;
    let intact = for_each_element(doc, |key, kind, value| {
        if key == name.as_bytes() {
            found = to_raw_bson(doc, key, kind, value).map_or(Field::Damaged, Field::Value);
            return false;
        }
        true
    });
    if intact {
        found
    } else {
        Field::Damaged
    }
}

/// Calls `visit(name, value)` for each top-level field of `doc` named in `names`, in
/// document order, until all were found. False when the bytes are damaged (a value
/// `None` or fields left unvisited).
pub fn for_each_named<'a>(
    doc: &'a RawDocument,
    names: &[String],
    mut visit: impl FnMut(&str, Option<RawBsonRef<'a>>),
) -> bool {
    let mut left = names.len();
    let mut intact = true;
    let walked = for_each_element(doc, |key, kind, value| {
        if let Some(name) = names.iter().find(|n| n.as_bytes() == key) {
            let value = to_raw_bson(doc, key, kind, value);
            intact &= value.is_some();
            visit(name, value);
            left -= 1;
        }
        left > 0
    });
    walked && intact
}

/// The top-level `fields` of `doc`, decoded alone into a document in document order:
/// what a filter, a consumer or an index reads of a stored document. Damaged bytes get
/// the error of bson's validating reader.
pub fn decode_named(doc: &RawDocument, fields: &[String]) -> bson::error::Result<bson::Document> {
    let mut partial = bson::Document::new();
    let mut converted = true;
    let intact = for_each_named(doc, fields, |name, value| {
        match value.map(bson::Bson::try_from) {
            Some(Ok(value)) => {
                partial.insert(name, value);
            }
            _ => converted = false,
        }
    });
    if !(intact && converted) {
        // Let bson's validating reader say what is wrong.
        bson::Document::try_from(doc)?;
    }
    Ok(partial)
}

/// Calls `visit(key, value)` for every top-level field of `doc` in order, while it
/// returns true: what a reader of every field (a columnar export) needs, without the
/// validating iterator's cost. Keys are given as bytes; a value is `None` when its bytes
/// are damaged. False when the walk stopped at damaged bytes.
pub fn for_each_field<'a>(
    doc: &'a RawDocument,
    mut visit: impl FnMut(&'a [u8], Option<RawBsonRef<'a>>) -> bool,
) -> bool {
    for_each_element(doc, |key, kind, value| {
        visit(key, to_raw_bson(doc, key, kind, value))
    })
}

/// Walks the elements of `doc` as (key bytes, type byte, value bytes) while `visit`
/// returns true. False when it stopped at damaged bytes.
fn for_each_element<'a>(
    doc: &'a RawDocument,
    mut visit: impl FnMut(&'a [u8], u8, &'a [u8]) -> bool,
) -> bool {
    let bytes = doc.as_bytes();
    // Length prefix, then elements, then the terminating zero.
    let end = bytes.len().saturating_sub(1);
    let mut at = 4;
    while at < end {
        let kind = bytes[at];
        let key_start = at + 1;
        let Some(key_len) = key_length(&bytes[key_start..end]) else {
            return false;
        };
        let value_start = key_start + key_len + 1;
        let Some(value_len) = value_size(kind, &bytes[value_start.min(end)..end]) else {
            return false;
        };
        let Some(value_end) = value_start.checked_add(value_len).filter(|e| *e <= end) else {
            return false;
        };
        if !visit(
            &bytes[key_start..key_start + key_len],
            kind,
            &bytes[value_start..value_end],
        ) {
            return true;
        }
        at = value_end;
    }
    at == end
}

/// Where the zero ending a key is: keys are short, so a plain loop over the first bytes
/// beats setting up a vectorised search; longer keys get one.
fn key_length(bytes: &[u8]) -> Option<usize> {
    const SHORT: usize = 24;
    match bytes.iter().take(SHORT).position(|b| *b == 0) {
        Some(len) => Some(len),
        None if bytes.len() > SHORT => memchr::memchr(0, &bytes[SHORT..]).map(|n| n + SHORT),
        None => None,
    }
}

fn read_i32(bytes: &[u8]) -> Option<usize> {
    let len = i32::from_le_bytes(bytes.get(..4)?.try_into().ok()?);
    usize::try_from(len).ok()
}

/// The size of a value of BSON type `kind` starting at `rest`.
fn value_size(kind: u8, rest: &[u8]) -> Option<usize> {
    Some(match kind {
        0x01 | 0x09 | 0x11 | 0x12 => 8,
        0x02 | 0x0D | 0x0E => 4 + read_i32(rest)?,
        0x03 | 0x04 | 0x0F => read_i32(rest)?,
        0x05 => 5 + read_i32(rest)?,
        0x06 | 0x0A | 0x7F | 0xFF => 0,
        0x07 => 12,
        0x08 => 1,
        0x0B => {
            let pattern = rest.iter().position(|b| *b == 0)? + 1;
            pattern + rest.get(pattern..)?.iter().position(|b| *b == 0)? + 1
        }
        0x0C => 4 + read_i32(rest)? + 12,
        0x10 => 4,
        0x13 => 16,
        _ => return None,
    })
}

/// The value of field `name` (of type `kind`, bytes `value`) of `doc`.
fn to_raw_bson<'a>(
    doc: &'a RawDocument,
    name: &[u8],
    kind: u8,
    value: &'a [u8],
) -> Option<RawBsonRef<'a>> {
    let fixed = |n: usize| value.get(..n);
    Some(match kind {
        0x01 => RawBsonRef::Double(f64::from_le_bytes(fixed(8)?.try_into().ok()?)),
        0x02 => {
            // Length (including the terminating zero), bytes, zero.
            let text = value.get(4..value.len().checked_sub(1)?)?;
            RawBsonRef::String(std::str::from_utf8(text).ok()?)
        }
        0x03 => RawBsonRef::Document(RawDocument::from_bytes(value).ok()?),
        0x07 => RawBsonRef::ObjectId(ObjectId::from_bytes(fixed(12)?.try_into().ok()?)),
        0x08 => RawBsonRef::Boolean(*value.first()? != 0),
        0x09 => RawBsonRef::DateTime(DateTime::from_millis(i64::from_le_bytes(
            fixed(8)?.try_into().ok()?,
        ))),
        0x0A => RawBsonRef::Null,
        0x10 => RawBsonRef::Int32(i32::from_le_bytes(fixed(4)?.try_into().ok()?)),
        0x12 => RawBsonRef::Int64(i64::from_le_bytes(fixed(8)?.try_into().ok()?)),
        0x13 => RawBsonRef::Decimal128(Decimal128::from_bytes(fixed(16)?.try_into().ok()?)),
        // Arrays and the rarer types: bson's own (validating) reader.
        _ => return doc.get(std::str::from_utf8(name).ok()?).ok().flatten(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, Bson, Document, RawDocumentBuf};

    fn every_type() -> RawDocumentBuf {
        let regex = bson::Regex {
            pattern: "a.c".try_into().unwrap(),
            options: "i".try_into().unwrap(),
        };
        let doc = doc! {
            "d": 1.5, "s": "héllo", "o": {"x": 1}, "a": [1, "two"],
            "b": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![1, 2] },
            "u": Bson::Undefined, "id": ObjectId::from_bytes([7; 12]), "t": true,
            "dt": DateTime::from_millis(42), "n": null, "re": regex,
            "js": Bson::JavaScriptCode("f()".into()), "i": 5,
            "ts": bson::Timestamp { time: 1, increment: 2 },
            "l": 6_i64, "dec": Decimal128::from_bytes([3; 16]), "min": Bson::MinKey,
            "max": Bson::MaxKey, "last": "end",
        };
        RawDocumentBuf::try_from(&doc).unwrap()
    }

    #[test]
    fn finds_every_type_as_bson_does() {
        let doc = every_type();
        let decoded = Document::try_from(doc.as_ref()).unwrap();
        for (name, value) in &decoded {
            let Field::Value(found) = get(&doc, name) else {
                panic!("{name} not found");
            };
            assert_eq!(&Bson::try_from(found).unwrap(), value, "{name}");
        }
        assert_eq!(get(&doc, "missing"), Field::Missing);
        let mut seen = Vec::new();
        let names = ["last".to_string(), "i".to_string(), "nope".to_string()];
        assert!(for_each_named(&doc, &names, |name, value| {
            seen.push((name.to_string(), Bson::try_from(value.unwrap()).unwrap()))
        }));
        assert_eq!(
            seen,
            vec![
                ("i".to_string(), Bson::Int32(5)),
                ("last".to_string(), Bson::from("end"))
            ]
        );
    }

    #[test]
    fn every_field_is_walked_in_order_as_bson_decodes_it() {
        let doc = every_type();
        let decoded = Document::try_from(doc.as_ref()).unwrap();
        let mut walked = Document::new();
        assert!(for_each_field(&doc, |key, value| {
            let key = std::str::from_utf8(key).unwrap().to_string();
            walked.insert(key, Bson::try_from(value.unwrap()).unwrap());
            true
        }));
        assert_eq!(walked, decoded);
        // The walk stops when asked to.
        let mut first = Vec::new();
        assert!(for_each_field(&doc, |key, _| {
            first.push(key.to_vec());
            false
        }));
        assert_eq!(first, vec![b"d".to_vec()]);
    }

    #[test]
    fn damaged_bytes_give_nothing() {
        let good = every_type();
        let bytes = good.as_bytes();
        // Every truncation and every single-byte change: no panic, and nothing read
        // past the end.
        for cut in 5..bytes.len() - 1 {
            let mut damaged = bytes[..cut].to_vec();
            damaged.push(0);
            let len = (damaged.len() as i32).to_le_bytes();
            damaged[..4].copy_from_slice(&len);
            if let Ok(doc) = RawDocument::from_bytes(&damaged) {
                // Cut inside an element: the walk notices.
                assert_ne!(get(doc, "last"), Field::Value(RawBsonRef::String("end")));
            }
        }
        for i in 4..bytes.len() - 1 {
            let mut damaged = bytes.to_vec();
            damaged[i] ^= 0xA5;
            if let Ok(doc) = RawDocument::from_bytes(&damaged) {
                let _ = get(doc, "last");
                for_each_named(doc, &["dec".to_string(), "s".to_string()], |_, _| {});
            }
        }
    }
}
