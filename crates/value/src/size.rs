//! The sizes of values: the bytes a document takes as BSON, computed without encoding
//! it, and the memory a decoded value holds.
//!
//! Batches stop at 16 MiB and documents may not exceed 16 MiB; measuring by serialising
//! would allocate and copy every document just to count its bytes. Memory limits (a
//! stage's 100 MB, the server's budget for operations) are about the memory a value
//! really holds once decoded, which is several times its BSON size: every element is a
//! `Bson` of 112 bytes, every field also a key `String` and a map entry.

use bson::{Bson, Document};

/// The number of bytes `doc` takes as BSON.
pub fn document_size_bytes(doc: &Document) -> usize {
    // int32 length + elements + trailing NUL
    4 + doc
        .iter()
        .map(|(key, value)| element_size_bytes(key.len(), value))
        .sum::<usize>()
        + 1
}

fn array_size_bytes(items: &[Bson]) -> usize {
    4 + items
        .iter()
        .enumerate()
        .map(|(i, value)| element_size_bytes(decimal_digits(i), value))
        .sum::<usize>()
        + 1
}

fn decimal_digits(mut n: usize) -> usize {
    let mut digits = 1;
    while n >= 10 {
        n /= 10;
        digits += 1;
    }
    digits
}

/// Type byte + key + NUL + value.
fn element_size_bytes(key_len: usize, value: &Bson) -> usize {
    1 + key_len + 1 + value_size_bytes(value)
}

fn string_size_bytes(s: &str) -> usize {
    4 + s.len() + 1
}

/// The number of bytes `value` takes as a BSON element's value.
pub fn value_size_bytes(value: &Bson) -> usize {
    match value {
        Bson::Double(_) | Bson::DateTime(_) | Bson::Timestamp(_) | Bson::Int64(_) => 8,
        Bson::Int32(_) => 4,
        Bson::Decimal128(_) => 16,
        Bson::ObjectId(_) => 12,
        Bson::Boolean(_) => 1,
        Bson::Null | Bson::Undefined | Bson::MinKey | Bson::MaxKey => 0,
        Bson::String(s) | Bson::Symbol(s) | Bson::JavaScriptCode(s) => string_size_bytes(s),
        Bson::Document(d) => document_size_bytes(d),
        Bson::Array(items) => array_size_bytes(items),
        Bson::Binary(b) => {
            // The old binary subtype repeats the length inside the payload.
            let old_subtype_length = if u8::from(b.subtype) == 2 { 4 } else { 0 };
            4 + 1 + old_subtype_length + b.bytes.len()
        }
        Bson::RegularExpression(r) => r.pattern.len() + 1 + r.options.len() + 1,
        Bson::JavaScriptCodeWithScope(c) => {
            4 + string_size_bytes(&c.code) + document_size_bytes(&c.scope)
        }
        // The crate keeps a DBPointer's parts private: measure it the slow way (rare).
        Bson::DbPointer(_) => {
            let mut probe = Document::new();
            probe.insert("", value.clone());
            probe.to_vec().map_or(0, |bytes| bytes.len() - 4 - 1 - 2)
        }
    }
}

/// What one field of a decoded document costs beyond its value: the map entry's hash
/// and key `String`, and its slot in the map's index table.
const DOCUMENT_ENTRY_OVERHEAD_BYTES: usize =
    std::mem::size_of::<u64>() + std::mem::size_of::<String>() + std::mem::size_of::<usize>();

/// About the memory `value` holds once decoded, itself included.
pub fn value_memory_bytes(value: &Bson) -> usize {
    std::mem::size_of::<Bson>() + value_heap_bytes(value)
}

/// About the memory a decoded `doc` holds, itself included.
pub fn document_memory_bytes(doc: &Document) -> usize {
    std::mem::size_of::<Document>() + document_heap_bytes(doc)
}

fn document_heap_bytes(doc: &Document) -> usize {
    doc.iter()
        .map(|(key, value)| DOCUMENT_ENTRY_OVERHEAD_BYTES + key.len() + value_memory_bytes(value))
        .sum()
}

/// The memory `value` holds outside its own `Bson`.
fn value_heap_bytes(value: &Bson) -> usize {
    match value {
        Bson::String(s) | Bson::Symbol(s) | Bson::JavaScriptCode(s) => s.len(),
        Bson::Document(d) => document_heap_bytes(d),
        Bson::Array(items) => items.iter().map(value_memory_bytes).sum(),
        Bson::Binary(b) => b.bytes.len(),
        Bson::RegularExpression(r) => r.pattern.len() + r.options.len(),
        Bson::JavaScriptCodeWithScope(c) => c.code.len() + document_memory_bytes(&c.scope),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, spec::BinarySubtype, Binary, Decimal128, Regex, Timestamp};

    #[test]
    fn matches_the_encoder_for_every_type() {
        let doc = doc! {
            "d": 1.5, "s": "héllo", "o": { "x": [1, "two", { "y": null }] },
            "a": (0..12).map(Bson::Int32).collect::<Vec<_>>(),
            "b": Binary { subtype: BinarySubtype::Generic, bytes: vec![1, 2, 3] },
            "old": Binary { subtype: BinarySubtype::BinaryOld, bytes: vec![9; 5] },
            "u": Bson::Undefined, "id": bson::oid::ObjectId::new(), "t": true,
            "dt": bson::DateTime::now(), "n": null,
            "re": Regex { pattern: "a.*".try_into().unwrap(), options: "i".try_into().unwrap() },
            "js": Bson::JavaScriptCode("1+1".into()),
            "sym": Bson::Symbol("sym".into()),
            "scope": Bson::JavaScriptCodeWithScope(bson::JavaScriptCodeWithScope { code: "x".into(), scope: doc! { "x": 1 } }),
            "i": 7, "ts": Timestamp { time: 1, increment: 2 }, "l": 9_i64,
            "dec": Decimal128::from_bytes([0; 16]), "min": Bson::MinKey, "max": Bson::MaxKey,
        };
        assert_eq!(document_size_bytes(&doc), doc.to_vec().unwrap().len());
        assert_eq!(document_size_bytes(&Document::new()), 5);
    }

    #[test]
    fn memory_counts_every_element_and_what_it_owns() {
        let element = std::mem::size_of::<Bson>();
        assert_eq!(value_memory_bytes(&Bson::Int32(1)), element);
        assert_eq!(value_memory_bytes(&Bson::String("abc".into())), element + 3);
        let array = Bson::Array(vec![Bson::Int32(1), Bson::String("xy".into())]);
        assert_eq!(value_memory_bytes(&array), 3 * element + 2);
        let doc = doc! { "ab": 1 };
        assert_eq!(
            document_memory_bytes(&doc),
            std::mem::size_of::<Document>() + DOCUMENT_ENTRY_OVERHEAD_BYTES + 2 + element
        );
        // Decoded, a small document holds many times its BSON size.
        let record = doc! { "a": 1, "b": "x", "c": 2.5 };
        assert!(document_memory_bytes(&record) > 10 * document_size_bytes(&record));
    }
}
