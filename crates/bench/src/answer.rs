//! Query answers in one comparable form, whoever computed them: the bench from its
//! generated data (the expected answer), Basalt (BSON documents) or a peer (SQL rows as
//! JSON). Numbers compare with a relative tolerance, because a parallel sum adds in a
//! different order than a sequential one.

use bson::{Bson, Document};
use std::fmt;

/// Rows of cells, or only how many rows came back (for queries returning many documents).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Answer {
    Rows(Vec<Vec<Cell>>),
    Count(u64),
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Cell {
    Int(i64),
    Float(f64),
    Str(String),
    Null,
}

const RELATIVE_TOLERANCE: f64 = 1e-9;

impl Cell {
    fn matches(&self, other: &Cell) -> bool {
        match (self.number(), other.number()) {
            (Some(a), Some(b)) => {
                a == b || (a - b).abs() <= RELATIVE_TOLERANCE * a.abs().max(b.abs())
            }
            _ => self == other,
        }
    }

    fn number(&self) -> Option<f64> {
        match self {
            Cell::Int(i) => Some(*i as f64),
            Cell::Float(x) => Some(*x),
            _ => None,
        }
    }
}

impl fmt::Display for Cell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cell::Int(i) => write!(f, "{i}"),
            Cell::Float(x) => write!(f, "{x}"),
            Cell::Str(s) => write!(f, "{s:?}"),
            Cell::Null => f.write_str("null"),
        }
    }
}

impl fmt::Display for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Answer::Count(n) => write!(f, "{n} rows"),
            Answer::Rows(rows) => {
                let shown: Vec<String> = rows
                    .iter()
                    .take(3)
                    .map(|row| {
                        let cells: Vec<String> = row.iter().map(Cell::to_string).collect();
                        format!("[{}]", cells.join(", "))
                    })
                    .collect();
                let more = if rows.len() > 3 { ", ..." } else { "" };
                write!(f, "{} rows: {}{more}", rows.len(), shown.join(", "))
            }
        }
    }
}

impl Answer {
    /// `Ok` when `got` is this (expected) answer, else what differs.
    pub(crate) fn check(&self, got: &Answer) -> Result<(), String> {
        let same = match (self, got) {
            (Answer::Count(a), Answer::Count(b)) => a == b,
            (Answer::Rows(a), Answer::Rows(b)) => {
                a.len() == b.len()
                    && a.iter().zip(b).all(|(x, y)| {
                        x.len() == y.len() && x.iter().zip(y).all(|(c, d)| c.matches(d))
                    })
            }
            _ => false,
        };
        if same {
            Ok(())
        } else {
            Err(format!("expected {self}, got {got}"))
        }
    }

    /// Reads documents a server returned in the shape `self` expects: each document a
    /// row of the values at the paths an inclusion `projection` names, in its order
    /// (the order of a document's fields is the server's), else of its leaf values in
    /// order (embedded documents flattened).
    pub(crate) fn read_documents(
        &self,
        docs: &[Document],
        projection: Option<&Document>,
    ) -> Answer {
        let included: Option<Vec<&str>> = projection.map(|projection| {
            projection
                .iter()
                .filter(|(_, v)| {
                    !matches!(v, Bson::Boolean(false)) && basalt_value::as_f64(v) != Some(0.0)
                })
                .map(|(path, _)| path.as_str())
                .collect()
        });
        match self {
            Answer::Count(_) => Answer::Count(docs.len() as u64),
            Answer::Rows(_) => Answer::Rows(
                docs.iter()
                    .map(|doc| match &included {
                        Some(paths) => paths.iter().map(|path| path_cell(doc, path)).collect(),
                        None => {
                            let mut row = Vec::new();
                            flatten(doc, &mut row);
                            row
                        }
                    })
                    .collect(),
            ),
        }
    }

    /// The answer from a peer's JSON: `{"count": n}` or an array of rows.
    pub(crate) fn from_json(value: &serde_json::Value) -> Answer {
        if let Some(n) = value.get("count").and_then(serde_json::Value::as_u64) {
            return Answer::Count(n);
        }
        let rows = value.as_array().map(Vec::as_slice).unwrap_or_default();
        Answer::Rows(
            rows.iter()
                .map(|row| {
                    row.as_array()
                        .map(Vec::as_slice)
                        .unwrap_or_default()
                        .iter()
                        .map(json_cell)
                        .collect()
                })
                .collect(),
        )
    }
}

/// The value at a dotted path (through embedded documents), null when missing.
fn path_cell(doc: &Document, path: &str) -> Cell {
    let mut at = doc;
    let mut parts = path.split('.').peekable();
    while let Some(part) = parts.next() {
        match (at.get(part), parts.peek()) {
            (Some(Bson::Document(inner)), Some(_)) => at = inner,
            (Some(value), None) => return bson_cell(value),
            _ => break,
        }
    }
    Cell::Null
}

fn flatten(doc: &Document, row: &mut Vec<Cell>) {
    for value in doc.values() {
        match value {
            Bson::Document(inner) => flatten(inner, row),
            other => row.push(bson_cell(other)),
        }
    }
}

fn bson_cell(value: &Bson) -> Cell {
    match value {
        Bson::Int32(i) => Cell::Int(i64::from(*i)),
        Bson::Int64(i) => Cell::Int(*i),
        Bson::Double(x) => Cell::Float(*x),
        Bson::String(s) => Cell::Str(s.clone()),
        Bson::DateTime(d) => Cell::Int(d.timestamp_millis()),
        Bson::Null => Cell::Null,
        other => Cell::Str(other.to_string()),
    }
}

fn json_cell(value: &serde_json::Value) -> Cell {
    match value {
        serde_json::Value::Number(n) => n
            .as_i64()
            .map(Cell::Int)
            .unwrap_or_else(|| Cell::Float(n.as_f64().unwrap_or(f64::NAN))),
        serde_json::Value::String(s) => Cell::Str(s.clone()),
        serde_json::Value::Null => Cell::Null,
        other => Cell::Str(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn projected_documents_read_in_the_projections_order() {
        let expected = Answer::Rows(vec![vec![Cell::Str("s".into()), Cell::Int(7), Cell::Null]]);
        let projection = doc! {"_id": 0, "st": 1, "a.v": 1, "gone": 1};
        let got = expected.read_documents(&[doc! {"a": {"v": 7}, "st": "s"}], Some(&projection));
        assert_eq!(expected.check(&got), Ok(()));
    }

    #[test]
    fn documents_flatten_to_rows_and_numbers_compare_loosely() {
        let expected = Answer::Rows(vec![vec![
            Cell::Str("a".into()),
            Cell::Int(3),
            Cell::Float(0.3),
        ]]);
        let got =
            expected.read_documents(&[doc! {"_id": "a", "n": 3.0, "x": {"y": 0.1 + 0.2}}], None);
        assert_eq!(expected.check(&got), Ok(()));
        let wrong = expected.read_documents(&[doc! {"_id": "a", "n": 4, "x": 0.3}], None);
        assert!(expected.check(&wrong).is_err());
    }

    #[test]
    fn peer_json_reads_as_rows_or_counts() {
        let rows = serde_json::json!([["a", 3, 0.5], [null, -1, 2]]);
        assert_eq!(
            Answer::from_json(&rows),
            Answer::Rows(vec![
                vec![Cell::Str("a".into()), Cell::Int(3), Cell::Float(0.5)],
                vec![Cell::Null, Cell::Int(-1), Cell::Int(2)],
            ])
        );
        assert_eq!(
            Answer::from_json(&serde_json::json!({"count": 7})),
            Answer::Count(7)
        );
        assert!(Answer::Count(7).check(&Answer::Count(8)).is_err());
    }
}
