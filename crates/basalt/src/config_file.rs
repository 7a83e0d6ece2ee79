//! mongod's YAML configuration file (`--config FILE`, `-f FILE`): its settings become the
//! command-line flags they stand for, placed before the flags given on the command line,
//! which therefore win (clap keeps the last of a repeated flag).
//!
//! Every option Basalt has a flag for is read (`net`, `storage`, `security`,
//! `replication`, `setParameter`, `systemLog.quiet`/`path`/`logAppend`,
//! `operationProfiling`). mongod options that only concern its own machinery (syslog,
//! forking, the journal) are accepted and ignored
//! with a warning, so an existing mongod.conf starts Basalt; anything else is refused by
//! name, as mongod refuses an unknown option.

use std::ffi::OsString;
use yaml_rust2::{Yaml, YamlLoader};

/// How a setting maps to a flag.
enum Flag {
    /// `--name value`.
    Value(&'static str),
    /// `--name` when the setting is true.
    Switch(&'static str),
}

/// The settings Basalt reads, by their dotted path in the file.
const SETTINGS: &[(&str, Flag)] = &[
    ("net.port", Flag::Value("--port")),
    ("net.bindIp", Flag::Value("--bind_ip")),
    ("net.bindIpAll", Flag::Switch("--bind_ip_all")),
    ("net.maxIncomingConnections", Flag::Value("--maxConns")),
    ("net.http.port", Flag::Value("--httpPort")),
    ("net.tls.mode", Flag::Value("--tlsMode")),
    (
        "net.tls.certificateKeyFile",
        Flag::Value("--tlsCertificateKeyFile"),
    ),
    ("net.tls.CAFile", Flag::Value("--tlsCAFile")),
    (
        "net.tls.allowConnectionsWithoutCertificates",
        Flag::Switch("--tlsAllowConnectionsWithoutCertificates"),
    ),
    (
        "net.tls.allowInvalidCertificates",
        Flag::Switch("--tlsAllowInvalidCertificates"),
    ),
    ("storage.dbPath", Flag::Value("--dbpath")),
    (
        "storage.wiredTiger.engineConfig.cacheSizeGB",
        Flag::Value("--cacheSizeGB"),
    ),
    ("security.keyFile", Flag::Value("--keyFile")),
    ("security.clusterAuthMode", Flag::Value("--clusterAuthMode")),
    ("replication.replSetName", Flag::Value("--replSet")),
    ("replication.oplogSizeMB", Flag::Value("--oplogSizeMB")),
    ("systemLog.quiet", Flag::Switch("--quiet")),
    ("systemLog.path", Flag::Value("--logpath")),
    ("systemLog.logAppend", Flag::Switch("--logappend")),
    ("operationProfiling.mode", Flag::Value("--profile")),
    (
        "operationProfiling.slowOpThresholdMs",
        Flag::Value("--slowms"),
    ),
    (
        "operationProfiling.slowOpSampleRate",
        Flag::Value("--slowOpSampleRate"),
    ),
];

/// mongod settings about its own machinery, accepted and ignored.
const IGNORED_PREFIXES: &[&str] = &[
    "systemLog.destination",
    "systemLog.logRotate",
    "systemLog.verbosity",
    "systemLog.timeStampFormat",
    "processManagement.",
    "storage.journal.",
    "storage.engine",
    "storage.directoryPerDB",
    "storage.wiredTiger.collectionConfig.",
    "storage.wiredTiger.indexConfig.",
    "net.unixDomainSocket.",
    "net.ipv6",
    "operationProfiling.filter",
];

/// The command line with the configuration file's settings in place of `--config FILE`
/// (or `-f FILE`); unchanged without one.
pub fn expand(argv: Vec<OsString>) -> Result<Vec<OsString>, String> {
    // The tools' flags are their own (`basalt import -f` names fields, as mongoimport's).
    if argv.get(1).is_some_and(|a| {
        ["import", "bench", "dump", "restore", "export"].contains(&&*a.to_string_lossy())
    }) {
        return Ok(argv);
    }
    let Some(at) = argv.iter().position(|a| a == "--config" || a == "-f") else {
        if let Some(at) = argv
            .iter()
            .position(|a| a.to_string_lossy().starts_with("--config="))
        {
            let path = argv[at].to_string_lossy()["--config=".len()..].to_string();
            return with_file(argv, &path);
        }
        return Ok(argv);
    };
    let path = argv
        .get(at + 1)
        .ok_or("--config needs a file")?
        .to_string_lossy()
        .into_owned();
    with_file(argv, &path)
}

/// `argv` with the file's flags put first (after the program name), so the command
/// line's own flags win.
fn with_file(mut argv: Vec<OsString>, path: &str) -> Result<Vec<OsString>, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("cannot read --config {path}: {e}"))?;
    let flags = flags_of(&text).map_err(|e| format!("--config {path}: {e}"))?;
    let program = argv.remove(0);
    let mut expanded = vec![program];
    expanded.extend(flags.into_iter().map(OsString::from));
    expanded.extend(argv);
    Ok(expanded)
}

/// The flags a configuration file's text stands for.
pub fn flags_of(text: &str) -> Result<Vec<String>, String> {
    let documents = YamlLoader::load_from_str(text).map_err(|e| format!("invalid YAML: {e}"))?;
    let mut settings = Vec::new();
    for document in &documents {
        match document {
            Yaml::Hash(_) => flatten("", document, &mut settings)?,
            Yaml::Null => {}
            _ => return Err("the file must hold a mapping of settings".into()),
        }
    }
    let mut flags = Vec::new();
    for (path, value) in settings {
        if let Some(name) = path.strip_prefix("setParameter.") {
            flags.push("--setParameter".to_string());
            flags.push(format!("{name}={value}"));
            continue;
        }
        match path.as_str() {
            "security.authorization" => match value.as_str() {
                "enabled" => flags.push("--auth".into()),
                "disabled" => {}
                other => {
                    return Err(format!(
                        "security.authorization: '{other}' is not enabled or disabled"
                    ))
                }
            },
            "security.javascriptEnabled" => {
                if !truth(&path, &value)? {
                    flags.push("--noscripting".into());
                }
            }
            _ => match SETTINGS.iter().find(|(p, _)| *p == path) {
                Some((_, Flag::Value(flag))) => {
                    flags.push((*flag).to_string());
                    flags.push(value);
                }
                Some((_, Flag::Switch(flag))) => {
                    if truth(&path, &value)? {
                        flags.push((*flag).to_string());
                    }
                }
                None if IGNORED_PREFIXES.iter().any(|p| path.starts_with(p)) => {
                    eprintln!("basalt: configuration option {path} is mongod's own and is ignored");
                }
                None => return Err(format!("Unrecognized option: {path}")),
            },
        }
    }
    Ok(flags)
}

fn truth(path: &str, value: &str) -> Result<bool, String> {
    match value {
        "true" => Ok(true),
        "false" => Ok(false),
        other => Err(format!("{path}: '{other}' is not true or false")),
    }
}

/// The scalar settings under `node`, as (dotted path, value as text).
fn flatten(prefix: &str, node: &Yaml, out: &mut Vec<(String, String)>) -> Result<(), String> {
    match node {
        Yaml::Hash(map) => {
            for (key, value) in map {
                let key = match key {
                    Yaml::String(key) => key.clone(),
                    other => return Err(format!("a setting name must be text, not {other:?}")),
                };
                let path = if prefix.is_empty() {
                    key
                } else {
                    format!("{prefix}.{key}")
                };
                flatten(&path, value, out)?;
            }
            Ok(())
        }
        Yaml::String(text) | Yaml::Real(text) => {
            out.push((prefix.to_string(), text.clone()));
            Ok(())
        }
        Yaml::Integer(n) => {
            out.push((prefix.to_string(), n.to_string()));
            Ok(())
        }
        Yaml::Boolean(b) => {
            out.push((prefix.to_string(), b.to_string()));
            Ok(())
        }
        Yaml::Null => Ok(()),
        other => Err(format!("{prefix}: unsupported value {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mongod_conf_becomes_flags() {
        let text = "
net:
  port: 27018
  bindIp: 127.0.0.1,::1
  tls:
    mode: requireTLS
    certificateKeyFile: /etc/ssl/server.pem
    allowConnectionsWithoutCertificates: true
storage:
  dbPath: /var/lib/basalt
  journal:
    enabled: true
systemLog:
  destination: file
  path: /var/log/basalt.log
security:
  authorization: enabled
  keyFile: /etc/basalt/key
replication:
  replSetName: rs0
setParameter:
  enableTestCommands: 1
";
        let flags = flags_of(text).unwrap();
        let expected = [
            "--port",
            "27018",
            "--bind_ip",
            "127.0.0.1,::1",
            "--tlsMode",
            "requireTLS",
            "--tlsCertificateKeyFile",
            "/etc/ssl/server.pem",
            "--tlsAllowConnectionsWithoutCertificates",
            "--dbpath",
            "/var/lib/basalt",
            "--logpath",
            "/var/log/basalt.log",
            "--auth",
            "--keyFile",
            "/etc/basalt/key",
            "--replSet",
            "rs0",
            "--setParameter",
            "enableTestCommands=1",
        ];
        assert_eq!(flags, expected);
    }

    #[test]
    fn unknown_options_and_bad_values_are_refused() {
        assert_eq!(
            flags_of("net:\n  portt: 1\n").unwrap_err(),
            "Unrecognized option: net.portt"
        );
        assert!(flags_of("security:\n  authorization: maybe\n").is_err());
        assert!(flags_of("- a\n- b\n").is_err());
        assert!(flags_of("net: [").is_err());
    }

    #[test]
    fn command_line_flags_come_after_the_files() {
        let dir = std::env::temp_dir().join(format!("basalt-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("basalt.conf");
        std::fs::write(&path, "net:\n  port: 27018\n").unwrap();
        let argv: Vec<OsString> = ["basalt", "-f", path.to_str().unwrap(), "--port", "9"]
            .iter()
            .map(OsString::from)
            .collect();
        let expanded = expand(argv).unwrap();
        let path = path.to_str().unwrap();
        assert_eq!(
            expanded,
            ["basalt", "--port", "27018", "-f", path, "--port", "9"]
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
