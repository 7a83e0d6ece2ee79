//! `currentOp`, `killOp` and `top`: the operations running now (`crate::operations`),
//! stopping one, and the time spent per collection (`crate::top`). The `$currentOp`
//! stage lists the same operations through [`current_ops`].

use super::Ctx;
use basalt_agg::CurrentOpOptions;
use basalt_error::Result;
use basalt_query::Matcher;
use bson::{doc, Bson, Document};

/// The operations `$currentOp` and `currentOp` report: the commands running and the
/// index builds under way; without `all_users`, under access control, only those of
/// the current user. With the options, idle connections (inactive operations) and
/// idle cursors too, and (`idleSessions`, on by default) the open transactions between
/// their statements.
pub fn current_ops(ctx: &Ctx<'_>, options: &CurrentOpOptions) -> Vec<Document> {
    let host = super::host_info::host_name();
    let user = crate::security::cursor_owner(ctx);
    let mine = |owner: &Option<crate::security::UserName>| {
        options.all_users || user.is_none() || *owner == user
    };
    let operations = &ctx.server.operations;
    let mut ops: Vec<Document> = operations
        .list()
        .iter()
        .filter(|op| mine(&op.owner))
        .map(|op| op.to_document(&host, options.truncate_ops))
        .collect();
    ops.extend(
        ctx.server
            .catalog
            .index_builds()
            .into_iter()
            .map(index_build_op),
    );
    if options.idle_connections {
        let now = bson::DateTime::now()
            .try_to_rfc3339_string()
            .unwrap_or_default();
        for connection in operations.idle_connections() {
            let owner = match ctx.server.security.enabled {
                true => connection.session.lock().user().cloned(),
                false => None,
            };
            if !mine(&owner) {
                continue;
            }
            let mut op = doc! {
                "type": "op",
                "host": &host,
                "desc": format!("conn{}", connection.id),
                "connectionId": connection.id,
                "client": connection.peer.to_string(),
            };
            if let Some(name) = connection.app_name() {
                op.insert("appName", name);
            }
            op.insert("active", false);
            op.insert("currentOpTime", &now);
            ops.push(op);
        }
    }
    if options.idle_cursors {
        ops.extend(ctx.server.cursors.idle(&host));
    }
    if options.idle_sessions {
        for open in ctx.server.transactions.open() {
            if !mine(&open.owner) {
                continue;
            }
            ops.push(doc! {
                "type": "idleSession",
                "host": &host,
                "desc": "inactive transaction",
                "active": false,
                "lsid": open.lsid,
                "transaction": open.transaction,
                "waitingForLock": false,
                "locks": {},
            });
        }
    }
    ops
}

fn index_build_op(build: basalt_catalog::IndexBuildProgress) -> Document {
    let collection = build
        .namespace
        .split_once('.')
        .map_or(build.namespace.as_str(), |(_, c)| c)
        .to_string();
    let percent = (build.done * 100).checked_div(build.total).unwrap_or(0);
    doc! {
        "type": "op",
        "desc": "IndexBuildsCoordinatorMongod-0",
        "active": true,
        "op": "command",
        "ns": build.namespace.clone(),
        "command": {
            "createIndexes": collection,
            "indexes": [{ "key": build.key, "name": build.index_name }],
        },
        "msg": format!(
            "Index Build: scanning collection Index Build: scanning collection: {}/{} {percent}%",
            build.done, build.total
        ),
        "progress": { "done": build.done as i64, "total": build.total as i64 },
    }
}

/// `currentOp`: `{currentOp: 1, $ownOps, $all, <filter>}` on `admin`, as mongod runs
/// it: the operations (all users' unless `$ownOps`) that match the filter, in `inprog`.
pub fn current_op(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    // Read as booleans whatever their type, as mongod reads them. Idle sessions are
    // listed as by the stage's default.
    let options = CurrentOpOptions {
        all_users: !basalt_expr::truthy(body.get("$ownOps")),
        idle_connections: basalt_expr::truthy(body.get("$all")),
        idle_sessions: true,
        ..CurrentOpOptions::default()
    };
    let filter: Document = body
        .iter()
        .skip(1)
        .filter(|(key, _)| {
            !matches!(key.as_str(), "$ownOps" | "$all" | "$truncateOps")
                && !crate::request::GENERIC_COMMAND_FIELDS.contains(&key.as_str())
                && (!key.starts_with('$')
                    || matches!(key.as_str(), "$or" | "$and" | "$nor" | "$expr"))
        })
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    let matcher = Matcher::new(&filter)?;
    let inprog: Vec<Bson> = current_ops(ctx, &options)
        .into_iter()
        .filter(|op| matcher.matches(op))
        .map(Bson::Document)
        .collect();
    Ok(doc! { "inprog": inprog })
}

pub fn kill_op(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    crate::operations::kill_op(&ctx.server.operations, body)
}

pub fn top(ctx: &Ctx<'_>, _body: &Document) -> Result<Document> {
    Ok(ctx.server.top.to_document())
}
