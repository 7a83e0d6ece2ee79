//! A parsed aggregation pipeline and its execution.
//!
//! Execution is pull-based: [`Pipeline::stream`] wraps the input iterator in one
//! iterator adapter per stage and returns an iterator of results. Streaming stages
//! (`$match`, `$project`, `$unwind`, `$limit`, ...) handle one document at a time, so a
//! `$limit` stops the collection scan early and a cursor can hand out batches without the
//! whole result in memory; blocking stages (`$group`, `$sort`, `$count`) drain their input
//! when first pulled. [`Pipeline::run`] collects everything, for callers that want a
//! vector.
//!
//! `$group` keeps mergeable partial state (`basalt_expr::Accumulator::merge`), so the
//! executor can later run the stages before the first blocking stage on several
//! partitions in parallel and merge the partial groups, as MongoDB merges shard results.

use crate::stages::Stage;
use basalt_error::{Error, ErrorCode, Result};
use basalt_expr::{Expression, ParseContext, Variables};
use bson::{Bson, Document};

/// A stream of documents flowing between stages; an `Err` ends the stream.
pub type DocumentStream<'a> = Box<dyn Iterator<Item = Result<Document>> + 'a>;

/// Access to other collections, for stages that read them (`$lookup`, `$unionWith`,
/// `$graphLookup`) or write them (`$out`, `$merge`). The server implements it over its
/// catalog and storage; the stages that use it are not supported yet.
pub trait Collections {
    /// All documents of `collection` in database `db`, in natural order.
    fn scan(&self, db: &str, collection: &str) -> Result<DocumentStream<'_>>;
}

/// For pipelines run where no other collection can be read.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoCollections;

impl Collections for NoCollections {
    fn scan(&self, db: &str, collection: &str) -> Result<DocumentStream<'_>> {
        Err(Error::new(
            ErrorCode::NAMESPACE_NOT_FOUND,
            format!("no collections are available here, not even {db}.{collection}"),
        ))
    }
}

/// What every stage may use while it runs.
#[derive(Clone, Copy)]
pub struct ExecContext<'a> {
    pub vars: &'a Variables,
    pub collections: &'a dyn Collections,
}

#[derive(Debug)]
pub struct Pipeline {
    stages: Vec<Stage>,
    vars: Variables,
}

impl Pipeline {
    /// Parses the stages of an `aggregate` command. `let_vars` is its `let` option: each
    /// value is a constant expression, evaluated once here and visible to every stage as
    /// `$$name`.
    pub fn parse(stages: &[Document], let_vars: Option<&Document>) -> Result<Pipeline> {
        let mut ctx = ParseContext::new();
        let mut vars = Variables::new();
        for (name, spec) in let_vars.into_iter().flatten() {
            let value = Expression::parse(spec, &ctx)?
                .evaluate(&Document::new(), &vars)?
                .unwrap_or(Bson::Null);
            let id = ctx.define(name)?;
            vars.set(id, value);
        }
        let mut parsed = Vec::with_capacity(stages.len());
        for stage in stages {
            parsed.extend(Stage::parse(stage, &ctx)?);
        }
        Ok(Pipeline {
            stages: parsed,
            vars,
        })
    }

    /// The filter of a leading `$match`, which the server can push into the scan (to
    /// use an index or filter raw records). `None` when the pipeline does not start with
    /// `$match` or its filter uses `$expr`, which only this crate evaluates so far.
    pub fn leading_match(&self) -> Option<&Document> {
        match self.stages.first() {
            Some(Stage::Match(m)) => m.pushable_filter(),
            _ => None,
        }
    }

    /// Removes the leading `$match` and returns its filter, for a server that applies it
    /// in the scan instead (see [`Pipeline::leading_match`]).
    pub fn take_leading_match(&mut self) -> Option<Document> {
        let filter = self.leading_match()?.clone();
        self.stages.remove(0);
        Some(filter)
    }

    /// When the pipeline only counts (an optional leading `$match`, then `$count`), the
    /// name of the count field: the server can then count matching records without
    /// building documents. The reply is `{<name>: n}`, or no document when n is 0.
    pub fn count_field(&self) -> Option<&str> {
        match self.stages.as_slice() {
            [Stage::Count(name)] => Some(name),
            [Stage::Match(m), Stage::Count(name)] if m.pushable_filter().is_some() => Some(name),
            _ => None,
        }
    }

    /// Runs the pipeline over `input` lazily.
    pub fn stream<'a>(
        &'a self,
        input: DocumentStream<'a>,
        collections: &'a dyn Collections,
    ) -> DocumentStream<'a> {
        let ctx = ExecContext {
            vars: &self.vars,
            collections,
        };
        self.stages
            .iter()
            .fold(input, |stream, stage| stage.apply(stream, ctx))
    }

    /// Runs the pipeline over `input` and collects the results.
    pub fn run(&self, input: impl Iterator<Item = Result<Document>>) -> Result<Vec<Document>> {
        self.stream(Box::new(input), &NoCollections).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn run(stages: Vec<Document>, input: Vec<Document>) -> Result<Vec<Document>> {
        Pipeline::parse(&stages, None)?.run(input.into_iter().map(Ok))
    }

    #[test]
    fn stage_shape_errors() {
        let code = |stages: Vec<Document>| Pipeline::parse(&stages, None).unwrap_err().code.0;
        assert_eq!(code(vec![doc! {"$match": {}, "$limit": 1}]), 40323);
        assert_eq!(code(vec![doc! {}]), 40323);
        assert_eq!(code(vec![doc! {"$foo": 1}]), 40324);
        assert_eq!(
            Pipeline::parse(&[doc! {"$lookup": {}}], None)
                .unwrap_err()
                .message,
            "Unrecognized pipeline stage name: '$lookup'"
        );
    }

    #[test]
    fn empty_pipeline_passes_documents_through() {
        let docs = vec![doc! {"a": 1}, doc! {"a": 2}];
        assert_eq!(run(vec![], docs.clone()).unwrap(), docs);
    }

    #[test]
    fn let_variables_are_visible_to_stages() {
        let p = Pipeline::parse(
            &[doc! {"$project": {"x": {"$add": ["$$base", "$a"]}, "_id": 0}}],
            Some(&doc! {"base": 10, "twice": {"$multiply": ["$$base", 2]}}),
        )
        .unwrap();
        assert_eq!(
            p.run(vec![Ok(doc! {"a": 1})].into_iter()).unwrap(),
            vec![doc! {"x": 11}]
        );
        assert_eq!(
            Pipeline::parse(&[], Some(&doc! {"Bad": 1}))
                .unwrap_err()
                .code
                .0,
            16867
        );
    }

    #[test]
    fn leading_match_and_count_are_exposed() {
        let mut p =
            Pipeline::parse(&[doc! {"$match": {"a": 1}}, doc! {"$count": "n"}], None).unwrap();
        assert_eq!(p.leading_match(), Some(&doc! {"a": 1}));
        assert_eq!(p.count_field(), Some("n"));
        assert_eq!(p.take_leading_match(), Some(doc! {"a": 1}));
        assert_eq!(p.count_field(), Some("n"));
        assert_eq!(p.leading_match(), None);
        let p =
            Pipeline::parse(&[doc! {"$match": {"$expr": {"$gt": ["$a", "$b"]}}}], None).unwrap();
        assert_eq!(p.leading_match(), None);
        let p = Pipeline::parse(&[doc! {"$count": "n"}, doc! {"$limit": 1}], None).unwrap();
        assert_eq!(p.count_field(), None);
    }

    #[test]
    fn errors_stop_the_stream() {
        let result = run(
            vec![doc! {"$project": {"x": {"$add": ["$a", 1]}}}],
            vec![doc! {"a": 1}, doc! {"a": "s"}],
        );
        assert_eq!(result.unwrap_err().code.0, 16554);
        let input = vec![
            Ok(doc! {"a": 1}),
            Err(Error::internal("disk")),
            Ok(doc! {"a": 2}),
        ];
        let p = Pipeline::parse(&[doc! {"$skip": 5}], None).unwrap();
        assert_eq!(p.run(input.into_iter()).unwrap_err().message, "disk");
    }

    #[test]
    fn limit_stops_pulling_input() {
        let pulled = std::cell::Cell::new(0);
        let input = (0..1000).map(|i| {
            pulled.set(pulled.get() + 1);
            Ok(doc! {"i": i})
        });
        let p = Pipeline::parse(&[doc! {"$match": {}}, doc! {"$limit": 3}], None).unwrap();
        assert_eq!(p.run(input).unwrap().len(), 3);
        assert_eq!(pulled.get(), 3);
    }

    #[test]
    fn banding_workload_shape() {
        // W1: band engine sizes (x1.5 for diesel), then count and sum miles per band.
        let input = vec![
            doc! {"engine": 1000, "fuel": "petrol", "miles": 10},
            doc! {"engine": 1000, "fuel": "diesel", "miles": 20},
            doc! {"engine": 2400, "fuel": "petrol", "miles": 5},
            doc! {"engine": 1200, "fuel": "diesel", "miles": 7_i64},
        ];
        let stages = vec![
            doc! {"$project": {"_id": 0, "miles": 1, "band": {"$cond": [
                {"$lt": [{"$multiply": ["$engine", {"$cond": [{"$eq": ["$fuel", "diesel"]}, 1.5, 1]}]}, 1400]},
                "small",
                {"$cond": [{"$lt": [{"$multiply": ["$engine", {"$cond": [{"$eq": ["$fuel", "diesel"]}, 1.5, 1]}]}, 2000]}, "medium", "large"]},
            ]}}},
            doc! {"$group": {"_id": "$band", "n": {"$sum": 1}, "miles": {"$sum": "$miles"}}},
            doc! {"$sort": {"n": -1, "_id": 1}},
        ];
        assert_eq!(
            run(stages, input).unwrap(),
            vec![
                doc! {"_id": "medium", "n": 2, "miles": 27_i64},
                doc! {"_id": "large", "n": 1, "miles": 5},
                doc! {"_id": "small", "n": 1, "miles": 10},
            ]
        );
    }

    #[test]
    fn unwind_then_group() {
        let input = vec![
            doc! {"tags": ["a", "b"]},
            doc! {"tags": ["b"]},
            doc! {"tags": []},
        ];
        let out = run(
            vec![
                doc! {"$unwind": "$tags"},
                doc! {"$sortByCount": "$tags"},
                doc! {"$replaceWith": {"tag": "$_id", "n": "$count"}},
            ],
            input,
        )
        .unwrap();
        assert_eq!(
            out,
            vec![doc! {"tag": "b", "n": 2}, doc! {"tag": "a", "n": 1}]
        );
    }

    #[test]
    fn no_collections_refuses_scans() {
        assert!(NoCollections.scan("db", "c").is_err());
    }
}
