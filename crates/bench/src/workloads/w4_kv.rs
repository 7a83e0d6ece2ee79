//! W4, key-value: 32-character keys and 100–1900-byte ASCII values, put by 20 client
//! threads and then read back by `_id` in another order; throughput and the latency
//! percentiles of each phase. Every value read is compared with the one written. Then
//! the puts again, into a collection with a column store index: what keeping one costs
//! a write.
//!
//! Keys and values are functions of the seed and the operation's number, so the reading
//! threads regenerate what to expect instead of keeping a gigabyte of values around.

use super::{rng, WorkloadId};
use crate::io_error;
use crate::measure::Samples;
use basalt_error::{Error, ErrorCode, Result};
use bson::{doc, Document};
use mongodb::{Collection, Database};
use rand::RngExt;
use std::future::IntoFuture;
use std::time::{Duration, Instant};

pub(crate) const THREADS: usize = 20;
pub(crate) const COLLECTION: &str = "w4";
const KEY_LEN: usize = 32;
const VALUE_LEN_MIN: usize = 100;
const VALUE_LEN_MAX: usize = 1900;

/// W4 puts (and gets) 0.1 × size keys: 100 k of each at --size 1000000.
pub(crate) fn ops_for(size: u64) -> u64 {
    (size / 10).max(THREADS as u64)
}

/// One phase's figures.
#[derive(Debug)]
pub(crate) struct Phase {
    pub ops: u64,
    pub elapsed: Duration,
    pub latencies: Samples,
}

impl Phase {
    pub(crate) fn ops_per_second(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

#[derive(Debug)]
pub(crate) struct KvResult {
    pub puts: Phase,
    pub gets: Phase,
    /// The puts into a collection with a column store index.
    pub column_store_puts: Phase,
    pub value_bytes: u64,
}

/// Key number `i`: 32 lowercase hex digits.
fn key(seed: u64, i: u64) -> String {
    let mut r = rng(seed, WorkloadId::W4, i);
    let (a, b): (u64, u64) = (r.random(), r.random());
    let key = format!("{a:016x}{b:016x}");
    debug_assert_eq!(key.len(), KEY_LEN);
    key
}

/// The value of key number `i`: printable ASCII of 100–1900 bytes.
fn value(seed: u64, i: u64) -> String {
    let mut r = rng(seed, WorkloadId::W4, i ^ (1 << 31));
    let len = r.random_range(VALUE_LEN_MIN..=VALUE_LEN_MAX);
    (0..len)
        .map(|_| char::from(r.random_range(b' '..=b'~')))
        .collect()
}

/// The order of the reads: a stride through all keys, coprime with their count, so the
/// reads do not follow the writes.
fn read_order(i: u64, ops: u64) -> u64 {
    let stride = [1_000_003u64, 999_983, 7919]
        .into_iter()
        .find(|s| gcd(*s, ops) == 1)
        .unwrap_or(1);
    (i as u128 * stride as u128 % ops as u128) as u64
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Puts `ops` keys, then gets them all, from [`THREADS`] threads blocking on `runtime`;
/// then puts them again into a new collection with a column store index.
pub(crate) fn run(
    db: &Database,
    runtime: &tokio::runtime::Handle,
    ops: u64,
    seed: u64,
) -> Result<KvResult> {
    let collection: Collection<Document> = db.collection(COLLECTION);
    let puts = put_all(db, runtime, ops, seed, None)?;
    let gets = phase(ops, |n| {
        let i = read_order(n, ops);
        let (key, expected) = (key(seed, i), value(seed, i));
        let started = Instant::now();
        let found = runtime
            .block_on(collection.find_one(doc! {"_id": &key}).into_future())
            .map_err(|e| io_error(format!("get {i}"), e))?;
        let elapsed = started.elapsed();
        match found.as_ref().and_then(|d| d.get_str("value").ok()) {
            Some(v) if v == expected => Ok(elapsed),
            _ => Err(Error::new(
                ErrorCode::OPERATION_FAILED,
                format!("get {key} did not return the value put"),
            )),
        }
    })?;
    let column_store = doc! {"$**": "columnstore"};
    let column_store_puts = put_all(db, runtime, ops, seed, Some(column_store))?;
    Ok(KvResult {
        puts,
        gets,
        column_store_puts,
        value_bytes: (0..ops).map(|i| value(seed, i).len() as u64).sum(),
    })
}

/// Puts the `ops` keys into W4's collection, made anew (with `index`, its keys).
fn put_all(
    db: &Database,
    runtime: &tokio::runtime::Handle,
    ops: u64,
    seed: u64,
    index: Option<Document>,
) -> Result<Phase> {
    let collection: Collection<Document> = db.collection(COLLECTION);
    runtime
        .block_on(collection.drop().into_future())
        .map_err(|e| io_error("cannot drop w4", e))?;
    if let Some(keys) = index {
        let create = doc! {"createIndexes": COLLECTION, "indexes": [{"key": keys, "name": "w4"}]};
        runtime
            .block_on(db.run_command(create).into_future())
            .map_err(|e| io_error("cannot index w4", e))?;
    }
    phase(ops, |i| {
        let document = doc! {"_id": key(seed, i), "value": value(seed, i)};
        let started = Instant::now();
        runtime
            .block_on(collection.insert_one(document).into_future())
            .map_err(|e| io_error(format!("put {i}"), e))?;
        Ok(started.elapsed())
    })
}

/// Runs operation 0..ops, thread t taking t, t + THREADS, ...; collects every latency.
fn phase(ops: u64, op: impl Fn(u64) -> Result<Duration> + Sync) -> Result<Phase> {
    let started = Instant::now();
    let per_thread: Vec<Result<Vec<Duration>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS as u64)
            .map(|t| {
                let op = &op;
                scope.spawn(move || {
                    (t..ops)
                        .step_by(THREADS)
                        .map(op)
                        .collect::<Result<Vec<Duration>>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::internal("a W4 client thread panicked")))
            })
            .collect()
    });
    let elapsed = started.elapsed();
    let mut latencies = Vec::with_capacity(ops as usize);
    for thread in per_thread {
        latencies.extend(thread?);
    }
    Ok(Phase {
        ops,
        elapsed,
        latencies: Samples::new(latencies),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn keys_and_values_are_deterministic_and_sized() {
        assert_eq!(key(1, 5), key(1, 5));
        assert_ne!(key(1, 5), key(2, 5));
        assert_ne!(key(1, 5), key(1, 6));
        assert_eq!(value(1, 5), value(1, 5));
        for i in 0..200 {
            assert_eq!(key(9, i).len(), KEY_LEN);
            let v = value(9, i);
            assert!((VALUE_LEN_MIN..=VALUE_LEN_MAX).contains(&v.len()));
            assert!(v.bytes().all(|b| (b' '..=b'~').contains(&b)));
        }
    }

    #[test]
    fn the_read_order_visits_every_key_once() {
        for ops in [20, 1000, 1_000_003 * 2, 12_345] {
            let n = ops.min(5000);
            let seen: HashSet<u64> = (0..ops)
                .take(n as usize)
                .map(|i| read_order(i, ops))
                .collect();
            assert_eq!(seen.len() as u64, n, "{ops}");
            assert!(seen.iter().all(|&k| k < ops));
        }
    }
}
