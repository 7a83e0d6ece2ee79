//! Counters reported by serverStatus: connections, operations and the memory connections
//! hold.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Default)]
pub struct Stats {
    pub connections: ConnectionStats,
    pub insert: AtomicU64,
    pub query: AtomicU64,
    pub update: AtomicU64,
    pub delete: AtomicU64,
    pub getmore: AtomicU64,
    pub command: AtomicU64,
    /// serverStatus's `network`: bytes of messages received and sent, and messages
    /// received.
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    pub requests: AtomicU64,
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
