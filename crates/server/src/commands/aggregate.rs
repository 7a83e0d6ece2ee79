//! `aggregate`: runs a pipeline over a collection and returns a cursor.
//!
//! A leading `$match` is pushed into the scan, so its filter also chooses the access
//! path; the rest of the pipeline runs over the matching documents.

use super::Ctx;
use crate::cursors::CursorSource;
use crate::exec::{AccessPath, CollectionScan, Deadline};
use crate::request::Fields;
use basalt_agg::Pipeline;
use basalt_error::{Error, ErrorCode, Result};
use basalt_query::Matcher;
use bson::{Bson, Document};

pub fn aggregate(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let fields = Fields::new(body);
    let name = match body.get("aggregate") {
        Some(Bson::String(name)) => name.clone(),
        Some(v) if basalt_value::as_f64(v) == Some(1.0) => {
            return Err(Error::new(
                ErrorCode::COMMAND_NOT_SUPPORTED,
                "database-level aggregation (aggregate: 1) is not supported by Basalt yet",
            ))
        }
        _ => {
            return Err(Error::failed_to_parse(
                "'aggregate' must be a collection name or 1",
            ))
        }
    };
    let stages = fields.documents("pipeline")?;
    if fields.document_opt("cursor")?.is_none() && !fields.bool_or("explain", false)? {
        return Err(Error::failed_to_parse(
            "The 'cursor' option is required, except for aggregate with the explain argument",
        ));
    }
    let batch_size = fields.cursor_batch_size()?;
    let deadline = Deadline::from_max_time_ms(fields.i64_opt("maxTimeMS")?);
    let stages: Vec<Document> = stages.into_iter().cloned().collect();
    let mut pipeline = Pipeline::parse(&stages, fields.document_opt("let")?)?;
    let namespace = format!("{}.{name}", ctx.db);

    // The leading $match becomes the scan's filter (and picks its access path).
    let filter = pipeline.take_leading_match().unwrap_or_default();
    let input: Box<dyn Iterator<Item = Result<Document>>> =
        match ctx.server.catalog.get(ctx.db, &name) {
            Some(collection) => {
                let path = AccessPath::choose(&filter);
                let scan = CollectionScan::new(
                    collection,
                    Matcher::new(&filter)?,
                    path,
                    None,
                    0,
                    None,
                    deadline,
                );
                Box::new(scan.into_stream())
            }
            None => Box::new(std::iter::empty()),
        };
    let results = pipeline.run(input)?;
    ctx.server.cursors.first_batch_reply(
        namespace,
        CursorSource::Buffered(results.into()),
        batch_size,
        false,
    )
}
