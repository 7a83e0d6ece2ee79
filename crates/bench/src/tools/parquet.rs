//! `basalt export --type parquet`: a collection as a Parquet file that DuckDB, Spark and
//! pandas read directly. The schema comes from a sample of the documents (the first
//! `--sampleSize`), as the MongoDB Spark connector infers one:
//!
//! - a field whose sampled values are all of one kind gets that kind's column — int32,
//!   int64 (int32s and int64s), double (any mix of numbers with a double), string,
//!   boolean, timestamp (UTC milliseconds), binary; ObjectIds and decimals become their
//!   text (hex, decimal digits, exactly);
//! - subdocuments become structs of their fields, arrays lists of their elements' kind;
//! - a field of several kinds (or of others: regexes, code, timestamps, min/max key)
//!   holds its values' relaxed Extended JSON text.
//!
//! A later value that does not fit its column (a string in a number column, a number
//! too large for int32) is written as null and counted; fields the sample never saw are
//! left out. Rows go in groups of [`ROWS_PER_GROUP`], snappy-compressed.

use crate::io_error;
use arrow_array::builder::{
    BinaryBuilder, BooleanBuilder, Float64Builder, Int32Builder, Int64Builder, StringBuilder,
    TimestampMillisecondBuilder,
};
use arrow_array::{ArrayRef, ListArray, StructArray};
use arrow_buffer::{NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, FieldRef, Fields, Schema, TimeUnit};
use basalt_error::Result;
use bson::raw::{RawBsonRef, RawDocument};
use bson::Bson;
use parquet::arrow::arrow_writer::{compute_leaves, ArrowColumnChunk, ArrowRowGroupWriterFactory};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

/// Rows per row group (and per Arrow batch).
pub const ROWS_PER_GROUP: usize = 65_536;

/// The kinds of values a sampled field held.
#[derive(Debug, Default)]
struct Seen {
    int32: bool,
    int64: bool,
    double: bool,
    decimal: bool,
    string: bool,
    boolean: bool,
    date: bool,
    object_id: bool,
    binary: bool,
    other: bool,
    document: Option<Box<Shape>>,
    array: Option<Box<Seen>>,
}

/// The fields of sampled documents, in the order they were first seen.
#[derive(Debug, Default)]
struct Shape {
    fields: Vec<(String, Seen)>,
    index: HashMap<String, usize>,
}

impl Shape {
    fn observe(&mut self, document: &RawDocument) {
        for (name, value) in document.iter().flatten() {
            let name = name.as_str();
            let at = match self.index.get(name) {
                Some(at) => *at,
                None => {
                    self.index.insert(name.to_string(), self.fields.len());
                    self.fields.push((name.to_string(), Seen::default()));
                    self.fields.len() - 1
                }
            };
            self.fields[at].1.observe(value);
        }
    }

    fn kinds(&self) -> Vec<(String, Kind)> {
        self.fields
            .iter()
            .map(|(name, seen)| (name.clone(), seen.kind()))
            .collect()
    }
}

impl Seen {
    fn observe(&mut self, value: RawBsonRef<'_>) {
        match value {
            RawBsonRef::Int32(_) => self.int32 = true,
            RawBsonRef::Int64(_) => self.int64 = true,
            RawBsonRef::Double(_) => self.double = true,
            RawBsonRef::Decimal128(_) => self.decimal = true,
            RawBsonRef::String(_) => self.string = true,
            RawBsonRef::Boolean(_) => self.boolean = true,
            RawBsonRef::DateTime(_) => self.date = true,
            RawBsonRef::ObjectId(_) => self.object_id = true,
            RawBsonRef::Binary(_) => self.binary = true,
            RawBsonRef::Null | RawBsonRef::Undefined => {}
            RawBsonRef::Document(document) => {
                self.document.get_or_insert_default().observe(document);
            }
            RawBsonRef::Array(array) => {
                let elements = self.array.get_or_insert_default();
                for element in array.into_iter().flatten() {
                    elements.observe(element);
                }
            }
            _ => self.other = true,
        }
    }

    fn kind(&self) -> Kind {
        let numeric = self.int32 || self.int64 || self.double;
        let kinds = [
            numeric,
            self.decimal,
            self.string,
            self.boolean,
            self.date,
            self.object_id,
            self.binary,
            self.document.is_some(),
            self.array.is_some(),
            self.other,
        ]
        .iter()
        .filter(|k| **k)
        .count();
        if kinds != 1 {
            // Several kinds, or only nulls: text says what each value was.
            return Kind::Json;
        }
        if numeric {
            return match (self.double, self.int64) {
                (true, _) => Kind::Float64,
                (false, true) => Kind::Int64,
                (false, false) => Kind::Int32,
            };
        }
        if let Some(shape) = &self.document {
            let fields = shape.kinds();
            // Parquet has no struct without fields.
            return match fields.is_empty() {
                true => Kind::Json,
                false => Kind::Struct(fields),
            };
        }
        if let Some(elements) = &self.array {
            let element = match elements.kind() {
                // Only empty arrays (or arrays of nulls) were seen.
                Kind::Json if !elements.any() => Kind::Json,
                kind => kind,
            };
            return Kind::List(Box::new(element));
        }
        match () {
            () if self.string => Kind::Utf8,
            () if self.boolean => Kind::Boolean,
            () if self.date => Kind::Timestamp,
            () if self.binary => Kind::Binary,
            () if self.object_id => Kind::ObjectId,
            () if self.decimal => Kind::Decimal,
            () => Kind::Json,
        }
    }

    fn any(&self) -> bool {
        self.int32
            || self.int64
            || self.double
            || self.decimal
            || self.string
            || self.boolean
            || self.date
            || self.object_id
            || self.binary
            || self.other
            || self.document.is_some()
            || self.array.is_some()
    }
}

/// A column's kind, from the sample.
#[derive(Clone, Debug, PartialEq)]
enum Kind {
    Int32,
    Int64,
    Float64,
    Utf8,
    Boolean,
    Timestamp,
    Binary,
    /// ObjectIds, as their hex text.
    ObjectId,
    /// Decimal128s, as their exact text.
    Decimal,
    /// Relaxed Extended JSON text of any value.
    Json,
    Struct(Vec<(String, Kind)>),
    List(Box<Kind>),
}

impl Kind {
    fn data_type(&self) -> DataType {
        match self {
            Kind::Int32 => DataType::Int32,
            Kind::Int64 => DataType::Int64,
            Kind::Float64 => DataType::Float64,
            Kind::Boolean => DataType::Boolean,
            Kind::Timestamp => DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            Kind::Binary => DataType::Binary,
            Kind::Utf8 | Kind::ObjectId | Kind::Decimal | Kind::Json => DataType::Utf8,
            Kind::Struct(fields) => DataType::Struct(fields_of(fields)),
            Kind::List(element) => DataType::List(item_field(element)),
        }
    }
}

fn fields_of(kinds: &[(String, Kind)]) -> Fields {
    kinds
        .iter()
        .map(|(name, kind)| Field::new(name, kind.data_type(), true))
        .collect()
}

fn item_field(element: &Kind) -> FieldRef {
    Arc::new(Field::new("item", element.data_type(), true))
}

/// A column being filled.
enum Column {
    Int32(Int32Builder),
    Int64(Int64Builder),
    Float64(Float64Builder),
    Boolean(BooleanBuilder),
    Timestamp(TimestampMillisecondBuilder),
    Binary(BinaryBuilder),
    /// Strings; `kind` says which values it takes as text.
    Text(StringBuilder, Kind),
    Struct(StructColumn),
    List {
        item: Box<Column>,
        field: FieldRef,
        offsets: Vec<i32>,
        valid: Vec<bool>,
    },
}

/// The fields of a document (the rows themselves, or a struct column).
struct StructColumn {
    names: Vec<String>,
    index: HashMap<String, usize>,
    children: Vec<Column>,
    fields: Fields,
    valid: Vec<bool>,
    /// Per child, whether the current document gave it a value yet.
    filled: Vec<bool>,
}

impl StructColumn {
    fn new(kinds: &[(String, Kind)]) -> StructColumn {
        StructColumn {
            names: kinds.iter().map(|(name, _)| name.clone()).collect(),
            index: kinds
                .iter()
                .enumerate()
                .map(|(i, (name, _))| (name.clone(), i))
                .collect(),
            children: kinds.iter().map(|(_, kind)| Column::new(kind)).collect(),
            fields: fields_of(kinds),
            valid: Vec::new(),
            filled: vec![false; kinds.len()],
        }
    }

    /// Appends a document's fields; returns the values that did not fit.
    fn append_document(&mut self, document: &RawDocument) -> u64 {
        let mut misfits = 0;
        self.filled.iter_mut().for_each(|f| *f = false);
        let mut position = 0;
        // The server validated the documents it stored: walked without validating again.
        basalt_value::raw::for_each_field(document, |key, value| {
            // Documents mostly share their field order: try the same position first.
            let at = match self.names.get(position) {
                Some(expected) if expected.as_bytes() == key => Some(position),
                _ => std::str::from_utf8(key)
                    .ok()
                    .and_then(|name| self.index.get(name).copied()),
            };
            position += 1;
            if let Some(at) = at {
                if !self.filled[at] {
                    self.filled[at] = true;
                    misfits += self.children[at].append(value);
                }
            }
            true
        });
        for (child, filled) in self.children.iter_mut().zip(&self.filled) {
            if !filled {
                child.append(None);
            }
        }
        self.valid.push(true);
        misfits
    }

    fn append_null(&mut self) {
        for child in &mut self.children {
            child.append(None);
        }
        self.valid.push(false);
    }

    fn finish_arrays(&mut self) -> Vec<ArrayRef> {
        self.children.iter_mut().map(Column::finish).collect()
    }
}

impl Column {
    fn new(kind: &Kind) -> Column {
        match kind {
            Kind::Int32 => Column::Int32(Int32Builder::new()),
            Kind::Int64 => Column::Int64(Int64Builder::new()),
            Kind::Float64 => Column::Float64(Float64Builder::new()),
            Kind::Boolean => Column::Boolean(BooleanBuilder::new()),
            Kind::Timestamp => {
                Column::Timestamp(TimestampMillisecondBuilder::new().with_timezone("UTC"))
            }
            Kind::Binary => Column::Binary(BinaryBuilder::new()),
            Kind::Utf8 | Kind::ObjectId | Kind::Decimal | Kind::Json => {
                Column::Text(StringBuilder::new(), kind.clone())
            }
            Kind::Struct(fields) => Column::Struct(StructColumn::new(fields)),
            Kind::List(element) => Column::List {
                item: Box::new(Column::new(element)),
                field: item_field(element),
                offsets: vec![0],
                valid: Vec::new(),
            },
        }
    }

    /// Appends a value (or a null); returns 1 when a value did not fit and became null.
    fn append(&mut self, value: Option<RawBsonRef<'_>>) -> u64 {
        let value = match value {
            Some(RawBsonRef::Null | RawBsonRef::Undefined) | None => None,
            some => some,
        };
        let fits = match (self, value) {
            (Column::Int32(b), Some(RawBsonRef::Int32(n))) => {
                b.append_value(n);
                true
            }
            (Column::Int64(b), Some(RawBsonRef::Int64(n))) => {
                b.append_value(n);
                true
            }
            (Column::Int64(b), Some(RawBsonRef::Int32(n))) => {
                b.append_value(i64::from(n));
                true
            }
            (Column::Float64(b), Some(RawBsonRef::Double(x))) => {
                b.append_value(x);
                true
            }
            (Column::Float64(b), Some(RawBsonRef::Int32(n))) => {
                b.append_value(f64::from(n));
                true
            }
            (Column::Float64(b), Some(RawBsonRef::Int64(n))) => {
                b.append_value(n as f64);
                true
            }
            (Column::Boolean(b), Some(RawBsonRef::Boolean(v))) => {
                b.append_value(v);
                true
            }
            (Column::Timestamp(b), Some(RawBsonRef::DateTime(d))) => {
                b.append_value(d.timestamp_millis());
                true
            }
            (Column::Binary(b), Some(RawBsonRef::Binary(bin))) => {
                b.append_value(bin.bytes);
                true
            }
            (Column::Text(b, kind), Some(value)) => match (kind, value) {
                (Kind::Utf8, RawBsonRef::String(s)) => {
                    b.append_value(s);
                    true
                }
                (Kind::ObjectId, RawBsonRef::ObjectId(id)) => {
                    b.append_value(id.to_hex());
                    true
                }
                (Kind::Decimal, RawBsonRef::Decimal128(d)) => {
                    b.append_value(d.to_string());
                    true
                }
                (Kind::Json, value) => {
                    b.append_value(json_text(value));
                    true
                }
                _ => {
                    b.append_null();
                    false
                }
            },
            (Column::Struct(s), Some(RawBsonRef::Document(document))) => {
                return s.append_document(document);
            }
            (
                Column::List {
                    item,
                    offsets,
                    valid,
                    ..
                },
                Some(RawBsonRef::Array(array)),
            ) => {
                let mut misfits = 0;
                let mut count = 0i32;
                for element in array.into_iter().flatten() {
                    misfits += item.append(Some(element));
                    count += 1;
                }
                let last = offsets.last().copied().unwrap_or(0);
                offsets.push(last + count);
                valid.push(true);
                return misfits;
            }
            (column, value) => {
                column.append_null();
                return u64::from(value.is_some());
            }
        };
        u64::from(!fits)
    }

    fn append_null(&mut self) {
        match self {
            Column::Int32(b) => b.append_null(),
            Column::Int64(b) => b.append_null(),
            Column::Float64(b) => b.append_null(),
            Column::Boolean(b) => b.append_null(),
            Column::Timestamp(b) => b.append_null(),
            Column::Binary(b) => b.append_null(),
            Column::Text(b, _) => b.append_null(),
            Column::Struct(s) => s.append_null(),
            Column::List { offsets, valid, .. } => {
                let last = offsets.last().copied().unwrap_or(0);
                offsets.push(last);
                valid.push(false);
            }
        }
    }

    /// The values appended since the last finish, as an Arrow array.
    fn finish(&mut self) -> ArrayRef {
        match self {
            Column::Int32(b) => Arc::new(b.finish()),
            Column::Int64(b) => Arc::new(b.finish()),
            Column::Float64(b) => Arc::new(b.finish()),
            Column::Boolean(b) => Arc::new(b.finish()),
            Column::Timestamp(b) => Arc::new(b.finish()),
            Column::Binary(b) => Arc::new(b.finish()),
            Column::Text(b, _) => Arc::new(b.finish()),
            Column::Struct(s) => {
                let arrays = s.finish_arrays();
                let valid = std::mem::take(&mut s.valid);
                Arc::new(StructArray::new(
                    s.fields.clone(),
                    arrays,
                    Some(NullBuffer::from(valid)),
                ))
            }
            Column::List {
                item,
                field,
                offsets,
                valid,
            } => {
                let values = item.finish();
                let offsets = std::mem::replace(offsets, vec![0]);
                let valid = std::mem::take(valid);
                Arc::new(ListArray::new(
                    field.clone(),
                    OffsetBuffer::new(ScalarBuffer::from(offsets)),
                    values,
                    Some(NullBuffer::from(valid)),
                ))
            }
        }
    }
}

/// A value's relaxed Extended JSON text.
fn json_text(value: RawBsonRef<'_>) -> String {
    match Bson::try_from(value) {
        Ok(bson) => bson.into_relaxed_extjson().to_string(),
        Err(_) => String::new(),
    }
}

/// Starts a Parquet file with the schema a sample of the documents gives: the file, to
/// which encoded row groups are appended, and the encoder that row-group builders share
/// (several can build and compress row groups at once, on as many threads).
pub fn create<W: Write + Send>(
    out: W,
    sample: &[bson::RawDocumentBuf],
) -> Result<(ParquetFile<W>, RowGroupEncoder)> {
    let mut shape = Shape::default();
    for document in sample {
        shape.observe(document);
    }
    let kinds = shape.kinds();
    let schema = Arc::new(Schema::new(fields_of(&kinds)));
    let properties = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_size(ROWS_PER_GROUP)
        .build();
    let (writer, factory) = ArrowWriter::try_new(out, schema.clone(), Some(properties))
        .and_then(ArrowWriter::into_serialized_writer)
        .map_err(|e| io_error("cannot start the Parquet file", e))?;
    Ok((
        ParquetFile { writer },
        RowGroupEncoder {
            kinds,
            schema,
            factory,
        },
    ))
}

/// A Parquet file being written, a row group at a time.
pub struct ParquetFile<W: Write + Send> {
    writer: SerializedFileWriter<W>,
}

/// A row group's columns, encoded and compressed, ready to be appended to the file.
pub struct EncodedRowGroup(Vec<ArrowColumnChunk>);

impl<W: Write + Send> ParquetFile<W> {
    pub fn append(&mut self, group: EncodedRowGroup) -> Result<()> {
        let failed = |e| io_error("cannot write the Parquet file", e);
        let mut row_group = self.writer.next_row_group().map_err(failed)?;
        for chunk in group.0 {
            chunk.append_to_row_group(&mut row_group).map_err(failed)?;
        }
        row_group.close().map_err(failed)?;
        Ok(())
    }

    pub fn finish(self) -> Result<W> {
        self.writer
            .into_inner()
            .map_err(|e| io_error("cannot finish the Parquet file", e))
    }
}

/// What every row-group builder of one file shares: the columns and how to encode them.
pub struct RowGroupEncoder {
    kinds: Vec<(String, Kind)>,
    schema: Arc<Schema>,
    factory: ArrowRowGroupWriterFactory,
}

impl RowGroupEncoder {
    pub fn builder(&self) -> RowGroupBuilder<'_> {
        RowGroupBuilder {
            rows: StructColumn::new(&self.kinds),
            pending: 0,
            encoder: self,
            misfits: 0,
        }
    }
}

/// Turns documents into row groups of [`ROWS_PER_GROUP`] rows: columns built, then
/// encoded and compressed (the costly part), on the thread that owns the builder.
pub struct RowGroupBuilder<'e> {
    rows: StructColumn,
    pending: usize,
    encoder: &'e RowGroupEncoder,
    /// Values that did not fit their column and were written as null.
    pub misfits: u64,
}

impl RowGroupBuilder<'_> {
    /// Adds a document; a row group when this one completes it.
    pub fn append(&mut self, document: &RawDocument) -> Result<Option<EncodedRowGroup>> {
        self.misfits += self.rows.append_document(document);
        self.pending += 1;
        if self.pending < ROWS_PER_GROUP {
            return Ok(None);
        }
        self.encode().map(Some)
    }

    /// The last, partial row group, if any rows are left.
    pub fn finish(&mut self) -> Result<Option<EncodedRowGroup>> {
        if self.pending == 0 {
            return Ok(None);
        }
        self.encode().map(Some)
    }

    fn encode(&mut self) -> Result<EncodedRowGroup> {
        self.pending = 0;
        self.rows.valid.clear();
        let failed = |e| io_error("cannot encode a row group", e);
        let columns = self.rows.finish_arrays();
        // The row group's position only matters to encryption, which is not used.
        let mut writers = self
            .encoder
            .factory
            .create_column_writers(0)
            .map_err(failed)?;
        let mut next_writer = writers.iter_mut();
        for (array, field) in columns.iter().zip(self.encoder.schema.fields()) {
            for leaf in compute_leaves(field, array).map_err(failed)? {
                let writer = next_writer.next().ok_or_else(|| {
                    basalt_error::Error::internal("a Parquet column without a writer")
                })?;
                writer.write(&leaf).map_err(failed)?;
            }
        }
        let chunks = writers
            .into_iter()
            .map(|writer| writer.close().map_err(failed))
            .collect::<Result<Vec<_>>>()?;
        Ok(EncodedRowGroup(chunks))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, RawDocumentBuf};

    fn raw(d: bson::Document) -> RawDocumentBuf {
        RawDocumentBuf::try_from(&d).unwrap()
    }

    #[test]
    fn the_sample_decides_each_columns_kind() {
        let sample = [
            raw(
                doc! {"i": 1, "l": 1, "x": 1, "s": "a", "m": 1, "d": {"a": 1}, "arr": [1, 2], "e": []},
            ),
            raw(
                doc! {"i": 2, "l": 5_i64, "x": 1.5, "s": "b", "m": "one", "d": {"b": "x"}, "arr": [3], "e": []},
            ),
        ];
        let mut shape = Shape::default();
        for d in &sample {
            shape.observe(d);
        }
        let kinds: HashMap<String, Kind> = shape.kinds().into_iter().collect();
        assert_eq!(kinds["i"], Kind::Int32);
        assert_eq!(kinds["l"], Kind::Int64);
        assert_eq!(kinds["x"], Kind::Float64);
        assert_eq!(kinds["s"], Kind::Utf8);
        assert_eq!(kinds["m"], Kind::Json);
        assert_eq!(
            kinds["d"],
            Kind::Struct(vec![("a".into(), Kind::Int32), ("b".into(), Kind::Utf8)])
        );
        assert_eq!(kinds["arr"], Kind::List(Box::new(Kind::Int32)));
        assert_eq!(kinds["e"], Kind::List(Box::new(Kind::Json)));
    }

    #[test]
    fn values_that_do_not_fit_become_nulls_and_are_counted() {
        let sample = [raw(doc! {"n": 1, "d": {"a": 1}})];
        let (mut file, encoder) = create(Vec::new(), &sample).unwrap();
        let mut builder = encoder.builder();
        for document in [
            doc! {"n": 2, "d": {"a": 2}},
            doc! {"n": "two", "d": 5},
            doc! {"d": {"a": 1_i64 << 40}},
        ] {
            assert!(builder.append(&raw(document)).unwrap().is_none());
        }
        assert_eq!(builder.misfits, 3);
        file.append(builder.finish().unwrap().unwrap()).unwrap();
        assert!(builder.finish().unwrap().is_none());
        let bytes = file.finish().unwrap();
        assert_eq!(&bytes[..4], b"PAR1");
    }
}
