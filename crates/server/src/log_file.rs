//! mongod's log file (`--logpath`, `--logappend`, `logRotate`): one JSON document per
//! line in mongod's structured format, `{"t": {"$date": …}, "s": "I", "c": "NETWORK",
//! "id": 0, "ctx": "conn12", "msg": …, "attr": {…}}`, which log tools read. An event's
//! fields become `attr`; a field named `attr` holding a JSON object (the slow-query
//! line's) is merged in as it is. An attribute longer than mongod's `maxLogSizeKB` is
//! cut, keeping its JSON shape, with the line's `truncated` and `size` saying so.
//!
//! Without `--logappend`, a file already at the path is renamed aside at start, as
//! mongod does; `logRotate` renames the file to `<path>.<UTC time>` and opens a new one.

use basalt_error::{Error, ErrorCode, Result};
use parking_lot::Mutex;
use serde_json::{Map, Value};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::Layer;

pub struct LogFile {
    path: PathBuf,
    file: Mutex<File>,
}

impl LogFile {
    /// Opens the log at `path`: appended to with `append`, else started anew (an
    /// existing file is renamed aside first).
    pub fn open(path: &Path, append: bool) -> std::io::Result<LogFile> {
        if !append && path.exists() {
            std::fs::rename(path, rotated_name(path))?;
        }
        Ok(LogFile {
            path: path.to_path_buf(),
            file: Mutex::new(open_for_append(path)?),
        })
    }

    /// `logRotate`: the current file is renamed to `<path>.<UTC time>` and a new one
    /// opened; lines written meanwhile go to one or the other, none is lost.
    pub fn rotate(&self) -> Result<()> {
        let mut file = self.file.lock();
        let _ = file.flush();
        let failed = |e: std::io::Error| {
            Error::new(
                ErrorCode::FILE_RENAME_FAILED,
                format!("Failed to rotate log file {}: {e}", self.path.display()),
            )
        };
        std::fs::rename(&self.path, rotated_name(&self.path)).map_err(failed)?;
        *file = open_for_append(&self.path).map_err(failed)?;
        Ok(())
    }

    fn write_line(&self, line: &str) {
        let mut file = self.file.lock();
        // A log that cannot be written (a full disk) loses the line, not the server.
        let _ = file.write_all(line.as_bytes());
    }
}

fn open_for_append(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

/// mongod's name for a rotated log: the path with the time appended,
/// `mongod.log.2026-11-26T22-53-55`; a second rotation within the second gets a
/// counter.
fn rotated_name(path: &Path) -> PathBuf {
    let stamp = bson::DateTime::now()
        .try_to_rfc3339_string()
        .unwrap_or_default()
        .chars()
        .take(19)
        .map(|c| if c == ':' { '-' } else { c })
        .collect::<String>();
    let base = format!("{}.{stamp}", path.display());
    let mut candidate = PathBuf::from(&base);
    let mut n = 1;
    while candidate.exists() {
        candidate = PathBuf::from(format!("{base}.{n}"));
        n += 1;
    }
    candidate
}

/// mongod's severity letters.
fn severity(level: &Level) -> &'static str {
    match *level {
        Level::ERROR => "E",
        Level::WARN => "W",
        Level::INFO => "I",
        Level::DEBUG => "D1",
        Level::TRACE => "D2",
    }
}

/// Collects an event's message and fields.
#[derive(Default)]
struct Fields {
    message: String,
    attr: Map<String, Value>,
}

impl Fields {
    fn put(&mut self, field: &Field, value: Value) {
        if field.name() == "message" {
            self.message = match value {
                Value::String(s) => s,
                other => other.to_string(),
            };
            return;
        }
        if field.name() == "attr" {
            if let Value::String(text) = &value {
                if let Ok(Value::Object(given)) = serde_json::from_str::<Value>(text) {
                    self.attr.extend(given);
                    return;
                }
            }
        }
        self.attr.insert(field.name().to_string(), value);
    }
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.put(field, Value::String(format!("{value:?}")));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::String(value.to_string()));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::from(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Value::from(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::from(value));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, Value::from(value));
    }
}

/// The line mongod would write for `event`, its newline included.
pub(crate) fn format_line(event: &Event<'_>) -> String {
    let mut fields = Fields::default();
    event.record(&mut fields);
    let metadata = event.metadata();
    let time = bson::DateTime::now()
        .try_to_rfc3339_string()
        .unwrap_or_default();
    let thread = std::thread::current();
    let mut line = Map::new();
    line.insert("t".into(), serde_json::json!({ "$date": time }));
    line.insert("s".into(), severity(metadata.level()).into());
    line.insert(
        "c".into(),
        crate::parameters::log_component(metadata.target()).into(),
    );
    line.insert("id".into(), 0.into());
    line.insert("ctx".into(), thread.name().unwrap_or("-").into());
    let mut message = fields.message;
    if message.len() > MAX_LOG_ATTRIBUTE_BYTES {
        message.truncate(floor_char_boundary(&message, MAX_LOG_ATTRIBUTE_BYTES));
    }
    line.insert("msg".into(), message.into());
    if !fields.attr.is_empty() {
        line.insert("attr".into(), Value::Object(fields.attr));
    }
    let mut text = serde_json::to_string(&line).unwrap_or_default();
    // Most lines are short: only a long one has its attributes measured and cut.
    if text.len() > MAX_LOG_ATTRIBUTE_BYTES {
        text = cut_attributes(line);
    }
    text.push('\n');
    text
}

/// The line `line` serializes to with each attribute longer than
/// [`MAX_LOG_ATTRIBUTE_BYTES`] cut, and `truncated` and `size` saying which and how long.
fn cut_attributes(mut line: Map<String, Value>) -> String {
    let (mut truncated, mut sizes) = (Map::new(), Map::new());
    if let Some(Value::Object(attr)) = line.get_mut("attr") {
        for (name, value) in attr.iter_mut() {
            let size = json_len(value);
            if size > MAX_LOG_ATTRIBUTE_BYTES {
                *value = cut(value, MAX_LOG_ATTRIBUTE_BYTES);
                truncated.insert(name.clone(), Value::Object(Map::new()));
                sizes.insert(name.clone(), size.into());
            }
        }
    }
    if !truncated.is_empty() {
        line.insert("truncated".into(), Value::Object(truncated));
        line.insert("size".into(), Value::Object(sizes));
    }
    Value::Object(line).to_string()
}

/// mongod's `maxLogSizeKB` (10): an attribute whose JSON is longer is cut to about this
/// many bytes, and the line says which (`truncated`) and how long it was (`size`). So
/// no line, in the file or among getLog's, holds a large command or document whole.
const MAX_LOG_ATTRIBUTE_BYTES: usize = 10 * 1024;

fn json_len(value: &Value) -> usize {
    serde_json::to_vec(value).map_or(0, |bytes| bytes.len())
}

/// The longest prefix of `text` of at most `bytes` bytes that ends on a character.
fn floor_char_boundary(text: &str, bytes: usize) -> usize {
    let mut end = bytes.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    end
}

/// `value` cut to about `budget` bytes of JSON, keeping its shape: an object its leading
/// fields, an array its leading elements, a string its leading characters, the first
/// member that does not fit cut the same way with what is left.
fn cut(value: &Value, budget: usize) -> Value {
    /// Room a member needs besides its value: quotes, colon, comma.
    const MEMBER_OVERHEAD: usize = 4;
    /// Too little left to show anything of a member.
    const MEMBER_MIN: usize = 16;
    match value {
        Value::Object(members) => {
            let (mut out, mut used) = (Map::new(), 2);
            for (name, member) in members {
                let room = budget.saturating_sub(used + name.len() + MEMBER_OVERHEAD);
                let size = json_len(member);
                if size <= room {
                    out.insert(name.clone(), member.clone());
                    used += name.len() + MEMBER_OVERHEAD + size;
                    continue;
                }
                if room >= MEMBER_MIN {
                    out.insert(name.clone(), cut(member, room));
                }
                break;
            }
            Value::Object(out)
        }
        Value::Array(items) => {
            let (mut out, mut used) = (Vec::new(), 2);
            for item in items {
                let room = budget.saturating_sub(used + 1);
                let size = json_len(item);
                if size <= room {
                    out.push(item.clone());
                    used += size + 1;
                    continue;
                }
                if room >= MEMBER_MIN {
                    out.push(cut(item, room));
                }
                break;
            }
            Value::Array(out)
        }
        Value::String(text) => {
            Value::String(text[..floor_char_boundary(text, budget.saturating_sub(2))].to_string())
        }
        other => other.clone(),
    }
}

/// The log file as a tracing layer (the binary installs it with its filter).
pub struct LogFileLayer(pub std::sync::Arc<LogFile>);

impl<S: Subscriber> Layer<S> for LogFileLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        self.0.write_line(&format_line(event));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt;

    #[test]
    fn writes_mongod_json_lines_and_rotates() {
        let dir = std::env::temp_dir().join(format!("basalt-log-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("basalt.log");
        std::fs::write(&path, "old\n").unwrap();
        let log = std::sync::Arc::new(LogFile::open(&path, false).unwrap());
        let subscriber = tracing_subscriber::registry().with(LogFileLayer(log.clone()));
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(target: "basalt_server::connection", remote = "1.2.3.4:5", n = 3, "Connection accepted");
            tracing::info!(attr = %r#"{"ns":"a.b","millis":7}"#, "Slow query");
        });
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0]["c"], "NETWORK");
        assert_eq!(lines[0]["s"], "I");
        assert_eq!(lines[0]["msg"], "Connection accepted");
        assert_eq!(lines[0]["attr"]["remote"], "1.2.3.4:5");
        assert_eq!(lines[0]["attr"]["n"], 3);
        assert!(lines[0]["t"]["$date"].as_str().unwrap().starts_with("20"));
        assert_eq!(lines[1]["attr"]["millis"], 7);
        log.rotate().unwrap();
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        // The file found at start, the rotated one and the new one.
        assert_eq!(names.len(), 3, "{names:?}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_attribute_past_max_log_size_is_cut_keeping_its_shape() {
        let big: Vec<Value> = (0..5_000)
            .map(|i| serde_json::json!({"_id": i, "x": "y".repeat(20)}))
            .collect();
        let attr = serde_json::json!({"ns": "a.b", "command": {"insert": "b", "documents": big}, "millis": 7});
        let (sender, receiver) = std::sync::mpsc::channel();
        let subscriber = tracing_subscriber::registry().with(CaptureLayer(sender));
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(attr = %attr, "Slow query");
        });
        let line = receiver.recv().unwrap();
        assert!(line.len() < 12 * 1024, "{}", line.len());
        let line: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(line["attr"]["ns"], "a.b");
        assert_eq!(line["attr"]["millis"], 7);
        let kept = line["attr"]["command"]["documents"].as_array().unwrap();
        assert!(!kept.is_empty() && kept.len() < 5_000);
        assert_eq!(kept[0]["_id"], 0);
        assert_eq!(line["truncated"], serde_json::json!({"command": {}}));
        assert!(line["size"]["command"].as_u64().unwrap() > 100_000);
        // Short attributes are left whole, and the line says nothing of truncation.
        let short = cut(&serde_json::json!({"a": [1, 2], "b": "é".repeat(10)}), 100);
        assert_eq!(short, serde_json::json!({"a": [1, 2], "b": "é".repeat(10)}));
        assert_eq!(
            cut(&Value::from("é".repeat(100)), 11),
            Value::from("é".repeat(4))
        );
    }

    /// A layer that sends each event's line.
    struct CaptureLayer(std::sync::mpsc::Sender<String>);

    impl<S: Subscriber> Layer<S> for CaptureLayer {
        fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
            let _ = self.0.send(format_line(event));
        }
    }
}
