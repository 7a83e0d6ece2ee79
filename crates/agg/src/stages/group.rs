//! `$group`: one output document per distinct `_id` value, with accumulated fields.
//!
//! Groups are keyed by MongoDB's value comparison, so `1`, `1.0` and `NumberLong(1)`
//! fall into one group; a missing `_id` value groups as null. Output comes in `_id`
//! order (MongoDB leaves it unspecified).

use crate::pipeline::{DocumentStream, ExecContext};
use crate::stages::{drain, finished};
use basalt_error::{Error, Result};
use basalt_expr::{Accumulator, AccumulatorSpec, Expression, OrderedBson, ParseContext, Variables};
use bson::{Bson, Document};
use std::collections::btree_map::Entry;
use std::collections::BTreeMap;

#[derive(Debug)]
pub(crate) struct Group {
    id: Expression,
    fields: Vec<(String, AccumulatorSpec)>,
}

impl Group {
    pub(crate) fn parse(spec: &Bson, ctx: &ParseContext) -> Result<Group> {
        let Bson::Document(doc) = spec else {
            return Err(Error::location(
                15947,
                "a group's fields must be specified in an object",
            ));
        };
        let mut id = None;
        let mut fields = Vec::new();
        for (name, value) in doc {
            if name == "_id" {
                id = Some(Expression::parse(value, ctx)?);
                continue;
            }
            if name.starts_with('$') {
                return Err(Error::location(
                    40236,
                    format!("The field name '{name}' cannot be an operator name"),
                ));
            }
            if name.contains('.') {
                return Err(Error::location(
                    40235,
                    format!("The field name '{name}' cannot contain '.'"),
                ));
            }
            fields.push((name.clone(), AccumulatorSpec::parse(name, value, ctx)?));
        }
        let id =
            id.ok_or_else(|| Error::location(15955, "a group specification must include an _id"))?;
        Ok(Group { id, fields })
    }

    pub(crate) fn apply<'a>(
        &'a self,
        input: DocumentStream<'a>,
        ctx: ExecContext<'a>,
    ) -> DocumentStream<'a> {
        let mut groups = Groups::default();
        let result = drain(input, |doc| self.add(&mut groups, &doc, ctx.vars));
        finished(result.and_then(|()| self.finish(groups)))
    }

    /// Adds one input document to its group.
    pub(crate) fn add(&self, groups: &mut Groups, doc: &Document, vars: &Variables) -> Result<()> {
        let key = self.id.evaluate(doc, vars)?.unwrap_or(Bson::Null);
        let accumulators = groups.0.entry(OrderedBson(key)).or_insert_with(|| {
            self.fields
                .iter()
                .map(|(_, spec)| spec.new_accumulator())
                .collect()
        });
        for ((_, spec), acc) in self.fields.iter().zip(accumulators.iter_mut()) {
            let value = spec.argument.evaluate_ref(doc, vars)?;
            acc.accumulate(value.as_deref())?;
        }
        Ok(())
    }

    /// Merges the groups of input that came after the input of `groups`.
    pub(crate) fn merge(&self, groups: &mut Groups, later: Groups) -> Result<()> {
        for (key, accumulators) in later.0 {
            match groups.0.entry(key) {
                Entry::Vacant(slot) => {
                    slot.insert(accumulators);
                }
                Entry::Occupied(mut slot) => {
                    for (acc, later) in slot.get_mut().iter_mut().zip(accumulators) {
                        acc.merge(later)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// One output document per group, in `_id` order.
    pub(crate) fn finish(&self, groups: Groups) -> Result<Vec<Document>> {
        groups
            .0
            .into_iter()
            .map(|(key, accumulators)| {
                let mut out = Document::new();
                out.insert("_id", key.0);
                for ((name, _), acc) in self.fields.iter().zip(accumulators) {
                    out.insert(name.clone(), acc.finish()?);
                }
                Ok(out)
            })
            .collect()
    }
}

/// The groups seen so far, each with its accumulators: what `$group` keeps while it
/// reads, and what a partition of a parallel run hands over to be merged.
#[derive(Debug, Default)]
pub(crate) struct Groups(BTreeMap<OrderedBson, Vec<Accumulator>>);

#[cfg(test)]
mod tests {
    use crate::pipeline::Pipeline;
    use bson::{doc, Document};

    fn run(stages: Vec<Document>, input: Vec<Document>) -> basalt_error::Result<Vec<Document>> {
        Pipeline::parse(&stages, None)?.run(input.into_iter().map(Ok))
    }

    fn sales() -> Vec<Document> {
        vec![
            doc! {"item": "a", "qty": 2, "price": 10.0, "tags": ["x"]},
            doc! {"item": "b", "qty": 1, "price": 20.0},
            doc! {"item": "a", "qty": 3_i64, "price": 10.0},
            doc! {"qty": 4},
        ]
    }

    #[test]
    fn groups_by_expression() {
        let out = run(
            vec![doc! {"$group": {
                "_id": "$item",
                "n": {"$count": {}},
                "qty": {"$sum": "$qty"},
                "avg": {"$avg": "$qty"},
                "revenue": {"$sum": {"$multiply": ["$qty", "$price"]}},
                "first": {"$first": "$qty"},
                "items": {"$push": "$tags"},
            }}],
            sales(),
        )
        .unwrap();
        assert_eq!(
            out,
            vec![
                doc! {"_id": null, "n": 1, "qty": 4, "avg": 4.0, "revenue": 0, "first": 4, "items": []},
                doc! {"_id": "a", "n": 2, "qty": 5_i64, "avg": 2.5, "revenue": 50.0, "first": 2, "items": [["x"]]},
                doc! {"_id": "b", "n": 1, "qty": 1, "avg": 1.0, "revenue": 20.0, "first": 1, "items": []},
            ]
        );
    }

    #[test]
    fn compound_and_null_ids() {
        let out = run(
            vec![doc! {"$group": {"_id": {"i": "$item", "big": {"$gt": ["$qty", 1]}}, "c": {"$sum": 1}}}],
            sales(),
        )
        .unwrap();
        assert_eq!(out.len(), 3);
        assert!(out.contains(&doc! {"_id": {"i": "a", "big": true}, "c": 2}));
        assert!(out.contains(&doc! {"_id": {"big": true}, "c": 1}));
        let out = run(
            vec![doc! {"$group": {"_id": null, "max": {"$max": "$price"}}}],
            sales(),
        )
        .unwrap();
        assert_eq!(out, vec![doc! {"_id": null, "max": 20.0}]);
        let out = run(
            vec![doc! {"$group": {"_id": "$qty"}}],
            vec![doc! {"qty": 1}, doc! {"qty": 1.0}, doc! {"qty": 1_i64}],
        )
        .unwrap();
        assert_eq!(out, vec![doc! {"_id": 1}]);
        assert_eq!(
            run(vec![doc! {"$group": {"_id": null}}], vec![]).unwrap(),
            Vec::<Document>::new()
        );
    }

    #[test]
    fn group_errors() {
        let code = |spec: Document| run(vec![doc! {"$group": spec}], vec![]).unwrap_err().code.0;
        assert_eq!(code(doc! {"n": {"$sum": 1}}), 15955);
        assert_eq!(code(doc! {"_id": null, "a.b": {"$sum": 1}}), 40235);
        assert_eq!(code(doc! {"_id": null, "$a": {"$sum": 1}}), 40236);
        assert_eq!(code(doc! {"_id": null, "a": 1}), 40234);
        assert_eq!(code(doc! {"_id": null, "a": {"$bogus": 1}}), 15952);
        assert_eq!(
            run(vec![doc! {"$group": 1}], vec![]).unwrap_err().code.0,
            15947
        );
        let err = run(
            vec![doc! {"$group": {"_id": null, "m": {"$mergeObjects": "$x"}}}],
            vec![doc! {"x": 1}],
        );
        assert_eq!(err.unwrap_err().code.0, 40400);
    }
}
