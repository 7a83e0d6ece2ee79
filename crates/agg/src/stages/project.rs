//! `$project` (include, exclude or compute fields) and `$unset` (an exclusion written as
//! a list of paths). The field tree itself is `crate::projection`.

use crate::projection::Projection;
use basalt_error::{Error, Result};
use basalt_expr::ParseContext;
use bson::Bson;

pub(crate) fn parse(spec: &Bson, ctx: &ParseContext) -> Result<Projection> {
    match spec {
        Bson::Document(doc) => Projection::parse_project(doc, ctx),
        _ => Err(Error::location(
            15969,
            "$project specification must be an object",
        )),
    }
}

pub(crate) fn parse_unset(spec: &Bson) -> Result<Projection> {
    let paths = match spec {
        Bson::String(path) => vec![path.clone()],
        Bson::Array(items) => items
            .iter()
            .map(|item| match item {
                Bson::String(path) => Ok(path.clone()),
                _ => Err(Error::location(
                    31120,
                    "$unset specification must be a string or an array containing only string values",
                )),
            })
            .collect::<Result<Vec<_>>>()?,
        _ => {
            return Err(Error::location(
                31002,
                "$unset specification must be a string or an array",
            ))
        }
    };
    if paths.is_empty() {
        return Err(Error::location(
            31119,
            "$unset specification must be a string or an array with at least one field",
        ));
    }
    Projection::exclusion(&paths)
}

#[cfg(test)]
mod tests {
    use crate::pipeline::Pipeline;
    use bson::{doc, Document};

    fn run(stage: Document, input: Vec<Document>) -> basalt_error::Result<Vec<Document>> {
        Pipeline::parse(&[stage], None)?.run(input.into_iter().map(Ok))
    }

    #[test]
    fn project_and_unset_stages() {
        let input = vec![doc! {"_id": 1, "a": {"b": 1, "c": 2}, "d": 3}];
        assert_eq!(
            run(
                doc! {"$project": {"a.b": 1, "e": {"$add": ["$d", 1]}}},
                input.clone()
            )
            .unwrap(),
            vec![doc! {"_id": 1, "a": {"b": 1}, "e": 4}]
        );
        assert_eq!(
            run(doc! {"$project": {"x": "$a.c", "_id": 0}}, input.clone()).unwrap(),
            vec![doc! {"x": 2}]
        );
        assert_eq!(
            run(doc! {"$unset": "d"}, input.clone()).unwrap(),
            vec![doc! {"_id": 1, "a": {"b": 1, "c": 2}}]
        );
        assert_eq!(
            run(doc! {"$unset": ["a.b", "_id"]}, input.clone()).unwrap(),
            vec![doc! {"a": {"c": 2}, "d": 3}]
        );
        assert_eq!(
            run(doc! {"$project": 1}, input.clone()).unwrap_err().code.0,
            15969
        );
        assert_eq!(
            run(doc! {"$unset": 1}, input.clone()).unwrap_err().code.0,
            31002
        );
        assert_eq!(
            run(doc! {"$unset": [1]}, input.clone()).unwrap_err().code.0,
            31120
        );
        assert_eq!(
            run(doc! {"$unset": []}, input.clone()).unwrap_err().code.0,
            31119
        );
        assert_eq!(run(doc! {"$unset": ""}, input).unwrap_err().code.0, 40352);
    }
}
