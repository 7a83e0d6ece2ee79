//! `$rankFusion`: runs several ranked pipelines over the same input and merges their
//! results by reciprocal rank fusion, as MongoDB 8.1: a document's score is the sum,
//! over the pipelines that returned it, of `weight / (60 + rank)`, its rank being its
//! 1-based place in that pipeline's output by the pipeline's last `$sort` (documents
//! that sort equal share a rank, the next one skipping as many). Each document comes out
//! once, the best score first, ties by `_id`, carrying its score for `{$meta: "score"}`
//! and, with `scoreDetails`, each pipeline's part for `{$meta: "scoreDetails"}`.
//!
//! A pipeline may only select and order documents (`$match`, `$sort`, `$limit`, `$skip`,
//! `$sample`) and must hold a `$sort`. The input is read once and kept for all of them,
//! within the server's memory budget, as `$facet` does.

use crate::pipeline::{DocumentStream, ExecContext, Place, Stages};
use crate::stages::group::GroupKey;
use crate::stages::{buffered, check_pipeline_name, finished, Stage};
use basalt_error::{Error, Result};
use basalt_expr::{type_name, ParseContext, SCORE_DETAILS_FIELD, SCORE_FIELD};
use basalt_memory::Reservation;
use basalt_query::SortSpec;
use bson::{doc, Bson, Document};
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// Reciprocal rank fusion's constant: a rank's part is `1 / (RANK_CONSTANT + rank)`.
const RANK_CONSTANT: f64 = 60.0;

/// What `{$meta: "scoreDetails"}` says the score is, as MongoDB words it.
const DESCRIPTION: &str = "value output by reciprocal rank fusion algorithm, computed as sum of \
    (weight * (1 / (60 + rank))) across input pipelines from which this document is output, \
    from:";

/// The stages a `$rankFusion` pipeline may hold: those that select and order documents.
const SELECTION_STAGES: [&str; 5] = ["$match", "$sort", "$limit", "$skip", "$sample"];

/// The stages that fuse rankings, which cannot nest.
const FUSION_STAGES: [&str; 2] = ["$rankFusion", "$scoreFusion"];

#[derive(Debug)]
pub(crate) struct RankFusion {
    /// In name order, as MongoDB's.
    inputs: Vec<Input>,
    score_details: bool,
}

#[derive(Debug)]
struct Input {
    name: String,
    stages: Stages,
    weight: f64,
    /// The pipeline's last `$sort`, which orders its output for ranking.
    ranking: SortSpec,
}

/// The value of an optional field, `null` counting as absent.
fn present(value: &Bson) -> Option<&Bson> {
    (!matches!(value, Bson::Null)).then_some(value)
}

fn wrong_type(field: &str, value: &Bson, expected: &str) -> Error {
    Error::type_mismatch(format!(
        "BSON field '$rankFusion.{field}' is the wrong type '{}', expected type '{expected}'",
        type_name(Some(value))
    ))
}

fn unknown_field(field: &str) -> Error {
    Error::location(
        40415,
        format!("BSON field '$rankFusion.{field}' is an unknown field."),
    )
}

fn missing_field(field: &str) -> Error {
    Error::location(
        40414,
        format!("BSON field '$rankFusion.{field}' is missing but a required field"),
    )
}

/// The object at `field`, `None` when absent or null.
fn object<'a>(field: &str, value: &'a Bson) -> Result<Option<&'a Document>> {
    match present(value) {
        None => Ok(None),
        Some(Bson::Document(d)) => Ok(Some(d)),
        Some(other) => Err(wrong_type(field, other, "object")),
    }
}

impl RankFusion {
    pub(crate) fn parse(spec: &Bson, ctx: &ParseContext) -> Result<RankFusion> {
        let Bson::Document(spec) = spec else {
            return Err(Error::failed_to_parse(format!(
                "$rankFusion must take a nested object but found: {spec}"
            )));
        };
        let (mut input, mut combination, mut score_details) = (None, None, false);
        for (name, value) in spec {
            match name.as_str() {
                "input" => input = object("input", value)?,
                "combination" => combination = object("combination", value)?,
                "scoreDetails" => match present(value) {
                    None => {}
                    Some(Bson::Boolean(b)) => score_details = *b,
                    Some(other) => return Err(wrong_type("scoreDetails", other, "bool")),
                },
                _ => return Err(unknown_field(name)),
            }
        }
        let input = input.ok_or_else(|| missing_field("input"))?;
        let mut pipelines = None;
        for (name, value) in input {
            match name.as_str() {
                "pipelines" => pipelines = object("input.pipelines", value)?,
                _ => return Err(unknown_field(&format!("input.{name}"))),
            }
        }
        let pipelines = pipelines.ok_or_else(|| missing_field("input.pipelines"))?;
        if pipelines.is_empty() {
            return Err(Error::bad_value(
                "$rankFusion input must contain at least one pipeline",
            ));
        }
        let mut inputs = pipelines
            .iter()
            .map(|(name, stages)| Input::parse(name, stages, ctx))
            .collect::<Result<Vec<_>>>()?;
        inputs.sort_by(|a, b| a.name.cmp(&b.name));
        if let Some(combination) = combination {
            apply_weights(combination, &mut inputs)?;
        }
        Ok(RankFusion {
            inputs,
            score_details,
        })
    }

    pub(crate) fn apply<'a>(
        &'a self,
        input: DocumentStream<'a>,
        ctx: ExecContext<'a>,
    ) -> DocumentStream<'a> {
        finished(buffered(input, "$rankFusion").and_then(|(docs, _memory)| self.fuse(&docs, ctx)))
    }

    fn fuse(&self, docs: &[Document], ctx: ExecContext<'_>) -> Result<Vec<Document>> {
        // Per document (by `_id`): its first copy and its rank in each pipeline.
        let mut fused: BTreeMap<GroupKey, (Document, Vec<Option<i32>>)> = BTreeMap::new();
        let mut memory = Reservation::default();
        for (position, input) in self.inputs.iter().enumerate() {
            let output = input
                .stages
                .stream(Box::new(docs.iter().cloned().map(Ok)), ctx)
                .collect::<Result<Vec<Document>>>()?;
            for (rank, doc) in input.ranked(output) {
                let id = doc.get("_id").cloned().unwrap_or(Bson::Null);
                let entry = match fused.entry(GroupKey::new(id, None)) {
                    std::collections::btree_map::Entry::Occupied(entry) => entry.into_mut(),
                    std::collections::btree_map::Entry::Vacant(entry) => {
                        memory.reserve_for(
                            basalt_value::document_memory_bytes(&doc),
                            "$rankFusion",
                        )?;
                        entry.insert((doc, vec![None; self.inputs.len()]))
                    }
                };
                // A document a pipeline returned twice keeps its better rank.
                entry.1[position].get_or_insert(rank);
            }
        }
        let mut scored: Vec<(f64, Document)> = fused
            .into_values()
            .map(|(doc, ranks)| self.scored(doc, &ranks))
            .collect();
        // Stable: equal scores stay in `_id` order.
        scored.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap_or(Ordering::Equal));
        Ok(scored.into_iter().map(|(_, doc)| doc).collect())
    }

    /// The document with its score (and its details when asked for).
    fn scored(&self, mut doc: Document, ranks: &[Option<i32>]) -> (f64, Document) {
        let mut score = 0.0;
        let mut details = Vec::with_capacity(ranks.len());
        for (input, rank) in self.inputs.iter().zip(ranks) {
            match rank {
                Some(rank) => {
                    score += input.weight / (RANK_CONSTANT + f64::from(*rank));
                    details.push(Bson::Document(doc! {
                        "inputPipelineName": input.name.clone(),
                        "rank": *rank,
                        "weight": input.weight,
                        "details": [],
                    }));
                }
                None => details.push(Bson::Document(doc! {
                    "inputPipelineName": input.name.clone(),
                    "rank": "NA",
                })),
            }
        }
        doc.insert(SCORE_FIELD, score);
        if self.score_details {
            doc.insert(
                SCORE_DETAILS_FIELD,
                doc! { "value": score, "description": DESCRIPTION, "details": details },
            );
        }
        (score, doc)
    }
}

impl Input {
    fn parse(name: &str, stages: &Bson, ctx: &ParseContext) -> Result<Input> {
        check_pipeline_name("$rankFusion", name)?;
        let Bson::Array(items) = stages else {
            return Err(wrong_type(
                &format!("input.pipelines.{name}"),
                stages,
                "array",
            ));
        };
        let specs = items
            .iter()
            .map(|item| match item {
                Bson::Document(d) => Ok(d.clone()),
                other => Err(wrong_type(
                    &format!("input.pipelines.{name}"),
                    other,
                    "object",
                )),
            })
            .collect::<Result<Vec<Document>>>()?;
        if specs.is_empty() {
            return Err(Error::location(
                9834300,
                format!("$rankFusion input pipeline '{name}' cannot be empty"),
            ));
        }
        let names: Vec<&str> = specs
            .iter()
            .map(|spec| spec.keys().next().map_or("", String::as_str))
            .collect();
        if FUSION_STAGES.contains(&names[0]) {
            return Err(Error::location(
                10473002,
                format!(
                    "{} cannot be nested within a $rankFusion input pipeline",
                    names[0]
                ),
            ));
        }
        let stages = Stages::parse(&specs, ctx, Place::RankFusion)?;
        let ranking = stages.0.iter().rev().find_map(|stage| match stage {
            Stage::Sort(sort) => Some(sort.spec().clone()),
            _ => None,
        });
        let Some(ranking) = ranking else {
            return Err(Error::location(
                9191100,
                "All subpipelines to the $rankFusion stage must begin with one of $search, \
                 $vectorSearch, $geoNear, $rankFusion, $scoreFusion or have a custom $sort in \
                 the pipeline.",
            ));
        };
        if let Some(other) = names.iter().find(|n| !SELECTION_STAGES.contains(n)) {
            return Err(Error::location(
                9191103,
                format!(
                    "$rankFusion input pipelines may only hold stages that select or order \
                     documents ($match, $sort, $limit, $skip, $sample), not {other}"
                ),
            ));
        }
        Ok(Input {
            name: name.to_string(),
            stages,
            weight: 1.0,
            ranking,
        })
    }

    /// The pipeline's output in its ranking's order, each document with its rank.
    fn ranked(&self, output: Vec<Document>) -> Vec<(i32, Document)> {
        let mut keyed: Vec<(Vec<Bson>, Document)> = output
            .into_iter()
            .map(|doc| (self.ranking.sort_key(&doc), doc))
            .collect();
        keyed.sort_by(|a, b| self.ranking.compare_keys(&a.0, &b.0));
        let mut ranked: Vec<(i32, Document)> = Vec::with_capacity(keyed.len());
        let mut previous: Option<Vec<Bson>> = None;
        for (place, (key, doc)) in keyed.into_iter().enumerate() {
            let tied = previous
                .as_ref()
                .is_some_and(|p| self.ranking.compare_keys(p, &key) == Ordering::Equal);
            let rank = match ranked.last() {
                Some((rank, _)) if tied => *rank,
                _ => i32::try_from(place + 1).unwrap_or(i32::MAX),
            };
            ranked.push((rank, doc));
            previous = Some(key);
        }
        ranked
    }
}

/// Sets the pipelines' weights from `combination` (1 for those it does not name).
fn apply_weights(combination: &Document, inputs: &mut [Input]) -> Result<()> {
    let mut weights = None;
    for (name, value) in combination {
        match name.as_str() {
            "weights" => weights = object("combination.weights", value)?,
            _ => return Err(unknown_field(&format!("combination.{name}"))),
        }
    }
    let weights = weights.ok_or_else(|| missing_field("combination.weights"))?;
    if weights.len() > inputs.len() {
        return Err(Error::location(
            9460301,
            format!(
                "$rankFusion input has {} pipelines, but {} weights were given",
                inputs.len(),
                weights.len()
            ),
        ));
    }
    for (name, value) in weights {
        let weight = match value {
            Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {
                basalt_value::as_f64(value).unwrap_or(f64::NAN)
            }
            other => {
                return Err(Error::location(
                    13118,
                    format!(
                        "$rankFusion weight for pipeline '{name}' must be a number, not {}",
                        type_name(Some(other))
                    ),
                ))
            }
        };
        if weight.is_nan() || weight < 0.0 {
            return Err(Error::location(
                9460300,
                format!(
                    "$rankFusion weight for pipeline '{name}' must be non-negative, not {value}"
                ),
            ));
        }
        let Some(input) = inputs.iter_mut().find(|input| input.name == *name) else {
            return Err(Error::location(
                9967500,
                format!("$rankFusion weight names '{name}', which is not one of its pipelines"),
            ));
        };
        input.weight = weight;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::pipeline::Pipeline;
    use crate::testing::MemoryCollections;
    use basalt_error::Result;
    use bson::{bson, doc, Bson, Document};

    fn run(stages: Vec<Document>, input: Vec<Document>) -> Result<Vec<Document>> {
        let server = MemoryCollections::new("test");
        let p = Pipeline::parse(&stages, None)?;
        let out = p
            .stream(Box::new(input.into_iter().map(Ok)), &server)
            .collect();
        out
    }

    fn rrf(ranks: &[(f64, i32)]) -> f64 {
        ranks
            .iter()
            .map(|(weight, rank)| weight / (60.0 + f64::from(*rank)))
            .sum()
    }

    fn docs() -> Vec<Document> {
        vec![
            doc! {"_id": 1, "a": 30, "b": 10},
            doc! {"_id": 2, "a": 20, "b": 30},
            doc! {"_id": 3, "a": 10, "b": 20},
        ]
    }

    #[test]
    fn fuses_ranks_and_orders_by_score_then_id() {
        let out = run(
            vec![
                doc! {"$rankFusion": {
                    "input": {"pipelines": {"p2": [{"$sort": {"b": -1}}], "p1": [{"$sort": {"a": -1}}]}},
                    "combination": {"weights": {"p1": 2}},
                    "scoreDetails": true,
                }},
                doc! {"$project": {"score": {"$meta": "score"}, "details": {"$meta": "scoreDetails"}}},
            ],
            docs(),
        )
        .unwrap();
        let ids: Vec<i32> = out.iter().map(|d| d.get_i32("_id").unwrap()).collect();
        assert_eq!(ids, vec![1, 2, 3]);
        assert_eq!(out[0].get_f64("score").unwrap(), rrf(&[(2.0, 1), (1.0, 3)]));
        let details = out[0].get_document("details").unwrap();
        assert_eq!(
            details.get_array("details").unwrap(),
            &vec![
                bson!({"inputPipelineName": "p1", "rank": 1, "weight": 2.0, "details": []}),
                bson!({"inputPipelineName": "p2", "rank": 3, "weight": 1.0, "details": []}),
            ]
        );
    }

    #[test]
    fn ties_share_a_rank_and_absent_pipelines_say_na() {
        let input = vec![
            doc! {"_id": 1, "a": 10},
            doc! {"_id": 2, "a": 10},
            doc! {"_id": 3, "a": 5},
        ];
        let out = run(
            vec![
                doc! {"$rankFusion": {
                    "input": {"pipelines": {
                        "p1": [{"$sort": {"a": -1}}],
                        "p2": [{"$match": {"_id": 3}}, {"$sort": {"a": 1}}],
                    }},
                    "scoreDetails": true,
                }},
                doc! {"$project": {"score": {"$meta": "score"}, "details": {"$meta": "scoreDetails"}}},
            ],
            input,
        )
        .unwrap();
        let scores: Vec<(i32, f64)> = out
            .iter()
            .map(|d| (d.get_i32("_id").unwrap(), d.get_f64("score").unwrap()))
            .collect();
        assert_eq!(
            scores,
            vec![
                (3, rrf(&[(1.0, 3), (1.0, 1)])),
                (1, rrf(&[(1.0, 1)])),
                (2, rrf(&[(1.0, 1)])),
            ]
        );
        assert_eq!(
            out[1]
                .get_document("details")
                .unwrap()
                .get_array("details")
                .unwrap()[1],
            bson!({"inputPipelineName": "p2", "rank": "NA"})
        );
    }

    #[test]
    fn rank_fusion_errors() {
        let code = |spec: Bson| {
            run(vec![doc! {"$rankFusion": spec}], docs())
                .unwrap_err()
                .code
                .0
        };
        let pipelines = |p: Bson| bson!({"input": {"pipelines": p}});
        let sorted = || bson!([{"$sort": {"a": 1}}]);
        assert_eq!(code(Bson::Null), 9);
        assert_eq!(code(bson!({})), 40414);
        assert_eq!(code(bson!({"input": {}})), 40414);
        assert_eq!(code(bson!({"input": 1})), 14);
        assert_eq!(code(bson!({"bogus": 1})), 40415);
        assert_eq!(code(pipelines(bson!({}))), 2);
        assert_eq!(code(pipelines(bson!({"p": Bson::Null}))), 14);
        assert_eq!(code(pipelines(bson!({"p": [1]}))), 14);
        assert_eq!(code(pipelines(bson!({"p": []}))), 9834300);
        assert_eq!(code(pipelines(bson!({"$p": sorted()}))), 16410);
        assert_eq!(code(pipelines(bson!({"a.b": sorted()}))), 16412);
        assert_eq!(code(pipelines(bson!({"p": [{"$match": {}}]}))), 9191100);
        assert_eq!(
            code(pipelines(
                bson!({"p": [{"$sort": {"a": 1}}, {"$project": {"a": 1}}]})
            )),
            9191103
        );
        assert_eq!(
            code(pipelines(
                bson!({"p": [{"$sort": {"a": 1}}, {"$out": "x"}]})
            )),
            9191103
        );
        assert_eq!(
            code(pipelines(bson!({"p": [{"$rankFusion": {}}]}))),
            10473002
        );
        assert_eq!(
            code(pipelines(
                bson!({"p": [{"$sort": {"a": 1}}, {"$rankFusion": {}}]})
            )),
            10170100
        );
        let weighted = |w: Bson| {
            code(bson!({"input": {"pipelines": {"p": sorted()}}, "combination": {"weights": w}}))
        };
        assert_eq!(weighted(bson!({"p": "x"})), 13118);
        assert_eq!(weighted(bson!({"p": -1})), 9460300);
        assert_eq!(weighted(bson!({"p": f64::NAN})), 9460300);
        assert_eq!(weighted(bson!({"q": 1})), 9967500);
        assert_eq!(weighted(bson!({"p": 1, "q": 1})), 9460301);
        assert_eq!(weighted(Bson::Null), 40414);
        assert_eq!(
            run(
                vec![
                    doc! {"$match": {}},
                    doc! {"$rankFusion": pipelines(bson!({"p": sorted()}))}
                ],
                docs()
            )
            .unwrap_err()
            .code
            .0,
            10170100
        );
        // Without scoreDetails, there are none to project.
        let out = run(
            vec![
                doc! {"$rankFusion": pipelines(bson!({"p": sorted()}))},
                doc! {"$project": {"d": {"$meta": "scoreDetails"}}},
            ],
            docs(),
        );
        assert_eq!(out.unwrap_err().code.0, 40218);
    }
}
