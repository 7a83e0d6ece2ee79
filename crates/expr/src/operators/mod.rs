//! Expression operators, one file per family as MongoDB's manual groups them. Each family
//! parses the operator names it owns and evaluates its own nodes; this module only tries
//! the families in turn and dispatches evaluation.

pub(crate) mod arithmetic;
pub(crate) mod array;
pub(crate) mod bitwise;
pub mod boolean;
pub(crate) mod comparison;
pub(crate) mod conditional;
pub(crate) mod data_size;
pub(crate) mod date;
pub(crate) mod function;
pub(crate) mod group;
pub(crate) mod miscellaneous;
pub(crate) mod object;
pub(crate) mod set;
pub(crate) mod string;
pub(crate) mod trigonometry;
pub(crate) mod type_conversion;
pub(crate) mod variable;

use crate::context::ParseContext;
use crate::env::{Env, Value};
use basalt_error::{Error, ErrorCode, Result};
use bson::Bson;

#[derive(Debug)]
pub(crate) enum Operator {
    Arithmetic(arithmetic::Arithmetic),
    Array(array::ArrayOp),
    Bitwise(bitwise::Bitwise),
    Boolean(boolean::Boolean),
    Comparison(comparison::Comparison),
    Conditional(conditional::Conditional),
    DataSize(data_size::DataSize),
    Date(date::DateOp),
    Function(function::FunctionOp),
    Group(group::GroupOp),
    Let(variable::Let),
    Miscellaneous(miscellaneous::Miscellaneous),
    Object(object::ObjectOp),
    Set(set::SetOp),
    String(string::StringOp),
    Trigonometry(trigonometry::Trigonometry),
    Type(type_conversion::TypeOp),
}

impl Operator {
    pub(crate) fn parse(name: &str, args: &Bson, ctx: &ParseContext) -> Result<Operator> {
        if let Some(op) = arithmetic::Arithmetic::parse(name, args, ctx)? {
            return Ok(Operator::Arithmetic(op));
        }
        if let Some(op) = comparison::Comparison::parse(name, args, ctx)? {
            return Ok(Operator::Comparison(op));
        }
        if let Some(op) = boolean::Boolean::parse(name, args, ctx)? {
            return Ok(Operator::Boolean(op));
        }
        if let Some(op) = conditional::Conditional::parse(name, args, ctx)? {
            return Ok(Operator::Conditional(op));
        }
        if let Some(op) = type_conversion::TypeOp::parse(name, args, ctx)? {
            return Ok(Operator::Type(op));
        }
        if let Some(op) = string::StringOp::parse(name, args, ctx)? {
            return Ok(Operator::String(op));
        }
        if let Some(op) = array::ArrayOp::parse(name, args, ctx)? {
            return Ok(Operator::Array(op));
        }
        if let Some(op) = object::ObjectOp::parse(name, args, ctx)? {
            return Ok(Operator::Object(op));
        }
        if let Some(op) = set::SetOp::parse(name, args, ctx)? {
            return Ok(Operator::Set(op));
        }
        if let Some(op) = date::DateOp::parse(name, args, ctx)? {
            return Ok(Operator::Date(op));
        }
        if let Some(op) = group::GroupOp::parse(name, args, ctx)? {
            return Ok(Operator::Group(op));
        }
        if let Some(op) = variable::Let::parse(name, args, ctx)? {
            return Ok(Operator::Let(op));
        }
        if let Some(op) = function::FunctionOp::parse(name, args, ctx)? {
            return Ok(Operator::Function(op));
        }
        if let Some(op) = trigonometry::Trigonometry::parse(name, args, ctx)? {
            return Ok(Operator::Trigonometry(op));
        }
        if let Some(op) = bitwise::Bitwise::parse(name, args, ctx)? {
            return Ok(Operator::Bitwise(op));
        }
        if let Some(op) = data_size::DataSize::parse(name, args, ctx)? {
            return Ok(Operator::DataSize(op));
        }
        if let Some(op) = miscellaneous::Miscellaneous::parse(name, args)? {
            return Ok(Operator::Miscellaneous(op));
        }
        Err(Error::new(
            ErrorCode::INVALID_PIPELINE_OPERATOR,
            format!("Unrecognized expression '{name}'"),
        ))
    }

    pub(crate) fn eval<'a>(&'a self, env: &Env<'a>) -> Result<Value<'a>> {
        match self {
            Operator::Arithmetic(op) => op.eval(env),
            Operator::Array(op) => op.eval(env),
            Operator::Bitwise(op) => op.eval(env),
            Operator::Boolean(op) => op.eval(env),
            Operator::Comparison(op) => op.eval(env),
            Operator::Conditional(op) => op.eval(env),
            Operator::DataSize(op) => op.eval(env),
            Operator::Date(op) => op.eval(env),
            Operator::Function(op) => op.eval(env),
            Operator::Group(op) => op.eval(env),
            Operator::Let(op) => op.eval(env),
            Operator::Miscellaneous(op) => op.eval(env),
            Operator::Object(op) => op.eval(env),
            Operator::Set(op) => op.eval(env),
            Operator::String(op) => op.eval(env),
            Operator::Trigonometry(op) => op.eval(env),
            Operator::Type(op) => op.eval(env),
        }
    }
}
