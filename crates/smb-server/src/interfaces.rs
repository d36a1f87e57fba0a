//! The network interfaces reported to multichannel clients (FSCTL_QUERY_NETWORK_INTERFACE_INFO).
//!
//! Configured `[[server.interface]]` entries win. Otherwise each listen address is reported;
//! a wildcard listener (0.0.0.0 or ::) reports the host's addresses, read from
//! /proc/net/fib_trie (IPv4) and /proc/net/if_inet6 (IPv6), leaving out loopback and
//! link-local addresses unless nothing else is there.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::config::{InterfaceConfig, ServerConfig};

/// Link speed reported when none is configured: 10 Gbit/s, as Samba does.
const DEFAULT_SPEED: u64 = 10_000_000_000;

/// The interfaces to report, in a stable order, without duplicates.
pub fn list(config: &ServerConfig) -> Vec<InterfaceConfig> {
    if !config.interfaces.is_empty() {
        return config.interfaces.clone();
    }
    let mut addrs: Vec<IpAddr> = Vec::new();
    let mut push = |a: IpAddr| {
        if !addrs.contains(&a) {
            addrs.push(a);
        }
    };
    for l in &config.listen {
        match l.ip() {
            IpAddr::V4(a) if a.is_unspecified() => host_v4().into_iter().for_each(|a| push(IpAddr::V4(a))),
            IpAddr::V6(a) if a.is_unspecified() => {
                host_v6().into_iter().for_each(|a| push(IpAddr::V6(a)));
                // A dual-stack [::] listener also accepts IPv4.
                host_v4().into_iter().for_each(|a| push(IpAddr::V4(a)));
            }
            a => push(a),
        }
    }
    // RSS lets clients open several channels to one interface (Windows opens up to four).
    addrs.into_iter().map(|address| InterfaceConfig { address, speed: DEFAULT_SPEED, rss: true, rdma: false }).collect()
}

/// Local IPv4 addresses ("/32 host LOCAL" leaves of the kernel's FIB trie).
fn host_v4() -> Vec<Ipv4Addr> {
    let text = std::fs::read_to_string("/proc/net/fib_trie").unwrap_or_default();
    let mut found = BTreeSet::new();
    let mut last: Option<Ipv4Addr> = None;
    for line in text.lines() {
        let t = line.trim();
        if let Some(a) = t.strip_prefix("|-- ") {
            last = a.trim().parse().ok();
        } else if t.starts_with("/32 host LOCAL") {
            if let Some(a) = last {
                found.insert(a);
            }
        }
    }
    prefer_routable(found.into_iter().collect(), |a| a.is_loopback() || a.is_link_local())
}

/// Local IPv6 addresses from /proc/net/if_inet6 (32 hex digits per address).
fn host_v6() -> Vec<Ipv6Addr> {
    let text = std::fs::read_to_string("/proc/net/if_inet6").unwrap_or_default();
    let found: BTreeSet<Ipv6Addr> =
        text.lines().filter_map(|l| l.split_whitespace().next()).filter_map(|h| u128::from_str_radix(h, 16).ok()).map(Ipv6Addr::from).collect();
    prefer_routable(found.into_iter().collect(), |a| a.is_loopback() || (a.segments()[0] & 0xffc0) == 0xfe80)
}

/// Drops loopback/link-local addresses when there are others.
fn prefer_routable<A: Copy>(all: Vec<A>, local: impl Fn(&A) -> bool) -> Vec<A> {
    let routable: Vec<A> = all.iter().copied().filter(|a| !local(a)).collect();
    if routable.is_empty() {
        all
    } else {
        routable
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses_are_reported() {
        let c = ServerConfig {
            listen: vec!["127.0.0.1:4455".parse().unwrap(), "127.0.0.1:4456".parse().unwrap(), "[::1]:4455".parse().unwrap()],
            ..ServerConfig::default()
        };
        let l = list(&c);
        assert_eq!(l.iter().map(|i| i.address).collect::<Vec<_>>(), vec![IpAddr::from([127, 0, 0, 1]), IpAddr::V6(Ipv6Addr::LOCALHOST)]);
        assert!(l.iter().all(|i| i.rss && !i.rdma && i.speed == DEFAULT_SPEED));
    }

    #[test]
    fn wildcard_reports_host_addresses() {
        let c = ServerConfig { listen: vec!["0.0.0.0:4455".parse().unwrap()], ..ServerConfig::default() };
        let l = list(&c);
        assert!(!l.is_empty());
        assert!(l.iter().all(|i| i.address.is_ipv4() && !i.address.is_unspecified()));
    }

    #[test]
    fn configured_interfaces_win() {
        let i = InterfaceConfig { address: IpAddr::from([10, 0, 0, 1]), speed: 1, rss: false, rdma: true };
        let c = ServerConfig { interfaces: vec![i.clone()], ..ServerConfig::default() };
        assert_eq!(list(&c), vec![i]);
    }
}
