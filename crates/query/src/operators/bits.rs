//! `$bitsAllSet`, `$bitsAnySet`, `$bitsAllClear` and `$bitsAnyClear`: bit tests on
//! integers (as 64-bit two's complement, so bits above 63 repeat the sign) and on binary
//! data (little-endian bit order; bits past the end are clear).

use super::{Predicate, ValueMatch};
use crate::display::element_to_string;
use basalt_error::{Error, Result};
use basalt_value::Number;
use bson::Bson;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BitTestKind {
    AllSet,
    AnySet,
    AllClear,
    AnyClear,
}

#[derive(Clone, Debug)]
pub(crate) struct BitTest {
    kind: BitTestKind,
    positions: Vec<u32>,
}

impl BitTest {
    pub(crate) fn matches(&self, v: &Bson) -> bool {
        let bits = match v {
            Bson::Binary(b) => Bits::Bytes(&b.bytes),
            _ => match integral_value(v) {
                Some(x) => Bits::Integer(x),
                None => return false,
            },
        };
        let mut positions = self.positions.iter().map(|&p| bits.is_set(p));
        match self.kind {
            BitTestKind::AllSet => positions.all(|set| set),
            BitTestKind::AnySet => positions.any(|set| set),
            BitTestKind::AllClear => positions.all(|set| !set),
            BitTestKind::AnyClear => positions.any(|set| !set),
        }
    }
}

/// The bits of a tested value.
enum Bits<'a> {
    Bytes(&'a [u8]),
    Integer(i64),
}

impl Bits<'_> {
    fn is_set(&self, position: u32) -> bool {
        match self {
            Bits::Bytes(bytes) => bytes
                .get((position / 8) as usize)
                .is_some_and(|byte| byte & (1 << (position % 8)) != 0),
            Bits::Integer(x) if position >= 64 => *x < 0,
            Bits::Integer(x) => (x >> position) & 1 == 1,
        }
    }
}

/// Numbers take part only when they are integers representable in 64 bits.
fn integral_value(v: &Bson) -> Option<i64> {
    Number::from_bson(v)?.to_i64_exact()
}

pub(super) fn parse_bit_test(path: &str, name: &str, operand: &Bson) -> Result<ValueMatch> {
    let kind = match name {
        "$bitsAllSet" => BitTestKind::AllSet,
        "$bitsAnySet" => BitTestKind::AnySet,
        "$bitsAllClear" => BitTestKind::AllClear,
        _ => BitTestKind::AnyClear,
    };
    let positions = match operand {
        Bson::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| bit_position(&i.to_string(), item))
            .collect::<Result<Vec<_>>>()?,
        Bson::Binary(b) => (0..b.bytes.len() as u32 * 8)
            .filter(|p| b.bytes[(p / 8) as usize] & (1 << (p % 8)) != 0)
            .collect(),
        _ if Number::from_bson(operand).is_some() => {
            let mask = bitmask(name, operand)?;
            (0..64).filter(|p| mask & (1 << p) != 0).collect()
        }
        _ => {
            return Err(Error::bad_value(format!(
                "{path} takes an Array, a number, or a BinData but received: {}",
                element_to_string(name, operand)
            )))
        }
    };
    Ok(ValueMatch::Leaf(Predicate::Bits(BitTest {
        kind,
        positions,
    })))
}

/// A bitmask operand: a non-negative integer representable in 64 bits.
fn bitmask(name: &str, operand: &Bson) -> Result<i64> {
    let shown = element_to_string(name, operand);
    let fail = |why: &str| Error::failed_to_parse(format!("{why}{shown}"));
    let value = match Number::from_bson(operand) {
        Some(Number::Int32(i)) => i64::from(i),
        Some(Number::Int64(i)) => i,
        Some(Number::Double(d)) if d.is_nan() => {
            return Err(fail("Expected an integer, but found NaN in: "))
        }
        Some(n) => {
            let d = n.to_f64();
            if !(-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&d) {
                return Err(fail("Cannot represent as a 64-bit integer: "));
            }
            n.to_i64_exact()
                .ok_or_else(|| fail("Expected an integer: "))?
        }
        None => return Err(fail("Expected a number in: ")),
    };
    if value < 0 {
        return Err(fail("Expected a positive number in: "));
    }
    Ok(value)
}

/// One entry of a bit-positions array: a non-negative 32-bit integer.
fn bit_position(index: &str, item: &Bson) -> Result<u32> {
    let shown = element_to_string(index, item);
    let value = match Number::from_bson(item) {
        None => {
            return Err(Error::bad_value(format!(
                "bit positions must be an integer but got: {shown}"
            )))
        }
        Some(Number::Double(d)) if d.is_nan() => {
            return Err(Error::bad_value(format!(
                "bit positions cannot take a NaN: {shown}"
            )))
        }
        Some(n) => {
            let d = n.to_f64();
            if d > f64::from(i32::MAX) || d < f64::from(i32::MIN) {
                return Err(Error::bad_value(format!(
                    "bit positions cannot be represented as a 32-bit signed integer: {shown}"
                )));
            }
            n.to_i64_exact().ok_or_else(|| {
                Error::bad_value(format!("bit positions must be an integer but got: {shown}"))
            })?
        }
    };
    u32::try_from(value)
        .map_err(|_| Error::bad_value(format!("bit positions must be >= 0 but got: {shown}")))
}

#[cfg(test)]
mod tests {
    use crate::Matcher;
    use bson::{doc, spec::BinarySubtype, Binary};

    fn matches(filter: bson::Document, doc: bson::Document) -> bool {
        Matcher::new(&filter).unwrap().matches(&doc)
    }

    fn error(filter: bson::Document) -> String {
        Matcher::new(&filter).unwrap_err().message
    }

    #[test]
    fn numbers() {
        // 54 = 0b110110
        assert!(matches(doc! {"a": {"$bitsAllSet": [1, 2]}}, doc! {"a": 54}));
        assert!(!matches(
            doc! {"a": {"$bitsAllSet": [0, 1]}},
            doc! {"a": 54}
        ));
        assert!(matches(doc! {"a": {"$bitsAllSet": 6}}, doc! {"a": 54}));
        assert!(matches(doc! {"a": {"$bitsAnySet": [0, 1]}}, doc! {"a": 54}));
        assert!(matches(
            doc! {"a": {"$bitsAllClear": [0, 3]}},
            doc! {"a": 54}
        ));
        assert!(matches(
            doc! {"a": {"$bitsAnyClear": [0, 1]}},
            doc! {"a": 54}
        ));
        assert!(matches(doc! {"a": {"$bitsAllSet": [70]}}, doc! {"a": -1}));
        assert!(!matches(doc! {"a": {"$bitsAllSet": [1]}}, doc! {"a": 2.5}));
        assert!(matches(doc! {"a": {"$bitsAllSet": [1]}}, doc! {"a": 2.0}));
        assert!(!matches(doc! {"a": {"$bitsAllSet": [1]}}, doc! {"a": "2"}));
    }

    #[test]
    fn binary() {
        let bin = |bytes: Vec<u8>| Binary {
            subtype: BinarySubtype::Generic,
            bytes,
        };
        assert!(matches(
            doc! {"a": {"$bitsAllSet": [8]}},
            doc! {"a": bin(vec![0, 1])}
        ));
        assert!(!matches(
            doc! {"a": {"$bitsAnySet": [20]}},
            doc! {"a": bin(vec![0xff])}
        ));
        assert!(matches(
            doc! {"a": {"$bitsAllSet": bin(vec![0x03])}},
            doc! {"a": 7}
        ));
    }

    #[test]
    fn errors() {
        assert_eq!(
            error(doc! {"a": {"$bitsAllSet": "x"}}),
            "a takes an Array, a number, or a BinData but received: $bitsAllSet: \"x\""
        );
        assert_eq!(
            error(doc! {"a": {"$bitsAllSet": -1}}),
            "Expected a positive number in: $bitsAllSet: -1"
        );
        assert_eq!(
            error(doc! {"a": {"$bitsAnySet": 1.5}}),
            "Expected an integer: $bitsAnySet: 1.5"
        );
        assert_eq!(
            error(doc! {"a": {"$bitsAllSet": [-1]}}),
            "bit positions must be >= 0 but got: 0: -1"
        );
        assert_eq!(
            error(doc! {"a": {"$bitsAllSet": ["x"]}}),
            "bit positions must be an integer but got: 0: \"x\""
        );
    }
}
