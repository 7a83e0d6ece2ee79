//! The operator's tools on W1: `basalt dump` of the loaded collection to an archive,
//! `basalt restore` of it under another name, `basalt export` of it as JSON lines —
//! each timed, each checked: the restored collection must give the same count and sums
//! over every document (its `_id`s, vehicle ids and mileages) as the original, and the
//! export must hold one line per document.

use crate::report::{rate, Status};
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
    pub status: Status,
}

impl ToolsResult {
    pub(crate) fn rates(&self) -> [(&'static str, f64); 3] {
        [
            ("dump (archive)", rate(self.documents, self.dump)),
            ("restore", rate(self.documents, self.restore)),
            ("export (JSON lines)", rate(self.documents, self.export)),
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
        db: Some(db.name().to_string()),
        collection: Some("w1".into()),
        query: None,
        out: workdir.join("dump"),
        archive: Some(archive.clone()),
        gzip: false,
        ns_include: Vec::new(),
        ns_exclude: Vec::new(),
        parallel: 4,
        quiet: true,
    };
    let started = Instant::now();
    dump::run(&dump_args)?;
    let dump_time = started.elapsed();
    let archive_bytes = std::fs::metadata(&archive).map_or(0, |m| m.len());

    let restore_args = restore::RestoreArgs {
        dir: workdir.join("dump"),
        uri: uri.to_string(),
        db: None,
        collection: None,
        archive: Some(archive.clone()),
        gzip: false,
        ns_include: Vec::new(),
        ns_exclude: Vec::new(),
        ns_from: vec![format!("{}.w1", db.name())],
        ns_to: vec![format!("{}.w1_restored", db.name())],
        drop: true,
        parallel: 4,
        workers: 2,
        no_index_restore: false,
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
        quiet: true,
    };
    let started = Instant::now();
    let export_summary = export::run(&export_args)?;
    let export_time = started.elapsed();

    let original = fingerprint(db, runtime, "w1")?;
    let copy = fingerprint(db, runtime, "w1_restored")?;
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
    } else {
        Status::Correct
    };
    let _ = runtime.block_on(
        db.collection::<Document>("w1_restored")
            .drop()
            .into_future(),
    );
    for file in [&archive, &exported] {
        let _ = std::fs::remove_file(file);
    }
    Ok(ToolsResult {
        documents,
        archive_bytes,
        dump: dump_time,
        restore: restore_time,
        export: export_time,
        status,
    })
}
