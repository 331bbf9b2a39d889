//! Project images built from a Dockerfile on the real engine: berth.toml's
//! `[image] dockerfile` and devcontainer.json's `build.dockerfile`, built on
//! first use with `building` events, reused while the context is unchanged
//! (same image id, no events), rebuilt when it changes, a broken Dockerfile
//! as one clear error with nothing left behind, and the same through the
//! daemon's CLI (progress lines on stderr, `berth config`, `berth images
//! build project`). Each test removes the images it built, by repository.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use berth::{Error, EventKind, JobSpec, JobStatus, ListFilter, RunnerChoice};

use crate::common::{Daemon, instance_name};

mod confined;

/// A workspace whose directory name is unique (the tag is named after it),
/// and whose images are removed on drop.
struct Project {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    state: PathBuf,
    repo: String,
    /// The user's own config, where the project's files are trusted (a build
    /// runs the project's RUN steps: only from a file the user trusted).
    user: PathBuf,
}

/// Trust `file` (its current content) in the user config `user`.
fn trust(user: &Path, file: &Path) {
    let real = file.canonicalize().unwrap();
    let digest = berth::trust::digest(&std::fs::read(&real).unwrap());
    berth::trust::record(user, &real, Some(&digest)).unwrap();
}

impl Project {
    fn new() -> Project {
        let dir = tempfile::tempdir().unwrap();
        let name = instance_name("proj");
        let ws = dir.path().join(&name);
        crate::common::workspace_dir(&ws);
        Project {
            state: dir.path().join("state"),
            repo: format!("berth-project/{}", name.to_lowercase()),
            user: dir.path().join("user.toml"),
            ws,
            _dir: dir,
        }
    }

    /// Write a file of the project; config files are trusted as the user
    /// would after reading them (`berth trust`).
    fn write(&self, rel: &str, text: &str) {
        let path = self.ws.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        if rel.ends_with("berth.toml") || rel.ends_with("devcontainer.json") {
            trust(&self.user, &path);
        }
    }

    /// Trust the project's config files in another user config too (a daemon's).
    fn trust_in(&self, user: &Path) {
        for rel in ["berth.toml", ".devcontainer/devcontainer.json"] {
            if self.ws.join(rel).is_file() {
                trust(user, &self.ws.join(rel));
            }
        }
    }

    fn manager(&self) -> berth::Manager {
        let flags = berth::config::Layer {
            state_dir: Some(self.state.clone()),
            instance: Some(instance_name("pi")),
            ..Default::default()
        };
        let user = self.user.display().to_string();
        let env = |k: &str| match k {
            berth::trust::USER_CONFIG_ENV => Some(user.clone()),
            _ => std::env::var(k).ok(),
        };
        berth::Manager::new(berth::Config::load_with(&self.ws, flags, env).unwrap()).unwrap()
    }

    /// Tags of this project's images on the engine.
    fn images(&self) -> Vec<String> {
        let o = Command::new("docker")
            .args(["images", "--format", "{{.Repository}}:{{.Tag}}", &self.repo])
            .output()
            .expect("docker CLI");
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        for tag in self.images() {
            let _ = Command::new("docker").args(["rmi", "-f", &tag]).output();
        }
    }
}

fn image_id(tag: &str) -> String {
    let o = Command::new("docker")
        .args(["image", "inspect", "--format", "{{.Id}}", tag])
        .output()
        .expect("docker CLI");
    assert!(
        o.status.success(),
        "{tag}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// Run `cat` of `files` in the project image; (output, image tag, built?, building events).
async fn run_cat(m: &berth::Manager, files: &[&str]) -> (String, String, bool, usize) {
    let mut events = m.events_log().subscribe();
    let mut argv = vec!["cat"];
    argv.extend(files);
    let job = m
        .start(JobSpec::argv(argv).with_runner(RunnerChoice::Docker))
        .await
        .unwrap();
    let info = job.wait_end().await.unwrap();
    assert_eq!(info.status, JobStatus::Exited { code: 0 }, "{info:?}");
    let lines = m.logs(&job.id, &Default::default()).unwrap().lines;
    let out: Vec<String> = lines.into_iter().map(|l| l.text).collect();
    let mut building = 0;
    let mut done = false;
    while let Ok(e) = events.try_recv() {
        if let (true, EventKind::Building(b)) = (e.job == job.id, &e.kind) {
            building += 1;
            done |= b.done;
        }
    }
    let image = info.image.expect("a container job says its image");
    assert_eq!(image.build_ms.is_some(), done, "{image:?}");
    (out.join("\n"), image.name, image.build_ms.is_some(), building)
}

#[tokio::test]
async fn a_dockerfile_in_berth_toml_is_built_once_reused_and_rebuilt_on_change() {
    let p = Project::new();
    p.write(
        "berth.toml",
        "[image]\ndockerfile = \"docker/Dockerfile\"\ncontext = \".\"\nargs = { GREETING = \"hello\" }\n",
    );
    p.write(
        "docker/Dockerfile",
        "FROM berth/sandbox:latest\nARG GREETING\nCOPY marker.txt /marker.txt\nRUN echo \"$GREETING\" > /greeting\n",
    );
    p.write("marker.txt", "first\n");
    // Ignored files change nothing.
    p.write(".dockerignore", "*.log\n");
    let m = p.manager();

    let (out, tag, built, events) = run_cat(&m, &["/marker.txt", "/greeting"]).await;
    assert_eq!(out, "first\nhello");
    assert!(tag.starts_with(&format!("{}:", p.repo)), "{tag}");
    assert!(built && events > 0, "the first run builds, with building events");
    let id = image_id(&tag);

    p.write("build.log", "noise");
    let (out, again, built, events) = run_cat(&m, &["/marker.txt"]).await;
    assert_eq!(out, "first");
    assert_eq!(
        (again.as_str(), built, events),
        (tag.as_str(), false, 0),
        "reused, not rebuilt"
    );
    assert_eq!(image_id(&tag), id, "the same image");

    p.write("marker.txt", "second\n");
    let (out, changed, built, events) = run_cat(&m, &["/marker.txt"]).await;
    assert_eq!(out, "second");
    assert!(built && events > 0 && changed != tag, "{changed} after {tag}");
    assert_eq!(
        p.images(),
        vec![changed],
        "the older build of this workspace is removed"
    );
    m.shutdown().await;
}

#[tokio::test]
async fn a_broken_dockerfile_is_one_clear_error_and_leaves_nothing() {
    let p = Project::new();
    let token = instance_name("broken");
    p.write("berth.toml", "[image]\ndockerfile = \"Dockerfile\"\n");
    p.write(
        "Dockerfile",
        &format!("FROM berth/sandbox:latest\nRUN echo {token} && exit 3\n"),
    );
    let m = p.manager();
    let err = m
        .start(JobSpec::argv(["true"]).with_runner(RunnerChoice::Docker))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::ImageBuildFailed { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains(&p.ws.join("Dockerfile").display().to_string()),
        "{msg}"
    );
    assert!(msg.contains("non-zero code: 3"), "{msg}");
    assert!(
        !msg.contains("stream error"),
        "the engine's words, unwrapped: {msg}"
    );
    assert!(!msg.contains('\n'), "one line: {msg}");
    assert!(m.list(Default::default()).is_empty(), "no job record is left");
    assert!(p.images().is_empty(), "no tag is left: {:?}", p.images());
    let o = Command::new("docker")
        .args(["ps", "-a", "--no-trunc", "--format", "{{.Command}}"])
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&o.stdout).contains(&token),
        "no intermediate container is left"
    );

    // The CLI: the same one line, nonzero exit.
    let o = cli(&p.state, &p.ws)
        .args(["run", "--no-daemon", "--", "true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("berth: could not build the project image from") && last.contains("Dockerfile"),
        "{stderr}"
    );
    m.shutdown().await;
}

/// `berth` run from `ws` as a user would (the project found from there).
fn cli(state: &Path, ws: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_berth"));
    cmd.current_dir(ws)
        .env("BERTH_STATE_DIR", state)
        .env("BERTH_INSTANCE", instance_name("pc"))
        .env("BERTH_RUNNER", "docker")
        // The user's config beside the state dir (`Project::user`).
        .env("BERTH_USER_CONFIG", state.parent().unwrap().join("user.toml"))
        .env_remove("BERTH_WORKSPACE")
        .env_remove("BERTH_CONFIG")
        .env_remove("BERTH_LOG");
    cmd
}

#[tokio::test]
async fn a_devcontainer_build_through_the_daemon_shows_progress_and_is_reused() {
    let p = Project::new();
    p.write(
        ".devcontainer/devcontainer.json",
        "{\n  // JSONC, as editors write it\n  \"name\": \"t\",\n  \"build\": { \"dockerfile\": \"Dockerfile\", \"context\": \"..\" },\n}\n",
    );
    p.write(
        ".devcontainer/Dockerfile",
        "FROM berth/sandbox:latest\nCOPY marker.txt /marker.txt\n",
    );
    p.write("marker.txt", "from devcontainer\n");
    let d = Daemon::start();
    p.trust_in(&d.dir.path().join("user-config.toml"));
    let run = |args: &[&str]| {
        let mut cmd = d.cli();
        cmd.current_dir(&p.ws)
            .env_remove("BERTH_WORKSPACE")
            .env("BERTH_RUNNER", "docker");
        let o = cmd.args(args).output().expect("run berth");
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };

    let (code, out, err) = run(&["config"]);
    assert_eq!(code, 0, "{err}");
    let line = out
        .lines()
        .find(|l| l.starts_with("job image"))
        .unwrap_or_default();
    assert!(
        line.contains(&format!("{}:", p.repo))
            && line.contains("build.dockerfile in")
            && line.contains("hash"),
        "{out}"
    );

    // First run through the daemon: built, with plain progress lines on a non-terminal stderr.
    let (code, out, err) = run(&["run", "--", "cat", "/marker.txt"]);
    assert_eq!((code, out.as_str()), (0, "from devcontainer\n"), "{err}");
    assert!(
        err.lines()
            .any(|l| l.starts_with(&format!("building {}:", p.repo))),
        "progress on stderr: {err}"
    );
    assert!(err.contains(&format!("berth: built {}:", p.repo)), "{err}");
    let tags = p.images();
    assert_eq!(tags.len(), 1, "{tags:?}");

    // Second run (background): reused, so no build progress.
    let (code, out, err) = run(&["run", "-d", "-q", "--", "cat", "/marker.txt"]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("building"), "{err}");
    let id = out.trim();
    let (_, card, _) = run(&["status", id]);
    assert!(card.contains(&tags[0]), "the card names the image: {card}");

    // `berth images build project` finds it built.
    let (code, _, err) = run(&["images", "build", "project"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("reused") && err.contains(&tags[0]), "{err}");
    assert_eq!(p.images(), tags);
}

/// A job is `starting (building step N/M)` while its image builds, and a
/// kill then ends the job and the build: no tag, no build container left.
#[tokio::test]
async fn a_job_can_be_killed_while_its_image_builds() {
    let p = Project::new();
    let token = instance_name("slow");
    p.write("berth.toml", "[image]\ndockerfile = \"Dockerfile\"\n");
    p.write(
        "Dockerfile",
        &format!("FROM berth/sandbox:latest\nRUN echo {token} && sleep 60\n"),
    );
    let m = p.manager();
    let starter = m.clone();
    let start = tokio::spawn(async move {
        starter
            .start(JobSpec::argv(["true"]).with_runner(RunnerChoice::Docker))
            .await
    });
    let mut job = None;
    crate::common::eventually(
        Duration::from_secs(60),
        "the job shows as building step 2",
        || {
            job = m
                .list(ListFilter::Running)
                .into_iter()
                .find(|i| i.building.as_ref().is_some_and(|b| b.step == 2));
            job.is_some()
        },
    )
    .await;
    let job = job.unwrap();
    let status = berth::card::status_text(&job);
    assert!(status.starts_with("starting (building step 2/"), "{status}");
    let outcome = m.kill(&job.id, Default::default()).await.unwrap();
    assert_eq!(outcome.result, berth::manager::KillResult::Killed, "{outcome:?}");
    let started = tokio::time::timeout(Duration::from_secs(10), start)
        .await
        .expect("start returns once killed")
        .unwrap();
    assert_eq!(started.unwrap().id, job.id);
    assert!(matches!(
        m.info(&job.id).unwrap().status,
        JobStatus::Killed { .. }
    ));
    assert!(p.images().is_empty(), "{:?}", p.images());
    // The engine stops the build when its request closes, and removes its container.
    crate::common::eventually(Duration::from_secs(30), "no build container left", || {
        let o = Command::new("docker")
            .args(["ps", "-a", "--no-trunc", "--format", "{{.Command}}"])
            .output()
            .unwrap();
        !String::from_utf8_lossy(&o.stdout).contains(&token)
    })
    .await;
    m.shutdown().await;
}
