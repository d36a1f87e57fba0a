//! Port 111: how clients that ask a portmapper first (Linux `mount.nfs`, `showmount`,
//! `rpcinfo`, libnfs) find Braid's NFS and MOUNT. Either Braid answers portmapper v2 and
//! rpcbind v3/v4 queries itself, over TCP and UDP, for its own programs only (`serve`), or
//! it registers them with the system's rpcbind and unregisters them at stop (`register`).
//! The messages are `nfs_wire::portmap`'s; this module only adds the sockets.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use nfs_wire::portmap::{self as pm, Call, CallError, Mapping, Rpcb};
use nfs_wire::record::{reserve_mark, set_mark, RecordReader};
use nfs_wire::rpc::{self, AcceptStat, Auth, AuthStat, CallHeader, RejectStat, RpcError, PROG_MOUNT, PROG_NFS, PROG_PORTMAP};
use nfs_wire::{nlm4, nsm1};
use nfs_wire::{XdrReader, XdrWriter};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

use crate::config::{NfsConfig, PortmapperMode};

/// One program Braid serves: program, version, TCP (else UDP), port.
type Program = (u32, u32, bool, u16);

/// The programs Braid serves at each NFS address: NFS 3 and MOUNT 3 over TCP at the NFS
/// port, NLM 4 and NSM 1 over TCP and UDP at their own ports when the lock service is on.
/// MOUNT v1 is not listed although its EXPORT and DUMP are answered (for `showmount`):
/// portmappers hand out another version's port when the asked one is missing, and v1's
/// MNT is not served.
fn programs(cfg: &NfsConfig, nfs_port: u16) -> Vec<Program> {
    let mut p = vec![(PROG_NFS, 3, true, nfs_port), (PROG_MOUNT, 3, true, nfs_port)];
    if cfg.nlm_port != 0 {
        for tcp in [true, false] {
            p.push((nlm4::NLM_PROG, nlm4::NLM4_VERS, tcp, cfg.nlm_port));
            p.push((nsm1::SM_PROG, nsm1::SM_VERS, tcp, cfg.nsm_port));
        }
    }
    p
}

/// Largest call record or datagram: a portmapper call with the largest credentials and
/// strings is under 2 KiB.
const MAX_CALL: usize = 8192;
/// TCP connections to the portmapper at once; more are closed at once.
const MAX_CONNECTIONS: usize = 64;
/// A portmapper connection idle this long is closed (clients ask one question or two).
const IDLE: Duration = Duration::from_secs(30);
/// The owner shown in rpcbind DUMP results.
const OWNER: &str = "braid";
/// Where the system's rpcbind listens: its local socket (as libtirpc's `rpcb_set` uses:
/// rpcbind then knows the caller's uid, and takes SET and UNSET there), else loopback TCP
/// (where Debian's rpcbind refuses them unless started with `-L`).
const RPCBIND_SOCKET: &str = "/run/rpcbind.sock";
const RPCBIND_TCP: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), pm::PMAP_PORT);
/// How long a call to the system's rpcbind may take.
const RPCBIND_TIMEOUT: Duration = Duration::from_secs(3);

/// The running portmapper part; [`Portmapper::stop`] ends it.
pub enum Portmapper {
    Off,
    /// Braid's own portmapper: the socket loops.
    Serving(tokio::task::JoinSet<()>),
    /// Registered with the system's rpcbind: these programs are unregistered at stop.
    Registered(Vec<(u32, u32)>),
}

/// Starts what `cfg.portmapper` asks for, once the NFS listeners are bound (so whatever is
/// registered already answers). An explicit `serve` or `register` that cannot be done is
/// an error; `auto` falls back to nothing with a warning.
pub async fn start(cfg: &NfsConfig) -> std::io::Result<Portmapper> {
    let mode = match cfg.portmapper {
        PortmapperMode::Off => return Ok(Portmapper::Off),
        PortmapperMode::Auto if rpcbind_alive().await => PortmapperMode::Register,
        PortmapperMode::Auto => PortmapperMode::Serve,
        m => m,
    };
    let explicit = cfg.portmapper != PortmapperMode::Auto;
    let started = match mode {
        PortmapperMode::Register => register(cfg).await.map(Portmapper::Registered),
        _ => serve(cfg).await.map(Portmapper::Serving),
    };
    match started {
        Ok(p) => Ok(p),
        Err(e) if explicit => Err(e),
        Err(e) => {
            tracing::warn!(error = %e, "no portmapper (nfs_portmapper = \"auto\"): clients must name the NFS port (mount -o port=...,mountport=...)");
            Ok(Portmapper::Off)
        }
    }
}

impl Portmapper {
    /// Stops answering, or unregisters from the system's rpcbind, before NFS stops, so no
    /// client is sent to a port about to close.
    pub async fn stop(self) {
        match self {
            Portmapper::Off => {}
            Portmapper::Serving(tasks) => drop(tasks),
            Portmapper::Registered(programs) => {
                for (prog, vers) in programs {
                    match unset(prog, vers).await {
                        Ok(_) => tracing::info!(prog, vers, "unregistered from rpcbind"),
                        Err(e) => tracing::warn!(prog, vers, error = %e, "cannot unregister from rpcbind"),
                    }
                }
            }
        }
    }
}

// ---- serve: Braid's own portmapper ----

/// One thing a query can be told about: `prog` `vers` over TCP or UDP at `addr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    prog: u32,
    vers: u32,
    tcp: bool,
    addr: SocketAddr,
}

/// What the portmapper knows: Braid's programs at each NFS address, and itself.
#[derive(Debug)]
struct Table(Vec<Entry>);

impl Table {
    fn new(cfg: &NfsConfig, pmap: &[SocketAddr]) -> Table {
        let mut t = Vec::new();
        for &addr in pmap {
            for vers in pm::PMAP_VERSION..=pm::RPCB_VERSION4 {
                for tcp in [true, false] {
                    t.push(Entry { prog: PROG_PORTMAP, vers, tcp, addr });
                }
            }
        }
        for &listen in &cfg.listen {
            for (prog, vers, tcp, port) in programs(cfg, listen.port()) {
                t.push(Entry { prog, vers, tcp, addr: SocketAddr::new(listen.ip(), port) });
            }
        }
        Table(t)
    }

    /// The entry for `prog` over `netid`: of version `vers` if there is one, else (unless
    /// `exact`) of any version, as rpcbind's GETADDR does.
    fn find(&self, prog: u32, vers: u32, netid: &str, exact: bool) -> Option<&Entry> {
        let mut same = self.0.iter().filter(|e| e.prog == prog && pm::netid(&e.addr, e.tcp) == netid);
        let first = same.clone().next();
        same.find(|e| e.vers == vers).or(if exact { None } else { first })
    }
}

/// The addresses port 111 is bound to: each NFS address's host.
fn pmap_addrs(cfg: &NfsConfig) -> Vec<SocketAddr> {
    let mut out: Vec<SocketAddr> = Vec::new();
    for a in &cfg.listen {
        let p = SocketAddr::new(a.ip(), cfg.portmapper_port);
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// Binds TCP and UDP on every portmapper address, then answers on them.
async fn serve(cfg: &NfsConfig) -> std::io::Result<tokio::task::JoinSet<()>> {
    let addrs = pmap_addrs(cfg);
    let table = Arc::new(Table::new(cfg, &addrs));
    let mut tasks = tokio::task::JoinSet::new();
    let conns = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    for addr in addrs {
        let cannot = |e: std::io::Error| std::io::Error::new(e.kind(), format!("cannot listen as the portmapper on {addr}: {e}"));
        let tcp = TcpListener::bind(addr).await.map_err(cannot)?;
        let udp = UdpSocket::bind(addr).await.map_err(cannot)?;
        tracing::info!(%addr, "answering portmapper queries (TCP and UDP)");
        tasks.spawn(tcp_loop(tcp, table.clone(), conns.clone()));
        tasks.spawn(udp_loop(udp, table.clone()));
    }
    Ok(tasks)
}

async fn tcp_loop(l: TcpListener, table: Arc<Table>, conns: Arc<tokio::sync::Semaphore>) {
    loop {
        let (sock, peer) = match l.accept().await {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!(error = %e, "portmapper accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = conns.clone().try_acquire_owned() else {
            tracing::debug!(%peer, "portmapper connections at their limit; closing");
            continue;
        };
        let table = table.clone();
        tokio::spawn(async move {
            tcp_conn(sock, peer, &table).await;
            drop(permit);
        });
    }
}

/// One TCP connection: calls in order, each answered before the next is read.
async fn tcp_conn(mut sock: TcpStream, peer: SocketAddr, table: &Table) {
    let Ok(local) = sock.local_addr() else { return };
    let mut records = RecordReader::new(MAX_CALL as u32);
    loop {
        let rec = match records.next_record() {
            Ok(Some(r)) => r,
            Ok(None) => {
                let buf = records.read_buf();
                buf.reserve(512);
                match tokio::time::timeout(IDLE, sock.read_buf(buf)).await {
                    Ok(Ok(n)) if n > 0 => continue,
                    _ => return,
                }
            }
            Err(e) => {
                tracing::info!(%peer, error = %e, "bad portmapper record; disconnecting");
                return;
            }
        };
        let mut out = Vec::with_capacity(256);
        let at = reserve_mark(&mut out);
        if answer(table, &rec, (local, true), peer, &mut out) {
            set_mark(&mut out, at);
            if sock.write_all(&out).await.is_err() {
                return;
            }
        }
    }
}

async fn udp_loop(sock: UdpSocket, table: Arc<Table>) {
    let Ok(bound) = sock.local_addr() else { return };
    let mut buf = vec![0; MAX_CALL];
    loop {
        let (n, peer) = match sock.recv_from(&mut buf).await {
            Ok(x) => x,
            Err(e) => {
                // ICMP errors of earlier replies show up here; they concern no one else.
                tracing::debug!(error = %e, "portmapper receive failed");
                continue;
            }
        };
        let local = if bound.ip().is_unspecified() { route_to(peer).unwrap_or(bound) } else { bound };
        let mut out = Vec::with_capacity(256);
        if answer(&table, &buf[..n], (local, false), peer, &mut out) {
            let _ = sock.send_to(&out, peer).await;
        }
    }
}

/// The local address that packets to `peer` leave from (what a wildcard-bound UDP socket
/// does not say): a connected UDP socket is given one by the routing table, and sends
/// nothing.
pub(crate) fn route_to(peer: SocketAddr) -> Option<SocketAddr> {
    let any: SocketAddr = if peer.is_ipv4() { (Ipv4Addr::UNSPECIFIED, 0).into() } else { (std::net::Ipv6Addr::UNSPECIFIED, 0).into() };
    let s = std::net::UdpSocket::bind(any).ok()?;
    s.connect(peer).ok()?;
    s.local_addr().ok()
}

/// Appends the reply to call record `rec`, which arrived at `local` from `peer` (over TCP
/// or UDP); false when nothing is to be sent (not a call at all).
fn answer(table: &Table, rec: &[u8], (local, tcp): (SocketAddr, bool), peer: SocketAddr, out: &mut Vec<u8>) -> bool {
    let (hdr, args) = match rpc::decode_call(rec) {
        Ok(x) => x,
        Err(RpcError::RpcMismatch { xid, .. }) => return denied(xid, RejectStat::RpcMismatch { low: 2, high: 2 }, out),
        Err(RpcError::BadCred { xid }) => return denied(xid, RejectStat::AuthError(AuthStat::BadCred), out),
        Err(e) => {
            tracing::info!(%peer, error = %e, "undecodable portmapper message dropped");
            return false;
        }
    };
    if hdr.prog != PROG_PORTMAP {
        rpc::encode_accepted(hdr.xid, AcceptStat::ProgUnavail, out);
        return true;
    }
    let call = match pm::decode_call(hdr.vers, hdr.proc_, args) {
        Ok(c) => c,
        Err(e) => {
            tracing::info!(%peer, vers = hdr.vers, proc_ = hdr.proc_, error = ?e, "portmapper call refused");
            let stat = match e {
                CallError::ProgMismatch => AcceptStat::ProgMismatch { low: pm::VERSIONS.0, high: pm::VERSIONS.1 },
                CallError::ProcUnavail => AcceptStat::ProcUnavail,
                CallError::GarbageArgs => AcceptStat::GarbageArgs,
            };
            rpc::encode_accepted(hdr.xid, stat, out);
            return true;
        }
    };
    if !tcp && matches!(call, Call::Dump | Call::RpcbDump) {
        // A DUMP's reply is many times its call: over UDP, whose source address anyone can
        // forge, it would make port 111 a reflector. rpcinfo and libtirpc ask over TCP.
        tracing::info!(%peer, "portmapper DUMP over UDP refused");
        rpc::encode_accepted(hdr.xid, AcceptStat::ProcUnavail, out);
        return true;
    }
    tracing::debug!(%peer, vers = hdr.vers, ?call, "portmapper call");
    rpc::encode_accepted(hdr.xid, AcceptStat::Success, out);
    results(table, &call, local, &mut XdrWriter::new(out));
    true
}

fn denied(xid: u32, stat: RejectStat, out: &mut Vec<u8>) -> bool {
    rpc::encode_denied(xid, stat, out);
    true
}

/// The results of a decoded call.
fn results(table: &Table, call: &Call, local: SocketAddr, w: &mut XdrWriter<'_>) {
    match call {
        Call::Null => {}
        // Only Braid's own programs are known here: nobody else registers.
        Call::Set(_) | Call::Unset(_) | Call::RpcbSet(_) | Call::RpcbUnset(_) => w.bool(false),
        Call::Getport(m) => {
            let netid = if m.prot == pm::IPPROTO_TCP {
                "tcp"
            } else if m.prot == pm::IPPROTO_UDP {
                "udp"
            } else {
                ""
            };
            // Version 2 speaks of IPv4 only.
            w.u32(table.find(m.prog, m.vers, netid, false).map_or(0, |e| u32::from(e.addr.port())))
        }
        Call::Dump => {
            let maps: Vec<Mapping> = table
                .0
                .iter()
                .filter(|e| e.addr.is_ipv4())
                .map(|e| Mapping {
                    prog: e.prog,
                    vers: e.vers,
                    prot: if e.tcp { pm::IPPROTO_TCP } else { pm::IPPROTO_UDP },
                    port: u32::from(e.addr.port()),
                })
                .fold(Vec::new(), |mut v, m| {
                    if !v.contains(&m) {
                        v.push(m);
                    }
                    v
                });
            pm::encode_pmaplist(&maps, w);
        }
        Call::Getaddr(b) | Call::Getversaddr(b) => {
            let exact = matches!(call, Call::Getversaddr(_));
            let found = table.find(b.prog, b.vers, &b.netid, exact);
            w.string(found.map(|e| pm::uaddr(&reachable(e.addr, local))).unwrap_or_default().as_bytes());
        }
        Call::RpcbDump => {
            let list: Vec<Rpcb> = table
                .0
                .iter()
                .map(|e| Rpcb { prog: e.prog, vers: e.vers, netid: pm::netid(&e.addr, e.tcp).into(), addr: pm::uaddr(&e.addr), owner: OWNER.into() })
                .collect();
            pm::encode_rpcblist(&list, w);
        }
    }
}

/// `addr` as a client can reach it: a wildcard address becomes the address the query came
/// to (where the client evidently reaches this host), as rpcbind's address merging does.
fn reachable(addr: SocketAddr, local: SocketAddr) -> SocketAddr {
    if addr.ip().is_unspecified() && addr.is_ipv4() == local.ip().to_canonical().is_ipv4() {
        SocketAddr::new(local.ip().to_canonical(), addr.port())
    } else {
        addr
    }
}

// ---- register: the system's rpcbind ----

/// Whether an rpcbind answers a NULL call on this host.
async fn rpcbind_alive() -> bool {
    rpcbind_call(&Call::Null).await.is_ok()
}

/// Registers each of [`programs`] at the first IPv4 and the first IPv6 NFS address (rpcbind
/// keeps one address per program, version and netid). Registrations of an earlier run that
/// did not stop cleanly are removed first. Returns what to unregister at stop.
async fn register(cfg: &NfsConfig) -> std::io::Result<Vec<(u32, u32)>> {
    let mut addrs: Vec<SocketAddr> = cfg.listen.iter().find(|a| a.is_ipv4()).into_iter().copied().collect();
    addrs.extend(cfg.listen.iter().find(|a| a.is_ipv6()));
    let mut done: Vec<(u32, u32)> = Vec::new();
    for listen in &addrs {
        for (prog, vers, tcp, port) in programs(cfg, listen.port()) {
            if !done.contains(&(prog, vers)) {
                unset(prog, vers).await?;
                done.push((prog, vers));
            }
            let addr = SocketAddr::new(listen.ip(), port);
            let b = Rpcb { prog, vers, netid: pm::netid(&addr, tcp).into(), addr: pm::uaddr(&addr), owner: String::new() };
            if rpcbind_bool(&Call::RpcbSet(b.clone())).await? {
                tracing::info!(prog, vers, netid = b.netid, addr = b.addr, "registered with rpcbind");
            } else {
                tracing::warn!(prog, vers, netid = b.netid, "rpcbind refused the registration (another server holds it?)");
            }
        }
    }
    Ok(done)
}

/// Removes `prog` `vers` over every transport (an empty netid means all of them).
async fn unset(prog: u32, vers: u32) -> std::io::Result<bool> {
    rpcbind_bool(&Call::RpcbUnset(Rpcb { prog, vers, ..Rpcb::default() })).await
}

async fn rpcbind_bool(call: &Call) -> std::io::Result<bool> {
    let res = rpcbind_call(call).await?;
    XdrReader::new(&res).bool().map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("rpcbind: {e}")))
}

/// One rpcbind v4 call to the system's rpcbind; its result bytes.
async fn rpcbind_call(call: &Call) -> std::io::Result<Vec<u8>> {
    let io = async {
        match tokio::net::UnixStream::connect(RPCBIND_SOCKET).await {
            Ok(s) => exchange(s, call).await,
            Err(_) => exchange(TcpStream::connect(RPCBIND_TCP).await?, call).await,
        }
    };
    tokio::time::timeout(RPCBIND_TIMEOUT, io)
        .await
        .unwrap_or_else(|_| Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "rpcbind did not answer")))
}

async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(mut s: S, call: &Call) -> std::io::Result<Vec<u8>> {
    let xid = rand::random();
    let mut out = Vec::new();
    let at = reserve_mark(&mut out);
    let hdr = CallHeader { xid, prog: PROG_PORTMAP, vers: pm::RPCB_VERSION4, proc_: call.proc_(), cred: Auth::None, verf: Auth::None };
    rpc::encode_call(&hdr, &mut out);
    call.encode_args(&mut XdrWriter::new(&mut out));
    set_mark(&mut out, at);
    s.write_all(&out).await?;
    let bad = |m: String| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("rpcbind: {m}"));
    let mut records = RecordReader::new(MAX_CALL as u32);
    loop {
        if let Some(rec) = records.next_record().map_err(|e| bad(e.to_string()))? {
            let (rxid, res) = rpc::decode_reply(&rec).map_err(|e| bad(e.to_string()))?;
            if rxid != xid {
                continue;
            }
            return res.map(<[u8]>::to_vec).map_err(|e| bad(format!("{e:?}")));
        }
        if s.read_buf(records.read_buf()).await? == 0 {
            return Err(bad("closed the connection".into()));
        }
    }
}

#[cfg(test)]
mod tests;
