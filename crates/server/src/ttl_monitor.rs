//! The TTL monitor: a background task that, every `ttl_monitor_interval_ms`, deletes
//! the documents TTL indexes say have expired (`Catalog::expire_documents`), as
//! MongoDB's TTLMonitor does every 60 s (its `ttlMonitorSleepSecs`). On a replica set
//! only the primary expires documents, through the replicated log
//! (`replication::expire_documents`). The work runs on
//! the blocking pool so the network reactor never waits on it. A pass that fails (the
//! disk is full, writes are refused) is logged when the failure starts or changes, not
//! at every pass while it lasts.

use crate::Server;
use std::sync::Arc;
use std::time::Duration;

/// Time between passes, MongoDB's default `ttlMonitorSleepSecs` of 60.
pub const TTL_MONITOR_INTERVAL_MS: u64 = 60_000;

/// Runs passes forever, the first one interval after the start.
pub async fn run(server: Arc<Server>, interval_ms: u64) {
    let mut tick = tokio::time::interval(Duration::from_millis(interval_ms.max(1)));
    tick.tick().await;
    let mut failing: Option<String> = None;
    loop {
        tick.tick().await;
        let pass = server.clone();
        let outcome = tokio::task::spawn_blocking(move || {
            let now = bson::DateTime::now();
            match pass.replication() {
                Some(set) => crate::replication::expire_documents(&pass, set, now),
                None => pass.catalog.expire_documents(now),
            }
        })
        .await;
        let failure = match outcome {
            Ok(Ok(deleted)) => {
                if deleted > 0 {
                    tracing::debug!(deleted, "TTL monitor deleted expired documents");
                }
                if failing.take().is_some() {
                    tracing::info!("TTL monitor passes succeed again");
                }
                continue;
            }
            Ok(Err(e)) => format!("TTL monitor pass failed: {e}"),
            Err(e) => format!("TTL monitor pass panicked: {e}"),
        };
        if failing.as_ref() != Some(&failure) {
            tracing::warn!("{failure} (logged again only when the failure changes)");
            failing = Some(failure);
        }
    }
}
