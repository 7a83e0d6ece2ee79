//! The operator's tools on W1: `basalt dump` of the loaded collection to an archive,
//! `basalt restore` of it under another name, `basalt export` of it as JSON lines and as
//! Parquet — each timed, each checked: the restored collection must give the same count
//! and sums over every document (its `_id`s, vehicle ids and mileages) as the original,
//! the JSON export must hold one line per document, and the Parquet file, read back,
//! the same count and sums. Beside them, the read the Spark connector makes: every
//! document in four `_id` ranges on four connections at once, by `aggregate` (a `$match`
//! per partition, as the connector sends) and by `find` over the same ranges, each
//! checked by its count and `_id` sum.

use crate::report::{rate, Status};
use crate::tools::namespaces::Selection;
use crate::tools::{dump, export, restore};
use basalt_error::Result;
use bson::{doc, Document};
use futures_util::TryStreamExt;
use mongodb::Database;
use std::future::IntoFuture;
use std::path::Path;
use std::time::{Duration, Instant};

#[derive(Debug)]
pub(crate) struct ToolsResult {
    pub documents: u64,
    pub archive_bytes: u64,
    pub dump: Duration,
    pub restore: Duration,
    pub export: Duration,
    pub parquet: Duration,
    pub parquet_bytes: u64,
    /// The four `_id` partitions read by `find`, and by `aggregate`.
    pub find: Duration,
    pub aggregate: Duration,
    pub status: Status,
}

impl ToolsResult {
    pub(crate) fn rates(&self) -> [(&'static str, f64); 6] {
        [
            ("dump (archive)", rate(self.documents, self.dump)),
            ("restore", rate(self.documents, self.restore)),
            ("export (JSON lines)", rate(self.documents, self.export)),
            ("export (Parquet)", rate(self.documents, self.parquet)),
            ("find, 4 _id partitions", rate(self.documents, self.find)),
            (
                "aggregate $match, 4 _id partitions",
                rate(self.documents, self.aggregate),
            ),
        ]
    }
}

/// What identifies a collection's documents: count and sums over all of them.
fn fingerprint(
    db: &Database,
    runtime: &tokio::runtime::Handle,
    collection: &str,
) -> Result<Document> {
    let pipeline = [doc! {"$group": {
        "_id": null,
        "n": {"$sum": 1},
        "ids": {"$sum": "$_id"},
        "vehicles": {"$sum": "$vehicle_id"},
        "miles": {"$sum": "$test_mileage"},
    }}];
    runtime
        .block_on(async {
            db.collection::<Document>(collection)
                .aggregate(pipeline)
                .await?
                .try_collect::<Vec<_>>()
                .await
        })
        .map(|mut found| found.pop().unwrap_or_default())
        .map_err(|e| crate::io_error("cannot read the collection", e))
}

/// The fingerprint's figures as the Parquet check computes them.
fn sums_of(fingerprint: &Document) -> Option<(i64, i64, i64, i64)> {
    let get = |field: &str| fingerprint.get(field).and_then(crate::raw_wire::as_i64);
    Some((get("n")?, get("ids")?, get("vehicles")?, get("miles")?))
}

/// Rows and sums of `_id`, `vehicle_id` and `test_mileage` read back from the Parquet
/// file, with the parquet crate's own reader.
fn parquet_fingerprint(path: &Path) -> Result<(i64, i64, i64, i64)> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int32Type, Int64Type};
    let file = std::fs::File::open(path).map_err(|e| crate::io_error("cannot open", e))?;
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .and_then(|builder| builder.build())
        .map_err(|e| crate::io_error("cannot read the Parquet file", e))?;
    let mut sums = (0i64, 0i64, 0i64, 0i64);
    for batch in reader {
        let batch = batch.map_err(|e| crate::io_error("cannot read the Parquet file", e))?;
        let column = |name: &str| batch.column_by_name(name).cloned();
        let sum64 = |name: &str| {
            column(name).and_then(|c| {
                c.as_primitive_opt::<Int64Type>()
                    .map(|a| a.iter().flatten().sum::<i64>())
                    .or_else(|| {
                        c.as_primitive_opt::<Int32Type>()
                            .map(|a| a.iter().flatten().map(i64::from).sum())
                    })
            })
        };
        sums.0 += batch.num_rows() as i64;
        sums.1 += sum64("_id").unwrap_or(0);
        sums.2 += sum64("vehicle_id").unwrap_or(0);
        sums.3 += sum64("test_mileage").unwrap_or(0);
    }
    Ok(sums)
}

/// How a partitioned read asks for a range of `_id`s.
#[derive(Clone, Copy)]
enum PartitionRead {
    Find,
    Aggregate,
}

/// Partitions of a partitioned read, as many as the Spark connector's default makes of
/// a collection this size on a small cluster.
const PARTITIONS: i64 = 4;
/// Times each partitioned read runs.
const PARTITION_ROUNDS: usize = 3;

/// A W1 document's `_id`, an int32 or int64.
fn integer_id(document: &bson::RawDocument) -> Option<i64> {
    match document.get("_id") {
        Ok(Some(bson::RawBsonRef::Int32(id))) => Some(i64::from(id)),
        Ok(Some(bson::RawBsonRef::Int64(id))) => Some(id),
        _ => None,
    }
}

/// Reads every document of `collection` in [`PARTITIONS`] `_id` ranges on as many
/// connections at once, as stored bytes (no decoding on this side): the documents read,
/// the sum of their `_id`s and the time taken. Like the Spark connector's partitioner,
/// the first range has no lower bound and the last none above.
fn read_partitions(
    db: &Database,
    runtime: &tokio::runtime::Handle,
    collection: &str,
    how: PartitionRead,
) -> Result<(i64, i64, Duration)> {
    let collection = db.collection::<bson::RawDocumentBuf>(collection);
    let first_id = |direction: i32| {
        let collection = collection.clone();
        async move {
            let first = collection
                .find_one(doc! {})
                .sort(doc! {"_id": direction})
                .await?;
            Ok::<_, mongodb::error::Error>(first.as_deref().and_then(integer_id))
        }
    };
    let cannot = |e: mongodb::error::Error| crate::io_error("cannot read the partitions", e);
    let (low, high) = runtime
        .block_on(async {
            Ok::<_, mongodb::error::Error>((first_id(1).await?, first_id(-1).await?))
        })
        .map_err(cannot)?;
    let (Some(low), Some(high)) = (low, high) else {
        return Ok((0, 0, Duration::ZERO));
    };
    let step = (high - low) / PARTITIONS + 1;
    let started = Instant::now();
    let totals = runtime.block_on(async {
        let reads = (0..PARTITIONS).map(|i| {
            let mut range = Document::new();
            if i > 0 {
                range.insert("$gte", low + i * step);
            }
            if i < PARTITIONS - 1 {
                range.insert("$lt", low + (i + 1) * step);
            }
            let collection = collection.clone();
            tokio::spawn(async move {
                let filter = doc! {"_id": range};
                let mut cursor = match how {
                    PartitionRead::Find => collection.find(filter).await?,
                    PartitionRead::Aggregate => {
                        collection
                            .aggregate([doc! {"$match": filter}])
                            .with_type::<bson::RawDocumentBuf>()
                            .await?
                    }
                };
                let (mut count, mut ids) = (0i64, 0i64);
                while cursor.advance().await? {
                    count += 1;
                    ids += integer_id(cursor.current()).unwrap_or(0);
                }
                Ok::<_, mongodb::error::Error>((count, ids))
            })
        });
        let mut totals = (0i64, 0i64);
        for read in futures_util::future::join_all(reads).await {
            let (count, ids) = read
                .map_err(|e| {
                    crate::io_error("a partition's read failed", std::io::Error::other(e))
                })?
                .map_err(cannot)?;
            totals = (totals.0 + count, totals.1 + ids);
        }
        Ok::<_, basalt_error::Error>(totals)
    })?;
    Ok((totals.0, totals.1, started.elapsed()))
}

pub(crate) fn run(
    db: &Database,
    runtime: &tokio::runtime::Handle,
    uri: &str,
    workdir: &Path,
    documents: u64,
) -> Result<ToolsResult> {
    let archive = workdir.join("w1.archive");
    let dump_args = dump::DumpArgs {
        uri: uri.to_string(),
        selection: Selection {
            db: Some(db.name().to_string()),
            collection: Some("w1".into()),
            ..Selection::default()
        },
        query: None,
        out: workdir.join("dump"),
        archive: Some(archive.clone()),
        gzip: false,
        parallel: 4,
        oplog: false,
        quiet: true,
    };
    let started = Instant::now();
    dump::run(&dump_args)?;
    let dump_time = started.elapsed();
    let archive_bytes = std::fs::metadata(&archive).map_or(0, |m| m.len());

    let restore_args = restore::RestoreArgs {
        dir: workdir.join("dump"),
        uri: uri.to_string(),
        selection: Selection::default(),
        archive: Some(archive.clone()),
        gzip: false,
        ns_from: vec![format!("{}.w1", db.name())],
        ns_to: vec![format!("{}.w1_restored", db.name())],
        drop: true,
        parallel: 4,
        workers: 2,
        no_index_restore: false,
        oplog_replay: false,
        no_options_restore: false,
        stop_on_error: false,
        quiet: true,
    };
    let started = Instant::now();
    let restored = restore::run(&restore_args)?;
    let restore_time = started.elapsed();

    let exported = workdir.join("w1.json");
    let export_args = export::ExportArgs {
        uri: uri.to_string(),
        db: db.name().to_string(),
        collection: "w1".into(),
        export_type: export::ExportType::Json,
        fields: Vec::new(),
        query: None,
        sort: None,
        skip: None,
        limit: None,
        json_array: false,
        json_format: export::JsonFormat::Relaxed,
        no_header_line: false,
        out: Some(exported.clone()),
        sample_size: 1000,
        quiet: true,
    };
    let started = Instant::now();
    let export_summary = export::run(&export_args)?;
    let export_time = started.elapsed();

    let parquet_file = workdir.join("w1.parquet");
    let parquet_args = export::ExportArgs {
        export_type: export::ExportType::Parquet,
        out: Some(parquet_file.clone()),
        ..export_args.clone()
    };
    let started = Instant::now();
    export::run(&parquet_args)?;
    let parquet_time = started.elapsed();
    let parquet_bytes = std::fs::metadata(&parquet_file).map_or(0, |m| m.len());
    let parquet_sums = parquet_fingerprint(&parquet_file)?;

    // Alternately, best of [`PARTITION_ROUNDS`] each: neither read gets the cache warmed
    // by the other.
    let mut find_time = Duration::MAX;
    let mut aggregate_time = Duration::MAX;
    let (mut found, mut found_ids, mut aggregated, mut aggregated_ids) = (0, 0, 0, 0);
    for _ in 0..PARTITION_ROUNDS {
        let time;
        (found, found_ids, time) = read_partitions(db, runtime, "w1", PartitionRead::Find)?;
        find_time = find_time.min(time);
        let time;
        (aggregated, aggregated_ids, time) =
            read_partitions(db, runtime, "w1", PartitionRead::Aggregate)?;
        aggregate_time = aggregate_time.min(time);
    }

    let original = fingerprint(db, runtime, "w1")?;
    let copy = fingerprint(db, runtime, "w1_restored")?;
    let ids = original.get("ids").and_then(crate::raw_wire::as_i64);
    let status = if restored.documents != documents || restored.failed != 0 {
        Status::Wrong(format!(
            "restored {} documents ({} failed) of {documents}",
            restored.documents, restored.failed
        ))
    } else if original != copy {
        Status::Wrong(format!("restored {copy}, expected {original}"))
    } else if export_summary.documents != documents {
        Status::Wrong(format!(
            "exported {} documents of {documents}",
            export_summary.documents
        ))
    } else if Some(parquet_sums) != sums_of(&original) {
        Status::Wrong(format!(
            "the Parquet file holds (rows, ids, vehicles, miles) {parquet_sums:?}, expected {original}"
        ))
    } else if (found, Some(found_ids)) != (documents as i64, ids)
        || (aggregated, Some(aggregated_ids)) != (documents as i64, ids)
    {
        Status::Wrong(format!(
            "the partitions gave (documents, _id sum) {:?} by find and {:?} by aggregate, \
             expected ({documents}, {ids:?})",
            (found, found_ids),
            (aggregated, aggregated_ids)
        ))
    } else {
        Status::Correct
    };
    let _ = runtime.block_on(
        db.collection::<Document>("w1_restored")
            .drop()
            .into_future(),
    );
    for file in [&archive, &exported, &parquet_file] {
        let _ = std::fs::remove_file(file);
    }
    Ok(ToolsResult {
        documents,
        archive_bytes,
        dump: dump_time,
        restore: restore_time,
        export: export_time,
        parquet: parquet_time,
        parquet_bytes,
        find: find_time,
        aggregate: aggregate_time,
        status,
    })
}
