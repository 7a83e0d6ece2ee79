//! MongoDB's Stable API (`apiVersion`, `apiStrict`, `apiDeprecationErrors`): the only
//! version is "1"; with `apiStrict: true`, a command or aggregation stage outside API
//! Version 1 is refused with APIStrictError (323), before the command is looked up, as
//! mongod does.

use basalt_error::{Error, ErrorCode, Result};
use bson::{Bson, Document};

/// The commands of API Version 1 (MongoDB 7.0's list).
const VERSION_1_COMMANDS: &[&str] = &[
    "abortTransaction",
    "aggregate",
    "authenticate",
    "collMod",
    "commitTransaction",
    "count",
    "create",
    "createIndexes",
    "delete",
    "drop",
    "dropDatabase",
    "dropIndexes",
    "endSessions",
    "find",
    "findAndModify",
    "getMore",
    "hello",
    "insert",
    "killCursors",
    "listCollections",
    "listDatabases",
    "listIndexes",
    "ping",
    "refreshSessions",
    "saslContinue",
    "saslStart",
    "update",
];

/// The aggregation stages of API Version 1.
const VERSION_1_STAGES: &[&str] = &[
    "$addFields",
    "$bucket",
    "$bucketAuto",
    "$changeStream",
    "$collStats",
    "$count",
    "$densify",
    "$documents",
    "$facet",
    "$fill",
    "$geoNear",
    "$graphLookup",
    "$group",
    "$limit",
    "$lookup",
    "$match",
    "$merge",
    "$out",
    "$project",
    "$redact",
    "$replaceRoot",
    "$replaceWith",
    "$sample",
    "$set",
    "$setWindowFields",
    "$skip",
    "$sort",
    "$sortByCount",
    "$unionWith",
    "$unset",
    "$unwind",
];

/// Whether the aggregation stage `name` is part of API Version 1.
pub fn is_version_1_stage(name: &str) -> bool {
    VERSION_1_STAGES.contains(&name)
}

/// Checks the Stable API parameters of the command `name`.
pub fn check(name: &str, body: &Document) -> Result<()> {
    let version = body.get("apiVersion");
    match version {
        None => {
            for field in ["apiStrict", "apiDeprecationErrors"] {
                if body.contains_key(field) {
                    return Err(Error::new(
                        ErrorCode::location(4886600),
                        format!("Provided {field} without a corresponding apiVersion"),
                    ));
                }
            }
            return Ok(());
        }
        Some(Bson::String(version)) if version == "1" => {}
        Some(Bson::String(version)) => {
            return Err(Error::new(
                ErrorCode::API_VERSION_ERROR,
                format!("API version must be \"1\", not \"{version}\""),
            ))
        }
        Some(_) => {
            return Err(Error::type_mismatch(
                "BSON field 'apiVersion' is the wrong type, expected type 'string'",
            ))
        }
    }
    for field in ["apiStrict", "apiDeprecationErrors"] {
        if body
            .get(field)
            .is_some_and(|v| !matches!(v, Bson::Boolean(_)))
        {
            return Err(Error::type_mismatch(format!(
                "BSON field '{field}' is the wrong type, expected type 'bool'"
            )));
        }
    }
    if !body.get_bool("apiStrict").unwrap_or(false) {
        return Ok(());
    }
    if !VERSION_1_COMMANDS.contains(&name) {
        return Err(Error::new(
            ErrorCode::API_STRICT_ERROR,
            format!("Provided apiStrict:true, but the command {name} is not in API Version 1"),
        ));
    }
    if name == "aggregate" {
        let stages = body
            .get_array("pipeline")
            .map(|p| p.as_slice())
            .unwrap_or(&[]);
        let outside = stages
            .iter()
            .filter_map(Bson::as_document)
            .filter_map(|stage| stage.keys().next())
            .find(|stage| !VERSION_1_STAGES.contains(&stage.as_str()));
        if let Some(stage) = outside {
            return Err(Error::new(
                ErrorCode::API_STRICT_ERROR,
                format!("stage {stage} is not allowed with 'apiStrict: true' in API Version 1"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn strict_mode_refuses_what_version_1_lacks() {
        assert!(check("find", &doc! { "find": "c" }).is_ok());
        assert!(check(
            "find",
            &doc! { "find": "c", "apiVersion": "1", "apiStrict": true }
        )
        .is_ok());
        let code = |name, body: Document| check(name, &body).unwrap_err().code;
        assert_eq!(
            code(
                "distinct",
                doc! { "distinct": "c", "apiVersion": "1", "apiStrict": true }
            ),
            ErrorCode::API_STRICT_ERROR
        );
        assert_eq!(
            code(
                "aggregate",
                doc! { "aggregate": 1, "pipeline": [{ "$currentOp": {} }], "apiVersion": "1", "apiStrict": true }
            ),
            ErrorCode::API_STRICT_ERROR
        );
        assert_eq!(
            code("ping", doc! { "ping": 1, "apiVersion": "2" }),
            ErrorCode::API_VERSION_ERROR
        );
        assert_eq!(
            code("ping", doc! { "ping": 1, "apiStrict": true }),
            ErrorCode::location(4886600)
        );
        // Without apiStrict, any command runs under version 1.
        assert!(check("distinct", &doc! { "distinct": "c", "apiVersion": "1" }).is_ok());
    }
}
