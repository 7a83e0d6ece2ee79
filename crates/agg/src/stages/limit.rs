//! `$limit`: passes the first n documents, then stops pulling from upstream.

use crate::pipeline::DocumentStream;
use basalt_error::{Error, Result};
use basalt_value::Number;
use bson::Bson;

/// mongod 8's checks: a whole number that fits 64 bits and is not negative (5107201),
/// then one that is not zero (15958).
pub(crate) fn parse(spec: &Bson) -> Result<u64> {
    let invalid = |why: &str| {
        Error::location(
            5107201,
            format!("invalid argument to $limit stage: {why}: $limit: {spec}"),
        )
    };
    let n = Number::from_bson(spec).ok_or_else(|| invalid("Expected a number"))?;
    match n.to_i64_exact() {
        None => Err(invalid("Cannot represent as a 64-bit integer")),
        Some(n) if n < 0 => Err(invalid("Expected a non-negative number")),
        Some(0) => Err(Error::location(15958, "the limit must be positive")),
        Some(n) => Ok(n as u64),
    }
}

pub(crate) fn apply(n: u64, mut input: DocumentStream<'_>) -> DocumentStream<'_> {
    let mut remaining = n;
    Box::new(std::iter::from_fn(move || {
        if remaining == 0 {
            return None;
        }
        let item = input.next()?;
        if item.is_ok() {
            remaining -= 1;
        }
        Some(item)
    }))
}

#[cfg(test)]
mod tests {
    use crate::pipeline::Pipeline;
    use bson::{bson, doc};

    #[test]
    fn limits() {
        let input = || (0..5).map(|i| Ok(doc! {"i": i}));
        let p = Pipeline::parse(&[doc! {"$limit": 2}], None).unwrap();
        assert_eq!(p.run(input()).unwrap(), vec![doc! {"i": 0}, doc! {"i": 1}]);
        let p = Pipeline::parse(&[doc! {"$limit": 2.0}, doc! {"$limit": 10_i64}], None).unwrap();
        assert_eq!(p.run(input()).unwrap().len(), 2);
        let code = |v| {
            Pipeline::parse(&[doc! {"$limit": v}], None)
                .unwrap_err()
                .code
                .0
        };
        assert_eq!(code(bson!(0)), 15958);
        assert_eq!(code(bson!(-1)), 5107201);
        assert_eq!(code(bson!(1.5)), 5107201);
        assert_eq!(code(bson!("a")), 5107201);
    }
}
