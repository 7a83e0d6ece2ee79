//! `$currentDate` and `$rename` (`$set`, `$unset` and `$setOnInsert` need no more than
//! the dispatch in `modifier.rs`).

use crate::display::element_to_string;
use basalt_error::{Error, Result};
use bson::{Bson, Document, Timestamp};

/// What `$currentDate` stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DateKind {
    Date,
    Timestamp,
}

impl DateKind {
    pub(super) fn now(self, now: bson::DateTime) -> Bson {
        match self {
            DateKind::Date => Bson::DateTime(now),
            DateKind::Timestamp => Bson::Timestamp(Timestamp {
                time: u32::try_from(now.timestamp_millis().div_euclid(1000)).unwrap_or(0),
                increment: 1,
            }),
        }
    }
}

pub(super) fn parse_current_date(path: &str, operand: &Bson) -> Result<DateKind> {
    match operand {
        Bson::Boolean(_) => Ok(DateKind::Date),
        Bson::Document(spec) => {
            if let Some(key) = spec.keys().find(|k| *k != "$type") {
                return Err(Error::bad_value(format!(
                    "Unrecognized $currentDate option: {key}"
                )));
            }
            match spec.get("$type") {
                Some(Bson::String(s)) if s == "date" => Ok(DateKind::Date),
                Some(Bson::String(s)) if s == "timestamp" => Ok(DateKind::Timestamp),
                _ => Err(Error::bad_value(
                    "The '$type' string field is required to be 'date' or 'timestamp': \
                     {$currentDate: {field : {$type: 'date'}}}",
                )),
            }
        }
        _ => Err(Error::bad_value(format!(
            "{} is not valid type for $currentDate. Please use a boolean ('true') or a \
             $type expression ({{$type: 'timestamp/date'}}).",
            element_to_string(path, operand)
        ))),
    }
}

/// Checks a `$rename` pair and returns the target path.
pub(super) fn parse_rename(source: &str, operand: &Bson) -> Result<String> {
    let Bson::String(target) = operand else {
        return Err(Error::bad_value(format!(
            "The 'to' field for $rename must be a string: {}",
            element_to_string(source, operand)
        )));
    };
    let shown = element_to_string(source, operand);
    let dynamic = |p: &str| p.split('.').any(|c| c.starts_with('$'));
    if dynamic(source) {
        return Err(Error::bad_value(format!(
            "The source field for $rename may not be dynamic: {source}"
        )));
    }
    if dynamic(target) {
        return Err(Error::bad_value(format!(
            "The destination field for $rename may not be dynamic: {target}"
        )));
    }
    if source == target {
        return Err(Error::bad_value(format!(
            "The source and target field for $rename must differ: {shown}"
        )));
    }
    let within = |inner: &str, outer: &str| {
        inner.starts_with(outer) && inner.as_bytes().get(outer.len()) == Some(&b'.')
    };
    if within(source, target) || within(target, source) {
        return Err(Error::bad_value(format!(
            "The source and target field for $rename must not be on the same path: {shown}"
        )));
    }
    Ok(target.clone())
}

/// The value a rename moves, read before the update changes anything. Neither end of a
/// rename may run through an array (the moved value itself may be one).
pub(super) fn read_rename_source(
    doc: &Document,
    source: &str,
    target: &str,
) -> Result<Option<Bson>> {
    walk_parents(doc, target, "destination")?;
    let Some(parent) = walk_parents(doc, source, "source")? else {
        return Ok(None);
    };
    let last = source.rsplit('.').next().unwrap_or(source);
    Ok(parent.get(last).cloned())
}

/// The document holding the last component of `path`, if every parent is a document;
/// an array on the way is an error.
fn walk_parents<'a>(doc: &'a Document, path: &str, role: &str) -> Result<Option<&'a Document>> {
    let mut current = doc;
    let components: Vec<&str> = path.split('.').collect();
    for component in &components[..components.len() - 1] {
        match current.get(*component) {
            Some(Bson::Document(d)) => current = d,
            Some(value @ Bson::Array(_)) => {
                return Err(Error::bad_value(format!(
                    "The {role} field cannot be an array element, '{path}' in doc with {} \
                     has an array field called '{component}'",
                    element_to_string(component, value)
                )))
            }
            _ => return Ok(None),
        }
    }
    Ok(Some(current))
}

#[cfg(test)]
mod tests {
    use crate::update::{run, run_with, UpdateContext};
    use basalt_error::ErrorCode;
    use bson::{doc, Bson};

    #[test]
    fn set_creates_paths() {
        let (d, _) = run(doc! {"a": {"x": 1}}, doc! {"$set": {"a.b.c": 1}}).unwrap();
        assert_eq!(d, doc! {"a": {"x": 1, "b": {"c": 1}}});
        let (d, _) = run(doc! {"a": [1]}, doc! {"$set": {"a.3": 4}}).unwrap();
        assert_eq!(d, doc! {"a": [1, null, null, 4]});
        let (d, _) = run(
            doc! {"a": [{"b": 1}]},
            doc! {"$set": {"a.0.b": 2, "a.1.c": 3}},
        )
        .unwrap();
        assert_eq!(d, doc! {"a": [{"b": 2}, {"c": 3}]});
        let e = run(doc! {"a": 5}, doc! {"$set": {"a.b": 1}}).unwrap_err();
        assert_eq!(e.code, ErrorCode::PATH_NOT_VIABLE);
        assert_eq!(e.message, "Cannot create field 'b' in element {a: 5}");
        let e = run(doc! {"a": [1]}, doc! {"$set": {"a.b": 1}}).unwrap_err();
        assert_eq!(e.message, "Cannot create field 'b' in element {a: [ 1 ]}");
    }

    #[test]
    fn unset() {
        let (d, changed) = run(
            doc! {"a": 1, "b": {"c": 1, "d": 2}},
            doc! {"$unset": {"a": "", "b.c": 1}},
        )
        .unwrap();
        assert!(changed);
        assert_eq!(d, doc! {"b": {"d": 2}});
        let (d, _) = run(doc! {"a": [1, 2]}, doc! {"$unset": {"a.0": 1}}).unwrap();
        assert_eq!(d, doc! {"a": [null, 2]});
        let (d, changed) = run(doc! {"a": 5}, doc! {"$unset": {"a.b": 1, "x.y": 1}}).unwrap();
        assert!(!changed);
        assert_eq!(d, doc! {"a": 5});
    }

    #[test]
    fn set_on_insert_only_on_upsert_insert() {
        let (d, changed) = run(doc! {"a": 1}, doc! {"$setOnInsert": {"b": 1}}).unwrap();
        assert!(!changed);
        assert_eq!(d, doc! {"a": 1});
        let ctx = UpdateContext {
            is_upsert_insert: true,
            ..UpdateContext::new()
        };
        let (d, _) =
            run_with(doc! {"a": 1}, doc! {"$setOnInsert": {"b.c": 1}}, None, &ctx).unwrap();
        assert_eq!(d, doc! {"a": 1, "b": {"c": 1}});
    }

    #[test]
    fn current_date() {
        let ctx = UpdateContext::new();
        let (d, _) = run_with(
            doc! {},
            doc! {"$currentDate": {"a": true, "b": {"$type": "timestamp"}, "c": {"$type": "date"}}},
            None,
            &ctx,
        )
        .unwrap();
        assert_eq!(d.get("a"), Some(&Bson::DateTime(ctx.now)));
        assert!(matches!(d.get("b"), Some(Bson::Timestamp(_))));
        assert_eq!(d.get("c"), Some(&Bson::DateTime(ctx.now)));
        let e = run(doc! {}, doc! {"$currentDate": {"a": 1}}).unwrap_err();
        assert_eq!(
            e.message,
            "a: 1 is not valid type for $currentDate. Please use a boolean ('true') or a $type \
             expression ({$type: 'timestamp/date'})."
        );
        assert!(run(doc! {}, doc! {"$currentDate": {"a": {"$type": "x"}}}).is_err());
    }

    #[test]
    fn rename() {
        let (d, _) = run(doc! {"a": 1, "b": 2}, doc! {"$rename": {"a": "c.d"}}).unwrap();
        assert_eq!(d, doc! {"b": 2, "c": {"d": 1}});
        let (d, changed) = run(doc! {"b": 2}, doc! {"$rename": {"a": "c"}}).unwrap();
        assert!(!changed);
        assert_eq!(d, doc! {"b": 2});
        let (d, _) = run(
            doc! {"a": {"x": [1]}, "c": 0},
            doc! {"$rename": {"a.x": "c"}},
        )
        .unwrap();
        assert_eq!(d, doc! {"a": {}, "c": [1]});
        let err = |u| run(doc! {"a": [{"b": 1}]}, u).unwrap_err().message;
        assert_eq!(
            err(doc! {"$rename": {"a": 1}}),
            "The 'to' field for $rename must be a string: a: 1"
        );
        assert_eq!(
            err(doc! {"$rename": {"a": "a"}}),
            "The source and target field for $rename must differ: a: \"a\""
        );
        assert_eq!(
            err(doc! {"$rename": {"a": "a.b"}}),
            "The source and target field for $rename must not be on the same path: a: \"a.b\""
        );
        assert!(err(doc! {"$rename": {"a.0.b": "c"}})
            .starts_with("The source field cannot be an array element"));
        assert_eq!(
            run(doc! {}, doc! {"$rename": {"a": "b"}, "$set": {"b": 1}})
                .unwrap_err()
                .code,
            ErrorCode::CONFLICTING_UPDATE_OPERATORS
        );
    }
}
