//! Calls the lock service makes to client hosts: GRANTED_MSG when a blocked lock is
//! granted, the `_RES` answers to `_MSG` calls, and SM_NOTIFY after a restart. Each goes
//! over UDP to the port the host's portmapper (port 111) names for the program, as Linux's
//! lockd and rpc.statd do; a host that does not answer is tried a few times, then left.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use nfs_wire::portmap::{self as pm, Call, Mapping};
use nfs_wire::rpc::{self, Auth, AuthSys, CallHeader, PROG_PORTMAP};
use nfs_wire::{XdrReader, XdrWriter};
use tokio::net::UdpSocket;

/// How long one try waits for an answer.
const TRY: Duration = Duration::from_secs(1);
/// Tries per call (the portmapper query and the call each).
const TRIES: usize = 3;
/// The largest reply read.
const MAX_REPLY: usize = 4096;

/// One RPC call: program, version, procedure and the encoded arguments.
#[derive(Debug, Clone)]
pub struct Callback {
    pub prog: u32,
    pub vers: u32,
    pub proc_: u32,
    pub args: Vec<u8>,
}

/// Sends `call` to `host`: asks the host's portmapper (at `pmap_port`, 111 but in tests)
/// for the program's UDP port, then sends the call until it is answered. Ok once
/// answered. `is_self` names this server's own services: a client whose connections
/// reach Braid from one of its own addresses (a relay on the server's host) has its
/// portmapper answered by Braid's, and a call there would reach Braid itself.
pub async fn send_via(host: IpAddr, pmap_port: u16, call: &Callback, is_self: impl Fn(SocketAddr) -> bool) -> std::io::Result<()> {
    let port = getport(host, pmap_port, call.prog, call.vers).await?;
    if port == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("{host} serves no program {} version {} over UDP", call.prog, call.vers),
        ));
    }
    let to = SocketAddr::new(host, port);
    if is_self(to) {
        return Err(std::io::Error::new(std::io::ErrorKind::AddrInUse, format!("{to} is this server's own service, not the client's")));
    }
    exchange(to, call).await.map(drop)
}

/// The UDP port `host`'s portmapper names for `prog` `vers` (0: not registered).
async fn getport(host: IpAddr, pmap_port: u16, prog: u32, vers: u32) -> std::io::Result<u16> {
    let mut args = Vec::new();
    Call::Getport(Mapping { prog, vers, prot: pm::IPPROTO_UDP, port: 0 }).encode_args(&mut XdrWriter::new(&mut args));
    // Version 2 calls procedure 3 GETPORT (version 3 and 4 call it GETADDR).
    let ask = Callback { prog: PROG_PORTMAP, vers: pm::PMAP_VERSION, proc_: pm::PROC_GETADDR, args };
    let res = exchange(SocketAddr::new(host, pmap_port), &ask).await?;
    let port = XdrReader::new(&res).u32().map_err(|e| bad(format!("portmapper answer: {e}")))?;
    u16::try_from(port).map_err(|_| bad(format!("portmapper named port {port}")))
}

fn bad(m: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, m)
}

/// Sends `call` to `to` until an answer with its xid comes (at most [`TRIES`] times);
/// returns the answer's result bytes.
async fn exchange(to: SocketAddr, call: &Callback) -> std::io::Result<Vec<u8>> {
    let any: SocketAddr = match to.ip() {
        IpAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        IpAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let sock = UdpSocket::bind(any).await?;
    sock.connect(to).await?;
    let xid: u32 = rand::random();
    let msg = encode(xid, call);
    let mut buf = vec![0; MAX_REPLY];
    for _ in 0..TRIES {
        sock.send(&msg).await?;
        let deadline = tokio::time::Instant::now() + TRY;
        while let Ok(got) = tokio::time::timeout_at(deadline, sock.recv(&mut buf)).await {
            let n = got?;
            let Ok((rxid, res)) = rpc::decode_reply(&buf[..n]) else { continue };
            if rxid == xid {
                return res.map(<[u8]>::to_vec).map_err(|e| bad(format!("{to} refused the call: {e:?}")));
            }
        }
    }
    Err(std::io::Error::new(std::io::ErrorKind::TimedOut, format!("{to} did not answer")))
}

/// A call message with AUTH_UNIX as root of this host (what lockd and statd send).
fn encode(xid: u32, call: &Callback) -> Vec<u8> {
    let cred = Auth::Sys(AuthSys { stamp: 0, machine_name: b"braid".to_vec(), uid: 0, gid: 0, gids: Vec::new() });
    let hdr = CallHeader { xid, prog: call.prog, vers: call.vers, proc_: call.proc_, cred, verf: Auth::None };
    let mut out = Vec::with_capacity(128 + call.args.len());
    rpc::encode_call(&hdr, &mut out);
    out.extend_from_slice(&call.args);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A portmapper and a program on loopback UDP sockets, answering as a client host would.
    async fn fake_host(prog_port: u16) -> (u16, UdpSocket) {
        let pmap = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let port = pmap.local_addr().unwrap().port();
        tokio::spawn(async move {
            let mut buf = vec![0; 2048];
            loop {
                let (n, peer) = pmap.recv_from(&mut buf).await.unwrap();
                let (hdr, _) = rpc::decode_call(&buf[..n]).unwrap();
                let mut out = Vec::new();
                rpc::encode_accepted(hdr.xid, rpc::AcceptStat::Success, &mut out);
                XdrWriter::new(&mut out).u32(u32::from(prog_port));
                pmap.send_to(&out, peer).await.unwrap();
            }
        });
        (port, UdpSocket::bind("127.0.0.1:0").await.unwrap())
    }

    #[tokio::test]
    async fn a_call_reaches_the_port_the_portmapper_names_and_is_answered() {
        let prog = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let (pmap_port, _) = fake_host(prog.local_addr().unwrap().port()).await;
        let answering = tokio::spawn(async move {
            let mut buf = vec![0; 2048];
            // The first try is dropped: the caller must send again.
            let _ = prog.recv_from(&mut buf).await.unwrap();
            let (n, peer) = prog.recv_from(&mut buf).await.unwrap();
            let (hdr, args) = rpc::decode_call(&buf[..n]).unwrap();
            assert_eq!((hdr.prog, hdr.vers, hdr.proc_, args), (100_021, 4, 10, &b"\0\0\0\x07"[..]));
            let mut out = Vec::new();
            rpc::encode_accepted(hdr.xid, rpc::AcceptStat::Success, &mut out);
            prog.send_to(&out, peer).await.unwrap();
        });
        let call = Callback { prog: 100_021, vers: 4, proc_: 10, args: vec![0, 0, 0, 7] };
        send_via("127.0.0.1".parse().unwrap(), pmap_port, &call, |_| false).await.expect("answered");
        answering.await.unwrap();
    }

    #[tokio::test]
    async fn a_host_without_the_program_is_an_error() {
        let (pmap_port, _) = fake_host(0).await;
        let call = Callback { prog: 100_024, vers: 1, proc_: 6, args: Vec::new() };
        let e = send_via("127.0.0.1".parse().unwrap(), pmap_port, &call, |_| false).await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    }

    #[tokio::test]
    async fn a_call_to_this_server_itself_is_not_sent() {
        let (pmap_port, _) = fake_host(4045).await;
        let call = Callback { prog: 100_021, vers: 4, proc_: 10, args: Vec::new() };
        let e = send_via("127.0.0.1".parse().unwrap(), pmap_port, &call, |to| to.port() == 4045).await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse);
    }
}
