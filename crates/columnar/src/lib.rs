//! The column store index's data: documents shredded into row groups of typed column
//! chunks (`row_group`), a chunk's bytes on disk and its Arrow arrays in memory
//! (`chunk`), which paths an index keeps (`projection`), and the decoded chunks kept
//! between queries (`cache`). Knows nothing of storage keys or pipelines: the catalog
//! stores what this crate encodes, and the aggregation engine reads what it decodes.

pub mod cache;
pub mod chunk;
pub mod projection;
pub mod row_group;

pub use cache::ChunkCache;
pub use chunk::{Cell, ColumnChunk, Kind};
pub use projection::ColumnProjection;
pub use row_group::{
    PathInfo, RowGroupBuilder, RowGroupHeader, RECORD_IDS_PATH, ROW_GROUP_SPAN_BITS,
};
