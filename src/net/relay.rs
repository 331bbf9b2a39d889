//! Relaying bytes between two TCP connections with `splice(2)`: each
//! direction moves data socket → pipe → socket inside the kernel, never
//! through a buffer of ours. That is how the engine's own port proxy (Go's
//! `io.Copy` between TCP connections) moves them, and a copy through user
//! space would cost the relay a large part of its throughput.
//!
//! Each direction has its own pipe, filled only once it is empty again, so
//! `EAGAIN` from the socket side always means "no data yet" and from the
//! other side "the peer's buffer is full": both are waited on through
//! tokio's readiness, nothing blocks a worker. A direction that reads the
//! end shuts the other side's writing half (a half-close passes through);
//! an error in either direction ends both. [`relay_until_idle`] also ends
//! both once no byte moved either way for a while (the egress proxy's
//! tunnels).

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nix::fcntl::{FcntlArg, OFlag, SpliceFFlags, fcntl, splice};
use nix::sys::socket::{Shutdown, shutdown};
use tokio::io::Interest;
use tokio::net::TcpStream;

/// Pipe capacity asked for (the kernel may give less: `pipe-max-size`).
const PIPE_BYTES: i32 = 1 << 20;
/// Most bytes one splice call moves.
const CHUNK: usize = 1 << 20;

/// Relay `a` ⇄ `b` until both directions ended (or one failed). Returns
/// the bytes moved a → b and b → a.
pub async fn relay(a: &TcpStream, b: &TcpStream) -> io::Result<(u64, u64)> {
    let seen = Activity::new();
    tokio::try_join!(one_way(a, b, &seen), one_way(b, a, &seen))
}

/// [`relay`], ended early (as an error of kind `TimedOut`) once nothing
/// moved either way for `idle`.
pub async fn relay_until_idle(a: &TcpStream, b: &TcpStream, idle: Duration) -> io::Result<(u64, u64)> {
    let seen = Activity::new();
    let both = async { tokio::try_join!(one_way(a, b, &seen), one_way(b, a, &seen)) };
    let quiet = async {
        loop {
            let since = seen.since_last();
            if since >= idle {
                return;
            }
            tokio::time::sleep(idle - since).await;
        }
    };
    tokio::select! {
        r = both => r,
        _ = quiet => Err(io::ErrorKind::TimedOut.into()),
    }
}

/// When bytes last moved, in milliseconds since the relay began.
struct Activity {
    start: Instant,
    last_ms: AtomicU64,
}

impl Activity {
    fn new() -> Self {
        Activity {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
        }
    }
    fn touch(&self) {
        self.last_ms
            .store(self.start.elapsed().as_millis() as u64, Ordering::Relaxed);
    }
    fn since_last(&self) -> Duration {
        let now = self.start.elapsed().as_millis() as u64;
        Duration::from_millis(now.saturating_sub(self.last_ms.load(Ordering::Relaxed)))
    }
}

fn flags() -> SpliceFFlags {
    SpliceFFlags::SPLICE_F_MOVE | SpliceFFlags::SPLICE_F_NONBLOCK
}

/// A non-blocking pipe, as large as the kernel allows up to [`PIPE_BYTES`].
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (r, w) = nix::unistd::pipe2(OFlag::O_NONBLOCK | OFlag::O_CLOEXEC)?;
    // Best effort: a smaller pipe only means more calls.
    let _ = fcntl(&w, FcntlArg::F_SETPIPE_SZ(PIPE_BYTES));
    Ok((r, w))
}

/// Move everything `src` sends to `dst`, then half-close `dst`.
async fn one_way(src: &TcpStream, dst: &TcpStream, seen: &Activity) -> io::Result<u64> {
    let (pipe_r, pipe_w) = pipe()?;
    let mut total = 0u64;
    loop {
        let n = loop {
            src.readable().await?;
            let moved = src.try_io(Interest::READABLE, || {
                splice(src.as_fd(), None, &pipe_w, None, CHUNK, flags()).map_err(io::Error::from)
            });
            match moved {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        };
        if n == 0 {
            // The sender is done: pass the half-close on. The peer may be
            // gone already, which is no error of the relay's.
            let _ = shutdown(dst.as_raw_fd(), Shutdown::Write);
            return Ok(total);
        }
        let mut left = n;
        while left > 0 {
            dst.writable().await?;
            let moved = dst.try_io(Interest::WRITABLE, || {
                splice(&pipe_r, None, dst.as_fd(), None, left, flags()).map_err(io::Error::from)
            });
            match moved {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(m) => left -= m,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        }
        total += n as u64;
        seen.touch();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A connected pair of sockets on loopback.
    async fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (c, s) = tokio::join!(TcpStream::connect(addr), l.accept());
        (c.unwrap(), s.unwrap().0)
    }

    #[tokio::test]
    async fn bytes_pass_both_ways_and_half_closes_pass_on() {
        // client ⇄ [relay: r1 | r2] ⇄ server
        let (mut client, r1) = pair().await;
        let (r2, mut server) = pair().await;
        let relay = tokio::spawn(async move { relay(&r1, &r2).await });
        let big: Vec<u8> = (0..5_000_000u32).map(|i| (i % 251) as u8).collect();
        let sent = big.clone();
        let writer = tokio::spawn(async move {
            client.write_all(&sent).await.unwrap();
            client.shutdown().await.unwrap();
            let mut back = Vec::new();
            client.read_to_end(&mut back).await.unwrap();
            back
        });
        let mut got = Vec::new();
        server.read_to_end(&mut got).await.unwrap();
        assert_eq!(got.len(), big.len());
        assert!(got == big, "the bytes arrive unchanged and in order");
        // The client's half-close reached the server; its answer still flows back.
        server.write_all(b"done").await.unwrap();
        server.shutdown().await.unwrap();
        assert_eq!(writer.await.unwrap(), b"done");
        let (up, down) = relay.await.unwrap().unwrap();
        assert_eq!((up, down), (big.len() as u64, 4));
    }

    #[tokio::test]
    async fn an_idle_relay_ends_and_a_busy_one_does_not() {
        let (mut client, r1) = pair().await;
        let (r2, mut server) = pair().await;
        let relay = tokio::spawn(async move { relay_until_idle(&r1, &r2, Duration::from_millis(300)).await });
        // Bytes every 100 ms keep it open past its idle time.
        for _ in 0..6 {
            client.write_all(b"x").await.unwrap();
            let mut b = [0u8; 1];
            server.read_exact(&mut b).await.unwrap();
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(!relay.is_finished());
        let ended = tokio::time::timeout(Duration::from_secs(5), relay)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(ended.unwrap_err().kind(), io::ErrorKind::TimedOut);
    }
}
