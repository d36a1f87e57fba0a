//! MOUNT v3 (RFC 1813 appendix I): MNT hands out an export's root handle to an allowed
//! client; the server keeps no mount list (DUMP answers an empty one, UMNT is a no-op), as
//! NFSv3 itself is stateless.

use std::net::IpAddr;
use std::sync::Arc;

use nfs_wire::mount3::*;
use nfs_wire::rpc::{AUTH_NONE, AUTH_SYS};
use nfs_wire::XdrWriter;

use crate::auth::Identity;
use crate::request::Ctx;
use crate::state::NfsState;

/// Appends the results of MOUNT procedure `proc_` with arguments `args`; returns whether it
/// succeeded (for the metrics).
pub async fn call(state: &Arc<NfsState>, peer: IpAddr, args: MountArgs3, out: &mut Vec<u8>) -> bool {
    match args {
        MountArgs3::Null | MountArgs3::Umnt(_) | MountArgs3::Umntall => true,
        MountArgs3::Dump => {
            encode_mount_list(&[], &mut XdrWriter::new(out));
            true
        }
        MountArgs3::Export => {
            let list: Vec<ExportNode> = state
                .exports
                .iter()
                .map(|e| ExportNode {
                    dir: format!("/{}", e.export.name).into_bytes(),
                    groups: e.export.rules.clients.iter().map(|c| c.to_string().into_bytes()).collect(),
                })
                .collect();
            encode_export_list(&list, &mut XdrWriter::new(out));
            true
        }
        MountArgs3::Mnt(a) => {
            let res = mnt(state, peer, &a.dirpath).await;
            res.encode(&mut XdrWriter::new(out));
            res.status() == MountStat3::Ok
        }
    }
}

async fn mnt(state: &Arc<NfsState>, peer: IpAddr, dirpath: &[u8]) -> MntRes {
    let export = std::str::from_utf8(dirpath).ok().and_then(|p| state.export_by_path(p));
    let Some((export, dir)) = export else { return MntRes::Fail(MountStat3::Noent) };
    let rules = &export.export.rules;
    if !rules.allows(peer) {
        tracing::info!(%peer, export = %export.export.name, "NFS mount refused: client not in nfs_clients");
        return MntRes::Fail(MountStat3::Acces);
    }
    let anon = Identity { uid: rules.anonuid, gid: rules.anongid, groups: Vec::new() };
    let ctx = Ctx { state: state.clone(), export: Some(export.clone()), id: anon };
    let fhandle = match ctx.stat_with_handle(dir).await {
        Ok((h, a)) if a.posix.kind == braid_vfs::FileKind::Dir => h,
        Ok(_) => return MntRes::Fail(MountStat3::Notdir),
        Err(nfs_wire::nfs3::Nfsstat3::Noent) => return MntRes::Fail(MountStat3::Noent),
        Err(s) => {
            tracing::warn!(export = %export.export.name, status = ?s, "NFS mount: no handle for the share root");
            return MntRes::Fail(MountStat3::Serverfault);
        }
    };
    let mut auth_flavors = vec![AUTH_SYS];
    if rules.auth_none {
        auth_flavors.push(AUTH_NONE);
    }
    MntRes::Ok(MntResOk { fhandle, auth_flavors })
}
