//! Documents shredded into a row group: the documents whose record ids share their
//! high bits (`record id >> ROW_GROUP_SPAN_BITS`), one chunk per leaf path. A path's
//! values are found by walking embedded documents only; an array (or another value a
//! chunk does not hold) makes the path `Kind::Mixed` in that row group, and a path that
//! is a document in some row says so (`has_documents`), since a query reading it
//! whole cannot be answered from its children's chunks.

use crate::chunk::{ColumnChunk, Kind};
use crate::projection::ColumnProjection;
use basalt_error::{Error, Result};
use bson::{doc, Bson, Document, RawBsonRef, RawDocument};
use std::collections::BTreeMap;

/// Record ids per row group: 2^16.
pub const ROW_GROUP_SPAN_BITS: u32 = 16;

/// The chunk of the rows' record ids, stored beside the paths' chunks under a name no
/// document path has (a BSON field name never holds a NUL): an int chunk of each row's
/// record id less the row group's first (`record id & (2^16 - 1)`). Read only by a
/// query that fetches the documents of the rows it selects, so the header, which every
/// query reads, stays small.
pub const RECORD_IDS_PATH: &str = "\0recordIds";

/// What one path is in a row group.
#[derive(Clone, Debug, PartialEq)]
pub struct PathInfo {
    pub kind: Kind,
    /// Whether some row holds a document at the path.
    pub has_documents: bool,
    /// The least and the greatest value of a chunk-held kind (nulls apart), so a query
    /// can skip a row group where no value passes its filter without reading the chunk.
    /// `None` for other kinds and for strings past [`BOUND_BYTES_MAX`].
    pub bounds: Option<(Bson, Bson)>,
}

/// The longest string kept as a bound: a header is read by every query.
pub const BOUND_BYTES_MAX: usize = 64;

/// A row group's table of contents: how many rows (documents, in record id order) it
/// has, and its paths. (A query reads every row group's header, so the rows' record
/// ids are not in it but in their own chunk, [`RECORD_IDS_PATH`].)
#[derive(Clone, Debug, PartialEq)]
pub struct RowGroupHeader {
    /// Changes whenever the row group is rebuilt, so cached chunks of an older build
    /// are never taken for the current one.
    pub generation: i64,
    pub rows: usize,
    /// Every path some row reaches (leaves and documents), sorted.
    pub paths: BTreeMap<String, PathInfo>,
}

impl RowGroupHeader {
    /// Whether the chunks give every row's value at `path` (walking documents only):
    /// no row has an array or a value of another kind there or on the way, and no row
    /// has a document there (which a reader of the path would want whole).
    pub fn serves(&self, path: &str) -> bool {
        let leaf = self
            .paths
            .get(path)
            .is_none_or(|info| info.kind != Kind::Mixed && !info.has_documents);
        let on_the_way = path
            .match_indices('.')
            .map(|(end, _)| &path[..end])
            .all(|prefix| {
                self.paths
                    .get(prefix)
                    .is_none_or(|info| info.kind != Kind::Mixed)
            });
        leaf && on_the_way
    }

    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let paths: Vec<Bson> = self
            .paths
            .iter()
            .map(|(path, info)| {
                let mut entry = vec![
                    Bson::String(path.clone()),
                    Bson::Int32(info.kind.code()),
                    Bson::Boolean(info.has_documents),
                ];
                if let Some((least, greatest)) = &info.bounds {
                    entry.extend([least.clone(), greatest.clone()]);
                }
                Bson::Array(entry)
            })
            .collect();
        let header = doc! {
            "generation": self.generation,
            "rows": self.rows as i64,
            "paths": paths,
        };
        header.to_vec().map_err(|e| Error::internal(e.to_string()))
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<RowGroupHeader> {
        let corrupt = || Error::internal("a column store row group header is corrupt");
        let header = Document::from_reader(bytes).map_err(|_| corrupt())?;
        let rows = header.get_i64("rows").map_err(|_| corrupt())?;
        let mut paths = BTreeMap::new();
        for entry in header.get_array("paths").map_err(|_| corrupt())? {
            let Bson::Array(parts) = entry else {
                return Err(corrupt());
            };
            // A header written before row groups kept bounds has none.
            let (bounds, parts) = match parts.as_slice() {
                [parts @ .., least, greatest] if parts.len() == 3 => {
                    (Some((least.clone(), greatest.clone())), parts)
                }
                parts => (None, parts),
            };
            match parts {
                [Bson::String(path), Bson::Int32(kind), Bson::Boolean(has_documents)] => {
                    paths.insert(
                        path.clone(),
                        PathInfo {
                            kind: Kind::from_code(*kind)?,
                            has_documents: *has_documents,
                            bounds,
                        },
                    );
                }
                _ => return Err(corrupt()),
            }
        }
        Ok(RowGroupHeader {
            generation: header.get_i64("generation").map_err(|_| corrupt())?,
            rows: usize::try_from(rows).map_err(|_| corrupt())?,
            paths,
        })
    }
}

/// One path's values while a row group is being built.
#[derive(Default)]
struct PathValues {
    kind: Option<Kind>,
    mixed: bool,
    has_documents: bool,
    /// (row, value) for the rows holding a value.
    values: Vec<(usize, Bson)>,
}

/// Shreds the documents of one row group, in record id order.
pub struct RowGroupBuilder<'p> {
    projection: &'p ColumnProjection,
    /// Each row's record id: rows come in record id order.
    record_ids: Vec<u64>,
    paths: BTreeMap<String, PathValues>,
}

impl<'p> RowGroupBuilder<'p> {
    pub fn new(projection: &'p ColumnProjection) -> RowGroupBuilder<'p> {
        RowGroupBuilder {
            projection,
            record_ids: Vec::new(),
            paths: BTreeMap::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.record_ids.is_empty()
    }

    /// Adds the next record's document, shredded from its stored bytes (only the
    /// values a chunk holds are copied out); damaged bytes are an error.
    pub fn add(&mut self, record_id: u64, doc: &RawDocument) -> Result<()> {
        debug_assert!(self.record_ids.last().is_none_or(|last| *last < record_id));
        debug_assert!(self
            .record_ids
            .first()
            .is_none_or(|first| first >> ROW_GROUP_SPAN_BITS == record_id >> ROW_GROUP_SPAN_BITS));
        let mut path = String::new();
        if !self.shred(doc, &mut path, self.record_ids.len()) {
            return Err(Error::internal(format!("corrupt record {record_id}")));
        }
        self.record_ids.push(record_id);
        Ok(())
    }

    /// Files each value of `doc` (found under `path`, which it leaves as it found it)
    /// under its path, allocating a path's name only the first time it is seen. False
    /// when the bytes are damaged.
    fn shred(&mut self, doc: &RawDocument, path: &mut String, row: usize) -> bool {
        let prefix = path.len();
        let mut intact = true;
        let walked = basalt_value::raw::for_each_field(doc, |key, value| {
            let (Ok(key), Some(value)) = (std::str::from_utf8(key), value) else {
                intact = false;
                return false;
            };
            if prefix > 0 {
                path.push('.');
            }
            path.push_str(key);
            if self.projection.may_keep_within(path) {
                let keep = self.projection.keeps(path);
                match value {
                    RawBsonRef::Document(inner) => {
                        if keep {
                            self.values_at(path).has_documents = true;
                        }
                        intact = self.shred(inner, path, row);
                    }
                    value if keep => {
                        let values = self.values_at(path);
                        match Kind::cell_value(value) {
                            Some((Kind::Null, _)) => values.values.push((row, Bson::Null)),
                            Some((kind, value)) if values.kind.is_none_or(|k| k == kind) => {
                                values.kind = Some(kind);
                                values.values.push((row, value));
                            }
                            _ => values.mixed = true,
                        }
                    }
                    _ => {}
                }
            }
            path.truncate(prefix);
            intact
        });
        walked && intact
    }

    fn values_at(&mut self, path: &str) -> &mut PathValues {
        if !self.paths.contains_key(path) {
            self.paths.insert(path.to_string(), PathValues::default());
        }
        self.paths.get_mut(path).expect("inserted above")
    }

    /// The row group's header (with `generation`) and its chunks, the record ids'
    /// ([`RECORD_IDS_PATH`]) among them.
    pub fn finish(self, generation: i64) -> Result<(RowGroupHeader, Vec<(String, ColumnChunk)>)> {
        let rows = self.record_ids.len();
        let mut paths = BTreeMap::new();
        let offsets: Vec<Bson> = self
            .record_ids
            .iter()
            .map(|id| Bson::Int32((id & ((1 << ROW_GROUP_SPAN_BITS) - 1)) as i32))
            .collect();
        let cells: Vec<Option<&Bson>> = offsets.iter().map(Some).collect();
        let mut chunks = vec![(
            RECORD_IDS_PATH.to_string(),
            ColumnChunk::build(Kind::Int32, &cells)?,
        )];
        for (path, values) in self.paths {
            let kind = match (values.mixed, values.kind, values.values.is_empty()) {
                (true, _, _) => Kind::Mixed,
                (false, _, true) => {
                    // Only documents at this path: their children have the chunks.
                    paths.insert(
                        path,
                        PathInfo {
                            kind: Kind::Null,
                            has_documents: values.has_documents,
                            bounds: None,
                        },
                    );
                    continue;
                }
                (false, kind, false) => kind.unwrap_or(Kind::Null),
            };
            let mut bounds = None;
            if kind != Kind::Mixed {
                let mut cells: Vec<Option<&Bson>> = vec![None; rows];
                for (row, value) in &values.values {
                    cells[*row] = Some(value);
                }
                chunks.push((path.clone(), ColumnChunk::build(kind, &cells)?));
                bounds = bounds_of(values.values.iter().map(|(_, value)| value));
            }
            paths.insert(
                path,
                PathInfo {
                    kind,
                    has_documents: values.has_documents,
                    bounds,
                },
            );
        }
        let header = RowGroupHeader {
            generation,
            rows,
            paths,
        };
        Ok((header, chunks))
    }
}

/// The least and the greatest of one chunk's values (of one kind, so compared in
/// BSON's order), nulls apart; `None` without such values or when a string bound would
/// pass [`BOUND_BYTES_MAX`].
fn bounds_of<'v>(values: impl Iterator<Item = &'v Bson>) -> Option<(Bson, Bson)> {
    let mut bounds: Option<(&Bson, &Bson)> = None;
    for value in values.filter(|value| **value != Bson::Null) {
        bounds = Some(match bounds {
            None => (value, value),
            Some((least, greatest)) => (
                std::cmp::min_by(least, value, |a, b| basalt_value::compare_values(a, b)),
                std::cmp::max_by(greatest, value, |a, b| basalt_value::compare_values(a, b)),
            ),
        });
    }
    let (least, greatest) = bounds?;
    let short = |value: &Bson| value.as_str().is_none_or(|s| s.len() <= BOUND_BYTES_MAX);
    (short(least) && short(greatest)).then(|| (least.clone(), greatest.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunk::Cell;
    use bson::rawdoc;

    #[test]
    fn documents_shred_into_typed_paths() {
        let all = ColumnProjection::default();
        let mut builder = RowGroupBuilder::new(&all);
        let docs = [
            (
                65_537,
                rawdoc! {"a": 1, "t": {"v": 2.5, "q": "1"}, "s": [1]},
            ),
            (65_540, rawdoc! {"a": null, "t": {"v": 3.0}, "m": 1}),
            (65_541, rawdoc! {"t": 5, "m": "x"}),
        ];
        for (record_id, doc) in &docs {
            builder.add(*record_id, doc).unwrap();
        }
        let (header, chunks) = builder.finish(7).unwrap();
        let header = RowGroupHeader::from_bytes(&header.to_bytes().unwrap()).unwrap();
        assert_eq!(header.rows, 3);
        assert_eq!(header.generation, 7);
        let kind = |p: &str| header.paths.get(p).map(|i| (i.kind, i.has_documents));
        assert_eq!(kind("a"), Some((Kind::Int32, false)));
        assert_eq!(kind("t"), Some((Kind::Int32, true)));
        assert_eq!(kind("t.v"), Some((Kind::Double, false)));
        assert_eq!(kind("s"), Some((Kind::Mixed, false)));
        assert_eq!(kind("m"), Some((Kind::Mixed, false)));
        let bounds = |p: &str| header.paths[p].bounds.clone();
        assert_eq!(bounds("a"), Some((Bson::Int32(1), Bson::Int32(1))));
        assert_eq!(bounds("t.v"), Some((Bson::Double(2.5), Bson::Double(3.0))));
        assert_eq!(bounds("t.q"), Some((Bson::from("1"), Bson::from("1"))));
        assert_eq!((bounds("m"), bounds("s")), (None, None));
        let chunk = |p: &str| &chunks.iter().find(|(path, _)| path == p).unwrap().1;
        assert_eq!(chunk("a").cell(1), Cell::Null);
        assert_eq!(chunk("a").cell(2), Cell::Missing);
        assert_eq!(chunk("t.q").cell(0), Cell::Str("1"));
        assert_eq!(chunk("t").cell(2), Cell::Int32(5));
        assert!(chunks.iter().all(|(p, _)| p != "s" && p != "m"));
        let ids = chunk(RECORD_IDS_PATH);
        let ids: Vec<Cell> = (0..3).map(|row| ids.cell(row)).collect();
        assert_eq!(ids, [Cell::Int32(1), Cell::Int32(4), Cell::Int32(5)]);
        assert!(!header.paths.contains_key(RECORD_IDS_PATH));
        assert!(header.serves("a") && header.serves("t.v") && header.serves("nope"));
        assert!(!header.serves("t") && !header.serves("s") && !header.serves("s.x"));
    }

    #[test]
    fn bounds_skip_nulls_and_long_strings() {
        let all = ColumnProjection::default();
        let mut builder = RowGroupBuilder::new(&all);
        let long = "z".repeat(BOUND_BYTES_MAX + 1);
        let docs = [
            rawdoc! {"n": null, "s": "b", "l": "a"},
            rawdoc! {"n": -3_i64, "s": "a", "l": long.clone()},
            rawdoc! {"n": 12_i64, "s": "c"},
        ];
        for (row, doc) in docs.iter().enumerate() {
            builder.add(row as u64, doc).unwrap();
        }
        let (header, _) = builder.finish(1).unwrap();
        let bounds = |p: &str| header.paths[p].bounds.clone();
        assert_eq!(bounds("n"), Some((Bson::Int64(-3), Bson::Int64(12))));
        assert_eq!(bounds("s"), Some((Bson::from("a"), Bson::from("c"))));
        assert_eq!(bounds("l"), None);
        // A header written before bounds were kept still reads, without them.
        let old =
            doc! {"generation": 1_i64, "rows": 3_i64, "paths": [["n", Kind::Int64.code(), false]]};
        let old = RowGroupHeader::from_bytes(&old.to_vec().unwrap()).unwrap();
        assert_eq!(old.paths["n"].bounds, None);
    }

    #[test]
    fn damaged_bytes_are_an_error_not_a_panic() {
        let all = ColumnProjection::default();
        let mut builder = RowGroupBuilder::new(&all);
        let mut bytes = rawdoc! {"t": {"q": "abc"}}.into_bytes();
        // The string's length prefix (after the outer and inner headers and keys) made
        // to run past the document's end.
        let at = bytes.len() - 10;
        bytes[at] = 200;
        let doc = RawDocument::from_bytes(&bytes).unwrap();
        assert!(builder.add(1, doc).is_err());
    }
}
