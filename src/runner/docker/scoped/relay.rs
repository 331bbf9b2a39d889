//! How a job reaches its children: berth listens on the job network's
//! gateway address (one port per exposed TCP port of the child) and relays
//! each connection to the child's address on the child's own network.
//!
//! Why not the engine's published ports: the engine publishes on host
//! addresses every local user and, routed, the LAN reaches, and not at all
//! for a container on an internal network. The gateway address is this
//! host's own address on the job's bridge; only connections from the job's
//! subnet are relayed (anything else is closed at once), so another job, a
//! child, or a host routing through this machine gets nothing. The job's
//! libraries find these ports where they look for published ones (inspect's
//! `NetworkSettings.Ports`, rewritten by `respond.rs`), with
//! `TESTCONTAINERS_HOST_OVERRIDE` naming the gateway.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Most ports relayed for one child.
pub const MAX_PORTS: usize = 32;
/// Most connections relayed at once per port.
const MAX_CONNECTIONS: usize = 64;
/// How long a connection to the child may take to open.
const CONNECT_LIMIT: Duration = Duration::from_secs(5);

/// A subnet: the job's network (`addr/len`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subnet {
    pub addr: IpAddr,
    pub len: u8,
}

impl Subnet {
    /// Read `172.30.0.0/16`.
    pub fn parse(s: &str) -> Option<Subnet> {
        let (addr, len) = s.split_once('/')?;
        Some(Subnet {
            addr: addr.parse().ok()?,
            len: len.parse().ok()?,
        })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(IpAddr::V6(v6)),
            v4 => v4,
        };
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let len = u32::from(self.len.min(32));
                let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let len = u32::from(self.len.min(128));
                let mask = if len == 0 { 0 } else { u128::MAX << (128 - len) };
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

/// The relay of one child: its listeners, closed when dropped or closed.
pub struct Relay {
    ports: Vec<(u16, SocketAddr)>,
    stop: CancellationToken,
}

impl Relay {
    /// Listen on `gateway` for each of `ports` and relay connections from
    /// `from` to `target`. A port that cannot be listened on is skipped.
    pub async fn open(
        gateway: IpAddr,
        from: Subnet,
        target: IpAddr,
        ports: &[u16],
        tasks: &TaskTracker,
    ) -> std::io::Result<Relay> {
        let stop = CancellationToken::new();
        let mut bound = Vec::new();
        for &port in ports.iter().take(MAX_PORTS) {
            let listener = TcpListener::bind((gateway, 0)).await?;
            bound.push((port, listener.local_addr()?));
            tasks.spawn(accept(
                listener,
                from,
                SocketAddr::new(target, port),
                stop.clone(),
            ));
        }
        Ok(Relay { ports: bound, stop })
    }

    /// (child port, where the job reaches it).
    pub fn ports(&self) -> &[(u16, SocketAddr)] {
        &self.ports
    }

    /// Close the listeners and the connections under way.
    pub fn close(&self) {
        self.stop.cancel();
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn accept(listener: TcpListener, from: Subnet, target: SocketAddr, stop: CancellationToken) {
    let room = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let accepted = tokio::select! {
            _ = stop.cancelled() => return,
            a = listener.accept() => a,
        };
        let Ok((mut conn, peer)) = accepted else {
            // Out of descriptors and the like: let the moment pass.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        if !from.contains(peer.ip()) {
            tracing::debug!(%peer, "relay: a connection from outside the job's network, closed");
            continue;
        }
        let Ok(permit) = room.clone().try_acquire_owned() else {
            continue;
        };
        let stop = stop.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let Ok(Ok(mut up)) = tokio::time::timeout(CONNECT_LIMIT, TcpStream::connect(target)).await else {
                return;
            };
            tokio::select! {
                _ = stop.cancelled() => {}
                _ = tokio::io::copy_bidirectional(&mut conn, &mut up) => {}
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subnets_hold_their_addresses_only() {
        let net = Subnet::parse("172.30.4.0/24").unwrap();
        assert!(net.contains("172.30.4.9".parse().unwrap()));
        assert!(net.contains("::ffff:172.30.4.9".parse().unwrap()));
        assert!(!net.contains("172.30.5.9".parse().unwrap()));
        assert!(!net.contains("127.0.0.1".parse().unwrap()));
        assert!(
            Subnet::parse("fd00::/64")
                .unwrap()
                .contains("fd00::1".parse().unwrap())
        );
        assert_eq!(Subnet::parse("nope"), None);
    }

    #[tokio::test]
    async fn a_peer_outside_the_subnet_gets_nothing() {
        let server = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = server.local_addr().unwrap();
        let tasks = TaskTracker::new();
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        // Answers every connection: only the relay's check keeps one out.
        let serve = tokio::spawn(async move {
            loop {
                let (mut c, _) = server.accept().await.unwrap();
                tokio::io::AsyncWriteExt::write_all(&mut c, b"hi").await.unwrap();
            }
        });
        // Allowed: loopback is the "job's subnet" here.
        let ok = Relay::open(
            lo,
            Subnet::parse("127.0.0.0/8").unwrap(),
            lo,
            &[target.port()],
            &tasks,
        )
        .await
        .unwrap();
        let mut c = TcpStream::connect(ok.ports()[0].1).await.unwrap();
        let mut got = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut c, &mut got)
            .await
            .unwrap();
        assert_eq!(got, b"hi");
        // Not allowed: the peer is outside the subnet, the connection closes unanswered.
        let no = Relay::open(
            lo,
            Subnet::parse("10.9.9.0/24").unwrap(),
            lo,
            &[target.port()],
            &tasks,
        )
        .await
        .unwrap();
        let mut c = TcpStream::connect(no.ports()[0].1).await.unwrap();
        let mut got = Vec::new();
        let n = tokio::io::AsyncReadExt::read_to_end(&mut c, &mut got)
            .await
            .unwrap_or(0);
        assert_eq!(n, 0);
        no.close();
        ok.close();
        serve.abort();
    }
}
