//! Index builds in progress, so `$currentOp` can show how far each has got, as MongoDB
//! does ("Index Build: scanning collection", documents done of the total).

use bson::Document;
use parking_lot::Mutex;
use std::collections::BTreeMap;

/// One running index build.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexBuildProgress {
    pub namespace: String,
    pub index_name: String,
    pub key: Document,
    /// Documents scanned so far.
    pub done: u64,
    /// Documents to scan, estimated from the collection's highest record id.
    pub total: u64,
}

/// The running builds, by index id.
#[derive(Debug, Default)]
pub(crate) struct IndexBuilds {
    running: Mutex<BTreeMap<u64, IndexBuildProgress>>,
}

impl IndexBuilds {
    /// Registers a build; it is listed until the returned guard drops, however the
    /// build ends.
    pub(crate) fn start(&self, index_id: u64, progress: IndexBuildProgress) -> BuildGuard<'_> {
        self.running.lock().insert(index_id, progress);
        BuildGuard {
            builds: self,
            index_id,
        }
    }

    pub(crate) fn list(&self) -> Vec<IndexBuildProgress> {
        self.running.lock().values().cloned().collect()
    }
}

/// A registered build; records progress and unregisters on drop.
pub(crate) struct BuildGuard<'a> {
    builds: &'a IndexBuilds,
    index_id: u64,
}

impl BuildGuard<'_> {
    pub(crate) fn advance(&self, done: u64) {
        if let Some(p) = self.builds.running.lock().get_mut(&self.index_id) {
            p.done = done;
        }
    }
}

impl Drop for BuildGuard<'_> {
    fn drop(&mut self) {
        self.builds.running.lock().remove(&self.index_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn builds_are_listed_with_progress_until_they_end() {
        let builds = IndexBuilds::default();
        let progress = IndexBuildProgress {
            namespace: "d.c".into(),
            index_name: "a_1".into(),
            key: doc! { "a": 1 },
            done: 0,
            total: 10,
        };
        {
            let guard = builds.start(7, progress);
            guard.advance(4);
            assert_eq!(builds.list()[0].done, 4);
        }
        assert!(builds.list().is_empty());
    }
}
