//! Miscellaneous expression operators (as MongoDB's manual groups them): `$rand`, and
//! `$meta`'s `textScore`: the score a `$text` search gave the document, which the scan
//! that matched it left in the field [`TEXT_SCORE_FIELD`].
//!
//! `$getField`, `$setField` and `$literal`, which the manual also lists here, live with the
//! object operators and in the parser.

use crate::env::{Env, Value};
use basalt_error::{Error, Result};
use bson::Bson;
use std::borrow::Cow;

/// The field a document carries its `$text` score in while a command works on it;
/// the server removes it before replying.
pub const TEXT_SCORE_FIELD: &str = "$__textScore";

#[derive(Debug)]
pub(crate) enum Miscellaneous {
    /// `$rand`: a uniformly distributed double in [0, 1), new on every evaluation.
    Rand,
    /// `{$meta: "textScore"}`.
    TextScore,
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
            "$meta" => match args {
                Bson::String(kind) if kind == "textScore" => Ok(Some(Miscellaneous::TextScore)),
                Bson::String(kind) => Err(Error::location(
                    17308,
                    format!("Unsupported argument to $meta: {kind}"),
                )),
                _ => Err(Error::location(
                    17307,
                    "$meta only supports string arguments",
                )),
            },
            _ => Ok(None),
        }
    }

    pub(crate) fn eval<'a>(&'a self, env: &Env<'a>) -> Result<Value<'a>> {
        match self {
            Miscellaneous::Rand => Ok(Some(Cow::Owned(Bson::Double(rand::random::<f64>())))),
            Miscellaneous::TextScore => match env.root.get(TEXT_SCORE_FIELD) {
                Some(score) => Ok(Some(Cow::Borrowed(score))),
                None => Err(Error::location(
                    40218,
                    "query requires text score metadata, but it is not available",
                )),
            },
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
