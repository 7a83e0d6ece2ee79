//! Runs the fuzz corpus (`fuzz/corpus/scram/`) through every SCRAM parser as an ordinary
//! test, so each seed (and every input the fuzzer saved there) is checked by `cargo test`
//! without nightly or libFuzzer.

use std::path::PathBuf;

/// The corpus of this checkout (CARGO_MANIFEST_DIR at run time, as in basalt-wire's).
fn corpus_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
        .join("fuzz/corpus/scram")
}

#[test]
fn every_corpus_input_is_handled_without_a_panic() {
    let mut seen = 0;
    for entry in std::fs::read_dir(corpus_dir()).expect("the corpus directory") {
        let bytes = std::fs::read(entry.expect("a corpus entry").path()).expect("a seed");
        basalt_auth::scram::fuzz_one(&bytes);
        seen += 1;
    }
    assert!(seen >= 10, "the corpus has only {seen} inputs");
}
