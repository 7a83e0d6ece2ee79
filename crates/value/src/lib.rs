//! BSON value semantics shared by the query, aggregation, index and storage layers:
//! MongoDB's cross-type comparison order, numeric equivalence and arithmetic across the
//! four numeric types, dotted-path traversal with MongoDB's array rules, collations, and
//! values rendered as MongoDB quotes them in error messages.

pub mod clock;
pub mod collation;
pub mod compare;
mod decimal;
pub mod decimal_math;
pub mod display;
pub mod distinct;
pub mod idl;
pub mod key_string;
pub mod number;
pub mod path;
pub mod pattern;
pub mod raw;
pub mod size;
pub mod summation;

pub use collation::Collation;
pub use compare::{
    canonical_type_rank, compare_values, compare_values_with, values_equal, ByValue,
};
pub use distinct::DistinctValues;
pub use number::{as_f64, as_i64, is_number, Number};
pub use path::{get_path, FieldPath, Reached};
pub use size::{document_memory_bytes, document_size_bytes, value_memory_bytes, value_size_bytes};
