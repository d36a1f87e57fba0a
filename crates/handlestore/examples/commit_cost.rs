//! What one durable commit of the handle store costs: `cargo run --release -p
//! braid-handlestore --example commit_cost -- DIR [N]` puts and removes N records (one
//! commit each, as an open and its close do), then the same in batches of 8 (group
//! commit), in a fresh store under DIR, and prints the mean time per commit.

use std::time::Instant;

use braid_handlestore::{Change, HandleRecord, HandleStore, RedbStore};

fn record(id: u64) -> HandleRecord {
    HandleRecord {
        persistent_id: id,
        volatile_id: id,
        share: "ca".into(),
        path: format!("dir\\file{id}.txt"),
        file_id: id,
        token: Some(vec![0; 24]),
        desired_access: 0x0012_019f,
        share_access: 3,
        lease: None,
        oplock_level: 9,
        locks: Vec::new(),
        create_guid: [7; 16],
        app_instance: None,
        user: "alice".into(),
        timeout_ms: 60_000,
        delete_on_close: false,
        create_action: 2,
        mode: 0,
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = std::path::PathBuf::from(args.next().expect("usage: commit_cost DIR [N]"));
    let n: u64 = args.next().map_or(2000, |s| s.parse().expect("N"));
    let path = dir.join(format!("commit-cost-{}.redb", std::process::id()));
    let store = RedbStore::open(&path).expect("store");
    let t = Instant::now();
    for id in 0..n {
        store.put(&record(id)).expect("put");
        store.remove(id).expect("remove");
    }
    let single = t.elapsed().as_secs_f64() * 1e6 / (2 * n) as f64;
    let t = Instant::now();
    for base in (0..n).step_by(8) {
        let puts: Vec<Change> = (base..base + 8).map(|id| Change::Put(Box::new(record(id)))).collect();
        store.apply(&puts).expect("apply");
        store.apply(&(base..base + 8).map(Change::Remove).collect::<Vec<_>>()).expect("apply");
    }
    let batched = t.elapsed().as_secs_f64() * 1e6 / (2 * n.div_ceil(8)) as f64;
    drop(store);
    let _ = std::fs::remove_file(&path);
    println!("{}: {single:.1} us per single-change commit, {batched:.1} us per 8-change commit ({:.1} us per change)", dir.display(), batched / 8.0);
}
