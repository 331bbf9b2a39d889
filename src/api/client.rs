//! The API client: what CLI verbs and the TUI use to talk to a running
//! manager over its Unix socket (hyper, one connection per request; SSE
//! streams are read frame by frame). Errors from the server come back as
//! [`Error::Remote`] carrying the server's code and message unchanged.

use std::path::PathBuf;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::net::UnixStream;

use super::{
    BackgroundRequest, ErrorBody, EventsPage, Health, JobView, WaitForPortRequest, WaitRequest, socket_path,
};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::manager::{Foreground, JobPage, KillOutcome, KillRequest, ListFilter};
use crate::model::{EndedBy, JobId, JobInfo, JobSpec};
use crate::output::{LogPage, LogQuery};
use crate::ready::WaitOutcome;

/// A client of one instance's manager.
#[derive(Debug, Clone)]
pub struct Client {
    socket: PathBuf,
    instance: String,
    /// Sent as [`super::CLIENT_HEADER`]: what the daemon records the
    /// starts of this client as (`cli` unless renamed).
    name: &'static str,
}

impl Client {
    /// A client for `config`'s instance (nothing is contacted yet).
    pub fn new(config: &Config) -> Self {
        Client {
            socket: socket_path(config),
            instance: config.instance.clone(),
            name: "cli",
        }
    }

    /// The same client under another of berth's names (`tui`).
    pub fn named(mut self, name: &'static str) -> Self {
        self.name = name;
        self
    }

    /// A client whose manager answered a health check.
    pub async fn connect(config: &Config) -> Result<Self> {
        let client = Client::new(config);
        client.health().await?;
        Ok(client)
    }

    pub fn socket(&self) -> &std::path::Path {
        &self.socket
    }

    fn no_daemon(&self) -> Error {
        Error::NoDaemon {
            instance: self.instance.clone(),
            socket: self.socket.clone(),
        }
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<hyper::Response<Incoming>> {
        let stream = UnixStream::connect(&self.socket).await.map_err(|e| {
            if e.kind() == std::io::ErrorKind::PermissionDenied {
                Error::SocketDenied {
                    instance: self.instance.clone(),
                    socket: self.socket.clone(),
                }
            } else {
                self.no_daemon()
            }
        })?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|_| self.no_daemon())?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header("host", "berth")
            .header(super::CLIENT_HEADER, self.name);
        if body.is_some() {
            req = req.header("content-type", "application/json");
        }
        let req = req
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .expect("request parts are valid");
        sender.send_request(req).await.map_err(|e| Error::Remote {
            code: "connection".into(),
            message: format!("the manager dropped the request ({e}); is it shutting down?"),
        })
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&impl Serialize>,
    ) -> Result<T> {
        Ok(self.answer(method, path, body).await?.0)
    }

    /// [`Client::call`], with the answer's headers.
    async fn answer<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&impl Serialize>,
    ) -> Result<(T, hyper::HeaderMap)> {
        let body = body.map(|b| serde_json::to_vec(b).expect("request bodies serialize"));
        let res = self.send(method, path, body).await?;
        let status = res.status();
        let headers = res.headers().clone();
        let bytes = res
            .into_body()
            .collect()
            .await
            .map_err(|e| Error::Remote {
                code: "connection".into(),
                message: format!("reading the answer failed: {e}"),
            })?
            .to_bytes();
        if !status.is_success() {
            return Err(match serde_json::from_slice::<ErrorBody>(&bytes) {
                Ok(e) => Error::Remote {
                    code: e.error.code,
                    message: e.error.message,
                },
                Err(_) => Error::Remote {
                    code: "http".into(),
                    message: format!("{status}: {}", String::from_utf8_lossy(&bytes)),
                },
            });
        }
        let value = serde_json::from_slice(&bytes).map_err(|e| Error::Remote {
            code: "bad_answer".into(),
            message: format!("unexpected answer from the manager: {e}"),
        })?;
        Ok((value, headers))
    }

    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        self.call(Method::GET, path, None::<&()>).await
    }

    async fn post<T: DeserializeOwned>(&self, path: &str, body: &impl Serialize) -> Result<T> {
        self.call(Method::POST, path, Some(body)).await
    }

    /// The tar of `path` in running job `id` (`berth cp`).
    pub async fn copy_out(&self, id: &JobId, path: &str) -> Result<super::Archive> {
        let q = serde_urlencoded::to_string([("path", path)]).unwrap_or_default();
        self.get(&format!("/v1/jobs/{id}/archive?{q}")).await
    }

    /// Every layer (`berth layers`).
    pub async fn layers(&self) -> Result<Vec<crate::model::LayerInfo>> {
        self.get("/v1/layers").await
    }

    /// Layer `layer` (a name or a job id) as listed.
    pub async fn layer(&self, layer: &str) -> Result<crate::model::LayerInfo> {
        self.get(&format!("/v1/layers/{}", url_safe(layer))).await
    }

    /// Layer `layer`'s changes as text (`berth diff`).
    pub async fn layer_diff(&self, layer: &str, req: &super::DiffRequest) -> Result<super::DiffAnswer> {
        self.post(&format!("/v1/layers/{}/diff", url_safe(layer)), req)
            .await
    }

    /// Apply layer `layer` to its checkout (`berth apply`).
    pub async fn layer_apply(&self, layer: &str, req: &super::ApplyRequest) -> Result<crate::model::Applied> {
        self.post(&format!("/v1/layers/{}/apply", url_safe(layer)), req)
            .await
    }

    /// Discard layer `layer` (`berth discard`); the layer's name.
    pub async fn layer_discard(&self, layer: &str) -> Result<String> {
        let v: serde_json::Value = self
            .call(
                Method::DELETE,
                &format!("/v1/layers/{}", url_safe(layer)),
                None::<&()>,
            )
            .await?;
        Ok(v["discarded"].as_str().unwrap_or(layer).to_string())
    }

    /// The nodes the running jobs are spread over, with what each holds.
    pub async fn nodes(&self) -> Result<Vec<crate::model::NodeLoad>> {
        self.get("/v1/nodes").await
    }

    pub async fn health(&self) -> Result<Health> {
        self.get("/v1/health").await
    }

    pub async fn create(&self, spec: &JobSpec) -> Result<JobView> {
        self.post("/v1/jobs", spec).await
    }

    /// Create a job and wait up to `timeout` seconds for its ready conditions, in one request.
    pub async fn create_ready(&self, spec: &JobSpec, timeout: f64) -> Result<super::CreatedReady> {
        self.post(&format!("/v1/jobs?ready_timeout={timeout}"), spec)
            .await
    }

    /// Jobs matching `filter`, newest first, at most the server's default page (50).
    pub async fn list(&self, filter: ListFilter) -> Result<Vec<JobInfo>> {
        Ok(self.list_page(filter, None, None, false).await?.jobs)
    }

    /// Up to `limit` jobs matching `filter`, newest first, older than
    /// `before`: as many pages as that takes (the server cuts pages by count
    /// and by bytes).
    pub async fn list_up_to(
        &self,
        filter: ListFilter,
        limit: usize,
        before: Option<&JobId>,
        usage: bool,
    ) -> Result<JobPage> {
        let mut all = JobPage {
            jobs: Vec::new(),
            more: before.cloned(),
        };
        let mut first = true;
        while all.jobs.len() < limit && (first || all.more.is_some()) {
            first = false;
            let left = limit - all.jobs.len();
            let page = self
                .list_page(filter, Some(left), all.more.as_ref(), usage)
                .await?;
            all.jobs.extend(page.jobs);
            all.more = page.more;
        }
        Ok(all)
    }

    /// What a live panel shows: every job still running or queued, however
    /// old, plus the newest page of history, newest first.
    pub async fn panel_jobs(&self) -> Result<Vec<JobInfo>> {
        let mut jobs = self
            .list_up_to(ListFilter::Running, usize::MAX, None, false)
            .await?
            .jobs;
        for j in self.list(ListFilter::All).await? {
            if !jobs.iter().any(|k| k.id == j.id) {
                jobs.push(j);
            }
        }
        Ok(crate::manager::newest_first(jobs, None, usize::MAX))
    }

    /// A page of jobs: newest first, at most `limit` (and what the server
    /// puts in one page), older than `before`; with `usage`, CPU and memory
    /// of the running ones sampled. `more` is the `before` of the next page.
    pub async fn list_page(
        &self,
        filter: ListFilter,
        limit: Option<usize>,
        before: Option<&JobId>,
        usage: bool,
    ) -> Result<JobPage> {
        let f = serde_json::to_value(filter).expect("filter serializes");
        let mut path = format!("/v1/jobs?filter={}", f.as_str().unwrap_or("running"));
        if usage {
            path += "&usage=true";
        }
        if let Some(n) = limit {
            path += &format!("&limit={n}");
        }
        if let Some(b) = before {
            path += &format!("&before={b}");
        }
        let (jobs, headers) = self.answer(Method::GET, &path, None::<&()>).await?;
        let more = headers
            .get(super::MORE_BEFORE_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(JobId::from);
        Ok(JobPage { jobs, more })
    }

    /// `list` with CPU/memory of running jobs sampled (about a second with containers).
    pub async fn list_with_usage(&self, filter: ListFilter) -> Result<Vec<JobInfo>> {
        Ok(self.list_page(filter, None, None, true).await?.jobs)
    }

    pub async fn info(&self, id: &JobId) -> Result<JobView> {
        self.get(&format!("/v1/jobs/{id}")).await
    }

    /// `info` with CPU/memory sampled (about a second for a container).
    pub async fn info_with_usage(&self, id: &JobId) -> Result<JobView> {
        self.get(&format!("/v1/jobs/{id}?usage=true")).await
    }

    pub async fn logs(&self, id: &JobId, q: &LogQuery) -> Result<LogPage> {
        self.get(&format!("/v1/jobs/{id}/logs{}", log_query(q))).await
    }

    /// `GET /v1/jobs/{id}/logs/text`: the output from `q.since` as runs of
    /// text in frames, page after page (see `daemon/log_text.rs`).
    pub async fn logs_text(&self, id: &JobId, q: &LogQuery) -> Result<FrameReader> {
        let path = format!("/v1/jobs/{id}/logs/text{}", log_query(q));
        let res = self.send(Method::GET, &path, None).await?;
        Ok(FrameReader {
            body: FrameBody::Http(self.streaming(res).await?),
            buf: bytes::BytesMut::new(),
        })
    }

    /// The output of child `name` of job `id` (its last `tail` lines).
    pub async fn child_logs(
        &self,
        id: &JobId,
        name: &str,
        tail: Option<usize>,
    ) -> Result<crate::model::ChildLogs> {
        let tail = tail.map(|n| format!("?tail={n}")).unwrap_or_default();
        let name: String = url_safe(name);
        self.get(&format!("/v1/jobs/{id}/children/{name}/logs{tail}"))
            .await
    }

    pub async fn wait(&self, id: &JobId, req: &WaitRequest) -> Result<WaitOutcome> {
        self.post(&format!("/v1/jobs/{id}/wait"), req).await
    }

    pub async fn foreground(&self, id: &JobId) -> Result<Foreground> {
        self.get(&format!("/v1/jobs/{id}/foreground")).await
    }

    pub async fn kill(&self, id: &JobId, req: &KillRequest) -> Result<KillOutcome> {
        self.post(&format!("/v1/jobs/{id}/kill"), req).await
    }

    pub async fn resume(&self, id: &JobId) -> Result<JobView> {
        self.post(&format!("/v1/jobs/{id}/resume"), &serde_json::json!({}))
            .await
    }

    pub async fn background(&self, id: &JobId, by: EndedBy) -> Result<JobInfo> {
        self.post(
            &format!("/v1/jobs/{id}/background"),
            &BackgroundRequest { by: Some(by) },
        )
        .await
    }

    pub async fn events(&self, since: u64, limit: usize) -> Result<EventsPage> {
        self.get(&format!("/v1/events?since={since}&limit={limit}")).await
    }

    pub async fn wait_for_port(&self, req: &WaitForPortRequest) -> Result<crate::manager::PortWait> {
        self.post("/v1/wait_for_port", req).await
    }

    pub async fn prune(&self, req: &crate::manager::PruneRequest) -> Result<crate::manager::PruneOutcome> {
        self.post("/v1/prune", req).await
    }

    pub async fn shutdown(&self) -> Result<serde_json::Value> {
        self.post("/v1/shutdown", &serde_json::json!({})).await
    }

    /// `POST /v1/run`: create a foreground job and stream it (see `api/run.rs`).
    pub async fn run(&self, spec: &JobSpec) -> Result<FrameReader> {
        let body = serde_json::to_vec(spec).expect("request bodies serialize");
        let res = self.send(Method::POST, "/v1/run", Some(body)).await?;
        Ok(FrameReader {
            body: FrameBody::Http(self.streaming(res).await?),
            buf: bytes::BytesMut::new(),
        })
    }

    /// `POST /v1/jobs/{id}/exec`: run a command in running job `id` and
    /// stream its output (`berth exec`; see `daemon/exec.rs`).
    pub async fn exec(&self, id: &JobId, req: &crate::manager::ExecRequest) -> Result<FrameReader> {
        let body = serde_json::to_vec(req).expect("request bodies serialize");
        let res = self
            .send(Method::POST, &format!("/v1/jobs/{id}/exec"), Some(body))
            .await?;
        Ok(FrameReader {
            body: FrameBody::Http(self.streaming(res).await?),
            buf: bytes::BytesMut::new(),
        })
    }

    /// The body of a streaming answer, or the error it carries instead.
    async fn streaming(&self, res: hyper::Response<Incoming>) -> Result<Incoming> {
        if res.status() != StatusCode::OK {
            let bytes = res
                .into_body()
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            return Err(match serde_json::from_slice::<ErrorBody>(&bytes) {
                Ok(e) => Error::Remote {
                    code: e.error.code,
                    message: e.error.message,
                },
                Err(_) => Error::Remote {
                    code: "http".into(),
                    message: String::from_utf8_lossy(&bytes).into_owned(),
                },
            });
        }
        Ok(res.into_body())
    }

    /// Follow an SSE route (`/v1/jobs/{id}/logs/follow?…`, `/v1/events/follow?…`).
    pub async fn follow(&self, path: &str) -> Result<SseReader> {
        let res = self.send(Method::GET, path, None).await?;
        let body = self.streaming(res).await?;
        Ok(SseReader {
            body,
            buf: Vec::new(),
            start: 0,
            scanned: 0,
        })
    }
}

/// `?tail=…&since=…` for a log query.
pub fn log_query(q: &LogQuery) -> String {
    let mut parts = Vec::new();
    if let Some(t) = q.tail {
        parts.push(format!("tail={t}"));
    }
    if let Some(s) = q.since {
        parts.push(format!("since={s}"));
    }
    if let Some(l) = q.limit {
        parts.push(format!("limit={l}"));
    }
    if let Some(s) = q.stream {
        parts.push(format!(
            "stream={}",
            serde_json::to_value(s).unwrap().as_str().unwrap_or("stdout")
        ));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("?{}", parts.join("&"))
    }
}

/// Reads the frames of a `POST /v1/run` answer, or of the same stream made
/// in this process (`berth run --no-daemon`: one driver reads both).
pub struct FrameReader {
    body: FrameBody,
    buf: bytes::BytesMut,
}

enum FrameBody {
    Http(Incoming),
    Local(tokio::sync::mpsc::Receiver<std::result::Result<Bytes, std::convert::Infallible>>),
}

impl FrameReader {
    /// Frames sent by a stream in this process, as the daemon would send them.
    pub fn local(
        rx: tokio::sync::mpsc::Receiver<std::result::Result<Bytes, std::convert::Infallible>>,
    ) -> Self {
        FrameReader {
            body: FrameBody::Local(rx),
            buf: bytes::BytesMut::new(),
        }
    }

    /// The next `(kind, payload)`; `None` when the stream ends.
    pub async fn next(&mut self) -> Option<(u8, Bytes)> {
        loop {
            if let Some(frame) = super::frames::take_frame(&mut self.buf) {
                return Some(frame);
            }
            let bytes = match &mut self.body {
                FrameBody::Http(body) => body.frame().await?.ok()?.into_data().ok(),
                FrameBody::Local(rx) => rx.recv().await?.ok(),
            };
            if let Some(bytes) = bytes {
                self.buf.extend_from_slice(&bytes);
            }
        }
    }
}

/// Reads `event:`/`data:` records from an SSE body.
pub struct SseReader {
    body: Incoming,
    buf: Vec<u8>,
    /// Where the unread part of `buf` starts (consumed bytes are dropped in
    /// bulk, not per record: a frame may hold hundreds of records).
    start: usize,
    /// How far past `start` a record end was already looked for.
    scanned: usize,
}

impl SseReader {
    /// The next `(event, data)`; `None` when the stream ends.
    pub async fn next(&mut self) -> Option<(String, String)> {
        loop {
            let from = self.start + self.scanned.saturating_sub(1);
            if let Some(pos) = memchr::memmem::find(&self.buf[from..], b"\n\n") {
                let end = from + pos;
                let record = String::from_utf8_lossy(&self.buf[self.start..end]).into_owned();
                self.start = end + 2;
                self.scanned = 0;
                let mut event = String::from("message");
                let mut data = Vec::new();
                for line in record.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        event = v.trim().to_string();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push(v.strip_prefix(' ').unwrap_or(v).to_string());
                    }
                }
                if data.is_empty() {
                    continue; // keep-alive comment
                }
                return Some((event, data.join("\n")));
            }
            self.scanned = self.buf.len() - self.start;
            if self.start > 0 {
                self.buf.drain(..self.start);
                self.start = 0;
            }
            let frame = self.body.frame().await?.ok()?;
            if let Ok(bytes) = frame.into_data() {
                self.buf.extend_from_slice(&bytes);
            }
        }
    }
}

/// `s` for a path segment: plain characters as they are, the rest `%XX`.
fn url_safe(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' | b'-' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
