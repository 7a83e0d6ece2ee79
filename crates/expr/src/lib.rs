//! MongoDB's aggregation expression language: expressions are parsed once from BSON into
//! a tree ([`Expression::parse`]) and evaluated per document ([`Expression::evaluate`]).
//! Accumulators ([`Accumulator`]) hold the running aggregates of `$group`.
//!
//! Evaluation distinguishes a missing value from null, as MongoDB does (`$ifNull`,
//! `$type` and `$project` see the difference), and borrows from the input document
//! where it can, so reading a field costs no copy.

mod accumulator;
mod context;
mod env;
mod expression;
mod field_path;
mod javascript_accumulator;
mod numeric;
pub(crate) mod operators;

pub use accumulator::{Accumulator, AccumulatorKind, AccumulatorSpec, Moments, OrderedBson};
pub use context::{ParseContext, Scope, VarId, Variables};
pub use env::Value;
pub use expression::{type_name, Expression};
pub use operators::boolean::truthy;
