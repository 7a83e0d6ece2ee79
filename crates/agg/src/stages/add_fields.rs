//! `$addFields` and its alias `$set`: computes fields and keeps the rest of the
//! document. Nested objects set fields inside existing subdocuments.

use crate::projection::Projection;
use basalt_error::{Error, Result};
use basalt_expr::ParseContext;
use bson::Bson;

pub(crate) fn parse(name: &str, spec: &Bson, ctx: &ParseContext) -> Result<Projection> {
    match spec {
        Bson::Document(doc) => Projection::parse_add_fields(doc, ctx),
        _ => Err(Error::location(
            40272,
            format!(
                "{name} specification stage must be an object, got {}",
                basalt_expr::type_name(Some(spec))
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
    fn add_fields_and_set() {
        let input = vec![doc! {"_id": 1, "a": 2}];
        assert_eq!(
            run(
                doc! {"$addFields": {"b": {"$multiply": ["$a", 10]}, "a": "x"}},
                input.clone()
            )
            .unwrap(),
            vec![doc! {"_id": 1, "a": "x", "b": 20}]
        );
        assert_eq!(
            run(doc! {"$set": {"c.d": "$a"}}, input.clone()).unwrap(),
            vec![doc! {"_id": 1, "a": 2, "c": {"d": 2}}]
        );
        assert_eq!(
            run(doc! {"$set": 1}, input.clone()).unwrap_err().code.0,
            40272
        );
        assert_eq!(
            run(doc! {"$set": {"$a": 1}}, input).unwrap_err().code.0,
            16410
        );
    }
}
