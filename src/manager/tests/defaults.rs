//! Defaults applied once, by the manager (`admit.rs`): a spec that leaves
//! its runner or foreground budget unset gets its caller's project's, an
//! explicit "no budget" gets none, and bad input is refused before anything
//! is made for the job.

use std::path::Path;
use std::time::Duration;

use super::{bench, job};
use crate::error::Error;
use crate::manager::{DefaultBudget, Foreground, ListFilter};
use crate::model::{JobSpec, JobStatus, Network, RunnerChoice, RunnerKind, StartMode};

/// A foreground spec that says nothing but its command, started from
/// `caller` (whose berth.toml applies; the caller's own config is
/// `caller/user.toml`, see [`project`]).
fn bare(program: &str, caller: &Path) -> JobSpec {
    let mut spec = JobSpec::argv([program]);
    spec.caller_cwd = Some(caller.to_path_buf());
    let user = caller.join("user.toml").display().to_string();
    spec.caller_env.insert(crate::trust::USER_CONFIG_ENV.into(), user);
    spec
}

/// A project directory whose berth.toml is `toml`, trusted by the user
/// (`user.toml` beside it is the user's config: `berth trust` was run).
fn project(toml: &str) -> tempfile::TempDir {
    let dir = untrusted_project(toml);
    let file = dir.path().join("berth.toml").canonicalize().unwrap();
    let digest = crate::trust::digest(toml.as_bytes());
    crate::trust::record(&dir.path().join("user.toml"), &file, Some(&digest)).unwrap();
    dir
}

/// A project directory whose berth.toml is `toml`, not trusted.
fn untrusted_project(toml: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("berth.toml"), toml).unwrap();
    dir
}

/// A job wrote the project's berth.toml to get a host job next time: the
/// next start is refused naming the key and `berth trust`, nothing is made,
/// the refusal is in the security log; once the user trusts the file the
/// same start runs on the host.
#[tokio::test(start_paused = true)]
async fn a_berth_toml_that_loosens_is_refused_until_the_user_trusts_it() {
    let b = bench(2);
    let m = &b.manager;
    let proj = untrusted_project("runner = \"host\"\n[safety]\ndefault_blocklist = false\n");
    let err = m.start(bare("compile", proj.path())).await.unwrap_err();
    assert!(matches!(err, Error::Untrusted { key: "runner", .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("berth trust") && !text.contains('\n'), "{text}");
    assert_eq!(
        (err.code(), err.exit_code(), err.http_status()),
        ("untrusted_config", 126, 403)
    );
    assert!(
        m.list(ListFilter::All).is_empty(),
        "no record for a refused start"
    );
    let log = std::fs::read_to_string(m.config().instance_dir().join("security.log")).unwrap();
    assert!(
        log.contains("untrusted_config") && log.contains("config:runner"),
        "{log}"
    );

    let toml = std::fs::read_to_string(proj.path().join("berth.toml")).unwrap();
    let file = proj.path().join("berth.toml").canonicalize().unwrap();
    let user = proj.path().join("user.toml");
    crate::trust::record(&user, &file, Some(&crate::trust::digest(toml.as_bytes()))).unwrap();
    let handle = m.start(bare("compile", proj.path())).await.unwrap();
    assert_eq!(handle.info().unwrap().runner, Some(RunnerKind::Host));
    b.fake.next_launch().await.exit(0);
    handle.wait_end().await.unwrap();
}

/// An agent cannot ask for a host job through MCP unless the user allows
/// host jobs; a user's own CLI can.
#[tokio::test(start_paused = true)]
async fn an_agent_cannot_ask_for_a_host_job_the_user_did_not_allow() {
    let b = bench(2);
    let m = &b.manager;
    let proj = untrusted_project("timeout = 5\n");
    let mut spec = bare("compile", proj.path());
    spec.runner = RunnerChoice::Host;
    let err = m.start_from(spec.clone(), "mcp").await.unwrap_err();
    assert!(
        matches!(err, Error::AgentLoosening { key: "runner", .. }),
        "{err:?}"
    );
    let handle = m.start_from(spec, "cli").await.unwrap();
    assert_eq!(handle.info().unwrap().runner, Some(RunnerKind::Host));
    b.fake.next_launch().await.exit(0);
    handle.wait_end().await.unwrap();
}

/// A scoped engine is an agent's request like a host job: refused through
/// MCP unless the user allows it (`allow_engine`), logged; and it is for
/// container jobs only, whoever asks.
#[tokio::test(start_paused = true)]
async fn an_agent_cannot_ask_for_a_scoped_engine_the_user_did_not_allow() {
    let b = bench(2);
    let m = &b.manager;
    let proj = untrusted_project("timeout = 5\n");
    let mut spec = bare("pytest", proj.path());
    spec.engine = Some(crate::model::EngineAccess::Scoped);
    let err = m.start_from(spec.clone(), "mcp").await.unwrap_err();
    assert!(
        matches!(err, Error::AgentLoosening { key: "engine", .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("allow_engine = true"), "{err}");
    let log = std::fs::read_to_string(m.config().instance_dir().join("security.log")).unwrap();
    assert!(log.contains("mcp:engine"), "{log}");
    // Allowed by the user's own config, it is still no host job's.
    std::fs::write(
        proj.path().join("user.toml"),
        "allow_engine = true\nallow_host = true\n",
    )
    .unwrap();
    spec.runner = RunnerChoice::Host;
    let err = m.start_from(spec, "mcp").await.unwrap_err().to_string();
    assert!(err.contains("container jobs"), "{err}");
    assert!(
        m.list(ListFilter::All).is_empty(),
        "no record for a refused start"
    );
}

#[tokio::test(start_paused = true)]
async fn a_bare_foreground_spec_gets_its_callers_runner_and_budget_and_is_promoted_at_it() {
    let b = bench(2);
    let m = &b.manager;
    // The manager's own config says 60 s and `auto`; the caller's project says otherwise.
    assert_eq!(m.config().timeout_secs, 60.0);
    let proj = project("timeout = 7\nrunner = \"host\"\n");
    let began = tokio::time::Instant::now();
    let handle = m.start(bare("compile", proj.path())).await.unwrap();
    let info = handle.info().unwrap();
    // The record shows what applies (the TUI's ETA reads `spec.timeout`).
    assert_eq!(info.spec.timeout, Some(7.0));
    assert_eq!(info.spec.runner, RunnerChoice::Host);
    assert_eq!(info.runner, Some(RunnerKind::Host));
    assert!(info.spec.caller_env.is_empty());
    let job = b.fake.next_launch().await;

    let Foreground::Promoted { info } = m.await_foreground(&handle.id).await.unwrap() else {
        panic!("a job still running at its budget is promoted");
    };
    assert_eq!(began.elapsed(), Duration::from_secs(7));
    assert_eq!(
        info.promotion_reason.as_deref(),
        Some("auto background (7s budget exceeded)")
    );
    assert_eq!(info.status, JobStatus::Running);
    job.exit(0);
    assert_eq!(
        handle.wait_end().await.unwrap().status,
        JobStatus::Exited { code: 0 }
    );
}

#[tokio::test(start_paused = true)]
async fn what_the_caller_said_stays_and_background_jobs_get_no_budget() {
    let b = bench(3);
    let m = &b.manager;
    let proj = project("timeout = 7\nrunner = \"host\"\n");

    let asked = JobSpec {
        timeout: Some(2.5),
        ..bare("build", proj.path())
    };
    let asked = m.start(asked).await.unwrap().info().unwrap();
    assert_eq!(asked.spec.timeout, Some(2.5));

    let background = m.start(bare("serve", proj.path()).background()).await.unwrap();
    let background = background.info().unwrap();
    assert_eq!(background.spec.timeout, None);
    assert_eq!(background.spec.runner, RunnerChoice::Host);

    // Without a caller directory the manager's own config applies.
    let own = JobSpec {
        background: false,
        ..job("own").with_runner(RunnerChoice::Host)
    };
    let own = m.start(own).await.unwrap().info().unwrap();
    assert_eq!(own.spec.timeout, Some(m.config().timeout_secs));
}

#[tokio::test(start_paused = true)]
async fn an_explicit_no_budget_gets_none_and_the_job_runs_until_it_ends() {
    let b = bench(1);
    let m = &b.manager;
    let proj = project("timeout = 7\nrunner = \"host\"\n");
    let handle = m
        .start_with(bare("test", proj.path()), "cli", DefaultBudget::Unlimited)
        .await
        .unwrap();
    assert_eq!(handle.info().unwrap().spec.timeout, None);
    let job = b.fake.next_launch().await;

    // Far past any budget: still in the foreground, never promoted.
    tokio::time::sleep(Duration::from_secs(3600)).await;
    let info = handle.info().unwrap();
    assert_eq!(info.status, JobStatus::Running);
    assert_eq!(info.start_mode, StartMode::Foreground);
    job.exit(3);
    let Foreground::Finished { info } = m.await_foreground(&handle.id).await.unwrap() else {
        panic!("a job without a budget ends in the foreground");
    };
    assert_eq!(info.status, JobStatus::Exited { code: 3 });
    assert!(!super::kind_names(m, &handle.id).contains(&"promoted"));
}

#[tokio::test(start_paused = true)]
async fn bad_input_is_refused_with_its_error_and_leaves_nothing() {
    let b = bench(2);
    let m = &b.manager;
    let proj = project("runner = \"host\"\n");

    let negative = JobSpec {
        timeout: Some(-1.0),
        ..bare("x", proj.path())
    };
    let err = m.start(negative).await.unwrap_err();
    assert!(
        matches!(err, Error::InvalidValue { what: "timeout", .. }),
        "{err:?}"
    );
    assert_eq!(err.exit_code(), 2);

    // Checked with the runner its project gives it: the host cannot
    // enforce a container network.
    let network = JobSpec {
        network: Some(Network::None),
        ..bare("x", proj.path())
    };
    let err = m.start(network).await.unwrap_err();
    assert!(err.to_string().contains("host runner cannot enforce"), "{err}");

    let missing = JobSpec {
        cwd: Some("no/such/dir".into()),
        ..bare("x", proj.path())
    };
    assert!(matches!(
        m.start(missing).await.unwrap_err(),
        Error::BadCwd { .. }
    ));

    assert!(m.list(ListFilter::All).is_empty());
    assert!(m.events(0, 100).is_empty());
}
