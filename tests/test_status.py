"""`braid status` and the admin endpoint: sessions, channels and byte counters of a live server."""
import json
import re
import subprocess
import urllib.request

import pytest

from harness import Smb


def braid_exe(srv):
    return srv.proc.args[0]


def status_json(srv):
    cfg = srv.root / "braid.toml"
    r = subprocess.run([braid_exe(srv), "status", "--config", str(cfg), "--json"], capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_status_lists_session_and_channel(braid_server):
    if braid_server.target != "braid":
        pytest.skip("braid only")
    s = Smb(braid_server)
    try:
        st = status_json(braid_server)
        mine = [x for x in st["sessions"] if x["user"].lower() == braid_server.user.lower()]
        assert mine, st
        sess = mine[0]
        assert sess["current_channels"] == len(sess["channels"]) >= 1
        assert sess["dialect"] == "3.1.1"
        assert sess["signing"] is True
        ch = sess["channels"][0]
        assert ch["bytes_in"] > 0 and ch["bytes_out"] > 0
        # The human table names the same session.
        cfg = braid_server.root / "braid.toml"
        r = subprocess.run([braid_exe(braid_server), "status", "--config", str(cfg)], capture_output=True, text=True, timeout=20)
        assert r.returncode == 0 and f"user {sess['user']}" in r.stdout, r.stdout + r.stderr
    finally:
        s.close()


def metrics_text(srv):
    port = srv.port + 10000 if srv.port + 10000 < 65536 else srv.port - 10000
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()


def test_metrics_endpoint(braid_server):
    if braid_server.target != "braid":
        pytest.skip("braid only")
    body = metrics_text(braid_server)
    assert "braid_connections" in body and "braid_sessions" in body


def parse_samples(body):
    """Prometheus text -> {(name, frozenset(labels)): value}, checking each line's shape."""
    samples = {}
    sample = re.compile(r'^([a-z_]+)(?:\{([^}]*)\})? (\S+)$')
    for line in body.splitlines():
        if not line or line.startswith("#"):
            assert line == "" or line.startswith("# HELP ") or line.startswith("# TYPE "), line
            continue
        m = sample.match(line)
        assert m, f"malformed sample line: {line!r}"
        labels = frozenset(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        samples[(m.group(1), labels)] = float(m.group(3))
    return samples


def op_counts(samples, op):
    get = lambda result: samples.get(("braid_ops_total", frozenset({("protocol", "smb"), ("op", op), ("result", result)})), 0)
    return get("ok"), get("error")


def test_per_operation_counts_and_histograms(braid_server):
    if braid_server.target != "braid":
        pytest.skip("braid only")
    from smbprotocol.open import CreateDisposition, FilePipePrinterAccessMask as A
    before = parse_samples(metrics_text(braid_server))
    s = Smb(braid_server)
    try:
        for i in range(5):
            f = s.open(f"metrics-{i}.txt", disposition=CreateDisposition.FILE_OVERWRITE_IF)
            f.write(b"x" * 100, 0)
            f.read(0, 100)
            f.close()
        for _ in range(3):  # each fails: an error result
            with pytest.raises(Exception):
                s.open("no-such-dir/none.txt", access=A.GENERIC_READ, disposition=CreateDisposition.FILE_OPEN)
    finally:
        s.close()
    after = parse_samples(metrics_text(braid_server))
    ok0, err0 = op_counts(before, "CREATE")
    ok1, err1 = op_counts(after, "CREATE")
    assert ok1 - ok0 >= 5 and err1 - err0 >= 3, (ok0, err0, ok1, err1)
    for op, n in (("WRITE", 5), ("READ", 5), ("CLOSE", 5), ("SESSION_SETUP", 1), ("TREE_CONNECT", 1), ("NEGOTIATE", 1)):
        assert sum(op_counts(after, op)) - sum(op_counts(before, op)) >= n, op
    # Every histogram is well formed: buckets cumulative in le order, +Inf == _count ==
    # ok + error of the same operation, _sum positive.
    ops = {dict(k[1])["op"] for k in after if k[0] == "braid_op_latency_seconds_bucket"}
    assert {"CREATE", "READ", "WRITE", "CLOSE"} <= ops, ops
    for op in ops:
        base = {("protocol", "smb"), ("op", op)}
        buckets = sorted(
            (float(dict(k[1])["le"]), v) for k, v in after.items()
            if k[0] == "braid_op_latency_seconds_bucket" and base <= k[1]
        )
        assert buckets[-1][0] == float("inf") and len(buckets) >= 10, buckets
        assert all(a[1] <= b[1] for a, b in zip(buckets, buckets[1:])), (op, buckets)
        count = after[("braid_op_latency_seconds_count", frozenset(base))]
        assert buckets[-1][1] == count == sum(op_counts(after, op)), (op, buckets[-1], count)
        assert after[("braid_op_latency_seconds_sum", frozenset(base))] > 0
    # The CREATE histogram moved by at least the 8 CREATEs made here.
    key = ("braid_op_latency_seconds_count", frozenset({("protocol", "smb"), ("op", "CREATE")}))
    assert after[key] - before.get(key, 0) >= 8
    # No share caches metadata yet unless its backend says so; the families are then absent.
    for k in after:
        if k[0].startswith("braid_metadata_cache_"):
            assert dict(k[1]).keys() == {"share"}, k
    # `braid status` prints the per-operation table with the same counts.
    st = status_json(braid_server)
    create = next(o for o in st["ops"] if o["op"] == "CREATE")
    assert create["protocol"] == "smb" and create["count"] >= 8 and create["errors"] >= 3
    assert 0 < create["p50_us"] <= create["p99_us"], create
    cfg = braid_server.root / "braid.toml"
    r = subprocess.run([braid_exe(braid_server), "status", "--config", str(cfg)], capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    row = next((l for l in r.stdout.splitlines() if l.split()[1:2] == ["CREATE"]), None)
    assert row and row.split()[0] == "smb", r.stdout


def test_status_unreachable_is_one_clear_line(braid_server, tmp_path):
    if braid_server.target != "braid":
        pytest.skip("braid only")
    r = subprocess.run([braid_exe(braid_server), "status", "--admin", "127.0.0.1:1"], capture_output=True, text=True, timeout=20)
    assert r.returncode != 0
    assert r.stderr.startswith("braid: error: cannot reach the admin endpoint"), r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def share_sample(samples, name, share):
    return samples.get((name, frozenset({("share", share)})))


def test_per_share_use_in_status_metrics_and_table(braid_server):
    """Each share's limits and use: `/status` lists every share, `/metrics` has the
    braid_share_* series per share, and I/O on one share moves its totals only."""
    if braid_server.target != "braid":
        pytest.skip("braid only")
    from smbprotocol.open import CreateDisposition
    st = status_json(braid_server)
    assert [s["share"] for s in st["shares"]] == ["data", "ro", "alice_only"], st["shares"]
    assert all(v is None for v in st["shares"][0]["limits"].values()), st["shares"][0]
    before = parse_samples(metrics_text(braid_server))
    size = 200 * 1024  # 4 IOs of 64 KiB or part of it, per WRITE and per READ
    s = Smb(braid_server)
    try:
        for i in range(3):
            f = s.open(f"share-use-{i}.bin", disposition=CreateDisposition.FILE_OVERWRITE_IF)
            f.write(b"q" * size, 0)
            assert len(f.read(0, size)) == size
            f.close()
    finally:
        s.close()
    after = parse_samples(metrics_text(braid_server))
    for share in ("data", "ro", "alice_only"):
        for name in ("braid_share_iops", "braid_share_io_total", "braid_share_read_bytes_total", "braid_share_write_bytes_total",
                     "braid_share_throttled_requests_total", "braid_share_throttled_seconds_total"):
            assert share_sample(after, name, share) is not None, (name, share)
        assert share_sample(after, "braid_share_iops_limit", share) is None, "an unlimited share has no limit series"
    delta = lambda name, share: share_sample(after, name, share) - share_sample(before, name, share)
    assert delta("braid_share_write_bytes_total", "data") >= 3 * size
    assert delta("braid_share_read_bytes_total", "data") >= 3 * size
    assert delta("braid_share_io_total", "data") >= 3 * (4 + 4), "64 KiB units of the WRITEs and READs"
    assert delta("braid_share_io_total", "ro") == 0 and delta("braid_share_write_bytes_total", "alice_only") == 0
    assert delta("braid_share_throttled_requests_total", "data") == 0, "an unlimited share never waits"
    # The table has a row per share with its limits.
    cfg = braid_server.root / "braid.toml"
    r = subprocess.run([braid_exe(braid_server), "status", "--config", str(cfg)], capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    header = next((l for l in r.stdout.splitlines() if l.split()[:2] == ["share", "IOPS"]), None)
    assert header and "credits left" in header and "throttled" in header, r.stdout
    row = next((l for l in r.stdout.splitlines() if l.split()[:1] == ["data"] and "unlimited" in l), None)
    assert row, r.stdout
