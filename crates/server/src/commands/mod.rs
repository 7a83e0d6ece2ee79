//! The command registry: one entry per MongoDB command, looked up by the first field
//! of the command document, with the help text listCommands reports and the
//! serverStatus opcounter it feeds.

pub(crate) mod admin;
mod aggregate;
mod api_version;
mod apply_ops;
mod arguments;
mod bulk_write;
mod capped;
pub(crate) mod cluster_parameters;
mod coll_mod;
mod collection_admin;
mod compact;
mod count;
mod create;
mod create_indexes;
pub(crate) mod current_op;
mod data_size;
mod db_hash;
mod default_collation;
mod delete;
mod distinct;
mod drop_indexes;
mod explain;
pub(crate) mod feature_compatibility;
mod find;
mod find_and_modify;
mod fsync;
mod generic_arguments;
mod get_more;
mod hello;
pub(crate) mod host_info;
mod insert;
mod kill_cursors;
pub(crate) mod list_collections;
mod list_databases;
mod list_indexes;
mod lock_info;
mod map_reduce;
mod plan_cache;
pub(crate) mod rw_concern_defaults;
mod sasl;
mod server_status;
mod stats;
mod update;
mod user_management;
mod validate;
mod validate_db_metadata;
mod views;
mod write_batch;

use crate::connection::ConnectionInfo;
use crate::replication;
use crate::snapshot_reads;
use crate::transactions::{self, Statement};
use crate::Server;
use basalt_catalog::OperationClass;
use basalt_error::{Error, ErrorCode, Result};
use bson::{cstr, doc, Document, RawDocumentBuf};
pub(crate) use compact::AutoCompactSetting;
pub(crate) use create_indexes::{
    generated_name as generated_index_name, parse_spec as parse_index_spec,
};
use std::sync::Arc;
pub(crate) use views::find_stages;

/// What a command handler sees.
pub struct Ctx<'a> {
    pub server: &'a Arc<Server>,
    pub connection: &'a Arc<ConnectionInfo>,
    /// The database from `$db`.
    pub db: &'a str,
    /// OP_MSG document sequences left in their wire bytes (an insert's `documents`, see
    /// [`reads_sequence_raw`]); every other sequence is an array field of the body.
    pub raw_sequences: &'a [basalt_wire::DocumentSequence],
    /// The command's `maxTimeMS`, validated once for every command (see [`max_time_ms`]).
    pub max_time_ms: Option<i64>,
    /// The command as a registered operation (`currentOp`, `killOp`), once its handler
    /// runs.
    pub operation: Option<&'a crate::operations::Operation>,
}

impl Ctx<'_> {
    /// Whether this is a secondary applying its primary's log entry (whose operations
    /// count in `opcountersRepl`, as mongod's secondaries count them).
    fn applying_as_secondary(&self) -> bool {
        replication::applying()
            && self
                .server
                .replication()
                .is_some_and(|set| set.state() != basalt_repl::MemberState::Primary)
    }

    /// The counters this command's operations add to: a secondary's replicated ones
    /// while it applies its primary's entries, the clients' otherwise.
    pub fn op_counters(&self) -> &crate::stats::OpCounters {
        match self.applying_as_secondary() {
            true => &self.server.stats.replicated,
            false => &self.server.stats.operations,
        }
    }

    /// The command's time limit and progress, shared by everything it runs (its scans,
    /// stages and cursor); `killOp` stops what runs under it.
    pub fn deadline(&self) -> crate::exec::Deadline {
        match self.operation {
            Some(operation) => operation.deadline(),
            None => crate::exec::Deadline::from_max_time_ms(self.max_time_ms),
        }
    }
}

/// Whether `command` reads the document sequence `identifier` in its wire bytes rather
/// than as an array of decoded documents in its body: a bulk insert stores the bytes as
/// they came, so decoding them would only be undone; a Raft message between replica
/// set members is bytes, not documents.
pub fn reads_sequence_raw(command: &str, identifier: &str) -> bool {
    matches!(
        (command, identifier),
        ("insert", "documents") | (basalt_repl::RAFT_COMMAND, basalt_repl::PAYLOAD_SEQUENCE)
    )
}

/// How a command builds its reply: most as a document; the cursor commands encoded,
/// around batches of documents that stay in their stored bytes.
#[derive(Clone, Copy)]
enum Handler {
    Document(fn(&Ctx<'_>, &Document) -> Result<Document>),
    Encoded(fn(&Ctx<'_>, &Document) -> Result<RawDocumentBuf>),
}

/// Which serverStatus opcounter a command adds to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Counter {
    Command,
    Query,
    GetMore,
    /// Write commands count each statement themselves (opcounters.insert/update/delete).
    OwnCount,
}

struct Command {
    name: &'static str,
    aliases: &'static [&'static str],
    handler: Handler,
    help: &'static str,
    admin_only: bool,
    counter: Counter,
    concerns: Concerns,
}

/// The read and write concerns a command takes; the others are InvalidOptions.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Concerns {
    Any,
    /// Reads only at `local`, and takes a write concern (renames, conversions).
    LocalRead,
    /// Takes no write concern and reads only at `local` (mongod's maintenance
    /// commands).
    LocalOnly,
}

const fn command(
    name: &'static str,
    handler: fn(&Ctx<'_>, &Document) -> Result<Document>,
    help: &'static str,
) -> Command {
    Command {
        name,
        aliases: &[],
        handler: Handler::Document(handler),
        help,
        admin_only: false,
        counter: Counter::Command,
        concerns: Concerns::Any,
    }
}

/// A command that answers with a cursor (see [`Handler::Encoded`]).
const fn cursor_command(
    name: &'static str,
    handler: fn(&Ctx<'_>, &Document) -> Result<RawDocumentBuf>,
    help: &'static str,
) -> Command {
    Command {
        name,
        aliases: &[],
        handler: Handler::Encoded(handler),
        help,
        admin_only: false,
        counter: Counter::Command,
        concerns: Concerns::Any,
    }
}

const fn with_aliases(mut c: Command, aliases: &'static [&'static str]) -> Command {
    c.aliases = aliases;
    c
}

const fn admin_only(mut c: Command) -> Command {
    c.admin_only = true;
    c
}

const fn local_concerns_only(mut c: Command) -> Command {
    c.concerns = Concerns::LocalOnly;
    c
}

const fn local_read_concern_only(mut c: Command) -> Command {
    c.concerns = Concerns::LocalRead;
    c
}

const fn counted(mut c: Command, counter: Counter) -> Command {
    c.counter = counter;
    c
}

static COMMANDS: &[Command] = &[
    with_aliases(
        command(
            "hello",
            hello::hello,
            "describes the server's role and limits",
        ),
        &["isMaster", "ismaster"],
    ),
    command(
        "ping",
        admin::ping,
        "a no-op to test whether the server answers",
    ),
    admin_only(local_concerns_only(command(
        "fsync",
        fsync::fsync,
        "makes writes durable now; with lock, holds writes back until fsyncUnlock",
    ))),
    admin_only(local_concerns_only(command(
        "fsyncUnlock",
        fsync::fsync_unlock,
        "releases one fsync lock",
    ))),
    local_concerns_only(command(
        "compact",
        compact::compact,
        "checks a collection can be compacted (the storage engine compacts continuously)",
    )),
    admin_only(local_concerns_only(command(
        "autoCompact",
        compact::auto_compact,
        "keeps the background compaction setting",
    ))),
    command(
        "planCacheClear",
        plan_cache::plan_cache_clear,
        "forgets the planner's cached choices",
    ),
    command(
        "planCacheSetFilter",
        plan_cache::plan_cache_set_filter,
        "restricts the indexes a query shape may use",
    ),
    command(
        "planCacheListFilters",
        plan_cache::plan_cache_list_filters,
        "the index filters of a collection",
    ),
    command(
        "planCacheClearFilters",
        plan_cache::plan_cache_clear_filters,
        "removes index filters",
    ),
    command(
        "dbHash",
        db_hash::db_hash,
        "a hash of each collection's documents, and of them all",
    ),
    command(
        "dataSize",
        data_size::data_size,
        "the bytes and count of a collection's documents, or of a key range's",
    ),
    with_aliases(
        command("buildInfo", admin::build_info, "version and build details"),
        &["buildinfo"],
    ),
    command(
        "createSearchIndexes",
        search_not_enabled,
        "Atlas Search indexes: refused, as by mongod without a search engine",
    ),
    command(
        "updateSearchIndex",
        search_not_enabled,
        "Atlas Search indexes: refused, as by mongod without a search engine",
    ),
    command(
        "dropSearchIndex",
        search_not_enabled,
        "Atlas Search indexes: refused, as by mongod without a search engine",
    ),
    command(
        "refreshLogicalSessionCacheNow",
        admin::refresh_logical_session_cache_now,
        "writes the logical sessions held to config.system.sessions (with enableTestCommands)",
    ),
    admin_only(command(
        "configureFailPoint",
        admin::configure_fail_point,
        "sets a test hook (with enableTestCommands)",
    )),
    admin_only(command(
        "getParameter",
        admin::get_parameter,
        "reads server parameters",
    )),
    command(
        "connPoolStats",
        admin::conn_pool_stats,
        "this server's outgoing connections (a replica set member's to the others), per host",
    ),
    admin_only(command(
        "dropConnections",
        admin::drop_connections,
        "closes this server's connections to other hosts (a replica set member's to the others)",
    )),
    admin_only(local_concerns_only(command(
        "setClusterParameter",
        cluster_parameters::set_cluster_parameter,
        "sets a parameter of the whole replica set (kept in config.clusterParameters)",
    ))),
    admin_only(command(
        "getClusterParameter",
        cluster_parameters::get_cluster_parameter,
        "reads parameters of the whole replica set",
    )),
    admin_only(command(
        "setQuerySettings",
        crate::query_settings::set_query_settings,
        "sets the settings of a query shape (index hints, rejection)",
    )),
    admin_only(command(
        "removeQuerySettings",
        crate::query_settings::remove_query_settings,
        "removes the settings of a query shape",
    )),
    admin_only(command(
        "setFeatureCompatibilityVersion",
        feature_compatibility::set_feature_compatibility_version,
        "sets the feature compatibility version (8.0, or 7.0 after a downgrade)",
    )),
    admin_only(command(
        "setParameter",
        admin::set_parameter,
        "changes the server parameters that may change at run time (the log's verbosity)",
    )),
    admin_only(command(
        "getCmdLineOpts",
        admin::get_cmd_line_opts,
        "the command line the server started with",
    )),
    command(
        "hostInfo",
        host_info::host_info,
        "the machine the server runs on",
    ),
    command(
        "whatsmyuri",
        admin::whats_my_uri,
        "the client's address as the server sees it",
    ),
    admin_only(command("getLog", admin::get_log, "recent log lines")),
    admin_only(command(
        "logRotate",
        admin::log_rotate,
        "renames the log file aside and opens a new one",
    )),
    admin_only(command(
        "currentOp",
        current_op::current_op,
        "the operations in progress",
    )),
    admin_only(command(
        "killOp",
        current_op::kill_op,
        "stops an operation in progress at its next check",
    )),
    admin_only(command(
        "lockInfo",
        lock_info::lock_info,
        "the locks held and waited for (the global lock: fsync locks and writes)",
    )),
    admin_only(command(
        "top",
        current_op::top,
        "time and count of the operations on each collection",
    )),
    command(
        "profile",
        crate::profiler::profile,
        "the database profiler's level, slowms, sampleRate and filter",
    ),
    command(
        "serverStatus",
        server_status::server_status,
        "uptime, connections, operation counters, memory",
    ),
    command(
        "listCommands",
        list_commands,
        "the commands this server knows",
    ),
    command(
        "connectionStatus",
        admin::connection_status,
        "the authenticated users of this connection",
    ),
    command(
        "saslStart",
        sasl::sasl_start,
        "starts a SASL (SCRAM) authentication",
    ),
    command(
        "saslContinue",
        sasl::sasl_continue,
        "continues a SASL (SCRAM) authentication",
    ),
    command(
        "authenticate",
        sasl::authenticate,
        "authenticates with MONGODB-X509",
    ),
    command(
        "logout",
        sasl::logout,
        "ends the connection's authentication",
    ),
    admin_only(command(
        "rotateCertificates",
        admin::rotate_certificates,
        "reads the TLS certificate files again",
    )),
    command("createUser", user_management::create_user, "creates a user"),
    command(
        "updateUser",
        user_management::update_user,
        "changes a user's password, roles or data",
    ),
    command("dropUser", user_management::drop_user, "removes a user"),
    command(
        "dropAllUsersFromDatabase",
        user_management::drop_all_users_from_database,
        "removes every user of a database",
    ),
    command("usersInfo", user_management::users_info, "describes users"),
    command(
        "grantRolesToUser",
        user_management::grant_roles_to_user,
        "gives a user roles",
    ),
    command(
        "revokeRolesFromUser",
        user_management::revoke_roles_from_user,
        "takes roles from a user",
    ),
    command("createRole", user_management::create_role, "creates a role"),
    command(
        "updateRole",
        user_management::update_role,
        "replaces a role's privileges or roles",
    ),
    command("dropRole", user_management::drop_role, "removes a role"),
    command(
        "dropAllRolesFromDatabase",
        user_management::drop_all_roles_from_database,
        "removes every role of a database",
    ),
    command("rolesInfo", user_management::roles_info, "describes roles"),
    command(
        "grantPrivilegesToRole",
        user_management::grant_privileges_to_role,
        "adds privileges to a role",
    ),
    command(
        "revokePrivilegesFromRole",
        user_management::revoke_privileges_from_role,
        "takes privileges from a role",
    ),
    command(
        "grantRolesToRole",
        user_management::grant_roles_to_role,
        "makes a role inherit roles",
    ),
    command(
        "revokeRolesFromRole",
        user_management::revoke_roles_from_role,
        "stops a role inheriting roles",
    ),
    local_concerns_only(command(
        "startSession",
        admin::start_session,
        "starts a logical session",
    )),
    command("endSessions", admin::end_sessions, "ends logical sessions"),
    local_concerns_only(command(
        "killSessions",
        admin::end_sessions,
        "kills logical sessions",
    )),
    command(
        "refreshSessions",
        admin::refresh_sessions,
        "keeps logical sessions alive",
    ),
    local_concerns_only(command(
        "killAllSessions",
        admin::kill_all_sessions,
        "kills every logical session",
    )),
    admin_only(command(
        "commitTransaction",
        outside_transaction,
        "commits a multi-document transaction",
    )),
    admin_only(command(
        "abortTransaction",
        outside_transaction,
        "aborts a multi-document transaction",
    )),
    admin_only(command(
        "applyOps",
        apply_ops::apply_ops,
        "applies document operations atomically (a committed transaction)",
    )),
    command(
        "getFreeMonitoringStatus",
        admin::free_monitoring_status,
        "free monitoring is not offered",
    ),
    counted(
        cursor_command("find", find::find, "queries a collection"),
        Counter::Query,
    ),
    counted(
        cursor_command("getMore", get_more::get_more, "the next batch of a cursor"),
        Counter::GetMore,
    ),
    local_concerns_only(command(
        "killCursors",
        kill_cursors::kill_cursors,
        "closes cursors",
    )),
    counted(
        command("insert", insert::insert, "inserts documents"),
        Counter::OwnCount,
    ),
    counted(
        command("update", update::update, "updates documents"),
        Counter::OwnCount,
    ),
    counted(
        command("delete", delete::delete, "deletes documents"),
        Counter::OwnCount,
    ),
    counted(
        with_aliases(
            command(
                "findAndModify",
                find_and_modify::find_and_modify,
                "updates or deletes one document and returns it",
            ),
            &["findandmodify"],
        ),
        Counter::OwnCount,
    ),
    command("count", count::count, "counts matching documents"),
    command(
        "explain",
        explain::explain,
        "describes how a command would find its documents",
    ),
    command("distinct", distinct::distinct, "distinct values of a field"),
    with_aliases(
        command(
            "mapReduce",
            map_reduce::map_reduce,
            "JavaScript map, reduce and finalize",
        ),
        &["mapreduce"],
    ),
    cursor_command(
        "aggregate",
        aggregate::aggregate,
        "runs an aggregation pipeline",
    ),
    admin_only(local_concerns_only(command(
        "listDatabases",
        list_databases::list_databases,
        "lists databases with their sizes",
    ))),
    local_concerns_only(cursor_command(
        "listCollections",
        list_collections::list_collections,
        "lists the collections of a database",
    )),
    cursor_command(
        "listIndexes",
        list_indexes::list_indexes,
        "lists the indexes of a collection",
    ),
    command(
        "createIndexes",
        create_indexes::create_indexes,
        "creates indexes and builds them",
    ),
    command("dropIndexes", drop_indexes::drop_indexes, "drops indexes"),
    command("create", create::create, "creates a collection"),
    command(
        "collMod",
        coll_mod::coll_mod,
        "changes a collection's options",
    ),
    command("drop", collection_admin::drop, "drops a collection"),
    command(
        "dropDatabase",
        collection_admin::drop_database,
        "drops a database",
    ),
    local_concerns_only(command(
        "validateDBMetadata",
        validate_db_metadata::validate_db_metadata,
        "lists what in a database would break a Stable API version",
    )),
    local_read_concern_only(command(
        "convertToCapped",
        capped::convert_to_capped,
        "makes a collection capped, keeping its newest documents that fit",
    )),
    command(
        "cloneCollectionAsCapped",
        capped::clone_collection_as_capped,
        "copies a collection into a new capped collection",
    ),
    admin_only(local_read_concern_only(command(
        "renameCollection",
        collection_admin::rename_collection,
        "renames a collection",
    ))),
    with_aliases(
        command("collStats", stats::coll_stats, "collection statistics"),
        &["collstats"],
    ),
    command("dbStats", stats::db_stats, "database statistics"),
    command(
        "validate",
        validate::validate,
        "checks a collection's records and indexes",
    ),
    admin_only(command(
        "replSetInitiate",
        replication::repl_set_initiate,
        "initiates a replica set with this member in it",
    )),
    admin_only(command(
        "replSetGetStatus",
        replication::repl_set_get_status,
        "the state of each member of the replica set",
    )),
    admin_only(command(
        "replSetGetConfig",
        replication::repl_set_get_config,
        "the replica set's configuration",
    )),
    admin_only(command(
        "replSetReconfig",
        replication::repl_set_reconfig,
        "changes the replica set's members or settings",
    )),
    admin_only(command(
        "replSetStepDown",
        replication::repl_set_step_down,
        "makes the primary a secondary so another member is elected",
    )),
    admin_only(command(
        "replSetFreeze",
        replication::repl_set_freeze,
        "keeps this member from seeking election for a while",
    )),
    admin_only(command(
        "setDefaultRWConcern",
        rw_concern_defaults::set_default_rw_concern,
        "sets the replica set's default read and write concerns",
    )),
    admin_only(command(
        "getDefaultRWConcern",
        rw_concern_defaults::get_default_rw_concern,
        "the replica set's default read and write concerns",
    )),
    admin_only(command(
        "replSetMaintenance",
        replication::repl_set_maintenance,
        "puts a secondary in or out of maintenance (RECOVERING)",
    )),
    admin_only(command(
        "replSetResizeOplog",
        replication::repl_set_resize_oplog,
        "changes this member's oplog size",
    )),
    admin_only(command(
        "bulkWrite",
        bulk_write::bulk_write,
        "inserts, updates and deletes across collections (MongoDB 8.0)",
    )),
    admin_only(command(
        "replSetRaft",
        replication::repl_set_raft,
        "internal: replication messages between members",
    )),
];

fn lookup(name: &str) -> Option<&'static Command> {
    COMMANDS
        .iter()
        .find(|c| c.name == name || c.aliases.contains(&name))
}

/// `commitTransaction` / `abortTransaction` sent without `autocommit: false`: there is
/// no transaction they could name (those with it never reach their handler).
fn outside_transaction(_ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let name = body.keys().next().map_or("", String::as_str);
    Err(Error::new(
        ErrorCode::INVALID_OPTIONS,
        format!("{name} must be run within a transaction"),
    ))
}

/// The Atlas Search index commands, on a server that has no search engine.
fn search_not_enabled(_ctx: &Ctx<'_>, _body: &Document) -> Result<Document> {
    Err(Error::search_not_enabled())
}

/// Runs one command and returns the full reply, `ok` included, encoded.
pub fn dispatch(ctx: &Ctx<'_>, body: &Document) -> RawDocumentBuf {
    let reply = run(ctx, body).and_then(|reply| match reply {
        Reply::Document(mut reply) => {
            reply.insert("ok", 1.0);
            crate::cursors::encode(&reply)
        }
        Reply::Encoded(mut reply) => {
            reply.append(cstr!("ok"), 1.0);
            Ok(reply)
        }
        Reply::Complete(reply) => Ok(reply),
    });
    let mut reply = reply.unwrap_or_else(|e| {
        ctx.server.stats.asserts.count(&e);
        error_reply(&e)
    });
    if let Some(set) = ctx.server.replication() {
        if !ctx.connection.is_internal() {
            replication::with_cluster_time(ctx.server, set, &mut reply);
        }
    }
    reply
}

/// The document `_id` of the server's own collection `db.collection` (its settings:
/// the FCV, cluster parameters, query settings), as this member holds it: a replica
/// set's secondaries read their own copy.
pub(crate) fn read_own_document(
    server: &Arc<Server>,
    db: &str,
    collection: &str,
    id: &str,
) -> Result<Option<Document>> {
    let reply = run_internal(
        server,
        db,
        doc! {
            "find": collection,
            "filter": { "_id": id },
            "limit": 1,
            "$readPreference": { "mode": "nearest" },
        },
    )?;
    Ok(reply
        .get_document("cursor")
        .ok()
        .and_then(|cursor| cursor.get_array("firstBatch").ok())
        .and_then(|batch| batch.first())
        .and_then(bson::Bson::as_document)
        .cloned())
}

/// Runs a command as the server itself (no client, no authorization check, routed
/// through the replicated log like a client's), as mongod's internal client does: how
/// the server reads and writes its own collections (`admin.system.users`, say). A
/// failed command, or its first write error, is the error returned.
pub(crate) fn run_internal(server: &Arc<Server>, db: &str, mut body: Document) -> Result<Document> {
    body.insert("$db", db);
    let ctx = Ctx {
        server,
        connection: &server.internal_connection,
        db,
        raw_sequences: &[],
        max_time_ms: None,
        operation: None,
    };
    let reply = Document::try_from(dispatch(&ctx, &body).as_ref())?;
    let failure = reply
        .get_array("writeErrors")
        .ok()
        .and_then(|errors| errors.first())
        .and_then(bson::Bson::as_document)
        .or_else(|| {
            (reply.get("ok").and_then(basalt_value::as_f64) != Some(1.0)).then_some(&reply)
        });
    match failure {
        None => Ok(reply),
        Some(failure) => {
            let code = failure
                .get_i32("code")
                .unwrap_or(ErrorCode::INTERNAL_ERROR.0);
            let message = failure.get_str("errmsg").unwrap_or("no reply");
            Err(Error::new(ErrorCode(code), message))
        }
    }
}

/// The documents of `db.collection` that match `filter`, read as the server itself (on
/// a secondary too); one reply's worth (16 MB), which the small collections the server
/// reads this way (users, roles, keys, a transaction's chunk) stay within.
pub(crate) fn find_internal(
    server: &Arc<Server>,
    db: &str,
    collection: &str,
    filter: Document,
) -> Result<Vec<Document>> {
    if server.catalog.get(db, collection).is_none() {
        return Ok(Vec::new());
    }
    let reply = run_internal(
        server,
        db,
        doc! {
            "find": collection,
            "filter": filter,
            "batchSize": i32::MAX,
            "singleBatch": true,
            "$readPreference": { "mode": "primaryPreferred" },
        },
    )?;
    Ok(reply
        .get_document("cursor")
        .and_then(|cursor| cursor.get_array("firstBatch"))
        .map(|batch| {
            batch
                .iter()
                .filter_map(bson::Bson::as_document)
                .cloned()
                .collect()
        })
        .unwrap_or_default())
}

/// The reply to a failed command, encoded.
pub fn error_reply(error: &Error) -> RawDocumentBuf {
    crate::cursors::encode(&error.to_command_reply()).unwrap_or_else(|e| {
        // Details BSON cannot hold (they came from a document that could not be
        // encoded either): the reply says so instead.
        let plain = Error::internal(format!(
            "{}; details not encodable: {}",
            error.message, e.message
        ));
        crate::cursors::encode(&plain.to_command_reply()).unwrap_or_default()
    })
}

/// A command's reply before `ok` is added.
enum Reply {
    Document(Document),
    Encoded(RawDocumentBuf),
    /// A whole reply, `ok` included: a replicated write's, from the state machine.
    Complete(RawDocumentBuf),
}

fn run(ctx: &Ctx<'_>, body: &Document) -> Result<Reply> {
    let Some(name) = body.keys().next() else {
        return Err(Error::failed_to_parse(
            "no command given: the command document is empty",
        ));
    };
    api_version::check(name, body)?;
    let command = lookup(name);
    // An aggregation of the plan cache reads as the maintenance commands do.
    let plan_cache_stats = name == "aggregate"
        && matches!(body.get("pipeline"), Some(bson::Bson::Array(stages))
            if stages.first().and_then(bson::Bson::as_document)
                .is_some_and(|s| s.contains_key("$planCacheStats")));
    let concerns = match command {
        _ if plan_cache_stats => Concerns::LocalOnly,
        Some(command) => command.concerns,
        None => Concerns::Any,
    };
    match concerns {
        Concerns::Any => {}
        Concerns::LocalRead => generic_arguments::check_local_read_concern(name, body)?,
        Concerns::LocalOnly => generic_arguments::check_local_concerns_only(name, body)?,
    }
    generic_arguments::check(ctx, name, body)?;
    let Some(command) = command else {
        return Err(Error::new(
            ErrorCode::COMMAND_NOT_FOUND,
            format!("no such command: '{name}'"),
        ));
    };
    if command.admin_only && ctx.db != "admin" {
        return Err(Error::new(
            ErrorCode::UNAUTHORIZED,
            format!(
                "{} may only be run against the admin database.",
                command.name
            ),
        ));
    }
    if command.name == "hello" {
        hello::record_client(ctx.connection, body);
    }
    crate::security::check(ctx, command.name, body)?;
    arguments::check(command.name, body)?;
    // While an fsync lock is held, clients' writes wait (within their maxTimeMS); the
    // server's own work (expiring documents) goes on. Replica set members take no
    // fsync lock (`commands/fsync.rs`).
    let writes = replication::role_of(command.name, body) == replication::Role::Write;
    let _admitted = if writes && !ctx.connection.is_internal() && ctx.server.replication().is_none()
    {
        let deadline =
            crate::exec::Deadline::from_max_time_ms(generic_arguments::max_time_ms(body)?);
        Some(ctx.server.fsync_lock.admit_write(&deadline)?)
    } else {
        None
    };

    if let (Some(set), true) = (ctx.server.replication(), ctx.server.security.enabled) {
        if !ctx.connection.is_internal() {
            let own = set.applied().timestamp();
            ctx.server.cluster_time_keys.check(ctx, body, own)?;
        }
    }
    if !ctx.connection.is_internal() {
        if let Ok(lsid) = body.get_document("lsid") {
            ctx.server
                .sessions
                .touch(lsid, crate::security::cursor_owner(ctx));
        }
    }
    let fail_point = fail_point(ctx, name, body)?;
    views::refuse_on_view(ctx, command.name, body)?;
    let reply = run_command(ctx, command, body);
    // Users and roles live in `admin`: a write there (here, or applied from the log)
    // may change what connections may do.
    if ctx.db == "admin" && replication::role_of(command.name, body) == replication::Role::Write {
        ctx.server.security.invalidate();
    }
    let reply = reply?;
    match fail_point.and_then(|effect| effect.write_concern_error) {
        None => Ok(reply),
        Some(error) => with_write_concern_error(ctx, reply, command.name, body, error),
    }
}

/// What the `failCommand` fail point does before the command runs: holds it, closes
/// the connection, or fails it; the effect left is a write concern error to add.
fn fail_point(
    ctx: &Ctx<'_>,
    name: &str,
    body: &Document,
) -> Result<Option<crate::fail_points::Effect>> {
    if ctx.connection.is_internal() {
        return Ok(None);
    }
    let Some(mut effect) = ctx.server.fail_points.fail_command(name, ctx.connection) else {
        return Ok(None);
    };
    if let Some(block) = effect.block {
        std::thread::sleep(block);
    }
    if effect.close_connection {
        ctx.connection.request_close();
        return Err(Error::new(
            ErrorCode::HOST_UNREACHABLE,
            "connection closed by the failCommand fail point",
        ));
    }
    if let Some(mut error) = effect.error.take() {
        // A state change error carries the topology version it was seen at, as mongod's
        // do: a driver that knows that version takes the error as stale and retries
        // at once instead of waiting for news of the server.
        if replication::is_state_change(error.code) {
            error = error.with_extra(doc! { "topologyVersion": hello::topology_version(ctx) });
        }
        // Labels given with the fail point are the error's; without, mongod labels it
        // as it labels the same error of its own.
        if error.extra.contains_key("errorLabels") {
            return Err(error);
        }
        return Err(replication::label_retryable(name, body, error));
    }
    Ok(Some(effect))
}

/// Adds a `writeConcernError` (from the fail point) to a command's reply, with the
/// labels mongod gives it: those it names, else `RetryableWriteError` for a retryable
/// write with a retryable code.
fn with_write_concern_error(
    ctx: &Ctx<'_>,
    reply: Reply,
    name: &str,
    body: &Document,
    mut error: Document,
) -> Result<Reply> {
    let mut reply = match reply {
        Reply::Document(reply) => reply,
        Reply::Encoded(reply) | Reply::Complete(reply) => Document::try_from(reply.as_ref())?,
    };
    let labels = match error.remove("errorLabels") {
        Some(bson::Bson::Array(labels)) => labels,
        _ => {
            let code = error
                .get("code")
                .and_then(basalt_value::as_i64)
                .unwrap_or(0);
            replication::write_concern_error_labels(name, body, code as i32)
                .into_iter()
                .map(bson::Bson::from)
                .collect()
        }
    };
    // A state change error carries its topology version (see `fail_point`), in the
    // write concern error, which is where drivers look for it.
    let code = error
        .get("code")
        .and_then(basalt_value::as_i64)
        .unwrap_or(0);
    if replication::is_state_change(ErrorCode(code as i32)) {
        error.insert("topologyVersion", hello::topology_version(ctx));
    }
    reply.insert("writeConcernError", error);
    if !labels.is_empty() {
        reply.insert("errorLabels", labels);
    }
    Ok(match reply.get("ok") {
        Some(_) => Reply::Complete(crate::cursors::encode(&reply)?),
        None => Reply::Document(reply),
    })
}

fn run_command(ctx: &Ctx<'_>, command: &Command, body: &Document) -> Result<Reply> {
    // mongod's command component at verbosity 1 and above (`logComponentVerbosity`).
    tracing::debug!(
        connection_id = ctx.connection.id,
        db = ctx.db,
        "about to run the command {}",
        command.name
    );
    // The server's own reads of its settings (`read_own_document`) are not clients'
    // operations: serverStatus and /metrics count clients'.
    // A secondary's applied commands count apart, in `opcountersRepl`; the primary's
    // were counted when its client sent them.
    let counters = ctx.op_counters();
    match command.counter {
        _ if ctx.connection.is_internal() && !ctx.applying_as_secondary() => {}
        Counter::Command => crate::stats::Stats::add(&counters.command, 1),
        Counter::Query => crate::stats::Stats::add(&counters.query, 1),
        Counter::GetMore => crate::stats::Stats::add(&counters.getmore, 1),
        Counter::OwnCount => {}
    }
    match ctx.server.replication() {
        Some(set) => {
            if transactions::in_transaction(body) && !replication::applying() {
                let label = |e| replication::label_retryable(command.name, body, e);
                match transactions::statement(ctx, set, command.name, body).map_err(label)? {
                    Statement::Done(reply) => return Ok(Reply::Document(reply)),
                    Statement::Run(scope) => {
                        return run_in_transaction(ctx, command, body, scope).map_err(label)
                    }
                }
            }
            let snapshot_read =
                !replication::applying() && snapshot_reads::reads_at_snapshot(command.name, body)?;
            let routed = replication::route(ctx, set, command.name, body)
                .map_err(|e| replication::label_retryable(command.name, body, e))?;
            if let Some(reply) = routed {
                return Ok(Reply::Complete(reply));
            }
            if snapshot_read {
                return run_at_snapshot(ctx, set, command, body);
            }
        }
        None => transactions::refuse_on_standalone(body)?,
    }
    run_handler(ctx, command, body)
}

/// Runs a read at `readConcern: {level: "snapshot"}` (see `snapshot_reads.rs`) and
/// reports the time it read at, in its cursor as mongod does.
fn run_at_snapshot(
    ctx: &Ctx<'_>,
    set: &basalt_repl::ReplicaSet,
    command: &Command,
    body: &Document,
) -> Result<Reply> {
    let at = snapshot_reads::at_cluster_time(body)?;
    let (snapshot, time) = ctx.server.snapshot_history.snapshot(ctx, set, at)?;
    let scope = Arc::new(basalt_storage::Buffered::new(snapshot, true));
    let reply = basalt_storage::with_write_scope(scope, || run_handler(ctx, command, body))?;
    let mut reply = match reply {
        Reply::Document(reply) => reply,
        Reply::Encoded(reply) | Reply::Complete(reply) => Document::try_from(reply.as_ref())?,
    };
    match reply.get_mut("cursor") {
        Some(bson::Bson::Document(cursor)) => {
            cursor.insert("atClusterTime", time);
        }
        _ => {
            reply.insert("atClusterTime", time);
        }
    }
    Ok(Reply::Document(reply))
}

/// Runs a statement of a transaction in its scope (see `transactions.rs`).
fn run_in_transaction(
    ctx: &Ctx<'_>,
    command: &Command,
    body: &Document,
    scope: Arc<transactions::Scope>,
) -> Result<Reply> {
    let reply = basalt_storage::with_write_scope(scope.clone(), || {
        basalt_catalog::with_uncommitted(scope.uncommitted(), || run_handler(ctx, command, body))
    });
    let failed = match &reply {
        Err(_) => true,
        Ok(Reply::Document(reply)) => reply.contains_key("writeErrors"),
        Ok(Reply::Encoded(reply) | Reply::Complete(reply)) => {
            reply.get("writeErrors").ok().flatten().is_some()
        }
    };
    if let Some(conflict) = scope.finish(failed) {
        return Err(conflict);
    }
    reply
}

/// Runs a command's handler here, with its collation default, time limit and
/// JavaScript context, registered as an operation (`currentOp`, `killOp`); then records
/// its latency and `top` figures and profiles it.
fn run_handler(ctx: &Ctx<'_>, command: &Command, body: &Document) -> Result<Reply> {
    let defaulted = default_collation::with_default_collation(ctx, body);
    let body = defaulted.as_ref().unwrap_or(body);
    let max_time_ms = generic_arguments::max_time_ms(body)?;
    let target = latency_target(command.name, body);
    let namespace = match target {
        Some((collection, _)) => format!("{}.{collection}", ctx.db),
        // A database-level aggregation's, as mongod names it.
        None if command.name == "aggregate" => format!("{}.$cmd.aggregate", ctx.db),
        None => format!("{}.$cmd", ctx.db),
    };
    let registered = ctx.server.operations.begin(
        ctx.connection,
        crate::security::cursor_owner(ctx),
        command.name,
        namespace,
        body,
        crate::exec::Deadline::from_max_time_ms(max_time_ms),
    );
    let operation = &registered.operation;
    let profiling = ctx.server.profiler.database(ctx.db);
    let ctx = &Ctx {
        max_time_ms,
        operation: Some(operation),
        ..*ctx
    };
    let stored = crate::system_js::stored_functions(&ctx.server.catalog, ctx.db);
    let kill_flag = operation.deadline().progress().kill_flag();
    let view_read = views::read_of_view(ctx, command.name, body)?;
    let is_view_read = view_read.is_some();
    let reply = crate::query_settings::apply(ctx, command.name, body, || {
        basalt_js::with_command(max_time_ms, Some(kill_flag), stored, || {
            match (view_read, command.handler) {
                (Some(read), _) => read.run(ctx, body),
                (None, Handler::Document(handler)) => handler(ctx, body).map(Reply::Document),
                (None, Handler::Encoded(handler)) => handler(ctx, body).map(Reply::Encoded),
            }
        })
    })
    .and_then(|reply| reply);
    if replication::role_of(command.name, body) == replication::Role::Write {
        crate::query_settings::note_write(ctx, target.as_ref().map(|(collection, _)| *collection));
    }
    let micros = u64::try_from(operation.started.elapsed().as_micros()).unwrap_or(u64::MAX);
    if !ctx.connection.is_internal() {
        ctx.server.stats.latencies.record(command.name, micros);
    }
    if let Some((name, class)) = target {
        let collection = ctx.server.catalog.get(ctx.db, name);
        // Operations that ran: not a getMore on an unknown cursor, say, as in MongoDB.
        if let (Ok(_), Some(collection)) = (&reply, &collection) {
            collection.latency().record(class, micros);
        }
        // `top` counts what ran on a collection or view that exists (still, or now).
        let created = command.name == "create" && reply.is_ok();
        if collection.is_some() || is_view_read || created {
            let writes = replication::role_of(command.name, body) == replication::Role::Write;
            ctx.server
                .top
                .record(&operation.ns, command.name, writes, micros);
        }
    }
    match (command.name, &reply) {
        ("drop", Ok(_)) => ctx.server.top.forget(&operation.ns),
        ("dropDatabase", Ok(_)) => ctx.server.top.forget(&format!("{}.", ctx.db)),
        _ => {}
    }
    let outcome = match &reply {
        Ok(Reply::Document(reply)) => crate::profiler::Outcome::Document(reply),
        Ok(Reply::Encoded(reply) | Reply::Complete(reply)) => {
            crate::profiler::Outcome::Encoded(reply)
        }
        Err(error) => crate::profiler::Outcome::Failed(error),
    };
    crate::profiler::record(ctx, profiling, command.name, operation, outcome);
    reply
}

/// The collection a command works on, and what kind of operation it is, for the
/// collection's latency statistics: the collection its first field names (a getMore's
/// `collection`).
fn latency_target<'b>(command: &str, body: &'b Document) -> Option<(&'b str, OperationClass)> {
    let class = match command {
        "find" | "getMore" | "aggregate" | "count" | "distinct" => OperationClass::Read,
        "insert" | "update" | "delete" | "findAndModify" => OperationClass::Write,
        _ => OperationClass::Command,
    };
    let collection = match command {
        "getMore" => body.get_str("collection").ok()?,
        _ => body.iter().next()?.1.as_str()?,
    };
    Some((collection, class))
}

/// Whether `command` needs an authenticated user when access control is on.
fn requires_auth(command: &str) -> bool {
    crate::security::required(command, "admin", &Document::new())
        != Some(crate::security::Need::Nothing)
}

fn list_commands(_ctx: &Ctx<'_>, _body: &Document) -> Result<Document> {
    let mut commands = Document::new();
    // Aliases are listed under their own names too, as mongod does.
    for c in COMMANDS {
        for name in std::iter::once(&c.name).chain(c.aliases) {
            commands.insert(
                *name,
                doc! {
                    "help": c.help,
                    "adminOnly": c.admin_only,
                    "requiresAuth": requires_auth(name),
                },
            );
        }
    }
    Ok(doc! { "commands": commands })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Access control must know every command: one it does not list is refused to
    /// everyone but the members' internal user.
    #[test]
    fn every_command_has_its_authorization_listed() {
        for c in COMMANDS {
            let body = doc! { c.name: "c" };
            assert!(
                crate::security::required(c.name, "db", &body).is_some(),
                "{} is missing from security/required.rs",
                c.name
            );
        }
    }

    /// Every command's arguments are declared in arguments.rs, as mongod parses them,
    /// and nothing is declared there that is not a command.
    #[test]
    fn every_command_has_its_arguments_declared() {
        let declared: Vec<&str> = arguments::declared_commands().collect();
        for c in COMMANDS {
            assert!(
                declared.contains(&c.name),
                "{} is missing from commands/arguments.rs",
                c.name
            );
        }
        for name in declared {
            assert!(
                COMMANDS.iter().any(|c| c.name == name),
                "{name} is declared in commands/arguments.rs but not registered"
            );
        }
    }
}
