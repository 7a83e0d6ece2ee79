//! Server parameters changed at run time (`setParameter`) and read back (`getParameter`):
//! mongod's `logLevel`, `quiet`, `logComponentVerbosity` and `automationServiceDescriptor`.
//!
//! The log settings are not only reported: every change becomes the process's log
//! filter (`LogBuffer::set_filter`, through the hook the binary installs). `logLevel`
//! (the default verbosity) and each component's verbosity map to tracing levels — 0 is
//! info, 1 debug, 2 and above trace, -1 (a component's default) follows its parent —
//! and the components to the modules that log for them (`command` to the command
//! handlers, `replication` to the replica set, `storage` to the engine, ...). `quiet`
//! lowers the default to warnings, as `--quiet` does at start. Components mongod has and
//! Basalt has no code for (sharding, WiredTiger's) are kept and reported but filter
//! nothing.

use crate::log_buffer::LogBuffer;
use basalt_error::{Error, ErrorCode, Result};
use bson::{Bson, Document};
use parking_lot::Mutex;
use std::collections::BTreeMap;

/// mongod's log components, as dotted paths, with the modules that log for each.
const COMPONENTS: &[(&str, &[&str])] = &[
    ("accessControl", &["basalt_server::security", "basalt_auth"]),
    ("assert", &[]),
    ("command", &["basalt_server::commands"]),
    ("control", &["basalt", "basalt_server::listener"]),
    ("executor", &[]),
    ("geo", &["basalt_server::geo"]),
    ("globalIndex", &[]),
    ("index", &["basalt_catalog"]),
    ("network", &["basalt_server::connection", "basalt_wire"]),
    ("network.asio", &[]),
    ("network.bridge", &[]),
    ("network.connectionPool", &["basalt_repl::network"]),
    ("processHealth", &[]),
    (
        "query",
        &["basalt_query", "basalt_plan", "basalt_agg", "basalt_expr"],
    ),
    ("queryStats", &[]),
    (
        "replication",
        &["basalt_repl", "basalt_server::replication", "openraft"],
    ),
    ("replication.election", &["basalt_repl::replica_set"]),
    ("replication.heartbeats", &[]),
    ("replication.initialSync", &["basalt_repl::initial_sync"]),
    ("replication.rollback", &[]),
    ("sharding", &[]),
    ("sharding.rangeDeleter", &[]),
    ("sharding.shardingCatalogRefresh", &[]),
    ("sharding.migration", &[]),
    ("sharding.reshard", &[]),
    ("sharding.migrationPerf", &[]),
    ("storage", &["basalt_storage", "fjall", "lsm_tree"]),
    ("storage.recovery", &[]),
    ("storage.journal", &[]),
    ("storage.wt", &[]),
    ("write", &[]),
    ("ftdc", &[]),
    ("tracking", &[]),
    ("transaction", &["basalt_server::transactions"]),
    ("tenantMigration", &[]),
    ("test", &[]),
    ("resourceConsumption", &[]),
    ("streams", &[]),
];

/// mongod's short name of the log component a module logs for (the `c` of its log
/// lines): the component of the longest module path that `target` starts with.
pub fn log_component(target: &str) -> &'static str {
    let component = COMPONENTS
        .iter()
        .flat_map(|(component, modules)| modules.iter().map(move |m| (*component, *m)))
        .filter(|(_, module)| {
            target == *module
                || target
                    .strip_prefix(module)
                    .is_some_and(|r| r.starts_with("::"))
        })
        .max_by_key(|(_, module)| module.len())
        .map_or("", |(component, _)| component);
    match component {
        "accessControl" => "ACCESS",
        "command" => "COMMAND",
        "control" => "CONTROL",
        "geo" => "GEO",
        "index" => "INDEX",
        "network" => "NETWORK",
        "network.connectionPool" => "CONNPOOL",
        "query" => "QUERY",
        "replication" => "REPL",
        "replication.election" => "ELECTION",
        "replication.initialSync" => "INITSYNC",
        "storage" => "STORAGE",
        "transaction" => "TXN",
        _ => "-",
    }
}

/// The longest `automationServiceDescriptor` mongod takes.
const DESCRIPTOR_BYTES_MAX: usize = 64;

/// Parameters known to the server that only its command line sets.
const STARTUP_ONLY: &[&str] = &[
    "port",
    "bind_ip",
    "dbpath",
    "scanWorkers",
    "enableTestCommands",
    "ttlMonitorSleepSecs",
    "transactionLifetimeLimitSeconds",
    "transactionSizeLimitBytes",
    "minSnapshotHistoryWindowInSeconds",
    "authenticationMechanisms",
];

/// The values of the runtime parameters.
struct Values {
    log_level: i32,
    quiet: bool,
    descriptor: String,
    /// Each component's verbosity; -1 is its parent's.
    components: BTreeMap<&'static str, i32>,
}

pub struct RuntimeParameters {
    values: Mutex<Values>,
    log: LogBuffer,
}

/// One parameter's new value, checked.
enum Change {
    LogLevel(i32),
    Quiet(bool),
    Descriptor(String),
    Components(Vec<(Option<&'static str>, i32)>),
}

impl RuntimeParameters {
    pub fn new(quiet: bool, log: LogBuffer) -> RuntimeParameters {
        RuntimeParameters {
            values: Mutex::new(Values {
                log_level: 0,
                quiet,
                descriptor: String::new(),
                components: COMPONENTS.iter().map(|(path, _)| (*path, -1)).collect(),
            }),
            log,
        }
    }

    /// The parameters as getParameter reports them.
    pub fn current(&self) -> Document {
        let values = self.values.lock();
        let mut verbosity = bson::doc! { "verbosity": values.log_level };
        for (path, level) in &values.components {
            insert_path(&mut verbosity, path, *level);
        }
        bson::doc! {
            "logLevel": values.log_level,
            "quiet": values.quiet,
            "automationServiceDescriptor": values.descriptor.clone(),
            "logComponentVerbosity": verbosity,
        }
    }

    /// `setParameter`: every parameter of `body` checked first, then all set at once;
    /// replies with the last one's previous value (`was`), as mongod does.
    pub fn set(&self, body: &Document) -> Result<Document> {
        let mut changes = Vec::new();
        for (name, value) in body.iter().skip(1) {
            if name.starts_with('$')
                || crate::request::GENERIC_COMMAND_FIELDS.contains(&name.as_str())
            {
                continue;
            }
            changes.push((name.as_str(), parse_change(name, value)?));
        }
        if changes.is_empty() {
            return Err(Error::new(
                ErrorCode::INVALID_OPTIONS,
                "no option found to set, use help:true to see options",
            ));
        }
        let before = self.current();
        let mut was = Bson::Null;
        {
            let mut values = self.values.lock();
            for (name, change) in changes {
                was = before.get(name).cloned().unwrap_or(Bson::Null);
                match change {
                    Change::LogLevel(level) => values.log_level = level,
                    Change::Quiet(quiet) => values.quiet = quiet,
                    Change::Descriptor(text) => values.descriptor = text,
                    Change::Components(levels) => {
                        for (path, level) in levels {
                            match path {
                                None => values.log_level = level.max(0),
                                Some(path) => {
                                    values.components.insert(path, level);
                                }
                            }
                        }
                    }
                }
            }
            self.log.set_filter(&filter_directives(&values));
        }
        Ok(bson::doc! { "was": was })
    }
}

/// Checks one parameter's new value.
fn parse_change(name: &str, value: &Bson) -> Result<Change> {
    match name {
        "logLevel" => Ok(Change::LogLevel(level(value, "logLevel")?.ok_or_else(|| {
            Error::bad_value(format!("logLevel must be a non-negative number, not {value}"))
        })?)),
        "quiet" => Ok(Change::Quiet(basalt_expr::truthy(Some(value)))),
        "automationServiceDescriptor" => match value {
            Bson::String(text) if text.len() > DESCRIPTOR_BYTES_MAX => Err(Error::new(
                ErrorCode::OVERFLOW,
                format!(
                    "Value for parameter automationServiceDescriptor must be no more than {DESCRIPTOR_BYTES_MAX} bytes"
                ),
            )),
            Bson::String(text) => Ok(Change::Descriptor(text.clone())),
            other => Err(Error::type_mismatch(format!(
                "automationServiceDescriptor must be a string, not {}",
                crate::request::type_name(other)
            ))),
        },
        "logComponentVerbosity" => match value {
            Bson::Document(spec) => {
                let mut levels = Vec::new();
                component_levels(spec, "", &mut levels)?;
                Ok(Change::Components(levels))
            }
            other => Err(Error::type_mismatch(format!(
                "logComponentVerbosity must be an object, not {}",
                crate::request::type_name(other)
            ))),
        },
        "featureCompatibilityVersion" => Err(Error::new(
            ErrorCode::ILLEGAL_OPERATION,
            "Cannot set featureCompatibilityVersion via setParameter; use the \
             setFeatureCompatibilityVersion command",
        )),
        known if STARTUP_ONLY.contains(&known) => Err(Error::new(
            ErrorCode::INVALID_OPTIONS,
            format!("not allowed to change [{known}] at runtime"),
        )),
        unknown => Err(Error::new(
            ErrorCode::INVALID_OPTIONS,
            format!("attempted to set unrecognized parameter [{unknown}], use help:true to see options"),
        )),
    }
}

/// A verbosity: a number (a bool is 0 or 1; a fraction is cut) that is a 32-bit
/// integer, for `logLevel` non-negative. `Ok(None)` for a negative `logLevel`.
fn level(value: &Bson, what: &str) -> Result<Option<i32>> {
    let number = match value {
        Bson::Boolean(b) => Some(f64::from(u8::from(*b))),
        other => basalt_value::as_f64(other),
    };
    let number = number
        .filter(|n| n.is_finite())
        .map(f64::trunc)
        .filter(|n| (f64::from(i32::MIN)..=f64::from(i32::MAX)).contains(n))
        .ok_or_else(|| Error::bad_value(format!("{what} must be a 32-bit integer, not {value}")))?;
    let level = number as i32;
    Ok((what != "logLevel" || level >= 0).then_some(level))
}

/// The levels a `logComponentVerbosity` document sets, under `prefix` (a component's
/// path and a dot, or nothing at the top, where `verbosity` is `logLevel`). A component
/// takes `{verbosity: N, <child>: ...}` or a bare number.
fn component_levels(
    spec: &Document,
    prefix: &str,
    levels: &mut Vec<(Option<&'static str>, i32)>,
) -> Result<()> {
    for (key, value) in spec {
        if key == "verbosity" {
            let level = level(value, "verbosity")?.unwrap_or(-1);
            let path = prefix.strip_suffix('.');
            levels.push((path.map(component).transpose()?, level));
            continue;
        }
        let path = component(&format!("{prefix}{key}"))?;
        match value {
            Bson::Document(nested) => component_levels(nested, &format!("{path}."), levels)?,
            other => levels.push((Some(path), level(other, "verbosity")?.unwrap_or(-1))),
        }
    }
    Ok(())
}

/// The component at `path`, as the table names it; an unknown one is BadValue.
fn component(path: &str) -> Result<&'static str> {
    COMPONENTS
        .iter()
        .map(|(name, _)| *name)
        .find(|name| *name == path)
        .ok_or_else(|| Error::bad_value(format!("Invalid component name {path}")))
}

/// Adds `{..., a: {verbosity, b: {verbosity}}}` for component path `a.b`.
fn insert_path(tree: &mut Document, path: &str, level: i32) {
    match path.split_once('.') {
        None => {
            tree.insert(path, bson::doc! { "verbosity": level });
        }
        Some((head, rest)) => {
            if let Ok(child) = tree.get_document_mut(head) {
                insert_path(child, rest, level);
            }
        }
    }
}

/// A verbosity as a tracing level.
fn tracing_level(verbosity: i32) -> &'static str {
    match verbosity {
        0 => "info",
        1 => "debug",
        _ => "trace",
    }
}

/// The log filter the values ask for: the default level, then each component's
/// modules at their verbosity (a component at -1 takes its parent's).
fn filter_directives(values: &Values) -> String {
    let default = if values.quiet && values.log_level == 0 {
        "warn"
    } else {
        tracing_level(values.log_level)
    };
    let mut directives = vec![default.to_string()];
    for (path, modules) in COMPONENTS {
        let mut level = values.components.get(path).copied().unwrap_or(-1);
        let mut parent = *path;
        while level < 0 {
            match parent.rsplit_once('.') {
                Some((up, _)) => {
                    parent = up;
                    level = values.components.get(up).copied().unwrap_or(-1);
                }
                None => break,
            }
        }
        if level >= 0 {
            directives.extend(
                modules
                    .iter()
                    .map(|m| format!("{m}={}", tracing_level(level))),
            );
        }
    }
    directives.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parameters() -> RuntimeParameters {
        RuntimeParameters::new(false, LogBuffer::default())
    }

    #[test]
    fn verbosities_become_the_log_filter() {
        let p = parameters();
        p.set(&bson::doc! { "setParameter": 1, "logLevel": 1 })
            .unwrap();
        p.set(&bson::doc! {
            "setParameter": 1,
            "logComponentVerbosity": { "replication": { "verbosity": 2, "election": 0 } },
        })
        .unwrap();
        let values = p.values.lock();
        let filter = filter_directives(&values);
        assert!(filter.starts_with("debug,"), "{filter}");
        assert!(filter.contains("basalt_repl=trace"), "{filter}");
        assert!(filter.contains("basalt_repl::replica_set=info"), "{filter}");
        // initialSync follows replication.
        assert!(
            filter.contains("basalt_repl::initial_sync=trace"),
            "{filter}"
        );
        assert!(!filter.contains("basalt_storage"), "{filter}");
    }

    #[test]
    fn a_command_is_checked_whole_before_anything_changes() {
        let p = parameters();
        p.set(&bson::doc! { "setParameter": 1, "logComponentVerbosity": { "command": 3 } })
            .unwrap();
        let bad = bson::doc! {
            "setParameter": 1,
            "logComponentVerbosity": { "command": { "verbosity": 1 }, "nope": { "verbosity": 1 } },
        };
        assert_eq!(p.set(&bad).unwrap_err().code, ErrorCode::BAD_VALUE);
        let current = p.current();
        let command = current
            .get_document("logComponentVerbosity")
            .and_then(|c| c.get_document("command"))
            .unwrap();
        assert_eq!(command.get_i32("verbosity").ok(), Some(3));
        let asio = current
            .get_document("logComponentVerbosity")
            .and_then(|c| c.get_document("network"))
            .and_then(|n| n.get_document("asio"))
            .unwrap();
        assert_eq!(asio.get_i32("verbosity").ok(), Some(-1));
    }

    #[test]
    fn values_are_checked_as_mongod_checks_them() {
        let p = parameters();
        let code = |body: Document| p.set(&body).unwrap_err().code;
        assert_eq!(
            code(bson::doc! { "setParameter": 1 }),
            ErrorCode::INVALID_OPTIONS
        );
        assert_eq!(
            code(bson::doc! { "setParameter": 1, "nope": 1 }),
            ErrorCode::INVALID_OPTIONS
        );
        assert_eq!(
            code(bson::doc! { "setParameter": 1, "port": 1 }),
            ErrorCode::INVALID_OPTIONS
        );
        assert_eq!(
            code(bson::doc! { "setParameter": 1, "logLevel": -1 }),
            ErrorCode::BAD_VALUE
        );
        assert_eq!(
            code(bson::doc! { "setParameter": 1, "logLevel": "1" }),
            ErrorCode::BAD_VALUE
        );
        assert_eq!(
            code(bson::doc! { "setParameter": 1, "logLevel": i64::from(i32::MAX) + 1 }),
            ErrorCode::BAD_VALUE
        );
        assert_eq!(
            code(bson::doc! { "setParameter": 1, "automationServiceDescriptor": 1 }),
            ErrorCode::TYPE_MISMATCH
        );
        assert_eq!(
            code(bson::doc! { "setParameter": 1, "automationServiceDescriptor": "x".repeat(65) }),
            ErrorCode::OVERFLOW
        );
        assert_eq!(
            code(bson::doc! { "setParameter": 1, "logComponentVerbosity": "abc" }),
            ErrorCode::TYPE_MISMATCH
        );
        // A fraction is cut; the previous value comes back as `was`.
        let reply = p
            .set(&bson::doc! { "setParameter": 1, "logLevel": 1.5 })
            .unwrap();
        assert_eq!(reply.get_i32("was").ok(), Some(0));
        assert_eq!(p.current().get_i32("logLevel").ok(), Some(1));
        p.set(&bson::doc! { "setParameter": 1, "quiet": "true" })
            .unwrap();
        assert_eq!(p.current().get_bool("quiet").ok(), Some(true));
    }
}
