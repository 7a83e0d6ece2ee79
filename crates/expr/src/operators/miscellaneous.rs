//! Miscellaneous expression operators (as MongoDB's manual groups them): `$rand`, and
//! `$meta`: what a search left with the document, in hidden fields ([`METADATA_FIELDS`]):
//! `textScore`, the score a `$text` search gave it, and `geoNearDistance` and
//! `geoNearPoint`, its distance and location as `$geoNear` measured them.
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
/// The fields `$geoNear` leaves a document's distance and location in.
pub const GEO_NEAR_DISTANCE_FIELD: &str = "$__geoNearDistance";
pub const GEO_NEAR_POINT_FIELD: &str = "$__geoNearPoint";
/// Every hidden field of metadata, which the server removes before replying.
pub const METADATA_FIELDS: [&str; 3] = [
    TEXT_SCORE_FIELD,
    GEO_NEAR_DISTANCE_FIELD,
    GEO_NEAR_POINT_FIELD,
];

#[derive(Debug)]
pub(crate) enum Miscellaneous {
    /// `$rand`: a uniformly distributed double in [0, 1), new on every evaluation.
    Rand,
    /// `{$meta: kind}`: the name of the kind and its hidden field.
    Meta(&'static str, &'static str),
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
                Bson::String(kind) if kind == "textScore" => {
                    Ok(Some(Miscellaneous::Meta("text score", TEXT_SCORE_FIELD)))
                }
                Bson::String(kind) if kind == "geoNearDistance" => Ok(Some(Miscellaneous::Meta(
                    "geoNearDistance",
                    GEO_NEAR_DISTANCE_FIELD,
                ))),
                Bson::String(kind) if kind == "geoNearPoint" => Ok(Some(Miscellaneous::Meta(
                    "geoNearPoint",
                    GEO_NEAR_POINT_FIELD,
                ))),
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
            Miscellaneous::Meta(kind, field) => match env.root.get(*field) {
                Some(value) => Ok(Some(Cow::Borrowed(value))),
                None => Err(Error::location(
                    40218,
                    format!("query requires {kind} metadata, but it is not available"),
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
