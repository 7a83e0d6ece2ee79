//! The server's memory budget for operations, and each holder's share of it.
//!
//! What an operation holds in memory beyond the document in hand — sort buffers, groups,
//! join tables, window partitions, the results a cursor keeps for later batches,
//! JavaScript heaps — is reserved here before it is taken. A stage has its own limit
//! (MongoDB's 100 MB); the budget is the server's, shared by every operation, so that
//! twenty clients each within their stages' limits cannot together exhaust the machine.
//! A reservation that cannot grow tells its holder to spill to disk where it can, and
//! otherwise to fail with ExceededMemoryLimit: the server refuses the work instead of
//! being ended by the kernel's out-of-memory killer.
//!
//! Reservations take the budget in [`RESERVATION_STEP_BYTES`] steps, so the shared
//! counter is touched once per 64 KiB a holder grows, not once per document, while
//! thousands of small operations at once (a sort of ten documents each) take little of
//! the budget they do not use.
//! Dropping a reservation gives its bytes back, which is how a killed or exhausted
//! cursor returns what its pipeline held.

use basalt_error::{Error, ErrorCode};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How much of the budget a reservation takes at a time.
pub const RESERVATION_STEP_BYTES: usize = 64 << 10;
/// How often a reservation waiting for room asks the budget again.
const RESERVATION_RETRY_MS: u64 = 10;

/// A limit on the memory that operations hold together.
#[derive(Debug)]
pub struct Budget {
    limit_bytes: AtomicUsize,
    reserved_bytes: AtomicUsize,
    peak_bytes: AtomicUsize,
    refusals: AtomicU64,
}

/// The process's budget: one server per process. Unlimited until the server sets it.
static SERVER_BUDGET: Budget = Budget::new(usize::MAX);

/// The budget of the server this process runs.
pub fn server_budget() -> &'static Budget {
    &SERVER_BUDGET
}

impl Budget {
    pub const fn new(limit_bytes: usize) -> Budget {
        Budget {
            limit_bytes: AtomicUsize::new(limit_bytes),
            reserved_bytes: AtomicUsize::new(0),
            peak_bytes: AtomicUsize::new(0),
            refusals: AtomicU64::new(0),
        }
    }

    pub fn set_limit_bytes(&self, limit_bytes: usize) {
        self.limit_bytes.store(limit_bytes, Ordering::Relaxed);
    }

    pub fn limit_bytes(&self) -> usize {
        self.limit_bytes.load(Ordering::Relaxed)
    }

    /// What the reservations hold now.
    pub fn reserved_bytes(&self) -> usize {
        self.reserved_bytes.load(Ordering::Relaxed)
    }

    /// The most the reservations ever held at once.
    pub fn peak_bytes(&self) -> usize {
        self.peak_bytes.load(Ordering::Relaxed)
    }

    /// Whether the reservations hold more than the limit (memory recorded past it).
    pub fn is_exceeded(&self) -> bool {
        self.reserved_bytes() > self.limit_bytes()
    }

    /// How many times a reservation could not grow.
    pub fn refusals(&self) -> u64 {
        self.refusals.load(Ordering::Relaxed)
    }

    /// Takes `bytes` if the budget has them (a failure is counted by the caller, once
    /// per refusal rather than once per try).
    fn try_take(&self, bytes: usize) -> bool {
        let limit = self.limit_bytes();
        let taken =
            self.reserved_bytes
                .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |reserved| {
                    reserved.checked_add(bytes).filter(|&total| total <= limit)
                });
        match taken {
            Ok(before) => {
                self.peak_bytes.fetch_max(before + bytes, Ordering::Relaxed);
                true
            }
            Err(_) => false,
        }
    }

    /// Counts a refusal and says what the budget holds.
    fn refuse(&self) -> BudgetExhausted {
        self.refusals.fetch_add(1, Ordering::Relaxed);
        self.exhausted()
    }

    /// Takes `bytes` whether or not the budget has them, for memory that is already
    /// held and can be neither refused nor spilled.
    fn take(&self, bytes: usize) {
        let before = self.reserved_bytes.fetch_add(bytes, Ordering::AcqRel);
        self.peak_bytes.fetch_max(before + bytes, Ordering::Relaxed);
    }

    fn exhausted(&self) -> BudgetExhausted {
        BudgetExhausted {
            limit_bytes: self.limit_bytes(),
            reserved_bytes: self.reserved_bytes(),
        }
    }

    fn give_back(&self, bytes: usize) {
        self.reserved_bytes.fetch_sub(bytes, Ordering::AcqRel);
    }
}

/// The budget had no room for a reservation to grow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BudgetExhausted {
    pub limit_bytes: usize,
    pub reserved_bytes: usize,
}

impl BudgetExhausted {
    /// The error an operation fails with when it cannot spill: ExceededMemoryLimit,
    /// naming what needed the memory.
    pub fn to_error(self, what: &str) -> Error {
        Error::new(
            ErrorCode::EXCEEDED_MEMORY_LIMIT,
            format!(
                "{what} needs more memory than the server's budget for operations has left: \
                 {} of {} bytes are held by running operations and open cursors; retry \
                 later, close idle cursors, or allow disk use",
                self.reserved_bytes, self.limit_bytes
            ),
        )
    }
}

/// One holder's share of a budget: grown before the holder grows, given back when it
/// shrinks or is dropped.
#[derive(Debug)]
pub struct Reservation {
    budget: &'static Budget,
    /// What the holder says it holds.
    used_bytes: usize,
    /// What this reservation took from the budget: `used_bytes` rounded up to a step.
    taken_bytes: usize,
}

impl Default for Reservation {
    fn default() -> Reservation {
        Reservation::new(server_budget())
    }
}

impl Reservation {
    pub fn new(budget: &'static Budget) -> Reservation {
        Reservation {
            budget,
            used_bytes: 0,
            taken_bytes: 0,
        }
    }

    pub fn used_bytes(&self) -> usize {
        self.used_bytes
    }

    /// Grows the share by `bytes` before they are taken, or leaves it as it was when
    /// the budget has no room.
    pub fn reserve(&mut self, bytes: usize) -> Result<(), BudgetExhausted> {
        if self.try_grow(bytes) {
            Ok(())
        } else {
            Err(self.budget.refuse())
        }
    }

    /// [`Reservation::reserve`], waiting up to `wait` for the budget to have room:
    /// reservations are given back without notice, so it asks again every
    /// [`RESERVATION_RETRY_MS`]. Refused at once when `bytes` could never fit.
    pub fn reserve_waiting(&mut self, bytes: usize, wait: Duration) -> Result<(), BudgetExhausted> {
        let deadline = Instant::now() + wait;
        while !self.try_grow(bytes) {
            if self.used_bytes + bytes > self.budget.limit_bytes() || Instant::now() >= deadline {
                return Err(self.budget.refuse());
            }
            std::thread::sleep(Duration::from_millis(RESERVATION_RETRY_MS));
        }
        Ok(())
    }

    /// Grows the share by `bytes` if the budget has room; leaves it as it was otherwise.
    fn try_grow(&mut self, bytes: usize) -> bool {
        let used = self.used_bytes.saturating_add(bytes);
        if used > self.taken_bytes {
            let wanted = used.div_ceil(RESERVATION_STEP_BYTES) * RESERVATION_STEP_BYTES;
            if !self.budget.try_take(wanted - self.taken_bytes) {
                return false;
            }
            self.taken_bytes = wanted;
        }
        self.used_bytes = used;
        true
    }

    /// [`Reservation::reserve`], failing as an operation that cannot spill fails:
    /// ExceededMemoryLimit naming `what` needed the memory.
    pub fn reserve_for(&mut self, bytes: usize, what: &str) -> basalt_error::Result<()> {
        self.reserve(bytes)
            .map_err(|exhausted| exhausted.to_error(what))
    }

    /// Counts `bytes` the holder has already taken, past the budget if need be; an
    /// error says the budget is exceeded, so the holder should give memory back (spill)
    /// or fail.
    pub fn record(&mut self, bytes: usize) -> Result<(), BudgetExhausted> {
        self.reserve(bytes).inspect_err(|_| {
            self.budget.take(bytes);
            self.taken_bytes += bytes;
            self.used_bytes += bytes;
        })
    }

    /// Shrinks the share by `bytes` (at most to nothing), giving back whole steps.
    pub fn shrink(&mut self, bytes: usize) {
        self.used_bytes = self.used_bytes.saturating_sub(bytes);
        let kept = self.used_bytes.div_ceil(RESERVATION_STEP_BYTES) * RESERVATION_STEP_BYTES;
        if kept < self.taken_bytes {
            self.budget.give_back(self.taken_bytes - kept);
            self.taken_bytes = kept;
        }
    }

    /// Gives everything back, as after a spill.
    pub fn clear(&mut self) {
        self.shrink(self.used_bytes);
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        // Most reservations never took anything: leave the shared counter alone.
        if self.taken_bytes > 0 {
            self.budget.give_back(self.taken_bytes);
        }
    }
}

/// Why a stage must spill or fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exceeded {
    /// The stage holds more than its own limit (MongoDB's 100 MB).
    StageLimit,
    /// The server's budget has no room for what the stage holds.
    ServerBudget(BudgetExhausted),
}

/// The memory a blocking stage holds: checked against its own limit and charged to the
/// server's budget.
#[derive(Debug)]
pub struct StageMemory {
    limit_bytes: usize,
    reservation: Reservation,
}

impl StageMemory {
    /// A stage that may hold `limit_bytes`, within the server's budget.
    pub fn new(limit_bytes: usize) -> StageMemory {
        StageMemory {
            limit_bytes,
            reservation: Reservation::default(),
        }
    }

    pub fn limit_bytes(&self) -> usize {
        self.limit_bytes
    }

    pub fn used_bytes(&self) -> usize {
        self.reservation.used_bytes()
    }

    /// Counts a change of `bytes` in what the stage holds (negative when it gave memory
    /// back); an error says it must now spill or fail.
    pub fn charge(&mut self, bytes: isize) -> Result<(), Exceeded> {
        if bytes <= 0 {
            self.reservation.shrink(bytes.unsigned_abs());
            return Ok(());
        }
        let recorded = self.reservation.record(bytes.unsigned_abs());
        if self.used_bytes() > self.limit_bytes {
            return Err(Exceeded::StageLimit);
        }
        recorded.map_err(Exceeded::ServerBudget)
    }

    /// Whether the stage holds more than it may (its limit, or what the budget had).
    pub fn exceeded(&self) -> bool {
        self.used_bytes() > self.limit_bytes || self.reservation.budget.is_exceeded()
    }

    /// Gives everything back, as after a spill.
    pub fn clear(&mut self) {
        self.reservation.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(limit_bytes: usize) -> &'static Budget {
        Box::leak(Box::new(Budget::new(limit_bytes)))
    }

    #[test]
    fn reservations_take_steps_and_give_them_back() {
        let budget = budget(4 * RESERVATION_STEP_BYTES);
        let mut a = Reservation::new(budget);
        a.reserve(10).unwrap();
        assert_eq!(budget.reserved_bytes(), RESERVATION_STEP_BYTES);
        a.reserve(RESERVATION_STEP_BYTES).unwrap();
        assert_eq!(budget.reserved_bytes(), 2 * RESERVATION_STEP_BYTES);
        a.shrink(RESERVATION_STEP_BYTES);
        assert_eq!(a.used_bytes(), 10);
        assert_eq!(budget.reserved_bytes(), RESERVATION_STEP_BYTES);
        drop(a);
        assert_eq!(budget.reserved_bytes(), 0);
        assert_eq!(budget.peak_bytes(), 2 * RESERVATION_STEP_BYTES);
    }

    #[test]
    fn a_full_budget_refuses_growth_and_leaves_the_share_as_it_was() {
        let budget = budget(2 * RESERVATION_STEP_BYTES);
        let mut a = Reservation::new(budget);
        let mut b = Reservation::new(budget);
        a.reserve(RESERVATION_STEP_BYTES + 1).unwrap();
        let refused = b.reserve(1).unwrap_err();
        assert_eq!(refused.reserved_bytes, 2 * RESERVATION_STEP_BYTES);
        assert_eq!(b.used_bytes(), 0);
        assert_eq!(budget.refusals(), 1);
        let error = refused.to_error("$sort");
        assert_eq!(error.code, ErrorCode::EXCEEDED_MEMORY_LIMIT);
        assert!(error.message.starts_with("$sort needs more memory"));
        a.clear();
        b.reserve(1).unwrap();
        assert_eq!(budget.reserved_bytes(), RESERVATION_STEP_BYTES);
    }

    #[test]
    fn memory_already_taken_is_counted_past_the_budget() {
        let budget = budget(RESERVATION_STEP_BYTES);
        let mut a = Reservation::new(budget);
        assert!(a.record(3 * RESERVATION_STEP_BYTES).is_err());
        assert_eq!(budget.reserved_bytes(), 3 * RESERVATION_STEP_BYTES);
        assert!(budget.is_exceeded());
        assert!(Reservation::new(budget).reserve(1).is_err());
        drop(a);
        assert_eq!(budget.reserved_bytes(), 0);
    }

    #[test]
    fn a_waiting_reservation_gets_what_is_given_back_meanwhile() {
        let budget = budget(2 * RESERVATION_STEP_BYTES);
        let mut held = Reservation::new(budget);
        held.reserve(2 * RESERVATION_STEP_BYTES).unwrap();
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            drop(held);
        });
        let mut waiting = Reservation::new(budget);
        let wait = Duration::from_secs(10);
        waiting
            .reserve_waiting(RESERVATION_STEP_BYTES, wait)
            .unwrap();
        release.join().unwrap();
        assert_eq!(budget.refusals(), 0);
        // More than the whole budget is refused at once, and counted once.
        let started = Instant::now();
        let mut too_big = Reservation::new(budget);
        assert!(too_big
            .reserve_waiting(3 * RESERVATION_STEP_BYTES, wait)
            .is_err());
        assert!(started.elapsed() < wait);
        assert_eq!(budget.refusals(), 1);
    }

    #[test]
    fn stages_are_held_to_their_limit_and_to_the_budget() {
        // The stage's own budget is the process's; its limit is what this test sets.
        let mut stage = StageMemory::new(1000);
        assert_eq!(stage.charge(600), Ok(()));
        assert_eq!(stage.charge(-100), Ok(()));
        assert_eq!(stage.used_bytes(), 500);
        assert_eq!(stage.charge(600), Err(Exceeded::StageLimit));
        assert!(stage.exceeded());
        stage.clear();
        assert_eq!(stage.used_bytes(), 0);
        assert!(!stage.exceeded());
    }
}
