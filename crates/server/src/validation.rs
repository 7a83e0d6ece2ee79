//! Schema validation: a collection's `validator` (a query filter, `$jsonSchema`
//! included), with its `validationLevel` and `validationAction`, checked on every
//! document an insert, update, upsert or findAndModify writes, as MongoDB checks them.
//!
//! - `validationLevel: strict` (the default) checks every write, `moderate` only the
//!   updates of documents that were valid before, `off` nothing.
//! - `validationAction: error` (the default) refuses a failing document with
//!   DocumentValidationFailure (121) and MongoDB's `errInfo` — the failing document's
//!   `_id` and `details` naming the rules it broke; `warn` logs it and writes it.
//! - `bypassDocumentValidation: true` on the command skips the check.
//!
//! The details are worked out only for a failing document: each rule of the validator
//! is matched on its own to find those that fail.

use basalt_catalog::CollectionMeta;
use basalt_error::{Error, ErrorCode, Result};
use basalt_query::Matcher;
use basalt_value::display::type_name;
use bson::{doc, Bson, Document};

/// A collection's validator, ready to check documents.
pub struct Validator {
    spec: Document,
    matcher: Matcher,
    /// `validationLevel: moderate`: updates of invalid documents are not checked.
    moderate: bool,
    /// `validationAction: warn`: failures are logged, not refused.
    warn: bool,
}

impl Validator {
    /// The validator of the collection `meta`; `None` when it has none, validation is
    /// off, or the command bypasses it.
    pub fn of(meta: &CollectionMeta, bypass: bool) -> Result<Option<Validator>> {
        let spec = match meta.options.get_document("validator") {
            Ok(spec) if !spec.is_empty() && !bypass => spec.clone(),
            _ => return Ok(None),
        };
        let level = meta.options.get_str("validationLevel").unwrap_or("strict");
        if level == "off" {
            return Ok(None);
        }
        Ok(Some(Validator {
            matcher: Matcher::new(&spec)?,
            spec,
            moderate: level == "moderate",
            warn: meta.options.get_str("validationAction").ok() == Some("warn"),
        }))
    }

    /// Checks a new document (an insert or an upsert's).
    pub fn check_new(&self, document: &Document) -> Result<()> {
        if self.matcher.try_matches(document)? {
            return Ok(());
        }
        self.failed(document)
    }

    /// Checks the new version of an updated document.
    pub fn check_update(&self, before: &Document, after: &Document) -> Result<()> {
        if self.matcher.try_matches(after)? {
            return Ok(());
        }
        if self.moderate && !self.matcher.try_matches(before)? {
            return Ok(());
        }
        self.failed(after)
    }

    fn failed(&self, document: &Document) -> Result<()> {
        let info = doc! {
            "failingDocumentId": document.get("_id").cloned().unwrap_or(Bson::Null),
            "details": details(&self.spec, document)?,
        };
        if self.warn {
            tracing::warn!(errInfo = %info, "Document would fail validation");
            return Ok(());
        }
        Err(Error::new(
            ErrorCode::DOCUMENT_VALIDATION_FAILURE,
            "Document failed validation",
        )
        .with_extra(doc! { "errInfo": info }))
    }
}

/// Checks the `validator` option of `create` or `collMod` on `db.collection`: a query
/// filter that may not use `$text`, `$where` or the `$near` family, on a collection of
/// a user's. `None` for null (no validator).
pub fn check_spec(
    db: &str,
    collection: &str,
    command: &str,
    spec: &Bson,
) -> Result<Option<Document>> {
    let spec = match spec {
        Bson::Null => return Ok(None),
        Bson::Document(spec) => spec,
        other => {
            return Err(Error::type_mismatch(format!(
                "BSON field '{command}.validator' is the wrong type '{}', expected type 'object'",
                type_name(other)
            )))
        }
    };
    if db == "local" || db == "admin" || db == "config" || collection.starts_with("system.") {
        return Err(Error::new(
            ErrorCode::INVALID_OPTIONS,
            format!("Document validators not allowed on system collection {db}.{collection}"),
        ));
    }
    check_operators(spec)?;
    Matcher::new(spec)?;
    Ok(Some(spec.clone()))
}

/// Refuses the operators a validator may not use, at any depth of its logical clauses.
fn check_operators(filter: &Document) -> Result<()> {
    for (name, value) in filter {
        match (name.as_str(), value) {
            ("$text" | "$where", _) => {
                return Err(Error::bad_value(format!(
                    "{name} is not allowed in collection validators"
                )))
            }
            ("$and" | "$or" | "$nor", Bson::Array(clauses)) => {
                for clause in clauses.iter().filter_map(Bson::as_document) {
                    check_operators(clause)?;
                }
            }
            (_, Bson::Document(operators)) => {
                if let Some(near) = operators
                    .keys()
                    .find(|k| ["$near", "$nearSphere", "$geoNear"].contains(&k.as_str()))
                {
                    return Err(Error::new(
                        ErrorCode(5626500),
                        format!("{near} is not allowed in collection validators"),
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Which rules of the validator `spec` the document breaks, in MongoDB's form: one
/// clause's details, or `$and` with the failing clauses by their index.
fn details(spec: &Document, document: &Document) -> Result<Document> {
    let clauses: Vec<(&String, &Bson)> = spec.iter().collect();
    if let [(name, value)] = clauses.as_slice() {
        return clause_details(name, value, document);
    }
    let mut failing = Vec::new();
    for (index, (name, value)) in clauses.iter().enumerate() {
        if !matches(doc! { name.as_str(): (*value).clone() }, document)? {
            failing.push(doc! {
                "index": index as i32,
                "details": clause_details(name, value, document)?,
            });
        }
    }
    Ok(doc! { "operatorName": "$and", "clausesNotSatisfied": failing })
}

fn matches(filter: Document, document: &Document) -> Result<bool> {
    Matcher::new(&filter)?.try_matches(document)
}

/// The details of one failing top-level clause of a validator.
fn clause_details(name: &str, value: &Bson, document: &Document) -> Result<Document> {
    match (name, value) {
        ("$jsonSchema", Bson::Document(schema)) => Ok(doc! {
            "operatorName": "$jsonSchema",
            "schemaRulesNotSatisfied": schema_rules(schema, &Bson::Document(document.clone()))?,
        }),
        ("$and" | "$or" | "$nor", Bson::Array(clauses)) => {
            let mut failing = Vec::new();
            for (index, clause) in clauses.iter().enumerate() {
                let Bson::Document(clause) = clause else {
                    continue;
                };
                let holds = matches(clause.clone(), document)?;
                if holds == (name == "$nor") {
                    failing.push(
                        doc! { "index": index as i32, "details": details(clause, document)? },
                    );
                }
            }
            Ok(doc! { "operatorName": name, "clausesNotSatisfied": failing })
        }
        ("$expr", _) => Ok(doc! {
            "operatorName": "$expr",
            "specifiedAs": { "$expr": value.clone() },
            "reason": "expression did not match",
            "expressionResult": false,
        }),
        (operator, _) if operator.starts_with('$') => Ok(doc! {
            "operatorName": operator,
            "specifiedAs": { operator: value.clone() },
            "reason": "expression did not match",
        }),
        (path, Bson::Document(operators)) if operators.keys().all(|k| k.starts_with('$')) => {
            let considered = basalt_value::FieldPath::parse(path).get(document).cloned();
            for (operator, operand) in operators {
                let single = doc! { path: { operator.as_str(): operand.clone() } };
                if !matches(single, document)? {
                    return Ok(field_failure(path, operator, operand, considered.as_ref()));
                }
            }
            Ok(field_failure(path, "$and", value, considered.as_ref()))
        }
        (path, _) => {
            let considered = basalt_value::FieldPath::parse(path).get(document).cloned();
            Ok(field_failure(path, "$eq", value, considered.as_ref()))
        }
    }
}

/// A failing condition on a field, as MongoDB describes it.
fn field_failure(path: &str, operator: &str, operand: &Bson, value: Option<&Bson>) -> Document {
    let mut failure = doc! {
        "operatorName": operator,
        "specifiedAs": { path: { operator: operand.clone() } },
    };
    match value {
        None if operator != "$exists" => {
            failure.insert("reason", "field was missing");
        }
        None => {
            failure.insert("reason", "path does not exist");
        }
        Some(value) => {
            let reason = match operator {
                "$type" => "type did not match",
                "$exists" => "path exists",
                "$regex" => "regular expression did not match",
                "$in" => "no matching value found in array",
                "$nin" => "matching value found in array",
                _ => "comparison failed",
            };
            failure.insert("reason", reason);
            failure.insert("consideredValue", value.clone());
            if operator == "$type" {
                failure.insert("consideredType", type_name(value));
            }
        }
    }
    failure
}

/// The rules of `schema` that `value` breaks, each keyword matched on its own.
fn schema_rules(schema: &Document, value: &Bson) -> Result<Vec<Bson>> {
    let mut rules = Vec::new();
    for (keyword, operand) in schema {
        if ["title", "description"].contains(&keyword.as_str()) {
            continue;
        }
        if schema_holds(&doc! { keyword.as_str(): operand.clone() }, value)? {
            continue;
        }
        let mut rule = doc! { "operatorName": keyword.as_str() };
        match (keyword.as_str(), operand, value) {
            ("required", Bson::Array(required), Bson::Document(document)) => {
                let missing: Vec<Bson> = required
                    .iter()
                    .filter(|field| field.as_str().is_some_and(|f| !document.contains_key(f)))
                    .cloned()
                    .collect();
                rule.insert("specifiedAs", doc! { "required": operand.clone() });
                rule.insert("missingProperties", missing);
            }
            ("properties", Bson::Document(properties), Bson::Document(document)) => {
                let mut failing = Vec::new();
                for (property, subschema) in properties {
                    let (Some(inner), Bson::Document(subschema)) =
                        (document.get(property), subschema)
                    else {
                        continue;
                    };
                    if !schema_holds(subschema, inner)? {
                        let mut entry = doc! { "propertyName": property.as_str() };
                        if let Ok(description) = subschema.get_str("description") {
                            entry.insert("description", description);
                        }
                        entry.insert("details", schema_rules(subschema, inner)?);
                        failing.push(Bson::Document(entry));
                    }
                }
                rule.insert("propertiesNotSatisfied", failing);
            }
            (keyword, _, _) => {
                rule.insert("specifiedAs", doc! { keyword: operand.clone() });
                let reason = match keyword {
                    "bsonType" | "type" => "type did not match",
                    "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => {
                        "comparison failed"
                    }
                    "enum" => "value was not found in enum",
                    "pattern" => "regular expression did not match",
                    "additionalProperties" => "found additional properties",
                    _ => "value did not satisfy the rule",
                };
                rule.insert("reason", reason);
                rule.insert("consideredValue", value.clone());
                if ["bsonType", "type"].contains(&keyword) {
                    rule.insert("consideredType", type_name(value));
                }
            }
        }
        rules.push(Bson::Document(rule));
    }
    Ok(rules)
}

/// Whether `value` is valid under `schema`, as `$jsonSchema` decides for a property.
fn schema_holds(schema: &Document, value: &Bson) -> Result<bool> {
    let filter = doc! { "$jsonSchema": { "properties": { "v": schema.clone() } } };
    matches(filter, &doc! { "v": value.clone() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(spec: Document, document: Document) -> Document {
        details(&spec, &document).unwrap()
    }

    #[test]
    fn a_failing_field_condition_names_its_operator_and_value() {
        let details = failure(
            doc! { "x": { "$type": "string" } },
            doc! { "_id": 1, "x": 1 },
        );
        assert_eq!(details.get_str("operatorName").ok(), Some("$type"));
        assert_eq!(details.get_str("reason").ok(), Some("type did not match"));
        assert_eq!(details.get("consideredValue"), Some(&Bson::Int32(1)));
        let missing = failure(doc! { "x": { "$gt": 1 } }, doc! { "_id": 1 });
        assert_eq!(missing.get_str("reason").ok(), Some("field was missing"));
    }

    #[test]
    fn several_clauses_report_the_failing_ones_by_index() {
        let details = failure(
            doc! { "a": { "$gt": 0 }, "b": { "$exists": true } },
            doc! { "_id": 1, "a": 5 },
        );
        assert_eq!(details.get_str("operatorName").ok(), Some("$and"));
        let failing = details.get_array("clausesNotSatisfied").unwrap();
        assert_eq!(failing.len(), 1);
        assert_eq!(
            failing[0].as_document().unwrap().get_i32("index").ok(),
            Some(1)
        );
    }

    #[test]
    fn json_schema_rules_name_missing_and_mistyped_properties() {
        let schema = doc! { "$jsonSchema": {
            "required": ["a", "b"],
            "properties": { "a": { "bsonType": "int", "description": "a number" } },
        } };
        let details = failure(schema, doc! { "_id": 1, "a": "text" });
        let rules = details.get_array("schemaRulesNotSatisfied").unwrap();
        let required = rules[0].as_document().unwrap();
        assert_eq!(required.get_str("operatorName").ok(), Some("required"));
        assert_eq!(
            required.get_array("missingProperties").unwrap(),
            &vec![Bson::from("b")]
        );
        let properties = rules[1].as_document().unwrap();
        let property = properties.get_array("propertiesNotSatisfied").unwrap()[0]
            .as_document()
            .unwrap();
        assert_eq!(property.get_str("propertyName").ok(), Some("a"));
        assert_eq!(property.get_str("description").ok(), Some("a number"));
        let rule = property.get_array("details").unwrap()[0]
            .as_document()
            .unwrap();
        assert_eq!(rule.get_str("operatorName").ok(), Some("bsonType"));
        assert_eq!(rule.get_str("consideredType").ok(), Some("string"));
    }
}
