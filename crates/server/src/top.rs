//! mongod's `top`: time and count of the operations on each collection since the
//! server started, by kind (queries, getmores, inserts, updates, removes, other
//! commands) and by the lock they would take in mongod (reads and writes), in
//! microseconds. `mongotop` polls it. A dropped collection's figures go with it.

use bson::{doc, Document};
use parking_lot::RwLock;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Time (microseconds) and count of one kind of operation; atomics, so that commands on
/// one collection do not queue to record themselves.
#[derive(Default)]
struct Usage {
    time: AtomicU64,
    count: AtomicU64,
}

impl Usage {
    fn add(&self, micros: u64) {
        self.time.fetch_add(micros, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    fn to_document(&self) -> Document {
        let get = |n: &AtomicU64| i64::try_from(n.load(Ordering::Relaxed)).unwrap_or(i64::MAX);
        doc! { "time": get(&self.time), "count": get(&self.count) }
    }
}

/// One collection's figures, in mongod's order.
#[derive(Default)]
struct CollectionUsage {
    total: Usage,
    read_lock: Usage,
    write_lock: Usage,
    queries: Usage,
    getmore: Usage,
    insert: Usage,
    update: Usage,
    remove: Usage,
    commands: Usage,
}

#[derive(Default)]
pub struct Top {
    namespaces: RwLock<HashMap<String, Arc<CollectionUsage>>>,
}

impl Top {
    /// Records the command `name` on `namespace`, which took `micros`; `writes` says
    /// which lock mongod would have held.
    pub fn record(&self, namespace: &str, name: &str, writes: bool, micros: u64) {
        let known = self.namespaces.read().get(namespace).cloned();
        let usage = match known {
            Some(usage) => usage,
            None => self
                .namespaces
                .write()
                .entry(namespace.to_string())
                .or_default()
                .clone(),
        };
        usage.total.add(micros);
        if writes {
            usage.write_lock.add(micros);
        } else {
            usage.read_lock.add(micros);
        }
        match name {
            "find" => usage.queries.add(micros),
            "getMore" => usage.getmore.add(micros),
            "insert" => usage.insert.add(micros),
            "update" => usage.update.add(micros),
            "delete" => usage.remove.add(micros),
            _ => usage.commands.add(micros),
        }
    }

    /// Forgets a dropped collection (or every collection of a dropped database, with
    /// `prefix` `db.`).
    pub fn forget(&self, namespace_or_prefix: &str) {
        self.namespaces
            .write()
            .retain(|namespace, _| !namespace_or_prefix_matches(namespace_or_prefix, namespace));
    }

    /// The `top` command's reply.
    pub fn to_document(&self) -> Document {
        let mut totals = doc! { "note": "all times in microseconds" };
        let mut namespaces: Vec<(String, Arc<CollectionUsage>)> = self
            .namespaces
            .read()
            .iter()
            .map(|(namespace, usage)| (namespace.clone(), usage.clone()))
            .collect();
        namespaces.sort_by(|a, b| a.0.cmp(&b.0));
        for (namespace, usage) in &namespaces {
            totals.insert(
                namespace.clone(),
                doc! {
                    "total": usage.total.to_document(),
                    "readLock": usage.read_lock.to_document(),
                    "writeLock": usage.write_lock.to_document(),
                    "queries": usage.queries.to_document(),
                    "getmore": usage.getmore.to_document(),
                    "insert": usage.insert.to_document(),
                    "update": usage.update.to_document(),
                    "remove": usage.remove.to_document(),
                    "commands": usage.commands.to_document(),
                },
            );
        }
        doc! { "totals": totals }
    }
}

fn namespace_or_prefix_matches(pattern: &str, namespace: &str) -> bool {
    match pattern.strip_suffix('.') {
        Some(db) => namespace.split_once('.').is_some_and(|(d, _)| d == db),
        None => namespace == pattern,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_kind_and_lock_and_forgets_dropped_collections() {
        let top = Top::default();
        top.record("a.b", "find", false, 10);
        top.record("a.b", "insert", true, 5);
        top.record("a.b", "aggregate", false, 7);
        top.record("a.c", "delete", true, 1);
        top.record("z.c", "update", true, 1);
        let reply = top.to_document();
        let b = reply
            .get_document("totals")
            .unwrap()
            .get_document("a.b")
            .unwrap();
        let figures = |kind: &str| {
            let usage = b.get_document(kind).unwrap();
            (
                usage.get_i64("time").unwrap(),
                usage.get_i64("count").unwrap(),
            )
        };
        assert_eq!(figures("total"), (22, 3));
        assert_eq!(figures("readLock"), (17, 2));
        assert_eq!(figures("writeLock"), (5, 1));
        assert_eq!(figures("queries"), (10, 1));
        assert_eq!(figures("commands"), (7, 1));
        top.forget("a.b");
        top.forget("z.");
        let totals = top.to_document().get_document("totals").unwrap().clone();
        let names: Vec<&str> = totals.keys().map(String::as_str).collect();
        assert_eq!(names, ["note", "a.c"]);
    }
}
