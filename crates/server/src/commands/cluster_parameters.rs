//! Cluster parameters: `setClusterParameter` and `getClusterParameter` (admin), the
//! settings MongoDB 8.0 keeps for a whole replica set (or sharded cluster) rather than
//! per process.
//!
//! As in mongod, each parameter set is a document of `config.clusterParameters`
//! (`{_id: <name>, clusterParameterTime, ...fields}`), written through the ordinary
//! write path, so it survives restarts and every member of a set reads the same; a
//! parameter never set reads as its defaults with a `clusterParameterTime` of
//! `Timestamp(0, 0)`. A set replaces the whole value: a field left out, or null, takes
//! its default again.
//!
//! The parameters are mongod 8.0's that a replica set reports. Their values are kept
//! and reported; what they govern in mongod is either absent from Basalt (sharding's
//! migrations, queryable encryption's compaction) or not applied yet (`defaultMaxTimeMS`,
//! the change streams' pre- and post-image expiry): see `PARAMETERS`.
//!
//! Errors, as mongod gives them: the command's argument is an object of exactly one
//! parameter (TypeMismatch, 40414 for null, NoSuchKey for none or an unknown name,
//! InvalidOptions for several); a value that is not an object, has an unknown or
//! `$`-prefixed field (DollarPrefixedFieldName) or a value out of range is BadValue; a
//! typed field of the wrong type is TypeMismatch.

use super::{run_internal, Ctx};
use crate::request::{coerced_integer, type_name};
use basalt_error::{Error, ErrorCode, Result};
use bson::{doc, Bson, Document, Timestamp};

/// Where mongod keeps them.
pub(crate) const DATABASE: &str = "config";
pub(crate) const COLLECTION: &str = "clusterParameters";

/// What a field of a parameter holds.
#[derive(Clone, Copy)]
enum Kind {
    Bool,
    /// A whole number of at least 1 (any numeric type, kept as a long).
    PositiveLong,
    /// A whole number of at least 0.
    Long,
    /// `{expireAfterSeconds: "off" | <seconds>}` (the pre- and post-images' expiry).
    Expiry,
}

/// A field of a parameter: its name, kind and default.
type Field = (&'static str, Kind, fn() -> Bson);

/// A parameter: its name, and its fields.
struct Parameter {
    name: &'static str,
    fields: &'static [Field],
}

const PARAMETERS: &[Parameter] = &[
    Parameter {
        name: "changeStreamOptions",
        fields: &[("preAndPostImages", Kind::Expiry, || {
            Bson::Document(doc! { "expireAfterSeconds": "off" })
        })],
    },
    Parameter {
        name: "changeStreams",
        fields: &[("expireAfterSeconds", Kind::PositiveLong, || {
            Bson::Int64(3600)
        })],
    },
    Parameter {
        name: "defaultMaxTimeMS",
        fields: &[("readOperations", Kind::Long, || Bson::Int64(0))],
    },
    Parameter {
        name: "fleCompactionOptions",
        fields: &[
            ("maxCompactionSize", Kind::PositiveLong, || {
                Bson::Int64(268_435_456)
            }),
            ("maxAnchorCompactionSize", Kind::PositiveLong, || {
                Bson::Int64(268_435_456)
            }),
            (
                "maxESCEntriesPerCompactionDelete",
                Kind::PositiveLong,
                || Bson::Int64(350_000),
            ),
        ],
    },
    Parameter {
        name: "fleDisableSubstringPreviewParameterLimits",
        fields: &[("shouldOverride", Kind::Bool, || Bson::Boolean(false))],
    },
    Parameter {
        name: "pauseMigrationsDuringMultiUpdates",
        fields: &[("enabled", Kind::Bool, || Bson::Boolean(false))],
    },
];

fn parameter(name: &str) -> Result<&'static Parameter> {
    PARAMETERS
        .iter()
        .find(|parameter| parameter.name == name)
        .ok_or_else(|| {
            Error::new(
                ErrorCode::NO_SUCH_KEY,
                format!("Unknown Cluster Parameter {name}"),
            )
        })
}

/// A parameter as it is now: its stored document, or its defaults.
fn read(ctx: &Ctx<'_>, parameter: &Parameter) -> Result<Document> {
    Ok(read_stored(ctx, parameter.name)?.unwrap_or_else(|| {
        let mut defaults = doc! { "_id": parameter.name, "clusterParameterTime": never() };
        for (field, _, default) in parameter.fields {
            defaults.insert(*field, default());
        }
        defaults
    }))
}

/// The `clusterParameterTime` of a parameter never set.
fn never() -> Timestamp {
    Timestamp {
        time: 0,
        increment: 0,
    }
}

/// The stored document of parameter `name`, if it was ever set (also the
/// `querySettings` parameter, which `query_settings.rs` keeps).
pub(crate) fn read_stored(ctx: &Ctx<'_>, name: &str) -> Result<Option<Document>> {
    super::read_own_document(ctx.server, DATABASE, COLLECTION, name)
}

/// Stores parameter `name` as `fields`, at a `clusterParameterTime` after `previous`'s.
pub(crate) fn store(
    ctx: &Ctx<'_>,
    name: &str,
    fields: Document,
    previous: Option<&Document>,
) -> Result<()> {
    let previous_time = previous
        .and_then(|previous| previous.get_timestamp("clusterParameterTime").ok())
        .unwrap_or_else(never);
    let mut stored = doc! { "_id": name };
    stored.extend(fields);
    stored.insert("clusterParameterTime", later_than(previous_time));
    run_internal(
        ctx.server,
        DATABASE,
        doc! {
            "update": COLLECTION,
            "updates": [{ "q": { "_id": name }, "u": stored, "upsert": true }],
        },
    )
    .map(drop)
}

pub fn get_cluster_parameter(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let wrong_type = |value: &Bson| {
        Error::type_mismatch(format!(
            "BSON field 'getClusterParameter' is the wrong type '{}', expected types '[string, array]'",
            type_name(value)
        ))
    };
    let names: Vec<&str> = match body.get("getClusterParameter") {
        Some(Bson::String(all)) if all == "*" => PARAMETERS.iter().map(|p| p.name).collect(),
        Some(Bson::String(name)) => vec![name.as_str()],
        Some(Bson::Array(names)) if names.is_empty() => {
            return Err(Error::bad_value(
                "getClusterParameter requires at least one parameter name",
            ))
        }
        Some(Bson::Array(names)) => names
            .iter()
            .map(|name| match name {
                Bson::String(name) => Ok(name.as_str()),
                other => Err(Error::type_mismatch(format!(
                    "BSON field 'getClusterParameter.0' is the wrong type '{}', expected type 'string'",
                    type_name(other)
                ))),
            })
            .collect::<Result<_>>()?,
        Some(other) => return Err(wrong_type(other)),
        None => return Err(wrong_type(&Bson::Null)),
    };
    let parameters = names
        .into_iter()
        .map(|name| parameter(name).and_then(|parameter| read(ctx, parameter)))
        .collect::<Result<Vec<_>>>()?;
    Ok(doc! { "clusterParameters": parameters })
}

pub fn set_cluster_parameter(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let spec = match body.get("setClusterParameter") {
        Some(Bson::Document(spec)) => spec,
        None | Some(Bson::Null) => {
            return Err(Error::location(
                40414,
                "BSON field 'setClusterParameter.setClusterParameter' is missing but a required field",
            ))
        }
        Some(other) => {
            return Err(Error::type_mismatch(format!(
                "BSON field 'setClusterParameter.setClusterParameter' is the wrong type '{}', expected type 'object'",
                type_name(other)
            )))
        }
    };
    let mut entries = spec.iter();
    let Some((name, value)) = entries.next() else {
        return Err(Error::new(
            ErrorCode::NO_SUCH_KEY,
            "setClusterParameter needs the parameter to set",
        ));
    };
    if entries.next().is_some() {
        return Err(Error::new(
            ErrorCode::INVALID_OPTIONS,
            "setClusterParameter sets one parameter at a time",
        ));
    }
    let parameter = parameter(name)?;
    let fields = parsed(parameter, value)?;
    let previous = read(ctx, parameter)?;
    store(ctx, parameter.name, fields, Some(&previous))?;
    Ok(Document::new())
}

/// A time for a change: now, or just after `previous` when the clock has not passed it.
fn later_than(previous: Timestamp) -> Timestamp {
    let now = bson::DateTime::now().timestamp_millis() / 1000;
    let now = Timestamp {
        time: u32::try_from(now).unwrap_or(u32::MAX),
        increment: 1,
    };
    if (now.time, now.increment) > (previous.time, previous.increment) {
        now
    } else {
        Timestamp {
            time: previous.time,
            increment: previous.increment + 1,
        }
    }
}

/// The parameter's fields from `value`, defaults filled in.
fn parsed(parameter: &Parameter, value: &Bson) -> Result<Document> {
    let name = parameter.name;
    let Bson::Document(value) = value else {
        return Err(Error::bad_value(format!(
            "Cluster parameter {name} must be an object, not {}",
            type_name(value)
        )));
    };
    if let Some(field) = value.keys().find(|field| field.starts_with('$')) {
        return Err(Error::new(
            ErrorCode::DOLLAR_PREFIXED_FIELD_NAME,
            format!("Cluster parameter {name} cannot have the field '{field}'"),
        ));
    }
    if let Some(field) = value
        .keys()
        .find(|field| !parameter.fields.iter().any(|(known, _, _)| known == field))
    {
        return Err(Error::bad_value(format!(
            "BSON field '{name}.{field}' is an unknown field."
        )));
    }
    let mut fields = Document::new();
    for (field, kind, default) in parameter.fields {
        let path = format!("{name}.{field}");
        let given = value.get(*field).filter(|given| **given != Bson::Null);
        let stored = match (given, kind) {
            (None, Kind::Expiry) => {
                return Err(Error::bad_value(format!(
                    "BSON field '{path}' is missing but a required field"
                )))
            }
            (None, _) => default(),
            (Some(given), kind) => checked(&path, given, *kind)?,
        };
        fields.insert(*field, stored);
    }
    Ok(fields)
}

/// One field's value, checked against its kind and normalized as mongod stores it.
fn checked(path: &str, value: &Bson, kind: Kind) -> Result<Bson> {
    let wrong_type = |expected: &str| {
        Error::type_mismatch(format!(
            "BSON field '{path}' is the wrong type '{}', expected type '{expected}'",
            type_name(value)
        ))
    };
    match kind {
        Kind::Bool => match value {
            Bson::Boolean(flag) => Ok(Bson::Boolean(*flag)),
            _ => Err(wrong_type("bool")),
        },
        Kind::Long | Kind::PositiveLong => {
            let n = coerced_integer(value).ok_or_else(|| wrong_type("long"))?;
            let least = if matches!(kind, Kind::PositiveLong) {
                1
            } else {
                0
            };
            if n < least {
                return Err(Error::bad_value(format!(
                    "BSON field '{path}' must be at least {least}, not {n}"
                )));
            }
            Ok(Bson::Int64(n))
        }
        Kind::Expiry => {
            let Bson::Document(expiry) = value else {
                return Err(Error::bad_value(format!(
                    "BSON field '{path}' must be an object, not {}",
                    type_name(value)
                )));
            };
            if let Some(field) = expiry.keys().find(|field| *field != "expireAfterSeconds") {
                return Err(Error::bad_value(format!(
                    "BSON field '{path}.{field}' is an unknown field."
                )));
            }
            let seconds = match expiry.get("expireAfterSeconds") {
                Some(Bson::String(off)) if off == "off" => Bson::String(off.clone()),
                Some(
                    number @ (Bson::Int32(_)
                    | Bson::Int64(_)
                    | Bson::Double(_)
                    | Bson::Decimal128(_)),
                ) => match coerced_integer(number) {
                    Some(seconds) if seconds >= 1 => Bson::Int64(seconds),
                    _ => {
                        return Err(Error::bad_value(format!(
                            "BSON field '{path}.expireAfterSeconds' must be 'off' or a \
                                 number of seconds of at least 1"
                        )))
                    }
                },
                _ => {
                    return Err(Error::bad_value(format!(
                        "BSON field '{path}.expireAfterSeconds' must be 'off' or a number of \
                         seconds"
                    )))
                }
            };
            Ok(Bson::Document(doc! { "expireAfterSeconds": seconds }))
        }
    }
}
