//! Image pulls against a real registry (Debian's `docker-registry`, run by
//! the test on 127.0.0.1, which the engine allows over plain http), the pull
//! policy, failures that name the registry, a pull that can be stopped, and
//! the choice of image (a project's own, `berth/dev`) end to end.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use berth::images::PullPolicy;
use berth::{Error, EventKind, JobSpec, JobStatus, ListFilter, ReadyCondition, RunnerChoice};

use crate::common::{eventually, http_get, instance_name, manager, manager_with};

/// A registry server on 127.0.0.1:<free port> with its own storage; killed on drop.
struct Registry {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Registry {
    fn start() -> Registry {
        let bin = "/usr/bin/docker-registry";
        assert!(
            Path::new(bin).exists(),
            "{bin} is missing: apt-get install docker-registry (.ci/run installs it)"
        );
        let dir = tempfile::tempdir().unwrap();
        let port = portpicker::pick_unused_port().expect("a free port");
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n",
                dir.path().join("data").display()
            ),
        )
        .unwrap();
        let child = Command::new(bin)
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start docker-registry");
        let r = Registry {
            child,
            port,
            _dir: dir,
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "docker-registry did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        r
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn docker_cli(args: &[&str]) {
    let o = Command::new("docker").args(args).output().expect("docker CLI");
    assert!(
        o.status.success(),
        "docker {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Removes a local image tag on drop (the pulled copy of a test image).
struct LocalImage(String);
impl Drop for LocalImage {
    fn drop(&mut self) {
        let _ = Command::new("docker").args(["rmi", "-f", &self.0]).output();
    }
}

/// Build a small image with a unique 2 MB layer, push it to `registry` and
/// remove it locally, so a start has to pull that layer back.
fn pushed_image(registry: &Registry) -> LocalImage {
    pushed_image_of(registry, 2_000_000)
}

/// [`pushed_image`] with a layer of `size` bytes.
fn pushed_image_of(registry: &Registry, size: usize) -> LocalImage {
    let name = format!(
        "127.0.0.1:{}/berth-pull-test:{}",
        registry.port,
        instance_name("p")
    );
    let dir = tempfile::tempdir().unwrap();
    // Incompressible bytes (xorshift), so the layer really is ~2 MB on the wire.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15 ^ u64::from(registry.port);
    let blob: Vec<u8> = (0..size)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(dir.path().join("blob"), blob).unwrap();
    std::fs::write(dir.path().join("name"), &name).unwrap();
    std::fs::write(
        dir.path().join("Dockerfile"),
        "FROM berth/sandbox:latest\nCOPY blob name /data/\n",
    )
    .unwrap();
    docker_cli(&["build", "-q", "-t", &name, &dir.path().display().to_string()]);
    docker_cli(&["push", "-q", &name]);
    docker_cli(&["rmi", &name]);
    LocalImage(name)
}

fn docker_job(image: &str) -> JobSpec {
    JobSpec::argv(["cat", "/data/name"])
        .with_runner(RunnerChoice::Docker)
        .with_image(image)
}

#[tokio::test]
async fn a_missing_image_is_pulled_from_a_registry_with_progress_events() {
    let registry = Registry::start();
    let image = pushed_image(&registry);
    let t = manager();

    // pull = never: the same start fails, saying why and what to do.
    let mut never = docker_job(&image.0);
    never.pull = Some(PullPolicy::Never);
    let err = t.manager.start(never).await.unwrap_err();
    assert!(matches!(err, Error::ImageMissing { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains(&image.0) && msg.contains("never"), "{msg}");

    let job = t.manager.start(docker_job(&image.0)).await.unwrap();
    let info = job.wait_end().await.unwrap();
    assert_eq!(info.status, JobStatus::Exited { code: 0 }, "{info:?}");
    let chosen = info.image.clone().expect("the card says which image");
    assert_eq!(chosen.name, image.0);
    assert!(chosen.pull_ms.is_some(), "{chosen:?}");
    let pulls: Vec<_> = t
        .manager
        .events(0, 10_000)
        .into_iter()
        .filter(|e| e.job == job.id)
        .filter_map(|e| match e.kind {
            EventKind::Pulling(p) => Some(p),
            _ => None,
        })
        .collect();
    let last = pulls.last().expect("pulling events recorded");
    assert!(last.bytes_total >= 1_000_000, "{pulls:?}");
    assert_eq!(last.bytes_done, last.bytes_total, "{pulls:?}");
    assert!(last.done, "{pulls:?}");
    assert!(last.layers >= 1 && last.layers_done == last.layers, "{pulls:?}");
    let out = t.manager.logs(&job.id, &Default::default()).unwrap();
    assert!(out.lines.iter().any(|l| l.text == image.0), "{:?}", out.lines);
}

/// The manager remembers the images it saw (no look before each start);
/// one removed behind its back is made present again as the job's policy
/// says: `never` refuses in one line, `missing` pulls it back and runs.
#[tokio::test]
async fn an_image_removed_behind_berths_back_is_pulled_again_or_refused() {
    let registry = Registry::start();
    let image = pushed_image(&registry);
    let t = manager();
    let first = t.manager.start(docker_job(&image.0)).await.unwrap();
    let info = first.wait_end().await.unwrap();
    assert_eq!(info.status, JobStatus::Exited { code: 0 }, "{info:?}");
    // Forced: the first job's container may not be removed yet.
    docker_cli(&["rmi", "-f", &image.0]);

    let mut never = docker_job(&image.0);
    never.pull = Some(PullPolicy::Never);
    let refused = match t.manager.start(never).await {
        Err(e) => e.to_string(),
        Ok(job) => format!("{:?}", job.wait_end().await.unwrap()),
    };
    assert!(
        refused.contains(&image.0) && refused.contains("never") && !refused.contains("start again"),
        "{refused}"
    );

    let again = t.manager.start(docker_job(&image.0)).await.unwrap();
    let info = again.wait_end().await.unwrap();
    assert_eq!(info.status, JobStatus::Exited { code: 0 }, "{info:?}");
    let out = t.manager.logs(&again.id, &Default::default()).unwrap();
    assert!(out.lines.iter().any(|l| l.text == image.0), "{:?}", out.lines);
}

#[tokio::test]
async fn an_unreachable_registry_fails_naming_it() {
    let t = manager();
    // Nothing listens on a port just picked and released.
    let port = portpicker::pick_unused_port().unwrap();
    let image = format!("127.0.0.1:{port}/nothing:1");
    let err = t.manager.start(docker_job(&image)).await.unwrap_err();
    assert!(matches!(err, Error::PullFailed { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("from 127.0.0.1:{port}")) && msg.contains("reaches"),
        "{msg}"
    );
    assert!(!msg.contains("images build"), "{msg}");
    assert_eq!(t.manager.list(ListFilter::All), vec![]);
}

/// A "registry" that accepts connections and never answers: a pull hangs.
fn silent_registry() -> (TcpListener, u16) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let accept = l.try_clone().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        while let Ok((s, _)) = accept.accept() {
            held.push(s);
        }
    });
    (l, port)
}

#[tokio::test]
async fn a_job_is_starting_while_its_image_is_pulled_and_can_be_killed() {
    let (_listener, port) = silent_registry();
    let t = manager();
    let image = format!("127.0.0.1:{port}/hangs:1");
    let m = t.manager.clone();
    let start = tokio::spawn(async move { m.start(docker_job(&image)).await });
    let mut id = None;
    eventually(Duration::from_secs(20), "the job shows as starting", || {
        id = t.manager.list(ListFilter::Running).first().map(|i| i.id.clone());
        id.is_some()
    })
    .await;
    let id = id.unwrap();
    assert_eq!(t.manager.info(&id).unwrap().status, JobStatus::Starting);
    let outcome = t.manager.kill(&id, Default::default()).await.unwrap();
    assert_eq!(outcome.result, berth::manager::KillResult::Killed, "{outcome:?}");
    let started = tokio::time::timeout(Duration::from_secs(10), start)
        .await
        .expect("start returns once killed")
        .unwrap();
    assert_eq!(started.unwrap().id, id);
    assert!(matches!(
        t.manager.info(&id).unwrap().status,
        JobStatus::Killed { .. }
    ));
}

#[tokio::test]
async fn a_pull_longer_than_pull_timeout_fails_saying_so() {
    let (_listener, port) = silent_registry();
    let t = manager_with(|mut c| {
        c.pull_timeout_secs = 1.0;
        c
    });
    let image = format!("127.0.0.1:{port}/hangs:1");
    let err = t.manager.start(docker_job(&image)).await.unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::PullFailed { .. }), "{err:?}");
    assert!(
        msg.contains("pull_timeout") && msg.contains(&format!("127.0.0.1:{port}")),
        "{msg}"
    );
}

#[tokio::test]
async fn a_program_missing_in_the_image_is_said_plainly() {
    let t = manager();
    let job = t
        .manager
        .start(
            JobSpec::argv(["make", "test"])
                .with_runner(RunnerChoice::Docker)
                .with_image("berth/sandbox:latest"),
        )
        .await
        .unwrap();
    let info = job.wait_end().await.unwrap();
    assert_eq!(info.exit_code, Some(127), "{info:?}");
    let out = t.manager.logs(&job.id, &Default::default()).unwrap();
    let text: Vec<&str> = out.lines.iter().map(|l| l.text.as_str()).collect();
    assert!(
        text.iter()
            .any(|l| l.contains("`make` is not in image berth/sandbox:latest")),
        "{text:?}"
    );
    assert!(!text.iter().any(|l| l.contains("FATAL tini")), "{text:?}");
}

#[tokio::test]
async fn a_file_that_is_not_executable_is_said_plainly_in_a_container() {
    let t = manager();
    std::fs::write(t.workspace().join("run.sh"), "#!/bin/sh\necho hi\n").unwrap();
    let job = t
        .manager
        .start(
            JobSpec::argv(["./run.sh"])
                .with_runner(RunnerChoice::Docker)
                .with_image("berth/sandbox:latest"),
        )
        .await
        .unwrap();
    let info = job.wait_end().await.unwrap();
    assert_ne!(info.exit_code, Some(0), "{info:?}");
    let out = t.manager.logs(&job.id, &Default::default()).unwrap();
    let text: Vec<&str> = out.lines.iter().map(|l| l.text.as_str()).collect();
    assert_eq!(
        text,
        [
            "berth: cannot run `./run.sh`: ./run.sh is not an executable file (check its mode, or run it through its interpreter)"
        ]
    );
}

/// `berth run` through the daemon: the pull its create request waits for is
/// shown on stderr (plain lines, stderr being a pipe), then the output.
#[tokio::test]
async fn berth_run_through_the_daemon_shows_the_pull() {
    let registry = Registry::start();
    // Big enough that the pull outlasts the CLI's quiet first 300 ms.
    let image = pushed_image_of(&registry, 64_000_000);
    let d = crate::common::Daemon::start();
    let (code, out, err) = d.run(&[
        "run",
        "--runner",
        "docker",
        "--image",
        &image.0,
        "--",
        "cat",
        "/data/name",
    ]);
    assert_eq!((code, out.trim()), (0, image.0.as_str()), "{err}");
    let pulls: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with(&format!("pulling {}", image.0)))
        .collect();
    assert!(!pulls.is_empty(), "progress lines on stderr: {err}");
    assert!(
        pulls.iter().all(|l| l.contains("layers") && l.contains('%')),
        "{pulls:?}"
    );
}

/// A small Python web app in its own workspace with a berth.toml naming
/// berth/dev: served from a container, fetched through the mapped port, and
/// the file it writes in the workspace belongs to the caller (for a root
/// caller, to the workspace's owner).
#[tokio::test]
async fn a_python_app_is_served_from_the_project_image() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("app");
    crate::common::workspace_dir(&ws);
    std::fs::write(ws.join("berth.toml"), "image = \"berth/dev:latest\"\n").unwrap();
    std::fs::write(
        ws.join("app.py"),
        "import http.server, pathlib\n\
         pathlib.Path('started.txt').write_text('served\\n')\n\
         class H(http.server.BaseHTTPRequestHandler):\n\
         \x20   def do_GET(self):\n\
         \x20       self.send_response(200); self.end_headers(); self.wfile.write(b'hello from python')\n\
         http.server.HTTPServer(('0.0.0.0', 8000), H).serve_forever()\n",
    )
    .unwrap();
    let config = project_config(&ws, &dir.path().join("state"));
    let m = berth::Manager::new(config).unwrap();
    let job = m
        .start(
            JobSpec::argv(["python3", "app.py"])
                .with_runner(RunnerChoice::Docker)
                .with_port(8000)
                .background(),
        )
        .await
        .unwrap();
    let out = job
        .wait(&[ReadyCondition::http("/")], Duration::from_secs(60))
        .await
        .unwrap();
    assert!(
        out.is_ready(),
        "{out:?} {:?}",
        m.logs(&job.id, &Default::default())
    );
    let page = http_get(job.host_port(8000).unwrap());
    assert!(page.contains("hello from python"), "{page}");
    let info = job.info().unwrap();
    let chosen = info.image.clone().unwrap();
    assert_eq!(chosen.name, "berth/dev:latest");
    assert!(chosen.why.contains("berth.toml"), "{chosen:?}");
    let written = ws.join("started.txt");
    assert_eq!(std::fs::read_to_string(&written).unwrap(), "served\n");
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        std::fs::metadata(&written).unwrap().uid(),
        std::fs::metadata(&ws).unwrap().uid()
    );
    job.kill().await.unwrap();
}

/// The project's config as the CLI would load it from `ws`, in its own state dir.
fn project_config(ws: &Path, state: &Path) -> berth::Config {
    let flags = berth::config::Layer {
        state_dir: Some(PathBuf::from(state)),
        instance: Some(instance_name("img")),
        ..Default::default()
    };
    berth::Config::load(ws, flags).unwrap()
}

/// The sandbox's busybox applets the suite and the manual use work on this
/// engine: `httpd`, `nc` both ways, and `wget` bounded by `timeout` (Debian
/// builds busybox without `wget -T`, and an option it lacks crashes it:
/// docs/src/images.md says to write `timeout N wget …`).
#[test]
fn the_sandbox_applets_the_suite_uses_work() {
    // The sender retries until the listener accepts, and the listener's
    // file is read once it holds the line (each at most 100 tries): no sleep
    // orders them. The listener's input stays open (busybox nc -l ends at
    // the end of its input, and could before it wrote what it got).
    let script = "httpd -p 8080 -h /www && timeout 5 wget -q -O- http://127.0.0.1:8080/ \
                  && { sleep 30 | nc -l -p 9000 > /tmp/got & }; n=0; \
                  until echo over-nc | nc -w 2 127.0.0.1 9000 2>/dev/null || [ $n -ge 100 ]; do \
                  n=$((n+1)); sleep 0.05; done; \
                  n=0; until grep -q over-nc /tmp/got || [ $n -ge 100 ]; do n=$((n+1)); sleep 0.05; done; \
                  cat /tmp/got; \
                  timeout 2 wget -q -O- http://127.0.0.1:1/ 2>&1; echo refused=$?";
    let o = Command::new("docker")
        .args(["run", "--rm", "berth/sandbox:latest", "sh", "-c", script])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("hello from berth"), "httpd or wget: {out}");
    assert!(out.contains("over-nc"), "nc: {out}");
    assert!(
        out.contains("refused=1"),
        "wget's failure is an exit, not a crash: {out}"
    );
}
