//! `$unwind`: one output document per element of an array field.
//!
//! The path is followed through subdocuments only (an array met on the way is not
//! traversed). A value that is not an array counts as a one-element array; null,
//! missing and empty arrays produce nothing unless `preserveNullAndEmptyArrays` is set.

use crate::field_path::{get_mut, remove, set, split};
use crate::pipeline::DocumentStream;
use basalt_error::{Error, Result};
use basalt_expr::type_name;
use bson::{Bson, Document};

/// The documents one input document unwinds to.
type Unwound<'a> = Box<dyn Iterator<Item = Result<Document>> + Send + 'a>;

#[derive(Debug)]
pub(crate) struct Unwind {
    path: Vec<String>,
    index_field: Option<Vec<String>>,
    preserve_null_and_empty: bool,
}

impl Unwind {
    pub(crate) fn parse(spec: &Bson) -> Result<Unwind> {
        let (path, index_field, preserve) = match spec {
            Bson::String(path) => (path, None, false),
            Bson::Document(doc) => {
                let (mut path, mut index, mut preserve) = (None, None, false);
                for (key, value) in doc {
                    match key.as_str() {
                        "path" => match value {
                            Bson::String(p) => path = Some(p),
                            other => {
                                return Err(Error::location(
                                    28808,
                                    format!("Expected a string as the path for $unwind stage, got {}", type_name(Some(other))),
                                ))
                            }
                        },
                        "includeArrayIndex" => match value {
                            Bson::String(name) if !name.is_empty() => {
                                if name.starts_with('$') {
                                    return Err(Error::location(
                                        28822,
                                        format!("includeArrayIndex option to $unwind stage should not be prefixed with a '$': {name}"),
                                    ));
                                }
                                index = Some(name);
                            }
                            other => {
                                return Err(Error::location(
                                    28810,
                                    format!(
                                        "expected a non-empty string for the includeArrayIndex  option to $unwind stage, got {}",
                                        type_name(Some(other))
                                    ),
                                ))
                            }
                        },
                        "preserveNullAndEmptyArrays" => match value {
                            Bson::Boolean(b) => preserve = *b,
                            other => {
                                return Err(Error::location(
                                    28809,
                                    format!(
                                        "expected a boolean for the preserveNullAndEmptyArrays option to $unwind stage, got {}",
                                        type_name(Some(other))
                                    ),
                                ))
                            }
                        },
                        _ => {
                            return Err(Error::location(
                                28811,
                                format!("unrecognized option to $unwind stage: {key}"),
                            ))
                        }
                    }
                }
                let path = path.ok_or_else(|| Error::location(28812, "no path specified to $unwind stage"))?;
                (path, index, preserve)
            }
            other => {
                return Err(Error::location(
                    15981,
                    format!(
                        "expected either a string or an object as specification for $unwind stage, got {}",
                        type_name(Some(other))
                    ),
                ))
            }
        };
        let Some(stripped) = path.strip_prefix('$') else {
            return Err(Error::location(
                28818,
                format!("path option to $unwind stage should be prefixed with a '$': {path}"),
            ));
        };
        Ok(Unwind {
            path: split(stripped)?,
            index_field: index_field.map(|f| split(f)).transpose()?,
            preserve_null_and_empty: preserve,
        })
    }

    pub(crate) fn apply<'a>(&'a self, input: DocumentStream<'a>) -> DocumentStream<'a> {
        Box::new(input.flat_map(move |item| -> Unwound<'a> {
            match item {
                Ok(doc) => self.unwind(doc),
                Err(e) => Box::new(std::iter::once(Err(e))),
            }
        }))
    }

    /// The documents `doc` unwinds to, made as they are pulled. The array is taken out
    /// of the document first, so each output copies the rest of the document and one
    /// element, not the whole array: unwinding n elements costs time linear in n.
    fn unwind(&self, mut doc: Document) -> Unwound<'_> {
        match get_mut(&mut doc, &self.path) {
            Some(Bson::Array(items)) if !items.is_empty() => {
                // The field keeps its place (now an empty array) for `set` to refill.
                let items = std::mem::take(items);
                let last = items.len() - 1;
                let mut rest = Some(doc);
                Box::new(items.into_iter().enumerate().map(move |(i, item)| {
                    let mut out = if i == last {
                        rest.take().expect("the last element takes the document")
                    } else {
                        rest.clone().expect("taken only by the last element")
                    };
                    set(&mut out, &self.path, item);
                    self.set_index(&mut out, Bson::Int64(i as i64));
                    Ok(out)
                }))
            }
            Some(Bson::Array(_)) => {
                if !self.preserve_null_and_empty {
                    return Box::new(std::iter::empty());
                }
                remove(&mut doc, &self.path);
                self.set_index(&mut doc, Bson::Null);
                Box::new(std::iter::once(Ok(doc)))
            }
            None | Some(Bson::Null | Bson::Undefined) if !self.preserve_null_and_empty => {
                Box::new(std::iter::empty())
            }
            _ => {
                self.set_index(&mut doc, Bson::Null);
                Box::new(std::iter::once(Ok(doc)))
            }
        }
    }

    fn set_index(&self, doc: &mut Document, index: Bson) {
        if let Some(field) = &self.index_field {
            set(doc, field, index);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::pipeline::Pipeline;
    use bson::{bson, doc, Bson, Document};

    fn run(stage: Document, input: Vec<Document>) -> basalt_error::Result<Vec<Document>> {
        Pipeline::parse(&[stage], None)?.run(input.into_iter().map(Ok))
    }

    fn inventory() -> Vec<Document> {
        vec![
            doc! {"_id": 1, "sizes": ["S", "M"]},
            doc! {"_id": 2, "sizes": []},
            doc! {"_id": 3, "sizes": null},
            doc! {"_id": 4},
            doc! {"_id": 5, "sizes": "L"},
        ]
    }

    #[test]
    fn string_form() {
        assert_eq!(
            run(doc! {"$unwind": "$sizes"}, inventory()).unwrap(),
            vec![
                doc! {"_id": 1, "sizes": "S"},
                doc! {"_id": 1, "sizes": "M"},
                doc! {"_id": 5, "sizes": "L"},
            ]
        );
        let nested = vec![doc! {"a": {"b": [1, 2], "c": 0}}];
        assert_eq!(
            run(doc! {"$unwind": "$a.b"}, nested).unwrap(),
            vec![doc! {"a": {"b": 1, "c": 0}}, doc! {"a": {"b": 2, "c": 0}}]
        );
    }

    #[test]
    fn document_form_with_options() {
        let out = run(
            doc! {"$unwind": {"path": "$sizes", "includeArrayIndex": "idx", "preserveNullAndEmptyArrays": true}},
            inventory(),
        )
        .unwrap();
        assert_eq!(
            out,
            vec![
                doc! {"_id": 1, "sizes": "S", "idx": 0_i64},
                doc! {"_id": 1, "sizes": "M", "idx": 1_i64},
                doc! {"_id": 2, "idx": Bson::Null},
                doc! {"_id": 3, "sizes": null, "idx": Bson::Null},
                doc! {"_id": 4, "idx": Bson::Null},
                doc! {"_id": 5, "sizes": "L", "idx": Bson::Null},
            ]
        );
    }

    #[test]
    fn unwind_errors() {
        let code = |spec: Bson| run(doc! {"$unwind": spec}, vec![]).unwrap_err().code.0;
        assert_eq!(code(bson!("sizes")), 28818);
        assert_eq!(code(bson!(1)), 15981);
        assert_eq!(code(bson!({"includeArrayIndex": "i"})), 28812);
        assert_eq!(code(bson!({"path": 1})), 28808);
        assert_eq!(
            code(bson!({"path": "$a", "preserveNullAndEmptyArrays": 1})),
            28809
        );
        assert_eq!(code(bson!({"path": "$a", "includeArrayIndex": ""})), 28810);
        assert_eq!(
            code(bson!({"path": "$a", "includeArrayIndex": "$i"})),
            28822
        );
        assert_eq!(code(bson!({"path": "$a", "x": 1})), 28811);
        assert_eq!(code(bson!("$")), 40352);
    }
}
