//! `$unionWith`: passes its input through, then the documents of another collection of
//! the same database after an optional pipeline (or, without a collection, those of a
//! pipeline that starts with `$documents`). The other collection is read only once the
//! input is exhausted, so a `$limit` met before then never reads it.

use crate::pipeline::{DocumentStream, ExecContext, Place, Stages};
use basalt_error::{Error, Result};
use basalt_expr::{type_name, ParseContext};
use bson::Bson;

#[derive(Debug)]
pub(crate) struct UnionWith {
    /// `None` when the pipeline starts with `$documents`.
    coll: Option<String>,
    pipeline: Stages,
}

impl UnionWith {
    pub(crate) fn parse(spec: &Bson, ctx: &ParseContext) -> Result<UnionWith> {
        let spec = match spec {
            Bson::String(coll) => {
                return Ok(UnionWith {
                    coll: Some(coll.clone()),
                    pipeline: Stages(Vec::new()),
                })
            }
            Bson::Document(d) => d,
            other => {
                return Err(Error::failed_to_parse(format!(
                    "the $unionWith stage specification must be an object or string, but found {}",
                    type_name(Some(other))
                )))
            }
        };
        let (mut coll, mut pipeline) = (None, None);
        for (name, value) in spec {
            match (name.as_str(), value) {
                ("coll", Bson::String(c)) => coll = Some(c.clone()),
                ("pipeline", _) => {
                    pipeline = Some(Stages::parse_argument(value, ctx, Place::UnionWith)?)
                }
                ("coll", other) => {
                    return Err(Error::type_mismatch(format!(
                    "BSON field '$unionWith.coll' is the wrong type '{}', expected type 'string'",
                    type_name(Some(other))
                )))
                }
                _ => {
                    return Err(Error::location(
                        40415,
                        format!("BSON field '$unionWith.{name}' is an unknown field."),
                    ))
                }
            }
        }
        let pipeline = pipeline.unwrap_or(Stages(Vec::new()));
        if coll.is_none() && !pipeline.starts_with_source() {
            return Err(Error::failed_to_parse(
                "$unionWith stage without explicit collection must have a pipeline with $documents as first stage",
            ));
        }
        Ok(UnionWith { coll, pipeline })
    }

    pub(crate) fn apply<'a>(
        &'a self,
        input: DocumentStream<'a>,
        ctx: ExecContext<'a>,
    ) -> DocumentStream<'a> {
        let other = std::iter::once(()).flat_map(move |()| -> DocumentStream<'a> {
            match self.other_documents(ctx) {
                Ok(docs) => self.pipeline.stream(docs, ctx),
                Err(e) => Box::new(std::iter::once(Err(e))),
            }
        });
        Box::new(input.chain(other))
    }

    fn other_documents<'a>(&'a self, ctx: ExecContext<'a>) -> Result<DocumentStream<'a>> {
        match &self.coll {
            Some(coll) if !self.pipeline.starts_with_source() => {
                ctx.collections.scan(ctx.collections.database(), coll)
            }
            _ => Ok(Box::new(std::iter::empty())),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::pipeline::Pipeline;
    use crate::testing::MemoryCollections;
    use basalt_error::Result;
    use bson::{bson, doc, Bson, Document};

    fn run(stages: Vec<Document>, input: Vec<Document>) -> Result<Vec<Document>> {
        let server = MemoryCollections::new("test");
        server.put(
            "test",
            "other",
            vec![doc! {"_id": 10, "v": 1}, doc! {"_id": 11, "v": 2}],
        );
        let p = Pipeline::parse(&stages, None)?;
        let out = p
            .stream(Box::new(input.into_iter().map(Ok)), &server)
            .collect();
        out
    }

    #[test]
    fn appends_the_other_collection() {
        let input = vec![doc! {"_id": 1}];
        assert_eq!(
            run(vec![doc! {"$unionWith": "other"}], input.clone()).unwrap(),
            vec![
                doc! {"_id": 1},
                doc! {"_id": 10, "v": 1},
                doc! {"_id": 11, "v": 2}
            ]
        );
        assert_eq!(
            run(
                vec![doc! {"$unionWith": {"coll": "other", "pipeline": [{"$match": {"v": 2}}, {"$project": {"v": 0}}]}}],
                input.clone()
            )
            .unwrap(),
            vec![doc! {"_id": 1}, doc! {"_id": 11}]
        );
        assert_eq!(
            run(
                vec![
                    doc! {"$unionWith": {"pipeline": [{"$documents": [{"x": 1}]}]}},
                    doc! {"$count": "n"}
                ],
                input.clone()
            )
            .unwrap(),
            vec![doc! {"n": 2}]
        );
        assert_eq!(
            run(vec![doc! {"$unionWith": "missing"}], input).unwrap(),
            vec![doc! {"_id": 1}]
        );
    }

    #[test]
    fn union_with_errors() {
        let code = |spec: Bson| {
            run(vec![doc! {"$unionWith": spec}], vec![])
                .unwrap_err()
                .code
                .0
        };
        assert_eq!(code(bson!(1)), 9);
        assert_eq!(code(bson!({"coll": 1})), 14);
        assert_eq!(code(bson!({"coll": "a", "x": 1})), 40415);
        assert_eq!(code(bson!({"pipeline": [{"$match": {}}]})), 9);
        assert_eq!(
            code(bson!({"coll": "a", "pipeline": [{"$out": "b"}]})),
            31441
        );
    }
}
