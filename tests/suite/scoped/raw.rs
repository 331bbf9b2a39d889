//! A scoped engine reached from the test itself, as a hostile job would
//! reach it: a container job with `engine = "scoped"` (the sandbox image,
//! sleeping) under an in-process manager, and HTTP/1.1 requests written
//! byte for byte to its socket, each on a connection of its own. Also what
//! the engine did, asked of the engine directly (docker CLI).

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use berth::model::EngineAccess;
use berth::{JobSpec, RunnerChoice};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::{SANDBOX, TestManager, manager_with};

/// A running job with a scoped engine, and its socket.
pub struct Scoped {
    pub tm: TestManager,
    pub socket: PathBuf,
    /// The job's container name: its children's `berth.parent`.
    pub parent: String,
}

/// One answer: status and body (de-chunked).
pub struct Answer {
    pub status: u16,
    pub body: String,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

impl Scoped {
    /// Start the job and find its socket.
    pub async fn start() -> Scoped {
        let tm = manager_with(|c| c);
        let mut spec = JobSpec::argv(["sleep", "600"])
            .with_runner(RunnerChoice::Docker)
            .with_image(SANDBOX);
        spec.engine = Some(EngineAccess::Scoped);
        spec.background = true;
        let job = tm.manager.start(spec).await.expect("a scoped job starts");
        let info = tm.manager.info(&job.id).unwrap();
        let cid = info.container_id.expect("a container job");
        let parent = crate::common::docker_inspect("container", &cid).expect("the job's container")["Name"]
            .as_str()
            .unwrap()
            .trim_start_matches('/')
            .to_string();
        let socket = tm
            .manager
            .config()
            .instance_dir()
            .join("jobs")
            .join(job.id.as_str())
            .join("engine/docker.sock");
        Scoped { tm, socket, parent }
    }

    /// Send `raw` as it is; the answer.
    pub async fn send(&self, raw: &[u8]) -> Answer {
        let mut s = tokio::net::UnixStream::connect(&self.socket).await.unwrap();
        s.write_all(raw).await.unwrap();
        let mut buf = Vec::new();
        tokio::time::timeout(Duration::from_secs(60), s.read_to_end(&mut buf))
            .await
            .expect("an answer within 60 s")
            .unwrap();
        parse(&buf)
    }

    /// `method path` with `headers` and `body` (a length unless chunked).
    pub async fn ask(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Answer {
        self.send(&request(method, path, headers, body)).await
    }

    /// A JSON request.
    pub async fn json(&self, method: &str, path: &str, body: &Value) -> Answer {
        let json = [("Content-Type", "application/json")];
        self.ask(method, path, &json, body.to_string().as_bytes()).await
    }

    /// Make (not start) a child named `name`; its id.
    pub async fn child(&self, name: &str) -> String {
        let body = serde_json::json!({"Image": SANDBOX, "Cmd": ["sleep", "300"]});
        let a = self
            .json("POST", &format!("/v1.41/containers/create?name={name}"), &body)
            .await;
        assert_eq!(a.status, 201, "{}", a.body);
        a.json()["Id"].as_str().unwrap().to_string()
    }

    /// Ids of the engine's containers that are this job's children.
    pub fn children(&self) -> Vec<String> {
        let o = Command::new("docker")
            .args(["ps", "-aq", "--no-trunc", "--filter"])
            .arg(format!("label=berth.parent={}", self.parent))
            .output()
            .expect("docker CLI");
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// End the job (its children, networks and volumes go with it).
    pub async fn end(self) {
        self.tm.manager.shutdown().await;
    }
}

/// An HTTP/1.1 request, byte for byte.
pub fn request(method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut out = format!("{method} {path} HTTP/1.1\r\nHost: docker\r\nConnection: close\r\n").into_bytes();
    let chunked = headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("Transfer-Encoding"));
    for (k, v) in headers {
        out.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
    }
    if chunked {
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(format!("{:x}\r\n", body.len()).as_bytes());
        out.extend_from_slice(body);
        out.extend_from_slice(b"\r\n0\r\n\r\n");
        return out;
    }
    if !body.is_empty() || matches!(method, "POST" | "PUT") {
        out.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    out
}

fn parse(buf: &[u8]) -> Answer {
    let text = String::from_utf8_lossy(buf);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let chunked = head.to_ascii_lowercase().contains("transfer-encoding: chunked");
    let body = match chunked {
        true => dechunk(body),
        false => body.to_string(),
    };
    Answer { status, body }
}

fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || after.len() < n {
            break;
        }
        out.push_str(&after[..n]);
        rest = after[n..].trim_start_matches("\r\n");
    }
    out
}
