use super::*;
use nfs_wire::rpc::ReplyError;

fn table() -> Table {
    let listen: Vec<SocketAddr> = vec!["0.0.0.0:2049".parse().unwrap(), "[::1]:2050".parse().unwrap()];
    let cfg = NfsConfig { listen, nlm_port: 4045, nsm_port: 4046, ..NfsConfig::default() };
    Table::new(&cfg, &pmap_addrs(&cfg))
}

/// Sends `call` (version `vers`) to the table as if it came to 10.1.2.3:111; the reply's
/// result bytes or why there are none.
fn ask(vers: u32, proc_: u32, args: &[u8]) -> Result<Vec<u8>, ReplyError> {
    ask_over(true, vers, proc_, args)
}

fn ask_over(tcp: bool, vers: u32, proc_: u32, args: &[u8]) -> Result<Vec<u8>, ReplyError> {
    let mut rec = Vec::new();
    let hdr = CallHeader { xid: 7, prog: PROG_PORTMAP, vers, proc_, cred: Auth::None, verf: Auth::None };
    rpc::encode_call(&hdr, &mut rec);
    rec.extend_from_slice(args);
    let mut out = Vec::new();
    let (local, peer) = ("10.1.2.3:111".parse().unwrap(), "10.9.9.9:900".parse().unwrap());
    assert!(answer(&table(), &rec, (local, tcp), peer, &mut out));
    let (xid, res) = rpc::decode_reply(&out).unwrap();
    assert_eq!(xid, 7);
    res.map(<[u8]>::to_vec)
}

fn args(call: &Call) -> Vec<u8> {
    let mut v = Vec::new();
    call.encode_args(&mut XdrWriter::new(&mut v));
    v
}

fn getport(prog: u32, vers: u32, prot: u32) -> u32 {
    let res = ask(2, pm::PROC_GETADDR, &args(&Call::Getport(Mapping { prog, vers, prot, port: 0 }))).unwrap();
    XdrReader::new(&res).u32().unwrap()
}

fn getaddr(proc_: u32, prog: u32, vers: u32, netid: &str) -> String {
    let b = Rpcb { prog, vers, netid: netid.into(), ..Rpcb::default() };
    let res = ask(4, proc_, &args(&Call::Getaddr(b))).unwrap();
    String::from_utf8(XdrReader::new(&res).string(255).unwrap().to_vec()).unwrap()
}

#[test]
fn getport_answers_nfs_over_tcp_and_locks_over_both() {
    assert_eq!(getport(PROG_NFS, 3, pm::IPPROTO_TCP), 2049);
    assert_eq!(getport(PROG_MOUNT, 3, pm::IPPROTO_TCP), 2049);
    // MOUNT v1 (showmount) is sent to v3's port, as rpcbind does.
    assert_eq!(getport(PROG_MOUNT, 1, pm::IPPROTO_TCP), 2049);
    // NFS and MOUNT are not served over UDP; the portmapper, NLM and NSM are.
    assert_eq!(getport(PROG_MOUNT, 3, pm::IPPROTO_UDP), 0);
    assert_eq!(getport(PROG_PORTMAP, 2, pm::IPPROTO_UDP), 111);
    assert_eq!(getport(100_021, 4, pm::IPPROTO_TCP), 4045);
    assert_eq!(getport(100_021, 4, pm::IPPROTO_UDP), 4045);
    assert_eq!(getport(100_024, 1, pm::IPPROTO_UDP), 4046);
    assert_eq!(getport(100_099, 1, pm::IPPROTO_UDP), 0);
}

#[test]
fn getaddr_names_the_address_asked() {
    // The wildcard address becomes the one the query came to.
    assert_eq!(getaddr(pm::PROC_GETADDR, PROG_NFS, 3, "tcp"), "10.1.2.3.8.1");
    assert_eq!(getaddr(pm::PROC_GETADDR, PROG_MOUNT, 3, "tcp6"), "::1.8.2");
    assert_eq!(getaddr(pm::PROC_GETADDR, PROG_MOUNT, 3, "udp"), "");
    assert_eq!(getaddr(pm::PROC_GETADDR, PROG_NFS, 4, "tcp"), "10.1.2.3.8.1");
    assert_eq!(getaddr(pm::PROC_GETVERSADDR, PROG_NFS, 4, "tcp"), "");
    assert_eq!(getaddr(pm::PROC_GETVERSADDR, PROG_NFS, 3, "tcp"), "10.1.2.3.8.1");
}

#[test]
fn dumps_list_braids_programs() {
    let res = ask(2, pm::PROC_DUMP, &[]).unwrap();
    let maps = pm::decode_pmaplist(&mut XdrReader::new(&res)).unwrap();
    // The portmapper (3 versions, 2 transports), NFS and MOUNT, NLM and NSM (2 transports),
    // IPv4 only.
    assert_eq!(maps.len(), 6 + 2 + 4);
    assert!(maps.contains(&Mapping { prog: PROG_NFS, vers: 3, prot: pm::IPPROTO_TCP, port: 2049 }));
    let res = ask(3, pm::PROC_DUMP, &[]).unwrap();
    let list = pm::decode_rpcblist(&mut XdrReader::new(&res)).unwrap();
    assert_eq!(list.len(), 2 * 6 + 2 * (2 + 4));
    assert!(list.iter().any(|b| b.prog == PROG_MOUNT && b.netid == "tcp6" && b.addr == "::1.8.2"));
    // Not over UDP (a reflector's favourite), where GETADDR still answers.
    assert_eq!(ask_over(false, 2, pm::PROC_DUMP, &[]), Err(ReplyError::ProcUnavail));
    assert_eq!(ask_over(false, 4, pm::PROC_DUMP, &[]), Err(ReplyError::ProcUnavail));
    assert!(ask_over(false, 4, pm::PROC_GETADDR, &args(&Call::Getaddr(Rpcb::default()))).is_ok());
}

#[test]
fn refusals() {
    let set = args(&Call::Set(Mapping { prog: 1, vers: 1, prot: pm::IPPROTO_TCP, port: 1 }));
    assert_eq!(ask(2, pm::PROC_SET, &set).unwrap(), [0, 0, 0, 0]);
    assert_eq!(ask(2, pm::PROC_GETADDR, &set[..8]), Err(ReplyError::GarbageArgs));
    assert_eq!(ask(2, 5, &[]), Err(ReplyError::ProcUnavail));
    assert_eq!(ask(9, pm::PROC_NULL, &[]), Err(ReplyError::ProgMismatch { low: 2, high: 4 }));
    assert_eq!(ask(4, pm::PROC_NULL, &[]), Ok(vec![]));
    // Another program, and bytes that are no call at all.
    let mut rec = Vec::new();
    rpc::encode_call(&CallHeader { xid: 1, prog: PROG_NFS, vers: 3, proc_: 0, cred: Auth::None, verf: Auth::None }, &mut rec);
    let (local, peer) = ("127.0.0.1:111".parse().unwrap(), "127.0.0.1:1".parse().unwrap());
    let mut out = Vec::new();
    assert!(answer(&table(), &rec, (local, true), peer, &mut out));
    assert_eq!(rpc::decode_reply(&out).unwrap().1, Err(ReplyError::ProgUnavail));
    assert!(!answer(&table(), &[0, 0, 0, 1], (local, false), peer, &mut Vec::new()));
}
