//! `createIndexes`: adds indexes to a collection (creating it if needed) and builds them
//! from its documents.
//!
//! Built today: single-field and compound indexes in either direction, multikey, unique
//! and sparse. Index kinds and options that need more (hashed, text, geo, wildcard, TTL,
//! partial, collation) are refused by name rather than built as something else.

use super::Ctx;
use crate::request::Fields;
use basalt_catalog::IndexSpec;
use basalt_error::{Error, ErrorCode, Result};
use bson::{doc, Bson, Document};

/// Index options that are accepted and have their MongoDB meaning here.
const SUPPORTED_OPTIONS: &[&str] = &["key", "name", "unique", "sparse", "background", "v", "ns"];
/// Real MongoDB index options whose behaviour Basalt does not have yet.
const UNSUPPORTED_OPTIONS: &[&str] = &[
    "expireAfterSeconds",
    "partialFilterExpression",
    "collation",
    "hidden",
    "weights",
    "default_language",
    "language_override",
    "textIndexVersion",
    "2dsphereIndexVersion",
    "bits",
    "min",
    "max",
    "wildcardProjection",
    "storageEngine",
    "prepareUnique",
    "clustered",
];

pub fn create_indexes(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let fields = Fields::new(body);
    let name = fields.collection()?;
    let specs = fields.documents("indexes")?;
    if specs.is_empty() {
        return Err(Error::bad_value(
            "Must specify at least one index to create",
        ));
    }
    let requested = specs
        .iter()
        .map(|s| parse_spec(s))
        .collect::<Result<Vec<_>>>()?;
    let existed = ctx.server.catalog.get(ctx.db, name).is_some();
    let collection = ctx.server.catalog.get_or_create(ctx.db, name)?;
    let before = collection.meta().indexes.len() as i32;
    for spec in requested {
        let existing = collection.meta().indexes.clone();
        if let Some(same_name) = existing.iter().find(|i| i.name == spec.name) {
            if same_name.key == spec.key
                && same_name.unique == spec.unique
                && same_name.sparse == spec.sparse
            {
                continue;
            }
            return Err(Error::new(
                if same_name.key == spec.key { ErrorCode::INDEX_OPTIONS_CONFLICT } else { ErrorCode::INDEX_KEY_SPECS_CONFLICT },
                format!(
                    "An existing index has the same name as the requested index. When index names are not specified, they are auto generated and can cause conflicts. Please refer to our documentation. Requested index: {}, existing index: {}",
                    spec.to_list_document(),
                    same_name.to_list_document()
                ),
            ));
        }
        if let Some(same_key) = existing.iter().find(|i| i.key == spec.key) {
            return Err(Error::new(
                ErrorCode::INDEX_OPTIONS_CONFLICT,
                format!(
                    "Index already exists with a different name: {}",
                    same_key.name
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

fn parse_spec(spec: &Document) -> Result<IndexSpec> {
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
    for (field, direction) in &key {
        match direction {
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
    let flag = |field: &str| match spec.get(field) {
        None => Ok(false),
        Some(Bson::Boolean(b)) => Ok(*b),
        Some(v) => basalt_value::as_f64(v)
            .map(|n| n != 0.0)
            .ok_or_else(|| Error::type_mismatch(format!("The field '{field}' must be a boolean"))),
    };
    // An index on `_id` alone is unique whatever the spec says, as MongoDB's `_id_`.
    let on_id_only = key.len() == 1 && key.contains_key("_id");
    Ok(IndexSpec {
        id: 0,
        name,
        key,
        unique: flag("unique")? || on_id_only,
        sparse: flag("sparse")?,
    })
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
