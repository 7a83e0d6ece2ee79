//! MongoDB's total order over BSON values: the order of `sort`, of index keys and of the
//! comparison query operators once type bracketing has picked the candidates.
//!
//! Types are ranked first (MinKey < undefined < null < numbers < strings < objects <
//! arrays < binary < ObjectId < booleans < dates < timestamps < regexes < DBPointer <
//! JavaScript < JavaScript with scope < MaxKey), then values of the same rank are compared
//! by content. All numeric types share one rank and compare by numeric value, so `1`,
//! `NumberLong(1)`, `1.0` and `Decimal128("1")` are equal; NaN sorts below every other
//! number and equals itself. As in MongoDB, undefined has a rank of its own just below
//! null (it is not equal to null).
//!
//! Numbers compare by exact value across types (see `number.rs`): `Decimal128("0.1")` sorts
//! below the double `0.1`, as in MongoDB.
//!
//! Under a [`Collation`], strings and symbols compare by it, also inside documents and
//! arrays; field names, regexes and JavaScript code stay binary, as in MongoDB.

use crate::collation::Collation;
use crate::number::{compare_numbers, Number};
use bson::{Bson, Document};
use std::cmp::Ordering;

/// Rank of a value's type in MongoDB's cross-type order; values of different ranks compare
/// by rank alone. Numbers share one rank, as do strings and symbols. The numbers follow
/// MongoDB's own `canonicalizeBSONType`, shifted so that MinKey is 0.
pub fn canonical_type_rank(v: &Bson) -> u8 {
    match v {
        Bson::MinKey => 0,
        Bson::Undefined => 1,
        Bson::Null => 5,
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => 10,
        Bson::String(_) | Bson::Symbol(_) => 15,
        Bson::Document(_) => 20,
        Bson::Array(_) => 25,
        Bson::Binary(_) => 30,
        Bson::ObjectId(_) => 35,
        Bson::Boolean(_) => 40,
        Bson::DateTime(_) => 45,
        Bson::Timestamp(_) => 47,
        Bson::RegularExpression(_) => 50,
        Bson::DbPointer(_) => 55,
        Bson::JavaScriptCode(_) => 60,
        Bson::JavaScriptCodeWithScope(_) => 65,
        Bson::MaxKey => 127,
    }
}

/// Compares two values in MongoDB's sort order.
pub fn compare_values(a: &Bson, b: &Bson) -> Ordering {
    compare_values_with(a, b, None)
}

/// Compares two values in MongoDB's sort order, strings under `collation` (binary when
/// `None`).
pub fn compare_values_with(a: &Bson, b: &Bson, collation: Option<&Collation>) -> Ordering {
    let by_rank = canonical_type_rank(a).cmp(&canonical_type_rank(b));
    if by_rank != Ordering::Equal {
        return by_rank;
    }
    match (a, b) {
        (Bson::String(x) | Bson::Symbol(x), Bson::String(y) | Bson::Symbol(y)) => match collation {
            None => x.as_bytes().cmp(y.as_bytes()),
            Some(collation) => collation.compare(x, y),
        },
        (Bson::Document(x), Bson::Document(y)) => compare_documents_with(x, y, collation),
        (Bson::Array(x), Bson::Array(y)) => compare_arrays_with(x, y, collation),
        (Bson::Binary(x), Bson::Binary(y)) => x
            .bytes
            .len()
            .cmp(&y.bytes.len())
            .then_with(|| u8::from(x.subtype).cmp(&u8::from(y.subtype)))
            .then_with(|| x.bytes.cmp(&y.bytes)),
        (Bson::ObjectId(x), Bson::ObjectId(y)) => x.bytes().cmp(&y.bytes()),
        (Bson::Boolean(x), Bson::Boolean(y)) => x.cmp(y),
        (Bson::DateTime(x), Bson::DateTime(y)) => x.timestamp_millis().cmp(&y.timestamp_millis()),
        (Bson::Timestamp(x), Bson::Timestamp(y)) => {
            (x.time, x.increment).cmp(&(y.time, y.increment))
        }
        (Bson::RegularExpression(x), Bson::RegularExpression(y)) => x
            .pattern
            .as_str()
            .as_bytes()
            .cmp(y.pattern.as_str().as_bytes())
            .then_with(|| {
                x.options
                    .as_str()
                    .as_bytes()
                    .cmp(y.options.as_str().as_bytes())
            }),
        (Bson::DbPointer(_), Bson::DbPointer(_)) => compare_db_pointers(a, b),
        (Bson::JavaScriptCode(x), Bson::JavaScriptCode(y)) => x.as_bytes().cmp(y.as_bytes()),
        (Bson::JavaScriptCodeWithScope(x), Bson::JavaScriptCodeWithScope(y)) => x
            .code
            .as_bytes()
            .cmp(y.code.as_bytes())
            .then_with(|| compare_documents(&x.scope, &y.scope)),
        _ => match (Number::from_bson(a), Number::from_bson(b)) {
            (Some(x), Some(y)) => compare_numbers(x, y),
            // Same rank and not numbers: MinKey, MaxKey, null or undefined, all equal to
            // themselves.
            _ => Ordering::Equal,
        },
    }
}

/// Whether two values are equal in MongoDB's order (so `1 == 1.0`, `"a" == Symbol("a")`).
pub fn values_equal(a: &Bson, b: &Bson) -> bool {
    compare_values(a, b) == Ordering::Equal
}

/// A borrowed value ordered by [`compare_values`], for sets and maps of values (a
/// membership test over a large array in log time instead of a scan).
#[derive(Clone, Copy, Debug)]
pub struct ByValue<'a>(pub &'a Bson);

impl PartialEq for ByValue<'_> {
    fn eq(&self, other: &Self) -> bool {
        values_equal(self.0, other.0)
    }
}

impl Eq for ByValue<'_> {}

impl PartialOrd for ByValue<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ByValue<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_values(self.0, other.0)
    }
}

/// Compares documents field by field: type rank, then field name, then value; a document
/// that is a prefix of the other sorts first.
pub fn compare_documents(a: &Document, b: &Document) -> Ordering {
    compare_documents_with(a, b, None)
}

fn compare_documents_with(a: &Document, b: &Document, collation: Option<&Collation>) -> Ordering {
    let mut left = a.iter();
    let mut right = b.iter();
    loop {
        match (left.next(), right.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some((ka, va)), Some((kb, vb))) => {
                let ord = canonical_type_rank(va)
                    .cmp(&canonical_type_rank(vb))
                    .then_with(|| ka.as_bytes().cmp(kb.as_bytes()))
                    .then_with(|| compare_values_with(va, vb, collation));
                if ord != Ordering::Equal {
                    return ord;
                }
            }
        }
    }
}

/// Compares arrays element by element; a prefix sorts first.
pub fn compare_arrays(a: &[Bson], b: &[Bson]) -> Ordering {
    compare_arrays_with(a, b, None)
}

fn compare_arrays_with(a: &[Bson], b: &[Bson], collation: Option<&Collation>) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        let ord = compare_values_with(x, y, collation);
        if ord != Ordering::Equal {
            return ord;
        }
    }
    a.len().cmp(&b.len())
}

/// DBPointers compare as MongoDB compares their raw values: by encoded size, then bytes
/// (namespace, then ObjectId). The `bson` crate hides their fields, so the values are
/// encoded to reach them; DBPointers are deprecated and rare enough for this to be cheap.
fn compare_db_pointers(a: &Bson, b: &Bson) -> Ordering {
    let encode = |v: &Bson| {
        let mut wrapper = Document::new();
        wrapper.insert("", v.clone());
        // Layout: i32 document length, type byte, empty key's NUL, then the value, then
        // the document's terminating NUL.
        wrapper
            .to_vec()
            .map(|bytes| bytes[6..bytes.len() - 1].to_vec())
            .unwrap_or_default()
    };
    let (x, y) = (encode(a), encode(b));
    x.len().cmp(&y.len()).then_with(|| x.cmp(&y))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, oid::ObjectId, spec::BinarySubtype, Binary, Decimal128, Timestamp};
    use proptest::prelude::*;
    use std::str::FromStr;

    fn dec(s: &str) -> Bson {
        Bson::Decimal128(Decimal128::from_str(s).unwrap())
    }

    #[test]
    fn cross_type_order() {
        let ordered = [
            Bson::MinKey,
            Bson::Undefined,
            Bson::Null,
            Bson::Double(f64::NAN),
            Bson::Int32(-5),
            Bson::Int64(3),
            Bson::String("".into()),
            Bson::String("a".into()),
            Bson::Document(doc! {}),
            Bson::Array(vec![]),
            Bson::Binary(Binary {
                subtype: BinarySubtype::Generic,
                bytes: vec![1],
            }),
            Bson::ObjectId(ObjectId::from_bytes([0; 12])),
            Bson::Boolean(false),
            Bson::Boolean(true),
            Bson::DateTime(bson::DateTime::from_millis(-1)),
            Bson::Timestamp(Timestamp {
                time: 1,
                increment: 0,
            }),
            Bson::RegularExpression(bson::Regex {
                pattern: "a".to_string().try_into().unwrap(),
                options: "".to_string().try_into().unwrap(),
            }),
            Bson::JavaScriptCode("x".into()),
            Bson::MaxKey,
        ];
        for (i, x) in ordered.iter().enumerate() {
            for (j, y) in ordered.iter().enumerate() {
                assert_eq!(compare_values(x, y), i.cmp(&j), "{x:?} vs {y:?}");
            }
        }
    }

    #[test]
    fn numbers_compare_by_value() {
        assert!(values_equal(&Bson::Int32(1), &Bson::Double(1.0)));
        assert!(values_equal(&Bson::Int64(1), &dec("1.0")));
        assert!(values_equal(&Bson::Double(f64::NAN), &dec("NaN")));
        assert_eq!(
            compare_values(&Bson::Double(f64::NAN), &Bson::Double(f64::NEG_INFINITY)),
            Ordering::Less
        );
        assert_eq!(
            compare_values(&Bson::Int32(2), &Bson::Double(2.5)),
            Ordering::Less
        );
        assert_eq!(
            compare_values(&dec("-1E+400"), &Bson::Int64(i64::MIN)),
            Ordering::Less
        );
    }

    #[test]
    fn large_int64_against_double_is_exact() {
        // 2^53 + 1 is not representable as a double; converting it would tie.
        let big = (1i64 << 53) + 1;
        let d = Bson::Double((1u64 << 53) as f64);
        assert_eq!(compare_values(&Bson::Int64(big), &d), Ordering::Greater);
        assert_eq!(
            compare_values(&Bson::Int64(i64::MAX), &Bson::Double(i64::MAX as f64)),
            Ordering::Less
        );
        assert_eq!(
            compare_values(&Bson::Int64(i64::MIN), &Bson::Double(i64::MIN as f64)),
            Ordering::Equal
        );
    }

    #[test]
    fn strings_and_symbols_share_a_rank() {
        assert!(values_equal(
            &Bson::String("abc".into()),
            &Bson::Symbol("abc".into())
        ));
        assert_eq!(
            compare_values(&Bson::String("B".into()), &Bson::String("a".into())),
            Ordering::Less
        );
    }

    #[test]
    fn documents_compare_field_by_field() {
        let cmp = |a: Document, b: Document| compare_documents(&a, &b);
        assert_eq!(cmp(doc! {"a": 1}, doc! {"a": 1, "b": 1}), Ordering::Less);
        assert_eq!(cmp(doc! {"a": 1}, doc! {"b": 0}), Ordering::Less);
        // Type rank wins over field name.
        assert_eq!(cmp(doc! {"b": 1}, doc! {"a": "x"}), Ordering::Less);
        assert_eq!(cmp(doc! {"a": 1}, doc! {"a": 1.0}), Ordering::Equal);
        assert_eq!(cmp(doc! {"a": 2}, doc! {"a": 1, "b": 1}), Ordering::Greater);
    }

    #[test]
    fn arrays_binary_and_regex() {
        let arr = |v: Vec<Bson>| Bson::Array(v);
        assert_eq!(
            compare_values(&arr(vec![1.into()]), &arr(vec![1.into(), 0.into()])),
            Ordering::Less
        );
        assert_eq!(
            compare_values(&arr(vec![2.into()]), &arr(vec![1.into(), 5.into()])),
            Ordering::Greater
        );
        let bin = |subtype, bytes: Vec<u8>| Bson::Binary(Binary { subtype, bytes });
        assert_eq!(
            compare_values(
                &bin(BinarySubtype::UserDefined(0x80), vec![9]),
                &bin(BinarySubtype::Generic, vec![0, 0])
            ),
            Ordering::Less
        );
        assert_eq!(
            compare_values(
                &bin(BinarySubtype::Generic, vec![9]),
                &bin(BinarySubtype::Uuid, vec![0])
            ),
            Ordering::Less
        );
        let re = |p: &str, o: &str| {
            Bson::RegularExpression(bson::Regex {
                pattern: p.to_string().try_into().unwrap(),
                options: o.to_string().try_into().unwrap(),
            })
        };
        assert_eq!(
            compare_values(&re("a", "i"), &re("a", "")),
            Ordering::Greater
        );
        assert_eq!(compare_values(&re("a", "z"), &re("b", "")), Ordering::Less);
    }

    fn arb_value() -> impl Strategy<Value = Bson> {
        let leaf = prop_oneof![
            Just(Bson::Null),
            Just(Bson::MinKey),
            Just(Bson::MaxKey),
            any::<i32>().prop_map(Bson::Int32),
            any::<i64>().prop_map(Bson::Int64),
            any::<f64>().prop_map(Bson::Double),
            (-100i64..100).prop_map(|i| Bson::Double(i as f64)),
            (-100i64..100, 0u32..3).prop_map(|(c, e)| dec(&format!("{c}E-{e}"))),
            "[ab]{0,2}".prop_map(Bson::String),
            any::<bool>().prop_map(Bson::Boolean),
        ];
        leaf.prop_recursive(2, 8, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Bson::Array),
                prop::collection::vec(("[ab]", inner), 0..3)
                    .prop_map(|fields| Bson::Document(fields.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn is_a_total_order(a in arb_value(), b in arb_value(), c in arb_value()) {
            prop_assert_eq!(compare_values(&a, &b), compare_values(&b, &a).reverse());
            prop_assert_eq!(compare_values(&a, &a), Ordering::Equal);
            if compare_values(&a, &b) != Ordering::Greater
                && compare_values(&b, &c) != Ordering::Greater
            {
                prop_assert_ne!(compare_values(&a, &c), Ordering::Greater);
            }
        }
    }

    #[test]
    fn strings_compare_under_a_collation() {
        let collation = Collation::parse(&doc! {"locale": "en", "strength": 2})
            .unwrap()
            .unwrap();
        let with = |a: &Bson, b: &Bson| compare_values_with(a, b, Some(&collation));
        let (upper, lower) = (Bson::String("PING".into()), Bson::String("ping".into()));
        assert_eq!(with(&upper, &lower), Ordering::Equal);
        assert_eq!(compare_values(&upper, &lower), Ordering::Less);
        assert_eq!(with(&Bson::Symbol("Ping".into()), &lower), Ordering::Equal);
        assert_eq!(
            with(
                &bson::bson!({"a": ["X", {"b": "Y"}]}),
                &bson::bson!({"a": ["x", {"b": "y"}]})
            ),
            Ordering::Equal
        );
        // Field names stay binary.
        assert_eq!(
            with(&bson::bson!({"A": 1}), &bson::bson!({"a": 1})),
            Ordering::Less
        );
        assert_eq!(
            with(&Bson::String("b".into()), &Bson::String("B".into())),
            Ordering::Equal
        );
        // Other types are untouched, and type order still comes first.
        assert_eq!(
            with(&Bson::Int32(1), &Bson::String("a".into())),
            Ordering::Less
        );
        assert_eq!(
            with(
                &Bson::JavaScriptCode("A".into()),
                &Bson::JavaScriptCode("a".into())
            ),
            Ordering::Less
        );
    }

    #[test]
    fn undefined_sorts_below_null() {
        assert_eq!(
            compare_values(&Bson::Undefined, &Bson::Null),
            Ordering::Less
        );
        assert!(values_equal(&Bson::Null, &Bson::Null));
    }
}
