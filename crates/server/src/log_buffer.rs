//! Keeps the most recent log lines in memory for the getLog command, as a tracing layer
//! beside the normal output, in mongod's JSON line format (`log_file.rs`).

use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::Arc;
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::Layer;

/// mongod keeps this many lines for getLog.
const LOG_LINES_MAX: usize = 1024;

#[derive(Clone, Default)]
pub struct LogBuffer {
    inner: Arc<Mutex<Lines>>,
    /// Replaces the process's log filter (tracing directives): installed by the binary
    /// that set up the logging, used when `setParameter` changes a verbosity.
    filter_hook: Arc<Mutex<Option<FilterHook>>>,
    /// The log file of `--logpath`, which `logRotate` rotates.
    file: Arc<std::sync::OnceLock<Arc<crate::log_file::LogFile>>>,
}

/// A function that installs new log filter directives (`info,basalt_repl=debug`).
pub type FilterHook = Box<dyn Fn(&str) + Send + Sync>;

#[derive(Default)]
struct Lines {
    lines: VecDeque<String>,
    total_written: u64,
}

impl LogBuffer {
    /// The retained lines, oldest first, and how many were ever written.
    pub fn lines(&self) -> (Vec<String>, u64) {
        let inner = self.inner.lock();
        (inner.lines.iter().cloned().collect(), inner.total_written)
    }

    /// Installs what applies a new log filter.
    pub fn on_filter_change(&self, hook: FilterHook) {
        *self.filter_hook.lock() = Some(hook);
    }

    /// Names the log file (`--logpath`) for `logRotate`.
    pub fn set_file(&self, file: Arc<crate::log_file::LogFile>) {
        let _ = self.file.set(file);
    }

    /// `logRotate`: rotates the log file, if the server writes one.
    pub(crate) fn rotate(&self) -> basalt_error::Result<()> {
        match self.file.get() {
            Some(file) => file.rotate(),
            None => Ok(()),
        }
    }

    /// Applies new log filter directives (nothing without a hook: a server in tests).
    pub(crate) fn set_filter(&self, directives: &str) {
        tracing::info!("log filter now {directives}");
        if let Some(hook) = &*self.filter_hook.lock() {
            hook(directives);
        }
    }

    fn push(&self, line: String) {
        let mut inner = self.inner.lock();
        if inner.lines.len() == LOG_LINES_MAX {
            inner.lines.pop_front();
        }
        inner.lines.push_back(line);
        inner.total_written += 1;
    }
}

impl<S: Subscriber> Layer<S> for LogBuffer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        // mongod's getLog lines are its log lines: the same JSON as the log file's.
        let mut line = crate::log_file::format_line(event);
        line.pop();
        self.push(line);
    }
}
