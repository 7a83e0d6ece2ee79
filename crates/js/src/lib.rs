//! Server-side JavaScript on QuickJS (through `rquickjs`): `$where`, `mapReduce`,
//! `$function` and `$accumulator` run here, in a sandbox per thread with a time limit, a
//! memory cap and nothing reachable but a script's arguments, over values converted
//! between BSON and MongoDB's shell types.

mod bson_conversion;
mod map_reduce;
mod sandbox;
mod where_clause;

pub use map_reduce::{MapReduce, MapReduceCounts, MapReduceRun};
pub use sandbox::{
    check_scripting_enabled, set_scripting_enabled, with_command, CommandScripts, Script,
    StoredFunctions, JS_MEMORY_LIMIT_BYTES, JS_TIME_LIMIT_MS,
};
pub use where_clause::WhereClause;
