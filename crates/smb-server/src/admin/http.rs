//! The admin endpoint's HTTP: hyper parses and frames (HTTP/1.1 and 1.0, keep-alive, heads
//! bounded in size and in time); this module holds the answers ([`Response`]) and who may
//! ask for what ([`access`]).
//!
//! A peer in `admin_trusted` (loopback by default) may ask for everything, as the host's own
//! administrator. Anyone else needs the `admin_token` (`Authorization: Bearer TOKEN`, or
//! `?token=TOKEN` in the URL, which is how a browser opens the live page), except for
//! `/metrics` where `admin_open_metrics` opens it to a scraper.

use std::borrow::Cow;
use std::net::IpAddr;

use bytes::Bytes;
use http_body_util::Full;
use hyper::StatusCode;

/// Largest request head accepted (request line and headers); browsers send well under 2 KiB.
pub const MAX_HEAD: usize = 8192;

/// An answer: status, content type, extra headers and body.
#[derive(Debug)]
pub struct Response {
    pub code: StatusCode,
    pub content_type: &'static str,
    pub headers: Vec<(&'static str, &'static str)>,
    pub body: Cow<'static, [u8]>,
}

impl Response {
    pub fn ok(content_type: &'static str, body: impl Into<Cow<'static, [u8]>>) -> Response {
        Response { code: StatusCode::OK, content_type, headers: Vec::new(), body: body.into() }
    }

    /// A short plain-text answer.
    pub fn text(code: StatusCode, msg: impl Into<Cow<'static, str>>) -> Response {
        let body = match msg.into() {
            Cow::Borrowed(s) => Cow::Borrowed(s.as_bytes()),
            Cow::Owned(s) => Cow::Owned(s.into_bytes()),
        };
        Response { code, content_type: "text/plain; charset=utf-8", headers: Vec::new(), body }
    }

    pub fn not_found() -> Response {
        Response::text(StatusCode::NOT_FOUND, "not found\n")
    }

    /// The path exists but not for this method; `allow` lists the methods it takes.
    pub fn method_not_allowed(allow: &'static str) -> Response {
        Response::text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n").with_header("Allow", allow)
    }

    pub fn with_header(mut self, name: &'static str, value: &'static str) -> Response {
        self.headers.push((name, value));
        self
    }

    /// The hyper response: every answer is uncacheable (it is live state) and never
    /// sniffed. hyper leaves the body out of an answer to HEAD.
    pub fn into_hyper(self) -> hyper::Response<Full<Bytes>> {
        let mut b = hyper::Response::builder()
            .status(self.code)
            .header("Content-Type", self.content_type)
            .header("Cache-Control", "no-store")
            .header("X-Content-Type-Options", "nosniff");
        for (k, v) in self.headers {
            b = b.header(k, v);
        }
        let body = match self.body {
            Cow::Borrowed(s) => Bytes::from_static(s),
            Cow::Owned(v) => Bytes::from(v),
        };
        b.body(Full::new(body)).unwrap_or_else(|_| hyper::Response::new(Full::new(Bytes::new())))
    }
}

/// Who may ask the admin endpoint what (from the `[server]` settings).
#[derive(Debug, Clone, Default)]
pub struct AdminAuth {
    /// Networks whose peers need no token, as (address, prefix length).
    pub trusted: Vec<(IpAddr, u8)>,
    pub token: Option<String>,
    /// `/metrics` answers anyone.
    pub open_metrics: bool,
}

/// What a request may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Everything: a trusted peer, or the right token.
    Full,
    /// `/metrics` only (`admin_open_metrics`).
    Metrics,
    /// Nothing; the answer says why (401 where a token would do, 403 where none is set).
    Refused,
}

/// What a request from `peer`, presenting `token` (if any), may do.
pub fn access(auth: &AdminAuth, peer: IpAddr, token: Option<&str>) -> Access {
    let peer = canonical(peer);
    if auth.trusted.iter().any(|&(net, prefix)| in_network(peer, canonical(net), prefix)) {
        return Access::Full;
    }
    if let (Some(want), Some(got)) = (&auth.token, token) {
        // Compared in constant time: how much of a guess matched must not show in timing.
        if subtle::ConstantTimeEq::ct_eq(want.as_bytes(), got.as_bytes()).into() {
            return Access::Full;
        }
    }
    if auth.open_metrics {
        Access::Metrics
    } else {
        Access::Refused
    }
}

/// The token a request carries: `Authorization: Bearer TOKEN`, else `token=TOKEN` in the
/// query string.
pub fn token_of<'a>(authorization: Option<&'a str>, query: Option<&'a str>) -> Option<&'a str> {
    if let Some(t) = authorization.and_then(|h| h.strip_prefix("Bearer ")) {
        return Some(t.trim());
    }
    query?.split('&').find_map(|kv| kv.strip_prefix("token="))
}

/// The answer to a refused request.
pub fn refusal(auth: &AdminAuth) -> Response {
    if auth.token.is_some() {
        Response::text(StatusCode::UNAUTHORIZED, "a token is required (Authorization: Bearer TOKEN)\n").with_header("WWW-Authenticate", "Bearer")
    } else {
        Response::text(StatusCode::FORBIDDEN, "the admin endpoint answers trusted addresses only (admin_trusted)\n")
    }
}

/// IPv4-mapped IPv6 peers (a dual-stack listener) compare as IPv4.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn in_network(ip: IpAddr, net: IpAddr, prefix: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix.min(32))).unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix.min(128))).unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

/// Loopback, the default of `admin_trusted`.
pub fn loopback() -> Vec<(IpAddr, u8)> {
    vec![(IpAddr::from([127, 0, 0, 0]), 8), (IpAddr::from(std::net::Ipv6Addr::LOCALHOST), 128)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn trusted_peers_need_no_token_and_others_do() {
        let auth = AdminAuth { trusted: vec![(ip("127.0.0.1"), 32)], token: Some("s3cret-token-0123".into()), open_metrics: false };
        assert_eq!(access(&auth, ip("127.0.0.1"), None), Access::Full);
        assert_eq!(access(&auth, ip("::ffff:127.0.0.1"), None), Access::Full);
        assert_eq!(access(&auth, ip("127.0.0.2"), None), Access::Refused);
        assert_eq!(access(&auth, ip("127.0.0.2"), Some("wrong")), Access::Refused);
        assert_eq!(access(&auth, ip("127.0.0.2"), Some("s3cret-token-0123")), Access::Full);
        assert_eq!(refusal(&auth).code, StatusCode::UNAUTHORIZED);
        let open = AdminAuth { open_metrics: true, token: None, ..auth };
        assert_eq!(access(&open, ip("192.0.2.7"), Some("s3cret-token-0123")), Access::Metrics);
        assert_eq!(refusal(&open).code, StatusCode::FORBIDDEN);
    }

    #[test]
    fn networks_match_by_prefix() {
        assert!(in_network(ip("10.1.2.3"), ip("10.0.0.0"), 8));
        assert!(!in_network(ip("11.1.2.3"), ip("10.0.0.0"), 8));
        assert!(in_network(ip("1.2.3.4"), ip("0.0.0.0"), 0));
        assert!(in_network(ip("::1"), ip("::1"), 128));
        assert!(!in_network(ip("::2"), ip("::1"), 128));
        assert!(!in_network(ip("127.0.0.1"), ip("::1"), 0));
        let lo = loopback();
        assert!(lo.iter().any(|&(n, p)| in_network(ip("127.9.9.9"), n, p)));
    }

    #[test]
    fn tokens_come_from_the_header_or_the_query() {
        assert_eq!(token_of(Some("Bearer abc"), None), Some("abc"));
        assert_eq!(token_of(Some("Basic abc"), Some("x=1&token=def")), Some("def"));
        assert_eq!(token_of(None, Some("token=ghi")), Some("ghi"));
        assert_eq!(token_of(None, Some("x=1")), None);
        assert_eq!(token_of(None, None), None);
    }
}
