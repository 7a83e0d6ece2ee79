//! MongoDB's query semantics as pure functions over documents: filters ([`Matcher`]),
//! projections ([`Projection`]), update operators ([`UpdateSpec`]) and sort orders
//! ([`SortSpec`]). Nothing here knows about storage, indexes or the network.

pub use basalt_value::display;
mod matcher;
mod operators;
mod projection;
mod sort;
mod update;

pub use matcher::{Matched, Matcher};
pub use projection::Projection;
pub use sort::{Direction, SortSpec};
pub use update::{upsert_seed, OperatorUpdate, UpdateContext, UpdateSpec};
