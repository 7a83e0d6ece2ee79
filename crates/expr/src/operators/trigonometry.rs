//! Trigonometry expression operators: `$sin $cos $tan $asin $acos $atan $atan2 $sinh
//! $cosh $tanh $asinh $acosh $atanh $degreesToRadians $radiansToDegrees`.
//!
//! As in MongoDB: null or missing gives null, NaN gives NaN; an int, long or double
//! gives a double, a decimal a decimal (computed through a double, as mongod's
//! `Decimal128` functions round to one); a value outside the function's domain is an
//! error (50989), as is a non-number (28765; 51044 for `$atan2`).

use crate::context::ParseContext;
use crate::env::{Env, Value};
use crate::expression::{is_nullish, parse_fixed, type_name, Expression};
use crate::numeric::{decimal_from_f64, number};
use basalt_error::{Error, Result};
use basalt_value::Number;
use bson::Bson;
use std::borrow::Cow;

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Function {
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Tanh,
    Asinh,
    Acosh,
    Atanh,
    DegreesToRadians,
    RadiansToDegrees,
}

/// A function's domain: where it is defined, as mongod words it in its error.
enum Domain {
    All,
    /// Finite values only.
    Finite,
    /// [-1, 1].
    UnitInterval,
    /// [1, inf).
    AtLeastOne,
}

impl Function {
    const ALL: [(&'static str, Function); 14] = [
        ("$sin", Function::Sin),
        ("$cos", Function::Cos),
        ("$tan", Function::Tan),
        ("$asin", Function::Asin),
        ("$acos", Function::Acos),
        ("$atan", Function::Atan),
        ("$sinh", Function::Sinh),
        ("$cosh", Function::Cosh),
        ("$tanh", Function::Tanh),
        ("$asinh", Function::Asinh),
        ("$acosh", Function::Acosh),
        ("$atanh", Function::Atanh),
        ("$degreesToRadians", Function::DegreesToRadians),
        ("$radiansToDegrees", Function::RadiansToDegrees),
    ];

    fn name(self) -> &'static str {
        Function::ALL
            .iter()
            .find(|(_, f)| *f == self)
            .map_or("", |(name, _)| name)
    }

    fn domain(self) -> Domain {
        match self {
            Function::Sin | Function::Cos | Function::Tan => Domain::Finite,
            Function::Asin | Function::Acos | Function::Atanh => Domain::UnitInterval,
            Function::Acosh => Domain::AtLeastOne,
            _ => Domain::All,
        }
    }

    fn apply(self, x: f64) -> f64 {
        match self {
            Function::Sin => x.sin(),
            Function::Cos => x.cos(),
            Function::Tan => x.tan(),
            Function::Asin => x.asin(),
            Function::Acos => x.acos(),
            Function::Atan => x.atan(),
            Function::Sinh => x.sinh(),
            Function::Cosh => x.cosh(),
            Function::Tanh => x.tanh(),
            Function::Asinh => x.asinh(),
            Function::Acosh => x.acosh(),
            Function::Atanh => x.atanh(),
            Function::DegreesToRadians => x.to_radians(),
            Function::RadiansToDegrees => x.to_degrees(),
        }
    }
}

#[derive(Debug)]
pub(crate) enum Trigonometry {
    Unary(Function, Box<[Expression; 1]>),
    Atan2(Box<[Expression; 2]>),
}

impl Trigonometry {
    pub(crate) fn parse(
        name: &str,
        args: &Bson,
        ctx: &ParseContext,
    ) -> Result<Option<Trigonometry>> {
        if name == "$atan2" {
            return Ok(Some(Trigonometry::Atan2(parse_fixed(name, args, ctx)?)));
        }
        let Some((_, function)) = Function::ALL.iter().find(|(n, _)| *n == name) else {
            return Ok(None);
        };
        Ok(Some(Trigonometry::Unary(
            *function,
            parse_fixed(name, args, ctx)?,
        )))
    }

    pub(crate) fn eval<'a>(&'a self, env: &Env<'a>) -> Result<Value<'a>> {
        let result = match self {
            Trigonometry::Unary(function, arg) => {
                let value = arg[0].eval(env)?;
                unary(*function, value.as_deref())?
            }
            Trigonometry::Atan2(args) => {
                let (y, x) = (args[0].eval(env)?, args[1].eval(env)?);
                atan2(y.as_deref(), x.as_deref())?
            }
        };
        Ok(Some(Cow::Owned(result)))
    }
}

fn unary(function: Function, value: Option<&Bson>) -> Result<Bson> {
    if is_nullish(value) {
        return Ok(Bson::Null);
    }
    let Some(n) = number(value) else {
        return Err(Error::location(
            28765,
            format!(
                "{} only supports numeric types, not {}",
                function.name(),
                type_name(value)
            ),
        ));
    };
    let x = n.to_f64();
    if !x.is_nan() {
        let (inside, bounds) = match function.domain() {
            Domain::All => (true, ""),
            Domain::Finite => (x.is_finite(), "(-inf,inf)"),
            Domain::UnitInterval => ((-1.0..=1.0).contains(&x), "[-1,1]"),
            Domain::AtLeastOne => (x >= 1.0, "[1,inf]"),
        };
        if !inside {
            return Err(Error::location(
                50989,
                format!(
                    "cannot apply {} to {}, value must be in {bounds}",
                    function.name(),
                    crate::numeric::display(&n.to_bson())
                ),
            ));
        }
    }
    Ok(in_kind_of(n, function.apply(x)))
}

fn atan2(y: Option<&Bson>, x: Option<&Bson>) -> Result<Bson> {
    if is_nullish(y) || is_nullish(x) {
        return Ok(Bson::Null);
    }
    let (Some(ny), Some(nx)) = (number(y), number(x)) else {
        return Err(Error::location(
            51044,
            format!(
                "$atan2 only supports numeric types, not {} and {}",
                type_name(y),
                type_name(x)
            ),
        ));
    };
    let result = ny.to_f64().atan2(nx.to_f64());
    Ok(match (ny, nx) {
        (Number::Decimal(_), _) | (_, Number::Decimal(_)) => {
            Bson::Decimal128(decimal_from_f64(result))
        }
        _ => Bson::Double(result),
    })
}

/// A result of the argument's kind: a decimal for a decimal, a double otherwise.
fn in_kind_of(argument: Number, result: f64) -> Bson {
    match argument {
        Number::Decimal(_) => Bson::Decimal128(decimal_from_f64(result)),
        _ => Bson::Double(result),
    }
}

#[cfg(test)]
mod tests {
    use crate::expression::test_util::{error_code, value};
    use bson::bson;

    #[test]
    fn computes_in_doubles_and_decimals() {
        assert_eq!(value(bson!({"$sin": 0})), bson!(0.0));
        assert_eq!(value(bson!({"$cos": [0]})), bson!(1.0));
        assert_eq!(
            value(bson!({"$atan2": [1, 1]})),
            bson!(std::f64::consts::FRAC_PI_4)
        );
        assert_eq!(
            value(bson!({"$radiansToDegrees": std::f64::consts::PI})),
            bson!(180.0)
        );
        assert_eq!(value(bson!({"$sinh": null})), bson!(null));
        assert!(matches!(
            value(bson!({"$tan": bson::Decimal128::from_bytes([0; 16])})),
            bson::Bson::Decimal128(_)
        ));
    }

    #[test]
    fn refuses_what_is_outside_the_domain() {
        assert_eq!(error_code(bson!({"$acos": 2})), 50989);
        assert_eq!(error_code(bson!({"$acosh": 0.5})), 50989);
        assert_eq!(error_code(bson!({"$sin": f64::INFINITY})), 50989);
        assert_eq!(error_code(bson!({"$sin": "x"})), 28765);
        assert_eq!(error_code(bson!({"$atan2": ["x", 1]})), 51044);
        assert_eq!(error_code(bson!({"$sin": [1, 2]})), 16020);
    }
}
