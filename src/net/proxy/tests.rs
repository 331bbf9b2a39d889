//! The proxy's refusals, on loopback. (What it allows is reached through
//! it in tests/suite/egress.rs: every address of this machine is refused
//! here by design, so an allowed server must live elsewhere.)

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Mutex;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

/// A proxy on 127.0.0.1 for clients of 127.0.0.0/8, allowing `allow`; the
/// denials it reported.
fn proxy(allow: &[&str]) -> (Proxy, Arc<Mutex<Vec<Denial>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let policy = Policy {
        allow: Allowlist::parse(allow).unwrap(),
        deny: Vec::new(),
        on_denial: Arc::new(move |d| log.lock().unwrap().push(d)),
    };
    let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let p = Proxy::start(
        SocketAddr::new(lo, 0),
        (IpAddr::V4(Ipv4Addr::new(127, 0, 0, 0)), 8),
        policy,
        "job-1",
    )
    .unwrap();
    (p, seen)
}

/// Send `request` from 127.0.0.2 (a "job" beside the proxy's own
/// 127.0.0.1), read the whole answer.
async fn ask(p: &Proxy, request: &[u8]) -> String {
    ask_from(p, Ipv4Addr::new(127, 0, 0, 2), request).await
}

async fn ask_from(p: &Proxy, from: Ipv4Addr, request: &[u8]) -> String {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::new(IpAddr::V4(from), 0)).unwrap();
    let mut c = socket.connect(p.addr()).await.unwrap();
    c.write_all(request).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), c.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn a_host_not_allowed_is_denied_reported_and_answered_403() {
    let (p, seen) = proxy(&["pypi.org"]);
    let answer = ask(
        &p,
        b"CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 403 Forbidden"), "{answer}");
    assert!(
        answer.contains("egress to evil.example:443 denied: not in egress_allow"),
        "{answer}"
    );
    let answer = ask(&p, b"GET http://pypi.org:8080/ HTTP/1.1\r\n\r\n").await;
    assert!(
        answer.starts_with("HTTP/1.1 403"),
        "an allowed name on another port: {answer}"
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen.iter().map(Denial::request).collect::<Vec<_>>(),
        ["CONNECT evil.example:443", "GET pypi.org:8080"]
    );
    assert_eq!(seen[0].reason, "not in egress_allow");
}

#[tokio::test]
async fn an_allowed_name_that_resolves_to_this_machine_is_denied() {
    let (p, seen) = proxy(&["localhost", "127.0.0.1"]);
    for request in [
        &b"CONNECT localhost:443 HTTP/1.1\r\n\r\n"[..],
        b"GET http://127.0.0.1/ HTTP/1.1\r\n\r\n",
    ] {
        let answer = ask(&p, request).await;
        assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
        assert!(answer.contains("loopback"), "{answer}");
    }
    assert_eq!(seen.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn what_is_not_a_proxy_request_is_refused_without_a_denial() {
    let (p, seen) = proxy(&["defaults"]);
    let answer = ask(&p, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    let huge = format!(
        "GET http://pypi.org/ HTTP/1.1\r\nX: {}\r\n\r\n",
        "a".repeat(head::MAX_HEAD)
    );
    let answer = ask(&p, huge.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
    assert!(seen.lock().unwrap().is_empty());
}

#[tokio::test]
async fn only_the_jobs_network_may_use_it_and_it_closes_with_the_job() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let policy = Policy {
        allow: Allowlist::parse(&["defaults"]).unwrap(),
        deny: Vec::new(),
        on_denial: Arc::new(move |d| log.lock().unwrap().push(d)),
    };
    // Clients of 10.0.0.0/8 only: a loopback client is closed unanswered.
    let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let p = Proxy::start(
        SocketAddr::new(lo, 0),
        (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 0)), 8),
        policy,
        "job-2",
    )
    .unwrap();
    assert_eq!(ask(&p, b"CONNECT evil.example:443 HTTP/1.1\r\n\r\n").await, "");
    assert!(seen.lock().unwrap().is_empty());
    // Nor may this machine's own processes, which connect from the
    // proxy's own address (the gateway, inside the job's subnet).
    let (own, _) = proxy(&["defaults"]);
    let request = b"CONNECT evil.example:443 HTTP/1.1\r\n\r\n";
    assert_eq!(ask_from(&own, Ipv4Addr::LOCALHOST, request).await, "");
    assert!(ask(&own, request).await.starts_with("HTTP/1.1 403"));
    let addr = p.addr();
    p.close();
    tokio::time::timeout(Duration::from_secs(5), p.closed())
        .await
        .unwrap();
    assert!(TcpStream::connect(addr).await.is_err(), "closed with its job");
}
