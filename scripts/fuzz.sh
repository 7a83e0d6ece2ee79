#!/usr/bin/env bash
# Fuzzes the wire-protocol decoder (the `decode` target of crates/wire/fuzz) for the
# given number of seconds (default 60). Needs a nightly toolchain and cargo-fuzz;
# without them it says how to get them and exits non-zero, so a skipped fuzz run is
# never mistaken for a clean one.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
fuzz_dir=crates/wire/fuzz

if [[ ! -f $fuzz_dir/Cargo.toml ]]; then
  echo "fuzz: no cargo-fuzz project at $fuzz_dir yet (expected a 'decode' target there)"
  exit 1
fi
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
# the committed seeds in corpus/decode are read but the work tree stays clean. Sanitizer
# builds stay in the fuzz project's own target/ (git-ignored), away from the shared
# CARGO_TARGET_DIR that the stable builds use.
cd "$fuzz_dir"
found=$(mktemp -d)
trap 'rm -rf "$found"' EXIT
env -u CARGO_TARGET_DIR cargo +nightly fuzz run decode "$found" corpus/decode -- \
  -max_total_time="$seconds"
