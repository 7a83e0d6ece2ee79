//! Users and roles as stored: `admin.system.users` (`_id: "db.user"`) and
//! `admin.system.roles` (`_id: "db.role"`), in MongoDB's document shapes, and the
//! resolution of a user's roles, through the roles they inherit, into privileges.

use super::UserName;
use crate::commands::find_internal;
use crate::Server;
use basalt_auth::privileges::{self, builtin_privileges, is_builtin, merge, RoleName};
use basalt_auth::{Action, Privilege, Resource};
use basalt_error::{Error, ErrorCode, Result};
use bson::{doc, Bson, Document};
use std::net::IpAddr;
use std::sync::Arc;

pub const USERS: &str = "system.users";
pub const ROLES: &str = "system.roles";
pub const ADMIN: &str = "admin";

/// What a user may do: every role it has (directly or inherited) and their privileges.
#[derive(Debug, Default)]
pub struct Resolved {
    /// The user's own roles, as `(role, db)`.
    pub roles: Vec<RoleName>,
    /// Roles reached through other roles.
    pub inherited: Vec<RoleName>,
    pub privileges: Vec<Privilege>,
}

impl Resolved {
    /// The internal user's: every action on every resource.
    pub fn internal() -> Resolved {
        Resolved {
            roles: vec![("__system".into(), ADMIN.into())],
            inherited: vec![("__system".into(), ADMIN.into())],
            privileges: builtin_privileges("__system", ADMIN).unwrap_or_default(),
        }
    }

    pub fn allows(&self, resource: &Resource, action: Action) -> bool {
        privileges::allows(&self.privileges, resource, action)
    }
}

/// The stored document of `user`, if it exists.
pub fn find_user(server: &Arc<Server>, user: &UserName) -> Result<Option<Document>> {
    let id = format!("{}.{}", user.db, user.user);
    Ok(find_internal(server, ADMIN, USERS, doc! { "_id": id })?
        .into_iter()
        .next())
}

/// Whether any user exists (the localhost exception closes once one does).
pub fn any_user(server: &Arc<Server>) -> Result<bool> {
    if server.catalog.get(ADMIN, USERS).is_none() {
        return Ok(false);
    }
    let reply = crate::commands::run_internal(
        server,
        ADMIN,
        doc! { "count": USERS, "limit": 1, "$readPreference": { "mode": "primaryPreferred" } },
    )?;
    Ok(reply.get("n").and_then(basalt_value::as_i64).unwrap_or(0) > 0)
}

/// The stored document of a user-defined role.
pub fn find_role(server: &Arc<Server>, role: &str, db: &str) -> Result<Option<Document>> {
    let id = format!("{db}.{role}");
    Ok(find_internal(server, ADMIN, ROLES, doc! { "_id": id })?
        .into_iter()
        .next())
}

/// Whether `(role, db)` exists, built in or defined.
pub fn role_exists(server: &Arc<Server>, role: &str, db: &str) -> Result<bool> {
    Ok(is_builtin(role, db) || find_role(server, role, db)?.is_some())
}

/// The `(role, db)` pairs of a `roles` array (in a user or role document).
pub fn role_names(roles: Option<&Bson>, default_db: &str) -> Result<Vec<RoleName>> {
    match roles {
        None => Ok(Vec::new()),
        Some(Bson::Array(roles)) => roles
            .iter()
            .map(|r| privileges::role_name(r, default_db))
            .collect(),
        Some(_) => Err(Error::type_mismatch("roles must be an array")),
    }
}

/// RoleNotFound for a role that does not exist, as MongoDB words it.
pub fn role_not_found(role: &str, db: &str) -> Error {
    Error::new(
        ErrorCode::ROLE_NOT_FOUND,
        format!("Could not find role: {role}@{db}"),
    )
}

/// The roles reachable from `roots` (themselves excluded unless reached again), and the
/// privileges of all of them. A role that no longer exists grants nothing.
pub fn resolve_roles(
    server: &Arc<Server>,
    roots: &[RoleName],
) -> Result<(Vec<RoleName>, Vec<Privilege>)> {
    let mut seen: Vec<RoleName> = Vec::new();
    let mut inherited = Vec::new();
    let mut privileges = Vec::new();
    let mut pending: Vec<(RoleName, bool)> = roots.iter().cloned().map(|r| (r, true)).collect();
    while let Some(((role, db), root)) = pending.pop() {
        if !root && !inherited.contains(&(role.clone(), db.clone())) {
            inherited.push((role.clone(), db.clone()));
        }
        if seen.contains(&(role.clone(), db.clone())) {
            continue;
        }
        seen.push((role.clone(), db.clone()));
        if let Some(builtin) = builtin_privileges(&role, &db) {
            for p in builtin {
                merge(&mut privileges, p);
            }
            continue;
        }
        let Some(document) = find_role(server, &role, &db)? else {
            continue;
        };
        for p in stored_privileges(&document)? {
            merge(&mut privileges, p);
        }
        for parent in role_names(document.get("roles"), &db)? {
            pending.push((parent, false));
        }
    }
    Ok((inherited, privileges))
}

/// The privileges a stored role document lists.
pub fn stored_privileges(document: &Document) -> Result<Vec<Privilege>> {
    match document.get_array("privileges") {
        Ok(list) => list
            .iter()
            .filter_map(Bson::as_document)
            .map(Privilege::from_document)
            .collect(),
        Err(_) => Ok(Vec::new()),
    }
}

/// What `user` may do now; a user that no longer exists may do nothing.
pub fn resolve_user(server: &Arc<Server>, user: &UserName) -> Result<Resolved> {
    let Some(document) = find_user(server, user)? else {
        return Ok(Resolved::default());
    };
    let roles = role_names(document.get("roles"), &user.db)?;
    let (inherited, privileges) = resolve_roles(server, &roles)?;
    Ok(Resolved {
        roles,
        inherited,
        privileges,
    })
}

/// Whether a user's `authenticationRestrictions` (and those of the roles it has, as
/// `resolve_roles` reaches them) let it in from `client` to `server`: every document of
/// a list must be met by one of its entries, each entry's `clientSource` and
/// `serverAddress` naming addresses or CIDR ranges, as mongod checks them.
pub fn restrictions_allow(
    server: &Arc<Server>,
    user: &Document,
    client: IpAddr,
    local: Option<IpAddr>,
) -> Result<bool> {
    let db = user.get_str("db").unwrap_or("");
    let mut lists = vec![user.get_array("authenticationRestrictions").ok().cloned()];
    let roles = role_names(user.get("roles"), db)?;
    let (inherited, _) = resolve_roles(server, &roles)?;
    for (role, role_db) in roles.iter().chain(&inherited) {
        if let Some(document) = find_role(server, role, role_db)? {
            lists.push(
                document
                    .get_array("authenticationRestrictions")
                    .ok()
                    .cloned(),
            );
        }
    }
    Ok(lists
        .into_iter()
        .flatten()
        .all(|list| list.is_empty() || list.iter().any(|entry| entry_allows(entry, client, local))))
}

/// One restriction: each of its fields (when present) names the address.
fn entry_allows(entry: &Bson, client: IpAddr, local: Option<IpAddr>) -> bool {
    let Some(entry) = entry.as_document() else {
        return false;
    };
    let matches = |field: &str, address: Option<IpAddr>| match entry.get_array(field) {
        Err(_) => true,
        Ok(ranges) => address.is_some_and(|address| {
            ranges
                .iter()
                .filter_map(Bson::as_str)
                .any(|range| in_range(range, address))
        }),
    };
    matches("clientSource", Some(client)) && matches("serverAddress", local)
}

/// Whether `address` is `range`: an address, or a CIDR block (`10.0.0.0/8`).
fn in_range(range: &str, address: IpAddr) -> bool {
    let (base, bits) = match range.split_once('/') {
        Some((base, bits)) => (base, bits.parse::<u32>().ok()),
        None => (range, None),
    };
    let Ok(base) = base.parse::<IpAddr>() else {
        return false;
    };
    match (base, address) {
        (IpAddr::V4(base), IpAddr::V4(address)) => {
            let bits = bits.unwrap_or(32).min(32);
            let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
            u32::from(base) & mask == u32::from(address) & mask
        }
        (IpAddr::V6(base), IpAddr::V6(address)) => {
            let bits = bits.unwrap_or(128).min(128);
            let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
            u128::from(base) & mask == u128::from(address) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_cidr_ranges() {
        let address: IpAddr = "10.1.2.3".parse().unwrap();
        assert!(in_range("10.0.0.0/8", address));
        assert!(in_range("10.1.2.3", address));
        assert!(!in_range("10.1.2.4", address));
        assert!(!in_range("192.168.0.0/16", address));
        assert!(in_range("0.0.0.0/0", address));
        assert!(in_range("::1/128", "::1".parse().unwrap()));
        assert!(!in_range("not an address", address));
        let entry = bson::bson!({ "clientSource": ["127.0.0.1"], "serverAddress": ["10.0.0.0/8"] });
        let local: IpAddr = "127.0.0.1".parse().unwrap();
        assert!(entry_allows(&entry, local, Some(address)));
        assert!(!entry_allows(&entry, local, Some(local)));
    }
}
