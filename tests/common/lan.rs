//! A host "on the LAN" for the network tests: a network namespace of the
//! test's own, joined to this machine by a veth pair with test addresses
//! (`10.2xx.N.1` here, `10.2xx.N.2` there), so traffic from it arrives on an
//! interface other than loopback, as a neighbour's would. Nothing of this
//! machine's own interfaces is touched beyond the veth end made here, and
//! everything (the namespace, the pair, servers started in it) goes when
//! the guard drops, whether the test passed or not.

use std::net::Ipv4Addr;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A network namespace reached from this machine through a veth pair.
pub struct LanHost {
    pub name: String,
    /// This machine's end of the pair.
    pub host_side: Ipv4Addr,
    /// The namespace's own address.
    pub addr: Ipv4Addr,
    servers: Vec<Child>,
}

fn ip(args: &[&str]) {
    let o = Command::new("ip").args(args).output().expect("the ip command");
    assert!(
        o.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

impl LanHost {
    /// Make the namespace, the pair and the addresses.
    pub fn new() -> LanHost {
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let pid = std::process::id();
        let name = format!("berth-t{pid}-{n}");
        let (host_if, ns_if) = (
            format!("bt{}{n}h", pid % 100_000),
            format!("bt{}{n}n", pid % 100_000),
        );
        let net = [10, 200 + (pid % 50) as u8, n as u8];
        let host_side = Ipv4Addr::new(net[0], net[1], net[2], 1);
        let addr = Ipv4Addr::new(net[0], net[1], net[2], 2);
        // The guard first: whatever step fails below, drop cleans up.
        let lan = LanHost {
            name: name.clone(),
            host_side,
            addr,
            servers: Vec::new(),
        };
        ip(&["netns", "add", &name]);
        ip(&["link", "add", &host_if, "type", "veth", "peer", "name", &ns_if]);
        ip(&["link", "set", &ns_if, "netns", &name]);
        ip(&["addr", "add", &format!("{host_side}/30"), "dev", &host_if]);
        ip(&["link", "set", &host_if, "up"]);
        ip(&["-n", &name, "addr", "add", &format!("{addr}/30"), "dev", &ns_if]);
        ip(&["-n", &name, "link", "set", &ns_if, "up"]);
        ip(&["-n", &name, "link", "set", "lo", "up"]);
        lan
    }

    /// Route `dest` (an address or subnet) from the namespace through this machine.
    pub fn route_via_host(&self, dest: &str) {
        ip(&[
            "-n",
            &self.name,
            "route",
            "replace",
            dest,
            "via",
            &self.host_side.to_string(),
        ]);
    }

    /// Run `args` inside the namespace.
    pub fn exec(&self, args: &[&str]) -> Output {
        Command::new("ip")
            .args(["netns", "exec", &self.name])
            .args(args)
            .output()
            .expect("ip netns exec")
    }

    /// GET `url` from inside the namespace with curl (`timeout` seconds):
    /// the body, or `None` when nothing answered.
    pub fn get(&self, url: &str, timeout: u32) -> Option<String> {
        let o = self.exec(&["curl", "-s", "-f", "-m", &timeout.to_string(), url]);
        o.status
            .success()
            .then(|| String::from_utf8_lossy(&o.stdout).into_owned())
    }

    /// Serve `text` over HTTP on the namespace's address, `port`; returns
    /// once this machine gets it.
    pub fn serve_http(&mut self, port: u16, text: &str) {
        let script = format!(
            "import http.server\n\
class H(http.server.BaseHTTPRequestHandler):\n    def do_GET(self):\n        b={text:?}.encode()\n        self.send_response(200); self.send_header('Content-Length', str(len(b))); self.end_headers(); self.wfile.write(b)\n    def log_message(self, *a): pass\n\
http.server.ThreadingHTTPServer(('{}', {port}), H).serve_forever()\n",
            self.addr
        );
        let child = Command::new("ip")
            .args(["netns", "exec", &self.name, "python3", "-c", &script])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 in the namespace");
        self.servers.push(child);
        let url = format!("http://{}:{port}/", self.addr);
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let o = Command::new("curl")
                .args(["-s", "-f", "-m", "2", &url])
                .output()
                .unwrap();
            if o.status.success() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the server in {} did not come up",
                self.name
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The namespace's canary: every connection's first line appended to the
/// log (argv[1]); "listening" in the ready file (argv[2]) once bound.
const CANARY_PY: &str = r#"import socket, sys, threading
log, ready, addr, port = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((addr, port)); s.listen(64)
open(ready, "w").write("listening\n")
def serve(c):
    c.settimeout(2)
    try:
        data = c.recv(1024)
    except OSError:
        data = b""
    with open(log, "a") as f:
        f.write((data.decode(errors="replace").splitlines() or [""])[0] + "\n")
    try:
        c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 7\r\n\r\ncanary\n")
    except OSError:
        pass
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;

impl LanHost {
    /// A canary on the namespace's address, `port`: each connection's first
    /// line goes to `log` (one line per connection). Returns once it listens.
    pub fn serve_canary(&mut self, port: u16, log: &std::path::Path) {
        let ready = log.with_extension("ready");
        let child = Command::new("ip")
            .args(["netns", "exec", &self.name, "python3", "-c", CANARY_PY])
            .arg(log)
            .arg(&ready)
            .args([self.addr.to_string(), port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 in the namespace");
        self.servers.push(child);
        let deadline = Instant::now() + Duration::from_secs(15);
        while !ready.exists() {
            assert!(
                Instant::now() < deadline,
                "the canary in {} did not come up",
                self.name
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for LanHost {
    fn drop(&mut self) {
        for s in &mut self.servers {
            let _ = s.kill();
            let _ = s.wait();
        }
        // Deleting the namespace deletes the veth pair with it.
        let _ = Command::new("ip").args(["netns", "del", &self.name]).status();
    }
}
