//! `basalt import`: mongoimport's job and flags, loading NDJSON / Extended JSON, CSV or
//! TSV from a file or stdin into a running server.
//!
//! One reader cuts the input into chunks of whole lines (or CSV records) and numbers them;
//! `--numInsertionWorkers` threads each parse a chunk into BSON and send it as one
//! `insert_many` (or one `update` command of upserts) while the others parse, so parsing
//! and the server's work overlap. Every line that cannot be parsed or written is reported
//! with its line number, counted in the summary and makes the exit status non-zero:
//! nothing is lost silently. `--stopOnError` stops at the first one instead.

mod column_type;
mod delimited;
pub(crate) mod json_lines;
pub(crate) mod progress;
pub(crate) mod sink;
mod source;
mod wire_insert;

use crate::io_error;
use basalt_error::{Error, Result};
use bson::RawDocumentBuf;
use delimited::Columns;
use progress::Progress;
use sink::{Mode, Sink};
use source::{Chunk, Source};

#[cfg(test)]
pub(crate) use json_lines::parse as parse_json_line;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// Documents per batch unless `--batchSize` says otherwise.
const BATCH_SIZE_DEFAULT: usize = 100_000;

/// Input formats, as mongoimport names them.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputType {
    /// One JSON or Extended JSON document per line.
    Json,
    /// Comma-separated values.
    Csv,
    /// Tab-separated values.
    Tsv,
}

/// Loads documents into a collection (mongoimport's flags).
#[derive(clap::Args, Clone, Debug)]
pub struct ImportArgs {
    /// Connection string of the server to load into.
    #[arg(long, default_value = "mongodb://127.0.0.1:27017")]
    pub uri: String,
    /// Database to load into.
    #[arg(long, short = 'd', default_value = "test")]
    pub db: String,
    /// Collection to load into (default: the file name without its extension).
    #[arg(long, short = 'c')]
    pub collection: Option<String>,
    /// File to read; standard input when absent or "-".
    #[arg(long)]
    pub file: Option<PathBuf>,
    /// Input format.
    #[arg(long = "type", value_enum, default_value_t = InputType::Json)]
    pub input_type: InputType,
    /// CSV/TSV: the first line names the fields.
    #[arg(long)]
    pub headerline: bool,
    /// CSV/TSV: comma-separated field names (instead of --headerline).
    #[arg(long, short = 'f', value_delimiter = ',')]
    pub fields: Vec<String>,
    /// CSV/TSV: file with one field name per line (instead of --headerline).
    #[arg(long = "fieldFile")]
    pub field_file: Option<PathBuf>,
    /// CSV/TSV: field names carry a type, `name.int32()`, `when.date(2006-01-02)`, ...;
    /// without it numbers are inferred (int32, int64, double) and the rest are strings.
    #[arg(long = "columnsHaveTypes")]
    pub columns_have_types: bool,
    /// CSV/TSV: leave empty fields out instead of importing empty strings.
    #[arg(long = "ignoreBlanks")]
    pub ignore_blanks: bool,
    /// Drop the collection before loading.
    #[arg(long)]
    pub drop: bool,
    /// insert: new documents; upsert: replace the document with the same --upsertFields.
    #[arg(long, value_enum, default_value_t = Mode::Insert)]
    pub mode: Mode,
    /// Fields that identify a document for --mode upsert.
    #[arg(long = "upsertFields", value_delimiter = ',', default_value = "_id")]
    pub upsert_fields: Vec<String>,
    /// Stop at the first line that cannot be parsed or written.
    #[arg(long = "stopOnError")]
    pub stop_on_error: bool,
    /// Parallel batches in flight (default: twice the number of cores).
    #[arg(long = "numInsertionWorkers", short = 'j')]
    pub workers: Option<usize>,
    /// Documents per batch (MongoDB's maxWriteBatchSize); a batch also ends at 16 MB of
    /// input.
    #[arg(long = "batchSize", default_value_t = BATCH_SIZE_DEFAULT)]
    pub batch_size: usize,
    /// No progress bar and no summary.
    #[arg(long)]
    pub quiet: bool,
}

impl ImportArgs {
    /// Arguments for loading `file` into `db.collection` at `uri` with the defaults.
    pub fn new(uri: &str, db: &str, collection: &str, file: PathBuf) -> ImportArgs {
        ImportArgs {
            uri: uri.to_string(),
            db: db.to_string(),
            collection: Some(collection.to_string()),
            file: Some(file),
            input_type: InputType::Json,
            headerline: false,
            fields: Vec::new(),
            field_file: None,
            columns_have_types: false,
            ignore_blanks: false,
            drop: false,
            mode: Mode::Insert,
            upsert_fields: vec!["_id".to_string()],
            stop_on_error: false,
            workers: None,
            batch_size: BATCH_SIZE_DEFAULT,
            quiet: false,
        }
    }

    fn collection_name(&self) -> Result<String> {
        if let Some(name) = &self.collection {
            return Ok(name.clone());
        }
        self.file
            .as_ref()
            .filter(|f| f.as_os_str() != "-")
            .and_then(|f| f.file_stem())
            .map(|stem| stem.to_string_lossy().into_owned())
            .ok_or_else(|| Error::bad_value("no collection specified (--collection)"))
    }
}

/// A line that did not make it into the database, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Failure {
    pub line: u64,
    pub message: String,
}

/// What an import did.
#[derive(Debug)]
pub struct ImportSummary {
    pub collection: String,
    /// Documents inserted, or upserted and replaced with `--mode upsert`.
    pub docs: u64,
    pub bytes: u64,
    pub elapsed: Duration,
    /// Lines not imported, in line order.
    pub failures: Vec<Failure>,
    /// `--stopOnError` stopped the import at this line.
    pub stopped_at: Option<u64>,
}

impl ImportSummary {
    pub fn docs_per_second(&self) -> f64 {
        self.docs as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

impl std::fmt::Display for ImportSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        write!(
            f,
            "{} document(s) imported into {} in {:.2} s ({:.0} docs/s, {:.1} MB/s); {} failed",
            self.docs,
            self.collection,
            secs,
            self.docs_per_second(),
            self.bytes as f64 / 1e6 / secs,
            self.failures.len()
        )?;
        if let Some(line) = self.stopped_at {
            write!(f, "; stopped at line {line} (--stopOnError)")?;
        }
        Ok(())
    }
}

/// Runs an import to the end and says what it did; `Err` only when the import could not
/// run at all (no input, no server, bad flags).
pub fn run(args: &ImportArgs) -> Result<ImportSummary> {
    let collection = args.collection_name()?;
    let columns = match args.input_type {
        InputType::Json => {
            if !args.fields.is_empty() || args.field_file.is_some() || args.headerline {
                return Err(Error::bad_value(
                    "--fields, --fieldFile and --headerline are for CSV and TSV only",
                ));
            }
            None
        }
        InputType::Csv | InputType::Tsv => Some(declared_columns(args)?),
    };
    let batch_size = args.batch_size.max(1);
    let mut source = Source::open(args.file.as_deref(), args.input_type, batch_size)?;
    let columns = match columns {
        Some(Some(columns)) => Some(Arc::new(columns)),
        Some(None) => Some(Arc::new(
            source.header(args.columns_have_types, args.ignore_blanks)?,
        )),
        None => None,
    };
    let workers = args
        .workers
        .unwrap_or_else(|| 2 * std::thread::available_parallelism().map_or(2, |n| n.get()))
        .max(1);
    let sink = Sink::connect(
        &args.uri,
        &args.db,
        &collection,
        args.mode,
        &args.upsert_fields,
        args.stop_on_error,
        workers,
    )?;
    if args.drop {
        sink.drop_collection()?;
    }

    let progress = Progress::new(source.total_bytes(), args.quiet);
    let shared = Shared {
        sink,
        columns,
        progress,
        stop: AtomicBool::new(false),
        failures: Mutex::new(Vec::new()),
        stop_on_error: args.stop_on_error,
    };
    let started = Instant::now();
    let (chunk_tx, chunk_rx) = mpsc::sync_channel::<Chunk>(workers);
    let chunk_rx = Mutex::new(chunk_rx);
    let (docs, read_error) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| scope.spawn(|| shared.work(&chunk_rx)))
            .collect();
        let mut read_error = None;
        while !shared.stop.load(Ordering::Relaxed) {
            match source.next_chunk() {
                Ok(Some(chunk)) => {
                    if chunk_tx.send(chunk).is_err() {
                        break;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    read_error = Some(e);
                    break;
                }
            }
        }
        drop(chunk_tx);
        let docs: Result<u64> = handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::internal("an import worker panicked")))
            })
            .collect::<Result<Vec<u64>>>()
            .map(|counts| counts.iter().sum());
        (docs, read_error)
    });
    let elapsed = started.elapsed();
    shared.progress.finish();
    if let Some(e) = read_error {
        return Err(e);
    }
    let docs = docs?;
    let mut failures = shared.failures.into_inner().unwrap_or_default();
    failures.sort_by_key(|f| f.line);
    let stopped_at = if args.stop_on_error {
        failures.first().map(|f| f.line)
    } else {
        None
    };
    let summary = ImportSummary {
        collection,
        docs,
        bytes: source.bytes_read(),
        elapsed,
        failures,
        stopped_at,
    };
    if !args.quiet {
        eprintln!("{summary}");
    }
    Ok(summary)
}

/// The columns given by `--fields` or `--fieldFile`; `None` when they come from the header
/// line.
fn declared_columns(args: &ImportArgs) -> Result<Option<Columns>> {
    let names: Vec<String> = match (&args.field_file, args.fields.is_empty(), args.headerline) {
        (None, true, true) => return Ok(None),
        (None, false, false) => args.fields.clone(),
        (Some(path), true, false) => std::fs::read_to_string(path)
            .map_err(|e| io_error(format!("cannot read --fieldFile {}", path.display()), e))?
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect(),
        (None, true, false) => {
            return Err(Error::bad_value(
                "CSV and TSV need --headerline, --fields or --fieldFile",
            ))
        }
        _ => {
            return Err(Error::bad_value(
                "use only one of --headerline, --fields and --fieldFile",
            ))
        }
    };
    Columns::parse(&names, args.columns_have_types, args.ignore_blanks).map(Some)
}

/// What the workers share.
struct Shared {
    sink: Sink,
    columns: Option<Arc<Columns>>,
    progress: Progress,
    stop: AtomicBool,
    failures: Mutex<Vec<Failure>>,
    stop_on_error: bool,
}

impl Shared {
    /// One worker: parse a chunk, write it, repeat. Returns the documents it wrote.
    /// Writes chunks until the reader is done. After a failure to write, the worker
    /// stops the import but goes on taking chunks (without writing them), so the reader
    /// is never left waiting on a full channel; the failure is its outcome.
    fn work(&self, chunks: &Mutex<mpsc::Receiver<Chunk>>) -> Result<u64> {
        let mut written = 0;
        let mut failure = None;
        loop {
            let chunk = match chunks.lock() {
                Ok(rx) => rx.recv(),
                Err(_) => break,
            };
            let Ok(chunk) = chunk else {
                break;
            };
            if self.stop.load(Ordering::Relaxed) {
                continue;
            }
            let bytes = chunk.bytes();
            let parsed = self.parse(chunk);
            let mut failures = parsed.failures;
            if self.stop_on_error && !failures.is_empty() {
                // Only what comes before the first bad line is written.
                self.stop.store(true, Ordering::Relaxed);
            }
            let outcome = self.sink.write(parsed.docs);
            let outcome = match outcome {
                Ok(outcome) => outcome,
                Err(e) => {
                    self.stop.store(true, Ordering::Relaxed);
                    failure = Some(e);
                    continue;
                }
            };
            for (index, message) in outcome.failed {
                failures.push(Failure {
                    line: parsed.lines[index],
                    message,
                });
            }
            if self.stop_on_error && !failures.is_empty() {
                self.stop.store(true, Ordering::Relaxed);
            }
            written += outcome.written;
            self.report(failures);
            self.progress.advance(outcome.written, bytes);
        }
        failure.map_or(Ok(written), Err)
    }

    fn parse(&self, chunk: Chunk) -> Parsed {
        let mut parsed = Parsed::default();
        let mut record = |line: u64, result: Result<RawDocumentBuf>| match result {
            Ok(doc) => {
                parsed.docs.push(doc);
                parsed.lines.push(line);
                true
            }
            Err(e) => {
                parsed.failures.push(Failure {
                    line,
                    message: e.message,
                });
                !self.stop_on_error
            }
        };
        match chunk {
            Chunk::Lines {
                first_line,
                data,
                ends,
            } => {
                let starts = std::iter::once(0).chain(ends.iter().copied());
                for (offset, (start, end)) in starts.zip(ends.iter().copied()).enumerate() {
                    let line = &data[start..end];
                    if line.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    if !record(first_line + offset as u64, json_lines::parse(line)) {
                        break;
                    }
                }
            }
            Chunk::Records { rows, .. } => {
                let columns = self.columns.as_deref();
                for (line, row) in rows {
                    let result = match columns {
                        Some(columns) => columns.document(&row),
                        None => Err(Error::internal("CSV rows without columns")),
                    };
                    if !record(line, result) {
                        break;
                    }
                }
            }
        }
        parsed
    }

    fn report(&self, failures: Vec<Failure>) {
        if failures.is_empty() {
            return;
        }
        for failure in &failures {
            self.progress
                .println(&format!("line {}: {}", failure.line, failure.message));
        }
        if let Ok(mut all) = self.failures.lock() {
            all.extend(failures);
        }
    }
}

#[derive(Default)]
struct Parsed {
    docs: Vec<RawDocumentBuf>,
    /// The line number of each document in `docs`.
    lines: Vec<u64>,
    failures: Vec<Failure>,
}
