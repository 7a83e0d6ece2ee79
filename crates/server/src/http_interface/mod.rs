//! The HTTP interface (`--httpPort`, off by default), in the spirit of mongod's old
//! `--rest` console: a status page for people, its data as JSON, and metrics for
//! Prometheus. It listens on the `--bind_ip` addresses and serves only reads.
//!
//! - `/` — the status page: server, uptime, connections, operations per second and
//!   latency charts, databases and collections with counts, sizes and indexes, the
//!   operations running, the latest slow operations, the replica set. Plain HTML, CSS
//!   and a small script (`status.html`, `status.css`, `status.js`, built into the
//!   binary) that polls `/status.json`.
//! - `/status.json` — what the page shows, as relaxed Extended JSON.
//! - `/metrics` — Prometheus' text format (`metrics.rs`).
//!
//! Under access control (`--auth`, `--keyFile`) every request must carry HTTP Basic
//! credentials of a user (`name` of `admin`, or `name@db`) whose roles grant
//! `serverStatus` on the cluster (`clusterMonitor`, `clusterAdmin`, `root`): the
//! password is checked against the user's stored SCRAM credentials, as a driver's
//! proof would be (a derivation per request: the page polls once a second). Anything
//! else gets 401 with a Basic challenge, so a browser asks for them; a user without the
//! privilege gets 403.

mod metrics;

use crate::commands::current_op::current_ops;
use crate::commands::Ctx;
use crate::stats::Stats;
use crate::Server;
use basalt_agg::CurrentOpOptions;
use basalt_auth::{Action, Resource};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use bson::{doc, Bson, Document};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Request, Response, StatusCode};
use std::convert::Infallible;
use std::net::{IpAddr, TcpListener};
use std::sync::Arc;

const PAGE: &str = include_str!("status.html");
const STYLE: &str = include_str!("status.css");
const SCRIPT: &str = include_str!("status.js");

/// Serves the HTTP interface on `listeners` until the process ends.
pub fn start(server: &Arc<Server>, listeners: Vec<TcpListener>) -> std::io::Result<()> {
    for listener in listeners {
        listener.set_nonblocking(true)?;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let server = server.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, peer)) = listener.accept().await else {
                    continue;
                };
                let server = server.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let server = server.clone();
                        async move { Ok::<_, Infallible>(respond(&server, &request, peer.ip()).await) }
                    });
                    let io = hyper_util::rt::TokioIo::new(stream);
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(io, service)
                        .await;
                });
            }
        });
    }
    Ok(())
}

async fn respond<B>(
    server: &Arc<Server>,
    request: &Request<B>,
    client: IpAddr,
) -> Response<Full<Bytes>> {
    if request.method() != hyper::Method::GET {
        return reply(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "GET only\n".into(),
        );
    }
    if server.security.enabled {
        if let Some(refusal) = refuse_unauthorized(server, request, client).await {
            return refusal;
        }
    }
    match request.uri().path() {
        "/" => reply(StatusCode::OK, "text/html; charset=utf-8", PAGE.into()),
        "/status.css" => reply(StatusCode::OK, "text/css", STYLE.into()),
        "/status.js" => reply(StatusCode::OK, "text/javascript", SCRIPT.into()),
        // Both read the catalog and may count a collection: off the async threads.
        path @ ("/status.json" | "/metrics") => {
            let server = server.clone();
            let metrics = path == "/metrics";
            let body = tokio::task::spawn_blocking(move || match metrics {
                true => metrics::render(&server),
                false => Bson::Document(status(&server))
                    .into_relaxed_extjson()
                    .to_string(),
            })
            .await
            .unwrap_or_default();
            let kind = match metrics {
                true => "text/plain; version=0.0.4; charset=utf-8",
                false => "application/json",
            };
            reply(StatusCode::OK, kind, body)
        }
        _ => reply(StatusCode::NOT_FOUND, "text/plain", "not found\n".into()),
    }
}

/// Under access control, the reply to a request without the credentials of a user who
/// may see the server's status; `None` lets it through.
async fn refuse_unauthorized<B>(
    server: &Arc<Server>,
    request: &Request<B>,
    client: IpAddr,
) -> Option<Response<Full<Bytes>>> {
    let challenge = || {
        let mut response = reply(
            StatusCode::UNAUTHORIZED,
            "text/plain",
            "authentication required\n".into(),
        );
        if let Ok(value) = "Basic realm=\"basalt\", charset=\"UTF-8\"".parse() {
            response
                .headers_mut()
                .insert(hyper::header::WWW_AUTHENTICATE, value);
        }
        response
    };
    let Some((name, password)) = basic_credentials(request) else {
        return Some(challenge());
    };
    let server = server.clone();
    // Deriving the key from the password takes thousands of hashes: off the async
    // threads.
    let login = tokio::task::spawn_blocking(move || {
        crate::security::password_login(&server, &name, &password, client)
    })
    .await;
    match login {
        Ok(Ok(Some(user))) if user.allows(&Resource::Cluster, Action::ServerStatus) => None,
        Ok(Ok(Some(_))) => Some(reply(
            StatusCode::FORBIDDEN,
            "text/plain",
            "not authorized: the status page needs serverStatus on the cluster (clusterMonitor)\n"
                .into(),
        )),
        _ => Some(challenge()),
    }
}

/// The user and password of an `Authorization: Basic` header.
fn basic_credentials<B>(request: &Request<B>) -> Option<(String, String)> {
    let value = request
        .headers()
        .get(hyper::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let encoded = value.strip_prefix("Basic ")?.trim();
    let decoded = String::from_utf8(BASE64.decode(encoded).ok()?).ok()?;
    let (name, password) = decoded.split_once(':')?;
    Some((name.to_string(), password.to_string()))
}

fn reply(status: StatusCode, kind: &str, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if let Ok(kind) = kind.parse() {
        response
            .headers_mut()
            .insert(hyper::header::CONTENT_TYPE, kind);
    }
    if let Ok(no_store) = "no-store".parse() {
        response
            .headers_mut()
            .insert(hyper::header::CACHE_CONTROL, no_store);
    }
    response
}

/// What the status page shows.
fn status(server: &Arc<Server>) -> Document {
    let stats = &server.stats;
    let ctx = Ctx {
        server,
        connection: &server.internal_connection,
        db: "admin",
        raw_sequences: &[],
        max_time_ms: None,
        operation: None,
    };
    let operations: Vec<Bson> = current_ops(
        &ctx,
        &CurrentOpOptions {
            all_users: true,
            ..CurrentOpOptions::default()
        },
    )
    .into_iter()
    .map(Bson::Document)
    .collect();
    let latencies: Document = stats
        .latencies
        .all()
        .into_iter()
        .map(|(name, histogram)| {
            let (_, count, sum) = histogram.snapshot();
            (
                name.to_string(),
                Bson::Document(doc! { "count": count as i64, "micros": sum as i64 }),
            )
        })
        .collect();
    let slow: Vec<Bson> = server
        .profiler
        .recent_slow()
        .into_iter()
        .map(Bson::Document)
        .collect();
    doc! {
        "host": crate::commands::host_info::host_name(),
        "version": crate::COMPATIBLE_MONGODB_VERSION,
        "basaltVersion": env!("CARGO_PKG_VERSION"),
        "pid": std::process::id() as i64,
        "uptimeSeconds": server.started.elapsed().as_secs_f64(),
        "localTime": bson::DateTime::now(),
        "connections": {
            "current": Stats::get(&stats.connections.current),
            "totalCreated": Stats::get(&stats.connections.total_created),
            "active": Stats::get(&stats.connections.active),
        },
        "opcounters": stats.operations.document(),
        "latencies": latencies,
        "memory": {
            "residentBytes": metrics::resident_bytes() as i64,
            "operationBytesHeld": basalt_memory::server_budget().reserved_bytes() as i64,
            "operationBudgetBytes": basalt_memory::server_budget().limit_bytes() as i64,
        },
        "databases": databases(server),
        "operations": operations,
        "slowOperations": slow,
        "replication": replication(server),
    }
}

/// Every database with its collections: documents, bytes, indexes.
fn databases(server: &Server) -> Vec<Bson> {
    let catalog = &server.catalog;
    catalog
        .database_names()
        .into_iter()
        .map(|db| {
            let collections: Vec<Bson> = catalog
                .collections_of(&db)
                .into_iter()
                .map(|collection| {
                    let meta = collection.meta();
                    let stats = collection.stats().unwrap_or_default();
                    let indexes: Vec<Bson> = meta
                        .indexes
                        .iter()
                        .map(|index| Bson::String(index.name.clone()))
                        .collect();
                    Bson::Document(doc! {
                        "name": meta.name.clone(),
                        "count": stats.count as i64,
                        "size": stats.data_size_bytes as i64,
                        "capped": meta.capped().is_some(),
                        "indexes": indexes,
                    })
                })
                .collect();
            Bson::Document(doc! { "name": db, "collections": collections })
        })
        .collect()
}

/// The replica set as this member sees it, when it is one.
fn replication(server: &Server) -> Bson {
    let Some(set) = server.replication() else {
        return Bson::Null;
    };
    match set.status() {
        Ok(status) => {
            let members: Vec<Bson> = status
                .get_array("members")
                .map(|members| {
                    members
                        .iter()
                        .filter_map(Bson::as_document)
                        .map(|m| {
                            let mut member = Document::new();
                            for field in ["name", "stateStr", "health", "optimeDate", "self"] {
                                if let Some(value) = m.get(field) {
                                    member.insert(field, value.clone());
                                }
                            }
                            Bson::Document(member)
                        })
                        .collect()
                })
                .unwrap_or_default();
            Bson::Document(doc! { "set": set.set_name(), "members": members })
        }
        Err(e) => Bson::Document(doc! { "set": set.set_name(), "error": e.message }),
    }
}
