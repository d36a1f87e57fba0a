//! `braid status`: sessions and channels of a running server, its per-operation counts and
//! latencies and its shares' metadata caches, read from its admin endpoint.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use serde_json::Value;

use crate::cli::StatusArgs;
use crate::config;

/// Fetches `/status` and prints it as a table (or raw JSON).
pub fn run(args: &StatusArgs) -> anyhow::Result<()> {
    let addr = match args.admin {
        Some(a) => a,
        None => {
            let loaded = config::load(&args.config.config)?;
            loaded.server.admin.ok_or_else(|| anyhow!("{}: the admin endpoint is off ([server] admin = \"off\")", args.config.config.display()))?
        }
    };
    let body = fetch(addr, "/status")?;
    if args.json {
        println!("{body}");
        return Ok(());
    }
    let v: Value = serde_json::from_str(&body).context("admin endpoint sent malformed JSON")?;
    print!("{}", table(&v));
    Ok(())
}

/// One HTTP/1.0 GET against the admin endpoint; returns the body.
fn fetch(addr: SocketAddr, path: &str) -> anyhow::Result<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(3))
        .with_context(|| format!("cannot reach the admin endpoint at {addr} (is `braid serve` running with this config?)"))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut resp = String::new();
    s.take(64 << 20).read_to_string(&mut resp).context("reading the admin endpoint's answer")?;
    let Some((head, body)) = resp.split_once("\r\n\r\n") else { bail!("admin endpoint sent no HTTP answer") };
    if !head.starts_with("HTTP/1.0 200") && !head.starts_with("HTTP/1.1 200") {
        bail!("admin endpoint answered: {}", head.lines().next().unwrap_or(""));
    }
    Ok(body.to_string())
}

/// Renders the status JSON the way Get-SmbMultichannelConnection lays it out.
fn table(v: &Value) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let sessions = v["sessions"].as_array().cloned().unwrap_or_default();
    let _ = writeln!(out, "{} connection(s), {} session(s)", v["connections"].as_u64().unwrap_or(0), sessions.len());
    for s in &sessions {
        let _ = writeln!(
            out,
            "\nsession {}  user {}  client {}  dialect {}  signing {}  encryption {}  channels {}/{}",
            s["id"].as_str().unwrap_or("?"),
            s["user"].as_str().unwrap_or("?"),
            s["client"].as_str().unwrap_or("?"),
            s["dialect"].as_str().unwrap_or("?"),
            yes_no(&s["signing"]),
            yes_no(&s["encryption"]),
            s["current_channels"].as_u64().unwrap_or(0),
            s["max_channels"].as_u64().unwrap_or(0),
        );
        let _ = writeln!(out, "  {:>6}  {:<22} {:>14} {:>14}", "chan", "client", "bytes in", "bytes out");
        for c in s["channels"].as_array().cloned().unwrap_or_default() {
            let _ = writeln!(
                out,
                "  {:>6}  {:<22} {:>14} {:>14}",
                c["id"].as_u64().unwrap_or(0),
                c["client"].as_str().unwrap_or("?"),
                c["bytes_in"].as_u64().unwrap_or(0),
                c["bytes_out"].as_u64().unwrap_or(0)
            );
        }
    }
    peers_table(v, &mut out);
    ops_table(v, &mut out);
    caches_table(v, &mut out);
    out
}

/// Clients of the other protocols (NFS): address, live connections (nconnect), traffic.
fn peers_table(v: &Value, out: &mut String) {
    use std::fmt::Write as _;
    let peers = v["peers"].as_array().cloned().unwrap_or_default();
    if peers.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n  {:<5} {:<40} {:>11} {:>12} {:>14} {:>14}", "proto", "client", "connections", "calls", "bytes in", "bytes out");
    for p in &peers {
        let n = |k: &str| p[k].as_u64().unwrap_or(0);
        let _ = writeln!(
            out,
            "  {:<5} {:<40} {:>11} {:>12} {:>14} {:>14}",
            p["protocol"].as_str().unwrap_or("?"),
            p["client"].as_str().unwrap_or("?"),
            n("connections"),
            n("calls"),
            n("bytes_in"),
            n("bytes_out")
        );
    }
}

/// Per operation since the server started: count, errors and latency percentiles.
fn ops_table(v: &Value, out: &mut String) {
    use std::fmt::Write as _;
    let ops = v["ops"].as_array().cloned().unwrap_or_default();
    if ops.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n  {:<5} {:<16} {:>12} {:>9} {:>11} {:>11}", "proto", "operation", "count", "errors", "p50", "p99");
    for o in &ops {
        let _ = writeln!(
            out,
            "  {:<5} {:<16} {:>12} {:>9} {:>11} {:>11}",
            o["protocol"].as_str().unwrap_or("?"),
            o["op"].as_str().unwrap_or("?"),
            o["count"].as_u64().unwrap_or(0),
            o["errors"].as_u64().unwrap_or(0),
            micros(o["p50_us"].as_f64().unwrap_or(0.0)),
            micros(o["p99_us"].as_f64().unwrap_or(0.0)),
        );
    }
}

/// Per share whose backend caches metadata: hits, misses and the hit ratio.
fn caches_table(v: &Value, out: &mut String) {
    use std::fmt::Write as _;
    let caches = v["caches"].as_array().cloned().unwrap_or_default();
    if caches.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n  {:<16} {:>12} {:>12} {:>9} {:>13} {:>10} {:>12}",
        "cache of share", "hits", "misses", "hit ratio", "invalidations", "entries", "bytes"
    );
    for c in &caches {
        let n = |k: &str| c[k].as_u64().unwrap_or(0);
        let lookups = n("hits") + n("misses");
        let ratio = if lookups == 0 { "-".to_string() } else { format!("{:.1}%", 100.0 * n("hits") as f64 / lookups as f64) };
        let _ = writeln!(
            out,
            "  {:<16} {:>12} {:>12} {:>9} {:>13} {:>10} {:>12}",
            c["share"].as_str().unwrap_or("?"),
            n("hits"),
            n("misses"),
            ratio,
            n("invalidations"),
            n("entries"),
            n("bytes")
        );
    }
}

/// A latency in microseconds, shown in µs, ms or s.
fn micros(us: f64) -> String {
    if us < 1000.0 {
        format!("{us:.0} us")
    } else if us < 1_000_000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{:.2} s", us / 1e6)
    }
}

fn yes_no(v: &Value) -> &'static str {
    if v.as_bool().unwrap_or(false) {
        "yes"
    } else {
        "no"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_lists_channels() {
        let v: Value = serde_json::from_str(
            r#"{"connections":2,"sessions":[{"id":"0x1","user":"alice","client":"127.0.0.1:5000","dialect":"3.1.1",
            "signing":true,"encryption":false,"current_channels":2,"max_channels":32,
            "channels":[{"id":7,"client":"127.0.0.1:5000","bytes_in":10,"bytes_out":20},{"id":8,"client":"127.0.0.1:5001","bytes_in":1,"bytes_out":2}]}]}"#,
        )
        .unwrap();
        let t = table(&v);
        assert!(t.contains("user alice"));
        assert!(t.contains("channels 2/32"));
        assert!(t.contains("127.0.0.1:5001"));
        assert!(!t.contains("operation"), "no ops, no table");
    }

    #[test]
    fn table_lists_operations_and_cache_hit_ratio() {
        let v: Value = serde_json::from_str(
            r#"{"connections":0,"sessions":[],
            "ops":[{"protocol":"smb","op":"CREATE","count":120,"errors":3,"mean_us":80.0,"p50_us":42.5,"p99_us":2500.0}],
            "caches":[{"share":"data","hits":90,"misses":10,"invalidations":2,"entries":50,"bytes":6400}]}"#,
        )
        .unwrap();
        let t = table(&v);
        let row = t.lines().find(|l| l.contains("CREATE")).expect(&t);
        assert!(row.contains(" 120 ") && row.contains(" 3 ") && row.contains("42 us") && row.contains("2.50 ms"), "{row}");
        let row = t.lines().find(|l| l.trim_start().starts_with("data")).expect(&t);
        assert!(row.contains("90.0%"), "{row}");
    }

    #[test]
    fn table_lists_nfs_clients_with_their_connections() {
        let v: Value = serde_json::from_str(
            r#"{"connections":0,"sessions":[],
            "peers":[{"protocol":"nfs","client":"10.1.2.3","connections":8,"calls":1000,"bytes_in":5000,"bytes_out":7000}]}"#,
        )
        .unwrap();
        let t = table(&v);
        let row = t.lines().find(|l| l.contains("10.1.2.3")).expect(&t);
        assert!(row.contains(" 8 ") && row.contains(" 1000 ") && row.contains(" 7000"), "{row}");
    }
}
