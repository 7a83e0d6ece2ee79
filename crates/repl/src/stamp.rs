//! Puts that ride along with every write batch of the thread applying a log entry, so the
//! entry's id reaches the disk in the same atomic batch as the writes it caused.
//!
//! The write path does not know it runs under replication: the engine the catalog is
//! given is a [`StampedEngine`], which adds the stamp of the applying thread, if any, to
//! each batch it writes (only a replica set member's applier sets one). It also honours
//! the thread's [`basalt_storage::WriteScope`], on any server: a thread inside one (a
//! transaction's statement, an `applyOps` being applied) reads the scope's snapshot and
//! writes into it.

use basalt_error::Result;
use basalt_storage::{Durability, Engine, Snapshot, Space, WriteBatch};
use std::cell::RefCell;
use std::sync::Arc;

type Puts = Vec<(Vec<u8>, Vec<u8>)>;

/// The stamp of the applying thread, and whether a batch has carried it yet.
struct Stamp {
    puts: Puts,
    written: bool,
}

thread_local! {
    static STAMP: RefCell<Option<Stamp>> = const { RefCell::new(None) };
}

/// Runs `f` with `puts` added to every batch this thread writes meanwhile; says whether
/// any batch carried them.
pub(crate) fn with_stamp<T>(puts: Puts, f: impl FnOnce() -> T) -> (T, bool) {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            STAMP.with(|stamp| stamp.borrow_mut().take());
        }
    }
    STAMP.with(|stamp| {
        *stamp.borrow_mut() = Some(Stamp {
            puts,
            written: false,
        })
    });
    let reset = Reset;
    let outcome = f();
    let written = STAMP.with(|stamp| stamp.borrow().as_ref().is_some_and(|s| s.written));
    drop(reset);
    (outcome, written)
}

fn add_stamp(batch: &mut WriteBatch) {
    STAMP.with(|stamp| {
        if let Some(stamp) = stamp.borrow_mut().as_mut() {
            for (key, value) in &stamp.puts {
                batch.put(Space::Replication, key.clone(), value.clone());
            }
            stamp.written = true;
        }
    });
}

/// The engine the catalog writes through: the disk engine, honouring the thread's write
/// scope, with the applying thread's stamp (on a replica set member) added to its
/// batches.
pub struct StampedEngine {
    inner: Arc<dyn Engine>,
}

impl StampedEngine {
    pub fn new(inner: Arc<dyn Engine>) -> StampedEngine {
        StampedEngine { inner }
    }
}

impl Engine for StampedEngine {
    fn snapshot(&self) -> Box<dyn Snapshot> {
        match basalt_storage::write_scope() {
            Some(scope) => scope.snapshot(),
            None => self.inner.snapshot(),
        }
    }

    fn write(&self, mut batch: WriteBatch, durability: Durability) -> Result<()> {
        if let Some(scope) = basalt_storage::write_scope() {
            return scope.write(batch);
        }
        add_stamp(&mut batch);
        self.inner.write(batch, durability)
    }

    fn ingest(&self, mut batch: WriteBatch) -> Result<()> {
        if let Some(scope) = basalt_storage::write_scope() {
            return scope.write(batch);
        }
        add_stamp(&mut batch);
        self.inner.ingest(batch)
    }

    fn sync(&self) -> Result<()> {
        self.inner.sync()
    }

    fn disk_size_bytes(&self) -> u64 {
        self.inner.disk_size_bytes()
    }

    fn prefix_disk_bytes(&self, space: Space, prefix: &[u8]) -> u64 {
        self.inner.prefix_disk_bytes(space, prefix)
    }

    fn cache(&self) -> basalt_storage::CacheFigures {
        self.inner.cache()
    }
}
