//! `collMod`: changes a collection's options, or a view's definition. Only the options
//! Basalt keeps today can change (`changeStreamPreAndPostImages`, `validator`,
//! `validationLevel`, `validationAction`, a capped collection's `cappedSize` and `cappedMax`, and an
//! index's `expireAfterSeconds`, `hidden`, `prepareUnique` or `unique` through `index`,
//! the last with 8.0's `dryRun`); the rest are refused by name rather than ignored.

use super::arguments::{Field, Kind};
use super::create::{capped_max, capped_size, pre_and_post_images, validation_setting};
use super::write_batch::durability;
use super::Ctx;
use crate::request::{Fields, GENERIC_COMMAND_FIELDS};
use crate::views::{self, Definer, View};
use basalt_error::{Error, ErrorCode, Result};
use bson::{doc, Bson, Document};

/// mongod's collMod options that Basalt does not change (yet): refused by name, where
/// an option mongod does not know is an unknown field.
const UNSUPPORTED_OPTIONS: &[&str] = &[
    "collectionUUID",
    "encryptedFields",
    "recordIdsReplicated",
    "timeseriesBucketsMayHaveMixedSchemaData",
    "timeseriesBucketingParametersHaveChanged",
];

/// What `index` may name (mongod's `CollModIndex`); the options are typed where they
/// are read.
const INDEX_FIELDS: &[Field] = &[
    ("name", Kind::String),
    ("keyPattern", Kind::Document),
    ("expireAfterSeconds", Kind::Any),
    ("hidden", Kind::Any),
    ("prepareUnique", Kind::Any),
    ("unique", Kind::Any),
    ("forceNonUnique", Kind::Any),
];

pub fn coll_mod(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let name = Fields::new(body).collection()?;
    let Some(collection) = ctx.server.catalog.get(ctx.db, name) else {
        if let Some(view) = views::get(&ctx.server.catalog, ctx.db, name)? {
            return modify_view(ctx, body, view);
        }
        if let Some((_, buckets)) = crate::timeseries::get(&ctx.server.catalog, ctx.db, name) {
            crate::timeseries::modify(&ctx.server.catalog, &buckets, body)?;
            return Ok(Document::new());
        }
        return Err(Error::new(
            ErrorCode::NAMESPACE_NOT_FOUND,
            format!("ns does not exist: {}.{name}", ctx.db),
        ));
    };
    let dry_run = dry_run(body)?;
    let mut options = collection.meta().options.clone();
    let mut reply = Document::new();
    for (key, value) in body.iter().skip(1) {
        match key.as_str() {
            "dryRun" => {}
            "timeseries" => {
                return Err(Error::new(
                    ErrorCode::INVALID_OPTIONS,
                    format!("option 'timeseries' is only for time-series collections, and {name} is not one"),
                ))
            }
            "expireAfterSeconds" => {
                let meta = collection.meta();
                if !meta.options.contains_key("clusteredIndex") {
                    return Err(Error::new(
                        ErrorCode::INVALID_OPTIONS,
                        "'expireAfterSeconds' is for clustered and time-series collections only",
                    ));
                }
                let expiry = crate::timeseries::expire_after_seconds(value)?;
                match expiry {
                    Some(seconds) => options.insert("expireAfterSeconds", seconds),
                    None => options.remove("expireAfterSeconds"),
                };
                let id_index = meta.indexes[0].name.clone();
                ctx.server
                    .catalog
                    .set_index_expiry(&collection, &id_index, expiry)?;
            }
            "cappedSize" | "cappedMax" if *value == Bson::Null => {}
            "cappedSize" | "cappedMax" if collection.meta().capped().is_none() => {
                return Err(Error::new(
                    ErrorCode::INVALID_OPTIONS,
                    format!("option '{key}' is only for capped collections, and {name} is not"),
                ))
            }
            "cappedSize" => {
                options.insert("size", capped_size(value)?);
            }
            "cappedMax" => match capped_max(value)? {
                Some(max) => {
                    options.insert("max", max);
                }
                None => {
                    options.remove("max");
                }
            },
            "index" => reply = modify_index(ctx, &collection, value, dry_run)?,
            "changeStreamPreAndPostImages" => match pre_and_post_images("collMod", value)? {
                Some(true) => {
                    options.insert(key.clone(), doc! { "enabled": true });
                }
                Some(false) => {
                    options.remove(key);
                }
                None => {}
            },
            "validator" => {
                let validator = crate::validation::check_spec(ctx.db, name, "collMod", value)?;
                if let Some(validator) = validator {
                    options.insert("validator", validator);
                }
            }
            "validationLevel" | "validationAction" if value != &Bson::Null => {
                options.insert(key.clone(), validation_setting(key, value)?);
            }
            "validationLevel" | "validationAction" => {}
            "viewOn" | "pipeline" => {
                return Err(Error::new(
                    ErrorCode::INVALID_OPTIONS,
                    format!("option '{key}' is only for views, and {name} is a collection"),
                ))
            }
            known if UNSUPPORTED_OPTIONS.contains(&known) => {
                return Err(Error::new(
                    ErrorCode::COMMAND_NOT_SUPPORTED,
                    format!("collMod option '{known}' is not supported by Basalt yet"),
                ))
            }
            // Generic arguments; fields collMod does not know were refused before it
            // ran (`arguments.rs`).
            _ => {}
        }
    }
    super::create::with_validation_defaults(&mut options);
    // Smaller capped bounds take effect at the next insert, as in MongoDB.
    ctx.server.catalog.set_options(&collection, options)?;
    Ok(reply)
}

/// 8.0's `dryRun` (a bool, or a number true unless zero; null is false): when set, the
/// command only checks that the conversion of an index to unique, which must be all it
/// asks for, would succeed (InvalidOptions otherwise).
fn dry_run(body: &Document) -> Result<bool> {
    let dry_run = match body.get("dryRun") {
        None | Some(Bson::Null) => false,
        Some(value) => truthy_option("dryRun", value)?,
    };
    if !dry_run {
        return Ok(false);
    }
    let converts_only = match body.get("index") {
        Some(Bson::Document(index)) => {
            let given = |option: &&str| index.get(*option).is_some_and(|v| *v != Bson::Null);
            index.get("unique").is_some_and(|v| *v != Bson::Null)
                && !["prepareUnique", "hidden", "expireAfterSeconds"]
                    .iter()
                    .any(given)
        }
        _ => false,
    };
    if !converts_only {
        return Err(Error::new(
            ErrorCode::INVALID_OPTIONS,
            "dryRun is only for converting an index to unique, and nothing else",
        ));
    }
    Ok(true)
}

/// A view's `viewOn` and `pipeline`, each optional; a view has no other option.
fn modify_view(ctx: &Ctx<'_>, body: &Document, mut view: View) -> Result<Document> {
    for (key, value) in body.iter().skip(1) {
        match key.as_str() {
            "viewOn" => {
                if let Some(view_on) = views::parse_view_on("collMod", value)? {
                    view.view_on = view_on;
                }
            }
            "pipeline" => {
                view.pipeline = views::parse_pipeline("collMod", value, Definer::CollMod)?
            }
            generic if GENERIC_COMMAND_FIELDS.contains(&generic) => {}
            other => {
                return Err(Error::new(
                    ErrorCode::INVALID_OPTIONS,
                    format!("option not supported on a view: {other}"),
                ))
            }
        }
    }
    views::check_graph(&ctx.server.catalog, ctx.db, &view)?;
    views::store(
        &ctx.server.catalog,
        ctx.db,
        &view,
        durability(&Fields::new(body))?,
    )?;
    Ok(Document::new())
}

/// `index: {name | keyPattern, expireAfterSeconds | hidden | prepareUnique | unique}`:
/// changes a TTL, hides an index from the planner (or shows it again), prepares it to
/// become unique (new duplicates are refused) or makes it unique (when no key has
/// duplicates: CannotConvertIndexToUnique with them otherwise), replying with the old
/// and new values as MongoDB does.
fn modify_index(
    ctx: &Ctx<'_>,
    collection: &basalt_catalog::Collection,
    spec: &Bson,
    dry_run: bool,
) -> Result<Document> {
    let spec = match spec {
        Bson::Document(spec) => spec,
        // As mongod's parser has it, null is no index to change.
        Bson::Null => return Ok(Document::new()),
        _ => {
            return Err(Error::type_mismatch(
                "BSON field 'collMod.index' is the wrong type, expected type 'object'",
            ))
        }
    };
    super::arguments::check_struct("collMod.index", spec, INDEX_FIELDS, &[])?;
    let meta = collection.meta();
    let given = |option: &str| spec.get(option).filter(|v| **v != Bson::Null);
    let index = match (given("name"), given("keyPattern")) {
        (Some(Bson::String(name)), None) => meta.indexes.iter().find(|i| &i.name == name),
        (None, Some(Bson::Document(key))) => meta.indexes.iter().find(|i| i.has_key_pattern(key)),
        _ => {
            return Err(Error::new(
                ErrorCode::INVALID_OPTIONS,
                "must specify either index name or key pattern for collMod",
            ))
        }
    };
    let Some(index) = index else {
        return Err(Error::new(
            ErrorCode::INDEX_NOT_FOUND,
            format!("cannot find index {spec} for ns {}", meta.namespace()),
        ));
    };
    let catalog = &ctx.server.catalog;
    let mut reply = Document::new();
    if let Some(value) = spec.get("prepareUnique").filter(|v| **v != Bson::Null) {
        let prepare = truthy_option("prepareUnique", value)?;
        let old = index.echoed.get_bool("prepareUnique").unwrap_or(false);
        if old != prepare
            && (spec.contains_key("hidden") || spec.contains_key("expireAfterSeconds"))
        {
            return Err(Error::new(
                ErrorCode::INVALID_OPTIONS,
                "prepareUnique cannot be changed together with other index options",
            ));
        }
        if old != prepare {
            catalog.modify_index(collection, &index.name, |index| {
                if prepare {
                    index.echoed.insert("prepareUnique", true);
                } else {
                    index.echoed.remove("prepareUnique");
                }
            })?;
            reply.insert("prepareUnique_old", old);
            reply.insert("prepareUnique_new", prepare);
        }
    }
    if let Some(value) = given("unique") {
        if !truthy_option("unique", value)? {
            return Err(Error::bad_value("collMod can only change 'unique' to true"));
        }
        if !index.unique {
            check_convertible(collection, index)?;
            if !dry_run {
                catalog.modify_index(collection, &index.name, |index| {
                    index.unique = true;
                    index.echoed.remove("prepareUnique");
                })?;
                reply.insert("unique_new", true);
            }
        }
    }
    if let Some(hidden) = given("hidden") {
        let hidden = truthy_option("hidden", hidden)?;
        if index.is_id_index() {
            return Err(Error::bad_value("can't hide _id index"));
        }
        let old = catalog.set_index_hidden(collection, &index.name, hidden)?;
        // A change that changes nothing is not echoed, as in mongod.
        if old != hidden {
            reply.insert("hidden_old", old);
            reply.insert("hidden_new", hidden);
        }
    }
    if let Some(value) = given("expireAfterSeconds") {
        if !basalt_value::is_number(value) {
            return Err(Error::type_mismatch(format!(
                "BSON field 'collMod.index.expireAfterSeconds' is the wrong type '{}', expected types '[long, int, decimal, double]'",
                crate::request::type_name(value)
            )));
        }
        if index.is_id_index() || index.key.len() > 1 {
            return Err(Error::new(
                ErrorCode::INVALID_OPTIONS,
                "TTL indexes are single-field indexes, compound indexes do not support TTL",
            ));
        }
        // A double is cut toward zero, a decimal rounded half to even, NaN is 0; what
        // is then negative is refused, what is above 32 bits is the most there is.
        let seconds = crate::request::coerced_integer(value).unwrap_or(0);
        if seconds < 0 {
            return Err(Error::new(
                ErrorCode::INVALID_OPTIONS,
                format!("TTL index 'expireAfterSeconds' option cannot be less than 0: {value}"),
            ));
        }
        let seconds = seconds.min(i64::from(i32::MAX));
        let old = catalog.set_index_expiry(collection, &index.name, Some(seconds))?;
        if let Some(old) = old {
            reply.insert("expireAfterSeconds_old", old);
        }
        reply.insert("expireAfterSeconds_new", seconds);
    }
    let changes = ["prepareUnique", "unique", "hidden", "expireAfterSeconds"];
    if !changes.iter().any(|option| given(option).is_some()) {
        return Err(Error::new(
            ErrorCode::INVALID_OPTIONS,
            "no expireAfterSeconds, hidden, prepareUnique or unique field",
        ));
    }
    Ok(reply)
}

/// A boolean index option, taken as mongod takes it: a number is true unless zero.
fn truthy_option(name: &str, value: &Bson) -> Result<bool> {
    match value {
        Bson::Boolean(flag) => Ok(*flag),
        n if basalt_value::is_number(n) => Ok(basalt_value::as_f64(n) != Some(0.0)),
        other => Err(Error::type_mismatch(format!(
            "BSON field 'collMod.index.{name}' is the wrong type '{}', expected type 'bool'",
            crate::request::type_name(other)
        ))),
    }
}

/// Whether a prepared index can become unique: no two documents share a key.
fn check_convertible(
    collection: &basalt_catalog::Collection,
    index: &basalt_catalog::IndexSpec,
) -> Result<()> {
    if !index.echoed.get_bool("prepareUnique").unwrap_or(false) {
        return Err(Error::new(
            ErrorCode::INVALID_OPTIONS,
            "Cannot make index unique with 'prepareUnique' not set to true",
        ));
    }
    let snapshot = collection.snapshot();
    let groups = collection.duplicate_keys(&*snapshot, index)?;
    if !groups.is_empty() {
        let mut violations = Vec::with_capacity(groups.len());
        for records in groups {
            let mut ids = Vec::with_capacity(records.len());
            for record_id in records {
                if let Some(document) = collection.get_record(&*snapshot, record_id)? {
                    ids.push(document.get("_id").cloned().unwrap_or(Bson::Null));
                }
            }
            violations.push(doc! { "ids": ids });
        }
        return Err(Error::new(
            ErrorCode::CANNOT_CONVERT_INDEX_TO_UNIQUE,
            "Cannot convert the index to unique. Please resolve conflicting documents \
             before running collMod again.",
        )
        .with_extra(doc! { "violations": violations }));
    }
    Ok(())
}
