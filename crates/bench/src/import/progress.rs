//! The import's progress bar: bytes against the input's size (so the ETA means
//! something), documents and documents per second. Drawn on stderr only when it is a
//! terminal; failures print above it.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub(crate) struct Progress {
    bar: ProgressBar,
    docs: AtomicU64,
}

impl Progress {
    /// A bar over `total_bytes` (a spinner when the size is unknown); hidden when `quiet`.
    pub(crate) fn new(total_bytes: Option<u64>, quiet: bool) -> Progress {
        let (bar, template) = match total_bytes {
            Some(total) => (
                ProgressBar::new(total),
                "{bar:30} {binary_bytes}/{binary_total_bytes} {msg} ETA {eta}",
            ),
            None => (ProgressBar::no_length(), "{spinner} {binary_bytes} {msg}"),
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style);
        }
        if quiet {
            bar.set_draw_target(ProgressDrawTarget::hidden());
        } else {
            bar.enable_steady_tick(Duration::from_millis(200));
        }
        Progress {
            bar,
            docs: AtomicU64::new(0),
        }
    }

    pub(crate) fn advance(&self, docs: u64, bytes: u64) {
        let total = self.docs.fetch_add(docs, Ordering::Relaxed) + docs;
        let rate = total as f64 / self.bar.elapsed().as_secs_f64().max(1e-3);
        self.bar
            .set_message(format!("{total} docs, {rate:.0} docs/s"));
        self.bar.inc(bytes);
    }

    /// Prints a line above the bar (or on stderr without one), unless quiet.
    pub(crate) fn println(&self, line: &str) {
        if self.bar.is_hidden() {
            eprintln!("{line}");
        } else {
            self.bar.println(line);
        }
    }

    pub(crate) fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
