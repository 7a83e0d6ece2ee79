//! Query shapes, as MongoDB 8.0 names them in `explain`: what remains of a query when
//! its values are taken out.
//!
//! Two shapes, for two purposes, as in mongod:
//!
//! - The **plan cache shape** (`planCacheShapeHash`, 8.0's `queryHash`): what decides
//!   the plan. The filter is taken as a conjunction whose terms are sorted (`{a, b}`,
//!   `{b, a}` and `{$and: [{b}, {a}]}` are one shape), `{$eq: v}` is written `v`, a
//!   one-element `$in` is an equality, and values are left out except where they
//!   change the plan (`$exists`' truth, `$jsonSchema`); `$expr`, `$type`, `$mod`,
//!   `$size` and `$regex` are shaped by their operator alone. The sort, the projection
//!   (its fields, in order of name), the collation, and the pipeline stages that the
//!   plan depends on (`$group`, `$project`, `$sort`, `$lookup`, ...) are part of it.
//! - The **query shape** (`queryShapeHash`, the key of query settings): the command as
//!   written with each literal replaced by a placeholder naming its type (`"?number"`,
//!   `"?string"`, `"?array<?number>"`), so order matters and every stage counts.
//!
//! The plan cache shape hashes to 8 hexadecimal digits, the query shape to a SHA-256
//! (64), as mongod's do; the hashes are Basalt's own (equal for equal shapes, which is
//! what they are compared for), not mongod's values.

use bson::{doc, Bson, Document};
use sha2::{Digest, Sha256};

/// The stages that, after the leading `$match`, are part of the plan cache shape:
/// those whose needs decide the plan (the fields it must fetch, its order).
const PLANNED_STAGES: &[&str] = &[
    "$group",
    "$lookup",
    "$bucket",
    "$replaceRoot",
    "$replaceWith",
    "$project",
    "$sort",
    "$count",
    "$sortByCount",
    "$densify",
    "$setWindowFields",
];

/// The plan cache shape's hash of a read: its filter, sort, projection and collation,
/// and the stages after its leading `$match` (for an aggregation).
pub fn plan_cache_shape_hash(
    filter: &Document,
    sort: Option<&Document>,
    projection: Option<&Document>,
    collation: Option<&Document>,
    stages: &[Bson],
) -> String {
    let mut shape = Vec::new();
    write_conjunction(&mut shape, filter);
    shape.push(0xFF);
    if let Some(sort) = sort {
        shape.extend_from_slice(sort.to_string().as_bytes());
    }
    shape.push(0xFF);
    if let Some(projection) = projection {
        let mut fields: Vec<String> = projection
            .iter()
            .map(|(field, value)| format!("{field}:{}", shaped_projection(value)))
            .collect();
        fields.sort_unstable();
        shape.extend_from_slice(fields.join(",").as_bytes());
    }
    shape.push(0xFF);
    if let Some(collation) = collation {
        shape.extend_from_slice(collation.to_string().as_bytes());
    }
    for stage in stages {
        let Bson::Document(stage) = stage else {
            continue;
        };
        let Some((name, spec)) = stage.iter().next() else {
            continue;
        };
        if PLANNED_STAGES.contains(&name.as_str()) {
            shape.push(0xFF);
            shape.extend_from_slice(name.as_bytes());
            shape.extend_from_slice(shaped_literal_tree(spec).to_string().as_bytes());
        }
    }
    short_hash(&shape)
}

/// A shape's hash in 8 hexadecimal digits, as mongod gives `queryHash` and
/// `planCacheKey` (FNV-1a, 32 bits).
pub fn short_hash(shape: &[u8]) -> String {
    let hash = shape.iter().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    });
    format!("{hash:08X}")
}

/// The query shape's hash of a find, aggregate, distinct or count command on `db`;
/// `None` for other commands.
pub fn query_shape_hash(db: &str, command: &Document) -> Option<String> {
    let shape = query_shape(db, command)?;
    let bytes = shape.to_vec().ok()?;
    Some(
        Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02X}"))
            .collect(),
    )
}

/// The query shape of a command: its namespace and kind, and its query's parts with
/// their literals shaped.
pub fn query_shape(db: &str, command: &Document) -> Option<Document> {
    let (name, target) = command.iter().next()?;
    let mut shape = doc! {
        "cmdNs": { "db": db, "coll": shaped_namespace(target) },
        "command": name.as_str(),
    };
    let parts: &[&str] = match name.as_str() {
        "find" => &[
            "filter",
            "sort",
            "projection",
            "collation",
            "hint",
            "skip",
            "limit",
            "singleBatch",
            "max",
            "min",
            "returnKey",
            "showRecordId",
            "tailable",
            "awaitData",
            "let",
        ],
        "aggregate" => &["pipeline", "collation", "hint", "let"],
        "distinct" => &["key", "query", "collation", "hint"],
        "count" => &["query", "collation", "hint", "skip", "limit"],
        _ => return None,
    };
    for part in parts {
        let Some(value) = command.get(*part) else {
            continue;
        };
        let shaped = match *part {
            "filter" | "query" => match value {
                Bson::Document(filter) => Bson::Document(shaped_filter(filter)),
                other => other.clone(),
            },
            "pipeline" => match value {
                Bson::Array(stages) => Bson::Array(stages.iter().map(shaped_stage).collect()),
                other => other.clone(),
            },
            "skip" | "limit" | "let" => shaped_literal_tree(value),
            _ => value.clone(),
        };
        shape.insert(*part, shaped);
    }
    Some(shape)
}

fn shaped_namespace(target: &Bson) -> Bson {
    match target {
        Bson::String(collection) => Bson::String(collection.clone()),
        // `aggregate: 1` reads no collection.
        _ => Bson::String("$cmd.aggregate".to_string()),
    }
}

/// A projection value as the plan cache shape keeps it: inclusion or exclusion, or an
/// expression's operator.
fn shaped_projection(value: &Bson) -> String {
    match value {
        Bson::Document(spec) => spec.keys().next().cloned().unwrap_or_default(),
        other if crate::request::is_requested(other) && !is_zero(other) => "1".to_string(),
        _ => "0".to_string(),
    }
}

fn is_zero(value: &Bson) -> bool {
    basalt_value::as_f64(value) == Some(0.0)
}

/// Writes the terms of a conjunction (a filter's fields, and `$and`'s branches
/// flattened into it) in a canonical order.
fn write_conjunction(out: &mut Vec<u8>, filter: &Document) {
    let mut terms = Vec::new();
    collect_terms(filter, &mut terms);
    terms.sort_unstable();
    for term in terms {
        out.extend_from_slice(&term);
        out.push(1);
    }
    out.push(2);
}

fn collect_terms(filter: &Document, terms: &mut Vec<Vec<u8>>) {
    for (field, value) in filter {
        match (field.as_str(), value) {
            ("$and", Bson::Array(branches)) => {
                for branch in branches {
                    if let Bson::Document(branch) = branch {
                        collect_terms(branch, terms);
                    }
                }
            }
            _ => {
                let mut term = field.as_bytes().to_vec();
                term.push(0);
                write_term(&mut term, field, value);
                terms.push(term);
            }
        }
    }
}

/// One term of a filter: a logical operator's branches, or a path's predicate.
fn write_term(out: &mut Vec<u8>, field: &str, value: &Bson) {
    match (field, value) {
        ("$or" | "$nor", Bson::Array(branches)) => {
            let mut shapes: Vec<Vec<u8>> = branches
                .iter()
                .map(|branch| {
                    let mut shape = Vec::new();
                    if let Bson::Document(branch) = branch {
                        write_conjunction(&mut shape, branch);
                    }
                    shape
                })
                .collect();
            shapes.sort_unstable();
            out.push(b'[');
            for shape in shapes {
                out.extend_from_slice(&shape);
            }
            out.push(b']');
        }
        ("$jsonSchema", schema) => out.extend_from_slice(schema.to_string().as_bytes()),
        ("$expr" | "$where" | "$text" | "$comment", _) => {}
        (_, Bson::Document(operators)) if is_operator_document(operators) => {
            let mut shapes: Vec<Vec<u8>> = operators
                .iter()
                .map(|(operator, argument)| {
                    let mut shape = operator.as_bytes().to_vec();
                    write_operator(&mut shape, operator, argument);
                    shape
                })
                .collect();
            shapes.sort_unstable();
            out.push(b'(');
            for shape in shapes {
                out.extend_from_slice(&shape);
                out.push(b',');
            }
            out.push(b')');
        }
        // An equality: `v` is written as `{$eq: v}` is.
        _ => out.extend_from_slice(b"($eq,)"),
    }
}

/// An operator of a path's predicate.
fn write_operator(out: &mut Vec<u8>, operator: &str, argument: &Bson) {
    match (operator, argument) {
        // A one-element `$in` is planned as the equality it is.
        ("$in", Bson::Array(items)) if items.len() == 1 => {
            out.truncate(out.len() - "$in".len());
            out.extend_from_slice(b"$eq");
        }
        ("$exists", value) => out.push(if crate::request::is_requested(value) && !is_zero(value) {
            b'+'
        } else {
            b'-'
        }),
        // `$all` is a conjunction of as many equalities as it has elements.
        ("$all", Bson::Array(items)) => out.extend_from_slice(items.len().to_string().as_bytes()),
        ("$elemMatch" | "$not", Bson::Document(inner)) => {
            out.push(b'{');
            write_conjunction(out, inner);
            out.push(b'}');
        }
        _ => {}
    }
}

fn is_operator_document(document: &Document) -> bool {
    document
        .keys()
        .next()
        .is_some_and(|key| key.starts_with('$'))
}

/// A filter with its literals shaped (the query shape): a conjunction of its terms in
/// the order written (the fields of a document and the branches of `$and` alike, as
/// `$and` when there are several), each path's predicate as its operators (an equality
/// as `$eq`) with each operand a placeholder of its type; `$or` and `$nor` keep their
/// branches in order, `$expr` its expression shaped.
fn shaped_filter(filter: &Document) -> Document {
    let mut terms = Vec::new();
    shaped_terms(filter, &mut terms);
    match <[Document; 1]>::try_from(terms) {
        Ok([term]) => term,
        Err(terms) if terms.is_empty() => Document::new(),
        Err(terms) => doc! { "$and": terms },
    }
}

fn shaped_terms(filter: &Document, terms: &mut Vec<Document>) {
    for (field, value) in filter {
        if let ("$and", Bson::Array(branches)) = (field.as_str(), value) {
            for branch in branches {
                if let Bson::Document(branch) = branch {
                    shaped_terms(branch, terms);
                }
            }
            continue;
        }
        let (field, shaped) = shaped_term(field, value);
        terms.push(doc! { field: shaped });
    }
}

fn shaped_term(field: &str, value: &Bson) -> (String, Bson) {
    let shaped = match (field, value) {
        ("$or" | "$nor", Bson::Array(branches)) => Bson::Array(
            branches
                .iter()
                .map(|branch| match branch {
                    Bson::Document(branch) => Bson::Document(shaped_filter(branch)),
                    other => placeholder(other),
                })
                .collect(),
        ),
        ("$expr", expression) => shaped_expression(expression),
        ("$jsonSchema", schema) => schema.clone(),
        (_, Bson::Document(operators)) if is_operator_document(operators) => Bson::Document(
            operators
                .iter()
                .map(|(operator, argument)| (operator.clone(), shaped_operand(operator, argument)))
                .collect(),
        ),
        (_, literal) => Bson::Document(doc! { "$eq": placeholder(literal) }),
    };
    (field.to_string(), shaped)
}

fn shaped_operand(operator: &str, argument: &Bson) -> Bson {
    match (operator, argument) {
        ("$elemMatch", Bson::Document(inner)) => Bson::Document(shaped_filter(inner)),
        ("$not", inner @ Bson::Document(operators)) if is_operator_document(operators) => {
            shaped_term("", inner).1
        }
        // What a predicate tests for, not a value it compares with (one type or a
        // list of them being the same test).
        ("$type", Bson::Array(types)) => Bson::Array(types.clone()),
        ("$type", single) => Bson::Array(vec![single.clone()]),
        ("$exists", argument) => argument.clone(),
        ("$all", Bson::Array(items)) => Bson::Array(items.iter().map(placeholder).collect()),
        (_, argument) => placeholder(argument),
    }
}

/// An aggregation expression with its constants shaped: operators and field paths
/// stay, literals become placeholders.
fn shaped_expression(expression: &Bson) -> Bson {
    match expression {
        Bson::String(path) if path.starts_with('$') => expression.clone(),
        Bson::Document(document) => Bson::Document(
            document
                .iter()
                .map(|(key, value)| (key.clone(), shaped_expression(value)))
                .collect(),
        ),
        Bson::Array(items) => Bson::Array(items.iter().map(shaped_expression).collect()),
        literal => placeholder(literal),
    }
}

/// A stage with its literals shaped: `$match` as a filter, the others as expressions.
fn shaped_stage(stage: &Bson) -> Bson {
    let Bson::Document(stage) = stage else {
        return placeholder(stage);
    };
    Bson::Document(
        stage
            .iter()
            .map(|(name, spec)| {
                let shaped = match (name.as_str(), spec) {
                    ("$match", Bson::Document(filter)) => Bson::Document(shaped_filter(filter)),
                    _ => shaped_literal_tree(spec),
                };
                (name.clone(), shaped)
            })
            .collect(),
    )
}

/// A stage's specification with its leaf values shaped, its structure kept.
fn shaped_literal_tree(value: &Bson) -> Bson {
    match value {
        Bson::Document(document) => Bson::Document(
            document
                .iter()
                .map(|(key, value)| (key.clone(), shaped_literal_tree(value)))
                .collect(),
        ),
        Bson::Array(items) => Bson::Array(items.iter().map(shaped_literal_tree).collect()),
        Bson::String(path) if path.starts_with('$') => value.clone(),
        literal => placeholder(literal),
    }
}

/// The placeholder of a literal: `?` and its type (an array's element type when all
/// share one).
fn placeholder(literal: &Bson) -> Bson {
    Bson::String(match literal {
        Bson::Array(items) => {
            let mut kinds: Vec<String> = items.iter().map(type_placeholder).collect();
            kinds.sort_unstable();
            kinds.dedup();
            match kinds.as_slice() {
                [kind] => format!("?array<{kind}>"),
                _ => "?array<>".to_string(),
            }
        }
        other => type_placeholder(other),
    })
}

fn type_placeholder(literal: &Bson) -> String {
    match literal {
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {
            "?number".to_string()
        }
        Bson::Array(_) => "?array".to_string(),
        other => format!("?{}", crate::request::type_name(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_hash(filter: Document) -> String {
        plan_cache_shape_hash(&filter, None, None, None, &[])
    }

    fn shape_hash(filter: Document) -> String {
        query_shape_hash("db", &doc! { "find": "c", "filter": filter }).unwrap()
    }

    #[test]
    fn values_do_not_make_a_shape() {
        assert_eq!(plan_hash(doc! {"a": 1}), plan_hash(doc! {"a": {"$eq": 7}}));
        assert_eq!(
            plan_hash(doc! {"a": 1, "b": 2}),
            plan_hash(doc! {"b": 3, "a": 4})
        );
        assert_eq!(
            plan_hash(doc! {"a": 1, "b": 2}),
            plan_hash(doc! {"$and": [{"b": 3}, {"a": 4}]})
        );
        assert_eq!(
            shape_hash(doc! {"a": {"$in": [1]}}),
            shape_hash(doc! {"a": {"$in": [2, 3]}})
        );
        assert_eq!(shape_hash(doc! {"a": 1}), shape_hash(doc! {"a": 2.5}));
    }

    #[test]
    fn structure_makes_a_shape() {
        assert_ne!(plan_hash(doc! {"a": 1}), plan_hash(doc! {"b": 1}));
        assert_ne!(
            plan_hash(doc! {"a": {"$gt": 1}}),
            plan_hash(doc! {"a": {"$lt": 1}})
        );
        assert_ne!(
            plan_hash(doc! {"a": {"$in": [1]}}),
            plan_hash(doc! {"a": {"$in": [1, 2]}})
        );
        assert_ne!(
            plan_hash(doc! {"a": {"$exists": true}}),
            plan_hash(doc! {"a": {"$exists": false}})
        );
        // The query shape keeps the order the query was written in, the plan cache's not.
        assert_ne!(
            shape_hash(doc! {"a": 1, "b": 2}),
            shape_hash(doc! {"b": 1, "a": 2})
        );
        assert_ne!(shape_hash(doc! {"a": 1}), shape_hash(doc! {"a": "x"}));
    }

    #[test]
    fn planned_stages_count_for_the_plan_cache_shape() {
        let filter = doc! {"a": {"$gt": 0}};
        let alone = plan_cache_shape_hash(&filter, None, None, None, &[]);
        let grouped = [Bson::Document(doc! {"$group": {"_id": "$b"}})];
        let limited = [Bson::Document(doc! {"$limit": 5})];
        assert_ne!(
            alone,
            plan_cache_shape_hash(&filter, None, None, None, &grouped)
        );
        assert_eq!(
            alone,
            plan_cache_shape_hash(&filter, None, None, None, &limited)
        );
    }
}
