//! The probes of readiness (`ready.rs`): a TCP connect, one through a
//! relay that must stay open, and one HTTP GET, each bounded in time. Kept
//! apart from the waiting, which decides when to probe.

use std::net::SocketAddr;
use std::time::Duration;

use http_body_util::Empty;
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::model::HttpCheck;

/// Longest a single connect or HTTP attempt may take.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(1);
/// Longest a connect may take before it is retried. Short on purpose: a SYN
/// sent before a container's network is up is dropped, and the kernel would
/// only retry it after a full second.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(100);

/// How long a relayed connection must stay open (or answer) to count: the
/// engine's proxy on a remote host closes it at once when nothing listens
/// behind it.
const RELAY_SETTLE: Duration = Duration::from_millis(500);

/// A connection through a relay that is neither closed nor reset within
/// [`RELAY_SETTLE`] (or that sends something first).
pub(super) async fn relayed_port_open(addr: SocketAddr) -> bool {
    use tokio::io::AsyncReadExt;
    let Ok(Ok(mut stream)) = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await else {
        return false;
    };
    let mut byte = [0u8; 1];
    match tokio::time::timeout(RELAY_SETTLE, stream.read(&mut byte)).await {
        Err(_) => true,
        Ok(Ok(n)) => n > 0,
        Ok(Err(_)) => false,
    }
}

/// Whether something accepts a TCP connection at `addr` now.
pub(super) async fn port_open(addr: SocketAddr) -> bool {
    matches!(
        tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await,
        Ok(Ok(_))
    )
}

/// One HTTP/1.1 GET; true when the status is the expected one.
pub(super) async fn http_ok(addr: SocketAddr, check: &HttpCheck) -> bool {
    let attempt = async {
        let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
            .await
            .ok()?
            .ok()?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(TokioIo::new(stream))
                .await
                .ok()?;
        let conn = tokio::spawn(conn);
        let req = hyper::Request::get(&check.path)
            .header(hyper::header::HOST, addr.to_string())
            .header(hyper::header::CONNECTION, "close")
            .body(Empty::new())
            .ok()?;
        let res = sender.send_request(req).await.ok()?;
        conn.abort();
        Some(res.status().as_u16())
    };
    match tokio::time::timeout(ATTEMPT_TIMEOUT, attempt).await {
        Ok(Some(code)) => match check.status {
            Some(want) => code == want,
            None => (200..400).contains(&code),
        },
        _ => false,
    }
}
