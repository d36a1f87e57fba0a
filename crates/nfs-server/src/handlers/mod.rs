//! One module per group of NFSv3 procedures. Each handler appends its result (status and
//! body) to the reply and returns the status, for the metrics.

pub mod attr;
pub mod create;
pub mod dir;
pub mod fs;
pub mod link;
pub mod lookup;
pub mod read;
pub mod remove;
pub mod rename;
pub mod write;

use nfs_wire::xdr::Xdr;
use nfs_wire::XdrWriter;

/// Appends an XDR value to the reply.
pub fn put<'a, T: Xdr<'a>>(out: &mut Vec<u8>, v: &T) {
    v.encode_xdr(&mut XdrWriter::new(out));
}

/// Open options of a handle that only reads or changes metadata.
pub const META_ONLY: braid_vfs::OpenOptions = braid_vfs::OpenOptions::METADATA;
