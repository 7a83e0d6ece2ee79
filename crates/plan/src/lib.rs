//! Query planning: which index (if any) answers a filter, over which key ranges, and the
//! `explain` description of that choice.
//!
//! Planning is pure: it reads a filter and the catalog's index specs and returns a plan;
//! the server's executor runs it against storage. Bounds only need to be a superset of
//! the matches, because the executor re-checks every fetched document with the matcher.

pub mod index_bounds;
pub mod min_max;
pub mod plan_cache;
pub mod planner;
pub mod predicate;

pub use index_bounds::{IndexBounds, Interval, KeyCheck, KeyFilter, KeyRange};
pub use min_max::min_max_scan;
pub use plan_cache::{index_filter_shape, plan_with_cache, query_shape, QueryShapeParts};
pub use planner::{plan, plan_hinted, plan_sorted, resolve_hint, IndexScanPlan, Plan, PlanChoice};
