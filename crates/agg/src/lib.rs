//! The aggregation pipeline: parsing `aggregate` stages once ([`Pipeline::parse`]) and
//! running them over a stream of documents ([`Pipeline::stream`], [`Pipeline::run`]).
//! Expressions and accumulators come from `basalt_expr`, filters and sort orders from
//! `basalt_query`. Stages that reach beyond their input (other collections, server
//! state) do so through the [`Collections`] the server provides.

mod column_scan;
mod dependencies;
mod field_path;
mod join;
#[cfg(test)]
mod linear_time;
mod optimization;
mod partitioned;
mod pipeline;
mod projection;
mod stages;
#[cfg(test)]
mod testing;

pub use column_scan::{ColumnPlan, RowGroupColumns};
pub use optimization::optimize;
pub use partitioned::{Partial, Partitioned};
pub use stages::current_op::CurrentOpOptions;
pub use stages::geo_near::GeoNear;
pub use stages::unpack_bucket::UnpackBucket;
/// Time-series buckets: MongoDB's format, written and read.
pub mod time_series {
    pub use crate::stages::unpack_bucket::{append, append_document, unpack};
}
pub use pipeline::{
    stage_documents, Collections, DocumentStream, ExecContext, MergeTarget, MergeWrite,
    NoCollections, PassThrough, Pipeline, SessionUsers,
};
