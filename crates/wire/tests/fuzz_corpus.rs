//! Runs the fuzz corpus (`fuzz/corpus/decode/`) through the decoder as an ordinary test,
//! so every seed (and every input the fuzzer saved there) is checked by `cargo test`
//! without nightly or libFuzzer.
//!
//! The seeds are made here; `UPDATE_CORPUS=1 cargo test -p basalt-wire --test fuzz_corpus`
//! rewrites them. A seed's name starts with the outcome it must have (`ok`, `incomplete`,
//! `fatal`, `rejected`); files the fuzzer adds have hash names and need only not panic.

use std::path::PathBuf;

use basalt_wire::{
    decode, encode_op_msg, encode_op_msg_with_sequences, encode_op_query, encode_op_reply,
    Compressor, DecodeError, Decoded, DocumentSequence, OpMsg, OpQuery, OpReply,
    MAX_BSON_NESTING_DEPTH, MAX_MESSAGE_SIZE_BYTES,
};
use bson::oid::ObjectId;
use bson::spec::BinarySubtype;
use bson::{rawdoc, Binary, DateTime, Decimal128, RawBson, RawDocumentBuf, Regex, Timestamp};

const OUTCOMES: [&str; 4] = ["ok", "incomplete", "fatal", "rejected"];

/// The corpus of this checkout. Cargo sets CARGO_MANIFEST_DIR when it runs the test; the
/// compile-time value is only a fallback, because a test binary built in another clone
/// that shares the target directory is reused without being rebuilt.
fn corpus_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
        .join("fuzz/corpus/decode")
}

fn outcome(bytes: &[u8]) -> &'static str {
    match decode(bytes) {
        Ok(Decoded::Frame { .. }) => "ok",
        Ok(Decoded::Incomplete) => "incomplete",
        Err(DecodeError::Fatal(_)) => "fatal",
        Err(DecodeError::Rejected(_)) => "rejected",
    }
}

fn ping() -> RawDocumentBuf {
    rawdoc! { "ping": 1, "$db": "admin" }
}

fn every_type() -> RawDocumentBuf {
    rawdoc! {
        "double": 1.5, "string": "héllo", "doc": { "a": { "b": [1, { "c": null }] } },
        "array": [1, "two", [3]],
        "binary": Binary { subtype: BinarySubtype::Generic, bytes: vec![1, 2, 3] },
        "old": Binary { subtype: BinarySubtype::BinaryOld, bytes: vec![9] },
        "uuid": Binary { subtype: BinarySubtype::Uuid, bytes: vec![0x42; 16] },
        "undefined": RawBson::Undefined, "oid": ObjectId::from_bytes([7; 12]), "bool": false,
        "date": DateTime::from_millis(1_700_000_000_000), "null": null,
        "regex": Regex { pattern: "^a.*b$".try_into().unwrap(), options: "im".try_into().unwrap() },
        "code": RawBson::JavaScriptCode("return 1".into()), "symbol": RawBson::Symbol("s".into()),
        "cws": RawBson::JavaScriptCodeWithScope(bson::RawJavaScriptCodeWithScope {
            code: "return x".into(),
            scope: rawdoc! { "x": 1 },
        }),
        "int": -7, "ts": Timestamp { time: 1, increment: 2 }, "long": i64::MIN,
        "decimal": Decimal128::from_bytes([1; 16]), "min": RawBson::MinKey, "max": RawBson::MaxKey,
        "$db": "test",
    }
}

fn insert_sequences() -> Vec<DocumentSequence> {
    vec![DocumentSequence {
        identifier: "documents".into(),
        documents: (0..3).map(|i| rawdoc! { "_id": i, "v": "x" }).collect(),
    }]
}

fn hello_query() -> OpQuery {
    OpQuery {
        flags: 0,
        full_collection_name: "admin.$cmd".into(),
        number_to_skip: 0,
        number_to_return: -1,
        query: rawdoc! {
            "isMaster": 1, "helloOk": true, "compression": ["zstd", "snappy", "zlib"],
            "client": { "driver": { "name": "seed", "version": "1" } },
        },
        return_fields_selector: None,
    }
}

/// Sets the messageLength field to the buffer's length.
fn fix_length(mut bytes: Vec<u8>) -> Vec<u8> {
    let len = bytes.len() as i32;
    bytes[..4].copy_from_slice(&len.to_le_bytes());
    bytes
}

/// An OP_MSG with hand-written flags and sections.
fn raw_msg(flags: u32, sections: &[u8]) -> Vec<u8> {
    let mut bytes = vec![0; 4];
    bytes.extend_from_slice(&1_i32.to_le_bytes());
    bytes.extend_from_slice(&0_i32.to_le_bytes());
    bytes.extend_from_slice(&2013_i32.to_le_bytes());
    bytes.extend_from_slice(&flags.to_le_bytes());
    bytes.extend_from_slice(sections);
    fix_length(bytes)
}

fn body_section(body: &[u8]) -> Vec<u8> {
    [&[0u8][..], body].concat()
}

/// An OP_COMPRESSED with hand-set compression header fields.
fn raw_compressed(original: i32, uncompressed_size: i32, id: u8, data: &[u8]) -> Vec<u8> {
    let mut bytes = vec![0; 4];
    bytes.extend_from_slice(&9_i32.to_le_bytes());
    bytes.extend_from_slice(&0_i32.to_le_bytes());
    bytes.extend_from_slice(&2012_i32.to_le_bytes());
    bytes.extend_from_slice(&original.to_le_bytes());
    bytes.extend_from_slice(&uncompressed_size.to_le_bytes());
    bytes.push(id);
    bytes.extend_from_slice(data);
    fix_length(bytes)
}

/// `ping` with one byte of its body replaced.
fn corrupt_ping(find: &[u8], offset: usize, value: u8) -> Vec<u8> {
    let mut bytes = encode_op_msg(1, 0, 0, &ping(), None);
    let at = bytes.windows(find.len()).position(|w| w == find).unwrap() + offset;
    bytes[at] = value;
    bytes
}

fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let ping_msg = encode_op_msg(1, 0, 0, &ping(), None);
    let ping_payload = ping_msg[16..].to_vec();
    let ping_size = ping_payload.len() as i32;
    let mut nested = rawdoc! {};
    for _ in 0..=MAX_BSON_NESTING_DEPTH {
        nested = rawdoc! { "a": nested };
    }
    let reply_doc = rawdoc! { "ismaster": true, "maxWireVersion": 21, "ok": 1.0 };

    let mut seeds = vec![
        ("ok-op-msg-ping", ping_msg.clone()),
        (
            "ok-op-msg-insert-sequence",
            encode_op_msg_with_sequences(
                2,
                0,
                0,
                &rawdoc! { "insert": "c", "$db": "test" },
                &insert_sequences(),
                None,
            ),
        ),
        (
            "ok-op-msg-checksum",
            encode_op_msg(3, 0, OpMsg::CHECKSUM_PRESENT, &ping(), None),
        ),
        (
            "ok-op-msg-more-to-come",
            encode_op_msg(4, 0, OpMsg::MORE_TO_COME, &ping(), None),
        ),
        (
            "ok-op-msg-exhaust-allowed",
            encode_op_msg(5, 0, OpMsg::EXHAUST_ALLOWED, &ping(), None),
        ),
        (
            "ok-op-msg-every-bson-type",
            encode_op_msg(6, 0, 0, &every_type(), None),
        ),
        (
            "ok-op-query-hello",
            encode_op_query(7, &hello_query(), None),
        ),
        (
            "ok-op-query-selector",
            encode_op_query(
                8,
                &OpQuery {
                    return_fields_selector: Some(rawdoc! { "ok": 1 }),
                    ..hello_query()
                },
                None,
            ),
        ),
        (
            "ok-op-reply",
            encode_op_reply(9, 7, OpReply::AWAIT_CAPABLE, 0, 0, &[&reply_doc], None),
        ),
        (
            "ok-two-messages",
            [ping_msg.clone(), ping_msg.clone()].concat(),
        ),
        (
            "ok-compressed-zstd-checksum-sequence",
            encode_op_msg_with_sequences(
                10,
                0,
                OpMsg::CHECKSUM_PRESENT,
                &rawdoc! { "insert": "c", "$db": "test" },
                &insert_sequences(),
                Some(Compressor::Zstd),
            ),
        ),
        (
            "ok-compressed-op-query",
            encode_op_query(11, &hello_query(), Some(Compressor::Zlib)),
        ),
        ("incomplete-empty", vec![]),
        ("incomplete-length-only", ping_msg[..4].to_vec()),
        ("incomplete-partial-header", ping_msg[..15].to_vec()),
        (
            "incomplete-truncated-body",
            ping_msg[..ping_msg.len() - 1].to_vec(),
        ),
        ("fatal-length-below-header", fix_length(vec![0; 15])),
        ("fatal-length-negative", (-1_i32).to_le_bytes().to_vec()),
        (
            "fatal-length-over-max",
            ((MAX_MESSAGE_SIZE_BYTES + 1) as i32).to_le_bytes().to_vec(),
        ),
        ("fatal-unknown-opcode-op-insert", {
            let mut bytes = ping_msg.clone();
            bytes[12..16].copy_from_slice(&2002_i32.to_le_bytes());
            bytes
        }),
        (
            "fatal-compressed-unknown-original-opcode",
            raw_compressed(2002, ping_size, 0, &ping_payload),
        ),
        (
            "fatal-compressed-short-header",
            fix_length(raw_compressed(2013, ping_size, 0, b"")[..20].to_vec()),
        ),
        (
            "rejected-garbage-bson",
            raw_msg(0, &body_section(b"\x10\0\0\0\x99garbage\xff\xfe\0\0")),
        ),
        ("rejected-bad-checksum", {
            let mut bytes = encode_op_msg(3, 0, OpMsg::CHECKSUM_PRESENT, &ping(), None);
            let last = bytes.len() - 1;
            bytes[last] ^= 0x5a;
            bytes
        }),
        (
            "rejected-unknown-section-kind",
            raw_msg(0, &[body_section(ping().as_bytes()), vec![2]].concat()),
        ),
        ("rejected-no-body", raw_msg(0, b"")),
        (
            "rejected-two-bodies",
            raw_msg(0, &body_section(ping().as_bytes()).repeat(2)),
        ),
        (
            "rejected-illegal-flag",
            raw_msg(1 << 2, &body_section(ping().as_bytes())),
        ),
        ("rejected-duplicate-sequence", {
            let mut seqs = insert_sequences();
            seqs.push(seqs[0].clone());
            encode_op_msg_with_sequences(2, 0, 0, &ping(), &seqs, None)
        }),
        ("rejected-body-length-disagrees", {
            let mut body = ping().into_bytes();
            body[0] += 1;
            raw_msg(0, &body_section(&body))
        }),
        (
            "rejected-invalid-utf8-string",
            corrupt_ping(b"admin", 0, 0xff),
        ),
        (
            "rejected-unknown-bson-type",
            corrupt_ping(b"\x10ping", 0, 0x2a),
        ),
        (
            "rejected-deep-nesting",
            encode_op_msg(1, 0, 0, &nested, None),
        ),
        (
            "rejected-compressed-size-mismatch",
            raw_compressed(2013, ping_size + 1, 0, &ping_payload),
        ),
        (
            "rejected-compressed-unknown-compressor",
            raw_compressed(2013, ping_size, 7, &ping_payload),
        ),
        (
            "rejected-zip-bomb-declared",
            raw_compressed(2013, i32::MAX, 2, b"x"),
        ),
        (
            "rejected-zip-bomb-inflates",
            raw_compressed(2013, 64, 2, &Compressor::Zlib.compress(&[0; 1 << 20])),
        ),
        ("rejected-op-query-trailing-bytes", {
            let mut bytes = encode_op_query(7, &hello_query(), None);
            bytes.extend_from_slice(&[5, 0, 0, 0, 0, 1]);
            fix_length(bytes)
        }),
    ];
    for compressor in [
        Compressor::Noop,
        Compressor::Snappy,
        Compressor::Zlib,
        Compressor::Zstd,
    ] {
        let name = match compressor {
            Compressor::Noop => "ok-compressed-noop",
            Compressor::Snappy => "ok-compressed-snappy",
            Compressor::Zlib => "ok-compressed-zlib",
            Compressor::Zstd => "ok-compressed-zstd",
        };
        seeds.push((name, encode_op_msg(12, 0, 0, &ping(), Some(compressor))));
    }
    seeds
}

#[test]
fn seeds_have_their_expected_outcome() {
    for (name, bytes) in seeds() {
        assert_eq!(
            outcome(&bytes),
            name.split('-').next().unwrap(),
            "seed {name}"
        );
    }
}

#[test]
fn corpus_decodes_without_panicking() {
    let dir = corpus_dir();
    if std::env::var_os("UPDATE_CORPUS").is_some() {
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes) in seeds() {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
    }
    for (name, _) in seeds() {
        assert!(
            dir.join(name).is_file(),
            "seed {name} missing from the corpus: run with UPDATE_CORPUS=1"
        );
    }
    let mut files = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let got = outcome(&bytes);
        if let Some(expected) = OUTCOMES.iter().find(|o| name.starts_with(&format!("{o}-"))) {
            assert_eq!(got, *expected, "corpus file {name}");
        }
        files += 1;
    }
    assert!(files >= 20, "only {files} corpus files");
}
