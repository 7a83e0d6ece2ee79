//! `basalt restore`: mongorestore's job, from a dump directory or an archive (either
//! written by `basalt dump` or by `mongodump`). Each collection is created with its
//! options, loaded in batches through the importer's sink by several workers, then
//! given its indexes; views are created last, over what was restored. Collections load
//! in parallel (`--numParallelCollections`); an archive's interleaved segments go to
//! their collections' loaders as they are read.

use super::archive::{read_next, ArchiveReader, Event, Next};
use super::dump::OPLOG;
use super::namespaces::{usage, NamespaceFilter, Selection};
use super::{data_collection, in_parallel, Connection, BUCKETS_PREFIX};
use crate::import::progress::Progress;
use crate::import::sink::{Mode, Sink};
use crate::io_error;
use basalt_error::{Error, ErrorCode, Result};
use bson::{doc, Bson, Document, RawDocumentBuf};
use flate2::read::GzDecoder;
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

/// Documents per insert batch (MongoDB's maxWriteBatchSize) and bytes per batch.
const BATCH_DOCUMENTS: usize = 100_000;
const BATCH_BYTES: usize = 16 << 20;
/// Failed documents reported one by one before the rest are only counted.
const FAILURES_SHOWN: usize = 10;

/// Loads a dump into a server (mongorestore's flags).
#[derive(clap::Args, Clone, Debug)]
pub struct RestoreArgs {
    /// The dump directory (as written by `basalt dump` or mongodump).
    #[arg(value_name = "DIR", default_value = "dump")]
    pub dir: PathBuf,
    /// Connection string of the server to restore into.
    #[arg(long, default_value = "mongodb://127.0.0.1:27017")]
    pub uri: String,
    #[command(flatten)]
    pub selection: Selection,
    /// Read an archive instead of a directory: this file, or standard input with no
    /// file (`--archive`) or "-".
    #[arg(long, num_args = 0..=1, default_missing_value = "-", require_equals = true)]
    pub archive: Option<PathBuf>,
    /// The dump is gzipped (its files, or the whole archive).
    #[arg(long)]
    pub gzip: bool,
    /// Rename: namespaces matching this pattern (repeatable, paired with --nsTo) ...
    #[arg(long = "nsFrom")]
    pub ns_from: Vec<String>,
    /// ... are restored under this one; each `*` takes what the matching one matched.
    #[arg(long = "nsTo")]
    pub ns_to: Vec<String>,
    /// Drop each collection (or view) before restoring it.
    #[arg(long)]
    pub drop: bool,
    /// Collections restored at once.
    #[arg(long = "numParallelCollections", short = 'j', default_value_t = 4)]
    pub parallel: usize,
    /// Insert batches in flight per collection.
    #[arg(long = "numInsertionWorkersPerCollection", default_value_t = 2)]
    pub workers: usize,
    /// Do not create the dump's indexes.
    #[arg(long = "noIndexRestore")]
    pub no_index_restore: bool,
    /// Create collections without the dump's options (capped, validator, ...).
    #[arg(long = "noOptionsRestore")]
    pub no_options_restore: bool,
    /// After the collections, apply the dump's oplog entries (`basalt dump --oplog`,
    /// `mongodump --oplog`), bringing the data to the moment the dump ended.
    #[arg(long = "oplogReplay")]
    pub oplog_replay: bool,
    /// Stop at the first document that cannot be inserted.
    #[arg(long = "stopOnError")]
    pub stop_on_error: bool,
    /// No progress bar and no summary.
    #[arg(long)]
    pub quiet: bool,
}

#[derive(Debug, Default)]
pub struct RestoreSummary {
    pub collections: usize,
    pub documents: u64,
    pub failed: u64,
    /// Oplog entries applied (`--oplogReplay`).
    pub oplog_entries: u64,
    pub seconds: f64,
}

impl RestoreSummary {
    pub fn docs_per_second(&self) -> f64 {
        self.documents as f64 / self.seconds.max(1e-9)
    }
}

/// One collection or view of the dump.
struct Item {
    /// Where it is written: the dump's namespace, renamed.
    db: String,
    name: String,
    metadata: Document,
    /// A directory dump's data file.
    data: Option<PathBuf>,
    /// The collection its documents go into: its own, or a time-series collection's
    /// buckets (`data_collection`; an older Basalt dump of one holds measurements,
    /// which go into the collection itself).
    data_name: String,
}

impl Item {
    fn new(db: String, name: String, metadata: Document, data: Option<PathBuf>) -> Item {
        Item {
            data_name: name.clone(),
            db,
            name,
            metadata,
            data,
        }
    }

    /// mongorestore's test: the type, or options that name a time series.
    fn is_time_series(&self) -> bool {
        self.metadata.get_str("type").ok() == Some("timeseries")
            || self
                .metadata
                .get_document("options")
                .is_ok_and(|o| o.contains_key("timeseries"))
    }

    /// The item whose documents are the buckets of this time-series collection.
    fn with_buckets(mut self, data: Option<PathBuf>) -> Item {
        self.data_name = data_collection(&self.name, "timeseries");
        self.data = data;
        self
    }

    fn is_view(&self) -> bool {
        self.metadata.get_str("type").ok() == Some("view")
            || self
                .metadata
                .get_document("options")
                .is_ok_and(|o| o.contains_key("viewOn"))
    }
}

pub fn run(args: &RestoreArgs) -> Result<RestoreSummary> {
    let started = Instant::now();
    let filter = NamespaceFilter::new(&args.selection, &args.ns_from, &args.ns_to)?;
    let connection = Connection::open(&args.uri, "basalt restore", None)?;
    let progress = Arc::new(Progress::new(None, args.quiet));
    let mut summary = match &args.archive {
        Some(path) => restore_archive(args, &connection, &filter, path, &progress)?,
        None => restore_directory(args, &connection, &filter, &progress)?,
    };
    progress.finish();
    summary.seconds = started.elapsed().as_secs_f64();
    Ok(summary)
}

fn parse_metadata(text: &str, what: &str) -> Result<Document> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| usage(format!("{what}: not JSON: {e}")))?;
    match Bson::try_from(value) {
        Ok(Bson::Document(document)) => Ok(document),
        _ => Err(usage(format!("{what}: not a metadata document"))),
    }
}

/// The collections of a dump directory: `<dir>/<db>/<name>.metadata.json[.gz]` and
/// `<name>.bson[.gz]`.
fn directory_items(args: &RestoreArgs, filter: &NamespaceFilter) -> Result<Vec<Item>> {
    let suffix = if args.gzip { ".gz" } else { "" };
    let read_dir = |path: &Path| {
        std::fs::read_dir(path).map_err(|e| io_error(format!("cannot read {}", path.display()), e))
    };
    let mut items = Vec::new();
    for db_entry in read_dir(&args.dir)? {
        let db_path = db_entry
            .map_err(|e| io_error("cannot read the dump", e))?
            .path();
        if !db_path.is_dir() {
            continue;
        }
        let db = db_path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        let mut names: HashMap<String, (Option<PathBuf>, Option<PathBuf>)> = HashMap::new();
        for file in read_dir(&db_path)? {
            let path = file
                .map_err(|e| io_error("cannot read the dump", e))?
                .path();
            let file_name = path
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .to_string();
            let Some(stem) = file_name.strip_suffix(suffix) else {
                continue;
            };
            if let Some(name) = stem.strip_suffix(".metadata.json") {
                names.entry(unescape(name)).or_default().0 = Some(path);
            } else if let Some(name) = stem.strip_suffix(".bson") {
                names.entry(unescape(name)).or_default().1 = Some(path);
            }
        }
        for (name, (metadata_path, data)) in &names {
            // A time-series collection's buckets are read with its metadata.
            if name.starts_with(BUCKETS_PREFIX) && metadata_path.is_none() {
                continue;
            }
            if !filter.takes(&format!("{db}.{name}")) {
                continue;
            }
            let metadata = match &metadata_path {
                Some(path) => {
                    let text = read_text(path, args.gzip)?;
                    parse_metadata(&text, &path.display().to_string())?
                }
                None => Document::new(),
            };
            let (target_db, target_name) = target(filter, &db, name)?;
            let item = Item::new(target_db, target_name, metadata, data.clone());
            let buckets = names
                .get(&data_collection(name, "timeseries"))
                .and_then(|(_, buckets)| buckets.clone());
            items.push(match buckets {
                Some(buckets) if item.is_time_series() => item.with_buckets(Some(buckets)),
                _ => item,
            });
        }
    }
    items.sort_by(|a, b| (&a.db, &a.name).cmp(&(&b.db, &b.name)));
    Ok(items)
}

/// mongodump's file names escape `/` and `%`.
fn unescape(name: &str) -> String {
    name.replace("%2F", "/").replace("%25", "%")
}

fn target(filter: &NamespaceFilter, db: &str, name: &str) -> Result<(String, String)> {
    let renamed = filter.renamed(&format!("{db}.{name}"));
    renamed
        .split_once('.')
        .map(|(d, c)| (d.to_string(), c.to_string()))
        .ok_or_else(|| usage(format!("--nsTo gives {renamed}, which is no db.collection")))
}

fn open_input(path: &Path, gzip: bool) -> Result<Box<dyn Read + Send>> {
    let input: Box<dyn Read + Send> = if path.as_os_str() == "-" {
        Box::new(std::io::stdin())
    } else {
        Box::new(
            File::open(path).map_err(|e| io_error(format!("cannot open {}", path.display()), e))?,
        )
    };
    let input = BufReader::with_capacity(1 << 20, input);
    Ok(match gzip {
        true => Box::new(GzDecoder::new(input)),
        false => Box::new(input),
    })
}

fn read_text(path: &Path, gzip: bool) -> Result<String> {
    let mut text = String::new();
    open_input(path, gzip)?
        .read_to_string(&mut text)
        .map_err(|e| io_error(format!("cannot read {}", path.display()), e))?;
    Ok(text)
}

/// Creates a collection with its dump's options (after dropping it with `--drop`).
fn prepare(args: &RestoreArgs, connection: &Connection, item: &Item) -> Result<()> {
    if args.drop {
        connection
            .command(&item.db, doc! {"drop": &item.name})
            .or_else(not_found_is_fine)?;
    }
    let mut create = doc! {"create": &item.name};
    if !args.no_options_restore || item.is_view() {
        if let Ok(options) = item.metadata.get_document("options") {
            create.extend(options.clone());
        }
    }
    match connection.command(&item.db, create) {
        Err(e) if e.code == ErrorCode::NAMESPACE_EXISTS => Ok(()),
        other => other.map(drop),
    }
}

fn not_found_is_fine(e: Error) -> Result<Document> {
    if e.code == ErrorCode::NAMESPACE_NOT_FOUND {
        Ok(Document::new())
    } else {
        Err(e)
    }
}

/// Creates the dump's indexes of a restored collection (`_id`'s exists already).
fn create_indexes(connection: &Connection, item: &Item) -> Result<()> {
    let indexes: Vec<Bson> = item
        .metadata
        .get_array("indexes")
        .map(|indexes| {
            indexes
                .iter()
                .filter_map(Bson::as_document)
                .filter(|index| index.get_str("name").ok() != Some("_id_"))
                .map(|index| {
                    let mut index = index.clone();
                    index.remove("ns");
                    Bson::Document(index)
                })
                .collect()
        })
        .unwrap_or_default();
    if indexes.is_empty() {
        return Ok(());
    }
    connection
        .command(
            &item.db,
            doc! {"createIndexes": &item.name, "indexes": indexes},
        )
        .map(drop)
}

/// Inserts one collection's documents: batches handed to worker threads that write
/// them through a sink.
struct Loader {
    batch: Vec<RawDocumentBuf>,
    batch_bytes: usize,
    sender: Option<SyncSender<Vec<RawDocumentBuf>>>,
    workers: Vec<JoinHandle<()>>,
    outcome: Arc<Mutex<(u64, u64, Vec<String>)>>,
    stop_on_error: bool,
}

impl Loader {
    fn new(args: &RestoreArgs, item: &Item, progress: &Arc<Progress>) -> Result<Loader> {
        let workers = args.workers.max(1);
        let sink = Arc::new(Sink::connect(
            &args.uri,
            &item.db,
            &item.data_name,
            Mode::Insert,
            &[],
            args.stop_on_error,
            workers,
        )?);
        let (sender, receiver) = sync_channel::<Vec<RawDocumentBuf>>(workers);
        let receiver = Arc::new(Mutex::new(receiver));
        let outcome = Arc::new(Mutex::new((0u64, 0u64, Vec::new())));
        let handles = (0..workers)
            .map(|_| {
                let (sink, receiver, outcome) = (sink.clone(), receiver.clone(), outcome.clone());
                let progress = progress.clone();
                std::thread::spawn(move || loop {
                    let Ok(batch) = receiver.lock().map(|r| r.recv()) else {
                        return;
                    };
                    let Ok(batch) = batch else {
                        return;
                    };
                    let count = batch.len() as u64;
                    let bytes: u64 = batch.iter().map(|d| d.as_bytes().len() as u64).sum();
                    let result = sink.write(batch);
                    let Ok(mut outcome) = outcome.lock() else {
                        return;
                    };
                    match result {
                        Ok(written) => {
                            outcome.0 += written.written;
                            outcome.1 += written.failed.len() as u64;
                            for (_, why) in written.failed {
                                if outcome.2.len() < FAILURES_SHOWN {
                                    outcome.2.push(why);
                                }
                            }
                        }
                        Err(e) => {
                            outcome.1 += count;
                            if outcome.2.len() < FAILURES_SHOWN {
                                outcome.2.push(e.message);
                            }
                        }
                    }
                    progress.advance(count, bytes);
                })
            })
            .collect();
        Ok(Loader {
            batch: Vec::new(),
            batch_bytes: 0,
            sender: Some(sender),
            workers: handles,
            outcome,
            stop_on_error: args.stop_on_error,
        })
    }

    fn push(&mut self, document: RawDocumentBuf) -> Result<()> {
        self.batch_bytes += document.as_bytes().len();
        self.batch.push(document);
        if self.batch.len() >= BATCH_DOCUMENTS || self.batch_bytes >= BATCH_BYTES {
            self.send()?;
        }
        Ok(())
    }

    fn send(&mut self) -> Result<()> {
        if self.stop_on_error && self.outcome.lock().map_or(true, |o| o.1 > 0) {
            return Err(usage(
                "stopped at the first failed document (--stopOnError)",
            ));
        }
        let batch = std::mem::take(&mut self.batch);
        self.batch_bytes = 0;
        if let Some(sender) = &self.sender {
            sender
                .send(batch)
                .map_err(|_| io_error("cannot restore", "the insert workers stopped"))?;
        }
        Ok(())
    }

    /// Sends what is left and waits for the workers: documents written and failed,
    /// and the first failures' reasons.
    fn finish(mut self) -> Result<(u64, u64, Vec<String>)> {
        if !self.batch.is_empty() {
            self.send()?;
        }
        self.sender = None;
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
        let outcome = self.outcome.lock().map(|o| o.clone()).unwrap_or_default();
        Ok(outcome)
    }
}

/// Reads the BSON documents of a `.bson` file, one after another.
fn read_documents(
    input: &mut dyn Read,
    mut each: impl FnMut(RawDocumentBuf) -> Result<()>,
) -> Result<()> {
    loop {
        match read_next(input)? {
            Next::Document(document) => each(document)?,
            Next::End => return Ok(()),
            Next::Terminator => return Err(usage("not a BSON file: an archive's terminator")),
        }
    }
}

fn report(args: &RestoreArgs, progress: &Progress, item: &Item, outcome: &(u64, u64, Vec<String>)) {
    if args.quiet {
        return;
    }
    for why in &outcome.2 {
        progress.println(&format!("{}.{}: {why}", item.db, item.name));
    }
    progress.println(&format!(
        "finished restoring {}.{} ({} documents, {} failures)",
        item.db, item.name, outcome.0, outcome.1
    ));
}

fn restore_directory(
    args: &RestoreArgs,
    connection: &Connection,
    filter: &NamespaceFilter,
    progress: &Arc<Progress>,
) -> Result<RestoreSummary> {
    let items = directory_items(args, filter)?;
    let (views, collections): (Vec<&Item>, Vec<&Item>) = items.iter().partition(|i| i.is_view());
    let summary = Mutex::new(RestoreSummary::default());
    in_parallel(collections, args.parallel, |item| {
        prepare(args, connection, item)?;
        let mut loader = Loader::new(args, item, progress)?;
        if let Some(path) = &item.data {
            let mut input = open_input(path, args.gzip)?;
            read_documents(&mut input, |document| loader.push(document))?;
        }
        let mut mine = RestoreSummary::default();
        complete(args, connection, progress, item, loader, &mut mine)?;
        if let Ok(mut summary) = summary.lock() {
            summary.collections += mine.collections;
            summary.documents += mine.documents;
            summary.failed += mine.failed;
        }
        Ok(())
    })?;
    for view in views {
        prepare(args, connection, view)?;
    }
    let mut summary = summary.into_inner().unwrap_or_default();
    if args.oplog_replay {
        let suffix = if args.gzip { ".gz" } else { "" };
        let path = args.dir.join(format!("{OPLOG}.bson{suffix}"));
        let mut entries = Vec::new();
        if path.exists() {
            read_documents(&mut *open_input(&path, args.gzip)?, |entry| {
                entries.push(entry);
                Ok(())
            })?;
        }
        summary.oplog_entries = replay_oplog(connection, filter, &entries)?;
    }
    Ok(summary)
}

/// Oplog entries applied per `applyOps`.
const OPLOG_BATCH_ENTRIES: usize = 1000;

/// `--oplogReplay`: applies the dump's oplog entries in order through `applyOps`,
/// batched, under the restore's renames; no-ops are skipped, a transaction's entry
/// (`applyOps` inside a command entry) is applied as its operations, and collection
/// UUIDs (`ui`) are dropped, since the restored collections have new ones. Returns the
/// entries applied.
fn replay_oplog(
    connection: &Connection,
    filter: &NamespaceFilter,
    entries: &[RawDocumentBuf],
) -> Result<u64> {
    let mut operations = Vec::new();
    for entry in entries {
        let entry = Document::try_from(entry.as_ref())?;
        match (entry.get_str("op").unwrap_or(""), entry.get_document("o")) {
            ("n", _) => {}
            ("c", Ok(command)) if command.contains_key("applyOps") => {
                let inner = command.get_array("applyOps").cloned().unwrap_or_default();
                operations.extend(inner.into_iter().filter_map(|op| match op {
                    Bson::Document(op) => Some(op),
                    _ => None,
                }));
            }
            _ => operations.push(entry),
        }
    }
    let mut applied = 0u64;
    let mut batch: Vec<Bson> = Vec::new();
    let flush = |batch: &mut Vec<Bson>| -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let ops = std::mem::take(batch);
        apply_idempotently(connection, ops)
    };
    for mut op in operations {
        let Some(ns) = op.get_str("ns").ok().map(str::to_string) else {
            continue;
        };
        let (db, collection) = ns.split_once('.').unwrap_or((&ns, ""));
        let command = collection == "$cmd";
        let named = match command {
            true => op
                .get_document("o")
                .ok()
                .and_then(|o| o.iter().next())
                .and_then(|(_, v)| v.as_str())
                .map(|c| format!("{db}.{c}")),
            false => Some(ns.clone()),
        };
        let Some(named) = named else { continue };
        if !filter.takes(&named) {
            continue;
        }
        let renamed = filter.renamed(&named);
        let (new_db, new_collection) = renamed.split_once('.').unwrap_or((&renamed, ""));
        op.remove("ui");
        if command {
            op.insert("ns", format!("{new_db}.$cmd"));
            if let Ok(o) = op.get_document_mut("o") {
                if let Some((key, _)) = o.iter().next().map(|(k, v)| (k.clone(), v.clone())) {
                    o.insert(key, new_collection);
                }
            }
        } else {
            op.insert("ns", &renamed);
        }
        // A command entry goes alone: it changes the catalog the next ones write to. A
        // collection the dump already holds (created while it ran) is there already.
        if command {
            flush(&mut batch)?;
            batch.push(Bson::Document(op));
            match flush(&mut batch) {
                Err(e) if e.code == ErrorCode::NAMESPACE_EXISTS => {}
                other => other?,
            }
        } else {
            batch.push(Bson::Document(op));
            if batch.len() == OPLOG_BATCH_ENTRIES {
                flush(&mut batch)?;
            }
        }
        applied += 1;
    }
    flush(&mut batch)?;
    Ok(applied)
}

/// Applies oplog entries as a replay must: again and again to the same effect. A batch
/// is atomic, so when an insert finds its document there already (the dump copied it,
/// or an earlier replay applied it), the batch is applied again entry by entry, such an
/// insert as the replacement of that document, as mongod's oplog application does.
fn apply_idempotently(connection: &Connection, ops: Vec<Bson>) -> Result<()> {
    let apply = |ops: Vec<Bson>| {
        connection
            .command("admin", doc! {"applyOps": ops})
            .map(drop)
    };
    match apply(ops.clone()) {
        Err(e) if e.code == ErrorCode::DUPLICATE_KEY => {}
        other => return other,
    }
    for op in ops {
        match apply(vec![op.clone()]) {
            Err(e) if e.code == ErrorCode::DUPLICATE_KEY => {
                let Bson::Document(mut op) = op else {
                    return Err(e);
                };
                let id = op
                    .get_document("o")
                    .ok()
                    .and_then(|o| o.get("_id"))
                    .cloned()
                    .ok_or(e)?;
                op.insert("op", "u");
                op.insert("o2", doc! {"_id": id});
                apply(vec![Bson::Document(op)])?;
            }
            other => other?,
        }
    }
    Ok(())
}

/// Ends a collection's load: its last batches, its indexes, its line in the summary.
fn complete(
    args: &RestoreArgs,
    connection: &Connection,
    progress: &Progress,
    item: &Item,
    loader: Loader,
    summary: &mut RestoreSummary,
) -> Result<()> {
    let outcome = loader.finish()?;
    if !args.no_index_restore {
        create_indexes(connection, item)?;
    }
    report(args, progress, item, &outcome);
    summary.collections += 1;
    summary.documents += outcome.0;
    summary.failed += outcome.1;
    Ok(())
}

fn restore_archive(
    args: &RestoreArgs,
    connection: &Connection,
    filter: &NamespaceFilter,
    path: &Path,
    progress: &Arc<Progress>,
) -> Result<RestoreSummary> {
    let (mut reader, _, entries) = ArchiveReader::open(open_input(path, args.gzip)?)?;
    let mut items: HashMap<(String, String), Item> = HashMap::new();
    let mut legacy: HashMap<(String, String), Item> = HashMap::new();
    let mut views = Vec::new();
    for entry in entries {
        // The oplog (no database) is no collection to create.
        if entry.db.is_empty() || !filter.takes(&format!("{}.{}", entry.db, entry.collection)) {
            continue;
        }
        let what = format!("metadata of {}.{}", entry.db, entry.collection);
        let metadata = match entry.metadata.is_empty() {
            true => Document::new(),
            false => parse_metadata(&entry.metadata, &what)?,
        };
        let (db, name) = target(filter, &entry.db, &entry.collection)?;
        let item = Item::new(db, name, metadata, None);
        if item.is_view() {
            views.push(item);
        } else if item.is_time_series() {
            // Its data is its buckets' namespace; an older Basalt archive's measurements
            // come under its own name, for which a loader starts when they do.
            let buckets = data_collection(&entry.collection, "timeseries");
            let measurements = Item::new(
                item.db.clone(),
                item.name.clone(),
                item.metadata.clone(),
                None,
            );
            legacy.insert((entry.db.clone(), entry.collection), measurements);
            items.insert((entry.db, buckets), item.with_buckets(None));
        } else {
            items.insert((entry.db, entry.collection), item);
        }
    }
    let mut loaders: HashMap<(String, String), Loader> = HashMap::new();
    for (key, item) in &items {
        prepare(args, connection, item)?;
        loaders.insert(key.clone(), Loader::new(args, item, progress)?);
    }
    let mut summary = RestoreSummary::default();
    let mut oplog = Vec::new();
    while let Some(event) = reader.next_event()? {
        match event {
            Event::Documents {
                db,
                collection,
                documents,
            } if db.is_empty() && collection == OPLOG => oplog.extend(documents),
            Event::Documents {
                db,
                collection,
                documents,
            } => {
                let key = (db, collection);
                if let Some(item) = legacy.remove(&key) {
                    loaders.insert(key.clone(), Loader::new(args, &item, progress)?);
                    items.insert(key.clone(), item);
                }
                if let Some(loader) = loaders.get_mut(&key) {
                    for document in documents {
                        loader.push(document)?;
                    }
                }
            }
            Event::End { db, collection } => {
                let key = (db, collection);
                if let (Some(loader), Some(item)) = (loaders.remove(&key), items.get(&key)) {
                    complete(args, connection, progress, item, loader, &mut summary)?;
                }
            }
        }
    }
    // Collections the archive never closed (an archive cut short is an error above;
    // one without data for them is not).
    for (key, loader) in loaders {
        if let Some(item) = items.get(&key) {
            complete(args, connection, progress, item, loader, &mut summary)?;
        }
    }
    for view in &views {
        prepare(args, connection, view)?;
    }
    if args.oplog_replay {
        summary.oplog_entries = replay_oplog(connection, filter, &oplog)?;
    }
    Ok(summary)
}
