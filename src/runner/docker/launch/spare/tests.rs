//! The script a job hands its spare, run through the waiter by this
//! machine's `sh`: every word arrives as it was, whatever it holds.

use std::io::Write;
use std::process::{Command, Stdio};

use bollard::models::ContainerCreateBody;

use super::shape::exportable;
use super::{WAITER, script};

/// Run `body`'s script through [`WAITER`]; what the exec'd command printed.
fn through_waiter(body: &ContainerCreateBody) -> String {
    let mut child = Command::new("/bin/sh")
        .args(["-c", WAITER])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("sh");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(script(body).as_bytes()).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn every_word_of_the_command_arrives_as_it_was() {
    let tricky = [
        "plain",
        "it's",
        "'",
        "''\\'",
        "$(touch /nonexistent/x)",
        "`id`",
        "a\nb\n",
        "\\",
        "back\\nslash",
        " lead and trail ",
        "*",
        "-e",
        "",
        "ünï",
        ";exit 3",
    ];
    let mut cmd = vec![
        "/bin/sh".to_string(),
        "-c".into(),
        "printf '[%s]' \"$@\"".into(),
        "sh".into(),
    ];
    cmd.extend(tricky.iter().map(|s| s.to_string()));
    let body = ContainerCreateBody {
        cmd: Some(cmd),
        ..Default::default()
    };
    let want: String = tricky.iter().map(|s| format!("[{s}]")).collect();
    assert_eq!(through_waiter(&body), want);
}

#[test]
fn the_environment_and_directory_are_the_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let body = ContainerCreateBody {
        cmd: Some(vec![
            "/bin/sh".into(),
            "-c".into(),
            "printf '%s|%s|%s' \"$GREETING\" \"$ODD\" \"$(pwd)\"".into(),
        ]),
        env: Some(vec!["GREETING=hello world".into(), "ODD=a'b\nc=d $HOME".into()]),
        working_dir: Some(dir.path().to_string_lossy().into_owned()),
        ..Default::default()
    };
    let real = std::fs::canonicalize(dir.path()).unwrap();
    assert_eq!(
        through_waiter(&body),
        format!("hello world|a'b\nc=d $HOME|{}", real.display())
    );
}

#[test]
fn only_names_sh_can_export_fit_a_spare() {
    assert!(exportable("PATH") && exportable("_x1") && exportable("lower_case"));
    for bad in ["", "1ABC", "A-B", "A.B", "A B", "A=B", "É"] {
        assert!(!exportable(bad), "{bad:?}");
    }
}
