//! The Network Status Monitor protocol version 1 (program 100024, Open Group XNFS 3W): how
//! lock managers learn that a peer host restarted, so locks it held can be dropped (on the
//! server) or reclaimed (on the client).
//!
//! A lock manager asks its local NSM to watch a host (SM_MON, with a callback address and 16
//! private bytes); an NSM that restarts tells its peers (SM_NOTIFY); the peer's NSM then calls
//! each watcher back at the procedure it named, with [`Status`].

use crate::nfs3::types::u32_enum;
use crate::xdr::{xdr_struct, Bounded, Result, XdrReader, XdrWriter};

/// The NSM program number and its only version.
pub const SM_PROG: u32 = 100_024;
pub const SM_VERS: u32 = 1;

/// Longest host name (`string<SM_MAXSTRLEN>`).
pub const SM_MAXSTRLEN: u32 = 1024;
/// Size of the watcher's private bytes, returned unchanged in the callback.
pub const SM_PRIV_SZ: usize = 16;

/// A host name as bytes: the protocol does not promise UTF-8.
pub type SmString = Bounded<SM_MAXSTRLEN>;

u32_enum! {
    /// The NSM version 1 procedures.
    SmProc { Null = 0, Stat = 1, Mon = 2, Unmon = 3, UnmonAll = 4, SimuCrash = 5, Notify = 6 }
}

u32_enum! {
    /// `res`: whether the NSM agrees to monitor the host.
    SmRes { StatSucc = 0, StatFail = 1 }
}

xdr_struct!(
    /// sm_name: SM_STAT's argument.
    SmName { mon_name: SmString }
);

xdr_struct!(
    /// my_id: where the NSM calls back. The XDR fields are `int`; they hold RPC program,
    /// version and procedure numbers, which RPC defines as unsigned (same bytes either way).
    MyId { my_name: SmString, my_prog: u32, my_vers: u32, my_proc: u32 }
);

xdr_struct!(
    /// mon_id: the host to watch and who to tell; SM_UNMON's argument.
    MonId { mon_name: SmString, my_id: MyId }
);

xdr_struct!(
    /// mon: SM_MON's argument; `priv_` comes back unchanged in the callback.
    Mon { mon_id: MonId, priv_: [u8; SM_PRIV_SZ] }
);

xdr_struct!(
    /// sm_stat_res: the result of SM_STAT and SM_MON, with the local NSM's state number.
    SmStatRes { res_stat: SmRes, state: i32 }
);

xdr_struct!(
    /// sm_stat: the result of SM_UNMON and SM_UNMON_ALL.
    SmStat { state: i32 }
);

xdr_struct!(
    /// stat_chge: SM_NOTIFY's argument, a host that restarted and its new state number (odd
    /// while up, even while down).
    StatChge { mon_name: SmString, state: i32 }
);

xdr_struct!(
    /// status: the callback an NSM sends to a watcher (at `my_id`'s program, version and
    /// procedure) when a watched host restarts; `priv_` is what the watcher gave SM_MON.
    /// Linux's lockd takes it at NLM procedure 16.
    Status { mon_name: SmString, state: i32, priv_: [u8; SM_PRIV_SZ] }
);

/// The arguments of any NSM version 1 procedure, for a dispatcher that decodes first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SmArgs {
    Null,
    Stat(SmName),
    Mon(Mon),
    Unmon(MonId),
    UnmonAll(MyId),
    SimuCrash,
    Notify(StatChge),
}

impl SmArgs {
    pub fn decode(proc_: SmProc, r: &mut XdrReader<'_>) -> Result<Self> {
        Ok(match proc_ {
            SmProc::Null => SmArgs::Null,
            SmProc::Stat => SmArgs::Stat(SmName::decode(r)?),
            SmProc::Mon => SmArgs::Mon(Mon::decode(r)?),
            SmProc::Unmon => SmArgs::Unmon(MonId::decode(r)?),
            SmProc::UnmonAll => SmArgs::UnmonAll(MyId::decode(r)?),
            SmProc::SimuCrash => SmArgs::SimuCrash,
            SmProc::Notify => SmArgs::Notify(StatChge::decode(r)?),
        })
    }

    /// The procedure these arguments belong to.
    pub fn proc_(&self) -> SmProc {
        match self {
            SmArgs::Null => SmProc::Null,
            SmArgs::Stat(_) => SmProc::Stat,
            SmArgs::Mon(_) => SmProc::Mon,
            SmArgs::Unmon(_) => SmProc::Unmon,
            SmArgs::UnmonAll(_) => SmProc::UnmonAll,
            SmArgs::SimuCrash => SmProc::SimuCrash,
            SmArgs::Notify(_) => SmProc::Notify,
        }
    }

    pub fn encode(&self, w: &mut XdrWriter<'_>) {
        match self {
            SmArgs::Null | SmArgs::SimuCrash => {}
            SmArgs::Stat(a) => a.encode(w),
            SmArgs::Mon(a) => a.encode(w),
            SmArgs::Unmon(a) => a.encode(w),
            SmArgs::UnmonAll(a) => a.encode(w),
            SmArgs::Notify(a) => a.encode(w),
        }
    }
}

#[cfg(test)]
mod tests;
