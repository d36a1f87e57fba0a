//! `braid status`: sessions and channels of a running server, each share's provisioned
//! limits against its use, its per-operation counts and latencies and its shares' metadata
//! caches, read from its admin endpoint.

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
    shares_table(v, &mut out);
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

/// Per share: provisioned against used IOPS and throughput over the last second, burst
/// credits left, requests throttled and time they waited; then its busiest clients.
fn shares_table(v: &Value, out: &mut String) {
    use std::fmt::Write as _;
    let shares = v["shares"].as_array().cloned().unwrap_or_default();
    if shares.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n  {:<16} {:>9} {:>18} {:>10} {:>11} {:>16} {:>17} {:>10} {:>9}",
        "share", "IOPS", "IOPS limit", "read MiB/s", "write MiB/s", "MiB/s limit", "credits left", "throttled", "waited"
    );
    for s in &shares {
        let l = &s["limits"];
        let f = |k: &str| s[k].as_f64().unwrap_or(0.0);
        let iops_limit = match (l["iops"].as_u64(), l["burst_iops"].as_u64()) {
            (None, _) => "unlimited".to_string(),
            (Some(i), None) => i.to_string(),
            (Some(i), Some(b)) => format!("{i} (burst {b})"),
        };
        // Credits left, and how full the bucket is (the limiter's own size when it gives one).
        let bucket = s["burst_credits_max"].as_u64().or(l["burst_credits"].as_u64()).filter(|&m| m > 0);
        let credits = match (s["burst_credits"].as_u64(), bucket) {
            (None, _) => "-".to_string(),
            (Some(c), None) => c.to_string(),
            (Some(c), Some(m)) => format!("{c} ({:.0}%)", 100.0 * c as f64 / m as f64),
        };
        let _ = writeln!(
            out,
            "  {:<16} {:>9.1} {:>18} {:>10.2} {:>11.2} {:>16} {:>17} {:>10} {:>9}",
            s["share"].as_str().unwrap_or("?"),
            f("iops"),
            iops_limit,
            f("read_bytes_per_s") / MIB,
            f("write_bytes_per_s") / MIB,
            byte_limits(l),
            credits,
            s["throttled_requests"].as_u64().unwrap_or(0),
            format!("{:.2} s", s["throttled_ms"].as_u64().unwrap_or(0) as f64 / 1000.0),
        );
        let file = [("IOPS", l["max_file_iops"].as_u64().map(|v| v.to_string())), ("MiB/s", mib_limit(&l["max_file_throughput"]))];
        let file: Vec<String> = file.iter().filter_map(|(unit, v)| Some(format!("{} {unit}", v.as_ref()?))).collect();
        if !file.is_empty() {
            let _ = writeln!(out, "    per file: {}", file.join(", "));
        }
        for c in s["top_clients"].as_array().into_iter().flatten() {
            let _ = writeln!(
                out,
                "    client {:<40} {:>10.1} IOPS {:>10.2} MiB/s  waited {:.2} s",
                c["client"].as_str().unwrap_or("?"),
                c["iops"].as_f64().unwrap_or(0.0),
                c["bytes_per_s"].as_f64().unwrap_or(0.0) / MIB,
                c["throttled_ms"].as_u64().unwrap_or(0) as f64 / 1000.0
            );
        }
    }
}

const MIB: f64 = 1048576.0;

/// A byte rate limit in MiB/s (None when unset).
fn mib_limit(v: &Value) -> Option<String> {
    v.as_u64().map(|b| {
        let m = b as f64 / MIB;
        if m.fract() == 0.0 {
            format!("{m:.0}")
        } else {
            format!("{m:.2}")
        }
    })
}

/// The share's byte-rate limits: total, read (egress) and write (ingress), those that are set.
fn byte_limits(l: &Value) -> String {
    let parts: Vec<String> = [("", "throughput"), ("read ", "egress"), ("write ", "ingress")]
        .iter()
        .filter_map(|(name, key)| Some(format!("{name}{}", mib_limit(&l[*key])?)))
        .collect();
    if parts.is_empty() {
        "unlimited".to_string()
    } else {
        parts.join(", ")
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
    fn table_lists_shares_limits_against_use() {
        let v: Value = serde_json::from_str(
            r#"{"connections":0,"sessions":[],
            "shares":[{"share":"fast","limits":{"iops":4024,"burst_iops":10000,"burst_credits":21513600,"throughput":212860928,
              "ingress":null,"egress":null,"max_file_iops":1000,"max_file_throughput":null},
              "iops":3999.5,"read_bytes_per_s":104857600.0,"write_bytes_per_s":1048576.0,"burst_credits":20000000,
              "ios_total":1,"read_bytes_total":1,"write_bytes_total":1,"throttled_requests":42,"throttled_ms":1500,
              "top_clients":[{"client":"smb alice@127.0.0.1","iops":3999.5,"bytes_per_s":105906176.0,"throttled_ms":1500}]},
             {"share":"free","limits":{"iops":null,"burst_iops":null,"burst_credits":null,"throughput":null,"ingress":null,
              "egress":5242880,"max_file_iops":null,"max_file_throughput":null},
              "iops":0.0,"read_bytes_per_s":0.0,"write_bytes_per_s":0.0,"burst_credits":null,
              "ios_total":0,"read_bytes_total":0,"write_bytes_total":0,"throttled_requests":0,"throttled_ms":0,"top_clients":[]}]}"#,
        )
        .unwrap();
        let t = table(&v);
        let row = t.lines().find(|l| l.trim_start().starts_with("fast")).expect(&t);
        for cell in ["3999.5", "4024 (burst 10000)", "100.00", "1.00", " 203 ", "20000000 (93%)", " 42 ", "1.50 s"] {
            assert!(row.contains(cell), "{cell:?} not in {row}");
        }
        assert!(t.contains("    per file: 1000 IOPS\n"), "{t}");
        let client = t.lines().find(|l| l.contains("client smb alice@127.0.0.1")).expect(&t);
        assert!(client.contains("3999.5 IOPS") && client.contains("101.00 MiB/s") && client.contains("waited 1.50 s"), "{client}");
        let row = t.lines().find(|l| l.trim_start().starts_with("free")).expect(&t);
        assert!(row.contains("unlimited") && row.contains("read 5") && row.contains(" - "), "{row}");
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
