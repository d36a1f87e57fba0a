//! Placeholder until the RPC codec lands.
use std::net::IpAddr;
use crate::state::NfsState;
pub async fn call(_state: &NfsState, _peer: IpAddr, _record: Vec<u8>) -> Option<Vec<u8>> { None }
