//! `$_internalUnpackBucket`: the measurements of time-series buckets, as MongoDB's stage
//! of the same name gives them. A time-series collection's reads start with it (see the
//! server's `timeseries.rs`, which also writes the buckets).
//!
//! A bucket is MongoDB's (version 1, uncompressed): `{_id, control: {version, min, max,
//! count}, meta, data: {<field>: {"0": v0, "1": v1, ...}}}`, where measurement `i` has
//! the values at key `i` of each field that it has, and the bucket's `meta` is the value
//! of every measurement's metaField. [`append`] writes the format,
//! [`UnpackBucket::unpack_stored`] reads it from a bucket's bytes ([`unpack`] from a
//! decoded bucket).
//!
//! As MongoDB's optimizer does, the pipeline narrows the stage to what follows it:
//! - a `$match` right after it (one without `$expr`) becomes its `eventFilter`
//!   (`optimization.rs`), tested on each measurement made of only the fields the filter
//!   reads, so a measurement that fails it is never built whole;
//! - only the fields the later stages read are decoded ([`UnpackBucket::include`]).

use super::match_stage::Match;
use crate::pipeline::DocumentStream;
use basalt_error::{Error, Result};
use basalt_expr::ParseContext;
use basalt_query::Matcher;
use bson::raw::{CStr, RawBsonRef};
use bson::{Bson, Document, RawDocument, RawDocumentBuf};
use std::cmp::Ordering;
use std::collections::HashMap;

/// The stage's specification.
#[derive(Debug)]
pub struct UnpackBucket {
    time_field: String,
    meta_field: Option<String>,
    /// The measurement fields the stages after it read; `None`: all of them.
    include: Option<Vec<String>>,
    /// The `$match` that followed it, tested on each measurement as it is unpacked.
    event_filter: Option<EventFilter>,
}

/// A filter on measurements and the top-level fields it reads (`None`: any).
#[derive(Debug)]
struct EventFilter {
    matcher: Matcher,
    fields: Option<Vec<String>>,
}

impl UnpackBucket {
    pub(crate) fn parse(spec: &Bson, ctx: &ParseContext) -> Result<UnpackBucket> {
        let Bson::Document(spec) = spec else {
            return Err(Error::location(
                5346500,
                "$_internalUnpackBucket specification must be an object",
            ));
        };
        let time_field = spec.get_str("timeField").map_err(|_| {
            Error::location(5346504, "$_internalUnpackBucket needs a string 'timeField'")
        })?;
        // The `$match` the optimizer moved here: parsed as that stage, with its errors.
        let event_filter = match spec.get("eventFilter") {
            None => None,
            Some(filter) => match Match::parse(filter, ctx)?.into_query_matcher() {
                Some(matcher) => Some(EventFilter {
                    fields: matcher.top_level_fields(),
                    matcher,
                }),
                None => {
                    return Err(Error::location(
                        5346503,
                        "$_internalUnpackBucket's eventFilter cannot hold $expr",
                    ))
                }
            },
        };
        Ok(UnpackBucket {
            time_field: time_field.to_string(),
            meta_field: spec.get_str("metaField").ok().map(str::to_string),
            include: None,
            event_filter,
        })
    }

    /// Makes the stage decode only `fields` of each measurement (`None`: all), those
    /// the stages after it read.
    pub(crate) fn include(&mut self, fields: Option<Vec<String>>) {
        self.include = fields;
    }

    /// The measurements of a bucket read as its stored bytes that pass the event
    /// filter, with the fields the later stages read.
    pub fn unpack_stored(&self, bucket: &RawDocument) -> Result<Vec<Document>> {
        let meta_field = self.meta_field.as_deref();
        let Some(columns) = Columns::of(bucket, &self.time_field)? else {
            return Ok(Vec::new());
        };
        let keep = match &self.event_filter {
            None => None,
            Some(filter) => {
                let reads = |field: &str| {
                    filter
                        .fields
                        .as_ref()
                        .is_none_or(|fields| fields.iter().any(|f| f == field))
                };
                let mut tested = vec![Document::new(); columns.count()];
                columns.fill(&mut tested, &reads, None)?;
                if let Some(field) = meta_field.filter(|field| reads(field)) {
                    columns.add_meta(&mut tested, field, None)?;
                }
                let keep: Vec<bool> = tested.iter().map(|m| filter.matcher.matches(m)).collect();
                if !keep.contains(&true) {
                    return Ok(Vec::new());
                }
                Some(keep)
            }
        };
        let included = |field: &str| {
            self.include
                .as_ref()
                .is_none_or(|fields| fields.iter().any(|f| f == field))
        };
        let mut measurements = vec![Document::new(); columns.count()];
        columns.fill(&mut measurements, &included, keep.as_deref())?;
        if let Some(field) = meta_field.filter(|field| included(field)) {
            columns.add_meta(&mut measurements, field, keep.as_deref())?;
        }
        Ok(match keep {
            None => measurements,
            Some(keep) => measurements
                .into_iter()
                .zip(keep)
                .filter_map(|(m, kept)| kept.then_some(m))
                .collect(),
        })
    }

    pub(crate) fn apply<'a>(&'a self, input: DocumentStream<'a>) -> DocumentStream<'a> {
        Box::new(input.flat_map(move |bucket| {
            let measurements = bucket.and_then(|bucket| {
                let bytes = bson::RawDocumentBuf::try_from(&bucket).map_err(corrupt)?;
                self.unpack_stored(&bytes)
            });
            let measurements: Box<dyn Iterator<Item = Result<Document>> + Send> = match measurements
            {
                Ok(measurements) => Box::new(measurements.into_iter().map(Ok)),
                Err(e) => Box::new(std::iter::once(Err(e))),
            };
            measurements
        }))
    }
}

/// A bucket's columns (`data`) and where each measurement is in them.
struct Columns<'a> {
    bucket: &'a RawDocument,
    data: &'a RawDocument,
    positions: Positions<'a>,
}

/// The measurement a column's key stands for, from the time column's keys (every
/// measurement has a time): MongoDB's buckets number them `"0"`, `"1"`, ... in order,
/// read without a look-up; any other keys through a map.
enum Positions<'a> {
    Numbered(usize),
    Keyed(HashMap<&'a str, usize>),
}

impl<'a> Columns<'a> {
    /// The columns of `bucket`; `None` when it has no time column (no measurements).
    fn of(bucket: &'a RawDocument, time_field: &str) -> Result<Option<Columns<'a>>> {
        let Some(data) = subdocument(bucket, "data")? else {
            return Ok(None);
        };
        let Some(times) = subdocument(data, time_field)? else {
            return Ok(None);
        };
        let mut keys = Vec::new();
        for element in times {
            keys.push(element.map_err(corrupt)?.0.as_str());
        }
        let numbered = keys
            .iter()
            .enumerate()
            .all(|(i, key)| index_of(key) == Some(i));
        let positions = match numbered {
            true => Positions::Numbered(keys.len()),
            false => Positions::Keyed(keys.into_iter().zip(0..).collect()),
        };
        Ok(Some(Columns {
            bucket,
            data,
            positions,
        }))
    }

    fn count(&self) -> usize {
        match &self.positions {
            Positions::Numbered(n) => *n,
            Positions::Keyed(keys) => keys.len(),
        }
    }

    fn position(&self, key: &str) -> Option<usize> {
        match &self.positions {
            Positions::Numbered(n) => index_of(key).filter(|i| i < n),
            Positions::Keyed(keys) => keys.get(key).copied(),
        }
    }

    /// Sets, in each measurement of `out` that `keep` keeps (all without it), its value
    /// of every column `wanted` names, each value decoded once.
    fn fill(
        &self,
        out: &mut [Document],
        wanted: &dyn Fn(&str) -> bool,
        keep: Option<&[bool]>,
    ) -> Result<()> {
        // A column numbered as MongoDB numbers it is in measurement order: past the last
        // measurement kept, the rest of it is not read.
        let last = match (&self.positions, keep) {
            (Positions::Numbered(_), Some(keep)) => keep.iter().rposition(|kept| *kept),
            _ => None,
        };
        for element in self.data {
            let (field, values) = element.map_err(corrupt)?;
            let field = field.as_str();
            if !wanted(field) {
                continue;
            }
            let Some(values) = values.as_document() else {
                continue;
            };
            for element in values {
                let (key, value) = element.map_err(corrupt)?;
                let Some(i) = self.position(key.as_str()) else {
                    continue;
                };
                if last.is_some_and(|last| i > last) {
                    break;
                }
                if keep.is_some_and(|keep| !keep[i]) {
                    continue;
                }
                out[i].insert(field, Bson::try_from(value).map_err(corrupt)?);
            }
        }
        Ok(())
    }

    /// Sets the bucket's meta value at `field` in each measurement `keep` keeps.
    fn add_meta(&self, out: &mut [Document], field: &str, keep: Option<&[bool]>) -> Result<()> {
        let Some(meta) = self.bucket.get("meta").map_err(corrupt)? else {
            return Ok(());
        };
        let meta = Bson::try_from(meta).map_err(corrupt)?;
        for (i, measurement) in out.iter_mut().enumerate() {
            if keep.is_none_or(|keep| keep[i]) {
                measurement.insert(field, meta.clone());
            }
        }
        Ok(())
    }
}

/// The number a column key written as MongoDB writes them stands for (decimal digits,
/// no leading zero).
fn index_of(key: &str) -> Option<usize> {
    let canonical = key == "0" || (!key.is_empty() && !key.starts_with('0'));
    if !canonical || !key.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    key.parse().ok()
}

/// The embedded document at `name` in `doc`, if that is one.
fn subdocument<'a>(doc: &'a RawDocument, name: &str) -> Result<Option<&'a RawDocument>> {
    Ok(doc
        .get(name)
        .map_err(corrupt)?
        .and_then(|v| v.as_document()))
}

fn corrupt(e: bson::error::Error) -> Error {
    Error::internal(format!("a corrupt bucket: {e}"))
}

/// Adds `measurements` to `bucket`, given as its bytes (a new one when it has no
/// `data`: `_id` and `meta` set by the caller first), and returns the new bucket's
/// bytes: each column's stored values are copied as bytes with the new ones after
/// them, and `control.min`, `control.max` (element-wise, [`widen`]) and `control.count`
/// kept. The time field's minimum is rounded down to `rounding_ms`, as MongoDB rounds
/// it. The bucket's other fields stay where they are; a new bucket gets `control` then
/// `data` at its end.
pub fn append(
    bucket: &RawDocument,
    measurements: &[impl AsRef<RawDocument>],
    time_field: &str,
    rounding_ms: i64,
) -> Result<RawDocumentBuf> {
    let mut control = match subdocument(bucket, "control")? {
        Some(control) => Document::try_from(control).map_err(corrupt)?,
        None => Document::new(),
    };
    let mut count = control
        .get("count")
        .and_then(basalt_value::as_i64)
        .unwrap_or(0);
    let mut min = control.get_document("min").cloned().unwrap_or_default();
    let mut max = control.get_document("max").cloned().unwrap_or_default();
    // Each field's new values with their keys, fields in their first measurement's order.
    let mut columns: Vec<(&str, Vec<(String, RawBsonRef<'_>)>)> = Vec::new();
    let mut column_of: HashMap<&str, usize> = HashMap::new();
    for measurement in measurements {
        let index = count.to_string();
        for element in measurement.as_ref() {
            let (field, raw) = element.map_err(corrupt)?;
            let field = field.as_str();
            let at = *column_of.entry(field).or_insert_with(|| {
                columns.push((field, Vec::new()));
                columns.len() - 1
            });
            columns[at].1.push((index.clone(), raw));
            for (bounds, keep) in [(&mut min, Ordering::Less), (&mut max, Ordering::Greater)] {
                match bounds.get_mut(field) {
                    Some(bound) => widen(bound, raw, keep)?,
                    None => {
                        bounds.insert(field, Bson::try_from(raw).map_err(corrupt)?);
                    }
                }
            }
        }
        count += 1;
    }
    if let Some(Bson::DateTime(time)) = min.get(time_field) {
        let millis = time.timestamp_millis();
        let rounded = millis - millis.rem_euclid(rounding_ms.max(1));
        min.insert(time_field, bson::DateTime::from_millis(rounded));
    }
    control.insert("version", 1);
    control.insert("min", min);
    control.insert("max", max);
    control.insert("count", count);
    let control = RawDocumentBuf::try_from(&control).map_err(corrupt)?;

    let append_values = |column: &mut RawDocumentBuf, values: &[(String, RawBsonRef<'_>)]| {
        for (key, value) in values {
            column.append(<&CStr>::try_from(key.as_str()).map_err(corrupt)?, *value);
        }
        Ok::<(), Error>(())
    };
    let mut data = RawDocumentBuf::new();
    if let Some(stored) = subdocument(bucket, "data")? {
        for element in stored {
            let (field, values) = element.map_err(corrupt)?;
            let mut column = match values.as_document() {
                Some(values) => values.to_owned(),
                None => RawDocumentBuf::new(),
            };
            if let Some(&at) = column_of.get(field.as_str()) {
                append_values(&mut column, &std::mem::take(&mut columns[at].1))?;
            }
            data.append(field, column);
        }
    }
    for (field, values) in columns.iter().filter(|(_, values)| !values.is_empty()) {
        let mut column = RawDocumentBuf::new();
        append_values(&mut column, values)?;
        data.append(<&CStr>::try_from(*field).map_err(corrupt)?, column);
    }

    let mut out = RawDocumentBuf::new();
    let (mut control, mut data) = (Some(control), Some(data));
    for element in bucket {
        let (key, value) = element.map_err(corrupt)?;
        match key.as_str() {
            "control" => out.append(key, control.take().unwrap_or_default()),
            "data" => out.append(key, data.take().unwrap_or_default()),
            _ => out.append(key, value),
        }
    }
    if let Some(control) = control {
        out.append(bson::raw::cstr!("control"), control);
    }
    if let Some(data) = data {
        out.append(bson::raw::cstr!("data"), data);
    }
    Ok(out)
}

/// Moves `bound`, a field's minimum (`keep` Less) or maximum (Greater) in a bucket's
/// `control`, to take in `value`, as MongoDB keeps them: two objects field by field and
/// two arrays element by element (a field or element only one has is taken as it is),
/// any other pair by MongoDB's order of values. A value is decoded only where it moves
/// the bound, or where its type has no comparison in its bytes here.
fn widen(bound: &mut Bson, value: RawBsonRef<'_>, keep: Ordering) -> Result<()> {
    match (bound, value) {
        (Bson::Document(bound), RawBsonRef::Document(value)) => {
            for element in value {
                let (field, value) = element.map_err(corrupt)?;
                match bound.get_mut(field.as_str()) {
                    Some(inner) => widen(inner, value, keep)?,
                    None => {
                        bound.insert(field.as_str(), Bson::try_from(value).map_err(corrupt)?);
                    }
                }
            }
        }
        (Bson::Array(bound), RawBsonRef::Array(value)) => {
            for (i, element) in value.into_iter().enumerate() {
                let value = element.map_err(corrupt)?;
                match bound.get_mut(i) {
                    Some(inner) => widen(inner, value, keep)?,
                    None => bound.push(Bson::try_from(value).map_err(corrupt)?),
                }
            }
        }
        (bound, value) => {
            let moves = match compare_in_bytes(value, bound) {
                Some(order) => order == keep,
                None => {
                    let decoded = Bson::try_from(value).map_err(corrupt)?;
                    basalt_value::compare_values(&decoded, bound) == keep
                }
            };
            if moves {
                *bound = Bson::try_from(value).map_err(corrupt)?;
            }
        }
    }
    Ok(())
}

/// How a value in its bytes compares with a decoded one of the same kind in MongoDB's
/// order (strings by their bytes, as without a collation), for the kinds measurements
/// mostly hold; `None` for any other pair (decoded and compared then).
fn compare_in_bytes(value: RawBsonRef<'_>, other: &Bson) -> Option<Ordering> {
    match (value, other) {
        (RawBsonRef::String(x), Bson::String(y)) => Some(x.as_bytes().cmp(y.as_bytes())),
        (RawBsonRef::DateTime(x), Bson::DateTime(y)) => {
            Some(x.timestamp_millis().cmp(&y.timestamp_millis()))
        }
        (RawBsonRef::Int32(x), Bson::Int32(y)) => Some(x.cmp(y)),
        (RawBsonRef::Int64(x), Bson::Int64(y)) => Some(x.cmp(y)),
        (RawBsonRef::Int32(x), Bson::Int64(y)) => Some(i64::from(x).cmp(y)),
        (RawBsonRef::Int64(x), Bson::Int32(y)) => Some(x.cmp(&i64::from(*y))),
        // NaN sorts before every number in MongoDB's order: left to the decoded compare.
        (RawBsonRef::Double(x), Bson::Double(y)) => x.partial_cmp(y),
        (RawBsonRef::ObjectId(x), Bson::ObjectId(y)) => Some(x.bytes().cmp(&y.bytes())),
        (RawBsonRef::Boolean(x), Bson::Boolean(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

/// [`append`] on a decoded bucket (a delete's rewrite, `$out`'s buckets).
pub fn append_document(
    bucket: &mut Document,
    measurements: &[Document],
    time_field: &str,
    rounding_ms: i64,
) -> Result<()> {
    let bytes = RawDocumentBuf::try_from(&*bucket).map_err(corrupt)?;
    let measurements = measurements
        .iter()
        .map(RawDocumentBuf::try_from)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(corrupt)?;
    let appended = append(&bytes, &measurements, time_field, rounding_ms)?;
    *bucket = Document::try_from(appended.as_ref()).map_err(corrupt)?;
    Ok(())
}

/// The measurements of a decoded bucket (a delete's): its bytes unpacked whole.
pub fn unpack(
    bucket: &Document,
    time_field: &str,
    meta_field: Option<&str>,
) -> Result<Vec<Document>> {
    let stage = UnpackBucket {
        time_field: time_field.to_string(),
        meta_field: meta_field.map(str::to_string),
        include: None,
        event_filter: None,
    };
    let bytes = bson::RawDocumentBuf::try_from(bucket).map_err(corrupt)?;
    stage.unpack_stored(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn a_bucket_unpacks_to_its_measurements() {
        let bucket = doc! {
            "_id": 1,
            "control": { "version": 1 },
            "meta": "s1",
            "data": {
                "_id": { "0": 10, "1": 11 },
                "t": { "0": 1, "1": 2 },
                "v": { "1": 5.5 },
            },
        };
        assert_eq!(
            unpack(&bucket, "t", Some("st")).unwrap(),
            vec![
                doc! { "_id": 10, "t": 1, "st": "s1" },
                doc! { "_id": 11, "t": 2, "v": 5.5, "st": "s1" },
            ]
        );
        assert_eq!(
            unpack(&doc! { "data": {} }, "t", None).unwrap(),
            Vec::<Document>::new()
        );
    }

    /// A stage that a pipeline narrowed: `filter` fused, `include` set.
    fn narrowed(filter: Document, include: Option<Vec<String>>) -> UnpackBucket {
        let spec = doc! { "timeField": "t", "metaField": "st", "eventFilter": filter };
        let mut stage = UnpackBucket::parse(&Bson::from(spec), &ParseContext::new()).unwrap();
        stage.include(include);
        stage
    }

    #[test]
    fn an_event_filter_keeps_the_measurements_it_matches_built_whole() {
        let bucket = doc! {
            "_id": 1,
            "meta": "s1",
            "data": {
                "_id": { "0": 10, "1": 11, "2": 12 },
                "t": { "0": 1, "1": 2, "2": 3 },
                "v": { "0": { "q": "a" }, "2": { "q": "b" } },
                "w": { "1": 7, "2": 8 },
            },
        };
        let bytes = bson::RawDocumentBuf::try_from(&bucket).unwrap();
        let stage = narrowed(doc! { "v.q": { "$in": ["b", "c"] } }, None);
        assert_eq!(
            stage.unpack_stored(&bytes).unwrap(),
            vec![doc! { "_id": 12, "t": 3, "v": { "q": "b" }, "w": 8, "st": "s1" }]
        );
        // On the meta value, on a missing field, and with only some fields decoded.
        let stage = narrowed(doc! { "st": "s1", "v": null }, Some(vec!["w".into()]));
        assert_eq!(stage.unpack_stored(&bytes).unwrap(), vec![doc! { "w": 7 }]);
        let stage = narrowed(doc! { "st": "s2" }, None);
        assert_eq!(stage.unpack_stored(&bytes).unwrap(), Vec::<Document>::new());
        // Keys that are not MongoDB's numbering are read through a map.
        let odd = doc! { "data": { "t": { "b": 1, "a": 2 }, "w": { "a": 5 } } };
        let bytes = bson::RawDocumentBuf::try_from(&odd).unwrap();
        let stage = narrowed(doc! { "t": { "$gte": 2 } }, None);
        assert_eq!(
            stage.unpack_stored(&bytes).unwrap(),
            vec![doc! { "t": 2, "w": 5 }]
        );
    }

    #[test]
    fn appending_copies_the_stored_columns_and_keeps_control() {
        let at = bson::DateTime::from_millis;
        let empty = RawDocumentBuf::try_from(&doc! { "_id": 1, "meta": "s1" }).unwrap();
        let raw = |doc: Document| RawDocumentBuf::try_from(&doc).unwrap();
        let first = append(
            &empty,
            &[raw(doc! { "t": at(61_000), "v": 2 })],
            "t",
            60_000,
        );
        let first = first.unwrap();
        let later = [
            raw(doc! { "t": at(62_000), "w": "x" }),
            raw(doc! { "t": at(63_000), "v": 1 }),
        ];
        let second = append(&first, &later, "t", 60_000).unwrap();
        assert_eq!(
            Document::try_from(second.as_ref()).unwrap(),
            doc! {
                "_id": 1,
                "meta": "s1",
                "control": {
                    "version": 1,
                    "min": { "t": at(60_000), "v": 1, "w": "x" },
                    "max": { "t": at(63_000), "v": 2, "w": "x" },
                    "count": 3_i64,
                },
                "data": {
                    "t": { "0": at(61_000), "1": at(62_000), "2": at(63_000) },
                    "v": { "0": 2, "2": 1 },
                    "w": { "1": "x" },
                },
            }
        );
    }

    #[test]
    fn bounds_of_objects_and_arrays_are_kept_element_by_element() {
        let at = bson::DateTime::from_millis;
        let raw = |doc: Document| RawDocumentBuf::try_from(&doc).unwrap();
        let empty = RawDocumentBuf::try_from(&doc! { "_id": 1 }).unwrap();
        let measurements = [
            raw(doc! { "t": at(0), "a": { "x": 1, "y": 2 }, "b": [1, 2], "s": "m" }),
            raw(doc! { "t": at(1), "a": { "x": 2, "y": 1, "z": 0 }, "b": [2, 1, 7], "s": "b" }),
            raw(doc! { "t": at(2), "a": 5, "s": 3.5, "n": f64::NAN }),
            raw(doc! { "t": at(3), "n": 1_i64 }),
        ];
        let bucket = append(&empty, &measurements, "t", 1).unwrap();
        let control = Document::try_from(bucket.as_ref()).unwrap();
        let control = control.get_document("control").unwrap();
        let nested = [
            raw(doc! { "t": at(0), "a": { "q": "1", "v": 0.25 } }),
            raw(doc! { "t": at(1), "a": { "q": "2", "v": 0.5 } }),
            raw(doc! { "t": at(2), "a": { "q": "0", "v": 0.75 } }),
        ];
        let nested = append(&empty, &nested, "t", 1).unwrap();
        let nested = Document::try_from(nested.as_ref()).unwrap();
        assert_eq!(
            nested
                .get_document("control")
                .unwrap()
                .get_document("min")
                .unwrap(),
            &doc! { "t": at(0), "a": { "q": "0", "v": 0.25 } }
        );
        let mut min = control.get_document("min").unwrap().clone();
        // NaN sorts before every number, and equals no value.
        assert!(min.remove("n").and_then(|n| n.as_f64()).unwrap().is_nan());
        assert_eq!(min, doc! { "t": at(0), "a": 5, "b": [1, 1, 7], "s": 3.5 });
        assert_eq!(
            control.get_document("max").unwrap(),
            &doc! {
                "t": at(3), "a": { "x": 2, "y": 2, "z": 0 }, "b": [2, 2, 7], "s": "m", "n": 1_i64,
            }
        );
    }

    #[test]
    fn an_event_filter_is_refused_as_its_match_would_be() {
        let parse = |filter: Document| {
            let spec = doc! { "timeField": "t", "eventFilter": filter };
            UnpackBucket::parse(&Bson::from(spec), &ParseContext::new()).unwrap_err()
        };
        let with_expr = parse(doc! { "$expr": { "$gt": ["$v", 1] } });
        assert_eq!(with_expr.code.0, 5346503, "{with_expr}");
        let with_where = parse(doc! { "$where": "this.v > 1" });
        assert_eq!(with_where.code.0, 16395, "{with_where}");
    }

    #[test]
    fn a_damaged_bucket_is_an_error_not_a_panic() {
        let bucket = doc! { "data": { "t": { "0": 1, "1": 2 }, "v": { "0": "abc" } } };
        let mut bytes = bson::RawDocumentBuf::try_from(&bucket)
            .unwrap()
            .into_bytes();
        // The string's length now runs past the end of the document.
        let at = bytes.windows(3).position(|w| w == b"abc").unwrap() - 4;
        bytes[at] = 0x7f;
        let damaged = RawDocument::from_bytes(&bytes).unwrap();
        let spec = Bson::from(doc! { "timeField": "t" });
        let stage = UnpackBucket::parse(&spec, &ParseContext::new()).unwrap();
        let error = stage.unpack_stored(damaged).unwrap_err();
        assert!(error.to_string().contains("corrupt bucket"), "{error}");
    }
}
