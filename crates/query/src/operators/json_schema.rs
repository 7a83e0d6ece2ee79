//! `$jsonSchema`: documents valid under a JSON Schema, in MongoDB's subset of draft 4.
//!
//! MongoDB translates a schema into match expressions; Basalt parses it once into a tree
//! of keywords and validates values against it directly, which gives the same answers
//! because MongoDB's translation applies each keyword to the value at its position
//! without implicit array traversal. A schema applies to a value (the whole document at
//! the top). Keywords about one type (`maxLength` about strings, `minItems` about arrays,
//! `properties` about objects...) hold for values of any other type, as JSON Schema
//! says; only `type`/`bsonType` restrict types. Parse errors carry MongoDB's codes and
//! wording (json_schema_parser.cpp), checked in the order MongoDB checks keywords.

use super::element::TypeSet;
use super::RegexPredicate;
use basalt_error::{Error, Result};
use basalt_value::display::{element_to_string, type_name};
use basalt_value::{as_f64, compare_values, is_number, values_equal};
use bson::{Bson, Document};
use std::cmp::Ordering;

/// Keywords MongoDB names as unsupported rather than unknown.
const UNSUPPORTED_KEYWORDS: &[&str] =
    &["$ref", "$schema", "default", "definitions", "format", "id"];

/// Every keyword MongoDB accepts (`encrypt` and `encryptMetadata` belong to client-side
/// field level encryption, which Basalt does not implement, so they are unknown here).
const KNOWN_KEYWORDS: &[&str] = &[
    "additionalItems",
    "additionalProperties",
    "allOf",
    "anyOf",
    "bsonType",
    "dependencies",
    "description",
    "enum",
    "exclusiveMaximum",
    "exclusiveMinimum",
    "items",
    "maxItems",
    "maxLength",
    "maxProperties",
    "maximum",
    "minItems",
    "minLength",
    "minProperties",
    "minimum",
    "multipleOf",
    "not",
    "oneOf",
    "pattern",
    "patternProperties",
    "properties",
    "required",
    "title",
    "type",
    "uniqueItems",
];

/// A parsed schema: the value is valid when every keyword holds.
#[derive(Clone, Debug)]
pub(crate) struct JsonSchema {
    keywords: Vec<Keyword>,
}

#[derive(Clone, Debug)]
enum Keyword {
    Type(TypeSet),
    Pattern(RegexPredicate),
    MaxLength(u64),
    MinLength(u64),
    MultipleOf(f64),
    /// `maximum`/`minimum`: the value compared with the limit must give one of `allowed`.
    Bound {
        limit: Bson,
        allowed: [Ordering; 2],
    },
    MinItems(u64),
    MaxItems(u64),
    UniqueItems,
    /// `items` as one schema for every element.
    EveryItem(Box<JsonSchema>),
    /// `items` as an array of schemas by position, then what later elements must be.
    ItemsByPosition {
        positional: Vec<JsonSchema>,
        additional: Option<Allowed>,
    },
    Required(Vec<String>),
    /// `properties`: each named field, when present, is valid under its schema.
    Properties(Vec<(String, JsonSchema)>),
    /// `patternProperties` and `additionalProperties`: fields not named by `properties`
    /// are valid under the schema of every pattern matching their name, or under
    /// `additional` when no pattern does.
    AllowedProperties {
        named: Vec<String>,
        patterns: Vec<(RegexPredicate, JsonSchema)>,
        additional: Allowed,
    },
    MinProperties(u64),
    MaxProperties(u64),
    /// `dependencies`: when the field is present, the object must also be valid.
    Dependency(String, Dependency),
    AllOf(Vec<JsonSchema>),
    AnyOf(Vec<JsonSchema>),
    OneOf(Vec<JsonSchema>),
    Not(Box<JsonSchema>),
    Enum(Vec<Bson>),
}

/// What `additionalProperties` or `additionalItems` allows.
#[derive(Clone, Debug)]
enum Allowed {
    All(bool),
    Schema(Box<JsonSchema>),
}

#[derive(Clone, Debug)]
enum Dependency {
    Schema(Box<JsonSchema>),
    Fields(Vec<String>),
}

impl JsonSchema {
    /// Parses the operand of `$jsonSchema`.
    pub(crate) fn parse_operand(operand: &Bson) -> Result<JsonSchema> {
        match operand {
            Bson::Document(schema) => JsonSchema::parse(schema),
            _ => Err(Error::type_mismatch("$jsonSchema must be an object")),
        }
    }

    fn parse(schema: &Document) -> Result<JsonSchema> {
        for name in schema.keys() {
            if UNSUPPORTED_KEYWORDS.contains(&name.as_str()) {
                return Err(Error::failed_to_parse(format!(
                    "$jsonSchema keyword '{name}' is not currently supported"
                )));
            }
            if !KNOWN_KEYWORDS.contains(&name.as_str()) {
                return Err(Error::failed_to_parse(format!(
                    "Unknown $jsonSchema keyword: {name}"
                )));
            }
        }
        for metadata in ["description", "title"] {
            if schema
                .get(metadata)
                .is_some_and(|v| !matches!(v, Bson::String(_)))
            {
                return Err(Error::type_mismatch(format!(
                    "$jsonSchema keyword '{metadata}' must be of type string"
                )));
            }
        }
        let mut keywords = Vec::new();
        match (schema.get("type"), schema.get("bsonType")) {
            (Some(_), Some(_)) => {
                return Err(Error::failed_to_parse(
                    "Cannot specify both $jsonSchema keywords 'type' and 'bsonType'",
                ))
            }
            (Some(types), None) => keywords.push(Keyword::Type(parse_types("type", types)?)),
            (None, Some(types)) => keywords.push(Keyword::Type(parse_types("bsonType", types)?)),
            (None, None) => {}
        }
        parse_scalar_keywords(schema, &mut keywords)?;
        parse_array_keywords(schema, &mut keywords)?;
        parse_object_keywords(schema, &mut keywords)?;
        parse_logical_keywords(schema, &mut keywords)?;
        Ok(JsonSchema { keywords })
    }

    /// Whether a document is valid under the schema.
    pub(crate) fn validates_document(&self, doc: &Document) -> bool {
        self.validates(Node::Document(doc))
    }

    fn validates(&self, node: Node<'_>) -> bool {
        self.keywords.iter().all(|k| k.holds(node))
    }
}

/// What a schema validates: a value, or a whole document (which is not wrapped in a
/// value, to spare a copy per scanned document).
#[derive(Clone, Copy)]
enum Node<'a> {
    Value(&'a Bson),
    Document(&'a Document),
}

impl<'a> Node<'a> {
    fn document(self) -> Option<&'a Document> {
        match self {
            Node::Value(Bson::Document(d)) | Node::Document(d) => Some(d),
            Node::Value(_) => None,
        }
    }

    fn value(self) -> Option<&'a Bson> {
        match self {
            Node::Value(v) => Some(v),
            Node::Document(_) => None,
        }
    }
}

impl Keyword {
    fn holds(&self, node: Node<'_>) -> bool {
        if let Some(doc) = node.document() {
            return self.holds_for_document(doc, node);
        }
        let Some(v) = node.value() else {
            return true;
        };
        match (self, v) {
            (Keyword::Type(types), _) => types.matches(v),
            (Keyword::Pattern(re), Bson::String(_)) => re.matches(v),
            (Keyword::MaxLength(n), Bson::String(s)) => s.chars().count() as u64 <= *n,
            (Keyword::MinLength(n), Bson::String(s)) => s.chars().count() as u64 >= *n,
            (Keyword::MultipleOf(divisor), _) if is_number(v) => {
                as_f64(v).is_some_and(|x| x % divisor == 0.0)
            }
            (Keyword::Bound { limit, allowed }, _) if is_number(v) => {
                allowed.contains(&compare_values(v, limit))
            }
            (Keyword::MinItems(n), Bson::Array(items)) => items.len() as u64 >= *n,
            (Keyword::MaxItems(n), Bson::Array(items)) => items.len() as u64 <= *n,
            (Keyword::UniqueItems, Bson::Array(items)) => items.iter().enumerate().all(|(i, a)| {
                items[i + 1..]
                    .iter()
                    .all(|b| !equal_ignoring_field_order(a, b))
            }),
            (Keyword::EveryItem(schema), Bson::Array(items)) => {
                items.iter().all(|item| schema.validates(Node::Value(item)))
            }
            (
                Keyword::ItemsByPosition {
                    positional,
                    additional,
                },
                Bson::Array(items),
            ) => items
                .iter()
                .enumerate()
                .all(|(i, item)| match positional.get(i) {
                    Some(schema) => schema.validates(Node::Value(item)),
                    None => additional.as_ref().is_none_or(|a| a.allows(item)),
                }),
            (Keyword::Enum(values), _) => values.iter().any(|e| equal_ignoring_field_order(e, v)),
            _ => self.holds_for_any(node),
        }
    }

    fn holds_for_document(&self, doc: &Document, node: Node<'_>) -> bool {
        match self {
            Keyword::Type(types) => types.matches(&Bson::Document(Document::new())),
            Keyword::Required(fields) => fields.iter().all(|f| doc.contains_key(f)),
            Keyword::Properties(properties) => properties.iter().all(|(name, schema)| {
                doc.get(name)
                    .is_none_or(|value| schema.validates(Node::Value(value)))
            }),
            Keyword::AllowedProperties {
                named,
                patterns,
                additional,
            } => doc.iter().all(|(name, value)| {
                let key = Bson::String(name.clone());
                let mut matching = patterns.iter().filter(|(re, _)| re.matches(&key)).peekable();
                if matching.peek().is_some() {
                    matching.all(|(_, schema)| schema.validates(Node::Value(value)))
                } else {
                    named.contains(name) || additional.allows(value)
                }
            }),
            Keyword::MinProperties(n) => doc.len() as u64 >= *n,
            Keyword::MaxProperties(n) => doc.len() as u64 <= *n,
            Keyword::Dependency(field, dependency) => {
                !doc.contains_key(field)
                    || match dependency {
                        Dependency::Schema(schema) => schema.validates(node),
                        Dependency::Fields(fields) => fields.iter().all(|f| doc.contains_key(f)),
                    }
            }
            Keyword::Enum(values) => values.iter().any(|e| {
                matches!(e, Bson::Document(candidate) if documents_equal_ignoring_field_order(candidate, doc))
            }),
            _ => self.holds_for_any(node),
        }
    }

    /// The logical keywords, which hold for any type; every other keyword is about a type
    /// and holds for values of other types.
    fn holds_for_any(&self, node: Node<'_>) -> bool {
        match self {
            Keyword::AllOf(schemas) => schemas.iter().all(|s| s.validates(node)),
            Keyword::AnyOf(schemas) => schemas.iter().any(|s| s.validates(node)),
            Keyword::OneOf(schemas) => schemas.iter().filter(|s| s.validates(node)).count() == 1,
            Keyword::Not(schema) => !schema.validates(node),
            _ => true,
        }
    }
}

impl Allowed {
    fn allows(&self, v: &Bson) -> bool {
        match self {
            Allowed::All(allowed) => *allowed,
            Allowed::Schema(schema) => schema.validates(Node::Value(v)),
        }
    }
}

/// Equality as `enum` and `uniqueItems` see it: numbers by value, and embedded documents
/// equal whatever the order of their fields.
fn equal_ignoring_field_order(a: &Bson, b: &Bson) -> bool {
    match (a, b) {
        (Bson::Document(x), Bson::Document(y)) => documents_equal_ignoring_field_order(x, y),
        (Bson::Array(x), Bson::Array(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|(v, w)| equal_ignoring_field_order(v, w))
        }
        _ => values_equal(a, b),
    }
}

fn documents_equal_ignoring_field_order(x: &Document, y: &Document) -> bool {
    x.len() == y.len()
        && x.iter()
            .all(|(k, v)| y.get(k).is_some_and(|w| equal_ignoring_field_order(v, w)))
}

/// `type` takes JSON Schema's type names, `bsonType` MongoDB's `$type` aliases; both a
/// name or an array of distinct names.
fn parse_types(keyword: &str, operand: &Bson) -> Result<TypeSet> {
    let names: Vec<&Bson> = match operand {
        Bson::String(_) => vec![operand],
        Bson::Array(items) => {
            if items.iter().any(|item| !matches!(item, Bson::String(_))) {
                return Err(Error::type_mismatch(format!(
                    "$jsonSchema keyword '{keyword}' array elements must be strings"
                )));
            }
            items.iter().collect()
        }
        _ => {
            return Err(Error::type_mismatch(format!(
                "$jsonSchema keyword '{keyword}' must be either a string or an array of strings"
            )))
        }
    };
    let mut aliases: Vec<Bson> = Vec::with_capacity(names.len());
    for name in names {
        let Bson::String(name_str) = name else {
            continue;
        };
        if name_str == "integer" {
            return Err(Error::failed_to_parse(
                "$jsonSchema type 'integer' is not currently supported.",
            ));
        }
        if aliases.iter().any(|seen| seen == name) && matches!(operand, Bson::Array(_)) {
            return Err(Error::failed_to_parse(format!(
                "$jsonSchema keyword '{keyword}' has duplicate value: {name_str}"
            )));
        }
        aliases.push(name.clone());
    }
    let translated: Vec<Bson> = if keyword == "type" {
        aliases.iter().map(json_type_alias).collect::<Result<_>>()?
    } else {
        aliases
    };
    let set = TypeSet::parse(&Bson::Array(translated))?;
    if set.is_empty() {
        return Err(Error::failed_to_parse(format!(
            "$jsonSchema keyword '{keyword}' must name at least one type"
        )));
    }
    Ok(set)
}

/// The `$type` alias of one of JSON Schema's type names.
fn json_type_alias(name: &Bson) -> Result<Bson> {
    let Bson::String(name) = name else {
        return Err(Error::type_mismatch(
            "$jsonSchema keyword 'type' array elements must be strings",
        ));
    };
    let alias = match name.as_str() {
        "boolean" => "bool",
        "array" | "null" | "number" | "object" | "string" => name.as_str(),
        _ => return Err(Error::bad_value(format!("Unknown type name alias: {name}"))),
    };
    Ok(Bson::String(alias.to_string()))
}

/// A keyword that takes a count: a non-negative integral number.
fn parse_count(schema: &Document, keyword: &str) -> Result<Option<u64>> {
    let Some(v) = schema.get(keyword) else {
        return Ok(None);
    };
    let element = element_to_string(keyword, v);
    let n = match as_f64(v) {
        Some(n) if is_number(v) => n,
        _ => {
            return Err(Error::failed_to_parse(format!(
                "Expected a number in: {element}"
            )))
        }
    };
    if n.fract() != 0.0 || !n.is_finite() {
        return Err(Error::failed_to_parse(format!(
            "Expected an integer: {element}"
        )));
    }
    if n < 0.0 {
        return Err(Error::failed_to_parse(format!(
            "Expected a positive number in: {element}"
        )));
    }
    Ok(Some(n as u64))
}

fn parse_scalar_keywords(schema: &Document, keywords: &mut Vec<Keyword>) -> Result<()> {
    if let Some(pattern) = schema.get("pattern") {
        let Bson::String(pattern) = pattern else {
            return Err(Error::type_mismatch(
                "$jsonSchema keyword 'pattern' must be a string",
            ));
        };
        keywords.push(Keyword::Pattern(RegexPredicate::new(pattern, "")?));
    }
    if let Some(n) = parse_count(schema, "maxLength")? {
        keywords.push(Keyword::MaxLength(n));
    }
    if let Some(n) = parse_count(schema, "minLength")? {
        keywords.push(Keyword::MinLength(n));
    }
    if let Some(divisor) = schema.get("multipleOf") {
        if !is_number(divisor) {
            return Err(Error::type_mismatch(
                "$jsonSchema keyword 'multipleOf' must be a number",
            ));
        }
        let divisor = as_f64(divisor).unwrap_or(f64::NAN);
        if divisor.is_nan() || divisor <= 0.0 {
            return Err(Error::failed_to_parse(
                "$jsonSchema keyword 'multipleOf' must have a positive value",
            ));
        }
        keywords.push(Keyword::MultipleOf(divisor));
    }
    for (bound, exclusive_keyword, strict) in [
        ("maximum", "exclusiveMaximum", Ordering::Less),
        ("minimum", "exclusiveMinimum", Ordering::Greater),
    ] {
        let exclusive = match schema.get(exclusive_keyword) {
            None => false,
            Some(_) if !schema.contains_key(bound) => {
                return Err(Error::failed_to_parse(format!(
                    "$jsonSchema keyword '{bound}' must be a present if {exclusive_keyword} is \
                     present"
                )))
            }
            Some(Bson::Boolean(b)) => *b,
            Some(_) => {
                return Err(Error::type_mismatch(format!(
                    "$jsonSchema keyword '{exclusive_keyword}' must be a boolean"
                )))
            }
        };
        let Some(limit) = schema.get(bound) else {
            continue;
        };
        if !is_number(limit) {
            return Err(Error::type_mismatch(format!(
                "$jsonSchema keyword '{bound}' must be a number"
            )));
        }
        let inclusive = if exclusive { strict } else { Ordering::Equal };
        keywords.push(Keyword::Bound {
            limit: limit.clone(),
            allowed: [strict, inclusive],
        });
    }
    Ok(())
}

fn parse_array_keywords(schema: &Document, keywords: &mut Vec<Keyword>) -> Result<()> {
    if let Some(n) = parse_count(schema, "minItems")? {
        keywords.push(Keyword::MinItems(n));
    }
    if let Some(n) = parse_count(schema, "maxItems")? {
        keywords.push(Keyword::MaxItems(n));
    }
    match schema.get("uniqueItems") {
        None | Some(Bson::Boolean(false)) => {}
        Some(Bson::Boolean(true)) => keywords.push(Keyword::UniqueItems),
        Some(_) => {
            return Err(Error::type_mismatch(
                "$jsonSchema keyword 'uniqueItems' must be a boolean",
            ))
        }
    }
    let additional = schema
        .get("additionalItems")
        .map(|v| match v {
            Bson::Boolean(b) => Ok(Allowed::All(*b)),
            Bson::Document(d) => Ok(Allowed::Schema(Box::new(JsonSchema::parse(d)?))),
            other => Err(Error::type_mismatch(format!(
                "$jsonSchema keyword 'additionalItems' must be either an object or a boolean, \
                 but got a {}",
                type_name(other)
            ))),
        })
        .transpose()?;
    match schema.get("items") {
        None => {}
        Some(Bson::Document(d)) => {
            keywords.push(Keyword::EveryItem(Box::new(JsonSchema::parse(d)?)))
        }
        Some(Bson::Array(items)) => {
            let positional = items
                .iter()
                .map(|item| match item {
                    Bson::Document(d) => JsonSchema::parse(d),
                    other => Err(Error::type_mismatch(format!(
                        "$jsonSchema keyword 'items' requires that each element of the array \
                         is an object, but found a {}",
                        type_name(other)
                    ))),
                })
                .collect::<Result<_>>()?;
            // `additionalItems` only means something after positional `items`.
            keywords.push(Keyword::ItemsByPosition {
                positional,
                additional,
            });
        }
        Some(other) => {
            return Err(Error::type_mismatch(format!(
                "$jsonSchema keyword 'items' must be an array or an object, not {}",
                type_name(other)
            )))
        }
    }
    Ok(())
}

fn parse_object_keywords(schema: &Document, keywords: &mut Vec<Keyword>) -> Result<()> {
    if let Some(required) = schema.get("required") {
        keywords.push(Keyword::Required(parse_required(required)?));
    }
    let properties = match schema.get("properties") {
        None => Vec::new(),
        Some(Bson::Document(properties)) => properties
            .iter()
            .map(|(name, nested)| match nested {
                Bson::Document(d) => Ok((name.clone(), JsonSchema::parse(d)?)),
                _ => Err(Error::type_mismatch(format!(
                    "Nested schema for $jsonSchema property '{name}' must be an object"
                ))),
            })
            .collect::<Result<_>>()?,
        Some(_) => {
            return Err(Error::type_mismatch(
                "$jsonSchema keyword 'properties' must be an object",
            ))
        }
    };
    let named: Vec<String> = properties.iter().map(|(name, _)| name.clone()).collect();
    if !properties.is_empty() {
        keywords.push(Keyword::Properties(properties));
    }
    let patterns = match schema.get("patternProperties") {
        None => None,
        Some(Bson::Document(patterns)) => Some(
            patterns
                .iter()
                .map(|(pattern, nested)| match nested {
                    Bson::Document(d) => {
                        Ok((RegexPredicate::new(pattern, "")?, JsonSchema::parse(d)?))
                    }
                    _ => Err(Error::type_mismatch(format!(
                        "$jsonSchema keyword 'patternProperties' has property '{pattern}' which \
                         is not an object"
                    ))),
                })
                .collect::<Result<Vec<_>>>()?,
        ),
        Some(_) => {
            return Err(Error::type_mismatch(
                "$jsonSchema keyword 'patternProperties' must be an object",
            ))
        }
    };
    let additional = match schema.get("additionalProperties") {
        None => None,
        Some(Bson::Boolean(b)) => Some(Allowed::All(*b)),
        Some(Bson::Document(d)) => Some(Allowed::Schema(Box::new(JsonSchema::parse(d)?))),
        Some(_) => {
            return Err(Error::type_mismatch(
                "$jsonSchema keyword 'additionalProperties' must be an object or a boolean",
            ))
        }
    };
    if patterns.is_some() || additional.is_some() {
        keywords.push(Keyword::AllowedProperties {
            named,
            patterns: patterns.unwrap_or_default(),
            additional: additional.unwrap_or(Allowed::All(true)),
        });
    }
    if let Some(n) = parse_count(schema, "minProperties")? {
        keywords.push(Keyword::MinProperties(n));
    }
    if let Some(n) = parse_count(schema, "maxProperties")? {
        keywords.push(Keyword::MaxProperties(n));
    }
    match schema.get("dependencies") {
        None => {}
        Some(Bson::Document(dependencies)) => {
            for (field, dependency) in dependencies {
                let dependency = match dependency {
                    Bson::Document(d) => Dependency::Schema(Box::new(JsonSchema::parse(d)?)),
                    Bson::Array(fields) => {
                        Dependency::Fields(parse_dependency_fields(field, fields)?)
                    }
                    _ => {
                        return Err(Error::type_mismatch(format!(
                            "property '{field}' in $jsonSchema keyword 'dependencies' must be \
                             either an object or an array"
                        )))
                    }
                };
                keywords.push(Keyword::Dependency(field.clone(), dependency));
            }
        }
        Some(_) => {
            return Err(Error::type_mismatch(
                "$jsonSchema keyword 'dependencies' must be an object",
            ))
        }
    }
    Ok(())
}

fn parse_required(required: &Bson) -> Result<Vec<String>> {
    let Bson::Array(items) = required else {
        return Err(Error::type_mismatch(format!(
            "$jsonSchema keyword 'required' must be an array, but found an element of type {}",
            type_name(required)
        )));
    };
    let mut fields: Vec<String> = Vec::with_capacity(items.len());
    for item in items {
        let Bson::String(field) = item else {
            return Err(Error::type_mismatch(format!(
                "$jsonSchema keyword 'required' must be an array of strings, but found an \
                 element of type: {}",
                type_name(item)
            )));
        };
        fields.push(field.clone());
    }
    if fields.is_empty() {
        return Err(Error::failed_to_parse(
            "$jsonSchema keyword 'required' cannot be an empty array",
        ));
    }
    let mut distinct = fields.clone();
    distinct.sort();
    distinct.dedup();
    if distinct.len() != fields.len() {
        return Err(Error::failed_to_parse(
            "$jsonSchema keyword 'required' array cannot contain duplicate values",
        ));
    }
    Ok(fields)
}

fn parse_dependency_fields(field: &str, fields: &[Bson]) -> Result<Vec<String>> {
    if fields.is_empty() {
        return Err(Error::failed_to_parse(format!(
            "property '{field}' in $jsonSchema keyword 'dependencies' cannot be an empty array"
        )));
    }
    let mut names: Vec<String> = Vec::with_capacity(fields.len());
    for item in fields {
        let Bson::String(name) = item else {
            return Err(Error::type_mismatch(format!(
                "array '{field}' in $jsonSchema keyword 'dependencies' can only contain strings, \
                 but found element of type: {}",
                type_name(item)
            )));
        };
        if names.contains(name) {
            return Err(Error::failed_to_parse(format!(
                "array '{field}' in $jsonSchema keyword 'dependencies' contains duplicate \
                 element: {name}"
            )));
        }
        names.push(name.clone());
    }
    Ok(names)
}

fn parse_logical_keywords(schema: &Document, keywords: &mut Vec<Keyword>) -> Result<()> {
    for keyword in ["allOf", "anyOf", "oneOf"] {
        let Some(operand) = schema.get(keyword) else {
            continue;
        };
        let Bson::Array(items) = operand else {
            return Err(Error::type_mismatch(format!(
                "$jsonSchema keyword '{keyword}' must be an array"
            )));
        };
        if items.is_empty() {
            return Err(Error::bad_value(format!(
                "$jsonSchema keyword '{keyword}' must be a non-empty array"
            )));
        }
        let schemas = items
            .iter()
            .map(|item| match item {
                Bson::Document(d) => JsonSchema::parse(d),
                other => Err(Error::type_mismatch(format!(
                    "$jsonSchema keyword '{keyword}' must be an array of objects, but found an \
                     element of type {}",
                    type_name(other)
                ))),
            })
            .collect::<Result<Vec<_>>>()?;
        keywords.push(match keyword {
            "allOf" => Keyword::AllOf(schemas),
            "anyOf" => Keyword::AnyOf(schemas),
            _ => Keyword::OneOf(schemas),
        });
    }
    match schema.get("not") {
        None => {}
        Some(Bson::Document(d)) => keywords.push(Keyword::Not(Box::new(JsonSchema::parse(d)?))),
        Some(other) => {
            return Err(Error::type_mismatch(format!(
                "$jsonSchema keyword 'not' must be an object, but found an element of type {}",
                type_name(other)
            )))
        }
    }
    match schema.get("enum") {
        None => {}
        Some(Bson::Array(values)) => {
            if values.is_empty() {
                return Err(Error::failed_to_parse(
                    "$jsonSchema keyword 'enum' cannot be an empty array",
                ));
            }
            for (i, value) in values.iter().enumerate() {
                if values[..i]
                    .iter()
                    .any(|seen| equal_ignoring_field_order(seen, value))
                {
                    return Err(Error::failed_to_parse(
                        "$jsonSchema keyword 'enum' array cannot contain duplicate values.",
                    ));
                }
            }
            keywords.push(Keyword::Enum(values.clone()));
        }
        Some(other) => {
            return Err(Error::type_mismatch(format!(
                "$jsonSchema keyword 'enum' must be an array, but found an element of type {}",
                type_name(other)
            )))
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Matcher;
    use basalt_error::ErrorCode;
    use bson::{doc, Bson};

    fn code_of(schema: Document) -> (ErrorCode, String) {
        let e = JsonSchema::parse(&schema).unwrap_err();
        (e.code, e.message)
    }

    fn valid(schema: Document, doc: Document) -> bool {
        Matcher::new(&doc! {"$jsonSchema": schema})
            .unwrap()
            .matches(&doc)
    }

    #[test]
    fn types_and_required() {
        let schema = doc! {"required": ["a"], "properties": {"a": {"bsonType": "int"}, "b": {"type": ["string", "null"]}}};
        assert!(valid(schema.clone(), doc! {"a": 1}));
        assert!(valid(schema.clone(), doc! {"a": 1, "b": null}));
        assert!(!valid(schema.clone(), doc! {"a": 1, "b": 2}));
        assert!(!valid(schema.clone(), doc! {"a": 1.5}));
        assert!(!valid(schema.clone(), doc! {"b": "x"}));
        assert!(valid(
            doc! {"properties": {"a": {"bsonType": "number"}}},
            doc! {"a": 1i64}
        ));
        assert!(valid(
            doc! {"properties": {"a": {"type": "number"}}},
            doc! {"a": 1.5}
        ));
        assert!(!valid(
            doc! {"properties": {"a": {"type": "object"}}},
            doc! {"a": [1]}
        ));
        // A top-level type other than object matches no document.
        assert!(!valid(doc! {"type": "array"}, doc! {}));
        assert!(valid(doc! {"bsonType": ["object"]}, doc! {}));
    }

    #[test]
    fn scalar_keywords_apply_to_their_type_only() {
        let schema = doc! {"properties": {"s": {"minLength": 2, "maxLength": 3, "pattern": "^a"},
        "n": {"minimum": 1, "maximum": 5, "exclusiveMaximum": true, "multipleOf": 2}}};
        assert!(valid(schema.clone(), doc! {"s": "ab", "n": 2}));
        assert!(valid(schema.clone(), doc! {"s": 7, "n": "x"}));
        assert!(!valid(schema.clone(), doc! {"s": "a"}));
        assert!(!valid(schema.clone(), doc! {"s": "abcd"}));
        assert!(!valid(schema.clone(), doc! {"s": "bc"}));
        assert!(valid(schema.clone(), doc! {"s": "aéé"}));
        assert!(!valid(schema.clone(), doc! {"n": 6}));
        assert!(!valid(schema.clone(), doc! {"n": 3}));
        assert!(!valid(schema.clone(), doc! {"n": 0}));
        assert!(valid(schema.clone(), doc! {"n": 4.0}));
        assert!(valid(
            doc! {"properties": {"n": {"maximum": 5}}},
            doc! {"n": 5}
        ));
        assert!(!valid(
            doc! {"properties": {"n": {"minimum": 5, "exclusiveMinimum": true}}},
            doc! {"n": 5}
        ));
    }

    #[test]
    fn array_keywords() {
        let schema = doc! {"properties": {"a": {"minItems": 1, "maxItems": 3, "uniqueItems": true, "items": {"bsonType": "int"}}}};
        assert!(valid(schema.clone(), doc! {"a": [1, 2]}));
        assert!(!valid(schema.clone(), doc! {"a": []}));
        assert!(!valid(schema.clone(), doc! {"a": [1, 2, 3, 4]}));
        assert!(!valid(schema.clone(), doc! {"a": [1, 1]}));
        assert!(!valid(schema.clone(), doc! {"a": [1, "x"]}));
        assert!(valid(schema.clone(), doc! {"a": "not an array"}));
        let unique = doc! {"properties": {"a": {"uniqueItems": true}}};
        assert!(!valid(
            unique.clone(),
            doc! {"a": [{"x": 1, "y": 2}, {"y": 2, "x": 1}]}
        ));
        assert!(!valid(unique, doc! {"a": [1, 1.0]}));
        let tuple = doc! {"properties": {"a": {"items": [{"bsonType": "string"}, {"bsonType": "int"}], "additionalItems": false}}};
        assert!(valid(tuple.clone(), doc! {"a": ["x", 1]}));
        assert!(valid(tuple.clone(), doc! {"a": ["x"]}));
        assert!(!valid(tuple.clone(), doc! {"a": [1, "x"]}));
        assert!(!valid(tuple, doc! {"a": ["x", 1, 2]}));
        let more =
            doc! {"properties": {"a": {"items": [{}], "additionalItems": {"bsonType": "bool"}}}};
        assert!(valid(more.clone(), doc! {"a": [1, true]}));
        assert!(!valid(more, doc! {"a": [1, 2]}));
        // additionalItems without positional items has no effect.
        assert!(valid(
            doc! {"properties": {"a": {"additionalItems": false}}},
            doc! {"a": [1]}
        ));
    }

    #[test]
    fn object_keywords() {
        let closed = doc! {"properties": {"_id": {}, "a": {}}, "additionalProperties": false};
        assert!(valid(closed.clone(), doc! {"_id": 1, "a": 1}));
        assert!(!valid(closed, doc! {"_id": 1, "b": 1}));
        let patterned = doc! {"patternProperties": {"^x": {"bsonType": "int"}}, "additionalProperties": {"bsonType": "string"}};
        assert!(valid(patterned.clone(), doc! {"x1": 1, "y": "s"}));
        assert!(!valid(patterned.clone(), doc! {"x1": "s"}));
        assert!(!valid(patterned, doc! {"y": 1}));
        let counted = doc! {"minProperties": 2, "maxProperties": 3};
        assert!(!valid(counted.clone(), doc! {"a": 1}));
        assert!(valid(counted.clone(), doc! {"a": 1, "b": 2}));
        assert!(!valid(counted, doc! {"a": 1, "b": 2, "c": 3, "d": 4}));
        let nested =
            doc! {"properties": {"o": {"required": ["x"], "properties": {"x": {"enum": [1, 2]}}}}};
        assert!(valid(nested.clone(), doc! {"o": {"x": 2.0}}));
        assert!(!valid(nested.clone(), doc! {"o": {"x": 3}}));
        assert!(!valid(nested.clone(), doc! {"o": {}}));
        assert!(valid(nested, doc! {"o": 5}));
        let deps = doc! {"dependencies": {"card": ["billing"], "p": {"required": ["q"]}}};
        assert!(valid(deps.clone(), doc! {"x": 1}));
        assert!(valid(deps.clone(), doc! {"card": 1, "billing": 2}));
        assert!(!valid(deps.clone(), doc! {"card": 1}));
        assert!(!valid(deps.clone(), doc! {"p": 1}));
        assert!(valid(deps, doc! {"p": 1, "q": 1}));
    }

    #[test]
    fn logical_keywords_and_enum() {
        let any =
            doc! {"properties": {"a": {"anyOf": [{"bsonType": "int"}, {"bsonType": "string"}]}}};
        assert!(valid(any.clone(), doc! {"a": "x"}));
        assert!(!valid(any, doc! {"a": 1.5}));
        let one = doc! {"properties": {"a": {"oneOf": [{"minimum": 0}, {"maximum": 10}]}}};
        assert!(valid(one.clone(), doc! {"a": 20}));
        assert!(!valid(one, doc! {"a": 5}));
        let all = doc! {"allOf": [{"required": ["a"]}, {"required": ["b"]}]};
        assert!(valid(all.clone(), doc! {"a": 1, "b": 1}));
        assert!(!valid(all, doc! {"a": 1}));
        assert!(valid(doc! {"not": {"required": ["a"]}}, doc! {"b": 1}));
        assert!(!valid(doc! {"not": {"required": ["a"]}}, doc! {"a": 1}));
        assert!(valid(
            doc! {"enum": [{"b": 1, "a": 1}, 5]},
            doc! {"a": 1, "b": 1}
        ));
        assert!(!valid(doc! {"enum": [{"a": 1}]}, doc! {"a": 1, "b": 1}));
        let described = doc! {"title": "t", "description": "d", "required": ["a"]};
        assert!(valid(described, doc! {"a": 1}));
    }

    #[test]
    fn combines_with_other_filters() {
        let m =
            Matcher::new(&doc! {"x": 1, "$or": [{"$jsonSchema": {"required": ["a"]}}, {"b": 1}]})
                .unwrap();
        assert!(m.matches(&doc! {"x": 1, "a": 0}));
        assert!(m.matches(&doc! {"x": 1, "b": 1}));
        assert!(!m.matches(&doc! {"x": 1}));
    }

    #[test]
    fn errors() {
        let cases: Vec<(Document, ErrorCode, &str)> = vec![
            (doc! {"format": "date"}, ErrorCode::FAILED_TO_PARSE, "$jsonSchema keyword 'format' is not currently supported"),
            (doc! {"$ref": "#/x"}, ErrorCode::FAILED_TO_PARSE, "$jsonSchema keyword '$ref' is not currently supported"),
            (doc! {"bogus": 1}, ErrorCode::FAILED_TO_PARSE, "Unknown $jsonSchema keyword: bogus"),
            (doc! {"type": "object", "bsonType": "object"}, ErrorCode::FAILED_TO_PARSE, "Cannot specify both $jsonSchema keywords 'type' and 'bsonType'"),
            (doc! {"type": "integer"}, ErrorCode::FAILED_TO_PARSE, "$jsonSchema type 'integer' is not currently supported."),
            (doc! {"type": "int"}, ErrorCode::BAD_VALUE, "Unknown type name alias: int"),
            (doc! {"bsonType": "foo"}, ErrorCode::BAD_VALUE, "Unknown type name alias: foo"),
            (doc! {"bsonType": 1}, ErrorCode::TYPE_MISMATCH, "$jsonSchema keyword 'bsonType' must be either a string or an array of strings"),
            (doc! {"type": ["string", "string"]}, ErrorCode::FAILED_TO_PARSE, "$jsonSchema keyword 'type' has duplicate value: string"),
            (doc! {"bsonType": []}, ErrorCode::FAILED_TO_PARSE, "$jsonSchema keyword 'bsonType' must name at least one type"),
            (doc! {"required": []}, ErrorCode::FAILED_TO_PARSE, "$jsonSchema keyword 'required' cannot be an empty array"),
            (doc! {"required": "a"}, ErrorCode::TYPE_MISMATCH, "$jsonSchema keyword 'required' must be an array, but found an element of type string"),
            (doc! {"required": ["a", "a"]}, ErrorCode::FAILED_TO_PARSE, "$jsonSchema keyword 'required' array cannot contain duplicate values"),
            (doc! {"minLength": -1}, ErrorCode::FAILED_TO_PARSE, "Expected a positive number in: minLength: -1"),
            (doc! {"maxItems": 1.5}, ErrorCode::FAILED_TO_PARSE, "Expected an integer: maxItems: 1.5"),
            (doc! {"minProperties": "1"}, ErrorCode::FAILED_TO_PARSE, "Expected a number in: minProperties: \"1\""),
            (doc! {"maximum": "1"}, ErrorCode::TYPE_MISMATCH, "$jsonSchema keyword 'maximum' must be a number"),
            (doc! {"exclusiveMinimum": true}, ErrorCode::FAILED_TO_PARSE, "$jsonSchema keyword 'minimum' must be a present if exclusiveMinimum is present"),
            (doc! {"maximum": 1, "exclusiveMaximum": 1}, ErrorCode::TYPE_MISMATCH, "$jsonSchema keyword 'exclusiveMaximum' must be a boolean"),
            (doc! {"multipleOf": 0}, ErrorCode::FAILED_TO_PARSE, "$jsonSchema keyword 'multipleOf' must have a positive value"),
            (doc! {"pattern": 1}, ErrorCode::TYPE_MISMATCH, "$jsonSchema keyword 'pattern' must be a string"),
            (doc! {"properties": {"a": 1}}, ErrorCode::TYPE_MISMATCH, "Nested schema for $jsonSchema property 'a' must be an object"),
            (doc! {"additionalProperties": 1}, ErrorCode::TYPE_MISMATCH, "$jsonSchema keyword 'additionalProperties' must be an object or a boolean"),
            (doc! {"items": 1}, ErrorCode::TYPE_MISMATCH, "$jsonSchema keyword 'items' must be an array or an object, not int"),
            (doc! {"uniqueItems": 1}, ErrorCode::TYPE_MISMATCH, "$jsonSchema keyword 'uniqueItems' must be a boolean"),
            (doc! {"anyOf": []}, ErrorCode::BAD_VALUE, "$jsonSchema keyword 'anyOf' must be a non-empty array"),
            (doc! {"allOf": {}}, ErrorCode::TYPE_MISMATCH, "$jsonSchema keyword 'allOf' must be an array"),
            (doc! {"not": []}, ErrorCode::TYPE_MISMATCH, "$jsonSchema keyword 'not' must be an object, but found an element of type array"),
            (doc! {"enum": []}, ErrorCode::FAILED_TO_PARSE, "$jsonSchema keyword 'enum' cannot be an empty array"),
            (doc! {"enum": [1, 1.0]}, ErrorCode::FAILED_TO_PARSE, "$jsonSchema keyword 'enum' array cannot contain duplicate values."),
            (doc! {"dependencies": {"a": []}}, ErrorCode::FAILED_TO_PARSE, "property 'a' in $jsonSchema keyword 'dependencies' cannot be an empty array"),
            (doc! {"dependencies": {"a": 1}}, ErrorCode::TYPE_MISMATCH, "property 'a' in $jsonSchema keyword 'dependencies' must be either an object or an array"),
            (doc! {"title": 1}, ErrorCode::TYPE_MISMATCH, "$jsonSchema keyword 'title' must be of type string"),
            (doc! {"properties": {"a": {"default": 1}}}, ErrorCode::FAILED_TO_PARSE, "$jsonSchema keyword 'default' is not currently supported"),
        ];
        for (schema, code, message) in cases {
            assert_eq!(
                code_of(schema.clone()),
                (code, message.to_string()),
                "{schema}"
            );
        }
        let e = Matcher::new(&doc! {"$jsonSchema": 1}).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (ErrorCode::TYPE_MISMATCH, "$jsonSchema must be an object")
        );
        assert!(Matcher::new(&doc! {"$jsonSchema": {"bsonType": Bson::Int32(3)}}).is_err());
    }
}
