//! `collMod`: changes a collection's options, or a view's definition. Only the options
//! Basalt keeps today can change (`changeStreamPreAndPostImages`, `validator`,
//! `validationLevel`, `validationAction`, a capped collection's `cappedSize` and `cappedMax`, and an
//! index's `expireAfterSeconds` or `hidden` through `index`); the rest are refused by
//! name rather than ignored.

use super::create::{capped_max, capped_size, pre_and_post_images, validation_setting};
use super::write_batch::durability;
use super::Ctx;
use crate::request::{Fields, GENERIC_COMMAND_FIELDS};
use crate::views::{self, Definer, View};
use basalt_error::{Error, ErrorCode, Result};
use bson::{doc, Bson, Document};

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
    let mut options = collection.meta().options.clone();
    let mut reply = Document::new();
    for (key, value) in body.iter().skip(1) {
        match key.as_str() {
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
            "index" => reply = modify_index(ctx, &collection, value)?,
            "changeStreamPreAndPostImages" => {
                options.insert(key.clone(), pre_and_post_images(value)?);
            }
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
            generic if GENERIC_COMMAND_FIELDS.contains(&generic) => {}
            other => {
                return Err(Error::new(
                    ErrorCode::COMMAND_NOT_SUPPORTED,
                    format!("collMod option '{other}' is not supported by Basalt yet"),
                ))
            }
        }
    }
    super::create::with_validation_defaults(&mut options);
    // Smaller capped bounds take effect at the next insert, as in MongoDB.
    ctx.server.catalog.set_options(&collection, options)?;
    Ok(reply)
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

/// `index: {name | keyPattern, expireAfterSeconds | hidden}`: changes a TTL or hides an
/// index from the planner (or shows it again), replying with the
/// old and new values as MongoDB does.
fn modify_index(
    ctx: &Ctx<'_>,
    collection: &basalt_catalog::Collection,
    spec: &Bson,
) -> Result<Document> {
    let Bson::Document(spec) = spec else {
        return Err(Error::type_mismatch(
            "BSON field 'collMod.index' is the wrong type, expected type 'object'",
        ));
    };
    let meta = collection.meta();
    let index = match (spec.get("name"), spec.get("keyPattern")) {
        (Some(Bson::String(name)), None) => meta.indexes.iter().find(|i| &i.name == name),
        (None, Some(Bson::Document(key))) => meta.indexes.iter().find(|i| &i.key == key),
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
    if let Some(hidden) = spec.get("hidden") {
        let Bson::Boolean(hidden) = hidden else {
            return Err(Error::type_mismatch(
                "BSON field 'hidden' must be a boolean",
            ));
        };
        if index.is_id_index() {
            return Err(Error::bad_value("can't hide _id index"));
        }
        let old = ctx
            .server
            .catalog
            .set_index_hidden(collection, &index.name, *hidden)?;
        return Ok(doc! { "hidden_old": old, "hidden_new": *hidden });
    }
    let Some(value) = spec.get("expireAfterSeconds") else {
        return Err(Error::new(
            ErrorCode::INVALID_OPTIONS,
            "no expireAfterSeconds or hidden field",
        ));
    };
    if index.is_id_index() || index.key.len() > 1 {
        return Err(Error::new(
            ErrorCode::INVALID_OPTIONS,
            "TTL indexes are single-field indexes, compound indexes do not support TTL",
        ));
    }
    let seconds = super::create_indexes::expire_after_seconds(value).map_err(Error::bad_value)?;
    let old = ctx
        .server
        .catalog
        .set_index_expiry(collection, &index.name, Some(seconds))?;
    let mut reply = doc! {};
    if let Some(old) = old {
        reply.insert("expireAfterSeconds_old", old);
    }
    reply.insert("expireAfterSeconds_new", seconds);
    Ok(reply)
}
