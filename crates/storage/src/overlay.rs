//! Writes held back from the engine, and a snapshot with them on top: what a
//! multi-document transaction reads and writes until it commits, and how a committed
//! one is applied as one atomic batch.
//!
//! A thread runs inside a [`WriteScope`] (`with_write_scope`): the engine of a replica
//! set member (`basalt_repl::StampedEngine`) then hands that thread the scope's
//! snapshot and gives its writes to the scope instead of the disk. The code above
//! (catalog, query execution) does not know: it reads and writes as always.

use crate::{back_scan_upper, KeyValueVisitor, ScanEnd, ScanStart, Snapshot, Space, WriteBatch};
use crate::{prefix_upper_bound, WriteOp};
use basalt_error::Result;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ops::{Bound, ControlFlow};
use std::sync::Arc;

/// Keys written and not yet stored, per space: the new value, or `None` for a delete.
#[derive(Clone, Debug, Default)]
pub struct Pending {
    spaces: [BTreeMap<Vec<u8>, Option<Vec<u8>>>; 4],
    /// The bytes of the keys and values held.
    bytes: usize,
}

impl Pending {
    /// Adds a batch's changes; a key changed twice keeps its last change.
    pub fn apply(&mut self, batch: WriteBatch) {
        for op in batch.ops {
            let (space, key, value) = match op {
                WriteOp::Put(space, key, value) => (space, key, Some(value)),
                WriteOp::Delete(space, key) => (space, key, None),
            };
            let key_len = key.len();
            self.bytes += key_len + value.as_ref().map_or(0, Vec::len);
            if let Some(old) = self.spaces[space.position()].insert(key, value) {
                self.bytes -= key_len + old.map_or(0, |old| old.len());
            }
        }
    }

    /// The bytes of the keys and values held: what a transaction's writes weigh.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The pending change of a key: `Some(None)` when it is deleted.
    pub fn get(&self, space: Space, key: &[u8]) -> Option<Option<&[u8]>> {
        self.spaces[space.position()]
            .get(key)
            .map(|value| value.as_deref())
    }

    /// The changes of one space, in key order.
    pub fn changes(&self, space: Space) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
        self.spaces[space.position()]
            .iter()
            .map(|(key, value)| (key.as_slice(), value.as_deref()))
    }

    pub fn is_empty(&self) -> bool {
        self.spaces.iter().all(BTreeMap::is_empty)
    }

    /// Every change, as one batch.
    pub fn into_batch(self) -> WriteBatch {
        let mut batch = WriteBatch::default();
        for (space, changes) in Space::ALL.into_iter().zip(self.spaces) {
            for (key, value) in changes {
                match value {
                    Some(value) => batch.put(space, key, value),
                    None => batch.delete(space, key),
                }
            }
        }
        batch
    }

    /// The pending changes of `space` under `prefix` from `start`, in key order.
    fn forward<'a>(
        &'a self,
        space: Space,
        prefix: &[u8],
        start: ScanStart<'_>,
    ) -> impl Iterator<Item = Change<'a>> + 'a {
        let lower = match start {
            ScanStart::After(key) if key >= prefix => Bound::Excluded(key.to_vec()),
            _ => Bound::Included(prefix.to_vec()),
        };
        let upper = prefix_upper_bound(prefix).map_or(Bound::Unbounded, Bound::Excluded);
        let prefix = prefix.to_vec();
        self.spaces[space.position()]
            .range((lower, upper))
            .filter(move |(key, _)| key.starts_with(&prefix))
    }

    /// As [`Pending::forward`], in descending key order from `end`.
    fn backward<'a>(
        &'a self,
        space: Space,
        prefix: &[u8],
        end: ScanEnd<'_>,
    ) -> Box<dyn Iterator<Item = Change<'a>> + 'a> {
        let Some(upper) = back_scan_upper(prefix, end) else {
            return Box::new(std::iter::empty());
        };
        Box::new(
            self.spaces[space.position()]
                .range((Bound::Included(prefix.to_vec()), upper))
                .rev(),
        )
    }
}

/// A pending change as a scan visits it: the key, and its new value or `None`.
type Change<'a> = (&'a Vec<u8>, &'a Option<Vec<u8>>);

/// A snapshot with pending changes on top.
pub struct Overlay {
    base: Arc<dyn Snapshot>,
    pending: Arc<Pending>,
}

impl Overlay {
    pub fn new(base: Arc<dyn Snapshot>, pending: Arc<Pending>) -> Overlay {
        Overlay { base, pending }
    }
}

/// Merges a scan of the base with the pending changes of the same range, both in the
/// scan's order (`before(a, b)`: `a` comes first), pending changes winning on equal keys.
fn merge<'p>(
    mut pending: std::iter::Peekable<impl Iterator<Item = Change<'p>>>,
    before: fn(&[u8], &[u8]) -> bool,
    scan_base: impl FnOnce(&mut KeyValueVisitor<'_>) -> Result<()>,
    visit: &mut KeyValueVisitor<'_>,
) -> Result<()> {
    let mut stopped = false;
    scan_base(&mut |key, value| {
        while let Some((pending_key, pending_value)) = pending.peek() {
            if !before(pending_key, key) {
                break;
            }
            if let Some(pending_value) = pending_value {
                if visit(pending_key, pending_value)?.is_break() {
                    stopped = true;
                    return Ok(ControlFlow::Break(()));
                }
            }
            pending.next();
        }
        let flow = match pending.peek() {
            Some((pending_key, pending_value)) if pending_key.as_slice() == key => {
                let flow = match pending_value {
                    Some(pending_value) => visit(key, pending_value)?,
                    None => ControlFlow::Continue(()),
                };
                pending.next();
                flow
            }
            _ => visit(key, value)?,
        };
        stopped = flow.is_break();
        Ok(flow)
    })?;
    if stopped {
        return Ok(());
    }
    for (key, value) in pending {
        if let Some(value) = value {
            if visit(key, value)?.is_break() {
                break;
            }
        }
    }
    Ok(())
}

impl Snapshot for Overlay {
    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>> {
        match self.pending.get(space, key) {
            Some(value) => Ok(value.map(<[u8]>::to_vec)),
            None => self.base.get(space, key),
        }
    }

    fn scan_prefix(
        &self,
        space: Space,
        prefix: &[u8],
        start: ScanStart<'_>,
        visit: &mut KeyValueVisitor<'_>,
    ) -> Result<()> {
        let pending = self.pending.forward(space, prefix, start).peekable();
        merge(
            pending,
            |a, b| a < b,
            |base_visit| self.base.scan_prefix(space, prefix, start, base_visit),
            visit,
        )
    }

    fn scan_prefix_back(
        &self,
        space: Space,
        prefix: &[u8],
        end: ScanEnd<'_>,
        visit: &mut KeyValueVisitor<'_>,
    ) -> Result<()> {
        let pending = self.pending.backward(space, prefix, end).peekable();
        merge(
            pending,
            |a, b| a > b,
            |base_visit| self.base.scan_prefix_back(space, prefix, end, base_visit),
            visit,
        )
    }

    fn last_key_with_prefix(&self, space: Space, prefix: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut last = None;
        self.scan_prefix_back(space, prefix, ScanEnd::End, &mut |key, _| {
            last = Some(key.to_vec());
            Ok(ControlFlow::Break(()))
        })?;
        Ok(last)
    }
}

/// Where a thread's reads and writes go while it runs inside the scope.
pub trait WriteScope: Send + Sync {
    /// What the thread reads: a snapshot with the scope's writes on top.
    fn snapshot(&self) -> Box<dyn Snapshot>;

    /// Takes a batch the thread writes, instead of the engine; an error refuses it (a
    /// transaction's write conflict).
    fn write(&self, batch: WriteBatch) -> Result<()>;

    /// Whether the writes may still be thrown away (a transaction not yet committed):
    /// what collections count of their documents leaves them out until they are stored.
    fn provisional(&self) -> bool;
}

/// The plain scope: writes gathered over a snapshot, to be stored as one batch
/// ([`Buffered::take`]) or dropped.
pub struct Buffered {
    base: Arc<dyn Snapshot>,
    /// Shared with the snapshots handed out, copied only when written while one lives.
    pending: parking_lot::Mutex<Arc<Pending>>,
    provisional: bool,
}

impl Buffered {
    /// Writes over `base`; `provisional` as [`WriteScope::provisional`].
    pub fn new(base: Arc<dyn Snapshot>, provisional: bool) -> Buffered {
        Buffered {
            base,
            pending: parking_lot::Mutex::default(),
            provisional,
        }
    }

    /// The snapshot the writes were made over.
    pub fn base(&self) -> &Arc<dyn Snapshot> {
        &self.base
    }

    /// What was written so far.
    pub fn pending(&self) -> Arc<Pending> {
        self.pending.lock().clone()
    }

    /// Takes what was written, leaving nothing.
    pub fn take(&self) -> Pending {
        let taken = std::mem::take(&mut *self.pending.lock());
        Arc::try_unwrap(taken).unwrap_or_else(|shared| (*shared).clone())
    }
}

impl WriteScope for Buffered {
    fn snapshot(&self) -> Box<dyn Snapshot> {
        Box::new(Overlay::new(self.base.clone(), self.pending()))
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        Arc::make_mut(&mut *self.pending.lock()).apply(batch);
        Ok(())
    }

    fn provisional(&self) -> bool {
        self.provisional
    }
}

thread_local! {
    static SCOPE: RefCell<Option<Arc<dyn WriteScope>>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's reads and writes going to `scope`.
pub fn with_write_scope<T>(scope: Arc<dyn WriteScope>, f: impl FnOnce() -> T) -> T {
    in_scope(Some(scope), f)
}

/// Runs `f` outside this thread's scope (reading and writing the engine itself), then
/// puts the scope back: how a transaction compares what it wrote with what is stored.
pub fn outside_write_scope<T>(f: impl FnOnce() -> T) -> T {
    in_scope(None, f)
}

/// Runs `f` in `scope` (or none), restoring the thread's scope after, also on a panic.
fn in_scope<T>(scope: Option<Arc<dyn WriteScope>>, f: impl FnOnce() -> T) -> T {
    struct Restore(Option<Arc<dyn WriteScope>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            SCOPE.with(|current| *current.borrow_mut() = previous);
        }
    }
    let previous = SCOPE.with(|current| std::mem::replace(&mut *current.borrow_mut(), scope));
    let _restore = Restore(previous);
    f()
}

/// The scope this thread runs in, if any.
pub fn write_scope() -> Option<Arc<dyn WriteScope>> {
    SCOPE.with(|scope| scope.borrow().clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Durability, Engine, MemoryEngine};

    fn keys_forward(snapshot: &dyn Snapshot, prefix: &[u8], start: ScanStart<'_>) -> Vec<String> {
        let mut keys = Vec::new();
        snapshot
            .scan_prefix(Space::Records, prefix, start, &mut |key, value| {
                keys.push(format!(
                    "{}={}",
                    String::from_utf8_lossy(key),
                    String::from_utf8_lossy(value)
                ));
                Ok(ControlFlow::Continue(()))
            })
            .unwrap();
        keys
    }

    fn keys_backward(snapshot: &dyn Snapshot, prefix: &[u8], end: ScanEnd<'_>) -> Vec<String> {
        let mut keys = Vec::new();
        snapshot
            .scan_prefix_back(Space::Records, prefix, end, &mut |key, _| {
                keys.push(String::from_utf8_lossy(key).into_owned());
                Ok(ControlFlow::Continue(()))
            })
            .unwrap();
        keys
    }

    fn overlay() -> Overlay {
        let engine = MemoryEngine::default();
        let mut base = WriteBatch::default();
        for key in ["a1", "a3", "a5", "b1"] {
            base.put(Space::Records, key.into(), b"base".to_vec());
        }
        engine.write(base, Durability::Process).unwrap();
        let mut pending = Pending::default();
        let mut changes = WriteBatch::default();
        changes.put(Space::Records, b"a2".to_vec(), b"new".to_vec());
        changes.put(Space::Records, b"a3".to_vec(), b"new".to_vec());
        changes.delete(Space::Records, b"a5".to_vec());
        changes.put(Space::Records, b"a6".to_vec(), b"new".to_vec());
        changes.put(Space::Catalog, b"a4".to_vec(), b"other space".to_vec());
        pending.apply(changes);
        Overlay::new(Arc::from(engine.snapshot()), Arc::new(pending))
    }

    #[test]
    fn reads_see_the_pending_changes_on_top() {
        let overlay = overlay();
        assert_eq!(
            keys_forward(&overlay, b"a", ScanStart::Beginning),
            ["a1=base", "a2=new", "a3=new", "a6=new"]
        );
        assert_eq!(
            keys_forward(&overlay, b"a", ScanStart::After(b"a2")),
            ["a3=new", "a6=new"]
        );
        assert_eq!(
            keys_backward(&overlay, b"a", ScanEnd::End),
            ["a6", "a3", "a2", "a1"]
        );
        assert_eq!(
            keys_backward(&overlay, b"a", ScanEnd::Before(b"a3")),
            ["a2", "a1"]
        );
        assert_eq!(overlay.get(Space::Records, b"a5").unwrap(), None);
        assert_eq!(
            overlay.get(Space::Records, b"a1").unwrap(),
            Some(b"base".to_vec())
        );
        assert_eq!(
            overlay.last_key_with_prefix(Space::Records, b"a").unwrap(),
            Some(b"a6".to_vec())
        );
        assert_eq!(
            overlay.last_key_with_prefix(Space::Records, b"b").unwrap(),
            Some(b"b1".to_vec())
        );
    }

    #[test]
    fn a_visitor_that_stops_stops_the_merge() {
        let overlay = overlay();
        let mut seen = 0;
        overlay
            .scan_prefix(Space::Records, b"a", ScanStart::Beginning, &mut |_, _| {
                seen += 1;
                Ok(if seen == 2 {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                })
            })
            .unwrap();
        assert_eq!(seen, 2);
    }

    #[test]
    fn the_pending_changes_become_one_batch() {
        let mut pending = Pending::default();
        let mut batch = WriteBatch::default();
        batch.put(Space::Records, b"k".to_vec(), b"1".to_vec());
        batch.delete(Space::Records, b"k".to_vec());
        batch.put(Space::Indexes, b"i".to_vec(), b"2".to_vec());
        pending.apply(batch);
        assert_eq!(pending.get(Space::Records, b"k"), Some(None));
        assert_eq!(pending.bytes(), 1 + 2);
        assert_eq!(
            pending.into_batch().ops,
            vec![
                WriteOp::Delete(Space::Records, b"k".to_vec()),
                WriteOp::Put(Space::Indexes, b"i".to_vec(), b"2".to_vec()),
            ]
        );
    }
}
