//! The round-trip floor of this machine's loopback TCP for one request in flight: a client
//! thread and a server thread exchange frames of exactly the sizes an SMB2 READ or WRITE
//! request and its response have on the wire, with blocking sockets and no work in between.
//! No server can answer a QD 1 workload faster than this, so `Samba's latency / this floor`
//! is the highest ratio against Samba any server can reach on the same machine.
//!
//! usage: cargo run --release -p braid-bench --example tcp_floor -- [SECONDS_PER_SHAPE [SHAPE]]
//! (SHAPE: 4k-read, 4k-write, 64k-read or 1m-read; default all)
//! Prints one `FLOOR shape=… rtt_p50_us=… per_s=…` line per shape.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// SMB2 header (64) + READ request fixed part (48) + 1 byte of the variable buffer.
const READ_REQ: usize = 64 + 49;
/// SMB2 header + READ response fixed part (16), before the data.
const READ_RESP_HEAD: usize = 64 + 16;
/// SMB2 header + WRITE request fixed part (48), before the data.
const WRITE_REQ_HEAD: usize = 64 + 48;
/// SMB2 header + WRITE response (16).
const WRITE_RESP: usize = 64 + 16;

struct Shape {
    name: &'static str,
    /// Data bytes the request moves.
    block: usize,
    write: bool,
}

impl Shape {
    /// Bytes of the request and of the response, each after its 4-byte length.
    fn frames(&self) -> (usize, usize) {
        if self.write {
            (WRITE_REQ_HEAD + self.block, WRITE_RESP)
        } else {
            (READ_REQ, READ_RESP_HEAD + self.block)
        }
    }
}

fn frame(len: usize) -> Vec<u8> {
    let mut f = vec![0u8; 4 + len];
    f[..4].copy_from_slice(&(len as u32).to_be_bytes());
    f
}

fn read_frame(s: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<()> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    buf.resize(u32::from_be_bytes(len) as usize, 0);
    s.read_exact(buf)
}

/// Answers every request with a frame of `response` bytes until the client hangs up.
fn serve(mut s: TcpStream, response: usize) {
    let reply = frame(response);
    let mut buf = Vec::new();
    while read_frame(&mut s, &mut buf).is_ok() {
        if s.write_all(&reply).is_err() {
            break;
        }
    }
}

fn measure(shape: &Shape, secs: f64) -> std::io::Result<(f64, f64, u64)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let (request, response) = shape.frames();
    let server = std::thread::spawn(move || {
        if let Ok((s, _)) = listener.accept() {
            let _ = s.set_nodelay(true);
            serve(s, response);
        }
    });
    let mut c = TcpStream::connect(addr)?;
    c.set_nodelay(true)?;
    let request = frame(request);
    let mut buf = Vec::new();
    // Warm up the connection (congestion window, page cache of the buffers).
    let warm_until = Instant::now() + Duration::from_millis(300);
    while Instant::now() < warm_until {
        c.write_all(&request)?;
        read_frame(&mut c, &mut buf)?;
    }
    let mut samples = Vec::with_capacity(1 << 16);
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(secs);
    loop {
        let t = Instant::now();
        if t >= end {
            break;
        }
        c.write_all(&request)?;
        read_frame(&mut c, &mut buf)?;
        samples.push(t.elapsed().as_nanos() as u64);
    }
    let elapsed = start.elapsed().as_secs_f64();
    drop(c);
    let _ = server.join();
    samples.sort_unstable();
    let n = samples.len() as u64;
    let p50 = samples[samples.len() / 2] as f64 / 1000.0;
    Ok((p50, n as f64 / elapsed, n))
}

fn main() -> std::io::Result<()> {
    let secs: f64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(5.0);
    let only = std::env::args().nth(2);
    let shapes = [
        Shape { name: "4k-read", block: 4096, write: false },
        Shape { name: "4k-write", block: 4096, write: true },
        Shape { name: "64k-read", block: 64 << 10, write: false },
        Shape { name: "1m-read", block: 1 << 20, write: false },
    ];
    for shape in shapes.iter().filter(|s| only.as_deref().is_none_or(|o| o == s.name)) {
        let (p50, per_s, n) = measure(shape, secs)?;
        let mib_per_s = per_s * shape.block as f64 / 1048576.0;
        println!("FLOOR shape={} rtt_p50_us={p50:.1} per_s={per_s:.0} mib_per_s={mib_per_s:.0} samples={n}", shape.name);
    }
    Ok(())
}
