//! Dotted paths that stages write into their output documents (`$unwind`'s path and
//! index field, the `as` of `$lookup` and `$graphLookup`, `depthField`): checked and split
//! once at parse time, then read, set and removed through subdocuments only, as MongoDB's
//! document model does for these stages (an array on the way is replaced, not traversed).

use basalt_error::Result;
use bson::{Bson, Document};

/// Splits a field path (without its `$`), checked as every field path is
/// ([`basalt_value::path::split_field_path`]).
pub(crate) fn split(path: &str) -> Result<Vec<String>> {
    Ok(basalt_value::path::split_field_path(path)?
        .into_iter()
        .map(str::to_string)
        .collect())
}

/// The value at `path`, through subdocuments only.
pub(crate) fn get<'d>(doc: &'d Document, path: &[String]) -> Option<&'d Bson> {
    let (last, parents) = path.split_last()?;
    let mut current = doc;
    for name in parents {
        current = current.get(name)?.as_document()?;
    }
    current.get(last)
}

/// The value at `path`, through subdocuments only, to change in place.
pub(crate) fn get_mut<'d>(doc: &'d mut Document, path: &[String]) -> Option<&'d mut Bson> {
    let (last, parents) = path.split_last()?;
    let mut current = doc;
    for name in parents {
        current = match current.get_mut(name)? {
            Bson::Document(d) => d,
            _ => return None,
        };
    }
    current.get_mut(last)
}

/// Sets `path`, replacing non-documents on the way with subdocuments.
pub(crate) fn set(doc: &mut Document, path: &[String], value: Bson) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut current = doc;
    for name in parents {
        if !matches!(current.get(name), Some(Bson::Document(_))) {
            current.insert(name.clone(), Bson::Document(Document::new()));
        }
        current = match current.get_mut(name) {
            Some(Bson::Document(d)) => d,
            _ => unreachable!("just made a document"),
        };
    }
    current.insert(last.clone(), value);
}

pub(crate) fn remove(doc: &mut Document, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut current = doc;
    for name in parents {
        current = match current.get_mut(name) {
            Some(Bson::Document(d)) => d,
            _ => return,
        };
    }
    current.remove(last);
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn set_get_remove_through_subdocuments() {
        let path = split("a.b").unwrap();
        let mut d = doc! {"a": [1, 2], "z": 0};
        assert_eq!(get(&d, &path), None);
        set(&mut d, &path, Bson::Int32(5));
        assert_eq!(d, doc! {"a": {"b": 5}, "z": 0});
        assert_eq!(get(&d, &path), Some(&Bson::Int32(5)));
        remove(&mut d, &path);
        assert_eq!(d, doc! {"a": {}, "z": 0});
        assert_eq!(split("").unwrap_err().code.0, 40352);
        assert_eq!(split("a..b").unwrap_err().code.0, 15998);
        assert_eq!(split("a.").unwrap_err().code.0, 40353);
        assert_eq!(split("a.$b").unwrap_err().code.0, 16410);
    }
}
