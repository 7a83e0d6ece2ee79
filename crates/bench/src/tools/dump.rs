//! `basalt dump`: mongodump's job and formats. Collections are read in parallel
//! (`--numParallelCollections`), each through a driver cursor of raw documents written
//! out as they come: to `<out>/<db>/<collection>.bson` beside its `.metadata.json`
//! (options, indexes, UUID, type; views have only the metadata), gzipped with
//! `--gzip`, or as segments of one `--archive` stream.

use super::archive::{ArchiveWriter, CollectionEntry};
use super::namespaces::{usage, NamespaceFilter, Selection};
use super::{
    canonical_json, data_collection, in_parallel, json_document, server_error, Connection,
};
use crate::import::progress::Progress;
use crate::io_error;
use basalt_error::Result;
use bson::{doc, Bson, Document, RawDocumentBuf};
use flate2::write::GzEncoder;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

/// What the oplog is called in a dump: `oplog.bson` beside the databases, the namespace
/// `"".oplog` in an archive.
pub const OPLOG: &str = "oplog";

/// Bytes of documents gathered before they are written as one archive segment.
const SEGMENT_BYTES: usize = 1 << 20;

/// Writes a server's collections to files (mongodump's flags).
#[derive(clap::Args, Clone, Debug)]
pub struct DumpArgs {
    /// Connection string of the server to dump.
    #[arg(long, default_value = "mongodb://127.0.0.1:27017")]
    pub uri: String,
    #[command(flatten)]
    pub selection: Selection,
    /// Only the documents matching this filter (Extended JSON).
    #[arg(long, short = 'q')]
    pub query: Option<String>,
    /// Directory to write the dump to.
    #[arg(long, short = 'o', default_value = "dump")]
    pub out: PathBuf,
    /// Write one archive instead of a directory: to this file, or to standard output
    /// with no file (`--archive`) or "-".
    #[arg(long, num_args = 0..=1, default_missing_value = "-", require_equals = true)]
    pub archive: Option<PathBuf>,
    /// Compress: each file of a directory dump, or the whole archive.
    #[arg(long)]
    pub gzip: bool,
    /// Collections dumped at once.
    #[arg(long = "numParallelCollections", short = 'j', default_value_t = 4)]
    pub parallel: usize,
    /// Also keep the oplog entries written while the dump ran (`oplog.bson`), so that a
    /// restore with --oplogReplay reaches one moment: a whole-server dump of a replica
    /// set member only.
    #[arg(long)]
    pub oplog: bool,
    /// No progress bar and no summary.
    #[arg(long)]
    pub quiet: bool,
}

/// What a dump wrote.
#[derive(Debug, Default)]
pub struct DumpSummary {
    pub collections: usize,
    pub documents: u64,
    pub bytes: u64,
    pub seconds: f64,
}

/// A collection or view to dump.
struct Source {
    db: String,
    name: String,
    kind: String,
    metadata: String,
    /// The collection its documents are read from and written as: its own, or a
    /// time-series collection's buckets ([`data_collection`]).
    data: String,
    /// A time-series collection's meta field, which its buckets hold as `meta`.
    meta_field: Option<String>,
}

enum Output {
    Directory { root: PathBuf, gzip: bool },
    Archive(Mutex<ArchiveWriter<Box<dyn Write + Send>>>),
}

pub fn run(args: &DumpArgs) -> Result<DumpSummary> {
    let started = Instant::now();
    let connection = Connection::open(&args.uri, "basalt dump", None)?;
    let filter = NamespaceFilter::new(&args.selection, &[], &[])?;
    let query = match &args.query {
        Some(text) => json_document("--query", text)?,
        None => Document::new(),
    };
    let oplog_start = match args.oplog {
        true => Some(oplog_position(&connection, &args.selection)?),
        false => None,
    };
    let sources = sources(&connection, args.selection.db.as_deref(), &filter)?;
    let server_version = connection.server_version();
    let output = match &args.archive {
        Some(path) => {
            let out = open_output(path)?;
            let out: Box<dyn Write + Send> = match args.gzip {
                true => Box::new(GzEncoder::new(out, flate2::Compression::default())),
                false => out,
            };
            // mongodump's types: "collection", "view", "timeseries".
            let mut entries: Vec<CollectionEntry> = sources
                .iter()
                .map(|s| CollectionEntry {
                    db: s.db.clone(),
                    collection: s.name.clone(),
                    metadata: s.metadata.clone(),
                    size: 0,
                    kind: s.kind.clone(),
                })
                .collect();
            if oplog_start.is_some() {
                // The oplog is the namespace with no database, as mongodump writes it.
                entries.push(CollectionEntry {
                    db: String::new(),
                    collection: OPLOG.into(),
                    metadata: String::new(),
                    size: 0,
                    kind: String::new(),
                });
            }
            let parallel = i32::try_from(args.parallel).unwrap_or(i32::MAX);
            Output::Archive(Mutex::new(ArchiveWriter::new(
                out,
                &server_version,
                parallel,
                &entries,
            )?))
        }
        None => {
            std::fs::create_dir_all(&args.out)
                .map_err(|e| io_error(format!("cannot create {}", args.out.display()), e))?;
            let prelude = serde_json::json!({
                "ServerVersion": server_version,
                "ToolVersion": format!("basalt {}", env!("CARGO_PKG_VERSION")),
            });
            std::fs::write(args.out.join("prelude.json"), prelude.to_string())
                .map_err(|e| io_error("cannot write prelude.json", e))?;
            Output::Directory {
                root: args.out.clone(),
                gzip: args.gzip,
            }
        }
    };
    let progress = Progress::new(None, args.quiet);
    let totals = Mutex::new(DumpSummary::default());
    in_parallel(sources.iter().collect(), args.parallel, |source| {
        let (documents, bytes) = dump_one(&connection, source, &query, &output, &progress)?;
        if !args.quiet {
            progress.println(&format!(
                "done dumping {}.{} ({documents} documents)",
                source.db, source.name
            ));
        }
        if let Ok(mut totals) = totals.lock() {
            totals.collections += 1;
            totals.documents += documents;
            totals.bytes += bytes;
        }
        Ok(())
    })?;
    if let Some(start) = oplog_start {
        let entries = Source {
            db: String::new(),
            name: OPLOG.into(),
            kind: OPLOG.into(),
            metadata: String::new(),
            data: OPLOG.into(),
            meta_field: None,
        };
        // From the last entry before the dump, as mongodump: never empty, and replaying
        // what the copy already holds is harmless.
        let after = doc! {"ts": {"$gte": start}};
        let (documents, _) = dump_one(&connection, &entries, &after, &output, &progress)?;
        if !args.quiet {
            progress.println(&format!(
                "oplog entries kept from the dump's start: {documents}"
            ));
        }
    }
    progress.finish();
    if let Output::Archive(writer) = output {
        let writer = writer
            .into_inner()
            .map_err(|_| io_error("cannot finish the archive", "a writer failed"))?;
        let mut out = writer.finish()?;
        out.flush()
            .map_err(|e| io_error("cannot write the archive", e))?;
    }
    let mut summary = totals.into_inner().unwrap_or_default();
    summary.seconds = started.elapsed().as_secs_f64();
    Ok(summary)
}

fn open_output(path: &Path) -> Result<Box<dyn Write + Send>> {
    if path.as_os_str() == "-" {
        return Ok(Box::new(BufWriter::new(std::io::stdout())));
    }
    let file =
        File::create(path).map_err(|e| io_error(format!("cannot create {}", path.display()), e))?;
    Ok(Box::new(BufWriter::with_capacity(1 << 20, file)))
}

/// The collections and views to dump, with their metadata.
fn sources(
    connection: &Connection,
    db: Option<&str>,
    filter: &NamespaceFilter,
) -> Result<Vec<Source>> {
    let databases = match db {
        Some(db) => vec![db.to_string()],
        None => connection
            .command("admin", doc! {"listDatabases": 1, "nameOnly": true})?
            .get_array("databases")
            .map(|dbs| {
                dbs.iter()
                    .filter_map(Bson::as_document)
                    .filter_map(|d| d.get_str("name").ok().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default(),
    };
    let mut sources = Vec::new();
    for db in databases {
        for spec in connection.cursor_command(&db, doc! {"listCollections": 1})? {
            let name = spec.get_str("name").unwrap_or_default().to_string();
            if !filter.takes(&format!("{db}.{name}")) {
                continue;
            }
            let kind = spec.get_str("type").unwrap_or("collection").to_string();
            let options = spec.get_document("options").cloned().unwrap_or_default();
            let uuid = match spec.get_document("info").ok().and_then(|i| i.get("uuid")) {
                Some(Bson::Binary(binary)) => Some(
                    binary
                        .bytes
                        .iter()
                        .map(|b| format!("{b:02x}"))
                        .collect::<String>(),
                ),
                _ => None,
            };
            let indexes = match kind.as_str() {
                "view" => Vec::new(),
                _ => connection
                    .cursor_command(&db, doc! {"listIndexes": &name})?
                    .into_iter()
                    .map(Bson::Document)
                    .collect(),
            };
            let meta_field = options
                .get_document("timeseries")
                .and_then(|timeseries| timeseries.get_str("metaField"))
                .ok()
                .map(str::to_string);
            let mut metadata = doc! { "options": options, "indexes": indexes };
            if let Some(uuid) = &uuid {
                metadata.insert("uuid", uuid);
            }
            metadata.insert("collectionName", &name);
            metadata.insert("type", &kind);
            sources.push(Source {
                db: db.clone(),
                data: data_collection(&name, &kind),
                meta_field,
                name,
                kind,
                metadata: canonical_json(metadata),
            });
        }
    }
    Ok(sources)
}

/// The time of the oplog's last entry, after which `--oplog` keeps what is written.
fn oplog_position(connection: &Connection, selection: &Selection) -> Result<bson::Timestamp> {
    if selection.db.is_some() || !selection.ns_include.is_empty() {
        return Err(usage("--oplog mode only supported on full dumps"));
    }
    let last = connection
        .cursor_command(
            "local",
            doc! {"find": "oplog.rs", "sort": {"$natural": -1}, "limit": 1, "singleBatch": true},
        )
        .unwrap_or_default();
    last.first()
        .and_then(|entry| entry.get_timestamp("ts").ok())
        .ok_or_else(|| usage("--oplog needs a replica set member: it has no local.oplog.rs"))
}

/// A collection's name as a file name: what a file system cannot hold escaped as
/// mongodump escapes it (`%2F` for `/`).
fn file_stem(name: &str) -> String {
    name.replace('%', "%25").replace('/', "%2F")
}

/// Takes a collection's documents' bytes as they come; an empty chunk ends them.
type Chunks<'a> = dyn FnMut(&[u8]) -> Result<()> + 'a;

/// Writes one collection (its metadata and documents); returns its documents and bytes.
fn dump_one(
    connection: &Connection,
    source: &Source,
    query: &Document,
    output: &Output,
    progress: &Progress,
) -> Result<(u64, u64)> {
    let mut sink: Box<Chunks<'_>> = match output {
        Output::Directory { root, gzip } if source.kind == OPLOG => {
            let suffix = if *gzip { ".gz" } else { "" };
            let mut data = create(&root.join(OPLOG), &format!(".bson{suffix}"), *gzip)?;
            Box::new(move |bytes: &[u8]| match bytes.is_empty() {
                true => data
                    .flush()
                    .map_err(|e| io_error("cannot write the oplog", e)),
                false => data
                    .write_all(bytes)
                    .map_err(|e| io_error("cannot write the oplog", e)),
            })
        }
        Output::Directory { root, gzip } => {
            let dir = root.join(&source.db);
            std::fs::create_dir_all(&dir)
                .map_err(|e| io_error(format!("cannot create {}", dir.display()), e))?;
            let stem = dir.join(file_stem(&source.name));
            let suffix = if *gzip { ".gz" } else { "" };
            let mut metadata = create(&stem, &format!(".metadata.json{suffix}"), *gzip)?;
            let stem = dir.join(file_stem(&source.data));
            metadata
                .write_all(source.metadata.as_bytes())
                .and_then(|()| metadata.flush())
                .map_err(|e| io_error("cannot write metadata", e))?;
            drop(metadata);
            if source.kind == "view" {
                return Ok((0, 0));
            }
            let mut data = create(&stem, &format!(".bson{suffix}"), *gzip)?;
            Box::new(move |bytes: &[u8]| {
                if bytes.is_empty() {
                    return data.flush().map_err(|e| io_error("cannot write data", e));
                }
                data.write_all(bytes)
                    .map_err(|e| io_error("cannot write data", e))
            })
        }
        Output::Archive(writer) => {
            // A view has no documents, but its namespace is closed all the same.
            if source.kind == "view" {
                let mut writer = writer
                    .lock()
                    .map_err(|_| io_error("cannot write the archive", "a writer failed"))?;
                writer.end(&source.db, &source.name)?;
                return Ok((0, 0));
            }
            let (db, name) = (source.db.clone(), source.data.clone());
            Box::new(move |bytes: &[u8]| {
                let mut writer = writer
                    .lock()
                    .map_err(|_| io_error("cannot write the archive", "a writer failed"))?;
                match bytes.is_empty() {
                    true => writer.end(&db, &name),
                    false => writer.segment(&db, &name, bytes),
                }
            })
        }
    };
    let collection = match source.kind.as_str() {
        OPLOG => connection
            .client
            .database("local")
            .collection::<RawDocumentBuf>("oplog.rs"),
        _ => connection
            .client
            .database(&source.db)
            .collection::<RawDocumentBuf>(&source.data),
    };
    let query = match source.kind.as_str() {
        "timeseries" => bucket_query(source, query)?,
        _ => query.clone(),
    };
    let (mut documents, mut bytes, mut pending) = (0u64, 0u64, 0u64);
    let mut buffer = Vec::with_capacity(SEGMENT_BYTES + (64 << 10));
    connection
        .block(async {
            let mut cursor = collection.find(query).await?;
            while cursor.advance().await? {
                let raw = cursor.current().as_bytes();
                buffer.extend_from_slice(raw);
                documents += 1;
                pending += 1;
                bytes += raw.len() as u64;
                if buffer.len() >= SEGMENT_BYTES {
                    progress.advance(pending, buffer.len() as u64);
                    pending = 0;
                    if let Err(e) = sink(&buffer) {
                        return Ok(Err(e));
                    }
                    buffer.clear();
                }
            }
            Ok::<_, mongodb::error::Error>(Ok(()))
        })
        .map_err(|e| server_error(&format!("cannot read {}.{}", source.db, source.name), e))??;
    progress.advance(pending, buffer.len() as u64);
    if !buffer.is_empty() {
        sink(&buffer)?;
    }
    // An empty slice closes the output: flushes a file, ends the archive's namespace.
    sink(&[])?;
    Ok((documents, bytes))
}

/// A `--query` on a time-series collection as a query on its buckets: as mongodump,
/// only conditions on the meta field, which buckets hold as `meta`.
fn bucket_query(source: &Source, query: &Document) -> Result<Document> {
    let mut buckets = Document::new();
    for (path, condition) in query {
        let (top, rest) = match path.split_once('.') {
            Some((top, rest)) => (top, Some(rest)),
            None => (path.as_str(), None),
        };
        if Some(top) != source.meta_field.as_deref() {
            return Err(usage(format!(
                "cannot process query {query} for timeseries collection {}.{}: only \
                 conditions on its metaField can be dumped",
                source.db, source.name
            )));
        }
        let path = rest.map_or("meta".to_string(), |rest| format!("meta.{rest}"));
        buckets.insert(path, condition.clone());
    }
    Ok(buckets)
}

/// A new file `<stem><suffix>`, gzipped with `gzip`.
fn create(stem: &Path, suffix: &str, gzip: bool) -> Result<Box<dyn Write + Send>> {
    let path = PathBuf::from(format!("{}{suffix}", stem.display()));
    let file = File::create(&path)
        .map_err(|e| io_error(format!("cannot create {}", path.display()), e))?;
    let out = BufWriter::with_capacity(1 << 20, file);
    Ok(match gzip {
        true => Box::new(GzEncoder::new(out, flate2::Compression::default())),
        false => Box::new(out),
    })
}
