//! `dropIndexes`: removes indexes by name, by key pattern, by a list of names, or all
//! but `_id_` with `"*"`.

use super::Ctx;
use crate::request::Fields;
use basalt_catalog::IndexSpec;
use basalt_error::{Error, ErrorCode, Result};
use bson::{doc, Bson, Document};

pub fn drop_indexes(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let fields = Fields::new(body);
    let name = fields.collection()?;
    // A time-series collection's indexes are its buckets'.
    if let Some((series, _)) = crate::timeseries::get(&ctx.server.catalog, ctx.db, name) {
        let mut on_buckets = body.clone();
        on_buckets.insert("dropIndexes", crate::timeseries::buckets_name(name));
        if let Some(Bson::Document(key)) = body.get("index") {
            let index = doc! { "key": key.clone(), "name": "" };
            let translated = series.bucket_index(&index)?;
            on_buckets.insert(
                "index",
                translated.get("key").cloned().unwrap_or(Bson::Null),
            );
        }
        return drop_indexes(ctx, &on_buckets);
    }
    let Some(collection) = ctx.server.catalog.get(ctx.db, name) else {
        return Err(Error::new(
            ErrorCode::NAMESPACE_NOT_FOUND,
            format!("ns not found {}.{name}", ctx.db),
        ));
    };
    let indexes = collection.meta().indexes.clone();
    let was = indexes.len() as i32;
    let find_by_name = |wanted: &str| -> Result<String> {
        indexes
            .iter()
            .find(|i| i.name == wanted)
            .map(|i| i.name.clone())
            .ok_or_else(|| {
                Error::new(
                    ErrorCode::INDEX_NOT_FOUND,
                    format!("index not found with name [{wanted}]"),
                )
            })
    };
    let targets: Vec<String> = match body.get("index") {
        Some(Bson::String(all)) if all == "*" => indexes
            .iter()
            .filter(|i| !i.is_id_index())
            .map(|i| i.name.clone())
            .collect(),
        Some(Bson::String(one)) => vec![find_by_name(one)?],
        Some(Bson::Array(names)) => names
            .iter()
            .map(|n| match n {
                Bson::String(n) => find_by_name(n),
                _ => Err(Error::type_mismatch("dropIndexes names must be strings")),
            })
            .collect::<Result<_>>()?,
        Some(Bson::Document(key)) => {
            // Indexes under different collations may share a key pattern.
            let matching: Vec<&IndexSpec> =
                indexes.iter().filter(|i| i.has_key_pattern(key)).collect();
            match matching.as_slice() {
                [] => {
                    return Err(Error::new(
                        ErrorCode::INDEX_NOT_FOUND,
                        format!("can't find index with key: {key}"),
                    ))
                }
                [one] => vec![one.name.clone()],
                several => {
                    let specs: Vec<String> = several
                        .iter()
                        .map(|i| i.to_list_document().to_string())
                        .collect();
                    return Err(Error::new(
                        ErrorCode::AMBIGUOUS_INDEX_KEY_PATTERN,
                        format!(
                            "{} indexes found for key: {key}, identify by name instead. Conflicting indexes: {}",
                            several.len(),
                            specs.join(", ")
                        ),
                    ));
                }
            }
        }
        None => return Err(super::arguments::missing("dropIndexes", "index")),
        Some(other) => {
            return Err(Error::type_mismatch(format!(
                "BSON field 'dropIndexes.index' is the wrong type '{}', expected types \
                 '[string, array, object]'",
                crate::request::type_name(other)
            )))
        }
    };
    if targets.iter().any(|t| t == IndexSpec::ID_INDEX_NAME) {
        return Err(Error::new(
            ErrorCode::INVALID_OPTIONS,
            "cannot drop _id index",
        ));
    }
    for target in targets {
        ctx.server.catalog.remove_index(&collection, &target)?;
    }
    Ok(doc! { "nIndexesWas": was })
}
