//! `basalt export`: mongoexport's job and formats — one relaxed (or canonical) Extended
//! JSON document per line, a JSON array (`--jsonArray`), or CSV of the `--fields` asked
//! for (dotted paths reach into subdocuments; a subdocument or array is written as
//! JSON, an ObjectId as `ObjectId(hex)`, a date as ISO 8601), with `--query`, `--sort`,
//! `--skip` and `--limit`.

use super::namespaces::usage;
use super::parquet::EncodedRowGroup;
use super::{json_document, server_error, Connection};
use crate::io_error;
use basalt_error::Result;
use bson::{Bson, Document, RawDocumentBuf};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::time::Instant;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportType {
    Json,
    Csv,
    /// Typed columns from a sample of the documents (`parquet.rs`); needs --out.
    Parquet,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsonFormat {
    Relaxed,
    Canonical,
}

/// Writes a collection's documents to a file (mongoexport's flags).
#[derive(clap::Args, Clone, Debug)]
pub struct ExportArgs {
    /// Connection string of the server.
    #[arg(long, default_value = "mongodb://127.0.0.1:27017")]
    pub uri: String,
    #[arg(long, short = 'd', default_value = "test")]
    pub db: String,
    #[arg(long, short = 'c')]
    pub collection: String,
    /// Output format.
    #[arg(long = "type", value_enum, default_value_t = ExportType::Json)]
    pub export_type: ExportType,
    /// Comma-separated fields (dotted paths); CSV needs them.
    #[arg(long, short = 'f', value_delimiter = ',')]
    pub fields: Vec<String>,
    /// Only the documents matching this filter (Extended JSON).
    #[arg(long, short = 'q')]
    pub query: Option<String>,
    /// Sort order (Extended JSON, `{"a": 1}`).
    #[arg(long)]
    pub sort: Option<String>,
    #[arg(long)]
    pub skip: Option<u64>,
    #[arg(long)]
    pub limit: Option<i64>,
    /// JSON: one array instead of a document per line.
    #[arg(long = "jsonArray")]
    pub json_array: bool,
    /// JSON: relaxed or canonical Extended JSON.
    #[arg(long = "jsonFormat", value_enum, default_value_t = JsonFormat::Relaxed)]
    pub json_format: JsonFormat,
    /// CSV: no header line.
    #[arg(long = "noHeaderLine")]
    pub no_header_line: bool,
    /// File to write; standard output without one.
    #[arg(long, short = 'o')]
    pub out: Option<PathBuf>,
    /// Parquet: documents sampled for the schema (the first ones the query gives).
    #[arg(long = "sampleSize", default_value_t = 1000)]
    pub sample_size: i64,
    /// No summary.
    #[arg(long)]
    pub quiet: bool,
}

#[derive(Debug, Default)]
pub struct ExportSummary {
    pub documents: u64,
    pub seconds: f64,
}

pub fn run(args: &ExportArgs) -> Result<ExportSummary> {
    let started = Instant::now();
    if args.export_type == ExportType::Csv && args.fields.is_empty() {
        return Err(usage("CSV export needs --fields"));
    }
    let connection = Connection::open(&args.uri, "basalt export", None)?;
    if args.export_type == ExportType::Parquet {
        let documents = export_parquet(args, &connection)?;
        return Ok(ExportSummary {
            documents,
            seconds: started.elapsed().as_secs_f64(),
        });
    }
    let mut out: Box<dyn Write> = match &args.out {
        Some(path) => Box::new(BufWriter::with_capacity(
            1 << 20,
            File::create(path)
                .map_err(|e| io_error(format!("cannot create {}", path.display()), e))?,
        )),
        None => Box::new(BufWriter::new(std::io::stdout())),
    };
    let csv = args.export_type == ExportType::Csv;
    if csv && !args.no_header_line {
        let header = csv_record(&args.fields)?;
        out.write_all(header.as_bytes())
            .and_then(|()| out.write_all(b"\n"))
            .map_err(|e| io_error("cannot write the export", e))?;
    }
    let collection = connection
        .client
        .database(&args.db)
        .collection::<RawDocumentBuf>(&args.collection);
    let find = find(args, &collection, args.limit)?;
    let write_failed = |e: std::io::Error| io_error("cannot write the export", e);
    let mut documents = 0u64;
    if args.json_array {
        out.write_all(b"[").map_err(write_failed)?;
    }
    connection
        .block(async {
            let mut cursor = find.await?;
            while cursor.advance().await? {
                let document = Document::try_from(cursor.current()).map_err(|e| {
                    mongodb::error::Error::custom(format!("a document that cannot be read: {e}"))
                })?;
                let line = match csv {
                    true => csv_line(&args.fields, &document),
                    false => Ok(json_text(document, args.json_format)),
                };
                let written = line.and_then(|line| {
                    if args.json_array && documents > 0 {
                        out.write_all(b",").map_err(write_failed)?;
                    }
                    out.write_all(line.as_bytes()).map_err(write_failed)?;
                    if !args.json_array {
                        out.write_all(b"\n").map_err(write_failed)?;
                    }
                    Ok(())
                });
                if let Err(e) = written {
                    return Ok(Err(e));
                }
                documents += 1;
            }
            Ok::<_, mongodb::error::Error>(Ok(()))
        })
        .map_err(|e| server_error("cannot read the collection", e))??;
    if args.json_array {
        out.write_all(b"]\n").map_err(write_failed)?;
    }
    out.flush().map_err(write_failed)?;
    let summary = ExportSummary {
        documents,
        seconds: started.elapsed().as_secs_f64(),
    };
    if !args.quiet {
        eprintln!("exported {documents} records");
    }
    Ok(summary)
}

/// The find the flags ask for (`limit` in place of --limit: a sample's).
fn find<'a>(
    args: &ExportArgs,
    collection: &'a mongodb::Collection<RawDocumentBuf>,
    limit: Option<i64>,
) -> Result<mongodb::action::Find<'a, RawDocumentBuf>> {
    let filter = match &args.query {
        Some(text) => json_document("--query", text)?,
        None => Document::new(),
    };
    let mut find = collection.find(filter);
    if let Some(sort) = &args.sort {
        find = find.sort(json_document("--sort", sort)?);
    }
    if let Some(skip) = args.skip {
        find = find.skip(skip);
    }
    if let Some(limit) = limit {
        find = find.limit(limit);
    }
    if args.export_type != ExportType::Csv && !args.fields.is_empty() {
        let mut projection: Document = args
            .fields
            .iter()
            .map(|f| (f.clone(), Bson::Int32(1)))
            .collect();
        if !args.fields.iter().any(|f| f == "_id") {
            projection.insert("_id", 1);
        }
        find = find.projection(projection);
    }
    Ok(find)
}

/// Documents handed from the cursor to a row-group builder at a time.
const CHUNK_DOCS: usize = 4096;
/// Chunks read ahead of each builder, and row groups encoded ahead of the file's writer.
const CHUNKS_IN_FLIGHT: usize = 8;
/// Row-group builders at most (one per core below that).
const PARQUET_BUILDERS_MAX: usize = 4;

/// `--type parquet`: samples the documents for the schema, then writes them all. One
/// cursor reads the collection (a collection scan, the server's cheapest read) and deals
/// its documents, in chunks, to row-group builders on as many threads as there are
/// cores, which build, encode and compress row groups while the next chunks arrive; a
/// writer thread appends the row groups to the file. With `--sort`, `--skip` or
/// `--limit` one builder keeps the cursor's order; without, the chunks of the builders'
/// row groups interleave in the file.
fn export_parquet(args: &ExportArgs, connection: &Connection) -> Result<u64> {
    let Some(path) = &args.out else {
        return Err(usage("a Parquet export needs --out FILE"));
    };
    let collection = connection
        .client
        .database(&args.db)
        .collection::<RawDocumentBuf>(&args.collection);
    let sample_limit = match args.limit {
        Some(limit) => limit.min(args.sample_size),
        None => args.sample_size,
    };
    let sample_find = find(args, &collection, Some(sample_limit))?;
    let sample: Vec<RawDocumentBuf> = connection
        .block(async {
            let mut cursor = sample_find.await?;
            let mut sample = Vec::new();
            while cursor.advance().await? {
                sample.push(cursor.current().to_owned());
            }
            Ok::<_, mongodb::error::Error>(sample)
        })
        .map_err(|e| server_error("cannot sample the collection", e))?;
    let file =
        File::create(path).map_err(|e| io_error(format!("cannot create {}", path.display()), e))?;
    let (mut file, encoder) =
        super::parquet::create(BufWriter::with_capacity(1 << 20, file), &sample)?;
    let ordered = args.sort.is_some() || args.skip.is_some() || args.limit.is_some();
    let builder_count = match ordered {
        true => 1,
        false => std::thread::available_parallelism()
            .map_or(1, usize::from)
            .min(PARQUET_BUILDERS_MAX),
    };
    let full = find(args, &collection, args.limit)?;
    let (groups, encoded) = std::sync::mpsc::sync_channel::<EncodedRowGroup>(CHUNKS_IN_FLIGHT);
    let (documents, misfits, written) = std::thread::scope(|scope| {
        let writer = scope.spawn(move || {
            for group in encoded {
                file.append(group)?;
            }
            Ok::<_, basalt_error::Error>(file)
        });
        let mut feeds = Vec::with_capacity(builder_count);
        let mut builders = Vec::with_capacity(builder_count);
        for _ in 0..builder_count {
            let (feed, chunks) =
                std::sync::mpsc::sync_channel::<Vec<RawDocumentBuf>>(CHUNKS_IN_FLIGHT);
            let (groups, encoder) = (groups.clone(), &encoder);
            builders.push(scope.spawn(move || {
                let mut builder = encoder.builder();
                for chunk in chunks {
                    for document in &chunk {
                        if let Some(group) = builder.append(document)? {
                            // A closed channel: the writer failed, and reports why.
                            let _ = groups.send(group);
                        }
                    }
                }
                if let Some(group) = builder.finish()? {
                    let _ = groups.send(group);
                }
                Ok::<_, basalt_error::Error>(builder.misfits)
            }));
            feeds.push(feed);
        }
        drop(groups);
        // The feeds are moved in: they close however the read ends, which ends the
        // builders.
        let documents = connection.block(async move {
            let mut cursor = full.await?;
            let mut documents = 0u64;
            let mut chunk = Vec::with_capacity(CHUNK_DOCS);
            let mut turn = 0;
            while cursor.advance().await? {
                chunk.push(cursor.current().to_owned());
                documents += 1;
                if chunk.len() == CHUNK_DOCS {
                    let feed = &feeds[turn % feeds.len()];
                    turn += 1;
                    if feed.send(std::mem::take(&mut chunk)).is_err() {
                        // The builder stopped; its error is the one to report.
                        break;
                    }
                }
            }
            let _ = feeds[turn % feeds.len()].send(chunk);
            Ok::<_, mongodb::error::Error>(documents)
        });
        let panicked = || basalt_error::Error::internal("a Parquet writer thread panicked");
        let misfits: Result<u64> = builders
            .into_iter()
            .map(|builder| builder.join().unwrap_or_else(|_| Err(panicked())))
            .sum();
        let written = writer.join().unwrap_or_else(|_| Err(panicked()));
        (documents, misfits, written)
    });
    let file = written?;
    let misfits = misfits?;
    let documents = documents.map_err(|e| server_error("cannot read the collection", e))?;
    let mut out = file.finish()?;
    out.flush()
        .map_err(|e| io_error("cannot write the Parquet file", e))?;
    if !args.quiet && misfits > 0 {
        eprintln!("{misfits} values did not fit the sampled schema and were written as null");
    }
    if !args.quiet {
        eprintln!("exported {documents} records");
    }
    Ok(documents)
}

fn json_text(document: Document, format: JsonFormat) -> String {
    let value = Bson::Document(document);
    match format {
        JsonFormat::Relaxed => value.into_relaxed_extjson(),
        JsonFormat::Canonical => value.into_canonical_extjson(),
    }
    .to_string()
}

/// One CSV record of `fields` of `document`.
fn csv_line(fields: &[String], document: &Document) -> Result<String> {
    let record: Vec<String> = fields
        .iter()
        .map(|field| lookup(document, field).map(csv_value).unwrap_or_default())
        .collect();
    csv_record(&record)
}

/// Values as one CSV line (quoted where they need it), without its line end.
fn csv_record(values: &[String]) -> Result<String> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    writer
        .write_record(values)
        .map_err(|e| io_error("cannot write CSV", e))?;
    let bytes = writer
        .into_inner()
        .map_err(|e| io_error("cannot write CSV", e))?;
    let mut line = String::from_utf8_lossy(&bytes).into_owned();
    while line.ends_with(['\n', '\r']) {
        line.pop();
    }
    Ok(line)
}

/// The value at a dotted path (through subdocuments and array indexes).
fn lookup<'a>(document: &'a Document, path: &str) -> Option<&'a Bson> {
    let mut parts = path.split('.');
    let mut value = document.get(parts.next()?)?;
    for part in parts {
        value = match value {
            Bson::Document(d) => d.get(part)?,
            Bson::Array(a) => a.get(part.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(value)
}

/// A value as mongoexport writes it in CSV.
fn csv_value(value: &Bson) -> String {
    match value {
        Bson::String(s) => s.clone(),
        Bson::Int32(n) => n.to_string(),
        Bson::Int64(n) => n.to_string(),
        Bson::Double(x) => x.to_string(),
        Bson::Boolean(b) => b.to_string(),
        Bson::Null | Bson::Undefined => String::new(),
        Bson::ObjectId(id) => format!("ObjectId({id})"),
        Bson::DateTime(date) => iso_millis(*date),
        Bson::Decimal128(d) => d.to_string(),
        other => other.clone().into_relaxed_extjson().to_string(),
    }
}

/// A date as mongoexport writes it: ISO 8601 with exactly three decimals.
fn iso_millis(date: bson::DateTime) -> String {
    let text = date.try_to_rfc3339_string().unwrap_or_default();
    let Some(base) = text.strip_suffix('Z') else {
        return text;
    };
    let (seconds, fraction) = base.split_once('.').unwrap_or((base, ""));
    format!("{seconds}.{:0<3}Z", &fraction[..fraction.len().min(3)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn csv_values_and_dotted_paths_as_mongoexport() {
        let d = doc! {"a": {"b": [10, {"c": "x,y"}]}, "id": bson::oid::ObjectId::from_bytes([1; 12]), "n": null};
        assert_eq!(lookup(&d, "a.b.0"), Some(&Bson::Int32(10)));
        assert_eq!(lookup(&d, "a.b.1.c"), Some(&Bson::String("x,y".into())));
        assert_eq!(lookup(&d, "a.zz"), None);
        let fields: Vec<String> = ["a.b.1.c", "id", "n", "a.b"].map(String::from).to_vec();
        let line = csv_line(&fields, &d).unwrap();
        assert_eq!(
            line,
            r#""x,y",ObjectId(010101010101010101010101),,"[10,{""c"":""x,y""}]""#
        );
    }
}
