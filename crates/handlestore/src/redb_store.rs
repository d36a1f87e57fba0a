//! [`HandleStore`] in a redb file: one table, persistent id → JSON record. Each change is
//! its own write transaction committed with `Durability::Immediate` (fsync before it
//! returns). redb's copy-on-write B-tree and checksummed commit slots mean a crash leaves
//! either the old or the new state, never a torn mix.

use std::path::{Path, PathBuf};

use redb::{Database, ReadableTable, TableDefinition};

use crate::{Change, HandleRecord, HandleStore, StoreError};

const HANDLES: TableDefinition<u64, &[u8]> = TableDefinition::new("handles");

/// Persistent handle records in a redb file.
pub struct RedbStore {
    db: Database,
    path: PathBuf,
}

impl std::fmt::Debug for RedbStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedbStore").field("path", &self.path).finish()
    }
}

impl RedbStore {
    /// Opens (or creates) the store at `path`. A file redb cannot read (torn by something
    /// other than a crash of this store, or not a store at all) is moved aside as
    /// `<path>.unreadable` and a new one started: the server comes up, without the opens
    /// it held (logged as an error).
    pub fn open(path: &Path) -> Result<RedbStore, StoreError> {
        let err = |e: &dyn std::fmt::Display| StoreError::Storage { path: path.display().to_string(), message: e.to_string() };
        let db = match Database::create(path) {
            Ok(db) => db,
            Err(e) if !unreadable(&e) => return Err(err(&e)),
            Err(e) => {
                let aside = path.with_extension("redb.unreadable");
                tracing::error!(path = %path.display(), error = %e, aside = %aside.display(), "persistent handle store unreadable: moved aside, starting empty");
                std::fs::rename(path, &aside).map_err(|e| err(&e))?;
                Database::create(path).map_err(|e| err(&e))?
            }
        };
        let store = RedbStore { db, path: path.to_path_buf() };
        // Create the table, so a read of a new store finds it.
        store.write(|_| Ok(()))?;
        Ok(store)
    }

    fn err(&self, e: impl std::fmt::Display) -> StoreError {
        StoreError::Storage { path: self.path.display().to_string(), message: e.to_string() }
    }

    /// Runs `f` in one write transaction and commits it durably.
    fn write(&self, f: impl FnOnce(&mut redb::Table<'_, u64, &[u8]>) -> Result<(), redb::StorageError>) -> Result<(), StoreError> {
        let tx = self.db.begin_write().map_err(|e| self.err(e))?;
        {
            let mut t = tx.open_table(HANDLES).map_err(|e| self.err(e))?;
            f(&mut t).map_err(|e| self.err(e))?;
        }
        tx.commit().map_err(|e| self.err(e))
    }
}

/// Whether opening failed on the file's contents (then it is moved aside), not on access
/// to it (permissions, a full disk, another process holding it: then startup fails).
fn unreadable(e: &redb::DatabaseError) -> bool {
    use std::io::ErrorKind;
    match e {
        redb::DatabaseError::DatabaseAlreadyOpen => false,
        redb::DatabaseError::Storage(redb::StorageError::Io(io)) => matches!(io.kind(), ErrorKind::UnexpectedEof | ErrorKind::InvalidData),
        _ => true,
    }
}

fn encode(rec: &HandleRecord) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(rec).map_err(|e| StoreError::Encode(rec.persistent_id, e.to_string()))
}

impl HandleStore for RedbStore {
    fn apply(&self, changes: &[Change]) -> Result<(), StoreError> {
        let encoded = changes
            .iter()
            .map(|c| match c {
                Change::Put(r) => encode(r).map(|b| (r.persistent_id, Some(b))),
                Change::Remove(id) => Ok((*id, None)),
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.write(|t| {
            for (id, bytes) in &encoded {
                match bytes {
                    Some(b) => drop(t.insert(*id, b.as_slice())?),
                    None => drop(t.remove(*id)?),
                }
            }
            Ok(())
        })
    }

    fn put(&self, rec: &HandleRecord) -> Result<(), StoreError> {
        let bytes = encode(rec)?;
        self.write(|t| t.insert(rec.persistent_id, bytes.as_slice()).map(drop))
    }

    fn remove(&self, persistent_id: u64) -> Result<(), StoreError> {
        self.write(|t| t.remove(persistent_id).map(drop))
    }

    fn load_all(&self) -> Result<Vec<HandleRecord>, StoreError> {
        let tx = self.db.begin_read().map_err(|e| self.err(e))?;
        let t = tx.open_table(HANDLES).map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for row in t.iter().map_err(|e| self.err(e))? {
            let (k, v) = row.map_err(|e| self.err(e))?;
            match serde_json::from_slice::<HandleRecord>(v.value()) {
                Ok(r) => out.push(r),
                Err(e) => tracing::warn!(id = k.value(), error = %e, "persistent handle record unreadable: dropped"),
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LeaseRecord, LockRecord};

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("braid-handlestore-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn record(id: u64) -> HandleRecord {
        HandleRecord {
            persistent_id: id,
            volatile_id: id,
            share: "ca".into(),
            path: "dir\\file.txt".into(),
            file_id: 42,
            token: Some(vec![1, 2, 3]),
            desired_access: 0x12019f,
            share_access: 3,
            lease: Some(LeaseRecord { client_guid: [1; 16], key: [2; 16], state: 7, epoch: 3, v2: true, parent: None }),
            oplock_level: 0xff,
            locks: vec![LockRecord { offset: 0, length: 10, exclusive: true }],
            create_guid: [9; 16],
            app_instance: None,
            user: "alice".into(),
            timeout_ms: 60_000,
            delete_on_close: false,
            create_action: 2,
            mode: 0,
        }
    }

    #[test]
    fn records_survive_reopening() {
        let d = dir("roundtrip");
        let path = d.join(crate::FILE_NAME);
        {
            let s = RedbStore::open(&path).unwrap();
            assert!(s.load_all().unwrap().is_empty());
            s.put(&record(1)).unwrap();
            s.put(&record(2)).unwrap();
            let mut r = record(2);
            r.locks.clear();
            s.update(&r).unwrap();
            s.remove(1).unwrap();
            s.remove(77).unwrap();
        }
        let s = RedbStore::open(&path).unwrap();
        let mut expect = record(2);
        expect.locks.clear();
        assert_eq!(s.load_all().unwrap(), vec![expect]);
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn a_missing_file_starts_empty_and_a_garbage_file_is_moved_aside() {
        let d = dir("torn");
        let path = d.join(crate::FILE_NAME);
        assert!(RedbStore::open(&path).unwrap().load_all().unwrap().is_empty());
        // A store cut short in the middle of its header, and then one of pure garbage.
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len().min(100)]).unwrap();
        let s = RedbStore::open(&path).unwrap();
        assert!(s.load_all().unwrap().is_empty());
        s.put(&record(5)).unwrap();
        drop(s);
        std::fs::write(&path, vec![0xA5u8; 8192]).unwrap();
        let s = RedbStore::open(&path).unwrap();
        assert!(s.load_all().unwrap().is_empty());
        assert!(path.with_extension("redb.unreadable").exists());
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn a_batch_applies_in_order() {
        let d = dir("batch");
        let path = d.join(crate::FILE_NAME);
        let s = RedbStore::open(&path).unwrap();
        s.put(&record(1)).unwrap();
        let mut r2 = record(2);
        let changes = vec![Change::Put(Box::new(r2.clone())), Change::Remove(1), Change::Put(Box::new(record(3))), Change::Remove(3)];
        s.apply(&changes).unwrap();
        r2.oplock_level = 1;
        s.apply(&[Change::Put(Box::new(r2.clone()))]).unwrap();
        assert_eq!(s.load_all().unwrap(), vec![r2]);
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn an_undecodable_record_is_skipped() {
        let d = dir("undecodable");
        let path = d.join(crate::FILE_NAME);
        let s = RedbStore::open(&path).unwrap();
        s.put(&record(3)).unwrap();
        s.write(|t| t.insert(4, b"{not json".as_slice()).map(drop)).unwrap();
        assert_eq!(s.load_all().unwrap(), vec![record(3)]);
        std::fs::remove_dir_all(d).unwrap();
    }
}
