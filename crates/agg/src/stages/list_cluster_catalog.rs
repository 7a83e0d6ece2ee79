//! `$listClusterCatalog` (MongoDB 8.0): the collections, views and time-series
//! collections of the database it runs on (`aggregate: 1`), of every database from
//! `admin`, as `listCollections` describes them, with their namespace and whether they
//! are sharded. The server lists them (`Collections::cluster_catalog`); this parses the
//! stage's options.

use basalt_error::{Error, Result};
use basalt_expr::type_name;
use bson::Bson;

/// The stage's `{shards, balancingConfiguration}`: whether to list each collection's
/// shards. A deployment that is not sharded has no balancing configuration to show.
pub(crate) fn parse(spec: &Bson) -> Result<bool> {
    let Bson::Document(spec) = spec else {
        return Err(Error::location(
            9621302,
            format!(
                "$listClusterCatalog must take a nested object but found: {}",
                type_name(Some(spec))
            ),
        ));
    };
    let mut shards = false;
    for (name, value) in spec {
        match (name.as_str(), value) {
            ("shards", Bson::Boolean(b)) => shards = *b,
            ("balancingConfiguration", Bson::Boolean(_)) => {}
            ("shards" | "balancingConfiguration", other) => {
                return Err(Error::type_mismatch(format!(
                    "BSON field '$listClusterCatalog.{name}' is the wrong type '{}', expected type 'bool'",
                    type_name(Some(other))
                )))
            }
            _ => {
                return Err(Error::location(
                    40415,
                    format!("BSON field '$listClusterCatalog.{name}' is an unknown field."),
                ))
            }
        }
    }
    Ok(shards)
}
