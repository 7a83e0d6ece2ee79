//! What each command requires of its user under access control: MongoDB's action types
//! on the resources it touches (its collection, the database, the cluster, and for an
//! aggregation every collection its stages read or write).

use basalt_auth::{Action, Resource};
use bson::{Bson, Document};

/// What a command needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Need {
    /// Runs before authentication: the handshake, authentication itself, ping.
    Nothing,
    /// Any authenticated user (its own sessions, test hooks).
    Authenticated,
    /// An authenticated user; the command itself decides what to show or allow (its own
    /// cursors, the databases it may see, its own user's details).
    Checked,
    /// Every one of these actions.
    All(Vec<(Resource, Action)>),
}

/// The needs of `command` in `db` with this body; `None` for a command this table does
/// not list (then only the members' internal user may run it).
pub fn required(command: &str, db: &str, body: &Document) -> Option<Need> {
    use Action as A;
    let collection = || {
        let name = body
            .iter()
            .next()
            .and_then(|(_, v)| v.as_str())
            .unwrap_or("");
        Resource::namespace(db, name)
    };
    let on_collection = |actions: &[Action]| {
        let resource = collection();
        Need::All(actions.iter().map(|a| (resource.clone(), *a)).collect())
    };
    let on_db = |action: Action| Need::All(vec![(Resource::database(db), action)]);
    let on_cluster = |action: Action| Need::All(vec![(Resource::Cluster, action)]);
    let flag = |field: &str| body.get_bool(field).unwrap_or(false);
    Some(match command {
        "hello" | "ping" | "buildInfo" | "saslStart" | "saslContinue" | "authenticate"
        | "logout" | "connectionStatus" | "whatsmyuri" | "listCommands" | "endSessions" => {
            Need::Nothing
        }
        "startSession"
        | "killSessions"
        | "refreshSessions"
        | "configureFailPoint"
        | "refreshLogicalSessionCacheNow"
        | "commitTransaction"
        | "abortTransaction"
        // Each of its operations is checked as the command it runs as.
        | "bulkWrite" => Need::Authenticated,
        "killAllSessions" => on_cluster(A::KillAnySession),
        "getMore" | "killCursors" | "listDatabases" | "listCollections" | "usersInfo"
        | "rolesInfo" | "updateUser" => Need::Checked,
        "find" | "count" | "distinct" => on_collection(&[A::Find]),
        "insert" => on_collection(&with_bypass(body, &[A::Insert])),
        "update" => {
            let upsert = body.get_array("updates").is_ok_and(|updates| {
                updates.iter().any(|u| {
                    u.as_document()
                        .is_some_and(|u| u.get_bool("upsert").unwrap_or(false))
                })
            });
            let actions: &[Action] = if upsert {
                &[A::Update, A::Insert]
            } else {
                &[A::Update]
            };
            on_collection(&with_bypass(body, actions))
        }
        "delete" => on_collection(&[A::Remove]),
        "findAndModify" => {
            let mut actions = vec![A::Find];
            actions.push(if flag("remove") { A::Remove } else { A::Update });
            if flag("upsert") {
                actions.push(A::Insert);
            }
            on_collection(&with_bypass(body, &actions))
        }
        "aggregate" => aggregate(db, body),
        "explain" => match body.get_document("explain") {
            Ok(inner) => {
                let name = inner.keys().next().map(String::as_str).unwrap_or("");
                required(name, db, inner)?
            }
            Err(_) => Need::Checked,
        },
        "mapReduce" => {
            let mut needs = vec![(collection(), A::Find)];
            if let Some(out) = map_reduce_output(db, body) {
                for action in [A::Insert, A::Remove, A::CreateCollection] {
                    needs.push((out.clone(), action));
                }
            }
            Need::All(needs)
        }
        "listIndexes" => on_collection(&[A::ListIndexes]),
        "createIndexes" => on_collection(&[A::CreateIndex]),
        "dropIndexes" => on_collection(&[A::DropIndex]),
        "create" => on_collection(&[A::CreateCollection]),
        "collMod" => on_collection(&[A::CollMod]),
        "drop" => on_collection(&[A::DropCollection]),
        "dropDatabase" => on_db(A::DropDatabase),
        "renameCollection" => rename_collection(body),
        "convertToCapped" => on_collection(&[A::ConvertToCapped]),
        // mongod asks for listCollections and listIndexes on what it reads; a user
        // with them on the database may run it.
        "validateDBMetadata" => on_db(A::ListCollections),
        "cloneCollectionAsCapped" => {
            let target = Resource::namespace(db, body.get_str("toCollection").unwrap_or(""));
            Need::All(vec![
                (collection(), A::Find),
                (target.clone(), A::Insert),
                (target, A::CreateCollection),
            ])
        }
        "collStats" => on_collection(&[A::CollStats]),
        "dataSize" => {
            // Its value names the namespace whole: "db.collection".
            let namespace = body.get_str("dataSize").unwrap_or("");
            let (ns_db, name) = namespace.split_once('.').unwrap_or((db, namespace));
            Need::All(vec![(Resource::namespace(ns_db, name), A::Find)])
        }
        "compact" => on_collection(&[A::Compact]),
        "autoCompact" => on_cluster(A::Compact),
        // mongod's fsyncUnlock asks for its own `unlock` action, which the roles that
        // have `fsync` also have.
        "fsync" | "fsyncUnlock" => on_cluster(A::FsyncAction),
        "planCacheSetFilter" | "planCacheClearFilters" => {
            on_collection(&[A::PlanCacheIndexFilter])
        }
        "planCacheListFilters" => on_collection(&[A::PlanCacheRead]),
        "planCacheClear" => on_collection(&[A::PlanCacheWrite]),
        "dbStats" => on_db(A::DbStats),
        "dbHash" => on_db(A::DbHash),
        "validate" => on_collection(&[A::Validate]),
        "createSearchIndexes" => on_collection(&[A::CreateSearchIndexes]),
        "updateSearchIndex" => on_collection(&[A::UpdateSearchIndex]),
        "dropSearchIndex" => on_collection(&[A::DropSearchIndex]),
        "serverStatus" => on_cluster(A::ServerStatus),
        "currentOp" => on_cluster(A::Inprog),
        "killOp" => on_cluster(A::Killop),
        "top" => on_cluster(A::Top),
        "lockInfo" => on_cluster(A::ServerStatus),
        "logRotate" => on_cluster(A::LogRotate),
        "profile" => on_db(A::EnableProfiler),
        "getParameter" => on_cluster(A::GetParameter),
        "setParameter" => on_cluster(A::SetParameter),
        "setFeatureCompatibilityVersion" => on_cluster(A::SetFeatureCompatibilityVersion),
        "setClusterParameter" => on_cluster(A::SetClusterParameter),
        "getClusterParameter" => on_cluster(A::GetClusterParameter),
        "setQuerySettings" | "removeQuerySettings" => on_cluster(A::QuerySettings),
        "dropConnections" => on_cluster(A::DropConnections),
        "connPoolStats" => on_cluster(A::ConnPoolStats),
        "getCmdLineOpts" => on_cluster(A::GetCmdLineOpts),
        "getLog" => on_cluster(A::GetLog),
        "rotateCertificates" => on_cluster(A::RotateCertificates),
        "hostInfo" => on_cluster(A::HostInfo),
        "getFreeMonitoringStatus" => on_cluster(A::CheckFreeMonitoringStatus),
        "replSetInitiate" | "replSetReconfig" => on_cluster(A::ReplSetConfigure),
        "replSetGetStatus" => on_cluster(A::ReplSetGetStatus),
        "replSetGetConfig" => on_cluster(A::ReplSetGetConfig),
        "replSetStepDown" | "replSetFreeze" | "replSetMaintenance" => {
            on_cluster(A::ReplSetStateChange)
        }
        "replSetResizeOplog" => on_cluster(A::ReplSetResizeOplog),
        "replSetRaft" | "applyOps" => on_cluster(A::Internal),
        "setDefaultRWConcern" => on_cluster(A::SetDefaultRWConcern),
        "getDefaultRWConcern" => on_cluster(A::GetDefaultRWConcern),
        "createUser" => with_granted_roles(db, body, vec![(Resource::database(db), A::CreateUser)]),
        "dropUser" | "dropAllUsersFromDatabase" => on_db(A::DropUser),
        "grantRolesToUser" | "grantRolesToRole" => with_granted_roles(db, body, Vec::new()),
        "revokeRolesFromUser" | "revokeRolesFromRole" => Need::All(
            roles_in(db, body)
                .into_iter()
                .map(|role_db| (Resource::database(&role_db), A::RevokeRole))
                .collect(),
        ),
        "createRole" => with_granted_roles(db, body, vec![(Resource::database(db), A::CreateRole)]),
        "updateRole" => with_granted_roles(
            db,
            body,
            vec![
                (Resource::database(db), A::GrantRole),
                (Resource::database(db), A::RevokeRole),
            ],
        ),
        "dropRole" | "dropAllRolesFromDatabase" => on_db(A::DropRole),
        "grantPrivilegesToRole" => on_db(A::GrantRole),
        "revokePrivilegesFromRole" => on_db(A::RevokeRole),
        _ => return None,
    })
}

/// `actions`, with bypassDocumentValidation when the command asks to bypass it.
fn with_bypass(body: &Document, actions: &[Action]) -> Vec<Action> {
    let mut all = actions.to_vec();
    if body.get_bool("bypassDocumentValidation").unwrap_or(false) {
        all.push(Action::BypassDocumentValidation);
    }
    all
}

/// The databases of the roles a command grants (its `roles` array).
fn roles_in(db: &str, body: &Document) -> Vec<String> {
    body.get_array("roles")
        .map(|roles| {
            roles
                .iter()
                .filter_map(|r| basalt_auth::privileges::role_name(r, db).ok())
                .map(|(_, role_db)| role_db)
                .collect()
        })
        .unwrap_or_default()
}

/// `needs`, plus grantRole on the database of every role the command grants.
fn with_granted_roles(db: &str, body: &Document, mut needs: Vec<(Resource, Action)>) -> Need {
    for role_db in roles_in(db, body) {
        needs.push((Resource::database(&role_db), Action::GrantRole));
    }
    Need::All(needs)
}

fn rename_collection(body: &Document) -> Need {
    let split = |field: &str| {
        let ns = body.get_str(field).unwrap_or("");
        let (db, collection) = ns.split_once('.').unwrap_or((ns, ""));
        Resource::namespace(db, collection)
    };
    let (from, to) = (split("renameCollection"), split("to"));
    let same_db = matches!((&from, &to), (
        Resource::Namespace { db: a, .. },
        Resource::Namespace { db: b, .. },
    ) if a == b);
    let mut needs = if same_db {
        vec![
            (from, Action::RenameCollectionSameDB),
            (to.clone(), Action::RenameCollectionSameDB),
        ]
    } else {
        vec![
            (from.clone(), Action::Find),
            (from, Action::DropCollection),
            (to.clone(), Action::Insert),
            (to.clone(), Action::CreateIndex),
            (to.clone(), Action::CreateCollection),
        ]
    };
    if body.get_bool("dropTarget").unwrap_or(false) {
        needs.push((to, Action::DropCollection));
    }
    Need::All(needs)
}

/// The collection a mapReduce writes to, unless its output is inline.
fn map_reduce_output(db: &str, body: &Document) -> Option<Resource> {
    match body.get("out")? {
        Bson::String(name) => Some(Resource::namespace(db, name)),
        Bson::Document(out) if out.contains_key("inline") => None,
        Bson::Document(out) => {
            let name = ["replace", "merge", "reduce"]
                .iter()
                .find_map(|mode| out.get_str(mode).ok())?;
            Some(Resource::namespace(out.get_str("db").unwrap_or(db), name))
        }
        _ => None,
    }
}

/// An aggregation reads its collection (none for `aggregate: 1`), every collection a
/// `$lookup`, `$graphLookup` or `$unionWith` reads, and writes its `$out`/`$merge` target.
fn aggregate(db: &str, body: &Document) -> Need {
    let mut needs = Vec::new();
    if let Some(Bson::String(collection)) = body.get("aggregate") {
        let resource = Resource::namespace(db, collection);
        let first = body
            .get_array("pipeline")
            .ok()
            .and_then(|p| p.first())
            .and_then(Bson::as_document)
            .and_then(|s| s.keys().next().cloned());
        // Stages that read metadata rather than documents need their own action.
        let action = match first.as_deref() {
            Some("$collStats") => Action::CollStats,
            Some("$indexStats") => Action::IndexStats,
            Some("$listSearchIndexes") => Action::ListSearchIndexes,
            _ => Action::Find,
        };
        needs.push((resource, action));
    }
    if let Ok(pipeline) = body.get_array("pipeline") {
        pipeline_needs(db, pipeline, &mut needs);
    }
    if needs.is_empty() {
        Need::Authenticated
    } else {
        Need::All(needs)
    }
}

fn pipeline_needs(db: &str, pipeline: &[Bson], needs: &mut Vec<(Resource, Action)>) {
    for stage in pipeline.iter().filter_map(Bson::as_document) {
        let Some((name, spec)) = stage.iter().next() else {
            continue;
        };
        let read = |collection: &str, needs: &mut Vec<(Resource, Action)>| {
            needs.push((Resource::namespace(db, collection), Action::Find));
        };
        match (name.as_str(), spec) {
            ("$lookup" | "$graphLookup", Bson::Document(spec)) => {
                if let Ok(from) = spec.get_str("from") {
                    read(from, needs);
                }
                if let Ok(inner) = spec.get_array("pipeline") {
                    pipeline_needs(db, inner, needs);
                }
            }
            ("$unionWith", Bson::String(collection)) => read(collection, needs),
            ("$unionWith", Bson::Document(spec)) => {
                if let Ok(collection) = spec.get_str("coll") {
                    read(collection, needs);
                }
                if let Ok(inner) = spec.get_array("pipeline") {
                    pipeline_needs(db, inner, needs);
                }
            }
            ("$facet", Bson::Document(facets)) => {
                for inner in facets.values() {
                    if let Bson::Array(inner) = inner {
                        pipeline_needs(db, inner, needs);
                    }
                }
            }
            ("$out", target) => {
                let target = output_target(db, target, "coll");
                for action in [Action::Insert, Action::Remove] {
                    needs.push((target.clone(), action));
                }
            }
            ("$merge", Bson::Document(spec)) => {
                let into = spec.get("into").cloned().unwrap_or(Bson::Null);
                let target = output_target(db, &into, "coll");
                for action in [Action::Insert, Action::Update] {
                    needs.push((target.clone(), action));
                }
            }
            ("$merge", into) => {
                let target = output_target(db, into, "coll");
                for action in [Action::Insert, Action::Update] {
                    needs.push((target.clone(), action));
                }
            }
            ("$currentOp", _) => needs.push((Resource::Cluster, Action::Inprog)),
            ("$querySettings", _) => needs.push((Resource::Cluster, Action::QuerySettings)),
            // A user lists its own sessions freely; everyone's or named users' need
            // listSessions on the cluster.
            ("$listSessions" | "$listLocalSessions", Bson::Document(spec))
                if spec.get_bool("allUsers").unwrap_or(false) || spec.contains_key("users") =>
            {
                needs.push((Resource::Cluster, Action::ListSessions));
            }
            _ => {}
        }
    }
}

/// The collection a `$out`/`$merge` names: a string, or `{db, <field>}`.
fn output_target(db: &str, target: &Bson, field: &str) -> Resource {
    match target {
        Bson::String(collection) => Resource::namespace(db, collection),
        Bson::Document(spec) => Resource::namespace(
            spec.get_str("db").unwrap_or(db),
            spec.get_str(field).unwrap_or(""),
        ),
        _ => Resource::namespace(db, ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn an_aggregation_needs_every_collection_it_reads_and_writes() {
        let body = doc! {
            "aggregate": "orders",
            "pipeline": [
                { "$lookup": { "from": "customers", "localField": "c", "foreignField": "_id", "as": "c" } },
                { "$unionWith": { "coll": "archive", "pipeline": [{ "$lookup": { "from": "x", "as": "y", "pipeline": [] } }] } },
                { "$merge": { "into": { "db": "reports", "coll": "daily" } } },
            ],
        };
        let Some(Need::All(needs)) = required("aggregate", "shop", &body) else {
            panic!("aggregate needs privileges");
        };
        for (db, collection, action) in [
            ("shop", "orders", Action::Find),
            ("shop", "customers", Action::Find),
            ("shop", "archive", Action::Find),
            ("shop", "x", Action::Find),
            ("reports", "daily", Action::Insert),
            ("reports", "daily", Action::Update),
        ] {
            assert!(
                needs.contains(&(Resource::namespace(db, collection), action)),
                "{db}.{collection} {action:?}"
            );
        }
    }

    #[test]
    fn an_upsert_needs_insert_too() {
        let body = doc! { "update": "c", "updates": [{ "q": {}, "u": {}, "upsert": true }] };
        let Some(Need::All(needs)) = required("update", "d", &body) else {
            panic!("update needs privileges");
        };
        assert!(needs.contains(&(Resource::namespace("d", "c"), Action::Insert)));
        assert_eq!(required("frobnicate", "d", &doc! {}), None);
    }
}
