//! A canary: a TCP listener of the test's own that keeps the first bytes of
//! every connection it gets (an HTTP request line, or whatever came) and
//! answers a tiny HTTP page. A test that must show something never reached
//! an address asserts the canary heard nothing; a control that must reach
//! it shows the canary works. Closed (its thread joined) on drop.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub struct Canary {
    pub addr: SocketAddr,
    heard: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Canary {
    /// Listen on `ip`, a port the kernel picks.
    pub fn on(ip: IpAddr) -> Canary {
        let listener = TcpListener::bind((ip, 0)).expect("bind the canary");
        let addr = listener.local_addr().unwrap();
        let heard = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (h, s) = (heard.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(mut c) = conn else { continue };
                let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
                let mut buf = [0u8; 1024];
                let n = c.read(&mut buf).unwrap_or(0);
                let first = String::from_utf8_lossy(&buf[..n]);
                h.lock()
                    .unwrap()
                    .push(first.lines().next().unwrap_or("").to_string());
                let _ = c.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 7\r\n\r\ncanary\n");
            }
        });
        Canary {
            addr,
            heard,
            stop,
            thread: Some(thread),
        }
    }

    /// What every connection so far began with.
    pub fn heard(&self) -> Vec<String> {
        self.heard.lock().unwrap().clone()
    }
}

impl Drop for Canary {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
