//! The plan cache commands: `planCacheClear` forgets the planner's cached choices (all,
//! or one query shape's), and index filters, which restrict the indexes the planner
//! considers for one query shape (query, sort, projection and collation, values aside)
//! over any `hint`: `planCacheSetFilter`, `planCacheListFilters`,
//! `planCacheClearFilters`. Both live with the collection's plan cache
//! (`basalt_catalog::PlanCache`) and, as in mongod, in memory only.

use super::Ctx;
use crate::request::type_name;
use basalt_catalog::{Collection, IndexFilter};
use basalt_error::{Error, ErrorCode, Result};
use basalt_plan::QueryShapeParts;
use basalt_value::Collation;
use bson::{doc, Bson, Document};
use std::sync::Arc;

pub fn plan_cache_set_filter(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let name = collection_name(body)?;
    refuse_view(ctx, name)?;
    let Some(collection) = ctx.server.catalog.get(ctx.db, name) else {
        return Err(Error::bad_value(format!(
            "no such collection: {}.{name}",
            ctx.db
        )));
    };
    let query = match body.get("query") {
        Some(Bson::Document(query)) => query.clone(),
        Some(Bson::Array(_)) => Document::new(),
        Some(_) => return Err(Error::bad_value("required field query must be an object")),
        None => return Err(Error::bad_value("required field query missing")),
    };
    let shape_part = |field: &str| match body.get(field) {
        None => Ok(Document::new()),
        Some(Bson::Document(part)) => Ok(part.clone()),
        Some(Bson::Array(_)) => Ok(Document::new()),
        Some(_) => Err(Error::bad_value(format!(
            "optional field {field} must be an object"
        ))),
    };
    let (sort, projection) = (shape_part("sort")?, shape_part("projection")?);
    let collation = match body.get("collation") {
        None => None,
        Some(Bson::Document(spec)) if spec.is_empty() => {
            return Err(Error::bad_value("collation spec must not be empty"))
        }
        Some(Bson::Document(spec)) => {
            if !spec.contains_key("locale") {
                return Err(Error::location(
                    40414,
                    "BSON field 'locale' is missing but a required field",
                ));
            }
            Collation::parse(spec)?;
            Some(spec.clone())
        }
        Some(_) => return Err(Error::bad_value("collation must be an object")),
    };
    let indexes = match body.get("indexes") {
        Some(Bson::Array(indexes)) if !indexes.is_empty() => indexes.clone(),
        Some(Bson::Array(_)) => {
            return Err(Error::bad_value(
                "the list of indexes is empty: it must name at least one",
            ))
        }
        Some(_) => return Err(Error::bad_value("required field indexes must be an array")),
        None => return Err(Error::bad_value("required field indexes missing")),
    };
    if indexes
        .iter()
        .any(|index| !matches!(index, Bson::Document(_) | Bson::String(_)))
    {
        return Err(Error::bad_value(
            "each index must be a key pattern or an index name",
        ));
    }
    let filter = IndexFilter {
        query,
        sort,
        projection,
        collation,
        indexes,
    };
    collection
        .plan_cache()
        .set_filter(filter_shape(&filter)?, filter);
    Ok(Document::new())
}

pub fn plan_cache_list_filters(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let name = collection_name(body)?;
    refuse_view(ctx, name)?;
    let filters: Vec<Bson> = match ctx.server.catalog.get(ctx.db, name) {
        Some(collection) => collection
            .plan_cache()
            .filters()
            .into_iter()
            .map(|filter| {
                let mut entry = doc! {
                    "query": filter.query,
                    "sort": filter.sort,
                    "projection": filter.projection,
                };
                if let Some(collation) = filter.collation {
                    entry.insert("collation", collation);
                }
                entry.insert("indexes", filter.indexes);
                Bson::Document(entry)
            })
            .collect(),
        None => Vec::new(),
    };
    Ok(doc! { "filters": filters })
}

pub fn plan_cache_clear_filters(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let Some(collection) = checked_collection(ctx, body)? else {
        return Ok(Document::new());
    };
    match shape_of(body) {
        Some(filter) => collection
            .plan_cache()
            .clear_filters(Some(&filter_shape(&filter)?)),
        None => collection.plan_cache().clear_filters(None),
    }
    Ok(Document::new())
}

pub fn plan_cache_clear(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let Some(collection) = checked_collection(ctx, body)? else {
        return Ok(Document::new());
    };
    match shape_of(body) {
        Some(shape) => {
            let collation = collation_of(shape.collation.as_ref())?;
            let parts = QueryShapeParts {
                sort: Some(&shape.sort).filter(|s| !s.is_empty()),
                collation: collation.as_ref(),
            };
            collection
                .plan_cache()
                .remove(&basalt_plan::query_shape(&shape.query, parts));
        }
        None => collection.plan_cache().clear(),
    }
    Ok(Document::new())
}

/// The collection a clearing command names (none: nothing to clear), refusing views.
fn checked_collection(ctx: &Ctx<'_>, body: &Document) -> Result<Option<Arc<Collection>>> {
    let name = collection_name(body)?;
    refuse_view(ctx, name)?;
    Ok(ctx.server.catalog.get(ctx.db, name))
}

/// The shape a clearing command names with `query` (and `sort`, `projection`,
/// `collation`); `None` without a query. Parts of the wrong type name nothing.
fn shape_of(body: &Document) -> Option<IndexFilter> {
    let part = |field: &str| match body.get(field) {
        Some(Bson::Document(part)) => part.clone(),
        _ => Document::new(),
    };
    let Some(Bson::Document(query)) = body.get("query") else {
        return None;
    };
    Some(IndexFilter {
        query: query.clone(),
        sort: part("sort"),
        projection: part("projection"),
        collation: match body.get("collation") {
            Some(Bson::Document(spec)) if !spec.is_empty() => Some(spec.clone()),
            _ => None,
        },
        indexes: Vec::new(),
    })
}

fn collation_of(spec: Option<&Document>) -> Result<Option<Collation>> {
    match spec {
        Some(spec) => Collation::parse(spec).or(Ok(None)),
        None => Ok(None),
    }
}

/// The shape key of an index filter, as queries look theirs up
/// (`crate::exec::filtered_indexes`).
fn filter_shape(filter: &IndexFilter) -> Result<Vec<u8>> {
    let collation = collation_of(filter.collation.as_ref())?;
    let parts = QueryShapeParts {
        sort: Some(&filter.sort).filter(|s| !s.is_empty()),
        collation: collation.as_ref(),
    };
    Ok(basalt_plan::index_filter_shape(
        &filter.query,
        parts,
        Some(&filter.projection),
    ))
}

/// The collection named by the command's first field: a non-empty string without NUL.
fn collection_name(body: &Document) -> Result<&str> {
    let invalid = |why: String| Error::new(ErrorCode::INVALID_NAMESPACE, why);
    match body.values().next() {
        Some(Bson::String(name)) if name.is_empty() || name.contains('\0') => {
            Err(invalid(format!("Invalid namespace specified '{name}'")))
        }
        Some(Bson::String(name)) => Ok(name),
        Some(other) => Err(invalid(format!(
            "collection name has invalid type {}",
            type_name(other)
        ))),
        None => Err(invalid("no collection named".into())),
    }
}

/// Views and time-series collections have no plan cache of their own.
fn refuse_view(ctx: &Ctx<'_>, name: &str) -> Result<()> {
    let catalog = &ctx.server.catalog;
    if crate::views::get(catalog, ctx.db, name)?.is_some()
        || crate::timeseries::get(catalog, ctx.db, name).is_some()
    {
        return Err(Error::new(
            ErrorCode::COMMAND_NOT_SUPPORTED_ON_VIEW,
            format!("{}.{name} is a view, which has no plan cache", ctx.db),
        ));
    }
    Ok(())
}
