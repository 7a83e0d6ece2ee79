//! End-to-end tests through the official Rust driver (the `mongodb` crate).
//!
//! Each test starts the real `basalt` binary on a free port with a temporary
//! `--dbpath`, talks to it over TCP exactly as an application would, and stops it.
//! What is checked is what a Rust application relies on: CRUD results, cursors that
//! span many batches, the duplicate-key error code, and data surviving a restart.

use std::fs::OpenOptions;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::TryStreamExt;
use mongodb::bson::{doc, Bson, Document};
use mongodb::error::{ErrorKind, WriteFailure};
use mongodb::{Client, Collection};

const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(20);
const CURSOR_DOCS: i32 = 10_000;

/// A running `basalt` process; killed when dropped so a failing test leaves nothing behind.
struct Server {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Server {
    /// Starts `basalt` with its data under `dir/data` and waits until it answers ping.
    async fn start(dir: &Path) -> Server {
        Server::start_with(dir, &[]).await
    }

    /// As [`Server::start`], with more flags.
    async fn start_with(dir: &Path, flags: &[&str]) -> Server {
        let port = free_port();
        let dbpath = dir.join("data");
        std::fs::create_dir_all(&dbpath).expect("create dbpath");
        let log = dir.join("basalt.log");
        let log_file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .expect("open log");
        let child = Command::new(env!("CARGO_BIN_EXE_basalt"))
            .args([
                "--port",
                &port.to_string(),
                "--bind_ip",
                "127.0.0.1",
                "--quiet",
            ])
            .arg("--dbpath")
            .arg(&dbpath)
            .args(flags)
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().expect("clone log handle"))
            .stderr(log_file)
            .spawn()
            .expect("spawn basalt");
        let mut server = Server { child, port, log };
        server.wait_until_ready().await;
        server
    }

    fn uri(&self) -> String {
        format!("mongodb://127.0.0.1:{}/", self.port)
    }

    async fn client(&self) -> Client {
        Client::with_uri_str(format!("{}?serverSelectionTimeoutMS=10000", self.uri()))
            .await
            .expect("client")
    }

    async fn wait_until_ready(&mut self) {
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        let probe_uri = format!("{}?serverSelectionTimeoutMS=500", self.uri());
        loop {
            if let Some(status) = self.child.try_wait().expect("poll basalt") {
                panic!(
                    "basalt exited with {status} during startup; log:\n{}",
                    self.log_text()
                );
            }
            if let Ok(client) = Client::with_uri_str(&probe_uri).await {
                if client
                    .database("admin")
                    .run_command(doc! {"ping": 1})
                    .await
                    .is_ok()
                {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "basalt did not answer ping within {STARTUP_TIMEOUT:?}; log:\n{}",
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Graceful shutdown with SIGTERM, as a service manager would do it.
    fn stop(mut self) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status();
        assert!(sent.is_ok_and(|s| s.success()), "could not send SIGTERM");
        let deadline = Instant::now() + SHUTDOWN_TIMEOUT;
        while self.child.try_wait().expect("poll basalt").is_none() {
            assert!(
                Instant::now() < deadline,
                "basalt ignored SIGTERM for {SHUTDOWN_TIMEOUT:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local addr").port()
}

fn collection(client: &Client, name: &str) -> Collection<Document> {
    client.database("driver_e2e").collection(name)
}

/// The server's code of a single-document write error (e.g. from `insert_one`).
fn write_error_code(err: &mongodb::error::Error) -> i32 {
    match *err.kind {
        ErrorKind::Write(WriteFailure::WriteError(ref e)) => e.code,
        ref other => panic!("expected a write error, got {other:?}"),
    }
}

#[tokio::test]
async fn insert_find_update_delete() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path()).await;
    let coll = collection(&server.client().await, "crud");

    let inserted = coll
        .insert_one(doc! {"_id": 1, "name": "basalt", "n": 1})
        .await
        .unwrap();
    assert_eq!(inserted.inserted_id, Bson::Int32(1));
    let found = coll.find_one(doc! {"name": "basalt"}).await.unwrap();
    assert_eq!(found, Some(doc! {"_id": 1, "name": "basalt", "n": 1}));

    let updated = coll
        .update_one(doc! {"_id": 1}, doc! {"$inc": {"n": 41}})
        .await
        .unwrap();
    assert_eq!((updated.matched_count, updated.modified_count), (1, 1));
    let found = coll.find_one(doc! {"_id": 1}).await.unwrap().unwrap();
    assert_eq!(found.get_i32("n").unwrap(), 42);

    let upserted = coll
        .update_one(doc! {"_id": 2}, doc! {"$set": {"n": 7}})
        .upsert(true)
        .await
        .unwrap();
    assert_eq!(upserted.upserted_id, Some(Bson::Int32(2)));

    let deleted = coll.delete_one(doc! {"_id": 1}).await.unwrap();
    assert_eq!(deleted.deleted_count, 1);
    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 1);
    assert_eq!(coll.find_one(doc! {"_id": 1}).await.unwrap(), None);
}

#[tokio::test]
async fn cursor_over_ten_thousand_documents() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path()).await;
    let coll = collection(&server.client().await, "cursor");
    let docs = (0..CURSOR_DOCS).map(|i| doc! {"_id": i, "even": i % 2 == 0});
    let result = coll.insert_many(docs).await.unwrap();
    assert_eq!(result.inserted_ids.len(), CURSOR_DOCS as usize);

    let all: Vec<Document> = coll
        .find(doc! {})
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let ids: Vec<i32> = all.iter().map(|d| d.get_i32("_id").unwrap()).collect();
    assert_eq!(ids, (0..CURSOR_DOCS).collect::<Vec<_>>());

    let evens_descending: Vec<Document> = coll
        .find(doc! {"even": true})
        .sort(doc! {"_id": -1})
        .batch_size(333)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let ids: Vec<i32> = evens_descending
        .iter()
        .map(|d| d.get_i32("_id").unwrap())
        .collect();
    assert_eq!(
        ids,
        (0..CURSOR_DOCS)
            .rev()
            .filter(|i| i % 2 == 0)
            .collect::<Vec<_>>()
    );
    assert_eq!(
        coll.count_documents(doc! {}).await.unwrap(),
        CURSOR_DOCS as u64
    );
}

#[tokio::test]
async fn duplicate_key_is_error_11000() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path()).await;
    let coll = collection(&server.client().await, "dup");

    coll.insert_one(doc! {"_id": "k"}).await.unwrap();
    let err = coll.insert_one(doc! {"_id": "k"}).await.unwrap_err();
    assert_eq!(write_error_code(&err), 11000);

    let batch = [
        doc! {"_id": 1},
        doc! {"_id": "k"},
        doc! {"_id": 2},
        doc! {"_id": 1},
    ];
    let err = coll.insert_many(batch).ordered(false).await.unwrap_err();
    match *err.kind {
        ErrorKind::InsertMany(ref e) => {
            let errors = e.write_errors.as_ref().expect("write errors");
            let indexes: Vec<usize> = errors.iter().map(|w| w.index).collect();
            assert_eq!(indexes, vec![1, 3]);
            assert!(errors.iter().all(|w| w.code == 11000), "{errors:?}");
        }
        ref other => panic!("expected an insert-many error, got {other:?}"),
    }
    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 3);
}

#[tokio::test]
async fn data_survives_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let written: Vec<Document> = (0..100)
        .map(|i| doc! {"_id": i, "v": format!("value {i}")})
        .collect();

    let server = Server::start(dir.path()).await;
    let coll = collection(&server.client().await, "persist");
    coll.insert_many(&written).await.unwrap();
    coll.delete_one(doc! {"_id": 0}).await.unwrap();
    server.stop();

    let server = Server::start(dir.path()).await;
    let coll = collection(&server.client().await, "persist");
    let read: Vec<Document> = coll
        .find(doc! {})
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(read, written[1..].to_vec());
    // The reopened store accepts writes and still enforces the _id index.
    let err = coll.insert_one(doc! {"_id": 5}).await.unwrap_err();
    assert_eq!(write_error_code(&err), 11000);
    coll.insert_one(doc! {"_id": 100}).await.unwrap();
    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 100);
}

#[tokio::test]
async fn scram_authentication_and_authorization() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_with(dir.path(), &["--auth"]).await;
    // The localhost exception: the first user, then no more without credentials.
    let anonymous = server.client().await;
    anonymous
        .database("admin")
        .run_command(doc! { "createUser": "ops", "pwd": "ops-pw", "roles": ["root"] })
        .await
        .expect("first user through the localhost exception");
    let refused = anonymous
        .database("app")
        .collection::<Document>("c")
        .insert_one(doc! { "x": 1 })
        .await
        .expect_err("unauthenticated insert");
    assert!(
        matches!(*refused.kind, ErrorKind::Command(ref e) if e.code == 13),
        "{refused:?}"
    );
    for mechanism in ["SCRAM-SHA-1", "SCRAM-SHA-256"] {
        let uri = format!(
            "mongodb://ops:ops-pw@127.0.0.1:{}/?authSource=admin&authMechanism={mechanism}&serverSelectionTimeoutMS=10000",
            server.port
        );
        let ops = Client::with_uri_str(uri).await.expect("client");
        ops.database("app")
            .collection::<Document>("c")
            .insert_one(doc! { "by": mechanism })
            .await
            .expect("authenticated insert");
    }
    let ops = Client::with_uri_str(format!(
        "mongodb://ops:ops-pw@127.0.0.1:{}/?serverSelectionTimeoutMS=10000",
        server.port
    ))
    .await
    .expect("client");
    ops.database("app")
        .run_command(doc! { "createUser": "viewer", "pwd": "viewer-pw", "roles": ["read"] })
        .await
        .expect("createUser");
    let viewer = Client::with_uri_str(format!(
        "mongodb://viewer:viewer-pw@127.0.0.1:{}/app?serverSelectionTimeoutMS=10000",
        server.port
    ))
    .await
    .expect("client");
    let app = viewer.database("app").collection::<Document>("c");
    assert_eq!(app.count_documents(doc! {}).await.expect("count"), 2);
    let write = app
        .insert_one(doc! {})
        .await
        .expect_err("a reader's insert");
    assert!(
        matches!(*write.kind, ErrorKind::Command(ref e) if e.code == 13),
        "{write:?}"
    );
    let wrong = Client::with_uri_str(format!(
        "mongodb://viewer:wrong@127.0.0.1:{}/app?serverSelectionTimeoutMS=3000",
        server.port
    ))
    .await
    .expect("client");
    let failed = wrong
        .database("app")
        .collection::<Document>("c")
        .find_one(doc! {})
        .await
        .expect_err("wrong password");
    assert!(
        matches!(*failed.kind, ErrorKind::Authentication { .. }),
        "{failed:?}"
    );
}
