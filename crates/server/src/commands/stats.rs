//! `collStats` and `dbStats`: document counts and sizes.
//!
//! `size`/`dataSize` are the BSON bytes of the documents, from the collection's kept
//! counters (`Collection::stats`), not a scan per call. `storageSize`, `indexSizes`,
//! `totalIndexSize` and `totalSize` are bytes on disk: the compressed tables that hold
//! the collection's records and each index's entries (`Collection::disk_sizes`; writes
//! still in memory count once flushed), rounded up to WiredTiger's 4 KiB allocation
//! unit with one unit at least, as mongod reports a new collection's file.

use super::Ctx;
use crate::request::Fields;
use basalt_catalog::{CollectionStats, DiskSizes};
use basalt_error::{Error, ErrorCode, Result};
use bson::{doc, Bson, Document};

fn scale(fields: &Fields<'_>) -> Result<i64> {
    match fields.body.get("scale") {
        None | Some(bson::Bson::Null) => Ok(1),
        Some(value) => basalt_value::number::scale_factor(value).map(i64::from),
    }
}

/// A figure as mongod's `appendNumber` writes it: an int while it fits, a long past.
fn number(n: i64) -> Bson {
    i32::try_from(n).map_or(Bson::Int64(n), Bson::Int32)
}

fn average(stats: &CollectionStats) -> i64 {
    stats.data_size_bytes.checked_div(stats.count).unwrap_or(0) as i64
}

pub fn coll_stats(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let fields = Fields::new(body);
    let name = fields.collection()?;
    let scale = scale(&fields)?;
    let namespace = format!("{}.{name}", ctx.db);
    if let Some(set) = ctx
        .server
        .replication()
        .filter(|_| crate::local_oplog::is_oplog(ctx.db, name))
    {
        return crate::local_oplog::stats(&**ctx.server.catalog.engine(), set, scale);
    }
    let Some(collection) = ctx.server.catalog.get(ctx.db, name) else {
        if crate::timeseries::get(&ctx.server.catalog, ctx.db, name).is_some() {
            return time_series_stats(ctx, body, name);
        }
        return Err(Error::new(
            ErrorCode::NAMESPACE_NOT_FOUND,
            format!("Collection [{namespace}] not found."),
        ));
    };
    let stats = collection.stats()?;
    let meta = collection.meta();
    let disk = allocated(collection.disk_sizes());
    let mut index_sizes = Document::new();
    for (name, bytes) in &disk.indexes {
        index_sizes.insert(name.clone(), number(*bytes as i64 / scale));
    }
    let size = stats.data_size_bytes as i64 / scale;
    let storage_size = disk.records as i64 / scale;
    let index_size = disk.total_index_bytes() as i64 / scale;
    let mut reply = doc! {
        "ns": namespace,
        "count": number(stats.count as i64),
        "size": number(size),
        "avgObjSize": number(average(&stats)),
        "storageSize": number(storage_size),
        "totalIndexSize": number(index_size),
        "totalSize": number(storage_size + index_size),
        "indexSizes": index_sizes,
        "nindexes": meta.indexes.len() as i32,
        "scaleFactor": scale as i32,
        "capped": meta.capped().is_some(),
    };
    if let Some(bounds) = meta.capped() {
        if let Some(max) = bounds.max_documents {
            reply.insert("max", number(max as i64));
        }
        reply.insert("maxSize", number(bounds.size_bytes as i64 / scale));
    }
    Ok(reply)
}

/// A time-series collection's statistics: its buckets' sizes, and in `timeseries` its
/// bucket figures, as MongoDB reports them.
fn time_series_stats(ctx: &Ctx<'_>, body: &Document, name: &str) -> Result<Document> {
    let buckets = crate::timeseries::buckets_name(name);
    let mut of_buckets = body.clone();
    of_buckets.insert("collStats", buckets.clone());
    let mut stats = coll_stats(ctx, &of_buckets)?;
    let count = stats
        .get("count")
        .and_then(basalt_value::as_i64)
        .unwrap_or(0);
    let size = stats
        .get("size")
        .and_then(basalt_value::as_i64)
        .unwrap_or(0);
    stats.insert("ns", format!("{}.{name}", ctx.db));
    stats.insert(
        "timeseries",
        doc! {
            "bucketsNs": format!("{}.{buckets}", ctx.db),
            "bucketCount": count,
            "avgBucketSize": size.checked_div(count).unwrap_or(0),
        },
    );
    Ok(stats)
}

/// WiredTiger's allocation unit: its files grow by it.
const ALLOCATION_BYTES: u64 = 4096;

/// Disk sizes as mongod reports them: in whole allocation units, one at least.
fn allocated(mut sizes: DiskSizes) -> DiskSizes {
    let round = |bytes: u64| bytes.max(1).div_ceil(ALLOCATION_BYTES) * ALLOCATION_BYTES;
    sizes.records = round(sizes.records);
    for (_, bytes) in &mut sizes.indexes {
        *bytes = round(*bytes);
    }
    sizes
}

/// A database's bytes on disk: its collections' records and indexes.
pub fn database_disk_bytes(ctx: &Ctx<'_>, db: &str) -> i64 {
    ctx.server
        .catalog
        .collections_of(db)
        .iter()
        .map(|collection| {
            let disk = allocated(collection.disk_sizes());
            (disk.records + disk.total_index_bytes()) as i64
        })
        .sum()
}

pub fn db_stats(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let fields = Fields::new(body);
    let scale = scale(&fields)?;
    let collections = ctx.server.catalog.collections_of(ctx.db);
    let mut total = CollectionStats::default();
    let mut indexes = 0;
    let (mut storage_size, mut index_size) = (0, 0);
    for collection in &collections {
        let stats = collection.stats()?;
        total.count += stats.count;
        total.data_size_bytes += stats.data_size_bytes;
        indexes += collection.meta().indexes.len() as i64;
        let disk = allocated(collection.disk_sizes());
        storage_size += disk.records;
        index_size += disk.total_index_bytes();
    }
    let size = total.data_size_bytes as i64 / scale;
    let (storage_size, index_size) = (storage_size as i64 / scale, index_size as i64 / scale);
    Ok(doc! {
        "db": ctx.db,
        "collections": collections.len() as i64,
        "views": crate::views::list(&ctx.server.catalog, ctx.db)?.len() as i64,
        "objects": total.count as i64,
        "avgObjSize": average(&total) as f64,
        "dataSize": size as f64,
        "storageSize": storage_size as f64,
        "indexes": indexes,
        "indexSize": index_size as f64,
        "totalSize": (storage_size + index_size) as f64,
        // A long here, an int in collStats, as mongod has them.
        "scaleFactor": scale,
        "fsUsedSize": ctx.server.catalog.engine().disk_size_bytes() as f64,
    })
}
