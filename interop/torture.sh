#!/usr/bin/env bash
# torture.sh - run smbtorture subtests against an SMB server, one smbtorture process per subtest.
#
# usage: interop/torture.sh HOST PORT SHARE USER PASS SUITE [SUITE...]
#   e.g. interop/torture.sh 127.0.0.1 4475 tmp alice alice-pw smb2.connect smb2.read
#
# Writes one line per subtest, "<name> <PASS|FAIL|SKIP|TIMEOUT|ERROR|NOTRUN>", to $RESULTS (in the
# order of `smbtorture --list`; spaces inside test names become "_"), prints the same lines
# plus a per-suite summary, and ends with "N passed, N failed" (failed = FAIL+TIMEOUT+ERROR+NOTRUN).
# Exit status: 0 if every subtest passed or skipped, 1 otherwise, 2 on usage/setup errors.
#
# env:
#   RESULTS=$OUTDIR/results.txt   results file
#   OUTDIR=$(mktemp -d /tmp/braid-torture.XXXXXX)   raw smbtorture output, one file per subtest
#   TEST_TIMEOUT=60               seconds per subtest (SIGTERM, SIGKILL 5 s later) -> TIMEOUT
#   SLOW_TESTS=                   subtest names (space-separated) that get SLOW_TIMEOUT (90) instead
#   JOBS=1                        suites run in parallel (2 is OK on 2 cores; subtests of one suite
#                                 always run one after the other: they share file names on the share)
#   TOTAL_TIMEOUT=0               if > 0: seconds for the whole run; subtests not started by then are
#                                 reported NOTRUN (counted as failed)
#   MAXPROTO=                     smbtorture -m (e.g. SMB3_00); default: client max protocol = SMB3
#   TORTURE_OPTS=                 extra smbtorture args (word-split), e.g. --option=torture:foo=bar
#   PLAIN_TESTS=                  subtests run without TORTURE_OPTS (space-separated names)
#   SHARE_PER_SUITE=              if set: each suite uses the share named after it (dots and dashes
#                                 as "_", e.g. smb2_lock) instead of SHARE
set -uo pipefail

if [[ "${1:-}" == "__suite" ]]; then
  # internal: run every subtest of one suite; all settings come from the environment
  suite="$2"
  out="$OUTDIR/suite.$suite.results"; : >"$out"
  smbtorture -s "$CLIENT_CONF" --list "$suite" 2>/dev/null | tail -n +2 | sed 's/\.[^.]*$//' |
    awk -v s="$suite" '$0 == s || index($0, s ".") == 1' >"$OUTDIR/suite.$suite.list"
  if [[ ! -s "$OUTDIR/suite.$suite.list" ]]; then
    echo "$suite ERROR" >"$out"; exit 0
  fi
  # SHARE_PER_SUITE: each suite on its own share, named after it (smb2.lock -> smb2_lock),
  # so that suites running in parallel do not see one another's changes.
  share="$T_SHARE"
  if [[ -n "${SHARE_PER_SUITE:-}" ]]; then share="${suite//[.-]/_}"; fi
  read -r -a extra <<<"${TORTURE_OPTS:-}"
  [[ -n "${MAXPROTO:-}" ]] && extra+=(-m "$MAXPROTO")
  while IFS= read -r name; do
    safe="${name// /_}"
    if [[ "${DEADLINE:-0}" -gt 0 && $(date +%s) -ge "$DEADLINE" ]]; then
      echo "$safe NOTRUN" >>"$out"; echo "$safe NOTRUN"; continue
    fi
    raw="$OUTDIR/raw/$safe.subunit"
    limit="$TEST_TIMEOUT"
    [[ " ${SLOW_TESTS:-} " == *" $name "* ]] && limit="${SLOW_TIMEOUT:-90}"
    opts=("${extra[@]}")
    if [[ " ${PLAIN_TESTS:-} " == *" $name "* ]]; then
      opts=(); [[ -n "${MAXPROTO:-}" ]] && opts+=(-m "$MAXPROTO")
    fi
    timeout -k 5 "$limit" smbtorture -s "$CLIENT_CONF" "//$T_HOST/$share" -p "$T_PORT" \
      -U "$T_USER" --password="$T_PASS" --format=subunit --fullname --basedir="$OUTDIR/base" \
      "${opts[@]}" "$name" >"$raw" 2>&1 </dev/null
    rc=$?
    # subunit v1 result lines: "success: NAME", "failure: NAME [", "skip: NAME [ reason ]", ...
    res="$(awk -v n="$name" '
      { line=$0; tag=line; sub(/:.*/, "", tag); rest=substr(line, length(tag)+3); sub(/ \[.*$/, "", rest) }
      rest == n && (tag=="failure" || tag=="error" || tag=="fail") { bad=1 }
      rest == n && (tag=="success" || tag=="successful" || tag=="uxsuccess") { ok=1 }
      rest == n && (tag=="skip") { skip=1 }
      rest == n && (tag=="xfail") { bad=1 }
      END { if (bad) print "FAIL"; else if (ok) print "PASS"; else if (skip) print "SKIP" }' "$raw")"
    if [[ -z "$res" ]]; then
      if [[ $rc -eq 124 || $rc -eq 137 ]]; then res=TIMEOUT; else res=ERROR; fi
    fi
    echo "$safe $res" >>"$out"
    echo "$safe $res"
  done <"$OUTDIR/suite.$suite.list"
  exit 0
fi

if [[ $# -lt 6 ]]; then
  sed -n '2,/^set -uo/p' "$0" | sed '$d' >&2
  exit 2
fi
command -v smbtorture >/dev/null || { echo "smbtorture not installed (scripts/install-deps.sh)" >&2; exit 2; }

export T_HOST="$1" T_PORT="$2" T_SHARE="$3" T_USER="$4" T_PASS="$5"
shift 5
export TEST_TIMEOUT="${TEST_TIMEOUT:-60}"
export OUTDIR="${OUTDIR:-$(mktemp -d /tmp/braid-torture.XXXXXX)}"
export MAXPROTO="${MAXPROTO:-}" TORTURE_OPTS="${TORTURE_OPTS:-}" PLAIN_TESTS="${PLAIN_TESTS:-}"
RESULTS="${RESULTS:-$OUTDIR/results.txt}"
JOBS="${JOBS:-1}"
export DEADLINE=0
[[ "${TOTAL_TIMEOUT:-0}" -gt 0 ]] && DEADLINE=$(( $(date +%s) + TOTAL_TIMEOUT ))
mkdir -p "$OUTDIR"/{raw,base,client/{lock,private,state,cache,run,ncalrpc}} || exit 2
OUTDIR="$(cd "$OUTDIR" && pwd)"

# private client config: the system smb.conf never influences a run
export CLIENT_CONF="$OUTDIR/client/smb.conf"
cat >"$CLIENT_CONF" <<CONF
[global]
  workgroup = WORKGROUP
  client min protocol = SMB2_02
  client max protocol = SMB3
  disable netbios = yes
  name resolve order = host
  lock directory = $OUTDIR/client/lock
  private dir = $OUTDIR/client/private
  state directory = $OUTDIR/client/state
  cache directory = $OUTDIR/client/cache
  pid directory = $OUTDIR/client/run
  ncalrpc dir = $OUTDIR/client/ncalrpc
CONF

start=$(date +%s)
printf '%s\n' "$@" | xargs -d '\n' -P "$JOBS" -I{} bash "$0" __suite {}

: >"$RESULTS"
P=0; F=0; S=0
for suite in "$@"; do
  f="$OUTDIR/suite.$suite.results"
  [[ -s "$f" ]] || echo "$suite ERROR" >"$f"
  cat "$f" >>"$RESULTS"
  p=$(grep -c ' PASS$' "$f"); s=$(grep -c ' SKIP$' "$f"); n=$(wc -l <"$f")
  echo "## $suite: $p passed, $((n-p-s)) failed, $s skipped"
  P=$((P+p)); S=$((S+s)); F=$((F+n-p-s))
done
echo "## total: $P passed, $F failed, $S skipped in $(( $(date +%s) - start ))s; results: $RESULTS; raw: $OUTDIR/raw"
echo "$P passed, $F failed"
[[ $F -eq 0 ]]
