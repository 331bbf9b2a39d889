//! `berth tui` end to end: the real binary in a pseudo-terminal (a detached
//! tmux session with its own server socket), against a live daemon. Keys go
//! in with `send-keys`, the screen comes back with `capture-pane`, and every
//! wait polls with a deadline.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::{Daemon, instance_name, unique_sleep};

const DEADLINE: Duration = Duration::from_secs(20);

/// A tmux server of our own running `berth tui` in one 100×30 pane. Its
/// socket lives in the daemon's temp dir, so nothing is left in /tmp.
struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    fn start(d: &Daemon) -> Tmux {
        let dir = d.dir.path();
        let socket = dir.join("tmux.sock");
        // The pane's shell line: the daemon's environment, then the panel;
        // after it exits, its status stays on screen for the test to read.
        let line = format!(
            "env -u BERTH_SOCKET -u BERTH_CONFIG BERTH_STATE_DIR='{}' BERTH_INSTANCE='{}' \
             BERTH_WORKSPACE='{}' BERTH_RUNNER=host '{}' tui; echo \"[tui exited $?]\"; sleep 600",
            dir.join("state").display(),
            d.instance,
            dir.join("ws").display(),
            env!("CARGO_BIN_EXE_berth"),
        );
        let tmux = Tmux { socket };
        tmux.run(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-x",
            "100",
            "-y",
            "30",
            "-s",
            "tui",
            &line,
        ]);
        tmux
    }

    fn run(&self, args: &[&str]) -> Output {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .env("TERM", "xterm-256color")
            .output()
            .expect("run tmux (is it installed?)");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", "tui"]).stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "tui"];
        args.extend(keys);
        self.run(&args);
    }

    /// Poll the screen until `check` holds; panic with the screen after the deadline.
    fn wait_for(&self, what: &str, check: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let screen = self.screen();
            if check(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// The table row with the selection marker.
fn selected_row(screen: &str) -> Option<&str> {
    screen.lines().find(|l| l.starts_with("> job-"))
}

fn running_count(d: &Daemon) -> usize {
    d.json(&["ps"]).as_array().map_or(0, |a| a.len())
}

fn poll(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn kill_and_background_from_the_panel() {
    let d = Daemon::start();
    for _ in 0..2 {
        let (code, _, err) = d.run(&["run", "-d", "--", "sleep", &unique_sleep()]);
        assert_eq!(code, 0, "{err}");
    }
    // A foreground run blocks its caller until it ends or is moved to background.
    let mut fg = d
        .cli()
        .args(["run", "--", "sleep", "30"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn berth run");
    poll("three running jobs", || running_count(&d) == 3);

    let tmux = Tmux::start(&d);
    let screen = tmux.wait_for("the panel with three jobs", |s| {
        s.contains("RUNNING (3)") && s.contains("job-3")
    });
    assert!(
        screen.contains("Ctrl+R → background"),
        "foreground hint missing:\n{screen}"
    );
    assert!(
        screen.contains("[foreground]") && screen.contains("ETA 00:"),
        "{screen}"
    );
    assert!(
        selected_row(&screen).is_some_and(|r| r.contains("job-1")),
        "{screen}"
    );

    // Details of job-1 and back.
    tmux.keys(&["Enter"]);
    tmux.wait_for("the details card", |s| {
        s.contains("● Shell (sleep") && s.contains("Status: running · job-1")
    });
    tmux.keys(&["Escape"]);
    tmux.wait_for("the panel again", |s| s.contains("RUNNING (3)"));

    // `k` asks, `y` stops job-1, and the manager records that a user did it.
    tmux.keys(&["k"]);
    tmux.wait_for("the question", |s| {
        s.contains("kill job-1 (") && s.contains("y to stop it")
    });
    tmux.keys(&["y"]);
    poll("job-1's ended event with ended_by=user", || {
        d.json(&["events"])["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["job"] == "job-1" && e["kind"] == "ended" && e["ended_by"] == "user")
    });
    let screen = tmux.wait_for("job-1 to leave RUNNING", |s| s.contains("RUNNING (2)"));
    assert!(
        screen.contains("FAILED (1, 1 new)"),
        "the kill earns a badge, and it is not a completion:\n{screen}"
    );

    // Select the foreground job and press Ctrl+R: its blocked `berth run` returns.
    for _ in 0..5 {
        let screen = tmux.screen();
        if selected_row(&screen).is_some_and(|r| r.contains("job-3")) {
            break;
        }
        let before = selected_row(&screen).map(str::to_string);
        tmux.keys(&["Down"]);
        tmux.wait_for("the selection to move", |s| {
            selected_row(s).map(str::to_string) != before
        });
    }
    tmux.keys(&["C-r"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = fg.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "berth run still blocked after Ctrl+R:\n{}",
            tmux.screen()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = fg.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(status.code(), Some(75), "released, still running: {stderr}");
    assert!(stderr.contains("moved to background by user"), "{stderr}");
    let screen = tmux.wait_for("job-3 in background", |s| s.contains("[background by user]"));
    assert!(
        !screen.contains("Ctrl+R → background"),
        "no foreground job is left:\n{screen}"
    );

    // The killed job waits in FAILED (not COMPLETED) with its badge.
    tmux.keys(&["Left"]);
    tmux.wait_for("job-1 in FAILED", |s| {
        selected_row(s).is_some_and(|r| r.contains("job-1") && r.contains("[killed by user] new"))
    });

    // q leaves, exit code 0, and the normal screen is back.
    tmux.keys(&["q"]);
    let screen = tmux.wait_for("the panel to exit", |s| s.contains("[tui exited"));
    assert!(screen.contains("[tui exited 0]"), "{screen}");
    assert!(
        !screen.contains("RUNNING ("),
        "the alternate screen is gone:\n{screen}"
    );
}

#[test]
fn without_a_manager_one_line_and_the_terminal_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_berth"))
        .arg("tui")
        .env("BERTH_STATE_DIR", dir.path())
        .env("BERTH_INSTANCE", instance_name("none"))
        .env_remove("BERTH_SOCKET")
        .env_remove("BERTH_CONFIG")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty(), "no escape sequences: {:?}", out.stdout);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("no berth manager is running"), "{stderr}");
}
