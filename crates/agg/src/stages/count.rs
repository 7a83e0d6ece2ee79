//! `$count`: one document `{<name>: n}` with the number of input documents (none when
//! there were none, as MongoDB's `$group` + `$project` rewrite of it gives).

use crate::pipeline::DocumentStream;
use crate::stages::{drain, finished};
use basalt_error::{Error, Result};
use bson::{doc, Bson, Document};

pub(crate) fn parse(spec: &Bson) -> Result<String> {
    let name = match spec {
        Bson::String(s) if !s.is_empty() => s,
        _ => {
            return Err(Error::location(
                40156,
                "the count field must be a non-empty string",
            ))
        }
    };
    if name.starts_with('$') {
        return Err(Error::location(
            40158,
            "the count field cannot be a $-prefixed path",
        ));
    }
    if name.contains('.') {
        return Err(Error::location(40160, "the count field cannot contain '.'"));
    }
    Ok(name.clone())
}

pub(crate) fn apply<'a>(name: &'a str, input: DocumentStream<'a>) -> DocumentStream<'a> {
    let mut count: i64 = 0;
    let result = drain(input, |_| {
        count += 1;
        Ok(())
    });
    finished(result.map(|()| output(name, count)))
}

/// The stage's output for `count` documents.
pub(crate) fn output(name: &str, count: i64) -> Vec<Document> {
    if count == 0 {
        return Vec::new();
    }
    let n = i32::try_from(count).map_or(Bson::Int64(count), Bson::Int32);
    vec![doc! {name: n}]
}

#[cfg(test)]
mod tests {
    use crate::pipeline::Pipeline;
    use bson::{bson, doc};

    #[test]
    fn counts() {
        let p = Pipeline::parse(
            &[doc! {"$match": {"i": {"$gt": 1}}}, doc! {"$count": "n"}],
            None,
        )
        .unwrap();
        assert_eq!(
            p.run((0..5).map(|i| Ok(doc! {"i": i}))).unwrap(),
            vec![doc! {"n": 3}]
        );
        assert!(p.run(std::iter::empty()).unwrap().is_empty());
        let code = |v| {
            Pipeline::parse(&[doc! {"$count": v}], None)
                .unwrap_err()
                .code
                .0
        };
        assert_eq!(code(bson!("")), 40156);
        assert_eq!(code(bson!(1)), 40156);
        assert_eq!(code(bson!("$n")), 40158);
        assert_eq!(code(bson!("a.b")), 40160);
    }
}
