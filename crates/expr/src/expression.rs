//! The expression tree: parsing from BSON and evaluation against one document.
//!
//! Parsing resolves everything that does not depend on the document (operator names,
//! argument counts, variable slots, literal sub-trees), so evaluation is a walk over the
//! tree with no string lookups but the field names themselves.

use crate::context::{ParseContext, Variables};
use crate::env::{Env, Value};
use crate::field_path::FieldPath;
use crate::limits::{ArrayBuilder, BuiltMemory};
use crate::operators::Operator;
use basalt_error::{Error, Result};
use basalt_value::value_memory_bytes;
use bson::{Bson, Document};
use std::borrow::Cow;

/// A parsed aggregation expression.
#[derive(Debug)]
pub struct Expression(pub(crate) Node);

#[derive(Debug)]
pub(crate) enum Node {
    Constant(Bson),
    FieldPath(FieldPath),
    /// `[a, b]` whose elements are not all constants.
    Array(Vec<Expression>),
    /// `{a: <expr>, b: <expr>}` whose values are not all constants.
    Object(Vec<(String, Expression)>),
    Operator(Box<Operator>),
}

/// A constant of an expression: as in mongod, which makes a value of it, a string of
/// 16 MB or more is refused (16493).
fn checked_constant(value: &Bson) -> Result<Bson> {
    if let Bson::String(s) = value {
        crate::limits::check_string_size(s.len())?;
    }
    Ok(value.clone())
}

impl Expression {
    /// Parses an expression: a constant, a `$field.path`, a `$$variable`, an array or
    /// object of expressions, or an operator object `{$op: args}`.
    pub fn parse(spec: &Bson, ctx: &ParseContext) -> Result<Expression> {
        let node = match spec {
            Bson::String(s) if s.starts_with('$') => Node::FieldPath(FieldPath::parse(s, ctx)?),
            Bson::Array(items) => {
                let items = items
                    .iter()
                    .map(|item| Expression::parse(item, ctx))
                    .collect::<Result<Vec<_>>>()?;
                if items.iter().all(|e| e.as_constant().is_some()) {
                    Node::Constant(Bson::Array(
                        items.into_iter().map(Expression::into_constant).collect(),
                    ))
                } else {
                    Node::Array(items)
                }
            }
            Bson::Document(doc) => return Expression::parse_document(doc, ctx),
            other => Node::Constant(checked_constant(other)?),
        };
        Ok(Expression(node))
    }

    /// Parses an object: an operator if its first field starts with `$`, otherwise an
    /// object whose fields are expressions.
    pub fn parse_document(doc: &Document, ctx: &ParseContext) -> Result<Expression> {
        let Some((first, args)) = doc.iter().next() else {
            return Ok(Expression(Node::Constant(Bson::Document(Document::new()))));
        };
        if first.starts_with('$') {
            if doc.len() != 1 {
                return Err(Error::location(
                    15983,
                    format!(
                        "an expression specification must contain exactly one field, the name of the expression. Found {} fields in {}",
                        doc.len(),
                        doc
                    ),
                ));
            }
            // `$const` is MongoDB's older name of `$literal`, still accepted.
            if first == "$literal" || first == "$const" {
                return Ok(Expression(Node::Constant(checked_constant(args)?)));
            }
            return Ok(Expression(Node::Operator(Box::new(Operator::parse(
                first, args, ctx,
            )?))));
        }
        let mut fields = Vec::with_capacity(doc.len());
        for (name, value) in doc {
            if name.starts_with('$') {
                return Err(Error::location(
                    16404,
                    format!("Field names may not start with '$', found '{name}' in {doc}"),
                ));
            }
            if name.contains('.') {
                return Err(Error::location(
                    16412,
                    format!("FieldPath field names may not contain '.'. Field name: '{name}'"),
                ));
            }
            fields.push((name.clone(), Expression::parse(value, ctx)?));
        }
        if fields.iter().all(|(_, e)| e.as_constant().is_some()) {
            let doc = fields
                .into_iter()
                .map(|(name, e)| (name, e.into_constant()))
                .collect();
            return Ok(Expression(Node::Constant(Bson::Document(doc))));
        }
        Ok(Expression(Node::Object(fields)))
    }

    /// An expression that always yields `value` (as `$literal` does).
    pub fn constant(value: Bson) -> Expression {
        Expression(Node::Constant(value))
    }

    /// The value of this expression when it does not depend on the document.
    pub fn as_constant(&self) -> Option<&Bson> {
        match &self.0 {
            Node::Constant(v) => Some(v),
            _ => None,
        }
    }

    fn into_constant(self) -> Bson {
        match self.0 {
            Node::Constant(v) => v,
            _ => unreachable!("checked by the caller"),
        }
    }

    /// The field path this expression reads when it is just `$a.b` (without variables),
    /// so callers can read the field without evaluating.
    pub fn as_field_path(&self) -> Option<&[String]> {
        match &self.0 {
            Node::FieldPath(fp) if fp.base == crate::field_path::Base::Root => Some(&fp.path),
            _ => None,
        }
    }

    /// Evaluates against `root`; `None` means the result is missing.
    pub fn evaluate(&self, root: &Document, vars: &Variables) -> Result<Option<Bson>> {
        Ok(self.evaluate_ref(root, vars)?.map(Cow::into_owned))
    }

    /// Evaluates against `root`, borrowing from the document or the expression where it
    /// can.
    pub fn evaluate_ref<'a>(
        &'a self,
        root: &'a Document,
        vars: &'a Variables,
    ) -> Result<Value<'a>> {
        self.eval(&Env::new(root, vars))
    }

    pub(crate) fn eval<'a>(&'a self, env: &Env<'a>) -> Result<Value<'a>> {
        match &self.0 {
            Node::Constant(v) => Ok(Some(Cow::Borrowed(v))),
            Node::FieldPath(fp) => Ok(fp.eval(env)),
            Node::Array(items) => {
                let mut out = ArrayBuilder::with_capacity("an array expression", items.len());
                for item in items {
                    // A missing element cannot be stored in an array: it becomes null.
                    out.push(item.eval(env)?.map_or(Bson::Null, Cow::into_owned))?;
                }
                Ok(Some(Cow::Owned(out.finish())))
            }
            Node::Object(fields) => {
                // Counted as it grows: `{a: "$$value", b: "$$value"}` in a `$reduce`
                // doubles a value at every step.
                let mut memory = BuiltMemory::new("an object expression");
                let mut out = Document::new();
                for (name, e) in fields {
                    if let Some(v) = e.eval(env)? {
                        memory.add(name.len() + value_memory_bytes(&v))?;
                        out.insert(name.clone(), v.into_owned());
                    }
                }
                Ok(Some(Cow::Owned(Bson::Document(out))))
            }
            Node::Operator(op) => op.eval(env),
        }
    }

    /// Evaluates to an owned value, for operators that build new values.
    pub(crate) fn eval_owned(&self, env: &Env<'_>) -> Result<Option<Bson>> {
        Ok(self.eval(env)?.map(Cow::into_owned))
    }
}

/// MongoDB's name of a value's type, as `$type` returns it and error messages print it
/// ("missing" for a missing value).
pub fn type_name(value: Option<&Bson>) -> &'static str {
    value.map_or("missing", basalt_value::display::type_name)
}

/// Missing, null and undefined: the values most operators pass through as null.
pub(crate) fn is_nullish(value: Option<&Bson>) -> bool {
    matches!(value, None | Some(Bson::Null | Bson::Undefined))
}

/// Parses an operator's arguments: an array is the argument list, anything else is the
/// single argument.
pub(crate) fn parse_operands(args: &Bson, ctx: &ParseContext) -> Result<Vec<Expression>> {
    match args {
        Bson::Array(items) => items.iter().map(|a| Expression::parse(a, ctx)).collect(),
        other => Ok(vec![Expression::parse(other, ctx)?]),
    }
}

/// Parses exactly `N` arguments of operator `name`.
pub(crate) fn parse_fixed<const N: usize>(
    name: &str,
    args: &Bson,
    ctx: &ParseContext,
) -> Result<Box<[Expression; N]>> {
    let operands = parse_operands(args, ctx)?;
    let count = operands.len();
    let operands: Box<[Expression; N]> = operands.into_boxed_slice().try_into().map_err(|_| {
        Error::location(
            16020,
            format!("Expression {name} takes exactly {N} arguments. {count} were passed in."),
        )
    })?;
    Ok(operands)
}

/// Parses between `min` and `max` arguments of operator `name`.
pub(crate) fn parse_ranged(
    name: &str,
    args: &Bson,
    ctx: &ParseContext,
    min: usize,
    max: usize,
) -> Result<Vec<Expression>> {
    let operands = parse_operands(args, ctx)?;
    if operands.len() < min || operands.len() > max {
        return Err(Error::location(
            28667,
            format!(
                "Expression {name} takes at least {min} arguments, and at most {max}, but {} were passed in.",
                operands.len()
            ),
        ));
    }
    Ok(operands)
}

#[cfg(test)]
pub(crate) mod test_util {
    use super::*;
    use bson::doc;

    /// Evaluates `spec` against `root`.
    pub fn eval_in(spec: Bson, root: &Document) -> Result<Option<Bson>> {
        let e = Expression::parse(&spec, &ParseContext::new())?;
        e.evaluate(root, &Variables::new())
    }

    /// Evaluates `spec` against a fixed sample document.
    pub fn eval(spec: Bson) -> Result<Option<Bson>> {
        eval_in(spec, &sample())
    }

    /// Evaluates `spec`, expecting a present value.
    pub fn value(spec: Bson) -> Bson {
        match eval(spec.clone()) {
            Ok(Some(v)) => v,
            other => panic!("{spec} gave {other:?}"),
        }
    }

    /// Evaluates `spec`, expecting an error, and returns its code.
    pub fn error_code(spec: Bson) -> i32 {
        match eval(spec.clone()) {
            Err(e) => e.code.0,
            Ok(v) => panic!("{spec} gave {v:?}, expected an error"),
        }
    }

    /// Evaluates `spec`, expecting an error, and returns its message.
    pub fn error_message(spec: Bson) -> String {
        match eval(spec.clone()) {
            Err(e) => e.message,
            Ok(v) => panic!("{spec} gave {v:?}, expected an error"),
        }
    }

    pub fn sample() -> Document {
        doc! {
            "i": 5, "l": 7_i64, "d": 2.5, "s": "héllo", "n": null, "t": true,
            "arr": [1, 2, 3], "docs": [{"x": 1}, {"x": 2}], "o": {"a": 1, "b": {"c": 2}},
            "big": i32::MAX, "neg": -3,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_util::*;
    use super::*;
    use bson::{bson, doc};

    #[test]
    fn constants_paths_arrays_and_objects() {
        assert_eq!(value(bson!(1)), bson!(1));
        assert_eq!(value(bson!("plain")), bson!("plain"));
        assert_eq!(value(bson!("$o.b.c")), bson!(2));
        assert_eq!(eval(bson!("$nope")).unwrap(), None);
        assert_eq!(value(bson!(["$i", "$nope", 1])), bson!([5, null, 1]));
        assert_eq!(value(bson!({"a": "$i", "b": "$nope"})), bson!({"a": 5}));
        assert_eq!(value(bson!({})), bson!({}));
        assert_eq!(
            value(bson!({"a": [1, {"b": 2}]})),
            bson!({"a": [1, {"b": 2}]})
        );
        assert_eq!(value(bson!({"$literal": "$i"})), bson!("$i"));
        assert_eq!(value(bson!({"$const": "$i"})), bson!("$i"));
        assert_eq!(value(bson!({"$literal": {"$add": 1}})), bson!({"$add": 1}));
    }

    #[test]
    fn constant_subtrees_are_folded() {
        let e = Expression::parse(&bson!({"a": [1, 2], "b": "x"}), &ParseContext::new()).unwrap();
        assert_eq!(e.as_constant(), Some(&bson!({"a": [1, 2], "b": "x"})));
        let e = Expression::parse(&bson!("$a.b"), &ParseContext::new()).unwrap();
        assert_eq!(
            e.as_field_path(),
            Some(&["a".to_string(), "b".to_string()][..])
        );
    }

    #[test]
    fn malformed_objects_are_rejected() {
        assert_eq!(error_code(bson!({"$foo": 1})), 168);
        assert_eq!(
            error_message(bson!({"$foo": 1})),
            "Unrecognized expression '$foo'"
        );
        assert_eq!(error_code(bson!({"$add": [1], "x": 1})), 15983);
        assert_eq!(error_code(bson!({"a": 1, "$add": [1]})), 16404);
        assert_eq!(error_code(bson!({"a.b": 1})), 16412);
        let root = doc! {};
        assert!(eval_in(bson!({"a": "$x"}), &root).unwrap() == Some(bson!({})));
    }

    #[test]
    fn type_names() {
        assert_eq!(type_name(None), "missing");
        assert_eq!(type_name(Some(&bson!(1_i64))), "long");
        assert_eq!(type_name(Some(&bson!({}))), "object");
    }
}
