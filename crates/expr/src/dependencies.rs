//! Which top-level fields of a document an expression reads, found from its BSON
//! specification (MongoDB's "dependency tracking").
//!
//! A scan uses the answer to decode only those fields of each stored document instead of
//! the whole document: an aggregation over one field of forty decodes one. The walk is
//! deliberately conservative: a field it names but the expression never reads costs only
//! a decode, while a field it missed would change results, so anything it cannot see
//! through (`$$ROOT`, `$getField`, ...) answers "the whole document".

use bson::Bson;

/// The top-level fields a part of a query reads; `whole` when it may read any field.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FieldSet {
    fields: Vec<String>,
    whole: bool,
}

impl FieldSet {
    pub fn new() -> FieldSet {
        FieldSet::default()
    }

    /// Adds the first component of a dotted `path`.
    pub fn add_path(&mut self, path: &str) {
        let first = path.split('.').next().unwrap_or(path);
        if !self.fields.iter().any(|f| f == first) {
            self.fields.push(first.to_string());
        }
    }

    /// Marks that the whole document is read.
    pub fn add_whole(&mut self) {
        self.whole = true;
    }

    pub fn is_whole(&self) -> bool {
        self.whole
    }

    /// The fields read, or `None` when that is the whole document.
    pub fn fields(&self) -> Option<&[String]> {
        (!self.whole).then_some(self.fields.as_slice())
    }

    /// The fields read, or `None` when that is the whole document.
    pub fn into_fields(self) -> Option<Vec<String>> {
        (!self.whole).then_some(self.fields)
    }

    /// Adds what the expression `spec` reads.
    pub fn add_expression(&mut self, spec: &Bson) {
        match spec {
            Bson::String(s) => {
                if let Some(variable) = s.strip_prefix("$$") {
                    let (name, rest) = match variable.split_once('.') {
                        Some((name, rest)) => (name, Some(rest)),
                        None => (variable, None),
                    };
                    if matches!(name, "ROOT" | "CURRENT") {
                        match rest {
                            Some(path) => self.add_path(path),
                            None => self.add_whole(),
                        }
                    }
                } else if let Some(path) = s.strip_prefix('$') {
                    self.add_path(path);
                }
            }
            Bson::Array(items) => items.iter().for_each(|item| self.add_expression(item)),
            Bson::Document(doc) => {
                for (key, value) in doc {
                    match key.as_str() {
                        "$literal" | "$const" => {}
                        // Their field name is a plain string read from `$$CURRENT`.
                        "$getField" | "$setField" | "$unsetField" => self.add_whole(),
                        // `$top`/`$bottom`(`N`): the sort keys are field paths.
                        "sortBy" => match value {
                            Bson::Document(keys) => keys.keys().for_each(|k| self.add_path(k)),
                            other => self.add_expression(other),
                        },
                        _ => self.add_expression(value),
                    }
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::bson;

    fn fields(spec: Bson) -> Option<Vec<String>> {
        let mut set = FieldSet::new();
        set.add_expression(&spec);
        set.into_fields()
    }

    #[test]
    fn field_paths_and_variables() {
        assert_eq!(
            fields(bson!({"$add": ["$a.b", "$c", {"$literal": "$d"}, "$$x.e", 1]})),
            Some(vec!["a".to_string(), "c".to_string()])
        );
        assert_eq!(
            fields(bson!({"$let": {"vars": {"r": "$$ROOT.f.g"}, "in": "$$r"}})),
            Some(vec!["f".to_string()])
        );
        assert_eq!(
            fields(bson!({"o": {"p": "$h"}, "q": ["$i"]})),
            Some(vec!["h".to_string(), "i".to_string()])
        );
        assert_eq!(fields(bson!("$$CURRENT")), None);
        assert_eq!(fields(bson!({"$mergeObjects": ["$$ROOT", {"a": 1}]})), None);
        assert_eq!(fields(bson!({"$getField": "a"})), None);
        assert_eq!(fields(bson!(5)), Some(vec![]));
    }
}
