//! One path's values in one row group: a column chunk. In memory an Arrow array of the
//! one BSON type the chunk holds (its validity bitmap marks the rows with a value), and
//! apart the rows holding BSON null; a row with neither lacks the path. On disk the same
//! bitmaps and the values' little-endian bytes, which the storage engine compresses.
//!
//! A chunk holds one scalar type (int, long, double without NaN, string, bool, date)
//! besides nulls. A path with several types, arrays, NaN or other BSON types in a row
//! group is `Kind::Mixed` there: it has no chunk, and a query reading it reads that row
//! group's documents instead, so the answer never depends on how a value was stored.

use arrow_array::{Array, BooleanArray, Float64Array, Int32Array, Int64Array, StringArray};
use arrow_buffer::{BooleanBuffer, NullBuffer};
use basalt_error::{Error, Result};
use basalt_value::summation::Summation;
use bson::{Bson, RawBsonRef};
use std::sync::OnceLock;

/// What a path holds in a row group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Int32,
    Int64,
    Double,
    String,
    Bool,
    Date,
    /// Only nulls (and rows without the path).
    Null,
    /// More than one type, or a type a chunk does not hold: read the documents.
    Mixed,
}

impl Kind {
    pub fn code(self) -> i32 {
        match self {
            Kind::Int32 => 1,
            Kind::Int64 => 2,
            Kind::Double => 3,
            Kind::String => 4,
            Kind::Bool => 5,
            Kind::Date => 6,
            Kind::Null => 7,
            Kind::Mixed => 8,
        }
    }

    pub fn from_code(code: i32) -> Result<Kind> {
        Ok(match code {
            1 => Kind::Int32,
            2 => Kind::Int64,
            3 => Kind::Double,
            4 => Kind::String,
            5 => Kind::Bool,
            6 => Kind::Date,
            7 => Kind::Null,
            8 => Kind::Mixed,
            _ => return Err(corrupt("an unknown column kind")),
        })
    }

    /// A stored value a chunk can hold, with its kind; `None` for the others (arrays,
    /// documents apart, NaN, decimals, ObjectIds, ...).
    pub fn cell_value(value: RawBsonRef<'_>) -> Option<(Kind, Bson)> {
        Some(match value {
            RawBsonRef::Int32(n) => (Kind::Int32, Bson::Int32(n)),
            RawBsonRef::Int64(n) => (Kind::Int64, Bson::Int64(n)),
            RawBsonRef::Double(d) if !d.is_nan() => (Kind::Double, Bson::Double(d)),
            RawBsonRef::String(s) => (Kind::String, Bson::String(s.to_string())),
            RawBsonRef::Boolean(b) => (Kind::Bool, Bson::Boolean(b)),
            RawBsonRef::DateTime(d) => (Kind::Date, Bson::DateTime(d)),
            RawBsonRef::Null => (Kind::Null, Bson::Null),
            _ => return None,
        })
    }
}

fn corrupt(what: &str) -> Error {
    Error::internal(format!("a column store chunk is corrupt: {what}"))
}

/// One row's value in a chunk, borrowed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Cell<'a> {
    Missing,
    Null,
    Int32(i32),
    Int64(i64),
    Double(f64),
    Str(&'a str),
    Bool(bool),
    Date(i64),
}

impl Cell<'_> {
    /// The value as a document holds it; `None` when missing.
    pub fn to_bson(self) -> Option<Bson> {
        Some(match self {
            Cell::Missing => return None,
            Cell::Null => Bson::Null,
            Cell::Int32(n) => Bson::Int32(n),
            Cell::Int64(n) => Bson::Int64(n),
            Cell::Double(d) => Bson::Double(d),
            Cell::Str(s) => Bson::String(s.to_string()),
            Cell::Bool(b) => Bson::Boolean(b),
            Cell::Date(ms) => Bson::DateTime(bson::DateTime::from_millis(ms)),
        })
    }
}

/// A chunk's values as Arrow arrays.
#[derive(Debug)]
enum Values {
    Int32(Int32Array),
    Int64(Int64Array),
    Double(Float64Array),
    Str(StringArray),
    Bool(BooleanArray),
    Date(Int64Array),
    Null,
}

/// One path's values in one row group.
#[derive(Debug)]
pub struct ColumnChunk {
    rows: usize,
    values: Values,
    /// The rows holding BSON null.
    nulls: Option<BooleanBuffer>,
    /// Computed when first asked for, and kept with the chunk (in the cache).
    summary: OnceLock<Option<Summary>>,
}

/// What `$sum`, `$avg`, `$min` and `$max` make of all of a number chunk's values: an
/// unfiltered `$group` of one group takes these instead of reading the values again.
/// The sum is the one [`Summation::add_doubles`] (or, for ints,
/// [`Summation::add_integers`]) makes of the values in row order, and the least and
/// greatest are the first of equal values, so each is what a pass over the values
/// gives.
#[derive(Clone, Debug)]
pub struct Summary {
    /// Rows with a value (not null, not missing).
    pub count: u64,
    pub sum: Summation,
    pub least: Option<Bson>,
    pub greatest: Option<Bson>,
}

impl ColumnChunk {
    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn kind(&self) -> Kind {
        match self.values {
            Values::Int32(_) => Kind::Int32,
            Values::Int64(_) => Kind::Int64,
            Values::Double(_) => Kind::Double,
            Values::Str(_) => Kind::String,
            Values::Bool(_) => Kind::Bool,
            Values::Date(_) => Kind::Date,
            Values::Null => Kind::Null,
        }
    }

    /// Bytes the chunk holds in memory.
    pub fn memory_bytes(&self) -> usize {
        let values = match &self.values {
            Values::Int32(a) => a.get_array_memory_size(),
            Values::Int64(a) | Values::Date(a) => a.get_array_memory_size(),
            Values::Double(a) => a.get_array_memory_size(),
            Values::Str(a) => a.get_array_memory_size(),
            Values::Bool(a) => a.get_array_memory_size(),
            Values::Null => 0,
        };
        values + self.nulls.as_ref().map_or(0, |n| n.inner().len()) + 64
    }

    /// Row `row`'s value.
    pub fn cell(&self, row: usize) -> Cell<'_> {
        let valid = |array: &dyn Array| array.is_valid(row);
        match &self.values {
            Values::Int32(a) if valid(a) => Cell::Int32(a.value(row)),
            Values::Int64(a) if valid(a) => Cell::Int64(a.value(row)),
            Values::Double(a) if valid(a) => Cell::Double(a.value(row)),
            Values::Str(a) if valid(a) => Cell::Str(a.value(row)),
            Values::Bool(a) if valid(a) => Cell::Bool(a.value(row)),
            Values::Date(a) if valid(a) => Cell::Date(a.value(row)),
            _ if self.nulls.as_ref().is_some_and(|n| n.value(row)) => Cell::Null,
            _ => Cell::Missing,
        }
    }

    /// The values of a double chunk and which rows have one, for kernels that loop
    /// over them without matching on cells.
    pub fn doubles(&self) -> Option<(&[f64], Option<&NullBuffer>)> {
        match &self.values {
            Values::Double(a) => Some((a.values(), a.nulls())),
            _ => None,
        }
    }

    /// As [`ColumnChunk::doubles`], for an int chunk.
    pub fn int32s(&self) -> Option<(&[i32], Option<&NullBuffer>)> {
        match &self.values {
            Values::Int32(a) => Some((a.values(), a.nulls())),
            _ => None,
        }
    }

    /// The strings of a string chunk in which every row has one.
    pub fn dense_strings(&self) -> Option<&arrow_array::StringArray> {
        match &self.values {
            Values::Str(a) if a.null_count() == 0 && self.nulls.is_none() => Some(a),
            _ => None,
        }
    }

    /// The [`Summary`] of a double or int chunk; `None` for other kinds.
    pub fn summary(&self) -> Option<&Summary> {
        self.summary
            .get_or_init(|| {
                if let Some((values, validity)) = self.doubles() {
                    let present = present(values, validity);
                    let mut sum = Summation::default();
                    sum.add_doubles(present.clone());
                    return Some(summarize(present, sum, Bson::Double));
                }
                let (values, validity) = self.int32s()?;
                let present = present(values, validity);
                let mut sum = Summation::default();
                sum.add_integers(present.clone().map(i64::from), false);
                Some(summarize(present, sum, Bson::Int32))
            })
            .as_ref()
    }

    /// Whether any row holds null.
    pub fn has_nulls(&self) -> bool {
        self.nulls.is_some()
    }

    /// Builds a chunk from one value per row (`None` where the path is missing); the
    /// values must all be of `kind` or null.
    pub(crate) fn build(kind: Kind, cells: &[Option<&Bson>]) -> Result<ColumnChunk> {
        let rows = cells.len();
        let mut null_rows = None::<Vec<bool>>;
        for (row, cell) in cells.iter().enumerate() {
            if let Some(Bson::Null) = cell {
                null_rows.get_or_insert_with(|| vec![false; rows])[row] = true;
            }
        }
        let nulls = null_rows.map(BooleanBuffer::from);
        let mismatch = || Error::internal("a column chunk built from values of another kind");
        macro_rules! typed {
            ($array:ty, $pattern:path, $convert:expr) => {{
                let mut values = Vec::with_capacity(rows);
                for cell in cells {
                    values.push(match cell {
                        Some($pattern(v)) => Some($convert(v)),
                        None | Some(Bson::Null) => None,
                        Some(_) => return Err(mismatch()),
                    });
                }
                <$array>::from(values)
            }};
        }
        let values = match kind {
            Kind::Int32 => Values::Int32(typed!(Int32Array, Bson::Int32, |v: &i32| *v)),
            Kind::Int64 => Values::Int64(typed!(Int64Array, Bson::Int64, |v: &i64| *v)),
            Kind::Double => Values::Double(typed!(Float64Array, Bson::Double, |v: &f64| *v)),
            Kind::String => Values::Str(typed!(StringArray, Bson::String, |v: &String| v.clone())),
            Kind::Bool => Values::Bool(typed!(BooleanArray, Bson::Boolean, |v: &bool| *v)),
            Kind::Date => Values::Date(typed!(Int64Array, Bson::DateTime, |v: &bson::DateTime| v
                .timestamp_millis())),
            Kind::Null => Values::Null,
            Kind::Mixed => return Err(Error::internal("a mixed column has no chunk")),
        };
        Ok(ColumnChunk {
            rows,
            values,
            nulls,
            summary: OnceLock::new(),
        })
    }

    /// The chunk's bytes on disk: kind, rows, the bitmaps of rows with a value and of
    /// rows with null, then the values (dense, zero where a row has none; strings as
    /// offsets and bytes).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.push(self.kind().code() as u8);
        out.extend_from_slice(&(self.rows as u32).to_le_bytes());
        out.push(u8::from(self.nulls.is_some()));
        let valid = |nulls: Option<&NullBuffer>| match nulls {
            Some(n) => n.inner().clone(),
            None => BooleanBuffer::new_set(self.rows),
        };
        let validity = match &self.values {
            Values::Int32(a) => valid(a.nulls()),
            Values::Int64(a) | Values::Date(a) => valid(a.nulls()),
            Values::Double(a) => valid(a.nulls()),
            Values::Str(a) => valid(a.nulls()),
            Values::Bool(a) => valid(a.nulls()),
            Values::Null => BooleanBuffer::new_unset(self.rows),
        };
        put_bitmap(&mut out, &validity);
        if let Some(nulls) = &self.nulls {
            put_bitmap(&mut out, nulls);
        }
        match &self.values {
            Values::Int32(a) => a.values().iter().for_each(|v| out.extend(v.to_le_bytes())),
            Values::Int64(a) | Values::Date(a) => {
                a.values().iter().for_each(|v| out.extend(v.to_le_bytes()))
            }
            Values::Double(a) => a.values().iter().for_each(|v| out.extend(v.to_le_bytes())),
            Values::Str(a) => {
                a.offsets().iter().for_each(|o| out.extend(o.to_le_bytes()));
                out.extend_from_slice(a.values());
            }
            Values::Bool(a) => put_bitmap(&mut out, a.values()),
            Values::Null => {}
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<ColumnChunk> {
        let mut reader = Reader { bytes, at: 0 };
        let kind = Kind::from_code(i32::from(reader.take(1)?[0]))?;
        let rows = u32::from_le_bytes(reader.array()?) as usize;
        let has_nulls = reader.take(1)?[0] != 0;
        let validity = NullBuffer::new(reader.bitmap(rows)?);
        let nulls = has_nulls.then(|| reader.bitmap(rows)).transpose()?;
        let validity = (validity.null_count() > 0).then_some(validity);
        let values = match kind {
            Kind::Int32 => Values::Int32(Int32Array::new(reader.scalars(rows)?, validity)),
            Kind::Int64 => Values::Int64(Int64Array::new(reader.scalars(rows)?, validity)),
            Kind::Date => Values::Date(Int64Array::new(reader.scalars(rows)?, validity)),
            Kind::Double => Values::Double(Float64Array::new(reader.scalars(rows)?, validity)),
            Kind::String => {
                let offsets: Vec<i32> = reader.scalars(rows + 1)?.to_vec();
                let end = offsets.last().copied().unwrap_or(0);
                let data = reader.take(usize::try_from(end).map_err(|_| corrupt("offsets"))?)?;
                let offsets = arrow_buffer::OffsetBuffer::new(offsets.into());
                Values::Str(
                    StringArray::try_new(offsets, data.to_vec().into(), validity)
                        .map_err(|e| corrupt(&e.to_string()))?,
                )
            }
            Kind::Bool => Values::Bool(BooleanArray::new(reader.bitmap(rows)?, validity)),
            Kind::Null => Values::Null,
            Kind::Mixed => return Err(corrupt("a stored mixed chunk")),
        };
        Ok(ColumnChunk {
            rows,
            values,
            nulls,
            summary: OnceLock::new(),
        })
    }
}

/// The values of the rows that have one, in row order.
fn present<'a, T: Copy>(
    values: &'a [T],
    validity: Option<&'a NullBuffer>,
) -> impl Iterator<Item = T> + Clone + 'a {
    values
        .iter()
        .enumerate()
        .filter(move |(row, _)| validity.is_none_or(|v| v.is_valid(*row)))
        .map(|(_, value)| *value)
}

/// A [`Summary`] of `values` (never NaN) and their `sum`.
fn summarize<T: Copy + PartialOrd>(
    values: impl Iterator<Item = T>,
    sum: Summation,
    bson: fn(T) -> Bson,
) -> Summary {
    let mut count = 0;
    let (mut least, mut greatest) = (None::<T>, None::<T>);
    for value in values {
        count += 1;
        if least.is_none_or(|l| value < l) {
            least = Some(value);
        }
        if greatest.is_none_or(|g| value > g) {
            greatest = Some(value);
        }
    }
    Summary {
        count,
        sum,
        least: least.map(bson),
        greatest: greatest.map(bson),
    }
}

fn put_bitmap(out: &mut Vec<u8>, bits: &BooleanBuffer) {
    let mut byte = 0u8;
    for (i, bit) in bits.iter().enumerate() {
        byte |= u8::from(bit) << (i % 8);
        if i % 8 == 7 {
            out.push(byte);
            byte = 0;
        }
    }
    if !bits.len().is_multiple_of(8) {
        out.push(byte);
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .at
            .checked_add(n)
            .filter(|end| *end <= self.bytes.len());
        let end = end.ok_or_else(|| corrupt("truncated"))?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        self.take(N)?.try_into().map_err(|_| corrupt("truncated"))
    }

    fn bitmap(&mut self, rows: usize) -> Result<BooleanBuffer> {
        let bytes = self.take(rows.div_ceil(8))?;
        Ok(BooleanBuffer::from_iter(
            (0..rows).map(|i| bytes[i / 8] >> (i % 8) & 1 == 1),
        ))
    }

    fn scalars<T: arrow_buffer::ArrowNativeType + FromLe>(
        &mut self,
        n: usize,
    ) -> Result<arrow_buffer::ScalarBuffer<T>> {
        let bytes = self.take(n * std::mem::size_of::<T>())?;
        let values: Vec<T> = bytes
            .chunks_exact(std::mem::size_of::<T>())
            .map(T::from_le)
            .collect();
        Ok(values.into())
    }
}

/// A fixed-size number read from little-endian bytes.
trait FromLe: Sized {
    fn from_le(bytes: &[u8]) -> Self;
}

macro_rules! from_le {
    ($($t:ty),*) => {$(
        impl FromLe for $t {
            fn from_le(bytes: &[u8]) -> $t {
                let mut array = [0u8; std::mem::size_of::<$t>()];
                array.copy_from_slice(bytes);
                <$t>::from_le_bytes(array)
            }
        }
    )*};
}
from_le!(i32, i64, f64);

#[cfg(test)]
mod tests {
    use super::*;
    use bson::bson;

    fn round_trip(kind: Kind, values: &[Option<Bson>]) {
        let cells: Vec<Option<&Bson>> = values.iter().map(Option::as_ref).collect();
        let chunk = ColumnChunk::build(kind, &cells).unwrap();
        let decoded = ColumnChunk::decode(&chunk.encode()).unwrap();
        assert_eq!(decoded.kind(), kind);
        for (row, value) in values.iter().enumerate() {
            assert_eq!(decoded.cell(row).to_bson(), *value, "row {row}");
            assert_eq!(chunk.cell(row).to_bson(), *value, "row {row}");
        }
    }

    #[test]
    fn chunks_keep_values_nulls_and_missing_rows() {
        let date = bson::DateTime::from_millis(1_600_000_000_000);
        round_trip(
            Kind::Int32,
            &[Some(bson!(1)), None, Some(Bson::Null), Some(bson!(-7))],
        );
        round_trip(Kind::Int64, &[Some(bson!(1i64 << 40)), None]);
        round_trip(
            Kind::Double,
            &[Some(bson!(-0.0)), Some(bson!(2.5)), None, Some(Bson::Null)],
        );
        round_trip(
            Kind::String,
            &[Some(bson!("DI")), None, Some(bson!("")), Some(bson!("é"))],
        );
        round_trip(Kind::Bool, &[Some(bson!(true)), Some(bson!(false)), None]);
        round_trip(Kind::Date, &[Some(Bson::DateTime(date)), Some(Bson::Null)]);
        round_trip(Kind::Null, &[Some(Bson::Null), None]);
        round_trip(Kind::Int32, &[]);
    }

    #[test]
    fn summaries_are_what_a_pass_over_the_values_makes() {
        let values = [
            Some(bson!(0.0)),
            None,
            Some(Bson::Null),
            Some(bson!(-0.0)),
            Some(bson!(0.1)),
            Some(bson!(0.2)),
            Some(bson!(0.3)),
        ];
        let cells: Vec<Option<&Bson>> = values.iter().map(Option::as_ref).collect();
        let chunk = ColumnChunk::build(Kind::Double, &cells).unwrap();
        let summary = chunk.summary().unwrap();
        assert_eq!(summary.count, 5);
        assert_eq!(summary.sum.total(), bson!(0.6));
        // The first of equal values: 0.0, not -0.0.
        let least = summary.least.as_ref().and_then(Bson::as_f64).unwrap();
        assert!(least == 0.0 && least.is_sign_positive());
        assert_eq!(summary.greatest, Some(bson!(0.3)));
        let ints = [Some(bson!(i32::MAX)), Some(bson!(i32::MAX))];
        let cells: Vec<Option<&Bson>> = ints.iter().map(Option::as_ref).collect();
        let chunk = ColumnChunk::build(Kind::Int32, &cells).unwrap();
        let summary = chunk.summary().unwrap();
        assert_eq!(summary.sum.total(), Bson::Int64(2 * i64::from(i32::MAX)));
        let nulls = ColumnChunk::build(Kind::Int32, &[Some(&Bson::Null)]).unwrap();
        let summary = nulls.summary().unwrap();
        assert_eq!((summary.count, &summary.least), (0, &None));
        let strings = ColumnChunk::build(Kind::String, &[Some(&bson!("a"))]).unwrap();
        assert!(strings.summary().is_none());
    }

    #[test]
    fn corrupt_bytes_are_an_error() {
        let cells = [Some(&Bson::Int32(1)); 10];
        let bytes = ColumnChunk::build(Kind::Int32, &cells).unwrap().encode();
        for cut in 0..bytes.len() {
            assert!(ColumnChunk::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        assert!(ColumnChunk::decode(&[99, 0, 0, 0, 0, 0]).is_err());
    }
}
