//! Geo queries in the server: the cells of a geo index a query reads (for `$geoWithin`,
//! `$geoIntersects`, and `$near` within a `$maxDistance`), which geo index a `$geoNear`
//! stage (or a find's `$near` and `$nearSphere`) measures by, and a find with `$near`
//! run as the aggregation MongoDB makes of it (`$geoNear` with the rest of the filter
//! as its query, then the find's sort, skip, limit and projection).
//!
//! MongoDB needs a geo index to order by distance, and which one decides the units:
//! a GeoJSON point needs a `2dsphere` index (meters), a legacy pair on the plane a `2d`
//! index (its units), a legacy pair on the sphere either (radians). Without a fitting
//! index the query fails as MongoDB's does (291 NoQueryExecutionPlans; a `$geoNear`
//! that names no key and finds no geo index at all, 27 IndexNotFound).

use basalt_catalog::{Collection, GeoIndex, IndexSpec, GEO_CELL_FIELD};
use basalt_error::{Error, ErrorCode, Result};
use basalt_plan::{IndexScanPlan, Plan};
use basalt_query::geo::{self, NearPoint, Region};
use basalt_query::{Matcher, NearQuery};
use bson::{doc, Bson, Document};

/// A geo index and the scans of its cells that reach a query's candidates.
#[derive(Clone, Debug, PartialEq)]
pub struct CellScan {
    pub index: IndexSpec,
    pub scans: Vec<IndexScanPlan>,
}

/// The scans of a geo index that reach every candidate of the filter's geo condition
/// on a top-level field: the ranges of the cells covering the region it asks about and
/// the entries of their ancestors (`basalt_query::geo::cells`). `None` when no field
/// has both a geo index (visible, not partial) and a condition whose region is bounded.
pub(crate) fn cell_scans(collection: &Collection, filter: &Document) -> Result<Option<CellScan>> {
    let meta = collection.meta();
    for (path, value) in filter {
        let Bson::Document(ops) = value else {
            continue;
        };
        let Some((index, geo)) = meta.indexes.iter().find_map(|index| {
            let geo = index.geo()?;
            (geo.path == *path && !index.hidden && index.partial.is_none()).then_some((index, geo))
        }) else {
            continue;
        };
        let bounds = if let Some(operand) = ops.get("$geoWithin").or_else(|| ops.get("$within")) {
            Region::parse(operand)?.bounds()
        } else if let Some(operand) = ops.get("$geoIntersects") {
            geo::intersects_operand(operand)?.bounds()
        } else if ops.contains_key("$near") || ops.contains_key("$nearSphere") {
            let near = NearQuery::parse(ops)?;
            near.max_distance
                .and_then(|max| near.point.bounds_within(max))
        } else {
            None
        };
        let Some(bounds) = bounds else {
            continue;
        };
        let (ranges, ancestors) = geo.grid.query(&bounds);
        let mut branches = Vec::with_capacity(ranges.len() + 1);
        if !ancestors.is_empty() {
            branches.push(Bson::Document(
                doc! { GEO_CELL_FIELD: { "$in": ancestors } },
            ));
        }
        for (start, end) in ranges {
            // After the last cell name there are only longer names of 3s.
            let end = end.unwrap_or_else(|| "4".to_string());
            branches.push(Bson::Document(
                doc! { GEO_CELL_FIELD: { "$gte": start, "$lt": end } },
            ));
        }
        let cells = index.geo_cells_index();
        let planned = basalt_plan::plan(
            std::slice::from_ref(&cells),
            &doc! { "$or": branches },
            index.collation.as_ref(),
        );
        let scans = match planned.winner {
            Plan::Or(scans) => scans,
            Plan::IndexScan(scan) => vec![*scan],
            Plan::CollectionScan => continue,
        };
        return Ok(Some(CellScan {
            index: index.clone(),
            scans,
        }));
    }
    Ok(None)
}

/// The geo field `$geoNear` measures: `key`'s, or the collection's only 2d index's
/// (else its only 2dsphere index's) when no key is given. The index must serve `point`.
pub(crate) fn geo_near_key(
    collection: &Collection,
    key: Option<&str>,
    point: &NearPoint,
) -> Result<String> {
    let meta = collection.meta();
    let geo: Vec<(&IndexSpec, GeoIndex)> = meta
        .indexes
        .iter()
        .filter_map(|index| index.geo().map(|geo| (index, geo)))
        .collect();
    let candidates: Vec<&(&IndexSpec, GeoIndex)> = match key {
        Some(key) => geo.iter().filter(|(_, g)| g.path == key).collect(),
        None => {
            if geo.is_empty() {
                return Err(Error::new(
                    ErrorCode::INDEX_NOT_FOUND,
                    "There is no index available for this geoNear",
                ));
            }
            let flat: Vec<_> = geo.iter().filter(|(_, g)| !g.sphere).collect();
            let sphere: Vec<_> = geo.iter().filter(|(_, g)| g.sphere).collect();
            match (flat.len(), sphere.len()) {
                (1, _) => flat,
                (0, 1) => sphere,
                _ => {
                    return Err(Error::new(
                        ErrorCode::INDEX_NOT_FOUND,
                        "There is more than one geo index; specify the 'key' to use",
                    ))
                }
            }
        }
    };
    let fitting = candidates.iter().find(|(_, g)| {
        if point.geojson {
            g.sphere
        } else {
            point.spherical || !g.sphere
        }
    });
    let Some((index, geo)) = fitting else {
        return Err(Error::new(
            ErrorCode::NO_QUERY_EXECUTION_PLANS,
            "error processing query: planner returned error :: caused by :: unable to find \
             index for $geoNear query",
        ));
    };
    if !geo.sphere && !point.geojson {
        let (min, max) = index.flat_range();
        let (x, y) = point.point.flat;
        if !(min..=max).contains(&x) || !(min..=max).contains(&y) {
            return Err(Error::location(
                16433,
                format!("point not in interval of [ {min}, {max} ]"),
            ));
        }
    }
    Ok(geo.path.clone())
}

/// The aggregation a find with `$near`/`$nearSphere` runs as, when its filter has one:
/// `$geoNear` over the index that serves it, then the find's other stages.
pub(crate) fn find_pipeline(
    collection: &Collection,
    body: &Document,
    filter: &Document,
) -> Result<Option<Vec<Bson>>> {
    if without_near(filter) == *filter {
        return Ok(None);
    }
    let scope = crate::exec::let_scope(&crate::request::Fields::new(body))?;
    let matcher = Matcher::with_scope(filter, &scope)?;
    let Some((path, near)) = matcher.near() else {
        return Ok(None);
    };
    let key = geo_near_key(collection, Some(path), &near.point)?;
    let (x, y) = near.point.point.flat;
    let mut stage = doc! {
        "near": if near.point.geojson {
            Bson::Document(doc! { "type": "Point", "coordinates": [x, y] })
        } else {
            bson::bson!([x, y])
        },
        "key": key,
        "spherical": near.point.spherical,
        "query": without_near(filter),
    };
    if let Some(min) = near.min_distance {
        stage.insert("minDistance", min);
    }
    if let Some(max) = near.max_distance {
        stage.insert("maxDistance", max);
    }
    let mut rest = body.clone();
    rest.remove("filter");
    let mut stages = vec![Bson::Document(doc! { "$geoNear": stage })];
    stages.extend(crate::commands::find_stages(&rest)?);
    Ok(Some(stages))
}

/// `filter` without its `$near`/`$nearSphere` condition (at the top or in an `$and`).
fn without_near(filter: &Document) -> Document {
    let mut out = Document::new();
    for (name, value) in filter {
        match (name.as_str(), value) {
            ("$and", Bson::Array(branches)) => {
                let branches: Vec<Bson> = branches
                    .iter()
                    .map(|b| match b {
                        Bson::Document(d) => Bson::Document(without_near(d)),
                        other => other.clone(),
                    })
                    .collect();
                out.insert(name.clone(), branches);
            }
            (_, Bson::Document(ops))
                if ops.contains_key("$near") || ops.contains_key("$nearSphere") => {}
            _ => {
                out.insert(name.clone(), value.clone());
            }
        }
    }
    out
}
