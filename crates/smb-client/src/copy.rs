//! Server-side copy from the client's side (MS-SMB2 3.2.4.20.1, 3.2.4.20.2): ask the
//! source open for its resume key, then send chunk lists that name it to the target.

use smb_wire::msg::copychunk::{Chunk, CopyRequest, CopyResponse, RESPONSE_LEN, RESUME_KEY_LEN};
use smb_wire::msg::ioctl::{self, fsctl, IoctlRequest, FLAG_IS_FSCTL};
use smb_wire::{Command, NtStatus};

use crate::{ClientError, File};

pub use smb_wire::msg::copychunk::Chunk as CopyChunk;

impl File {
    /// FSCTL_SRV_REQUEST_RESUME_KEY: the key that names this open as a copy's source.
    pub async fn resume_key(&self) -> Result<[u8; RESUME_KEY_LEN], ClientError> {
        let resp = self.fsctl(fsctl::SRV_REQUEST_RESUME_KEY, &[], 32).await?.check("IOCTL")?;
        let out = ioctl::decode_response(resp.msg())?;
        out.get(..RESUME_KEY_LEN).and_then(|k| k.try_into().ok()).ok_or(ClientError::Protocol("short resume key"))
    }

    /// FSCTL_SRV_COPYCHUNK_WRITE into this file from the open `source` names. Returns the
    /// server's counts with its status: a refused or partial copy says how far it got.
    pub async fn copy_chunks(&self, source: [u8; RESUME_KEY_LEN], chunks: &[Chunk]) -> Result<(NtStatus, CopyResponse), ClientError> {
        let mut input = Vec::with_capacity(32 + 24 * chunks.len());
        CopyRequest { source_key: source, chunks: chunks.to_vec() }.encode(&mut input);
        let resp = self.fsctl(fsctl::SRV_COPYCHUNK_WRITE, &input, RESPONSE_LEN as u32).await?;
        let status = resp.status();
        let counts = ioctl::decode_response(resp.msg()).ok().and_then(|o| CopyResponse::decode(o).ok());
        match counts {
            Some(c) => Ok((status, c)),
            None => Err(ClientError::Status { command: "IOCTL", status }),
        }
    }

    async fn fsctl(&self, ctl_code: u32, input: &[u8], max_output_response: u32) -> Result<crate::conn::Response, ClientError> {
        let mut r = self.tree().request_with_room(Command::Ioctl, 56 + input.len());
        IoctlRequest { ctl_code, file_id: self.file_id(), input, max_input_response: 0, max_output_response, flags: FLAG_IS_FSCTL }.encode(r.body());
        self.tree().client().call_raw(r).await
    }
}
