//! The exports served now, replaced whole when the configuration is reloaded. An export
//! is matched by name (its handle id is a hash of the name) and kept, with its caches and
//! files held open, while its share index, backend and rules are the same; otherwise it is
//! built anew under the same id, so handles clients hold stay valid as long as the export
//! exists. A removed export's handles name no export any more (NFS3ERR_BADHANDLE).

use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::config::Export;
use crate::handle::export_id;
use crate::state::ExportState;

/// The current exports.
#[derive(Debug)]
pub struct Exports(ArcSwap<Vec<Arc<ExportState>>>);

/// What a replacement changed, by export name.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ExportsReport {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub changed: Vec<String>,
}

impl Exports {
    /// Builds the list; fails when two exports' names hash to the same id (rename one).
    pub fn new(exports: Vec<Export>) -> std::io::Result<Self> {
        Ok(Exports(ArcSwap::from_pointee(build(exports, &[])?)))
    }

    /// The exports as they are now.
    pub fn iter(&self) -> std::vec::IntoIter<Arc<ExportState>> {
        self.0.load().to_vec().into_iter()
    }

    pub fn len(&self) -> usize {
        self.0.load().len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.load().is_empty()
    }

    /// The export with handle id `id`.
    pub fn by_id(&self, id: u32) -> Option<Arc<ExportState>> {
        self.0.load().iter().find(|e| e.id == id).cloned()
    }

    /// The export named `name`.
    pub fn by_name(&self, name: &str) -> Option<Arc<ExportState>> {
        self.0.load().iter().find(|e| e.export.name == name).cloned()
    }

    /// Serves `exports` from now on (see the module comment); nothing changes on error.
    pub fn replace(&self, exports: Vec<Export>) -> std::io::Result<ExportsReport> {
        let old = self.0.load_full();
        let new = build(exports, &old)?;
        let mut report = ExportsReport::default();
        for e in &new {
            match old.iter().find(|o| o.id == e.id) {
                None => report.added.push(e.export.name.clone()),
                Some(o) if !Arc::ptr_eq(o, e) => report.changed.push(e.export.name.clone()),
                Some(_) => {}
            }
        }
        report.removed = old.iter().filter(|o| !new.iter().any(|e| e.id == o.id)).map(|o| o.export.name.clone()).collect();
        self.0.store(Arc::new(new));
        Ok(report)
    }
}

/// Whether `old` can go on serving as `new`.
fn same(old: &Export, new: &Export) -> bool {
    old.share == new.share
        && old.name == new.name
        && Arc::ptr_eq(&old.backend, &new.backend)
        && old.rules == new.rules
        && Arc::ptr_eq(&old.qos, &new.qos)
}

fn build(exports: Vec<Export>, old: &[Arc<ExportState>]) -> std::io::Result<Vec<Arc<ExportState>>> {
    let mut out: Vec<Arc<ExportState>> = Vec::new();
    for export in exports {
        let id = export_id(&export.name);
        if let Some(other) = out.iter().find(|e| e.id == id) {
            return Err(std::io::Error::other(format!("shares {} and {} have the same NFS export id", other.export.name, export.name)));
        }
        match old.iter().find(|o| o.id == id && same(&o.export, &export)) {
            Some(kept) => out.push(kept.clone()),
            None => {
                out.push(Arc::new(ExportState { export, id, paths: Default::default(), cookies: Default::default(), open_files: Default::default() }))
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ExportRules;

    fn export(name: &str, share: usize, backend: &Arc<dyn braid_vfs::Backend>, qos: &Arc<braid_qos::ShareLimiter>) -> Export {
        let storage = braid_qos::StorageGate::new(name, 64, std::time::Duration::from_secs(45));
        Export { share, name: name.into(), backend: backend.clone(), rules: ExportRules::default(), qos: qos.clone(), storage }
    }

    #[test]
    fn kept_exports_keep_their_state_and_ids() {
        let b: Arc<dyn braid_vfs::Backend> = Arc::new(braid_vfs::MemoryBackend::new(1 << 20, false));
        let q = braid_qos::ShareLimiter::new("s", Default::default());
        let list = Exports::new(vec![export("a", 0, &b, &q), export("b", 1, &b, &q)]).expect("exports");
        let a = list.by_name("a").expect("a");
        let mut changed = export("b", 1, &b, &q);
        changed.rules.read_only = true;
        let r = list.replace(vec![export("a", 0, &b, &q), changed, export("c", 2, &b, &q)]).expect("replace");
        assert_eq!(r, ExportsReport { added: vec!["c".into()], removed: vec![], changed: vec!["b".into()] });
        assert!(Arc::ptr_eq(&a, &list.by_name("a").expect("a")), "unchanged: the same state, caches and open files");
        let b_now = list.by_name("b").expect("b");
        assert!(b_now.export.rules.read_only && b_now.id == export_id("b"), "changed: new rules, same handle id");
        let r = list.replace(vec![export("c", 2, &b, &q)]).expect("replace");
        assert_eq!(r.removed, vec!["a".to_string(), "b".to_string()]);
        assert!(list.by_id(export_id("a")).is_none() && list.len() == 1);
    }
}
