//! Decoded chunks kept between queries, so a repeated analysis reads Arrow arrays in
//! memory rather than decoding stored bytes again. Entries are keyed by the row group's
//! generation, which a rebuild changes: a stale chunk is never found, only evicted.
//! Bounded in bytes (the server gives it part of `--cacheSizeGB`); the oldest entries
//! leave first.

use crate::chunk::ColumnChunk;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// (index id, row group, generation, path).
type Key = (u64, u64, i64, String);

#[derive(Debug)]
pub struct ChunkCache {
    limit_bytes: AtomicUsize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    chunks: HashMap<Key, Arc<ColumnChunk>>,
    order: VecDeque<Key>,
    bytes: usize,
}

impl ChunkCache {
    pub fn new(limit_bytes: usize) -> ChunkCache {
        ChunkCache {
            limit_bytes: AtomicUsize::new(limit_bytes),
            inner: Mutex::new(Inner::default()),
        }
    }

    /// Sets the bound, evicting the oldest chunks down to it.
    pub fn set_limit_bytes(&self, limit_bytes: usize) {
        self.limit_bytes.store(limit_bytes, Ordering::Relaxed);
        self.inner.lock().evict_down_to(limit_bytes);
    }

    pub fn get(
        &self,
        index: u64,
        group: u64,
        generation: i64,
        path: &str,
    ) -> Option<Arc<ColumnChunk>> {
        let key = (index, group, generation, path.to_string());
        self.inner.lock().chunks.get(&key).cloned()
    }

    pub fn insert(
        &self,
        index: u64,
        group: u64,
        generation: i64,
        path: &str,
        chunk: Arc<ColumnChunk>,
    ) {
        let size = chunk.memory_bytes();
        let limit_bytes = self.limit_bytes.load(Ordering::Relaxed);
        if size > limit_bytes {
            return;
        }
        let key = (index, group, generation, path.to_string());
        let mut inner = self.inner.lock();
        if inner.chunks.contains_key(&key) {
            return;
        }
        inner.evict_down_to(limit_bytes - size);
        inner.bytes += size;
        inner.order.push_back(key.clone());
        inner.chunks.insert(key, chunk);
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.inner.lock().bytes
    }
}

impl Inner {
    /// Drops the oldest chunks until at most `bytes` are held.
    fn evict_down_to(&mut self, bytes: usize) {
        while self.bytes > bytes {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            if let Some(gone) = self.chunks.remove(&oldest) {
                self.bytes -= gone.memory_bytes();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunk::Kind;
    use bson::Bson;

    #[test]
    fn the_oldest_chunks_leave_first_within_the_bound() {
        let chunk = || {
            let cells = vec![Some(&Bson::Int32(1)); 1000];
            Arc::new(ColumnChunk::build(Kind::Int32, &cells).unwrap())
        };
        let one = chunk().memory_bytes();
        let cache = ChunkCache::new(one * 2);
        cache.insert(1, 0, 0, "a", chunk());
        cache.insert(1, 0, 0, "b", chunk());
        cache.insert(1, 0, 0, "c", chunk());
        assert!(cache.get(1, 0, 0, "a").is_none());
        assert!(cache.get(1, 0, 0, "b").is_some() && cache.get(1, 0, 0, "c").is_some());
        assert!(cache.get(1, 0, 1, "c").is_none());
        assert!(cache.bytes() <= one * 2);
        cache.set_limit_bytes(one);
        assert!(cache.get(1, 0, 0, "b").is_none() && cache.get(1, 0, 0, "c").is_some());
        assert_eq!(cache.bytes(), one);
    }
}
