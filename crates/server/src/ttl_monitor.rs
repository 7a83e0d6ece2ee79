//! The TTL monitor: a background task that, every `ttl_monitor_interval_ms`, deletes
//! the documents TTL indexes say have expired (`Catalog::expire_documents`), as
//! MongoDB's TTLMonitor does every 60 s (its `ttlMonitorSleepSecs`). The work runs on
//! the blocking pool so the network reactor never waits on it.

use crate::Server;
use std::sync::Arc;
use std::time::Duration;

/// Time between passes, MongoDB's default `ttlMonitorSleepSecs` of 60.
pub const TTL_MONITOR_INTERVAL_MS: u64 = 60_000;

/// Runs passes forever, the first one interval after the start.
pub async fn run(server: Arc<Server>, interval_ms: u64) {
    let mut tick = tokio::time::interval(Duration::from_millis(interval_ms.max(1)));
    tick.tick().await;
    loop {
        tick.tick().await;
        let pass = server.clone();
        let outcome = tokio::task::spawn_blocking(move || {
            pass.catalog.expire_documents(bson::DateTime::now())
        })
        .await;
        match outcome {
            Ok(Ok(0)) => {}
            Ok(Ok(deleted)) => tracing::debug!(deleted, "TTL monitor deleted expired documents"),
            Ok(Err(e)) => tracing::warn!(error = %e, "TTL monitor pass failed"),
            Err(e) => tracing::warn!(error = %e, "TTL monitor pass panicked"),
        }
    }
}
