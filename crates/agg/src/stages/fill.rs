//! `$fill`: fills null and missing fields. MongoDB defines it as `$setWindowFields`
//! (`method: "locf"` is `$locf`, `method: "linear"` is `$linearFill`, over `sortBy` and
//! `partitionBy` or `partitionByFields`) followed by `$addFields` with `$ifNull` for the
//! `value` outputs, and it is parsed into exactly those stages.

use crate::stages::set_window_fields::SetWindowFields;
use crate::stages::{add_fields, Stage};
use basalt_error::{Error, ErrorCode, Result};
use basalt_expr::ParseContext;
use basalt_value::display::type_name;
use bson::{doc, Bson, Document};

pub(crate) fn parse(spec: &Bson, ctx: &ParseContext) -> Result<Vec<Stage>> {
    let Bson::Document(spec) = spec else {
        return Err(Error::failed_to_parse(format!(
            "The $fill stage specification must be an object, found {}",
            type_name(spec)
        )));
    };
    let (mut sort_by, mut partition_by, mut partition_fields, mut output) =
        (None, None, None, None);
    for (name, value) in spec {
        match (name.as_str(), value) {
            ("sortBy", Bson::Document(_)) => sort_by = Some(value.clone()),
            ("partitionBy", Bson::String(_) | Bson::Document(_)) => {
                partition_by = Some(value.clone())
            }
            ("partitionByFields", Bson::Array(items)) => {
                let mut fields = Document::new();
                for item in items {
                    let Bson::String(f) = item else {
                        return Err(wrong_type("partitionByFields", item, "string"));
                    };
                    fields.insert(f.clone(), format!("${f}"));
                }
                partition_fields = Some(Bson::Document(fields));
            }
            ("output", Bson::Document(o)) => output = Some(o),
            ("sortBy" | "output", other) => return Err(wrong_type(name, other, "object")),
            ("partitionBy", other) => return Err(wrong_type(name, other, "string or object")),
            ("partitionByFields", other) => return Err(wrong_type(name, other, "array")),
            _ => {
                return Err(Error::location(
                    40415,
                    format!("BSON field '$fill.{name}' is an unknown field."),
                ))
            }
        }
    }
    let output = output.ok_or_else(|| {
        Error::location(
            40414,
            "BSON field '$fill.output' is missing but a required field",
        )
    })?;
    if output.is_empty() {
        return Err(Error::location(
            6050203,
            "The output field in '$fill' must contain an object with at least one element",
        ));
    }
    if partition_by.is_some() && partition_fields.is_some() {
        return Err(Error::location(
            6050204,
            "Maximum one of 'partitionBy' and 'partitionByFields can be specified in '$fill'",
        ));
    }
    let (mut windowed, mut values) = (Document::new(), Document::new());
    for (field, spec) in output {
        let Bson::Document(spec) = spec else {
            return Err(Error::location(
                6050200,
                "Each fill output specification must be an object with exactly one field",
            ));
        };
        let (mut method, mut value) = (None, None);
        for (name, v) in spec {
            match (name.as_str(), v) {
                ("method", Bson::String(m)) => method = Some(m.as_str()),
                ("method", other) => return Err(wrong_type("method", other, "string")),
                ("value", v) => value = Some(v),
                _ => {
                    return Err(Error::location(
                        40415,
                        format!("BSON field '$fill.{name}' is an unknown field."),
                    ))
                }
            }
        }
        match (method, value) {
            (Some(_), Some(_)) => {
                return Err(Error::location(
                    6050201,
                    "Each fill output specification must have exactly one of 'method' or 'value' fields, not both",
                ))
            }
            (Some("locf"), None) => {
                windowed.insert(field.clone(), doc! {"$locf": format!("${field}")});
            }
            (Some("linear"), None) => {
                windowed.insert(field.clone(), doc! {"$linearFill": format!("${field}")});
            }
            (Some(_), None) => {
                return Err(Error::location(
                    6050202,
                    "Method must be either locf or linear",
                ))
            }
            (None, Some(v)) => {
                values.insert(field.clone(), doc! {"$ifNull": [format!("${field}"), v.clone()]});
            }
            (None, None) => {
                return Err(Error::location(
                    6050201,
                    "Each fill output specification must have exactly one of 'method' or 'value' fields",
                ))
            }
        }
    }
    let mut stages = Vec::new();
    if !windowed.is_empty() {
        let mut window = doc! {"output": windowed};
        if let Some(sort_by) = sort_by {
            window.insert("sortBy", sort_by);
        }
        if let Some(partition) = partition_by.or(partition_fields) {
            window.insert("partitionBy", partition);
        }
        stages.push(Stage::SetWindowFields(Box::new(SetWindowFields::parse(
            &Bson::Document(window),
            ctx,
        )?)));
    }
    if !values.is_empty() {
        stages.push(Stage::Project(add_fields::parse(
            "$addFields",
            &Bson::Document(values),
            ctx,
        )?));
    }
    Ok(stages)
}

fn wrong_type(field: &str, value: &Bson, expected: &str) -> Error {
    Error::new(
        ErrorCode::TYPE_MISMATCH,
        format!(
            "BSON field '$fill.{field}' is the wrong type '{}', expected type '{expected}'",
            type_name(value)
        ),
    )
}

#[cfg(test)]
mod tests {
    use crate::pipeline::Pipeline;
    use bson::{bson, doc, Bson, Document};

    fn run(stage: Document, input: Vec<Document>) -> basalt_error::Result<Vec<Document>> {
        Pipeline::parse(&[stage], None)?.run(input.into_iter().map(Ok))
    }

    #[test]
    fn fills_by_value_locf_and_linear() {
        let input = vec![
            doc! {"t": 3, "p": "a", "x": null},
            doc! {"t": 1, "p": "a", "x": 10, "y": 1.0},
            doc! {"t": 5, "p": "a", "x": 20, "y": 5.0},
            doc! {"t": 2, "p": "b"},
        ];
        let out = run(
            doc! {"$fill": {"sortBy": {"t": 1}, "partitionByFields": ["p"], "output": {
            "x": {"method": "locf"}, "y": {"method": "linear"}, "z": {"value": "none"}}}},
            input,
        )
        .unwrap();
        assert_eq!(
            out,
            vec![
                doc! {"t": 1, "p": "a", "x": 10, "y": 1.0, "z": "none"},
                doc! {"t": 3, "p": "a", "x": 10, "y": 3.0, "z": "none"},
                doc! {"t": 5, "p": "a", "x": 20, "y": 5.0, "z": "none"},
                doc! {"t": 2, "p": "b", "x": null, "y": null, "z": "none"},
            ]
        );
    }

    #[test]
    fn fill_errors() {
        let code = |spec: Bson| run(doc! {"$fill": spec}, vec![]).unwrap_err().code.0;
        assert_eq!(code(bson!(1)), 9);
        assert_eq!(code(bson!({"sortBy": {"t": 1}})), 40414);
        assert_eq!(code(bson!({"output": {}})), 6050203);
        assert_eq!(code(bson!({"output": {"x": 1}})), 6050200);
        assert_eq!(
            code(bson!({"output": {"x": {"method": "locf", "value": 1}}})),
            6050201
        );
        assert_eq!(code(bson!({"output": {"x": {"method": "cubic"}}})), 6050202);
        assert_eq!(
            code(
                bson!({"partitionBy": "$p", "partitionByFields": ["p"], "output": {"x": {"value": 1}}})
            ),
            6050204
        );
        assert_eq!(code(bson!({"output": {"x": {"method": "linear"}}})), 9);
        assert_eq!(
            code(bson!({"output": {"x": {"value": 1}}, "bogus": 1})),
            40415
        );
    }
}
