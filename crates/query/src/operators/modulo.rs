//! `$mod: [divisor, remainder]`: numbers whose integer part leaves that remainder.
//!
//! Both operands and the tested values are truncated to 64-bit integers, and the
//! remainder takes the sign of the dividend (C's `%`), as in MongoDB.

use super::{Predicate, ValueMatch};
use basalt_error::{Error, Result};
use basalt_value::Number;
use bson::Bson;

#[derive(Clone, Debug)]
pub(crate) struct Modulo {
    divisor: i64,
    remainder: i64,
}

impl Modulo {
    pub(crate) fn matches(&self, v: &Bson) -> bool {
        truncate_to_i64(v).is_some_and(|x| x.wrapping_rem(self.divisor) == self.remainder)
    }
}

/// A number's integer part; `None` for non-numbers, NaN and infinities.
fn truncate_to_i64(v: &Bson) -> Option<i64> {
    match Number::from_bson(v)? {
        Number::Int32(i) => Some(i64::from(i)),
        Number::Int64(i) => Some(i),
        other => {
            let d = other.to_f64();
            // `as` saturates out-of-range values, as MongoDB's coercion does.
            d.is_finite().then_some(d.trunc() as i64)
        }
    }
}

/// An operand of `$mod`: a finite number in int64 range, truncated.
fn operand(v: &Bson, role: &str) -> Result<i64> {
    let Some(n) = Number::from_bson(v) else {
        return Err(Error::bad_value(format!(
            "malformed mod, {role} not a number"
        )));
    };
    let d = n.to_f64();
    let invalid = |why: &str| {
        Error::bad_value(format!(
            "malformed mod, {role} value is invalid :: caused by :: {why}"
        ))
    };
    match n {
        Number::Int32(i) => Ok(i64::from(i)),
        Number::Int64(i) => Ok(i),
        _ if !d.is_finite() => Err(invalid("Unable to coerce NaN/Inf to integral type")),
        _ if !(-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&d) => {
            Err(invalid("Out of bounds coercing to integral value"))
        }
        _ => Ok(d.trunc() as i64),
    }
}

pub(super) fn parse_mod(operand_value: &Bson) -> Result<ValueMatch> {
    let Bson::Array(items) = operand_value else {
        return Err(Error::bad_value("malformed mod, needs to be an array"));
    };
    if items.len() < 2 {
        return Err(Error::bad_value("malformed mod, not enough elements"));
    }
    if items.len() > 2 {
        return Err(Error::bad_value("malformed mod, too many elements"));
    }
    let divisor = operand(&items[0], "divisor")?;
    let remainder = operand(&items[1], "remainder")?;
    if divisor == 0 {
        return Err(Error::bad_value("divisor cannot be 0"));
    }
    Ok(ValueMatch::Leaf(Predicate::Mod(Modulo {
        divisor,
        remainder,
    })))
}

#[cfg(test)]
mod tests {
    use crate::Matcher;
    use bson::doc;

    fn matches(filter: bson::Document, doc: bson::Document) -> bool {
        Matcher::new(&filter).unwrap().matches(&doc)
    }

    #[test]
    fn remainders() {
        assert!(matches(doc! {"a": {"$mod": [4, 1]}}, doc! {"a": 9}));
        assert!(matches(doc! {"a": {"$mod": [4, 1]}}, doc! {"a": 9.9}));
        assert!(matches(doc! {"a": {"$mod": [4, -1]}}, doc! {"a": -9}));
        assert!(matches(doc! {"a": {"$mod": [4.7, 1]}}, doc! {"a": 5i64}));
        assert!(matches(doc! {"a": {"$mod": [-1, 0]}}, doc! {"a": i64::MIN}));
        assert!(!matches(doc! {"a": {"$mod": [4, 1]}}, doc! {"a": "9"}));
        assert!(!matches(doc! {"a": {"$mod": [4, 0]}}, doc! {"a": f64::NAN}));
        assert!(matches(doc! {"a": {"$mod": [2, 0]}}, doc! {"a": [1, 4]}));
    }

    #[test]
    fn errors() {
        let err = |f: bson::Document| Matcher::new(&f).unwrap_err().message;
        assert_eq!(
            err(doc! {"a": {"$mod": 4}}),
            "malformed mod, needs to be an array"
        );
        assert_eq!(
            err(doc! {"a": {"$mod": [4]}}),
            "malformed mod, not enough elements"
        );
        assert_eq!(
            err(doc! {"a": {"$mod": [4, 1, 2]}}),
            "malformed mod, too many elements"
        );
        assert_eq!(
            err(doc! {"a": {"$mod": ["4", 1]}}),
            "malformed mod, divisor not a number"
        );
        assert_eq!(
            err(doc! {"a": {"$mod": [4, "1"]}}),
            "malformed mod, remainder not a number"
        );
        assert_eq!(err(doc! {"a": {"$mod": [0.5, 1]}}), "divisor cannot be 0");
        assert_eq!(
            err(doc! {"a": {"$mod": [f64::NAN, 1]}}),
            "malformed mod, divisor value is invalid :: caused by :: Unable to coerce NaN/Inf to integral type"
        );
    }
}
