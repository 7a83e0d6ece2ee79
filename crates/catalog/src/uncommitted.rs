//! Uncommitted catalog changes (MongoDB's "uncommitted collections"): the collections a
//! thread creates inside a write scope (`basalt_storage::with_write_scope`) exist for
//! that thread alone until the scope's writes are stored.
//!
//! Two writers need this. A multi-document transaction creates collections and their
//! indexes (`create`, `createIndexes`, an insert into a missing collection) that its own
//! statements see and nobody else does; an abort leaves no trace, a commit carries them
//! in its `applyOps`. And `applyOps` itself applies such a commit in one atomic batch:
//! its collections join the catalog only once that batch is stored
//! ([`crate::Catalog::publish`]), so a batch that fails leaves the catalog as it was.
//!
//! While a thread runs in [`with_uncommitted`], [`crate::Catalog::get`] finds its
//! uncommitted collections first, and `Catalog::create` puts new ones here instead of in
//! the shared catalog. Their metadata is written into the write scope, never to disk
//! directly. In a provisional scope (a transaction's statements, whose writes are only
//! ever replayed from `applyOps`) they take ids from a range of their own, so the
//! catalog's id counter moves only for collections that are stored.

use crate::Collection;
use parking_lot::Mutex;
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The collections created in one transaction or one `applyOps`, in creation order.
#[derive(Default)]
pub struct Uncommitted {
    created: Mutex<Vec<Arc<Collection>>>,
}

impl Uncommitted {
    /// The collections created so far, in creation order.
    pub fn collections(&self) -> Vec<Arc<Collection>> {
        self.created.lock().clone()
    }

    pub(crate) fn get(&self, db: &str, collection: &str) -> Option<Arc<Collection>> {
        self.created
            .lock()
            .iter()
            .find(|c| {
                let meta = c.meta();
                meta.db == db && meta.name == collection
            })
            .cloned()
    }

    pub(crate) fn add(&self, collection: Arc<Collection>) {
        self.created.lock().push(collection);
    }

    pub(crate) fn holds(&self, collection: &Collection) -> bool {
        self.created
            .lock()
            .iter()
            .any(|c| std::ptr::eq(Arc::as_ptr(c), collection))
    }

    pub(crate) fn take(&self) -> Vec<Arc<Collection>> {
        std::mem::take(&mut *self.created.lock())
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<Uncommitted>>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's catalog changes kept in `uncommitted` (see the module's
/// note). `f` must run inside a write scope.
pub fn with_uncommitted<T>(uncommitted: Arc<Uncommitted>, f: impl FnOnce() -> T) -> T {
    struct Restore(Option<Arc<Uncommitted>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            CURRENT.with(|current| *current.borrow_mut() = previous);
        }
    }
    debug_assert!(basalt_storage::write_scope().is_some());
    let previous = CURRENT.with(|current| current.borrow_mut().replace(uncommitted));
    let _restore = Restore(previous);
    f()
}

/// The uncommitted changes this thread makes, if it runs in [`with_uncommitted`].
pub(crate) fn current() -> Option<Arc<Uncommitted>> {
    CURRENT.with(|current| current.borrow().clone())
}

/// This thread's uncommitted collection `db.collection`, if any: what every catalog
/// lookup asks first, without taking a reference to the changes themselves.
pub(crate) fn created(db: &str, collection: &str) -> Option<Arc<Collection>> {
    CURRENT.with(|current| current.borrow().as_ref()?.get(db, collection))
}

/// Where provisional ids start: far above any id the catalog's counter reaches.
const PROVISIONAL_IDS_START: u64 = 1 << 62;

static PROVISIONAL_IDS: AtomicU64 = AtomicU64::new(PROVISIONAL_IDS_START);

/// `count` consecutive ids for collections or indexes of a provisional scope (see the
/// module's note), or `None` outside one.
pub(crate) fn provisional_ids(count: u64) -> Option<u64> {
    let provisional = current().is_some()
        && basalt_storage::write_scope().is_some_and(|scope| scope.provisional());
    provisional.then(|| PROVISIONAL_IDS.fetch_add(count, Ordering::Relaxed))
}
