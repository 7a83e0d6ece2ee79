//! `$geoNear`: the documents whose geometry at `key` lies within `minDistance` and
//! `maxDistance` of `near` (and that match `query`), nearest first, each with its
//! distance (times `distanceMultiplier`) at `distanceField` and the location measured
//! at `includeLocs`.
//!
//! Distances follow `near`: meters on the sphere for a GeoJSON point, radians for a
//! legacy pair with `spherical: true`, plane units otherwise (`basalt_query::geo`). The
//! server checks the collection's geo indexes (which one, which kinds of `near` it
//! serves) and names the `key` before the stage runs; the stage measures every input
//! document, so documents at equal distances keep their input order.

use crate::field_path;
use crate::pipeline::DocumentStream;
use crate::stages::{drain, finished};
use basalt_error::{Error, ErrorCode, Result};
use basalt_expr::{
    Expression, ParseContext, Variables, GEO_NEAR_DISTANCE_FIELD, GEO_NEAR_POINT_FIELD,
};
use basalt_query::geo::{self, Geometry, NearPoint};
use basalt_query::Matcher;
use basalt_value::{FieldPath, Reached};
use bson::{doc, Bson, Document};
use std::ops::ControlFlow;

/// The most components an output path may have, and a `key`.
const OUTPUT_PATH_COMPONENTS_MAX: usize = 199;
const KEY_COMPONENTS_MAX: usize = 180;
/// Beyond this a field path is refused whatever it is for.

#[derive(Debug)]
pub struct GeoNear {
    /// The point as given (the server checks it against the index it uses).
    point: NearPoint,
    key: Option<String>,
    distance_field: Option<Vec<String>>,
    include_locs: Option<Vec<String>>,
    min_distance: Option<f64>,
    max_distance: Option<f64>,
    multiplier: Option<f64>,
    query: Document,
    matcher: Matcher,
}

impl GeoNear {
    pub(crate) fn parse(spec: &Bson, ctx: &ParseContext) -> Result<GeoNear> {
        let spec = match spec {
            Bson::Document(spec) => spec,
            Bson::Array(_) => return Err(near_required()),
            _ => {
                return Err(Error::location(
                    10065,
                    "invalid parameter: expected an object ($geoNear)",
                ))
            }
        };
        let mut near = None;
        let mut spherical = false;
        let mut key = None;
        let mut distance_field = None;
        let mut include_locs = None;
        let mut min_distance = None;
        let mut max_distance = None;
        let mut multiplier = None;
        let mut query = Document::new();
        for (name, value) in spec {
            match name.as_str() {
                "near" => near = Some(value.clone()),
                "spherical" => spherical = basalt_expr::truthy(Some(value)),
                "distanceField" => distance_field = Some(output_field(name, value, 16606)?),
                "includeLocs" => include_locs = Some(output_field(name, value, 16607)?),
                "key" => {
                    let Bson::String(path) = value else {
                        return Err(Error::type_mismatch(
                            "$geoNear parameter 'key' must be of type string",
                        ));
                    };
                    if path.is_empty() {
                        return Err(Error::bad_value(
                            "$geoNear parameter 'key' cannot be the empty string",
                        ));
                    }
                    output_path(path, KEY_COMPONENTS_MAX).map_err(|e| {
                        if e.code.0 == 5984700 {
                            Error::location(5729100, "$geoNear 'key' is too deeply nested")
                        } else {
                            e
                        }
                    })?;
                    key = Some(path.clone());
                }
                "minDistance" => min_distance = Some(distance_bound(value, name, ctx)?),
                "maxDistance" => max_distance = Some(distance_bound(value, name, ctx)?),
                "distanceMultiplier" => {
                    let m = basalt_value::as_f64(value).ok_or_else(|| {
                        Error::type_mismatch("distanceMultiplier must be a number")
                    })?;
                    if m.is_nan() || m < 0.0 {
                        return Err(Error::bad_value("distanceMultiplier must be nonnegative"));
                    }
                    multiplier = Some(m);
                }
                "query" => {
                    let Bson::Document(filter) = value else {
                        return Err(Error::type_mismatch("query must be an object"));
                    };
                    query = filter.clone();
                }
                other => {
                    return Err(Error::bad_value(format!(
                        "Unknown argument to $geoNear: {other}"
                    )))
                }
            }
        }
        let near = near.ok_or_else(near_required)?;
        let point = parse_near(&near, spherical)?;
        for forbidden in ["$text", "$where"] {
            if query.contains_key(forbidden) {
                return Err(Error::bad_value(format!(
                    "{forbidden} is not allowed in $geoNear's query"
                )));
            }
        }
        let matcher = Matcher::new(&query)?.with_collation(ctx.collation());
        if matcher.near().is_some() {
            return Err(near_not_allowed());
        }
        Ok(GeoNear {
            point,
            key,
            distance_field,
            include_locs,
            min_distance,
            max_distance,
            multiplier,
            query,
            matcher,
        })
    }

    /// The filter documents must match besides their distance.
    pub fn query(&self) -> &Document {
        &self.query
    }

    /// What the scan feeding the stage may filter by: the query and, with a finite
    /// `maxDistance`, the same bound as a `$near` condition on the key (which lets the
    /// scan read only the geo index's cells within reach).
    pub fn scan_filter(&self) -> Document {
        let (Some(key), Some(max)) = (&self.key, self.max_distance.filter(|m| m.is_finite()))
        else {
            return self.query.clone();
        };
        let (x, y) = self.point.point.flat;
        let near = match (self.point.geojson, self.point.spherical) {
            (true, _) => doc! { "$near": {
                "$geometry": { "type": "Point", "coordinates": [x, y] },
                "$maxDistance": max,
            } },
            (false, true) => doc! { "$nearSphere": [x, y], "$maxDistance": max },
            (false, false) => doc! { "$near": [x, y], "$maxDistance": max },
        };
        doc! { key.clone(): near, "$and": [self.query.clone()] }
    }

    /// The point distances are measured from, and in which units.
    pub fn point(&self) -> &NearPoint {
        &self.point
    }

    /// The geo field asked for, if any.
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// Sets the geo field the server found (the only geo index's, when `key` is not
    /// given).
    pub fn set_key(&mut self, key: String) {
        self.key = Some(key);
    }

    pub(crate) fn apply<'a>(&'a self, input: DocumentStream<'a>) -> DocumentStream<'a> {
        finished(self.run(input))
    }

    fn run(&self, input: DocumentStream<'_>) -> Result<Vec<Document>> {
        let Some(key) = &self.key else {
            return Err(Error::new(
                ErrorCode::INDEX_NOT_FOUND,
                "There is no index available for this geoNear",
            ));
        };
        let path = FieldPath::parse(key);
        let mut found: Vec<(f64, Document)> = Vec::new();
        drain(input, |mut doc| {
            if !self.matcher.try_matches(&doc)? {
                return Ok(());
            }
            let Some((distance, location)) = self.nearest(&path, &doc) else {
                return Ok(());
            };
            let within = self.min_distance.is_none_or(|min| distance >= min)
                && self.max_distance.is_none_or(|max| distance <= max);
            if !within {
                return Ok(());
            }
            if let Some(field) = &self.distance_field {
                let shown = match self.multiplier {
                    Some(m) => distance * m,
                    None => distance,
                };
                field_path::set(&mut doc, field, Bson::Double(shown));
            }
            if let Some(field) = &self.include_locs {
                field_path::set(&mut doc, field, location.clone());
            }
            // For `{$meta: "geoNearDistance"}` and `{$meta: "geoNearPoint"}`.
            doc.insert(GEO_NEAR_DISTANCE_FIELD, distance);
            doc.insert(GEO_NEAR_POINT_FIELD, location);
            found.push((distance, doc));
            Ok(())
        })?;
        // Stable: documents at equal distances keep their input order.
        found.sort_by(|a, b| a.0.total_cmp(&b.0));
        Ok(found.into_iter().map(|(_, doc)| doc).collect())
    }

    /// The distance to the nearest geometry at `path` and that geometry's value.
    fn nearest(&self, path: &FieldPath, doc: &Document) -> Option<(f64, Bson)> {
        let mut best: Option<(f64, Bson)> = None;
        let mut consider = |value: &Bson| {
            if let Some(d) = Geometry::stored(value).and_then(|g| self.point.distance(&g)) {
                if best.as_ref().is_none_or(|(b, _)| d < *b) {
                    best = Some((d, value.clone()));
                }
            }
        };
        let _ = path.visit(doc, &mut |reached| {
            if let Reached::Value { value, .. } = reached {
                consider(value);
                if let Bson::Array(items) = value {
                    items.iter().for_each(&mut consider);
                }
            }
            ControlFlow::<()>::Continue(())
        });
        best
    }
}

/// `near`: a GeoJSON point (whose `type` may be left out) or a legacy pair of two or
/// three numbers.
fn parse_near(near: &Bson, spherical: bool) -> Result<NearPoint> {
    match near {
        Bson::Document(point)
            if point.contains_key("type") || point.contains_key("coordinates") =>
        {
            let mut point = point.clone();
            if !point.contains_key("type") {
                point.insert("type", "Point");
            }
            match geo::parse_geojson(&point, true)? {
                Geometry::Point { point, .. } => Ok(NearPoint {
                    point,
                    geojson: true,
                    spherical: true,
                }),
                _ => Err(Error::bad_value("$geoNear's near must be a point")),
            }
        }
        Bson::Array(items) if !(2..=3).contains(&items.len()) => Err(Error::bad_value(
            "$geoNear's near must be a point of two coordinates",
        )),
        Bson::Array(_) | Bson::Document(_) => {
            let point = geo::legacy_point(near, true)?;
            if spherical && point.sphere.is_none() {
                let (x, y) = point.flat;
                return Err(Error::bad_value(format!(
                    "longitude/latitude is out of bounds, lng: {x} lat: {y}"
                )));
            }
            Ok(NearPoint {
                point,
                geojson: false,
                spherical,
            })
        }
        Bson::String(s) if s.starts_with('$') => Err(Error::location(
            5860402,
            "$geoNear requires a constant 'near' argument",
        )),
        _ => Err(Error::location(
            5860401,
            "$geoNear requires near argument to be a GeoJSON object or a legacy point(array)",
        )),
    }
}

fn near_required() -> Error {
    Error::location(5860400, "$geoNear requires a 'near' argument")
}

/// `$near` where only `$geoNear` orders by distance.
pub(crate) fn near_not_allowed() -> Error {
    Error::location(
        5626500,
        "$geoNear, $near, and $nearSphere are not allowed in this context, as these operators \
         require sorting geospatial data. If you do not need sort, consider using \
         $geoWithin instead.",
    )
}

/// `minDistance`/`maxDistance`: a constant number, not negative.
fn distance_bound(value: &Bson, name: &str, ctx: &ParseContext) -> Result<f64> {
    let not_constant = || {
        Error::location(
            if name == "minDistance" {
                7555701
            } else {
                7555702
            },
            format!("{name} must be a constant"),
        )
    };
    let constant = match value {
        Bson::String(s) if s.starts_with('$') => return Err(not_constant()),
        Bson::Document(d) if d.keys().next().is_some_and(|k| k.starts_with('$')) => {
            let expression = Expression::parse(value, ctx)?;
            expression
                .evaluate_ref(&Document::new(), &Variables::default())
                .map_err(|_| not_constant())?
                .map(|v| v.into_owned())
                .unwrap_or(Bson::Null)
        }
        other => other.clone(),
    };
    let d = basalt_value::as_f64(&constant)
        .ok_or_else(|| Error::type_mismatch(format!("{name} must be a number")))?;
    if d.is_nan() || d < 0.0 {
        return Err(Error::bad_value(format!("{name} must be nonnegative")));
    }
    Ok(d)
}

/// `distanceField` or `includeLocs`: a string (`code` otherwise), an output path.
fn output_field(name: &str, value: &Bson, code: i32) -> Result<Vec<String>> {
    let Bson::String(path) = value else {
        return Err(Error::location(
            code,
            format!("$geoNear requires that '{name}' be a String"),
        ));
    };
    output_path(path, OUTPUT_PATH_COMPONENTS_MAX)
}

/// An output path of `$geoNear` (or its `key`), with MongoDB's field path errors.
fn output_path(path: &str, components_max: usize) -> Result<Vec<String>> {
    let components: Vec<String> = basalt_value::path::split_field_path(path)?
        .into_iter()
        .map(str::to_string)
        .collect();
    if components.len() > components_max {
        return Err(Error::location(
            5984700,
            format!("FieldPath is too deeply nested: the most is {components_max} components"),
        ));
    }
    Ok(components)
}
