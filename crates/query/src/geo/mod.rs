//! Geospatial data and queries, as MongoDB defines them: GeoJSON geometries (`Point`,
//! `LineString`, `Polygon` with holes, the `Multi*` kinds and `GeometryCollection`) on
//! the sphere, legacy coordinate pairs (`[x, y]` or `{x, y}`) on a plane, the regions of
//! `$geoWithin` (`$geometry`, `$box`, `$polygon`, `$center`, `$centerSphere`), the
//! geometries of `$geoIntersects`, and the points `$near`, `$nearSphere` and `$geoNear`
//! measure distances from.
//!
//! Parsing validates as MongoDB does (coordinates in range, rings closed and not
//! self-intersecting, holes inside their shell) and fails with BadValue; a stored value
//! that is not a geometry simply does not match (a geo index refuses it instead, see
//! `basalt_catalog`). Distances are meters for GeoJSON, radians for legacy points on the
//! sphere, and plane units for legacy points on the plane.

pub mod cells;
mod sphere;

use sphere::{chord_angle, Ring, SpherePolygon, V3};
pub use sphere::{Flat, EARTH_RADIUS_METERS};

use basalt_error::{Error, Result};
use bson::{Bson, Document};

/// A point: its coordinates as given (for planar queries) and, when they are a valid
/// longitude and latitude, its place on the sphere.
#[derive(Clone, Debug)]
pub struct Point {
    pub flat: Flat,
    pub sphere: Option<V3>,
}

impl Point {
    fn new(x: f64, y: f64) -> Point {
        Point {
            flat: (x, y),
            sphere: valid_lng_lat(x, y).then(|| V3::from_lng_lat(x, y)),
        }
    }
}

fn valid_lng_lat(lng: f64, lat: f64) -> bool {
    (-180.0..=180.0).contains(&lng) && (-90.0..=90.0).contains(&lat)
}

/// A geometry stored in a document or given by a query.
#[derive(Clone, Debug)]
pub enum Geometry {
    /// A GeoJSON point or a legacy coordinate pair (`legacy`).
    Point {
        point: Point,
        legacy: bool,
    },
    LineString(Vec<V3>),
    Polygon(Box<SpherePolygon>),
    /// The `Multi*` kinds and `GeometryCollection`: their members.
    Collection(Vec<Geometry>),
}

impl Geometry {
    /// The geometry a stored value holds, if any: a GeoJSON object (`{type, ...}`), or
    /// a legacy pair (an array or object whose first two values are numbers).
    pub fn stored(value: &Bson) -> Option<Geometry> {
        match value {
            Bson::Document(d) if d.get("type").is_some_and(|t| matches!(t, Bson::String(_))) => {
                parse_geojson(d, false).ok()
            }
            Bson::Document(_) | Bson::Array(_) => {
                legacy_point(value, true).ok().map(|point| Geometry::Point {
                    point,
                    legacy: true,
                })
            }
            _ => None,
        }
    }

    /// The geometry a 2dsphere index keys a stored value by: MongoDB refuses a document
    /// whose value is neither valid GeoJSON nor a legacy pair on the sphere (16755,
    /// "Can't extract geo keys").
    pub fn for_sphere_index(value: &Bson) -> Result<Geometry> {
        let geometry = match value {
            Bson::Document(d) if d.contains_key("type") || d.contains_key("coordinates") => {
                parse_geojson(d, false)?
            }
            Bson::Document(_) | Bson::Array(_) => {
                let point = legacy_point(value, true)?;
                if point.sphere.is_none() {
                    return Err(out_of_bounds(point.flat.0, point.flat.1));
                }
                Geometry::Point {
                    point,
                    legacy: true,
                }
            }
            _ => return Err(Error::bad_value("geo element must be an array or object")),
        };
        Ok(geometry)
    }

    fn points(&self) -> Vec<V3> {
        match self {
            Geometry::Point { point, .. } => point.sphere.into_iter().collect(),
            Geometry::LineString(vertices) => vertices.clone(),
            Geometry::Polygon(polygon) => polygon.shell.vertices.clone(),
            Geometry::Collection(members) => members.iter().flat_map(Geometry::points).collect(),
        }
    }

    /// Every point of the geometry in longitude and latitude (for index cells).
    pub fn lng_lats(&self) -> Vec<(f64, f64)> {
        match self {
            Geometry::Point { point, .. } if point.sphere.is_none() => vec![point.flat],
            _ => self.points().into_iter().map(V3::lng_lat).collect(),
        }
    }

    /// Longitude/latitude bounds of the geometry (`None`: too large to bound usefully).
    pub fn bounds(&self) -> Option<cells::Bounds> {
        match self {
            Geometry::Point { .. } => cells::Bounds::of_points(&self.lng_lats()),
            Geometry::LineString(vertices) => cells::Bounds::of_arcs(vertices),
            Geometry::Polygon(polygon) => cells::Bounds::of_ring(&polygon.shell),
            Geometry::Collection(members) => members
                .iter()
                .map(Geometry::bounds)
                .reduce(|a, b| Some(a?.union(&b?)))
                .flatten(),
        }
    }

    /// The distance in radians from `p` to the nearest point of the geometry.
    fn distance_from(&self, p: V3) -> Option<f64> {
        match self {
            Geometry::Point { point, .. } => point.sphere.map(|q| p.angle(q)),
            Geometry::LineString(vertices) => vertices
                .windows(2)
                .map(|w| sphere::distance_to_arc(p, w[0], w[1]))
                .reduce(f64::min),
            Geometry::Polygon(polygon) => Some(polygon.distance(p)),
            Geometry::Collection(members) => members
                .iter()
                .filter_map(|m| m.distance_from(p))
                .reduce(f64::min),
        }
    }

    /// Whether this geometry (a query's) and `other` (a stored one) share a point.
    pub fn intersects(&self, other: &Geometry) -> bool {
        match (self, other) {
            (Geometry::Collection(members), _) => members.iter().any(|m| m.intersects(other)),
            (_, Geometry::Collection(members)) => members.iter().any(|m| self.intersects(m)),
            (Geometry::Point { point, .. }, _) | (_, Geometry::Point { point, .. }) => {
                let Some(p) = point.sphere else {
                    return false;
                };
                let shape = if matches!(self, Geometry::Point { .. }) {
                    other
                } else {
                    self
                };
                match shape {
                    Geometry::Polygon(polygon) => polygon.covers(p),
                    shape => shape.distance_from(p).is_some_and(|d| d <= 1e-9),
                }
            }
            (Geometry::LineString(a), Geometry::LineString(b)) => a.windows(2).any(|e| {
                b.windows(2)
                    .any(|f| sphere::arcs_touch(e[0], e[1], f[0], f[1]))
            }),
            (Geometry::LineString(line), Geometry::Polygon(polygon))
            | (Geometry::Polygon(polygon), Geometry::LineString(line)) => {
                line.iter().any(|v| polygon.covers(*v))
                    || line.windows(2).any(|e| polygon.touches_arc(e[0], e[1]))
            }
            // Polygons meet where their interiors do: a shared edge or vertex alone is
            // not an intersection, as in MongoDB.
            (Geometry::Polygon(a), Geometry::Polygon(b)) => {
                a.shell.vertices.iter().any(|v| b.strictly_contains(*v))
                    || b.shell.vertices.iter().any(|v| a.strictly_contains(*v))
                    || a.edges().any(|(c, d)| b.crosses_arc(c, d))
                    || a.interior_point().is_some_and(|p| b.strictly_contains(p))
                    || b.interior_point().is_some_and(|p| a.strictly_contains(p))
            }
        }
    }
}

/// The region of a `$geoWithin`.
#[derive(Clone, Debug)]
pub enum Region {
    /// `$geometry`: a Polygon or MultiPolygon on the sphere.
    Polygons(Vec<SpherePolygon>),
    /// `$centerSphere`: a spherical cap (radius in radians).
    Cap { center: V3, radius: f64 },
    /// `$box`: a rectangle on the plane, corners included.
    Box { min: Flat, max: Flat },
    /// `$polygon`: a polygon on the plane.
    FlatPolygon(Vec<Flat>),
    /// `$center`: a circle on the plane.
    Circle { center: Flat, radius: f64 },
}

impl Region {
    /// Parses a `$geoWithin` operand.
    pub fn parse(operand: &Bson) -> Result<Region> {
        let Bson::Document(spec) = operand else {
            return Err(Error::bad_value("$geoWithin not an object"));
        };
        let mut shapes = spec.iter();
        let Some((name, value)) = shapes.next() else {
            return Err(Error::bad_value("geo query doesn't have any geometry"));
        };
        if shapes.next().is_some() {
            return Err(Error::bad_value(
                "$geoWithin has more than one shape or unknown fields",
            ));
        }
        match name.as_str() {
            "$geometry" => {
                let Bson::Document(geometry) = value else {
                    return Err(Error::bad_value("$geometry must be an object"));
                };
                let polygons = match parse_geojson(geometry, true)? {
                    Geometry::Polygon(polygon) => vec![*polygon],
                    Geometry::Collection(members)
                        if geometry.get_str("type").ok() == Some("MultiPolygon") =>
                    {
                        members
                            .into_iter()
                            .filter_map(|m| match m {
                                Geometry::Polygon(p) => Some(*p),
                                _ => None,
                            })
                            .collect()
                    }
                    _ => {
                        return Err(Error::bad_value(
                            "$geoWithin requires a Polygon or MultiPolygon $geometry",
                        ))
                    }
                };
                Ok(Region::Polygons(polygons))
            }
            "$box" => {
                // Only the first two points count, as in MongoDB.
                let corners = point_list(value, "$box")?;
                if corners.len() < 2 {
                    return Err(Error::bad_value("$box needs two points"));
                }
                let (a, b) = (corners[0], corners[1]);
                Ok(Region::Box {
                    min: (a.0.min(b.0), a.1.min(b.1)),
                    max: (a.0.max(b.0), a.1.max(b.1)),
                })
            }
            "$polygon" => {
                let vertices = point_list(value, "$polygon")?;
                if vertices.len() < 3 {
                    return Err(Error::bad_value("Polygon must have at least 3 points"));
                }
                Ok(Region::FlatPolygon(vertices))
            }
            "$center" | "$centerSphere" => {
                let (center, radius) = circle(value, name)?;
                if name == "$center" {
                    return Ok(Region::Circle { center, radius });
                }
                if !valid_lng_lat(center.0, center.1) {
                    return Err(out_of_bounds(center.0, center.1));
                }
                Ok(Region::Cap {
                    center: V3::from_lng_lat(center.0, center.1),
                    radius,
                })
            }
            other => Err(Error::bad_value(format!(
                "unknown geo specifier: {other}: {value}"
            ))),
        }
    }

    /// Whether `geometry` lies entirely within the region. The planar shapes hold only
    /// points, as MongoDB's `2d` shapes do.
    pub fn contains(&self, geometry: &Geometry) -> bool {
        if let Geometry::Collection(members) = geometry {
            return !members.is_empty() && members.iter().all(|m| self.contains(m));
        }
        let flat_point = match geometry {
            Geometry::Point { point, .. } => Some(point.flat),
            _ => None,
        };
        match self {
            Region::Box { min, max } => flat_point
                .is_some_and(|p| p.0 >= min.0 && p.0 <= max.0 && p.1 >= min.1 && p.1 <= max.1),
            Region::FlatPolygon(vertices) => {
                flat_point.is_some_and(|p| sphere::flat_polygon_covers(vertices, p))
            }
            Region::Circle { center, radius } => {
                flat_point.is_some_and(|p| sphere::flat_distance(p, *center) <= *radius)
            }
            Region::Cap { center, radius } => {
                let points = geometry.points();
                !points.is_empty()
                    && (*radius >= std::f64::consts::PI
                        || points.iter().all(|p| center.angle(*p) <= *radius))
            }
            Region::Polygons(polygons) => polygons.iter().any(|polygon| {
                let points = geometry.points();
                !points.is_empty()
                    && points.iter().all(|p| polygon.covers(*p))
                    && match geometry {
                        Geometry::LineString(line) => {
                            !line.windows(2).any(|e| polygon.crosses_arc(e[0], e[1]))
                        }
                        Geometry::Polygon(inner) => {
                            !inner.edges().any(|(a, b)| polygon.crosses_arc(a, b))
                        }
                        _ => true,
                    }
            }),
        }
    }

    /// Longitude/latitude bounds of the region, for index cells: `None` when it is not
    /// on the sphere's coordinates or too large to bound usefully.
    pub fn bounds(&self) -> Option<cells::Bounds> {
        match self {
            Region::Box { min, max } => Some(cells::Bounds {
                min: *min,
                max: *max,
            }),
            Region::FlatPolygon(vertices) => cells::Bounds::of_flat(vertices),
            Region::Circle { center, radius } => Some(cells::Bounds {
                min: (center.0 - radius, center.1 - radius),
                max: (center.0 + radius, center.1 + radius),
            }),
            Region::Cap { center, radius } => cells::Bounds::of_cap(*center, *radius),
            Region::Polygons(polygons) => {
                let mut all: Option<cells::Bounds> = None;
                for polygon in polygons {
                    let b = cells::Bounds::of_ring(&polygon.shell)?;
                    all = Some(match all {
                        None => b,
                        Some(a) => a.union(&b),
                    });
                }
                all
            }
        }
    }
}

/// The point of `$near`, `$nearSphere` or `$geoNear`, and what distances from it mean.
#[derive(Clone, Debug)]
pub struct NearPoint {
    pub point: Point,
    /// Given as GeoJSON: distances in meters on the sphere.
    pub geojson: bool,
    /// Distances on the sphere (GeoJSON, `$nearSphere`, `spherical: true`); radians for
    /// a legacy point.
    pub spherical: bool,
}

impl NearPoint {
    /// The distance from the point to a stored geometry, in the query's units; `None`
    /// when the geometry cannot be measured that way (a shape on the plane).
    pub fn distance(&self, geometry: &Geometry) -> Option<f64> {
        if !self.spherical {
            return match geometry {
                Geometry::Point { point, .. } => {
                    Some(sphere::flat_distance(self.point.flat, point.flat))
                }
                Geometry::Collection(members) => members
                    .iter()
                    .filter_map(|m| self.distance(m))
                    .reduce(f64::min),
                _ => None,
            };
        }
        let from = self.point.sphere?;
        if self.geojson {
            return Some(geometry.distance_from(from)? * EARTH_RADIUS_METERS);
        }
        match geometry {
            Geometry::Point { point, .. } => point.sphere.map(|p| chord_angle(from, p)),
            Geometry::Collection(members) => members
                .iter()
                .filter_map(|m| self.distance(m))
                .reduce(f64::min),
            other => other.distance_from(from),
        }
    }

    /// The longitude/latitude bounds of the points within `max` of this one.
    pub fn bounds_within(&self, max: f64) -> Option<cells::Bounds> {
        if !self.spherical {
            let (x, y) = self.point.flat;
            return Some(cells::Bounds {
                min: (x - max, y - max),
                max: (x + max, y + max),
            });
        }
        let radians = if self.geojson {
            max / EARTH_RADIUS_METERS
        } else {
            max
        };
        cells::Bounds::of_cap(self.point.sphere?, radians)
    }
}

/// Parses a GeoJSON object. `query`: a query's geometry, which may name a CRS (and the
/// strict-winding one, for polygons larger than a hemisphere).
pub fn parse_geojson(d: &Document, query: bool) -> Result<Geometry> {
    let kind = match d.get("type") {
        Some(Bson::String(kind)) => kind.as_str(),
        Some(_) => return Err(Error::bad_value("GeoJSON type must be a string")),
        None => return Err(Error::bad_value("GeoJSON object has no type")),
    };
    let strict_winding = match d.get("crs") {
        None => false,
        Some(crs) => crs_is_strict_winding(crs)?,
    };
    if strict_winding && (kind != "Polygon" || !query) {
        return Err(Error::bad_value(
            "strict winding order is only supported by a Polygon in a query",
        ));
    }
    if kind == "GeometryCollection" {
        let Some(Bson::Array(members)) = d.get("geometries") else {
            return Err(Error::bad_value(
                "GeometryCollection geometries must be an array",
            ));
        };
        if members.is_empty() {
            return Err(Error::bad_value("GeometryCollection has no geometries"));
        }
        return members
            .iter()
            .map(|m| match m {
                Bson::Document(m) => parse_geojson(m, false),
                _ => Err(Error::bad_value("Element in geometries is not an object")),
            })
            .collect::<Result<Vec<_>>>()
            .map(Geometry::Collection);
    }
    if kind == "Point" {
        // A point's coordinates may also be an object: its first two values.
        let (x, y) = match d.get("coordinates") {
            Some(Bson::Document(fields)) => {
                position(&Bson::Array(fields.values().cloned().collect()))?
            }
            Some(coordinates) => position(coordinates)?,
            None => return Err(Error::bad_value("Point coordinates must be an array")),
        };
        return Ok(Geometry::Point {
            point: Point::new(x, y),
            legacy: false,
        });
    }
    let coordinates = match d.get("coordinates") {
        Some(Bson::Array(items)) => items,
        _ => {
            return Err(Error::bad_value(format!(
                "{kind} coordinates must be an array"
            )))
        }
    };
    match kind {
        "LineString" => line_string(coordinates).map(Geometry::LineString),
        "Polygon" => polygon(coordinates, strict_winding).map(|p| Geometry::Polygon(Box::new(p))),
        "MultiPoint" | "MultiLineString" | "MultiPolygon" => {
            if coordinates.is_empty() {
                return Err(Error::bad_value(format!(
                    "{kind} coordinates must have at least 1 element"
                )));
            }
            coordinates
                .iter()
                .map(|item| match (kind, item) {
                    ("MultiPoint", item) => {
                        let (x, y) = position(item)?;
                        Ok(Geometry::Point {
                            point: Point::new(x, y),
                            legacy: false,
                        })
                    }
                    ("MultiLineString", Bson::Array(line)) => {
                        line_string(line).map(Geometry::LineString)
                    }
                    ("MultiPolygon", Bson::Array(rings)) => {
                        polygon(rings, strict_winding).map(|p| Geometry::Polygon(Box::new(p)))
                    }
                    _ => Err(Error::bad_value(format!(
                        "{kind} coordinates must be an array of arrays"
                    ))),
                })
                .collect::<Result<Vec<_>>>()
                .map(Geometry::Collection)
        }
        other => Err(Error::bad_value(format!("unknown GeoJSON type: {other}"))),
    }
}

/// The geometry of a `$geoIntersects` operand (`{$geometry: ...}`): GeoJSON, or a
/// legacy pair (`[x, y]`, or an object of exactly two numbers).
pub fn intersects_operand(operand: &Bson) -> Result<Geometry> {
    let Bson::Document(spec) = operand else {
        return Err(Error::bad_value("$geoIntersects not an object"));
    };
    if spec.len() > 1 {
        return Err(Error::bad_value("$geoIntersects takes only $geometry"));
    }
    match spec.get("$geometry") {
        Some(Bson::Document(geometry)) if geometry.contains_key("type") => {
            parse_geojson(geometry, true)
        }
        Some(pair @ (Bson::Array(_) | Bson::Document(_))) => Ok(Geometry::Point {
            point: legacy_point(pair, false)?,
            legacy: true,
        }),
        _ => Err(Error::bad_value(
            "$geoIntersects requires a $geometry object",
        )),
    }
}

/// The CRS names MongoDB knows; only the strict-winding one changes anything.
fn crs_is_strict_winding(crs: &Bson) -> Result<bool> {
    let invalid = || Error::bad_value("GeoJSON CRS must be an object of type name");
    let Bson::Document(crs) = crs else {
        return Err(invalid());
    };
    if crs.get_str("type").ok() != Some("name") {
        return Err(invalid());
    }
    let name = crs
        .get_document("properties")
        .ok()
        .and_then(|p| p.get_str("name").ok())
        .ok_or_else(invalid)?;
    match name {
        "urn:x-mongodb:crs:strictwinding:EPSG:4326" => Ok(true),
        "EPSG:4326" | "urn:ogc:def:crs:OGC:1.3:CRS84" => Ok(false),
        other => Err(Error::bad_value(format!("Unknown CRS name: {other}"))),
    }
}

/// A GeoJSON position: two numbers, a valid longitude and latitude (what follows, such
/// as an altitude, is ignored).
fn position(value: &Bson) -> Result<(f64, f64)> {
    let Bson::Array(items) = value else {
        return Err(Error::bad_value("GeoJSON coordinates must be an array"));
    };
    let number = |i: usize| {
        items
            .get(i)
            .filter(|v| is_number(v))
            .and_then(basalt_value::as_f64)
            .ok_or_else(|| Error::bad_value("Point must only contain numeric elements"))
    };
    let (x, y) = (number(0)?, number(1)?);
    if !valid_lng_lat(x, y) {
        return Err(out_of_bounds(x, y));
    }
    Ok((x, y))
}

fn out_of_bounds(lng: f64, lat: f64) -> Error {
    Error::bad_value(format!(
        "longitude/latitude is out of bounds, lng: {lng} lat: {lat}"
    ))
}

fn is_number(v: &Bson) -> bool {
    matches!(
        v,
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_)
    )
}

/// The points of positions, without consecutive repeats (two positions at a pole are
/// one point).
fn positions(items: &[Bson]) -> Result<Vec<V3>> {
    let mut out: Vec<V3> = Vec::with_capacity(items.len());
    for item in items {
        let (x, y) = position(item)?;
        let p = V3::from_lng_lat(x, y);
        if out.last().is_none_or(|last| last.angle(p) > 1e-15) {
            out.push(p);
        }
    }
    Ok(out)
}

fn line_string(items: &[Bson]) -> Result<Vec<V3>> {
    if items.len() < 2 {
        return Err(Error::bad_value(
            "GeoJSON LineString must have at least 2 vertices",
        ));
    }
    let vertices = positions(items)?;
    if vertices.len() < 2 {
        return Err(Error::bad_value(
            "Invalid GeoJSON LineString: it has fewer than 2 distinct vertices",
        ));
    }
    Ok(vertices)
}

fn polygon(rings: &[Bson], strict_winding: bool) -> Result<SpherePolygon> {
    if rings.is_empty() {
        return Err(Error::bad_value("Polygon has no loops"));
    }
    let mut parsed = Vec::with_capacity(rings.len());
    for ring in rings {
        let Bson::Array(items) = ring else {
            return Err(Error::bad_value("Polygon loop must be an array"));
        };
        if items.len() < 4 {
            return Err(Error::bad_value("Loop must have at least 4 vertices"));
        }
        let mut vertices = positions(items)?;
        if position(&items[0])? != position(&items[items.len() - 1])? {
            return Err(Error::bad_value(
                "Loop is not closed, first vertex does not equal last vertex",
            ));
        }
        vertices.pop();
        if vertices.len() < 3 {
            return Err(Error::bad_value(
                "Loop must have at least 3 different vertices",
            ));
        }
        let ring = Ring::new(vertices, strict_winding && parsed.is_empty());
        if ring.self_intersects() {
            return Err(Error::bad_value("Loop is not valid: edges cross"));
        }
        parsed.push(ring);
    }
    let shell = parsed.remove(0);
    for hole in &parsed {
        let inside = hole
            .vertices
            .iter()
            .all(|v| shell.contains(*v) && !shell.on_boundary(*v));
        if !inside
            || hole
                .edges()
                .any(|(a, b)| shell.edges().any(|(c, d)| sphere::arcs_cross(a, b, c, d)))
        {
            return Err(Error::bad_value(
                "Secondary loops not contained by first exterior loop - secondary loops must be holes",
            ));
        }
    }
    Ok(SpherePolygon {
        shell,
        holes: parsed,
    })
}

/// A legacy coordinate pair: an array or object whose first two values are numbers.
/// `extra`: more values may follow (stored pairs); a query's pair has exactly two.
pub fn legacy_point(value: &Bson, extra: bool) -> Result<Point> {
    let values: Vec<&Bson> = match value {
        Bson::Array(items) => items.iter().collect(),
        Bson::Document(d) => d.values().collect(),
        _ => return Err(Error::bad_value("Point must be an array or object")),
    };
    let number = |i: usize| {
        values
            .get(i)
            .filter(|v| is_number(v))
            .and_then(|v| basalt_value::as_f64(v))
            .ok_or_else(|| Error::bad_value("Point must only contain numeric elements"))
    };
    let (x, y) = (number(0)?, number(1)?);
    if !extra && values.len() > 2 {
        return Err(Error::bad_value(
            "Point must only contain two numeric elements",
        ));
    }
    if !x.is_finite() || !y.is_finite() {
        return Err(Error::bad_value("Point coordinates must be finite numbers"));
    }
    Ok(Point::new(x, y))
}

/// The legacy pairs of `$box` or `$polygon`.
fn point_list(value: &Bson, name: &str) -> Result<Vec<Flat>> {
    let Bson::Array(items) = value else {
        return Err(Error::bad_value(format!("{name} must be an array")));
    };
    items
        .iter()
        .map(|item| legacy_point(item, false).map(|p| p.flat))
        .collect()
}

/// `[center, radius]` of `$center` or `$centerSphere`.
fn circle(value: &Bson, name: &str) -> Result<(Flat, f64)> {
    let Bson::Array(items) = value else {
        return Err(Error::bad_value(format!("{name} must be an array")));
    };
    if items.len() != 2 {
        return Err(Error::bad_value(format!(
            "{name} must have exactly a center and a radius"
        )));
    }
    let center = legacy_point(&items[0], false)?.flat;
    let radius = Some(&items[1])
        .filter(|v| is_number(v))
        .and_then(basalt_value::as_f64)
        .ok_or_else(|| Error::bad_value("radius must be a number"))?;
    if radius.is_nan() || radius < 0.0 {
        return Err(Error::bad_value("radius must be a non-negative number"));
    }
    Ok((center, radius))
}
