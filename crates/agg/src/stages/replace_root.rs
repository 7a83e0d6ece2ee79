//! `$replaceRoot` and `$replaceWith`: the document becomes the value of an expression,
//! which must be an object.

use basalt_error::{Error, Result};
use basalt_expr::{type_name, Expression, ParseContext, Variables};
use bson::{Bson, Document};

pub(crate) fn parse(name: &str, spec: &Bson, ctx: &ParseContext) -> Result<Expression> {
    if name == "$replaceWith" {
        return Expression::parse(spec, ctx);
    }
    let Bson::Document(doc) = spec else {
        return Err(Error::location(
            40229,
            format!(
                "expected an object as specification for $replaceRoot stage, got {}",
                type_name(Some(spec))
            ),
        ));
    };
    let mut new_root = None;
    for (key, value) in doc {
        if key != "newRoot" {
            return Err(Error::location(
                40415,
                format!("BSON field '$replaceRoot.{key}' is an unknown field."),
            ));
        }
        new_root = Some(Expression::parse(value, ctx)?);
    }
    new_root
        .ok_or_else(|| Error::location(40231, "no newRoot specified for the $replaceRoot stage"))
}

pub(crate) fn apply(new_root: &Expression, doc: &Document, vars: &Variables) -> Result<Document> {
    match new_root.evaluate(doc, vars)? {
        Some(Bson::Document(d)) => Ok(d),
        other => Err(Error::location(
            40228,
            format!(
                "'newRoot' expression must evaluate to an object, but resulting value was: {}. Type of resulting value: '{}'. Input document: {doc}",
                other.as_ref().map_or_else(|| "MISSING".to_string(), ToString::to_string),
                type_name(other.as_ref())
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use crate::pipeline::Pipeline;
    use bson::{doc, Document};

    fn run(stage: Document, input: Vec<Document>) -> basalt_error::Result<Vec<Document>> {
        Pipeline::parse(&[stage], None)?.run(input.into_iter().map(Ok))
    }

    #[test]
    fn replaces_the_root() {
        let input = vec![doc! {"_id": 1, "a": {"b": 2}, "c": 3}];
        assert_eq!(
            run(doc! {"$replaceRoot": {"newRoot": "$a"}}, input.clone()).unwrap(),
            vec![doc! {"b": 2}]
        );
        assert_eq!(
            run(
                doc! {"$replaceWith": {"$mergeObjects": ["$a", {"c": "$c"}]}},
                input.clone()
            )
            .unwrap(),
            vec![doc! {"b": 2, "c": 3}]
        );
        assert_eq!(
            run(doc! {"$replaceRoot": {"newRoot": "$c"}}, input.clone())
                .unwrap_err()
                .code
                .0,
            40228
        );
        assert_eq!(
            run(doc! {"$replaceWith": "$nope"}, input.clone())
                .unwrap_err()
                .code
                .0,
            40228
        );
        assert_eq!(
            run(doc! {"$replaceRoot": {}}, input.clone())
                .unwrap_err()
                .code
                .0,
            40231
        );
        assert_eq!(
            run(doc! {"$replaceRoot": {"x": 1}}, input.clone())
                .unwrap_err()
                .code
                .0,
            40415
        );
        assert_eq!(
            run(doc! {"$replaceRoot": 1}, input).unwrap_err().code.0,
            40229
        );
    }
}
