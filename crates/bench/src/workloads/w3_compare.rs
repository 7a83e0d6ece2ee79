//! W3, field comparison: `{a, b}` doubles in [0, 1000) and the count where `a > b` and
//! `b < 5` — a question about two fields of one document, which users ask with `$where`
//! (JavaScript) or with `$expr` in `$match`.

use super::{rng, Dataset, Files, MongoOp, Query, Variant, WorkloadId};
use crate::answer::{Answer, Cell};
use basalt_error::Result;
use bson::doc;
use rand::RngExt;
use std::io::Write;
use std::path::Path;

const B_BELOW: f64 = 5.0;

pub(crate) fn generate(dir: &Path, size: u64, seed: u64) -> Result<Dataset> {
    let mut rng = rng(seed, WorkloadId::W3, 0);
    let mut files = Files::create(dir, "w3", false)?;
    let mut count = 0i64;
    for i in 0..size {
        let a: f64 = rng.random_range(0.0..1000.0);
        let b: f64 = rng.random_range(0.0..1000.0);
        files.record(|out, _| write!(out, r#"{{"_id":{i},"a":{a:?},"b":{b:?}}}"#))?;
        if a > b && b < B_BELOW {
            count += 1;
        }
    }
    let (import_file, peer_file, bytes, checksum) = files.finish()?;
    let expected = || Answer::Rows(vec![vec![Cell::Int(count)]]);
    Ok(Dataset {
        id: WorkloadId::W3,
        title: "field comparison",
        docs: size,
        import_file,
        peer_file,
        bytes,
        checksum,
        // For the hybrid `$where` below; the other two queries scan the collection.
        indexes: vec![doc! {"b": 1}],
        peer_setup: Vec::new(),
        time_series: None,
        queries: vec![
            Query {
                name: "$match+$expr count",
                scanned_docs: Some(size),
                variants: vec![Variant {
                    mongo: MongoOp::AggregateScan(vec![
                        doc! {"$match": {"b": {"$lt": B_BELOW}, "$expr": {"$gt": ["$a", "$b"]}}},
                        doc! {"$count": "n"},
                    ]),
                    sql: Some(format!(
                        "SELECT count(*) FROM $table WHERE $(b) < {B_BELOW:?} AND $(a) > $(b)"
                    )),
                    expected: expected(),
                }],
            },
            Query {
                name: "$where count",
                scanned_docs: Some(size),
                variants: vec![Variant {
                    mongo: MongoOp::Count(
                        doc! {"$where": format!("this.a > this.b && this.b < {B_BELOW:?}")},
                    ),
                    // The same question as the query above: the peers answer it once.
                    sql: None,
                    expected: expected(),
                }],
            },
            Query {
                name: "hybrid $where",
                // The index on b narrows the scan to b < 5 first.
                scanned_docs: None,
                variants: vec![Variant {
                    mongo: MongoOp::Count(
                        doc! {"b": {"$lt": B_BELOW}, "$where": "this.a > this.b"},
                    ),
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
    fn values_are_doubles_in_range_and_the_count_matches() {
        let dir = tempfile::tempdir().expect("dir");
        let dataset = generate(dir.path(), 20_000, 3).expect("generate");
        let docs = assert_importable(&dataset);
        let mut count = 0;
        for doc in &docs {
            let (a, b) = (doc.get_f64("a").expect("a"), doc.get_f64("b").expect("b"));
            assert!((0.0..1000.0).contains(&a) && (0.0..1000.0).contains(&b));
            if a > b && b < B_BELOW {
                count += 1;
            }
        }
        assert!(count > 0);
        assert_eq!(
            dataset.queries[0].variants[0].expected,
            Answer::Rows(vec![vec![Cell::Int(count)]])
        );
    }
}
