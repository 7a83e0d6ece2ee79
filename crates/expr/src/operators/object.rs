//! Object expression operators: `$mergeObjects $getField $objectToArray $arrayToObject`.

use crate::context::ParseContext;
use crate::env::{Env, Value};
use crate::expression::{is_nullish, parse_fixed, parse_operands, type_name, Expression};
use crate::numeric::display;
use basalt_error::{Error, Result};
use bson::{doc, Bson, Document};
use std::borrow::Cow;

#[derive(Debug)]
pub(crate) enum ObjectOp {
    MergeObjects(Vec<Expression>),
    GetField {
        field: String,
        input: Option<Box<Expression>>,
    },
    ObjectToArray(Box<[Expression; 1]>),
    ArrayToObject(Box<[Expression; 1]>),
}

impl ObjectOp {
    pub(crate) fn parse(name: &str, args: &Bson, ctx: &ParseContext) -> Result<Option<ObjectOp>> {
        Ok(Some(match name {
            "$mergeObjects" => ObjectOp::MergeObjects(parse_operands(args, ctx)?),
            "$getField" => parse_get_field(args, ctx)?,
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
                    merge_into(&mut out, arg.eval(env)?.as_deref())?;
                }
                Ok(Some(Cow::Owned(Bson::Document(out))))
            }
            ObjectOp::GetField { field, input } => {
                let input = match input {
                    Some(e) => e.eval(env)?,
                    None => return Ok(env.root.get(field).map(Cow::Borrowed)),
                };
                match input {
                    None => Ok(None),
                    Some(v) if is_nullish(Some(&v)) => Ok(Some(Cow::Owned(Bson::Null))),
                    Some(Cow::Borrowed(Bson::Document(d))) => Ok(d.get(field).map(Cow::Borrowed)),
                    Some(Cow::Owned(Bson::Document(mut d))) => Ok(d.remove(field).map(Cow::Owned)),
                    Some(other) => Err(Error::location(
                        3041705,
                        format!(
                            "$getField requires 'input' to evaluate to type Object, but got {}",
                            type_name(Some(&other))
                        ),
                    )),
                }
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
/// null and missing add nothing.
pub(crate) fn merge_into(out: &mut Document, value: Option<&Bson>) -> Result<()> {
    match value {
        v if is_nullish(v) => Ok(()),
        Some(Bson::Document(d)) => {
            for (k, v) in d {
                out.insert(k.clone(), v.clone());
            }
            Ok(())
        }
        Some(other) => Err(Error::location(
            40400,
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
        Bson::Document(doc) if doc.keys().next().is_some_and(|k| !k.starts_with('$')) => {
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
            (field, input)
        }
        other => (other, None),
    };
    let field = Expression::parse(field, ctx)?;
    let field = match field.as_constant() {
        Some(Bson::String(s)) => s.clone(),
        Some(other) => {
            return Err(Error::location(
                5654601,
                format!(
                    "$getField requires 'field' to evaluate to type String, but got {}",
                    type_name(Some(other))
                ),
            ))
        }
        None => return Err(Error::location(
            5654602,
            "$getField requires 'field' to evaluate to a constant, but got a non-constant argument",
        )),
    };
    Ok(ObjectOp::GetField { field, input })
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
        assert_eq!(
            error_code(bson!({"$getField": {"field": "a", "input": 1}})),
            3041705
        );
        assert_eq!(error_code(bson!({"$getField": {"field": 1}})), 5654601);
        assert_eq!(error_code(bson!({"$getField": {"field": "$x"}})), 5654602);
        assert_eq!(error_code(bson!({"$getField": {"input": {}}})), 3041702);
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
