#!/usr/bin/env bash
# test.sh - THE test command: dependencies, rustfmt, build, clippy, Rust tests, interop tests,
# a short run of every fuzz target, smbtorture regressions.
#
# usage: scripts/test.sh        (from anywhere; CI runs it via .ci/run)
# env:   SKIP_TORTURE=1         skip the smbtorture stage
#        SKIP_FUZZ=1            skip the fuzz stage
#        FUZZ_SECONDS=N         how long each fuzz target runs (default 10)
#        BRAID_TEST_TARGET=samba   run the pytest stage against the Samba peer instead of braid
#        PYTEST_ARGS="..."      extra pytest arguments (e.g. "-x -k smbclient")
# Logs of every stage: target/test-logs/.  Last line: "N passed, N failed" (cargo test + pytest +
# one check each for rustfmt, clippy and every fuzz target + smbtorture regression check); exit
# status non-zero if anything failed.
set -uo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO" || exit 1
export PATH="$PATH:$HOME/.cargo/bin"
LOGS="$REPO/target/test-logs"
mkdir -p "$LOGS"
P=0; F=0
t0=$(date +%s)
stage() { echo; echo "=== $* ($(( $(date +%s) - t0 ))s)"; }
# add "N passed" / "N failed" counts found in the last matching line of a log
count_line() {  # $1 = line; sets cp cf
  cp="$(echo "$1" | grep -o '[0-9]\+ passed' | grep -o '[0-9]\+' || true)"
  cf="$(echo "$1" | grep -o '[0-9]\+ \(failed\|errors\?\)' | awk '{s += $1} END {print s + 0}')"
  cp="${cp:-0}"; cf="${cf:-0}"
}

stage "install-deps"
if ! bash scripts/install-deps.sh </dev/null; then
  echo "install-deps failed"; F=$((F+1))
fi

# Stale smbtorture DROP rules (from a run killed earlier on this machine) hang loopback connects.
bash interop/iptables-clean.sh

stage "cargo fmt --all --check"
if cargo fmt --all --check </dev/null >"$LOGS/fmt.log" 2>&1; then
  echo "rustfmt: clean"; P=$((P+1))
else
  echo "rustfmt FAILED (run cargo fmt --all; log: $LOGS/fmt.log)"; grep '^Diff in' "$LOGS/fmt.log" | head -n 20
  F=$((F+1))
fi

stage "cargo build --release --workspace"
build_ok=1
cargo build --release --workspace </dev/null 2>&1 | tee "$LOGS/cargo-build.log" | grep -E '^(error|warning: unused)|Finished' | tail -n 20
if [[ ${PIPESTATUS[0]} -ne 0 ]]; then
  echo "cargo build FAILED (log: $LOGS/cargo-build.log)"; tail -n 30 "$LOGS/cargo-build.log"
  build_ok=0; F=$((F+1))
fi

stage "cargo clippy --workspace --all-targets -- -D warnings"
if cargo clippy --workspace --all-targets -- -D warnings </dev/null >"$LOGS/clippy.log" 2>&1; then
  echo "clippy: clean"; P=$((P+1))
else
  echo "clippy FAILED (log: $LOGS/clippy.log)"; grep -A6 -E '^error' "$LOGS/clippy.log" | head -n 40
  F=$((F+1))
fi

stage "cargo test --workspace --release"
cargo test --workspace --release --no-fail-fast </dev/null >"$LOGS/cargo-test.log" 2>&1
rc=$?
cp=0; cf=0
while read -r l; do
  a="$(echo "$l" | sed -n 's/.* \([0-9]\+\) passed; \([0-9]\+\) failed.*/\1 \2/p')"
  [[ -n "$a" ]] && { cp=$((cp + ${a% *})); cf=$((cf + ${a#* })); }
done < <(grep '^test result:' "$LOGS/cargo-test.log")
grep -E '^test .* FAILED$|^error(\[|:)' "$LOGS/cargo-test.log" | head -n 30
# Why each failed: the panic line and the message under it.
grep -A3 -E "^thread '.*' .*panicked at" "$LOGS/cargo-test.log" | grep -v '^stack backtrace:' | head -n 40
if [[ $rc -ne 0 && $cf -eq 0 ]]; then
  echo "cargo test failed without a test failure (compile error?); log: $LOGS/cargo-test.log"
  tail -n 20 "$LOGS/cargo-test.log"; cf=1
fi
echo "cargo test: $cp passed, $cf failed"
P=$((P+cp)); F=$((F+cf))

stage "pytest tests/ (interop, target ${BRAID_TEST_TARGET:-braid})"
if [[ $build_ok == 1 || "${BRAID_TEST_TARGET:-braid}" == samba ]]; then
  # shellcheck disable=SC2086
  python3 -m pytest tests/ -q ${PYTEST_ARGS:-} </dev/null 2>&1 | tee "$LOGS/pytest.log" | grep -Ev '^\.+ *(\[ *[0-9]+%\])?$'
  rc=${PIPESTATUS[0]}
  count_line "$(grep -E '[0-9]+ (passed|failed|errors?)' "$LOGS/pytest.log" | tail -n 1)"
  if [[ $rc -ne 0 && $cf -eq 0 ]]; then echo "pytest exited $rc"; cf=1; fi
  echo "pytest: $cp passed, $cf failed"
  P=$((P+cp)); F=$((F+cf))
else
  echo "skipped: no braid binary (build failed)"; F=$((F+1))
fi

# Every fuzz target (fuzz/, its own cargo project, built by cargo-fuzz with the nightly
# toolchain) runs for FUZZ_SECONDS from its corpus in fuzz/corpus/T (git-ignored; libFuzzer
# adds what it finds); each counts as one check. A crash input is saved in fuzz/artifacts/T/.
stage "fuzz: every target for ${FUZZ_SECONDS:-10}s"
if [[ "${SKIP_FUZZ:-0}" == 1 ]]; then
  echo "skipped (SKIP_FUZZ=1)"
else
  bash scripts/fuzz-all.sh "${FUZZ_SECONDS:-10}" </dev/null 2>&1 | tee "$LOGS/fuzz.log"
  rc=${PIPESTATUS[0]}
  count_line "$(grep -E '^fuzz: [0-9]+ passed, [0-9]+ failed$' "$LOGS/fuzz.log" | tail -n 1)"
  [[ $rc -ne 0 && $cf -eq 0 ]] && cf=1
  P=$((P+cp)); F=$((F+cf))
fi

stage "smbtorture regression check"
if [[ "${SKIP_TORTURE:-0}" == 1 ]]; then
  echo "skipped (SKIP_TORTURE=1)"
elif [[ $build_ok != 1 ]]; then
  echo "skipped: no braid binary (build failed)"; F=$((F+1))
else
  bash interop/braid-torture.sh </dev/null 2>&1 | tee "$LOGS/torture.log"
  rc=${PIPESTATUS[0]}
  count_line "$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$LOGS/torture.log" | tail -n 1)"
  [[ $rc -ne 0 && $cf -eq 0 ]] && cf=1
  P=$((P+cp)); F=$((F+cf))
fi

stage "done"
echo "$P passed, $F failed"
[[ $F -eq 0 ]]
