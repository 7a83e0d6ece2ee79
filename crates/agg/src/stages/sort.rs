//! `$sort`: orders documents by a sort specification (`basalt_query::SortSpec`). Keys
//! are extracted once per document; the sort is stable, so ties keep input order.

use crate::pipeline::DocumentStream;
use crate::stages::{drain, finished};
use basalt_error::{Error, Result};
use basalt_query::SortSpec;
use bson::Bson;

#[derive(Debug)]
pub(crate) struct Sort {
    spec: SortSpec,
}

impl Sort {
    pub(crate) fn parse(spec: &Bson, collation: Option<&basalt_value::Collation>) -> Result<Sort> {
        let Bson::Document(doc) = spec else {
            return Err(Error::location(
                15973,
                "the $sort key specification must be an object",
            ));
        };
        if doc.is_empty() {
            return Err(Error::location(
                15976,
                "$sort stage must have at least one sort key",
            ));
        }
        Ok(Sort {
            spec: SortSpec::new(doc)?.with_collation(collation),
        })
    }

    pub(crate) fn apply<'a>(&'a self, input: DocumentStream<'a>) -> DocumentStream<'a> {
        let mut keyed = Vec::new();
        let result = drain(input, |doc| {
            keyed.push((self.spec.sort_key(&doc), doc));
            Ok(())
        });
        finished(result.map(|()| {
            keyed.sort_by(|(a, _), (b, _)| self.spec.compare_keys(a, b));
            keyed.into_iter().map(|(_, doc)| doc).collect()
        }))
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
    fn sorts_by_several_keys() {
        let input = vec![
            doc! {"a": 2, "b": 1},
            doc! {"a": 1, "b": 1},
            doc! {"a": 2, "b": 2},
            doc! {"b": 0},
        ];
        assert_eq!(
            run(doc! {"$sort": {"a": -1, "b": 1}}, input.clone()).unwrap(),
            vec![
                doc! {"a": 2, "b": 1},
                doc! {"a": 2, "b": 2},
                doc! {"a": 1, "b": 1},
                doc! {"b": 0}
            ]
        );
        assert_eq!(
            run(doc! {"$sort": {}}, input.clone()).unwrap_err().code.0,
            15976
        );
        assert_eq!(
            run(doc! {"$sort": 1}, input.clone()).unwrap_err().code.0,
            15973
        );
        assert_eq!(
            run(doc! {"$sort": {"a": 2}}, input).unwrap_err().code.0,
            15975
        );
    }
}
