//! Miscellaneous expression operators (as MongoDB's manual groups them): `$rand`.
//!
//! `$getField`, `$setField` and `$literal`, which the manual also lists here, live with the
//! object operators and in the parser.

use crate::env::{Env, Value};
use basalt_error::{Error, Result};
use bson::Bson;
use std::borrow::Cow;

#[derive(Debug)]
pub(crate) enum Miscellaneous {
    /// `$rand`: a uniformly distributed double in [0, 1), new on every evaluation.
    Rand,
}

impl Miscellaneous {
    pub(crate) fn parse(name: &str, args: &Bson) -> Result<Option<Miscellaneous>> {
        match name {
            "$rand" => match args {
                Bson::Document(d) if d.is_empty() => Ok(Some(Miscellaneous::Rand)),
                _ => Err(Error::location(
                    3040501,
                    "$rand does not currently accept arguments",
                )),
            },
            _ => Ok(None),
        }
    }

    pub(crate) fn eval<'a>(&'a self, _env: &Env<'a>) -> Result<Value<'a>> {
        match self {
            Miscellaneous::Rand => Ok(Some(Cow::Owned(Bson::Double(rand::random::<f64>())))),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::expression::test_util::*;
    use bson::{bson, Bson};

    #[test]
    fn rand() {
        let draws: Vec<f64> = (0..100)
            .map(|_| match value(bson!({"$rand": {}})) {
                Bson::Double(d) => d,
                other => panic!("$rand gave {other}"),
            })
            .collect();
        assert!(draws.iter().all(|d| (0.0..1.0).contains(d)));
        assert!(draws.iter().any(|d| *d != draws[0]));
        assert_eq!(error_code(bson!({"$rand": {"seed": 1}})), 3040501);
        assert_eq!(error_code(bson!({"$rand": 1})), 3040501);
    }
}
