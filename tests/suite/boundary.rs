//! The container as a boundary, against the real engine: jobs run as the
//! caller (never root unless asked), so a setuid copy made in the workspace
//! grants nothing on the host (network isolation is `network.rs`); and two
//! managers that share an instance name but not a state dir never
//! touch each other's containers. Tests run as root here, so the ones about
//! "the caller" also run berth (or the job) as a non-root uid, where a wrong
//! answer would show.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use berth::runner::docker::{container_name, state_hash};
use berth::{Config, Event, EventKind, JobId, JobSpec, JobStatus, Manager};
use pretty_assertions::assert_eq;

use crate::common::{Daemon, berth, containers_of, instance_name, manager_with};

use crate::common::{SANDBOX as IMAGE, docker_inspect as inspect, in_sandbox as docker};
/// A uid/gid that exists nowhere on this machine: whatever it owns, nobody else does.
const JOB_USER: &str = "1234:1234";

/// The count of the job's `swept` event: the set-uid sweep runs just after
/// the end is recorded (`rx` subscribed before the job started).
async fn swept(rx: &mut tokio::sync::broadcast::Receiver<Event>, id: &JobId) -> u64 {
    let event = async {
        loop {
            let e = rx.recv().await.expect("the event log");
            if let (true, EventKind::Swept { cleared, .. }) = (e.job == *id, e.kind) {
                return cleared;
            }
        }
    };
    // A generous bound, only so that a sweep that never comes fails the test.
    tokio::time::timeout(Duration::from_secs(60), event)
        .await
        .expect("no swept event within 60 s of the end")
}

fn running(cid: &str) -> bool {
    inspect("container", cid).is_some_and(|c| c["State"]["Running"] == true)
}

/// Let a non-root uid into the temp dir (tempdirs are 0700) and write the workspace.
fn open_up(dir: &Path, ws: &Path) {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(ws, std::fs::Permissions::from_mode(0o777)).unwrap();
}

#[tokio::test]
async fn a_setuid_shell_made_in_a_container_is_the_callers_and_loses_its_bit_when_the_job_ends() {
    let t = manager_with(|mut c| {
        c.user = Some(JOB_USER.into());
        c
    });
    let ws = t.workspace();
    open_up(t.dir.path(), &ws);
    let mut events = t.manager.events_log().subscribe();
    let job = t
        .manager
        .start(docker(JobSpec::shell(
            "cp /bin/sh x && chmod 4755 x && ls -l x | cut -c1-10 && id -u && echo HOME=$HOME && touch $HOME/ok && echo home-writable",
        )))
        .await
        .unwrap();
    let ended = job.wait_end().await.unwrap();
    let out = job.output_lines().unwrap();
    assert_eq!(ended.status, JobStatus::Exited { code: 0 }, "{out:?}");
    // The end does not wait for the sweep; its event follows.
    assert_eq!(swept(&mut events, &job.id).await, 1);
    let info = job.info().unwrap();
    // Inside, the job did what it meant to: a setuid copy, owned by its user.
    assert_eq!(out, ["-rwsr-xr-x", "1234", "HOME=/home/berth", "home-writable"]);

    // On the host it is the job's user's, never root's, and once the job
    // ended the bit is gone: nobody can borrow uid 1234 through it.
    let x = ws.join("x");
    let meta = std::fs::metadata(&x).unwrap();
    assert_eq!(
        meta.mode() & 0o6000,
        0,
        "the set-uid bit was cleared when the job ended"
    );
    assert_eq!((meta.uid(), meta.gid()), (1234, 1234));
    assert_eq!(info.setid_cleared, Some(1));
    // The copy is a multi-call binary: run it under the name of its `id`.
    let id = ws.join("id");
    std::os::unix::fs::symlink(&x, &id).unwrap();
    let ran = Command::new("setpriv")
        .args(["--reuid=4321", "--regid=4321", "--clear-groups"])
        .arg(&id)
        .arg("-u")
        .output()
        .unwrap();
    let euid = String::from_utf8_lossy(&ran.stdout).trim().to_string();
    assert!(ran.status.success(), "{ran:?}");
    assert_eq!(euid, "4321", "the copy runs as whoever runs it");

    // The card says who the job ran as, with the default limits, and what was cleared.
    let card = berth::card::render(&info, "", false);
    assert!(
        card.contains("Sandbox: user 1234:1234 · cpus ")
            && card.contains("memory 2 GiB · pids 512 · network berth-")
            && card.contains("Cleared: set-uid/set-gid bits of 1 file"),
        "{card}"
    );
}

/// A root caller (these tests run as root) gets no root jobs: they run as
/// the workspace's owner, or as nobody when root owns the workspace too, so
/// a set-uid shell compiled in a 755 workspace is never root's; and even a
/// job the user let run as root (`user = "root"`, their own config) leaves
/// no usable set-uid file once it ended.
#[tokio::test]
async fn a_root_callers_job_runs_as_the_workspace_owner_and_leaves_no_setuid_file() {
    assert!(nix::unistd::getuid().is_root(), "this test plays a root caller");
    // The workspace owner's uid (tests/common gives workspaces one).
    let t = manager_with(|c| c);
    let ws = t.workspace();
    open_up(t.dir.path(), &ws);
    let script = "cp /bin/sh x && chmod 4755 x && chmod g+s x && id -u";
    let mut events = t.manager.events_log().subscribe();
    let job = t.manager.start(docker(JobSpec::shell(script))).await.unwrap();
    let info = job.wait_end().await.unwrap();
    let owner = crate::common::TEST_OWNER.to_string();
    assert_eq!(job.output_lines().unwrap(), [owner.as_str()]);
    assert_eq!(info.limits.user, Some(format!("{owner}:{owner}")));
    assert_eq!(swept(&mut events, &job.id).await, 1);
    assert_eq!(std::fs::metadata(ws.join("x")).unwrap().mode() & 0o6000, 0);
    assert_eq!(job.info().unwrap().setid_cleared, Some(1));

    // Root owns the workspace: nobody (65534), who cannot even write there.
    let t = manager_with(|c| c);
    let ws = t.workspace();
    nix::unistd::chown(&ws, Some(0.into()), Some(0.into())).unwrap();
    open_up(t.dir.path(), &ws);
    std::fs::set_permissions(&ws, std::fs::Permissions::from_mode(0o755)).unwrap();
    let job = t
        .manager
        // touch's complaint silenced: stderr may overtake stdout on the way in.
        .start(docker(JobSpec::shell(
            "id -u; touch made 2>/dev/null || echo refused",
        )))
        .await
        .unwrap();
    job.wait_end().await.unwrap();
    assert_eq!(
        job.output_lines().unwrap().first().map(String::as_str),
        Some("65534")
    );
    assert!(!ws.join("made").exists());

    // Root because the user said so: the set-uid root copy is cleared at the end.
    let t = manager_with(|mut c| {
        c.user = Some("root".into());
        c
    });
    let ws = t.workspace();
    // Root without capabilities writes only where anyone may.
    open_up(t.dir.path(), &ws);
    let mut events = t.manager.events_log().subscribe();
    let job = t.manager.start(docker(JobSpec::shell(script))).await.unwrap();
    job.wait_end().await.unwrap();
    assert_eq!(job.output_lines().unwrap(), ["0"]);
    assert_eq!(swept(&mut events, &job.id).await, 1);
    let info = job.info().unwrap();
    let meta = std::fs::metadata(ws.join("x")).unwrap();
    assert_eq!(
        (meta.uid(), meta.mode() & 0o6000),
        (0, 0),
        "root's copy lost its bits"
    );
    assert_eq!(info.setid_cleared, Some(1));
}

#[tokio::test]
async fn the_workspace_mount_is_private_and_a_root_job_says_so() {
    let t = manager_with(|mut c| {
        c.user = Some("root".into());
        c
    });
    let ws = t.workspace().canonicalize().unwrap();
    let job = t
        .manager
        .start(
            docker(JobSpec::shell(format!(
                "grep ' {} ' /proc/self/mountinfo; id -u; sleep 1000",
                ws.display()
            )))
            .background(),
        )
        .await
        .unwrap();
    crate::common::eventually(Duration::from_secs(20), "two output lines", || {
        job.output_lines().map(|l| l.len() >= 2).unwrap_or(false)
    })
    .await;
    let out = job.output_lines().unwrap();
    let info = job.info().unwrap();
    let c = inspect("container", info.container_id.as_deref().unwrap()).unwrap();
    // The workspace (beside it only the job's own read-only /etc files).
    let mount = c["Mounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["Destination"] == ws.display().to_string())
        .expect("the workspace is mounted");
    assert_eq!(mount["Propagation"], "private");
    // Private: no `shared:N` / `master:N` peer group on the mount inside.
    assert!(
        !out[0].contains("shared:") && !out[0].contains("master:"),
        "{}",
        out[0]
    );
    assert_eq!(c["Config"]["User"], "0:0");
    assert_eq!(out[1], "0");
    assert_eq!(info.limits.user.as_deref(), Some("root"));
    assert!(berth::card::render(&info, "", false).contains("Sandbox: user root"));
    job.kill().await.unwrap();
}

#[test]
fn berth_run_as_an_ordinary_user_runs_the_container_as_that_user() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let state = dir.path().join("state");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&state).unwrap();
    for p in [&ws, &state] {
        nix::unistd::chown(p, Some(1234.into()), Some(1234.into())).unwrap();
    }
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // The user is in the engine socket's group, as users of berth are.
    let docker_gid = std::fs::metadata("/var/run/docker.sock").unwrap().gid();
    // A copy the user can run wherever the build tree lives (it may be
    // under a directory only root can enter).
    let bin = dir.path().join("berth");
    std::fs::copy(berth(&state).get_program(), &bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let instance = instance_name("asuser");
    let out = Command::new("setpriv")
        .args(["--reuid=1234", "--regid=1234", &format!("--groups={docker_gid}")])
        .arg(&bin)
        .args([
            "run",
            "--runner",
            "docker",
            "--",
            "sh",
            "-c",
            "id -u; id -g; touch made-by-job",
        ])
        .env("BERTH_STATE_DIR", &state)
        .env("BERTH_INSTANCE", &instance)
        .env("BERTH_WORKSPACE", &ws)
        .env("HOME", &state)
        .env_remove("BERTH_CONFIG")
        .current_dir(&ws)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines.starts_with(&["1234", "1234"]), "{stdout}");
    let made = std::fs::metadata(ws.join("made-by-job")).unwrap();
    assert_eq!(
        (made.uid(), made.gid()),
        (1234, 1234),
        "files a job makes are the caller's"
    );
    // The run went through a manager started on demand as that user; its
    // `down` ends it, and nothing of the instance is left on the engine.
    let down = Command::new("setpriv")
        .args(["--reuid=1234", "--regid=1234", &format!("--groups={docker_gid}")])
        .arg(&bin)
        .arg("down")
        .env("BERTH_STATE_DIR", &state)
        .env("BERTH_INSTANCE", &instance)
        .env("HOME", &state)
        .current_dir(&ws)
        .output()
        .unwrap();
    assert!(down.status.success(), "{down:?}");
    assert_eq!(containers_of(&instance), 0);
}

#[tokio::test]
async fn two_managers_with_one_instance_name_keep_to_their_own_jobs() {
    let instance = instance_name("twin");
    let make = || {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let config = Config::isolated(dir.path().join("state"), &instance)
            .with_workspace(&ws)
            .with_grace_secs(1.0);
        (Manager::new(config).unwrap(), dir)
    };
    let (a, _da) = make();
    let (b, _db) = make();
    let ja = a
        .start(docker(JobSpec::argv(["sleep", "1000"])).background())
        .await
        .unwrap();
    // Same instance, same job id: once this removed A's container by name.
    let jb = b
        .start(docker(JobSpec::argv(["sleep", "1000"])).background())
        .await
        .unwrap();
    assert_eq!(ja.id, jb.id);
    let ca = ja.info().unwrap().container_id.unwrap();
    let cb = jb.info().unwrap().container_id.unwrap();
    assert_ne!(ca, cb);
    assert!(running(&ca) && running(&cb));

    // B's crash clean-up (same process, so the same owner label as A) and
    // B's labelled sweep leave A's job alone.
    let owner = berth::procinfo::owner_label();
    let cleaned = berth::watchdog::cleanup(b.config(), &owner).await.unwrap();
    assert!(cleaned.starts_with("removed 1 container(s)"), "{cleaned}");
    let engine_b = berth::runner::docker::Engine::new(b.config());
    assert_eq!(engine_b.remove_labelled(&instance).await, 0);
    assert!(running(&ca), "A's job survives B's clean-up");
    assert!(ja.info().unwrap().status.is_active());

    // A container that merely carries A's next name is not A's: never removed.
    let next = container_name(
        &instance,
        &state_hash(&a.config().state_dir),
        &JobId::from_number(2),
    );
    let made = Command::new("docker")
        .args([
            "create",
            "--name",
            &next,
            "--label",
            &format!("berth.instance={instance}"),
            IMAGE,
            "true",
        ])
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    // A job could guess the next name and squat it: the job still starts,
    // under another name, and the squatter is left alone.
    let h = a.start(docker(JobSpec::argv(["true"]))).await.unwrap();
    let info = h.wait_end().await.unwrap();
    let still_there = inspect("container", &next).is_some();
    let _ = Command::new("docker").args(["rm", "-f", &next]).output();
    assert_eq!(info.status, JobStatus::Exited { code: 0 }, "{info:?}");
    assert!(still_there, "a container berth does not own is never removed");

    a.shutdown().await;
    b.shutdown().await;
    assert_eq!(containers_of(&instance), 0);
}

/// Another user pointed at a manager's socket hears that it is someone
/// else's (permission denied), not that no manager runs.
#[test]
fn another_users_ps_says_permission_denied() {
    let d = Daemon::start();
    let socket = d.socket();
    let out = Command::new("setpriv")
        .args(["--reuid=1234", "--regid=1234", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_berth"))
        .arg("ps")
        .env("BERTH_SOCKET", &socket)
        .env("BERTH_INSTANCE", &d.instance)
        .env("BERTH_STATE_DIR", "/tmp")
        .env("HOME", "/tmp")
        .current_dir("/tmp")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        err.contains("permission denied") && !err.contains("no berth manager"),
        "{err}"
    );
}
