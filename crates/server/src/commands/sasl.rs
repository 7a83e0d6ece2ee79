//! Authentication: `saslStart`/`saslContinue` with SCRAM-SHA-1 and SCRAM-SHA-256 (also
//! started inside `hello` as `speculativeAuthenticate`), `authenticate` (only for the
//! mechanisms MongoDB runs through it) and `logout`.
//!
//! As mongod, a failure says only "Authentication failed." (AuthenticationFailed, 18),
//! whatever was wrong (no such user, wrong password, tampered proof), and is logged with
//! the user, mechanism and client address, never the payload.

use super::Ctx;
use crate::security::users::{find_user, restrictions_allow};
use crate::security::{self, Conversation, UserName};
use basalt_auth::scram::{ClientFirst, ServerConversation, AUTHENTICATION_FAILED};
use basalt_auth::Mechanism;
use basalt_error::{Error, ErrorCode, Result};
use bson::{doc, Binary, Bson, Document};

const X509: &str = "MONGODB-X509";
/// The database of users whose identity is proven outside (X.509 certificates).
pub const EXTERNAL: &str = "$external";

/// The conversation id mongod gives: one conversation at a time per connection.
const CONVERSATION_ID: i32 = 1;

fn payload(body: &Document) -> Result<Vec<u8>> {
    match body.get("payload") {
        Some(Bson::Binary(binary)) => Ok(binary.bytes.clone()),
        Some(Bson::String(text)) => Ok(text.clone().into_bytes()),
        _ => Err(Error::bad_value("Missing required field 'payload'")),
    }
}

fn reply(done: bool, payload: Vec<u8>) -> Document {
    doc! {
        "conversationId": CONVERSATION_ID,
        "done": done,
        "payload": Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: payload },
    }
}

fn mechanism(body: &Document) -> Result<Mechanism> {
    let name = body
        .get_str("mechanism")
        .map_err(|_| Error::bad_value("Missing required field 'mechanism'"))?;
    Mechanism::from_name(name).ok_or_else(|| {
        Error::new(
            ErrorCode::MECHANISM_UNAVAILABLE,
            format!("Received authentication for mechanism {name} which is not enabled"),
        )
    })
}

/// Logs a failed authentication (each one, so that repeated failures show) and returns
/// the error the client gets.
fn failed(ctx: &Ctx<'_>, mechanism: &str, user: &str, db: &str, cause: &Error) -> Error {
    tracing::warn!(
        mechanism,
        user,
        db,
        remote = %ctx.connection.peer,
        connectionId = ctx.connection.id,
        cause = %cause.message,
        "Authentication failed"
    );
    Error::new(ErrorCode::AUTHENTICATION_FAILED, AUTHENTICATION_FAILED)
}

/// Makes the connection `user`'s, once the user exists (it may have been dropped since
/// the conversation began) and its `authenticationRestrictions` (checked as part of
/// authentication, as mongod does) admit this client.
fn admit(ctx: &Ctx<'_>, mechanism: &str, user: UserName) -> Result<()> {
    if user.db != basalt_auth::INTERNAL_USER_DB {
        let refusal = match find_user(ctx.server, &user)? {
            None => Some(Error::new(
                ErrorCode::USER_NOT_FOUND,
                format!("Could not find user \"{user}\""),
            )),
            Some(document) => {
                let client = ctx.connection.peer.ip();
                let local = ctx.connection.local.get().map(|a| a.ip());
                (!restrictions_allow(ctx.server, &document, client, local)?).then(|| {
                    Error::bad_value(
                        "the user's authenticationRestrictions do not admit this client",
                    )
                })
            }
        };
        if let Some(cause) = refusal {
            return Err(failed(ctx, mechanism, &user.user, &user.db, &cause));
        }
    }
    ctx.connection.session.lock().authenticated(user)
}

pub fn sasl_start(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    start(ctx, ctx.db, body)
}

/// Starts a conversation as a user of `db` (the command's, or `speculativeAuthenticate`'s).
fn start(ctx: &Ctx<'_>, db: &str, body: &Document) -> Result<Document> {
    let mechanism = mechanism(body)?;
    let first = ClientFirst::parse(&payload(body)?)?;
    let user = UserName::new(&first.user, db);
    let credentials = match security::credentials(ctx.server, &user, mechanism) {
        Ok(Some(credentials)) => credentials,
        Ok(None) => {
            let cause = Error::new(
                ErrorCode::USER_NOT_FOUND,
                format!("Could not find user \"{user}\""),
            );
            return Err(failed(ctx, mechanism.name(), &user.user, db, &cause));
        }
        Err(e) => return Err(failed(ctx, mechanism.name(), &user.user, db, &e)),
    };
    let (scram, server_first) = ServerConversation::start(mechanism, first, credentials);
    let skip_empty_exchange = body
        .get_document("options")
        .and_then(|o| o.get_bool("skipEmptyExchange"))
        .unwrap_or(false);
    ctx.connection.session.lock().conversation = Some(Conversation {
        id: CONVERSATION_ID,
        db: db.to_string(),
        scram,
        skip_empty_exchange,
    });
    Ok(reply(false, server_first))
}

pub fn sasl_continue(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let id = body.get("conversationId").and_then(basalt_value::as_i64);
    let payload = payload(body)?;
    let mut session = ctx.connection.session.lock();
    let Some(mut conversation) = session.conversation.take() else {
        return Err(Error::new(
            ErrorCode::PROTOCOL_ERROR,
            "No SASL session state found",
        ));
    };
    if id != Some(i64::from(conversation.id)) {
        return Err(Error::new(
            ErrorCode::PROTOCOL_ERROR,
            "sasl: Mismatched conversation id",
        ));
    }
    let user = UserName::new(conversation.scram.user(), &conversation.db);
    let mechanism = conversation.scram.mechanism().name();
    if conversation.scram.proved() {
        // SCRAM's last, empty round trip.
        drop(session);
        admit(ctx, mechanism, user)?;
        return Ok(reply(true, Vec::new()));
    }
    let server_final = match conversation.scram.finish(&payload) {
        Ok(server_final) => server_final,
        Err(e) => {
            drop(session);
            return Err(failed(ctx, mechanism, &user.user, &user.db, &e));
        }
    };
    let done = conversation.skip_empty_exchange;
    if !done {
        session.conversation = Some(conversation);
    }
    drop(session);
    if done {
        admit(ctx, mechanism, user.clone())?;
    }
    if done && !ctx.server.options.quiet {
        tracing::info!(
            mechanism,
            user = %user,
            remote = %ctx.connection.peer,
            "Successfully authenticated"
        );
    }
    Ok(reply(done, server_final))
}

/// `hello`'s `speculativeAuthenticate`: a `saslStart` (or an X.509 `authenticate`) in
/// the handshake, whose reply (without `ok`) goes into hello's. A failure leaves the
/// field out, as mongod does; the driver then authenticates the usual way.
pub fn speculative(ctx: &Ctx<'_>, body: &Document) -> Option<Document> {
    let db = body.get_str("db").unwrap_or("admin");
    if body.contains_key("authenticate") {
        return x509(ctx, db, body).ok();
    }
    start(ctx, db, body).ok()
}

/// `hello`'s `saslSupportedMechs: "db.user"`: the SCRAM mechanisms the user has
/// credentials for.
pub fn supported_mechanisms(ctx: &Ctx<'_>, name: &str) -> Option<Vec<&'static str>> {
    let (db, user) = name.split_once('.')?;
    let user = UserName::new(user, db);
    let mechanisms: Vec<&str> = Mechanism::ALL
        .into_iter()
        .filter(|m| matches!(security::credentials(ctx.server, &user, *m), Ok(Some(_))))
        .map(Mechanism::name)
        .collect();
    (!mechanisms.is_empty()).then_some(mechanisms)
}

/// `authenticate`: mongod runs MONGODB-X509 through it; other mechanisms go through
/// `saslStart`.
pub fn authenticate(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let name = body.get_str("mechanism").unwrap_or("");
    if name != X509 {
        return Err(Error::new(
            ErrorCode::MECHANISM_UNAVAILABLE,
            format!("Received authentication for mechanism {name} which is not enabled"),
        ));
    }
    x509(ctx, ctx.db, body)
}

/// MONGODB-X509: the client is the user of `$external` named by the subject of the
/// certificate it presented and the server verified during the TLS handshake.
fn x509(ctx: &Ctx<'_>, db: &str, body: &Document) -> Result<Document> {
    if db != EXTERNAL {
        return Err(Error::bad_value(
            "X.509 authentication must always use the $external database.",
        ));
    }
    let verified = ctx
        .server
        .tls
        .as_ref()
        .is_some_and(|tls| !tls.options.allow_invalid_certificates);
    let certificate = ctx.connection.peer_certificate.get().filter(|_| verified);
    // Under --clusterAuthMode x509, a certificate with this member's O, OU and DC is
    // another member's: the connection is the internal user's.
    if let (Some(der), Some(tls), true) = (
        certificate,
        &ctx.server.tls,
        ctx.server.options.cluster_auth_x509,
    ) {
        let membership = crate::tls::membership_attributes(der);
        if !membership.is_empty() && membership == tls.own_membership {
            let internal = UserName::new(basalt_auth::INTERNAL_USER, basalt_auth::INTERNAL_USER_DB);
            ctx.connection.session.lock().authenticated(internal)?;
            return Ok(doc! { "dbname": EXTERNAL, "user": basalt_auth::INTERNAL_USER });
        }
    }
    let subject = certificate.and_then(|der| crate::tls::subject_name(der));
    let Some(subject) = subject else {
        let cause = Error::bad_value("No verified subject name available from client");
        return Err(failed(ctx, X509, "", db, &cause));
    };
    if let Ok(claimed) = body.get_str("user") {
        if claimed != subject {
            let cause = Error::bad_value(format!(
                "There is no x.509 client certificate matching the user {claimed}"
            ));
            return Err(failed(ctx, X509, claimed, db, &cause));
        }
    }
    admit(ctx, X509, UserName::new(&subject, EXTERNAL))?;
    Ok(doc! { "dbname": EXTERNAL, "user": subject })
}

pub fn logout(ctx: &Ctx<'_>, _body: &Document) -> Result<Document> {
    ctx.connection.session.lock().logout();
    Ok(Document::new())
}
