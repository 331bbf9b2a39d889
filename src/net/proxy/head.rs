//! A proxy request's head: read with a size bound, parsed, and for plain
//! HTTP rewritten into the origin-form head sent to the server.
//!
//! Two forms are served: `CONNECT host:port` (a tunnel, for HTTPS) and an
//! absolute `http://host[:port]/path` request. The `Host` header sent on is
//! always the URI's authority, never the job's own: a server behind a
//! shared front end (a CDN) routes by that header, and a job's `Host:
//! other.example` would otherwise reach a host that is not allowed.
//! Hop-by-hop headers are dropped and `Connection: close` is sent, so one
//! connection carries one request to the one host that was checked.

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// Longest request head accepted (request line and headers).
pub const MAX_HEAD: usize = 16 * 1024;
/// Most header lines accepted.
const MAX_HEADERS: usize = 100;

/// Headers that belong to one hop, not to the request.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "upgrade",
];

/// What the job asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A tunnel to `host:port` (the job speaks TLS through it).
    Connect { host: String, port: u16 },
    /// One plain HTTP request; `head` is what goes to the server.
    Http { host: String, port: u16, head: Vec<u8> },
}

impl Target {
    pub fn host(&self) -> &str {
        match self {
            Target::Connect { host, .. } | Target::Http { host, .. } => host,
        }
    }
    pub fn port(&self) -> u16 {
        match self {
            Target::Connect { port, .. } | Target::Http { port, .. } => *port,
        }
    }
}

/// A request head and the bytes that came after it (the start of a body,
/// or of the tunnel's first message).
#[derive(Debug)]
pub struct Head {
    pub method: String,
    pub target: Target,
    pub rest: Vec<u8>,
}

/// Why a head is refused: (HTTP status, words for the job).
#[derive(Debug, PartialEq, Eq)]
pub struct Refusal(pub u16, pub String);

fn bad(status: u16, words: impl Into<String>) -> Refusal {
    Refusal(status, words.into())
}

/// Read one head from `stream` (at most [`MAX_HEAD`] bytes).
pub async fn read(stream: &mut TcpStream) -> Result<Head, Refusal> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(head) = parse(&buf)? {
            return Ok(head);
        }
        if buf.len() >= MAX_HEAD {
            return Err(bad(
                431,
                format!("the request head is larger than {MAX_HEAD} bytes"),
            ));
        }
        let n = stream
            .read(&mut chunk)
            .await
            .map_err(|e| bad(400, format!("reading the request failed: {e}")))?;
        if n == 0 {
            return Err(bad(400, "the connection closed before a whole request head"));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Parse `buf`; `Ok(None)` while the head is incomplete.
pub fn parse(buf: &[u8]) -> Result<Option<Head>, Refusal> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) if n <= MAX_HEAD => n,
        Ok(httparse::Status::Complete(_)) => {
            return Err(bad(
                431,
                format!("the request head is larger than {MAX_HEAD} bytes"),
            ));
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(bad(431, format!("more than {MAX_HEADERS} header lines")));
        }
        Err(e) => return Err(bad(400, format!("not an HTTP request: {e}"))),
    };
    let method = req.method.unwrap_or_default().to_string();
    let uri = req.path.unwrap_or_default();
    let version = req.version.unwrap_or(1);
    let target = if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = authority(uri, None)?;
        Target::Connect { host, port }
    } else {
        let lower = uri.get(..7).map(|s| s.to_ascii_lowercase());
        if lower.as_deref() != Some("http://") {
            return Err(bad(
                400,
                "berth's egress proxy takes CONNECT host:port or an absolute http:// URL",
            ));
        }
        let rest = &uri[7..];
        let cut = rest.find(['/', '?']).unwrap_or(rest.len());
        let (auth, path) = rest.split_at(cut);
        let (host, port) = authority(auth, Some(80))?;
        let path = match path {
            "" => "/".to_string(),
            p if p.starts_with('?') => format!("/{p}"),
            p => p.to_string(),
        };
        let mut out = format!("{method} {path} HTTP/1.{version}\r\nHost: {auth}\r\n");
        for h in req.headers.iter() {
            let name = h.name.to_ascii_lowercase();
            if name == "host" || HOP_BY_HOP.contains(&name.as_str()) {
                continue;
            }
            out.push_str(h.name);
            out.push_str(": ");
            out.push_str(&String::from_utf8_lossy(h.value));
            out.push_str("\r\n");
        }
        out.push_str("Connection: close\r\n\r\n");
        Target::Http {
            host,
            port,
            head: out.into_bytes(),
        }
    };
    Ok(Some(Head {
        method,
        target,
        rest: buf[len..].to_vec(),
    }))
}

/// `host[:port]` or `[v6][:port]`; `default` when the port may be left out.
fn authority(text: &str, default: Option<u16>) -> Result<(String, u16), Refusal> {
    if text.contains('@') {
        return Err(bad(400, "credentials in the URL are not passed on"));
    }
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (h, after) = rest
            .split_once(']')
            .ok_or_else(|| bad(400, format!("bad address `{text}`")))?;
        (format!("[{h}]"), after.strip_prefix(':'))
    } else {
        match text.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (text.to_string(), None),
        }
    };
    let port = match (port, default) {
        (Some(p), _) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| bad(400, format!("bad port in `{text}`")))?,
        (None, Some(d)) => d,
        (None, None) => return Err(bad(400, format!("CONNECT needs host:port, got `{text}`"))),
    };
    if host.is_empty() || host.len() > 255 || host.contains(|c: char| c.is_whitespace() || c == '/') {
        return Err(bad(400, format!("bad host in `{text}`")));
    }
    Ok((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(text: &str) -> Head {
        parse(text.as_bytes()).unwrap().unwrap()
    }

    #[test]
    fn connect_and_absolute_requests() {
        let h = head("CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n\x16\x03");
        assert_eq!(
            h.target,
            Target::Connect {
                host: "pypi.org".into(),
                port: 443
            }
        );
        assert_eq!(h.rest, b"\x16\x03");
        let h = head(
            "GET http://10.1.2.3:8080/simple?q=1 HTTP/1.1\r\nHost: evil.example\r\nProxy-Connection: keep-alive\r\nAccept: */*\r\n\r\nBODY",
        );
        let Target::Http {
            host,
            port,
            head: sent,
        } = h.target
        else {
            panic!("plain http")
        };
        assert_eq!((host.as_str(), port), ("10.1.2.3", 8080));
        assert_eq!(
            String::from_utf8(sent).unwrap(),
            "GET /simple?q=1 HTTP/1.1\r\nHost: 10.1.2.3:8080\r\nAccept: */*\r\nConnection: close\r\n\r\n",
            "the job's Host is replaced by the URL's, hop-by-hop headers dropped"
        );
        assert_eq!(h.rest, b"BODY");
        let h = head("GET http://[fd00::1]?x HTTP/1.0\r\n\r\n");
        assert_eq!((h.target.host(), h.target.port()), ("[fd00::1]", 80));
        assert!(
            parse(b"GET http://a.org/ HTTP/1.1\r\nAccept: x\r\n")
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn what_is_refused_and_why() {
        let refused = |text: &str| parse(text.as_bytes()).unwrap_err();
        assert_eq!(refused("GET / HTTP/1.1\r\n\r\n").0, 400);
        assert_eq!(refused("GET https://a.org/ HTTP/1.1\r\n\r\n").0, 400);
        assert_eq!(refused("CONNECT a.org HTTP/1.1\r\n\r\n").0, 400);
        assert_eq!(refused("GET http://u:p@a.org/ HTTP/1.1\r\n\r\n").0, 400);
        assert_eq!(refused("GET http://a.org:0/ HTTP/1.1\r\n\r\n").0, 400);
        assert_eq!(refused("\x16\x03\x01 hello").0, 400);
        let many = format!("GET http://a.org/ HTTP/1.1\r\n{}\r\n", "X: y\r\n".repeat(200));
        assert_eq!(refused(&many).0, 431);
    }
}
