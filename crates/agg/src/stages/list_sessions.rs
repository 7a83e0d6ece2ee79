//! `$listLocalSessions` and `$listSessions`: the logical sessions of the users asked for.
//! `$listLocalSessions` (`aggregate: 1`) lists the sessions the server holds in memory,
//! through [`crate::Collections::local_sessions`]; `$listSessions`, the first stage of an
//! aggregation of `config.system.sessions`, keeps the documents of that collection that
//! belong to them. `{}` asks for the current user's sessions (every session without
//! access control), `{allUsers: true}` for everyone's, `{users: [{user, db}]}` for
//! those users'; [`crate::Collections::session_owners`] turns that into the users'
//! digests (`_id.uid`).

use crate::pipeline::{DocumentStream, ExecContext, SessionUsers};
use crate::stages::{finished, map_documents};
use basalt_error::{Error, ErrorCode, Result};
use basalt_expr::type_name;
use basalt_value::idl::{self, Kind};
use bson::{Bson, Document};

/// The spec, as mongod's strict `ListSessionsSpec`: `allUsers` (a bool) and `users` (an
/// array of strict `{user, db}`; null as absent, null elements skipped).
pub(crate) fn parse(stage: &str, spec: &Bson) -> Result<SessionUsers> {
    let Bson::Document(options) = spec else {
        return Err(Error::type_mismatch(format!(
            "{stage} options must be specified in an object, but found: {}",
            type_name(Some(spec))
        )));
    };
    idl::check_struct(
        stage,
        options,
        &[("allUsers", Kind::Bool), ("users", Kind::Array)],
        &[],
    )?;
    let listed = options.get_array("users").ok();
    let mut named = Vec::new();
    for (i, user) in listed.into_iter().flatten().enumerate() {
        let user = match user {
            Bson::Null => continue,
            Bson::Document(user) => user,
            other => {
                return Err(Error::type_mismatch(format!(
                    "BSON field '{stage}.users.{i}' is the wrong type '{}', expected type \
                     'object'",
                    type_name(Some(other))
                )))
            }
        };
        idl::check_struct(
            "ListSessionsUser",
            user,
            &[("user", Kind::String), ("db", Kind::String)],
            &["user", "db"],
        )?;
        let field = |name| user.get_str(name).unwrap_or_default().to_string();
        named.push((field("user"), field("db")));
    }
    let all = options.get_bool("allUsers").unwrap_or(false);
    match (all, named.is_empty()) {
        (true, false) => Err(Error::new(
            ErrorCode::UNSUPPORTED_FORMAT,
            format!("{stage}: allUsers and users cannot both be given"),
        )),
        (true, true) => Ok(SessionUsers::All),
        (false, _) if listed.is_some() => Ok(SessionUsers::Listed(named)),
        (false, _) => Ok(SessionUsers::Current),
    }
}

/// Whether a session document's `_id.uid` is one of `owners` (`None`: everyone's).
fn owned(session: &Document, owners: Option<&[Vec<u8>]>) -> bool {
    let Some(owners) = owners else {
        return true;
    };
    let uid = session
        .get_document("_id")
        .ok()
        .and_then(|id| id.get_binary_generic("uid").ok());
    uid.is_some_and(|uid| owners.iter().any(|owner| owner == uid))
}

/// `$listLocalSessions`: the held sessions of `users`.
pub(crate) fn local<'a>(users: &SessionUsers, ctx: ExecContext<'a>) -> DocumentStream<'a> {
    let listed = ctx.collections.session_owners(users).and_then(|owners| {
        let sessions = ctx.collections.local_sessions()?;
        Ok(sessions
            .into_iter()
            .filter(|session| owned(session, owners.as_deref()))
            .collect())
    });
    finished(listed)
}

/// `$listSessions`: the documents of `config.system.sessions` that belong to `users`.
pub(crate) fn stored<'a>(
    users: &SessionUsers,
    input: DocumentStream<'a>,
    ctx: ExecContext<'a>,
) -> DocumentStream<'a> {
    match ctx.collections.session_owners(users) {
        Ok(owners) => map_documents(input, move |session| {
            Ok(owned(&session, owners.as_deref()).then_some(session))
        }),
        Err(e) => finished(Err(e)),
    }
}

#[cfg(test)]
mod tests {
    use crate::pipeline::Pipeline;
    use crate::testing::MemoryCollections;
    use bson::{doc, Bson, Document};

    #[test]
    fn lists_what_the_server_reports_for_the_users_asked() {
        let server = MemoryCollections::new("admin");
        let p = Pipeline::parse(
            &[
                doc! {"$listLocalSessions": {"allUsers": true}},
                doc! {"$project": {"_id": 0, "n": {"$literal": 1}}},
            ],
            None,
        )
        .unwrap();
        let out: Vec<Document> = p
            .stream(Box::new(std::iter::empty()), &server)
            .collect::<basalt_error::Result<_>>()
            .unwrap();
        assert_eq!(out, vec![doc! {"n": 1}]);
        let code = |spec: Bson| {
            Pipeline::parse(&[doc! {"$listLocalSessions": spec}], None)
                .unwrap_err()
                .code
                .0
        };
        assert_eq!(code(Bson::Int32(1)), 14);
        assert_eq!(code(Bson::Document(doc! {"bogus": 1})), 40415);
        assert_eq!(code(Bson::Document(doc! {"allUsers": 1})), 14);
        assert_eq!(code(Bson::Document(doc! {"users": [1]})), 14);
        // The stored sessions of the users asked for: the test server owns only "me".
        let stored = Pipeline::parse(
            &[doc! {"$listSessions": {"users": [{"user": "me", "db": "x"}]}}],
            None,
        )
        .unwrap();
        let sessions = vec![
            Ok(
                doc! {"_id": {"id": 1, "uid": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: b"me".to_vec() }}},
            ),
            Ok(
                doc! {"_id": {"id": 2, "uid": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: b"other".to_vec() }}},
            ),
        ];
        let out: Vec<Document> = stored
            .stream(Box::new(sessions.into_iter()), &server)
            .collect::<basalt_error::Result<_>>()
            .unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(
            out[0].get_document("_id").unwrap().get_i32("id").unwrap(),
            1
        );
    }
}
