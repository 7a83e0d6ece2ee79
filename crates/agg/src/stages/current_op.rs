//! `$currentOp`: the operations in progress, as the server reports them through
//! [`crate::Collections::current_ops`]. It runs only in a database-level aggregation on
//! `admin`.

use crate::pipeline::ExecContext;
use basalt_error::{Error, ErrorCode, Result};
use basalt_expr::type_name;
use bson::{Bson, Document};

/// What `$currentOp` reports beyond the operations running (mongod's options).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CurrentOpOptions {
    /// Every user's operations, not only the current user's.
    pub all_users: bool,
    /// Connections running nothing, as inactive operations.
    pub idle_connections: bool,
    /// Cursors waiting for their next getMore.
    pub idle_cursors: bool,
    /// Sessions holding an open transaction (on by default).
    pub idle_sessions: bool,
    /// Commands past 1 KB given as a `$truncated` string.
    pub truncate_ops: bool,
}

/// The options mongod accepts, all booleans; `targetAllNodes` needs a sharded cluster.
const OPTIONS: &[&str] = &[
    "allUsers",
    "idleConnections",
    "idleCursors",
    "idleSessions",
    "localOps",
    "targetAllNodes",
    "truncateOps",
    "backtrace",
];

pub(crate) fn parse(spec: &Bson) -> Result<CurrentOpOptions> {
    let Bson::Document(given) = spec else {
        return Err(Error::type_mismatch(format!(
            "$currentOp options must be specified in an object, but found: {}",
            type_name(Some(spec))
        )));
    };
    let mut options = CurrentOpOptions {
        idle_sessions: true,
        ..CurrentOpOptions::default()
    };
    for (name, value) in given {
        if !OPTIONS.contains(&name.as_str()) {
            return Err(Error::location(
                40415,
                format!("BSON field '$currentOp.{name}' is an unknown field."),
            ));
        }
        let Bson::Boolean(on) = value else {
            return Err(Error::type_mismatch(format!(
                "BSON field '$currentOp.{name}' is the wrong type '{}', expected type 'bool'",
                type_name(Some(value))
            )));
        };
        match name.as_str() {
            "allUsers" => options.all_users = *on,
            "idleConnections" => options.idle_connections = *on,
            "idleCursors" => options.idle_cursors = *on,
            "idleSessions" => options.idle_sessions = *on,
            "truncateOps" => options.truncate_ops = *on,
            "targetAllNodes" if *on => {
                return Err(Error::failed_to_parse(
                    "$currentOp supports targetAllNodes parameter only for sharded clusters",
                ))
            }
            _ => {}
        }
    }
    Ok(options)
}

pub(crate) fn run(ctx: ExecContext<'_>, options: &CurrentOpOptions) -> Result<Vec<Document>> {
    if ctx.collections.database() != "admin" {
        return Err(Error::new(
            ErrorCode::INVALID_NAMESPACE,
            "$currentOp must be run against the 'admin' database with {aggregate: 1}",
        ));
    }
    ctx.collections.current_ops(options)
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
        assert_eq!(
            run("admin", doc! {"bogus": true}).unwrap_err().code.0,
            40415
        );
        assert_eq!(run("admin", doc! {"allUsers": 1}).unwrap_err().code.0, 14);
        assert_eq!(
            run("admin", doc! {"targetAllNodes": true})
                .unwrap_err()
                .code
                .0,
            9
        );
        let code = Pipeline::parse(&[doc! {"$currentOp": Bson::Int32(1)}], None)
            .unwrap_err()
            .code
            .0;
        assert_eq!(code, 14);
    }
}
