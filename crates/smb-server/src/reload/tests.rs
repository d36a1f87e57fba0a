use super::*;
use crate::config::{ShareStorage, UserConfig};
use smb_auth::UserDb;

fn share(name: &str, capacity: u64) -> ShareConfig {
    ShareConfig::new(name, ShareStorage::Memory { capacity })
}

fn user(name: &str, hash: u8) -> UserConfig {
    UserConfig { name: name.into(), nt_hash: [hash; 16] }
}

fn config(shares: Vec<ShareConfig>, users: Vec<UserConfig>) -> ServerConfig {
    ServerConfig { shares, users, ..ServerConfig::default() }
}

fn state(c: ServerConfig) -> Arc<ServerState> {
    Arc::new(ServerState::new(c).expect("state"))
}

fn indices(s: &ServerState) -> Vec<(String, usize)> {
    s.shares.iter().map(|s| (s.config.name.clone(), s.index)).collect()
}

#[tokio::test]
async fn reload_sets_limits_on_the_limiter_requests_wait_in() {
    let s = state(config(vec![share("a", 1 << 20), share("b", 1 << 20)], vec![]));
    let limiter = s.share("a").expect("a").qos.clone();
    let mut a = share("a", 1 << 20);
    a.limits.iops = Some(100);
    let r = apply(&s, &config(vec![a, share("b", 1 << 20)], vec![])).await.expect("reload");
    assert_eq!(r.limits_changed, vec!["a".to_string()]);
    assert!(r.shares_changed.is_empty() && r.shares_added.is_empty() && r.shares_removed.is_empty(), "{r:?}");
    let now = s.share("a").expect("a");
    assert!(Arc::ptr_eq(&now.qos, &limiter), "the same limiter");
    assert_eq!(limiter.limits().iops, Some(100));
    assert_eq!(indices(&s), vec![("a".into(), 0), ("b".into(), 1)]);
}

#[tokio::test]
async fn added_shares_get_fresh_indices_and_removed_ones_are_never_reused() {
    let s = state(config(vec![share("a", 1 << 20), share("b", 1 << 20)], vec![]));
    let r = apply(&s, &config(vec![share("b", 1 << 20), share("c", 1 << 20)], vec![])).await.expect("reload");
    assert_eq!((r.shares_added.clone(), r.shares_removed.clone()), (vec!["c".to_string()], vec!["a".to_string()]));
    assert_eq!(indices(&s), vec![("b".into(), 1), ("c".into(), 2)]);
    assert!(s.share("a").is_none());
    // A share coming back is a new share; one whose storage changed is removed and added.
    apply(&s, &config(vec![share("a", 1 << 20), share("b", 2 << 20), share("c", 1 << 20)], vec![])).await.expect("reload");
    assert_eq!(indices(&s), vec![("a".into(), 3), ("b".into(), 4), ("c".into(), 2)]);
}

#[tokio::test]
async fn a_changed_setting_keeps_backend_and_index() {
    let s = state(config(vec![share("a", 1 << 20)], vec![]));
    let before = s.share("a").expect("a");
    let mut a = share("a", 1 << 20);
    a.comment = "new".into();
    a.guest_ok = true;
    let r = apply(&s, &config(vec![a], vec![])).await.expect("reload");
    assert_eq!(r.shares_changed, vec!["a".to_string()]);
    let after = s.share("a").expect("a");
    assert!(Arc::ptr_eq(&before.backend, &after.backend) && Arc::ptr_eq(&before.qos, &after.qos));
    assert_eq!((after.index, after.config.comment.as_str(), after.config.guest_ok), (0, "new", true));
    assert!(s.guest_enabled());
}

#[tokio::test]
async fn users_are_added_changed_and_removed() {
    let s = state(config(vec![], vec![user("alice", 1), user("Bob", 2)]));
    let r = apply(&s, &config(vec![], vec![user("alice", 9), user("carol", 3)])).await.expect("reload");
    assert_eq!(r.users_added, vec!["carol".to_string()]);
    assert_eq!(r.users_changed, vec!["alice".to_string()]);
    assert_eq!(r.users_removed, vec!["bob".to_string()]);
    assert_eq!(s.nt_hash("ALICE"), Some([9; 16]));
    assert_eq!(s.nt_hash("bob"), None);
    assert_eq!(s.nt_hash("carol"), Some([3; 16]));
}

#[tokio::test]
async fn a_share_that_cannot_be_opened_changes_nothing() {
    let s = state(config(vec![share("a", 1 << 20)], vec![user("alice", 1)]));
    let mut bad = share("b", 0);
    bad.storage = ShareStorage::Directory("/nonexistent/braid-reload-test".into());
    assert!(apply(&s, &config(vec![bad], vec![])).await.is_err());
    assert_eq!(indices(&s), vec![("a".into(), 0)]);
    assert_eq!(s.nt_hash("alice"), Some([1; 16]));
}

#[tokio::test]
async fn settings_that_need_a_restart_are_reported() {
    let s = state(config(vec![], vec![]));
    let mut c = config(vec![], vec![]);
    c.listen = vec!["127.0.0.1:1".parse().expect("addr")];
    c.server_name = "OTHER".into();
    let r = apply(&s, &c).await.expect("reload");
    assert_eq!(r.needs_restart, vec!["listen".to_string(), "server_name".to_string()]);
    assert!(r.changed_nothing());
    assert!(r.to_string().contains("needs a restart (ignored for now): listen, server_name"), "{r}");
}
