//! The round-trip floor of this machine's loopback TCP for one request in flight: a client
//! thread and a server thread exchange frames of exactly the sizes an SMB2 READ or WRITE
//! request and its response have on the wire, with blocking sockets and no work in between.
//! No server can answer a QD 1 workload faster than this, so `Samba's latency / this floor`
//! is the highest ratio against Samba any server can reach on the same machine.
//! The client is either a blocking thread (the machine's floor) or, with `tokio`, a task on
//! a two-worker tokio runtime, the way `braid bench` waits for its responses: that floor is
//! the fastest any server can look through `braid bench`.
//! The server is a blocking thread, or (`tokio`) one task per connection on its own
//! two-worker tokio runtime, reading a frame and answering it (the least an epoll-driven
//! server does), or (`tokio-spawn`) that plus Braid's shape: every frame handled in a task of
//! its own that answers through the connection's shared writer.
//!
//! usage: cargo run --release -p braid-bench --example tcp_floor -- [SECONDS_PER_SHAPE [SHAPE|all [CLIENT [SERVER]]]]
//! (SHAPE: 4k-read, 4k-write, 64k-read or 1m-read; default all; CLIENT blocking (default) or
//! tokio; SERVER blocking (default), tokio or tokio-spawn)
//! Prints one `FLOOR shape=… client=… rtt_p50_us=… per_s=…` line per shape (with
//! `server=…` when the server is not the blocking one).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

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

/// [`read_frame`] for the tokio client and server.
async fn read_frame_async(s: &mut (impl AsyncRead + Unpin), buf: &mut Vec<u8>) -> std::io::Result<()> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).await?;
    buf.resize(u32::from_be_bytes(len) as usize, 0);
    s.read_exact(buf).await.map(|_| ())
}

/// How the floor's server waits for requests.
#[derive(Clone, Copy, PartialEq)]
enum ServerKind {
    Blocking,
    Tokio,
    TokioSpawn,
}

/// The same answers from a tokio runtime of two workers (a server process's own runtime).
fn serve_tokio(s: TcpStream, response: usize, kind: ServerKind) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(async move {
        let task = tokio::spawn(async move {
            s.set_nonblocking(true)?;
            let s = tokio::net::TcpStream::from_std(s)?;
            let reply = std::sync::Arc::new(frame(response));
            let (mut rd, wr) = s.into_split();
            let wr = std::sync::Arc::new(tokio::sync::Mutex::new(wr));
            let mut buf = Vec::new();
            while read_frame_async(&mut rd, &mut buf).await.is_ok() {
                if kind == ServerKind::TokioSpawn {
                    let (wr, reply) = (wr.clone(), reply.clone());
                    tokio::spawn(async move {
                        let _ = wr.lock().await.write_all(&reply).await;
                    });
                } else if wr.lock().await.write_all(&reply).await.is_err() {
                    break;
                }
            }
            Ok::<_, std::io::Error>(())
        });
        task.await.map_err(std::io::Error::other)?
    })
}

/// Warm-up before measuring (congestion window, page cache of the buffers).
const WARM: Duration = Duration::from_millis(300);

/// The clock of one client's run: a warm-up, then round trips timed until `secs` are over.
struct Clock {
    warm_until: Instant,
    start: Instant,
    end: Instant,
    /// Each measured round trip, in ns.
    samples: Vec<u64>,
}

impl Clock {
    fn new(secs: f64) -> Clock {
        let now = Instant::now();
        let start = now + WARM;
        Clock { warm_until: start, start, end: start + Duration::from_secs_f64(secs), samples: Vec::with_capacity(1 << 16) }
    }

    /// When the next round trip starts, or `None` once the time is over. Warm-up round trips
    /// are not recorded (`record` ignores them).
    fn next(&self) -> Option<Instant> {
        let t = Instant::now();
        (t < self.end).then_some(t)
    }

    fn record(&mut self, began: Instant) {
        if began >= self.warm_until {
            self.samples.push(began.elapsed().as_nanos() as u64);
        }
    }

    /// The samples and the seconds they cover.
    fn finish(self) -> (Vec<u64>, f64) {
        let secs = self.start.elapsed().as_secs_f64();
        (self.samples, secs)
    }
}

/// Round trips from a blocking client thread: each one's time in ns, and the seconds measured.
fn blocking_client_run(addr: SocketAddr, request: usize, secs: f64) -> std::io::Result<(Vec<u64>, f64)> {
    let mut c = TcpStream::connect(addr)?;
    c.set_nodelay(true)?;
    let request = frame(request);
    let mut buf = Vec::new();
    let mut clock = Clock::new(secs);
    while let Some(t) = clock.next() {
        c.write_all(&request)?;
        read_frame(&mut c, &mut buf)?;
        clock.record(t);
    }
    Ok(clock.finish())
}

/// The same from a task on a two-worker tokio runtime (the shape of `braid bench`).
fn tokio_client_run(addr: SocketAddr, request: usize, secs: f64) -> std::io::Result<(Vec<u64>, f64)> {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let run = async move {
        let mut c = tokio::net::TcpStream::connect(addr).await?;
        c.set_nodelay(true)?;
        let request = frame(request);
        let mut buf = Vec::new();
        let mut clock = Clock::new(secs);
        while let Some(t) = clock.next() {
            c.write_all(&request).await?;
            read_frame_async(&mut c, &mut buf).await?;
            clock.record(t);
        }
        Ok::<_, std::io::Error>(clock.finish())
    };
    // On a worker, as `braid bench`'s workers are, not on the thread that blocks on it.
    rt.block_on(async { tokio::spawn(run).await.map_err(std::io::Error::other)? })
}

fn measure(shape: &Shape, secs: f64, tokio_client: bool, server_kind: ServerKind) -> std::io::Result<(f64, f64, u64)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let (request, response) = shape.frames();
    let server = std::thread::spawn(move || {
        if let Ok((s, _)) = listener.accept() {
            let _ = s.set_nodelay(true);
            if server_kind == ServerKind::Blocking {
                serve(s, response);
            } else if let Err(e) = serve_tokio(s, response, server_kind) {
                eprintln!("tcp_floor: server: {e}");
            }
        }
    });
    let (mut samples, elapsed) = if tokio_client { tokio_client_run(addr, request, secs)? } else { blocking_client_run(addr, request, secs)? };
    let _ = server.join();
    samples.sort_unstable();
    let n = samples.len() as u64;
    let p50 = samples[samples.len() / 2] as f64 / 1000.0;
    Ok((p50, n as f64 / elapsed, n))
}

fn main() -> std::io::Result<()> {
    let secs: f64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(5.0);
    let only = std::env::args().nth(2).filter(|s| s != "all");
    let tokio_client = match std::env::args().nth(3).as_deref() {
        None | Some("blocking") => false,
        Some("tokio") => true,
        Some(other) => return Err(std::io::Error::other(format!("client must be blocking or tokio, not {other}"))),
    };
    let client = if tokio_client { "tokio" } else { "blocking" };
    let server_kind = match std::env::args().nth(4).as_deref() {
        None | Some("blocking") => ServerKind::Blocking,
        Some("tokio") => ServerKind::Tokio,
        Some("tokio-spawn") => ServerKind::TokioSpawn,
        Some(other) => return Err(std::io::Error::other(format!("server must be blocking, tokio or tokio-spawn, not {other}"))),
    };
    // The blocking server's lines keep their earlier form (no `server=`).
    let server = match server_kind {
        ServerKind::Blocking => "",
        ServerKind::Tokio => " server=tokio",
        ServerKind::TokioSpawn => " server=tokio-spawn",
    };
    let shapes = [
        Shape { name: "4k-read", block: 4096, write: false },
        Shape { name: "4k-write", block: 4096, write: true },
        Shape { name: "64k-read", block: 64 << 10, write: false },
        Shape { name: "1m-read", block: 1 << 20, write: false },
    ];
    for shape in shapes.iter().filter(|s| only.as_deref().is_none_or(|o| o == s.name)) {
        let (p50, per_s, n) = measure(shape, secs, tokio_client, server_kind)?;
        let mib_per_s = per_s * shape.block as f64 / 1048576.0;
        println!("FLOOR shape={} client={client}{server} rtt_p50_us={p50:.1} per_s={per_s:.0} mib_per_s={mib_per_s:.0} samples={n}", shape.name);
    }
    Ok(())
}
