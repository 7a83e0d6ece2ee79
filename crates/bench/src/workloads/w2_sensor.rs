//! W2, sensor statistics: wide documents (40 fields, about 1.4 KB of BSON) from a fleet
//! of devices, and min/max/sum/count of one reading over all of them — the query where the
//! cost is reading big documents to use one field of them.

use super::{rng, Dataset, Files, MongoOp, Query, Variant, WorkloadId};
use crate::answer::{Answer, Cell};
use basalt_error::Result;
use bson::doc;
use rand::RngExt;
use std::io::Write;
use std::path::Path;

/// Readings per document; with the five descriptive fields and `_id`, 40 fields.
const CHANNELS: usize = 34;
/// The reading the query aggregates.
const QUERIED_CHANNEL: usize = 7;
const SITES: [&str; 8] = [
    "plant-north",
    "plant-south",
    "depot-east",
    "depot-west",
    "harbour",
    "airfield",
    "quarry",
    "substation",
];
const STATUSES: [&str; 4] = ["OK", "OK", "OK", "DEGRADED"];

/// W2 runs on 0.3 × size documents: 300 k of them at --size 1000000, as in the field.
pub(crate) fn docs_for(size: u64) -> u64 {
    (size * 3 / 10).max(1)
}

fn channel_name(channel: usize) -> String {
    format!("sensor_channel_{channel:02}_reading_mv")
}

pub(crate) fn generate(dir: &Path, size: u64, seed: u64) -> Result<Dataset> {
    let docs = docs_for(size);
    let mut rng = rng(seed, WorkloadId::W2, 0);
    let mut files = Files::create(dir, "w2", false)?;
    let names: Vec<String> = (0..CHANNELS).map(channel_name).collect();
    let (mut min, mut max, mut sum) = (f64::INFINITY, f64::NEG_INFINITY, 0.0);
    let mut readings = [0f64; CHANNELS];
    for i in 0..docs {
        for (channel, reading) in readings.iter_mut().enumerate() {
            *reading = channel as f64 * 10.0 + rng.random_range(-5.0..5.0);
        }
        let device: u32 = rng.random_range(0..1000);
        let site = SITES[rng.random_range(0..SITES.len())];
        let status = STATUSES[rng.random_range(0..STATUSES.len())];
        files.record(|out, _| {
            write!(
                out,
                r#"{{"_id":{i},"device":"sensor-{device:05}","site":"{site}","firmware":"v2.{}.{}","status":"{status}","recorded_at":{}"#,
                device % 4,
                device % 7,
                1_600_000_000 + i,
            )?;
            for (name, value) in names.iter().zip(&readings) {
                write!(out, r#","{name}":{value:?}"#)?;
            }
            out.push(b'}');
            Ok(())
        })?;
        let x = readings[QUERIED_CHANNEL];
        min = min.min(x);
        max = max.max(x);
        sum += x;
    }
    let (import_file, peer_file, bytes, checksum) = files.finish()?;
    let field = channel_name(QUERIED_CHANNEL);
    let path = format!("${field}");
    let expected = || {
        Answer::Rows(vec![vec![
            Cell::Null,
            Cell::Float(min),
            Cell::Float(max),
            Cell::Float(sum),
            Cell::Int(docs as i64),
        ]])
    };
    Ok(Dataset {
        id: WorkloadId::W2,
        title: "sensor stats",
        docs,
        import_file,
        peer_file,
        bytes,
        checksum,
        indexes: Vec::new(),
        peer_setup: Vec::new(),
        time_series: None,
        queries: vec![
        Query {
            name: "min/max/sum/count",
            scanned_docs: Some(docs),
            variants: vec![Variant {
                mongo: MongoOp::Aggregate(vec![doc! {"$group": {
                    "_id": null,
                    "min": {"$min": &path},
                    "max": {"$max": &path},
                    "sum": {"$sum": &path},
                    "count": {"$sum": 1},
                }}]),
                sql: Some(format!(
                    "SELECT NULL, min($({field})), max($({field})), sum($({field})), count(*) FROM $table"
                )),
                expected: expected(),
            }],
        },
        Query {
            name: "mapReduce",
            scanned_docs: Some(docs),
            variants: vec![Variant {
                mongo: MongoOp::MapReduce {
                    map: format!(
                        "function() {{ var x = this.{field}; emit(null, {{min: x, max: x, sum: x, count: 1}}); }}"
                    ),
                    reduce: "function(key, values) { var r = {min: Infinity, max: -Infinity, sum: 0, count: 0}; \
                             values.forEach(function(v) { r.min = Math.min(r.min, v.min); r.max = Math.max(r.max, v.max); \
                             r.sum += v.sum; r.count += v.count; }); return r; }"
                        .to_string(),
                },
                // The same question as the query above: the peers answer it once.
                sql: None,
                expected: expected(),
            }],
        },
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::tests::{assert_deterministic, assert_importable};

    #[test]
    fn same_seed_same_records() {
        assert_deterministic(|dir, seed| generate(dir, 1000, seed));
    }

    #[test]
    fn documents_have_40_fields_of_about_1_4_kb() {
        let dir = tempfile::tempdir().expect("dir");
        let dataset = generate(dir.path(), 100, 1).expect("generate");
        let docs = assert_importable(&dataset);
        assert_eq!(docs.len(), 30);
        for doc in &docs {
            assert_eq!(doc.len(), 40);
            let size = doc.to_vec().expect("bson").len();
            assert!((1300..1500).contains(&size), "{size} bytes");
        }
    }
}
