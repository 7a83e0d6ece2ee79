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
use basalt_error::{Error, Result};
use basalt_expr::type_name;
use bson::{Bson, Document};

pub(crate) fn parse(stage: &str, spec: &Bson) -> Result<SessionUsers> {
    let Bson::Document(options) = spec else {
        return Err(Error::type_mismatch(format!(
            "{stage} options must be specified in an object, but found: {}",
            type_name(Some(spec))
        )));
    };
    let wrong_type = |name: &str, value: &Bson, expected: &str| {
        Error::type_mismatch(format!(
            "BSON field '{stage}.{name}' is the wrong type '{}', expected type '{expected}'",
            type_name(Some(value))
        ))
    };
    let mut users = SessionUsers::Current;
    for (name, value) in options {
        match (name.as_str(), value) {
            ("allUsers", Bson::Boolean(all)) => {
                if *all {
                    users = SessionUsers::All;
                }
            }
            ("allUsers", _) => return Err(wrong_type(name, value, "bool")),
            ("users", Bson::Array(listed)) => {
                let mut named = Vec::with_capacity(listed.len());
                for user in listed {
                    let pair = match user {
                        Bson::Document(user) => user
                            .get_str("user")
                            .ok()
                            .zip(user.get_str("db").ok())
                            .map(|(u, d)| (u.to_string(), d.to_string())),
                        _ => None,
                    };
                    named.push(
                        pair.ok_or_else(|| wrong_type("users", value, "array of {user, db}"))?,
                    );
                }
                users = SessionUsers::Listed(named);
            }
            ("users", _) => return Err(wrong_type(name, value, "array")),
            _ => {
                return Err(Error::location(
                    40415,
                    format!("BSON field '{stage}.{name}' is an unknown field."),
                ))
            }
        }
    }
    if matches!(users, SessionUsers::All) && options.contains_key("users") {
        return Err(Error::bad_value(format!(
            "{stage}: allUsers and users cannot both be given"
        )));
    }
    Ok(users)
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
