//! The live view at `GET /` of the admin endpoint: one HTML page, its stylesheet and its
//! script, compiled into the binary (the server may have no internet, and nothing is
//! fetched from anywhere but this endpoint). The script polls `GET /status` once a second
//! and draws its charts itself on a canvas.
//!
//! Every asset goes out with a Content-Security-Policy that allows only this origin's own
//! script, style and `fetch`: no inline code, no other host, no framing.

use super::http::Response;

/// Scripts, styles and requests only from this endpoint; nothing else at all.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; \
                   base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// (path, content type, body) of each asset.
const ASSETS: [(&str, &str, &str); 3] = [
    ("/", "text/html; charset=utf-8", include_str!("page/index.html")),
    ("/app.js", "text/javascript; charset=utf-8", include_str!("page/app.js")),
    ("/style.css", "text/css; charset=utf-8", include_str!("page/style.css")),
];

/// The answer for a path that is not one of the admin endpoint's data routes: an asset for
/// GET and HEAD, 405 for another method on an asset, 404 otherwise.
pub fn answer(method: &str, path: &str) -> Response {
    let path = if path == "/index.html" { "/" } else { path };
    let Some(&(_, content_type, body)) = ASSETS.iter().find(|a| a.0 == path) else {
        return Response::not_found();
    };
    if method != "GET" && method != "HEAD" {
        return Response::method_not_allowed("GET, HEAD");
    }
    Response::ok(content_type, body.as_bytes())
        .with_header("Content-Security-Policy", CSP)
        .with_header("Referrer-Policy", "no-referrer")
        .with_header("X-Frame-Options", "DENY")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assets_are_served_with_their_types_and_the_policy() {
        for (path, ctype) in [("/", "text/html"), ("/index.html", "text/html"), ("/app.js", "text/javascript"), ("/style.css", "text/css")] {
            let r = answer("GET", path);
            assert_eq!(r.code, hyper::StatusCode::OK, "{path}");
            assert!(r.content_type.starts_with(ctype), "{path}: {}", r.content_type);
            assert!(r.headers.iter().any(|h| h.0 == "Content-Security-Policy" && h.1.contains("default-src 'none'")));
            assert!(!r.body.is_empty());
        }
        assert_eq!(answer("HEAD", "/").code, hyper::StatusCode::OK);
        assert_eq!(answer("POST", "/").code, hyper::StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(answer("GET", "/nope").code, hyper::StatusCode::NOT_FOUND);
        assert_eq!(answer("GET", "/../etc/passwd").code, hyper::StatusCode::NOT_FOUND);
    }

    #[test]
    fn page_needs_nothing_from_elsewhere() {
        // The policy would block it anyway; a page that tried would be broken.
        for (path, _, body) in ASSETS {
            for needle in ["http://", "https://", "//cdn", "<script>", " style=\"", "onclick", "eval("] {
                assert!(!body.contains(needle), "{path} contains {needle:?}");
            }
        }
        let html = ASSETS[0].2;
        assert!(html.contains("<script src=\"/app.js\" defer></script>") && html.contains("href=\"/style.css\""));
    }
}
