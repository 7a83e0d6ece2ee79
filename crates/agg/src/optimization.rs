//! Pipeline rewrites that give the same results with less work, done on the stage
//! specifications before they are parsed (as MongoDB's pipeline optimizer rewrites its
//! stages).
//!
//! A `$match` right after a time-series read's `$_internalUnpackBucket` becomes its
//! `eventFilter`, as MongoDB's optimizer moves it (see `stages/unpack_bucket.rs`).
//!
//! Adjacent `$match` stages become one (`$and` of their filters), as MongoDB coalesces
//! them: a leading pair then filters in the scan, where an index can serve both (the
//! Spark connector sends its partition's `_id` range and the user's filter as two
//! stages). A stage with a top-level `$expr` (which the scan leaves to the pipeline) or
//! `$text` is left as it is.
//!
//! The other rewrite fuses a `$project` into the `$group` after it: the group's
//! expressions read the projection's expressions directly instead of a projected
//! document being built for every input document and then read back. It applies only
//! where the result is certainly the same:
//! - the projection names top-level fields only, each included (`1`/`true`) or computed
//!   by an expression (no nested projections, no exclusions but `_id: 0`);
//! - every computed field is read by the group (so an expression that would fail still
//!   fails), and reading it is reading the whole field (`$f`, not `$f.x`);
//! - neither the projection nor the group uses variables (`$$...`, but `$$NOW` and
//!   `$$REMOVE`), so nothing moved can be captured by a `$let`, `$map`, ... of the group,
//!   and nothing reads the whole document.
//!
//! Fields the projection drops read as missing in the fused group (`$$REMOVE`); a
//! computed field one group expression reads several times is bound once by a `$let`.

use bson::{Bson, Document};

/// The pipeline `specs` with adjacent `$match` stages coalesced and every fusable
/// `$project` + `$group` pair fused.
pub fn optimize(specs: Vec<Document>) -> Vec<Document> {
    fuse_event_filters(fuse_groups(coalesce_matches(specs)))
}

/// A time-series read's `$_internalUnpackBucket` followed by a coalescable `$match`: the
/// filter becomes the unpacking's `eventFilter` (as MongoDB's optimizer moves it), tested
/// on each measurement before it is built whole.
fn fuse_event_filters(mut specs: Vec<Document>) -> Vec<Document> {
    let mut i = 0;
    while i + 1 < specs.len() {
        let fusable = matches!(
            specs[i].get("$_internalUnpackBucket"),
            Some(Bson::Document(unpack)) if specs[i].len() == 1 && !unpack.contains_key("eventFilter")
        );
        if let (true, Some(filter)) = (fusable, coalescable_match(&specs[i + 1]).cloned()) {
            if let Some(Bson::Document(unpack)) = specs[i].get_mut("$_internalUnpackBucket") {
                unpack.insert("eventFilter", filter);
            }
            specs.remove(i + 1);
        }
        i += 1;
    }
    specs
}

/// The filter of a `$match` stage that may be coalesced with its neighbour.
fn coalescable_match(spec: &Document) -> Option<&Document> {
    match spec.get("$match") {
        Some(Bson::Document(filter))
            if spec.len() == 1
                && !filter.contains_key("$expr")
                && !filter.contains_key("$text") =>
        {
            Some(filter)
        }
        _ => None,
    }
}

/// Each run of adjacent coalescable `$match` stages as one, whose filter is the `$and`
/// of theirs: one flat list, so a pipeline of many stages nests no deeper than its
/// stages do.
fn coalesce_matches(specs: Vec<Document>) -> Vec<Document> {
    let mut out: Vec<Document> = Vec::with_capacity(specs.len());
    // The filters of the run of `$match` stages at the end of `out`, when longer than one.
    let mut run: Vec<Bson> = Vec::new();
    let flush = |out: &mut Vec<Document>, run: &mut Vec<Bson>| {
        if run.len() > 1 {
            *out.last_mut().expect("the run's first stage") =
                bson::doc! {"$match": {"$and": std::mem::take(run)}};
        }
        run.clear();
    };
    for spec in specs {
        match coalescable_match(&spec) {
            Some(filter) if !run.is_empty() => run.push(Bson::Document(filter.clone())),
            Some(filter) => {
                run.push(Bson::Document(filter.clone()));
                out.push(spec);
            }
            None => {
                flush(&mut out, &mut run);
                out.push(spec);
            }
        }
    }
    flush(&mut out, &mut run);
    out
}

fn fuse_groups(mut specs: Vec<Document>) -> Vec<Document> {
    let mut i = 1;
    while i < specs.len() {
        let fused = match (specs[i - 1].get("$project"), specs[i].get("$group")) {
            (Some(Bson::Document(project)), Some(Bson::Document(group)))
                if specs[i - 1].len() == 1 && specs[i].len() == 1 =>
            {
                fuse(project, group)
            }
            _ => None,
        };
        match fused {
            Some(group) => {
                specs.remove(i - 1);
                specs[i - 1] = bson::doc! {"$group": group};
                // The stage before may fuse into the new group too.
                i = i.saturating_sub(1).max(1);
            }
            None => i += 1,
        }
    }
    specs
}

/// What the projection makes of one field.
enum Output<'a> {
    Included,
    Computed(&'a Bson),
}

/// The group with the projection's expressions in place of the fields it reads, or
/// `None` when the fusion would not certainly give the same result.
fn fuse(project: &Document, group: &Document) -> Option<Document> {
    if project.is_empty() {
        // Invalid: left for the parser to refuse.
        return None;
    }
    let mut outputs: Vec<(&str, Output<'_>)> = Vec::new();
    let mut id_included = true;
    for (name, value) in project {
        if name.starts_with('$') || name.contains('.') || mentions_variables(value) {
            return None;
        }
        let output = match value {
            Bson::Boolean(true) => Output::Included,
            Bson::Boolean(false) if name == "_id" => {
                id_included = false;
                continue;
            }
            Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {
                if basalt_value::as_f64(value) == Some(0.0) {
                    if name != "_id" {
                        return None;
                    }
                    id_included = false;
                    continue;
                }
                Output::Included
            }
            Bson::Document(d) if !d.keys().next().is_some_and(|k| k.starts_with('$')) => {
                return None
            }
            v => Output::Computed(v),
        };
        outputs.push((name.as_str(), output));
    }
    if id_included && !outputs.iter().any(|(name, _)| *name == "_id") {
        outputs.push(("_id", Output::Included));
    }
    if mentions_variables(&Bson::Document(group.clone())) {
        return None;
    }
    let mut read = vec![0; outputs.len()];
    let mut fused = Document::new();
    for (name, value) in group {
        let fused_value = match value {
            _ if name == "_id" => fuse_expression(value, &outputs, &mut read)?,
            Bson::Document(acc) if acc.len() == 1 => {
                let (op, argument) = acc.iter().next()?;
                if SINGLE_ARGUMENT_ACCUMULATORS.contains(&op.as_str()) {
                    bson::bson!({ op.clone(): fuse_expression(argument, &outputs, &mut read)? })
                } else {
                    substitute(value, &outputs, &mut read, &[])?
                }
            }
            _ => substitute(value, &outputs, &mut read, &[])?,
        };
        fused.insert(name.clone(), fused_value);
    }
    let all_computed_read = outputs
        .iter()
        .zip(&read)
        .all(|((_, output), read)| matches!(output, Output::Included) || *read > 0);
    all_computed_read.then_some(fused)
}

/// Accumulators whose argument is one expression, which may be wrapped in a `$let`.
const SINGLE_ARGUMENT_ACCUMULATORS: [&str; 11] = [
    "$sum",
    "$avg",
    "$min",
    "$max",
    "$first",
    "$last",
    "$push",
    "$addToSet",
    "$stdDevPop",
    "$stdDevSamp",
    "$mergeObjects",
];

/// One expression of the group with the projection's expressions in it: inline where a
/// field is read once, bound once by a `$let` where it is read several times (so it is
/// still evaluated once per document).
fn fuse_expression(
    expression: &Bson,
    outputs: &[(&str, Output<'_>)],
    read: &mut [usize],
) -> Option<Bson> {
    let mut counts = vec![0; outputs.len()];
    substitute(expression, outputs, &mut counts, &[])?;
    let bound: Vec<bool> = counts.iter().map(|c| *c > 1).collect();
    let body = substitute(expression, outputs, read, &bound)?;
    let mut vars = Document::new();
    for (i, (_, output)) in outputs.iter().enumerate() {
        if let (true, Output::Computed(computed)) = (bound[i], output) {
            vars.insert(variable_name(i), (*computed).clone());
        }
    }
    Some(if vars.is_empty() {
        body
    } else {
        bson::bson!({"$let": {"vars": vars, "in": body}})
    })
}

/// The variable a fused `$let` binds projected field `i` to. The fused expressions use
/// no other variables, so it cannot clash.
fn variable_name(i: usize) -> String {
    format!("projected{i}")
}

/// `spec` with each field path replaced by what the projection gives for it, or by the
/// variable it is `bound` to; counts how often each field is `read`.
fn substitute(
    spec: &Bson,
    outputs: &[(&str, Output<'_>)],
    read: &mut [usize],
    bound: &[bool],
) -> Option<Bson> {
    Some(match spec {
        Bson::String(s) if s.starts_with('$') => {
            let path = &s[1..];
            let (first, rest) = match path.split_once('.') {
                Some((first, rest)) => (first, Some(rest)),
                None => (path, None),
            };
            match outputs.iter().position(|(name, _)| *name == first) {
                None => Bson::String("$$REMOVE".to_string()),
                Some(i) => match (&outputs[i].1, rest) {
                    (Output::Included, _) => spec.clone(),
                    (Output::Computed(expression), None) => {
                        read[i] += 1;
                        if bound.get(i) == Some(&true) {
                            Bson::String(format!("$${}", variable_name(i)))
                        } else {
                            (*expression).clone()
                        }
                    }
                    (Output::Computed(_), Some(_)) => return None,
                },
            }
        }
        Bson::Array(items) => Bson::Array(
            items
                .iter()
                .map(|item| substitute(item, outputs, read, bound))
                .collect::<Option<_>>()?,
        ),
        Bson::Document(doc) => {
            let mut out = Document::new();
            for (key, value) in doc {
                let value = match key.as_str() {
                    "$literal" | "$const" => value.clone(),
                    // Names of fields, not expressions.
                    "$getField" | "$setField" | "$unsetField" | "sortBy" => return None,
                    _ => substitute(value, outputs, read, bound)?,
                };
                out.insert(key.clone(), value);
            }
            Bson::Document(out)
        }
        other => other.clone(),
    })
}

/// Whether an expression uses a variable (`$$name`) anywhere, other than `$$NOW` and
/// `$$REMOVE`, which mean the same wherever they stand (user variables cannot shadow
/// them).
fn mentions_variables(spec: &Bson) -> bool {
    match spec {
        Bson::String(s) => s.starts_with("$$") && s != "$$NOW" && s != "$$REMOVE",
        Bson::Array(items) => items.iter().any(mentions_variables),
        Bson::Document(doc) => doc.values().any(mentions_variables),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Pipeline;
    use bson::doc;

    #[test]
    fn adjacent_matches_coalesce() {
        let range = doc! {"_id": {"$gte": 10}};
        let filter = doc! {"fuel": "DI"};
        assert_eq!(
            optimize(vec![
                doc! {"$match": range.clone()},
                doc! {"$match": filter.clone()},
                doc! {"$match": {}},
                doc! {"$limit": 1},
                doc! {"$match": filter.clone()},
            ]),
            vec![
                doc! {"$match": {"$and": [range.clone(), filter.clone(), {}]}},
                doc! {"$limit": 1},
                doc! {"$match": filter.clone()},
            ]
        );
        // However many there are, one level of $and.
        let many = vec![doc! {"$match": {"a": 1}}; 1000];
        let coalesced = optimize(many);
        assert_eq!(coalesced.len(), 1);
        let and = coalesced[0]
            .get_document("$match")
            .unwrap()
            .get_array("$and")
            .unwrap();
        assert_eq!(and.len(), 1000);
        // $expr and $text stay in stages of their own.
        let expr = doc! {"$match": {"$expr": {"$eq": ["$a", 1]}}};
        let text = doc! {"$match": {"$text": {"$search": "x"}}};
        for pair in [
            vec![expr.clone(), doc! {"$match": filter.clone()}],
            vec![doc! {"$match": filter.clone()}, expr.clone()],
            vec![text.clone(), doc! {"$match": filter.clone()}],
        ] {
            assert_eq!(optimize(pair.clone()), pair);
        }
    }

    #[test]
    fn a_match_after_unpacking_becomes_its_event_filter() {
        let unpack = doc! {"timeField": "t", "metaField": "m"};
        let specs = vec![
            doc! {"$match": {"meta": "a"}},
            doc! {"$_internalUnpackBucket": unpack.clone()},
            doc! {"$match": {"v": {"$gt": 1}}},
            doc! {"$match": {"w": 2}},
            doc! {"$count": "n"},
        ];
        let mut fused = unpack.clone();
        fused.insert("eventFilter", doc! {"$and": [{"v": {"$gt": 1}}, {"w": 2}]});
        assert_eq!(
            optimize(specs),
            vec![
                doc! {"$match": {"meta": "a"}},
                doc! {"$_internalUnpackBucket": fused},
                doc! {"$count": "n"},
            ]
        );
        // `$expr` stays in its stage, as a `$match` after it does.
        let kept = vec![
            doc! {"$_internalUnpackBucket": unpack},
            doc! {"$match": {"$expr": {"$gt": ["$v", 1]}}},
        ];
        assert_eq!(optimize(kept.clone()), kept);
    }

    #[test]
    fn projections_fuse_into_the_group() {
        let specs = vec![
            doc! {"$project": {"_id": 0, "e": {"$multiply": ["$c", 2]}, "m": "$mi"}},
            doc! {"$project": {"b": {"$cond": [{"$lt": ["$e", 10]}, "low", "high"]}, "m": 1}},
            doc! {"$group": {"_id": "$b", "n": {"$sum": 1}, "miles": {"$sum": "$m"}, "x": {"$max": "$gone"}}},
            doc! {"$sort": {"_id": 1}},
        ];
        let fused = optimize(specs.clone());
        assert_eq!(
            fused,
            vec![
                doc! {"$group": {
                    "_id": {"$cond": [{"$lt": [{"$multiply": ["$c", 2]}, 10]}, "low", "high"]},
                    "n": {"$sum": 1},
                    "miles": {"$sum": "$mi"},
                    "x": {"$max": "$$REMOVE"},
                }},
                doc! {"$sort": {"_id": 1}},
            ]
        );
        let input: Vec<Document> = (0..20)
            .map(|i| doc! {"_id": i, "c": i, "mi": i * 100, "gone": i})
            .collect();
        let run = |specs: &[Document]| {
            Pipeline::parse(specs, None)
                .unwrap()
                .run(input.clone().into_iter().map(Ok))
                .unwrap()
        };
        let mut unfused = Pipeline::parse(&specs[..1], None)
            .unwrap()
            .run(input.clone().into_iter().map(Ok))
            .unwrap();
        unfused = Pipeline::parse(&specs[1..], None)
            .unwrap()
            .run(unfused.into_iter().map(Ok))
            .unwrap();
        assert_eq!(run(&specs), unfused);
    }

    #[test]
    fn a_field_read_twice_is_bound_once() {
        let specs = vec![
            doc! {"$project": {"e": {"$multiply": ["$c", 2]}}},
            doc! {"$group": {"_id": {"$cond": [{"$lt": ["$e", 10]}, "$e", 0]}, "s": {"$sum": "$e"}}},
        ];
        assert_eq!(
            optimize(specs.clone()),
            vec![doc! {"$group": {
                "_id": {"$let": {
                    "vars": {"projected0": {"$multiply": ["$c", 2]}},
                    "in": {"$cond": [{"$lt": ["$$projected0", 10]}, "$$projected0", 0]},
                }},
                "s": {"$sum": {"$multiply": ["$c", 2]}},
            }}]
        );
        let input: Vec<Document> = (0..9).map(|i| doc! {"_id": i, "c": i}).collect();
        let run = |specs: &[Document]| {
            Pipeline::parse(specs, None)
                .unwrap()
                .run(input.clone().into_iter().map(Ok))
                .unwrap()
        };
        assert_eq!(run(&optimize(specs.clone())), run(&specs));
    }

    #[test]
    fn unsafe_fusions_are_left_alone() {
        let unchanged = |project: Document, group: Document| {
            let specs = vec![doc! {"$project": project}, doc! {"$group": group}];
            assert_eq!(optimize(specs.clone()), specs);
        };
        // A computed field the group does not read could still fail.
        unchanged(
            doc! {"a": {"$divide": [1, "$z"]}, "b": 1},
            doc! {"_id": "$b"},
        );
        // Part of a computed field.
        unchanged(doc! {"a": {"$first": "$z"}}, doc! {"_id": "$a.x"});
        // Nested projections and exclusions; an empty projection, which is an error.
        unchanged(doc! {}, doc! {"_id": "$a"});
        unchanged(doc! {"a": {"x": 1}}, doc! {"_id": "$a"});
        unchanged(doc! {"a": 0}, doc! {"_id": "$b"});
        // Variables.
        unchanged(doc! {"a": "$$ROOT"}, doc! {"_id": "$a"});
        unchanged(
            doc! {"a": "$z"},
            doc! {"_id": {"$let": {"vars": {"v": 1}, "in": "$$v"}}, "s": {"$sum": "$a"}},
        );
    }
}
