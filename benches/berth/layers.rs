//! The cost of `layer` mode, each beside its baseline in the same run: a
//! container job's start-to-exit in `layer` vs `direct` (a new layer per
//! job, and a named one reused), `berth diff --stat` and `berth apply` of
//! 10,000 changed files beside `git diff --stat` and `cp -a` of the same
//! files, and a build writing 50,000 small files in `layer` vs `direct`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{Daemon, SANDBOX, interleaved, row, run_timed, time};

/// The owner a root bench gives its workspaces (a root caller's container
/// jobs run as the workspace's owner).
const OWNER: u32 = 4242;

/// A workspace of `n` small files under the daemon's directory.
fn workspace(d: &Daemon, name: &str, n: usize) -> std::path::PathBuf {
    let ws = d.dir.path().join(name);
    std::fs::create_dir_all(ws.join("src")).unwrap();
    for i in 0..n {
        std::fs::write(ws.join(format!("src/f{i}.txt")), format!("line {i}\n")).unwrap();
    }
    let _ = Command::new("chown")
        .args(["-R", &format!("{OWNER}:{OWNER}")])
        .arg(&ws)
        .status();
    ws
}

/// `berth ARGS` for jobs in `ws`.
fn cli(d: &Daemon, ws: &Path, args: &[&str]) -> Command {
    let mut c = d.cli(args);
    c.env("BERTH_WORKSPACE", ws).current_dir(ws);
    c
}

fn timed(d: &Daemon, ws: &Path, args: &[&str]) -> Duration {
    run_timed(cli(d, ws, args))
}

/// Container start-to-exit of `true`: direct, a new layer per job, a named
/// layer reused (in turns).
fn start(d: &Daemon) {
    let ws = workspace(d, "ws-start", 10);
    let direct = ["run", "--runner", "docker", "--image", SANDBOX, "--", "true"];
    let fresh = [
        "run", "--write", "layer", "--runner", "docker", "--image", SANDBOX, "--", "true",
    ];
    let named = [
        "run", "--layer", "bench", "--runner", "docker", "--image", SANDBOX, "--", "true",
    ];
    for args in [&direct[..], &fresh, &named] {
        let _warm = timed(d, &ws, args);
    }
    let [direct_t, fresh_t, named_t] = interleaved(
        20,
        [
            &mut || timed(d, &ws, &direct),
            &mut || timed(d, &ws, &fresh),
            &mut || timed(d, &ws, &named),
        ],
    );
    row(
        "container `run -- true`, `--write layer` (a new layer each job)",
        fresh_t,
        direct_t,
        "direct",
    );
    row(
        "same, `--layer bench` (one layer, its volume reused)",
        named_t,
        direct_t,
        "direct",
    );
}

/// `diff --stat` and `apply` of 10,000 changed files beside git and cp.
fn diff_apply(d: &Daemon) {
    let n = 10_000;
    let ws = workspace(d, "ws-diff", n);
    let (code, _) = (
        cli(
            d,
            &ws,
            &[
                "run",
                "--write",
                "layer",
                "--runner",
                "docker",
                "--image",
                SANDBOX,
                "--",
                "sh",
                "-c",
                "for f in src/*; do echo changed >> $f; done",
            ],
        )
        .status()
        .unwrap(),
        (),
    );
    assert!(code.success(), "the changing job failed");
    let id = last_job(d, &ws);
    // The same 10,000 changes in a git repository, for `git diff --stat`.
    let repo = workspace(d, "git-diff", n);
    let git = |args: &[&str]| {
        Command::new("git")
            .args(["-c", "safe.directory=*", "-C"])
            .arg(&repo)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap()
    };
    git(&["init", "-q"]);
    git(&["-c", "user.name=b", "-c", "user.email=b@b", "add", "."]);
    git(&["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "x"]);
    for i in 0..n {
        let p = repo.join(format!("src/f{i}.txt"));
        let mut s = std::fs::read_to_string(&p).unwrap();
        s.push_str("changed\n");
        std::fs::write(p, s).unwrap();
    }
    let diff = time(5, || timed(d, &ws, &["diff", &id, "--stat"]));
    let git_diff = time(5, || {
        let mut c = Command::new("git");
        c.args(["-c", "safe.directory=*", "-C"])
            .arg(&repo)
            .args(["diff", "--stat"])
            .stdout(Stdio::null());
        run_timed(c)
    });
    row(
        &format!("`berth diff --stat` of {n} changed files (ms; goal ≤ 500)"),
        diff,
        git_diff,
        "git diff --stat",
    );
    // The upper's files copied over the checkout, as the plainest apply.
    let layer_upper = d
        .dir
        .path()
        .join(&d.instance)
        .join("layers")
        .join(&id)
        .join("upper");
    let copy_to = workspace(d, "cp-target", n);
    let t = Instant::now();
    let s = Command::new("cp")
        .arg("-a")
        .arg(layer_upper.join("src"))
        .arg(&copy_to)
        .status()
        .unwrap();
    assert!(s.success());
    let cp = t.elapsed().as_secs_f64() * 1000.0;
    let apply = timed(d, &ws, &["apply", &id]).as_secs_f64() * 1000.0;
    row(
        &format!("`berth apply` of {n} changed files (ms; goal ≤ 2000)"),
        (apply, apply),
        (cp, cp),
        "cp -a of the changed files",
    );
}

/// The id of the newest job.
fn last_job(d: &Daemon, ws: &Path) -> String {
    let o = cli(d, ws, &["ps", "--all", "--json"])
        .stdout(Stdio::piped())
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v[0]["id"].as_str().unwrap().to_string()
}

/// A build that writes 50,000 small files, `layer` vs `direct`, in turns.
fn build(d: &Daemon) {
    let ws = workspace(d, "ws-build", 1);
    let script = "rm -rf out && mkdir out && cd out && i=0; while [ $i -lt 50000 ]; do echo $i > f$i; i=$((i+1)); done";
    // Longer than the default foreground budget (60 s) on a loaded machine.
    let direct = [
        "run",
        "--timeout",
        "900",
        "--runner",
        "docker",
        "--image",
        SANDBOX,
        "--",
        "sh",
        "-c",
        script,
    ];
    let layer = [
        "run",
        "--timeout",
        "900",
        "--layer",
        "build",
        "--runner",
        "docker",
        "--image",
        SANDBOX,
        "--",
        "sh",
        "-c",
        script,
    ];
    let [direct_t, layer_t] = interleaved(3, [&mut || timed(d, &ws, &direct), &mut || timed(d, &ws, &layer)]);
    row(
        "a build writing 50,000 small files, `--write layer` (ms; goal ≤ 1.2×)",
        layer_t,
        direct_t,
        "direct",
    );
}

pub fn bench_layers(d: &Daemon) {
    start(d);
    diff_apply(d);
    build(d);
}
