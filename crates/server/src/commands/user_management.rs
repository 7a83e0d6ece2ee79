//! User and role management: `createUser`, `updateUser`, `dropUser`,
//! `dropAllUsersFromDatabase`, `usersInfo`, `grantRolesToUser`, `revokeRolesFromUser`,
//! `createRole`, `updateRole`, `dropRole`, `dropAllRolesFromDatabase`, `rolesInfo`,
//! `grantPrivilegesToRole`, `revokePrivilegesFromRole`, `grantRolesToRole`,
//! `revokeRolesFromRole`.
//!
//! Users and roles are documents of `admin.system.users` and `admin.system.roles` in
//! MongoDB's shapes, written by the server as its own writes (`run_internal`), so on a
//! replica set they go through the log and every member authenticates the same users.
//! Credentials are derived here, once per password; the password itself is not kept.

use super::{run_internal, Ctx};
use crate::security::users::{
    find_role, find_user, resolve_roles, role_exists, role_names, role_not_found,
    stored_privileges, ADMIN, ROLES, USERS,
};
use crate::security::{self, UserName};
use basalt_auth::privileges::{builtin_privileges, builtin_roles, is_builtin, merge, RoleName};
use basalt_auth::{Action, Credentials, Mechanism, Privilege, Resource};
use basalt_error::{Error, ErrorCode, Result};
use bson::{doc, Bson, Document};

/// The name a command is about: its first field, a non-empty string.
fn subject(body: &Document, command: &str) -> Result<String> {
    match body.get(command) {
        Some(Bson::String(name)) if !name.is_empty() => Ok(name.clone()),
        Some(Bson::String(_)) => Err(Error::bad_value(format!(
            "{command} needs a non-empty name"
        ))),
        _ => Err(Error::type_mismatch(format!(
            "\"{command}\" must be a string"
        ))),
    }
}

/// The command's write concern, passed on to its writes.
fn with_write_concern(body: &Document, mut write: Document) -> Document {
    if let Ok(concern) = body.get_document("writeConcern") {
        write.insert("writeConcern", concern.clone());
    }
    write
}

fn role_documents(roles: &[RoleName]) -> Vec<Document> {
    roles
        .iter()
        .map(|(role, db)| doc! { "role": role, "db": db })
        .collect()
}

/// The `roles` a command gives: an array of existing roles (RoleNotFound otherwise).
fn given_roles(ctx: &Ctx<'_>, body: &Document, command: &str) -> Result<Vec<RoleName>> {
    if !matches!(body.get("roles"), Some(Bson::Array(_))) {
        return Err(Error::bad_value(format!(
            "\"{command}\" command requires a \"roles\" array"
        )));
    }
    let roles = role_names(body.get("roles"), ctx.db)?;
    for (role, db) in &roles {
        if !role_exists(ctx.server, role, db)? {
            return Err(role_not_found(role, db));
        }
    }
    Ok(roles)
}

/// The mechanisms a user gets: those named (a subset of SCRAM's), else both.
fn mechanisms(body: &Document) -> Result<Vec<Mechanism>> {
    match body.get("mechanisms") {
        None => Ok(Mechanism::ALL.to_vec()),
        Some(Bson::Array(names)) if !names.is_empty() => names
            .iter()
            .map(|name| {
                name.as_str()
                    .and_then(Mechanism::from_name)
                    .ok_or_else(|| Error::bad_value(format!("Unknown auth mechanism '{name}'")))
            })
            .collect(),
        Some(_) => Err(Error::bad_value(
            "mechanisms field must be a non-empty array of strings",
        )),
    }
}

fn credentials(user: &str, password: &str, mechanisms: &[Mechanism]) -> Result<Document> {
    if password.is_empty() {
        return Err(Error::bad_value("Password cannot be empty"));
    }
    let mut credentials = Document::new();
    for m in mechanisms {
        credentials.insert(
            m.name(),
            Credentials::derive(*m, user, password)?.to_document(),
        );
    }
    Ok(credentials)
}

fn password(body: &Document) -> Result<Option<&str>> {
    match body.get("pwd") {
        None => Ok(None),
        Some(Bson::String(pwd)) => Ok(Some(pwd)),
        Some(_) => Err(Error::type_mismatch("\"pwd\" must be a string")),
    }
}

fn not_found(user: &UserName) -> Error {
    Error::new(
        ErrorCode::USER_NOT_FOUND,
        format!("Could not find user \"{user}\""),
    )
}

pub fn create_user(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let name = subject(body, "createUser")?;
    if ctx.db == "local" {
        return Err(Error::bad_value(
            "Cannot create users in the local database",
        ));
    }
    let external = ctx.db == super::sasl::EXTERNAL;
    let credentials = match (password(body)?, external) {
        (Some(_), true) => {
            return Err(Error::bad_value(
                "Cannot set the password for users defined on the '$external' database",
            ))
        }
        (None, true) => doc! { "external": true },
        (Some(pwd), false) => credentials(&name, pwd, &mechanisms(body)?)?,
        (None, false) => {
            return Err(Error::bad_value(
                "Must provide a 'pwd' field for all user documents, except those with \
                 '$external' as the user's source db",
            ))
        }
    };
    let roles = given_roles(ctx, body, "createUser")?;
    let user = UserName::new(&name, ctx.db);
    let mut document = doc! {
        "_id": format!("{}.{}", user.db, user.user),
        "userId": bson::Binary::from_uuid(bson::Uuid::new()),
        "user": &user.user,
        "db": &user.db,
        "credentials": credentials,
        "roles": role_documents(&roles),
    };
    for field in ["customData", "authenticationRestrictions"] {
        if let Some(value) = body.get(field) {
            document.insert(field, value.clone());
        }
    }
    let insert = doc! { "insert": USERS, "documents": [document] };
    match run_internal(ctx.server, ADMIN, with_write_concern(body, insert)) {
        Err(e) if e.code == ErrorCode::DUPLICATE_KEY => Err(Error::location(
            51003,
            format!("User \"{user}\" already exists"),
        )),
        other => other.map(|_| Document::new()),
    }
}

/// Replaces a stored user or role document by its `_id`.
fn replace(ctx: &Ctx<'_>, body: &Document, collection: &str, document: Document) -> Result<()> {
    let id = document.get("_id").cloned().unwrap_or(Bson::Null);
    let update = doc! { "update": collection, "updates": [{ "q": { "_id": id }, "u": document }] };
    run_internal(ctx.server, ADMIN, with_write_concern(body, update)).map(drop)
}

fn require(ctx: &Ctx<'_>, body: &Document, resource: &Resource, action: Action) -> Result<()> {
    if security::allows(ctx, resource, action)? {
        Ok(())
    } else {
        Err(security::not_authorized(ctx.db, body))
    }
}

pub fn update_user(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let name = subject(body, "updateUser")?;
    let user = UserName::new(&name, ctx.db);
    let own = ctx.connection.session.lock().user() == Some(&user);
    let database = Resource::database(ctx.db);
    let updates = [
        "pwd",
        "customData",
        "roles",
        "mechanisms",
        "authenticationRestrictions",
    ];
    if !updates.iter().any(|f| body.contains_key(*f)) {
        return Err(Error::bad_value(
            "Must specify at least one field to update in updateUser",
        ));
    }
    // What each change needs (the command's own check, as mongod's updateUser does).
    if body.contains_key("pwd") || body.contains_key("mechanisms") {
        let own_allowed = own && security::allows(ctx, &database, Action::ChangeOwnPassword)?;
        if !own_allowed {
            require(ctx, body, &database, Action::ChangePassword)?;
        }
    }
    if body.contains_key("customData") {
        let own_allowed = own && security::allows(ctx, &database, Action::ChangeOwnCustomData)?;
        if !own_allowed {
            require(ctx, body, &database, Action::ChangeCustomData)?;
        }
    }
    if body.contains_key("authenticationRestrictions") {
        require(ctx, body, &database, Action::SetAuthenticationRestriction)?;
    }
    let mut document = find_user(ctx.server, &user)?.ok_or_else(|| not_found(&user))?;
    if body.contains_key("roles") {
        let roles = given_roles(ctx, body, "updateUser")?;
        require(ctx, body, &database, Action::RevokeRole)?;
        for (_, role_db) in &roles {
            require(ctx, body, &Resource::database(role_db), Action::GrantRole)?;
        }
        document.insert("roles", role_documents(&roles));
    }
    let mechanisms = match body.get("mechanisms") {
        Some(_) => mechanisms(body)?,
        None => document
            .get_document("credentials")
            .map(|c| c.keys().filter_map(|k| Mechanism::from_name(k)).collect())
            .unwrap_or_else(|_| Mechanism::ALL.to_vec()),
    };
    match password(body)? {
        Some(pwd) => {
            document.insert("credentials", credentials(&name, pwd, &mechanisms)?);
        }
        None if body.contains_key("mechanisms") => {
            // Without a new password, mechanisms can only be narrowed.
            let mut kept = Document::new();
            let stored = document
                .get_document("credentials")
                .cloned()
                .unwrap_or_default();
            for m in &mechanisms {
                let Ok(c) = stored.get_document(m.name()) else {
                    return Err(Error::bad_value(
                        "mechanisms field must be a subset of previously set mechanisms",
                    ));
                };
                kept.insert(m.name(), c.clone());
            }
            document.insert("credentials", kept);
        }
        None => {}
    }
    for field in ["customData", "authenticationRestrictions"] {
        if let Some(value) = body.get(field) {
            document.insert(field, value.clone());
        }
    }
    replace(ctx, body, USERS, document)?;
    Ok(Document::new())
}

pub fn drop_user(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let user = UserName::new(&subject(body, "dropUser")?, ctx.db);
    let delete = doc! {
        "delete": USERS,
        "deletes": [{ "q": { "_id": format!("{}.{}", user.db, user.user) }, "limit": 1 }],
    };
    let reply = run_internal(ctx.server, ADMIN, with_write_concern(body, delete))?;
    if reply.get("n").and_then(basalt_value::as_i64) == Some(0) {
        return Err(not_found(&user));
    }
    Ok(Document::new())
}

pub fn drop_all_users_from_database(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let delete = doc! { "delete": USERS, "deletes": [{ "q": { "db": ctx.db }, "limit": 0 }] };
    let reply = run_internal(ctx.server, ADMIN, with_write_concern(body, delete))?;
    Ok(doc! { "n": reply.get("n").cloned().unwrap_or(Bson::Int32(0)) })
}

/// Adds or removes roles of a user (`grantRolesToUser`, `revokeRolesFromUser`).
fn change_user_roles(
    ctx: &Ctx<'_>,
    body: &Document,
    command: &str,
    grant: bool,
) -> Result<Document> {
    let user = UserName::new(&subject(body, command)?, ctx.db);
    let changed = given_roles(ctx, body, command)?;
    let mut document = find_user(ctx.server, &user)?.ok_or_else(|| not_found(&user))?;
    let mut roles = role_names(document.get("roles"), &user.db)?;
    edit_roles(&mut roles, changed, grant);
    document.insert("roles", role_documents(&roles));
    replace(ctx, body, USERS, document)?;
    Ok(Document::new())
}

/// Adds the `changed` roles a list lacks (`grant`), or takes them out.
fn edit_roles(roles: &mut Vec<RoleName>, changed: Vec<RoleName>, grant: bool) {
    for role in changed {
        if !grant {
            roles.retain(|r| *r != role);
        } else if !roles.contains(&role) {
            roles.push(role);
        }
    }
}

pub fn grant_roles_to_user(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    change_user_roles(ctx, body, "grantRolesToUser", true)
}

pub fn revoke_roles_from_user(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    change_user_roles(ctx, body, "revokeRolesFromUser", false)
}

/// `usersInfo`'s targets: `None` for every user of the database (or of all of them).
fn user_targets(ctx: &Ctx<'_>, value: &Bson) -> Result<Option<Vec<UserName>>> {
    let one = |v: &Bson| -> Result<UserName> {
        match v {
            Bson::String(user) => Ok(UserName::new(user, ctx.db)),
            Bson::Document(d) => match (d.get_str("user"), d.get_str("db")) {
                (Ok(user), Ok(db)) => Ok(UserName::new(user, db)),
                _ => Err(Error::bad_value(
                    "User name must contain 'user' and 'db' fields",
                )),
            },
            _ => Err(Error::bad_value(
                "User name must be either a string or an object",
            )),
        }
    };
    match value {
        v if basalt_value::as_i64(v) == Some(1) => Ok(None),
        Bson::Document(d) if d.get_bool("forAllDBs").unwrap_or(false) => Ok(None),
        Bson::Array(list) => list.iter().map(one).collect::<Result<_>>().map(Some),
        other => one(other).map(|u| Some(vec![u])),
    }
}

pub fn users_info(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let value = body.get("usersInfo").cloned().unwrap_or(Bson::Null);
    let all_dbs = matches!(&value, Bson::Document(d) if d.get_bool("forAllDBs").unwrap_or(false));
    let targets = user_targets(ctx, &value)?;
    // A user may always see itself; anything else needs viewUser where it looks.
    let me = ctx.connection.session.lock().user().cloned();
    let only_me = matches!(&targets, Some(t) if t.iter().all(|u| Some(u) == me.as_ref()));
    if !only_me {
        let wanted: Vec<Resource> = match (&targets, all_dbs) {
            (_, true) => vec![Resource::namespace("", "")],
            (None, false) => vec![Resource::database(ctx.db)],
            (Some(targets), false) => targets.iter().map(|u| Resource::database(&u.db)).collect(),
        };
        for resource in wanted {
            require(ctx, body, &resource, Action::ViewUser)?;
        }
    }
    let mut filter = match &targets {
        None if all_dbs => Document::new(),
        None => doc! { "db": ctx.db },
        Some(targets) => {
            let ids: Vec<String> = targets
                .iter()
                .map(|u| format!("{}.{}", u.db, u.user))
                .collect();
            doc! { "_id": { "$in": ids } }
        }
    };
    if let Ok(extra) = body.get_document("filter") {
        filter = doc! { "$and": [filter, extra.clone()] };
    }
    let show_credentials = body.get_bool("showCredentials").unwrap_or(false);
    let show_privileges = body.get_bool("showPrivileges").unwrap_or(false);
    let show_restrictions = body
        .get_bool("showAuthenticationRestrictions")
        .unwrap_or(false);
    let mut found = crate::commands::find_internal(ctx.server, ADMIN, USERS, filter)?;
    found.sort_by(|a, b| {
        a.get_str("_id")
            .unwrap_or("")
            .cmp(b.get_str("_id").unwrap_or(""))
    });
    let mut out = Vec::new();
    for mut user in found {
        let credentials = user.remove("credentials").and_then(|c| match c {
            Bson::Document(c) => Some(c),
            _ => None,
        });
        let mechanisms: Vec<&str> = credentials
            .iter()
            .flat_map(|c| c.keys())
            .filter_map(|k| Mechanism::from_name(k).map(Mechanism::name))
            .collect();
        user.insert("mechanisms", mechanisms);
        if show_credentials {
            user.insert("credentials", credentials.unwrap_or_default());
        }
        let restrictions = user.remove("authenticationRestrictions");
        if show_restrictions || show_privileges {
            user.insert(
                "authenticationRestrictions",
                restrictions.unwrap_or(Bson::Array(Vec::new())),
            );
        }
        if show_privileges {
            let db = user.get_str("db").unwrap_or("").to_string();
            let roles = role_names(user.get("roles"), &db)?;
            let (inherited, privileges) = resolve_roles(ctx.server, &roles)?;
            let mut all = roles.clone();
            all.extend(inherited.into_iter().filter(|r| !roles.contains(r)));
            user.insert("inheritedRoles", role_documents(&all));
            let privileges: Vec<Document> = privileges.iter().map(Privilege::to_document).collect();
            user.insert("inheritedPrivileges", privileges);
            user.insert("inheritedAuthenticationRestrictions", Vec::<Bson>::new());
        }
        out.push(Bson::Document(user));
    }
    Ok(doc! { "users": out })
}

/// The privileges a command gives a role, checked: a role outside `admin` may only have
/// privileges on its own database.
fn given_privileges(ctx: &Ctx<'_>, body: &Document, command: &str) -> Result<Vec<Privilege>> {
    let Ok(list) = body.get_array("privileges") else {
        return Err(Error::bad_value(format!(
            "\"{command}\" command requires a \"privileges\" array"
        )));
    };
    let mut privileges = Vec::new();
    for item in list {
        let document = item
            .as_document()
            .ok_or_else(|| Error::failed_to_parse("each privilege must be a document"))?;
        let privilege = Privilege::from_document(document)?;
        let own_db = matches!(&privilege.resource, Resource::Namespace { db, .. } if db == ctx.db);
        if ctx.db != ADMIN && !own_db {
            return Err(Error::bad_value(format!(
                "Roles on the '{}' database cannot be granted privileges that target other \
                 databases or the cluster",
                ctx.db
            )));
        }
        merge(&mut privileges, privilege);
    }
    Ok(privileges)
}

fn privilege_documents(privileges: &[Privilege]) -> Vec<Document> {
    privileges.iter().map(Privilege::to_document).collect()
}

/// Refuses a change that would make `role` inherit itself.
fn check_no_cycle(ctx: &Ctx<'_>, role: &RoleName, parents: &[RoleName]) -> Result<()> {
    let (reached, _) = resolve_roles(ctx.server, parents)?;
    if parents.contains(role) || reached.contains(role) {
        return Err(Error::new(
            ErrorCode::INVALID_ROLE_MODIFICATION,
            format!(
                "Granting roles to {}@{} would introduce a cycle in the role graph",
                role.0, role.1
            ),
        ));
    }
    Ok(())
}

pub fn create_role(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let name = subject(body, "createRole")?;
    if is_builtin(&name, ctx.db) || builtin_privileges(&name, ADMIN).is_some() {
        return Err(Error::bad_value(
            "Cannot create roles with the same name as a built-in role",
        ));
    }
    let privileges = given_privileges(ctx, body, "createRole")?;
    let roles = given_roles(ctx, body, "createRole")?;
    let role = (name.clone(), ctx.db.to_string());
    check_no_cycle(ctx, &role, &roles)?;
    let mut document = doc! {
        "_id": format!("{}.{name}", ctx.db),
        "role": &name,
        "db": ctx.db,
        "privileges": privilege_documents(&privileges),
        "roles": role_documents(&roles),
    };
    if let Some(restrictions) = body.get("authenticationRestrictions") {
        document.insert("authenticationRestrictions", restrictions.clone());
    }
    let insert = doc! { "insert": ROLES, "documents": [document] };
    match run_internal(ctx.server, ADMIN, with_write_concern(body, insert)) {
        Err(e) if e.code == ErrorCode::DUPLICATE_KEY => Err(Error::location(
            51002,
            format!("Role \"{name}@{}\" already exists", ctx.db),
        )),
        other => other.map(|_| Document::new()),
    }
}

/// The stored document of a role a command changes: not a built-in one
/// (InvalidRoleModification), and one that exists (RoleNotFound).
fn changeable_role(ctx: &Ctx<'_>, body: &Document, command: &str, verb: &str) -> Result<Document> {
    let name = subject(body, command)?;
    if is_builtin(&name, ctx.db) {
        return Err(Error::new(
            ErrorCode::INVALID_ROLE_MODIFICATION,
            format!("Cannot {verb} built-in role: {name}@{}", ctx.db),
        ));
    }
    find_role(ctx.server, &name, ctx.db)?.ok_or_else(|| role_not_found(&name, ctx.db))
}

pub fn update_role(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let mut document = changeable_role(ctx, body, "updateRole", "update")?;
    if !body.contains_key("privileges") && !body.contains_key("roles") {
        return Err(Error::bad_value(
            "Must specify at least one field to update in updateRole",
        ));
    }
    if body.contains_key("privileges") {
        let privileges = given_privileges(ctx, body, "updateRole")?;
        document.insert("privileges", privilege_documents(&privileges));
    }
    if body.contains_key("roles") {
        let roles = given_roles(ctx, body, "updateRole")?;
        let role = (subject(body, "updateRole")?, ctx.db.to_string());
        check_no_cycle(ctx, &role, &roles)?;
        document.insert("roles", role_documents(&roles));
    }
    replace(ctx, body, ROLES, document)?;
    Ok(Document::new())
}

pub fn drop_role(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let document = changeable_role(ctx, body, "dropRole", "drop")?;
    drop_roles(
        ctx,
        body,
        doc! { "_id": document.get("_id").cloned().unwrap_or(Bson::Null) },
    )?;
    Ok(Document::new())
}

pub fn drop_all_roles_from_database(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let n = drop_roles(ctx, body, doc! { "db": ctx.db })?;
    Ok(doc! { "n": n })
}

/// Deletes the roles `filter` matches and takes them out of every user and role that
/// had them, as mongod does. Returns how many were deleted.
fn drop_roles(ctx: &Ctx<'_>, body: &Document, filter: Document) -> Result<i64> {
    let dropped = crate::commands::find_internal(ctx.server, ADMIN, ROLES, filter.clone())?;
    let delete = doc! { "delete": ROLES, "deletes": [{ "q": filter, "limit": 0 }] };
    let reply = run_internal(ctx.server, ADMIN, with_write_concern(body, delete))?;
    for role in &dropped {
        let reference = doc! {
            "role": role.get_str("role").unwrap_or(""),
            "db": role.get_str("db").unwrap_or(""),
        };
        for collection in [USERS, ROLES] {
            let pull = doc! {
                "update": collection,
                "updates": [{
                    "q": { "roles": reference.clone() },
                    "u": { "$pull": { "roles": reference.clone() } },
                    "multi": true,
                }],
            };
            run_internal(ctx.server, ADMIN, with_write_concern(body, pull))?;
        }
    }
    Ok(reply.get("n").and_then(basalt_value::as_i64).unwrap_or(0))
}

/// `grantPrivilegesToRole`/`revokePrivilegesFromRole`.
fn change_role_privileges(
    ctx: &Ctx<'_>,
    body: &Document,
    command: &str,
    grant: bool,
) -> Result<Document> {
    let verb = if grant {
        "grant privileges to"
    } else {
        "revoke privileges from"
    };
    let mut document = changeable_role(ctx, body, command, verb)?;
    let changed = given_privileges(ctx, body, command)?;
    let mut privileges = stored_privileges(&document)?;
    for change in changed {
        if grant {
            merge(&mut privileges, change);
        } else if let Some(existing) = privileges
            .iter_mut()
            .find(|p| p.resource == change.resource)
        {
            existing.actions = existing.actions.without(change.actions);
        }
    }
    privileges.retain(|p| !p.actions.is_empty());
    document.insert("privileges", privilege_documents(&privileges));
    replace(ctx, body, ROLES, document)?;
    Ok(Document::new())
}

pub fn grant_privileges_to_role(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    change_role_privileges(ctx, body, "grantPrivilegesToRole", true)
}

pub fn revoke_privileges_from_role(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    change_role_privileges(ctx, body, "revokePrivilegesFromRole", false)
}

/// `grantRolesToRole`/`revokeRolesFromRole`.
fn change_role_roles(
    ctx: &Ctx<'_>,
    body: &Document,
    command: &str,
    grant: bool,
) -> Result<Document> {
    let verb = if grant {
        "grant roles to"
    } else {
        "revoke roles from"
    };
    let mut document = changeable_role(ctx, body, command, verb)?;
    let changed = given_roles(ctx, body, command)?;
    let mut roles = role_names(document.get("roles"), ctx.db)?;
    edit_roles(&mut roles, changed, grant);
    if grant {
        check_no_cycle(ctx, &(subject(body, command)?, ctx.db.to_string()), &roles)?;
    }
    document.insert("roles", role_documents(&roles));
    replace(ctx, body, ROLES, document)?;
    Ok(Document::new())
}

pub fn grant_roles_to_role(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    change_role_roles(ctx, body, "grantRolesToRole", true)
}

pub fn revoke_roles_from_role(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    change_role_roles(ctx, body, "revokeRolesFromRole", false)
}

/// One role as `rolesInfo` shows it.
fn role_info(
    ctx: &Ctx<'_>,
    role: &str,
    db: &str,
    show_privileges: bool,
) -> Result<Option<Document>> {
    let (direct, own_privileges) = if let Some(privileges) = builtin_privileges(role, db) {
        (Vec::new(), privileges)
    } else {
        match find_role(ctx.server, role, db)? {
            None => return Ok(None),
            Some(document) => (
                role_names(document.get("roles"), db)?,
                stored_privileges(&document)?,
            ),
        }
    };
    let (inherited, inherited_privileges) = resolve_roles(ctx.server, &direct)?;
    let mut all_inherited = direct.clone();
    all_inherited.extend(inherited.into_iter().filter(|r| !direct.contains(r)));
    let mut info = doc! {
        "_id": format!("{db}.{role}"),
        "role": role,
        "db": db,
        "isBuiltin": is_builtin(role, db),
        "roles": role_documents(&direct),
        "inheritedRoles": role_documents(&all_inherited),
    };
    if show_privileges {
        let mut all = own_privileges.clone();
        for p in inherited_privileges {
            merge(&mut all, p);
        }
        info.insert("privileges", privilege_documents(&own_privileges));
        info.insert("inheritedPrivileges", privilege_documents(&all));
    }
    Ok(Some(info))
}

pub fn roles_info(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let value = body.get("rolesInfo").cloned().unwrap_or(Bson::Null);
    let show_privileges = matches!(
        body.get("showPrivileges"),
        Some(Bson::Boolean(true)) | Some(Bson::String(_))
    );
    let targets: Option<Vec<RoleName>> = match &value {
        v if basalt_value::as_i64(v) == Some(1) => None,
        Bson::Array(list) => Some(
            list.iter()
                .map(|r| basalt_auth::privileges::role_name(r, ctx.db))
                .collect::<Result<_>>()?,
        ),
        other => Some(vec![basalt_auth::privileges::role_name(other, ctx.db)?]),
    };
    // A user may see its own roles; anything else needs viewRole where it looks.
    let own = security::privileges(ctx.server, ctx.connection)?;
    let mine = |role: &RoleName| {
        own.as_ref()
            .is_some_and(|r| r.roles.contains(role) || r.inherited.contains(role))
    };
    let dbs: Vec<String> = match &targets {
        None => vec![ctx.db.to_string()],
        Some(targets) => targets
            .iter()
            .filter(|r| !mine(r))
            .map(|(_, db)| db.clone())
            .collect(),
    };
    for db in dbs {
        require(ctx, body, &Resource::database(&db), Action::ViewRole)?;
    }
    let names: Vec<RoleName> = match targets {
        Some(targets) => targets,
        None => {
            let mut names: Vec<RoleName> = Vec::new();
            if body.get_bool("showBuiltinRoles").unwrap_or(false) {
                names.extend(
                    builtin_roles(ctx.db)
                        .into_iter()
                        .map(|r| (r.to_string(), ctx.db.to_string())),
                );
            }
            let stored =
                crate::commands::find_internal(ctx.server, ADMIN, ROLES, doc! { "db": ctx.db })?;
            names.extend(
                stored.iter().filter_map(|d| {
                    Some((d.get_str("role").ok()?.to_string(), ctx.db.to_string()))
                }),
            );
            names
        }
    };
    let mut roles = Vec::new();
    for (role, db) in names {
        if let Some(info) = role_info(ctx, &role, &db, show_privileges)? {
            roles.push(Bson::Document(info));
        }
    }
    Ok(doc! { "roles": roles })
}
