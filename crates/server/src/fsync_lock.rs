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
use std::time::Duration;

/// How often a waiting writer looks at its deadline.
const WAIT_SLICE: Duration = Duration::from_millis(100);

#[derive(Default)]
pub struct FsyncLock {
    count: Mutex<u64>,
    released: Condvar,
    writes: RwLock<()>,
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
    pub fn admit_write(&self, deadline: &Deadline) -> Result<RwLockReadGuard<'_, ()>> {
        loop {
            {
                let mut count = self.count.lock();
                while *count > 0 {
                    self.released.wait_for(&mut count, WAIT_SLICE);
                    deadline.check()?;
                }
            }
            let guard = self.writes.read_recursive();
            if *self.count.lock() == 0 {
                return Ok(guard);
            }
        }
    }
}
