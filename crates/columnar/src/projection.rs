//! Which paths a column store index keeps: all of them, or as its
//! `columnstoreProjection` says (`{a: 1, "b.c": 1}` keeps those subtrees,
//! `{a: 0}` keeps everything else; `_id` is kept unless excluded by name).

use bson::{Bson, Document};

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ColumnProjection {
    /// `Some((include, paths))` for a projection; `None` keeps every path.
    paths: Option<(bool, Vec<String>)>,
    /// `_id`'s own setting, when the projection names it.
    id: Option<bool>,
}

fn is_true(value: &Bson) -> bool {
    match value {
        Bson::Boolean(b) => *b,
        Bson::Int32(n) => *n != 0,
        Bson::Int64(n) => *n != 0,
        Bson::Double(d) => *d != 0.0,
        _ => false,
    }
}

impl ColumnProjection {
    pub fn new(projection: Option<&Document>) -> ColumnProjection {
        let Some(projection) = projection else {
            return ColumnProjection::default();
        };
        let include = projection
            .iter()
            .any(|(path, v)| path != "_id" && is_true(v));
        let paths: Vec<String> = projection.keys().filter(|p| *p != "_id").cloned().collect();
        ColumnProjection {
            paths: (!paths.is_empty()).then_some((include, paths)),
            id: projection.get("_id").map(is_true),
        }
    }

    /// Whether the index keeps `path` (a leaf, or a document it descends into).
    pub fn keeps(&self, path: &str) -> bool {
        if path == "_id" || path.starts_with("_id.") {
            if let Some(id) = self.id {
                return id;
            }
            if self.paths.is_none() || self.paths.as_ref().is_some_and(|(include, _)| !include) {
                return true;
            }
        }
        let Some((include, paths)) = &self.paths else {
            return true;
        };
        let named = paths.iter().any(|p| {
            path == p || path.starts_with(p.as_str()) && path.as_bytes().get(p.len()) == Some(&b'.')
        });
        named == *include
    }

    /// Whether a path under `path` may be kept (so the shredder descends into it).
    pub fn may_keep_within(&self, path: &str) -> bool {
        match &self.paths {
            Some((true, paths)) if !self.keeps(path) => paths
                .iter()
                .any(|p| p.starts_with(path) && p.as_bytes().get(path.len()) == Some(&b'.')),
            _ => self.keeps(path),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn projections_keep_their_subtrees() {
        let all = ColumnProjection::new(None);
        assert!(all.keeps("a.b") && all.keeps("_id"));
        let some = ColumnProjection::new(Some(&doc! {"a": 1, "b.c": 1}));
        assert!(some.keeps("a") && some.keeps("a.x") && some.keeps("b.c.d"));
        assert!(!some.keeps("b") && !some.keeps("ab") && !some.keeps("_id"));
        assert!(some.may_keep_within("b") && !some.may_keep_within("c"));
        let but = ColumnProjection::new(Some(&doc! {"a": 0}));
        assert!(!but.keeps("a.b") && but.keeps("b") && but.keeps("_id"));
        let with_id = ColumnProjection::new(Some(&doc! {"a": 1, "_id": 1}));
        assert!(with_id.keeps("_id"));
        let without_id = ColumnProjection::new(Some(&doc! {"_id": 0}));
        assert!(!without_id.keeps("_id") && without_id.keeps("x"));
    }
}
