//! Job-controlled text is inert on the way out, checked in a real terminal:
//! a job prints the red team's forms (OSC 52 setting the clipboard to
//! `rm -rf ~/*`, an OSC 0 title, a screen clear, a CR overwrite, a bidi
//! override, NUL), carries an escape in its label and command, watches its
//! own evil line and is killed with an evil reason. `berth logs`, `status`,
//! `ps` and `events` run in a tmux pane; the tmux clipboard stays empty, the
//! pane's title and screen are untouched, and the forms read as escapes.
//! The same job through `berth logs --raw` does reach the terminal: that
//! is how the test knows it would see an attack.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{Daemon, eventually, instance_name};

/// A tmux server of the test's own (its own socket), one 200x100 pane
/// running `sh`, clipboard setting allowed as the red team had it, and a
/// known title. Killed when dropped.
struct Tmux {
    name: String,
}

impl Tmux {
    fn start() -> Tmux {
        let t = Tmux {
            name: instance_name("tmux"),
        };
        t.ok(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-x",
            "200",
            "-y",
            "100",
            "-s",
            "t",
            "sh",
        ]);
        t.ok(&["set-option", "-g", "set-clipboard", "on"]);
        t.ok(&["select-pane", "-t", "t", "-T", "KNOWN-TITLE"]);
        t
    }

    fn tmux(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.name)
            .args(args)
            .output()
            .expect("tmux")
    }

    fn ok(&self, args: &[&str]) -> String {
        let o = self.tmux(args);
        assert!(o.status.success(), "tmux {args:?}: {o:?}");
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// Run `script` in the pane and wait until it printed `done`.
    fn run(&self, script: &Path, done: &str) {
        self.ok(&[
            "send-keys",
            "-t",
            "t",
            &format!("sh {}", script.display()),
            "Enter",
        ]);
        let deadline = Instant::now() + Duration::from_secs(30);
        // `done` is printed by `echo`: the typed command line shows it quoted.
        while !self.screen().lines().any(|l| l == done) {
            assert!(
                Instant::now() < deadline,
                "the pane never printed {done}:\n{}",
                self.screen()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// What the pane shows now, wrapped lines joined.
    fn screen(&self) -> String {
        self.ok(&["capture-pane", "-p", "-J", "-t", "t"])
    }

    /// Every tmux paste buffer (what OSC 52 would have set).
    fn buffers(&self) -> String {
        self.ok(&["list-buffers", "-F", "#{buffer_sample}"])
    }

    fn title(&self) -> String {
        self.ok(&["display-message", "-p", "-t", "t", "#{pane_title}"])
            .trim()
            .to_string()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}

/// A script for the pane: the daemon's environment, a clear screen and a
/// marker, `verbs` as berth commands, and `done`.
fn script(d: &Daemon, path: &Path, verbs: &[&str], done: &str) {
    let dir = d.dir.path();
    let mut text = format!(
        "export BERTH_STATE_DIR='{}' BERTH_INSTANCE='{}' BERTH_WORKSPACE='{}' BERTH_RUNNER=host\nunset BERTH_SOCKET BERTH_CONFIG BERTH_LOG\nprintf '\\033[2J\\033[H'\necho BEFORE-MARK\n",
        dir.join("state").display(),
        d.instance,
        dir.join("ws").display()
    );
    for v in verbs {
        text += &format!("{} {v}\n", env!("CARGO_BIN_EXE_berth"));
    }
    text += &format!("echo {done}\n");
    std::fs::write(path, text).unwrap();
}

/// The red team's forms, one per line, then a wait to be killed.
const EVIL_OUTPUT: &str = r#"printf '\033]52;c;%s\007' "$(printf 'rm -rf ~/*' | base64)"; echo; printf '\033]0;PWNED-TITLE\007\n'; printf '\033[2J\033[H\n'; printf 'SAFE-TEXT\rEVIL-TEXT\n'; printf 'abc\342\200\256def\n'; printf 'nul\000byte\n'; echo out-done; sleep 600"#;

#[tokio::test]
async fn logs_status_ps_and_events_leave_the_terminal_untouched() {
    let d = Daemon::start();
    let label = "web\u{202e}lbl\x1b]0;LABEL-TITLE\x07";
    let v = d.json(&[
        "run",
        "-d",
        "--label",
        label,
        "--watch",
        "EVIL",
        "--",
        "sh",
        "-c",
        EVIL_OUTPUT,
        "\x1b]0;ARGV-TITLE\x07",
    ]);
    let id = v["job"]["id"].as_str().unwrap().to_string();
    let printed = || d.run(&["logs", &id, "--raw"]).1.contains("out-done");
    eventually(Duration::from_secs(20), "the job's output", printed).await;
    let reason = format!("\x1b]52;c;{}\x07\x1b[2J", "cm0gLXJmIH4vKg==");
    let (code, _, err) = d.run(&["kill", &id, "--reason", &reason]);
    assert_eq!(code, 0, "{err}");

    let tmux = Tmux::start();
    let path = d.dir.path().join("verbs.sh");
    let (logs, status) = (format!("logs {id}"), format!("status {id}"));
    script(&d, &path, &[&logs, &status, "ps --all", "events"], "DONE-ONE");
    tmux.run(&path, "DONE-ONE");
    let screen = tmux.screen();
    assert_eq!(tmux.buffers(), "", "a paste buffer was set:\n{screen}");
    assert_eq!(tmux.title(), "KNOWN-TITLE", "{screen}");
    assert!(
        screen.contains("BEFORE-MARK"),
        "the screen was cleared:\n{screen}"
    );
    for shown in [
        r"\x1b]52;c;cm0gLXJmIH4vKg==\x07",
        r"\x1b]0;PWNED-TITLE\x07",
        r"\x1b[2J\x1b[H",
        r"SAFE-TEXT\rEVIL-TEXT",
        r"abc\u202edef",
        r"nul\x00byte",
        // The label (card), the command's argument (card and ps), the reason, a watch hit.
        r"web\u202elbl\x1b]0;LABEL-TITLE\x07",
        r"\x1b]0;ARGV-TITLE\x07",
        r"Reason: \x1b]52;c;cm0gLXJmIH4vKg==\x07\x1b[2J",
        r"line=SAFE-TEXT\rEVIL-TEXT",
    ] {
        assert!(
            screen.contains(shown),
            "`{shown}` is not on the screen:\n{screen}"
        );
    }
    // Piped, `logs` is the job's bytes.
    let (_, piped, _) = d.run(&["logs", &id]);
    assert!(
        piped.contains("SAFE-TEXT\rEVIL-TEXT") && piped.contains('\u{202e}'),
        "{piped:?}"
    );

    // The control: `--raw` to the same terminal is what the red team saw.
    script(&d, &path, &[&format!("logs {id} --raw")], "DONE-TWO");
    tmux.run(&path, "DONE-TWO");
    assert!(tmux.buffers().contains("rm -rf ~/*"), "OSC 52 did not reach tmux");
    assert_eq!(tmux.title(), "PWNED-TITLE");
    assert!(tmux.screen().contains("EVIL-TEXT") && !tmux.screen().contains("SAFE-TEXT"));
}
