//! The aggregation pipeline: parsing `aggregate` stages once ([`Pipeline::parse`]) and
//! running them over a stream of documents ([`Pipeline::stream`], [`Pipeline::run`]).
//! Expressions and accumulators come from `basalt_expr`, filters and sort orders from
//! `basalt_query`.

mod pipeline;
mod projection;
mod stages;

pub use pipeline::{Collections, DocumentStream, ExecContext, NoCollections, Pipeline};
