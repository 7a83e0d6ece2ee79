#!/usr/bin/env bash
# Fuzzes the wire-protocol decoder (the `decode` target of crates/wire/fuzz) and the SCRAM
# message parsers (the `scram` target of crates/auth/fuzz), each for the given number of
# seconds (default 60). Needs a nightly toolchain and cargo-fuzz; without them it says
# how to get them and exits non-zero, so a skipped fuzz run is never mistaken for a
# clean one.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}

if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  cat <<EOF
fuzz: cargo-fuzz (with a nightly toolchain) is not installed. Install it with
    rustup toolchain install nightly
    cargo install cargo-fuzz
and run again: make fuzz FUZZ_SECONDS=$seconds
EOF
  exit 1
fi

# libFuzzer adds the inputs it finds to the first corpus directory: a temporary one, so
# the committed seeds in corpus/<target> are read but the work tree stays clean. Sanitizer
# builds stay in each fuzz project's own target/ (git-ignored), away from the shared
# CARGO_TARGET_DIR that the stable builds use.
for project in "crates/wire/fuzz decode" "crates/auth/fuzz scram"; do
  read -r fuzz_dir target <<<"$project"
  found=$(mktemp -d)
  (cd "$fuzz_dir" && env -u CARGO_TARGET_DIR cargo +nightly fuzz run "$target" "$found" "corpus/$target" -- \
    -max_total_time="$seconds")
  rm -rf "$found"
done
