//! `$match`: keeps the documents a query filter matches.
//!
//! The filter is evaluated by `basalt_query::Matcher`. A top-level `$expr` (which the
//! query crate does not evaluate yet) is split off and evaluated here as an aggregation
//! expression; both parts must hold.

use basalt_error::{Error, Result};
use basalt_expr::{truthy, Expression, ParseContext, Variables};
use basalt_query::Matcher;
use bson::{Bson, Document};

#[derive(Debug)]
pub(crate) struct Match {
    /// The filter without its top-level `$expr`: what the query matcher evaluates.
    rest: Document,
    matcher: Matcher,
    expr: Option<Expression>,
}

impl Match {
    pub(crate) fn parse(spec: &Bson, ctx: &ParseContext) -> Result<Match> {
        let Bson::Document(filter) = spec else {
            return Err(Error::location(
                15959,
                "the match filter must be an expression in an object",
            ));
        };
        if uses_where(filter) {
            return Err(Error::location(
                16395,
                "$where is not allowed inside of a $match aggregation expression",
            ));
        }
        let mut rest = filter.clone();
        let expr = rest
            .remove("$expr")
            .map(|e| Expression::parse(&e, ctx))
            .transpose()?;
        let matcher = Matcher::new(&rest)?.with_collation(ctx.collation());
        if matcher.near().is_some() {
            return Err(super::geo_near::near_not_allowed());
        }
        Ok(Match {
            matcher,
            rest,
            expr,
        })
    }

    pub(crate) fn matches(&self, doc: &Document, vars: &Variables) -> Result<bool> {
        if !self.matcher.matches(doc) {
            return Ok(false);
        }
        match &self.expr {
            Some(e) => Ok(truthy(e.evaluate_ref(doc, vars)?.as_deref())),
            None => Ok(true),
        }
    }

    /// The query matcher of a filter without a top-level `$expr`, for a stage that
    /// tests it itself; `None` for one with `$expr`.
    pub(crate) fn into_query_matcher(self) -> Option<Matcher> {
        self.expr.is_none().then_some(self.matcher)
    }

    /// Hands the part of the filter the query matcher evaluates to a scan that applies
    /// it, leaving only the `$expr` here. Returns that part and whether anything is left.
    pub(crate) fn take_query_part(&mut self) -> Result<(Document, bool)> {
        let taken = std::mem::take(&mut self.rest);
        self.matcher = Matcher::new(&Document::new())?;
        Ok((taken, self.expr.is_some()))
    }
}

/// Whether a filter uses `$where`, at its top level or inside `$and`/`$or`/`$nor`.
fn uses_where(filter: &Document) -> bool {
    filter
        .iter()
        .any(|(key, value)| match (key.as_str(), value) {
            ("$where", _) => true,
            ("$and" | "$or" | "$nor", Bson::Array(branches)) => branches
                .iter()
                .any(|b| matches!(b, Bson::Document(d) if uses_where(d))),
            _ => false,
        })
}

#[cfg(test)]
mod tests {
    use crate::pipeline::Pipeline;
    use bson::{doc, Document};

    fn run(stage: Document, input: Vec<Document>) -> basalt_error::Result<Vec<Document>> {
        Pipeline::parse(&[stage], None)?.run(input.into_iter().map(Ok))
    }

    #[test]
    fn filters_with_query_and_expr() {
        let input = vec![
            doc! {"a": 1, "b": 0},
            doc! {"a": 5, "b": 2},
            doc! {"a": 7, "b": 9},
        ];
        assert_eq!(
            run(doc! {"$match": {"a": {"$gte": 5}}}, input.clone())
                .unwrap()
                .len(),
            2
        );
        assert_eq!(
            run(
                doc! {"$match": {"$expr": {"$gt": ["$a", "$b"]}}},
                input.clone()
            )
            .unwrap(),
            vec![doc! {"a": 1, "b": 0}, doc! {"a": 5, "b": 2}]
        );
        assert_eq!(
            run(
                doc! {"$match": {"a": {"$gt": 1}, "$expr": {"$lt": ["$b", 5]}}},
                input.clone()
            )
            .unwrap(),
            vec![doc! {"a": 5, "b": 2}]
        );
        assert_eq!(
            run(doc! {"$match": 1}, input.clone()).unwrap_err().code.0,
            15959
        );
        assert_eq!(
            run(doc! {"$match": {"a": {"$bogus": 1}}}, input.clone())
                .unwrap_err()
                .code
                .0,
            2
        );
        assert_eq!(
            run(doc! {"$match": {"$expr": {"$bogus": 1}}}, input)
                .unwrap_err()
                .code
                .0,
            168
        );
    }

    #[test]
    fn where_is_refused() {
        for filter in [
            doc! {"$where": "true"},
            doc! {"a": 1, "$or": [{"b": 1}, {"$where": "true"}]},
        ] {
            let error = run(doc! {"$match": filter}, vec![]).unwrap_err();
            assert_eq!(error.code.0, 16395);
        }
    }
}
