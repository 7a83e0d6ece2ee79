//! MongoDB's replica set configuration document: checked as mongod checks it, completed
//! with its defaults, and read for what Raft needs (who votes, who may be elected).

use basalt_error::{Error, ErrorCode, Result};
use bson::{doc, Bson, Document};
use std::collections::{BTreeMap, BTreeSet};

/// Election timing when the config's `settings` do not give it. Shorter than mongod's 10 s
/// default: failover is meant to be over within 2 s.
pub const ELECTION_TIMEOUT_MS_DEFAULT: i64 = 1000;
pub const HEARTBEAT_INTERVAL_MS_DEFAULT: i64 = 100;

/// One member of the set, as the config describes it.
#[derive(Clone, Debug, PartialEq)]
pub struct MemberConfig {
    pub id: u64,
    pub host: String,
    pub priority: f64,
    pub votes: i32,
    pub hidden: bool,
    /// `tags`: name → value, for write concern modes and read preference tag sets.
    pub tags: BTreeMap<String, String>,
    /// `secondaryDelaySecs`: how long after the primary it applies each entry.
    pub delay_secs: u64,
}

impl MemberConfig {
    pub fn electable(&self) -> bool {
        self.priority > 0.0 && self.votes > 0
    }
}

/// A checked configuration.
#[derive(Clone, Debug)]
pub struct SetConfig {
    /// The document as `replSetGetConfig` shows it, defaults filled in.
    pub document: Document,
    pub members: Vec<MemberConfig>,
    pub version: i64,
}

fn invalid(message: impl Into<String>) -> Error {
    Error::new(ErrorCode::INVALID_REPLICA_SET_CONFIG, message)
}

fn number(value: &Bson) -> Option<f64> {
    match value {
        Bson::Int32(n) => Some(f64::from(*n)),
        Bson::Int64(n) => Some(*n as f64),
        Bson::Double(n) => Some(*n),
        _ => None,
    }
}

/// `host:port` with mongod's default port when none is given.
fn normalize_host(host: &str) -> String {
    if host.contains(':') {
        host.to_string()
    } else {
        format!("{host}:27017")
    }
}

impl SetConfig {
    /// Checks `document` as the config of the set named `set_name`, filling in defaults.
    pub fn parse(document: &Document, set_name: &str) -> Result<SetConfig> {
        let id = document
            .get_str("_id")
            .map_err(|_| invalid("replica set configuration must have a string _id field"))?;
        if id != set_name {
            return Err(invalid(format!(
                "Attempting to initiate a replica set with name {id}, but command line reports \
                 {set_name}; rejecting"
            )));
        }
        let version = match document.get("version") {
            None => 1,
            Some(value) => number(value)
                .filter(|v| v.fract() == 0.0 && *v >= 1.0)
                .ok_or_else(|| invalid("version field value of must be a positive integer"))?
                as i64,
        };
        let Some(Bson::Array(entries)) = document.get("members") else {
            return Err(invalid(
                "replica set configuration must have a members array",
            ));
        };
        if entries.is_empty() {
            return Err(invalid(
                "Replica set configuration must contain at least one member",
            ));
        }
        if entries.len() > 50 {
            return Err(invalid(
                "Replica set configuration contains more than 50 members",
            ));
        }
        let mut members = Vec::with_capacity(entries.len());
        let mut ids = BTreeSet::new();
        let mut hosts = BTreeMap::new();
        let mut completed = Vec::with_capacity(entries.len());
        for (position, entry) in entries.iter().enumerate() {
            let Bson::Document(entry) = entry else {
                return Err(invalid(format!("members.{position} must be a document")));
            };
            let member = parse_member(entry, position)?;
            if !ids.insert(member.id) {
                return Err(invalid(format!(
                    "Found two member configurations with same _id field, members.{}._id == \
                     members.{position}._id == {}",
                    members
                        .iter()
                        .position(|m: &MemberConfig| m.id == member.id)
                        .unwrap_or(0),
                    member.id
                )));
            }
            if let Some(first) = hosts.insert(member.host.clone(), position) {
                return Err(invalid(format!(
                    "Found two member configurations with same host field, members.{first}.host \
                     == members.{position}.host == {}",
                    member.host
                )));
            }
            let tags: Document = member
                .tags
                .iter()
                .map(|(name, value)| (name.clone(), Bson::String(value.clone())))
                .collect();
            completed.push(Bson::Document(doc! {
                "_id": member.id as i32,
                "host": member.host.clone(),
                "arbiterOnly": false,
                "buildIndexes": true,
                "hidden": member.hidden,
                "priority": member.priority,
                "tags": tags,
                "secondaryDelaySecs": member.delay_secs as i64,
                "votes": member.votes,
            }));
            members.push(member);
        }
        let voters = members.iter().filter(|m| m.votes > 0).count();
        if voters == 0 {
            return Err(invalid(
                "Replica set configuration must contain at least one voting member",
            ));
        }
        if voters > 7 {
            return Err(invalid(format!(
                "Replica set configuration contains {voters} voting members, but must be at \
                 most 7"
            )));
        }
        if !members.iter().any(MemberConfig::electable) {
            return Err(invalid(
                "Replica set configuration must contain at least one non-arbiter member with \
                 priority > 0",
            ));
        }
        let given = document
            .get_document("settings")
            .cloned()
            .unwrap_or_default();
        let mut settings = doc! {
            "chainingAllowed": true,
            "heartbeatIntervalMillis": HEARTBEAT_INTERVAL_MS_DEFAULT,
            "heartbeatTimeoutSecs": 10,
            "electionTimeoutMillis": ELECTION_TIMEOUT_MS_DEFAULT,
            "catchUpTimeoutMillis": -1_i64,
            "catchUpTakeoverDelayMillis": 30000_i64,
            "getLastErrorModes": {},
            "getLastErrorDefaults": { "w": 1, "wtimeout": 0 },
        };
        for (key, value) in given {
            settings.insert(key, value);
        }
        check_write_modes(&settings, &members)?;
        for key in ["electionTimeoutMillis", "heartbeatIntervalMillis"] {
            let valid = settings
                .get(key)
                .and_then(number)
                .is_some_and(|v| v >= 1.0 && v.fract() == 0.0);
            if !valid {
                return Err(invalid(format!("{key} must be a positive whole number")));
            }
        }
        let document = doc! {
            "_id": id,
            "version": version as i32,
            "term": document.get("term").cloned().unwrap_or(Bson::Int32(0)),
            "protocolVersion": 1_i64,
            "writeConcernMajorityJournalDefault": true,
            "members": completed,
            "settings": settings,
        };
        Ok(SetConfig {
            document,
            members,
            version,
        })
    }

    fn setting_ms(&self, key: &str, default: i64) -> u64 {
        self.document
            .get_document("settings")
            .ok()
            .and_then(|s| s.get(key))
            .and_then(number)
            .map_or(default, |v| v as i64)
            .max(1) as u64
    }

    pub fn election_timeout_ms(&self) -> u64 {
        self.setting_ms("electionTimeoutMillis", ELECTION_TIMEOUT_MS_DEFAULT)
    }

    pub fn heartbeat_interval_ms(&self) -> u64 {
        self.setting_ms("heartbeatIntervalMillis", HEARTBEAT_INTERVAL_MS_DEFAULT)
    }

    /// The write concern mode `name` of `settings.getLastErrorModes`: how many distinct
    /// values of each tag the members holding a write must have.
    pub fn write_mode(&self, name: &str) -> Option<Vec<(String, usize)>> {
        let modes = self
            .document
            .get_document("settings")
            .ok()?
            .get_document("getLastErrorModes")
            .ok()?;
        let mode = modes.get_document(name).ok()?;
        Some(
            mode.iter()
                .map(|(tag, n)| (tag.clone(), number(n).unwrap_or(0.0) as usize))
                .collect(),
        )
    }

    /// Whether the members `holders` satisfy the write mode `mode`.
    pub fn satisfies(&self, mode: &[(String, usize)], holders: &[u64]) -> bool {
        mode.iter().all(|(tag, wanted)| {
            let values: BTreeSet<&String> = holders
                .iter()
                .filter_map(|id| self.member(*id)?.tags.get(tag))
                .collect();
            values.len() >= *wanted
        })
    }

    pub fn member(&self, id: u64) -> Option<&MemberConfig> {
        self.members.iter().find(|m| m.id == id)
    }

    pub fn set_name(&self) -> &str {
        self.document.get_str("_id").unwrap_or_default()
    }
}

fn parse_member(entry: &Document, position: usize) -> Result<MemberConfig> {
    let id = entry
        .get("_id")
        .and_then(number)
        .filter(|v| v.fract() == 0.0 && (0.0..=255.0).contains(v))
        .ok_or_else(|| {
            invalid(format!(
                "members.{position}._id must be a whole number between 0 and 255"
            ))
        })? as u64;
    let host = entry
        .get_str("host")
        .map_err(|_| invalid(format!("members.{position}.host must be a string")))?;
    if host.is_empty() {
        return Err(invalid(format!("members.{position}.host is empty")));
    }
    if entry.get_bool("arbiterOnly").unwrap_or(false) {
        return Err(Error::new(
            ErrorCode::COMMAND_NOT_SUPPORTED,
            format!(
                "members.{position}: arbiters are not supported by Basalt; give the set a \
                 data-bearing member instead"
            ),
        ));
    }
    let votes = match entry.get("votes") {
        None => 1,
        Some(value) => match number(value) {
            Some(v) if v == 0.0 || v == 1.0 => v as i32,
            _ => return Err(invalid(format!("members.{position}.votes must be 0 or 1"))),
        },
    };
    let hidden = entry.get_bool("hidden").unwrap_or(false);
    let default_priority = if votes == 0 || hidden { 0.0 } else { 1.0 };
    let priority = match entry.get("priority") {
        None => default_priority,
        Some(value) => number(value)
            .filter(|p| (0.0..=1000.0).contains(p))
            .ok_or_else(|| {
                invalid(format!(
                    "members.{position}.priority must be a number between 0 and 1000"
                ))
            })?,
    };
    if hidden && priority > 0.0 {
        return Err(invalid(format!(
            "priority must be 0 when hidden=true (members.{position})"
        )));
    }
    if votes == 0 && priority > 0.0 {
        return Err(invalid(format!(
            "priority must be 0 when non-voting (votes:0) (members.{position})"
        )));
    }
    let mut tags = BTreeMap::new();
    match entry.get("tags") {
        None => {}
        Some(Bson::Document(given)) => {
            for (name, value) in given {
                let Bson::String(value) = value else {
                    return Err(invalid(format!(
                        "tags.{name} field value of members.{position} must be a string"
                    )));
                };
                tags.insert(name.clone(), value.clone());
            }
        }
        Some(_) => {
            return Err(invalid(format!(
                "members.{position}.tags must be a document"
            )))
        }
    }
    let delay_secs = match entry.get("secondaryDelaySecs") {
        None => 0,
        Some(value) => number(value)
            .filter(|v| v.fract() == 0.0 && (0.0..=MAX_DELAY_SECS).contains(v))
            .ok_or_else(|| {
                invalid(format!(
                    "members.{position}.secondaryDelaySecs must be a whole number of seconds \
                     between 0 and {MAX_DELAY_SECS}"
                ))
            })? as u64,
    };
    if delay_secs > 0 && priority > 0.0 {
        return Err(invalid(format!(
            "priority must be 0 when secondaryDelaySecs is used (members.{position})"
        )));
    }
    Ok(MemberConfig {
        id,
        host: normalize_host(host),
        priority,
        votes,
        hidden,
        tags,
        delay_secs,
    })
}

/// The longest `secondaryDelaySecs`, as mongod's (a year of 366 days).
const MAX_DELAY_SECS: f64 = 3600.0 * 24.0 * 366.0;

/// Checks `settings.getLastErrorModes`: each mode names tags and a positive number of
/// distinct values of each, which the members' tags must be able to satisfy.
fn check_write_modes(settings: &Document, members: &[MemberConfig]) -> Result<()> {
    let modes = match settings.get("getLastErrorModes") {
        None => return Ok(()),
        Some(Bson::Document(modes)) => modes,
        Some(_) => return Err(invalid("settings.getLastErrorModes must be a document")),
    };
    for (name, mode) in modes {
        let Bson::Document(mode) = mode else {
            return Err(invalid(format!(
                "getLastErrorModes.{name} must be a document"
            )));
        };
        for (tag, wanted) in mode {
            let wanted = number(wanted)
                .filter(|n| n.fract() == 0.0 && *n >= 1.0)
                .ok_or_else(|| {
                    invalid(format!(
                        "getLastErrorModes.{name}.{tag} must be a positive whole number"
                    ))
                })? as usize;
            let values: BTreeSet<&String> =
                members.iter().filter_map(|m| m.tags.get(tag)).collect();
            if values.len() < wanted {
                return Err(invalid(format!(
                    "mode {name} requires {wanted} distinct values of tag \"{tag}\", but the \
                     members have {}",
                    values.len()
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn three() -> Document {
        doc! { "_id": "rs0", "members": [
            { "_id": 0, "host": "127.0.0.1:27017" },
            { "_id": 1, "host": "127.0.0.1:27018", "priority": 0 },
            { "_id": 2, "host": "127.0.0.1:27019", "hidden": true, "priority": 0 },
        ] }
    }

    #[test]
    fn defaults_are_filled_in() {
        let config = SetConfig::parse(&three(), "rs0").unwrap();
        assert_eq!(config.version, 1);
        assert_eq!(config.members.len(), 3);
        assert!(config.members[0].electable());
        assert!(!config.members[1].electable());
        let members = config.document.get_array("members").unwrap();
        let first = members[0].as_document().unwrap();
        assert_eq!(first.get_f64("priority").unwrap(), 1.0);
        assert_eq!(first.get_i32("votes").unwrap(), 1);
        assert_eq!(config.election_timeout_ms(), 1000);
    }

    #[test]
    fn write_modes_count_distinct_tag_values() {
        let config = SetConfig::parse(
            &doc! {"_id": "rs0", "members": [
                {"_id": 0, "host": "a:1", "tags": {"dc": "east", "rack": "1"}},
                {"_id": 1, "host": "a:2", "tags": {"dc": "east", "rack": "2"}},
                {"_id": 2, "host": "a:3", "tags": {"dc": "west"}, "priority": 0, "secondaryDelaySecs": 60},
            ], "settings": {"getLastErrorModes": {"twoDCs": {"dc": 2}, "twoRacks": {"rack": 2}}}},
            "rs0",
        )
        .unwrap();
        assert_eq!(config.members[2].delay_secs, 60);
        let two_dcs = config.write_mode("twoDCs").unwrap();
        assert!(!config.satisfies(&two_dcs, &[0, 1]));
        assert!(config.satisfies(&two_dcs, &[0, 2]));
        let two_racks = config.write_mode("twoRacks").unwrap();
        assert!(!config.satisfies(&two_racks, &[0, 2]));
        assert!(config.satisfies(&two_racks, &[0, 1]));
        assert!(config.write_mode("none").is_none());
    }

    #[test]
    fn mongod_s_errors() {
        let code = |d: Document, name: &str| SetConfig::parse(&d, name).unwrap_err().code;
        assert_eq!(
            code(three(), "other"),
            ErrorCode::INVALID_REPLICA_SET_CONFIG
        );
        let mut duplicate = three();
        duplicate.insert(
            "members",
            vec![
                Bson::Document(doc! {"_id": 0, "host": "a:1"}),
                Bson::Document(doc! {"_id": 1, "host": "a:1"}),
            ],
        );
        assert_eq!(
            code(duplicate, "rs0"),
            ErrorCode::INVALID_REPLICA_SET_CONFIG
        );
        let hidden = doc! {"_id": "rs0", "members": [{"_id": 0, "host": "a:1", "hidden": true, "priority": 1}]};
        assert_eq!(code(hidden, "rs0"), ErrorCode::INVALID_REPLICA_SET_CONFIG);
        let none_electable =
            doc! {"_id": "rs0", "members": [{"_id": 0, "host": "a:1", "priority": 0}]};
        assert_eq!(
            code(none_electable, "rs0"),
            ErrorCode::INVALID_REPLICA_SET_CONFIG
        );
        let delayed_electable = doc! {"_id": "rs0", "members": [{"_id": 0, "host": "a:1"}, {"_id": 1, "host": "a:2", "secondaryDelaySecs": 5}]};
        assert_eq!(
            code(delayed_electable, "rs0"),
            ErrorCode::INVALID_REPLICA_SET_CONFIG
        );
        let tag_not_string =
            doc! {"_id": "rs0", "members": [{"_id": 0, "host": "a:1", "tags": {"dc": 1}}]};
        assert_eq!(
            code(tag_not_string, "rs0"),
            ErrorCode::INVALID_REPLICA_SET_CONFIG
        );
        let unsatisfiable = doc! {"_id": "rs0", "members": [{"_id": 0, "host": "a:1", "tags": {"dc": "east"}}],
        "settings": {"getLastErrorModes": {"twoDCs": {"dc": 2}}}};
        assert_eq!(
            code(unsatisfiable, "rs0"),
            ErrorCode::INVALID_REPLICA_SET_CONFIG
        );
        let arbiter = doc! {"_id": "rs0", "members": [{"_id": 0, "host": "a:1"}, {"_id": 1, "host": "a:2", "arbiterOnly": true}]};
        assert_eq!(code(arbiter, "rs0"), ErrorCode::COMMAND_NOT_SUPPORTED);
        assert_eq!(
            code(doc! {"_id": "rs0", "members": []}, "rs0"),
            ErrorCode::INVALID_REPLICA_SET_CONFIG
        );
    }
}
