//! `$querySettings` (MongoDB 8.0): the query settings set for query shapes, one document
//! each (`queryShapeHash`, `settings`, `representativeQuery`, and with
//! `showDebugQueryShape` the shape itself), as the server keeps them
//! ([`crate::Collections::query_settings`]). It starts a database-level aggregation
//! (`{aggregate: 1}`), on any database.

use crate::pipeline::ExecContext;
use basalt_error::{Error, Result};
use basalt_expr::type_name;
use bson::{Bson, Document};

/// Parses `{showDebugQueryShape?: <bool>}`: whether to add each shape.
pub(crate) fn parse(spec: &Bson) -> Result<bool> {
    let Bson::Document(options) = spec else {
        return Err(Error::location(
            7746800,
            format!(
                "$querySettings stage expects a document as argument, not {}",
                type_name(Some(spec))
            ),
        ));
    };
    let mut debug_shape = false;
    for (name, value) in options {
        if name != "showDebugQueryShape" {
            return Err(Error::location(
                40415,
                format!("BSON field '$querySettings.{name}' is an unknown field."),
            ));
        }
        debug_shape = match value {
            Bson::Boolean(on) => *on,
            other => {
                return Err(Error::type_mismatch(format!(
                    "BSON field '$querySettings.showDebugQueryShape' is the wrong type '{}', expected type 'bool'",
                    type_name(Some(other))
                )))
            }
        };
    }
    Ok(debug_shape)
}

pub(crate) fn run(ctx: ExecContext<'_>, debug_shape: bool) -> Result<Vec<Document>> {
    ctx.collections.query_settings(debug_shape)
}

#[cfg(test)]
mod tests {
    use crate::pipeline::Pipeline;
    use crate::testing::MemoryCollections;
    use bson::{doc, Bson, Document};

    fn run(db: &str, spec: Bson) -> basalt_error::Result<Vec<Document>> {
        let server = MemoryCollections::new(db);
        let p = Pipeline::parse(&[doc! {"$querySettings": spec}], None)?;
        let out = p.stream(Box::new(std::iter::empty()), &server).collect();
        out
    }

    #[test]
    fn lists_the_settings() {
        assert!(run("admin", Bson::Document(doc! {})).unwrap().is_empty());
        assert!(run("test", Bson::Document(doc! {})).unwrap().is_empty());
        assert_eq!(run("admin", Bson::Int32(1)).unwrap_err().code.0, 7746800);
        let code = |spec: Document| run("admin", Bson::Document(spec)).unwrap_err().code.0;
        assert_eq!(code(doc! {"showDebugQueryShape": 1}), 14);
        assert_eq!(code(doc! {"other": true}), 40415);
    }
}
