//! `$geoWithin` (and its old name `$within`), `$geoIntersects`, `$near` and
//! `$nearSphere` on a path: the value there (or each of an array's elements) is a stored
//! geometry (`crate::geo`), tested against the query's region, geometry or distance
//! bounds. A `$near`'s order by distance is the server's (it runs as `$geoNear`); as a
//! condition it holds the documents within its distance bounds.

use super::{Predicate, ValueMatch};
use crate::geo::{self, Geometry, NearPoint, Region};
use basalt_error::{Error, Result};
use bson::{Bson, Document};

/// A path's geo condition.
#[derive(Clone, Debug)]
pub(crate) enum GeoTest {
    Within(Box<Region>),
    Intersects(Box<Geometry>),
    Near(Box<NearQuery>),
}

impl GeoTest {
    pub(crate) fn matches(&self, v: &Bson) -> bool {
        let Some(stored) = Geometry::stored(v) else {
            return false;
        };
        match self {
            GeoTest::Within(region) => region.contains(&stored),
            GeoTest::Intersects(geometry) => {
                !matches!(&stored, Geometry::Point { point, .. } if point.sphere.is_none())
                    && geometry.intersects(&stored)
            }
            GeoTest::Near(near) => near.distance(&stored).is_some(),
        }
    }
}

/// `$near`/`$nearSphere`: the point and the distance bounds, in its units.
#[derive(Clone, Debug)]
pub struct NearQuery {
    pub point: NearPoint,
    pub min_distance: Option<f64>,
    pub max_distance: Option<f64>,
    /// `$nearSphere` (rather than `$near`).
    pub sphere_operator: bool,
}

impl NearQuery {
    /// The distance of a stored value from the point, when it is within the bounds.
    pub fn distance(&self, stored: &Geometry) -> Option<f64> {
        let d = self.point.distance(stored)?;
        let within = self.min_distance.is_none_or(|min| d >= min)
            && self.max_distance.is_none_or(|max| d <= max);
        within.then_some(d)
    }

    /// Parses `{$near: ..., $maxDistance, $minDistance}` (the operator document of a path).
    pub fn parse(ops: &Document) -> Result<NearQuery> {
        let (name, operand) = ops
            .iter()
            .find(|(k, _)| matches!(k.as_str(), "$near" | "$nearSphere"))
            .ok_or_else(|| Error::bad_value("no $near"))?;
        let sphere_operator = name == "$nearSphere";
        let mut max_distance = None;
        let mut min_distance = None;
        for (key, value) in ops {
            match key.as_str() {
                "$near" | "$nearSphere" if key == name => {}
                "$maxDistance" => max_distance = Some(legacy_distance(value, "$maxDistance")?),
                "$minDistance" => min_distance = Some(legacy_distance(value, "$minDistance")?),
                "$geoWithin" | "$within" | "$geoIntersects" | "$near" | "$nearSphere"
                | "$geoNear" => {
                    return Err(Error::bad_value(format!(
                        "{key} cannot be combined with {name}"
                    )))
                }
                _ => {
                    return Err(Error::location(
                        34413,
                        "geo near accepts just one argument when querying for a GeoJSON point. \
                         Extra field found",
                    ))
                }
            }
        }
        let point = match operand {
            Bson::Document(spec) if spec.keys().any(|k| k.starts_with('$')) => {
                if max_distance.is_some() || min_distance.is_some() {
                    return Err(Error::bad_value(
                        "GeoJSON $near takes its distances inside the operator",
                    ));
                }
                for (key, value) in spec {
                    match key.as_str() {
                        "$geometry" => {}
                        "$maxDistance" => max_distance = Some(geojson_distance(value, key)?),
                        "$minDistance" => min_distance = Some(geojson_distance(value, key)?),
                        other => {
                            return Err(Error::bad_value(format!(
                                "invalid argument in geo near query: {other}"
                            )))
                        }
                    }
                }
                let Some(Bson::Document(geometry)) = spec.get("$geometry") else {
                    return Err(Error::bad_value("$geometry must be a GeoJSON Point"));
                };
                // A $near's geometry without a type is a point.
                let mut geometry = geometry.clone();
                if !geometry.contains_key("type") {
                    geometry.insert("type", "Point");
                }
                match geo::parse_geojson(&geometry, true)? {
                    Geometry::Point { point, .. } => NearPoint {
                        point,
                        geojson: true,
                        spherical: true,
                    },
                    _ => {
                        return Err(Error::bad_value(
                            "$near requires a GeoJSON Point as its $geometry",
                        ))
                    }
                }
            }
            Bson::Array(_) | Bson::Document(_) => NearPoint {
                point: geo::legacy_point(operand, sphere_operator)?,
                geojson: false,
                spherical: sphere_operator,
            },
            _ => {
                return Err(Error::bad_value(format!(
                    "{name} must be a point or a {{$geometry: Point}}"
                )))
            }
        };
        if point.spherical && !point.geojson && point.point.sphere.is_none() {
            let (x, y) = point.point.flat;
            return Err(Error::bad_value(format!(
                "longitude/latitude is out of bounds, lng: {x} lat: {y}"
            )));
        }
        Ok(NearQuery {
            point,
            min_distance,
            max_distance,
            sphere_operator,
        })
    }
}

/// A GeoJSON `$near`'s distance bound (meters): a non-negative number.
fn geojson_distance(value: &Bson, name: &str) -> Result<f64> {
    let d = number(value).ok_or_else(|| Error::bad_value(format!("{name} must be a number")))?;
    if !d.is_finite() || d < 0.0 {
        return Err(Error::bad_value(format!(
            "{name} must be a non-negative finite number"
        )));
    }
    Ok(d)
}

/// A legacy `$near`'s sibling distance bound: MongoDB's codes 16893–16895.
fn legacy_distance(value: &Bson, name: &str) -> Result<f64> {
    let not_number = if name == "$minDistance" { 16893 } else { 16895 };
    let d = number(value)
        .ok_or_else(|| Error::location(not_number, format!("{name} must be a number")))?;
    if d.is_nan() || d < 0.0 {
        let negative = if name == "$minDistance" { 16894 } else { 16896 };
        return Err(Error::location(
            negative,
            format!("{name} must be non-negative"),
        ));
    }
    Ok(d)
}

fn number(value: &Bson) -> Option<f64> {
    match value {
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {
            basalt_value::as_f64(value)
        }
        _ => None,
    }
}

/// Parses `$geoWithin` / `$within`.
pub(super) fn parse_within(operand: &Bson) -> Result<ValueMatch> {
    Ok(ValueMatch::Leaf(Predicate::Geo(GeoTest::Within(Box::new(
        Region::parse(operand)?,
    )))))
}

/// Parses `$geoIntersects: {$geometry: ...}`.
pub(super) fn parse_intersects(operand: &Bson) -> Result<ValueMatch> {
    Ok(ValueMatch::Leaf(Predicate::Geo(GeoTest::Intersects(
        Box::new(geo::intersects_operand(operand)?),
    ))))
}

/// Parses a path's `$near` / `$nearSphere` operator document.
pub(super) fn parse_near(ops: &Document) -> Result<ValueMatch> {
    Ok(ValueMatch::Leaf(Predicate::Geo(GeoTest::Near(Box::new(
        NearQuery::parse(ops)?,
    )))))
}
