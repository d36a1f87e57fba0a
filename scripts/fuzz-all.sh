#!/usr/bin/env bash
# fuzz-all.sh - build every cargo-fuzz target in fuzz/ once, then run each for a bounded time.
#
# usage: scripts/fuzz-all.sh [SECONDS]     (default 10 per target; scripts/test.sh calls it)
# Needs the nightly toolchain and cargo-fuzz (scripts/install-deps.sh installs cargo-fuzz).
# Each target starts from fuzz/corpus/TARGET (git-ignored; created on the first run and grown
# by libFuzzer) and saves a crashing input in fuzz/artifacts/TARGET/ (git-ignored).
# Last line: "fuzz: N passed, N failed" (one check per target; the build counts as a failure
# of every target when it fails). Exit status non-zero if anything failed.
set -uo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO" || exit 1
export PATH="$PATH:$HOME/.cargo/bin"
SECS="${1:-10}"
LOGS="$REPO/target/test-logs/fuzz"
mkdir -p "$LOGS"

if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "fuzz: cargo-fuzz or the nightly toolchain is missing (scripts/install-deps.sh)"
  echo "fuzz: 0 passed, 1 failed"; exit 1
fi
mapfile -t targets < <(cargo +nightly fuzz list 2>/dev/null)
if ((${#targets[@]} == 0)); then
  echo "fuzz: no targets listed by cargo fuzz list"; echo "fuzz: 0 passed, 1 failed"; exit 1
fi

t0=$(date +%s)
# `cargo fuzz run` builds with the same flags as a plain `cargo fuzz build` (not `-O`, which
# rebuilds everything): building first keeps compile time out of the per-target time limit.
if ! cargo +nightly fuzz build </dev/null >"$LOGS/build.log" 2>&1; then
  echo "fuzz build FAILED (log: $LOGS/build.log)"; tail -n 30 "$LOGS/build.log"
  echo "fuzz: 0 passed, ${#targets[@]} failed"; exit 1
fi
echo "fuzz build: $(( $(date +%s) - t0 ))s for ${#targets[@]} targets"

P=0; F=0
for t in "${targets[@]}"; do
  log="$LOGS/$t.log"
  ts=$(date +%s)
  # -timeout: one input running over 10 s is a hang (libFuzzer saves it as timeout-*);
  # the outer timeout covers a run that does not stop at -max_total_time.
  timeout --kill-after=10 $((SECS + 60)) cargo +nightly fuzz run "$t" -- \
    -max_total_time="$SECS" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 </dev/null >"$log" 2>&1
  rc=$?
  runs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -n 1)"
  if [[ $rc -eq 0 ]]; then
    echo "fuzz $t: ok, ${runs:-?} runs in $(( $(date +%s) - ts ))s"; P=$((P+1))
  else
    F=$((F+1))
    [[ $rc -eq 124 || $rc -eq 137 ]] && echo "fuzz $t: did not stop within $((SECS + 60))s"
    echo "fuzz $t: FAILED (exit $rc; log: $log)"
    grep -E '^==[0-9]+==ERROR|panicked at|^SUMMARY' "$log" | head -n 5
    saved="$(grep -oE 'Test unit written to [^ ]+' "$log" | awk '{print $NF}' | tail -n 1)"
    echo "fuzz $t: crash input saved to ${saved:-fuzz/artifacts/$t/ (see log)}"
    [[ -n "$saved" ]] && echo "  reproduce: cargo +nightly fuzz run $t $saved"
  fi
done
echo "fuzz: $P passed, $F failed"
[[ $F -eq 0 ]]
