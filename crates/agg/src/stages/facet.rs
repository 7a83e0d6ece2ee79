//! `$facet`: runs several pipelines over the same input and outputs one document with
//! each pipeline's results as an array field. The input is read once and kept for all
//! of them, within the server's memory budget (ExceededMemoryLimit beyond it).

use crate::pipeline::{DocumentStream, ExecContext, Place, Stages};
use crate::stages::{buffered, check_pipeline_name, finished};
use basalt_error::{Error, Result};
use basalt_expr::{type_name, ParseContext};
use basalt_memory::Reservation;
use bson::{Bson, Document};

/// The largest document `$facet` builds, as MongoDB's
/// internalQueryFacetMaxOutputDocSizeBytes (100 MiB).
const FACET_OUTPUT_BYTES_MAX: usize = 100 * 1024 * 1024;

#[derive(Debug)]
pub(crate) struct Facet {
    facets: Vec<(String, Stages)>,
}

impl Facet {
    pub(crate) fn parse(spec: &Bson, ctx: &ParseContext) -> Result<Facet> {
        let spec = match spec {
            Bson::Document(d) if !d.is_empty() => d,
            other => {
                return Err(Error::location(
                    40169,
                    format!(
                        "the $facet specification must be a non-empty object, but found: {other}"
                    ),
                ))
            }
        };
        let mut facets = Vec::with_capacity(spec.len());
        for (name, value) in spec {
            check_pipeline_name("$facet", name)?;
            let Bson::Array(items) = value else {
                return Err(Error::location(
                    40170,
                    format!(
                        "arguments to $facet must be arrays, {name} is type {}",
                        type_name(Some(value))
                    ),
                ));
            };
            let stages = items
                .iter()
                .map(|item| match item {
                    Bson::Document(d) => Ok(d.clone()),
                    other => Err(Error::location(
                        40171,
                        format!(
                            "elements of arrays in $facet spec must be non-empty objects, {name} argument contained an element of type {}: {other}",
                            type_name(Some(other))
                        ),
                    )),
                })
                .collect::<Result<Vec<_>>>()?;
            if stages.is_empty() {
                return Err(Error::bad_value(
                    "sub-pipeline in $facet stage cannot be empty",
                ));
            }
            facets.push((name.clone(), Stages::parse(&stages, ctx, Place::Facet)?));
        }
        Ok(Facet { facets })
    }

    pub(crate) fn apply<'a>(
        &'a self,
        input: DocumentStream<'a>,
        ctx: ExecContext<'a>,
    ) -> DocumentStream<'a> {
        let result = buffered(input, "$facet").and_then(|(docs, _memory)| self.run(&docs, ctx));
        finished(result.map(|out| vec![out]))
    }

    fn run(&self, docs: &[Document], ctx: ExecContext<'_>) -> Result<Document> {
        let mut out = Document::new();
        let mut bytes = 0usize;
        // The output, also taken from the server's budget while it is built.
        let mut memory = Reservation::default();
        for (name, stages) in &self.facets {
            let input = Box::new(docs.iter().cloned().map(Ok));
            let mut results = Vec::new();
            for doc in stages.stream(input, ctx) {
                let mut doc = doc?;
                basalt_expr::remove_metadata(&mut doc);
                bytes += basalt_value::document_size_bytes(&doc);
                memory.reserve_for(basalt_value::document_memory_bytes(&doc), "$facet")?;
                if bytes > FACET_OUTPUT_BYTES_MAX {
                    return Err(Error::location(
                        4031700,
                        format!("document constructed by $facet is {bytes} bytes, which exceeds the limit of {FACET_OUTPUT_BYTES_MAX} bytes"),
                    ));
                }
                results.push(Bson::Document(doc));
            }
            out.insert(name.clone(), results);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use crate::pipeline::Pipeline;
    use crate::testing::MemoryCollections;
    use basalt_error::Result;
    use bson::{bson, doc, Bson, Document};

    fn run(spec: Bson, input: Vec<Document>) -> Result<Vec<Document>> {
        let server = MemoryCollections::new("test");
        server.put("test", "other", vec![doc! {"_id": 10}]);
        let p = Pipeline::parse(&[doc! {"$facet": spec}], None)?;
        let out = p
            .stream(Box::new(input.into_iter().map(Ok)), &server)
            .collect();
        out
    }

    #[test]
    fn runs_each_pipeline_over_the_input() {
        let input: Vec<Document> = (1..=4).map(|i| doc! {"i": i}).collect();
        let out = run(
            bson!({
                "small": [{"$match": {"i": {"$lte": 2}}}, {"$project": {"_id": 0, "i": 1}}],
                "count": [{"$count": "n"}],
                "joined": [{"$limit": 1}, {"$lookup": {"from": "other", "pipeline": [], "as": "o"}}, {"$project": {"o": 1, "_id": 0}}],
            }),
            input,
        )
        .unwrap();
        assert_eq!(
            out,
            vec![doc! {
                "small": [{"i": 1}, {"i": 2}],
                "count": [{"n": 4}],
                "joined": [{"o": [{"_id": 10}]}],
            }]
        );
        assert_eq!(
            run(bson!({"all": [{"$skip": 0}]}), vec![]).unwrap(),
            vec![doc! {"all": []}]
        );
    }

    #[test]
    fn facet_errors() {
        let code = |spec: Bson| run(spec, vec![]).unwrap_err().code.0;
        assert_eq!(code(bson!({})), 40169);
        assert_eq!(code(bson!(1)), 40169);
        assert_eq!(code(bson!({"a": 1})), 40170);
        assert_eq!(code(bson!({"a": [1]})), 40171);
        assert_eq!(code(bson!({"a": []})), 2);
        assert_eq!(code(bson!({"$a": [{"$limit": 1}]})), 16410);
        assert_eq!(code(bson!({"a.b": [{"$limit": 1}]})), 16412);
        assert_eq!(
            code(bson!({"a": [{"$facet": {"b": [{"$limit": 1}]}}]})),
            40600
        );
        assert_eq!(code(bson!({"a": [{"$merge": "x"}]})), 40600);
    }
}
