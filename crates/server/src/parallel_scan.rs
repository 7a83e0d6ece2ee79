//! Collection scans on several threads. A collection's record ids are cut into
//! contiguous ranges; worker threads (the command's own thread and `workers - 1` more)
//! take the ranges in turn and each range's result comes back in record order, so the
//! caller can merge them as if one thread had scanned everything.
//!
//! All workers read one snapshot, taken before the ranges are cut: a record inserted
//! meanwhile has a greater id than any range ends at, and would be invisible anyway.
//! A failing range stops the others from taking new ranges; its error is the result.

use basalt_error::{Error, Result};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Ranges each worker gets on average: more than one, so a worker whose ranges hold
/// fewer matches (or fewer records, after deletes) takes over some of another's.
const RANGES_PER_WORKER: u64 = 4;

/// Below this many records per range, splitting costs more than it saves.
const MIN_RECORDS_PER_RANGE: u64 = 16_384;

/// Records `after` (exclusive) up to `last` (inclusive), by record id.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RecordRange {
    pub after: Option<u64>,
    pub last: u64,
}

/// The ranges a scan of records `1..=high_water` is cut into for `workers` threads;
/// the last range is open-ended.
fn record_ranges(high_water: u64, workers: usize) -> Vec<RecordRange> {
    let wanted = (workers as u64 * RANGES_PER_WORKER).max(1);
    let count = wanted.min(high_water / MIN_RECORDS_PER_RANGE).max(1);
    let size = high_water / count;
    (0..count)
        .map(|i| RecordRange {
            after: (i > 0).then(|| i * size),
            last: if i + 1 == count {
                u64::MAX
            } else {
                (i + 1) * size
            },
        })
        .collect()
}

/// How many ranges a scan of records `1..=high_water` on `workers` threads takes.
pub fn range_count(high_water: u64, workers: usize) -> usize {
    record_ranges(high_water, workers).len()
}

/// Runs `work` over every range of records `1..=high_water` on up to `workers` threads
/// and returns the results in record order.
pub fn run<T: Send>(
    high_water: u64,
    workers: usize,
    work: &(dyn Fn(RecordRange) -> Result<T> + Sync),
) -> Result<Vec<T>> {
    run_ranges(&record_ranges(high_water, workers), workers, work)
}

/// Runs `work` over each of `ranges` on up to `workers` threads and returns the results
/// in the order of `ranges`.
pub fn run_ranges<T: Send>(
    ranges: &[RecordRange],
    workers: usize,
    work: &(dyn Fn(RecordRange) -> Result<T> + Sync),
) -> Result<Vec<T>> {
    let workers = workers.clamp(1, ranges.len().max(1));
    if workers == 1 {
        return ranges.iter().map(|range| work(*range)).collect();
    }
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let results: Vec<Mutex<Option<Result<T>>>> = ranges.iter().map(|_| Mutex::new(None)).collect();
    let take_ranges = || {
        while !failed.load(Ordering::Relaxed) {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(range) = ranges.get(i) else { break };
            let result = work(*range);
            failed.fetch_or(result.is_err(), Ordering::Relaxed);
            *results[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
        }
    };
    // Scripts a worker runs (a `$where`) keep the command's deadline and stored functions.
    let scripts = basalt_js::CommandScripts::current();
    std::thread::scope(|scope| {
        for _ in 1..workers {
            scope.spawn(|| scripts.enter(take_ranges));
        }
        take_ranges();
    });
    let mut results: Vec<Option<Result<T>>> = results
        .into_iter()
        .map(|slot| slot.into_inner().unwrap_or_else(|e| e.into_inner()))
        .collect();
    if let Some(error) = results.iter_mut().find_map(|r| match r {
        Some(Err(_)) => r.take().and_then(|r| r.err()),
        _ => None,
    }) {
        return Err(error);
    }
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(Error::internal("a scan range was not scanned"))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_every_record_once_in_order() {
        for (high_water, workers) in [(0, 2), (10, 2), (1_000_000, 2), (1_000_003, 3), (50_000, 8)]
        {
            let ranges = record_ranges(high_water, workers);
            assert_eq!(ranges[0].after, None);
            assert_eq!(ranges.last().unwrap().last, u64::MAX);
            for pair in ranges.windows(2) {
                assert_eq!(pair[1].after, Some(pair[0].last));
            }
        }
        assert_eq!(record_ranges(1_000_000, 2).len(), 8);
        assert_eq!(record_ranges(20_000, 2).len(), 1);
    }

    #[test]
    fn results_come_back_in_order_and_errors_win() {
        let sums = run(1_000_000, 2, &|r| Ok(r.after.unwrap_or(0))).unwrap();
        let mut sorted = sums.clone();
        sorted.sort();
        assert_eq!(sums, sorted);
        assert_eq!(sums.len(), 8);
        let err = run(1_000_000, 2, &|r| {
            if r.after == Some(250_000) {
                Err(Error::internal("boom"))
            } else {
                Ok(())
            }
        });
        assert_eq!(err.unwrap_err().message, "boom");
    }
}
