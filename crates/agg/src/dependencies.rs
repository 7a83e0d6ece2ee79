//! Which top-level fields of its input documents a pipeline reads, from its stage
//! specifications, so the scan under it decodes only those fields of each stored
//! document (MongoDB's dependency analysis, which lets its pipelines skip fields too).
//!
//! Stages are walked in order, adding what each reads, until one that defines its whole
//! output from what it read (an inclusion `$project`, `$group`, `$count`,
//! `$replaceRoot`, ...): later stages only see that output. A pipeline that never reaches
//! such a stage returns its input documents, so it needs all of them; so does any stage
//! this walk does not know. Over-approximating only costs decoding; the walk never
//! leaves out a field a stage reads.

use basalt_expr::{FieldSet, Scope};
use basalt_query::Matcher;
use bson::{Bson, Document};

/// Whether the stages after one still see the input's fields.
enum Flow {
    /// The input fields flow on (`$match`, `$addFields`, `$sort`, ...).
    Continue,
    /// The stage's output is made of what it read: later stages need nothing more.
    Complete,
}

/// The top-level fields the pipeline `specs` reads from its input documents.
pub(crate) fn pipeline_fields(specs: &[Document], scope: &Scope) -> FieldSet {
    let mut reads = FieldSet::new();
    for spec in specs {
        let flow = match spec.iter().next() {
            Some((name, args)) => stage_reads(name, args, scope, &mut reads),
            None => {
                reads.add_whole();
                Flow::Complete
            }
        };
        if matches!(flow, Flow::Complete) || reads.is_whole() {
            return reads;
        }
    }
    reads.add_whole();
    reads
}

fn stage_reads(name: &str, args: &Bson, scope: &Scope, reads: &mut FieldSet) -> Flow {
    match (name, args) {
        ("$match", Bson::Document(filter)) => {
            filter_reads(filter, scope, reads);
            Flow::Continue
        }
        ("$project", Bson::Document(spec)) => project_reads(spec, reads),
        ("$addFields" | "$set" | "$unwind", _) => {
            reads.add_expression(args);
            Flow::Continue
        }
        ("$unset" | "$limit" | "$skip", _) => Flow::Continue,
        // The geometry measured and the query's fields; without a named key the server
        // picks the geo index, so any field may be the one measured.
        ("$geoNear", Bson::Document(spec)) => {
            match spec.get_str("key") {
                Ok(key) => reads.add_path(key),
                Err(_) => reads.add_whole(),
            }
            match spec.get_document("query") {
                Ok(query) => filter_reads(query, scope, reads),
                Err(_) if spec.contains_key("query") => reads.add_whole(),
                Err(_) => {}
            }
            Flow::Continue
        }
        ("$sort", Bson::Document(keys)) => {
            keys.keys().for_each(|k| reads.add_path(k));
            Flow::Continue
        }
        ("$lookup", Bson::Document(spec)) => {
            if let Ok(local) = spec.get_str("localField") {
                reads.add_path(local);
            }
            if let Some(let_vars) = spec.get("let") {
                reads.add_expression(let_vars);
            }
            Flow::Continue
        }
        (
            "$group" | "$bucket" | "$bucketAuto" | "$sortByCount" | "$replaceRoot" | "$replaceWith",
            _,
        ) => {
            reads.add_expression(args);
            Flow::Complete
        }
        ("$count", _) => Flow::Complete,
        _ => {
            reads.add_whole();
            Flow::Complete
        }
    }
}

/// A `$match` filter: the fields its matcher reads (`Matcher::top_level_fields`, which
/// sees through `$and`/`$or`/`$nor` and `$expr`), or anything when it reads the whole
/// document or does not parse (the stage's own parse reports why).
fn filter_reads(filter: &Document, scope: &Scope, reads: &mut FieldSet) {
    match Matcher::with_scope(filter, scope).map(|m| m.top_level_fields()) {
        Ok(Some(fields)) => fields.iter().for_each(|f| reads.add_path(f)),
        _ => reads.add_whole(),
    }
}

/// `$project`: an inclusion projection (or one computing fields) is complete; an
/// exclusion projection lets every other field through.
fn project_reads(spec: &Document, reads: &mut FieldSet) -> Flow {
    let excludes = |v: &Bson| match v {
        Bson::Boolean(b) => !b,
        v => basalt_value::as_f64(v) == Some(0.0),
    };
    let mut inclusion = false;
    let mut id_excluded = false;
    for (key, value) in spec {
        if excludes(value) {
            id_excluded |= key == "_id";
            continue;
        }
        reads.add_path(key);
        reads.add_expression(value);
        // A nested object may be an exclusion (`{a: {b: 0}}`): not decisive.
        let nested_fields = matches!(value, Bson::Document(d)
            if d.keys().next().is_none_or(|k| !k.starts_with('$')));
        inclusion |= key != "_id" && !nested_fields;
    }
    if !inclusion {
        return Flow::Continue;
    }
    if !id_excluded {
        reads.add_path("_id");
    }
    Flow::Complete
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn fields(specs: Vec<Document>) -> Option<Vec<String>> {
        pipeline_fields(&specs, &Scope::new()).into_fields()
    }

    fn names(list: &[&str]) -> Option<Vec<String>> {
        Some(list.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn complete_stages_end_the_walk() {
        assert_eq!(
            fields(vec![
                doc! {"$match": {"q.r": {"$in": ["1"]}, "$or": [{"s": 1}]}},
                doc! {"$group": {"_id": null, "m": {"$max": "$t.v"}}},
                doc! {"$project": {"$$ROOT": 1}},
            ]),
            names(&["q", "s", "t"])
        );
        assert_eq!(
            fields(vec![
                doc! {"$project": {"_id": 0, "e": {"$multiply": ["$c", 2]}, "m": "$mi"}},
                doc! {"$group": {"_id": "$e", "n": {"$sum": "$m"}}},
            ]),
            names(&["e", "c", "m", "mi"])
        );
        assert_eq!(
            fields(vec![doc! {"$project": {"a": 1}}]),
            names(&["a", "_id"])
        );
        assert_eq!(fields(vec![doc! {"$count": "n"}]), names(&[]));
    }

    #[test]
    fn documents_that_flow_out_need_every_field() {
        assert_eq!(fields(vec![doc! {"$match": {"a": 1}}]), None);
        assert_eq!(fields(vec![doc! {"$project": {"a": 0}}]), None);
        assert_eq!(fields(vec![doc! {"$project": {"a": {"b": 0}}}]), None);
        assert_eq!(
            fields(vec![
                doc! {"$match": {"$expr": {"$eq": ["$$ROOT", {}]}}},
                doc! {"$count": "n"}
            ]),
            None
        );
        assert_eq!(
            fields(vec![doc! {"$facet": {"a": []}}, doc! {"$count": "n"}]),
            None
        );
        assert_eq!(
            fields(vec![
                doc! {"$group": {"_id": null, "all": {"$push": "$$ROOT"}}}
            ]),
            None
        );
    }

    #[test]
    fn geo_near_reads_its_key_and_its_query() {
        let near = doc! {"type": "Point", "coordinates": [2.35, 48.85]};
        assert_eq!(
            fields(vec![
                doc! {"$geoNear": {"near": near.clone(), "key": "position", "query": {"ts": 1}, "distanceField": "d"}},
                doc! {"$limit": 10},
                doc! {"$project": {"_id": 0, "st": 1}},
            ]),
            names(&["position", "ts", "st"])
        );
        assert_eq!(
            fields(vec![
                doc! {"$geoNear": {"near": near, "query": {"ts": 1}}},
                doc! {"$project": {"_id": 0, "st": 1}},
            ]),
            None
        );
    }

    #[test]
    fn sort_keys_of_accumulators_are_read() {
        assert_eq!(
            fields(vec![
                doc! {"$sort": {"z": 1}},
                doc! {"$group": {"_id": null, "t": {"$top": {"sortBy": {"w": -1}, "output": "$o"}}}},
            ]),
            names(&["z", "w", "o"])
        );
    }
}
