//! The clock and ObjectId source of write paths, which a replica set member fixes while
//! it applies a replicated command: every member then stores the same `$currentDate`,
//! `$$NOW` and generated `_id`s as the primary, instead of each reading its own clock.
//!
//! Also the cluster time behind `$$CLUSTER_TIME`, which only a replica set member has:
//! the time of the last entry it applied, so a command applied from the log reads the
//! same one on every member.

use bson::oid::ObjectId;
use bson::{DateTime, Timestamp};
use std::cell::Cell;
use std::sync::OnceLock;

/// Where the cluster time comes from, once this process is a replica set member.
type ClusterTimeSource = Box<dyn Fn() -> Timestamp + Send + Sync>;
static CLUSTER_TIME: OnceLock<ClusterTimeSource> = OnceLock::new();

/// Makes `source` the cluster time of this process (a replica set member's).
pub fn set_cluster_time_source(source: impl Fn() -> Timestamp + Send + Sync + 'static) {
    let _ = CLUSTER_TIME.set(Box::new(source));
}

/// The cluster time, on a replica set member.
pub fn cluster_time() -> Option<Timestamp> {
    CLUSTER_TIME.get().map(|source| source())
}

/// Whether there is a cluster time (`$$CLUSTER_TIME` is defined).
pub fn has_cluster_time() -> bool {
    CLUSTER_TIME.get().is_some()
}

/// The fixed instant and id seed of the command being applied on this thread.
#[derive(Clone, Copy)]
struct Fixed {
    now_ms: i64,
    seed: u64,
    counter: u32,
}

thread_local! {
    static FIXED: Cell<Option<Fixed>> = const { Cell::new(None) };
}

/// Runs `f` with the clock fixed at `now_ms` and ObjectIds generated from `seed` (the
/// command's position in the replicated log, unique per command) and a counter.
pub fn with_fixed<T>(now_ms: i64, seed: u64, f: impl FnOnce() -> T) -> T {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            FIXED.with(|fixed| fixed.set(None));
        }
    }
    FIXED.with(|fixed| {
        fixed.set(Some(Fixed {
            now_ms,
            seed,
            counter: 0,
        }))
    });
    let _reset = Reset;
    f()
}

/// The current time, or the fixed one while a replicated command is applied.
pub fn now() -> DateTime {
    match FIXED.with(Cell::get) {
        Some(fixed) => DateTime::from_millis(fixed.now_ms),
        None => DateTime::now(),
    }
}

/// A new ObjectId; while a replicated command is applied, the same one on every member:
/// the fixed time's seconds, five bytes of the seed, and a counter.
pub fn object_id() -> ObjectId {
    let Some(mut fixed) = FIXED.with(Cell::get) else {
        return ObjectId::new();
    };
    fixed.counter = fixed.counter.wrapping_add(1);
    FIXED.with(|cell| cell.set(Some(fixed)));
    let mut bytes = [0u8; 12];
    let seconds = u32::try_from(fixed.now_ms.div_euclid(1000)).unwrap_or(0);
    bytes[..4].copy_from_slice(&seconds.to_be_bytes());
    bytes[4..9].copy_from_slice(&fixed.seed.to_be_bytes()[3..]);
    bytes[9..].copy_from_slice(&fixed.counter.to_be_bytes()[1..]);
    ObjectId::from_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_values_repeat_for_the_same_command() {
        let run = || with_fixed(1_700_000_000_123, 42, || (now(), object_id(), object_id()));
        let (first, second) = (run(), run());
        assert_eq!(first, second);
        assert_eq!(first.0.timestamp_millis(), 1_700_000_000_123);
        assert_ne!(first.1, first.2);
        let other = with_fixed(1_700_000_000_123, 43, object_id);
        assert_ne!(other, first.1);
        assert_ne!(object_id(), object_id(), "outside, ids are fresh");
    }
}
