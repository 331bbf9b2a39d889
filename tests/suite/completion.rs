//! Shell completion as a shell drives it: the script `berth completions
//! bash` prints, sourced into a real bash, and berth's answers to the
//! completion protocol (`COMPLETE=bash berth -- WORDS…`). Job ids come from
//! the daemon, or from the store after `berth down`, without a word on
//! stderr and without starting a daemon.

use std::process::Command;
use std::time::Duration;

use crate::common::{Daemon, unique_sleep};

/// What berth offers for the last of `words` (the first is the program),
/// as bash's `_clap_complete_berth` asks for it; with its stderr and exit code.
fn offered(d: &Daemon, words: &[&str], unset: &[&str]) -> (Vec<String>, String, i32) {
    let mut cmd = d.cli();
    for k in unset {
        cmd.env_remove(k);
    }
    let o = cmd
        .env("COMPLETE", "bash")
        .env("_CLAP_COMPLETE_INDEX", (words.len() - 1).to_string())
        .env("_CLAP_COMPLETE_COMP_TYPE", "9")
        .env("_CLAP_COMPLETE_SPACE", "true")
        .env("_CLAP_IFS", "\n")
        .arg("--")
        .args(words)
        .output()
        .expect("run berth");
    let out = String::from_utf8_lossy(&o.stdout);
    (
        out.lines().map(str::to_string).collect(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
        o.status.code().unwrap_or(-1),
    )
}

/// The script of `berth completions bash` sourced into bash, and its
/// completion function called on `berth kill job-` as TAB would.
fn bash_tab(d: &Daemon) -> Vec<String> {
    let script = d.dir.path().join("berth.bash");
    let (code, text, err) = d.run(&["completions", "bash"]);
    assert_eq!(code, 0, "{err}");
    std::fs::write(&script, text).unwrap();
    let mut bash = Command::new("bash");
    for (k, v) in d.cli().get_envs() {
        match v {
            Some(v) => bash.env(k, v),
            None => bash.env_remove(k),
        };
    }
    let o = bash
        .arg("-c")
        .arg(
            "source \"$1\" && COMP_WORDS=(berth kill job-) && COMP_CWORD=2 && COMP_TYPE=9 \
             && _clap_complete_berth berth job- kill && printf '%s\\n' \"${COMPREPLY[@]}\"",
        )
        .arg("bash")
        .arg(&script)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn job_ids_complete_from_the_daemon_and_after_down_from_the_store() {
    let mut d = Daemon::start();
    let token = unique_sleep();
    let v = d.json(&["run", "-d", "--label", "napper", "--", "sleep", &token]);
    let id = v["job"]["id"].as_str().unwrap().to_string();

    // A real bash, through the registered script.
    let tab = bash_tab(&d);
    assert!(tab.contains(&id), "bash offered {tab:?}, not {id}");

    for verb in ["status", "logs", "wait", "kill", "resume", "bg", "exec"] {
        let (ids, err, code) = offered(&d, &["berth", verb, "job-"], &[]);
        assert_eq!((code, err.as_str()), (0, ""), "berth {verb}");
        assert_eq!(ids, vec![id.clone()], "berth {verb}");
    }
    // Fish shows each id's help: the job's label and status.
    let fish = d
        .cli()
        .env("COMPLETE", "fish")
        .args(["--", "berth", "kill", "job-"])
        .output()
        .unwrap();
    let fish = String::from_utf8_lossy(&fish.stdout).into_owned();
    assert_eq!(fish, format!("{id}\tnapper (running)\n"));
    let (paths, _, _) = offered(&d, &["berth", "cp", "job-"], &[]);
    assert_eq!(paths, vec![format!("{id}:")]);
    // The instance named on the line, not in the environment.
    let (ids, _, _) = offered(
        &d,
        &["berth", "--instance", &d.instance, "kill", "job-"],
        &["BERTH_INSTANCE"],
    );
    assert_eq!(ids, vec![id.clone()]);
    // A verb that takes no job id offers none.
    for words in [
        &["berth", "config", ""][..],
        &["berth", "config", "--"],
        &["berth", ""],
    ] {
        let (offers, err, code) = offered(&d, words, &[]);
        assert_eq!((code, err.as_str()), (0, ""), "{words:?}");
        assert!(
            !offers.iter().any(|o| o.starts_with("job-")),
            "{words:?}: {offers:?}"
        );
    }

    let (code, out, err) = d.run(&["down"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(d.wait_exit(Duration::from_secs(10)).is_some(), "daemon still up");
    assert!(!d.socket().exists());

    // No daemon: the store's history, quietly, and no daemon started.
    let (ids, err, code) = offered(&d, &["berth", "status", "job-"], &[]);
    assert_eq!((code, err.as_str()), (0, ""));
    assert_eq!(ids, vec![id.clone()]);
    assert!(!d.socket().exists(), "completion started a daemon");
    // An instance with neither daemon nor store: nothing, quietly.
    let (ids, err, code) = offered(&d, &["berth", "--instance", "nobody-here", "kill", "job-"], &[]);
    assert_eq!((code, err.as_str(), ids), (0, "", Vec::<String>::new()));
}
