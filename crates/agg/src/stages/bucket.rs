//! `$bucket`: groups documents into ranges of a `groupBy` value between given
//! boundaries. MongoDB defines it as a `$group` whose `_id` is a `$switch` over the ranges
//! followed by `$sort {_id: 1}`, and it is parsed into exactly those stages, so it groups
//! (and runs in parallel) as `$group` does. A value outside every range goes to the
//! `default` bucket, or fails as the `$switch` does (40066) when there is none.

use crate::stages::{group::Group, sort::Sort, Stage};
use basalt_error::{Error, Result};
use basalt_expr::ParseContext;
use basalt_value::display::{type_name, value_to_string};
use basalt_value::{canonical_type_rank, compare_values};
use bson::{doc, Bson, Document};
use std::cmp::Ordering;

pub(crate) fn parse(spec: &Bson, ctx: &ParseContext) -> Result<Vec<Stage>> {
    let Bson::Document(spec) = spec else {
        return Err(Error::location(
            40201,
            format!(
                "Argument to $bucket stage must be an object, but found type: {}.",
                type_name(spec)
            ),
        ));
    };
    let (mut group_by, mut boundaries, mut default, mut output) = (None, None, None, None);
    for (name, value) in spec {
        match name.as_str() {
            "groupBy" => group_by = Some(parse_group_by(value, 40202, "$bucket", "an expression")?),
            "boundaries" => boundaries = Some(parse_boundaries(value, ctx)?),
            "default" => default = Some(constant(value, ctx, 40195, "default")?),
            "output" => match value {
                Bson::Document(fields) => output = Some(fields.clone()),
                other => {
                    return Err(Error::location(
                        40196,
                        format!(
                            "The $bucket 'output' field must be an object, but found type: {}.",
                            type_name(other)
                        ),
                    ))
                }
            },
            _ => {
                return Err(Error::location(
                    40197,
                    format!("Unrecognized option to $bucket: {name}."),
                ))
            }
        }
    }
    let (Some(group_by), Some(boundaries)) = (group_by, boundaries) else {
        return Err(Error::location(
            40198,
            "$bucket requires 'groupBy' and 'boundaries' to be specified.",
        ));
    };
    if let Some(default) = &default {
        let (lowest, highest) = (&boundaries[0], &boundaries[boundaries.len() - 1]);
        let comparable = canonical_type_rank(default) == canonical_type_rank(lowest);
        if comparable
            && compare_values(default, lowest) != Ordering::Less
            && compare_values(default, highest) == Ordering::Less
        {
            return Err(Error::location(
                40199,
                "The $bucket 'default' field must be less than the lowest boundary or greater than or equal to the highest boundary.",
            ));
        }
    }
    let branches: Vec<Bson> = boundaries
        .windows(2)
        .map(|range| {
            Bson::Document(doc! {
                "case": {"$and": [
                    {"$gte": [group_by.clone(), {"$literal": range[0].clone()}]},
                    {"$lt": [group_by.clone(), {"$literal": range[1].clone()}]},
                ]},
                "then": {"$literal": range[0].clone()},
            })
        })
        .collect();
    let mut switch = doc! {"branches": branches};
    if let Some(default) = default {
        switch.insert("default", doc! {"$literal": default});
    }
    let mut group = doc! {"_id": {"$switch": switch}};
    group.extend(output.unwrap_or_else(default_output));
    let group = Group::parse(&Bson::Document(group), ctx)?;
    // Sorts the bucket boundaries as MongoDB does, without the collation.
    let sort = Sort::parse(&Bson::Document(doc! {"_id": 1}), None)?;
    Ok(vec![Stage::Group(group), Stage::Sort(sort)])
}

/// `groupBy` must be a `$`-path or an operator object (`code` and wording per stage).
pub(super) fn parse_group_by(value: &Bson, code: i32, stage: &str, what: &str) -> Result<Bson> {
    let valid = match value {
        Bson::String(s) => s.len() > 1 && s.starts_with('$'),
        Bson::Document(d) => d.keys().next().is_some_and(|k| k.starts_with('$')),
        _ => false,
    };
    if !valid {
        return Err(Error::location(
            code,
            format!(
                "The {stage} 'groupBy' field must be defined as a $-prefixed path or {what}, but found: {}.",
                value_to_string(value)
            ),
        ));
    }
    Ok(value.clone())
}

/// The value of an expression that must not depend on the document.
fn constant(value: &Bson, ctx: &ParseContext, code: i32, field: &str) -> Result<Bson> {
    basalt_expr::Expression::parse(value, ctx)?
        .as_constant()
        .cloned()
        .ok_or_else(|| {
            Error::location(
                code,
                format!(
                    "The $bucket '{field}' field must be a constant expression, but found: {}.",
                    value_to_string(value)
                ),
            )
        })
}

/// `boundaries`: at least two constants of one type, strictly ascending.
fn parse_boundaries(value: &Bson, ctx: &ParseContext) -> Result<Vec<Bson>> {
    let Bson::Array(items) = value else {
        return Err(Error::location(
            40200,
            format!(
                "The $bucket 'boundaries' field must be an array, but found type: {}.",
                type_name(value)
            ),
        ));
    };
    if items.len() < 2 {
        return Err(Error::location(
            40192,
            format!(
                "The $bucket 'boundaries' field must have at least 2 values, but found {} value(s).",
                items.len()
            ),
        ));
    }
    let values = items
        .iter()
        .map(|item| {
            basalt_expr::Expression::parse(item, ctx)?
                .as_constant()
                .cloned()
                .ok_or_else(|| {
                    Error::location(
                        40191,
                        format!(
                            "The $bucket 'boundaries' field must be an array of constant values, but found value: {}.",
                            value_to_string(item)
                        ),
                    )
                })
        })
        .collect::<Result<Vec<_>>>()?;
    for pair in values.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if canonical_type_rank(a) != canonical_type_rank(b) {
            return Err(Error::location(
                40193,
                format!(
                    "All values in the the 'boundaries' option to $bucket must have the same type. Found conflicting types {} and {}.",
                    type_name(a),
                    type_name(b)
                ),
            ));
        }
        if compare_values(a, b) != Ordering::Less {
            return Err(Error::location(
                40194,
                format!(
                    "The 'boundaries' option to $bucket must be sorted, but elements {} and {} are not in ascending order ({} is not less than {}).",
                    value_to_string(a),
                    value_to_string(b),
                    value_to_string(a),
                    value_to_string(b)
                ),
            ));
        }
    }
    Ok(values)
}

/// The default output of `$bucket` and `$bucketAuto`: how many documents each holds.
pub(super) fn default_output() -> Document {
    doc! {"count": {"$sum": 1}}
}

#[cfg(test)]
mod tests {
    use crate::pipeline::Pipeline;
    use bson::{doc, Document};

    fn run(stage: Document, input: Vec<Document>) -> basalt_error::Result<Vec<Document>> {
        Pipeline::parse(&[stage], None)?.run(input.into_iter().map(Ok))
    }

    fn prices() -> Vec<Document> {
        [5, 12, 0, 30, 18, 99]
            .iter()
            .map(|p| doc! {"price": *p, "name": format!("n{p}")})
            .collect()
    }

    #[test]
    fn buckets_by_boundaries() {
        let out = run(
            doc! {"$bucket": {"groupBy": "$price", "boundaries": [0, 10, 20], "default": "other"}},
            prices(),
        )
        .unwrap();
        assert_eq!(
            out,
            vec![
                doc! {"_id": 0, "count": 2},
                doc! {"_id": 10, "count": 2},
                doc! {"_id": "other", "count": 2},
            ]
        );
        let out = run(
            doc! {"$bucket": {"groupBy": "$price", "boundaries": [0, 20, 100],
            "output": {"names": {"$push": "$name"}, "top": {"$max": "$price"}}}},
            prices(),
        )
        .unwrap();
        assert_eq!(
            out,
            vec![
                doc! {"_id": 0, "names": ["n5", "n12", "n0", "n18"], "top": 18},
                doc! {"_id": 20, "names": ["n30", "n99"], "top": 99},
            ]
        );
    }

    #[test]
    fn bucket_errors() {
        let code = |spec: Document| run(doc! {"$bucket": spec}, prices()).unwrap_err().code.0;
        assert_eq!(run(doc! {"$bucket": 1}, vec![]).unwrap_err().code.0, 40201);
        assert_eq!(
            code(doc! {"groupBy": "$price", "boundaries": [0, 10]}),
            40066
        );
        assert_eq!(
            code(doc! {"groupBy": "price", "boundaries": [0, 10]}),
            40202
        );
        assert_eq!(code(doc! {"groupBy": "$price", "boundaries": 1}), 40200);
        assert_eq!(code(doc! {"groupBy": "$price", "boundaries": [0]}), 40192);
        assert_eq!(
            code(doc! {"groupBy": "$price", "boundaries": [0, "$x"]}),
            40191
        );
        assert_eq!(
            code(doc! {"groupBy": "$price", "boundaries": [0, "a"]}),
            40193
        );
        assert_eq!(
            code(doc! {"groupBy": "$price", "boundaries": [10, 0]}),
            40194
        );
        assert_eq!(
            code(doc! {"groupBy": "$price", "boundaries": [0, 10], "default": "$x"}),
            40195
        );
        assert_eq!(
            code(doc! {"groupBy": "$price", "boundaries": [0, 10], "default": 5}),
            40199
        );
        assert_eq!(
            code(doc! {"groupBy": "$price", "boundaries": [0, 10], "output": 1}),
            40196
        );
        assert_eq!(
            code(doc! {"groupBy": "$price", "boundaries": [0, 10], "x": 1}),
            40197
        );
        assert_eq!(code(doc! {"groupBy": "$price"}), 40198);
    }
}
