//! `$_internalUnpackBucket`: the measurements of time-series buckets, as MongoDB's stage
//! of the same name gives them. A time-series collection's reads start with it (see the
//! server's `timeseries.rs`, which also writes the buckets).
//!
//! A bucket is MongoDB's (version 1, uncompressed): `{_id, control: {version, min, max,
//! count}, meta, data: {<field>: {"0": v0, "1": v1, ...}}}`, where measurement `i` has
//! the values at key `i` of each field that it has, and the bucket's `meta` is the value
//! of every measurement's metaField. [`append`] writes the format, [`unpack_stored`]
//! reads it (from a bucket's bytes; [`unpack`] from a decoded bucket).

use crate::pipeline::DocumentStream;
use basalt_error::{Error, Result};
use bson::{Bson, Document, RawDocument};
use std::collections::HashMap;

/// The stage's specification.
#[derive(Debug)]
pub struct UnpackBucket {
    time_field: String,
    meta_field: Option<String>,
}

impl UnpackBucket {
    pub(crate) fn parse(spec: &Bson) -> Result<UnpackBucket> {
        let Bson::Document(spec) = spec else {
            return Err(Error::location(
                5346500,
                "$_internalUnpackBucket specification must be an object",
            ));
        };
        let time_field = spec.get_str("timeField").map_err(|_| {
            Error::location(5346504, "$_internalUnpackBucket needs a string 'timeField'")
        })?;
        Ok(UnpackBucket {
            time_field: time_field.to_string(),
            meta_field: spec.get_str("metaField").ok().map(str::to_string),
        })
    }

    /// The measurements of a bucket read as its stored bytes (see [`unpack_stored`]).
    pub fn unpack_stored(&self, bucket: &RawDocument) -> Result<Vec<Document>> {
        unpack_stored(bucket, &self.time_field, self.meta_field.as_deref())
    }

    pub(crate) fn apply<'a>(&'a self, input: DocumentStream<'a>) -> DocumentStream<'a> {
        Box::new(input.flat_map(move |bucket| {
            let measurements: Box<dyn Iterator<Item = Result<Document>> + Send> = match bucket {
                Ok(bucket) => match unpack(&bucket, &self.time_field, self.meta_field.as_deref()) {
                    Ok(measurements) => Box::new(measurements.into_iter().map(Ok)),
                    Err(e) => Box::new(std::iter::once(Err(e))),
                },
                Err(e) => Box::new(std::iter::once(Err(e))),
            };
            measurements
        }))
    }
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

/// Adds `measurements` to `bucket` (a new one when `bucket` is empty: `_id` set by the
/// caller first), keeping `control.min`, `control.max` and `control.count`. The time
/// field's minimum is rounded down to `rounding_ms`, as MongoDB rounds it.
pub fn append(
    bucket: &mut Document,
    measurements: &[Document],
    time_field: &str,
    rounding_ms: i64,
) -> Result<()> {
    let mut count = bucket
        .get_document("control")
        .ok()
        .and_then(|control| control.get("count"))
        .and_then(basalt_value::as_i64)
        .unwrap_or(0);
    let mut data = bucket.get_document("data").cloned().unwrap_or_default();
    let mut control = bucket.get_document("control").cloned().unwrap_or_default();
    let mut min = control.get_document("min").cloned().unwrap_or_default();
    let mut max = control.get_document("max").cloned().unwrap_or_default();
    for measurement in measurements {
        let index = count.to_string();
        for (field, value) in measurement {
            let column = match data.get_mut(field) {
                Some(Bson::Document(column)) => column,
                _ => {
                    data.insert(field.clone(), Document::new());
                    match data.get_mut(field) {
                        Some(Bson::Document(column)) => column,
                        _ => return Err(Error::internal("a bucket column vanished")),
                    }
                }
            };
            column.insert(index.clone(), value.clone());
            let lower = min
                .get(field)
                .is_none_or(|m| basalt_value::compare_values(value, m).is_lt());
            if lower {
                min.insert(field.clone(), value.clone());
            }
            let higher = max
                .get(field)
                .is_none_or(|m| basalt_value::compare_values(value, m).is_gt());
            if higher {
                max.insert(field.clone(), value.clone());
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
    bucket.insert("control", control);
    bucket.insert("data", data);
    Ok(())
}

/// The measurements of a decoded bucket (a delete's, or a stage's input): its bytes
/// unpacked by [`unpack_stored`].
pub fn unpack(
    bucket: &Document,
    time_field: &str,
    meta_field: Option<&str>,
) -> Result<Vec<Document>> {
    let bytes = bson::RawDocumentBuf::try_from(bucket).map_err(corrupt)?;
    unpack_stored(&bytes, time_field, meta_field)
}

/// The measurements of a bucket read as its stored bytes, in their order in it (the
/// time column's keys'), each with the bucket's meta value under the metaField when
/// there is one: each value decoded once, straight into its measurement.
pub fn unpack_stored(
    bucket: &RawDocument,
    time_field: &str,
    meta_field: Option<&str>,
) -> Result<Vec<Document>> {
    let Some(data) = subdocument(bucket, "data")? else {
        return Ok(Vec::new());
    };
    let Some(times) = subdocument(data, time_field)? else {
        return Ok(Vec::new());
    };
    let mut positions: HashMap<&str, usize> = HashMap::new();
    for (i, element) in times.into_iter().enumerate() {
        positions.insert(element.map_err(corrupt)?.0.as_str(), i);
    }
    let mut measurements = vec![Document::new(); positions.len()];
    for element in data {
        let (field, values) = element.map_err(corrupt)?;
        let Some(values) = values.as_document() else {
            continue;
        };
        for element in values {
            let (key, value) = element.map_err(corrupt)?;
            if let Some(&i) = positions.get(key.as_str()) {
                let value = Bson::try_from(value).map_err(corrupt)?;
                measurements[i].insert(field.as_str(), value);
            }
        }
    }
    if let (Some(meta_field), Some(meta)) = (meta_field, bucket.get("meta").map_err(corrupt)?) {
        let meta = Bson::try_from(meta).map_err(corrupt)?;
        for measurement in &mut measurements {
            measurement.insert(meta_field, meta.clone());
        }
    }
    Ok(measurements)
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
        let error = unpack_stored(damaged, "t", None).unwrap_err();
        assert!(error.to_string().contains("corrupt bucket"), "{error}");
    }
}
