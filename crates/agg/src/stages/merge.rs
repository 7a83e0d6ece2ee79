//! `$merge`: writes each result into a collection, matching it to an existing document by
//! its `on` fields (`_id` by default; other fields need a unique index, which the server
//! checks) and then, as `whenMatched` and `whenNotMatched` say, replacing, merging into,
//! keeping or updating with a pipeline the match, inserting or discarding the unmatched,
//! or failing. It is the last stage and outputs nothing.
//!
//! Each document is one read-decide-write step under the target's write lock
//! ([`crate::MergeTarget::upsert`]), so a concurrent writer cannot slip in between.

use crate::field_path;
use crate::pipeline::{DocumentStream, ExecContext, MergeWrite, Place, Stages};
use crate::stages::output::{Target, Writer};
use basalt_error::{Error, ErrorCode, Result};
use basalt_expr::{type_name, Expression, ParseContext, VarId, Variables};
use bson::{doc, Bson, Document};

#[derive(Debug)]
pub(crate) struct Merge {
    target: Target,
    /// The `on` fields, dotted and split.
    on: Vec<(String, Vec<String>)>,
    when_matched: WhenMatched,
    when_not_matched: WhenNotMatched,
    /// The `let` variables of a `whenMatched` pipeline, evaluated against each result.
    lets: Vec<(VarId, Expression)>,
}

#[derive(Debug)]
enum WhenMatched {
    Replace,
    KeepExisting,
    Merge,
    Fail,
    Pipeline(Stages),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WhenNotMatched {
    Insert,
    Discard,
    Fail,
}

impl WhenMatched {
    fn name(&self) -> &'static str {
        match self {
            WhenMatched::Replace => "replace",
            WhenMatched::KeepExisting => "keepExisting",
            WhenMatched::Merge => "merge",
            WhenMatched::Fail => "fail",
            WhenMatched::Pipeline(_) => "pipeline",
        }
    }
}

impl WhenNotMatched {
    fn name(self) -> &'static str {
        match self {
            WhenNotMatched::Insert => "insert",
            WhenNotMatched::Discard => "discard",
            WhenNotMatched::Fail => "fail",
        }
    }
}

impl Merge {
    pub(crate) fn parse(spec: &Bson, ctx: &ParseContext) -> Result<Merge> {
        let spec = match spec {
            Bson::String(coll) => return Merge::new(Target::in_command_database(coll), None),
            Bson::Document(d) => d,
            other => {
                return Err(Error::location(
                    51182,
                    format!(
                        "$merge only supports a string or object argument, not {}",
                        type_name(Some(other))
                    ),
                ))
            }
        };
        let (mut into, mut on, mut let_vars, mut when_matched, mut when_not_matched) =
            (None, None, None, None, WhenNotMatched::Insert);
        for (name, value) in spec {
            match name.as_str() {
                "into" => into = Some(parse_into(value)?),
                "on" => on = Some(parse_on(value)?),
                "let" => match value {
                    Bson::Document(d) => let_vars = Some(d),
                    other => {
                        return Err(Error::type_mismatch(format!(
                        "BSON field '$merge.let' is the wrong type '{}', expected type 'object'",
                        type_name(Some(other))
                    )))
                    }
                },
                "whenMatched" => when_matched = Some(value),
                "whenNotMatched" => when_not_matched = parse_when_not_matched(value)?,
                // Set by mongos for sharded targets; there are none here.
                "targetCollectionVersion" => {}
                _ => {
                    return Err(Error::location(
                        40415,
                        format!("BSON field '$merge.{name}' is an unknown field."),
                    ))
                }
            }
        }
        let into = into.ok_or_else(|| {
            Error::location(
                40414,
                "BSON field '$merge.into' is missing but a required field",
            )
        })?;
        let mut merge = Merge::new(into, on)?;
        merge.when_not_matched = when_not_matched;
        let pipeline = match when_matched {
            None => None,
            Some(Bson::String(mode)) => {
                merge.when_matched = match mode.as_str() {
                    "replace" => WhenMatched::Replace,
                    "keepExisting" => WhenMatched::KeepExisting,
                    "merge" => WhenMatched::Merge,
                    "fail" => WhenMatched::Fail,
                    _ => {
                        return Err(Error::bad_value(format!(
                        "Enumeration value '{mode}' for field 'whenMatched' is not a valid value."
                    )))
                    }
                };
                None
            }
            Some(pipeline @ Bson::Array(_)) => Some(pipeline),
            Some(other) => {
                return Err(Error::location(
                    51191,
                    format!(
                    "$merge 'whenMatched' field  must be either a string or an array, but found {}",
                    type_name(Some(other))
                ),
                ))
            }
        };
        let supported = matches!(
            (pipeline.is_some(), &merge.when_matched, when_not_matched),
            (true, _, _)
                | (_, WhenMatched::Replace | WhenMatched::Merge, _)
                | (
                    _,
                    WhenMatched::KeepExisting | WhenMatched::Fail,
                    WhenNotMatched::Insert
                )
        );
        if !supported {
            return Err(Error::location(
                51181,
                format!(
                    "Combination of $merge modes 'whenMatched: {}' and 'whenNotMatched: {}' is not supported",
                    merge.when_matched.name(),
                    when_not_matched.name()
                ),
            ));
        }
        match pipeline {
            Some(stages) => merge.parse_pipeline(stages, let_vars, ctx)?,
            None if let_vars.is_some() => {
                return Err(Error::location(
                    51199,
                    format!(
                        "Cannot use 'let' variables with 'whenMatched: {}' mode",
                        merge.when_matched.name()
                    ),
                ))
            }
            None => {}
        }
        Ok(merge)
    }

    /// A `$merge` with MongoDB's defaults: on `_id`, merge matches, insert the rest.
    fn new(target: Target, on: Option<Vec<String>>) -> Result<Merge> {
        let on = on
            .unwrap_or_else(|| vec!["_id".to_string()])
            .into_iter()
            .map(|f| {
                let split = field_path::split(&f)?;
                Ok((f, split))
            })
            .collect::<Result<_>>()?;
        Ok(Merge {
            target,
            on,
            when_matched: WhenMatched::Merge,
            when_not_matched: WhenNotMatched::Insert,
            lets: Vec::new(),
        })
    }

    /// Parses a `whenMatched` pipeline and its `let` variables. `$$new` is the result
    /// being merged unless `let` says otherwise (it may only say `$$ROOT`).
    fn parse_pipeline(
        &mut self,
        stages: &Bson,
        let_vars: Option<&Document>,
        ctx: &ParseContext,
    ) -> Result<()> {
        let mut let_vars = let_vars.cloned().unwrap_or_else(|| doc! {"new": "$$ROOT"});
        match let_vars.get("new") {
            None if self.when_not_matched == WhenNotMatched::Insert => {
                let_vars.insert("new", "$$ROOT");
            }
            Some(new) if new.as_str() != Some("$$ROOT") => return Err(Error::location(
                51273,
                "'let' may not define a value for the reserved 'new' variable other than '$$ROOT'",
            )),
            _ => {}
        }
        let mut inner = ctx.clone();
        for (name, spec) in &let_vars {
            let expression = Expression::parse(spec, ctx)?;
            self.lets.push((inner.define(name)?, expression));
        }
        self.when_matched =
            WhenMatched::Pipeline(Stages::parse_argument(stages, &inner, Place::Update)?);
        Ok(())
    }

    pub(crate) fn run(&self, input: DocumentStream<'_>, ctx: ExecContext<'_>) -> Result<()> {
        let (db, coll) = self.target.resolve(Writer::Merge, ctx.collections)?;
        let on: Vec<String> = self.on.iter().map(|(dotted, _)| dotted.clone()).collect();
        let mut target = ctx.collections.merge_target(db, coll, &on)?;
        for doc in input {
            let mut doc = doc?;
            if !doc.contains_key("_id") && on.iter().any(|f| f == "_id") {
                let mut with_id = doc! {"_id": basalt_value::clock::object_id()};
                with_id.extend(doc);
                doc = with_id;
            }
            let key = self.key(&doc)?;
            let vars = self.pipeline_variables(&doc, ctx)?;
            let pipeline_ctx = ExecContext {
                vars: vars.as_ref().unwrap_or(ctx.vars),
                collections: ctx.collections,
            };
            target
                .upsert(&key, &mut |existing| {
                    self.decide(existing, &doc, pipeline_ctx)
                })
                .map_err(|e| self.explain_duplicate(e))?;
        }
        Ok(())
    }

    /// The values of the `on` fields, which may not be missing, null or arrays.
    fn key(&self, doc: &Document) -> Result<Document> {
        let mut key = Document::new();
        for (dotted, path) in &self.on {
            match field_path::get(doc, path) {
                Some(Bson::Array(_)) => {
                    return Err(Error::location(
                        51185,
                        format!("$merge write error: 'on' field '{dotted}' is an array"),
                    ))
                }
                None | Some(Bson::Null | Bson::Undefined) => {
                    return Err(Error::location(
                        51132,
                        format!("$merge write error: 'on' field '{dotted}' cannot be missing, null, undefined or an array"),
                    ))
                }
                Some(value) => {
                    key.insert(dotted.clone(), value.clone());
                }
            }
        }
        Ok(key)
    }

    /// The variables a `whenMatched` pipeline sees for `doc`: the command's, and `let`.
    fn pipeline_variables(
        &self,
        doc: &Document,
        ctx: ExecContext<'_>,
    ) -> Result<Option<Variables>> {
        if !matches!(self.when_matched, WhenMatched::Pipeline(_)) {
            return Ok(None);
        }
        let mut vars = ctx.vars.clone();
        for (id, expression) in &self.lets {
            // A missing value leaves the variable unset, which reads as missing.
            if let Some(value) = expression.evaluate(doc, ctx.vars)? {
                vars.set(*id, value);
            }
        }
        Ok(Some(vars))
    }

    fn decide(
        &self,
        existing: Option<&Document>,
        doc: &Document,
        ctx: ExecContext<'_>,
    ) -> Result<MergeWrite> {
        let Some(old) = existing else {
            return match self.when_not_matched {
                WhenNotMatched::Insert => Ok(MergeWrite::Insert(doc.clone())),
                WhenNotMatched::Discard => Ok(MergeWrite::Keep),
                WhenNotMatched::Fail => Err(Error::new(
                    ErrorCode::MERGE_STAGE_NO_MATCHING_DOCUMENT,
                    "$merge could not find a matching document in the target collection for at least one document in the source collection",
                )),
            };
        };
        let new = match &self.when_matched {
            WhenMatched::KeepExisting => return Ok(MergeWrite::Keep),
            // The unique index refuses the insert with MongoDB's DuplicateKey error.
            WhenMatched::Fail => return Ok(MergeWrite::Insert(doc.clone())),
            WhenMatched::Replace => doc.clone(),
            WhenMatched::Merge => {
                let mut merged = old.clone();
                for (name, value) in doc {
                    merged.insert(name.clone(), value.clone());
                }
                merged
            }
            WhenMatched::Pipeline(stages) => {
                let input = Box::new(std::iter::once(Ok(old.clone())));
                let mut out = stages.stream(input, ctx).collect::<Result<Vec<_>>>()?;
                debug_assert_eq!(out.len(), 1, "update stages map one document to one");
                out.pop()
                    .ok_or_else(|| Error::internal("$merge pipeline produced no document"))?
            }
        };
        Ok(MergeWrite::Replace(keep_id(old, new)?))
    }

    /// Adds context to a DuplicateKey error, as MongoDB does: either `whenMatched: fail`
    /// met a match, or another unique index refused the write.
    fn explain_duplicate(&self, e: Error) -> Error {
        if e.code != ErrorCode::DUPLICATE_KEY {
            return e;
        }
        let on_fields = e.extra.get_document("keyPattern").is_ok_and(|pattern| {
            pattern.len() == self.on.len()
                && self
                    .on
                    .iter()
                    .all(|(dotted, _)| pattern.contains_key(dotted))
        });
        let context = if matches!(self.when_matched, WhenMatched::Fail) && on_fields {
            "$merge with whenMatched: fail found an existing document with the same values for the 'on' fields"
        } else {
            "$merge failed due to a DuplicateKey error"
        };
        Error {
            message: format!("{context} :: caused by :: {}", e.message),
            ..e
        }
    }
}

/// A replacement keeps the `_id` of the document it replaces: one without `_id` gets it,
/// one with another `_id` is refused (ImmutableField).
fn keep_id(old: &Document, new: Document) -> Result<Document> {
    let old_id = old.get("_id").cloned().unwrap_or(Bson::Null);
    match new.get("_id") {
        None => {
            let mut with_id = doc! {"_id": old_id};
            with_id.extend(new);
            Ok(with_id)
        }
        Some(id) if basalt_value::values_equal(id, &old_id) => Ok(new),
        Some(id) => Err(Error::new(
            ErrorCode::IMMUTABLE_FIELD,
            format!(
                "$merge failed to update the matching document, did you attempt to modify the _id or the shard key? :: caused by :: After applying the update, the (immutable) field '_id' was found to have been altered to _id: {id}"
            ),
        )),
    }
}

fn parse_into(spec: &Bson) -> Result<Target> {
    match spec {
        Bson::String(coll) if coll.is_empty() => Err(Error::location(
            5786800,
            "$merge 'into' field cannot be an empty string",
        )),
        Bson::String(coll) => Ok(Target::in_command_database(coll)),
        Bson::Document(d) => Target::parse_object(d, "into", false),
        other => Err(Error::location(
            51178,
            format!(
                "$merge 'into' field  must be either a string or an object, but found {}",
                type_name(Some(other))
            ),
        )),
    }
}

fn parse_on(spec: &Bson) -> Result<Vec<String>> {
    let fields = match spec {
        Bson::String(field) => vec![field.clone()],
        Bson::Array(items) => items
            .iter()
            .map(|item| match item {
                Bson::String(field) => Ok(field.clone()),
                other => Err(Error::location(
                    51134,
                    format!(
                        "$merge 'on' array elements must be strings, but found {}",
                        type_name(Some(other))
                    ),
                )),
            })
            .collect::<Result<Vec<_>>>()?,
        other => {
            return Err(Error::location(
                51186,
                format!(
                "$merge 'on' field  must be either a string or an array of strings, but found {}",
                type_name(Some(other))
            ),
            ))
        }
    };
    if fields.is_empty() {
        return Err(Error::location(
            51187,
            "If explicitly specifying $merge 'on', must include at least one field",
        ));
    }
    for (i, field) in fields.iter().enumerate() {
        if fields[..i].contains(field) {
            return Err(Error::location(
                31465,
                format!("Found a duplicate field '{field}'"),
            ));
        }
    }
    Ok(fields)
}

fn parse_when_not_matched(spec: &Bson) -> Result<WhenNotMatched> {
    match spec {
        Bson::String(mode) => match mode.as_str() {
            "insert" => Ok(WhenNotMatched::Insert),
            "discard" => Ok(WhenNotMatched::Discard),
            "fail" => Ok(WhenNotMatched::Fail),
            _ => Err(Error::bad_value(format!(
                "Enumeration value '{mode}' for field '$merge.whenNotMatched' is not a valid value."
            ))),
        },
        other => Err(Error::type_mismatch(format!(
            "BSON field '$merge.whenNotMatched' is the wrong type '{}', expected type 'string'",
            type_name(Some(other))
        ))),
    }
}

#[cfg(test)]
mod tests {
    use crate::pipeline::Pipeline;
    use crate::testing::MemoryCollections;
    use basalt_error::Result;
    use bson::{bson, doc, Bson, Document};

    fn merge(
        server: &MemoryCollections,
        spec: Bson,
        input: Vec<Document>,
    ) -> Result<Vec<Document>> {
        let p = Pipeline::parse(&[doc! {"$merge": spec}], None)?;
        let out = p
            .stream(Box::new(input.into_iter().map(Ok)), server)
            .collect();
        out
    }

    fn target() -> MemoryCollections {
        let server = MemoryCollections::new("test");
        server.put(
            "test",
            "t",
            vec![
                doc! {"_id": 1, "a": 1, "b": "old"},
                doc! {"_id": 2, "a": 2, "b": "old"},
            ],
        );
        server
    }

    fn input() -> Vec<Document> {
        vec![doc! {"_id": 2, "c": "new"}, doc! {"_id": 3, "c": "new"}]
    }

    #[test]
    fn default_mode_merges_and_inserts() {
        let server = target();
        assert!(merge(&server, bson!("t"), input()).unwrap().is_empty());
        assert_eq!(
            server.get("test", "t"),
            vec![
                doc! {"_id": 1, "a": 1, "b": "old"},
                doc! {"_id": 2, "a": 2, "b": "old", "c": "new"},
                doc! {"_id": 3, "c": "new"},
            ]
        );
    }

    #[test]
    fn when_matched_modes() {
        let server = target();
        merge(
            &server,
            bson!({"into": "t", "whenMatched": "replace", "whenNotMatched": "discard"}),
            input(),
        )
        .unwrap();
        assert_eq!(
            server.get("test", "t"),
            vec![
                doc! {"_id": 1, "a": 1, "b": "old"},
                doc! {"_id": 2, "c": "new"}
            ]
        );

        let server = target();
        merge(
            &server,
            bson!({"into": "t", "whenMatched": "keepExisting"}),
            input(),
        )
        .unwrap();
        assert_eq!(
            server.get("test", "t")[1],
            doc! {"_id": 2, "a": 2, "b": "old"}
        );
        assert_eq!(server.get("test", "t").len(), 3);

        let server = target();
        let err = merge(
            &server,
            bson!({"into": "t", "whenMatched": "fail"}),
            input(),
        )
        .unwrap_err();
        assert_eq!(err.code.0, 11000);
        assert!(err
            .message
            .starts_with("$merge with whenMatched: fail found an existing document"));
        assert_eq!(
            err.extra.get_document("keyValue").unwrap(),
            &doc! {"_id": 2}
        );

        let server = target();
        merge(
            &server,
            bson!({"into": "t", "let": {"extra": "$c"}, "whenMatched": [
                {"$set": {"b": {"$concat": ["$b", "+", "$$extra"]}, "from": "$$new._id"}},
            ]}),
            input(),
        )
        .unwrap();
        assert_eq!(
            server.get("test", "t"),
            vec![
                doc! {"_id": 1, "a": 1, "b": "old"},
                doc! {"_id": 2, "a": 2, "b": "old+new", "from": 2},
                doc! {"_id": 3, "c": "new"},
            ]
        );

        let server = target();
        let err = merge(
            &server,
            bson!({"into": "t", "whenNotMatched": "fail"}),
            input(),
        )
        .unwrap_err();
        assert_eq!(err.code.0, 13113);
    }

    #[test]
    fn on_other_fields_needs_a_unique_index_and_keeps_ids() {
        let server = target();
        let err = merge(
            &server,
            bson!({"into": "t", "on": "a"}),
            vec![doc! {"a": 2}],
        )
        .unwrap_err();
        assert_eq!(err.code.0, 51183);
        server.add_unique_index("test", "t", &["a"]);
        merge(
            &server,
            bson!({"into": "t", "on": "a", "whenMatched": "replace"}),
            vec![doc! {"a": 2, "b": "replaced"}, doc! {"a": 9}],
        )
        .unwrap();
        let docs = server.get("test", "t");
        assert_eq!(docs[1], doc! {"_id": 2, "a": 2, "b": "replaced"});
        assert!(matches!(docs[2].get("_id"), Some(Bson::ObjectId(_))));
        let err = merge(
            &server,
            bson!({"into": "t", "on": "a", "whenMatched": "replace"}),
            vec![doc! {"_id": 100, "a": 1}],
        )
        .unwrap_err();
        assert_eq!(err.code.0, 66);
        let code = |doc: Document| {
            merge(&server, bson!({"into": "t", "on": "a"}), vec![doc])
                .unwrap_err()
                .code
                .0
        };
        assert_eq!(code(doc! {"a": [1]}), 51185);
        assert_eq!(code(doc! {"a": null}), 51132);
        assert_eq!(code(doc! {"b": 1}), 51132);
    }

    #[test]
    fn generates_missing_ids() {
        let server = MemoryCollections::new("test");
        merge(&server, bson!("fresh"), vec![doc! {"x": 1}]).unwrap();
        let docs = server.get("test", "fresh");
        assert_eq!(docs.len(), 1);
        assert!(matches!(docs[0].get("_id"), Some(Bson::ObjectId(_))));
    }

    #[test]
    fn merge_spec_errors() {
        let server = MemoryCollections::new("test");
        let code = |spec: Bson| merge(&server, spec, vec![]).unwrap_err().code.0;
        assert_eq!(code(bson!(1)), 51182);
        assert_eq!(code(bson!({})), 40414);
        assert_eq!(code(bson!({"into": "t", "bogus": 1})), 40415);
        assert_eq!(code(bson!({"into": ""})), 5786800);
        assert_eq!(code(bson!({"into": 1})), 51178);
        assert_eq!(code(bson!({"into": {"db": "x"}})), 40414);
        assert_eq!(code(bson!({"into": "t", "on": 1})), 51186);
        assert_eq!(code(bson!({"into": "t", "on": [1]})), 51134);
        assert_eq!(code(bson!({"into": "t", "on": []})), 51187);
        assert_eq!(code(bson!({"into": "t", "on": ["a", "a"]})), 31465);
        assert_eq!(code(bson!({"into": "t", "whenMatched": "bogus"})), 2);
        assert_eq!(code(bson!({"into": "t", "whenMatched": 1})), 51191);
        assert_eq!(code(bson!({"into": "t", "whenNotMatched": "bogus"})), 2);
        assert_eq!(code(bson!({"into": "t", "whenNotMatched": 1})), 14);
        assert_eq!(
            code(bson!({"into": "t", "whenMatched": "fail", "whenNotMatched": "fail"})),
            51181
        );
        assert_eq!(
            code(bson!({"into": "t", "whenMatched": "keepExisting", "whenNotMatched": "discard"})),
            51181
        );
        assert_eq!(code(bson!({"into": "t", "let": {"a": 1}})), 51199);
        assert_eq!(
            code(bson!({"into": "t", "let": {"new": 1}, "whenMatched": []})),
            51273
        );
        assert_eq!(
            code(bson!({"into": "t", "whenMatched": [{"$match": {}}]})),
            72
        );
        assert_eq!(code(bson!({"into": "system.x"})), 31319);
        assert_eq!(code(bson!({"into": {"db": "config", "coll": "x"}})), 31320);
        let err = Pipeline::parse(&[doc! {"$merge": "t"}, doc! {"$limit": 1}], None).unwrap_err();
        assert_eq!(
            (err.code.0, err.message.as_str()),
            (40601, "$merge can only be the final stage in the pipeline")
        );
    }
}
