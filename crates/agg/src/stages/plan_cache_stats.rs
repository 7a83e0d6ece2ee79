//! `$planCacheStats`: one document per query shape the planner cached a choice for on
//! the collection the pipeline aggregates, as the server reports them. It takes
//! `{allHosts: <bool>}` (true only in a sharded cluster) and must be the first stage.

use basalt_error::{Error, Result};
use bson::Bson;

pub(crate) fn parse(spec: &Bson) -> Result<()> {
    let Bson::Document(spec) = spec else {
        return Err(Error::failed_to_parse(
            "$planCacheStats value must be an object",
        ));
    };
    for (name, value) in spec {
        match (name.as_str(), value) {
            ("allHosts", Bson::Boolean(false)) => {}
            ("allHosts", Bson::Boolean(true)) => {
                return Err(Error::location(
                    4503200,
                    "$planCacheStats stage cannot specify allHosts: true when not connected to a sharded cluster",
                ))
            }
            ("allHosts", _) => {
                return Err(Error::location(
                    13111,
                    "$planCacheStats allHosts field must be a boolean",
                ))
            }
            (other, _) => {
                return Err(Error::failed_to_parse(format!(
                    "unrecognized option '{other}' in $planCacheStats stage"
                )))
            }
        }
    }
    Ok(())
}
