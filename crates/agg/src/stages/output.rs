//! What `$out` and `$merge` share: the collection they write, named by a string (a
//! collection of the command's database) or by `{db, coll}`, and the namespaces they may
//! not write (system collections, the internal databases). Names the catalog refuses
//! anyway (empty, with `$`) are refused by the server when the write starts.

use crate::pipeline::Collections;
use basalt_error::{Error, ErrorCode, Result};
use basalt_expr::type_name;
use bson::{Bson, Document};

/// The longest namespace (`db.collection`) there may be, in bytes.
const NAMESPACE_BYTES_MAX: usize = 255;

#[derive(Debug)]
pub(crate) struct Target {
    /// `None`: the command's database.
    db: Option<String>,
    coll: String,
    /// `$out`'s `timeseries` options: the target is (or becomes) a time-series
    /// collection with them.
    pub(crate) timeseries: Option<Document>,
}

/// The stage that writes, which decides the error codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Writer {
    Out,
    Merge,
}

impl Writer {
    fn name(self) -> &'static str {
        match self {
            Writer::Out => "$out",
            Writer::Merge => "$merge",
        }
    }
}

impl Target {
    pub(crate) fn in_command_database(coll: &str) -> Target {
        Target {
            db: None,
            coll: coll.to_string(),
            timeseries: None,
        }
    }

    /// Parses `{db: <string>, coll: <string>}`; `field` names the object in errors
    /// (`$out`, `into`). `db` may be left out only where `db_required` is false.
    pub(crate) fn parse_object(spec: &Document, field: &str, db_required: bool) -> Result<Target> {
        let (mut db, mut coll) = (None, None);
        for (name, value) in spec {
            let slot = match name.as_str() {
                "db" => &mut db,
                "coll" => &mut coll,
                _ => {
                    return Err(Error::location(
                        40415,
                        format!("BSON field '{field}.{name}' is an unknown field."),
                    ))
                }
            };
            match value {
                Bson::String(s) => *slot = Some(s.clone()),
                // As mongod's parser has it, null is a missing field.
                Bson::Null => {}
                other => {
                    return Err(Error::type_mismatch(format!(
                    "BSON field '{field}.{name}' is the wrong type '{}', expected type 'string'",
                    type_name(Some(other))
                )))
                }
            }
        }
        let missing = |name: &str| {
            Error::location(
                40414,
                format!("BSON field '{field}.{name}' is missing but a required field"),
            )
        };
        if db_required && db.is_none() {
            return Err(missing("db"));
        }
        Ok(Target {
            db,
            coll: coll.ok_or_else(|| missing("coll"))?,
            timeseries: None,
        })
    }

    /// The database and collection to write, refusing system collections and the
    /// internal databases as MongoDB does.
    pub(crate) fn resolve<'a>(
        &'a self,
        writer: Writer,
        collections: &'a dyn Collections,
    ) -> Result<(&'a str, &'a str)> {
        let db = self.db.as_deref().unwrap_or_else(|| collections.database());
        let (special, internal, cannot) = match writer {
            Writer::Out => (17385, 31321, "Can't"),
            Writer::Merge => (31319, 31320, "Cannot"),
        };
        let stage = writer.name();
        if self.coll.starts_with("system.") {
            return Err(Error::location(
                special,
                format!("{cannot} {stage} to special collection: {}", self.coll),
            ));
        }
        if writer == Writer::Out
            && (self.coll.contains('$') || db.len() + 1 + self.coll.len() > NAMESPACE_BYTES_MAX)
        {
            return Err(Error::new(
                ErrorCode::ILLEGAL_OPERATION,
                format!("Invalid $out target namespace, {db}.{}", self.coll),
            ));
        }
        if matches!(db, "admin" | "local" | "config") {
            return Err(Error::location(
                internal,
                format!("{cannot} {stage} to internal database: {db}"),
            ));
        }
        Ok((db, &self.coll))
    }
}
