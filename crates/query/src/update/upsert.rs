//! The document an upsert starts from when nothing matched: the query's equality
//! conditions (`{a: 1}`, `{a: {$eq: 1}}`, a one-element `$in`, and those inside `$and` or
//! a one-branch `$or`), with `_id` first. The update is then applied to it.

use basalt_error::{Error, ErrorCode, Result};
use bson::{Bson, Document};

/// The seed document of an upsert for `filter`.
pub fn upsert_seed(filter: &Document) -> Result<Document> {
    let mut equalities: Vec<(String, Bson)> = Vec::new();
    collect_equalities(filter, &mut equalities);
    for (i, (a, _)) in equalities.iter().enumerate() {
        for (b, _) in &equalities[i + 1..] {
            let nested = |inner: &str, outer: &str| {
                inner.starts_with(outer) && inner.as_bytes().get(outer.len()) == Some(&b'.')
            };
            if a == b {
                return Err(Error::new(
                    ErrorCode::NOT_SINGLE_VALUE_FIELD,
                    format!("cannot infer query fields to set, path '{a}' is matched twice"),
                ));
            }
            if nested(a, b) || nested(b, a) {
                let (outer, inner) = if nested(a, b) { (b, a) } else { (a, b) };
                return Err(Error::new(
                    ErrorCode::NOT_SINGLE_VALUE_FIELD,
                    format!(
                        "cannot infer query fields to set, both paths '{outer}' and '{inner}' \
                         are matched"
                    ),
                ));
            }
        }
    }
    // `_id` leads the new document, as in MongoDB.
    equalities.sort_by_key(|(path, _)| path.split('.').next() != Some("_id"));
    let mut seed = Document::new();
    for (path, value) in equalities {
        set_path(&mut seed, &path, value);
    }
    Ok(seed)
}

fn collect_equalities(filter: &Document, out: &mut Vec<(String, Bson)>) {
    for (key, value) in filter {
        match key.as_str() {
            "$and" => {
                for branch in branches(value) {
                    collect_equalities(branch, out);
                }
            }
            "$or" => {
                let all: Vec<&Document> = branches(value).collect();
                if let [only] = all.as_slice() {
                    collect_equalities(only, out);
                }
            }
            k if k.starts_with('$') => {}
            path => {
                if let Some(v) = equality_value(value) {
                    out.push((path.to_string(), v));
                }
            }
        }
    }
}

fn branches(value: &Bson) -> impl Iterator<Item = &Document> {
    let items = match value {
        Bson::Array(items) => items.as_slice(),
        _ => &[],
    };
    items.iter().filter_map(|item| match item {
        Bson::Document(d) => Some(d),
        _ => None,
    })
}

/// The value a condition pins the field to, if it is an equality.
fn equality_value(condition: &Bson) -> Option<Bson> {
    match condition {
        Bson::RegularExpression(_) => None,
        Bson::Document(_) if crate::operators::is_operator_document(condition, false) => {
            let Bson::Document(ops) = condition else {
                return None;
            };
            if let Some(v) = ops.get("$eq") {
                return Some(v.clone());
            }
            match ops.get("$in") {
                Some(Bson::Array(values)) if values.len() == 1 => match &values[0] {
                    Bson::RegularExpression(_) => None,
                    v => Some(v.clone()),
                },
                _ => None,
            }
        }
        other => Some(other.clone()),
    }
}

/// Sets `value` at a dotted path, creating documents on the way (all components name
/// fields: the seed is built from scratch, so there are no arrays to index).
fn set_path(doc: &mut Document, path: &str, value: Bson) {
    match path.split_once('.') {
        None => {
            doc.insert(path, value);
        }
        Some((first, rest)) => {
            if !matches!(doc.get(first), Some(Bson::Document(_))) {
                doc.insert(first, Document::new());
            }
            if let Some(Bson::Document(child)) = doc.get_mut(first) {
                set_path(child, rest, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, Regex};

    #[test]
    fn equalities_seed_the_document() {
        let seed = upsert_seed(&doc! {
            "a": 1,
            "b.c": "x",
            "_id": 7,
            "d": {"$gt": 1},
            "e": {"$eq": 2},
            "f": {"$in": [3]},
            "g": {"$in": [3, 4]},
            "$and": [{"h": 1}, {"i": {"$lt": 1}}],
            "$or": [{"j": 1}],
            "k": Regex { pattern: "x".to_string().try_into().unwrap(), options: "".to_string().try_into().unwrap() },
            "l": {"m": 1},
        })
        .unwrap();
        assert_eq!(
            seed,
            doc! {"_id": 7, "a": 1, "b": {"c": "x"}, "e": 2, "f": 3, "h": 1, "j": 1, "l": {"m": 1}}
        );
        assert_eq!(
            upsert_seed(&doc! {"$or": [{"a": 1}, {"b": 1}]}).unwrap(),
            doc! {}
        );
    }

    #[test]
    fn conflicting_equalities() {
        let e = upsert_seed(&doc! {"a": 1, "$and": [{"a": 2}]}).unwrap_err();
        assert_eq!(e.code, ErrorCode::NOT_SINGLE_VALUE_FIELD);
        assert_eq!(
            e.message,
            "cannot infer query fields to set, path 'a' is matched twice"
        );
        let e = upsert_seed(&doc! {"a": {"b": 1}, "a.c": 2}).unwrap_err();
        assert_eq!(
            e.message,
            "cannot infer query fields to set, both paths 'a' and 'a.c' are matched"
        );
    }
}
