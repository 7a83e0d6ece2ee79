//! MongoDB's query semantics as pure functions over documents: filters ([`Matcher`]),
//! projections ([`Projection`]), update operators ([`UpdateSpec`]) and sort orders
//! ([`SortSpec`]), text search (`text`), and the blocking sort ([`BlockingSort`]) that orders results under
//! MongoDB's memory limit, spilling sorted runs to temporary files when allowed. Nothing
//! here knows about storage, indexes or the network.

pub use basalt_value::display;
mod blocking_sort;
pub mod geo;
mod matcher;
mod operators;
mod projection;
mod raw_filter;
mod sort;
pub mod text;
mod update;

pub use blocking_sort::{BlockingSort, SortedDocuments, BLOCKING_SORT_MEMORY_LIMIT_BYTES};
pub use matcher::{Matched, Matcher};
pub use operators::NearQuery;
pub use projection::Projection;
pub use sort::{Direction, SortSpec};
pub use update::{upsert_seed, OperatorUpdate, UpdateContext, UpdateSpec};
