//! MongoDB's authorization model: action types, resources, privileges, and the built-in
//! roles with the privileges MongoDB's manual documents for them.
//!
//! A privilege is a set of actions on a resource: a collection, every ordinary
//! collection of a database (`{db: "d", collection: ""}`), a collection name in every
//! database, every ordinary collection anywhere (`{db: "", collection: ""}`), the cluster,
//! or any resource at all. "Ordinary" leaves out `system.*` collections: those are
//! reached only by privileges that name them, as in MongoDB.

use basalt_error::{Error, ErrorCode, Result};
use bson::{doc, Bson, Document};

macro_rules! actions {
    ($($name:ident = $text:literal,)*) => {
        /// One of MongoDB's action types.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[allow(non_camel_case_types)]
        pub enum Action { $($name,)* }

        impl Action {
            pub const ALL: &'static [Action] = &[$(Action::$name,)*];

            pub fn name(self) -> &'static str {
                match self { $(Action::$name => $text,)* }
            }

            pub fn from_name(name: &str) -> Option<Action> {
                match name { $($text => Some(Action::$name),)* _ => None }
            }
        }
    };
}

actions! {
    AdvanceClusterTime = "advanceClusterTime",
    AnyAction = "anyAction",
    ApplicationMessage = "applicationMessage",
    BypassDocumentValidation = "bypassDocumentValidation",
    ChangeCustomData = "changeCustomData",
    ChangeOwnCustomData = "changeOwnCustomData",
    ChangeOwnPassword = "changeOwnPassword",
    ChangePassword = "changePassword",
    ChangeStream = "changeStream",
    CheckFreeMonitoringStatus = "checkFreeMonitoringStatus",
    CollMod = "collMod",
    CollStats = "collStats",
    Compact = "compact",
    ConnPoolStats = "connPoolStats",
    ConvertToCapped = "convertToCapped",
    CreateCollection = "createCollection",
    CreateIndex = "createIndex",
    CreateRole = "createRole",
    CreateSearchIndexes = "createSearchIndexes",
    CreateUser = "createUser",
    DbHash = "dbHash",
    DbStats = "dbStats",
    DropCollection = "dropCollection",
    DropConnections = "dropConnections",
    DropDatabase = "dropDatabase",
    DropIndex = "dropIndex",
    DropRole = "dropRole",
    DropSearchIndex = "dropSearchIndex",
    DropUser = "dropUser",
    EnableProfiler = "enableProfiler",
    Find = "find",
    FsyncAction = "fsync",
    GetClusterParameter = "getClusterParameter",
    GetCmdLineOpts = "getCmdLineOpts",
    GetDefaultRWConcern = "getDefaultRWConcern",
    GetLog = "getLog",
    GetParameter = "getParameter",
    GrantRole = "grantRole",
    HostInfo = "hostInfo",
    Impersonate = "impersonate",
    IndexStats = "indexStats",
    Inprog = "inprog",
    Insert = "insert",
    Internal = "internal",
    InvalidateUserCache = "invalidateUserCache",
    KillAnyCursor = "killAnyCursor",
    KillAnySession = "killAnySession",
    KillCursors = "killCursors",
    Killop = "killop",
    ListCollections = "listCollections",
    ListDatabases = "listDatabases",
    ListIndexes = "listIndexes",
    ListSearchIndexes = "listSearchIndexes",
    ListSessions = "listSessions",
    LogRotate = "logRotate",
    Netstat = "netstat",
    PlanCacheIndexFilter = "planCacheIndexFilter",
    PlanCacheRead = "planCacheRead",
    PlanCacheWrite = "planCacheWrite",
    QuerySettings = "querySettings",
    ReIndex = "reIndex",
    Remove = "remove",
    RenameCollectionSameDB = "renameCollectionSameDB",
    ReplSetConfigure = "replSetConfigure",
    ReplSetGetConfig = "replSetGetConfig",
    ReplSetGetStatus = "replSetGetStatus",
    ReplSetResizeOplog = "replSetResizeOplog",
    ReplSetStateChange = "replSetStateChange",
    RevokeRole = "revokeRole",
    RotateCertificates = "rotateCertificates",
    ServerStatus = "serverStatus",
    SetAuthenticationRestriction = "setAuthenticationRestriction",
    SetClusterParameter = "setClusterParameter",
    SetDefaultRWConcern = "setDefaultRWConcern",
    SetFeatureCompatibilityVersion = "setFeatureCompatibilityVersion",
    SetParameter = "setParameter",
    Shutdown = "shutdown",
    Top = "top",
    Update = "update",
    UpdateSearchIndex = "updateSearchIndex",
    UseUUID = "useUUID",
    Validate = "validate",
    ViewRole = "viewRole",
    ViewUser = "viewUser",
}

/// A set of actions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Actions(u128);

impl Actions {
    pub fn of(actions: &[Action]) -> Actions {
        Actions(actions.iter().fold(0, |bits, a| bits | Actions::bit(*a)))
    }

    fn bit(action: Action) -> u128 {
        1u128 << (action as u32)
    }

    pub fn contains(self, action: Action) -> bool {
        self.0 & (Actions::bit(action) | Actions::bit(Action::AnyAction)) != 0
    }

    pub fn union(self, other: Actions) -> Actions {
        Actions(self.0 | other.0)
    }

    pub fn without(self, other: Actions) -> Actions {
        Actions(self.0 & !other.0)
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn iter(self) -> impl Iterator<Item = Action> {
        Action::ALL
            .iter()
            .copied()
            .filter(move |a| self.0 & Actions::bit(*a) != 0)
    }
}

/// What a privilege is on.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Resource {
    AnyResource,
    Cluster,
    /// `db` and `collection`; either empty means "any" (ordinary collections only).
    Namespace {
        db: String,
        collection: String,
    },
}

impl Resource {
    pub fn namespace(db: &str, collection: &str) -> Resource {
        Resource::Namespace {
            db: db.to_string(),
            collection: collection.to_string(),
        }
    }

    /// The database itself (`{db, collection: ""}`), for database-wide actions.
    pub fn database(db: &str) -> Resource {
        Resource::namespace(db, "")
    }

    /// Whether a privilege on `self` covers the resource `wanted`.
    pub fn covers(&self, wanted: &Resource) -> bool {
        match (self, wanted) {
            (Resource::AnyResource, _) => true,
            (Resource::Cluster, Resource::Cluster) => true,
            (
                Resource::Namespace { db, collection },
                Resource::Namespace {
                    db: wanted_db,
                    collection: wanted_collection,
                },
            ) => {
                let db_matches = db.is_empty() || db == wanted_db;
                // "Every ordinary collection" (which covers the database itself too)
                // does not reach system collections.
                let collection_matches = if collection.is_empty() {
                    !wanted_collection.starts_with("system.")
                } else {
                    collection == wanted_collection
                };
                db_matches && collection_matches
            }
            _ => false,
        }
    }

    pub fn to_document(&self) -> Document {
        match self {
            Resource::AnyResource => doc! { "anyResource": true },
            Resource::Cluster => doc! { "cluster": true },
            Resource::Namespace { db, collection } => doc! { "db": db, "collection": collection },
        }
    }

    pub fn from_document(document: &Document) -> Result<Resource> {
        if document.get_bool("anyResource").unwrap_or(false) {
            return Ok(Resource::AnyResource);
        }
        if document.get_bool("cluster").unwrap_or(false) {
            return Ok(Resource::Cluster);
        }
        match (document.get_str("db"), document.get_str("collection")) {
            (Ok(db), Ok(collection)) => Ok(Resource::namespace(db, collection)),
            _ => Err(Error::failed_to_parse(format!(
                "resource pattern must contain 'db' and 'collection' fields, or 'cluster' \
                 or 'anyResource': {document}"
            ))),
        }
    }
}

/// Actions on a resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Privilege {
    pub resource: Resource,
    pub actions: Actions,
}

impl Privilege {
    pub fn new(resource: Resource, actions: &[Action]) -> Privilege {
        Privilege {
            resource,
            actions: Actions::of(actions),
        }
    }

    pub fn to_document(&self) -> Document {
        let actions: Vec<Bson> = self.actions.iter().map(|a| Bson::from(a.name())).collect();
        doc! { "resource": self.resource.to_document(), "actions": actions }
    }

    /// A privilege as `createRole` and `grantPrivilegesToRole` take it; unknown actions
    /// are BadValue, as in MongoDB.
    pub fn from_document(document: &Document) -> Result<Privilege> {
        let resource = document
            .get_document("resource")
            .map_err(|_| Error::failed_to_parse("privilege must have a 'resource' document"))
            .and_then(Resource::from_document)?;
        let names = document
            .get_array("actions")
            .map_err(|_| Error::failed_to_parse("privilege must have an 'actions' array"))?;
        let mut actions = Vec::new();
        for name in names {
            let name = name.as_str().ok_or_else(|| {
                Error::failed_to_parse("the actions of a privilege must be strings")
            })?;
            actions.push(Action::from_name(name).ok_or_else(|| {
                Error::bad_value(format!("Unrecognized action privilege string: {name}"))
            })?);
        }
        Ok(Privilege::new(resource, &actions))
    }
}

/// Adds `privilege` to `set`, merging actions on a resource already there.
pub fn merge(set: &mut Vec<Privilege>, privilege: Privilege) {
    match set.iter_mut().find(|p| p.resource == privilege.resource) {
        Some(existing) => existing.actions = existing.actions.union(privilege.actions),
        None => set.push(privilege),
    }
}

/// Whether `privileges` allow `action` on `resource`.
pub fn allows(privileges: &[Privilege], resource: &Resource, action: Action) -> bool {
    privileges
        .iter()
        .any(|p| p.actions.contains(action) && p.resource.covers(resource))
}

/// The built-in roles that exist in every database.
const DATABASE_ROLES: &[&str] = &["read", "readWrite", "dbAdmin", "userAdmin", "dbOwner"];
/// The built-in roles that exist only in `admin`.
const ADMIN_ROLES: &[&str] = &[
    "clusterMonitor",
    "clusterManager",
    "hostManager",
    "clusterAdmin",
    "backup",
    "restore",
    "readAnyDatabase",
    "readWriteAnyDatabase",
    "userAdminAnyDatabase",
    "dbAdminAnyDatabase",
    "root",
    "__system",
];

/// Whether `role` in `db` is one of MongoDB's built-in roles.
pub fn is_builtin(role: &str, db: &str) -> bool {
    DATABASE_ROLES.contains(&role) || (db == "admin" && ADMIN_ROLES.contains(&role))
}

/// The built-in roles of `db`, for `rolesInfo` with `showBuiltinRoles`.
pub fn builtin_roles(db: &str) -> Vec<&'static str> {
    let mut roles = DATABASE_ROLES.to_vec();
    if db == "admin" {
        roles.extend(ADMIN_ROLES.iter().filter(|r| **r != "__system"));
    }
    roles
}

use Action as A;

const READ: &[Action] = &[
    A::ChangeStream,
    A::CollStats,
    A::DbHash,
    A::DbStats,
    A::Find,
    A::KillCursors,
    A::ListCollections,
    A::ListIndexes,
    A::ListSearchIndexes,
];
const WRITE: &[Action] = &[
    A::ConvertToCapped,
    A::CreateCollection,
    A::CreateIndex,
    A::CreateSearchIndexes,
    A::DropCollection,
    A::DropIndex,
    A::DropSearchIndex,
    A::Insert,
    A::Remove,
    A::RenameCollectionSameDB,
    A::Update,
    A::UpdateSearchIndex,
];
const DB_ADMIN: &[Action] = &[
    A::BypassDocumentValidation,
    A::CollMod,
    A::CollStats,
    A::Compact,
    A::ConvertToCapped,
    A::CreateCollection,
    A::CreateIndex,
    A::DbHash,
    A::DbStats,
    A::DropCollection,
    A::DropDatabase,
    A::DropIndex,
    A::EnableProfiler,
    A::ListCollections,
    A::ListIndexes,
    A::PlanCacheIndexFilter,
    A::PlanCacheRead,
    A::PlanCacheWrite,
    A::ReIndex,
    A::RenameCollectionSameDB,
    A::Validate,
];
const USER_ADMIN: &[Action] = &[
    A::ChangeCustomData,
    A::ChangePassword,
    A::CreateRole,
    A::CreateUser,
    A::DropRole,
    A::DropUser,
    A::GrantRole,
    A::RevokeRole,
    A::SetAuthenticationRestriction,
    A::ViewRole,
    A::ViewUser,
];
const CLUSTER_MONITOR: &[Action] = &[
    A::CheckFreeMonitoringStatus,
    A::ConnPoolStats,
    A::GetClusterParameter,
    A::GetCmdLineOpts,
    A::GetDefaultRWConcern,
    A::GetLog,
    A::GetParameter,
    A::HostInfo,
    A::Inprog,
    A::ListDatabases,
    A::ListSessions,
    A::Netstat,
    A::ReplSetGetConfig,
    A::ReplSetGetStatus,
    A::ServerStatus,
    A::Top,
    A::UseUUID,
];
const CLUSTER_MANAGER: &[Action] = &[
    A::ApplicationMessage,
    A::GetClusterParameter,
    A::GetDefaultRWConcern,
    A::ListSessions,
    A::QuerySettings,
    A::ReplSetConfigure,
    A::ReplSetGetConfig,
    A::ReplSetGetStatus,
    A::ReplSetResizeOplog,
    A::ReplSetStateChange,
    A::SetClusterParameter,
    A::SetDefaultRWConcern,
    A::SetFeatureCompatibilityVersion,
];
const HOST_MANAGER: &[Action] = &[
    A::ApplicationMessage,
    A::DropConnections,
    A::FsyncAction,
    A::InvalidateUserCache,
    A::KillAnyCursor,
    A::KillAnySession,
    A::Killop,
    A::LogRotate,
    A::RotateCertificates,
    A::SetParameter,
    A::Shutdown,
];

/// The privileges a built-in role grants in `db` (its own database, or all of them for
/// the `admin` roles), or `None` when it is not a built-in role there.
pub fn builtin_privileges(role: &str, db: &str) -> Option<Vec<Privilege>> {
    if !is_builtin(role, db) {
        return None;
    }
    let on_db = |actions: &[Action]| Privilege::new(Resource::database(db), actions);
    let on = |collection: &str, actions: &[Action]| {
        Privilege::new(Resource::namespace(db, collection), actions)
    };
    let everywhere = |actions: &[Action]| Privilege::new(Resource::namespace("", ""), actions);
    let cluster = |actions: &[Action]| Privilege::new(Resource::Cluster, actions);
    let read_write: Vec<Action> = [READ, WRITE].concat();
    let mut privileges = Vec::new();
    match role {
        "read" => {
            privileges.push(on_db(READ));
            privileges.push(on("system.js", READ));
        }
        "readWrite" => {
            privileges.push(on_db(&read_write));
            privileges.push(on("system.js", &read_write));
        }
        "dbAdmin" => {
            privileges.push(on_db(DB_ADMIN));
            privileges.push(on(
                "system.profile",
                &[READ, &[A::DropCollection, A::CreateCollection]].concat(),
            ));
        }
        "userAdmin" => privileges.push(on_db(USER_ADMIN)),
        "dbOwner" => {
            for part in ["readWrite", "dbAdmin", "userAdmin"] {
                for p in builtin_privileges(part, db).unwrap_or_default() {
                    merge(&mut privileges, p);
                }
            }
        }
        "clusterMonitor" => {
            privileges.push(cluster(CLUSTER_MONITOR));
            privileges.push(everywhere(&[
                A::CollStats,
                A::DbStats,
                A::IndexStats,
                A::UseUUID,
            ]));
        }
        "clusterManager" => {
            privileges.push(cluster(CLUSTER_MANAGER));
            for db in ["config", "local"] {
                privileges.push(Privilege::new(Resource::database(db), &read_write));
            }
        }
        "hostManager" => {
            privileges.push(cluster(HOST_MANAGER));
            privileges.push(everywhere(&[A::KillCursors]));
        }
        "clusterAdmin" => {
            for part in ["clusterManager", "clusterMonitor", "hostManager"] {
                for p in builtin_privileges(part, "admin").unwrap_or_default() {
                    merge(&mut privileges, p);
                }
            }
            merge(&mut privileges, everywhere(&[A::DropDatabase]));
        }
        "readAnyDatabase" => {
            privileges.push(everywhere(READ));
            privileges.push(Privilege::new(Resource::namespace("", "system.js"), READ));
            privileges.push(cluster(&[A::ListDatabases]));
        }
        "readWriteAnyDatabase" => {
            privileges.push(everywhere(&read_write));
            privileges.push(Privilege::new(
                Resource::namespace("", "system.js"),
                &read_write,
            ));
            privileges.push(cluster(&[A::ListDatabases]));
        }
        "userAdminAnyDatabase" => {
            privileges.push(everywhere(USER_ADMIN));
            privileges.push(cluster(&[A::InvalidateUserCache, A::ListDatabases]));
            for collection in ["system.users", "system.roles"] {
                privileges.push(Privilege::new(
                    Resource::namespace("admin", collection),
                    &[
                        A::CollStats,
                        A::DbHash,
                        A::DbStats,
                        A::Find,
                        A::KillCursors,
                        A::CreateIndex,
                        A::DropIndex,
                    ],
                ));
            }
        }
        "dbAdminAnyDatabase" => {
            privileges.push(everywhere(DB_ADMIN));
            privileges.push(Privilege::new(
                Resource::namespace("", "system.profile"),
                &[READ, &[A::DropCollection, A::CreateCollection]].concat(),
            ));
            privileges.push(cluster(&[A::ListDatabases]));
        }
        "backup" => {
            privileges.push(everywhere(READ));
            privileges.push(cluster(&[
                A::ListDatabases,
                A::ServerStatus,
                A::GetParameter,
            ]));
            for collection in [
                "system.js",
                "system.users",
                "system.roles",
                "system.version",
            ] {
                privileges.push(Privilege::new(
                    Resource::namespace("", collection),
                    &[A::Find],
                ));
            }
        }
        "restore" => {
            privileges.push(everywhere(
                &[&read_write[..], &[A::BypassDocumentValidation, A::CollMod]].concat(),
            ));
            privileges.push(cluster(&[A::GetParameter]));
            for collection in ["system.js", "system.users", "system.roles"] {
                privileges.push(Privilege::new(
                    Resource::namespace("", collection),
                    &[
                        A::Find,
                        A::Insert,
                        A::Update,
                        A::Remove,
                        A::CreateIndex,
                        A::CreateCollection,
                        A::DropCollection,
                    ],
                ));
            }
        }
        // MongoDB's root is the union of the roles above; every action on every
        // resource but the members' internal ones is what that union amounts to.
        "root" => {
            let all = Actions::of(Action::ALL).without(Actions::of(&[
                A::AnyAction,
                A::Internal,
                A::Impersonate,
            ]));
            privileges.push(Privilege {
                resource: Resource::AnyResource,
                actions: all,
            });
        }
        "__system" => privileges.push(Privilege::new(Resource::AnyResource, &[A::AnyAction])),
        _ => return None,
    }
    Some(privileges)
}

/// A role: its name and its database.
pub type RoleName = (String, String);

/// A role name as users and roles refer to it: `{role, db}`, or a bare name in `db`.
pub fn role_name(value: &Bson, db: &str) -> Result<RoleName> {
    match value {
        Bson::String(role) => Ok((role.clone(), db.to_string())),
        Bson::Document(d) => match (d.get_str("role"), d.get_str("db")) {
            (Ok(role), Ok(db)) => Ok((role.to_string(), db.to_string())),
            _ => Err(Error::failed_to_parse(format!(
                "a role must be a string or have string fields 'role' and 'db': {d}"
            ))),
        },
        other => Err(Error::new(
            ErrorCode::FAILED_TO_PARSE,
            format!("a role must be a string or a document, not {other}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_collection_patterns_do_not_reach_system_collections() {
        let any_in_db = Resource::database("shop");
        assert!(any_in_db.covers(&Resource::namespace("shop", "orders")));
        assert!(any_in_db.covers(&Resource::database("shop")));
        assert!(!any_in_db.covers(&Resource::namespace("shop", "system.users")));
        assert!(!any_in_db.covers(&Resource::namespace("other", "orders")));
        assert!(!any_in_db.covers(&Resource::Cluster));
        let everywhere = Resource::namespace("", "");
        assert!(everywhere.covers(&Resource::namespace("x", "y")));
        assert!(!everywhere.covers(&Resource::namespace("x", "system.js")));
        assert!(Resource::namespace("", "system.js").covers(&Resource::namespace("x", "system.js")));
        assert!(Resource::AnyResource.covers(&Resource::Cluster));
    }

    #[test]
    fn builtin_roles_grant_what_the_manual_lists() {
        let read = builtin_privileges("read", "shop").unwrap();
        let orders = Resource::namespace("shop", "orders");
        assert!(allows(&read, &orders, A::Find));
        assert!(!allows(&read, &orders, A::Insert));
        assert!(!allows(
            &read,
            &Resource::namespace("other", "orders"),
            A::Find
        ));
        let rw = builtin_privileges("readWrite", "shop").unwrap();
        assert!(allows(&rw, &orders, A::Insert) && allows(&rw, &orders, A::Remove));
        assert!(!allows(&rw, &Resource::database("shop"), A::DropDatabase));
        let owner = builtin_privileges("dbOwner", "shop").unwrap();
        assert!(allows(&owner, &Resource::database("shop"), A::DropDatabase));
        assert!(allows(&owner, &Resource::database("shop"), A::CreateUser));
        let root = builtin_privileges("root", "admin").unwrap();
        assert!(allows(&root, &Resource::Cluster, A::ReplSetConfigure));
        assert!(!allows(&root, &Resource::Cluster, A::Internal));
        assert!(builtin_privileges("root", "shop").is_none());
        let system = builtin_privileges("__system", "admin").unwrap();
        assert!(allows(&system, &Resource::Cluster, A::Internal));
    }

    #[test]
    fn privileges_round_trip_and_unknown_actions_are_refused() {
        let p = Privilege::new(Resource::namespace("d", "c"), &[A::Find, A::Insert]);
        assert_eq!(Privilege::from_document(&p.to_document()).unwrap(), p);
        let bad = doc! { "resource": { "db": "d", "collection": "" }, "actions": ["fly"] };
        assert_eq!(
            Privilege::from_document(&bad).unwrap_err().code,
            ErrorCode::BAD_VALUE
        );
    }
}
