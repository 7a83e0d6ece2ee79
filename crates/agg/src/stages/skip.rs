//! `$skip`: drops the first n documents.

use crate::pipeline::DocumentStream;
use basalt_error::{Error, Result};
use basalt_value::Number;
use bson::Bson;

/// mongod 8's check: a whole number that fits 64 bits and is not negative (5107200).
pub(crate) fn parse(spec: &Bson) -> Result<u64> {
    let invalid = |why: &str| {
        Error::location(
            5107200,
            format!("invalid argument to $skip stage: {why}: $skip: {spec}"),
        )
    };
    let n = Number::from_bson(spec).ok_or_else(|| invalid("Expected a number"))?;
    match n.to_i64_exact() {
        None => Err(invalid("Cannot represent as a 64-bit integer")),
        Some(n) if n < 0 => Err(invalid("Expected a non-negative number")),
        Some(n) => Ok(n as u64),
    }
}

pub(crate) fn apply(n: u64, input: DocumentStream<'_>) -> DocumentStream<'_> {
    let mut remaining = n;
    Box::new(input.filter(move |item| {
        if item.is_ok() && remaining > 0 {
            remaining -= 1;
            false
        } else {
            true
        }
    }))
}

#[cfg(test)]
mod tests {
    use crate::pipeline::Pipeline;
    use bson::{bson, doc};

    #[test]
    fn skips() {
        let input = || (0..5).map(|i| Ok(doc! {"i": i}));
        let p = Pipeline::parse(&[doc! {"$skip": 3}], None).unwrap();
        assert_eq!(p.run(input()).unwrap(), vec![doc! {"i": 3}, doc! {"i": 4}]);
        let p = Pipeline::parse(&[doc! {"$skip": 9_i64}], None).unwrap();
        assert!(p.run(input()).unwrap().is_empty());
        let code = |v| {
            Pipeline::parse(&[doc! {"$skip": v}], None)
                .unwrap_err()
                .code
                .0
        };
        assert_eq!(code(bson!(-1)), 5107200);
        assert_eq!(code(bson!(1.5)), 5107200);
        assert_eq!(code(bson!("a")), 5107200);
    }
}
