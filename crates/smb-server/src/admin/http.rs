//! Just enough HTTP/1.0 for the admin endpoint: one request per connection, its head read
//! within a fixed bound, every answer closed after sending. Browsers, curl, Prometheus and
//! `braid status` all speak this subset; a general HTTP server would be more to keep safe.

use std::borrow::Cow;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Largest request head accepted (request line and headers); browsers send well under 2 KiB.
pub const MAX_HEAD: usize = 8192;

/// A parsed request line; headers are read (to find the end of the head) but not kept, and
/// neither is a body (no route takes one).
#[derive(Debug)]
pub struct Request {
    pub method: String,
    /// The path without its query string.
    pub path: String,
}

impl Request {
    /// A HEAD request: answered with a GET's headers and no body.
    pub fn is_head(&self) -> bool {
        self.method == "HEAD"
    }
}

/// An answer: status line, content type, extra headers and body.
#[derive(Debug)]
pub struct Response {
    pub code: &'static str,
    pub content_type: &'static str,
    pub headers: Vec<(&'static str, &'static str)>,
    pub body: Cow<'static, [u8]>,
}

impl Response {
    pub fn ok(content_type: &'static str, body: impl Into<Cow<'static, [u8]>>) -> Response {
        Response { code: "200 OK", content_type, headers: Vec::new(), body: body.into() }
    }

    /// A short plain-text answer for errors.
    pub fn text(code: &'static str, msg: &'static str) -> Response {
        Response { code, content_type: "text/plain; charset=utf-8", headers: Vec::new(), body: Cow::Borrowed(msg.as_bytes()) }
    }

    pub fn not_found() -> Response {
        Response::text("404 Not Found", "not found\n")
    }

    /// The path exists but not for this method; `allow` lists the methods it takes.
    pub fn method_not_allowed(allow: &'static str) -> Response {
        Response::text("405 Method Not Allowed", "method not allowed\n").with_header("Allow", allow)
    }

    pub fn with_header(mut self, name: &'static str, value: &'static str) -> Response {
        self.headers.push((name, value));
        self
    }

    /// The head as sent: every answer is uncacheable (it is live state) and never sniffed.
    fn head(&self) -> String {
        use std::fmt::Write as _;
        let mut h = format!(
            "HTTP/1.0 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n",
            self.code,
            self.content_type,
            self.body.len()
        );
        for (k, v) in &self.headers {
            let _ = write!(h, "{k}: {v}\r\n");
        }
        h.push_str("\r\n");
        h
    }
}

/// Reads one request head. `Ok(Err(response))` is the answer to a head that is too large or
/// not HTTP; a peer that closes before a whole head is an error (nothing to answer).
pub async fn read_request<S: AsyncRead + Unpin>(sock: &mut S) -> std::io::Result<Result<Request, Response>> {
    let mut buf = vec![0u8; MAX_HEAD];
    let mut n = 0;
    let end = loop {
        if let Some(end) = head_end(&buf[..n]) {
            break end;
        }
        if n == buf.len() {
            return Ok(Err(Response::text("431 Request Header Fields Too Large", "request head too large\n")));
        }
        let r = sock.read(&mut buf[n..]).await?;
        if r == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        n += r;
    };
    Ok(parse_request_line(&buf[..end]).map(|(method, path)| Request { method, path }))
}

/// Where the head's text ends (before the empty line). Bare LF line ends are accepted as
/// HTTP/1.1 allows.
fn head_end(b: &[u8]) -> Option<usize> {
    let crlf = b.windows(4).position(|w| w == b"\r\n\r\n");
    let lf = b.windows(2).position(|w| w == b"\n\n");
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// `METHOD /path[?query] HTTP/x.y` → (method, path); anything else is a 400.
fn parse_request_line(head: &[u8]) -> Result<(String, String), Response> {
    let bad = || Response::text("400 Bad Request", "bad request\n");
    let line = head.split(|&c| c == b'\n').next().unwrap_or_default();
    let line = std::str::from_utf8(line).map_err(|_| bad())?.trim_end_matches('\r');
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return Err(bad());
    };
    if !version.starts_with("HTTP/1.") || method.is_empty() || !method.bytes().all(|c| c.is_ascii_uppercase()) || !target.starts_with('/') {
        return Err(bad());
    }
    let path = target.split(['?', '#']).next().unwrap_or(target);
    Ok((method.to_string(), path.to_string()))
}

/// Sends `resp` (without its body for HEAD) and closes the sending side.
pub async fn send<S: AsyncWrite + Unpin>(sock: &mut S, head_only: bool, resp: &Response) -> std::io::Result<()> {
    sock.write_all(resp.head().as_bytes()).await?;
    if !head_only {
        sock.write_all(&resp.body).await?;
    }
    sock.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn parse(bytes: &[u8]) -> std::io::Result<Result<Request, Response>> {
        let mut r: &[u8] = bytes;
        read_request(&mut r).await
    }

    #[tokio::test]
    async fn request_line_without_query() {
        let r = parse(b"GET /status?x=1 HTTP/1.1\r\nHost: a\r\n\r\nBODY").await.unwrap().unwrap();
        assert_eq!((r.method.as_str(), r.path.as_str()), ("GET", "/status"));
        let r = parse(b"HEAD / HTTP/1.0\n\n").await.unwrap().unwrap();
        assert!(r.is_head() && r.path == "/");
    }

    #[tokio::test]
    async fn malformed_and_oversized_heads_get_answers() {
        for bad in [
            &b"GARBAGE\r\n\r\n"[..],
            b"get / HTTP/1.0\r\n\r\n",
            b"GET status HTTP/1.0\r\n\r\n",
            b"GET / SPDY\r\n\r\n",
            b"\xff\xfe / HTTP/1.0\r\n\r\n",
        ] {
            let resp = parse(bad).await.unwrap().unwrap_err();
            assert_eq!(resp.code, "400 Bad Request", "{bad:?}");
        }
        let mut big = b"GET / HTTP/1.0\r\nX: ".to_vec();
        big.resize(MAX_HEAD + 100, b'a');
        assert_eq!(parse(&big).await.unwrap().unwrap_err().code, "431 Request Header Fields Too Large");
        assert!(parse(b"GET / HTTP/1.0\r\nHost").await.is_err(), "a cut head is no request");
    }

    #[tokio::test]
    async fn head_answers_carry_no_body() {
        let resp = Response::ok("text/plain", &b"hello"[..]).with_header("X-A", "b");
        let mut out = Vec::new();
        send(&mut out, true, &resp).await.unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("HTTP/1.0 200 OK\r\n") && text.contains("Content-Length: 5\r\n") && text.contains("X-A: b\r\n"), "{text}");
        assert!(text.ends_with("\r\n\r\n"), "{text}");
        let mut out = Vec::new();
        send(&mut out, false, &resp).await.unwrap();
        assert!(out.ends_with(b"\r\n\r\nhello"));
    }
}
