//! Commands on a view (see `crate::views` for how views are kept).
//!
//! A read of a view (`find`, `aggregate`, `count`, `distinct`, and their `explain`)
//! runs as MongoDB runs it: as an aggregation over the collection at the end of the
//! view's chain, whose pipeline is the views' followed by the reader's. A find's filter,
//! sort, skip, limit and projection become `$match`, `$sort`, `$skip`, `$limit` and
//! `$project`, so the planner sees the view's leading stages and the reader's together
//! (a view's `$match` picks the index). The reply names the view, as do its cursor's
//! getMores. Every read runs under the view's collation; a different one is refused.
//! Commands that need a collection's own storage (writes, indexes, statistics) get
//! CommandNotSupportedOnView.

use super::aggregate::{aggregate_as, results, ViewCursor};
use super::{Ctx, Reply};
use crate::request::{is_requested, Fields};
use crate::views::{self, Resolved};
use basalt_error::{Error, ErrorCode, Result};
use basalt_value::{Collation, DistinctValues};
use bson::{doc, Bson, Document};

/// Commands that need a collection's storage: refused on a view.
const NOT_ON_VIEWS: &[&str] = &[
    "insert",
    "update",
    "delete",
    "findAndModify",
    "createIndexes",
    "dropIndexes",
    "listIndexes",
    "collStats",
    "validate",
    "mapReduce",
    "renameCollection",
    "convertToCapped",
    "cloneCollectionAsCapped",
];

/// Commands a time-series collection refuses as a view does.
const NOT_ON_TIME_SERIES: &[&str] = &[
    "renameCollection",
    "convertToCapped",
    "cloneCollectionAsCapped",
    "mapReduce",
];

/// Find options that have no aggregation counterpart: refused on a view, as by mongod.
const NOT_IN_AGGREGATION: &[&str] = &[
    "min",
    "max",
    "returnKey",
    "showRecordId",
    "tailable",
    "awaitData",
    "noCursorTimeout",
    "allowPartialResults",
    "readOnce",
    "allowSpeculativeMajorityRead",
];

/// A find's own fields, which its aggregation does not take over.
const FIND_ONLY: &[&str] = &[
    "find",
    "filter",
    "sort",
    "skip",
    "limit",
    "projection",
    "batchSize",
    "singleBatch",
    "collation",
];

/// CommandNotSupportedOnView when `command` needs a collection's storage and names a view.
pub(super) fn refuse_on_view(ctx: &Ctx<'_>, command: &str, body: &Document) -> Result<()> {
    if !NOT_ON_VIEWS.contains(&command) {
        return Ok(());
    }
    let Some(Bson::String(target)) = body.get(command) else {
        return Ok(());
    };
    let (db, name) = match command {
        "renameCollection" => target.split_once('.').unwrap_or((target, "")),
        _ => (ctx.db, target.as_str()),
    };
    if views::get(&ctx.server.catalog, db, name)?.is_some() {
        return Err(views::not_a_collection(db, name));
    }
    // A time-series collection is a view of its buckets to these commands too.
    let series = || crate::timeseries::get(&ctx.server.catalog, db, name).is_some();
    if NOT_ON_TIME_SERIES.contains(&command) && series() {
        return Err(views::not_a_collection(db, name));
    }
    // findAndModify may only remove a measurement, as in MongoDB.
    let removes = body.get_bool("remove").unwrap_or(false);
    if command == "findAndModify" && !removes && series() {
        return Err(Error::new(
            ErrorCode::INVALID_OPTIONS,
            "Cannot perform a findAndModify update on a time-series collection",
        ));
    }
    Ok(())
}

/// A read of a view: the command, its body and the view resolved.
pub(super) struct ViewRead<'b> {
    command: &'b str,
    body: &'b Document,
    name: &'b str,
    view: Resolved,
}

/// The read of a view `command` is, if it is one (an `explain` of one too).
pub(super) fn read_of_view<'b>(
    ctx: &Ctx<'_>,
    command: &'b str,
    body: &'b Document,
) -> Result<Option<ViewRead<'b>>> {
    let (command, body) = match (command, body.get("explain")) {
        ("explain", Some(Bson::Document(inner))) => match inner.keys().next() {
            Some(name) => (name.as_str(), inner),
            None => return Ok(None),
        },
        _ => (command, body),
    };
    if !matches!(command, "find" | "aggregate" | "count" | "distinct") {
        return Ok(None);
    }
    let Some(Bson::String(name)) = body.get(command) else {
        return Ok(None);
    };
    let resolved = views::resolve_readable(&ctx.server.catalog, ctx.db, name)?;
    Ok(resolved.map(|view| ViewRead {
        command,
        body,
        name,
        view,
    }))
}

impl ViewRead<'_> {
    /// Runs the read (`explain` is the outer command when it is explained).
    pub(super) fn run(self, ctx: &Ctx<'_>, outer: &Document) -> Result<Reply> {
        let aggregation = self.as_aggregation()?;
        if outer.contains_key("explain") {
            let mut explain = outer.clone();
            explain.insert("explain", aggregation);
            return super::explain::explain(ctx, &explain).map(Reply::Document);
        }
        let collection = self.view.collection.as_str();
        match self.command {
            "find" | "aggregate" => {
                let view = ViewCursor {
                    namespace: format!("{}.{}", ctx.db, self.name),
                    single_batch: Fields::new(self.body).bool_or("singleBatch", false)?,
                };
                aggregate_as(ctx, &aggregation, Some(view)).map(Reply::Encoded)
            }
            "count" => {
                let mut n = 0i64;
                for_each_result(ctx, &aggregation, collection, |doc| {
                    n = doc.get("n").and_then(basalt_value::as_i64).unwrap_or(0);
                })?;
                let n = i32::try_from(n).map_or(Bson::Int64(n), Bson::Int32);
                Ok(Reply::Document(doc! { "n": n }))
            }
            _ => {
                let key = super::distinct::key(self.body)?;
                let path = basalt_value::FieldPath::parse(&key);
                let collation = match &self.view.collation {
                    Some(spec) => Collation::parse(spec)?,
                    None => None,
                };
                let mut values = DistinctValues::new(collation.as_ref());
                for_each_result(ctx, &aggregation, collection, |doc| {
                    values.insert_reached(&path, &doc);
                })?;
                // mongod's reply to a distinct on a view has an integer `ok`.
                let reply = doc! { "values": values.into_vec(), "ok": 1 };
                Ok(Reply::Complete(crate::cursors::encode(&reply)?))
            }
        }
    }

    /// The read as an aggregate command on the view's collection.
    fn as_aggregation(&self) -> Result<Document> {
        let fields = Fields::new(self.body);
        let collation = self.collation()?;
        let mut pipeline: Vec<Bson> = self
            .view
            .pipeline
            .iter()
            .cloned()
            .map(Bson::Document)
            .collect();
        let mut stage = |name: &str, value: Bson| pipeline.push(Bson::from(doc! { name: value }));
        let mut user_stages = Vec::new();
        let mut appended: Vec<Bson> = Vec::new();
        let mut aggregation = doc! { "aggregate": &self.view.collection };
        match self.command {
            "aggregate" => {
                user_stages = fields.documents("pipeline")?;
                // A time-series read's `$geoNear` measures the measurements its query
                // keeps: the query goes first, as the unpacking's filter.
                let query = self
                    .time_series_geo_near()
                    .and_then(|g| g.get_document("query").ok());
                if let Some(query) = query.filter(|q| !q.is_empty()) {
                    stage("$match", Bson::Document(query.clone()));
                }
                copy_except(
                    &mut aggregation,
                    self.body,
                    &["aggregate", "pipeline", "collation"],
                );
            }
            "find" => {
                appended = find_stages(self.body)?;
                find_cursor(self.body, &mut aggregation)?;
            }
            "count" => {
                if let Some(query) = fields.document_opt("query")?.filter(|q| !q.is_empty()) {
                    stage("$match", Bson::Document(query.clone()));
                }
                if let Some(skip) = fields.non_negative_opt("skip")?.filter(|n| *n > 0) {
                    stage("$skip", Bson::Int64(skip));
                }
                if let Some(limit) = super::count::count_limit(&fields)? {
                    stage("$limit", Bson::Int64(limit));
                }
                stage("$count", Bson::from("n"));
                copy_except(
                    &mut aggregation,
                    self.body,
                    &["count", "query", "skip", "limit", "collation"],
                );
                aggregation.insert("cursor", Document::new());
            }
            _ => {
                if let Some(query) = fields.document_opt("query")?.filter(|q| !q.is_empty()) {
                    stage("$match", Bson::Document(query.clone()));
                }
                copy_except(
                    &mut aggregation,
                    self.body,
                    &["distinct", "key", "query", "collation"],
                );
                aggregation.insert("cursor", Document::new());
            }
        }
        pipeline.extend(user_stages.into_iter().cloned().map(Bson::Document));
        pipeline.extend(appended);
        if let Some(buckets) = self.bucket_filter()? {
            pipeline.insert(0, Bson::from(doc! { "$match": buckets }));
        }
        aggregation.insert("pipeline", pipeline);
        if let Some(collation) = collation {
            aggregation.insert("collation", collation);
        }
        Ok(aggregation)
    }

    /// For a read of a time-series collection, the filter on its buckets that its own
    /// filter implies (a find's or count's, or an aggregation's leading `$match`).
    fn bucket_filter(&self) -> Result<Option<Document>> {
        let Some(series) = &self.view.time_series else {
            return Ok(None);
        };
        let fields = Fields::new(self.body);
        let filter = match self.command {
            "find" => fields.document_opt("filter")?,
            "aggregate" => match self.time_series_geo_near() {
                Some(geo_near) => geo_near.get_document("query").ok(),
                None => fields
                    .documents("pipeline")?
                    .first()
                    .and_then(|stage| stage.get_document("$match").ok()),
            },
            _ => fields.document_opt("query")?,
        };
        Ok(filter.and_then(|filter| series.bucket_filter(filter)))
    }

    /// The specification of a time-series aggregation's leading `$geoNear`.
    fn time_series_geo_near(&self) -> Option<&Document> {
        self.view.time_series.as_ref()?;
        let stages = self.body.get_array("pipeline").ok()?;
        stages.first()?.as_document()?.get_document("$geoNear").ok()
    }

    /// The view's collation, which the read runs under; OptionNotSupportedOnView when
    /// the read asks for another.
    fn collation(&self) -> Result<Option<Document>> {
        let Some(asked) = Fields::new(self.body).collation()? else {
            return match self.body.get("collation") {
                // `{locale: "simple"}`: the simple collation, which matches a view without one.
                Some(_) if self.view.collation.is_some() => Err(self.collation_conflict()),
                _ => Ok(self.view.collation.clone()),
            };
        };
        match &self.view.collation {
            Some(own) if own == asked.spec() => Ok(Some(own.clone())),
            _ => Err(self.collation_conflict()),
        }
    }

    fn collation_conflict(&self) -> Error {
        Error::new(
            ErrorCode::OPTION_NOT_SUPPORTED_ON_VIEW,
            format!(
                "Cannot override a view's default collation; the view {} has a different one",
                self.name
            ),
        )
    }
}

/// A find's filter, sort, skip, limit and projection as aggregation stages, as MongoDB
/// rewrites a find on a view: find options without a stage are refused. A projection's
/// `{$meta: "textScore"}` fields are added to the documents the rest of it shapes, as a
/// find projection adds them.
pub(crate) fn find_stages(body: &Document) -> Result<Vec<Bson>> {
    let fields = Fields::new(body);
    for option in NOT_IN_AGGREGATION {
        if body.get(*option).is_some_and(is_requested) {
            return Err(Error::new(
                ErrorCode::INVALID_PIPELINE_OPERATOR,
                format!("Option {option} not supported in aggregation."),
            ));
        }
    }
    let mut stages = Vec::new();
    let mut stage = |name: &str, value: Bson| stages.push(Bson::from(doc! { name: value }));
    if let Some(filter) = fields.document_opt("filter")?.filter(|f| !f.is_empty()) {
        stage("$match", Bson::Document(filter.clone()));
    }
    if let Some(sort) = fields.document_opt("sort")?.filter(|s| !s.is_empty()) {
        if sort.contains_key("$natural") {
            return Err(Error::new(
                ErrorCode::INVALID_PIPELINE_OPERATOR,
                "Sort option $natural not supported in aggregation.",
            ));
        }
        stage("$sort", Bson::Document(sort.clone()));
    }
    if let Some(skip) = fields.non_negative_opt("skip")?.filter(|n| *n > 0) {
        stage("$skip", Bson::Int64(skip));
    }
    if let Some(limit) = fields.non_negative_opt("limit")?.filter(|n| *n > 0) {
        stage("$limit", Bson::Int64(limit));
    }
    if let Some(projection) = fields.document_opt("projection")?.filter(|p| !p.is_empty()) {
        let is_meta = |value: &Bson| matches!(value, Bson::Document(d) if d.contains_key("$meta"));
        let (meta, rest): (Document, Document) = (
            projection
                .iter()
                .filter(|(_, v)| is_meta(v))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            projection
                .iter()
                .filter(|(_, v)| !is_meta(v))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        );
        let excludes = rest
            .values()
            .all(|v| matches!(v, Bson::Boolean(false)) || basalt_value::as_f64(v) == Some(0.0));
        if meta.is_empty() || (!rest.is_empty() && !excludes) {
            stage("$project", Bson::Document(projection.clone()));
        } else {
            if !rest.is_empty() {
                stage("$project", Bson::Document(rest));
            }
            stage("$addFields", Bson::Document(meta));
        }
    }
    Ok(stages)
}

/// The rest of a find as its aggregation's fields: its batch size as `cursor`, and the
/// options that are not stages.
pub(super) fn find_cursor(body: &Document, aggregation: &mut Document) -> Result<()> {
    let mut cursor = Document::new();
    if let Some(batch_size) = Fields::new(body).non_negative_opt("batchSize")? {
        cursor.insert("batchSize", batch_size);
    }
    copy_except(aggregation, body, FIND_ONLY);
    aggregation.insert("cursor", cursor);
    Ok(())
}

/// Copies `from`'s fields into `to`, but the `skipped` ones.
fn copy_except(to: &mut Document, from: &Document, skipped: &[&str]) {
    for (key, value) in from {
        if !skipped.contains(&key.as_str()) {
            to.insert(key.clone(), value.clone());
        }
    }
}

/// Runs `aggregation` over `collection` and hands each result to `visit`.
fn for_each_result(
    ctx: &Ctx<'_>,
    aggregation: &Document,
    collection: &str,
    mut visit: impl FnMut(Document),
) -> Result<()> {
    let (_, mut source, _) = results(ctx, aggregation, Some(collection))?;
    loop {
        let (batch, exhausted) = source.next_batch(None)?;
        for raw in batch {
            visit(Document::try_from(raw.as_ref())?);
        }
        if exhausted {
            return Ok(());
        }
    }
}
