//! Small diagnostic and session commands that drivers, mongosh and tools send on connect
//! and in daily use: ping, buildInfo, getParameter, getCmdLineOpts,
//! whatsmyuri, getLog, connectionStatus, endSessions.

use super::arguments::{Field, Kind};
use super::Ctx;
use crate::COMPATIBLE_MONGODB_VERSION;
use basalt_error::{Error, ErrorCode, Result};
use basalt_wire::MAX_BSON_OBJECT_SIZE_BYTES;
use bson::{doc, Bson, Document};

pub fn ping(_ctx: &Ctx<'_>, _body: &Document) -> Result<Document> {
    Ok(Document::new())
}

pub fn build_info(_ctx: &Ctx<'_>, _body: &Document) -> Result<Document> {
    let version_array: Vec<i32> = COMPATIBLE_MONGODB_VERSION
        .split('.')
        .map(|part| part.parse().unwrap_or(0))
        .chain(std::iter::once(0))
        .collect();
    Ok(doc! {
        "version": COMPATIBLE_MONGODB_VERSION,
        "gitVersion": "basalt",
        "basaltVersion": env!("CARGO_PKG_VERSION"),
        "versionArray": version_array,
        "bits": 64,
        "debug": cfg!(debug_assertions),
        "maxBsonObjectSize": MAX_BSON_OBJECT_SIZE_BYTES as i32,
        "storageEngines": ["fjall"],
        "javascriptEngine": "none",
        "modules": [],
        "openssl": { "running": "disabled", "compiled": "disabled" },
        "buildEnvironment": { "target_arch": std::env::consts::ARCH, "target_os": std::env::consts::OS },
    })
}

/// Server parameters getParameter can read, with their values.
fn parameters(ctx: &Ctx<'_>) -> Result<Document> {
    let options = &ctx.server.options;
    Ok(doc! {
        "ttlMonitorSleepSecs": (options.ttl_monitor_interval_ms / 1000) as i64,
        "scanWorkers": options.scan_workers as i64,
        "enableTestCommands": options.enable_test_commands,
        "transactionLifetimeLimitSeconds": options.transaction_lifetime_limit_secs as i64,
        "transactionSizeLimitBytes": options.transaction_size_limit_bytes as i64,
        "minSnapshotHistoryWindowInSeconds": options.snapshot_history_window_secs as i64,
        "featureCompatibilityVersion": super::feature_compatibility::parameter(ctx)?,
        "authenticationMechanisms": ["SCRAM-SHA-1", "SCRAM-SHA-256"],
        "cursorTimeoutMillis": crate::cursors::CURSOR_IDLE_TIMEOUT_MS as i64,
        "maxBSONDepth": basalt_wire::MAX_BSON_NESTING_DEPTH as i32,
        "internalQueryMaxBlockingSortMemoryUsageBytes": 100 * 1024 * 1024_i32,
        "notablescan": false,
        "javascriptProtection": false,
        "requireApiVersion": false,
    })
}

/// `setParameter`: the runtime parameters (`parameters.rs`).
pub fn set_parameter(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    ctx.server.parameters.set(body)
}

/// `dropConnections`: closes this server's connections to the hosts named (`host:port`;
/// an entry without a port, or null, is ignored, as mongod ignores it). A replica set
/// member's connections to the other members are its only outgoing ones: they reopen
/// when next used.
pub fn drop_connections(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let entries = match body.get("hostAndPort") {
        None | Some(Bson::Null) => {
            return Err(Error::location(
                40414,
                "BSON field 'dropConnections.hostAndPort' is missing but a required field",
            ))
        }
        Some(Bson::Array(entries)) => entries,
        Some(other) => {
            return Err(Error::type_mismatch(format!(
                "BSON field 'dropConnections.hostAndPort' is the wrong type '{}', expected type 'array'",
                crate::request::type_name(other)
            )))
        }
    };
    let mut hosts = Vec::new();
    for entry in entries {
        match entry {
            Bson::Null => {}
            Bson::String(text) if !text.contains(':') => {}
            Bson::String(text) => hosts.push(host_and_port(text)?),
            other => {
                return Err(Error::type_mismatch(format!(
                    "BSON field 'dropConnections.hostAndPort' has an element of type '{}', expected type 'string'",
                    crate::request::type_name(other)
                )))
            }
        }
    }
    if let Some(set) = ctx.server.replication() {
        set.drop_connections(&hosts);
    }
    Ok(Document::new())
}

/// `connPoolStats`: this server's outgoing connections, as mongod reports its pools. A
/// replica set member's only outgoing connections are those to the other members (one
/// per member, reopened after a failure or `dropConnections`), reported as one pool;
/// a standalone has none. The command's value and other fields are ignored, as mongod
/// ignores them.
pub fn conn_pool_stats(ctx: &Ctx<'_>, _body: &Document) -> Result<Document> {
    let hosts = ctx
        .server
        .replication()
        .map(|set| set.peer_connections())
        .unwrap_or_default();
    let figures = |in_use: u64, available: u64, created: u64| {
        doc! {
            "inUse": in_use as i64,
            "available": available as i64,
            "leased": 0_i64,
            "created": created as i64,
            "refreshing": 0_i64,
            "refreshed": 0_i64,
        }
    };
    let (mut in_use, mut available, mut created) = (0, 0, 0);
    let mut by_host = Document::new();
    for (host, counts) in &hosts {
        let idle = counts.open.saturating_sub(counts.in_use);
        in_use += counts.in_use;
        available += idle;
        created += counts.created;
        by_host.insert(host.clone(), figures(counts.in_use, idle, counts.created));
    }
    let mut pools = Document::new();
    if !hosts.is_empty() {
        let mut pool = doc! {
            "poolInUse": in_use as i64,
            "poolAvailable": available as i64,
            "poolLeased": 0_i64,
            "poolCreated": created as i64,
            "poolRefreshing": 0_i64,
            "poolRefreshed": 0_i64,
        };
        pool.extend(by_host.clone());
        pools.insert("NetworkInterfaceTL-Replication", pool);
    }
    Ok(doc! {
        "numClientConnections": 0_i32,
        "numAScopedConnections": 0_i32,
        "totalInUse": in_use as i64,
        "totalAvailable": available as i64,
        "totalLeased": 0_i64,
        "totalCreated": created as i64,
        "totalRefreshing": 0_i64,
        "totalRefreshed": 0_i64,
        "pools": pools,
        "hosts": by_host,
        "replicaSets": {},
    })
}

/// `host:port` or `[ipv6]:port` checked as mongod parses it: a host, a port from 1 to
/// 65535, one colon outside brackets (FailedToParse otherwise).
fn host_and_port(text: &str) -> Result<String> {
    let bad = |why: &str| Error::failed_to_parse(format!("invalid host and port '{text}': {why}"));
    let (host, port) = match text.strip_prefix('[') {
        Some(rest) => {
            let (host, after) = rest
                .split_once(']')
                .ok_or_else(|| bad("no closing bracket"))?;
            (host, after.strip_prefix(':').ok_or_else(|| bad("no port"))?)
        }
        None => {
            let (host, port) = text.split_once(':').ok_or_else(|| bad("no port"))?;
            if port.contains(':') {
                return Err(bad("more than one colon outside brackets"));
            }
            (host, port)
        }
    };
    if host.is_empty() {
        return Err(bad("empty host"));
    }
    match port.parse::<u16>() {
        Ok(port) if port > 0 => Ok(text.to_string()),
        _ => Err(bad("the port must be a number from 1 to 65535")),
    }
}

/// `configureFailPoint`: only with `--setParameter enableTestCommands=1`, as mongod's
/// test commands; otherwise it does not exist.
pub fn configure_fail_point(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    if !ctx.server.options.enable_test_commands {
        return Err(Error::new(
            ErrorCode::COMMAND_NOT_FOUND,
            "no such command: 'configureFailPoint'",
        ));
    }
    ctx.server.fail_points.configure(body)
}

pub fn get_parameter(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let mut all = parameters(ctx)?;
    all.extend(ctx.server.parameters.current());
    let wants_all = match body.get("getParameter") {
        Some(Bson::String(s)) => s == "*",
        Some(Bson::Document(options)) => {
            // mongod's strict `GetParameterOptions`.
            super::arguments::check_struct(
                "getParameter",
                options,
                &[
                    ("showDetails", Kind::SafeBool),
                    ("allParameters", Kind::SafeBool),
                    ("setAt", Kind::String),
                ],
                &[],
            )?;
            crate::request::Fields::new(options).bool_or("allParameters", false)?
        }
        _ => false,
    };
    if wants_all {
        return Ok(all);
    }
    let mut reply = Document::new();
    for name in body
        .keys()
        .skip(1)
        .filter(|k| !k.starts_with('$') && *k != "lsid" && *k != "comment")
    {
        if let Some(value) = all.get(name) {
            reply.insert(name.clone(), value.clone());
        }
    }
    if reply.is_empty() {
        return Err(Error::new(
            ErrorCode::INVALID_OPTIONS,
            "no option found to get",
        ));
    }
    Ok(reply)
}

pub fn get_cmd_line_opts(ctx: &Ctx<'_>, _body: &Document) -> Result<Document> {
    let options = &ctx.server.options;
    Ok(doc! {
        "argv": options.argv.clone(),
        "parsed": {
            "net": { "bindIp": options.bind_ip.join(","), "port": options.port as i32 },
            "storage": { "dbPath": options.dbpath.display().to_string() },
        },
    })
}

pub fn whats_my_uri(ctx: &Ctx<'_>, _body: &Document) -> Result<Document> {
    Ok(doc! { "you": ctx.connection.peer.to_string() })
}

pub fn get_log(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    match body.get("getLog") {
        Some(Bson::String(name)) if name == "*" => {
            Ok(doc! { "names": ["global", "startupWarnings"] })
        }
        Some(Bson::String(name)) if name == "global" => {
            let (lines, total) = ctx.server.log.lines();
            Ok(doc! { "totalLinesWritten": total as i64, "log": lines })
        }
        Some(Bson::String(name)) if name == "startupWarnings" => {
            Ok(doc! { "totalLinesWritten": 0_i64, "log": Vec::<String>::new() })
        }
        Some(Bson::String(name)) => Err(Error::new(
            ErrorCode::OPERATION_FAILED,
            format!("No log named '{name}'"),
        )),
        _ => Err(Error::type_mismatch(
            "Argument to getLog must be of type String",
        )),
    }
}

/// `logRotate`: `{logRotate: 1 | "server"}` (any number or boolean) rotates the log
/// file; "audit" names a log this server does not keep.
pub fn log_rotate(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    match body.get("logRotate") {
        Some(Bson::String(target)) if target == "server" => {}
        Some(Bson::String(target)) => {
            return Err(Error::new(
                ErrorCode::NO_SUCH_KEY,
                format!("Unknown log type for rotate: {target}"),
            ))
        }
        Some(value) if basalt_value::is_number(value) || matches!(value, Bson::Boolean(_)) => {}
        Some(other) => {
            return Err(Error::type_mismatch(format!(
                "BSON field 'logRotate.logRotate' is the wrong type '{}', expected types \
                 '[string, int, long, double, decimal, bool]'",
                basalt_expr::type_name(Some(other))
            )))
        }
        None => {}
    }
    ctx.server.log.rotate()?;
    Ok(Document::new())
}

pub fn connection_status(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let show_privileges = body.get_bool("showPrivileges").unwrap_or(false);
    Ok(doc! { "authInfo": crate::security::auth_info(ctx, show_privileges)? })
}

/// `startSession`: a new session, held from now on (`sessions.rs`).
pub fn start_session(ctx: &Ctx<'_>, _body: &Document) -> Result<Document> {
    let id = doc! { "id": bson::Binary::from_uuid(bson::Uuid::new()) };
    ctx.server
        .sessions
        .touch(&id, crate::security::cursor_owner(ctx));
    Ok(doc! {
        "id": id,
        "timeoutMinutes": super::hello::LOGICAL_SESSION_TIMEOUT_MINUTES,
    })
}

/// `endSessions` / `killSessions`: the sessions' open transactions are aborted, their
/// state forgotten, and their `config.system.sessions` documents deleted at the next
/// refresh.
pub fn end_sessions(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let field = body.keys().next().map_or("endSessions", String::as_str);
    check_named_sessions(body, field)?;
    let lsids = crate::transactions::named_sessions(body, field);
    ctx.server.transactions.end_sessions(&lsids);
    let named: Vec<Document> = body
        .get_array(field)
        .map(|lsids| {
            lsids
                .iter()
                .filter_map(Bson::as_document)
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    ctx.server
        .sessions
        .end(&named, crate::security::cursor_owner(ctx).as_ref());
    Ok(Document::new())
}

/// What a client names a session by (mongod's strict `LogicalSessionFromClient`).
const SESSION_FIELDS: &[Field] = &[
    ("id", Kind::Uuid),
    ("uid", Kind::Any),
    ("txnNumber", Kind::Long),
    ("txnUUID", Kind::Uuid),
];

/// Checks the sessions a command names in its first `field`: an array of
/// `{id: <UUID>, ...}`.
fn check_named_sessions(body: &Document, field: &str) -> Result<()> {
    use basalt_value::idl::{check_value, Kind as Idl};
    let lsids = match body.get(field) {
        Some(Bson::Array(lsids)) => lsids,
        Some(other) => return check_value(field, field, Idl::Array, other),
        None => return Ok(()),
    };
    let elements = format!("{field}.{field}");
    for (i, lsid) in lsids.iter().enumerate() {
        check_value(&elements, &i.to_string(), Idl::Document, lsid)?;
        if let Bson::Document(lsid) = lsid {
            super::arguments::check_struct(
                "LogicalSessionFromClient",
                lsid,
                SESSION_FIELDS,
                &["id"],
            )?;
        }
    }
    Ok(())
}

/// `killAllSessions: [{user, db}, ...]`: the sessions of those users (of every user
/// for `[]`) are forgotten, their open transactions aborted.
pub fn kill_all_sessions(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let users = match body.get("killAllSessions") {
        Some(Bson::Array(users)) => users
            .iter()
            .enumerate()
            .map(|(i, user)| session_user(i, user))
            .collect::<Result<Vec<_>>>()?,
        other => {
            return Err(Error::type_mismatch(format!(
                "BSON field 'killAllSessions.killAllSessions' is the wrong type '{}', expected type 'array'",
                other.map_or("missing", crate::request::type_name)
            )))
        }
    };
    if users.is_empty() {
        ctx.server.transactions.end_all_sessions();
        ctx.server.sessions.end_all(None);
        return Ok(Document::new());
    }
    let lsids: Vec<Vec<u8>> = ctx
        .server
        .sessions
        .end_all(Some(&users))
        .iter()
        .filter_map(|lsid| lsid.to_vec().ok())
        .collect();
    ctx.server.transactions.end_sessions(&lsids);
    Ok(Document::new())
}

/// One `{user, db}` of `killAllSessions`.
fn session_user(index: usize, entry: &Bson) -> Result<crate::security::UserName> {
    let path = format!("killAllSessions.killAllSessions.{index}");
    let Bson::Document(entry) = entry else {
        return Err(Error::type_mismatch(format!(
            "BSON field '{path}' is the wrong type '{}', expected type 'object'",
            crate::request::type_name(entry)
        )));
    };
    super::arguments::check_struct(
        "KillAllSessionsUser",
        entry,
        &[("user", Kind::String), ("db", Kind::String)],
        &["user", "db"],
    )?;
    // Both strings, as checked above.
    let field = |name: &str| entry.get_str(name).unwrap_or_default();
    Ok(crate::security::UserName::new(field("user"), field("db")))
}

/// `refreshSessions`: the sessions named are marked used now.
pub fn refresh_sessions(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    check_named_sessions(body, "refreshSessions")?;
    let user = crate::security::cursor_owner(ctx);
    for lsid in body
        .get_array("refreshSessions")
        .into_iter()
        .flatten()
        .filter_map(Bson::as_document)
    {
        ctx.server.sessions.touch(lsid, user.clone());
    }
    Ok(Document::new())
}

/// `refreshLogicalSessionCacheNow` (a test command): writes the sessions held to
/// `config.system.sessions` at once.
pub fn refresh_logical_session_cache_now(ctx: &Ctx<'_>, _body: &Document) -> Result<Document> {
    if !ctx.server.options.enable_test_commands {
        return Err(Error::new(
            ErrorCode::COMMAND_NOT_FOUND,
            "no such command: 'refreshLogicalSessionCacheNow'",
        ));
    }
    ctx.server.sessions.refresh(ctx.server)?;
    Ok(Document::new())
}

pub fn free_monitoring_status(_ctx: &Ctx<'_>, _body: &Document) -> Result<Document> {
    Ok(doc! { "state": "disabled" })
}

/// `rotateCertificates`: reads the TLS certificate, key and CA files again; connections
/// opened from now on use them.
pub fn rotate_certificates(ctx: &Ctx<'_>, _body: &Document) -> Result<Document> {
    let Some(tls) = &ctx.server.tls else {
        return Err(Error::new(
            ErrorCode::ILLEGAL_OPERATION,
            "Server is not configured to use TLS (--tlsMode disabled)",
        ));
    };
    tls.reload()?;
    tracing::info!("Successfully rotated X509 certificates.");
    Ok(Document::new())
}
