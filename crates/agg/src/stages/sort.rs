//! `$sort`: orders documents by a sort specification (`basalt_query::SortSpec`). Keys
//! are extracted once per document; the sort is stable, so ties keep input order.
//!
//! As in MongoDB, the sort holds at most 100 MB of documents and spills sorted runs to
//! disk beyond that when the command allows disk use (the default), failing with 292
//! otherwise; a `$limit` right after it makes it keep only that many (a top-k sort).

use crate::pipeline::{DocumentStream, ExecContext};
use crate::stages::drain;
use basalt_error::{Error, Result};
use basalt_query::{BlockingSort, SortSpec, BLOCKING_SORT_MEMORY_LIMIT_BYTES};
use bson::{Bson, Document};

#[derive(Debug)]
pub(crate) struct Sort {
    keys: Document,
    spec: SortSpec,
    /// How many of the first documents are wanted (a `$limit` that follows).
    pub(crate) keep: Option<u64>,
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
            keys: doc.clone(),
            spec: SortSpec::new(doc)?.with_collation(collation),
            keep: None,
        })
    }

    /// The sort specification as given.
    pub(crate) fn keys(&self) -> &Document {
        &self.keys
    }

    /// The sort specification, parsed.
    pub(crate) fn spec(&self) -> &SortSpec {
        &self.spec
    }

    pub(crate) fn apply<'a>(
        &'a self,
        input: DocumentStream<'a>,
        ctx: ExecContext<'a>,
    ) -> DocumentStream<'a> {
        let keep = self.keep.map(|k| usize::try_from(k).unwrap_or(usize::MAX));
        let mut sort = BlockingSort::new(
            self.spec.clone(),
            BLOCKING_SORT_MEMORY_LIMIT_BYTES,
            ctx.collections.spill_directory(),
            keep,
        );
        match drain(input, |doc| sort.push(doc)).and_then(|()| sort.finish()) {
            Ok(sorted) => Box::new(sorted),
            Err(e) => Box::new(std::iter::once(Err(e))),
        }
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
