//! `$currentOp`: the operations in progress, as the server reports them through
//! [`crate::Collections::current_ops`]. It runs only in a database-level aggregation on
//! `admin`.

use crate::pipeline::ExecContext;
use basalt_error::{Error, ErrorCode, Result};
use basalt_expr::type_name;
use bson::{Bson, Document};

/// The options MongoDB accepts, all booleans.
const OPTIONS: &[&str] = &[
    "allUsers",
    "idleConnections",
    "idleCursors",
    "idleSessions",
    "localOps",
    "backtrace",
    "truncateOps",
    "targetAllNodes",
];

pub(crate) fn parse(spec: &Bson) -> Result<()> {
    let Bson::Document(options) = spec else {
        return Err(Error::failed_to_parse(format!(
            "$currentOp options must be specified in an object, but found: {}",
            type_name(Some(spec))
        )));
    };
    for (name, value) in options {
        if !OPTIONS.contains(&name.as_str()) {
            return Err(Error::failed_to_parse(format!(
                "Unrecognized option '{name}' in $currentOp stage."
            )));
        }
        if !matches!(value, Bson::Boolean(_)) {
            return Err(Error::failed_to_parse(format!(
                "The '{name}' parameter of the $currentOp stage must be a boolean value, but found: {}",
                type_name(Some(value))
            )));
        }
    }
    Ok(())
}

pub(crate) fn run(ctx: ExecContext<'_>) -> Result<Vec<Document>> {
    if ctx.collections.database() != "admin" {
        return Err(Error::new(
            ErrorCode::INVALID_NAMESPACE,
            "$currentOp must be run against the 'admin' database with {aggregate: 1}",
        ));
    }
    ctx.collections.current_ops()
}

#[cfg(test)]
mod tests {
    use crate::pipeline::Pipeline;
    use crate::testing::MemoryCollections;
    use bson::{doc, Bson, Document};

    fn run(db: &str, spec: Document) -> basalt_error::Result<Vec<Document>> {
        let server = MemoryCollections::new(db);
        let p = Pipeline::parse(&[doc! {"$currentOp": spec}], None)?;
        let out = p.stream(Box::new(std::iter::empty()), &server).collect();
        out
    }

    #[test]
    fn reports_operations_on_admin_only() {
        assert_eq!(run("admin", doc! {"allUsers": true}).unwrap().len(), 1);
        assert_eq!(run("test", doc! {}).unwrap_err().code.0, 73);
        assert_eq!(run("admin", doc! {"bogus": true}).unwrap_err().code.0, 9);
        assert_eq!(run("admin", doc! {"allUsers": 1}).unwrap_err().code.0, 9);
        let code = Pipeline::parse(&[doc! {"$currentOp": Bson::Int32(1)}], None)
            .unwrap_err()
            .code
            .0;
        assert_eq!(code, 9);
    }
}
