//! An async SMB 2.1 – 3.1.1 client on tokio (MS-SMB2 section 3.2), built on Braid's own
//! sans-IO crates: `smb-wire` for messages, `smb-auth` for NTLMv2 in SPNEGO, `smb-crypto`
//! for signing, key derivation and encryption, `smb-fscc` for information classes.
//!
//! One [`Client`] is one TCP connection with one authenticated session. It is a cheap,
//! clonable handle: any number of tasks may issue requests at once. A reader task routes
//! responses to requests by MessageId, and a credit semaphore keeps the number of requests
//! in flight within what the server granted (MS-SMB2 3.2.4.1.5, 3.2.5.1.4).
//!
//! ```no_run
//! # async fn demo() -> Result<(), smb_client::ClientError> {
//! use smb_client::{Client, ClientConfig, CreateOptions};
//! let cfg = ClientConfig { user: "alice".into(), password: "pw".into(), ..ClientConfig::default() };
//! let client = Client::connect("127.0.0.1:445".parse().unwrap(), &cfg).await?;
//! let tree = client.tree_connect("data").await?;
//! let f = tree.create("hello.txt", &CreateOptions::create_overwrite()).await?;
//! f.write(0, b"hello").await?;
//! f.close().await?;
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

mod buffers;
mod client;
mod conn;
mod copy;
mod error;
mod file;
mod session;
mod tree;

pub use client::{BindTweaks, Client, ClientConfig};
pub use copy::CopyChunk;
pub use error::ClientError;
pub use file::{File, WRITE_FRAME_ROOM};
pub use smb_crypto::Cipher;
pub use smb_wire::dialect;
pub use smb_wire::msg::ioctl::NetworkInterfaceInfo as NetworkInterface;
pub use smb_wire::NtStatus;
pub use tree::{new_create_guid, CreateOptions, DirEntry, FileStat, Tree};
