//! `$limit`: passes the first n documents, then stops pulling from upstream.

use crate::pipeline::DocumentStream;
use basalt_error::{Error, Result};
use basalt_value::Number;
use bson::Bson;

pub(crate) fn parse(spec: &Bson) -> Result<u64> {
    let n = Number::from_bson(spec)
        .ok_or_else(|| Error::location(15957, "the limit must be specified as a number"))?;
    match n.to_i64_exact() {
        Some(n) if n > 0 => Ok(n as u64),
        _ => Err(Error::location(15958, "the limit must be positive")),
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
        assert_eq!(code(bson!(-1)), 15958);
        assert_eq!(code(bson!("a")), 15957);
    }
}
