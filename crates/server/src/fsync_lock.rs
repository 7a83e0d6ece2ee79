//! The fsync lock (`{fsync: 1, lock: true}` … `{fsyncUnlock: 1}`): while it is held no
//! command that writes runs, so the files under `--dbpath` stay a consistent copy that
//! a backup can take, as with mongod. Locks nest and are the server's, not a
//! connection's: each `fsyncUnlock` releases one, from any connection.
//!
//! Writers pass through [`FsyncLock::admit_write`], which waits while the lock is held
//! and then holds a shared guard for the command's duration; taking the lock waits for
//! the guards of writes already running, then makes the engine's files durable.

use crate::exec::Deadline;
use basalt_error::Result;
use basalt_storage::Engine;
use parking_lot::{Condvar, Mutex, RwLock, RwLockReadGuard};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How often a waiting writer looks at its deadline.
const WAIT_SLICE: Duration = Duration::from_millis(100);

#[derive(Default)]
pub struct FsyncLock {
    count: Mutex<u64>,
    released: Condvar,
    writes: RwLock<()>,
    /// Write commands running (holding the shared guard), and waiting for the lock to
    /// be released: what `lockInfo` reports as granted and pending.
    running: AtomicU64,
    waiting: AtomicU64,
}

/// A write command's admission: it runs while this lives.
pub struct Admission<'a> {
    _guard: RwLockReadGuard<'a, ()>,
    running: &'a AtomicU64,
}

impl Drop for Admission<'_> {
    fn drop(&mut self) {
        self.running.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What `lockInfo` shows of the global lock: the fsync locks held, the write commands
/// running and those waiting.
pub struct GlobalLockState {
    pub fsync_locks: u64,
    pub running_writes: u64,
    pub waiting_writes: u64,
}

impl FsyncLock {
    /// Takes one more lock once the writes running now are done, and makes the
    /// engine's files durable; the number of locks held.
    pub fn lock(&self, engine: &dyn Engine) -> Result<u64> {
        let count = {
            let mut count = self.count.lock();
            *count += 1;
            *count
        };
        let _quiet = self.writes.write();
        if let Err(e) = engine.sync() {
            self.unlock();
            return Err(e);
        }
        Ok(count)
    }

    /// Releases one lock; the number still held, `None` when none was.
    pub fn unlock(&self) -> Option<u64> {
        let mut count = self.count.lock();
        if *count == 0 {
            return None;
        }
        *count -= 1;
        if *count == 0 {
            self.released.notify_all();
        }
        Some(*count)
    }

    /// Waits until no lock is held (or the deadline passes), then lets one write
    /// command run while the guard lives. A write inside a write (a command that runs
    /// others) passes again without waiting for a lock taken meanwhile.
    pub fn admit_write(&self, deadline: &Deadline) -> Result<Admission<'_>> {
        loop {
            {
                let mut count = self.count.lock();
                if *count > 0 {
                    self.waiting.fetch_add(1, Ordering::Relaxed);
                    let waited: Result<()> = (|| {
                        while *count > 0 {
                            self.released.wait_for(&mut count, WAIT_SLICE);
                            deadline.check()?;
                        }
                        Ok(())
                    })();
                    self.waiting.fetch_sub(1, Ordering::Relaxed);
                    waited?;
                }
            }
            let guard = self.writes.read_recursive();
            if *self.count.lock() == 0 {
                self.running.fetch_add(1, Ordering::Relaxed);
                return Ok(Admission {
                    _guard: guard,
                    running: &self.running,
                });
            }
        }
    }

    pub fn state(&self) -> GlobalLockState {
        GlobalLockState {
            fsync_locks: *self.count.lock(),
            running_writes: self.running.load(Ordering::Relaxed),
            waiting_writes: self.waiting.load(Ordering::Relaxed),
        }
    }
}
