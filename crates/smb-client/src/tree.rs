//! [`Tree`]: a connected share, and the path-level operations on it.

use smb_fscc::{class, FileInfo, SetInfo};
use smb_wire::msg::close::CloseRequest;
use smb_wire::msg::create::{access, decode_contexts, disposition, oplock, options, share, CreateContext, CreateRequest, CreateResponse};
use smb_wire::msg::durable::{self, DurableReconnectV2, DurableRequestV2};
use smb_wire::msg::query_info::{self, info_type, QueryInfoRequest};
use smb_wire::msg::simple;
use smb_wire::{Command, FileId};

use crate::conn::Request;
use crate::{Client, ClientError, File};

/// How to open or create a file (MS-SMB2 2.2.13). Start from a constructor and adjust
/// fields as needed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateOptions {
    /// CreateDisposition (`smb_wire::msg::create::disposition`).
    pub disposition: u32,
    /// DesiredAccess (`smb_wire::msg::create::access`).
    pub access: u32,
    /// ShareAccess (`smb_wire::msg::create::share`).
    pub share: u32,
    /// FILE_DIRECTORY_FILE: the open must be a directory.
    pub directory: bool,
    /// FILE_NON_DIRECTORY_FILE: the open must not be a directory.
    pub non_directory: bool,
    /// FILE_DELETE_ON_CLOSE (needs DELETE access).
    pub delete_on_close: bool,
    /// FileAttributes for a new file (0 = let the server choose).
    pub attributes: u32,
    /// Ask for a durable v2 open (DH2Q, MS-SMB2 2.2.13.2.11) under this CreateGuid, with the
    /// batch oplock the server needs to grant durability. Pick a fresh guid per open (see
    /// [`new_create_guid`]); [`Tree::reconnect`] presents it again after a lost connection.
    pub durable: Option<[u8; 16]>,
    /// With `durable`: ask for a persistent handle (SMB2_DHANDLE_FLAG_PERSISTENT), which a
    /// continuously available share grants.
    pub persistent: bool,
}

/// A random CreateGuid for [`CreateOptions::durable`].
pub fn new_create_guid() -> [u8; 16] {
    rand::random()
}

const SHARE_ALL: u32 = share::READ | share::WRITE | share::DELETE;

impl CreateOptions {
    /// Open an existing file for reading.
    pub fn open_read() -> Self {
        CreateOptions {
            disposition: disposition::OPEN,
            access: access::FILE_GENERIC_READ,
            share: SHARE_ALL,
            directory: false,
            non_directory: true,
            delete_on_close: false,
            attributes: 0,
            durable: None,
            persistent: false,
        }
    }

    /// Open an existing file for reading and writing.
    pub fn open_rw() -> Self {
        CreateOptions { access: access::FILE_GENERIC_READ | access::FILE_GENERIC_WRITE, ..Self::open_read() }
    }

    /// Create a file, or truncate it if it exists, for reading and writing.
    pub fn create_overwrite() -> Self {
        CreateOptions { disposition: disposition::OVERWRITE_IF, ..Self::open_rw() }
    }

    /// Create a new directory (fails if the name exists).
    pub fn create_dir() -> Self {
        CreateOptions { disposition: disposition::CREATE, directory: true, non_directory: false, ..Self::open_read() }
    }

    /// Open an existing directory (for listing).
    pub fn open_dir() -> Self {
        CreateOptions { disposition: disposition::OPEN, directory: true, non_directory: false, ..Self::open_read() }
    }

    fn create_options(&self) -> u32 {
        let mut o = 0;
        if self.directory {
            o |= options::DIRECTORY_FILE;
        }
        if self.non_directory {
            o |= options::NON_DIRECTORY_FILE;
        }
        if self.delete_on_close {
            o |= options::DELETE_ON_CLOSE;
        }
        o
    }
}

/// File metadata from FileAllInformation (MS-FSCC 2.4.2). Times are FILETIMEs (100 ns
/// since 1601; see `smb_fscc::filetime_to_system_time`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStat {
    /// EndOfFile.
    pub size: u64,
    /// AllocationSize.
    pub alloc_size: u64,
    /// CreationTime.
    pub creation_time: u64,
    /// LastAccessTime.
    pub last_access_time: u64,
    /// LastWriteTime.
    pub last_write_time: u64,
    /// ChangeTime.
    pub change_time: u64,
    /// FILE_ATTRIBUTE_* bits.
    pub attributes: u32,
    /// Whether it is a directory.
    pub is_dir: bool,
    /// IndexNumber: the server's stable file id.
    pub file_id: u64,
}

impl From<FileInfo> for FileStat {
    fn from(i: FileInfo) -> Self {
        FileStat {
            size: i.end_of_file,
            alloc_size: i.allocation_size,
            creation_time: i.creation_time,
            last_access_time: i.last_access_time,
            last_write_time: i.last_write_time,
            change_time: i.change_time,
            attributes: i.attributes,
            is_dir: i.is_directory,
            file_id: i.file_id,
        }
    }
}

/// One directory entry (FileIdBothDirectoryInformation, MS-FSCC 2.4.17).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// The entry's name ("." and ".." included, as the server sends them).
    pub name: String,
    /// Metadata; `file_id` is the entry's FileId.
    pub stat: FileStat,
}

/// A connected share. Clone it freely; it holds its [`Client`].
#[derive(Debug, Clone)]
pub struct Tree {
    client: Client,
    id: u32,
    encrypt: bool,
    share_type: u8,
}

/// QUERY_INFO output buffer for FileAllInformation: room for long names.
const ALL_INFO_LEN: u32 = 64 * 1024;

impl Tree {
    pub(crate) fn new(client: Client, id: u32, encrypt: bool, share_type: u8) -> Tree {
        Tree { client, id, encrypt, share_type }
    }

    pub(crate) fn id(&self) -> u32 {
        self.id
    }

    /// Whether the share demands encryption (Share.EncryptData).
    pub fn encrypts(&self) -> bool {
        self.encrypt
    }

    /// ShareType from TREE_CONNECT (1 disk, 2 pipe, 3 print).
    pub fn share_type(&self) -> u8 {
        self.share_type
    }

    /// The client (channel) this tree sends on.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The same tree reached through another channel of the session (see
    /// [`Client::bind_channel`]): TreeIds belong to the session, not the connection.
    pub fn on_channel(&self, channel: &Client) -> Tree {
        Tree { client: channel.clone(), ..self.clone() }
    }

    pub(crate) fn request(&self, command: Command) -> Request {
        self.client.request(command, self.id, self.encrypt)
    }

    /// [`Tree::request`] with room for a body of `body` bytes (a WRITE's payload).
    pub(crate) fn request_with_room(&self, command: Command, body: usize) -> Request {
        self.client.request_with_room(command, self.id, self.encrypt, body)
    }

    /// A CREATE; `reclaim` names the durable open to reconnect (DH2C) instead.
    fn create_request_ctx(&self, path: &str, opts: &CreateOptions, reclaim: Option<FileId>) -> Request {
        let mut r = self.request(Command::Create);
        let flags = if opts.persistent { durable::FLAG_PERSISTENT } else { 0 };
        let ctx = match (opts.durable, reclaim) {
            (Some(create_guid), None) => Some((durable::DH2Q, DurableRequestV2 { timeout: 0, flags, create_guid }.encode())),
            (Some(create_guid), Some(file_id)) => Some((durable::DH2C, DurableReconnectV2 { file_id, create_guid, flags }.encode())),
            (None, _) => None,
        };
        CreateRequest {
            security_flags: 0,
            oplock_level: if ctx.is_some() { oplock::BATCH } else { oplock::NONE },
            impersonation_level: 2, // Impersonation
            desired_access: opts.access,
            file_attributes: opts.attributes,
            share_access: opts.share,
            create_disposition: opts.disposition,
            create_options: opts.create_options(),
            name: smb_path(path),
            contexts: ctx.as_ref().map(|(name, data)| vec![CreateContext { name, data }]).unwrap_or_default(),
        }
        .encode(r.body());
        r
    }

    fn create_request(&self, path: &str, opts: &CreateOptions) -> Request {
        self.create_request_ctx(path, opts, None)
    }

    /// Opens or creates `path` (relative to the share; `/` or `\` separators) (MS-SMB2 3.2.4.3).
    pub async fn create(&self, path: &str, opts: &CreateOptions) -> Result<File, ClientError> {
        let resp = self.client.call(self.create_request(path, opts), "CREATE").await?;
        let cr = CreateResponse::decode(resp.msg())?;
        let durable = opts.durable.filter(|_| granted_durable(&cr));
        Ok(File::new(self.clone(), cr.file_id, cr.end_of_file).with_durable(durable))
    }

    /// Sends a CREATE again after its connection was lost before the answer came (MS-SMB2
    /// 3.2.4.3, 3.2.4.1.1): flagged SMB2_FLAGS_REPLAY_OPERATION (3.x) with the same
    /// `opts`, whose durable CreateGuid lets the server answer with the open the first
    /// CREATE made, if it got that far, instead of a second one (its replay cache, or
    /// the disconnected durable open it left).
    pub async fn create_replay(&self, path: &str, opts: &CreateOptions) -> Result<File, ClientError> {
        let mut r = self.create_request(path, opts);
        r.replay = smb_wire::dialect::is_smb3(self.client.dialect());
        let resp = self.client.call(r, "CREATE").await?;
        let cr = CreateResponse::decode(resp.msg())?;
        let durable = opts.durable.filter(|_| granted_durable(&cr));
        Ok(File::new(self.clone(), cr.file_id, cr.end_of_file).with_durable(durable))
    }

    /// Reclaims the durable open `file_id` made under `create_guid` (see
    /// [`CreateOptions::durable`], [`File::create_guid`]) on this tree, a tree of a new
    /// connection after the old one was lost (DH2C, MS-SMB2 3.2.4.3.5). The server answers
    /// with the same open, its state intact.
    pub async fn reconnect(&self, path: &str, opts: &CreateOptions, file_id: FileId, create_guid: [u8; 16]) -> Result<File, ClientError> {
        let opts = CreateOptions { durable: Some(create_guid), ..opts.clone() };
        let resp = self.client.call(self.create_request_ctx(path, &opts, Some(file_id)), "CREATE").await?;
        let cr = CreateResponse::decode(resp.msg())?;
        Ok(File::new(self.clone(), cr.file_id, cr.end_of_file).with_durable(Some(create_guid)))
    }

    /// Creates a directory.
    pub async fn mkdir(&self, path: &str) -> Result<(), ClientError> {
        self.create(path, &CreateOptions::create_dir()).await?.close().await
    }

    /// Deletes a file (open with DELETE_ON_CLOSE, then close).
    pub async fn remove(&self, path: &str) -> Result<(), ClientError> {
        let opts = CreateOptions { access: access::DELETE | access::FILE_READ_ATTRIBUTES, delete_on_close: true, ..CreateOptions::open_read() };
        self.create(path, &opts).await?.close().await
    }

    /// Deletes an empty directory. Uses FileDispositionInformation so a non-empty directory
    /// fails at once with STATUS_DIRECTORY_NOT_EMPTY.
    pub async fn rmdir(&self, path: &str) -> Result<(), ClientError> {
        let opts = CreateOptions { access: access::DELETE | access::FILE_READ_ATTRIBUTES, ..CreateOptions::open_dir() };
        let dir = self.create(path, &opts).await?;
        let res = dir.set_info(&SetInfo::Disposition { delete_pending: true }).await;
        let closed = dir.close().await;
        res.and(closed)
    }

    /// Renames (moves) a file or directory within the share (FileRenameInformation).
    pub async fn rename(&self, from: &str, to: &str, replace: bool) -> Result<(), ClientError> {
        let opts = CreateOptions {
            access: access::DELETE | access::FILE_READ_ATTRIBUTES | access::SYNCHRONIZE,
            non_directory: false,
            ..CreateOptions::open_read()
        };
        let f = self.create(from, &opts).await?;
        let res = f.set_info(&SetInfo::Rename { replace_if_exists: replace, root_directory: 0, file_name: smb_path(to) }).await;
        let closed = f.close().await;
        res.and(closed)
    }

    /// Metadata of `path` in one round trip: CREATE + QUERY_INFO + CLOSE compounded
    /// (MS-SMB2 3.2.4.1.4, related operations).
    pub async fn stat(&self, path: &str) -> Result<FileStat, ClientError> {
        let opts = CreateOptions { access: access::FILE_READ_ATTRIBUTES, non_directory: false, ..CreateOptions::open_read() };
        let create = self.create_request(path, &opts);
        let mut query = self.query_all_request(FileId::RELATED);
        query.related = true;
        let mut close = self.request(Command::Close);
        CloseRequest { flags: 0, file_id: FileId::RELATED }.encode(close.body());
        close.related = true;
        let mut out = self.client.call_compound(vec![create, query, close]).await?.into_iter();
        let (Some(c), Some(q), Some(_)) = (out.next(), out.next(), out.next()) else {
            return Err(ClientError::Protocol("compound answered short"));
        };
        c?.check("CREATE")?;
        let q = q?.check("QUERY_INFO")?;
        Ok(smb_fscc::decode_file_all_information(query_info::decode_response(q.msg())?)?.into())
    }

    /// Reads a whole file: CREATE + QUERY_INFO compounded, then READs of up to
    /// `max_read` in parallel, then CLOSE.
    pub async fn read_file(&self, path: &str) -> Result<Vec<u8>, ClientError> {
        let create = self.create_request(path, &CreateOptions::open_read());
        let mut query = self.query_all_request(FileId::RELATED);
        query.related = true;
        let mut out = self.client.call_compound(vec![create, query]).await?.into_iter();
        let (Some(c), Some(q)) = (out.next(), out.next()) else {
            return Err(ClientError::Protocol("compound answered short"));
        };
        let c = c?.check("CREATE")?;
        let file = File::new(self.clone(), CreateResponse::decode(c.msg())?.file_id, 0);
        let res = async {
            let q = q?.check("QUERY_INFO")?;
            let stat = FileStat::from(smb_fscc::decode_file_all_information(query_info::decode_response(q.msg())?)?);
            file.read_all(stat.size).await
        }
        .await;
        let closed = file.clone().close().await;
        let data = res?;
        closed?;
        Ok(data)
    }

    pub(crate) fn query_all_request(&self, file_id: FileId) -> Request {
        let mut r = self.request(Command::QueryInfo);
        r.charge = self.client.charge(ALL_INFO_LEN);
        QueryInfoRequest {
            info_type: info_type::FILE,
            info_class: class::FILE_ALL_INFORMATION,
            output_buffer_length: ALL_INFO_LEN.min(self.client.max_transact()),
            input: &[],
            additional_information: 0,
            flags: 0,
            file_id,
        }
        .encode(r.body());
        r
    }

    /// Disconnects from the share (MS-SMB2 3.2.4.6).
    pub async fn disconnect(self) -> Result<(), ClientError> {
        let mut r = self.request(Command::TreeDisconnect);
        simple::encode_empty_request(r.body());
        let resp = self.client.call(r, "TREE_DISCONNECT").await?;
        simple::decode_empty_response(resp.msg())?;
        Ok(())
    }
}

/// Whether a CREATE response granted the durable v2 open asked for (a DH2Q response context).
fn granted_durable(cr: &CreateResponse) -> bool {
    decode_contexts(&cr.contexts).is_ok_and(|cs| cs.iter().any(|c| c.name == durable::DH2Q))
}

/// Share-relative path in SMB form: backslashes, no leading separator (MS-SMB2 2.2.13).
pub(crate) fn smb_path(p: &str) -> String {
    p.replace('/', "\\").trim_start_matches('\\').to_string()
}
