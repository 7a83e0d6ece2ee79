//! End-to-end tests of `basalt import`: the real binary reads a file or stdin and loads a
//! real server (started on a free port with a temporary --dbpath); the Rust driver then
//! checks what arrived. What is pinned: types (Extended JSON, typed and inferred CSV),
//! bad lines reported by line number and skipped, `--stopOnError`, write errors (duplicate
//! `_id`) with their line, resuming a stopped import by running it again, and
//! `--mode upsert` making a re-run idempotent.

use basalt_bench::ServerProcess;
use futures_util::TryStreamExt;
use mongodb::bson::{doc, DateTime, Document};
use mongodb::Client;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

const BASALT: &str = env!("CARGO_BIN_EXE_basalt");

struct Fixture {
    dir: tempfile::TempDir,
    server: ServerProcess,
}

impl Fixture {
    fn start() -> Fixture {
        let dir = tempfile::tempdir().expect("temp dir");
        let server = ServerProcess::start(
            Path::new(BASALT),
            &dir.path().join("data"),
            &dir.path().join("server.log"),
            None,
        )
        .expect("server starts");
        Fixture { dir, server }
    }

    /// Runs `basalt import <args>` against the server, with `stdin` as its input.
    fn import(&self, args: &[&str], stdin: &str) -> Output {
        let mut child = Command::new(BASALT)
            .arg("import")
            .args(["--uri", &self.server.uri(), "--db", "t", "--quiet"])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run basalt import");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(stdin.as_bytes())
            .expect("write stdin");
        child.wait_with_output().expect("basalt import ends")
    }

    fn file(&self, name: &str, content: &str) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, content).expect("write input");
        path.to_string_lossy().into_owned()
    }

    async fn docs(&self, collection: &str) -> Vec<Document> {
        let client = Client::with_uri_str(self.server.uri())
            .await
            .expect("client");
        client
            .database("t")
            .collection::<Document>(collection)
            .find(doc! {})
            .sort(doc! {"_id": 1})
            .await
            .expect("find")
            .try_collect()
            .await
            .expect("cursor")
    }
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test]
async fn json_from_stdin_keeps_extended_types_and_skips_bad_lines() {
    let f = Fixture::start();
    let input = concat!(
        r#"{"_id": 1, "when": {"$date": "2020-01-02T03:04:05Z"}, "n": {"$numberLong": "5"}, "x": 1.5}"#,
        "\n",
        r#"{"_id": 2, "broken": }"#,
        "\n\n",
        r#"{"_id": 3, "nested": {"a": [1, "b"]}}"#,
        "\n",
        "not json at all\n",
        r#"{"_id": 5}"#,
    );
    let output = f.import(&["--collection", "c"], input);
    let err = stderr(&output);
    assert!(
        !output.status.success(),
        "bad lines make the exit status fail"
    );
    assert!(err.contains("line 2: invalid JSON"), "{err}");
    assert!(err.contains("line 5: invalid JSON"), "{err}");
    assert!(err.contains("2 line(s) were not imported"), "{err}");
    assert_eq!(
        f.docs("c").await,
        vec![
            doc! {"_id": 1, "when": DateTime::from_millis(1_577_934_245_000), "n": 5i64, "x": 1.5},
            doc! {"_id": 3, "nested": {"a": [1, "b"]}},
            doc! {"_id": 5},
        ]
    );
}

#[tokio::test]
async fn stop_on_error_stops_at_the_first_bad_line() {
    let f = Fixture::start();
    let output = f.import(
        &["--collection", "c", "--stopOnError"],
        "{\"_id\": 1}\n{\"_id\": 2,}\n{\"_id\": 3}\n",
    );
    assert!(!output.status.success());
    assert!(stderr(&output).contains("line 2:"), "{}", stderr(&output));
    assert_eq!(f.docs("c").await, vec![doc! {"_id": 1}]);
}

#[tokio::test]
async fn duplicate_ids_are_reported_with_their_line_and_the_rest_goes_in() {
    let f = Fixture::start();
    let output = f.import(
        &["--collection", "c"],
        "{\"_id\": 1}\n{\"_id\": 2}\n{\"_id\": 1, \"again\": true}\n{\"_id\": 4}\n",
    );
    let err = stderr(&output);
    assert!(!output.status.success());
    assert!(
        err.contains("line 3:") && err.contains("duplicate key"),
        "{err}"
    );
    assert_eq!(
        f.docs("c").await,
        vec![doc! {"_id": 1}, doc! {"_id": 2}, doc! {"_id": 4}]
    );
}

#[tokio::test]
async fn an_import_stopped_by_an_error_resumes_by_running_again() {
    let f = Fixture::start();
    let lines: Vec<String> = (1..=50)
        .map(|i| format!("{{\"_id\": {i}, \"v\": {i}}}"))
        .collect();
    let mut broken = lines.clone();
    broken[29] = "{\"_id\": 30, \"v\": }".to_string();
    let ids = |docs: Vec<Document>| -> Vec<i32> {
        docs.iter()
            .map(|d| d.get_i32("_id").expect("_id"))
            .collect()
    };
    // Several batches, one at a time: everything before line 30 is in, nothing after.
    let one_worker = [
        "--collection",
        "c",
        "--batchSize",
        "7",
        "--numInsertionWorkers",
        "1",
    ];
    let stopped = f.import(
        &[&one_worker[..], &["--stopOnError"]].concat(),
        &broken.join("\n"),
    );
    assert!(!stopped.status.success());
    assert!(
        stderr(&stopped).contains("line 30:"),
        "{}",
        stderr(&stopped)
    );
    assert_eq!(ids(f.docs("c").await), (1..30).collect::<Vec<_>>());

    // The fixed file again: the lines already in are reported as duplicates, the rest
    // goes in, in parallel batches.
    let file = f.file("fixed.json", &lines.join("\n"));
    let resumed = f.import(
        &["--collection", "c", "--batchSize", "7", "--file", &file],
        "",
    );
    let err = stderr(&resumed);
    assert!(!resumed.status.success());
    assert!(err.contains("29 line(s) were not imported"), "{err}");
    assert!(
        err.contains("line 29:") && err.contains("duplicate key"),
        "{err}"
    );
    assert!(!err.contains("line 30:"), "{err}");
    let docs = f.docs("c").await;
    assert_eq!(ids(docs.clone()), (1..=50).collect::<Vec<_>>());
    assert!(docs
        .iter()
        .all(|d| d.get_i32("v").ok() == d.get_i32("_id").ok()));
}

#[tokio::test]
async fn csv_with_typed_header_and_tsv_with_inferred_fields() {
    let f = Fixture::start();
    let csv = f.file(
        "people.csv",
        "_id.int32(),name.string(),zip.string(),born.date(2006-01-02),ok.boolean()\n\
         1,\"Lovelace, Ada\",01234,1815-12-10,true\n\
         2,Bob,99,not-a-date,false\n\
         3,Cy,7,2001-02-03,F\n",
    );
    let output = f.import(
        &[
            "--file",
            &csv,
            "--type",
            "csv",
            "--headerline",
            "--columnsHaveTypes",
        ],
        "",
    );
    assert!(
        stderr(&output).contains("line 3: field 'born'"),
        "{}",
        stderr(&output)
    );
    let born = |iso: &str| DateTime::parse_rfc3339_str(iso).expect("date");
    assert_eq!(
        f.docs("people").await,
        vec![
            doc! {"_id": 1, "name": "Lovelace, Ada", "zip": "01234", "born": born("1815-12-10T00:00:00Z"), "ok": true},
            doc! {"_id": 3, "name": "Cy", "zip": "7", "born": born("2001-02-03T00:00:00Z"), "ok": false},
        ]
    );

    let output = f.import(
        &[
            "--collection",
            "t",
            "--type",
            "tsv",
            "--fields",
            "_id,score,place.city",
            "--drop",
        ],
        "1\t2.5\tOslo\n2\t30000000000\tRome\textra\n",
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        f.docs("t").await,
        vec![
            doc! {"_id": 1, "score": 2.5, "place": {"city": "Oslo"}},
            doc! {"_id": 2, "score": 30_000_000_000i64, "place": {"city": "Rome"}, "field3": "extra"},
        ]
    );
}

#[tokio::test]
async fn upsert_mode_makes_a_rerun_replace_instead_of_duplicate() {
    let f = Fixture::start();
    let first = f.import(
        &["--collection", "c"],
        "{\"_id\": 1, \"v\": 1}\n{\"_id\": 2, \"v\": 1}\n",
    );
    assert!(first.status.success(), "{}", stderr(&first));
    let again = f.import(
        &["--collection", "c", "--mode", "upsert"],
        "{\"_id\": 1, \"v\": 2}\n{\"_id\": 3, \"v\": 2}\n",
    );
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(
        f.docs("c").await,
        vec![
            doc! {"_id": 1, "v": 2},
            doc! {"_id": 2, "v": 1},
            doc! {"_id": 3, "v": 2}
        ]
    );
}
