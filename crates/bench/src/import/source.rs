//! Cuts the input (a file or stdin) into numbered chunks for the parsing workers.
//!
//! JSON input is cut at line ends without being parsed, so a single reader keeps up with
//! many parsers. CSV and TSV records may hold quoted line breaks, so the `csv` crate finds
//! their ends (cheaply: it does not type anything) and remembers each record's first line.

use super::delimited::Columns;
use super::InputType;
use crate::io_error;
use basalt_error::{Error, Result};
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// A chunk may grow to this many bytes before its line count is reached: batches of big
/// documents stay well under the 48 MB message limit, and each is large enough for the
/// server to write it as tables of its own (its bulk path, past 4 MB of documents).
const CHUNK_SIZE_BYTES_MAX: usize = 16 << 20;
const READ_BUFFER_SIZE_BYTES: usize = 1 << 20;

/// Whole lines or records of the input, with the line number each starts on (1-based).
pub(super) enum Chunk {
    /// `data` holds lines; line `first_line + i` is `data[ends[i - 1]..ends[i]]` (from 0
    /// for the first), its `\n` included. The reader finds the ends anyway, so the
    /// workers need not look for them again.
    Lines {
        first_line: u64,
        data: Vec<u8>,
        ends: Vec<usize>,
    },
    Records {
        rows: Vec<(u64, csv::ByteRecord)>,
        bytes: u64,
    },
}

impl Chunk {
    pub(super) fn bytes(&self) -> u64 {
        match self {
            Chunk::Lines { data, .. } => data.len() as u64,
            Chunk::Records { bytes, .. } => *bytes,
        }
    }
}

pub(super) struct Source {
    input: Input,
    batch_size: usize,
    total_bytes: Option<u64>,
}

enum Input {
    Lines {
        reader: Box<dyn BufRead + Send>,
        next_line: u64,
        bytes_read: u64,
    },
    Delimited {
        reader: Box<csv::Reader<Box<dyn Read + Send>>>,
    },
}

impl Source {
    /// Opens `file`, or stdin for `None` and `-`.
    pub(super) fn open(file: Option<&Path>, kind: InputType, batch_size: usize) -> Result<Source> {
        let (raw, total_bytes): (Box<dyn Read + Send>, Option<u64>) =
            match file.filter(|f| f.as_os_str() != "-") {
                Some(path) => {
                    let f = File::open(path)
                        .map_err(|e| io_error(format!("cannot open {}", path.display()), e))?;
                    let len = f.metadata().ok().map(|m| m.len());
                    (Box::new(f), len)
                }
                None => (Box::new(std::io::stdin()), None),
            };
        let input = match kind {
            InputType::Json => Input::Lines {
                reader: Box::new(BufReader::with_capacity(READ_BUFFER_SIZE_BYTES, raw)),
                next_line: 1,
                bytes_read: 0,
            },
            InputType::Csv | InputType::Tsv => {
                let mut builder = csv::ReaderBuilder::new();
                builder
                    .has_headers(false)
                    .flexible(true)
                    .buffer_capacity(READ_BUFFER_SIZE_BYTES);
                if kind == InputType::Tsv {
                    // mongoimport's TSV has no quoting: a quote is a character.
                    builder.delimiter(b'\t').quoting(false);
                }
                Input::Delimited {
                    reader: Box::new(builder.from_reader(raw)),
                }
            }
        };
        Ok(Source {
            input,
            batch_size,
            total_bytes,
        })
    }

    /// The input's size when known (a file), for the progress bar's ETA.
    pub(super) fn total_bytes(&self) -> Option<u64> {
        self.total_bytes
    }

    pub(super) fn bytes_read(&self) -> u64 {
        match &self.input {
            Input::Lines { bytes_read, .. } => *bytes_read,
            Input::Delimited { reader } => reader.position().byte(),
        }
    }

    /// Reads the header line of CSV/TSV input and makes columns of it.
    pub(super) fn header(&mut self, typed: bool, ignore_blanks: bool) -> Result<Columns> {
        let Input::Delimited { reader } = &mut self.input else {
            return Err(Error::bad_value("--headerline is for CSV and TSV only"));
        };
        let mut record = csv::StringRecord::new();
        let found = reader
            .read_record(&mut record)
            .map_err(|e| io_error("cannot read the header line", e))?;
        if !found {
            return Err(Error::bad_value("the input is empty: no header line"));
        }
        let names: Vec<String> = record.iter().map(|s| s.trim().to_string()).collect();
        Columns::parse(&names, typed, ignore_blanks)
    }

    /// The next chunk, `None` at the end of the input.
    pub(super) fn next_chunk(&mut self) -> Result<Option<Chunk>> {
        match &mut self.input {
            Input::Lines {
                reader,
                next_line,
                bytes_read,
            } => {
                let mut data = Vec::new();
                let mut ends = Vec::with_capacity(self.batch_size.min(1 << 16));
                while ends.len() < self.batch_size && data.len() < CHUNK_SIZE_BYTES_MAX {
                    let n = reader
                        .read_until(b'\n', &mut data)
                        .map_err(|e| io_error(format!("cannot read line {}", *next_line), e))?;
                    if n == 0 {
                        break;
                    }
                    ends.push(data.len());
                }
                if ends.is_empty() {
                    return Ok(None);
                }
                let first_line = *next_line;
                *next_line += ends.len() as u64;
                *bytes_read += data.len() as u64;
                Ok(Some(Chunk::Lines {
                    first_line,
                    data,
                    ends,
                }))
            }
            Input::Delimited { reader } => {
                let start = reader.position().byte();
                let mut rows = Vec::new();
                let mut bytes = 0usize;
                while rows.len() < self.batch_size && bytes < CHUNK_SIZE_BYTES_MAX {
                    let mut record = csv::ByteRecord::new();
                    let found = reader.read_byte_record(&mut record).map_err(|e| {
                        io_error(format!("cannot read line {}", reader.position().line()), e)
                    })?;
                    if !found {
                        break;
                    }
                    let line = record.position().map_or(0, |p| p.line());
                    bytes += record.as_slice().len();
                    rows.push((line, record));
                }
                if rows.is_empty() {
                    return Ok(None);
                }
                let bytes = reader.position().byte() - start;
                Ok(Some(Chunk::Records { rows, bytes }))
            }
        }
    }
}
