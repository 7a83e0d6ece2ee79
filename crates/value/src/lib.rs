//! BSON value semantics shared by the query, aggregation, index and storage layers:
//! MongoDB's cross-type comparison order, numeric equivalence and arithmetic across the
//! four numeric types, and dotted-path traversal with MongoDB's array rules.

pub mod compare;
mod decimal;
pub mod key_string;
pub mod number;
pub mod path;

pub use compare::{canonical_type_rank, compare_values, values_equal};
pub use number::{as_f64, as_i64, is_number, Number};
pub use path::{get_path, FieldPath, Reached};
