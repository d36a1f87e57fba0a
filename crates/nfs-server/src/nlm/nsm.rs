//! NSM v1 as a server needs it: SM_NOTIFY from a client host that restarted releases what
//! it held; SM_STAT answers this run's state number. SM_MON, SM_UNMON and SM_UNMON_ALL
//! are a local lock manager's requests to its own status monitor: Braid monitors the
//! hosts that hold its locks itself, and refuses them from elsewhere. At start, each host
//! the previous run logged as a lock holder is sent SM_NOTIFY with the new state number,
//! so it reclaims its locks during the grace period.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use nfs_wire::nsm1::*;
use nfs_wire::rpc::{AcceptStat, CallHeader};
use nfs_wire::{XdrReader, XdrWriter};

use super::accepted;
use super::callback::Callback;
use super::record::HostRecord;
use crate::state::NfsState;

/// How long a restart keeps trying to tell a host, with doubling pauses between tries.
const NOTIFY_FOR: Duration = Duration::from_secs(300);
const FIRST_PAUSE: Duration = Duration::from_secs(1);

pub async fn call(state: &Arc<NfsState>, peer: IpAddr, hdr: &CallHeader, args: &[u8], out: Vec<u8>) -> Option<Vec<u8>> {
    let Some(proc_) = SmProc::from_u32(hdr.proc_) else { return accepted(hdr.xid, AcceptStat::ProcUnavail, out) };
    let Ok(args) = SmArgs::decode(proc_, &mut XdrReader::new(args)) else {
        tracing::debug!(%peer, ?proc_, "undecodable NSM arguments");
        return accepted(hdr.xid, AcceptStat::GarbageArgs, out);
    };
    let mut out = accepted(hdr.xid, AcceptStat::Success, out)?;
    let state_number = state.nlm.state_number();
    let mut w = XdrWriter::new(&mut out);
    match args {
        SmArgs::Null | SmArgs::SimuCrash => {}
        SmArgs::Stat(_) => SmStatRes { res_stat: SmRes::StatSucc, state: state_number }.encode(&mut w),
        SmArgs::Mon(_) => SmStatRes { res_stat: SmRes::StatFail, state: state_number }.encode(&mut w),
        SmArgs::Unmon(_) | SmArgs::UnmonAll(_) => SmStat { state: state_number }.encode(&mut w),
        SmArgs::Notify(n) => {
            // Matched by name and by the address it came from: Linux's statd names
            // itself by its host name, which need not be the lock requests' caller name.
            tracing::info!(%peer, host = %String::from_utf8_lossy(n.mon_name.as_bytes()), state = n.state, "a client host restarted");
            super::release_hosts(state, Some(n.mon_name.as_bytes()), Some(peer));
        }
    }
    state.ops.record(crate::state::nsm_op(proc_), true, std::time::Duration::ZERO);
    Some(out)
}

/// Probes a host's lock manager must miss in a row before its locks are released.
pub const MISSES_BEFORE_RELEASE: u32 = 3;

/// Watches the hosts that hold locks: one not heard from for `every` is probed (a NULL call
/// to its NLM service, found through its portmapper, as callbacks are); one that misses
/// [`MISSES_BEFORE_RELEASE`] probes in a row, having answered before, is taken for gone
/// for good (powered off, cut off) and its locks are released, so a vanished client does
/// not hold a file for ever. A host never reached (NAT, a firewall) keeps its locks. A client that restarts tells Braid sooner, with SM_NOTIFY. Idle TCP
/// connections say nothing here: Linux closes its lockd connection when idle while its
/// processes still hold their locks.
pub async fn watch_hosts(state: std::sync::Weak<NfsState>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.tick().await;
    loop {
        tick.tick().await;
        let Some(st) = state.upgrade() else { return };
        let quiet = st.nlm.book().quiet_hosts(std::time::Instant::now() - every);
        let probes = quiet.into_iter().map(|(name, addr)| {
            let st = st.clone();
            async move {
                let null = Callback { prog: nfs_wire::nlm4::NLM_PROG, vers: nfs_wire::nlm4::NLM4_VERS, proc_: 0, args: Vec::new() };
                let r = super::call_back(&st, addr, &null).await;
                (name, addr, r)
            }
        });
        for (name, addr, r) in futures_util::future::join_all(probes).await {
            let misses = st.nlm.book().probed(&name, r.is_ok());
            if misses >= MISSES_BEFORE_RELEASE {
                tracing::warn!(host = %String::from_utf8_lossy(&name), %addr, misses, "a lock-holding client host does not answer; releasing its locks");
                super::release_hosts(&st, Some(&name), None);
            }
        }
    }
}

/// Tells each host of `hosts` that this server restarted (SM_NOTIFY), naming itself by
/// the address the host reaches it at (what the client's statd matches against the
/// servers it monitors), from tasks of their own.
pub fn notify_restart(state: &Arc<NfsState>, hosts: Vec<HostRecord>) {
    for h in hosts {
        let me = local_name(state, h.addr);
        let mut args = Vec::new();
        StatChge { mon_name: me.into_bytes().into(), state: state.nlm.state_number() }.encode(&mut XdrWriter::new(&mut args));
        let call = Callback { prog: SM_PROG, vers: SM_VERS, proc_: SmProc::Notify as u32, args };
        let weak = Arc::downgrade(state);
        tokio::spawn(async move {
            let give_up = tokio::time::Instant::now() + NOTIFY_FOR;
            let mut pause = FIRST_PAUSE;
            loop {
                let Some(st) = weak.upgrade() else { return };
                let sent = super::call_back(&st, h.addr, &call).await;
                drop(st);
                match sent {
                    Ok(()) => return tracing::info!(host = %h.addr, "told a client host of the restart"),
                    Err(e) if tokio::time::Instant::now() + pause >= give_up => {
                        // Carried into this run's log, so the next start tries again.
                        if let Some(r) = weak.upgrade().as_ref().and_then(|s| s.nlm.record()) {
                            r.host(&h);
                        }
                        return tracing::warn!(host = %h.addr, error = %e, "could not tell a client host of the restart");
                    }
                    Err(_) => {}
                }
                tokio::time::sleep(pause).await;
                pause *= 2;
            }
        });
    }
}

/// The address of this server as `client` reaches it: the NFS address, or (for a wildcard
/// one) the address packets to the client leave from.
fn local_name(state: &NfsState, client: IpAddr) -> String {
    let listen = state.config.listen.iter().find(|a| a.is_ipv4() == client.is_ipv4()).map(SocketAddr::ip);
    match listen {
        Some(ip) if !ip.is_unspecified() => ip.to_string(),
        _ => crate::portmap::route_to(SocketAddr::new(client, 9)).map_or_else(|| client.to_string(), |a| a.ip().to_string()),
    }
}
