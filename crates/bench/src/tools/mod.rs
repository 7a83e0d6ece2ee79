//! `basalt dump`, `basalt restore` and `basalt export`: the Database Tools' jobs in the
//! same binary, with their flags and their file formats — a dump directory of
//! `<db>/<collection>.bson` and `.metadata.json` (gzipped with `--gzip`) or one
//! `--archive` stream (`archive.rs`), so that dumps pass between these and MongoDB's
//! `mongodump`/`mongorestore`; exports as JSON lines, a JSON array or CSV, as
//! `mongoexport` writes them, or as Parquet (`parquet.rs`).
//!
//! Reads go through the official Rust driver; a restore writes through the importer's
//! sink (`import/sink.rs`: OP_MSG document sequences straight over the wire where the
//! URI allows).
//!
//! A time-series collection is dumped as mongodump dumps it: its metadata (type
//! `timeseries`, its options) under its own name, its data as the bucket documents of
//! `system.buckets.<name>` ([`data_collection`]); a restore creates the collection and
//! inserts the buckets as they were.

pub mod archive;
pub mod dump;
pub mod export;
pub mod namespaces;
pub mod parquet;
pub mod restore;

use crate::io_error;
use basalt_error::Result;
use bson::{doc, Bson, Document};
use futures_util::TryStreamExt;
use mongodb::options::ClientOptions;
use mongodb::Client;
use std::future::IntoFuture;
use std::time::Duration;

/// Where a time-series collection's buckets are.
pub const BUCKETS_PREFIX: &str = "system.buckets.";

/// The collection whose documents a dump holds for collection `name` of type `kind`
/// (listCollections' `type`): its buckets' for a time-series collection.
pub fn data_collection(name: &str, kind: &str) -> String {
    match kind {
        "timeseries" => format!("{BUCKETS_PREFIX}{name}"),
        _ => name.to_string(),
    }
}

/// A driver client and the runtime its calls are run on from plain threads.
pub(crate) struct Connection {
    pub runtime: tokio::runtime::Runtime,
    pub client: Client,
}

impl Connection {
    /// Connects (and pings) with `app_name`, and a pool of `pool` connections where a
    /// tool sends requests from several threads.
    pub fn open(uri: &str, app_name: &str, pool: Option<usize>) -> Result<Connection> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| io_error("cannot start the async runtime", e))?;
        let cannot_connect =
            |e: mongodb::error::Error| io_error(format!("cannot connect to {uri}"), e);
        let mut options = runtime
            .block_on(ClientOptions::parse(uri).into_future())
            .map_err(cannot_connect)?;
        options.app_name.get_or_insert_with(|| app_name.to_string());
        if let Some(pool) = pool {
            options.max_pool_size = Some(u32::try_from(pool).unwrap_or(u32::MAX));
        }
        options
            .server_selection_timeout
            .get_or_insert(Duration::from_secs(10));
        // The client starts its monitoring tasks on the runtime it is made in.
        let client = {
            let _inside = runtime.enter();
            Client::with_options(options).map_err(cannot_connect)?
        };
        let connection = Connection { runtime, client };
        connection.command("admin", doc! {"ping": 1})?;
        Ok(connection)
    }

    /// Runs a driver action to its end on this thread.
    pub fn block<A: IntoFuture>(&self, action: A) -> A::Output {
        self.runtime.handle().block_on(action.into_future())
    }

    pub fn command(&self, db: &str, command: Document) -> Result<Document> {
        self.block(self.client.database(db).run_command(command))
            .map_err(|e| server_error("command failed", e))
    }

    /// Every document of a cursor command's cursor.
    pub fn cursor_command(&self, db: &str, command: Document) -> Result<Vec<Document>> {
        self.block(async {
            let cursor = self.client.database(db).run_cursor_command(command).await?;
            cursor.try_collect::<Vec<_>>().await
        })
        .map_err(|e| server_error("command failed", e))
    }

    /// The server's version, from buildInfo.
    pub fn server_version(&self) -> String {
        self.command("admin", doc! {"buildInfo": 1})
            .ok()
            .and_then(|info| info.get_str("version").ok().map(str::to_string))
            .unwrap_or_default()
    }
}

/// A driver's error: a server's command error keeps its code, anything else is the
/// operation failing.
pub(crate) fn server_error(doing: &str, e: mongodb::error::Error) -> basalt_error::Error {
    match e.kind.as_ref() {
        mongodb::error::ErrorKind::Command(command) => basalt_error::Error::new(
            basalt_error::ErrorCode(command.code),
            format!("{doing}: {}", command.message),
        ),
        _ => io_error(doing, e),
    }
}

/// Runs `work` on each item from `threads` threads (collections dumped or restored at
/// once); the first failure leaves the items not yet started alone and is returned.
pub(crate) fn in_parallel<T: Send>(
    items: Vec<T>,
    threads: usize,
    work: impl Fn(T) -> Result<()> + Sync,
) -> Result<()> {
    let queue = std::sync::Mutex::new(items);
    let failure = std::sync::Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| loop {
                let Some(item) = queue.lock().ok().and_then(|mut q| q.pop()) else {
                    return;
                };
                if let Err(e) = work(item) {
                    if let Ok(mut failure) = failure.lock() {
                        failure.get_or_insert(e);
                    }
                    if let Ok(mut queue) = queue.lock() {
                        queue.clear();
                    }
                }
            });
        }
    });
    match failure.into_inner().ok().flatten() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// A document given on the command line in (Extended) JSON (`--query`, `--sort`).
pub(crate) fn json_document(flag: &str, text: &str) -> Result<Document> {
    let raw = crate::import::json_lines::parse(text.as_bytes())
        .map_err(|e| namespaces::usage(format!("{flag}: {}", e.message)))?;
    Ok(Document::try_from(raw.as_ref())?)
}

/// A document as canonical Extended JSON, as `metadata.json` holds it.
pub(crate) fn canonical_json(document: Document) -> String {
    Bson::Document(document)
        .into_canonical_extjson()
        .to_string()
}
