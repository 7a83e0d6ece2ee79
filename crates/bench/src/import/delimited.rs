//! CSV and TSV records to documents, as mongoimport makes them: each column a field,
//! dotted names nested (`address.city` → `{address: {city: ...}}`), fields past the named
//! columns called `field<N>`, values typed by `--columnsHaveTypes` or inferred.

use super::column_type::ColumnType;
use basalt_error::{Error, Result};
use bson::{Bson, Document, RawDocumentBuf};

/// The named, typed columns of a CSV/TSV input.
#[derive(Debug)]
pub(super) struct Columns {
    columns: Vec<Column>,
    ignore_blanks: bool,
}

#[derive(Debug)]
struct Column {
    path: Vec<String>,
    column_type: ColumnType,
}

impl Columns {
    /// Columns from field names, which carry types with `typed` (`--columnsHaveTypes`).
    pub(super) fn parse(names: &[String], typed: bool, ignore_blanks: bool) -> Result<Columns> {
        let mut columns: Vec<Column> = Vec::with_capacity(names.len());
        for name in names {
            let (name, column_type) = if typed {
                ColumnType::parse_spec(name)?
            } else {
                (name.clone(), ColumnType::Auto)
            };
            let path: Vec<String> = name.split('.').map(str::to_string).collect();
            if path.iter().any(String::is_empty) {
                return Err(Error::bad_value(format!("bad field name '{name}'")));
            }
            if let Some(clash) = columns
                .iter()
                .find(|c| c.path.starts_with(&path) || path.starts_with(&c.path))
            {
                return Err(Error::bad_value(format!(
                    "fields '{}' and '{name}' cannot both be imported",
                    clash.path.join(".")
                )));
            }
            columns.push(Column { path, column_type });
        }
        Ok(Columns {
            columns,
            ignore_blanks,
        })
    }

    /// The document of one record.
    pub(super) fn document(&self, record: &csv::ByteRecord) -> Result<RawDocumentBuf> {
        let mut doc = Document::new();
        for (index, raw) in record.iter().enumerate() {
            let text = std::str::from_utf8(raw).map_err(|_| {
                Error::failed_to_parse(format!("field {} is not valid UTF-8", index + 1))
            })?;
            if text.is_empty() && self.ignore_blanks {
                continue;
            }
            match self.columns.get(index) {
                Some(column) => {
                    let value = column.column_type.convert(text).map_err(|e| {
                        Error::failed_to_parse(format!(
                            "field '{}': {}",
                            column.path.join("."),
                            e.message
                        ))
                    })?;
                    insert_path(&mut doc, &column.path, value);
                }
                None => {
                    doc.insert(format!("field{index}"), ColumnType::Auto.convert(text)?);
                }
            }
        }
        RawDocumentBuf::try_from(&doc).map_err(|e| Error::failed_to_parse(e.to_string()))
    }
}

/// Sets `path` in `doc`, creating the documents on the way. Column names were checked not
/// to be prefixes of each other, so every step on the way is a document.
fn insert_path(doc: &mut Document, path: &[String], value: Bson) {
    match path {
        [last] => {
            doc.insert(last.clone(), value);
        }
        [first, rest @ ..] => {
            let entry = doc
                .entry(first.clone())
                .or_insert_with(|| Bson::Document(Document::new()));
            if let Bson::Document(inner) = entry {
                insert_path(inner, rest, value);
            }
        }
        [] => debug_assert!(false, "empty column path"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn columns(names: &[&str], typed: bool) -> Columns {
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        Columns::parse(&names, typed, false).expect("columns")
    }

    fn row(columns: &Columns, fields: &[&str]) -> Result<Document> {
        let record = csv::ByteRecord::from(fields.to_vec());
        columns
            .document(&record)
            .map(|raw| Document::try_from(raw.as_ref()).expect("valid"))
    }

    #[test]
    fn untyped_columns_infer_numbers_and_nest_dotted_names() {
        let c = columns(&["name", "address.city", "address.zip", "n"], false);
        assert_eq!(
            row(&c, &["Ada", "London", "01234", "2.5", "extra"]).expect("row"),
            doc! {"name": "Ada", "address": {"city": "London", "zip": 1234}, "n": 2.5, "field4": "extra"}
        );
        assert_eq!(row(&c, &["Bob"]).expect("short row"), doc! {"name": "Bob"});
    }

    #[test]
    fn typed_columns_convert_and_report_the_field() {
        let c = columns(&["zip.string()", "age.int32()", "ok.boolean()"], true);
        assert_eq!(
            row(&c, &["01234", "42", "false"]).expect("row"),
            doc! {"zip": "01234", "age": 42, "ok": false}
        );
        let e = row(&c, &["x", "forty", "true"]).expect_err("bad int");
        assert!(e.message.contains("field 'age'"), "{}", e.message);
    }

    #[test]
    fn blanks_are_empty_strings_unless_ignored() {
        let names = vec!["a".to_string(), "b".to_string()];
        let keep = Columns::parse(&names, false, false).expect("columns");
        let ignore = Columns::parse(&names, false, true).expect("columns");
        assert_eq!(row(&keep, &["", "1"]).expect("row"), doc! {"a": "", "b": 1});
        assert_eq!(row(&ignore, &["", "1"]).expect("row"), doc! {"b": 1});
    }

    #[test]
    fn clashing_or_empty_names_are_refused() {
        for names in [
            vec!["a", "a.b"],
            vec!["a.b", "a"],
            vec!["a", "a"],
            vec!["a..b"],
        ] {
            let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
            assert!(Columns::parse(&names, false, false).is_err(), "{names:?}");
        }
    }
}
