//! Access control (`--auth`, or `--keyFile`, which implies it): who a connection is and
//! what it may do.
//!
//! A connection authenticates with SCRAM (`commands/sasl.rs`) as a user of
//! `admin.system.users`, or as the internal `__system` user with the key file. Before
//! that it may run only the handshake and authentication commands. After, every command
//! needs the privileges `required.rs` lists for it, which the user's roles grant
//! (built-in ones, and those of `admin.system.roles`, resolved in `users.rs`). What a
//! connection's user may do is resolved once and kept until a write to the `admin`
//! database (where users and roles live, on this member or through the replicated log)
//! makes it stale, so the check costs a lookup, not a query. Until the first user
//! exists, the localhost exception lets a client on the loopback interface create it.

mod required;
pub(crate) mod users;

pub(crate) use required::{required, Need};

use crate::commands::Ctx;
use crate::connection::ConnectionInfo;
use crate::Server;
use basalt_auth::scram::ServerConversation;
use basalt_auth::{Action, Credentials, Mechanism, Privilege, Resource};
use basalt_error::{Error, ErrorCode, Result};
use bson::{doc, Document};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use users::Resolved;

/// A user: name and the database it was created in.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct UserName {
    pub user: String,
    pub db: String,
}

impl UserName {
    pub fn new(user: &str, db: &str) -> UserName {
        UserName {
            user: user.to_string(),
            db: db.to_string(),
        }
    }

    fn is_internal(&self) -> bool {
        self.user == basalt_auth::INTERNAL_USER && self.db == basalt_auth::INTERNAL_USER_DB
    }
}

impl std::fmt::Display for UserName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.user, self.db)
    }
}

/// The server's access control settings and its cache's generation.
pub struct Security {
    /// Whether commands are checked (`--auth`, `--keyFile`).
    pub enabled: bool,
    /// The internal user's credentials, from `--keyFile`.
    internal: Option<[Credentials; 2]>,
    /// The key itself, for this member's own connections to the others.
    key: Option<String>,
    /// Bumped by every write to the `admin` database: resolved privileges from before
    /// are stale.
    generation: AtomicU64,
}

impl Security {
    /// Access control as the options ask; the key file's credentials are derived here,
    /// once.
    pub fn new(auth: bool, key: Option<String>) -> Result<Security> {
        let internal = match &key {
            None => None,
            Some(key) => {
                let user = basalt_auth::INTERNAL_USER;
                Some([
                    Credentials::derive(Mechanism::Sha1, user, key)?,
                    Credentials::derive(Mechanism::Sha256, user, key)?,
                ])
            }
        };
        Ok(Security {
            enabled: auth || key.is_some(),
            internal,
            key,
            generation: AtomicU64::new(0),
        })
    }

    /// The key file's key, for authenticating to other members.
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// Users or roles may have changed.
    pub fn invalidate(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// The internal user's credentials for `mechanism`, when there is a key file.
    fn internal_credentials(&self, mechanism: Mechanism) -> Option<Credentials> {
        let index = Mechanism::ALL.iter().position(|m| *m == mechanism)?;
        self.internal.as_ref().map(|all| all[index].clone())
    }
}

/// A SASL conversation under way on a connection.
pub struct Conversation {
    pub id: i32,
    pub db: String,
    pub scram: ServerConversation,
    /// The client asked to skip SCRAM's final empty round trip.
    pub skip_empty_exchange: bool,
}

/// What a connection knows of its client's identity.
#[derive(Default)]
pub struct Session {
    pub conversation: Option<Conversation>,
    user: Option<UserName>,
    /// The user's privileges, with the generation they were resolved at.
    resolved: Option<(u64, Arc<Resolved>)>,
}

impl Session {
    pub fn user(&self) -> Option<&UserName> {
        self.user.as_ref()
    }

    /// The connection is now `user`'s (MongoDB allows one user per connection).
    pub fn authenticated(&mut self, user: UserName) -> Result<()> {
        if let Some(current) = &self.user {
            if *current != user {
                return Err(Error::new(
                    ErrorCode::ILLEGAL_OPERATION,
                    format!(
                        "Each client connection may only be authenticated once. \
                         Previously authenticated as: {current}"
                    ),
                ));
            }
        }
        self.user = Some(user);
        self.resolved = None;
        Ok(())
    }

    pub fn logout(&mut self) {
        *self = Session::default();
    }
}

/// The credentials a client may authenticate with as `user` of `db`: the key file's for
/// the internal user, else the stored ones. `None` when there is no such user (or it has
/// no credentials for the mechanism).
pub fn credentials(
    server: &Arc<Server>,
    user: &UserName,
    mechanism: Mechanism,
) -> Result<Option<Credentials>> {
    if user.is_internal() {
        return Ok(server.security.internal_credentials(mechanism));
    }
    Ok(users::find_user(server, user)?.and_then(|document| {
        let credentials = document.get_document("credentials").ok()?;
        Credentials::from_document(credentials.get_document(mechanism.name()).ok()?)
    }))
}

/// A login with the password itself (HTTP Basic authentication of the status page and
/// metrics): `name` is `user` (of `admin`) or `user@db`. The password is checked against
/// the user's stored credentials (SCRAM-SHA-256's, else SCRAM-SHA-1's) as a SCRAM proof
/// is, and the user's `authenticationRestrictions` must admit `client`. The user's
/// privileges, or `None` for a failed login.
pub fn password_login(
    server: &Arc<Server>,
    name: &str,
    password: &str,
    client: std::net::IpAddr,
) -> Result<Option<Resolved>> {
    let user = match name.rsplit_once('@') {
        Some((user, db)) => UserName::new(user, db),
        None => UserName::new(name, users::ADMIN),
    };
    if user.is_internal() {
        return Ok(None);
    }
    let Some(document) = users::find_user(server, &user)? else {
        return Ok(None);
    };
    let proved = [Mechanism::Sha256, Mechanism::Sha1]
        .into_iter()
        .find_map(|mechanism| {
            let stored = document
                .get_document("credentials")
                .ok()?
                .get_document(mechanism.name())
                .ok()?;
            let credentials = Credentials::from_document(stored)?;
            Some(credentials.matches_password(mechanism, &user.user, password))
        });
    if proved != Some(true) || !users::restrictions_allow(server, &document, client, None)? {
        return Ok(None);
    }
    users::resolve_user(server, &user).map(Some)
}

/// The privileges of the connection's user, resolved anew when users or roles changed
/// since; `None` before authentication.
pub fn privileges(
    server: &Arc<Server>,
    connection: &ConnectionInfo,
) -> Result<Option<Arc<Resolved>>> {
    let generation = server.security.generation();
    let user = {
        let session = connection.session.lock();
        match (&session.user, &session.resolved) {
            (None, _) => return Ok(None),
            (Some(_), Some((at, resolved))) if *at == generation => {
                return Ok(Some(resolved.clone()))
            }
            (Some(user), _) => user.clone(),
        }
    };
    let resolved = Arc::new(if user.is_internal() {
        Resolved::internal()
    } else {
        users::resolve_user(server, &user)?
    });
    connection.session.lock().resolved = Some((generation, resolved.clone()));
    Ok(Some(resolved))
}

/// Whether the connection may run `command` with this body; Unauthorized (13) when not,
/// with MongoDB's messages.
pub fn check(ctx: &Ctx<'_>, command: &str, body: &Document) -> Result<()> {
    let server = ctx.server;
    if !server.security.enabled || ctx.connection.is_internal() {
        return Ok(());
    }
    // A command the table does not list is for the members' internal user only.
    let need = required(command, ctx.db, body)
        .unwrap_or_else(|| Need::All(vec![(Resource::Cluster, Action::Internal)]));
    if need == Need::Nothing {
        return Ok(());
    }
    let Some(resolved) = privileges(server, ctx.connection)? else {
        if localhost_exception(ctx, command)? {
            return Ok(());
        }
        return Err(Error::new(
            ErrorCode::UNAUTHORIZED,
            format!("Command {command} requires authentication"),
        ));
    };
    let allowed = match &need {
        Need::Nothing | Need::Authenticated | Need::Checked => true,
        Need::All(wanted) => wanted
            .iter()
            .all(|(resource, action)| resolved.allows(resource, *action)),
    };
    if allowed {
        Ok(())
    } else {
        Err(not_authorized(ctx.db, body))
    }
}

/// MongoDB's refusal of a command the user's privileges do not cover.
pub fn not_authorized(db: &str, body: &Document) -> Error {
    let mut shown = body.clone();
    for secret in ["pwd", "payload"] {
        if shown.contains_key(secret) {
            shown.insert(secret, "xxx");
        }
    }
    Error::new(
        ErrorCode::UNAUTHORIZED,
        format!("not authorized on {db} to execute command {shown}"),
    )
}

/// Whether the connection's user (if any) has `action` on `resource`; true without
/// access control.
pub fn allows(ctx: &Ctx<'_>, resource: &Resource, action: Action) -> Result<bool> {
    if !ctx.server.security.enabled || ctx.connection.is_internal() {
        return Ok(true);
    }
    Ok(privileges(ctx.server, ctx.connection)?.is_some_and(|r| r.allows(resource, action)))
}

/// What `listDatabases` and `listCollections` may show the connection's user without
/// their own action: the databases (or, with `collection`, the collections of a
/// database) it holds any privilege on. `None` when everything may be shown (access
/// control off, or the user has `action`).
pub fn visible(ctx: &Ctx<'_>, wanted: &Resource, action: Action) -> Result<Option<Visible>> {
    if allows(ctx, wanted, action)? {
        return Ok(None);
    }
    let privileges = privileges(ctx.server, ctx.connection)?
        .map(|r| r.privileges.clone())
        .unwrap_or_default();
    Ok(Some(Visible { privileges }))
}

/// The privileges that decide what a user may see in a listing.
pub struct Visible {
    privileges: Vec<Privilege>,
}

impl Visible {
    /// Whether any privilege reaches `db` (with `collection`, that collection).
    pub fn shows(&self, db: &str, collection: Option<&str>) -> bool {
        self.privileges
            .iter()
            .any(|p| match (&p.resource, collection) {
                (Resource::AnyResource, _) => true,
                (Resource::Cluster, _) => false,
                (Resource::Namespace { db: pdb, .. }, None) => pdb.is_empty() || pdb == db,
                (_, Some(collection)) => p.resource.covers(&Resource::namespace(db, collection)),
            })
    }
}

/// The owner a cursor opened on this connection gets: its user, when access control is
/// on (a cursor then answers only to the user who opened it).
pub fn cursor_owner(ctx: &Ctx<'_>) -> Option<UserName> {
    if !ctx.server.security.enabled {
        return None;
    }
    ctx.connection.session.lock().user.clone()
}

/// MongoDB's localhost exception: with access control on and no user yet, a client on
/// the loopback interface may create the first user or role in `admin`, and initiate
/// (and look at, and reconfigure) a replica set, as mongod's manual lists.
fn localhost_exception(ctx: &Ctx<'_>, command: &str) -> Result<bool> {
    let allowed = matches!(
        command,
        "createUser" | "createRole" | "replSetInitiate" | "replSetGetStatus" | "replSetReconfig"
    );
    if !ctx.connection.peer.ip().is_loopback() || ctx.db != "admin" || !allowed {
        return Ok(false);
    }
    Ok(!users::any_user(ctx.server)?)
}

/// `connectionStatus`'s `authInfo`.
pub fn auth_info(ctx: &Ctx<'_>, show_privileges: bool) -> Result<Document> {
    let user = ctx.connection.session.lock().user.clone();
    let resolved = privileges(ctx.server, ctx.connection)?;
    let users: Vec<Document> = user
        .iter()
        .map(|u| doc! { "user": &u.user, "db": &u.db })
        .collect();
    let roles: Vec<Document> = resolved
        .iter()
        .flat_map(|r| r.roles.iter())
        .map(|(role, db)| doc! { "role": role, "db": db })
        .collect();
    let mut info = doc! { "authenticatedUsers": users, "authenticatedUserRoles": roles };
    if show_privileges {
        let privileges: Vec<Document> = resolved
            .iter()
            .flat_map(|r| r.privileges.iter())
            .map(Privilege::to_document)
            .collect();
        info.insert("authenticatedUserPrivileges", privileges);
    }
    Ok(info)
}
