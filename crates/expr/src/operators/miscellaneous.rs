//! Miscellaneous expression operators (as MongoDB's manual groups them): `$rand`, and
//! `$meta`: what a search left with the document, in hidden fields ([`METADATA_FIELDS`]):
//! `textScore`, the score a `$text` search gave it, `geoNearDistance` and
//! `geoNearPoint`, its distance and location as `$geoNear` measured them, and `score` and
//! `scoreDetails`, what `$rankFusion` made of its ranks. Atlas Search's kinds
//! (`searchScore`, `searchScoreDetails`, `vectorSearchScore`) are never set here: they
//! are missing, as in MongoDB without a search stage.
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
/// The fields `$rankFusion` leaves a document's score and its details in.
pub const SCORE_FIELD: &str = "$__score";
pub const SCORE_DETAILS_FIELD: &str = "$__scoreDetails";
/// Every hidden field of metadata ([`remove_metadata`]).
const METADATA_FIELDS: [&str; 5] = [
    TEXT_SCORE_FIELD,
    GEO_NEAR_DISTANCE_FIELD,
    GEO_NEAR_POINT_FIELD,
    SCORE_FIELD,
    SCORE_DETAILS_FIELD,
];

/// Removes what searches left on `doc` for `{$meta}`: their metadata goes no further
/// than the pipeline that made it (not into a reply, a written document, or the arrays
/// `$facet` and `$lookup` build).
pub fn remove_metadata(doc: &mut bson::Document) {
    for field in METADATA_FIELDS {
        doc.remove(field);
    }
}

#[derive(Debug)]
pub(crate) enum Miscellaneous {
    /// `$rand`: a uniformly distributed double in [0, 1), new on every evaluation.
    Rand,
    /// `{$meta: kind}`: the name of the kind and its hidden field, whose absence is an
    /// error; `None` for Atlas Search's kinds, always missing.
    Meta(&'static str, Option<&'static str>),
}

impl Miscellaneous {
    pub(crate) fn parse(name: &str, args: &Bson) -> Result<Option<Miscellaneous>> {
        match name {
            // `{}` or `[]`; arguments in either 3040501, any other value 10065.
            "$rand" => match args {
                Bson::Document(d) if d.is_empty() => Ok(Some(Miscellaneous::Rand)),
                Bson::Array(items) if items.is_empty() => Ok(Some(Miscellaneous::Rand)),
                Bson::Document(_) | Bson::Array(_) => Err(Error::location(
                    3040501,
                    "$rand does not currently accept arguments",
                )),
                _ => Err(Error::location(
                    10065,
                    "invalid parameter: expected an object ($rand)",
                )),
            },
            "$meta" => match args {
                Bson::String(kind) => match kind.as_str() {
                    "textScore" => Ok(("text score", Some(TEXT_SCORE_FIELD))),
                    "geoNearDistance" => Ok(("geoNearDistance", Some(GEO_NEAR_DISTANCE_FIELD))),
                    "geoNearPoint" => Ok(("geoNearPoint", Some(GEO_NEAR_POINT_FIELD))),
                    "score" => Ok(("score", Some(SCORE_FIELD))),
                    "scoreDetails" => Ok(("scoreDetails", Some(SCORE_DETAILS_FIELD))),
                    "searchScore" | "searchScoreDetails" | "vectorSearchScore" => {
                        Ok(("search", None))
                    }
                    _ => Err(Error::location(
                        17308,
                        format!("Unsupported argument to $meta: {kind}"),
                    )),
                }
                .map(|(name, field)| Some(Miscellaneous::Meta(name, field))),
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
            Miscellaneous::Meta(_, None) => Ok(None),
            Miscellaneous::Meta(kind, Some(field)) => match env.root.get(*field) {
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
        assert_eq!(error_code(bson!({"$rand": 1})), 10065);
        assert_eq!(error_code(bson!({"$rand": [1]})), 3040501);
        assert!(eval(bson!({"$rand": []})).is_ok());
    }
}
