//! `$documents`: the documents of an expression that evaluates to an array of objects,
//! for pipelines that read no collection (`aggregate: 1`, and `$lookup`/`$unionWith`
//! sub-pipelines without a collection). The expression sees no document, only variables.

use basalt_error::{Error, Result};
use basalt_expr::{type_name, Expression, ParseContext, Variables};
use bson::{Bson, Document};

pub(crate) fn parse(spec: &Bson, ctx: &ParseContext) -> Result<Expression> {
    Expression::parse(spec, ctx)
}

pub(crate) fn evaluate(expression: &Expression, vars: &Variables) -> Result<Vec<Document>> {
    let items = match expression.evaluate(&Document::new(), vars)? {
        Some(Bson::Array(items)) => items,
        other => {
            return Err(Error::location(
                5858203,
                format!(
                    "$documents requires an array of objects, but found {}",
                    type_name(other.as_ref())
                ),
            ))
        }
    };
    items
        .into_iter()
        .map(|item| match item {
            Bson::Document(d) => Ok(d),
            other => Err(Error::location(
                40228,
                format!(
                    "elements of the array given to $documents must be objects, but found: {other}. Type of resulting value: '{}'",
                    type_name(Some(&other))
                ),
            )),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::pipeline::Pipeline;
    use bson::{doc, Document};

    fn run(stages: Vec<Document>) -> basalt_error::Result<Vec<Document>> {
        Pipeline::parse(&stages, Some(&doc! {"x": 5}))?.run(std::iter::empty())
    }

    #[test]
    fn documents_come_from_the_expression() {
        assert_eq!(
            run(vec![
                doc! {"$documents": [{"a": 1}, {"a": "$$x"}]},
                doc! {"$match": {"a": {"$gt": 1}}},
            ])
            .unwrap(),
            vec![doc! {"a": 5}]
        );
        assert_eq!(
            run(vec![
                doc! {"$documents": {"$map": {"input": [1, 2], "in": {"v": "$$this"}}}}
            ])
            .unwrap(),
            vec![doc! {"v": 1}, doc! {"v": 2}]
        );
        assert!(run(vec![doc! {"$documents": []}]).unwrap().is_empty());
    }

    #[test]
    fn documents_errors() {
        let code = |stages: Vec<Document>| run(stages).unwrap_err().code.0;
        assert_eq!(code(vec![doc! {"$documents": 1}]), 5858203);
        assert_eq!(code(vec![doc! {"$documents": [1]}]), 40228);
        assert_eq!(
            code(vec![doc! {"$match": {}}, doc! {"$documents": []}]),
            40602
        );
    }

    #[test]
    fn database_level_aggregation_needs_a_source_first() {
        let check = |stages: Vec<Document>, collectionless: bool| {
            Pipeline::parse_aggregate(&stages, None, collectionless, None)
                .map(|_| ())
                .map_err(|e| (e.code.0, e.message))
        };
        assert!(check(vec![doc! {"$documents": []}], true).is_ok());
        assert!(check(vec![doc! {"$match": {}}], false).is_ok());
        assert_eq!(
            check(vec![doc! {"$match": {}}], true).unwrap_err(),
            (
                73,
                "{aggregate: 1} is not valid for '$match'; a collection is required.".into()
            )
        );
        assert_eq!(
            check(vec![doc! {"$documents": []}], false).unwrap_err(),
            (
                73,
                "'$documents' can only be run with {aggregate: 1}".into()
            )
        );
        assert_eq!(check(vec![], true).unwrap_err().0, 73);
        assert_eq!(
            check(vec![doc! {"$match": {}}, doc! {"$documents": []}], true)
                .unwrap_err()
                .0,
            73,
            "the namespace is checked before the positions"
        );
    }
}
