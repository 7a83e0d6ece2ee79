//! Timings and their summaries: best and median of repeated runs, percentiles of many
//! operations. Percentiles use the nearest rank, so every reported figure is one that was
//! actually measured.

use std::time::Duration;

/// Sorted durations of something done several times.
#[derive(Clone, Debug, Default)]
pub(crate) struct Samples {
    sorted: Vec<Duration>,
}

impl Samples {
    pub(crate) fn new(mut durations: Vec<Duration>) -> Samples {
        durations.sort_unstable();
        Samples { sorted: durations }
    }

    pub(crate) fn len(&self) -> usize {
        self.sorted.len()
    }

    pub(crate) fn sorted(&self) -> &[Duration] {
        &self.sorted
    }

    pub(crate) fn best(&self) -> Duration {
        self.sorted.first().copied().unwrap_or_default()
    }

    pub(crate) fn max(&self) -> Duration {
        self.sorted.last().copied().unwrap_or_default()
    }

    pub(crate) fn median(&self) -> Duration {
        self.percentile(50.0)
    }

    /// The nearest-rank percentile `p` (0–100).
    pub(crate) fn percentile(&self, p: f64) -> Duration {
        if self.sorted.is_empty() {
            return Duration::ZERO;
        }
        // The epsilon keeps 99.9 % of 1000 at rank 999 despite 99.9 not being exact.
        let rank = (p / 100.0 * self.sorted.len() as f64 - 1e-9).ceil() as usize;
        self.sorted[rank.clamp(1, self.sorted.len()) - 1]
    }
}

/// Runs `run` `runs` times (at least once), stopping early once `budget` is spent.
/// `run` gets the run's number and returns the time to count (its own measurement, so
/// set-up outside the timed part is not counted).
pub(crate) fn repeat<E>(
    runs: usize,
    budget: Duration,
    mut run: impl FnMut(usize) -> Result<Duration, E>,
) -> Result<Samples, E> {
    let started = std::time::Instant::now();
    let mut times = Vec::with_capacity(runs);
    for i in 0..runs.max(1) {
        times.push(run(i)?);
        if started.elapsed() > budget {
            break;
        }
    }
    Ok(Samples::new(times))
}

pub(crate) fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let samples = Samples::new((1..=1000).rev().map(Duration::from_micros).collect());
        assert_eq!(samples.best(), Duration::from_micros(1));
        assert_eq!(samples.median(), Duration::from_micros(500));
        assert_eq!(samples.percentile(99.0), Duration::from_micros(990));
        assert_eq!(samples.percentile(99.9), Duration::from_micros(999));
        assert_eq!(samples.max(), Duration::from_micros(1000));
        let one = Samples::new(vec![Duration::from_millis(3)]);
        assert_eq!(one.percentile(99.9), Duration::from_millis(3));
        assert_eq!(Samples::default().median(), Duration::ZERO);
    }

    #[test]
    fn repeat_stops_when_the_budget_is_spent() {
        let samples =
            repeat::<()>(100, Duration::ZERO, |_| Ok(Duration::from_millis(1))).expect("runs");
        assert_eq!(samples.len(), 1);
        let samples = repeat::<()>(5, Duration::from_secs(60), |i| {
            Ok(Duration::from_millis(i as u64))
        })
        .expect("runs");
        assert_eq!(samples.len(), 5);
    }
}
