//! `aggregate`: runs a pipeline over a collection, or over no collection at all
//! (`aggregate: 1`, whose pipeline starts with a stage that makes its own documents:
//! `$documents`, `$listLocalSessions`, `$currentOp`), and returns a cursor.
//!
//! A leading `$match` is pushed into the scan, so its filter also chooses the access
//! path; the rest of the pipeline runs over the matching documents. Stages that read or
//! write other collections reach them through [`collections::ServerCollections`]. A
//! pipeline ending in `$out` or `$merge` has written everything before the reply, whose
//! first batch is then empty.

pub(super) mod collections;

use super::write_batch::durability;
use super::Ctx;
use crate::cursors::CursorSource;
use crate::exec::{AccessPath, CollectionScan, Deadline};
use crate::request::Fields;
use basalt_agg::{DocumentStream, Pipeline};
use basalt_error::{Error, Result};
use basalt_query::Matcher;
use bson::{Bson, Document};
use collections::ServerCollections;

pub fn aggregate(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let fields = Fields::new(body);
    // `None`: a database-level aggregation.
    let name = match body.get("aggregate") {
        Some(Bson::String(name)) => Some(name.clone()),
        Some(v) if basalt_value::as_f64(v) == Some(1.0) => None,
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
    // Accepted for the drivers that send it; there are no validators to bypass yet.
    fields.bool_or("bypassDocumentValidation", false)?;
    let batch_size = fields.cursor_batch_size()?;
    let deadline = Deadline::from_max_time_ms(fields.i64_opt("maxTimeMS")?);
    let durability = durability(&fields)?;
    let stages: Vec<Document> = stages.into_iter().cloned().collect();
    let collation = fields.collation()?;
    let mut pipeline = Pipeline::parse_aggregate(
        &stages,
        fields.document_opt("let")?,
        name.is_none(),
        collation.as_ref(),
    )?;
    let namespace = match &name {
        Some(name) => format!("{}.{name}", ctx.db),
        None => format!("{}.$cmd.aggregate", ctx.db),
    };

    let input: DocumentStream<'_> = match &name {
        Some(name) => {
            // The leading $match becomes the scan's filter (and picks its access path).
            let filter = pipeline.take_leading_match()?.unwrap_or_default();
            match ctx.server.catalog.get(ctx.db, name) {
                Some(collection) => {
                    let hint = body.get("hint");
                    let path = AccessPath::choose(&collection, &filter, collation.as_ref(), hint)?;
                    let scan = CollectionScan::new(
                        collection,
                        Matcher::new(&filter)?.with_collation(collation.as_ref()),
                        path,
                        None,
                        0,
                        None,
                        deadline,
                    );
                    Box::new(scan.into_stream())
                }
                None => Box::new(std::iter::empty()),
            }
        }
        None => Box::new(std::iter::empty()),
    };
    let collections = ServerCollections::new(ctx, body, &namespace, deadline, durability);
    let results = pipeline
        .stream(input, &collections)
        .collect::<Result<Vec<_>>>()?;
    ctx.server.cursors.first_batch_reply(
        namespace.clone(),
        CursorSource::buffered(results),
        batch_size,
        false,
    )
}
