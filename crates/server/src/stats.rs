//! Counters reported by serverStatus and `/metrics`: connections, operations, network,
//! the memory connections hold and each command's latencies.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Default)]
pub struct Stats {
    pub connections: ConnectionStats,
    /// serverStatus's `opcounters`: clients' operations.
    pub operations: OpCounters,
    /// serverStatus's `opcountersRepl`: the operations a secondary applied from its
    /// primary (zero on a primary and a standalone, as in mongod).
    pub replicated: OpCounters,
    /// serverStatus's `network`: bytes of messages received and sent, and messages
    /// received.
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    pub requests: AtomicU64,
    /// How long each command took.
    pub latencies: CommandLatencies,
    /// serverStatus's `asserts`: the commands that answered with an error.
    pub asserts: Asserts,
}

/// Errors as mongod's `asserts` counts them: `regular` for internal errors (mongod's
/// failed invariants and internal assertions), `user` for the others a command answers
/// with (mongod's user assertions); Basalt has no warning or message assertions, and its
/// 64-bit counters do not roll over.
#[derive(Default)]
pub struct Asserts {
    pub regular: AtomicU64,
    pub user: AtomicU64,
}

impl Asserts {
    /// Counts a command's error.
    pub fn count(&self, error: &basalt_error::Error) {
        let counter = match error.code {
            basalt_error::ErrorCode::INTERNAL_ERROR => &self.regular,
            _ => &self.user,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// serverStatus's `asserts`.
    pub fn document(&self) -> bson::Document {
        bson::doc! {
            "regular": Stats::get(&self.regular),
            "warning": 0_i64,
            "msg": 0_i64,
            "user": Stats::get(&self.user),
            "tripwire": 0_i64,
            "rollovers": 0_i64,
        }
    }
}

/// What serverStatus's `connections` and `basalt.connections` report.
#[derive(Default)]
pub struct ConnectionStats {
    /// Open connections; a slot is taken before the connection's thread starts.
    pub current: AtomicU64,
    pub total_created: AtomicU64,
    /// Connections closed at once because the limit was reached.
    pub rejected: AtomicU64,
    /// Connections running a command.
    pub active: AtomicU64,
    /// Connections waiting in an awaitable hello.
    pub awaiting_topology_changes: AtomicU64,
    /// Bytes held by the connections' read buffers and the replies being sent.
    pub buffer_bytes: AtomicU64,
}

impl ConnectionStats {
    /// Takes a connection slot unless `limit` are taken: the number of connections with
    /// this one, or `Err` with the number open.
    pub fn open(&self, limit: u64) -> Result<u64, u64> {
        self.current
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < limit).then_some(n + 1)
            })
            .map(|before| {
                self.total_created.fetch_add(1, Ordering::Relaxed);
                before + 1
            })
    }

    /// Gives a slot back: the number of connections left.
    pub fn close(&self) -> u64 {
        self.current.fetch_sub(1, Ordering::Relaxed) - 1
    }
}

/// Operations by type, as serverStatus counts them (an insert per document, an update
/// or delete per statement).
#[derive(Default)]
pub struct OpCounters {
    pub insert: AtomicU64,
    pub query: AtomicU64,
    pub update: AtomicU64,
    pub delete: AtomicU64,
    pub getmore: AtomicU64,
    pub command: AtomicU64,
}

impl OpCounters {
    /// The counters by name, in serverStatus's order.
    pub fn by_type(&self) -> [(&'static str, &AtomicU64); 6] {
        [
            ("insert", &self.insert),
            ("query", &self.query),
            ("update", &self.update),
            ("delete", &self.delete),
            ("getmore", &self.getmore),
            ("command", &self.command),
        ]
    }

    /// serverStatus's `opcounters` or `opcountersRepl` (the status page's too).
    pub fn document(&self) -> bson::Document {
        self.by_type()
            .into_iter()
            .map(|(name, counter)| (name.to_string(), bson::Bson::Int64(Stats::get(counter))))
            .collect()
    }
}

impl Stats {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(counter: &AtomicU64) -> i64 {
        counter.load(Ordering::Relaxed) as i64
    }
}

/// Adds `n` to a counter while it lives: one for a connection running a command or
/// waiting for a topology change, a reply's bytes while it is sent.
pub struct Counted<'a> {
    counter: &'a AtomicU64,
    n: u64,
}

impl<'a> Counted<'a> {
    pub fn new(counter: &'a AtomicU64, n: u64) -> Counted<'a> {
        counter.fetch_add(n, Ordering::Relaxed);
        Counted { counter, n }
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.counter.fetch_sub(self.n, Ordering::Relaxed);
    }
}

/// This process's resident and virtual memory in bytes, from /proc.
pub fn process_memory_bytes() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    (field("VmRSS:"), field("VmSize:"))
}

/// Upper bounds (microseconds) of the command latency histograms' buckets, as
/// Prometheus' `le` labels; a last bucket takes the rest.
pub const LATENCY_BUCKETS_MICROS: [u64; 14] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 1_000_000,
    5_000_000, 10_000_000,
];

/// How long one command took, every time it ran.
#[derive(Default)]
pub struct LatencyHistogram {
    /// Counts per bucket (not cumulative), the last for what no bound holds.
    buckets: [AtomicU64; LATENCY_BUCKETS_MICROS.len() + 1],
    count: AtomicU64,
    sum_micros: AtomicU64,
}

impl LatencyHistogram {
    pub fn record(&self, micros: u64) {
        let bucket = LATENCY_BUCKETS_MICROS
            .iter()
            .position(|bound| micros <= *bound)
            .unwrap_or(LATENCY_BUCKETS_MICROS.len());
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
    }

    /// The cumulative counts per bucket bound (the last is everything), the count and
    /// the total time in microseconds.
    pub fn snapshot(&self) -> (Vec<u64>, u64, u64) {
        let mut cumulative = 0;
        let buckets = self
            .buckets
            .iter()
            .map(|b| {
                cumulative += b.load(Ordering::Relaxed);
                cumulative
            })
            .collect();
        (
            buckets,
            self.count.load(Ordering::Relaxed),
            self.sum_micros.load(Ordering::Relaxed),
        )
    }
}

/// A latency histogram per command name (`/metrics`, the status page).
#[derive(Default)]
pub struct CommandLatencies {
    by_command: parking_lot::RwLock<
        std::collections::BTreeMap<&'static str, std::sync::Arc<LatencyHistogram>>,
    >,
}

impl CommandLatencies {
    pub fn record(&self, command: &'static str, micros: u64) {
        let known = self.by_command.read().get(command).cloned();
        let histogram = match known {
            Some(histogram) => histogram,
            None => self.by_command.write().entry(command).or_default().clone(),
        };
        histogram.record(micros);
    }

    /// Every command that ran, by name.
    pub fn all(&self) -> Vec<(&'static str, std::sync::Arc<LatencyHistogram>)> {
        self.by_command
            .read()
            .iter()
            .map(|(name, histogram)| (*name, histogram.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_count_into_cumulative_buckets() {
        let latencies = CommandLatencies::default();
        for micros in [50, 100, 101, 20_000_000] {
            latencies.record("find", micros);
        }
        let all = latencies.all();
        let (buckets, count, sum) = all[0].1.snapshot();
        assert_eq!(all[0].0, "find");
        assert_eq!((count, sum), (4, 20_000_251));
        assert_eq!(buckets[0], 2); // <= 100 µs
        assert_eq!(buckets[1], 3); // <= 250 µs
        assert_eq!(buckets[LATENCY_BUCKETS_MICROS.len() - 1], 3);
        assert_eq!(buckets[LATENCY_BUCKETS_MICROS.len()], 4);
    }
}
