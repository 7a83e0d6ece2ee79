//! `create`: makes a collection explicitly, with options, or a view (`viewOn`,
//! `pipeline`; see `crate::views`).
//!
//! A capped collection keeps its bounds in its options (see `basalt_catalog`'s
//! `capped.rs`); a validator is checked here and applied by `crate::validation`; a
//! time-series collection is made by `crate::timeseries`. Encrypted collections are not
//! built; asking for one is refused with a clear error rather than silently creating a
//! plain collection that would behave differently. A view ignores the options of collections, once they are
//! checked, as mongod does. A clustered collection (`clusteredIndex` on `_id`) is
//! accepted: its `_id` index carries the given name and is reported as clustered, while
//! records keep insertion order on disk (MongoDB leaves natural order unspecified).

use super::write_batch::durability;
use super::Ctx;
use crate::request::{is_requested, Fields};
use crate::timeseries::TimeSeries;
use crate::views::{self, Definer, View};
use basalt_catalog::validate_collection_name;
use basalt_error::{Error, ErrorCode, Result};
use bson::{doc, Bson, Document};

/// Options that ask for collection kinds Basalt does not have yet.
const UNSUPPORTED_OPTIONS: &[&str] = &["encryptedFields"];

/// Options a time-series collection cannot have (InvalidOptions).
const NOT_FOR_TIME_SERIES: &[&str] = &[
    "capped",
    "validator",
    "validationLevel",
    "validationAction",
    "idIndex",
    "clusteredIndex",
    "changeStreamPreAndPostImages",
];

/// The largest size bound of a capped collection (1 PB, MongoDB's).
const MAX_CAPPED_SIZE_BYTES: i64 = 1 << 50;

/// The most documents a capped collection's `max` may allow.
const MAX_CAPPED_DOCUMENTS: i64 = i32::MAX as i64;

/// Options a view cannot have, with the error mongod gives.
const NOT_FOR_VIEWS: &[(&str, ErrorCode)] = &[
    ("timeseries", ErrorCode::INVALID_OPTIONS),
    ("idIndex", ErrorCode::INVALID_OPTIONS),
    ("clusteredIndex", ErrorCode(6026500)),
    ("encryptedFields", ErrorCode(6346401)),
    ("expireAfterSeconds", ErrorCode::INVALID_OPTIONS),
];

pub fn create(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let fields = Fields::new(body);
    let name = fields.collection()?;
    let view_on = match body.get("viewOn") {
        Some(value) => views::parse_view_on("create", value)?,
        None => None,
    };
    let pipeline = match body.get("pipeline") {
        Some(value) => Some(views::parse_pipeline("create", value, Definer::Create)?),
        None => None,
    };
    if view_on.is_none() && body.get("pipeline").is_some_and(is_requested) {
        return Err(Error::new(
            ErrorCode::INVALID_OPTIONS,
            "'pipeline' requires 'viewOn' to also be specified",
        ));
    }
    let series = match body.get("timeseries") {
        None | Some(Bson::Null) => None,
        Some(spec) => Some(TimeSeries::parse(spec)?),
    };
    let options = collection_options(body, view_on.is_some())?;
    if let Some(view_on) = view_on {
        let images = body
            .get_document("changeStreamPreAndPostImages")
            .is_ok_and(|images| images.get_bool("enabled").unwrap_or(false));
        if images {
            return Err(Error::new(
                ErrorCode::INVALID_OPTIONS,
                "option 'changeStreamPreAndPostImages' cannot be used with a view",
            ));
        }
        if let Some((option, code)) = NOT_FOR_VIEWS
            .iter()
            .find(|(option, _)| body.get(*option).is_some_and(is_requested))
        {
            return Err(Error::new(
                *code,
                format!("option '{option}' cannot be used with a view"),
            ));
        }
        let view = View {
            name: name.to_string(),
            view_on,
            pipeline: pipeline.unwrap_or_default(),
            collation: fields.collation()?.map(|c| c.spec().clone()),
        };
        return create_view(ctx, body, view);
    }
    let expire = options
        .get("expireAfterSeconds")
        .and_then(basalt_value::as_i64);
    if let Some(series) = series {
        if let Some(option) = NOT_FOR_TIME_SERIES
            .iter()
            .find(|option| body.get(**option).is_some_and(is_requested))
        {
            return Err(Error::new(
                ErrorCode::INVALID_OPTIONS,
                format!("option '{option}' cannot be used with a time-series collection"),
            ));
        }
        crate::timeseries::create(&ctx.server.catalog, ctx.db, name, &series, expire)?;
        return Ok(Document::new());
    }
    if expire.is_some() && !options.contains_key("clusteredIndex") {
        return Err(Error::new(
            ErrorCode::INVALID_OPTIONS,
            "'expireAfterSeconds' requires clustering or a time-series collection",
        ));
    }
    if views::get(&ctx.server.catalog, ctx.db, name)?.is_some()
        || crate::timeseries::get(&ctx.server.catalog, ctx.db, name).is_some()
    {
        return Err(namespace_exists(ctx.db, name));
    }
    let reply = create_collection(ctx, name, options)?;
    // A clustered collection's TTL: documents go when their `_id` date expires.
    if let (Some(seconds), Some(collection)) = (expire, ctx.server.catalog.get(ctx.db, name)) {
        let id_index = collection.meta().indexes[0].name.clone();
        ctx.server
            .catalog
            .set_index_expiry(&collection, &id_index, Some(seconds))?;
    }
    Ok(reply)
}

/// `expireAfterSeconds`: a whole number of seconds from 0 up to the seconds since the
/// epoch (InvalidOptions otherwise), coerced as mongod coerces it.
fn expire_after_seconds(value: &Bson) -> Result<i64> {
    let seconds = crate::request::coerced_integer(value).ok_or_else(|| {
        Error::type_mismatch(format!(
            "BSON field 'create.expireAfterSeconds' is the wrong type '{}', expected types \
             '[long, int, decimal, double]'",
            crate::request::type_name(value)
        ))
    })?;
    let now = basalt_value::clock::now().timestamp_millis() / 1000;
    if !(0..=now).contains(&seconds) {
        return Err(Error::new(
            ErrorCode::INVALID_OPTIONS,
            format!("'expireAfterSeconds' must be between 0 and {now}, not {seconds}"),
        ));
    }
    Ok(seconds)
}

fn namespace_exists(db: &str, name: &str) -> Error {
    Error::new(
        ErrorCode::NAMESPACE_EXISTS,
        format!("Namespace {db}.{name} already exists with different options"),
    )
}

/// Makes the view `view`; the same view again succeeds, as `create` of the same
/// collection does.
fn create_view(ctx: &Ctx<'_>, body: &Document, view: View) -> Result<Document> {
    if crate::transactions::in_transaction(body) {
        return Err(Error::new(
            ErrorCode::OPERATION_NOT_SUPPORTED_IN_TRANSACTION,
            "Cannot create a view in a multi-document transaction.",
        ));
    }
    let catalog = &ctx.server.catalog;
    validate_collection_name(ctx.db, &view.name)?;
    let series = crate::timeseries::get(catalog, ctx.db, &view.name).is_some();
    if series || catalog.get(ctx.db, &view.name).is_some() {
        return Err(namespace_exists(ctx.db, &view.name));
    }
    match views::get(catalog, ctx.db, &view.name)? {
        Some(existing) if existing == view => return Ok(Document::new()),
        Some(_) => return Err(namespace_exists(ctx.db, &view.name)),
        None => {}
    }
    views::check_graph(catalog, ctx.db, &view)?;
    views::store(catalog, ctx.db, &view, durability(&Fields::new(body))?)?;
    Ok(Document::new())
}

/// A collection's options, checked; those a view ignores are checked all the same.
fn collection_options(body: &Document, view: bool) -> Result<Document> {
    // A clustered collection is neither capped nor bounded by a count (given at all,
    // clusteredIndex conflicts with capped), as mongod refuses them first.
    if let Some(clustered) = body
        .get("clusteredIndex")
        .filter(|v| !view && **v != Bson::Null)
    {
        if body.get("capped").is_some_and(truthy) {
            return Err(Error::location(
                6049200,
                "Cannot create a clustered collection that is also capped",
            ));
        }
        if truthy(clustered) && body.get("max").is_some_and(|max| *max != Bson::Null) {
            return Err(Error::location(
                6049204,
                "'max' is not supported with a clustered collection",
            ));
        }
    }
    let mut options = capped_options(body, view)?;
    for (key, value) in body.iter().skip(1) {
        if key == "viewOn" || key == "pipeline" {
            continue;
        }
        if UNSUPPORTED_OPTIONS.contains(&key.as_str()) && is_requested(value) && !view {
            return Err(Error::new(
                ErrorCode::COMMAND_NOT_SUPPORTED,
                format!("create with option '{key}' is not supported by Basalt yet"),
            ));
        }
        if key == "expireAfterSeconds" {
            if value != &Bson::Null {
                options.insert(key.clone(), expire_after_seconds(value)?);
            }
        } else if key == "idIndex" {
            check_id_index(body, value)?;
        } else if key == "clusteredIndex" {
            if let Some(clustered) = clustered_index(value)? {
                options.insert(key.clone(), clustered);
            }
        } else if key == "changeStreamPreAndPostImages" {
            if pre_and_post_images("create", value)? == Some(true) {
                options.insert(key.clone(), doc! { "enabled": true });
            }
        } else if key == "validationLevel" || key == "validationAction" {
            // Null is the default, as if not given.
            if value != &Bson::Null {
                options.insert(key.clone(), validation_setting(key, value)?);
            }
        } else if key == "validator" {
            let db = body.get_str("$db").unwrap_or_default();
            let name = body.get_str("create").unwrap_or_default();
            if let Some(validator) = crate::validation::check_spec(db, name, "create", value)? {
                options.insert(key.clone(), validator);
            }
        } else if key == "collation" {
            // MongoDB keeps the whole spec, its defaults filled in; the simple one not.
            let collation = Fields::new(body).collation()?;
            if let Some(collation) = collation {
                options.insert(key.clone(), collation.spec().clone());
            }
        } else if key == "indexOptionDefaults" {
            check_index_option_defaults(value)?;
            if !is_empty_document(value) {
                options.insert(key.clone(), value.clone());
            }
        } else if key == "storageEngine" {
            check_storage_engine(value)?;
            if !is_empty_document(value) {
                options.insert(key.clone(), value.clone());
            }
        }
        // The rest are read apart (a capped collection's bounds, see
        // [`capped_options`]), generic arguments, or options that mean nothing here;
        // fields create does not know were refused before it ran (`arguments.rs`).
    }
    with_validation_defaults(&mut options);
    Ok(options)
}

/// A validator's level and action, MongoDB's defaults when not given (listCollections
/// shows them with the validator).
pub fn with_validation_defaults(options: &mut Document) {
    if options.contains_key("validator") {
        if !options.contains_key("validationLevel") {
            options.insert("validationLevel", "strict");
        }
        if !options.contains_key("validationAction") {
            options.insert("validationAction", "error");
        }
    }
}

/// A capped collection's options: `capped: true` with `size` and `max` (see
/// [`capped_size`], [`capped_max`]). Empty when not capped.
fn capped_options(body: &Document, view: bool) -> Result<Document> {
    let capped = match body.get("capped") {
        None | Some(Bson::Null) => false,
        Some(Bson::Boolean(capped)) => *capped,
        // Any number: true unless zero (NaN is true), as mongod reads it.
        Some(n) if basalt_value::is_number(n) => basalt_value::as_f64(n) != Some(0.0),
        Some(other) => {
            return Err(Error::type_mismatch(format!(
                "BSON field 'create.capped' is the wrong type '{}', expected type 'bool'",
                crate::request::type_name(other)
            )))
        }
    };
    if !capped {
        let bound = ["size", "max"]
            .into_iter()
            .find(|field| body.get(*field).is_some_and(|v| *v != Bson::Null));
        return match bound {
            Some(field) if !view => Err(Error::new(
                ErrorCode::INVALID_OPTIONS,
                format!("the '{field}' field is only valid with 'capped: true'"),
            )),
            _ => Ok(Document::new()),
        };
    }
    let size = match body.get("size") {
        None | Some(Bson::Null) => {
            return Err(Error::new(
                ErrorCode::INVALID_OPTIONS,
                "the 'size' field is required when 'capped' is true",
            ))
        }
        Some(size) => capped_size(size)?,
    };
    let mut options = doc! { "capped": true, "size": size };
    if let Some(max) = body.get("max").filter(|max| **max != Bson::Null) {
        if let Some(max) = capped_max(max)? {
            options.insert("max", max);
        }
    }
    Ok(options)
}

/// A capped collection's `size` in bytes: from 1 to 1 PB (BadValue otherwise), kept
/// rounded up to a multiple of 256 as mongod keeps it.
pub fn capped_size(value: &Bson) -> Result<Bson> {
    let size = capped_bound("size", value)?;
    if !(1..=MAX_CAPPED_SIZE_BYTES).contains(&size) {
        return Err(Error::bad_value(format!(
            "the 'size' of a capped collection must be between 1 and {MAX_CAPPED_SIZE_BYTES}, \
             not {size}"
        )));
    }
    Ok(whole_number((size as u64).next_multiple_of(256) as i64))
}

/// A capped collection's `max` documents: below 2^31 (BadValue otherwise); `None`, no
/// bound, when not positive.
pub fn capped_max(value: &Bson) -> Result<Option<Bson>> {
    let max = capped_bound("max", value)?;
    if max > MAX_CAPPED_DOCUMENTS {
        return Err(Error::bad_value(format!(
            "the 'max' of a capped collection must be below 2^31, not {max}"
        )));
    }
    Ok((max > 0).then(|| whole_number(max)))
}

/// A capped collection's `size` or `max`: a number, coerced as mongod coerces it.
pub fn capped_bound(field: &str, value: &Bson) -> Result<i64> {
    crate::request::coerced_integer(value).ok_or_else(|| {
        Error::type_mismatch(format!(
            "BSON field '{field}' is the wrong type '{}', expected types '[long, int, decimal, \
             double]'",
            crate::request::type_name(value)
        ))
    })
}

/// A whole number as mongod writes one: an int when it fits.
fn whole_number(n: i64) -> Bson {
    i32::try_from(n).map_or(Bson::Int64(n), Bson::Int32)
}

/// `validationLevel` (`off`, `strict`, `moderate`) or `validationAction` (`error`,
/// `warn`, `errorAndLog`).
pub fn validation_setting(field: &str, value: &Bson) -> Result<Bson> {
    let allowed: &[&str] = if field == "validationLevel" {
        &["off", "strict", "moderate"]
    } else {
        &["error", "warn", "errorAndLog"]
    };
    match value {
        Bson::String(setting) if allowed.contains(&setting.as_str()) => Ok(value.clone()),
        Bson::String(setting) => Err(Error::bad_value(format!(
            "Enumeration value '{setting}' for field '{field}' is not a valid value."
        ))),
        other => Err(Error::type_mismatch(format!(
            "BSON field '{field}' is the wrong type '{}', expected type 'string'",
            crate::request::type_name(other)
        ))),
    }
}

/// The storage engines whose options `storageEngine` may hold (kept, not used).
const STORAGE_ENGINES: &[&str] = &["wiredTiger", "inMemory"];

/// `indexOptionDefaults: {storageEngine}`: an object of that one field, which is
/// checked as the collection's own `storageEngine` is.
fn check_index_option_defaults(value: &Bson) -> Result<()> {
    let defaults = match value {
        Bson::Null => return Ok(()),
        Bson::Document(defaults) => defaults,
        other => {
            return Err(Error::type_mismatch(format!(
                "BSON field 'create.indexOptionDefaults' is the wrong type '{}', expected type 'object'",
                crate::request::type_name(other)
            )))
        }
    };
    for (field, value) in defaults {
        if field != "storageEngine" {
            return Err(Error::location(
                40415,
                format!("BSON field 'create.indexOptionDefaults.{field}' is an unknown field."),
            ));
        }
        check_storage_engine(value)?;
    }
    Ok(())
}

/// `storageEngine: {<engine>: {<options>}}`, naming known engines only.
fn check_storage_engine(value: &Bson) -> Result<()> {
    let engines = match value {
        Bson::Null => return Ok(()),
        Bson::Document(engines) => engines,
        other => {
            return Err(Error::type_mismatch(format!(
                "BSON field 'create.storageEngine' is the wrong type '{}', expected type 'object'",
                crate::request::type_name(other)
            )))
        }
    };
    for (engine, options) in engines {
        if !matches!(options, Bson::Document(_)) {
            return Err(Error::bad_value(format!(
                "'storageEngine.{engine}' has to be an embedded document."
            )));
        }
        if !STORAGE_ENGINES.contains(&engine.as_str()) {
            return Err(Error::new(
                ErrorCode::INVALID_OPTIONS,
                format!("unknown storage engine: {engine}"),
            ));
        }
    }
    Ok(())
}

fn create_collection(ctx: &Ctx<'_>, name: &str, options: Document) -> Result<Document> {
    match ctx.server.catalog.create(ctx.db, name, options.clone()) {
        Ok(_) => Ok(Document::new()),
        // MongoDB 7 treats re-creating an existing collection with the same options as
        // success, and with different options as NamespaceExists.
        Err(e) if e.code == ErrorCode::NAMESPACE_EXISTS => {
            let existing = ctx
                .server
                .catalog
                .get(ctx.db, name)
                .map(|c| c.meta().options.clone());
            if existing.as_ref() == Some(&options) {
                Ok(Document::new())
            } else {
                Err(Error::new(
                    ErrorCode::NAMESPACE_EXISTS,
                    format!(
                        "Collection {}.{name} already exists with different options",
                        ctx.db
                    ),
                ))
            }
        }
        Err(e) => Err(e),
    }
}

/// Validates `clusteredIndex`: MongoDB clusters only by `{_id: 1}`, uniquely.
fn is_empty_document(value: &Bson) -> bool {
    matches!(value, Bson::Document(d) if d.is_empty())
}

/// `idIndex` (mongorestore sends it): the spec of the `_id` index, checked as mongod
/// checks it. It can only be the one every collection gets — `{_id: 1}`, with the
/// collection's collation — so nothing of it is kept.
fn check_id_index(body: &Document, value: &Bson) -> Result<()> {
    let spec = match value {
        Bson::Null => return Ok(()),
        Bson::Document(spec) => spec,
        other => {
            return Err(Error::type_mismatch(format!(
                "BSON field 'create.idIndex' is the wrong type '{}', expected type 'object'",
                crate::request::type_name(other)
            )))
        }
    };
    if body.get("clusteredIndex").is_some_and(is_requested) {
        return Err(Error::new(
            ErrorCode::INVALID_OPTIONS,
            "The 'idIndex' option is not supported with a clustered collection",
        ));
    }
    if let Some(missing) = ["key", "name"].iter().find(|f| !spec.contains_key(**f)) {
        return Err(Error::failed_to_parse(format!(
            "The '{missing}' field is a required property of an index specification"
        )));
    }
    if let Some(option) = spec
        .keys()
        .find(|option| !matches!(option.as_str(), "key" | "name" | "v" | "ns" | "collation"))
    {
        return Err(Error::new(
            ErrorCode::INVALID_INDEX_SPECIFICATION_OPTION,
            format!("The field '{option}' is not valid for an _id index specification. Specification: {spec}"),
        ));
    }
    match spec.get("v") {
        None => {}
        Some(v) => match basalt_value::as_f64(v) {
            Some(n) if n.fract() != 0.0 || n.is_nan() => {
                return Err(Error::bad_value(format!(
                    "Index version must be an integer, not {v}"
                )))
            }
            Some(n) if n == 1.0 || n == 2.0 => {}
            Some(_) => {
                return Err(Error::new(
                    ErrorCode::CANNOT_CREATE_INDEX,
                    format!(
                        "Invalid index specification {spec}; cannot create an index with v={v}"
                    ),
                ))
            }
            None => {
                return Err(Error::type_mismatch(format!(
                    "The 'v' field of an index specification must be a number, not {}",
                    crate::request::type_name(v)
                )))
            }
        },
    }
    // The key's and the name's types and values, as createIndexes checks them.
    let mut checked = spec.clone();
    let collation = checked.remove("collation");
    super::create_indexes::parse_spec(&checked, None)?;
    let key = spec.get_document("key")?;
    let ascending_id = key.len() == 1 && key.get("_id").and_then(basalt_value::as_f64) == Some(1.0);
    if !ascending_id {
        return Err(Error::bad_value(format!(
            "The _id index must have key pattern {{ _id: 1 }}, not {key}"
        )));
    }
    let collection = Fields::new(body).collation()?.map(|c| c.spec().clone());
    let index = match &collation {
        None => collection.clone(),
        Some(Bson::Document(c)) => basalt_value::Collation::parse(c)?.map(|c| c.spec().clone()),
        Some(other) => {
            return Err(Error::type_mismatch(format!(
                "The field 'collation' must be an object, but got {}",
                crate::request::type_name(other)
            )))
        }
    };
    if index != collection {
        return Err(Error::bad_value(
            "The _id index must have the same collation as the collection",
        ));
    }
    Ok(())
}

/// A value taken as mongod takes a flag: a bool, or a number true unless zero (NaN is
/// true).
fn truthy(value: &Bson) -> bool {
    match value {
        Bson::Boolean(flag) => *flag,
        n if basalt_value::is_number(n) => basalt_value::as_f64(n) != Some(0.0),
        _ => true,
    }
}

/// `clusteredIndex`, checked as mongod 8 checks it: `{key: {_id: 1}, unique: true,
/// name?, v?: 2}`, its fields typed (`key` an object, `unique` a bool or number, `name`
/// a string), required (40414, null being missing) and known (40415); a key other than
/// `_id` (InvalidIndexSpecificationOption), `unique` false (5979700) and a version
/// other than 2 (5979704) refused. A bool or number is the legacy form, refused when
/// true (5979703) and no clustering when false (`None`).
fn clustered_index(value: &Bson) -> Result<Option<Bson>> {
    let spec = match value {
        Bson::Document(spec) => spec,
        flag if matches!(flag, Bson::Boolean(_)) || basalt_value::is_number(flag) => {
            return match truthy(flag) {
                true => Err(legacy_clustered_index()),
                false => Ok(None),
            };
        }
        other => {
            return Err(Error::type_mismatch(format!(
                "BSON field 'create.clusteredIndex' is the wrong type '{}', expected types '[bool, object]'",
                crate::request::type_name(other)
            )))
        }
    };
    for field in spec.keys() {
        if !["key", "unique", "name", "v"].contains(&field.as_str()) {
            return Err(Error::location(
                40415,
                format!("BSON field 'create.clusteredIndex.{field}' is an unknown field."),
            ));
        }
    }
    let missing = |field: &str| {
        Error::location(
            40414,
            format!("BSON field 'create.clusteredIndex.{field}' is missing but a required field"),
        )
    };
    let wrong_type = |field: &str, value: &Bson, expected: &str| {
        Error::type_mismatch(format!(
            "BSON field 'create.clusteredIndex.{field}' is the wrong type '{}', expected type '{expected}'",
            crate::request::type_name(value)
        ))
    };
    let key = match spec.get("key") {
        None | Some(Bson::Null) => return Err(missing("key")),
        Some(Bson::Document(key)) => key,
        Some(other) => return Err(wrong_type("key", other, "object")),
    };
    let unique = match spec.get("unique") {
        None | Some(Bson::Null) => return Err(missing("unique")),
        Some(unique @ Bson::Boolean(_)) => truthy(unique),
        Some(n) if basalt_value::is_number(n) => truthy(n),
        Some(other) => return Err(wrong_type("unique", other, "bool")),
    };
    match spec.get("name") {
        None | Some(Bson::Null | Bson::String(_)) => {}
        Some(other) => return Err(wrong_type("name", other, "string")),
    }
    let on_id = key.len() == 1
        && key
            .get("_id")
            .and_then(basalt_value::as_f64)
            .is_some_and(|direction| direction == 1.0);
    if !on_id {
        return Err(Error::new(
            ErrorCode::INVALID_INDEX_SPECIFICATION_OPTION,
            "The clusteredIndex option is only supported for key: {_id: 1}",
        ));
    }
    if !unique {
        return Err(Error::location(
            5979700,
            "The clusteredIndex option requires unique: true",
        ));
    }
    if let Some(version) = spec.get("v").filter(|v| **v != Bson::Null) {
        let finite = basalt_value::as_f64(version).is_some_and(f64::is_finite);
        let version = crate::request::coerced_integer(version)
            .ok_or_else(|| wrong_type("v", version, "int"))?;
        if !finite || version != 2 {
            return Err(Error::location(
                5979704,
                format!("Invalid clustered index version {version}, only version 2 is supported"),
            ));
        }
    }
    // As listCollections shows it.
    let name = spec.get_str("name").unwrap_or("_id_");
    Ok(Some(Bson::Document(
        doc! { "v": 2, "key": { "_id": 1 }, "name": name, "unique": true },
    )))
}

fn legacy_clustered_index() -> Error {
    Error::location(
        5979703,
        "The legacy clustered index format 'clusteredIndex: true' is not supported",
    )
}

/// Validates `changeStreamPreAndPostImages: {enabled: <bool>}`. Change streams are not
/// served yet, so the setting is only kept and reported.
/// `changeStreamPreAndPostImages` of `create` and `collMod`, `{enabled: <bool>}`, checked
/// as mongod checks it; `None` when null (as if not given). Disabled is the default,
/// which mongod does not keep either.
pub fn pre_and_post_images(command: &str, value: &Bson) -> Result<Option<bool>> {
    let wrong_type = |field: &str, value: &Bson, expected: &str| {
        Error::type_mismatch(format!(
            "BSON field '{field}' is the wrong type '{}', expected type '{expected}'",
            crate::request::type_name(value)
        ))
    };
    let spec = match value {
        Bson::Null => return Ok(None),
        Bson::Document(spec) => spec,
        other => {
            return Err(wrong_type(
                &format!("{command}.changeStreamPreAndPostImages"),
                other,
                "object",
            ))
        }
    };
    let mut enabled = None;
    for (name, value) in spec {
        match (name.as_str(), value) {
            ("enabled", Bson::Null) => {}
            ("enabled", Bson::Boolean(on)) => enabled = Some(*on),
            ("enabled", other) => {
                return Err(wrong_type(
                    "changeStreamPreAndPostImages.enabled",
                    other,
                    "bool",
                ))
            }
            _ => {
                return Err(Error::location(
                    40415,
                    format!(
                        "BSON field 'changeStreamPreAndPostImages.{name}' is an unknown field."
                    ),
                ))
            }
        }
    }
    enabled.map(Some).ok_or_else(|| {
        Error::location(
            40414,
            "BSON field 'changeStreamPreAndPostImages.enabled' is missing but a required field",
        )
    })
}
