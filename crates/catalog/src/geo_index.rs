//! Geospatial indexes: `2dsphere` (GeoJSON and legacy pairs on the sphere), `2d`
//! (legacy pairs on a plane bounded by the index's `min` and `max`), and the
//! `2dsphere_bucket` index a time-series collection's `2dsphere` index on a measurement
//! field is (the cells covering every geometry of a bucket's column).
//!
//! An entry per quadtree cell covering the document's geometry (`basalt_query::geo::cells`),
//! keyed by the cell's name in place of the geo field, then the values of the index's
//! other fields. A document whose geo field is missing or null has no entries (geo
//! indexes are sparse, as MongoDB's 2dsphere version 2+), one whose value is not a
//! geometry the index can hold is refused with MongoDB's codes.

use crate::index::{DocumentKeys, IndexSpec};
use basalt_error::{Error, Result};
use basalt_query::geo::cells::{Bounds, Grid};
use basalt_query::geo::{self, Geometry};
use bson::{Bson, Document};

/// The key pattern field a geo index's cells are planned under (see
/// [`IndexSpec::geo_cells_index`]).
pub const GEO_CELL_FIELD: &str = "_geoCell";

/// The 2dsphere index version MongoDB creates (and echoes in `listIndexes`).
pub const SPHERE_INDEX_VERSION: i32 = 3;

/// What a geo index is over.
#[derive(Clone, Debug)]
pub struct GeoIndex {
    /// The geo field's path and its position in the key pattern.
    pub path: String,
    pub position: usize,
    /// `2dsphere` (else `2d`).
    pub sphere: bool,
    /// A `2dsphere_bucket` index: the path holds a bucket's column of geometries.
    pub bucket: bool,
    pub grid: Grid,
}

/// The index type of a time-series collection's `2dsphere` index on a measurement
/// field, as MongoDB names it: over the buckets' column of that field (`data.<field>`),
/// each bucket's entries the cells covering all the points of its measurements.
pub const SPHERE_BUCKET: &str = "2dsphere_bucket";

/// Whether a key pattern value names a geo index type.
pub fn is_geo(direction: &Bson) -> bool {
    matches!(direction, Bson::String(kind) if kind == "2dsphere" || kind == "2d" || kind == SPHERE_BUCKET)
}

impl IndexSpec {
    /// A geo index's definition; `None` for any other index.
    pub fn geo(&self) -> Option<GeoIndex> {
        let (position, (path, direction)) = self
            .key
            .iter()
            .enumerate()
            .find(|(_, (_, direction))| is_geo(direction))?;
        let bucket = direction.as_str() == Some(SPHERE_BUCKET);
        let sphere = bucket || direction.as_str() == Some("2dsphere");
        let domain = if sphere {
            Bounds::SPHERE
        } else {
            let (min, max) = self.flat_range();
            Bounds {
                min: (min, min),
                max: (max, max),
            }
        };
        Some(GeoIndex {
            path: path.clone(),
            position,
            sphere,
            bucket,
            grid: Grid { domain },
        })
    }

    /// A `2d` index's `[min, max)` range of coordinates (default `[-180, 180)`).
    pub fn flat_range(&self) -> (f64, f64) {
        let bound = |name: &str, default: f64| {
            self.echoed
                .get(name)
                .and_then(basalt_value::as_f64)
                .unwrap_or(default)
        };
        (bound("min", -180.0), bound("max", 180.0))
    }

    /// The index as the planner sees it for a geo query: the geo field's place in the
    /// key pattern taken by [`GEO_CELL_FIELD`], whose values are cell names.
    pub fn geo_cells_index(&self) -> IndexSpec {
        let mut planned = self.clone();
        planned.key = self
            .key
            .iter()
            .map(|(path, direction)| {
                if is_geo(direction) {
                    (GEO_CELL_FIELD.to_string(), Bson::Int32(1))
                } else {
                    (path.clone(), direction.clone())
                }
            })
            .collect();
        // Each entry holds one cell, so the bounds of a cell's range intersect (a
        // document with several cells is fetched once by the scan of cells).
        planned.multikey = false;
        planned
    }

    /// A geo index's entries for `doc`: one per cell covering its geometry.
    pub(crate) fn geo_keys(&self, index: &GeoIndex, doc: &Document) -> Result<DocumentKeys> {
        let none = DocumentKeys {
            keys: Vec::new(),
            multikey: false,
        };
        let value = match basalt_value::path::get_path(doc, &index.path) {
            None | Some(Bson::Null) => return Ok(none),
            Some(value) => value,
        };
        let sphere_points = |value: &Bson| {
            Geometry::for_sphere_index(value)
                .map(|geometry| geometry.lng_lats())
                .map_err(|e| {
                    Error::location(
                        16755,
                        format!(
                            "Can't extract geo keys: {doc} :: caused by :: {}",
                            e.message
                        ),
                    )
                })
        };
        let points = if index.bucket {
            let mut points = Vec::new();
            for value in value.as_document().into_iter().flat_map(Document::values) {
                if !matches!(value, Bson::Null) {
                    points.extend(sphere_points(value)?);
                }
            }
            points
        } else if index.sphere {
            sphere_points(value)?
        } else {
            vec![self.flat_point(value, doc)?]
        };
        let geo_field = self.key.keys().nth(index.position).cloned();
        let keys = self.term_keys(doc, index.grid.keys(&points), |field, cell| {
            (Some(field) == geo_field.as_deref()).then(|| Bson::String(cell.clone()))
        })?;
        Ok(DocumentKeys {
            multikey: keys.len() > 1,
            keys,
        })
    }

    /// The point a `2d` index holds: a legacy pair within `[min, max)`.
    fn flat_point(&self, value: &Bson, doc: &Document) -> Result<(f64, f64)> {
        let point = geo::legacy_point(value, true).map_err(|_| {
            Error::location(
                16804,
                format!("location object expected, location array not in correct format: {doc}"),
            )
        })?;
        let (min, max) = self.flat_range();
        let (x, y) = point.flat;
        if !(min..max).contains(&x) || !(min..max).contains(&y) {
            return Err(Error::location(
                13027,
                format!("point not in interval of [ {min}, {max} ) :: caused by :: {doc}"),
            ));
        }
        Ok((x, y))
    }
}
