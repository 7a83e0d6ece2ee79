//! Views: read-only collections defined by an aggregation pipeline over a collection or
//! another view (`create` with `viewOn` and `pipeline`).
//!
//! A view is kept as MongoDB keeps it: one document per view in its database's
//! `system.views` collection, `{_id: "db.view", viewOn, pipeline, collation?}`. So a
//! view is written through the same path as any document (replicated with the command
//! that made it, dropped with its database, listed, dumped and restored), and a
//! database without views has no `system.views` at all, which makes the check "is this
//! missing collection a view?" a catalog lookup. A view holds no data: a read of it runs
//! as an aggregation over the collection at the end of its chain of views, with the
//! views' pipelines in front of the reader's (see `commands/views.rs`).

use crate::exec::{collect_matches, AccessPath, Deadline};
use basalt_catalog::Catalog;
use basalt_error::{Error, ErrorCode, Result};
use basalt_query::Matcher;
use basalt_storage::Durability;
use bson::{doc, Bson, Document};

/// The collection of a database that holds its views' definitions.
pub const SYSTEM_VIEWS: &str = "system.views";

/// The most views a chain may hold (a view on a view on ... a collection), as in MongoDB.
const MAX_VIEW_DEPTH: usize = 20;

/// The largest pipeline a view may have, in BSON bytes (MongoDB's limit).
const MAX_PIPELINE_BYTES: usize = 16 * 1000 * 1000;

/// One view's definition.
#[derive(Clone, Debug, PartialEq)]
pub struct View {
    pub name: String,
    pub view_on: String,
    pub pipeline: Vec<Document>,
    /// The view's default collation (its full spec), which every read of it uses.
    pub collation: Option<Document>,
}

impl View {
    fn from_stored(db: &str, stored: &Document) -> Option<View> {
        let name = stored
            .get_str("_id")
            .ok()?
            .strip_prefix(db)?
            .strip_prefix('.')?;
        Some(View {
            name: name.to_string(),
            view_on: stored.get_str("viewOn").ok()?.to_string(),
            pipeline: stored
                .get_array("pipeline")
                .ok()?
                .iter()
                .filter_map(|stage| stage.as_document().cloned())
                .collect(),
            collation: stored.get_document("collation").ok().cloned(),
        })
    }

    fn to_stored(&self, db: &str) -> Document {
        let mut stored = doc! { "_id": format!("{db}.{}", self.name) };
        stored.extend(self.options());
        stored
    }

    /// The view's options, as `listCollections` reports them.
    pub fn options(&self) -> Document {
        let mut options = doc! { "viewOn": &self.view_on, "pipeline": self.pipeline.clone() };
        if let Some(collation) = &self.collation {
            options.insert("collation", collation.clone());
        }
        options
    }
}

/// A view followed down its chain to the collection it reads.
#[derive(Debug)]
pub struct Resolved {
    /// The collection at the end of the chain (which may not exist: then it is empty).
    pub collection: String,
    /// The pipelines of the views in the chain, the innermost view's first.
    pub pipeline: Vec<Document>,
    pub collation: Option<Document>,
    /// Read directly, a time-series collection, whose buckets a filter on time or meta
    /// may narrow (see `crate::timeseries`).
    pub time_series: Option<crate::timeseries::TimeSeries>,
}

/// The stored definitions of `db`'s views that match `filter`, with their record ids.
fn stored(catalog: &Catalog, db: &str, filter: Document) -> Result<Vec<(u64, Document)>> {
    let Some(views) = catalog.get(db, SYSTEM_VIEWS) else {
        return Ok(Vec::new());
    };
    let matcher = Matcher::new(&filter)?;
    let path = AccessPath::choose(&views, &filter, None, None)?;
    collect_matches(&views, &matcher, &path, None, Deadline::default())
}

/// The view `db.name`, if there is one. A name that is a collection is never a view
/// (both live in one namespace), so that case costs a catalog lookup only.
pub fn get(catalog: &Catalog, db: &str, name: &str) -> Result<Option<View>> {
    if catalog.get(db, name).is_some() {
        return Ok(None);
    }
    let found = stored(catalog, db, doc! { "_id": format!("{db}.{name}") })?;
    Ok(found
        .first()
        .and_then(|(_, stored)| View::from_stored(db, stored)))
}

/// Every view of `db`, in the order they were created.
pub fn list(catalog: &Catalog, db: &str) -> Result<Vec<View>> {
    Ok(stored(catalog, db, Document::new())?
        .iter()
        .filter_map(|(_, stored)| View::from_stored(db, stored))
        .collect())
}

/// The view `db.name` followed down to its collection; `None` when `name` is no view.
pub fn resolve(catalog: &Catalog, db: &str, name: &str) -> Result<Option<Resolved>> {
    let Some(view) = get(catalog, db, name)? else {
        return Ok(None);
    };
    let collation = view.collation.clone();
    let mut pipelines = vec![view.pipeline];
    let mut source = view.view_on;
    while let Some(inner) = get(catalog, db, &source)? {
        if pipelines.len() == MAX_VIEW_DEPTH {
            return Err(depth_exceeded());
        }
        pipelines.push(inner.pipeline);
        source = inner.view_on;
    }
    // A chain that ends at a time-series collection reads its buckets, unpacked.
    if let Some((series, _)) = crate::timeseries::get(catalog, db, &source) {
        let buckets = series.resolved(&source);
        pipelines.push(buckets.pipeline);
        source = buckets.collection;
    }
    Ok(Some(Resolved {
        collection: source,
        pipeline: pipelines.into_iter().rev().flatten().collect(),
        collation,
        time_series: None,
    }))
}

/// What a read of `db.name` runs over when it is no collection: a view's chain, or a
/// time-series collection's buckets.
pub fn resolve_readable(catalog: &Catalog, db: &str, name: &str) -> Result<Option<Resolved>> {
    if let Some(view) = resolve(catalog, db, name)? {
        return Ok(Some(view));
    }
    Ok(crate::timeseries::get(catalog, db, name).map(|(series, _)| series.resolved(name)))
}

fn depth_exceeded() -> Error {
    Error::new(
        ErrorCode::VIEW_DEPTH_LIMIT_EXCEEDED,
        format!("View depth too deep or view cycle detected. Maximum depth is {MAX_VIEW_DEPTH}"),
    )
}

/// Checks that `view` (new or changed) makes no cycle and no chain longer than
/// MongoDB allows, and that its collation is the one of the view it reads, if any.
pub fn check_graph(catalog: &Catalog, db: &str, view: &View) -> Result<()> {
    let mut depth = 1;
    let mut source = view.view_on.clone();
    let mut first = true;
    loop {
        if source == view.name {
            return Err(Error::new(
                ErrorCode::GRAPH_CONTAINS_CYCLE,
                format!("View cycle detected: {db}.{} reads itself", view.name),
            ));
        }
        let Some(inner) = get(catalog, db, &source)? else {
            return Ok(());
        };
        if first && inner.collation != view.collation {
            return Err(Error::new(
                ErrorCode::OPTION_NOT_SUPPORTED_ON_VIEW,
                format!(
                    "View {db}.{} has a collation that does not match the collation of \
                     view {db}.{source}",
                    view.name
                ),
            ));
        }
        first = false;
        depth += 1;
        if depth > MAX_VIEW_DEPTH {
            return Err(depth_exceeded());
        }
        source = inner.view_on;
    }
}

/// Which command defines a view: they check a `$changeStream` stage differently.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Definer {
    Create,
    CollMod,
}

/// A view's `viewOn`: a collection name of the same database (dots are part of the
/// name), with no length limit; `None` for null (not given).
pub fn parse_view_on(command: &str, value: &Bson) -> Result<Option<String>> {
    match value {
        Bson::Null => Ok(None),
        Bson::String(name) if name.is_empty() => Err(Error::bad_value(format!(
            "'{command}.viewOn' cannot be empty"
        ))),
        Bson::String(name)
            if name.contains('\0') || name.contains('$') || name.starts_with('.') =>
        {
            Err(Error::new(
                ErrorCode::INVALID_NAMESPACE,
                format!("invalid namespace for viewOn: {name}"),
            ))
        }
        Bson::String(name) => Ok(Some(name.clone())),
        other => Err(Error::type_mismatch(format!(
            "BSON field '{command}.viewOn' is the wrong type '{}', expected type 'string'",
            crate::request::type_name(other)
        ))),
    }
}

/// A view's `pipeline`: an array of stage documents (null elements dropped, as mongod
/// drops them; null for none), checked as a view definition.
pub fn parse_pipeline(command: &str, value: &Bson, definer: Definer) -> Result<Vec<Document>> {
    let stages = match value {
        Bson::Null => return Ok(Vec::new()),
        Bson::Array(stages) => stages,
        other => {
            return Err(Error::type_mismatch(format!(
                "BSON field '{command}.pipeline' is the wrong type '{}', expected type 'array'",
                crate::request::type_name(other)
            )))
        }
    };
    let mut parsed = Vec::with_capacity(stages.len());
    for stage in stages {
        match stage {
            Bson::Null => {}
            Bson::Document(stage) => parsed.push(stage.clone()),
            other => {
                return Err(Error::type_mismatch(format!(
                    "BSON field '{command}.pipeline' must be an array of objects, not '{}'",
                    crate::request::type_name(other)
                )))
            }
        }
    }
    check_pipeline(&parsed, definer)?;
    Ok(parsed)
}

/// What a view's pipeline may hold: no stage that writes (`$out`, `$merge`) or streams
/// changes, at most 16 MB, and otherwise what a collection's aggregation may run.
fn check_pipeline(stages: &[Document], definer: Definer) -> Result<()> {
    let size: usize = stages.iter().map(basalt_value::document_size_bytes).sum();
    if size > MAX_PIPELINE_BYTES {
        return Err(Error::new(
            ErrorCode::VIEW_PIPELINE_MAX_SIZE_EXCEEDED,
            format!("View pipeline exceeds maximum size; maximum size is {MAX_PIPELINE_BYTES}"),
        ));
    }
    for stage in stages {
        match stage.keys().next().map(String::as_str) {
            Some(name @ ("$out" | "$merge")) => {
                return Err(Error::new(
                    ErrorCode::OPTION_NOT_SUPPORTED_ON_VIEW,
                    format!("{name} cannot be used in a view definition"),
                ))
            }
            Some("$changeStream") if definer == Definer::CollMod => {
                return Err(Error::new(
                    ErrorCode::OPTION_NOT_SUPPORTED_ON_VIEW,
                    "$changeStream cannot be used in a view definition",
                ))
            }
            Some("$listSessions") => {
                return Err(Error::new(
                    ErrorCode::INVALID_NAMESPACE,
                    "$listSessions may only be run against config.system.sessions",
                ))
            }
            Some("$changeStream") => {
                return Err(Error::location(
                    40573,
                    "The $changeStream stage is not allowed in a view definition",
                ))
            }
            _ => {}
        }
    }
    basalt_agg::Pipeline::parse_aggregate(stages, None, false, None).map(|_| ())
}

/// Stores `view` in `db.system.views`, replacing the definition of the same name.
pub fn store(catalog: &Catalog, db: &str, view: &View, durability: Durability) -> Result<()> {
    let stored_view = view.to_stored(db);
    let id = format!("{db}.{}", view.name);
    catalog.write(db, SYSTEM_VIEWS, true, |writer| {
        let existing = stored(catalog, db, doc! { "_id": &id })?;
        match existing.first() {
            Some((record_id, old)) => writer.replace(*record_id, old, &stored_view, durability),
            None => writer
                .insert_many(&[&stored_view], true, durability)?
                .into_iter()
                .find_map(|outcome| outcome.err())
                .map_or(Ok(()), Err),
        }
    })?;
    Ok(())
}

/// Removes the view `db.name`; false when there was none.
pub fn remove(catalog: &Catalog, db: &str, name: &str, durability: Durability) -> Result<bool> {
    let id = format!("{db}.{name}");
    let removed = catalog.write(db, SYSTEM_VIEWS, false, |writer| {
        let existing = stored(catalog, db, doc! { "_id": &id })?;
        for (record_id, old) in &existing {
            writer.delete(*record_id, old, durability)?;
        }
        Ok(!existing.is_empty())
    })?;
    Ok(removed.unwrap_or(false))
}

/// The error of a command that needs a collection's storage, run on a view.
pub fn not_a_collection(db: &str, name: &str) -> Error {
    Error::new(
        ErrorCode::COMMAND_NOT_SUPPORTED_ON_VIEW,
        format!("Namespace {db}.{name} is a view, not a collection"),
    )
}
