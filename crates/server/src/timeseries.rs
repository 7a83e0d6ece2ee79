//! Time-series collections (`create` with `timeseries: {timeField, metaField,
//! granularity | bucketMaxSpanSeconds/bucketRoundingSeconds}`, `expireAfterSeconds`).
//!
//! As in MongoDB, the collection users name (`db.weather`) holds no documents itself:
//! its measurements are stored in buckets, documents of the collection
//! `db.system.buckets.weather` whose options hold the time-series options. A bucket
//! gathers up to [`BUCKET_MEASUREMENTS_MAX`] measurements of one meta value within one
//! time span (the granularity's), column by column (MongoDB's version 1 bucket, written
//! and read by `basalt_agg::time_series`), with each field's minimum and maximum in its
//! `control`: so a query's conditions on time and meta select whole buckets before any
//! is unpacked. The buckets carry an index on `meta` and the time bounds, through which
//! an insert finds the bucket a measurement goes into: where it goes depends only on the
//! stored buckets, so every replica set member puts it in the same one.
//!
//! A read of the collection runs as an aggregation over the buckets that unpacks them
//! (the reads of a view, `commands/views.rs`), with a `$match` on the buckets in front
//! when the reader's filter bounds the time or the meta value. Deletes rewrite the
//! buckets they touch; `expireAfterSeconds` is a TTL index on the buckets' latest time,
//! so a bucket goes when its newest measurement expires.

use crate::exec::{collect_matches, AccessPath, Deadline};
use crate::views::Resolved;
use basalt_catalog::{Catalog, Collection};
use basalt_error::{Error, ErrorCode, Result};
use basalt_query::Matcher;
use basalt_storage::Durability;
use bson::{doc, Bson, Document, RawDocument, RawDocumentBuf};
use std::sync::Arc;

/// The measurement field a time-series read's `$geoNear` measures: its `key`, or the
/// field of the only `2dsphere` index on a measurement field (the buckets'
/// `2dsphere_bucket` index on `data.<field>`), with mongod's errors when there is none.
pub fn geo_near_key(buckets: &Collection, geo_near: &basalt_agg::GeoNear) -> Result<String> {
    let key = geo_near.key().map(|key| format!("data.{key}"));
    let column = crate::geo::geo_near_key(buckets, key.as_deref(), geo_near.point())?;
    Ok(column
        .strip_prefix("data.")
        .map_or(column.clone(), str::to_string))
}

/// The collection that holds the buckets of time-series collection `name`.
pub const BUCKETS_PREFIX: &str = "system.buckets.";

/// The most measurements a bucket holds (MongoDB's default).
const BUCKET_MEASUREMENTS_MAX: i64 = 1000;

/// The longest span a bucket may cover (one year, MongoDB's limit).
const MAX_SPAN_SECONDS: i64 = 31_536_000;

/// A time-series collection's options.
#[derive(Clone, Debug, PartialEq)]
pub struct TimeSeries {
    pub time_field: String,
    pub meta_field: Option<String>,
    /// `seconds`, `minutes` or `hours`; `None` with custom bucketing.
    granularity: Option<String>,
    bucket_max_span_seconds: i64,
    bucket_rounding_seconds: i64,
}

impl TimeSeries {
    /// Parses `create`'s `timeseries` option, with mongod's errors.
    pub fn parse(spec: &Bson) -> Result<TimeSeries> {
        let Bson::Document(spec) = spec else {
            return Err(Error::type_mismatch(format!(
                "BSON field 'create.timeseries' is the wrong type '{}', expected type 'object'",
                crate::request::type_name(spec)
            )));
        };
        let field_name = |name: &str| -> Result<Option<String>> {
            match spec.get(name) {
                None | Some(Bson::Null) if name == "metaField" => Ok(None),
                Some(Bson::String(field)) if field.contains('\0') => Err(Error::bad_value(
                    format!("'{name}' cannot contain a null byte"),
                )),
                Some(Bson::String(field)) if field.contains('.') => Err(Error::new(
                    ErrorCode::INVALID_OPTIONS,
                    format!("'{name}' must be a top-level field"),
                )),
                Some(Bson::String(field)) => Ok(Some(field.clone())),
                None | Some(Bson::Null) => Err(Error::location(
                    40414,
                    format!("BSON field 'create.timeseries.{name}' is missing but a required field"),
                )),
                other => Err(Error::type_mismatch(format!(
                    "BSON field 'create.timeseries.{name}' is the wrong type '{}', expected type 'string'",
                    other.map_or("missing", crate::request::type_name)
                ))),
            }
        };
        for key in spec.keys() {
            let known = [
                "timeField",
                "metaField",
                "granularity",
                "bucketMaxSpanSeconds",
                "bucketRoundingSeconds",
            ];
            if !known.contains(&key.as_str()) {
                return Err(Error::location(
                    40415,
                    format!("BSON field 'create.timeseries.{key}' is an unknown field."),
                ));
            }
        }
        let time_field = field_name("timeField")?.unwrap_or_default();
        let meta_field = field_name("metaField")?;
        if meta_field.as_deref() == Some("_id") || meta_field.as_deref() == Some(&time_field) {
            return Err(Error::new(
                ErrorCode::INVALID_OPTIONS,
                "The 'metaField' cannot be '_id' or the 'timeField'",
            ));
        }
        let granularity = match spec.get("granularity") {
            None | Some(Bson::Null) => None,
            Some(Bson::String(g)) if ["seconds", "minutes", "hours"].contains(&g.as_str()) => {
                Some(g.clone())
            }
            Some(Bson::String(g)) => {
                return Err(Error::bad_value(format!(
                    "Enumeration value '{g}' for field 'create.timeseries.granularity' is not a \
                     valid value."
                )))
            }
            Some(other) => {
                return Err(Error::type_mismatch(format!(
                    "BSON field 'create.timeseries.granularity' is the wrong type '{}', expected type 'string'",
                    crate::request::type_name(other)
                )))
            }
        };
        let seconds = |name: &str| -> Result<Option<i64>> {
            match spec.get(name) {
                None | Some(Bson::Null) => Ok(None),
                Some(value) => {
                    let n = crate::request::coerced_integer(value).ok_or_else(|| {
                        Error::type_mismatch(format!(
                            "BSON field 'create.timeseries.{name}' is the wrong type '{}', \
                             expected type 'int'",
                            crate::request::type_name(value)
                        ))
                    })?;
                    let finite = basalt_value::as_f64(value).is_some_and(f64::is_finite);
                    if !finite || !(1..=MAX_SPAN_SECONDS).contains(&n) {
                        return Err(Error::bad_value(format!(
                            "'{name}' must be between 1 and {MAX_SPAN_SECONDS} seconds"
                        )));
                    }
                    Ok(Some(n))
                }
            }
        };
        let (max_span, rounding_given) = (
            seconds("bucketMaxSpanSeconds")?,
            seconds("bucketRoundingSeconds")?,
        );
        let (default_span, default_rounding) = match granularity.as_deref().unwrap_or("seconds") {
            "minutes" => (86_400, 3_600),
            "hours" => (2_592_000, 86_400),
            _ => (3_600, 60),
        };
        let (span, rounding) = match (max_span, rounding_given) {
            (None, None) => (default_span, default_rounding),
            // What listCollections shows (so what mongorestore sends back): the
            // granularity with its own span.
            (Some(span), None) if granularity.is_some() && span == default_span => {
                (default_span, default_rounding)
            }
            (Some(span), Some(rounding)) if span == rounding && granularity.is_none() => {
                (span, rounding)
            }
            _ => {
                return Err(Error::new(
                    ErrorCode::INVALID_OPTIONS,
                    "Time-series 'bucketMaxSpanSeconds' and 'bucketRoundingSeconds' must be \
                     given together, equal, and without 'granularity'",
                ))
            }
        };
        Ok(TimeSeries {
            granularity: granularity
                .or_else(|| rounding_given.is_none().then(|| "seconds".to_string())),
            time_field,
            meta_field,
            bucket_max_span_seconds: span,
            bucket_rounding_seconds: rounding,
        })
    }

    /// The options as `listCollections` shows them (and as the buckets keep them).
    pub fn to_document(&self) -> Document {
        let mut options = doc! { "timeField": &self.time_field };
        if let Some(meta) = &self.meta_field {
            options.insert("metaField", meta);
        }
        match &self.granularity {
            Some(granularity) => {
                options.insert("granularity", granularity);
                options.insert("bucketMaxSpanSeconds", self.bucket_max_span_seconds as i32);
            }
            None => {
                options.insert("bucketRoundingSeconds", self.bucket_rounding_seconds as i32);
                options.insert("bucketMaxSpanSeconds", self.bucket_max_span_seconds as i32);
            }
        }
        options
    }

    /// The index a time-series collection with a metaField has from its creation, as
    /// `listIndexes` shows it (the buckets' index on meta and time bounds behind it).
    pub fn default_index(&self) -> Option<Document> {
        let mut key = doc! { self.meta_field.as_deref()?: 1 };
        key.insert(&self.time_field, 1);
        let name = key
            .keys()
            .map(|field| format!("{field}_1"))
            .collect::<Vec<_>>()
            .join("_");
        Some(doc! { "v": 2, "key": key, "name": name })
    }

    fn from_options(options: &Document) -> Option<TimeSeries> {
        let spec = options.get_document("timeseries").ok()?;
        TimeSeries::parse(&Bson::Document(spec.clone())).ok()
    }

    /// The aggregation a read of the collection runs over its buckets.
    pub fn resolved(&self, name: &str) -> Resolved {
        let mut unpack = doc! {
            "timeField": &self.time_field,
            "bucketMaxSpanSeconds": self.bucket_max_span_seconds,
        };
        if let Some(meta) = &self.meta_field {
            unpack.insert("metaField", meta);
        }
        Resolved {
            collection: format!("{BUCKETS_PREFIX}{name}"),
            pipeline: vec![doc! { "$_internalUnpackBucket": unpack }],
            collation: None,
            time_series: Some(self.clone()),
        }
    }

    /// A filter on the buckets that keeps every bucket holding a measurement that
    /// matches `filter`: its conditions on the metaField become conditions on `meta`,
    /// and its bounds on the time become bounds on the buckets' time range. `None` when
    /// the filter says nothing about either.
    pub fn bucket_filter(&self, filter: &Document) -> Option<Document> {
        let mut bucket = Document::new();
        for (path, condition) in filter {
            let (top, rest) = path
                .split_once('.')
                .map_or((path.as_str(), None), |(t, r)| (t, Some(r)));
            if self.meta_field.as_deref() == Some(top) {
                let meta_path = rest.map_or("meta".to_string(), |rest| format!("meta.{rest}"));
                bucket.insert(meta_path, condition.clone());
            } else if path == &self.time_field {
                self.time_bounds(condition, &mut bucket);
            }
        }
        (!bucket.is_empty()).then_some(bucket)
    }

    /// A condition on the time field as bounds of the buckets' `control.min` and
    /// `control.max` times. A bucket spans less than `bucketMaxSpanSeconds` from its
    /// minimum, so a measurement at or after `t` is in a bucket whose minimum is past
    /// `t - span`: with that bound an index led by the minimum time reads only the
    /// buckets that can hold the time asked for (as MongoDB bounds it).
    fn time_bounds(&self, condition: &Bson, bucket: &mut Document) {
        let operators = match condition {
            Bson::Document(operators) if operators.keys().all(|k| k.starts_with('$')) => {
                operators.clone()
            }
            Bson::DateTime(_) => doc! { "$eq": condition.clone() },
            _ => return,
        };
        let span_ms = self.bucket_max_span_seconds.saturating_mul(1000);
        let (mut min, mut max) = (Document::new(), Document::new());
        for (operator, bound) in &operators {
            let Bson::DateTime(time) = bound else {
                continue;
            };
            let earliest_min = || {
                Bson::DateTime(bson::DateTime::from_millis(
                    time.timestamp_millis().saturating_sub(span_ms),
                ))
            };
            match operator.as_str() {
                "$gt" | "$gte" => {
                    max.insert(operator.clone(), bound.clone());
                    min.insert("$gt", earliest_min());
                }
                "$lt" | "$lte" => {
                    min.insert(operator.clone(), bound.clone());
                }
                "$eq" => {
                    max.insert("$gte", bound.clone());
                    min.insert("$lte", bound.clone());
                    min.insert("$gt", earliest_min());
                }
                _ => {}
            }
        }
        if !min.is_empty() {
            bucket.insert(format!("control.min.{}", self.time_field), min);
        }
        if !max.is_empty() {
            bucket.insert(format!("control.max.{}", self.time_field), max);
        }
    }
}

/// The name of the buckets collection of `name`.
pub fn buckets_name(name: &str) -> String {
    format!("{BUCKETS_PREFIX}{name}")
}

/// The time-series collection `db.name` and its buckets, if it is one. A name that is a
/// collection is never one, so that case costs one catalog lookup.
pub fn get(catalog: &Catalog, db: &str, name: &str) -> Option<(TimeSeries, Arc<Collection>)> {
    if name.starts_with(BUCKETS_PREFIX) || catalog.get(db, name).is_some() {
        return None;
    }
    let buckets = catalog.get(db, &buckets_name(name))?;
    let options = TimeSeries::from_options(&buckets.meta().options)?;
    Some((options, buckets))
}

/// Every time-series collection of `db`, by name.
pub fn list(catalog: &Catalog, db: &str) -> Vec<(String, TimeSeries, Document)> {
    catalog
        .collections_of(db)
        .into_iter()
        .filter_map(|buckets| {
            let meta = buckets.meta();
            let name = meta.name.strip_prefix(BUCKETS_PREFIX)?.to_string();
            let options = TimeSeries::from_options(&meta.options)?;
            Some((name, options, meta.options.clone()))
        })
        .collect()
}

/// Makes the time-series collection `db.name`: its buckets collection, with the index
/// inserts and queries find buckets by, and a TTL index when measurements expire.
pub fn create(
    catalog: &Catalog,
    db: &str,
    name: &str,
    options: &TimeSeries,
    expire_after_seconds: Option<i64>,
) -> Result<()> {
    let mut bucket_options = doc! { "timeseries": options.to_document() };
    if let Some(seconds) = expire_after_seconds {
        bucket_options.insert("expireAfterSeconds", seconds);
    }
    if catalog.get(db, name).is_some() || crate::views::get(catalog, db, name)?.is_some() {
        return Err(Error::new(
            ErrorCode::NAMESPACE_EXISTS,
            format!("Namespace {db}.{name} already exists"),
        ));
    }
    let buckets = match catalog.create(db, &buckets_name(name), bucket_options.clone()) {
        Ok(buckets) => buckets,
        Err(e) if e.code == ErrorCode::NAMESPACE_EXISTS => {
            let existing = catalog.get(db, &buckets_name(name));
            if existing.is_some_and(|b| b.meta().options == bucket_options) {
                return Ok(());
            }
            return Err(Error::new(
                ErrorCode::NAMESPACE_EXISTS,
                format!("Namespace {db}.{name} already exists with different options"),
            ));
        }
        Err(e) => return Err(e),
    };
    let min_time = format!("control.min.{}", options.time_field);
    let max_time = format!("control.max.{}", options.time_field);
    let mut key = Document::new();
    if options.meta_field.is_some() {
        key.insert("meta", 1);
    }
    key.insert(min_time, 1);
    key.insert(max_time.clone(), 1);
    // With a metaField this is the collection's own default index (listIndexes shows
    // it); without, the buckets' index that inserts use.
    let name = match options.default_index() {
        Some(index) => index.get_str("name").unwrap_or(TIME_INDEX).to_string(),
        None => TIME_INDEX.to_string(),
    };
    let mut indexes = vec![doc! { "key": key, "name": name }];
    if let Some(seconds) = expire_after_seconds {
        indexes.push(expiry_index(options, seconds));
    }
    for spec in indexes {
        catalog.add_index(&buckets, crate::commands::parse_index_spec(&spec, None)?)?;
    }
    Ok(())
}

/// Stores the measurements of an insert into a time-series collection, in their bytes:
/// each goes into the bucket of its meta value whose span holds its time and that has
/// room, or a new one. Returns the outcome of each measurement tried, in order (an
/// ordered insert tries none after the first that cannot be stored).
pub fn insert(
    options: &TimeSeries,
    buckets: &Collection,
    measurements: &[impl AsRef<RawDocument>],
    ordered: bool,
    durability: Durability,
) -> Vec<Result<()>> {
    let mut outcomes = Vec::with_capacity(measurements.len());
    // Measurements of one meta value go to their buckets together.
    let mut groups: Vec<(Option<Bson>, Group)> = Vec::new();
    for (position, measurement) in measurements.iter().enumerate() {
        match prepare(options, measurement.as_ref()) {
            Ok((meta, ready)) => {
                outcomes.push(Ok(()));
                match groups.iter_mut().find(|(m, _)| *m == meta) {
                    Some((_, group)) => group.push((position, ready)),
                    None => groups.push((meta, vec![(position, ready)])),
                }
            }
            Err(e) => {
                outcomes.push(Err(e));
                if ordered {
                    break;
                }
            }
        }
    }
    for (meta, mut group) in groups {
        group.sort_by_key(|(_, ready)| ready.time);
        let positions: Vec<usize> = group.iter().map(|(position, _)| *position).collect();
        if let Err(e) = store_group(options, buckets, meta, group, durability) {
            for position in positions {
                outcomes[position] = Err(e.clone());
            }
        }
    }
    outcomes
}

/// Measurements of one meta value, each with its position in the insert.
type Group = Vec<(usize, Ready)>;

/// A measurement ready for a bucket: its time, and its bytes with an `_id` first
/// (generated when missing) and without the metaField (the bucket holds it).
struct Ready {
    time: i64,
    bytes: RawDocumentBuf,
}

/// A measurement's meta value and the measurement [`Ready`] for a bucket; BadValue
/// without a date at the timeField.
fn prepare(options: &TimeSeries, measurement: &RawDocument) -> Result<(Option<Bson>, Ready)> {
    let invalid = |e: bson::error::Error| Error::bad_value(format!("invalid document: {e}"));
    let time = match measurement.get(&options.time_field).map_err(invalid)? {
        Some(bson::RawBsonRef::DateTime(time)) => time.timestamp_millis(),
        _ => {
            return Err(Error::bad_value(format!(
                "'{}' must be present and contain a valid BSON UTC datetime value",
                options.time_field
            )))
        }
    };
    let meta_field = options.meta_field.as_deref();
    let mut meta = None;
    let mut bytes = RawDocumentBuf::new();
    match measurement.get("_id").map_err(invalid)? {
        Some(id) => bytes.append(bson::raw::cstr!("_id"), id),
        None => bytes.append(bson::raw::cstr!("_id"), basalt_value::clock::object_id()),
    }
    for element in measurement {
        let (field, value) = element.map_err(invalid)?;
        if Some(field.as_str()) == meta_field {
            meta = Some(Bson::try_from(value).map_err(invalid)?);
        } else if field.as_str() != "_id" {
            bytes.append(field, value);
        }
    }
    Ok((meta, Ready { time, bytes }))
}

/// Writes one meta value's measurements (in time order) into buckets. Buckets are
/// read and written as their bytes: a measurement's values are appended to the stored
/// columns without decoding them.
fn store_group(
    options: &TimeSeries,
    buckets: &Collection,
    meta: Option<Bson>,
    group: Group,
    durability: Durability,
) -> Result<()> {
    let span_ms = options.bucket_max_span_seconds * 1000;
    let rounding_ms = options.bucket_rounding_seconds * 1000;
    let mut writer = buckets.writer();
    // The bucket being filled: record id (0 for a new one), its stored version, its
    // start and how many measurements it will hold with the pending ones.
    let mut open: Option<(u64, RawDocumentBuf)> = None;
    let (mut start, mut count) = (0i64, 0i64);
    let mut pending: Vec<RawDocumentBuf> = Vec::new();
    for (_, Ready { time, bytes }) in group {
        let room = open.is_some()
            && time >= start
            && time < start + span_ms
            && count < BUCKET_MEASUREMENTS_MAX;
        if !room {
            flush(&mut writer, open.take(), &mut pending, options, durability)?;
            let (record_id, bucket) = match find_bucket(options, buckets, meta.as_ref(), time)? {
                Some(found) => found,
                None => (0, new_bucket(meta.as_ref(), time, rounding_ms)?),
            };
            let control = bucket_control(&bucket)?;
            start = control
                .get_document("min")
                .ok()
                .and_then(|min| min.get_datetime(&options.time_field).ok())
                .map_or(time - time.rem_euclid(rounding_ms.max(1)), |t| {
                    t.timestamp_millis()
                });
            count = control
                .get("count")
                .and_then(basalt_value::as_i64)
                .unwrap_or(0);
            open = Some((record_id, bucket));
        }
        pending.push(bytes);
        count += 1;
    }
    flush(&mut writer, open, &mut pending, options, durability)
}

/// A bucket's `control`, decoded (empty for a new bucket).
fn bucket_control(bucket: &RawDocument) -> Result<Document> {
    let corrupt = |e: bson::error::Error| Error::internal(format!("a corrupt bucket: {e}"));
    match bucket.get("control").map_err(corrupt)? {
        Some(control) => match control.as_document() {
            Some(control) => Document::try_from(control).map_err(corrupt),
            None => Ok(Document::new()),
        },
        None => Ok(Document::new()),
    }
}

/// A new, empty bucket for `meta` starting at `time` (its `_id` holds the rounded time).
fn new_bucket(meta: Option<&Bson>, time_ms: i64, rounding_ms: i64) -> Result<RawDocumentBuf> {
    let start = time_ms - time_ms.rem_euclid(rounding_ms.max(1));
    let mut id = basalt_value::clock::object_id().bytes();
    let seconds = u32::try_from(start.div_euclid(1000)).unwrap_or(0);
    id[..4].copy_from_slice(&seconds.to_be_bytes());
    let mut bucket = doc! { "_id": bson::oid::ObjectId::from_bytes(id) };
    if let Some(meta) = meta {
        bucket.insert("meta", meta.clone());
    }
    Ok(RawDocumentBuf::try_from(&bucket)?)
}

/// Adds the pending measurements to `bucket` and stores it (record id 0: a new bucket).
fn flush(
    writer: &mut basalt_catalog::Writer<'_>,
    bucket: Option<(u64, RawDocumentBuf)>,
    pending: &mut Vec<RawDocumentBuf>,
    options: &TimeSeries,
    durability: Durability,
) -> Result<()> {
    let Some((record_id, before)) = bucket else {
        return Ok(());
    };
    if pending.is_empty() {
        return Ok(());
    }
    let rounding_ms = options.bucket_rounding_seconds * 1000;
    let after =
        basalt_agg::time_series::append(&before, pending, &options.time_field, rounding_ms)?;
    pending.clear();
    if record_id == 0 {
        writer
            .insert_many_raw(&[after], true, durability)?
            .into_iter()
            .try_for_each(|outcome| outcome.map(|_| ()))
    } else {
        writer.replace_raw(record_id, &before, after, durability)
    }
}

/// The newest bucket of `meta` whose span holds `time` and that has room, through the
/// buckets' index on meta and time: its record id and stored bytes.
fn find_bucket(
    options: &TimeSeries,
    buckets: &Collection,
    meta: Option<&Bson>,
    time_ms: i64,
) -> Result<Option<(u64, RawDocumentBuf)>> {
    let span_ms = options.bucket_max_span_seconds * 1000;
    let min_time = format!("control.min.{}", options.time_field);
    let mut filter = doc! {
        min_time.clone(): {
            "$lte": bson::DateTime::from_millis(time_ms),
            "$gt": bson::DateTime::from_millis(time_ms.saturating_sub(span_ms)),
        },
        "control.count": { "$lt": BUCKET_MEASUREMENTS_MAX },
    };
    match meta {
        Some(meta) => filter.insert("meta", doc! { "$eq": meta.clone() }),
        None => filter.insert("meta", doc! { "$exists": false }),
    };
    let matcher = Matcher::new(&filter)?;
    let path = AccessPath::choose(buckets, &filter, None, None)?;
    let snapshot = buckets.snapshot();
    // Only the filter's fields of each candidate are decoded; the newest is read whole.
    let mut newest = None;
    crate::exec::for_each_match(
        buckets,
        &*snapshot,
        &matcher,
        &path,
        Deadline::default(),
        Some(&[]),
        &mut |record_id, _| {
            newest = newest.max(Some(record_id));
            Ok(std::ops::ControlFlow::Continue(()))
        },
    )?;
    let Some(record_id) = newest else {
        return Ok(None);
    };
    let bytes = buckets
        .get_record_bytes(&*snapshot, record_id)?
        .ok_or_else(|| Error::internal("a bucket vanished under its snapshot"))?;
    let bucket = RawDocumentBuf::from_bytes(bytes)
        .map_err(|e| Error::internal(format!("a corrupt bucket: {e}")))?;
    Ok(Some((record_id, bucket)))
}

/// Deletes the measurements of the time-series collection that match `filter` (at most
/// one with `just_one`): each bucket holding one is rewritten without it, or deleted
/// when none of its measurements stays. Returns the measurements deleted.
pub fn delete(
    options: &TimeSeries,
    buckets: &Collection,
    filter: &Document,
    just_one: bool,
    durability: Durability,
) -> Result<Vec<Document>> {
    let matcher = Matcher::new(filter)?;
    let bucket_filter = options.bucket_filter(filter).unwrap_or_default();
    let bucket_matcher = Matcher::new(&bucket_filter)?;
    let path = AccessPath::choose(buckets, &bucket_filter, None, None)?;
    let mut writer = buckets.writer();
    let candidates = collect_matches(buckets, &bucket_matcher, &path, None, Deadline::default())?;
    let rounding_ms = options.bucket_rounding_seconds * 1000;
    let mut deleted = Vec::new();
    for (record_id, bucket) in candidates {
        if just_one && !deleted.is_empty() {
            break;
        }
        let meta = options
            .meta_field
            .as_deref()
            .zip(bucket.get("meta").cloned());
        let mut kept = Vec::new();
        let before = deleted.len();
        let measurements = basalt_agg::time_series::unpack(
            &bucket,
            &options.time_field,
            options.meta_field.as_deref(),
        )?;
        for measurement in measurements {
            let room = !just_one || deleted.is_empty();
            let gone = room && matcher.try_matches(&measurement)?;
            if gone {
                deleted.push(measurement);
            } else {
                let mut stored = measurement;
                if let Some((field, _)) = &meta {
                    stored.remove(*field);
                }
                kept.push(stored);
            }
        }
        if deleted.len() == before {
            continue;
        }
        if kept.is_empty() {
            writer.delete(record_id, &bucket, durability)?;
        } else {
            let mut rewritten = doc! { "_id": bucket.get("_id").cloned().unwrap_or(Bson::Null) };
            if let Some(meta) = bucket.get("meta") {
                rewritten.insert("meta", meta.clone());
            }
            basalt_agg::time_series::append_document(
                &mut rewritten,
                &kept,
                &options.time_field,
                rounding_ms,
            )?;
            writer.replace(record_id, &bucket, &rewritten, durability)?;
        }
    }
    Ok(deleted)
}

/// An update of a time-series collection: as MongoDB allows it, a `multi` update with
/// update operators that change only the metaField, selecting measurements by the
/// metaField alone (InvalidOptions otherwise). It rewrites the `meta` of each bucket it
/// selects. Returns how many measurements matched and how many changed.
pub fn update_meta(
    options: &TimeSeries,
    buckets: &Collection,
    statement: &Document,
    durability: Durability,
) -> Result<(u64, u64)> {
    let refuse = |why: &str| {
        Err(Error::new(
            ErrorCode::INVALID_OPTIONS,
            format!("Cannot perform an update on a time-series collection {why}"),
        ))
    };
    let Some(meta_field) = options.meta_field.as_deref() else {
        return refuse("that has no metaField");
    };
    if !statement.get_bool("multi").unwrap_or(false) {
        return refuse("with multi: false");
    }
    if statement.get_bool("upsert").unwrap_or(false) {
        return refuse("with upsert: true");
    }
    let on_meta = |path: &str| {
        path == meta_field
            || path
                .strip_prefix(meta_field)
                .is_some_and(|rest| rest.starts_with('.'))
    };
    let filter = statement.get_document("q").cloned().unwrap_or_default();
    if !filter.keys().all(|path| on_meta(path)) {
        return refuse("that selects measurements by fields other than the metaField");
    }
    let Ok(update) = statement.get_document("u") else {
        return refuse("with a pipeline");
    };
    let mut on_buckets = Document::new();
    for (operator, fields) in update {
        let Bson::Document(fields) = fields else {
            return refuse("with a replacement document");
        };
        if !operator.starts_with('$') || operator == "$rename" {
            return refuse(&format!("with {operator}"));
        }
        let mut renamed = Document::new();
        for (path, value) in fields {
            if !on_meta(path) {
                return refuse("that does not update only the metaField");
            }
            renamed.insert(format!("meta{}", &path[meta_field.len()..]), value.clone());
        }
        on_buckets.insert(operator.clone(), renamed);
    }
    let update = basalt_query::UpdateSpec::parse(&on_buckets, None)?;
    let bucket_filter = options.bucket_filter(&filter).unwrap_or_default();
    let matcher = Matcher::new(&bucket_filter)?;
    let path = AccessPath::choose(buckets, &bucket_filter, None, None)?;
    let mut writer = buckets.writer();
    let (mut matched, mut modified) = (0u64, 0u64);
    for (record_id, bucket) in collect_matches(buckets, &matcher, &path, None, Deadline::default())?
    {
        let count = bucket
            .get_document("control")
            .ok()
            .and_then(|control| control.get("count"))
            .and_then(basalt_value::as_i64)
            .unwrap_or(0) as u64;
        matched += count;
        let mut after = bucket.clone();
        if update.apply(&mut after, &basalt_query::UpdateContext::new())? {
            writer.replace(record_id, &bucket, &after, durability)?;
            modified += count;
        }
    }
    Ok((matched, modified))
}

/// `collMod` of a time-series collection: its bucketing may only grow (a coarser
/// `granularity`, or a longer `bucketMaxSpanSeconds` with an equal
/// `bucketRoundingSeconds`), and `expireAfterSeconds` sets or (`"off"`) removes its
/// expiry. Validators and change stream images are refused (InvalidOptions).
pub fn modify(catalog: &Catalog, buckets: &Collection, body: &Document) -> Result<()> {
    let mut options = buckets.meta().options.clone();
    let mut series = TimeSeries::from_options(&options)
        .ok_or_else(|| Error::internal("time-series buckets without their options"))?;
    let mut expiry: Option<Option<i64>> = None;
    for (key, value) in body.iter().skip(1) {
        match key.as_str() {
            "timeseries" => series = series.modified(value)?,
            "expireAfterSeconds" => expiry = Some(expire_after_seconds(value)?),
            "validator"
            | "validationLevel"
            | "validationAction"
            | "changeStreamPreAndPostImages" => {
                return Err(Error::new(
                    ErrorCode::INVALID_OPTIONS,
                    format!("option '{key}' is not allowed on a time-series collection"),
                ))
            }
            generic if crate::request::GENERIC_COMMAND_FIELDS.contains(&generic) => {}
            other => {
                return Err(Error::new(
                    ErrorCode::INVALID_OPTIONS,
                    format!(
                        "collMod option '{other}' is not supported on a time-series collection"
                    ),
                ))
            }
        }
    }
    options.insert("timeseries", series.to_document());
    if let Some(expiry) = expiry {
        match expiry {
            Some(seconds) => options.insert("expireAfterSeconds", seconds),
            None => options.remove("expireAfterSeconds"),
        };
        set_expiry(catalog, buckets, &series, expiry)?;
    }
    catalog.set_options(buckets, options)
}

/// collMod's `expireAfterSeconds` on a time-series or clustered collection: `"off"`
/// (`None`) or a number of seconds, coerced as mongod coerces it (below 0 is 0).
pub fn expire_after_seconds(value: &Bson) -> Result<Option<i64>> {
    let invalid = |what: String| {
        Err(Error::new(
            ErrorCode::INVALID_OPTIONS,
            format!(
                "Invalid value for 'expireAfterSeconds': {what} (a number of seconds or \"off\")"
            ),
        ))
    };
    match value {
        Bson::String(off) if off == "off" => Ok(None),
        Bson::String(other) => invalid(format!("'{other}'")),
        _ => match crate::request::coerced_integer(value) {
            Some(seconds) => {
                let now = basalt_value::clock::now().timestamp_millis() / 1000;
                if (0..=now).contains(&seconds) {
                    Ok(Some(seconds))
                } else {
                    invalid(seconds.to_string())
                }
            }
            None => Err(Error::type_mismatch(format!(
                "BSON field 'collMod.expireAfterSeconds' is the wrong type '{}'",
                crate::request::type_name(value)
            ))),
        },
    }
}

/// The buckets' TTL index: made, changed or removed to match `expiry`.
fn set_expiry(
    catalog: &Catalog,
    buckets: &Collection,
    series: &TimeSeries,
    expiry: Option<i64>,
) -> Result<()> {
    let exists = buckets
        .meta()
        .indexes
        .iter()
        .any(|i| i.name == EXPIRY_INDEX);
    match (expiry, exists) {
        (Some(seconds), true) => catalog
            .set_index_expiry(buckets, EXPIRY_INDEX, Some(seconds))
            .map(|_| ()),
        (Some(seconds), false) => {
            let spec = expiry_index(series, seconds);
            catalog.add_index(buckets, crate::commands::parse_index_spec(&spec, None)?)
        }
        (None, true) => catalog.remove_index(buckets, EXPIRY_INDEX),
        (None, false) => Ok(()),
    }
}

/// The name of the buckets' index on their time bounds, without a metaField.
const TIME_INDEX: &str = "bucket_time";

/// Whether a buckets' index is the buckets' own (not one of the collection's).
pub fn is_internal_index(name: &str) -> bool {
    name == TIME_INDEX || name == EXPIRY_INDEX
}

/// The name of the buckets' TTL index.
const EXPIRY_INDEX: &str = "bucket_expiry";

/// The buckets' TTL index: on the newest time of each bucket.
fn expiry_index(series: &TimeSeries, seconds: i64) -> Document {
    doc! {
        "key": { format!("control.max.{}", series.time_field): 1 },
        "name": EXPIRY_INDEX,
        "expireAfterSeconds": seconds,
    }
}

impl TimeSeries {
    /// These options after collMod's `timeseries` change (bucketing may only grow).
    fn modified(&self, change: &Bson) -> Result<TimeSeries> {
        let change = match change {
            Bson::Null => return Ok(self.clone()),
            Bson::Document(change) => change,
            other => {
                return Err(Error::type_mismatch(format!(
                "BSON field 'collMod.timeseries' is the wrong type '{}', expected type 'object'",
                crate::request::type_name(other)
            )))
            }
        };
        if change.is_empty() {
            return Ok(self.clone());
        }
        let mut spec = doc! { "timeField": &self.time_field };
        if let Some(meta) = &self.meta_field {
            spec.insert("metaField", meta);
        }
        for (key, value) in change {
            match key.as_str() {
                "granularity" | "bucketMaxSpanSeconds" | "bucketRoundingSeconds" => {
                    spec.insert(key.clone(), value.clone());
                }
                other => {
                    return Err(Error::location(
                        40415,
                        format!("BSON field 'collMod.timeseries.{other}' is an unknown field."),
                    ))
                }
            }
        }
        let granularity_only = change.contains_key("granularity")
            && !change.contains_key("bucketMaxSpanSeconds")
            && !change.contains_key("bucketRoundingSeconds");
        if change.get("granularity") == Some(&Bson::Null)
            || (!granularity_only && !change.contains_key("granularity"))
        {
            spec.remove("granularity");
        }
        let changed = TimeSeries::parse(&Bson::Document(spec))?;
        if changed.bucket_max_span_seconds < self.bucket_max_span_seconds
            || changed.bucket_rounding_seconds < self.bucket_rounding_seconds
        {
            return Err(Error::new(
                ErrorCode::INVALID_OPTIONS,
                "Invalid transition for the time-series bucketing: it may only grow",
            ));
        }
        Ok(changed)
    }
}

impl TimeSeries {
    /// An index spec of the collection as the buckets' index that serves it, as MongoDB
    /// translates it: the metaField becomes `meta`, the time and other fields the
    /// bounds of each bucket (`control.min`/`control.max`). The name is the one the
    /// spec asks for, or made from the key as given.
    pub fn bucket_index(&self, spec: &Document) -> Result<Document> {
        let refuse = |code: ErrorCode, why: &str| {
            Err(Error::new(
                code,
                format!("{why} on a time-series collection"),
            ))
        };
        let Ok(key) = spec.get_document("key") else {
            return Ok(spec.clone());
        };
        for option in ["unique", "sparse"] {
            if spec.get_bool(option).unwrap_or(false) {
                return refuse(
                    ErrorCode::INVALID_OPTIONS,
                    &format!("a {option} index is not allowed"),
                );
            }
        }
        if spec.contains_key("expireAfterSeconds") && !spec.contains_key("partialFilterExpression")
        {
            return refuse(
                ErrorCode::INVALID_OPTIONS,
                "a TTL index needs a partialFilterExpression on the metaField",
            );
        }
        let mut bucket_key = Document::new();
        for (field, direction) in key {
            match direction {
                Bson::String(kind) if kind == "text" => {
                    return refuse(ErrorCode::INVALID_OPTIONS, "a text index is not allowed")
                }
                Bson::String(kind) if field.contains("$**") || kind == "wildcard" => {
                    return refuse(ErrorCode(7246201), "a wildcard index is not allowed")
                }
                _ if field.contains("$**") => {
                    return refuse(ErrorCode(7246201), "a wildcard index is not allowed")
                }
                _ => {}
            }
            if let Some(rest) = self.meta_path(field) {
                bucket_key.insert(format!("meta{rest}"), direction.clone());
                continue;
            }
            if direction.as_str() == Some("2dsphere") {
                bucket_key.insert(format!("data.{field}"), basalt_catalog::SPHERE_BUCKET);
                continue;
            }
            let ascending = match direction {
                Bson::String(_) => {
                    return refuse(
                        ErrorCode::CANNOT_CREATE_INDEX,
                        "an index of this type on a measurement field is not allowed",
                    )
                }
                other => basalt_value::as_f64(other).is_none_or(|d| d >= 0.0),
            };
            let (min, max) = (
                format!("control.min.{field}"),
                format!("control.max.{field}"),
            );
            if ascending {
                bucket_key.insert(min, direction.clone());
                bucket_key.insert(max, direction.clone());
            } else {
                bucket_key.insert(max, direction.clone());
                bucket_key.insert(min, direction.clone());
            }
        }
        let mut translated = spec.clone();
        if !translated.contains_key("name") {
            translated.insert("name", crate::commands::generated_index_name(key));
        }
        translated.insert("key", bucket_key);
        if let Ok(filter) = spec.get_document("partialFilterExpression") {
            let on_meta = filter.keys().all(|path| self.meta_path(path).is_some());
            let Some(buckets) = self.bucket_filter(filter).filter(|_| on_meta) else {
                return refuse(
                    ErrorCode::COMMAND_NOT_SUPPORTED,
                    "a partialFilterExpression on fields other than the metaField is not \
                     supported by Basalt yet",
                );
            };
            translated.insert("partialFilterExpression", buckets);
        }
        Ok(translated)
    }

    /// The key of the collection that a buckets' index key serves (the reverse of
    /// [`TimeSeries::bucket_index`]); `None` for the buckets' own indexes.
    pub fn user_key(&self, bucket_key: &Document) -> Option<Document> {
        let meta_field = self.meta_field.as_deref();
        let mut key = Document::new();
        let mut fields = bucket_key.iter().peekable();
        while let Some((field, direction)) = fields.next() {
            if let (Some(name), Some(basalt_catalog::SPHERE_BUCKET)) =
                (field.strip_prefix("data."), direction.as_str())
            {
                key.insert(name, "2dsphere");
                continue;
            }
            if let Some(rest) = field.strip_prefix("meta") {
                if rest.is_empty() || rest.starts_with('.') {
                    key.insert(format!("{}{rest}", meta_field?), direction.clone());
                    continue;
                }
            }
            let (first, second) = match field.strip_prefix("control.min.") {
                Some(name) => (name, format!("control.max.{name}")),
                None => {
                    let name = field.strip_prefix("control.max.")?;
                    (name, format!("control.min.{name}"))
                }
            };
            let (next, _) = fields.next()?;
            if *next != second {
                return None;
            }
            key.insert(first, direction.clone());
        }
        Some(key)
    }

    /// What follows the metaField in `path` ("" for the metaField itself), if the path
    /// is in the metaField.
    fn meta_path<'p>(&self, path: &'p str) -> Option<&'p str> {
        let rest = path.strip_prefix(self.meta_field.as_deref()?)?;
        (rest.is_empty() || rest.starts_with('.')).then_some(rest)
    }
}
