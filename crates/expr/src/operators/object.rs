//! Object expression operators: `$mergeObjects $getField $setField $unsetField
//! $objectToArray $arrayToObject`.
//!
//! `$getField` and `$setField` name the field with a constant string rather than a path,
//! which is how documents with `$`-prefixed or dotted field names are read and written.

use crate::context::ParseContext;
use crate::env::{Env, Value};
use crate::expression::{is_nullish, parse_fixed, parse_operands, type_name, Expression};
use crate::numeric::display;
use basalt_error::{Error, Result};
use basalt_value::value_memory_bytes;
use bson::{doc, Bson, Document};
use std::borrow::Cow;

#[derive(Debug)]
pub(crate) enum ObjectOp {
    MergeObjects(Vec<Expression>),
    /// `$getField`: the field (any expression giving a string, as MongoDB 8.0) of
    /// `input`, or of the current document in the shorthand form.
    GetField {
        field: Box<Expression>,
        input: Option<Box<Expression>>,
    },
    /// `$setField`, and `$unsetField` (which has no `value`): a copy of `input` with
    /// `field` set, or removed when the value is missing.
    SetField {
        field: String,
        input: Box<Expression>,
        value: Option<Box<Expression>>,
    },
    ObjectToArray(Box<[Expression; 1]>),
    ArrayToObject(Box<[Expression; 1]>),
}

impl ObjectOp {
    pub(crate) fn parse(name: &str, args: &Bson, ctx: &ParseContext) -> Result<Option<ObjectOp>> {
        Ok(Some(match name {
            "$mergeObjects" => ObjectOp::MergeObjects(parse_operands(args, ctx)?),
            "$getField" => parse_get_field(args, ctx)?,
            "$setField" | "$unsetField" => parse_set_field(name, args, ctx)?,
            "$objectToArray" => ObjectOp::ObjectToArray(parse_fixed(name, args, ctx)?),
            "$arrayToObject" => ObjectOp::ArrayToObject(parse_fixed(name, args, ctx)?),
            _ => return Ok(None),
        }))
    }

    pub(crate) fn eval<'a>(&'a self, env: &Env<'a>) -> Result<Value<'a>> {
        match self {
            ObjectOp::MergeObjects(args) => {
                let mut out = Document::new();
                for arg in args {
                    merge_into(&mut out, arg.eval(env)?.as_deref(), 40400)?;
                }
                Ok(Some(Cow::Owned(Bson::Document(out))))
            }
            ObjectOp::GetField { field, input } => {
                let field = match field.eval(env)?.as_deref() {
                    Some(Bson::String(name)) => name.clone(),
                    other => {
                        return Err(Error::location(
                            3041704,
                            format!(
                                "$getField requires 'field' to evaluate to type String, but got {}",
                                type_name(other)
                            ),
                        ))
                    }
                };
                let input = match input {
                    Some(e) => e.eval(env)?,
                    None => return Ok(env.root.get(&field).map(Cow::Borrowed)),
                };
                // Anything but an object has no fields: missing, as MongoDB 8.0.
                match input {
                    None => Ok(None),
                    Some(v) if is_nullish(Some(&v)) => Ok(Some(Cow::Owned(Bson::Null))),
                    Some(Cow::Borrowed(Bson::Document(d))) => Ok(d.get(&field).map(Cow::Borrowed)),
                    Some(Cow::Owned(Bson::Document(mut d))) => Ok(d.remove(&field).map(Cow::Owned)),
                    Some(_) => Ok(None),
                }
            }
            ObjectOp::SetField {
                field,
                input,
                value,
            } => {
                let mut out = match input.eval(env)? {
                    v if is_nullish(v.as_deref()) => return Ok(Some(Cow::Owned(Bson::Null))),
                    Some(Cow::Owned(Bson::Document(d))) => d,
                    Some(Cow::Borrowed(Bson::Document(d))) => d.clone(),
                    _ => {
                        let name = if value.is_some() {
                            "$setField"
                        } else {
                            "$unsetField"
                        };
                        return Err(Error::location(
                            4161105,
                            format!("{name} requires 'input' to evaluate to type Object"),
                        ));
                    }
                };
                match value {
                    Some(e) => match e.eval_owned(env)? {
                        Some(v) => {
                            out.insert(field.clone(), v);
                        }
                        None => {
                            out.remove(field);
                        }
                    },
                    None => {
                        out.remove(field);
                    }
                }
                Ok(Some(Cow::Owned(Bson::Document(out))))
            }
            ObjectOp::ObjectToArray(arg) => {
                let v = arg[0].eval(env)?;
                match v.as_deref() {
                    v if is_nullish(v) => Ok(Some(Cow::Owned(Bson::Null))),
                    Some(Bson::Document(d)) => Ok(Some(Cow::Owned(Bson::Array(
                        d.iter()
                            .map(|(k, v)| Bson::Document(doc! {"k": k.clone(), "v": v.clone()}))
                            .collect(),
                    )))),
                    other => Err(Error::location(
                        40390,
                        format!(
                            "$objectToArray requires a document input, found: {}",
                            type_name(other)
                        ),
                    )),
                }
            }
            ObjectOp::ArrayToObject(arg) => {
                let v = arg[0].eval(env)?;
                match v.as_deref() {
                    v if is_nullish(v) => Ok(Some(Cow::Owned(Bson::Null))),
                    Some(Bson::Array(items)) => {
                        Ok(Some(Cow::Owned(Bson::Document(array_to_object(items)?))))
                    }
                    other => Err(Error::location(
                        40386,
                        format!(
                            "$arrayToObject requires an array input, found: {}",
                            type_name(other)
                        ),
                    )),
                }
            }
        }
    }
}

/// Adds the fields of `value` to `out` (later fields win), as `$mergeObjects` does;
/// null and missing add nothing, any other value that is not a document fails with
/// `code` (40400 for the expression, 5911200 for the accumulator). Returns the bytes of
/// memory `out` grew by.
pub(crate) fn merge_into(out: &mut Document, value: Option<&Bson>, code: i32) -> Result<isize> {
    match value {
        v if is_nullish(v) => Ok(0),
        Some(Bson::Document(d)) => {
            let mut grown = 0;
            for (k, v) in d {
                grown += (k.len() + value_memory_bytes(v)) as isize;
                if let Some(old) = out.insert(k.clone(), v.clone()) {
                    grown -= (k.len() + value_memory_bytes(&old)) as isize;
                }
            }
            Ok(grown)
        }
        Some(other) => Err(Error::location(
            code,
            format!(
                "$mergeObjects requires object inputs, but input {} is of type {}",
                display(other),
                type_name(Some(other))
            ),
        )),
        None => unreachable!("nullish covers missing"),
    }
}

fn parse_get_field(args: &Bson, ctx: &ParseContext) -> Result<ObjectOp> {
    let (field, input) = match args {
        Bson::Document(doc) if doc.keys().next().is_none_or(|k| !k.starts_with('$')) => {
            let (mut field, mut input) = (None, None);
            for (key, value) in doc {
                match key.as_str() {
                    "field" => field = Some(value),
                    "input" => input = Some(Box::new(Expression::parse(value, ctx)?)),
                    _ => {
                        return Err(Error::location(
                            3041701,
                            format!("$getField found an unknown argument: {key}"),
                        ))
                    }
                }
            }
            let field = field.ok_or_else(|| {
                Error::location(3041702, "$getField requires 'field' to be specified")
            })?;
            let input = input.ok_or_else(|| {
                Error::location(3041703, "$getField requires 'input' to be specified")
            })?;
            (field, Some(input))
        }
        other => (other, None),
    };
    let field = Box::new(Expression::parse(field, ctx)?);
    Ok(ObjectOp::GetField { field, input })
}

/// The field name argument of `$setField`/`$unsetField`: an expression that must be a
/// constant string. `codes` are the operator's error codes for a non-string
/// and for a non-constant.
fn constant_field_name(
    name: &str,
    spec: &Bson,
    ctx: &ParseContext,
    codes: [i32; 2],
) -> Result<String> {
    match Expression::parse(spec, ctx)?.as_constant() {
        Some(Bson::String(s)) => Ok(s.clone()),
        Some(other) => Err(Error::location(
            codes[0],
            format!(
                "{name} requires 'field' to evaluate to type String, but got {}",
                type_name(Some(other))
            ),
        )),
        None => Err(Error::location(
            codes[1],
            format!(
                "{name} requires 'field' to evaluate to a constant, but got a non-constant argument"
            ),
        )),
    }
}

/// Parses `{$setField: {field, input, value}}` or `{$unsetField: {field, input}}`.
fn parse_set_field(name: &str, args: &Bson, ctx: &ParseContext) -> Result<ObjectOp> {
    let Bson::Document(doc) = args else {
        return Err(Error::location(
            4161100,
            format!("{name} only supports an object as its argument"),
        ));
    };
    let is_set = name == "$setField";
    let (mut field, mut input, mut value) = (None, None, None);
    for (key, arg) in doc {
        match key.as_str() {
            "field" => field = Some(arg),
            "input" => input = Some(Box::new(Expression::parse(arg, ctx)?)),
            "value" if is_set => value = Some(Box::new(Expression::parse(arg, ctx)?)),
            _ => {
                return Err(Error::location(
                    4161101,
                    format!("{name} found an unknown argument: {key}"),
                ))
            }
        }
    }
    let field = field.ok_or_else(|| {
        Error::location(4161102, format!("{name} requires 'field' to be specified"))
    })?;
    if is_set && value.is_none() {
        return Err(Error::location(
            4161103,
            "$setField requires 'value' to be specified",
        ));
    }
    let input = input.ok_or_else(|| {
        Error::location(4161109, format!("{name} requires 'input' to be specified"))
    })?;
    // A bare "$a" would be read as a path; MongoDB points at the `$literal` it needs.
    if let Bson::String(path) = field {
        if path.starts_with('$') {
            return Err(Error::location(
                4161108,
                format!(
                    "'{path}' is a field path reference which is not allowed in this context. \
                     Did you mean {{$literal: '{path}'}}?"
                ),
            ));
        }
    }
    let field = constant_field_name(name, field, ctx, [4161107, 4161106])?;
    Ok(ObjectOp::SetField {
        field,
        input,
        value,
    })
}

fn array_to_object(items: &[Bson]) -> Result<Document> {
    let mut out = Document::new();
    let mut pairs_format = None;
    for item in items {
        let (key, value) = match item {
            Bson::Array(pair) => {
                if pairs_format == Some(false) {
                    return Err(inconsistent());
                }
                pairs_format = Some(true);
                if pair.len() != 2 {
                    return Err(Error::location(
                        40397,
                        format!("$arrayToObject requires an array of size 2 arrays,found array of size: {}", pair.len()),
                    ));
                }
                let Bson::String(k) = &pair[0] else {
                    return Err(Error::location(
                        40395,
                        format!(
                            "$arrayToObject requires an array of key-value pairs, where the key must be of type string. Found key type: {}",
                            type_name(Some(&pair[0]))
                        ),
                    ));
                };
                (k, &pair[1])
            }
            Bson::Document(d) => {
                if pairs_format == Some(true) {
                    return Err(inconsistent());
                }
                pairs_format = Some(false);
                if d.len() != 2 {
                    return Err(Error::location(
                        40392,
                        format!("$arrayToObject requires an object keys of 'k' and 'v'. Found incorrect number of keys:{}", d.len()),
                    ));
                }
                let (Some(k), Some(v)) = (d.get("k"), d.get("v")) else {
                    return Err(Error::location(
                        40393,
                        format!("$arrayToObject requires an object with keys 'k' and 'v'. Missing either or both keys from: {d}"),
                    ));
                };
                let Bson::String(k) = k else {
                    return Err(Error::location(
                        40394,
                        format!(
                            "$arrayToObject requires an object with keys 'k' and 'v', where the value of 'k' must be of type string. Found type: {}",
                            type_name(Some(k))
                        ),
                    ));
                };
                (k, v)
            }
            other => {
                return Err(Error::location(
                    40398,
                    format!(
                        "Unrecognised input type format for $arrayToObject: {}",
                        type_name(Some(other))
                    ),
                ))
            }
        };
        if key.contains('\0') {
            return Err(Error::location(
                4940400,
                "Key field cannot contain an embedded null byte",
            ));
        }
        out.insert(key.clone(), value.clone());
    }
    Ok(out)
}

fn inconsistent() -> Error {
    Error::location(
        40391,
        "$arrayToObject requires a consistent input format. Elements must all be arrays or all be objects.",
    )
}

#[cfg(test)]
mod tests {
    use crate::expression::test_util::*;
    use bson::{bson, Bson};

    #[test]
    fn merge_objects() {
        assert_eq!(
            value(bson!({"$mergeObjects": ["$o", {"a": 9}, "$nope", null]})),
            bson!({"a": 9, "b": {"c": 2}})
        );
        assert_eq!(value(bson!({"$mergeObjects": []})), bson!({}));
        assert_eq!(error_code(bson!({"$mergeObjects": ["$o", 1]})), 40400);
    }

    #[test]
    fn get_field() {
        assert_eq!(value(bson!({"$getField": "i"})), bson!(5));
        assert_eq!(
            value(bson!({"$getField": {"field": "a", "input": "$o"}})),
            bson!(1)
        );
        assert_eq!(
            value(bson!({"$getField": {"field": "a.b", "input": {"$literal": {"a.b": 3}}}})),
            bson!(3)
        );
        assert_eq!(
            value(bson!({"$getField": {"field": "a", "input": null}})),
            Bson::Null
        );
        assert_eq!(
            eval(bson!({"$getField": {"field": "zz", "input": "$o"}})).unwrap(),
            None
        );
        assert_eq!(
            eval(bson!({"$getField": {"field": "a", "input": "$nope"}})).unwrap(),
            None
        );
        // MongoDB 8.0: what is not an object has no fields; the field is any
        // expression giving a string.
        assert_eq!(
            eval(bson!({"$getField": {"field": "a", "input": 1}})).unwrap(),
            None
        );
        assert_eq!(
            value(bson!({"$getField": {"field": {"$concat": ["", "a"]}, "input": "$o"}})),
            bson!(1)
        );
        assert_eq!(
            error_code(bson!({"$getField": {"field": 1, "input": "$o"}})),
            3041704
        );
        assert_eq!(error_code(bson!({"$getField": null})), 3041704);
        assert_eq!(error_code(bson!({"$getField": {"field": "a"}})), 3041703);
        assert_eq!(error_code(bson!({"$getField": {"input": {}}})), 3041702);
        assert_eq!(error_code(bson!({"$getField": {}})), 3041702);
    }

    #[test]
    fn set_and_unset_field() {
        assert_eq!(
            value(bson!({"$setField": {"field": {"$literal": "$a"}, "value": 1, "input": "$o"}})),
            bson!({"a": 1, "b": {"c": 2}, "$a": 1})
        );
        assert_eq!(
            value(bson!({"$setField": {"field": "a.b", "value": "$i", "input": {}}})),
            bson!({"a.b": 5})
        );
        assert_eq!(
            value(bson!({"$setField": {"field": "a", "value": 9, "input": "$o"}})),
            bson!({"a": 9, "b": {"c": 2}})
        );
        assert_eq!(
            value(bson!({"$setField": {"field": "a", "value": "$$REMOVE", "input": "$o"}})),
            bson!({"b": {"c": 2}})
        );
        assert_eq!(
            value(bson!({"$unsetField": {"field": "b", "input": "$o"}})),
            bson!({"a": 1})
        );
        assert_eq!(
            value(bson!({"$setField": {"field": "a", "value": 1, "input": "$nope"}})),
            Bson::Null
        );
        let code = |spec| error_code(spec);
        assert_eq!(code(bson!({"$setField": 1})), 4161100);
        assert_eq!(code(bson!({"$setField": {"field": "a", "x": 1}})), 4161101);
        assert_eq!(
            code(bson!({"$setField": {"input": {}, "value": 1}})),
            4161102
        );
        assert_eq!(
            code(bson!({"$setField": {"field": "a", "input": {}}})),
            4161103
        );
        assert_eq!(
            code(bson!({"$setField": {"field": "a", "value": 1}})),
            4161109
        );
        assert_eq!(
            code(bson!({"$setField": {"field": {"$concat": ["$s"]}, "input": {}, "value": 1}})),
            4161106
        );
        assert_eq!(
            code(bson!({"$setField": {"field": 1, "input": {}, "value": 1}})),
            4161107
        );
        assert_eq!(
            code(bson!({"$setField": {"field": "$a", "input": {}, "value": 1}})),
            4161108
        );
        assert_eq!(
            code(bson!({"$setField": {"field": "a", "input": 1, "value": 1}})),
            4161105
        );
        assert_eq!(
            code(bson!({"$unsetField": {"field": "a", "input": {}, "value": 1}})),
            4161101
        );
    }

    #[test]
    fn object_array_round_trip() {
        assert_eq!(
            value(bson!({"$objectToArray": "$o"})),
            bson!([{"k": "a", "v": 1}, {"k": "b", "v": {"c": 2}}])
        );
        assert_eq!(value(bson!({"$objectToArray": "$nope"})), Bson::Null);
        assert_eq!(error_code(bson!({"$objectToArray": 1})), 40390);
        assert_eq!(
            value(bson!({"$arrayToObject": [[["a", 1], ["b", 2], ["a", 3]]]})),
            bson!({"a": 3, "b": 2})
        );
        assert_eq!(
            value(bson!({"$arrayToObject": [[{"k": "a", "v": 1}]]})),
            bson!({"a": 1})
        );
        assert_eq!(
            value(bson!({"$arrayToObject": {"$objectToArray": "$o"}})),
            value(bson!("$o"))
        );
        assert_eq!(error_code(bson!({"$arrayToObject": [[["a"]]]})), 40397);
        assert_eq!(error_code(bson!({"$arrayToObject": [[[1, 1]]]})), 40395);
        assert_eq!(error_code(bson!({"$arrayToObject": [[{"k": "a"}]]})), 40392);
        assert_eq!(
            error_code(bson!({"$arrayToObject": [[{"k": "a", "x": 1}]]})),
            40393
        );
        assert_eq!(
            error_code(bson!({"$arrayToObject": [[{"k": 1, "v": 1}]]})),
            40394
        );
        assert_eq!(
            error_code(bson!({"$arrayToObject": [[["a", 1], {"k": "b", "v": 1}]]})),
            40391
        );
        assert_eq!(error_code(bson!({"$arrayToObject": [[1]]})), 40398);
        assert_eq!(error_code(bson!({"$arrayToObject": 1})), 40386);
    }
}
