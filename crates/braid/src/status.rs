//! `braid status`: sessions and channels of a running server, read from its admin endpoint.

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
    out
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
    }
}
