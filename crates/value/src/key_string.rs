//! Order-preserving binary encoding of BSON values for index keys, in the manner of
//! MongoDB's KeyString: comparing two encodings byte by byte (`memcmp`) gives the same
//! answer as [`compare_values`](crate::compare_values) on the values, across types. Index
//! entries can then live in a plain ordered key-value store and a range of values becomes a
//! range of bytes.
//!
//! # Layout
//!
//! Every value starts with a type byte in MongoDB's canonical type order (MinKey <
//! undefined < null < numbers < strings and symbols < objects < arrays < binary <
//! ObjectId < booleans < dates < timestamps < regexes < DBPointer < JavaScript <
//! JavaScript with scope < MaxKey). Like KeyString, numbers and booleans fold part of their
//! value into that byte (NaN / negative / zero / positive; false / true), which saves a
//! byte in the common single-number key. What follows the type byte is self-delimiting, so
//! no encoding is a prefix of another: concatenated components of a compound key compare
//! component by component, and inverting every byte of a component (descending order)
//! exactly reverses its order — for prefix-free strings, the first differing byte decides
//! and inversion flips that byte's comparison.
//!
//! - Strings, symbols, JavaScript code, field names and regex parts: the UTF-8 bytes with
//!   each 0x00 written as 0x00 0xFF, then 0x00 0x00. The terminator is below every byte
//!   and every escape, so a prefix sorts first.
//! - Objects: for each field its generic type byte, its name, then its value (type first,
//!   as MongoDB compares fields by type, then name, then value); then 0x00, which is below
//!   every type byte so a shorter object sorts first. Arrays: each element, then 0x00
//!   (MongoDB compares arrays as objects keyed "0", "1", ..., so the names never decide).
//! - Binary: length (u32), subtype, bytes, as MongoDB compares them. ObjectId: its 12
//!   bytes. Dates: milliseconds as i64 with the sign bit flipped, so 1969 sorts before
//!   1970. Timestamps: seconds then increment, unsigned. DBPointer: length, then its raw
//!   BSON value (namespace, ObjectId), as MongoDB compares them.
//!
//! # Collations
//!
//! An index with a collation encodes each string (and symbol), also inside arrays and
//! objects, by its collation sort key (ICU's, via [`Collation::write_sort_key`]) framed as
//! a string is framed above: sort keys compare bytewise as their strings compare under the
//! collation, so byte order is [`compare_values_with`](crate::compare_values_with) under
//! it. Field names, regexes and JavaScript code stay binary, as the comparator keeps them.
//! Without a collation the encoding is the binary one above, byte for byte.
//!
//! # Numbers
//!
//! int32, int64, double and decimal128 share one encoding that orders by exact
//! mathematical value, as MongoDB compares them (its decimal/double comparison is exact:
//! `Decimal128("0.1")` sorts below the double `0.1`, which is
//! 0.1000000000000000055511151231257827...). After the sign class, the magnitude is
//! written as:
//!
//! - the largest double not above it (its IEEE bits, big-endian: for non-negative doubles
//!   the bit patterns order as the values do), then
//! - 0x00 if the value *is* that double, or 0x01 and the exact value in decimal scientific
//!   form (exponent as a biased u16, then the significant digits two to a byte, each digit
//!   as nibble d+1 and a 0 nibble to end them).
//!
//! Values between two adjacent doubles share the prefix and are ordered by the exact tail,
//! which only exists for int64s beyond 2^53 that no double holds and for decimals that no
//! double holds. So every double, every int32 and almost every int64 costs the class byte
//! plus 9 bytes, and equal numbers of different types encode identically (1, 1.0,
//! NumberLong(1) and Decimal128("1.00") give the same bytes). Negative numbers write the
//! magnitude inverted. Decimals beyond double range get f64::MAX or 0 as their prefix and
//! rely on the tail; their exponent range (about ±6176) fits the u16. This is exact for
//! every Decimal128 — no rounding to double precision — at the price of up to 20 more
//! bytes for a decimal that no double represents.
//!
//! # Limits
//!
//! The encoding is one-way: types that compare equal encode equally (int vs double,
//! string vs symbol), so a key cannot be turned back into the original BSON value; MongoDB
//! keeps "type bits" beside the key for covered queries, which this module does not.

use crate::collation::Collation;
use crate::decimal::{ascii_digits, compare_double_with_decimal, trim_zeros, Dec};
use bson::{Bson, Decimal128, Document};
use std::cmp::Ordering;

// Type bytes, spaced like KeyString's so a type can later be split without renumbering.
// No type byte is 0x00: that ends objects and arrays.
const MIN_KEY: u8 = 0x0A;
const UNDEFINED: u8 = 0x0F;
const NULL: u8 = 0x14;
const NUMBER_NAN: u8 = 0x1E;
const NUMBER_NEGATIVE: u8 = 0x1F;
const NUMBER_ZERO: u8 = 0x20;
const NUMBER_POSITIVE: u8 = 0x21;
/// All numbers, inside objects, where fields compare by type before value.
const NUMBER: u8 = NUMBER_NAN;
const STRING: u8 = 0x3C;
const OBJECT: u8 = 0x46;
const ARRAY: u8 = 0x50;
const BINARY: u8 = 0x5A;
const OBJECT_ID: u8 = 0x64;
const BOOLEAN_FALSE: u8 = 0x6E;
const BOOLEAN_TRUE: u8 = 0x6F;
/// Both booleans, inside objects.
const BOOLEAN: u8 = BOOLEAN_FALSE;
const DATE: u8 = 0x78;
const TIMESTAMP: u8 = 0x82;
const REGEX: u8 = 0x8C;
const DB_POINTER: u8 = 0x96;
const CODE: u8 = 0xA0;
const CODE_WITH_SCOPE: u8 = 0xAA;
const MAX_KEY: u8 = 0xF0;

/// Ends an object or array; below every type byte.
const END: u8 = 0x00;

/// After a number's largest-double-not-above: the value is that double...
const EXACT_DOUBLE: u8 = 0x00;
/// ...or lies strictly between it and the next double, and its exact digits follow.
const DECIMAL_TAIL: u8 = 0x01;

/// Appends the order-preserving encoding of `value` to `out`; `descending` inverts it so
/// that larger values sort first.
pub fn encode_value(out: &mut Vec<u8>, value: &Bson, descending: bool) {
    encode_value_with(out, value, descending, None);
}

/// As [`encode_value`], with strings ordered by `collation` (binary when `None`).
pub fn encode_value_with(
    out: &mut Vec<u8>,
    value: &Bson,
    descending: bool,
    collation: Option<&Collation>,
) {
    let start = out.len();
    write_value(out, value, collation);
    if descending {
        invert(&mut out[start..]);
    }
}

/// The encoding of a compound key: each component with its direction (`true` for
/// descending), concatenated. Keys compare component by component.
pub fn encode_key(parts: &[(&Bson, bool)]) -> Vec<u8> {
    encode_key_with(parts, None)
}

/// As [`encode_key`], with strings ordered by `collation` (binary when `None`).
pub fn encode_key_with(parts: &[(&Bson, bool)], collation: Option<&Collation>) -> Vec<u8> {
    let mut out = Vec::with_capacity(parts.len() * 10);
    for &(value, descending) in parts {
        encode_value_with(&mut out, value, descending, collation);
    }
    out
}

/// The length of the encoded value at the start of `bytes` (written descending if
/// `descending`), or `None` if they do not start with a whole encoding. Since encodings
/// are self-delimiting, this splits a compound key into its components, which lets an
/// index scan check and skip on fields after the first without decoding values.
pub fn encoded_len(bytes: &[u8], descending: bool) -> Option<usize> {
    Reader { bytes }.skip_value(0, descending)
}

/// Walks encoded values; `flip` says whether the bytes at hand are inverted.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl Reader<'_> {
    fn at(&self, pos: usize, flip: bool) -> Option<u8> {
        self.bytes.get(pos).map(|&b| if flip { !b } else { b })
    }

    fn u32_at(&self, pos: usize, flip: bool) -> Option<usize> {
        let mut n = 0usize;
        for i in 0..4 {
            n = (n << 8) | usize::from(self.at(pos + i, flip)?);
        }
        Some(n)
    }

    fn skip_value(&self, pos: usize, flip: bool) -> Option<usize> {
        let end = match self.at(pos, flip)? {
            MIN_KEY | UNDEFINED | NULL | NUMBER_NAN | NUMBER_ZERO | BOOLEAN_FALSE
            | BOOLEAN_TRUE | MAX_KEY => pos + 1,
            t @ (NUMBER_NEGATIVE | NUMBER_POSITIVE) => {
                // A negative magnitude is written inverted.
                let flip = flip ^ (t == NUMBER_NEGATIVE);
                let marker = pos + 9;
                match self.at(marker, flip)? {
                    EXACT_DOUBLE => marker + 1,
                    DECIMAL_TAIL => {
                        let mut p = marker + 3;
                        loop {
                            let b = self.at(p, flip)?;
                            p += 1;
                            if b >> 4 == 0 || b & 0x0F == 0 {
                                break p;
                            }
                        }
                    }
                    _ => return None,
                }
            }
            STRING | CODE => self.skip_escaped(pos + 1, flip)?,
            OBJECT => self.skip_document(pos + 1, flip)?,
            ARRAY => {
                let mut p = pos + 1;
                while self.at(p, flip)? != END {
                    p = self.skip_value(p, flip)?;
                }
                p + 1
            }
            BINARY => pos + 6 + self.u32_at(pos + 1, flip)?,
            OBJECT_ID => pos + 13,
            DATE | TIMESTAMP => pos + 9,
            REGEX => {
                let options = self.skip_escaped(pos + 1, flip)?;
                self.skip_escaped(options, flip)?
            }
            DB_POINTER => pos + 5 + self.u32_at(pos + 1, flip)?,
            CODE_WITH_SCOPE => {
                let scope = self.skip_escaped(pos + 1, flip)?;
                self.skip_document(scope, flip)?
            }
            _ => return None,
        };
        (end <= self.bytes.len()).then_some(end)
    }

    fn skip_escaped(&self, mut pos: usize, flip: bool) -> Option<usize> {
        loop {
            if self.at(pos, flip)? == 0 {
                match self.at(pos + 1, flip)? {
                    0x00 => return Some(pos + 2),
                    0xFF => pos += 2,
                    _ => return None,
                }
            } else {
                pos += 1;
            }
        }
    }

    fn skip_document(&self, mut pos: usize, flip: bool) -> Option<usize> {
        while self.at(pos, flip)? != END {
            let value = self.skip_escaped(pos + 1, flip)?;
            pos = self.skip_value(value, flip)?;
        }
        Some(pos + 1)
    }
}

fn invert(bytes: &mut [u8]) {
    for b in bytes {
        *b = !*b;
    }
}

fn write_value(out: &mut Vec<u8>, value: &Bson, collation: Option<&Collation>) {
    match value {
        Bson::MinKey => out.push(MIN_KEY),
        Bson::Undefined => out.push(UNDEFINED),
        Bson::Null => out.push(NULL),
        Bson::Int32(i) => write_i64(out, i64::from(*i)),
        Bson::Int64(i) => write_i64(out, *i),
        Bson::Double(d) => write_f64(out, *d),
        Bson::Decimal128(d) => write_decimal(out, d),
        Bson::String(s) | Bson::Symbol(s) => {
            out.push(STRING);
            match collation {
                None => write_escaped(out, s.as_bytes()),
                Some(collation) => {
                    let mut sort_key = Vec::with_capacity(s.len() * 3);
                    collation.write_sort_key(s, &mut sort_key);
                    write_escaped(out, &sort_key);
                }
            }
        }
        Bson::Document(doc) => {
            out.push(OBJECT);
            write_document(out, doc, collation);
        }
        Bson::Array(items) => {
            out.push(ARRAY);
            for item in items {
                write_value(out, item, collation);
            }
            out.push(END);
        }
        Bson::Binary(bin) => {
            out.push(BINARY);
            out.extend_from_slice(&length_u32(bin.bytes.len()).to_be_bytes());
            out.push(u8::from(bin.subtype));
            out.extend_from_slice(&bin.bytes);
        }
        Bson::ObjectId(oid) => {
            out.push(OBJECT_ID);
            out.extend_from_slice(&oid.bytes());
        }
        Bson::Boolean(b) => out.push(if *b { BOOLEAN_TRUE } else { BOOLEAN_FALSE }),
        Bson::DateTime(date) => {
            out.push(DATE);
            let flipped = (date.timestamp_millis() as u64) ^ (1 << 63);
            out.extend_from_slice(&flipped.to_be_bytes());
        }
        Bson::Timestamp(ts) => {
            out.push(TIMESTAMP);
            out.extend_from_slice(&ts.time.to_be_bytes());
            out.extend_from_slice(&ts.increment.to_be_bytes());
        }
        Bson::RegularExpression(regex) => {
            out.push(REGEX);
            write_escaped(out, regex.pattern.as_str().as_bytes());
            write_escaped(out, regex.options.as_str().as_bytes());
        }
        Bson::DbPointer(_) => {
            out.push(DB_POINTER);
            let raw = db_pointer_raw_value(value);
            out.extend_from_slice(&length_u32(raw.len()).to_be_bytes());
            out.extend_from_slice(&raw);
        }
        Bson::JavaScriptCode(code) => {
            out.push(CODE);
            write_escaped(out, code.as_bytes());
        }
        Bson::JavaScriptCodeWithScope(cws) => {
            out.push(CODE_WITH_SCOPE);
            write_escaped(out, cws.code.as_bytes());
            // The comparator compares scopes binary, whatever the collation.
            write_document(out, &cws.scope, None);
        }
        Bson::MaxKey => out.push(MAX_KEY),
    }
}

/// The type byte a field carries inside an object: one per canonical type, because
/// MongoDB compares fields by type before name, and all numbers (or both booleans) are one
/// type there.
fn generic_type_byte(value: &Bson) -> u8 {
    match value {
        Bson::MinKey => MIN_KEY,
        Bson::Undefined => UNDEFINED,
        Bson::Null => NULL,
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => NUMBER,
        Bson::String(_) | Bson::Symbol(_) => STRING,
        Bson::Document(_) => OBJECT,
        Bson::Array(_) => ARRAY,
        Bson::Binary(_) => BINARY,
        Bson::ObjectId(_) => OBJECT_ID,
        Bson::Boolean(_) => BOOLEAN,
        Bson::DateTime(_) => DATE,
        Bson::Timestamp(_) => TIMESTAMP,
        Bson::RegularExpression(_) => REGEX,
        Bson::DbPointer(_) => DB_POINTER,
        Bson::JavaScriptCode(_) => CODE,
        Bson::JavaScriptCodeWithScope(_) => CODE_WITH_SCOPE,
        Bson::MaxKey => MAX_KEY,
    }
}

fn write_document(out: &mut Vec<u8>, doc: &Document, collation: Option<&Collation>) {
    for (name, value) in doc {
        out.push(generic_type_byte(value));
        write_escaped(out, name.as_bytes());
        write_value(out, value, collation);
    }
    out.push(END);
}

fn write_escaped(out: &mut Vec<u8>, bytes: &[u8]) {
    let mut pieces = bytes.split(|&b| b == 0);
    if let Some(first) = pieces.next() {
        out.extend_from_slice(first);
    }
    for piece in pieces {
        out.extend_from_slice(&[0x00, 0xFF]);
        out.extend_from_slice(piece);
    }
    out.extend_from_slice(&[0x00, 0x00]);
}

/// BSON caps documents at 16 MB, so a BSON length always fits.
fn length_u32(len: usize) -> u32 {
    debug_assert!(u32::try_from(len).is_ok(), "BSON lengths fit in 32 bits");
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// The raw BSON value of a DBPointer (namespace string, then ObjectId), which MongoDB
/// compares by length, then bytes. The `bson` crate hides the fields, so the value is
/// serialized to reach them; DBPointers are deprecated and rare.
fn db_pointer_raw_value(value: &Bson) -> Vec<u8> {
    let mut wrapper = Document::new();
    wrapper.insert("", value.clone());
    // i32 document length, type byte and the empty key's NUL, then the value, then the
    // document's closing NUL.
    let raw = wrapper.to_vec().ok().and_then(|bytes| {
        bytes
            .get(6..bytes.len().saturating_sub(1))
            .map(<[u8]>::to_vec)
    });
    debug_assert!(raw.is_some(), "a DBPointer always serializes");
    raw.unwrap_or_default()
}

fn write_f64(out: &mut Vec<u8>, d: f64) {
    if d.is_nan() {
        out.push(NUMBER_NAN);
    } else if d == 0.0 {
        out.push(NUMBER_ZERO);
    } else {
        write_magnitude(out, d < 0.0, d.abs(), None);
    }
}

fn write_i64(out: &mut Vec<u8>, i: i64) {
    if i == 0 {
        out.push(NUMBER_ZERO);
        return;
    }
    let magnitude = i.unsigned_abs();
    // Rounds to nearest; exact up to 2^53 and for multiples of larger powers of two.
    let nearest = magnitude as f64;
    let nearest_int = nearest as u64;
    if nearest_int == magnitude {
        write_magnitude(out, i < 0, nearest, None);
        return;
    }
    let floor = if nearest_int > magnitude {
        nearest.next_down()
    } else {
        nearest
    };
    let mut buf = [0u8; 40];
    let digits = ascii_digits(u128::from(magnitude), &mut buf);
    let exponent = digits.len() as i32 - 1;
    write_magnitude(out, i < 0, floor, Some((exponent, trim_zeros(digits))));
}

fn write_decimal(out: &mut Vec<u8>, d: &Decimal128) {
    match Dec::parse(d) {
        Dec::NaN => out.push(NUMBER_NAN),
        Dec::Infinity { negative } => write_magnitude(out, negative, f64::INFINITY, None),
        Dec::Finite { coefficient: 0, .. } => out.push(NUMBER_ZERO),
        Dec::Finite {
            negative,
            coefficient,
            exponent,
        } => {
            let mut buf = [0u8; 40];
            let all_digits = ascii_digits(coefficient, &mut buf);
            let scientific_exponent = exponent + all_digits.len() as i32 - 1;
            let digits = trim_zeros(all_digits);
            let (floor, exact) = double_floor(scientific_exponent, digits);
            let tail = (!exact).then_some((scientific_exponent, digits));
            write_magnitude(out, negative, floor, tail);
        }
    }
}

/// The largest double not above the positive decimal `d.ddd × 10^exponent` (`digits`
/// without trailing zeros), and whether it equals the decimal.
fn double_floor(exponent: i32, digits: &[u8]) -> (f64, bool) {
    // Every double is below 1.8e308, and the smallest positive one is 4.9e-324.
    if exponent > 308 {
        return (f64::MAX, false);
    }
    if exponent < -324 {
        return (0.0, false);
    }
    let digits_text = std::str::from_utf8(digits).unwrap_or("0");
    let text = format!("{digits_text}e{}", exponent - (digits.len() as i32 - 1));
    // Rust parses decimal strings correctly rounded to nearest; adjust to the floor.
    let nearest: f64 = text.parse().unwrap_or(0.0);
    if nearest.is_infinite() {
        return (f64::MAX, false);
    }
    match compare_double_with_decimal(nearest, exponent, digits) {
        Ordering::Equal => (nearest, true),
        Ordering::Less => (nearest, false),
        Ordering::Greater => (nearest.next_down(), false),
    }
}

/// Writes a non-zero number: the sign class, then `floor` (the largest double not above the
/// magnitude) and, unless the magnitude is `floor` itself, its exact scientific form.
/// The magnitude bytes are inverted for negative numbers, so larger magnitudes sort first.
fn write_magnitude(out: &mut Vec<u8>, negative: bool, floor: f64, tail: Option<(i32, &[u8])>) {
    out.push(if negative {
        NUMBER_NEGATIVE
    } else {
        NUMBER_POSITIVE
    });
    let start = out.len();
    out.extend_from_slice(&floor.to_bits().to_be_bytes());
    match tail {
        None => out.push(EXACT_DOUBLE),
        Some((exponent, digits)) => {
            out.push(DECIMAL_TAIL);
            debug_assert!((-0x8000..0x8000).contains(&exponent));
            out.extend_from_slice(&((exponent + 0x8000) as u16).to_be_bytes());
            write_digits(out, digits);
        }
    }
    if negative {
        invert(&mut out[start..]);
    }
}

/// Significant digits two to a byte, each as nibble d+1, ended by a 0 nibble: a digit
/// string that is a prefix of another (1.2 against 1.23) sorts first.
fn write_digits(out: &mut Vec<u8>, digits: &[u8]) {
    let mut nibbles = digits
        .iter()
        .map(|d| d - b'0' + 1)
        .chain(std::iter::once(0));
    while let Some(high) = nibbles.next() {
        let low = nibbles.next().unwrap_or(0);
        out.push((high << 4) | low);
    }
}

/// The key a hashed index stores for `value` (and `$toHashedIndexKey` returns): a 64-bit hash of the value's key
/// encoding (under the index's collation, so strings it finds equal hash alike), so
/// numerically equal values (1, 1.0, NumberLong(1)) hash alike. FNV-1a with a final
/// avalanche (SplitMix64's), written out because the hashes are persisted and must never
/// change between builds.
pub fn hashed_value(value: &Bson, collation: Option<&Collation>) -> Bson {
    let mut encoded = Vec::new();
    encode_value_with(&mut encoded, value, false, collation);
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in encoded {
        h ^= u64::from(byte);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    Bson::Int64(h as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::compare_values;
    use bson::{doc, oid::ObjectId, spec::BinarySubtype, Binary, JavaScriptCodeWithScope};
    use bson::{DateTime, Regex, Timestamp};
    use proptest::prelude::*;
    use std::str::FromStr;

    fn key(v: &Bson) -> Vec<u8> {
        encode_key(&[(v, false)])
    }

    fn desc(v: &Bson) -> Vec<u8> {
        encode_key(&[(v, true)])
    }

    fn dec(s: &str) -> Bson {
        Bson::Decimal128(Decimal128::from_str(s).unwrap())
    }

    fn string(s: &str) -> Bson {
        Bson::String(s.to_string())
    }

    fn regex(pattern: &str, options: &str) -> Bson {
        Bson::RegularExpression(Regex {
            pattern: pattern.to_string().try_into().unwrap(),
            options: options.to_string().try_into().unwrap(),
        })
    }

    fn binary(subtype: BinarySubtype, bytes: &[u8]) -> Bson {
        Bson::Binary(Binary {
            subtype,
            bytes: bytes.to_vec(),
        })
    }

    /// A DBPointer, which the `bson` crate only builds by parsing BSON.
    fn db_pointer(namespace: &str, oid_byte: u8) -> Bson {
        let mut value = Vec::new();
        value.extend_from_slice(&(namespace.len() as i32 + 1).to_le_bytes());
        value.extend_from_slice(namespace.as_bytes());
        value.push(0);
        value.extend_from_slice(&[oid_byte; 12]);
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&((value.len() + 8) as i32).to_le_bytes());
        bytes.extend_from_slice(&[0x0C, b'p', 0]);
        bytes.extend_from_slice(&value);
        bytes.push(0);
        let parsed = Document::from_reader(bytes.as_slice()).unwrap();
        parsed.get("p").unwrap().clone()
    }

    /// Asserts that the values are listed in strictly increasing order, ascending and
    /// (reversed) descending.
    fn assert_increasing(values: &[Bson]) {
        for pair in values.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            assert!(
                key(a) < key(b),
                "{a:?} < {b:?}: {:x?} {:x?}",
                key(a),
                key(b)
            );
            assert!(desc(a) > desc(b), "descending {a:?} > {b:?}");
        }
    }

    fn assert_same_key(values: &[Bson]) {
        for v in values {
            assert_eq!(key(v), key(&values[0]), "{v:?} == {:?}", values[0]);
        }
    }

    #[test]
    fn numeric_types_share_one_form() {
        assert_same_key(&[
            Bson::Int32(1),
            Bson::Int64(1),
            Bson::Double(1.0),
            dec("1"),
            dec("1.000"),
            dec("0.1E+1"),
        ]);
        assert_same_key(&[
            Bson::Int32(-250),
            Bson::Int64(-250),
            Bson::Double(-250.0),
            dec("-2.5E+2"),
        ]);
        assert_same_key(&[Bson::Double(0.5), dec("0.50")]);
        assert_same_key(&[Bson::Double(f64::INFINITY), dec("Infinity")]);
        assert_same_key(&[Bson::Double(f64::NEG_INFINITY), dec("-Infinity")]);
        // A plain double costs the type byte, 8 bytes and the exactness marker.
        assert_eq!(key(&Bson::Double(0.1)).len(), 10);
    }

    #[test]
    fn zero_and_nan() {
        assert_same_key(&[
            Bson::Double(0.0),
            Bson::Double(-0.0),
            Bson::Int32(0),
            Bson::Int64(0),
            dec("0"),
            dec("-0"),
            dec("0E-50"),
            dec("-0E+30"),
        ]);
        assert_same_key(&[
            Bson::Double(f64::NAN),
            Bson::Double(-f64::NAN),
            dec("NaN"),
            dec("-NaN"),
        ]);
        assert_increasing(&[
            Bson::Double(f64::NAN),
            Bson::Double(f64::NEG_INFINITY),
            Bson::Double(-f64::MAX),
            Bson::Double(-1.0),
            Bson::Double(-5e-324),
            dec("-1E-6000"),
            Bson::Double(0.0),
            dec("1E-6000"),
            Bson::Double(5e-324),
            Bson::Double(1.0),
            Bson::Double(f64::MAX),
            Bson::Double(f64::INFINITY),
        ]);
    }

    #[test]
    fn int64_beyond_double_precision_orders_exactly() {
        let two_53 = 1i64 << 53;
        assert_increasing(&[
            Bson::Double(-9.3e18),
            Bson::Int64(i64::MIN + 1),
            Bson::Int64(-two_53 - 1),
            Bson::Double(-(two_53 as f64)),
            Bson::Int64(two_53 - 1),
            Bson::Double(two_53 as f64),
            Bson::Int64(two_53 + 1),
            Bson::Double((two_53 + 2) as f64),
            Bson::Int64(two_53 + 3),
            Bson::Int64(i64::MAX - 1),
            Bson::Int64(i64::MAX),
            Bson::Double(9_223_372_036_854_775_808.0),
        ]);
        assert_same_key(&[
            Bson::Int64(i64::MIN),
            Bson::Double(-9_223_372_036_854_775_808.0),
        ]);
        assert_same_key(&[Bson::Int64(two_53 + 2), Bson::Double((two_53 + 2) as f64)]);
        assert_same_key(&[Bson::Int64(two_53 + 1), dec("9007199254740993")]);
        assert_same_key(&[Bson::Int64(i64::MAX), dec("9.223372036854775807E+18")]);
    }

    #[test]
    fn decimals_compare_exactly_with_doubles() {
        // As MongoDB's compareDecimalToDouble: the double 0.1 is 0.1000000000000000055...
        assert_increasing(&[
            dec("0.09999999999999999"),
            dec("0.1"),
            dec("0.1000000000000000055511151231257827"),
            Bson::Double(0.1),
            dec("0.1000000000000000055511151231257828"),
            dec("0.10000000000000001"),
        ]);
        // The double 0.3 is 0.2999999999999999888...
        assert_increasing(&[Bson::Double(0.3), dec("0.3")]);
        assert_increasing(&[
            dec("1"),
            dec("1.000000000000000000000000000000001"),
            Bson::Double(1.0000000000000002),
        ]);
        assert_increasing(&[
            Bson::Double(f64::MAX),
            dec("1.797693134862315708145274237317044E+308"),
            dec("1E+309"),
            dec("9.999999999999999999999999999999999E+6144"),
            Bson::Double(f64::INFINITY),
        ]);
        assert_increasing(&[
            dec("-Infinity"),
            dec("-1E+400"),
            Bson::Double(-f64::MAX),
            dec("-1E-400"),
            Bson::Int32(0),
            dec("3E-324"),
            Bson::Double(5e-324),
            dec("5E-324"),
        ]);
        assert_increasing(&[
            Bson::Int64(99),
            dec("99.5"),
            Bson::Int64(100),
            dec("1.00001E+2"),
        ]);
    }

    #[test]
    fn strings_order_bytewise_with_prefixes_first() {
        assert_increasing(&[
            string(""),
            string("\0"),
            string("\0\0"),
            string("\0a"),
            string("\u{1}"),
            string("A"),
            string("a"),
            string("a\0"),
            string("a\0b"),
            string("ab"),
            string("b"),
            string("é"),
        ]);
        assert_same_key(&[string("abc"), Bson::Symbol("abc".into())]);
    }

    #[test]
    fn canonical_type_order() {
        let scope = JavaScriptCodeWithScope {
            code: "x".into(),
            scope: doc! {},
        };
        assert_increasing(&[
            Bson::MinKey,
            Bson::Undefined,
            Bson::Null,
            Bson::Double(f64::NAN),
            Bson::Double(f64::INFINITY),
            string(""),
            Bson::Document(doc! {}),
            Bson::Array(vec![]),
            binary(BinarySubtype::Generic, &[]),
            Bson::ObjectId(ObjectId::from_bytes([0xFF; 12])),
            Bson::Boolean(false),
            Bson::Boolean(true),
            Bson::DateTime(DateTime::from_millis(i64::MIN)),
            Bson::Timestamp(Timestamp {
                time: 0,
                increment: 0,
            }),
            regex("", ""),
            db_pointer("a.b", 0),
            Bson::JavaScriptCode("".into()),
            Bson::JavaScriptCodeWithScope(scope),
            Bson::MaxKey,
        ]);
    }

    #[test]
    fn documents_compare_by_type_then_name_then_value() {
        let d = |doc: Document| Bson::Document(doc);
        assert_increasing(&[
            d(doc! {}),
            d(doc! {"a": Bson::MinKey}),
            d(doc! {"a": Bson::Null}),
            d(doc! {"a": 1}),
            d(doc! {"a": 1, "b": 1}),
            d(doc! {"a": 2}),
            // Numbers rank by field name before value.
            d(doc! {"b": -1}),
            d(doc! {"b": 1}),
            // Type before name: a string field beats any numeric field.
            d(doc! {"a": "x"}),
            d(doc! {"a": {"b": 1}}),
            d(doc! {"a": [1]}),
            d(doc! {"a": true}),
            d(doc! {"b": false}),
        ]);
        assert_same_key(&[
            d(doc! {"a": 1, "b": "x"}),
            d(doc! {"a": 1.0, "b": Bson::Symbol("x".into())}),
        ]);
        assert_increasing(&[d(doc! {"a": 1}), d(doc! {"a\0": 0}), d(doc! {"ab": 0})]);
    }

    #[test]
    fn arrays_compare_element_by_element() {
        let a = |v: Vec<Bson>| Bson::Array(v);
        assert_increasing(&[
            a(vec![]),
            a(vec![Bson::Null]),
            a(vec![1.into()]),
            a(vec![1.into(), Bson::MinKey]),
            a(vec![1.into(), 0.into()]),
            a(vec![2.into()]),
            a(vec![a(vec![])]),
            a(vec![a(vec![1.into()])]),
        ]);
        assert_same_key(&[
            a(vec![1.into(), "x".into()]),
            a(vec![Bson::Double(1.0), "x".into()]),
        ]);
    }

    #[test]
    fn other_types_follow_mongodb() {
        // Binary: length, then subtype, then bytes.
        assert_increasing(&[
            binary(BinarySubtype::Generic, &[]),
            binary(BinarySubtype::UserDefined(0x80), &[0xFF]),
            binary(BinarySubtype::Generic, &[0, 0]),
            binary(BinarySubtype::Generic, &[0, 1]),
            binary(BinarySubtype::Uuid, &[0, 0]),
        ]);
        // Dates are signed, timestamps unsigned.
        assert_increasing(&[
            Bson::DateTime(DateTime::from_millis(i64::MIN)),
            Bson::DateTime(DateTime::from_millis(-1)),
            Bson::DateTime(DateTime::from_millis(0)),
            Bson::DateTime(DateTime::from_millis(i64::MAX)),
        ]);
        let ts = |time, increment| Bson::Timestamp(Timestamp { time, increment });
        assert_increasing(&[ts(0, 0), ts(0, u32::MAX), ts(1, 0), ts(u32::MAX, 0)]);
        assert_increasing(&[
            regex("a", ""),
            regex("a", "i"),
            regex("a", "m"),
            regex("ab", ""),
        ]);
        // DBPointer: namespace length first.
        assert_increasing(&[
            db_pointer("z", 9),
            db_pointer("ab", 0),
            db_pointer("ab", 1),
            db_pointer("ac", 0),
        ]);
        let cws = |code: &str, scope: Document| {
            Bson::JavaScriptCodeWithScope(JavaScriptCodeWithScope {
                code: code.into(),
                scope,
            })
        };
        assert_increasing(&[
            cws("a", doc! {}),
            cws("a", doc! {"x": 1}),
            cws("b", doc! {}),
        ]);
    }

    #[test]
    fn descending_components_keep_compound_order() {
        let (a, ab) = (string("a"), string("ab"));
        // A descending prefix still loses to the longer string, whatever follows it.
        assert!(
            encode_key(&[(&a, true), (&Bson::MinKey, false)])
                > encode_key(&[(&ab, true), (&Bson::MaxKey, false)])
        );
        assert!(
            encode_key(&[(&a, false), (&Bson::MaxKey, false)])
                < encode_key(&[(&ab, false), (&Bson::MinKey, false)])
        );
        let one = Bson::Int32(1);
        let big = Bson::Int64((1 << 53) + 1);
        assert!(
            encode_key(&[(&one, false), (&a, true)]) > encode_key(&[(&one, false), (&ab, true)])
        );
        assert!(
            encode_key(&[(&big, true), (&a, false)]) < encode_key(&[(&one, true), (&a, false)])
        );
    }

    // Values are drawn from small pools so that ties and near-ties across types are common.

    fn double_strategy() -> impl Strategy<Value = f64> {
        prop_oneof![
            prop::sample::select(vec![
                0.0,
                -0.0,
                0.5,
                -0.5,
                1.0,
                -1.0,
                1.5,
                2.0,
                -2.0,
                9_007_199_254_740_992.0,
                9_007_199_254_740_994.0,
                -9_007_199_254_740_992.0,
                9_223_372_036_854_775_808.0,
                -9_223_372_036_854_775_808.0,
                f64::MAX,
                -f64::MAX,
                5e-324,
                f64::INFINITY,
                f64::NEG_INFINITY,
                f64::NAN,
            ]),
            (-8i32..8).prop_map(|i| f64::from(i) / 4.0),
            any::<f64>(),
        ]
    }

    fn int64_strategy() -> impl Strategy<Value = i64> {
        prop_oneof![
            -3i64..3,
            ((1i64 << 53) - 2..(1i64 << 53) + 4).prop_map(|i| if i % 3 == 0 { -i } else { i }),
            prop::sample::select(vec![i64::MIN, i64::MIN + 1, i64::MAX, i64::MAX - 1]),
            any::<i64>(),
        ]
    }

    fn decimal_strategy() -> impl Strategy<Value = Bson> {
        prop_oneof![
            (-300i64..300, -3i32..3).prop_map(|(c, e)| dec(&format!("{c}E{e}"))),
            prop::sample::select(vec![
                "NaN",
                "-NaN",
                "Infinity",
                "-Infinity",
                "-0",
                "0E+10",
                "1E-400",
                "9007199254740993",
                "-9007199254740993",
                "9223372036854775807",
                "1.000000000000000000000000000000001",
                "1E-6176",
            ])
            .prop_map(dec),
        ]
    }

    /// Characters of the strings drawn for binary keys.
    const BINARY_CHARS: &[char] = &['\0', 'a', 'b', 'é'];
    /// Characters of the strings drawn for collated keys: case, accents, digits (numeric
    /// ordering), punctuation and spaces (alternate handling), an ignorable NUL.
    const COLLATED_CHARS: &[char] = &[
        '\0', 'a', 'A', 'b', 'B', 'é', 'E', 'e', 'ß', '1', '2', '0', '-', ' ', 'ǆ',
    ];

    /// One strategy per kind of leaf value, each over a small pool; strings (and code)
    /// are drawn from `chars`.
    fn leaf_kinds(chars: &'static [char]) -> Vec<BoxedStrategy<Bson>> {
        let text = move || {
            prop::collection::vec(prop::sample::select(chars), 0..4)
                .prop_map(|chars| chars.into_iter().collect::<String>())
        };
        let cstring = || prop::sample::select(vec!["", "a", "ab", "b"]);
        vec![
            prop_oneof![
                Just(Bson::MinKey),
                Just(Bson::MaxKey),
                Just(Bson::Null),
                Just(Bson::Undefined),
            ]
            .boxed(),
            any::<bool>().prop_map(Bson::Boolean).boxed(),
            prop_oneof![
                (-3i32..3).prop_map(Bson::Int32),
                any::<i32>().prop_map(Bson::Int32),
                int64_strategy().prop_map(Bson::Int64),
                double_strategy().prop_map(Bson::Double),
                decimal_strategy(),
            ]
            .boxed(),
            prop_oneof![text().prop_map(Bson::String), text().prop_map(Bson::Symbol),].boxed(),
            text().prop_map(Bson::JavaScriptCode).boxed(),
            (
                prop::sample::select(vec![0u8, 4, 0x80]),
                prop::collection::vec(0u8..3, 0..3),
            )
                .prop_map(|(subtype, bytes)| binary(BinarySubtype::from(subtype), &bytes))
                .boxed(),
            (0u8..3)
                .prop_map(|b| Bson::ObjectId(ObjectId::from_bytes([b; 12])))
                .boxed(),
            prop_oneof![-2i64..2, any::<i64>()]
                .prop_map(|ms| Bson::DateTime(DateTime::from_millis(ms)))
                .boxed(),
            (0u32..2, prop_oneof![0u32..2, Just(u32::MAX)])
                .prop_map(|(time, increment)| Bson::Timestamp(Timestamp { time, increment }))
                .boxed(),
            (cstring(), cstring())
                .prop_map(|(p, o)| regex(p, o))
                .boxed(),
            (prop::sample::select(vec!["a", "ab", "b"]), 0u8..2)
                .prop_map(|(ns, b)| db_pointer(ns, b))
                .boxed(),
        ]
    }

    fn field_name() -> impl Strategy<Value = String> {
        prop::sample::select(vec!["", "a", "a\0", "b"]).prop_map(str::to_string)
    }

    /// Any value, nested up to depth 2.
    fn value_strategy(chars: &'static [char]) -> impl Strategy<Value = Bson> {
        let leaf = prop::strategy::Union::new(leaf_kinds(chars));
        leaf.prop_recursive(2, 16, 3, |inner| {
            let document = prop::collection::vec((field_name(), inner.clone()), 0..3)
                .prop_map(|fields| fields.into_iter().collect::<Document>())
                .boxed();
            prop_oneof![
                prop::collection::vec(inner, 0..3).prop_map(Bson::Array),
                document.clone().prop_map(Bson::Document),
                ("[ab]", document).prop_map(|(code, scope)| {
                    Bson::JavaScriptCodeWithScope(JavaScriptCodeWithScope { code, scope })
                }),
            ]
        })
    }

    /// Two values of the same kind, and for arrays and documents element by element, so
    /// that comparisons reach past the type byte into the deepest parts of both.
    fn close_pair_strategy(chars: &'static [char]) -> impl Strategy<Value = (Bson, Bson)> {
        let kinds = leaf_kinds(chars);
        let leaf_pair =
            (0..kinds.len()).prop_flat_map(move |i| (kinds[i].clone(), kinds[i].clone()));
        leaf_pair.prop_recursive(2, 16, 3, |inner| {
            // Cutting the left side short makes it a prefix of the right one.
            let cut = || prop_oneof![Just(usize::MAX), 0usize..3];
            prop_oneof![
                (prop::collection::vec(inner.clone(), 0..3), cut()).prop_map(|(pairs, cut)| {
                    let (mut left, right): (Vec<Bson>, Vec<Bson>) = pairs.into_iter().unzip();
                    left.truncate(cut);
                    (Bson::Array(left), Bson::Array(right))
                }),
                (
                    prop::collection::vec((field_name(), field_name(), inner), 0..3),
                    cut()
                )
                    .prop_map(|(fields, cut)| {
                        let mut left = Document::new();
                        let mut right = Document::new();
                        for (i, (name, other_name, (x, y))) in fields.into_iter().enumerate() {
                            if i < cut {
                                left.insert(name.clone(), x);
                            }
                            // Mostly the same name, so that the values decide.
                            right.insert(if i % 2 == 0 { name } else { other_name }, y);
                        }
                        (Bson::Document(left), Bson::Document(right))
                    }),
            ]
        })
    }

    /// Numbers of every type packed around the same values: integers at the edge of double
    /// precision, doubles and their neighbours, decimals that round to them, decimals
    /// beyond double range.
    fn number_strategy() -> impl Strategy<Value = Bson> {
        let integers = (
            prop::sample::select(vec![0i64, 1 << 53, -(1 << 53), 1 << 62, i64::MAX, i64::MIN]),
            -3i64..4,
            0u8..4,
        )
            .prop_map(|(anchor, delta, form)| {
                let v = anchor.saturating_add(delta);
                match form {
                    0 => Bson::Int64(v),
                    1 => Bson::Double(v as f64),
                    2 => dec(&v.to_string()),
                    _ => i32::try_from(v).map_or(Bson::Int64(v), Bson::Int32),
                }
            });
        let doubles = (
            prop::sample::select(vec![
                0.1,
                0.3,
                1.0,
                2.2,
                1e20,
                9.3e18,
                1e300,
                f64::MAX,
                5e-324,
                2.2250738585072014e-308,
            ]),
            -1i8..2,
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(x, step, negative, as_decimal)| {
                let x = match step {
                    -1 => x.next_down(),
                    1 => x.next_up(),
                    _ => x,
                };
                let x = if negative { -x } else { x };
                // The shortest decimal that reads back as x: usually not x itself.
                if as_decimal {
                    dec(&format!("{x:e}"))
                } else {
                    Bson::Double(x)
                }
            });
        // m / 10^k as a double and as a decimal: 0.1 and Decimal128("0.1"), and so on.
        let scaled = || (-30i64..30, 0i32..3);
        prop_oneof![
            integers,
            doubles,
            scaled().prop_map(|(m, k)| Bson::Double(m as f64 / 10f64.powi(k))),
            scaled().prop_map(|(m, k)| dec(&format!("{m}E-{k}"))),
            (-3i32..3).prop_map(Bson::Int32),
            double_strategy().prop_map(Bson::Double),
            decimal_strategy(),
            (any::<i64>(), -25i32..5).prop_map(|(c, e)| dec(&format!("{c}E{e}"))),
            prop::sample::select(vec![
                "1E+20",
                "100000000000000000001",
                "9223372036854775808",
                "9223372036854775809",
                "-9223372036854775809",
                "1E+400",
                "-1E+400",
                "1.797693134862315708145274237317043E+308",
                "1.797693134862315708145274237317044E+308",
                "9.999999999999999999999999999999999E+6144",
                "2.5E-324",
                "5E-324",
            ])
            .prop_map(dec),
        ]
    }

    fn assert_orders_like_compare_values(a: &Bson, b: &Bson) -> Result<(), TestCaseError> {
        let expected = compare_values(a, b);
        prop_assert_eq!(key(a).cmp(&key(b)), expected, "{:?} vs {:?}", a, b);
        prop_assert_eq!(
            desc(a).cmp(&desc(b)),
            expected.reverse(),
            "desc {:?} vs {:?}",
            a,
            b
        );
        Ok(())
    }

    /// Collations that differ in every way a sort key can: strength, case level and case
    /// order, numeric ordering, shifted punctuation, French accents, another alphabet.
    fn collation_strategy() -> impl Strategy<Value = Collation> {
        prop::sample::select(vec![
            doc! { "locale": "en", "strength": 1 },
            doc! { "locale": "en", "strength": 2 },
            doc! { "locale": "en" },
            doc! { "locale": "en", "strength": 1, "caseLevel": true },
            doc! { "locale": "en", "caseFirst": "upper" },
            doc! { "locale": "en", "numericOrdering": true },
            doc! { "locale": "en", "alternate": "shifted", "strength": 4 },
            doc! { "locale": "fr_CA" },
            doc! { "locale": "de", "strength": 5 },
            doc! { "locale": "sv" },
        ])
        .prop_map(|spec| Collation::parse(&spec).unwrap().unwrap())
    }

    fn assert_orders_like_collation(
        a: &Bson,
        b: &Bson,
        collation: &Collation,
    ) -> Result<(), TestCaseError> {
        let expected = crate::compare_values_with(a, b, Some(collation));
        let encode =
            |v: &Bson, descending: bool| encode_key_with(&[(v, descending)], Some(collation));
        prop_assert_eq!(
            encode(a, false).cmp(&encode(b, false)),
            expected,
            "{:?} vs {:?} under {:?}",
            a,
            b,
            collation
        );
        prop_assert_eq!(encode(a, true).cmp(&encode(b, true)), expected.reverse());
        let both = encode_key_with(&[(a, true), (b, false)], Some(collation));
        prop_assert_eq!(encoded_len(&both, true), Some(encode(a, true).len()));
        Ok(())
    }

    #[test]
    fn collated_strings_order_by_sort_key() {
        let case_insensitive = Collation::parse(&doc! { "locale": "en", "strength": 2 })
            .unwrap()
            .unwrap();
        let encode = |v: &Bson| encode_key_with(&[(v, false)], Some(&case_insensitive));
        assert_eq!(encode(&string("ABC")), encode(&string("abc")));
        assert_ne!(encode(&string("abc")), encode(&string("abd")));
        assert!(encode(&string("B")) > encode(&string("a")));
        assert_eq!(
            encode(&Bson::Array(vec![string("X"), doc! { "k": "Y" }.into()])),
            encode(&Bson::Array(vec![string("x"), doc! { "k": "y" }.into()]))
        );
        // Field names stay binary.
        assert_ne!(
            encode(&doc! { "K": 1 }.into()),
            encode(&doc! { "k": 1 }.into())
        );
        // Values without strings encode as they do without a collation.
        let plain = doc! { "n": 1.5, "d": [true, null] }.into();
        assert_eq!(encode(&plain), key(&plain));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(10_000))]

        #[test]
        fn collated_byte_order_matches_collated_value_order(
            a in value_strategy(COLLATED_CHARS),
            b in value_strategy(COLLATED_CHARS),
            collation in collation_strategy(),
        ) {
            assert_orders_like_collation(&a, &b, &collation)?;
        }

        #[test]
        fn collated_byte_order_matches_for_close_values(
            pair in close_pair_strategy(COLLATED_CHARS),
            collation in collation_strategy(),
        ) {
            assert_orders_like_collation(&pair.0, &pair.1, &collation)?;
        }

        #[test]
        fn encoded_len_finds_the_end_of_each_component(
            a in value_strategy(BINARY_CHARS),
            b in value_strategy(BINARY_CHARS),
            descending in any::<bool>(),
        ) {
            let first = encode_key(&[(&a, descending)]);
            let both = encode_key(&[(&a, descending), (&b, !descending)]);
            prop_assert_eq!(encoded_len(&both, descending), Some(first.len()));
            prop_assert_eq!(
                encoded_len(&both[first.len()..], !descending),
                Some(both.len() - first.len())
            );
        }

        #[test]
        fn byte_order_matches_value_order(a in value_strategy(BINARY_CHARS), b in value_strategy(BINARY_CHARS)) {
            assert_orders_like_compare_values(&a, &b)?;
        }

        #[test]
        fn byte_order_matches_value_order_for_close_values(pair in close_pair_strategy(BINARY_CHARS)) {
            assert_orders_like_compare_values(&pair.0, &pair.1)?;
        }

        #[test]
        fn byte_order_matches_value_order_for_numbers(
            a in number_strategy(),
            b in number_strategy(),
        ) {
            assert_orders_like_compare_values(&a, &b)?;
        }

        #[test]
        fn compound_keys_order_component_wise(
            first in close_pair_strategy(BINARY_CHARS),
            second in close_pair_strategy(BINARY_CHARS),
            share_first in any::<bool>(),
            directions in (any::<bool>(), any::<bool>()),
        ) {
            // Half the pairs tie on the first component, so the second one decides.
            let first = if share_first { (first.0.clone(), first.0) } else { first };
            let (first_descending, second_descending) = directions;
            let directed = |ord: Ordering, descending: bool| {
                if descending { ord.reverse() } else { ord }
            };
            let expected = directed(compare_values(&first.0, &first.1), first_descending)
                .then(directed(compare_values(&second.0, &second.1), second_descending));
            let left = encode_key(&[(&first.0, first_descending), (&second.0, second_descending)]);
            let right = encode_key(&[(&first.1, first_descending), (&second.1, second_descending)]);
            prop_assert_eq!(left.cmp(&right), expected, "{:?} then {:?}", first, second);
        }
    }
}
