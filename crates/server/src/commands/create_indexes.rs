//! `createIndexes`: adds indexes to a collection (creating it if needed) and builds them
//! from its documents.
//!
//! Built today: single-field and compound indexes in either direction, multikey, unique,
//! sparse, TTL (`expireAfterSeconds`, expired by the TTL monitor), partial
//! (`partialFilterExpression`), hashed (one hashed field, equality lookups only) and
//! collated (`collation`: string keys in the collation's order, e.g. case-insensitive).
//! An index is told from another by its key pattern and collation, so the same keys may
//! be indexed under two collations (with two names). An index without `collation` takes
//! the collection's default collation, as in MongoDB (`{locale: "simple"}` opts out).
//! Index kinds and options that need more (text, geo, wildcard) are refused by name
//! rather than built as something else.

use super::Ctx;
use crate::request::Fields;
use basalt_catalog::{IndexSpec, PartialFilter, TEXT_KEY_FIELD, TEXT_SCORE_KEY_FIELD};
use basalt_error::{Error, ErrorCode, Result};
use basalt_query::text::{Language, TEXT_INDEX_VERSION};
use basalt_value::Collation;
use bson::{doc, Bson, Document};

/// Index options that are accepted and have their MongoDB meaning here.
const SUPPORTED_OPTIONS: &[&str] = &[
    "key",
    "name",
    "unique",
    "sparse",
    "background",
    "v",
    "ns",
    "expireAfterSeconds",
    "partialFilterExpression",
    "collation",
    "hidden",
    "storageEngine",
    // A text index's (see `text_options`).
    "weights",
    "default_language",
    "language_override",
    "textIndexVersion",
    // New duplicates refused, as collMod's (see `basalt_catalog::IndexSpec::rejects_duplicates`).
    "prepareUnique",
    // The paths a wildcard index covers (`basalt_catalog::IndexSpec::wildcard`).
    "wildcardProjection",
    // The paths a column store index keeps (`basalt_catalog::IndexSpec::column_store`).
    "columnstoreProjection",
    // A geo index's (see `geo_options`).
    "2dsphereIndexVersion",
    "bits",
    "min",
    "max",
    // Ignored since MongoDB 3.0, and still accepted by it.
    "dropDups",
];
/// Options kept as given, for `listIndexes` to echo (`prepareUnique` also acts).
const ECHOED_OPTIONS: &[&str] = &[
    "v",
    "background",
    "storageEngine",
    "prepareUnique",
    "wildcardProjection",
    "columnstoreProjection",
];
/// The most indexes a collection may have, `_id_` included (mongod's).
const MAX_INDEXES: usize = 64;

/// The most fields an index's key may have (mongod's).
const MAX_KEY_FIELDS: usize = 32;

/// Real MongoDB index options whose behaviour Basalt does not have yet.
const UNSUPPORTED_OPTIONS: &[&str] = &["clustered"];

pub fn create_indexes(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let fields = Fields::new(body);
    let name = fields.collection()?;
    let on_buckets = name.starts_with(crate::timeseries::BUCKETS_PREFIX);
    for spec in fields.documents("indexes")? {
        check_requested(spec, on_buckets)?;
    }
    // A time-series collection's indexes are its buckets', as MongoDB translates them.
    if let Some((series, _)) = crate::timeseries::get(&ctx.server.catalog, ctx.db, name) {
        let mut on_buckets = body.clone();
        on_buckets.insert("createIndexes", crate::timeseries::buckets_name(name));
        let translated = fields
            .documents("indexes")?
            .into_iter()
            .map(|spec| series.bucket_index(spec).map(Bson::Document))
            .collect::<Result<Vec<_>>>()?;
        on_buckets.insert("indexes", translated);
        return build(ctx, &on_buckets);
    }
    build(ctx, body)
}

/// What mongod requires of an index a client asks for, beyond what every index spec
/// must be: a name, and key fields that are paths (not empty, no empty part, no leading
/// `$` but a wildcard's), and no `2dsphere_bucket` but on a time-series collection's
/// buckets. The specs Basalt derives (a time-series collection's bucket indexes) are its
/// own.
fn check_requested(spec: &Document, on_buckets: bool) -> Result<()> {
    if !spec.contains_key("name") {
        return Err(Error::failed_to_parse(
            "The 'name' field is a required property of an index specification",
        ));
    }
    let Ok(key) = spec.get_document("key") else {
        return Ok(());
    };
    let bucket_kind = key
        .values()
        .any(|kind| kind.as_str() == Some(basalt_catalog::SPHERE_BUCKET));
    if bucket_kind && !on_buckets {
        return Err(Error::new(
            ErrorCode::CANNOT_CREATE_INDEX,
            format!(
                "Error in specification {spec} :: caused by :: {} indexes are only allowed on \
                 time-series buckets collections",
                basalt_catalog::SPHERE_BUCKET
            ),
        ));
    }
    for field in key.keys() {
        let wildcard = field == "$**" || field.ends_with(".$**");
        let why = if field.is_empty() {
            "Index keys cannot be an empty field"
        } else if field.split('.').any(str::is_empty) {
            "Index key contains an illegal field name: a part of the path is empty"
        } else if field.starts_with('$') && !wildcard {
            "Index key contains an illegal field name: field name starts with '$'"
        } else {
            continue;
        };
        return Err(Error::new(
            ErrorCode::CANNOT_CREATE_INDEX,
            format!("Error in specification {spec} :: caused by :: {why}: '{field}'"),
        ));
    }
    Ok(())
}

/// Builds the indexes `body` asks for on its collection (made if missing).
fn build(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let fields = Fields::new(body);
    let name = fields.collection()?;
    let specs = fields.documents("indexes")?;
    if specs.is_empty() {
        return Err(Error::bad_value(
            "Must specify at least one index to create",
        ));
    }
    let existing_collection = ctx.server.catalog.get(ctx.db, name);
    let default_collation = match &existing_collection {
        Some(collection) => match collection.meta().options.get_document("collation") {
            Ok(spec) => Collation::parse(spec)?,
            Err(_) => None,
        },
        None => None,
    };
    let requested = specs
        .iter()
        .map(|s| parse_spec(s, default_collation.as_ref()))
        .collect::<Result<Vec<_>>>()?;
    let existed = existing_collection.is_some();
    let collection = ctx.server.catalog.get_or_create(ctx.db, name)?;
    let before = collection.meta().indexes.len() as i32;
    for spec in requested {
        let existing = collection.meta().indexes.clone();
        let other_text = existing
            .iter()
            .find(|index| index.text().is_some() && index.name != spec.name);
        if let (Some(other), Some(_)) = (other_text, spec.text()) {
            return Err(Error::new(
                ErrorCode::INDEX_OPTIONS_CONFLICT,
                format!(
                    "only one text index per collection allowed, found existing text index \"{}\"",
                    other.name
                ),
            ));
        }
        if let Some(same_name) = existing.iter().find(|i| i.name == spec.name) {
            let same_key = same_name.has_key_pattern(&spec.key);
            if same_key
                && same_name.unique == spec.unique
                && same_name.sparse == spec.sparse
                && same_name.expire_after_seconds == spec.expire_after_seconds
                && same_name.partial == spec.partial
                && same_name.collation == spec.collation
            {
                continue;
            }
            return Err(Error::new(
                if same_key { ErrorCode::INDEX_OPTIONS_CONFLICT } else { ErrorCode::INDEX_KEY_SPECS_CONFLICT },
                format!(
                    "An existing index has the same name as the requested index. When index names are not specified, they are auto generated and can cause conflicts. Please refer to our documentation. Requested index: {}, existing index: {}",
                    spec.to_list_document(),
                    same_name.to_list_document()
                ),
            ));
        }
        if let Some(same_key) = existing
            .iter()
            .find(|i| i.has_key_pattern(&spec.key) && i.collation == spec.collation)
        {
            return Err(Error::new(
                ErrorCode::INDEX_OPTIONS_CONFLICT,
                format!(
                    "Index already exists with a different name: {}",
                    same_key.name
                ),
            ));
        }
        if existing.len() >= MAX_INDEXES {
            return Err(Error::new(
                ErrorCode::CANNOT_CREATE_INDEX,
                format!(
                    "add index fails, too many indexes for {}.{name} key:{}",
                    ctx.db, spec.key
                ),
            ));
        }
        ctx.server.catalog.add_index(&collection, spec)?;
    }
    let after = collection.meta().indexes.len() as i32;
    let mut reply = doc! {
        "numIndexesBefore": before,
        "numIndexesAfter": after,
        "createdCollectionAutomatically": !existed,
    };
    if before == after {
        reply.insert("note", "all indexes already exist");
    }
    Ok(reply)
}

/// Parses one index spec; `default_collation` is the collection's.
pub(crate) fn parse_spec(
    spec: &Document,
    default_collation: Option<&Collation>,
) -> Result<IndexSpec> {
    let key = match spec.get("key") {
        Some(Bson::Document(key)) => key.clone(),
        Some(_) => return Err(Error::type_mismatch("The 'key' field must be an object")),
        None => {
            return Err(Error::failed_to_parse(
                "The 'key' field is a required property of an index specification",
            ))
        }
    };
    let invalid = |why: String| {
        Error::new(
            ErrorCode::CANNOT_CREATE_INDEX,
            format!("Error in specification {spec} :: caused by :: {why}"),
        )
    };
    if key.is_empty() {
        return Err(invalid("Index keys cannot be an empty field.".into()));
    }
    if key.len() > MAX_KEY_FIELDS {
        return Err(Error::location(
            13103,
            format!("too many fields in compound index: {key}: at most {MAX_KEY_FIELDS}"),
        ));
    }
    for (field, direction) in &key {
        match direction {
            Bson::String(kind) if matches!(kind.as_str(), "hashed" | "text" | "2dsphere" | "2d" | basalt_catalog::SPHERE_BUCKET | basalt_catalog::COLUMN_STORE) => {}
            Bson::String(kind) => {
                return Err(invalid(format!("index type '{kind}' on field '{field}' is not supported by Basalt yet")));
            }
            v if basalt_value::as_f64(v) == Some(0.0) => {
                return Err(invalid("Values in the index key pattern can't be 0.".into()));
            }
            v if basalt_value::as_f64(v).is_some() => {}
            other => return Err(invalid(format!("Values in v:2 index key pattern cannot be of type {}. Only numbers > 0, numbers < 0, and strings are allowed.", crate::request::type_name(other)))),
        }
    }
    check_wildcard(&key, spec, &invalid)?;
    check_column_store(&key, spec, &invalid)?;
    for option in spec.keys() {
        if UNSUPPORTED_OPTIONS.contains(&option.as_str()) {
            return Err(Error::new(
                ErrorCode::COMMAND_NOT_SUPPORTED,
                format!("index option '{option}' is not supported by Basalt yet"),
            ));
        }
        if !SUPPORTED_OPTIONS.contains(&option.as_str()) {
            return Err(Error::new(
                ErrorCode::INVALID_INDEX_SPECIFICATION_OPTION,
                format!("The field '{option}' is not valid for an index specification. Specification: {spec}"),
            ));
        }
    }
    let name = match spec.get("name") {
        Some(Bson::String(name)) if !name.is_empty() => name.clone(),
        Some(Bson::String(_)) => return Err(invalid("index name cannot be empty".into())),
        Some(_) => return Err(Error::type_mismatch("The 'name' field must be a string")),
        None => generated_name(&key),
    };
    // A text index keeps its terms under `_fts`, its fields and weights apart.
    for (option, expected) in [
        ("default_language", "string"),
        ("language_override", "string"),
        ("weights", "object"),
        ("textIndexVersion", "int"),
    ] {
        let fits = match spec.get(option) {
            None => true,
            // mongod reads a string or an array of weights, then refuses them (67).
            Some(Bson::String(_) | Bson::Array(_)) if option == "weights" => true,
            Some(Bson::String(_)) => expected == "string",
            Some(Bson::Document(_)) => expected == "object",
            Some(value) => expected == "int" && basalt_value::is_number(value),
        };
        if !fits {
            return Err(Error::type_mismatch(format!(
                "BSON field '{option}' is the wrong type '{}', expected type '{expected}'",
                crate::request::type_name(&spec[option])
            )));
        }
    }
    let (key, text) = match text_options(&key, spec).map_err(invalid)? {
        Some((text_key, options)) => (text_key, Some(options)),
        None if spec.contains_key("weights") => {
            return Err(invalid(
                "the field 'weights' can only be specified with text indexes".into(),
            ))
        }
        None => (key, None),
    };
    let flag = |field: &str| match spec.get(field) {
        None => Ok(false),
        Some(Bson::Boolean(b)) => Ok(*b),
        Some(v) => basalt_value::as_f64(v)
            .map(|n| n != 0.0)
            .ok_or_else(|| Error::type_mismatch(format!("The field '{field}' must be a boolean"))),
    };
    // An index on `_id` alone is unique whatever the spec says, as MongoDB's `_id_`,
    // and ascending.
    let on_id_only = key.len() == 1 && key.contains_key("_id");
    if on_id_only
        && key
            .get("_id")
            .and_then(basalt_value::as_f64)
            .is_some_and(|d| d < 0.0)
    {
        return Err(Error::bad_value(format!(
            "The _id index must be ascending, not {key}"
        )));
    }
    let expire_after_seconds = match spec.get("expireAfterSeconds") {
        None => None,
        Some(value) => {
            if on_id_only {
                return Err(Error::new(
                    ErrorCode::INVALID_INDEX_SPECIFICATION_OPTION,
                    "The field 'expireAfterSeconds' is not valid for an _id index specification.",
                ));
            }
            if key.len() > 1 {
                return Err(invalid(format!(
                    "TTL indexes are single-field indexes, compound indexes do not support TTL. Index spec: {spec}"
                )));
            }
            Some(expire_after_seconds(value).map_err(invalid)?)
        }
    };
    let hashed_fields = key
        .values()
        .filter(|d| basalt_catalog::is_hashed(d))
        .count();
    if hashed_fields > 1 {
        return Err(Error::location(
            31303,
            format!("A maximum of one index field is allowed to be hashed but found {hashed_fields} for 'key' {key}"),
        ));
    }
    if hashed_fields == 1 && flag("unique")? {
        return Err(Error::location(
            16764,
            "Currently hashed indexes cannot guarantee uniqueness. Use a regular index.",
        ));
    }
    let partial = match spec.get("partialFilterExpression") {
        None => None,
        Some(Bson::Document(expression)) => {
            if flag("sparse")? {
                return Err(invalid(
                    "cannot mix \"partialFilterExpression\" and \"sparse\" options".into(),
                ));
            }
            check_partial_filter(expression, true).map_err(invalid)?;
            Some(PartialFilter::new(expression.clone())?)
        }
        Some(_) => {
            return Err(Error::type_mismatch(
                "The field 'partialFilterExpression' must be an object",
            ))
        }
    };
    let collation = match spec.get("collation") {
        // The `_id_` index Basalt builds with a collection is binary whatever the
        // collection's default, so an `_id` index stays binary too.
        None if on_id_only => None,
        None => default_collation.cloned(),
        Some(Bson::Document(collation)) => Collation::parse(collation)?,
        Some(other) => {
            return Err(Error::type_mismatch(format!(
                "The field 'collation' must be an object, but got {}",
                crate::request::type_name(other)
            )))
        }
    };
    if text.is_some() && collation.is_some() {
        return Err(invalid(
            "Index type 'text' does not support collation".into(),
        ));
    }
    // `hidden` is a bool, not a number.
    let hidden = match spec.get("hidden") {
        None => false,
        Some(Bson::Boolean(hidden)) => *hidden,
        Some(other) => {
            return Err(Error::type_mismatch(format!(
                "The field 'hidden' must be a bool, but got {}",
                crate::request::type_name(other)
            )))
        }
    };
    if hidden && on_id_only {
        return Err(Error::new(
            ErrorCode::INVALID_INDEX_SPECIFICATION_OPTION,
            "can't hide _id index",
        ));
    }
    let mut echoed = Document::new();
    for option in ECHOED_OPTIONS {
        if let Some(value) = spec.get(*option) {
            echoed.insert(*option, value.clone());
        }
    }
    echoed.extend(text.unwrap_or_default());
    echoed.extend(geo_options(&key, spec, &invalid)?);
    match echoed.get("v").map(basalt_value::as_f64) {
        None | Some(Some(2.0)) => {
            echoed.remove("v");
        }
        Some(Some(1.0)) => {
            echoed.insert("v", 1);
        }
        Some(_) => {
            return Err(invalid(format!(
                "Invalid index specification {spec}; cannot create an index with v={}",
                spec.get("v").map(ToString::to_string).unwrap_or_default()
            )))
        }
    }
    if let Some(engine) = echoed.get("storageEngine") {
        if !matches!(engine, Bson::Document(_)) {
            return Err(Error::type_mismatch(
                "'storageEngine' has to be a document.",
            ));
        }
    }
    if let (true, Some(collation)) = (on_id_only, &collation) {
        return Err(Error::bad_value(format!(
            "The _id index must have the same collation as the collection. Index collation: {}, collection collation: {{ locale: \"simple\" }}",
            collation.spec()
        )));
    }
    Ok(IndexSpec {
        id: 0,
        name,
        key,
        unique: flag("unique")? || on_id_only,
        sparse: flag("sparse")?,
        multikey: false,
        expire_after_seconds,
        partial,
        collation,
        hidden,
        echoed,
    })
}

/// A geo index's options, checked as mongod checks them, as `listIndexes` shows them: a
/// 2dsphere index's `2dsphereIndexVersion` (1 to 3; 3 when not given), a 2d index's
/// `bits` (1 to 32) and `min`/`max` (the square its coordinates must lie in).
fn geo_options(
    key: &Document,
    spec: &Document,
    invalid: &dyn Fn(String) -> Error,
) -> Result<Document> {
    let kinds: Vec<&str> = key.values().filter_map(Bson::as_str).collect();
    let sphere = kinds.contains(&"2dsphere") || kinds.contains(&basalt_catalog::SPHERE_BUCKET);
    let flat = kinds.iter().filter(|k| **k == "2d").count();
    let mut options = Document::new();
    let number = |name: &str| -> Result<Option<f64>> {
        match spec.get(name) {
            None => Ok(None),
            Some(v) if basalt_value::is_number(v) => Ok(basalt_value::as_f64(v)),
            Some(v) => Err(Error::type_mismatch(format!(
                "The field '{name}' must be a number, not {}",
                crate::request::type_name(v)
            ))),
        }
    };
    if let Some(version) = number("2dsphereIndexVersion")? {
        if !matches!(version, 1.0 | 2.0 | 3.0) {
            return Err(invalid(format!(
                "unsupported geo index version {{ 2dsphereIndexVersion : {version} }}, only versions: [1,2,3] are supported"
            )));
        }
        if sphere {
            options.insert("2dsphereIndexVersion", version as i32);
        }
    } else if sphere {
        options.insert("2dsphereIndexVersion", basalt_catalog::SPHERE_INDEX_VERSION);
    }
    if let Some(bits) = number("bits")? {
        if matches!(spec.get("bits"), Some(Bson::Decimal128(_))) || !(1.0..=32.0).contains(&bits) {
            return Err(Error::new(
                ErrorCode::INVALID_OPTIONS,
                format!("bits in geo index must be between 1 and 32, not {bits}"),
            ));
        }
        if flat > 0 {
            options.insert("bits", bits as i32);
        }
    }
    let (min, max) = (number("min")?, number("max")?);
    if flat > 0 {
        if flat > 1 || key.values().next().and_then(Bson::as_str) != Some("2d") {
            return Err(invalid(
                "2d has to be first in index and may appear once".into(),
            ));
        }
        if min.unwrap_or(-180.0) >= max.unwrap_or(180.0) {
            return Err(invalid("max must be greater than min".into()));
        }
        if let Some(min) = min {
            options.insert("min", min);
        }
        if let Some(max) = max {
            options.insert("max", max);
        }
    }
    Ok(options)
}

/// A wildcard index (`{"$**": 1}`, `{"path.$**": 1}`), checked as mongod checks it: one
/// ascending or descending field, neither unique, sparse nor TTL, version 2, and a
/// `wildcardProjection` (of `$**` only) that includes or excludes paths.
/// A column store index (`{"$**": "columnstore"}` alone) and its
/// `columnstoreProjection`, refused with the options it cannot have.
fn check_column_store(
    key: &Document,
    spec: &Document,
    invalid: &dyn Fn(String) -> Error,
) -> Result<()> {
    let projection = spec.get("columnstoreProjection");
    if !key.values().any(basalt_catalog::is_column_store) {
        if projection.is_some() {
            return Err(Error::bad_value(
                "The field 'columnstoreProjection' is only allowed in a columnstore index",
            ));
        }
        return Ok(());
    }
    if key.len() > 1 || !key.contains_key("$**") {
        return Err(invalid(
            "a columnstore index's key pattern is {\"$**\": \"columnstore\"}".into(),
        ));
    }
    for option in [
        "unique",
        "sparse",
        "partialFilterExpression",
        "expireAfterSeconds",
        "collation",
    ] {
        if spec.contains_key(option) {
            return Err(invalid(format!(
                "Index type 'columnstore' does not support the '{option}' option"
            )));
        }
    }
    let projection = match projection {
        None => return Ok(()),
        Some(Bson::Document(projection)) => projection,
        Some(other) => {
            return Err(Error::type_mismatch(format!(
                "The field 'columnstoreProjection' must be an object, not {}",
                crate::request::type_name(other)
            )))
        }
    };
    if projection.is_empty() {
        return Err(Error::failed_to_parse(
            "The 'columnstoreProjection' field can't be an empty object",
        ));
    }
    let mut include = None;
    for (path, value) in projection {
        let Some(on) = value
            .as_bool()
            .or_else(|| basalt_value::as_f64(value).map(|n| n != 0.0))
        else {
            return Err(Error::failed_to_parse(format!(
                "The 'columnstoreProjection' field {path} must be 0, 1, true or false"
            )));
        };
        if path == "_id" {
            continue;
        }
        match include {
            Some(before) if before != on => {
                let (code, what, kind) = if on {
                    (31253, "inclusion", "exclusion")
                } else {
                    (31254, "exclusion", "inclusion")
                };
                return Err(Error::location(
                    code,
                    format!("Cannot do {what} on field {path} in {kind} projection"),
                ));
            }
            _ => include = Some(on),
        }
    }
    Ok(())
}

fn check_wildcard(
    key: &Document,
    spec: &Document,
    invalid: &dyn Fn(String) -> Error,
) -> Result<()> {
    let wildcards: Vec<(&String, &Bson)> = key
        .iter()
        .filter(|(f, d)| {
            f.contains("$**") && d.as_str() != Some("text") && !basalt_catalog::is_column_store(d)
        })
        .collect();
    let projection = spec.get("wildcardProjection");
    if wildcards.is_empty() {
        if projection.is_some() {
            return Err(Error::bad_value(
                "The field 'wildcardProjection' is only allowed in a wildcard index",
            ));
        }
        return Ok(());
    }
    if wildcards.len() > 1 || key.len() > 1 {
        return Err(invalid(
            "a wildcard index has one field only (compound wildcard indexes are not \
             supported by Basalt yet)"
                .into(),
        ));
    }
    let (field, direction) = wildcards[0];
    let scoped = field.strip_suffix(".$**");
    if field != "$**" && scoped.is_none_or(|path| path.is_empty() || path.contains("$**")) {
        return Err(invalid(format!(
            "the wildcard path '{field}' must end with a single '$**'"
        )));
    }
    let ordered = basalt_value::as_f64(direction).is_some_and(|d| d != 0.0 && !d.is_nan());
    if !ordered {
        return Err(invalid(format!(
            "a wildcard index's field must be 1 or -1, not {direction}"
        )));
    }
    for option in ["unique", "sparse"] {
        if spec.get_bool(option).unwrap_or(false) {
            return Err(invalid(format!(
                "Index type 'wildcard' does not support the '{option}' option"
            )));
        }
    }
    if spec.contains_key("expireAfterSeconds") {
        return Err(invalid(
            "Index type 'wildcard' cannot be a TTL index".into(),
        ));
    }
    if spec
        .get("v")
        .and_then(basalt_value::as_f64)
        .is_some_and(|v| v < 2.0)
    {
        return Err(invalid("wildcard indexes need index version 2".into()));
    }
    match projection {
        None => Ok(()),
        Some(Bson::Document(_)) if field != "$**" => Err(Error::failed_to_parse(
            "The field 'wildcardProjection' is only allowed in a wildcard index on '$**'",
        )),
        Some(Bson::Document(projection)) if projection.is_empty() => {
            Err(invalid("The 'wildcardProjection' may not be empty".into()))
        }
        Some(Bson::Document(projection)) => {
            let kinds: Vec<bool> = projection
                .iter()
                .filter(|(path, _)| *path != "_id")
                .map(|(_, v)| {
                    v.as_bool()
                        .unwrap_or_else(|| basalt_value::as_f64(v).is_some_and(|n| n != 0.0))
                })
                .collect();
            if kinds.iter().any(|k| *k) && kinds.iter().any(|k| !*k) {
                return Err(Error::location(
                    31254,
                    "Cannot do exclusion and inclusion in a 'wildcardProjection'",
                ));
            }
            Ok(())
        }
        Some(other) => Err(Error::type_mismatch(format!(
            "The field 'wildcardProjection' must be an object, not {}",
            crate::request::type_name(other)
        ))),
    }
}

/// A text index's key pattern (its text fields replaced by MongoDB's `_fts: "text",
/// _ftsx: 1`, other fields kept around them) and options as listIndexes shows them:
/// `weights` (1 for a text field not weighted, from 1 to 99,999), `default_language`,
/// `language_override`, `textIndexVersion` (3). `None` for an index without text fields.
fn text_options(
    key: &Document,
    spec: &Document,
) -> std::result::Result<Option<(Document, Document)>, String> {
    if !key
        .values()
        .any(|direction| direction.as_str() == Some("text"))
    {
        return Ok(None);
    }
    let mut text_key = Document::new();
    let mut weights = Document::new();
    // Whether the text fields have ended (a scalar field came after them).
    let mut after_text = false;
    for (field, direction) in key {
        if direction.as_str() == Some("text") {
            if after_text {
                return Err("text fields of a compound index must be next to each other".into());
            }
            if !text_key.contains_key(TEXT_KEY_FIELD) {
                text_key.insert(TEXT_KEY_FIELD, "text");
                text_key.insert(TEXT_SCORE_KEY_FIELD, 1);
            }
            weights.insert(field.clone(), 1);
        } else {
            after_text = text_key.contains_key(TEXT_KEY_FIELD);
            text_key.insert(field.clone(), direction.clone());
        }
    }
    match spec.get("weights") {
        None => {}
        Some(Bson::Document(given)) => {
            for (field, weight) in given {
                let weight = basalt_value::as_f64(weight)
                    .filter(|w| (1.0..100_000.0).contains(w))
                    .ok_or_else(|| {
                        format!("text index weight must be in the range 1-99,999, not {weight}")
                    })?;
                weights.insert(field.clone(), weight as i32);
            }
        }
        Some(other) => return Err(format!("weights must be an object, not {other}")),
    }
    let language = match spec.get("default_language") {
        None => "english".to_string(),
        Some(Bson::String(name)) => Language::parse(name)
            .map(|language| language.name().to_string())
            .ok_or_else(|| format!("default_language \"{name}\" is not supported"))?,
        Some(other) => return Err(format!("default_language must be a string, not {other}")),
    };
    let language_override = match spec.get("language_override") {
        None => "language".to_string(),
        Some(Bson::String(field)) if !field.is_empty() => field.clone(),
        Some(other) => {
            return Err(format!(
                "language_override must be a field name, not {other}"
            ))
        }
    };
    match spec.get("textIndexVersion").map(basalt_value::as_f64) {
        None | Some(Some(3.0)) => {}
        Some(_) => return Err("only textIndexVersion 3 is supported".into()),
    }
    Ok(Some((
        text_key,
        doc! {
            "weights": weights,
            "default_language": language,
            "language_override": language_override,
            "textIndexVersion": TEXT_INDEX_VERSION,
        },
    )))
}

/// The expressions MongoDB allows in a partial filter: equalities, `$exists: true`,
/// comparisons, `$type`, `$in`, and `$and` / `$or` of those.
fn check_partial_filter(expression: &Document, top: bool) -> std::result::Result<(), String> {
    const FIELD_OPERATORS: &[&str] = &[
        "$eq", "$exists", "$gt", "$gte", "$lt", "$lte", "$type", "$in",
    ];
    for (name, value) in expression {
        match (name.as_str(), value) {
            ("$and" | "$or", Bson::Array(items)) if top => {
                for item in items {
                    match item {
                        Bson::Document(d) => check_partial_filter(d, false)?,
                        _ => return Err(format!("{name} needs an array of objects")),
                    }
                }
            }
            (op, _) if op.starts_with('$') => {
                return Err(format!("Expression not supported in partial index: {op}"))
            }
            (_, Bson::Document(ops)) if ops.keys().next().is_some_and(|k| k.starts_with('$')) => {
                for (op, operand) in ops {
                    let exists_true = op != "$exists" || matches!(operand, Bson::Boolean(true));
                    if !FIELD_OPERATORS.contains(&op.as_str()) || !exists_true {
                        return Err(format!(
                            "Expression not supported in partial index: {name}: {{ {op}: {operand} }}"
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Checks an `expireAfterSeconds` value as MongoDB does: a number, whole seconds in
/// `[0, 2147483647]`.
pub fn expire_after_seconds(value: &Bson) -> std::result::Result<i64, String> {
    let Some(seconds) = basalt_value::as_f64(value) else {
        return Err(format!(
            "TTL index 'expireAfterSeconds' option must be numeric, but received a type of '{}'. Index spec: expireAfterSeconds: {value}",
            crate::request::type_name(value)
        ));
    };
    if !(0.0..=f64::from(i32::MAX)).contains(&seconds) {
        return Err(format!(
            "TTL index 'expireAfterSeconds' option must be within an acceptable range, try a lower number. Index spec: expireAfterSeconds: {value}"
        ));
    }
    Ok(seconds as i64)
}

/// MongoDB's default index name: each field and direction joined by underscores.
pub fn generated_name(key: &Document) -> String {
    key.iter()
        .map(|(field, direction)| {
            let direction = match direction {
                Bson::Int32(n) => n.to_string(),
                Bson::Int64(n) => n.to_string(),
                Bson::Double(n) if n.fract() == 0.0 => format!("{}", *n as i64),
                Bson::String(s) => s.clone(),
                other => other.to_string(),
            };
            format!("{field}_{direction}")
        })
        .collect::<Vec<_>>()
        .join("_")
}
