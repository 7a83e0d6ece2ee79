//! `$lookup`: adds to each document an array of documents from another collection —
//! those whose `foreignField` equals its `localField` (equality form), those a pipeline
//! produces with the document's `let` variables in scope (pipeline form), or those of
//! the equality match that then go through the pipeline (both together).
//!
//! The equality match is a hash join over the foreign collection, read once per
//! execution (`crate::join`). A pipeline without `let` and without equality is
//! uncorrelated: its result is the same for every document, so it runs once. A
//! correlated pipeline runs per document, as in MongoDB.

use crate::field_path;
use crate::join::{self, Join, Key};
use crate::pipeline::{stream_stages, DocumentStream, ExecContext, Place, Stages};
use crate::stages::map_documents;
use basalt_error::{Error, ErrorCode, Result};
use basalt_expr::{type_name, Expression, ParseContext, VarId, Variables};
use basalt_memory::Reservation;
use basalt_value::{Collation, FieldPath};
use bson::{Bson, Document};
use std::borrow::Cow;
use std::collections::HashSet;

/// MongoDB's internalLookupStageIntermediateDocumentMaxSizeBytes: the BSON bytes of the
/// documents one input document may be joined with.
const LOOKUP_RESULTS_BYTES_MAX: usize = 100 * 1024 * 1024;

#[derive(Debug)]
pub(crate) struct Lookup {
    /// `None` when the pipeline starts with `$documents` and reads no collection.
    from: Option<String>,
    as_path: Vec<String>,
    equality: Option<Equality>,
    lets: Vec<(VarId, Expression)>,
    pipeline: Option<Stages>,
}

#[derive(Debug)]
struct Equality {
    local: FieldPath,
    foreign: FieldPath,
}

/// What one execution of the stage keeps between documents.
enum Prepared<'a> {
    /// The foreign collection, indexed by `foreignField`.
    Join(Join<'a>),
    /// The result of an uncorrelated pipeline.
    Uncorrelated(Vec<Document>),
    /// Everything is computed per document.
    PerDocument,
}

impl Lookup {
    pub(crate) fn parse(spec: &Bson, ctx: &ParseContext) -> Result<Lookup> {
        let Bson::Document(spec) = spec else {
            return Err(Error::failed_to_parse(
                "the $lookup specification must be an Object",
            ));
        };
        let (mut from, mut as_field, mut local, mut foreign) = (None, None, None, None);
        let (mut pipeline, mut let_vars) = (None, None);
        for (name, value) in spec {
            match (name.as_str(), value) {
                ("pipeline", _) => pipeline = Some(value),
                ("let", Bson::Document(d)) => let_vars = Some(d),
                // Null is a field not given, as mongod's parser has it.
                ("let" | "localField" | "foreignField", Bson::Null) => {}
                ("as", Bson::Null) => {
                    return Err(Error::location(
                        40414,
                        "BSON field '$lookup.as' is missing but a required field",
                    ))
                }
                ("let", other) => {
                    return Err(Error::type_mismatch(format!(
                        "$lookup argument 'let: {other}' must be an object, is type {}",
                        type_name(Some(other))
                    )))
                }
                ("from", Bson::String(coll)) => from = Some(coll.clone()),
                ("from", Bson::Document(ns)) => {
                    if let Some(unknown) = ns.keys().find(|k| *k != "db" && *k != "coll") {
                        return Err(Error::location(
                            40415,
                            format!("BSON field '$lookup.from.{unknown}' is an unknown field."),
                        ));
                    }
                    return Err(Error::failed_to_parse(format!(
                        "$lookup with syntax {{from: {{db:<>, coll:<>}},..}} is not supported for db: {} and coll: {}",
                        ns.get_str("db").unwrap_or(""),
                        ns.get_str("coll").unwrap_or("")
                    )));
                }
                ("from", other) => {
                    return Err(Error::failed_to_parse(format!(
                        "$lookup 'from' field must be a string, but found {}",
                        type_name(Some(other))
                    )))
                }
                (_, Bson::String(s)) => match name.as_str() {
                    "as" => as_field = Some(s.as_str()),
                    "localField" => local = Some(s.as_str()),
                    "foreignField" => foreign = Some(s.as_str()),
                    _ => {
                        return Err(Error::failed_to_parse(format!(
                            "unknown argument to $lookup: {name}"
                        )))
                    }
                },
                ("as" | "localField" | "foreignField", other) => {
                    return Err(Error::type_mismatch(format!(
                        "$lookup argument '{name}: {other}' must be a string, found {other}: {}",
                        type_name(Some(other))
                    )))
                }
                (_, _) => {
                    return Err(Error::failed_to_parse(format!(
                        "unknown argument to $lookup: {name}"
                    )))
                }
            }
        }
        if from.as_deref() == Some("") {
            return Err(Error::new(
                ErrorCode::INVALID_NAMESPACE,
                "invalid $lookup namespace: the collection name is empty",
            ));
        }
        let as_path = match as_field {
            Some(name) if !name.is_empty() => field_path::split(name)?,
            _ => {
                return Err(Error::failed_to_parse(
                    "must specify 'as' field for a $lookup",
                ))
            }
        };
        let equality = match (local.filter(|l| !l.is_empty()), foreign.filter(|f| !f.is_empty())) {
            (Some(local), Some(foreign)) => {
                field_path::split(local)?;
                field_path::split(foreign)?;
                Some(Equality {
                    local: FieldPath::parse(local),
                    foreign: FieldPath::parse(foreign),
                })
            }
            (None, None) if pipeline.is_some() => None,
            (None, None) => {
                return Err(Error::failed_to_parse(
                    "$lookup requires either 'pipeline' or both 'localField' and 'foreignField' to be specified",
                ))
            }
            _ => {
                return Err(Error::failed_to_parse(
                    "$lookup requires both or neither of 'localField' and 'foreignField' to be specified",
                ))
            }
        };
        let mut lookup = Lookup {
            from,
            as_path,
            equality,
            lets: Vec::new(),
            pipeline: None,
        };
        match pipeline {
            Some(stages) => {
                let mut inner = ctx.clone();
                for (name, spec) in let_vars.into_iter().flatten() {
                    let expression = Expression::parse(spec, ctx)?;
                    lookup.lets.push((inner.define(name)?, expression));
                }
                lookup.pipeline = Some(Stages::parse_argument(stages, &inner, Place::Lookup)?);
            }
            None if let_vars.is_some() => {
                return Err(Error::failed_to_parse(
                    "$lookup with a 'let' argument must also specify 'pipeline'",
                ))
            }
            None => {}
        }
        let reads_collection = !lookup
            .pipeline
            .as_ref()
            .is_some_and(Stages::starts_with_source);
        if lookup.from.is_none() && reads_collection {
            return Err(Error::failed_to_parse(match lookup.pipeline {
                None => "must specify 'pipeline' when 'from' is empty",
                Some(_) => "$lookup stage without explicit collection must have a pipeline with $documents as first stage",
            }));
        }
        Ok(lookup)
    }

    pub(crate) fn apply<'a>(
        &'a self,
        input: DocumentStream<'a>,
        ctx: ExecContext<'a>,
    ) -> DocumentStream<'a> {
        let mut prepared = None;
        map_documents(input, move |mut doc| {
            let state = match &mut prepared {
                Some(state) => state,
                None => prepared.insert(self.prepare(ctx)?),
            };
            let found = self.matches(&doc, state, ctx)?;
            let found = found
                .into_iter()
                .map(|mut joined| {
                    basalt_expr::remove_metadata(&mut joined);
                    Bson::Document(joined)
                })
                .collect();
            field_path::set(&mut doc, &self.as_path, Bson::Array(found));
            Ok(Some(doc))
        })
    }

    fn reads_collection(&self) -> bool {
        !self
            .pipeline
            .as_ref()
            .is_some_and(Stages::starts_with_source)
    }

    /// The documents of the `from` collection, or none when the pipeline makes its own.
    fn foreign_documents<'a>(&'a self, ctx: ExecContext<'a>) -> Result<DocumentStream<'a>> {
        match (&self.from, self.reads_collection()) {
            (Some(from), true) => ctx.collections.scan(ctx.collections.database(), from),
            _ => Ok(Box::new(std::iter::empty())),
        }
    }

    fn prepare<'a>(&'a self, ctx: ExecContext<'a>) -> Result<Prepared<'a>> {
        match (&self.equality, &self.pipeline) {
            (Some(equality), _) if self.reads_collection() => Ok(Prepared::Join(Join::open(
                equality.foreign.clone(),
                true,
                None,
                ctx.vars.collation(),
                Box::new(move || self.foreign_documents(ctx)),
            )?)),
            (None, Some(pipeline)) if self.lets.is_empty() => Ok(Prepared::Uncorrelated(
                self.collect_within_limit(pipeline.stream(self.foreign_documents(ctx)?, ctx))?,
            )),
            _ => Ok(Prepared::PerDocument),
        }
    }

    /// The documents `doc` is joined with.
    fn matches(
        &self,
        doc: &Document,
        prepared: &Prepared<'_>,
        ctx: ExecContext<'_>,
    ) -> Result<Vec<Document>> {
        if let Prepared::Uncorrelated(found) = prepared {
            return Ok(found.clone());
        }
        let vars = self.variables(doc, ctx.vars)?;
        let ctx = ExecContext {
            vars: &vars,
            collections: ctx.collections,
        };
        let (foreign, rest): (DocumentStream<'_>, &[_]) = match (&self.equality, prepared) {
            (Some(equality), Prepared::Join(join)) => (
                join.matching(sought_keys(doc, equality, ctx.vars.collation()))?,
                self.pipeline.as_ref().map_or(&[][..], |p| &p.0[..]),
            ),
            (Some(equality), _) => {
                // The pipeline starts with `$documents`: the equality filters what it
                // makes, as MongoDB places the join's $match right after it.
                let stages = &self.pipeline.as_ref().expect("checked at parse").0;
                let collation = ctx.vars.collation();
                let keys = sought_keys(doc, equality, collation);
                let made = stream_stages(&stages[..1], Box::new(std::iter::empty()), ctx)
                    .collect::<Result<Vec<_>>>()?;
                let kept = made.into_iter().filter(move |d| {
                    join::offered_keys(d, &equality.foreign, true, collation)
                        .iter()
                        .any(|k| keys.contains(k))
                });
                (Box::new(kept.map(Ok)), &stages[1..])
            }
            (None, _) => (
                self.foreign_documents(ctx)?,
                &self.pipeline.as_ref().expect("checked at parse").0[..],
            ),
        };
        self.collect_within_limit(stream_stages(rest, foreign, ctx))
    }

    /// The joined documents, refused once they pass MongoDB's limit on what one input
    /// document may be joined with (internalLookupStageIntermediateDocumentMaxSizeBytes),
    /// or the server's memory budget while they are gathered.
    fn collect_within_limit(&self, found: DocumentStream<'_>) -> Result<Vec<Document>> {
        let mut bytes = 0usize;
        let mut memory = Reservation::default();
        found
            .map(|doc| {
                let doc = doc?;
                memory.reserve_for(basalt_value::document_memory_bytes(&doc), "$lookup")?;
                bytes += basalt_value::document_size_bytes(&doc);
                if bytes > LOOKUP_RESULTS_BYTES_MAX {
                    return Err(Error::location(
                        4568,
                        format!(
                            "Total size of documents in {} matching pipeline's $lookup stage \
                             exceeds {LOOKUP_RESULTS_BYTES_MAX} bytes",
                            self.from.as_deref().unwrap_or_default()
                        ),
                    ));
                }
                Ok(doc)
            })
            .collect()
    }

    /// The command's variables with this document's `let` values.
    fn variables<'v>(&self, doc: &Document, outer: &'v Variables) -> Result<Cow<'v, Variables>> {
        if self.lets.is_empty() {
            return Ok(Cow::Borrowed(outer));
        }
        let mut vars = outer.clone();
        for (id, expression) in &self.lets {
            // A missing value leaves the variable unset, which reads as missing.
            if let Some(value) = expression.evaluate(doc, outer)? {
                vars.set(*id, value);
            }
        }
        Ok(Cow::Owned(vars))
    }
}

/// The keys `doc` looks for: the values at `localField`, or null when there are none
/// (MongoDB treats a missing local value as null); strings under `collation`.
fn sought_keys(doc: &Document, equality: &Equality, collation: Option<&Collation>) -> HashSet<Key> {
    let values = join::sought_values(doc, &equality.local);
    if values.is_empty() {
        return HashSet::from([join::key(&Bson::Null, collation)]);
    }
    values.iter().map(|v| join::key(v, collation)).collect()
}

#[cfg(test)]
mod tests {
    use crate::pipeline::Pipeline;
    use crate::testing::MemoryCollections;
    use basalt_error::Result;
    use bson::{bson, doc, Bson, Document};

    fn server() -> MemoryCollections {
        let server = MemoryCollections::new("test");
        server.put(
            "test",
            "items",
            vec![
                doc! {"_id": 1, "sku": "a", "qty": 10},
                doc! {"_id": 2, "sku": "b", "qty": 0},
                doc! {"_id": 3, "sku": ["a", "c"], "qty": 5},
                doc! {"_id": 4, "qty": 1},
                doc! {"_id": 5, "sku": 1.0},
            ],
        );
        server
    }

    fn run(
        server: &MemoryCollections,
        stages: Vec<Document>,
        input: Vec<Document>,
    ) -> Result<Vec<Document>> {
        let p = Pipeline::parse(&stages, Some(&doc! {"min": 1}))?;
        let out = p
            .stream(Box::new(input.into_iter().map(Ok)), server)
            .collect();
        out
    }

    fn ids(doc: &Document, field: &str) -> Vec<i32> {
        doc.get_array(field)
            .unwrap()
            .iter()
            .map(|d| d.as_document().unwrap().get_i32("_id").unwrap())
            .collect()
    }

    #[test]
    fn equality_form() {
        let server = server();
        let out = run(
            &server,
            vec![doc! {"$lookup": {"from": "items", "localField": "item", "foreignField": "sku", "as": "found.items"}}],
            vec![
                doc! {"_id": "x", "item": "a"},
                doc! {"_id": "y", "item": ["b", "c"]},
                doc! {"_id": "z"},
                doc! {"_id": "w", "item": 1_i64},
                doc! {"_id": "v", "item": "none"},
            ],
        )
        .unwrap();
        let found = |i: usize| ids(out[i].get_document("found").unwrap(), "items");
        assert_eq!(found(0), vec![1, 3]);
        assert_eq!(found(1), vec![2, 3]);
        assert_eq!(found(2), vec![4], "missing matches missing");
        assert_eq!(found(3), vec![5], "numbers compare by value");
        assert!(found(4).is_empty());
        assert_eq!(out[0].get_str("item").unwrap(), "a");
    }

    #[test]
    fn pipeline_form_with_let_and_uncorrelated() {
        let server = server();
        let out = run(
            &server,
            vec![doc! {"$lookup": {
                "from": "items",
                "let": {"want": "$need"},
                "pipeline": [
                    {"$match": {"$expr": {"$and": [{"$gte": ["$qty", "$$want"]}, {"$gte": ["$qty", "$$min"]}]}}},
                    {"$project": {"_id": 1}},
                ],
                "as": "enough",
            }}],
            vec![doc! {"need": 5}, doc! {"need": 100}],
        )
        .unwrap();
        assert_eq!(ids(&out[0], "enough"), vec![1, 3]);
        assert!(ids(&out[1], "enough").is_empty());

        let out = run(
            &server,
            vec![doc! {"$lookup": {"from": "items", "pipeline": [{"$count": "n"}], "as": "n"}}],
            vec![doc! {"a": 1}, doc! {"a": 2}],
        )
        .unwrap();
        assert_eq!(out[1], doc! {"a": 2, "n": [{"n": 5}]});
    }

    #[test]
    fn combined_form_and_documents() {
        let server = server();
        let out = run(
            &server,
            vec![doc! {"$lookup": {
                "from": "items", "localField": "item", "foreignField": "sku",
                "let": {"q": "$q"}, "pipeline": [{"$match": {"$expr": {"$gt": ["$qty", "$$q"]}}}],
                "as": "m",
            }}],
            vec![doc! {"item": "a", "q": 6}],
        )
        .unwrap();
        assert_eq!(ids(&out[0], "m"), vec![1]);

        let out = run(
            &server,
            vec![doc! {"$lookup": {
                "localField": "k", "foreignField": "k",
                "pipeline": [{"$documents": [{"_id": 1, "k": 1}, {"_id": 2, "k": 2}]}],
                "as": "m",
            }}],
            vec![doc! {"k": 2}],
        )
        .unwrap();
        assert_eq!(ids(&out[0], "m"), vec![2]);
    }

    #[test]
    fn lookup_errors() {
        let server = server();
        let code = |spec: Bson| {
            run(&server, vec![doc! {"$lookup": spec}], vec![doc! {}])
                .unwrap_err()
                .code
                .0
        };
        assert_eq!(code(bson!(1)), 9);
        assert_eq!(
            code(bson!({"from": "items", "localField": "a", "foreignField": "b"})),
            9
        );
        assert_eq!(
            code(bson!({"from": "items", "localField": "a", "as": "x"})),
            9
        );
        assert_eq!(code(bson!({"from": "items", "as": "x"})), 9);
        assert_eq!(
            code(
                bson!({"from": "items", "localField": "a", "foreignField": "b", "as": "x", "let": {}})
            ),
            9
        );
        assert_eq!(code(bson!({"from": 1, "pipeline": [], "as": "x"})), 9);
        assert_eq!(
            code(bson!({"from": {"db": "a", "coll": "b"}, "pipeline": [], "as": "x"})),
            9
        );
        assert_eq!(
            code(bson!({"from": "items", "pipeline": [], "as": "x", "bogus": "y"})),
            9
        );
        assert_eq!(code(bson!({"from": "items", "pipeline": [], "as": 1})), 14);
        assert_eq!(
            code(bson!({"from": "items", "pipeline": [], "as": "x", "let": 1})),
            14
        );
        assert_eq!(code(bson!({"from": "items", "pipeline": 1, "as": "x"})), 14);
        assert_eq!(
            code(bson!({"from": "items", "pipeline": [1], "as": "x"})),
            14
        );
        assert_eq!(code(bson!({"pipeline": [{"$match": {}}], "as": "x"})), 9);
        assert_eq!(
            code(bson!({"from": "items", "pipeline": [], "as": "x", "let": {"Bad": 1}})),
            9
        );
        assert_eq!(
            code(bson!({"from": "items", "pipeline": [{"$merge": "x"}], "as": "x"})),
            51047
        );
        assert_eq!(code(bson!({"from": "", "pipeline": [], "as": "x"})), 73);
    }
}
