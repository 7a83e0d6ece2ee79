//! A collection's operation latencies, as `$collStats: {latencyStats: {}}` reports them:
//! for reads, writes and other commands on the collection, the operations counted
//! since the server opened it, their total time in microseconds, and (with
//! `histograms: true`) how many fell in each latency bucket.
//!
//! Buckets are powers of two of microseconds (MongoDB splits the larger ones finer); a
//! histogram lists only buckets that counted something, each by its lower bound.

use bson::{doc, Bson, Document};
use std::sync::atomic::{AtomicU64, Ordering};

/// What kind of operation a command on a collection is, for its latency figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OperationClass {
    /// find, getMore, aggregate, count, distinct.
    Read,
    /// insert, update, delete, findAndModify.
    Write,
    /// Every other command naming the collection (createIndexes, collMod, ...).
    Command,
}

/// Buckets: [0, 2), [2, 4), [4, 8), ... up to 2^40 µs and beyond.
const BUCKETS: usize = 41;

/// One operation class's figures.
#[derive(Debug)]
struct Class {
    ops: AtomicU64,
    micros: AtomicU64,
    histogram: [AtomicU64; BUCKETS],
}

impl Default for Class {
    fn default() -> Class {
        Class {
            ops: AtomicU64::new(0),
            micros: AtomicU64::new(0),
            histogram: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl Class {
    fn record(&self, micros: u64) {
        self.ops.fetch_add(1, Ordering::Relaxed);
        self.micros.fetch_add(micros, Ordering::Relaxed);
        self.histogram[bucket(micros)].fetch_add(1, Ordering::Relaxed);
    }

    fn to_document(&self, histograms: bool) -> Document {
        let mut out = doc! {
            "latency": self.micros.load(Ordering::Relaxed) as i64,
            "ops": self.ops.load(Ordering::Relaxed) as i64,
        };
        if histograms {
            let buckets: Vec<Bson> = self
                .histogram
                .iter()
                .enumerate()
                .filter_map(|(i, count)| {
                    let count = count.load(Ordering::Relaxed);
                    let lower = if i == 0 { 0 } else { 1_i64 << i };
                    (count > 0)
                        .then(|| Bson::Document(doc! {"micros": lower, "count": count as i64}))
                })
                .collect();
            out.insert("histogram", buckets);
        }
        out
    }
}

/// The bucket of a latency: 0 for [0, 2), else the power of two below it.
fn bucket(micros: u64) -> usize {
    let log = (u64::BITS - micros.leading_zeros()).saturating_sub(1) as usize;
    log.min(BUCKETS - 1)
}

/// Latencies of the operations on one collection.
#[derive(Debug, Default)]
pub struct LatencyStats {
    reads: Class,
    writes: Class,
    commands: Class,
}

impl LatencyStats {
    pub fn record(&self, class: OperationClass, micros: u64) {
        match class {
            OperationClass::Read => self.reads.record(micros),
            OperationClass::Write => self.writes.record(micros),
            OperationClass::Command => self.commands.record(micros),
        }
    }

    /// The `latencyStats` section of `$collStats` (transactions: none, Basalt has none).
    pub fn to_document(&self, histograms: bool) -> Document {
        doc! {
            "reads": self.reads.to_document(histograms),
            "writes": self.writes.to_document(histograms),
            "commands": self.commands.to_document(histograms),
            "transactions": Class::default().to_document(histograms),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_powers_of_two() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(1), 0);
        assert_eq!(bucket(2), 1);
        assert_eq!(bucket(3), 1);
        assert_eq!(bucket(1024), 10);
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn figures_add_up_per_class() {
        let stats = LatencyStats::default();
        stats.record(OperationClass::Read, 3);
        stats.record(OperationClass::Read, 100);
        stats.record(OperationClass::Write, 7);
        let out = stats.to_document(true);
        let reads = out.get_document("reads").unwrap();
        assert_eq!(reads.get_i64("ops").unwrap(), 2);
        assert_eq!(reads.get_i64("latency").unwrap(), 103);
        assert_eq!(
            reads.get_array("histogram").unwrap(),
            &vec![
                Bson::Document(doc! {"micros": 2_i64, "count": 1_i64}),
                Bson::Document(doc! {"micros": 64_i64, "count": 1_i64}),
            ]
        );
        assert_eq!(
            out.get_document("writes").unwrap().get_i64("ops").unwrap(),
            1
        );
        assert_eq!(
            out.get_document("commands")
                .unwrap()
                .get_i64("ops")
                .unwrap(),
            0
        );
        assert!(stats
            .to_document(false)
            .get_document("reads")
            .unwrap()
            .get("histogram")
            .is_none());
    }
}
