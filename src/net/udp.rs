//! Forwarding a UDP port: datagrams that arrive on the job's 127.0.0.1
//! socket go to the job from a socket of their own per client address, so
//! the job's answers find their way back to the client that asked (the
//! engine's own UDP proxy works the same way). A client quiet for
//! [`IDLE`] in both directions is forgotten; at most [`MAX_PEERS`] clients
//! at once (datagrams of more are dropped, as UDP may).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Most clients relayed at once per port.
pub const MAX_PEERS: usize = 256;
/// A client with no datagram either way for this long is forgotten.
pub const IDLE: Duration = Duration::from_secs(60);
/// Largest datagram relayed (the largest UDP payload).
const MAX_DATAGRAM: usize = 65_507;

struct Peer {
    socket: Arc<UdpSocket>,
    /// Milliseconds since `start` of the last datagram from the client.
    last: Arc<AtomicU64>,
}

/// Relay datagrams between `front` (127.0.0.1) and `target` until `token`.
pub(super) async fn serve(front: UdpSocket, target: SocketAddr, token: CancellationToken) {
    let front = Arc::new(front);
    let start = Instant::now();
    let mut peers: HashMap<SocketAddr, Peer> = HashMap::new();
    let (gone_tx, mut gone_rx) = mpsc::unbounded_channel::<SocketAddr>();
    let mut buf = vec![0u8; MAX_DATAGRAM];
    loop {
        let (n, from) = tokio::select! {
            _ = token.cancelled() => return,
            Some(gone) = gone_rx.recv() => {
                peers.remove(&gone);
                continue;
            }
            r = front.recv_from(&mut buf) => match r {
                Ok(got) => got,
                Err(e) => {
                    tracing::debug!(error = %e, "udp forwarder receive failed");
                    continue;
                }
            },
        };
        if !peers.contains_key(&from) {
            if peers.len() >= MAX_PEERS {
                continue;
            }
            match open(target).await {
                Ok(socket) => {
                    let peer = Peer {
                        socket: Arc::new(socket),
                        last: Arc::new(AtomicU64::new(0)),
                    };
                    tokio::spawn(answers(
                        peer.socket.clone(),
                        front.clone(),
                        from,
                        peer.last.clone(),
                        start,
                        token.clone(),
                        gone_tx.clone(),
                    ));
                    peers.insert(from, peer);
                }
                Err(e) => {
                    tracing::debug!(error = %e, "udp forwarder could not open a socket to the job");
                    continue;
                }
            }
        }
        if let Some(peer) = peers.get(&from) {
            peer.last
                .store(start.elapsed().as_millis() as u64, Ordering::Relaxed);
            let _ = peer.socket.send(&buf[..n]).await;
        }
    }
}

/// A socket connected to `target` from an address the kernel picks.
async fn open(target: SocketAddr) -> std::io::Result<UdpSocket> {
    let any = match target.ip() {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    };
    let socket = UdpSocket::bind(SocketAddr::new(any, 0)).await?;
    socket.connect(target).await?;
    Ok(socket)
}

/// Send the job's answers to `client` until the pair is idle or the job ended.
async fn answers(
    socket: Arc<UdpSocket>,
    front: Arc<UdpSocket>,
    client: SocketAddr,
    last: Arc<AtomicU64>,
    start: Instant,
    token: CancellationToken,
    gone: mpsc::UnboundedSender<SocketAddr>,
) {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    loop {
        tokio::select! {
            _ = token.cancelled() => return,
            r = tokio::time::timeout(IDLE, socket.recv(&mut buf)) => match r {
                Ok(Ok(n)) => {
                    last.store(start.elapsed().as_millis() as u64, Ordering::Relaxed);
                    let _ = front.send_to(&buf[..n], client).await;
                }
                // The job refused (nothing listens yet): keep the pair.
                Ok(Err(_)) => {}
                Err(_) => {
                    let quiet = start.elapsed().as_millis() as u64 - last.load(Ordering::Relaxed);
                    if quiet >= IDLE.as_millis() as u64 {
                        let _ = gone.send(client);
                        return;
                    }
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn datagrams_go_both_ways_per_client() {
        // The "job": a UDP echo on loopback.
        let job = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let target = job.local_addr().unwrap();
        tokio::spawn(async move {
            let mut b = [0u8; 64];
            loop {
                let (n, from) = job.recv_from(&mut b).await.unwrap();
                let mut answer = b"echo ".to_vec();
                answer.extend_from_slice(&b[..n]);
                job.send_to(&answer, from).await.unwrap();
            }
        });
        let front = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let at = front.local_addr().unwrap();
        let token = CancellationToken::new();
        let task = tokio::spawn(serve(front, target, token.clone()));
        for who in ["a", "b"] {
            let c = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            c.connect(at).await.unwrap();
            c.send(who.as_bytes()).await.unwrap();
            let mut b = [0u8; 64];
            let n = tokio::time::timeout(Duration::from_secs(5), c.recv(&mut b))
                .await
                .unwrap()
                .unwrap();
            assert_eq!(&b[..n], format!("echo {who}").as_bytes());
        }
        token.cancel();
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .unwrap()
            .unwrap();
    }
}
