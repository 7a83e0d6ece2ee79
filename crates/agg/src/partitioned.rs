//! Running a pipeline over partitions of its input at once, as MongoDB runs one over
//! shards: every partition goes through the stages that handle each document on its own
//! (`$match`, `$project`, `$unwind`, ...) into a partial `$group` or `$count`; the partials
//! are merged in input order, and the rest of the pipeline runs once over the merged
//! result.
//!
//! Merging in input order keeps order-sensitive accumulators (`$first`, `$last`,
//! `$push`) exactly what a single pass would give. The caller decides how many threads
//! scan which partitions; this module only knows the pipeline.

use crate::pipeline::{stream_stages, Collections, DocumentStream, ExecContext, NoCollections};
use crate::stages::group::Groups;
use crate::stages::{count, Stage};
use crate::{Pipeline, UnpackBucket};
use basalt_error::Result;

/// A pipeline split at its first stage that needs all documents together.
pub struct Partitioned<'p> {
    pipeline: &'p Pipeline,
    /// The position of the merging stage; the stages before it run per partition.
    split: usize,
}

/// What one or more partitions produced, to be merged.
pub struct Partial(pub(crate) State);

pub(crate) enum State {
    Group(Groups),
    Count(i64),
}

impl Pipeline {
    /// The pipeline split for a parallel run: `None` unless the stages up to the first
    /// `$group` or `$count` handle each document on its own.
    pub fn partitioned(&self) -> Option<Partitioned<'_>> {
        let stages = self.stages();
        let split = stages.iter().position(|s| !s.is_per_document())?;
        matches!(stages[split], Stage::Group(_) | Stage::Count(_)).then_some(Partitioned {
            pipeline: self,
            split,
        })
    }
}

impl<'p> Partitioned<'p> {
    /// How many stages before the merging stage run on each partition.
    pub fn per_document_stages(&self) -> usize {
        self.split
    }

    /// The partial result of no documents.
    pub fn empty(&self) -> Partial {
        match self.head() {
            Stage::Group(_) => Partial(State::Group(Groups::default())),
            _ => Partial(State::Count(0)),
        }
    }

    /// Runs the per-document stages over one partition's documents into `partial`.
    pub fn accumulate(&self, partial: &mut Partial, input: DocumentStream<'_>) -> Result<()> {
        self.accumulate_from(0, partial, input)
    }

    /// The leading `$_internalUnpackBucket` of the per-document stages, for a caller
    /// that unpacks the buckets from their stored bytes itself and hands the
    /// measurements to [`Partitioned::accumulate_unpacked`].
    pub fn leading_unpack(&self) -> Option<&'p UnpackBucket> {
        match self.pipeline.stages().first() {
            Some(Stage::UnpackBucket(unpack)) if self.split > 0 => Some(unpack),
            _ => None,
        }
    }

    /// Runs the per-document stages after the leading unpacking over measurements that
    /// [`Partitioned::leading_unpack`] gave, into `partial`.
    pub fn accumulate_unpacked(
        &self,
        partial: &mut Partial,
        measurements: DocumentStream<'_>,
    ) -> Result<()> {
        self.accumulate_from(1, partial, measurements)
    }

    fn accumulate_from(
        &self,
        first: usize,
        partial: &mut Partial,
        input: DocumentStream<'_>,
    ) -> Result<()> {
        let vars = self.pipeline.variables();
        let ctx = ExecContext {
            vars,
            collections: &NoCollections,
        };
        let stream = stream_stages(&self.pipeline.stages()[first..self.split], input, ctx);
        match (self.head(), &mut partial.0) {
            (Stage::Group(group), State::Group(groups)) => {
                for doc in stream {
                    // Whether the groups outgrew their memory is asked after each
                    // batch (`exceeds_memory`); the batch is taken whole meanwhile.
                    let _over_limit = group.add(groups, &doc?, vars)?;
                }
            }
            (_, State::Count(n)) => {
                for doc in stream {
                    doc?;
                    *n += 1;
                }
            }
            _ => unreachable!("partials are made by Partitioned::empty"),
        }
        Ok(())
    }

    /// Whether `partial` holds more than its stage may keep in memory: the caller then
    /// runs the pipeline in one pass instead, where `$group` can spill to disk.
    pub fn exceeds_memory(&self, partial: &Partial) -> bool {
        matches!(&partial.0, State::Group(groups) if groups.over_limit())
    }

    /// Merges the partial of the partition that follows `partial`'s in input order.
    pub fn merge(&self, partial: &mut Partial, later: Partial) -> Result<()> {
        match (self.head(), &mut partial.0, later.0) {
            (Stage::Group(group), State::Group(groups), State::Group(later)) => {
                group.merge(groups, later)
            }
            (_, State::Count(n), State::Count(later)) => {
                *n += later;
                Ok(())
            }
            _ => unreachable!("partials are made by Partitioned::empty"),
        }
    }

    /// The merging stage's output for the merged `partial`, through the rest of the
    /// pipeline.
    pub fn finish(
        &self,
        partial: Partial,
        collections: &'p dyn Collections,
    ) -> Result<DocumentStream<'p>> {
        let merged = match (self.head(), partial.0) {
            (Stage::Group(group), State::Group(groups)) => group.finish(groups)?,
            (Stage::Count(name), State::Count(n)) => count::output(name, n),
            _ => unreachable!("partials are made by Partitioned::empty"),
        };
        let ctx = ExecContext {
            vars: self.pipeline.variables(),
            collections,
        };
        let rest = &self.pipeline.stages()[self.split + 1..];
        Ok(stream_stages(
            rest,
            Box::new(merged.into_iter().map(Ok)),
            ctx,
        ))
    }

    pub(crate) fn variables(&self) -> &'p basalt_expr::Variables {
        self.pipeline.variables()
    }

    pub(crate) fn head_stage(&self) -> &'p Stage {
        self.head()
    }

    fn head(&self) -> &'p Stage {
        &self.pipeline.stages()[self.split]
    }
}

#[cfg(test)]
mod tests {
    use crate::Pipeline;
    use bson::{doc, Document};

    /// The documents `0..n` with `k = i % 3`.
    fn input(range: std::ops::Range<i32>) -> Vec<basalt_error::Result<Document>> {
        range.map(|i| Ok(doc! {"i": i, "k": i % 3})).collect()
    }

    /// Runs `stages` in `parts` partitions merged in order, and in one pass.
    fn both(
        stages: Vec<Document>,
        parts: &[std::ops::Range<i32>],
    ) -> (Vec<Document>, Vec<Document>) {
        let pipeline = Pipeline::parse(&stages, None).unwrap();
        let split = pipeline.partitioned().expect("splittable");
        let mut merged = split.empty();
        for part in parts {
            let mut partial = split.empty();
            split
                .accumulate(&mut partial, Box::new(input(part.clone()).into_iter()))
                .unwrap();
            split.merge(&mut merged, partial).unwrap();
        }
        let parallel = split
            .finish(merged, &crate::pipeline::NoCollections)
            .unwrap()
            .collect::<basalt_error::Result<Vec<_>>>()
            .unwrap();
        let whole = pipeline
            .run(input(0..parts.last().unwrap().end).into_iter())
            .unwrap();
        (parallel, whole)
    }

    #[test]
    fn partitions_merged_in_order_equal_one_pass() {
        let stages = vec![
            doc! {"$match": {"i": {"$gte": 2}}},
            doc! {"$project": {"k": 1, "j": {"$multiply": ["$i", 2]}}},
            doc! {"$group": {
                "_id": "$k", "n": {"$sum": 1}, "s": {"$sum": "$j"}, "first": {"$first": "$j"},
                "last": {"$last": "$j"}, "all": {"$push": "$j"}, "avg": {"$avg": "$j"},
            }},
            doc! {"$sort": {"_id": -1}},
        ];
        let (parallel, whole) = both(stages, &[0..5, 5..6, 6..6, 6..40]);
        assert_eq!(parallel, whole);
        assert_eq!(parallel.len(), 3);
        let (parallel, whole) = both(
            vec![doc! {"$match": {"k": 1}}, doc! {"$count": "n"}],
            &[0..10, 10..20],
        );
        assert_eq!((parallel, whole.clone()), (vec![doc! {"n": 7}], whole));
        let (parallel, _) = both(
            vec![doc! {"$match": {"k": 7}}, doc! {"$count": "n"}],
            &[0..10, 10..20],
        );
        assert!(parallel.is_empty());
    }

    #[test]
    fn only_per_document_prefixes_split() {
        let split = |stages: Vec<Document>| {
            Pipeline::parse(&stages, None)
                .unwrap()
                .partitioned()
                .is_some()
        };
        assert!(split(vec![
            doc! {"$unwind": "$a"},
            doc! {"$group": {"_id": null}}
        ]));
        assert!(!split(vec![
            doc! {"$sort": {"a": 1}},
            doc! {"$group": {"_id": null}}
        ]));
        assert!(!split(vec![doc! {"$limit": 5}, doc! {"$count": "n"}]));
        assert!(!split(vec![doc! {"$match": {"a": 1}}]));
    }
}
