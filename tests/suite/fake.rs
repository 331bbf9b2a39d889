//! The faces over a scripted runner with no engine reachable: the socket
//! API served in-process and an MCP session served on an in-memory pipe,
//! both driving a manager whose jobs run on `berth::runner::fake` (feature
//! `test-util`). This is how code built on berth tests its own use of the
//! daemon and of MCP without Docker.
//!
//! Each test runs itself again in a child process of this binary with
//! `DOCKER_HOST` pointing at a socket that does not exist (the engine
//! endpoint is read once per process, so a child is the honest way to have
//! none), plays its scenario there, and the parent checks that exactly that
//! test ran and passed in the child.

use std::time::Duration;

use berth::api::WaitRequest;
use berth::api::client::Client;
use berth::mcp::ToolSet;
use berth::mcp::session::{Session, Sessions, serve};
use berth::runner::fake::FakeRunner;
use berth::{EndedBy, JobSpec, JobStatus, KillRequest, LogQuery, ReadyCondition, Stream};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

use crate::common;

/// An engine endpoint where nothing listens.
const NO_ENGINE: &str = "unix:///nonexistent/berth-no-engine.sock";

/// True in the child that sees no engine (then the test plays its
/// scenario); else run test `name` of this binary in such a child, check
/// that it ran there and passed, and return false.
async fn in_child_without_engine(name: &str) -> bool {
    if std::env::var("DOCKER_HOST").as_deref() == Ok(NO_ENGINE) {
        return true;
    }
    let out = tokio::process::Command::new(std::env::current_exe().expect("own test binary"))
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env("DOCKER_HOST", NO_ENGINE)
        .env_remove("DOCKER_CONTEXT")
        .env_remove("DOCKER_TLS_VERIFY")
        .output()
        .await
        .expect("run the test binary");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("test result: ok. 1 passed"),
        "{name} in a child with no engine: {}\n{stdout}\n{stderr}",
        out.status
    );
    false
}

/// The child's own check that it runs with no engine to reach.
fn assert_no_engine() {
    assert_eq!(std::env::var("DOCKER_HOST").as_deref(), Ok(NO_ENGINE));
    assert!(std::os::unix::net::UnixStream::connect("/nonexistent/berth-no-engine.sock").is_err());
}

#[tokio::test]
async fn socket_api_runs_jobs_on_the_fake_runner_with_no_engine() {
    if !in_child_without_engine("suite::fake::socket_api_runs_jobs_on_the_fake_runner_with_no_engine").await {
        return;
    }
    assert_no_engine();
    let t = common::manager();
    let fake = FakeRunner::new();
    assert!(t.manager.use_fake_runner(fake.clone()));
    let bound = berth::daemon::bind(&t.manager).expect("bind the instance socket");
    let stop = tokio_util::sync::CancellationToken::new();
    let server = tokio::spawn(bound.serve(stop.clone()));

    let client = Client::connect(t.manager.config()).await.expect("connect");
    let view = client
        .create(&JobSpec::argv(["web"]).background())
        .await
        .expect("create");
    let id = view.info.id.clone();
    let job = fake.next_launch().await;
    assert_eq!(job.id(), &id);
    job.emit(Stream::Stdout, "listening on 8000");
    let ready = WaitRequest {
        conditions: vec![ReadyCondition::log("listening")],
        timeout: Some(10.0),
    };
    let outcome = client.wait(&id, &ready).await.expect("wait");
    assert!(outcome.is_ready(), "{outcome:?}");
    let page = client.logs(&id, &LogQuery::default()).await.expect("logs");
    assert!(
        page.lines.iter().any(|l| l.text == "listening on 8000"),
        "{page:?}"
    );

    let kill = KillRequest {
        ended_by: Some(EndedBy::User),
        reason: Some("done".into()),
        ..Default::default()
    };
    client.kill(&id, &kill).await.expect("kill");
    assert!(job.ended());
    let info = client.info(&id).await.expect("info").info;
    assert!(
        matches!(
            info.status,
            JobStatus::Killed {
                ended_by: EndedBy::User,
                ..
            }
        ),
        "{:?}",
        info.status
    );

    stop.cancel();
    server.await.expect("server task").expect("serve");
}

/// Call `name` on an MCP client; the answer's text and whether it is an error.
async fn call(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    name: &str,
    args: Value,
) -> (String, bool) {
    let params = CallToolRequestParams::new(name.to_string())
        .with_arguments(args.as_object().cloned().expect("arguments are an object"));
    let result = client.call_tool(params).await.expect("tools/call");
    let text = crate::suite::mcp::text_of(&result);
    (text, result.is_error == Some(true))
}

#[tokio::test]
async fn mcp_session_runs_jobs_on_the_fake_runner_with_no_engine() {
    if !in_child_without_engine("suite::fake::mcp_session_runs_jobs_on_the_fake_runner_with_no_engine").await
    {
        return;
    }
    assert_no_engine();
    let t = common::manager();
    let fake = FakeRunner::new();
    assert!(t.manager.use_fake_runner(fake.clone()));
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    let (server_read, server_write) = tokio::io::split(server_io);
    // The user who starts the session lets its jobs fall back to the host
    // runner (here the fake) with no engine; an agent never gets that alone.
    let env = [("BERTH_FALLBACK".to_string(), "true".to_string())].into();
    let session = Session::new(Some(t.workspace()), env);
    let served = tokio::spawn(serve(
        t.manager.clone(),
        ToolSet::Canonical,
        session,
        server_read,
        server_write,
        Sessions::default().closing(),
        None,
    ));
    let (client_read, client_write) = tokio::io::split(client_io);
    let client = ().serve((client_read, client_write)).await.expect("MCP initialize");

    let (text, is_error) = call(&client, "run", json!({"command": "web", "background": true})).await;
    assert!(!is_error, "{text}");
    let job = fake.next_launch().await;
    let id = job.id().to_string();
    assert!(text.contains(&id), "{text}");
    job.emit(Stream::Stdout, "ready to serve");
    let (text, is_error) = call(
        &client,
        "wait",
        json!({"id": id, "log": "ready to serve", "timeout": 10}),
    )
    .await;
    assert!(!is_error, "{text}");
    let (text, is_error) = call(&client, "kill", json!({"id": id, "reason": "done"})).await;
    assert!(!is_error, "{text}");
    assert!(
        text.contains("ready to serve"),
        "kill answers with the last lines: {text}"
    );
    assert!(job.ended());

    // The session's end stops nothing more and ends the serve task.
    client.cancel().await.expect("close the client");
    tokio::time::timeout(Duration::from_secs(30), served)
        .await
        .expect("the session ends with its input")
        .expect("session task");
    let jobs = t.manager.list(Default::default());
    assert!(jobs.iter().all(|j| j.status.is_terminal()), "{jobs:?}");
}
