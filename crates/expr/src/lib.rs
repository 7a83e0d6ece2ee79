//! MongoDB's aggregation expression language: expressions are parsed once from BSON into
//! a tree ([`Expression::parse`]) and evaluated per document ([`Expression::evaluate`]).
//! Accumulators ([`Accumulator`]) hold the running aggregates of `$group`, `$bucket`,
//! `$bucketAuto` and `$setWindowFields`, in partial states that merge.
//!
//! Evaluation distinguishes a missing value from null, as MongoDB does (`$ifNull`,
//! `$type` and `$project` see the difference), and borrows from the input document
//! where it can, so reading a field costs no copy.

mod accumulator;
mod context;
mod dependencies;
mod env;
mod expression;
mod field_path;
mod javascript_accumulator;
mod limits;
mod numeric;
pub(crate) mod operators;

pub use accumulator::{
    Accumulator, AccumulatorKind, AccumulatorSpec, Moments, OrderedBson, Quantile, Selection,
};
pub use context::{ParseContext, Scope, VarId, Variables};
pub use dependencies::FieldSet;
pub use env::Value;
pub use expression::{type_name, Expression};
pub use limits::{BUILT_VALUE_MEMORY_BYTES_MAX, STRING_SIZE_BYTES_MAX};
pub use operators::arithmetic::DIVIDE_BY_ZERO;
pub use operators::boolean::truthy;
pub use operators::date::{civil_from_days, days_from_civil, TimeUnit};
pub use operators::miscellaneous::{
    remove_metadata, GEO_NEAR_DISTANCE_FIELD, GEO_NEAR_POINT_FIELD, SCORE_DETAILS_FIELD,
    SCORE_FIELD, TEXT_SCORE_FIELD,
};
