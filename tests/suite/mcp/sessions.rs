//! Many clients on one instance: `berth mcp` sessions (driven by the rmcp
//! client) and the CLI share one manager, one cap of 3 and one job list,
//! whether a `berth daemon` serves the instance or the first `berth mcp`
//! hosts it in-process. Closing a session stops only its jobs (`ended_by:
//! system`, reason `session ended`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use serde_json::{Value, json};

use super::{Mcp, Reply};
use crate::common::{Daemon, eventually, processes_with, unique_sleep};

/// One `berth mcp` process on a shared instance, with its MCP client.
pub(super) struct Session {
    child: tokio::process::Child,
    client: Option<RunningService<rmcp::RoleClient, ()>>,
    stderr: PathBuf,
}

impl Session {
    /// Start `berth mcp` for `instance` under `dir` (the layout of [`Daemon`]
    /// and [`Mcp`]: `dir/state`, `dir/ws`), from `dir/ws`.
    pub(super) async fn open(dir: &Path, instance: &str, name: &str) -> Session {
        Self::open_in(dir, instance, name, &dir.join("ws")).await
    }

    /// [`Session::open`] with `berth mcp` started in `cwd`.
    async fn open_in(dir: &Path, instance: &str, name: &str, cwd: &Path) -> Session {
        Self::spawn(dir, instance, name, cwd, None).await
    }

    /// [`Session::open`] for another project: `berth mcp` started in
    /// `project`, which is its workspace.
    async fn open_project(dir: &Path, instance: &str, name: &str, project: &Path) -> Session {
        crate::common::workspace_dir(project);
        Self::spawn(dir, instance, name, project, Some(project)).await
    }

    async fn spawn(dir: &Path, instance: &str, name: &str, cwd: &Path, workspace: Option<&Path>) -> Session {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_berth"));
        cmd.args(["mcp", "--tools", "canonical"]).current_dir(cwd);
        Mcp::apply_env(cmd.as_std_mut(), dir, instance);
        cmd.env("BERTH_RUNNER", "host").env("BERTH_LOG", "berth=info");
        if let Some(ws) = workspace {
            cmd.env("BERTH_WORKSPACE", ws);
        }
        let stderr = dir.join(format!("{name}.stderr"));
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn berth mcp");
        let (stdout, stdin) = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
        let client = ().serve((stdout, stdin)).await.expect("MCP initialize");
        Session {
            child,
            client: Some(client),
            stderr,
        }
    }

    pub(super) async fn call(&self, tool: &str, args: Value) -> Reply {
        let params = CallToolRequestParams::new(tool.to_string())
            .with_arguments(args.as_object().cloned().expect("arguments are an object"));
        let result = self
            .client
            .as_ref()
            .expect("open")
            .call_tool(params)
            .await
            .unwrap_or_else(|e| panic!("tools/call {tool}: {e}\n{}", self.stderr()));
        let text = crate::suite::mcp::text_of(&result);
        Reply {
            text,
            is_error: result.is_error == Some(true),
        }
    }

    /// Start `sleep <token>` in the background; its job id.
    async fn sleep(&self, token: &str) -> String {
        let r = self
            .call("run", json!({"argv": ["sleep", token], "background": true}))
            .await;
        assert!(!r.is_error, "{}\n{}", r.text, self.stderr());
        job_id(&r.text)
    }

    /// Close stdin (the session's end) and wait until the process exits.
    pub(super) async fn close(&mut self) -> std::process::ExitStatus {
        if let Some(c) = self.client.take() {
            let _ = c.cancel().await;
        }
        match tokio::time::timeout(Duration::from_secs(15), self.child.wait()).await {
            Ok(s) => s.expect("wait"),
            Err(_) => panic!("berth mcp did not exit; stderr:\n{}", self.stderr()),
        }
    }

    /// Close stdin without waiting for the process.
    async fn close_input(&mut self) {
        if let Some(c) = self.client.take() {
            let _ = c.cancel().await;
        }
    }

    pub(super) fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

/// The first `job-N` in an answer.
pub(super) fn job_id(text: &str) -> String {
    let at = text
        .find("job-")
        .unwrap_or_else(|| panic!("no job id in: {text}"));
    text[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect()
}

/// A `berth` CLI command on the shared instance.
pub(super) fn cli(dir: &Path, instance: &str, args: &[&str]) -> (i32, String, String) {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_berth"));
    Mcp::apply_env(&mut cmd, dir, instance);
    let o = cmd
        .env("BERTH_RUNNER", "host")
        .current_dir(dir.join("ws"))
        .args(args)
        .output()
        .expect("run berth");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Every job the manager knows, by id (`berth ps --all --json`).
fn jobs(dir: &Path, instance: &str) -> std::collections::HashMap<String, Value> {
    let (code, out, err) = cli(dir, instance, &["ps", "--all", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        !err.contains("reading its store"),
        "ps must reach the manager: {err}"
    );
    let list: Vec<Value> = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    list.into_iter()
        .map(|j| (j["id"].as_str().unwrap().to_string(), j))
        .collect()
}

fn status(dir: &Path, instance: &str, id: &str) -> Value {
    jobs(dir, instance)
        .remove(id)
        .unwrap_or_else(|| panic!("{id} not listed"))
}

/// Wait until `id` ended because its session ended, and its process is gone.
async fn ended_with_session(dir: &Path, instance: &str, id: &str, token: &str) {
    eventually(Duration::from_secs(10), "the session's job stopped", || {
        processes_with(token).is_empty()
    })
    .await;
    eventually(
        Duration::from_secs(5),
        "the session's job recorded as ended",
        || status(dir, instance, id)["status"]["state"] != "running",
    )
    .await;
    let j = status(dir, instance, id);
    assert_eq!(j["ended_by"], "system", "{j}");
    assert_eq!(j["reason"], "session ended", "{j}");
}

fn running(dir: &Path, instance: &str, id: &str, token: &str) {
    assert_eq!(status(dir, instance, id)["status"]["state"], "running", "{id}");
    assert_eq!(processes_with(token).len(), 1, "{id}'s process");
}

/// Start a background `sleep` through the CLI; its id.
fn cli_sleep(dir: &Path, instance: &str, token: &str) -> String {
    let (code, out, err) = cli(dir, instance, &["run", "-d", "-q", "--", "sleep", token]);
    assert_eq!(code, 0, "{err}");
    out.trim().to_string()
}

/// A 4th start from any client is refused, naming the 3 running jobs.
async fn the_cap_is_shared(dir: &Path, instance: &str, a: &Session, b: &Session, ids: &[&str]) {
    let extra = unique_sleep();
    for s in [a, b] {
        let r = s
            .call("run", json!({"argv": ["sleep", extra], "background": true}))
            .await;
        assert!(r.is_error, "a 4th job started: {}", r.text);
        assert!(r.text.contains("cap_reached"), "{}", r.text);
        for id in ids {
            assert!(r.text.contains(id), "{id} not named: {}", r.text);
        }
    }
    let (code, _, err) = cli(dir, instance, &["run", "-d", "--", "sleep", &extra]);
    assert_ne!(code, 0, "the CLI started a 4th job");
    for id in ids {
        assert!(err.contains(id), "{id} not named: {err}");
    }
    assert!(processes_with(&extra).is_empty());
}

#[tokio::test]
async fn two_sessions_and_the_cli_share_a_daemon_and_its_cap() {
    let d = Daemon::start();
    let (dir, inst) = (d.dir.path(), d.instance.as_str());
    let mut a = Session::open(dir, inst, "a").await;
    let mut b = Session::open(dir, inst, "b").await;
    let (ta, tb, tc) = (unique_sleep(), unique_sleep(), unique_sleep());
    let ja = a.sleep(&ta).await;
    let jb = b.sleep(&tb).await;
    let jc = cli_sleep(dir, inst, &tc);
    the_cap_is_shared(dir, inst, &a, &b, &[&ja, &jb, &jc]).await;

    // Each session's jobs carry its owner and the client's cwd; the CLI's have no owner.
    let all = jobs(dir, inst);
    let owner = |id: &str| all[id]["spec"]["owner"].as_str().map(String::from);
    let (oa, ob) = (owner(&ja).expect("owner"), owner(&jb).expect("owner"));
    assert!(
        oa.starts_with("mcp:") && ob.starts_with("mcp:") && oa != ob,
        "{oa} {ob}"
    );
    assert_eq!(owner(&jc), None);
    let ws = std::fs::canonicalize(dir.join("ws")).unwrap();
    assert_eq!(all[&ja]["spec"]["caller_cwd"], json!(ws));
    // Every session lists every client's jobs.
    let listed = b.call("list", json!({})).await.text;
    assert!(
        listed.contains(&ja) && listed.contains(&jb) && listed.contains(&jc),
        "{listed}"
    );

    // Closing one session stops only its jobs.
    let status_a = a.close().await;
    assert!(status_a.success(), "{status_a:?}");
    ended_with_session(dir, inst, &ja, &ta).await;
    running(dir, inst, &jb, &tb);
    running(dir, inst, &jc, &tc);
    assert!(d.answers(), "the daemon outlives its sessions");

    // SIGTERM to a client drops its connection: the same end.
    let pid = b.child.id().expect("running");
    std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    let status_b = tokio::time::timeout(Duration::from_secs(10), b.child.wait())
        .await
        .expect("berth mcp exits on SIGTERM")
        .unwrap();
    assert!(status_b.success(), "{status_b:?}\n{}", b.stderr());
    ended_with_session(dir, inst, &jb, &tb).await;
    running(dir, inst, &jc, &tc);
    let (code, _, err) = cli(dir, inst, &["kill", &jc]);
    assert_eq!(code, 0, "{err}");
}

#[tokio::test]
async fn the_first_mcp_hosts_the_instance_for_the_others() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("ws")).unwrap();
    let inst = crate::common::instance_name("host");
    let mut host = Session::open(dir, &inst, "host").await;
    let mut b = Session::open(dir, &inst, "b").await;
    let (th, tb, tc) = (unique_sleep(), unique_sleep(), unique_sleep());
    let jh = host.sleep(&th).await;
    let jb = b.sleep(&tb).await;
    let jc = cli_sleep(dir, &inst, &tc);
    the_cap_is_shared(dir, &inst, &host, &b, &[&jh, &jb, &jc]).await;

    // The attached session's end stops only its jobs; the host serves on.
    b.close().await;
    ended_with_session(dir, &inst, &jb, &tb).await;
    running(dir, &inst, &jh, &th);
    running(dir, &inst, &jc, &tc);

    // The host's own stdin ends while a session is attached: its jobs stop,
    // it keeps serving the attached session (and the CLI).
    let mut b2 = Session::open(dir, &inst, "b2").await;
    let tb2 = unique_sleep();
    let jb2 = b2.sleep(&tb2).await;
    host.close_input().await;
    ended_with_session(dir, &inst, &jh, &th).await;
    assert!(
        host.child.try_wait().unwrap().is_none(),
        "the host left with a session attached"
    );
    running(dir, &inst, &jb2, &tb2);
    running(dir, &inst, &jc, &tc);
    let listed = b2.call("list", json!({"filter": "all"})).await.text;
    assert!(listed.contains(&jh) && listed.contains(&jc), "{listed}");

    // The last session's end lets the host tear down: every job stopped.
    b2.close().await;
    let status = tokio::time::timeout(Duration::from_secs(15), host.child.wait())
        .await
        .unwrap_or_else(|_| panic!("the host did not exit:\n{}", host.stderr()))
        .unwrap();
    assert!(status.success(), "{status:?}\n{}", host.stderr());
    assert!(processes_with(&tb2).is_empty() && processes_with(&tc).is_empty());
    let (_, out, _) = cli(dir, &inst, &["ps", "--all", "--json"]);
    let all: Vec<Value> = serde_json::from_str(&out).unwrap();
    let reason = |id: &str| all.iter().find(|j| j["id"] == id).map(|j| j["reason"].clone());
    assert_eq!(reason(&jb2), Some(json!("session ended")));
    assert_eq!(reason(&jc), Some(json!("shutdown")));
}

/// Send a raw HTTP/1.1 request on the daemon's socket; the answer's head and body.
fn raw(d: &Daemon, head: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(d.socket()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

#[tokio::test]
async fn a_session_request_without_the_upgrade_or_with_a_relative_cwd_is_refused() {
    let d = Daemon::start();
    let plain = raw(
        &d,
        "POST /v1/mcp HTTP/1.1\r\nHost: berth\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    assert!(plain.starts_with("HTTP/1.1 400"), "{plain}");
    assert!(plain.contains("Upgrade: berth-mcp"), "{plain}");
    let relative = raw(
        &d,
        "POST /v1/mcp?cwd=sub HTTP/1.1\r\nHost: berth\r\nConnection: Upgrade, close\r\nUpgrade: berth-mcp\r\nContent-Length: 0\r\n\r\n",
    );
    assert!(relative.starts_with("HTTP/1.1 400"), "{relative}");
    assert!(relative.contains("absolute path"), "{relative}");
    // Nothing changed: the daemon answers and holds no job.
    assert!(d.answers());
    assert_eq!(d.json(&["ps", "--all"]), json!([]));
}

#[tokio::test]
async fn a_sessions_jobs_run_where_its_client_is() {
    let d = Daemon::start();
    let dir = d.dir.path();
    let sub = dir.join("ws/sub");
    std::fs::create_dir_all(&sub).unwrap();
    let mut s = Session::open_in(dir, &d.instance, "sub", &sub).await;
    let r = s.call("run", json!({"command": "pwd"})).await;
    assert!(!r.is_error, "{}", r.text);
    let sub = std::fs::canonicalize(&sub).unwrap();
    assert!(r.text.contains(&sub.display().to_string()), "{}", r.text);
    s.close().await;
}

#[tokio::test]
async fn berth_down_stops_the_sessions_jobs_and_closes_them() {
    let mut d = Daemon::start();
    let dir = d.dir.path().to_path_buf();
    let mut s = Session::open(&dir, &d.instance, "down").await;
    let token = unique_sleep();
    let id = s.sleep(&token).await;
    let (code, _, err) = cli(&dir, &d.instance, &["down"]);
    assert_eq!(code, 0, "{err}");
    // The client sees its session closed and exits, without its stdin ending.
    let status = tokio::time::timeout(Duration::from_secs(15), s.child.wait())
        .await
        .unwrap_or_else(|_| panic!("berth mcp stayed after berth down:\n{}", s.stderr()))
        .unwrap();
    assert!(status.success(), "{status:?}");
    assert!(processes_with(&token).is_empty());
    assert!(d.wait_exit(Duration::from_secs(10)).is_some(), "daemon exits");
    let (_, out, _) = cli(&dir, &d.instance, &["ps", "--all", "--json"]);
    let all: Vec<Value> = serde_json::from_str(&out).unwrap();
    let j = all.iter().find(|j| j["id"] == id.as_str()).expect("listed");
    assert_eq!(j["reason"], "shutdown", "{j}");
}

/// Two agents on one instance never read each other's events unless one
/// asks (`events` with `all: true`): a watch hit of session A's build is
/// in A's answers only.
#[tokio::test]
async fn a_session_sees_its_own_jobs_events_only_unless_it_asks() {
    let d = Daemon::start();
    let (dir, inst) = (d.dir.path(), d.instance.as_str());
    let a = Session::open(dir, inst, "a").await;
    let b = Session::open(dir, inst, "b").await;
    let token = unique_sleep();
    let started = a
        .call(
            "run",
            json!({"command": format!("echo SECRET-BUILD-HIT; exec sleep {token}"), "background": true,
                   "watch": ["SECRET-BUILD-HIT"]}),
        )
        .await;
    assert!(!started.is_error, "{}", started.text);
    let id = job_id(&started.text);
    eventually(Duration::from_secs(10), "the watched line", || {
        cli(dir, inst, &["logs", &id]).1.contains("SECRET-BUILD-HIT")
    })
    .await;
    let seen_by_b = b.call("list", json!({})).await.text;
    assert!(!seen_by_b.contains("watch /SECRET-BUILD-HIT/"), "{seen_by_b}");
    let listed_by_b = b.call("events", json!({"since": 1})).await.text;
    assert!(!listed_by_b.contains("SECRET-BUILD-HIT"), "{listed_by_b}");
    // A is told once: in its `run` answer when the line came first, else in the next.
    let seen_by_a = started.text.clone() + &a.call("list", json!({})).await.text;
    assert!(
        seen_by_a.contains("watch /SECRET-BUILD-HIT/ matched"),
        "{seen_by_a}"
    );
    // Asked for, every job's events are B's too.
    let asked = b.call("events", json!({"since": 1, "all": true})).await.text;
    assert!(asked.contains("watch /SECRET-BUILD-HIT/ matched"), "{asked}");
    let _ = cli(dir, inst, &["kill", &id]);
}

/// An agent acts only on the jobs its session started and reads only its
/// own project's: another project's session is refused `not_yours` for
/// every verb (and does not see the job listed), a second session of the
/// same project may read but not act, and the user (the CLI) acts on all.
#[tokio::test]
async fn sessions_are_apart_per_verb() {
    let d = Daemon::start();
    let (dir, inst) = (d.dir.path(), d.instance.as_str());
    let mut a = Session::open(dir, inst, "a").await;
    let mut same = Session::open(dir, inst, "same").await;
    let mut other = Session::open_project(dir, inst, "other", &dir.join("other")).await;
    let (ta, tb) = (unique_sleep(), unique_sleep());
    let ja = a.sleep(&ta).await;
    let jb = other.sleep(&tb).await;

    for (tool, args) in [
        ("kill", json!({"id": ja})),
        ("copy_out", json!({"id": ja, "path": "."})),
        ("background", json!({"id": ja})),
        ("resume", json!({"id": ja})),
        ("status", json!({"id": ja})),
        ("logs", json!({"id": ja})),
        ("wait", json!({"id": ja, "timeout": 1})),
    ] {
        let r = other.call(tool, args).await;
        assert!(r.is_error && r.text.contains("not_yours"), "{tool}: {}", r.text);
        assert!(r.text.contains("agent_all_jobs"), "names the rule: {}", r.text);
    }
    let listed = other.call("list", json!({})).await.text;
    assert!(listed.contains(&jb) && !listed.contains(&ja), "{listed}");
    // `events` with `all: true` reaches its project's jobs, not another's.
    let events = other.call("events", json!({"since": 1, "all": true})).await.text;
    assert!(events.contains(&jb) && !events.contains(&ja), "{events}");
    let events = same.call("events", json!({"since": 1, "all": true})).await.text;
    assert!(events.contains(&ja) && !events.contains(&jb), "{events}");

    // Its own project: reads, but acts only on its own.
    let r = same.call("status", json!({"id": ja})).await;
    assert!(!r.is_error, "{}", r.text);
    let r = same.call("kill", json!({"id": ja})).await;
    assert!(r.is_error && r.text.contains("not_yours"), "{}", r.text);
    running(dir, inst, &ja, &ta);

    // The user acts on every job.
    let (code, _, err) = cli(dir, inst, &["kill", &jb]);
    assert_eq!(code, 0, "{err}");
    let r = a.call("kill", json!({"id": ja})).await;
    assert!(!r.is_error, "{}", r.text);
    for s in [&mut a, &mut same, &mut other] {
        s.close().await;
    }
}
