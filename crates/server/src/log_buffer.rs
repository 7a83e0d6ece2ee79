//! Keeps the most recent log lines in memory for the getLog command, as a tracing layer
//! beside the normal stderr output.

use parking_lot::Mutex;
use std::collections::VecDeque;
use std::fmt::Write;
use std::sync::Arc;
use tracing::field::{Field, Visit};
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

struct MessageVisitor(String);

impl Visit for MessageVisitor {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, "{value:?}");
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }
}

impl<S: Subscriber> Layer<S> for LogBuffer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut visitor = MessageVisitor(String::new());
        event.record(&mut visitor);
        let line = bson::doc! {
            "t": { "$date": bson::DateTime::now().try_to_rfc3339_string().unwrap_or_default() },
            "s": event.metadata().level().as_str(),
            "ctx": event.metadata().target(),
            "msg": visitor.0,
        };
        self.push(line.to_string());
    }
}
