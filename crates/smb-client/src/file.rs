//! [`File`]: an open handle and the operations on it.

use bytes::Bytes;
use smb_fscc::{class, SetInfo};
use smb_wire::msg::close::CloseRequest;
use smb_wire::msg::lock::{self, LockElement, LockRequest};
use smb_wire::msg::query_directory::{self, QueryDirectoryRequest};
use smb_wire::msg::query_info::{self, info_type};
use smb_wire::msg::read::{self, ReadRequest};
use smb_wire::msg::set_info::SetInfoRequest;
use smb_wire::msg::simple::{self, FlushRequest};
use smb_wire::msg::write::{self, WriteRequest};
use smb_wire::{dialect, Command, FileId, NtStatus};

use crate::{ClientError, DirEntry, FileStat, Tree};

/// Bytes a [`File::write_framed`] buffer keeps before its payload for the request's headers.
pub const WRITE_FRAME_ROOM: usize = crate::conn::FRAMED_ROOM;

/// An open file or directory. Clone it freely; every clone names the same open, which
/// [`File::close`] ends.
#[derive(Debug, Clone)]
pub struct File {
    tree: Tree,
    id: FileId,
    size_at_open: u64,
    /// The CreateGuid of a durable v2 open the server granted.
    create_guid: Option<[u8; 16]>,
    /// Requests through this handle are replays (see [`File::replaying`]).
    replay: bool,
}

/// Largest QUERY_DIRECTORY output buffer asked for.
const DIR_BUFFER: u32 = 64 * 1024;

impl File {
    pub(crate) fn new(tree: Tree, id: FileId, size_at_open: u64) -> File {
        File { tree, id, size_at_open, create_guid: None, replay: false }
    }

    pub(crate) fn with_durable(self, create_guid: Option<[u8; 16]>) -> File {
        File { create_guid, ..self }
    }

    /// The CreateGuid when the server granted this open durability (see
    /// [`crate::Tree::reconnect`]).
    pub fn create_guid(&self) -> Option<[u8; 16]> {
        self.create_guid
    }

    /// This open, its requests flagged SMB2_FLAGS_REPLAY_OPERATION (MS-SMB2 3.2.4.1.1): for
    /// resending, after a reconnect, a request whose connection was lost before its answer
    /// came, so the server treats it as the same operation (3.x only; ignored before).
    pub fn replaying(&self) -> File {
        File { replay: dialect::is_smb3(self.tree.client().dialect()), ..self.clone() }
    }

    /// A request on this open's tree, flagged as a replay when this handle replays.
    fn request(&self, command: Command) -> crate::conn::Request {
        let mut r = self.tree.request(command);
        r.replay = self.replay;
        r
    }

    /// [`File::request`] with room for a body of `body` bytes (a WRITE's payload).
    fn request_with_room(&self, command: Command, body: usize) -> crate::conn::Request {
        let mut r = self.tree.request_with_room(command, body);
        r.replay = self.replay;
        r
    }

    /// The SMB2 FileId of this open.
    pub fn file_id(&self) -> FileId {
        self.id
    }

    /// EndOfFile as reported by CREATE.
    pub fn size_at_open(&self) -> u64 {
        self.size_at_open
    }

    /// The tree this file was opened on.
    pub fn tree(&self) -> &Tree {
        &self.tree
    }

    /// The same open used through another channel of the session.
    pub fn on_channel(&self, channel: &crate::Client) -> File {
        File { tree: self.tree.on_channel(channel), ..self.clone() }
    }

    /// Reads up to `len` bytes at `offset` (MS-SMB2 3.2.4.6). A read larger than
    /// [`crate::Client::max_read`] is split into several requests; a short result means
    /// end of file. Reading at or past the end returns an empty buffer.
    pub async fn read(&self, offset: u64, len: u32) -> Result<Bytes, ClientError> {
        let max = self.tree.client().max_read();
        if len <= max {
            return self.read_one(offset, len).await;
        }
        let mut out = Vec::with_capacity(len as usize);
        let mut done = 0u32;
        while done < len {
            let n = (len - done).min(max);
            let chunk = self.read_one(offset + u64::from(done), n).await?;
            out.extend_from_slice(&chunk);
            done += n;
            if chunk.len() < n as usize {
                break;
            }
        }
        Ok(out.into())
    }

    async fn read_one(&self, offset: u64, len: u32) -> Result<Bytes, ClientError> {
        let client = self.tree.client();
        let mut r = self.request(Command::Read);
        r.charge = client.charge(len);
        ReadRequest { flags: 0, length: len, offset, file_id: self.id, minimum_count: 0, channel: 0 }.encode(r.body());
        let resp = client.call_raw(r).await?;
        if resp.status() == NtStatus::END_OF_FILE {
            return Ok(Bytes::new());
        }
        let resp = resp.check("READ")?;
        let range = read::decode_response(resp.msg())?;
        if range.len() > len as usize {
            return Err(ClientError::Protocol("READ returned more than asked"));
        }
        Ok(resp.slice(range))
    }

    /// Reads `size` bytes from offset 0 with up to 16 READs in flight.
    pub(crate) async fn read_all(&self, size: u64) -> Result<Vec<u8>, ClientError> {
        let max = u64::from(self.tree.client().max_read());
        let mut out = Vec::with_capacity(usize::try_from(size.min(1 << 30)).unwrap_or(0));
        let mut offset = 0u64;
        while offset < size {
            let mut batch = Vec::new();
            let mut o = offset;
            while o < size && batch.len() < 16 {
                let n = (size - o).min(max) as u32;
                let f = self.clone();
                batch.push(tokio::spawn(async move { f.read_one(o, n).await }));
                o += u64::from(n);
            }
            for h in batch {
                let chunk = h.await.map_err(|_| ClientError::Disconnected)??;
                if chunk.is_empty() {
                    return Ok(out);
                }
                out.extend_from_slice(&chunk);
            }
            offset = o;
        }
        Ok(out)
    }

    /// Writes `data` at `offset`, split into requests of at most
    /// [`crate::Client::max_write`]; returns the bytes written (MS-SMB2 3.2.4.7).
    pub async fn write(&self, offset: u64, data: &[u8]) -> Result<u32, ClientError> {
        let client = self.tree.client();
        let max = client.max_write() as usize;
        let mut total = 0u32;
        for (i, chunk) in data.chunks(max.max(1)).enumerate() {
            // Header, fixed WRITE fields and payload (a signature or transform header fits
            // in the prefix the request reserves).
            let mut r = self.request_with_room(Command::Write, 48 + chunk.len());
            r.charge = client.charge(chunk.len() as u32);
            let at = offset + (i * max) as u64;
            WriteRequest { offset: at, file_id: self.id, channel: 0, flags: 0, data: chunk }.encode(r.body());
            let resp = client.call(r, "WRITE").await?;
            let n = write::decode_response(resp.msg())?;
            total = total.saturating_add(n);
            if (n as usize) < chunk.len() {
                break;
            }
        }
        Ok(total)
    }

    /// [`File::write`] of a shared buffer: on a session that neither signs nor seals, the
    /// payload goes to the socket from `data` itself instead of being copied into the
    /// request (one copy less per byte on the client).
    pub async fn write_bytes(&self, offset: u64, data: bytes::Bytes) -> Result<u32, ClientError> {
        let client = self.tree.client();
        if data.is_empty() || data.len() > client.max_write() as usize {
            return self.write(offset, &data).await;
        }
        let mut r = self.request_with_room(Command::Write, 48);
        r.charge = client.charge(data.len() as u32);
        WriteRequest { offset, file_id: self.id, channel: 0, flags: 0, data: &[] }.encode_fixed(r.body(), data.len());
        let resp = client.call_payload(r, data, "WRITE").await?;
        Ok(write::decode_response(resp.msg())?)
    }

    /// [`File::write`] of a payload the caller placed after the first [`WRITE_FRAME_ROOM`]
    /// bytes of `frame`: the request is built in that room and a signature computed in
    /// place, so neither a plain nor a signed WRITE copies the payload; a sealed one is
    /// encrypted from it into a frame of its own in one pass (encryption must not overwrite
    /// the caller's bytes). `frame` is handed back for the next write; after an error it may
    /// be empty.
    pub async fn write_framed(&self, offset: u64, frame: &mut bytes::BytesMut) -> Result<u32, ClientError> {
        let client = self.tree.client();
        let Some(len) = frame.len().checked_sub(WRITE_FRAME_ROOM) else {
            return Err(ClientError::Protocol("WRITE frame shorter than its header room"));
        };
        let mut r = self.request_with_room(Command::Write, 48);
        if len == 0 || len > client.max_write() as usize {
            return self.write(offset, &frame[WRITE_FRAME_ROOM..]).await;
        }
        r.charge = client.charge(len as u32);
        WriteRequest { offset, file_id: self.id, channel: 0, flags: 0, data: &[] }.encode_fixed(r.body(), len);
        let resp = if r.encrypted() {
            client.call_sealed(r, &frame[WRITE_FRAME_ROOM..], "WRITE").await?
        } else {
            client.call_framed(r, frame, "WRITE").await?
        };
        Ok(write::decode_response(resp.msg())?)
    }

    /// Flushes the file to stable storage on the server (MS-SMB2 3.2.4.8).
    pub async fn flush(&self) -> Result<(), ClientError> {
        let mut r = self.request(Command::Flush);
        FlushRequest { file_id: self.id }.encode(r.body());
        let resp = self.tree.client().call(r, "FLUSH").await?;
        simple::decode_empty_response(resp.msg())?;
        Ok(())
    }

    /// Metadata from FileAllInformation (MS-SMB2 3.2.4.12).
    pub async fn stat(&self) -> Result<FileStat, ClientError> {
        let mut r = self.tree.query_all_request(self.id);
        r.replay = self.replay;
        let resp = self.tree.client().call(r, "QUERY_INFO").await?;
        Ok(smb_fscc::decode_file_all_information(query_info::decode_response(resp.msg())?)?.into())
    }

    /// Sets the file size (FileEndOfFileInformation).
    pub async fn set_len(&self, len: u64) -> Result<(), ClientError> {
        self.set_info(&SetInfo::EndOfFile { end_of_file: len }).await
    }

    /// Sends one SET_INFO of a file information class (MS-SMB2 3.2.4.13).
    pub(crate) async fn set_info(&self, info: &SetInfo) -> Result<(), ClientError> {
        let mut buf = Vec::new();
        let info_class = smb_fscc::encode_set_info(info, &mut buf);
        let mut r = self.request(Command::SetInfo);
        SetInfoRequest { info_type: info_type::FILE, info_class, buffer: &buf, additional_information: 0, file_id: self.id }.encode(r.body());
        let resp = self.tree.client().call(r, "SET_INFO").await?;
        simple::decode_set_info_response(resp.msg())?;
        Ok(())
    }

    /// Locks a byte range (MS-SMB2 3.2.4.19). Without `fail_immediately` the server may
    /// answer STATUS_PENDING and grant the lock later; this waits for that.
    pub async fn lock(&self, offset: u64, len: u64, exclusive: bool, fail_immediately: bool) -> Result<(), ClientError> {
        let mut flags = if exclusive { lock::flags::EXCLUSIVE_LOCK } else { lock::flags::SHARED_LOCK };
        if fail_immediately {
            flags |= lock::flags::FAIL_IMMEDIATELY;
        }
        self.lock_request(LockElement { offset, length: len, flags }).await
    }

    /// Releases a byte range locked with [`File::lock`].
    pub async fn unlock(&self, offset: u64, len: u64) -> Result<(), ClientError> {
        self.lock_request(LockElement { offset, length: len, flags: lock::flags::UNLOCK }).await
    }

    async fn lock_request(&self, el: LockElement) -> Result<(), ClientError> {
        let mut r = self.request(Command::Lock);
        LockRequest { lock_sequence: 0, file_id: self.id, locks: vec![el] }.encode(r.body());
        let resp = self.tree.client().call(r, "LOCK").await?;
        simple::decode_empty_response(resp.msg())?;
        Ok(())
    }

    /// Lists a directory opened with [`crate::CreateOptions::open_dir`]: QUERY_DIRECTORY with
    /// FileIdBothDirectoryInformation, repeated until STATUS_NO_MORE_FILES (MS-SMB2 3.2.4.17).
    pub async fn list(&self, pattern: &str) -> Result<Vec<DirEntry>, ClientError> {
        let client = self.tree.client();
        let len = DIR_BUFFER.min(client.max_transact());
        let mut out = Vec::new();
        let mut first = true;
        loop {
            let mut r = self.request(Command::QueryDirectory);
            r.charge = client.charge(len);
            QueryDirectoryRequest {
                info_class: class::FILE_ID_BOTH_DIRECTORY_INFORMATION,
                flags: if first { query_directory::flags::RESTART_SCANS } else { 0 },
                file_index: 0,
                file_id: self.id,
                pattern: if pattern.is_empty() { "*".into() } else { pattern.into() },
                output_buffer_length: len,
            }
            .encode(r.body());
            first = false;
            let resp = client.call_raw(r).await?;
            if resp.status() == NtStatus::NO_MORE_FILES {
                return Ok(out);
            }
            let resp = resp.check("QUERY_DIRECTORY")?;
            let buf = query_directory::decode_output_response(resp.msg())?;
            if buf.is_empty() {
                return Ok(out);
            }
            for (name, info) in smb_fscc::decode_dir_entries(class::FILE_ID_BOTH_DIRECTORY_INFORMATION, buf)? {
                out.push(DirEntry { name, stat: info.into() });
            }
        }
    }

    /// Closes the open (MS-SMB2 3.2.4.5).
    pub async fn close(self) -> Result<(), ClientError> {
        let mut r = self.request(Command::Close);
        CloseRequest { flags: 0, file_id: self.id }.encode(r.body());
        self.tree.client().call(r, "CLOSE").await?;
        Ok(())
    }
}
