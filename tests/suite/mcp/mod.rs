//! `berth mcp` as an agent meets it: the real binary driven over stdio by an
//! rmcp client. The canonical journey (background server with readiness, URL,
//! logs, kill, stdin EOF teardown), foreground promotion by budget and by
//! `berth bg`, backlog steering, bad calls, and SIGTERM teardown. Each
//! seed-compatible tool set replays its seed's flow in `seed_*.rs`; JSON-RPC
//! errors are in `protocol.rs`, `wait_for_port` on a late container in
//! `late_port.rs`, several sessions and the CLI on one instance in
//! `sessions.rs`, `list` paging in `list.rs`; the canonical task in two calls
//! and each seed's flow, with what they cost, in `budget.rs`; answer sizes in
//! `sizes.rs`; every set's parameters for its seed's flows in `complete.rs`.

use std::process::Stdio;
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

use crate::common::{eventually, http_get, instance_name, processes_with, unique_sleep};

mod budget;
mod complete;
mod inert;
mod late_port;
mod layers;
mod list;
mod pod;
mod project_image;
mod protocol;
mod scopes;
mod seed_exec;
mod seed_process;
mod seed_safe_shell;
mod seed_shell;
mod sessions;
mod sizes;

/// A server to start in the journey tests. Switching the runner is one line: `SERVER`.
struct ServerFixture {
    runner: &'static str,
    command: &'static str,
    image: Option<&'static str>,
    /// What the server logs for a `GET /` answered 200.
    request_logged: &'static str,
}

const HOST_SERVER: ServerFixture = ServerFixture {
    runner: "host",
    command: "exec python3 -m http.server $PORT --bind 127.0.0.1",
    image: None,
    request_logged: "\"GET / HTTP/1.0\" 200",
};

#[allow(dead_code)]
const DOCKER_SERVER: ServerFixture = ServerFixture {
    runner: "docker",
    command: "httpd -f -vv -p 8080 -h /www",
    image: Some("berth/sandbox:latest"),
    request_logged: "response:200",
};

const SERVER: ServerFixture = HOST_SERVER;

/// `run` arguments for a background web server on port 8080, ready when `/` answers.
fn server_args() -> Value {
    let mut v = json!({
        "command": SERVER.command,
        "background": true,
        "ports": ["8080"],
        "ready": {"http": "/"},
        "runner": SERVER.runner,
    });
    if let Some(image) = SERVER.image {
        v["image"] = json!(image);
    }
    v
}

/// A `berth mcp` child process with its own state, instance and workspace,
/// and an MCP client connected to its stdio.
struct Mcp {
    dir: tempfile::TempDir,
    instance: String,
    child: tokio::process::Child,
    client: Option<RunningService<RoleClient, ()>>,
    /// (tool, arguments, answer text) of every call, for the transcripts of docs/src/mcp.md.
    transcript: std::sync::Mutex<Vec<(String, Value, String)>>,
}

/// A tool answer: all text blocks joined, and `isError`.
struct Reply {
    text: String,
    is_error: bool,
}

impl Mcp {
    async fn start(tools: &str) -> Mcp {
        Self::start_with(tools, &[], |_| {}).await
    }

    /// Start with extra environment (e.g. `BERTH_RUNNER`) and files in the workspace.
    async fn start_with(tools: &str, env: &[(&str, &str)], prepare_ws: impl FnOnce(&std::path::Path)) -> Mcp {
        let dir = tempfile::tempdir().expect("temp dir");
        crate::common::workspace_dir(&dir.path().join("ws"));
        prepare_ws(&dir.path().join("ws"));
        let instance = instance_name("mcp");
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_berth"));
        // Started in the project, as an agent's client starts it.
        cmd.args(["mcp", "--tools", tools])
            .current_dir(dir.path().join("ws"));
        Self::apply_env(cmd.as_std_mut(), dir.path(), &instance);
        cmd.envs(env.iter().copied());
        let stderr = std::fs::File::create(dir.path().join("mcp.stderr")).unwrap();
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .expect("spawn berth mcp");
        let stdout = child.stdout.take().unwrap();
        let stdin = child.stdin.take().unwrap();
        let client = ().serve((stdout, stdin)).await.expect("MCP initialize");
        Mcp {
            dir,
            instance,
            child,
            client: Some(client),
            transcript: Default::default(),
        }
    }

    fn apply_env(cmd: &mut std::process::Command, dir: &std::path::Path, instance: &str) {
        cmd.env("BERTH_STATE_DIR", dir.join("state"))
            .env("BERTH_INSTANCE", instance)
            .env("BERTH_WORKSPACE", dir.join("ws"))
            .env("BERTH_GRACE", "2")
            // The user (who starts `berth mcp`) lets the agent ask for host jobs.
            .env("BERTH_ALLOW_HOST", "1")
            .env("BERTH_USER_CONFIG", dir.join("user-config.toml"))
            .env_remove("BERTH_SOCKET")
            .env_remove("BERTH_CONFIG")
            .env_remove("BERTH_LOG");
    }

    fn client(&self) -> &RunningService<RoleClient, ()> {
        self.client.as_ref().expect("client open")
    }

    async fn tool_names(&self) -> Vec<String> {
        let tools = self.client().list_all_tools().await.expect("tools/list");
        tools.into_iter().map(|t| t.name.to_string()).collect()
    }

    async fn call(&self, name: &str, args: Value) -> Reply {
        let params = CallToolRequestParams::new(name.to_string())
            .with_arguments(args.as_object().cloned().expect("arguments are an object"));
        let result: CallToolResult = self
            .client()
            .call_tool(params)
            .await
            .unwrap_or_else(|e| panic!("tools/call {name}: protocol error {e}"));
        let text = text_of(&result);
        self.transcript
            .lock()
            .unwrap()
            .push((name.to_string(), args, text.clone()));
        Reply {
            text,
            is_error: result.is_error == Some(true),
        }
    }

    /// Call and expect success.
    async fn ok(&self, name: &str, args: Value) -> String {
        let r = self.call(name, args.clone()).await;
        assert!(
            !r.is_error,
            "{name} {args} failed:\n{}\n{}",
            r.text,
            self.stderr()
        );
        r.text
    }

    /// A `berth` CLI command aimed at this server's instance.
    fn cli(&self, args: &[&str]) -> (i32, String, String) {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_berth"));
        Self::apply_env(&mut cmd, self.dir.path(), &self.instance);
        let o = cmd.args(args).output().expect("run berth");
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("mcp.stderr")).unwrap_or_default()
    }

    fn socket(&self) -> std::path::PathBuf {
        berth::api::socket_path(&berth::Config::isolated(
            self.dir.path().join("state"),
            &self.instance,
        ))
    }

    /// Close the client (stdin EOF) and wait for the server to exit.
    async fn close(&mut self) -> std::process::ExitStatus {
        if let Some(client) = self.client.take() {
            let _ = client.cancel().await;
        }
        self.wait_exit(Duration::from_secs(10)).await
    }

    async fn wait_exit(&mut self, timeout: Duration) -> std::process::ExitStatus {
        match tokio::time::timeout(timeout, self.child.wait()).await {
            Ok(status) => status.expect("wait"),
            Err(_) => panic!(
                "berth mcp did not exit within {timeout:?}; stderr:\n{}",
                self.stderr()
            ),
        }
    }

    fn print_transcript(&self, title: &str) {
        println!("### {title}");
        for (i, (name, args, text)) in self.transcript.lock().unwrap().iter().enumerate() {
            println!("\n{}. `{name}` {args}\n```\n{}\n```", i + 1, text.trim_end());
        }
    }
}

/// Wait (through the CLI, not to disturb the MCP transcript) until the server logged a request.
async fn wait_logged(mcp: &Mcp, id: &str) {
    eventually(Duration::from_secs(5), "request logged", || {
        let (_, out, err) = mcp.cli(&["logs", id]);
        out.contains(SERVER.request_logged) || err.contains(SERVER.request_logged)
    })
    .await;
}

/// `logs` once the server logged a request.
async fn eventually_logged(mcp: &Mcp, id: &str) -> String {
    wait_logged(mcp, id).await;
    let logs = mcp.ok("logs", json!({"id": id})).await;
    assert!(logs.contains(SERVER.request_logged), "{logs}");
    logs
}

/// A test that ends without `close` (or panics) still tears the server down
/// the way a user would, so that no job outlives it.
impl Drop for Mcp {
    fn drop(&mut self) {
        let Some(pid) = self.child.id() else { return };
        if !matches!(self.child.try_wait(), Ok(None)) {
            return;
        }
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.start_kill();
    }
}

/// The first `http://127.0.0.1:PORT` in an answer.
fn url_port(text: &str) -> u16 {
    let at = text
        .find("http://127.0.0.1:")
        .unwrap_or_else(|| panic!("no URL in: {text}"));
    let digits: String = text[at + "http://127.0.0.1:".len()..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().unwrap()
}

/// The first `job-N` in an answer.
fn job_in(text: &str) -> String {
    let at = text
        .find("job-")
        .unwrap_or_else(|| panic!("no job id in: {text}"));
    let n: String = text[at + 4..].chars().take_while(char::is_ascii_digit).collect();
    format!("job-{n}")
}

#[tokio::test]
async fn the_journey_run_ready_fetch_logs_kill_then_eof_tears_everything_down() {
    let mut mcp = Mcp::start("canonical").await;
    let names = mcp.tool_names().await;
    for t in [
        "run",
        "status",
        "list",
        "logs",
        "wait",
        "wait_for_port",
        "kill",
        "resume",
        "background",
        "events",
        "run_test",
        "run_build",
        "copy_out",
        "diff",
        "apply",
    ] {
        assert!(names.iter().any(|n| n == t), "{t} missing from {names:?}");
    }
    let answer = mcp.ok("run", server_args()).await;
    assert!(answer.contains("is ready after"), "{answer}");
    let id = job_in(&answer);
    let port = url_port(&answer);
    assert!(answer.contains("/{stdout,stderr}.log"), "log paths in: {answer}");
    assert!(http_get(port).contains(" 200 OK"));
    let logs = eventually_logged(&mcp, &id).await;
    assert!(logs.contains("next_seq"), "{logs}");
    let status = mcp.ok("status", json!({"id": id})).await;
    assert!(status.contains("Status: running"), "{status}");
    // A host job's files are here already: copy_out says where.
    let copied = mcp.call("copy_out", json!({"id": id, "path": "x"})).await;
    assert!(copied.is_error, "{}", copied.text);
    assert!(
        copied.text.contains("is a host job") && copied.text.contains("/ws"),
        "{}",
        copied.text
    );
    // A container job's file, read back while it runs.
    let writer = mcp
        .ok(
            "run",
            json!({"command": "echo '<testsuite ok/>' > /tmp/report.xml; sleep 30", "runner": "docker",
                   "image": "berth/sandbox:latest", "background": true}),
        )
        .await;
    let writer_id = job_in(&writer);
    let mut copied = String::new();
    for _ in 0..100 {
        copied = mcp
            .call("copy_out", json!({"id": writer_id, "path": "/tmp/report.xml"}))
            .await
            .text;
        if copied.contains("<testsuite ok/>") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        copied.contains("/tmp/report.xml (16 bytes):\n<testsuite ok/>"),
        "{copied}"
    );
    mcp.ok("kill", json!({"id": writer_id})).await;
    // The CLI sees the agent's jobs through the instance socket.
    let (code, ps, err) = mcp.cli(&["ps"]);
    assert_eq!(code, 0, "{err}");
    assert!(ps.contains(&id), "{ps}");
    let kill = mcp.ok("kill", json!({"id": id})).await;
    let v: Value = serde_json::from_str(kill.lines().next().unwrap()).expect("kill answer starts with JSON");
    assert_eq!(v["result"], "killed");
    assert_eq!(v["ended_by"], "agent");
    // A job still running at EOF is torn down with the server.
    let token = unique_sleep();
    mcp.ok(
        "run",
        json!({"argv": ["sleep", token], "background": true, "runner": "host"}),
    )
    .await;
    assert_eq!(processes_with(&token).len(), 1);
    // The server exits (close() gives it 10 s) having ended its job.
    let status = mcp.close().await;
    assert!(status.success(), "exit {status:?}; stderr:\n{}", mcp.stderr());
    assert!(processes_with(&token).is_empty(), "sleep job left behind");
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "server still answers"
    );
    assert!(!mcp.socket().exists(), "socket removed");
}

#[tokio::test]
async fn a_foreground_run_is_promoted_by_its_budget_and_released_by_berth_bg() {
    let mcp = Mcp::start("canonical").await;
    // Answered at the budget: the answer says so (one at the job's end, 30 s
    // on, would not).
    let a = mcp
        .ok(
            "run",
            json!({"command": "sleep 30", "timeout": 1, "runner": "host"}),
        )
        .await;
    assert!(a.contains("auto background (1s budget exceeded)"), "{a}");

    let token = unique_sleep();
    let run = mcp.call(
        "run",
        json!({"argv": ["sleep", token], "timeout": 60, "runner": "host"}),
    );
    let steer = async {
        // Other calls are answered while the foreground run waits.
        let mut fg_id = None;
        eventually(Duration::from_secs(10), "foreground job listed", || {
            let (_, out, _) = mcp.cli(&["ps", "--json"]);
            let jobs: Vec<Value> = serde_json::from_str(&out).unwrap_or_default();
            // Listed once it runs (a job is `starting` while it launches).
            fg_id = jobs
                .iter()
                .find(|j| {
                    j["start_mode"]["mode"] == "foreground" && j["status"].to_string().contains("running")
                })
                .map(|j| j["id"].as_str().unwrap().to_string());
            fg_id.is_some()
        })
        .await;
        let id = fg_id.unwrap();
        let list = mcp.ok("list", json!({})).await;
        assert!(
            list.contains(&format!("{id}  running  host  foreground")),
            "{list}"
        );
        let (code, _, err) = mcp.cli(&["bg", &id]);
        assert_eq!(code, 0, "{err}");
        id
    };
    let (answer, id) = tokio::join!(run, steer);
    // Released by `bg` (the answer says so) while its job runs on.
    assert!(!answer.is_error, "{}", answer.text);
    assert!(
        answer.text.contains("moved to background by user"),
        "{}",
        answer.text
    );
    assert!(answer.text.contains(&id));
    assert_eq!(processes_with(&token).len(), 1, "the released job runs on");
}

#[tokio::test]
async fn every_answer_carries_unseen_events_once() {
    let mcp = Mcp::start("canonical").await;
    // The failing line waits for a gate file the test makes once the run's
    // answer is back, so its watch hit is news for a later answer.
    let gate = mcp.dir.path().join("go");
    let a = mcp
        .ok(
            "run",
            json!({"command": format!("echo starting; while [ ! -e {} ]; do sleep 0.05; done; echo 'BUILD FAILED: boom'; exec sleep 30", gate.display()),
                   "background": true, "watch": ["FAILED"], "runner": "host"}),
        )
        .await;
    let id = job_in(&a);
    assert!(!a.contains("started ("), "own start is not news: {a}");
    assert!(!a.contains("watch /FAILED/"), "{a}");
    std::fs::write(&gate, "").unwrap();
    // The watch hit is recorded before its line can be read.
    eventually(Duration::from_secs(10), "the matching line", || {
        mcp.cli(&["logs", &id]).1.contains("BUILD FAILED")
    })
    .await;
    let first = mcp.ok("list", json!({})).await;
    assert_eq!(first.matches("watch /FAILED/ matched").count(), 1, "{first}");
    assert!(first.contains("BUILD FAILED: boom"), "{first}");
    let second = mcp.ok("list", json!({})).await;
    assert!(!second.contains("watch /FAILED/"), "repeated: {second}");

    let (code, _, err) = mcp.cli(&["kill", &id, "--as", "user"]);
    assert_eq!(code, 0, "{err}");
    let third = mcp.ok("list", json!({"filter": "all"})).await;
    assert!(
        third.contains(&format!("{id} (echo starting")) && third.contains("ended: killed by user"),
        "{third}"
    );
    // An error answer carries events too, and nothing is repeated.
    let fourth = mcp.call("status", json!({"id": "job-999"})).await;
    assert!(fourth.is_error);
    assert!(!fourth.text.contains("killed by user"), "{}", fourth.text);
}

#[tokio::test]
async fn wait_resume_background_and_events_tools() {
    let mcp = Mcp::start_with("canonical", &[("BERTH_RUNNER", "host")], |_| {}).await;
    // A server that dies before it is ready: the answer says why, with its output.
    let r = mcp
        .call(
            "run",
            json!({"command": "echo oops; exit 3", "ready": {"log": "never"}, "timeout": 20}),
        )
        .await;
    assert!(r.is_error, "{}", r.text);
    assert!(
        r.text
            .contains("did not become ready: it ended first: failed (exit 3)")
            && r.text.contains("oops"),
        "{}",
        r.text
    );
    let failed = job_in(&r.text);
    let w = mcp.ok("wait", json!({"id": failed})).await;
    assert!(w.contains("ended: failed (exit 3)"), "{w}");
    // A wait that times out says what is still pending.
    let token = unique_sleep();
    let s = mcp
        .ok("run", json!({"argv": ["sleep", token], "background": true}))
        .await;
    let w = mcp
        .call("wait", json!({"id": job_in(&s), "log": "never", "timeout": 0.3}))
        .await;
    assert!(
        w.is_error && w.text.contains("still waiting for: log /never/"),
        "{}",
        w.text
    );
    // Resume runs the same command again as a new job.
    let r = mcp.call("resume", json!({"id": failed})).await;
    assert!(
        r.text.contains(&format!("{failed} restarted as job-")),
        "{}",
        r.text
    );
    // `background` releases a foreground run waiting in another call.
    let token = unique_sleep();
    let run = mcp.call("run", json!({"argv": ["sleep", token]}));
    let steer = async {
        let mut fg = None;
        for _ in 0..250 {
            let list = mcp.ok("list", json!({})).await;
            if let Some(line) = list.lines().find(|l| l.contains("  foreground  ")) {
                fg = Some(job_in(line));
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let id = fg.expect("foreground job listed");
        let b = mcp.ok("background", json!({"id": id})).await;
        assert!(b.contains("moved to background by agent"), "{b}");
        id
    };
    let (answer, id) = tokio::join!(run, steer);
    assert!(
        answer.text.contains(&format!("{id} is still running"))
            && answer.text.contains("moved to background by agent"),
        "{}",
        answer.text
    );
    let e = mcp.ok("events", json!({"since": 1})).await;
    assert!(
        e.contains("started (host") && e.contains("ended: failed (exit 3)"),
        "{e}"
    );
}

#[tokio::test]
async fn an_agent_gets_a_host_job_only_when_the_user_allows_it() {
    let mcp = Mcp::start_with("canonical", &[("BERTH_ALLOW_HOST", "0")], |_| {}).await;
    let r = mcp
        .call("run", json!({"command": "echo on the host", "runner": "host"}))
        .await;
    assert!(r.is_error, "{}", r.text);
    assert!(
        r.text.contains("untrusted_config") && r.text.contains("allow_host"),
        "{}",
        r.text
    );
    let log = std::fs::read_to_string(
        mcp.dir
            .path()
            .join("state")
            .join(&mcp.instance)
            .join("security.log"),
    )
    .unwrap();
    assert!(log.contains("mcp:runner"), "{log}");
    // Nor a swarm job (its workspace copied to other machines, a way out
    // with ports), unless the user's config runs jobs there.
    let r = mcp
        .call(
            "run",
            json!({"command": "echo on a swarm", "runner": "swarm", "ports": ["8000"]}),
        )
        .await;
    assert!(r.is_error && r.text.contains("untrusted_config"), "{}", r.text);
    assert!(r.text.contains("runner = \"swarm\""), "{}", r.text);
}

/// No engine: an agent's `run` is refused (not a host job), even where the
/// project file it could have written says `fallback = true`, and the
/// user reading `berth mcp`'s stderr hears of it. The user's own config
/// saying `fallback = true` is what gives agents the host.
#[tokio::test]
async fn no_engine_refuses_an_agents_job_instead_of_a_silent_host_job() {
    let env = [
        ("DOCKER_HOST", "unix:///nonexistent/berth-test-docker.sock"),
        ("BERTH_RUNNER", "auto"),
        ("BERTH_ALLOW_HOST", "0"),
    ];
    let mcp = Mcp::start_with("canonical", &env, |ws| {
        std::fs::write(ws.join("berth.toml"), "fallback = true\n").unwrap();
    })
    .await;
    let r = mcp.call("run", json!({"command": "echo ran on the host"})).await;
    assert!(r.is_error, "{}", r.text);
    assert!(r.text.contains("not reachable"), "{}", r.text);
    assert!(!r.text.contains("ran on the host"), "{}", r.text);
    let (_, ps, _) = mcp.cli(&["ps", "-a"]);
    assert!(!ps.contains("job-"), "no job was made: {ps}");
    let err = mcp.stderr();
    assert!(
        err.contains("berth mcp: a job was refused") && err.contains("not reachable"),
        "{err}"
    );

    drop(mcp);

    let mcp = Mcp::start_with("canonical", &env, |ws| {
        std::fs::write(ws.parent().unwrap().join("user-config.toml"), "fallback = true\n").unwrap();
    })
    .await;
    let r = mcp.call("run", json!({"command": "echo ran on the host"})).await;
    assert!(!r.is_error && r.text.contains("ran on the host"), "{}", r.text);
    assert!(
        r.text.contains("without a sandbox"),
        "the answer says so: {}",
        r.text
    );
}

/// The engine reads a container as root; `copy_out` hands over only what
/// the job itself could read: a root-owned 0600 file in its workspace is
/// refused, naming it, while a readable one comes back.
#[tokio::test]
async fn copy_out_reads_only_what_the_job_could() {
    use std::os::unix::fs::PermissionsExt;
    let mcp = Mcp::start_with("canonical", &[], |ws| {
        std::fs::write(ws.join("secret"), "root only").unwrap();
        std::fs::set_permissions(ws.join("secret"), std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(ws.join("open"), "anyone").unwrap();
    })
    .await;
    let started = mcp
        .ok(
            "run",
            json!({"command": "id -u; sleep 30", "runner": "docker", "image": "berth/sandbox:latest",
                   "background": true}),
        )
        .await;
    let id = job_in(&started);
    let r = mcp.call("copy_out", json!({"id": id, "path": "secret"})).await;
    assert!(
        r.is_error && r.text.contains("cannot read") && r.text.contains("0600"),
        "{}",
        r.text
    );
    assert!(!r.text.contains("root only"), "{}", r.text);
    let r = mcp.call("copy_out", json!({"id": id, "path": "open"})).await;
    assert!(!r.is_error && r.text.contains("anyone"), "{}", r.text);
    mcp.ok("kill", json!({"id": id})).await;
}

/// Ports as integers or strings; an answer and the events block after it
/// are apart even for a client that joins text blocks as they come.
#[tokio::test]
async fn integer_ports_are_accepted_and_event_blocks_stand_apart() {
    let mcp = Mcp::start("canonical").await;
    let r = mcp
        .call(
            "run",
            json!({"command": "echo on $PORT", "ports": [8000], "runner": "host"}),
        )
        .await;
    assert!(!r.is_error && r.text.contains("on 8000"), "{}", r.text);
    // A background job that ends unseen: its `ended` event rides on the
    // next answer (here an error). It ends only once its answer is back
    // (a gate file): an end before the answer is built counts as told by
    // that answer (`backlog::cover`), and CI once saw exactly that.
    let gate = mcp.dir.path().join("go");
    let bg = mcp
        .ok(
            "run",
            json!({
                "command": format!("while [ ! -e {} ]; do sleep 0.05; done", gate.display()),
                "background": true,
                "runner": "host"
            }),
        )
        .await;
    std::fs::write(&gate, "").unwrap();
    let (code, _, err) = mcp.cli(&["wait", &job_in(&bg)]);
    assert_eq!(code, 0, "{err}");
    let params = CallToolRequestParams::new("logs".to_string())
        .with_arguments(json!({"id": "job-999"}).as_object().cloned().unwrap());
    let result = mcp.client().call_tool(params).await.unwrap();
    let blocks: Vec<String> = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect();
    assert!(blocks.len() >= 2, "{blocks:?}");
    for b in &blocks[..blocks.len() - 1] {
        assert!(b.ends_with('\n'), "a block runs into the next: {blocks:?}");
    }
}

/// `run` with a budget that kills: the job is stopped at `timeout` and the
/// answer says it timed out, with the shell's exit code for that (124).
#[tokio::test]
async fn run_with_on_timeout_kill_ends_timed_out_with_124() {
    let mcp = Mcp::start("canonical").await;
    let token = unique_sleep();
    let r = mcp
        .call(
            "run",
            json!({"argv": ["sleep", token], "timeout": 1, "on_timeout": "kill", "runner": "host"}),
        )
        .await;
    assert!(r.is_error, "{}", r.text);
    assert!(
        r.text.contains("124") && r.text.contains("timed out"),
        "{}",
        r.text
    );
    assert!(processes_with(&token).is_empty(), "the job was stopped");
    let r = mcp
        .call(
            "run",
            json!({"command": "true", "background": true, "on_timeout": "kill"}),
        )
        .await;
    assert!(r.is_error && r.text.contains("foreground"), "{}", r.text);
}

#[tokio::test]
async fn bad_calls_are_tool_errors_and_the_server_keeps_answering() {
    // Calls that do not fit a tool's schema are protocol errors: see protocol.rs.
    let mcp = Mcp::start("all").await;
    let cases = [
        ("status", json!({"id": "job-99"}), "unknown job `job-99`"),
        (
            "run",
            json!({"command": "true", "watch": ["("]}),
            "invalid regex `(`",
        ),
        ("run", json!({}), "missing command"),
        (
            "run",
            json!({"command": "true", "ports": ["99999"]}),
            "invalid port",
        ),
        (
            "run",
            json!({"command": "true", "memory": "lots"}),
            "invalid size",
        ),
        (
            "kill",
            json!({"id": "job-7", "signal": "NOPE"}),
            "invalid signal `NOPE`",
        ),
        (
            "safe_shell",
            json!({"command": "ls -la"}),
            "put its arguments in `args`",
        ),
        ("shell", json!({"action": "poll"}), "needs `run_id`"),
    ];
    for (tool, args, expect) in cases {
        let r = mcp.call(tool, args.clone()).await;
        assert!(r.is_error, "{tool} {args} should fail: {}", r.text);
        assert!(r.text.contains(expect), "{tool} {args}: {}", r.text);
        let first_block = r.text.split("\nEvents since").next().unwrap();
        assert_eq!(first_block.trim_end().lines().count(), 1, "one line: {}", r.text);
    }
    let ok = mcp
        .ok("run", json!({"command": "echo still here", "runner": "host"}))
        .await;
    assert!(ok.contains("still here"), "{ok}");
    // An unknown tool set is refused with the valid names.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_berth"))
        .args(["mcp", "--tools", "bogus"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("canonical") && err.contains("exec"), "{err}");
}

#[tokio::test]
async fn sigterm_tears_down_like_eof() {
    let mut mcp = Mcp::start("canonical").await;
    let token = unique_sleep();
    mcp.ok(
        "run",
        json!({"argv": ["sleep", token], "background": true, "runner": "host"}),
    )
    .await;
    assert_eq!(processes_with(&token).len(), 1);
    let pid = mcp.child.id().unwrap();
    std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    let status = mcp.wait_exit(Duration::from_secs(10)).await;
    assert!(status.success(), "{status:?}");
    assert!(processes_with(&token).is_empty());
    assert!(!mcp.socket().exists());
}

#[tokio::test]
async fn a_host_job_with_ld_preload_is_refused_as_blocked() {
    let mcp = Mcp::start_with("canonical", &[("BERTH_RUNNER", "host")], |_| {}).await;
    let r = mcp
        .call(
            "run",
            json!({"command": "touch MARKER", "runner": "host", "env": {"LD_PRELOAD": "/tmp/evil.so"}}),
        )
        .await;
    assert!(r.is_error, "{}", r.text);
    assert!(
        r.text.contains("\"blocked\":true") && r.text.contains("LD_PRELOAD"),
        "{}",
        r.text
    );
    assert!(!mcp.dir.path().join("ws/MARKER").exists());
}

/// The text of a tool answer (its text items, one per line).
pub fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}
