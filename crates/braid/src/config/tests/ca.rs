//! `[[share]] continuous_availability` and the state directory SMB shares with NFS.

use super::*;

#[test]
fn continuous_availability_defaults_off_and_uses_the_state_dir() {
    let d = dir();
    let text = "[server]\nstate_dir = \"st\"\n[[share]]\nname = \"data\"\npath = \"data\"\ncontinuous_availability = true\n\
                [[share]]\nname = \"pub\"\npath = \"pub\"\n";
    let loaded = parse(text, "braid.toml", d.path()).unwrap();
    assert!(loaded.server.shares[0].continuous_availability);
    assert!(!loaded.server.shares[1].continuous_availability);
    assert_eq!(loaded.server.state_dir, d.path().join("st"));
    let bare = parse("[[share]]\nname = \"data\"\npath = \"data\"\n", "braid.toml", d.path()).unwrap();
    assert_eq!(bare.server.state_dir, std::path::PathBuf::from(smb_server::DEFAULT_STATE_DIR));
}

#[test]
fn a_memory_share_cannot_be_continuously_available() {
    let text = "[[share]]\nname = \"m\"\nbackend = \"memory\"\ncontinuous_availability = true\n";
    error(text, 4, &["share \"m\"", "continuous_availability", "directory share"]);
    error("[[share]]\nname = \"d\"\npath = \"data\"\ncontinuous_availability = 1\n", 4, &["continuous_availability"]);
}
