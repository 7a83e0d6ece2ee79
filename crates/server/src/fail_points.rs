//! Fail points: mongod's test hooks (`configureFailPoint`, with
//! `--setParameter enableTestCommands=1`), which drivers' own test suites use to make a
//! server fail in a chosen way and check that the driver retries, labels and reports as
//! the specifications say.
//!
//! The one fail point is `failCommand`: the commands it names, from clients (and, with
//! `appName`, from one client application), fail with an error code and labels, have a
//! write concern error added to their reply, are held for a while, or have their
//! connection closed without a reply, always or for a number of times.

use crate::connection::ConnectionInfo;
use basalt_error::{Error, ErrorCode, Result};
use bson::{doc, Bson, Document};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

/// The message of an error the fail point makes, as mongod's.
const FAILED_MESSAGE: &str = "Failing command via 'failCommand' failpoint";

/// When the fail point acts.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Off,
    AlwaysOn,
    /// The next n times, then off.
    Times(i64),
    /// Not the next n times, then always.
    Skip(i64),
}

/// `failCommand`'s configuration.
#[derive(Clone, Debug)]
struct FailCommand {
    mode: Mode,
    commands: Vec<String>,
    app_name: Option<String>,
    error_code: Option<i32>,
    error_labels: Option<Vec<String>>,
    close_connection: bool,
    block_ms: Option<u64>,
    write_concern_error: Option<Document>,
}

/// What the fail point does to one command.
#[derive(Debug, Default)]
pub struct Effect {
    /// Hold the command this long first.
    pub block: Option<Duration>,
    /// Close the connection instead of replying.
    pub close_connection: bool,
    /// Fail with this error instead of running.
    pub error: Option<Error>,
    /// Run, then add this `writeConcernError` to the reply.
    pub write_concern_error: Option<Document>,
}

#[derive(Default)]
pub struct FailPoints {
    fail_command: Mutex<Option<FailCommand>>,
    /// Whether `failCommand` is set: every command asks, and almost always it is not.
    armed: AtomicBool,
    /// Times `failCommand` acted since the server started (`count` in the reply).
    entered: AtomicI64,
}

impl FailPoints {
    /// `configureFailPoint`: sets (or turns off) a fail point; the reply's `count` is how
    /// many times it had acted.
    pub fn configure(&self, body: &Document) -> Result<Document> {
        let name = match body.get("configureFailPoint") {
            Some(Bson::String(name)) => name,
            _ => {
                return Err(Error::type_mismatch(
                    "configureFailPoint must be the name of a fail point",
                ))
            }
        };
        if name != "failCommand" {
            return Err(Error::bad_value(format!("Cannot find failpoint: {name}")));
        }
        let mode = parse_mode(body.get("mode"))?;
        let configured = if mode == Mode::Off {
            None
        } else {
            let data = match body.get("data") {
                Some(Bson::Document(data)) => data,
                _ => return Err(Error::bad_value("failCommand needs a data document")),
            };
            Some(parse_data(mode, data)?)
        };
        let mut point = self.fail_command.lock();
        self.armed.store(configured.is_some(), Ordering::Relaxed);
        *point = configured;
        Ok(doc! { "count": self.entered.load(Ordering::Relaxed) })
    }

    /// What `failCommand` does to the command `name` arriving on `connection`, counting
    /// it as a time the fail point acted.
    pub fn fail_command(&self, name: &str, connection: &ConnectionInfo) -> Option<Effect> {
        if !self.armed.load(Ordering::Relaxed) {
            return None;
        }
        let mut guard = self.fail_command.lock();
        let point = guard.as_mut()?;
        if !point.commands.iter().any(|c| c == name) {
            return None;
        }
        if let Some(app_name) = &point.app_name {
            if connection.app_name() != Some(app_name.as_str()) {
                return None;
            }
        }
        match &mut point.mode {
            Mode::Off => return None,
            Mode::AlwaysOn => {}
            Mode::Times(left) => {
                *left -= 1;
                if *left <= 0 {
                    point.mode = Mode::Off;
                }
            }
            Mode::Skip(left) if *left > 0 => {
                *left -= 1;
                return None;
            }
            Mode::Skip(_) => {}
        }
        let point = point.clone();
        if point.mode == Mode::Off {
            *guard = None;
            self.armed.store(false, Ordering::Relaxed);
        }
        drop(guard);
        self.entered.fetch_add(1, Ordering::Relaxed);
        let error = point.error_code.map(|code| {
            let error = Error::new(ErrorCode(code), FAILED_MESSAGE);
            match &point.error_labels {
                Some(labels) => error.with_extra(doc! { "errorLabels": labels.clone() }),
                None => error,
            }
        });
        Some(Effect {
            block: point.block_ms.map(Duration::from_millis),
            close_connection: point.close_connection,
            error,
            write_concern_error: point.write_concern_error,
        })
    }
}

fn parse_mode(mode: Option<&Bson>) -> Result<Mode> {
    let count = |value: &Bson, what: &str| {
        basalt_value::as_i64(value)
            .filter(|n| *n >= 0)
            .ok_or_else(|| Error::bad_value(format!("'{what}' must be a non-negative number")))
    };
    match mode {
        Some(Bson::String(mode)) if mode == "off" => Ok(Mode::Off),
        Some(Bson::String(mode)) if mode == "alwaysOn" => Ok(Mode::AlwaysOn),
        Some(Bson::Document(mode)) => match mode.iter().next() {
            Some((key, value)) if key == "times" => match count(value, key)? {
                0 => Ok(Mode::Off),
                n => Ok(Mode::Times(n)),
            },
            Some((key, value)) if key == "skip" => Ok(Mode::Skip(count(value, key)?)),
            _ => Err(Error::bad_value(
                "mode must be 'off', 'alwaysOn', {times: n} or {skip: n}",
            )),
        },
        _ => Err(Error::bad_value(
            "mode must be 'off', 'alwaysOn', {times: n} or {skip: n}",
        )),
    }
}

/// The strings of an array field, else BadValue naming `what` it must hold.
fn strings(items: &[Bson], what: &str) -> Result<Vec<String>> {
    items
        .iter()
        .map(|item| {
            item.as_str()
                .map(str::to_string)
                .ok_or_else(|| Error::bad_value(format!("{what} must be strings")))
        })
        .collect()
}

fn parse_data(mode: Mode, data: &Document) -> Result<FailCommand> {
    let commands = match data.get("failCommands") {
        Some(Bson::Array(names)) => strings(names, "failCommands")?,
        _ => return Err(Error::bad_value("failCommand needs data.failCommands")),
    };
    let error_code = match data.get("errorCode") {
        None => None,
        Some(code) => Some(
            basalt_value::as_i64(code)
                .and_then(|c| i32::try_from(c).ok())
                .ok_or_else(|| Error::bad_value("errorCode must be a number"))?,
        ),
    };
    let error_labels = match data.get("errorLabels") {
        None => None,
        Some(Bson::Array(labels)) => Some(strings(labels, "errorLabels")?),
        Some(_) => return Err(Error::bad_value("errorLabels must be an array")),
    };
    let block_ms = if data.get_bool("blockConnection").unwrap_or(false) {
        let ms = data
            .get("blockTimeMS")
            .and_then(basalt_value::as_i64)
            .filter(|ms| *ms >= 0)
            .ok_or_else(|| Error::bad_value("blockConnection needs blockTimeMS"))?;
        Some(ms as u64)
    } else {
        None
    };
    let write_concern_error = match data.get("writeConcernError") {
        None => None,
        Some(Bson::Document(error)) => Some(error.clone()),
        Some(_) => return Err(Error::bad_value("writeConcernError must be a document")),
    };
    let app_name = match data.get("appName") {
        None => None,
        Some(Bson::String(name)) => Some(name.clone()),
        Some(_) => return Err(Error::bad_value("appName must be a string")),
    };
    Ok(FailCommand {
        mode,
        commands,
        app_name,
        error_code,
        error_labels,
        close_connection: data.get_bool("closeConnection").unwrap_or(false),
        block_ms,
        write_concern_error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connection(app_name: Option<&str>) -> ConnectionInfo {
        let info = ConnectionInfo::new(7, std::net::SocketAddr::from(([127, 0, 0, 1], 1)));
        if let Some(name) = app_name {
            info.set_app_name(name);
        }
        info
    }

    #[test]
    fn times_skip_and_app_name() {
        let points = FailPoints::default();
        let plain = connection(None);
        let app = connection(Some("app"));
        points
            .configure(&doc! {
                "configureFailPoint": "failCommand", "mode": { "times": 2 },
                "data": { "failCommands": ["insert"], "errorCode": 91 },
            })
            .unwrap();
        assert!(points.fail_command("find", &plain).is_none());
        let first = points.fail_command("insert", &plain).unwrap();
        assert_eq!(first.error.unwrap().code, ErrorCode(91));
        assert!(points.fail_command("insert", &plain).is_some());
        assert!(points.fail_command("insert", &plain).is_none());

        let reply = points
            .configure(&doc! {
                "configureFailPoint": "failCommand", "mode": { "skip": 1 },
                "data": { "failCommands": ["find"], "closeConnection": true, "appName": "app" },
            })
            .unwrap();
        assert_eq!(reply.get_i64("count").unwrap(), 2);
        assert!(points.fail_command("find", &plain).is_none());
        assert!(points.fail_command("find", &app).is_none(), "skipped once");
        assert!(points.fail_command("find", &app).unwrap().close_connection);
        assert!(points.fail_command("find", &app).is_some());

        points
            .configure(&doc! { "configureFailPoint": "failCommand", "mode": "off" })
            .unwrap();
        assert!(points.fail_command("find", &app).is_none());
    }

    #[test]
    fn bad_configurations_are_refused() {
        let points = FailPoints::default();
        let bad = [
            doc! { "configureFailPoint": "noSuchPoint", "mode": "alwaysOn" },
            doc! { "configureFailPoint": 1, "mode": "alwaysOn" },
            doc! { "configureFailPoint": "failCommand", "mode": "sometimes", "data": {} },
            doc! { "configureFailPoint": "failCommand", "mode": { "times": -1 }, "data": {} },
            doc! { "configureFailPoint": "failCommand", "mode": "alwaysOn" },
            doc! { "configureFailPoint": "failCommand", "mode": "alwaysOn", "data": {} },
            doc! { "configureFailPoint": "failCommand", "mode": "alwaysOn",
            "data": { "failCommands": ["find"], "blockConnection": true } },
            doc! { "configureFailPoint": "failCommand", "mode": "alwaysOn",
            "data": { "failCommands": ["find"], "errorCode": "x" } },
        ];
        for body in bad {
            assert!(points.configure(&body).is_err(), "{body}");
        }
    }
}
