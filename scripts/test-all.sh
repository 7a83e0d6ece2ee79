#!/usr/bin/env bash
# The whole test suite, run by `make test` (and so by CI's .ci/run).
#
# Runs every step even when an earlier one fails, so one run reports everything that
# is broken; steps that need the server binary are skipped (and count as failed) if it
# did not build. Ends with one line per step (result and seconds) and a final verdict;
# exits non-zero if any step failed.
set -uo pipefail
cd "$(dirname "$0")/.."

# "label|make target|needs the binary"
STEPS=(
  "rustfmt|fmt-check|no"
  "clippy|clippy|no"
  "cargo test (unit + Rust driver e2e)|cargo-test|no"
  "go test (linearizability checker)|go-test|no"
  "build basalt binary|build|no"
  "python venv|venv|no"
  "ruff (python lint)|py-lint|no"
  "node modules|node-deps|no"
  "chromium (status page test)|browser|no"
  "conformance (vs baseline)|conformance|yes"
  "pytest e2e|pytest|yes"
  "node driver + mongosh|node-test|yes"
  "documentdb functional suite (vs baseline)|documentdb-ft|yes"
  "documentdb functional suite, replica set|documentdb-ft-replicaset|yes"
  "spark connector (PySpark, 1 M documents)|spark-test|yes"
)

results=()
failed=()
built=yes
suite_start=$SECONDS

for step in "${STEPS[@]}"; do
  IFS='|' read -r label target needs_binary <<<"$step"
  echo
  echo "==> ${label} (make ${target})"
  start=$SECONDS
  if [[ $needs_binary == yes && $built != yes ]]; then
    echo "skipped: the basalt binary did not build"
    status=SKIP
  elif make --no-print-directory "$target"; then
    status=PASS
  else
    status=FAIL
  fi
  [[ $target == build && $status != PASS ]] && built=no
  # cargo test built the server binary too; rebuilding it with `cargo build` would
  # recompile dependencies for a different feature set.
  [[ $target == cargo-test && $status == PASS ]] && export SKIP_BUILD=1
  [[ $status != PASS ]] && failed+=("$label")
  results+=("$(printf '%-5s %-40s %5ds' "$status" "$label" $((SECONDS - start)))")
done

echo
echo "==> summary (seconds per step)"
printf '%s\n' "${results[@]}"
total=$((SECONDS - suite_start))
if ((${#failed[@]} == 0)); then
  echo "make test: PASSED, all ${#STEPS[@]} steps in ${total}s"
  exit 0
fi
echo "make test: FAILED in ${total}s: $(IFS=','; echo "${failed[*]}" | sed 's/,/, /g')"
exit 1
