"""The live page at http://ADMIN/ in a real headless browser (Debian's `chromium`).

Braid serves a share while `braid bench` reads and writes it; chromium loads the admin page
and the test reads what the page rendered (through the DevTools protocol over a pipe, so no
extra Python package is needed): the share's row shows IOPS and MiB/s above zero and they
change between two reads a few seconds apart, the charts are drawn, the bench's session and
its channel are listed, an idle share stays at zero, and when the configuration accepts
limits the provisioned figure is shown. Every request the page makes goes to the admin
address, and the Content-Security-Policy blocks one that does not.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import shutil
import subprocess
import threading
import time
import urllib.request

import pytest

import harness

pytestmark = pytest.mark.skipif(os.environ.get("BRAID_TEST_TARGET", "braid").strip().lower() != "braid",
                                reason="the admin page is Braid's")

# Limits far above what the bench reaches here: the page must show them, the bench must not
# feel them. Used only when this build's configuration accepts the keys.
IOPS_LIMIT = 900000
THROUGHPUT_LIMIT = "64GiB"


def chromium_exe() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "chromium is not installed (scripts/install-deps.sh installs Debian's chromium)"
    return exe


class Browser:
    """Headless chromium driven through the DevTools protocol on a pipe (fds 3 and 4:
    NUL-terminated JSON messages), with one page target attached."""

    def __init__(self, profile):
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        # Out of the way of fds 3 and 4, which the child gets them at.
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 20) for fd in (to_child_r, from_child_w)]
        for fd in (to_child_r, from_child_w):
            os.close(fd)

        def child_fds():
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        args = [chromium_exe(), "--headless=new", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
                f"--user-data-dir={profile}", "--no-first-run", "--no-default-browser-check",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-extensions", "--window-size=1400,1600", "about:blank"]
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     preexec_fn=child_fds, pass_fds=(3, 4), start_new_session=True)
        for fd in high:
            os.close(fd)
        self.w = os.fdopen(to_child_w, "wb", buffering=0)
        self.r = os.fdopen(from_child_r, "rb", buffering=0)
        self.replies: dict[int, dict] = {}
        self.events: list[dict] = []
        self.cond = threading.Condition()
        self.next_id = 0
        self.session = None
        threading.Thread(target=self._read, daemon=True).start()
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Network", "Runtime", "Log"):
            self.call(f"{domain}.enable")

    def _read(self):
        buf = b""
        while True:
            chunk = self.r.read(65536)
            if not chunk:
                break
            buf += chunk
            while b"\0" in buf:
                msg, buf = buf.split(b"\0", 1)
                m = json.loads(msg)
                with self.cond:
                    if "id" in m:
                        self.replies[m["id"]] = m
                    else:
                        self.events.append(m)
                    self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    def call(self, method, timeout=20, **params):
        with self.cond:
            self.next_id += 1
            mid = self.next_id
        msg = {"id": mid, "method": method, "params": params}
        if self.session and not method.startswith("Target."):
            msg["sessionId"] = self.session
        self.w.write(json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        with self.cond:
            while mid not in self.replies:
                left = deadline - time.monotonic()
                assert left > 0 and self.proc.poll() is None, f"chromium did not answer {method}"
                self.cond.wait(left)
            reply = self.replies.pop(mid)
        assert "error" not in reply, f"{method}: {reply['error']}"
        return reply["result"]

    def eval(self, expr, timeout=20):
        """The value of a JavaScript expression (awaited if it is a promise)."""
        r = self.call("Runtime.evaluate", timeout=timeout, expression=expr, returnByValue=True, awaitPromise=True)
        assert "exceptionDetails" not in r, r["exceptionDetails"]
        return r["result"].get("value")

    def events_named(self, method):
        with self.cond:
            return [e["params"] for e in self.events if e.get("method") == method]

    def close(self):
        try:
            self.w.close()
        finally:
            try:
                self.proc.terminate()
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
            self.r.close()


# What the page shows, as the browser rendered it: the share rows' texts and raw values, the
# session rows, and how much of each chart canvas is painted.
SNAPSHOT_JS = r"""
(() => {
  const row = (tr) => Object.fromEntries([...tr.querySelectorAll('td[data-field]')].map(
      (td) => [td.dataset.field, {text: td.textContent, value: td.dataset.value === undefined ? null : Number(td.dataset.value)}]));
  const painted = (c) => {
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 3; i < d.length; i += 4) if (d[i] !== 0) n++;
    return n;
  };
  return {
    polls: Number(document.body.dataset.polls || 0),
    state: document.getElementById('state').textContent,
    shares: Object.fromEntries([...document.querySelectorAll('#shares-table tr[data-share]')].map((tr) => [tr.dataset.share, row(tr)])),
    clients: Object.fromEntries([...document.querySelectorAll('article[data-share]')].map((a) => [a.dataset.share,
      [...a.querySelectorAll('table.clients tr')].filter((tr) => tr.querySelector('td[data-field]')).map(row)])),
    limits: Object.fromEntries([...document.querySelectorAll('article[data-share]')].map((a) => [a.dataset.share, a.querySelector('.limits').textContent])),
    sessions: [...document.querySelectorAll('#sessions-table tr[data-session]')].map(row),
    charts: [...document.querySelectorAll('article[data-share] canvas')].map((c) => ({
      share: c.closest('article').dataset.share, chart: c.dataset.chart, points: Number(c.dataset.points || 0),
      painted: painted(c), max: Number(c.dataset.max || 0), shown: c.closest('figure').hidden === false})),
    ops: [...document.querySelectorAll('#ops-table tr[data-op]')].map((tr) => tr.dataset.op),
    admission: Object.fromEntries([...document.querySelectorAll('#admission-table tr[data-protocol]')].map((tr) => [tr.dataset.protocol, row(tr)])),
  };
})()
"""


def limits_accepted(tmp) -> bool:
    """Whether this build's configuration takes the per-share `iops` and `throughput` keys."""
    d = tmp / "probe"
    d.mkdir()
    cfg = tmp / "probe.toml"
    cfg.write_text(harness.braid_config(harness.free_port(), {"u": "p"}, [
        {"name": "s", "path": str(d), "lines": [f"iops = {IOPS_LIMIT}", f'throughput = "{THROUGHPUT_LIMIT}"']}]))
    r = subprocess.run([str(harness.braid_bin()), "check", "--config", str(cfg)], capture_output=True, text=True, timeout=20)
    return r.returncode == 0


def wait_for(pred, what, timeout):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.25)


def number(cell) -> float:
    return float(cell["text"].replace(",", "").split()[0])


def test_live_page_in_headless_chromium():
    root = harness.tmp_dir("braid-page-")
    users = {"alice": "A-" + secrets.token_urlsafe(12), "bob": "B-" + secrets.token_urlsafe(12)}
    limited = limits_accepted(root)
    admin_port = harness.free_port()
    admin = f"127.0.0.1:{admin_port}"
    qos_lines = [f"iops = {IOPS_LIMIT}", f'throughput = "{THROUGHPUT_LIMIT}"'] if limited else []
    srv = harness.start_braid(root, users, share_specs=[{"name": "busy", "lines": qos_lines}, {"name": "idle"}],
                              server_extra=[f'admin = "{admin}"'])
    bench = browser = None
    try:
        # The bench: reads and writes of 64 KiB on one share, longer than the test needs.
        url = f"smb://alice@127.0.0.1:{srv.port}/busy"
        bench_log = root / "bench.log"
        with open(bench_log, "wb") as log:
            bench = subprocess.Popen([str(harness.braid_bin()), "bench", "-d", "40", "-t", "2", "-o", "4", "-b", "64k", "-w", "30",
                                      "-c", "16m", "--dir", "b", url], env=dict(os.environ, BRAID_BENCH_PASSWORD=users["alice"]),
                                     stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

        def measuring():
            assert bench.poll() is None, f"braid bench ended early: {bench_log.read_text(errors='replace')[-2000:]}"
            st = json.loads(urllib.request.urlopen(f"http://{admin}/status", timeout=5).read())
            return st["sessions"] and any(o["op"] == "READ" and o["count"] > 0 for o in st["ops"])
        wait_for(measuring, "the bench to read", 20)

        browser = Browser(root / "profile")
        browser.call("Page.navigate", url=f"http://{admin}/")
        wait_for(lambda: browser.eval("Number(document.body && document.body.dataset.polls || 0)") >= 3, "three polls", 15)
        first = browser.eval(SNAPSHOT_JS)
        time.sleep(3)
        second = browser.eval(SNAPSHOT_JS)
        assert second["polls"] > first["polls"] and second["state"] == "live", second

        for snap in (first, second):
            busy, idle = snap["shares"]["busy"], snap["shares"]["idle"]
            assert number(busy["iops"]) > 0 and busy["iops"]["value"] > 0, busy
            assert busy["read_mibps"]["value"] > 0 and busy["write_mibps"]["value"] > 0, busy
            assert number(busy["read_mibps"]) > 0, busy
            assert idle["iops"]["value"] == 0 and idle["read_mibps"]["value"] == 0, idle
        # The bench is the busy share's top client; the idle share has none.
        top = second["clients"]["busy"]
        assert top and "alice" in top[0]["client"]["text"] and top[0]["iops"]["value"] > 0, top
        assert second["clients"]["idle"] == [], second["clients"]["idle"]
        moved = [k for k in ("iops", "read_mibps", "write_mibps") if first["shares"]["busy"][k]["text"] != second["shares"]["busy"][k]["text"]]
        assert moved, (first["shares"]["busy"], second["shares"]["busy"])

        if limited:
            busy = second["shares"]["busy"]
            assert busy["iops_limit"]["value"] == IOPS_LIMIT and busy["iops_limit"]["text"].startswith(f"{IOPS_LIMIT:,}"), busy
            assert f"{IOPS_LIMIT:,} IOPS" in second["limits"]["busy"], second["limits"]
        else:
            assert second["shares"]["busy"]["iops_limit"]["text"] == "unlimited"
        assert second["limits"]["idle"].startswith("Unlimited"), second["limits"]

        # The charts: drawn, and holding more points the longer the page runs.
        charts = {(c["share"], c["chart"]): c for c in second["charts"]}
        for chart in ("iops", "mibps"):
            c = charts[("busy", chart)]
            # Painted beyond the grid, and scaled to data: an all-zero chart's axis tops at 1.
            assert c["shown"] and c["painted"] > 1000 and c["max"] > 1, c
            before = next(x for x in first["charts"] if (x["share"], x["chart"]) == ("busy", chart))
            assert c["points"] > before["points"], (before, c)

        # The bench's session and its channel, with traffic.
        mine = [s for s in second["sessions"] if s.get("user", {}).get("text", "").lower() == "alice"]
        assert mine, second["sessions"]
        assert mine[0]["dialect"]["text"] == "3.1.1" and mine[0]["bytes_out"]["value"] > 0, mine[0]
        assert any(s["out_mibps"]["value"] > 0 for s in mine), mine
        assert {"smb READ", "smb WRITE"} <= set(second["ops"]), second["ops"]
        # The connection limits: the bench's SMB connections are held, and no limit was hit.
        smb = second["admission"]["smb"]
        assert smb["connections"]["value"] >= 1 and smb["connections"]["text"].endswith("/ 1,024"), smb
        assert smb["limit_hits"]["text"] == "none", smb

        # Nothing was fetched from anywhere but the admin endpoint, and the policy came with
        # the page and holds: a request elsewhere is refused by the browser.
        urls = [e["request"]["url"] for e in browser.events_named("Network.requestWillBeSent")]
        assert urls and all(u.startswith(f"http://{admin}/") for u in urls), urls
        assert {f"http://{admin}/", f"http://{admin}/app.js", f"http://{admin}/style.css", f"http://{admin}/status"} <= set(urls), urls
        doc = next(e["response"] for e in browser.events_named("Network.responseReceived") if e["response"]["url"] == f"http://{admin}/")
        csp = {k.lower(): v for k, v in doc["headers"].items()}.get("content-security-policy", "")
        assert "default-src 'none'" in csp and "connect-src 'self'" in csp, doc["headers"]
        blocked = browser.eval("""new Promise((done) => {
            document.addEventListener('securitypolicyviolation', (e) => done(e.violatedDirective), {once: true});
            fetch('http://127.0.0.2:9/').catch(() => {});
            setTimeout(() => done('not blocked'), 5000);
        })""")
        assert blocked == "connect-src", blocked
        errors = [e for e in browser.events_named("Runtime.exceptionThrown")]
        assert not errors, errors
    finally:
        if browser:
            browser.close()
        if bench and bench.poll() is None:
            bench.terminate()
            bench.wait(10)
        problem = harness.stop_braid(srv)
        shutil.rmtree(root, ignore_errors=True)
        assert problem is None, problem


def raw_http(port, request: bytes, timeout=10) -> bytes:
    import socket
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(request)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


def status_line(r: bytes) -> bytes:
    return r.split(b"\r\n", 1)[0]


def header(r: bytes, name: str) -> str | None:
    head = r.split(b"\r\n\r\n", 1)[0].decode(errors="replace")
    for line in head.split("\r\n")[1:]:
        k, _, v = line.partition(":")
        if k.strip().lower() == name.lower():
            return v.strip()
    return None


def test_admin_http_edges(braid_server):
    """The page's assets with their types and policy; HEAD without a body; 404, 405, 400 and
    431 for what the endpoint does not serve; a bounded head; HTTP/1.1 keep-alive."""
    port = braid_server.port + 10000 if braid_server.port + 10000 < 65536 else braid_server.port - 10000
    for path, ctype in (("/", "text/html"), ("/app.js", "text/javascript"), ("/style.css", "text/css")):
        r = raw_http(port, f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        body = r.split(b"\r\n\r\n", 1)[1]
        assert status_line(r) == b"HTTP/1.1 200 OK" and header(r, "Content-Type").startswith(ctype), r[:300]
        assert header(r, "Content-Security-Policy").startswith("default-src 'none';") and header(r, "X-Content-Type-Options") == "nosniff"
        assert header(r, "Content-Length") == str(len(body)) and body
    r = raw_http(port, b"HEAD / HTTP/1.0\r\n\r\n")
    assert status_line(r) == b"HTTP/1.0 200 OK" and r.endswith(b"\r\n\r\n"), r[-200:]
    assert raw_http(port, b"HEAD /status HTTP/1.0\r\n\r\n").endswith(b"\r\n\r\n")
    assert b" 404 " in status_line(raw_http(port, b"GET /nothing-here HTTP/1.0\r\n\r\n"))
    r = raw_http(port, b"DELETE / HTTP/1.0\r\n\r\n")
    assert b" 405 " in status_line(r) and header(r, "Allow") == "GET, HEAD", r
    assert b" 405 " in status_line(raw_http(port, b"PUT /status HTTP/1.0\r\n\r\n"))
    assert b" 400 " in status_line(raw_http(port, b"hello\r\n\r\n"))
    assert b" 431 " in status_line(raw_http(port, b"GET / HTTP/1.0\r\nX: " + b"a" * 20000 + b"\r\n\r\n"))
    # Two requests on one HTTP/1.1 connection.
    two = raw_http(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\nGET /status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert two.count(b"HTTP/1.1 200 OK") == 2, two[:200]
    # A client that never finishes its head is dropped, and the endpoint still answers others.
    import socket
    with socket.create_connection(("127.0.0.1", port), timeout=10) as slow:
        slow.sendall(b"GET / HTTP/1.0\r\n")
        assert status_line(raw_http(port, b"GET /status HTTP/1.0\r\n\r\n")) == b"HTTP/1.0 200 OK"
        t0 = time.monotonic()
        got = b""
        while chunk := slow.recv(1000):  # the socket's 10 s timeout fails the test
            got += chunk
        assert time.monotonic() - t0 < 8 and (got == b"" or b" 408 " in status_line(got)), got


TOKEN = "t0ken-" + secrets.token_hex(12)


def from_addr(source: str, port: int, request: bytes, timeout=10) -> bytes:
    import socket
    with socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=(source, 0)) as s:
        s.sendall(request)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


def test_only_trusted_addresses_or_the_token_reach_the_admin_endpoint():
    """127.0.0.1 is trusted; 127.0.0.2 stands for another host: it needs the token for the
    status, the page and reload, and /metrics is open to it only with admin_open_metrics."""
    root = harness.tmp_dir("braid-admin-auth-")
    users = {"alice": "A-" + secrets.token_urlsafe(12), "bob": "B-" + secrets.token_urlsafe(12)}
    admin_port = harness.free_port()
    extra = [f'admin = "127.0.0.1:{admin_port}"', 'admin_trusted = ["127.0.0.1/32"]', f'admin_token = "{TOKEN}"']
    srv = harness.start_braid(root, users, share_specs=[{"name": "data"}], server_extra=extra)
    try:
        get = lambda src, path, auth=b"": from_addr(src, admin_port, b"GET " + path + b" HTTP/1.0\r\n" + auth + b"\r\n")  # noqa: E731
        bearer = f"Authorization: Bearer {TOKEN}\r\n".encode()
        assert status_line(get("127.0.0.1", b"/status")) == b"HTTP/1.0 200 OK"
        for path in (b"/status", b"/", b"/app.js", b"/metrics"):
            r = get("127.0.0.2", path)
            assert b" 401 " in status_line(r) and header(r, "WWW-Authenticate") == "Bearer", (path, r[:200])
        assert b" 401 " in status_line(get("127.0.0.2", b"/status", b"Authorization: Bearer wrong-token-000000\r\n"))
        assert status_line(get("127.0.0.2", b"/status", bearer)) == b"HTTP/1.0 200 OK"
        assert status_line(get("127.0.0.2", b"/?token=" + TOKEN.encode())) == b"HTTP/1.0 200 OK"
        r = from_addr("127.0.0.2", admin_port, b"POST /reload HTTP/1.0\r\nContent-Length: 0\r\n\r\n")
        assert b" 401 " in status_line(r), r[:200]
        r = from_addr("127.0.0.2", admin_port, b"POST /reload HTTP/1.0\r\nContent-Length: 0\r\n" + bearer + b"\r\n")
        assert status_line(r) == b"HTTP/1.0 200 OK", r
        # Refusals are counted (and logged once a minute per address).
        m = get("127.0.0.1", b"/metrics").decode()
        hits = re.search(r'braid_limit_hits_total\{protocol="admin",limit="unauthorized"\} (\d+)', m)
        assert hits and int(hits.group(1)) >= 6, m[-2000:]
        log = srv.log.read_text(errors="replace")
        assert len([ln for ln in log.splitlines() if "127.0.0.2" in ln and "unauthorized" in ln]) == 1
        # The endpoint's own connection limit: 16 from one address, the rest closed at once.
        import socket
        held = []
        for _ in range(20):
            s = socket.create_connection(("127.0.0.1", admin_port), timeout=5, source_address=("127.0.0.3", 0))
            held.append(s)
        time.sleep(0.3)
        closed = 0
        for s in held:
            s.setblocking(False)
            try:
                closed += s.recv(1) == b""
            except BlockingIOError:
                pass
        assert closed == 4, f"{closed} of 20 closed"
        for s in held:
            s.close()
    finally:
        problem = harness.stop_braid(srv)
        shutil.rmtree(root, ignore_errors=True)
        assert problem is None, problem


def test_open_metrics_answer_scrapers_from_anywhere():
    root = harness.tmp_dir("braid-admin-metrics-")
    users = {"alice": "A-" + secrets.token_urlsafe(12), "bob": "B-" + secrets.token_urlsafe(12)}
    admin_port = harness.free_port()
    extra = [f'admin = "127.0.0.1:{admin_port}"', 'admin_trusted = ["127.0.0.1/32"]', "admin_open_metrics = true"]
    srv = harness.start_braid(root, users, share_specs=[{"name": "data"}], server_extra=extra)
    try:
        r = from_addr("127.0.0.2", admin_port, b"GET /metrics HTTP/1.0\r\n\r\n")
        assert status_line(r) == b"HTTP/1.0 200 OK" and b"braid_connections" in r
        r = from_addr("127.0.0.2", admin_port, b"GET /status HTTP/1.0\r\n\r\n")
        assert b" 403 " in status_line(r), "no token is set: the status is for trusted addresses only"
    finally:
        problem = harness.stop_braid(srv)
        shutil.rmtree(root, ignore_errors=True)
        assert problem is None, problem
