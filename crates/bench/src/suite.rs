//! `basalt bench`: generates the workloads, loads them into a private server through
//! `basalt import`, runs and checks every query over the wire protocol, runs the peers on
//! the same files, and reports (table on stdout, JSON and SVG under `--out`).
//!
//! Basalt and the peers run one after the other, never at once, so neither measures the
//! other's load; queries are repeated and judged by their best and median runs.

use crate::import::{self, ImportArgs};
use crate::io_error;
use crate::machine::Machine;
use crate::measure::repeat;
use crate::peers;
use crate::report::{
    self, ColumnStoreLoad, DatasetReport, Layout, Outcome, QueryReport, Report, Status,
    StorageFigures, TimeSeriesLoad,
};
use crate::server::ServerProcess;
use crate::workloads::{
    self, conns, tools, w4_kv, Dataset, MongoOp, Query, Variant, WorkloadId, COLUMN_STORE_INDEX,
};
use basalt_error::{Error, ErrorCode, Result};
use bson::{doc, Document};
use futures_util::TryStreamExt;
use mongodb::action::Action;
use mongodb::error::ErrorKind;
use mongodb::options::{ClientOptions, Hint};
use mongodb::{Client, Database};
use std::future::IntoFuture;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The database a bench run loads into (dropped first).
const DB: &str = "basalt_bench";

/// Runs the W1-W5 benchmarks on a private server beside DuckDB, SQLite and PostgreSQL.
#[derive(clap::Args, Clone, Debug)]
pub struct BenchArgs {
    /// Documents per workload (W2 uses 0.3 × size, W4 puts and gets 0.1 × size keys).
    #[arg(long, default_value_t = 1_000_000)]
    pub size: u64,
    /// Workloads to run, comma-separated (conns: the connection storm).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [WorkloadId::W1, WorkloadId::W2, WorkloadId::W3, WorkloadId::W4, WorkloadId::W5, WorkloadId::Conns, WorkloadId::Tools])]
    pub workloads: Vec<WorkloadId>,
    /// Connections the connection storm opens at once.
    #[arg(long, default_value_t = conns::CONNECTIONS_DEFAULT)]
    pub connections: usize,
    /// Seed of the generators: the same seed and size give the same data.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Runs per query (and at least one per variant of a parameterised query).
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Seconds after which a query stops being repeated (it still runs once).
    #[arg(long = "query-budget-secs", default_value_t = 15)]
    pub query_budget_secs: u64,
    /// Peers, comma-separated: duckdb, sqlite, postgres (the server on 127.0.0.1:5432, or
    /// a private one started from the PostgreSQL binaries on PATH); "none" for none.
    #[arg(long, value_delimiter = ',', default_value = "duckdb,sqlite,postgres")]
    pub peers: Vec<String>,
    /// Python that has the peers' packages (default: bench/.venv/bin/python if present,
    /// else python3).
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// Where results.json and results.svg are written.
    #[arg(long, default_value = "bench/results")]
    pub out: PathBuf,
    /// Measure a server that already runs there instead of starting a private one (its
    /// database basalt_bench is dropped).
    #[arg(long)]
    pub uri: Option<String>,
    /// Keep the generated data and the private server's files here (default: a temporary
    /// directory, removed at the end).
    #[arg(long)]
    pub workdir: Option<PathBuf>,
    /// Threads the private server may use for one collection scan (its `scanWorkers`
    /// parameter; default: the machine's cores); measures the speed-up from more cores.
    #[arg(long = "scan-workers")]
    pub scan_workers: Option<usize>,
}

pub fn bench(args: &BenchArgs) -> Result<()> {
    let started = Instant::now();
    if cfg!(debug_assertions) {
        eprintln!(
            "basalt bench: this is a debug build, its figures mean little (cargo build --release)"
        );
    }
    let temp;
    let workdir = match &args.workdir {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| io_error(format!("cannot create {}", dir.display()), e))?;
            dir.clone()
        }
        None => {
            temp = tempfile::Builder::new()
                .prefix("basalt-bench")
                .tempdir()
                .map_err(|e| io_error("cannot make a temporary directory", e))?;
            temp.path().to_path_buf()
        }
    };
    let machine = Machine::detect();
    let budget = Duration::from_secs(args.query_budget_secs);

    let server = match &args.uri {
        Some(_) => None,
        None => {
            // This very executable is the server binary.
            let exe = std::env::current_exe().map_err(|e| io_error("cannot find basalt", e))?;
            let (dbpath, log) = (workdir.join("db"), workdir.join("server.log"));
            Some(ServerProcess::start(
                &exe,
                &dbpath,
                &log,
                args.scan_workers,
            )?)
        }
    };
    let uri = match (&args.uri, &server) {
        (Some(uri), _) => uri.clone(),
        (None, Some(server)) => server.uri(),
        (None, None) => return Err(Error::internal("no server to measure")),
    };
    if args.workloads.contains(&WorkloadId::Tools) && !args.workloads.contains(&WorkloadId::W1) {
        return Err(Error::bad_value("the tools workload runs on W1: add w1"));
    }
    // Checked before the long workloads, not after them.
    let storm_address = args
        .workloads
        .contains(&WorkloadId::Conns)
        .then(|| {
            crate::raw_wire::plain_address(&uri).ok_or_else(|| {
                Error::bad_value("the connection storm needs a plain mongodb://host:port URI")
            })
        })
        .transpose()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| io_error("cannot start the async runtime", e))?;
    let db = connect(&runtime, &uri)?;
    runtime
        .block_on(db.drop().into_future())
        .map_err(|e| io_error(format!("cannot drop {DB}"), e))?;

    let analytic: Vec<WorkloadId> = {
        let mut ids = args.workloads.clone();
        ids.sort();
        ids.dedup();
        ids.into_iter().filter(|id| id.has_dataset()).collect()
    };
    let generating = Instant::now();
    let datasets = analytic
        .iter()
        .map(|&id| {
            eprintln!("generating {} ...", id.name());
            generate(id, &workdir, args.size, args.seed)
        })
        .collect::<Result<Vec<Dataset>>>()?;
    let generate_time = generating.elapsed();

    let mut dataset_reports = Vec::new();
    for dataset in &datasets {
        dataset_reports.push(run_basalt(&runtime, &db, &uri, dataset, args.runs, budget)?);
    }
    let kv = if args.workloads.contains(&WorkloadId::W4) {
        let ops = w4_kv::ops_for(args.size);
        eprintln!(
            "basalt: w4 key-value, {ops} puts then gets from {} threads ...",
            w4_kv::THREADS
        );
        Some(w4_kv::run(&db, runtime.handle(), ops, args.seed)?)
    } else {
        None
    };
    let tools = match (
        args.workloads.contains(&WorkloadId::Tools),
        datasets.iter().find(|d| d.id == WorkloadId::W1),
    ) {
        (true, Some(w1)) => {
            eprintln!("basalt: dump, restore and export of w1 ...");
            Some(tools::run(&db, runtime.handle(), &uri, &workdir, w1.docs)?)
        }
        _ => None,
    };
    let storm = match storm_address {
        Some(address) => {
            eprintln!(
                "basalt: connection storm, {} connections at once ...",
                args.connections
            );
            Some(conns::run(
                &db,
                &runtime,
                &address,
                args.connections,
                args.runs,
                budget,
            )?)
        }
        None => None,
    };
    drop(server);

    let engines: Vec<String> = args
        .peers
        .iter()
        .filter(|p| p.as_str() != "none")
        .cloned()
        .collect();
    let python = args.python.clone().unwrap_or_else(peers::default_python);
    let peers = peers::run(
        &python,
        &engines,
        &datasets,
        &workdir,
        machine.cores,
        args.runs,
        budget,
    )?;

    let report = Report {
        scan_workers: args.scan_workers.unwrap_or(machine.cores),
        machine,
        size: args.size,
        seed: args.seed,
        runs: args.runs,
        generate: generate_time,
        total: started.elapsed(),
        datasets: dataset_reports,
        kv,
        storm,
        tools,
        peers,
    };
    println!("{}", report::to_table(&report));
    write_results(&report, &args.out)?;
    if report.all_correct() {
        Ok(())
    } else {
        Err(Error::new(
            ErrorCode::OPERATION_FAILED,
            "some answers were wrong or some lines did not load (see the notes above)",
        ))
    }
}

fn generate(id: WorkloadId, dir: &Path, size: u64, seed: u64) -> Result<Dataset> {
    match id {
        WorkloadId::W1 => workloads::w1_mot::generate(dir, size, seed),
        WorkloadId::W2 => workloads::w2_sensor::generate(dir, size, seed),
        WorkloadId::W3 => workloads::w3_compare::generate(dir, size, seed),
        WorkloadId::W5 => workloads::w5_weather::generate(dir, size, seed),
        WorkloadId::W4 | WorkloadId::Conns | WorkloadId::Tools => Err(Error::internal(format!(
            "{} generates no dataset",
            id.name()
        ))),
    }
}

fn connect(runtime: &tokio::runtime::Runtime, uri: &str) -> Result<Database> {
    let cannot = |e: mongodb::error::Error| io_error(format!("cannot connect to {uri}"), e);
    let mut options = runtime
        .block_on(ClientOptions::parse(uri).into_future())
        .map_err(cannot)?;
    options.app_name = Some("basalt bench".to_string());
    // W4's 20 client threads each hold a connection.
    options.max_pool_size = Some(2 * w4_kv::THREADS as u32);
    // The client starts its monitoring tasks on the runtime it is made in.
    let client = {
        let _inside = runtime.enter();
        Client::with_options(options).map_err(cannot)?
    };
    let db = client.database(DB);
    runtime
        .block_on(db.run_command(doc! {"ping": 1}).into_future())
        .map_err(cannot)?;
    Ok(db)
}

/// Loads a dataset with the importer, builds its indexes and runs its queries.
fn run_basalt(
    runtime: &tokio::runtime::Runtime,
    db: &Database,
    uri: &str,
    dataset: &Dataset,
    runs: usize,
    budget: Duration,
) -> Result<DatasetReport> {
    let name = dataset.collection();
    eprintln!("basalt: loading {name} ({} documents) ...", dataset.docs);
    let mut load = ImportArgs::new(uri, DB, name, dataset.import_file.clone());
    load.drop = true;
    let summary = import::run(&load)?;
    let mut indexes = Vec::new();
    for keys in &dataset.indexes {
        let took = build_index(runtime, db, name, keys, &index_name(keys))?;
        indexes.push((keys.to_string(), took));
    }
    let stats = coll_stats(runtime, db, name)?;
    let mut storage = StorageFigures {
        bson_bytes: figure(&stats, "size"),
        storage_bytes: figure(&stats, "storageSize"),
        index_bytes: figure(&stats, "totalIndexSize"),
        column_store_bytes: None,
    };
    let mut queries = Vec::new();
    let report = |query: &Query, layout: Layout, on: &str| -> Result<QueryReport> {
        match layout {
            Layout::Documents => eprintln!("basalt: {on} {} ...", query.name),
            layout => eprintln!("basalt: {on} {} [{}] ...", query.name, layout.name()),
        }
        Ok(QueryReport {
            name: query.name,
            layout,
            scanned_docs: query.scanned_docs,
            basalt: run_query(runtime, db, on, query, runs, budget)?,
        })
    };
    for query in &dataset.queries {
        queries.push(report(query, Layout::Documents, name)?);
    }
    // The scans that are aggregations run again, hinted to a column store index built
    // now.
    let scans: Vec<Query> = dataset
        .queries
        .iter()
        .filter(|q| q.scanned_docs.is_some())
        .filter_map(|q| {
            let variants = q.variants.iter().map(|v| match &v.mongo {
                MongoOp::Aggregate(p) | MongoOp::AggregateScan(p) => Some(Variant {
                    mongo: MongoOp::ColumnStore(Box::new(MongoOp::Aggregate(p.clone()))),
                    ..v.clone()
                }),
                MongoOp::Find { .. } => Some(Variant {
                    mongo: MongoOp::ColumnStore(Box::new(v.mongo.clone())),
                    ..v.clone()
                }),
                _ => None,
            });
            Some(Query {
                variants: variants.collect::<Option<Vec<_>>>()?,
                ..q.clone()
            })
        })
        .collect();
    let mut column_store_bytes = None;
    if !scans.is_empty() {
        eprintln!("basalt: {name} building a column store index ...");
        let key = doc! {"$**": "columnstore"};
        let took = build_index(runtime, db, name, &key, COLUMN_STORE_INDEX)?;
        indexes.push((key.to_string(), took));
        column_store_bytes = coll_stats(runtime, db, name)?
            .get_document("indexSizes")
            .ok()
            .and_then(|sizes| sizes.get(COLUMN_STORE_INDEX))
            .and_then(basalt_value::as_i64)
            .map(|bytes| bytes as u64);
        for query in &scans {
            queries.push(report(query, Layout::ColumnStore, name)?);
        }
        // The collection goes on as the dataset declares it: the tools workload dumps
        // and restores W1 with W1's own indexes, not with the one built here to measure
        // the column store (whose build would dominate the restore's time).
        runtime
            .block_on(
                db.run_command(doc! {"dropIndexes": name, "index": COLUMN_STORE_INDEX})
                    .into_future(),
            )
            .map_err(|e| io_error(format!("cannot drop {name}'s column store index"), e))?;
    }
    let column_store_load = match scans.is_empty() {
        true => None,
        false => Some(load_with_column_store(runtime, db, uri, dataset)?),
    };
    storage.column_store_bytes = column_store_bytes;
    let time_series_load = match &dataset.time_series {
        None => None,
        Some(options) => {
            let (load, on) = load_time_series(runtime, db, uri, dataset, options)?;
            for query in &dataset.queries {
                queries.push(report(query, Layout::TimeSeries, &on)?);
            }
            drop_collection(runtime, db, &on)?;
            Some(load)
        }
    };
    Ok(DatasetReport {
        id: dataset.id,
        title: dataset.title,
        docs: dataset.docs,
        bytes: dataset.bytes,
        checksum: dataset.checksum,
        load: summary.elapsed,
        load_failures: summary.failures.len(),
        indexes,
        storage,
        column_store_load,
        time_series_load,
        queries,
    })
}

/// Loads the dataset again into a time-series collection created with `options`, with
/// the dataset's indexes (which the server makes indexes of the buckets); returns the
/// load's figures and the collection's name.
fn load_time_series(
    runtime: &tokio::runtime::Runtime,
    db: &Database,
    uri: &str,
    dataset: &Dataset,
    options: &Document,
) -> Result<(TimeSeriesLoad, String)> {
    let name = format!("{}_timeseries", dataset.collection());
    eprintln!("basalt: loading {name}, a time-series collection ...");
    drop_collection(runtime, db, &name)?;
    runtime
        .block_on(
            db.run_command(doc! {"create": &name, "timeseries": options.clone()})
                .into_future(),
        )
        .map_err(|e| io_error(format!("cannot create {name}"), e))?;
    let summary = import_into(uri, &name, dataset)?;
    // An index the server cannot make for a time-series collection is reported, and
    // the queries that need it fail as they would for a user.
    let mut refused_indexes = Vec::new();
    for keys in &dataset.indexes {
        if let Err(e) = build_index(runtime, db, &name, keys, &index_name(keys)) {
            eprintln!("basalt: {e}");
            refused_indexes.push(keys.to_string());
        }
    }
    let stats = coll_stats(runtime, db, &name)?;
    let load = TimeSeriesLoad {
        load: summary.elapsed,
        storage_bytes: figure(&stats, "storageSize"),
        index_bytes: figure(&stats, "totalIndexSize"),
        refused_indexes,
    };
    Ok((load, name))
}

/// Loads the dataset's file into collection `name` (which may exist already).
fn import_into(uri: &str, name: &str, dataset: &Dataset) -> Result<import::ImportSummary> {
    import::run(&ImportArgs::new(uri, DB, name, dataset.import_file.clone()))
}

/// An index's name as mongod makes it from its key pattern (`a_1_b_-1`).
fn index_name(keys: &Document) -> String {
    let parts: Vec<String> = keys.iter().map(|(k, v)| format!("{k}_{v}")).collect();
    parts.join("_")
}

/// A byte count of a `collStats` reply (0 when absent).
fn figure(stats: &Document, field: &str) -> u64 {
    stats.get(field).and_then(basalt_value::as_i64).unwrap_or(0) as u64
}

fn drop_collection(runtime: &tokio::runtime::Runtime, db: &Database, name: &str) -> Result<()> {
    runtime
        .block_on(db.collection::<Document>(name).drop().into_future())
        .map_err(|e| io_error(format!("cannot drop {name}"), e))
}

/// How long the bench waits for a column store's row groups to become current.
const MERGE_WAIT: Duration = Duration::from_secs(300);

/// Loads the dataset again into a collection that has a column store index before its
/// first document, then waits until the background merge has made every row group
/// current (explain of a hinted `$count` reads none from documents); drops it after.
fn load_with_column_store(
    runtime: &tokio::runtime::Runtime,
    db: &Database,
    uri: &str,
    dataset: &Dataset,
) -> Result<ColumnStoreLoad> {
    let name = format!("{}_{COLUMN_STORE_INDEX}", dataset.collection());
    eprintln!("basalt: loading {name}, with a column store index ...");
    drop_collection(runtime, db, &name)?;
    let key = doc! {"$**": "columnstore"};
    build_index(runtime, db, &name, &key, COLUMN_STORE_INDEX)?;
    let summary = import_into(uri, &name, dataset)?;
    let loaded = Instant::now();
    let explain = doc! {
        "explain": {
            "aggregate": &name,
            "pipeline": [{"$count": "n"}],
            "cursor": {},
            "hint": COLUMN_STORE_INDEX,
        },
        "verbosity": "queryPlanner",
    };
    let current_after = loop {
        let reply = runtime
            .block_on(db.run_command(explain.clone()).into_future())
            .map_err(|e| io_error(format!("cannot explain a count of {name}"), e))?;
        let cursor = match reply.get_array("stages") {
            Ok(stages) => stages
                .first()
                .and_then(|s| s.as_document()?.get_document("$cursor").ok()),
            Err(_) => Some(&reply),
        };
        let from_documents = cursor
            .and_then(|c| c.get_document("queryPlanner").ok())
            .and_then(|p| p.get_document("winningPlan").ok())
            .and_then(|w| w.get("rowGroupsFromDocuments"))
            .and_then(basalt_value::as_i64);
        match from_documents {
            Some(0) => break Some(loaded.elapsed()),
            Some(_) if loaded.elapsed() < MERGE_WAIT => {
                std::thread::sleep(Duration::from_millis(100))
            }
            Some(_) => break None,
            None => {
                return Err(Error::internal(format!(
                    "explain of a count of {name} shows no column scan: {reply}"
                )))
            }
        }
    };
    drop_collection(runtime, db, &name)?;
    Ok(ColumnStoreLoad {
        load: summary.elapsed,
        current_after,
    })
}

/// Builds an index on collection `name`; returns how long it took.
fn build_index(
    runtime: &tokio::runtime::Runtime,
    db: &Database,
    name: &str,
    keys: &Document,
    index_name: &str,
) -> Result<Duration> {
    let building = Instant::now();
    runtime
        .block_on(
            db.run_command(doc! {
                "createIndexes": name,
                "indexes": [{"key": keys.clone(), "name": index_name}],
            })
            .into_future(),
        )
        .map_err(|e| io_error(format!("cannot index {name} with {keys}"), e))?;
    Ok(building.elapsed())
}

fn coll_stats(runtime: &tokio::runtime::Runtime, db: &Database, name: &str) -> Result<Document> {
    runtime
        .block_on(db.run_command(doc! {"collStats": name}).into_future())
        .map_err(|e| io_error(format!("cannot read collStats of {name}"), e))
}

/// Times a query over its runs and checks each variant's first answer. A query the server
/// refuses is "unsupported" (an operator not built yet), not a failed bench.
fn run_query(
    runtime: &tokio::runtime::Runtime,
    db: &Database,
    collection: &str,
    query: &Query,
    runs: usize,
    budget: Duration,
) -> Result<Outcome> {
    let variants = query.variants.len().max(1);
    let mut checked = vec![false; variants];
    let mut status = Status::Correct;
    let samples = repeat(runs.max(variants), budget, |i| {
        let variant = &query.variants[i % variants];
        let started = Instant::now();
        let docs = runtime.block_on(execute(db, collection, &variant.mongo))?;
        let took = started.elapsed();
        if !std::mem::replace(&mut checked[i % variants], true) {
            let projected = match &variant.mongo {
                MongoOp::Find {
                    projection: Some(projection),
                    ..
                } => Some(projection),
                _ => None,
            };
            if let Err(why) = variant
                .expected
                .check(&variant.expected.read_documents(&docs, projected))
            {
                if status == Status::Correct {
                    status = Status::Wrong(why);
                }
            }
        }
        Ok::<_, mongodb::error::Error>(took)
    });
    match samples {
        Ok(samples) => Ok(Outcome { samples, status }),
        Err(e) => match e.kind.as_ref() {
            ErrorKind::Command(refused) => Ok(Outcome::failed(Status::Unsupported(format!(
                "{} ({}): {}",
                refused.code_name, refused.code, refused.message
            )))),
            _ => Err(io_error(format!("{collection} {} failed", query.name), e)),
        },
    }
}

async fn execute(
    db: &Database,
    collection: &str,
    op: &MongoOp,
) -> mongodb::error::Result<Vec<Document>> {
    let coll = db.collection::<Document>(collection);
    let (op, hint) = match op {
        MongoOp::ColumnStore(op) => (&**op, Some(Hint::Name(COLUMN_STORE_INDEX.into()))),
        MongoOp::AggregateScan(_) => (op, Some(Hint::Keys(doc! {"$natural": 1}))),
        op => (op, None),
    };
    match op {
        MongoOp::Aggregate(pipeline) | MongoOp::AggregateScan(pipeline) => {
            coll.aggregate(pipeline.clone())
                .optional(hint, |aggregate, hint| aggregate.hint(hint))
                .await?
                .try_collect()
                .await
        }
        MongoOp::ColumnStore(_) => unreachable!("unwrapped above"),
        MongoOp::MapReduce { map, reduce } => {
            let reply = db
                .run_command(doc! {
                    "mapReduce": collection,
                    "map": bson::Bson::JavaScriptCode(map.clone()),
                    "reduce": bson::Bson::JavaScriptCode(reduce.clone()),
                    "out": {"inline": 1},
                })
                .await?;
            Ok(reply
                .get_array("results")
                .map(|results| {
                    results
                        .iter()
                        .filter_map(|r| r.as_document().cloned())
                        .collect()
                })
                .unwrap_or_default())
        }
        MongoOp::Find { filter, projection } => {
            coll.find(filter.clone())
                .optional(projection.clone(), |find, p| find.projection(p))
                .optional(hint, |find, hint| find.hint(hint))
                .await?
                .try_collect()
                .await
        }
        MongoOp::Count(filter) => {
            let reply = db
                .run_command(doc! {"count": collection, "query": filter.clone()})
                .await?;
            Ok(vec![
                doc! {"n": reply.get("n").cloned().unwrap_or(bson::Bson::Null)},
            ])
        }
    }
}

fn write_results(report: &Report, out: &Path) -> Result<()> {
    std::fs::create_dir_all(out)
        .map_err(|e| io_error(format!("cannot create {}", out.display()), e))?;
    let json_path = out.join("results.json");
    let svg_path = out.join("results.svg");
    let json = serde_json::to_string_pretty(&report::to_json(report))
        .map_err(|e| io_error("cannot write the results", e))?;
    std::fs::write(&json_path, json + "\n")
        .map_err(|e| io_error(format!("cannot write {}", json_path.display()), e))?;
    std::fs::write(&svg_path, report::to_svg(report))
        .map_err(|e| io_error(format!("cannot write {}", svg_path.display()), e))?;
    eprintln!(
        "results: {} and {}",
        json_path.display(),
        svg_path.display()
    );
    Ok(())
}
