//! Copies a local file to a share, then reads it back and compares.
//!
//! usage: SMB_USER=alice SMB_PASSWORD=pw cargo run -p smb-client --example copy -- \
//!            LOCAL_FILE 127.0.0.1:445 SHARE REMOTE_PATH
//! Optional: SMB_ENCRYPT=1 to encrypt, SMB_DOMAIN.

use std::time::Instant;

use smb_client::{Client, ClientConfig, CreateOptions};

#[tokio::main]
async fn main() {
    // Errors print as their one-line Display, e.g. "server refused logon: STATUS_LOGON_FAILURE".
    if let Err(e) = run().await {
        eprintln!("copy: {e}");
        std::process::exit(1);
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, local, addr, share, remote] = &args[..] else {
        eprintln!("usage: copy LOCAL_FILE HOST:PORT SHARE REMOTE_PATH   (env SMB_USER, SMB_PASSWORD)");
        std::process::exit(2);
    };
    let cfg = ClientConfig {
        user: std::env::var("SMB_USER").unwrap_or_default(),
        password: std::env::var("SMB_PASSWORD").unwrap_or_default(),
        domain: std::env::var("SMB_DOMAIN").unwrap_or_default(),
        encrypt: std::env::var("SMB_ENCRYPT").is_ok_and(|v| v == "1"),
        ..ClientConfig::default()
    };
    let data = std::fs::read(local)?;
    let started = Instant::now();
    let client = Client::connect(addr.parse()?, &cfg).await?;
    let tree = client.tree_connect(share).await?;
    let file = tree.create(remote, &CreateOptions::create_overwrite()).await?;

    // Up to 8 writes of max_write bytes in flight on the one connection.
    let chunk = client.max_write() as usize;
    let mut tasks = tokio::task::JoinSet::new();
    for (i, piece) in data.chunks(chunk.max(1)).enumerate() {
        if tasks.len() >= 8 {
            tasks.join_next().await.transpose()?.transpose()?;
        }
        let (f, piece) = (file.clone(), piece.to_vec());
        tasks.spawn(async move { f.write((i * chunk) as u64, &piece).await });
    }
    while let Some(r) = tasks.join_next().await {
        r??;
    }
    file.flush().await?;
    file.close().await?;

    let back = tree.read_file(remote).await?;
    if back != data {
        return Err("read-back differs from the local file".into());
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "copied {} bytes to \\\\{addr}\\{share}\\{remote} (dialect {:#06x}{}) and verified, {:.1} MB/s",
        data.len(),
        client.dialect(),
        if client.is_encrypted() { ", encrypted" } else { "" },
        2.0 * data.len() as f64 / secs / 1e6
    );
    tree.disconnect().await?;
    client.logoff().await?;
    Ok(())
}
