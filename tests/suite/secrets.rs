//! Secrets never in clear outside the job: the security log keeps env values
//! as `***` like the store, `-e KEY` keeps a value off berth's own command
//! line, and a `BERTH_CONFIG` that cannot be read is named, never quoted
//! (400, not 500).

use std::io::{Read, Write};
use std::time::Duration;

use crate::common::Daemon;

#[test]
fn a_refused_commands_env_values_are_not_in_the_security_log() {
    let d = Daemon::start();
    let (code, _, err) = {
        let o = d
            .cli()
            .env("TOKEN_FOR_TEST", "SuperSecret123")
            .args(["run", "-e", "TOKEN_FOR_TEST"])
            .args(["-e", "DOCKER_HOST=tcp://Hunter2Pass@10.0.0.1:2375"])
            .args(["--", "docker", "ps"])
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    assert_eq!(code, Some(126), "{err}");
    let log =
        std::fs::read_to_string(d.dir.path().join("state").join(&d.instance).join("security.log")).unwrap();
    assert!(log.contains("\"blocked\":true"), "{log}");
    for secret in ["SuperSecret123", "supersecret123", "Hunter2Pass", "hunter2pass"] {
        assert!(!log.contains(secret), "{secret} in the security log: {log}");
    }
}

#[test]
fn dash_e_key_passes_this_shells_value() {
    let d = Daemon::start();
    let o = d
        .cli()
        .env("TOKEN_FOR_TEST", "from-the-shell")
        .args([
            "run",
            "-e",
            "TOKEN_FOR_TEST",
            "--shell",
            "--",
            "echo $TOKEN_FOR_TEST",
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "from-the-shell",
        "{o:?}"
    );
    let o = d
        .cli()
        .env_remove("NOT_SET_ANYWHERE")
        .args(["run", "-e", "NOT_SET_ANYWHERE", "--", "true"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("NOT_SET_ANYWHERE") && err.contains("set in this environment"),
        "{err}"
    );
}

#[test]
fn a_config_file_that_is_not_one_is_named_and_never_quoted() {
    let d = Daemon::start();
    // A file whose first line is a secret, as /etc/shadow's is.
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("shadow");
    std::fs::write(&secret, "root:$6$SeCrEtHaSh:19000:0:99999:7:::\n").unwrap();
    let body = serde_json::json!({
        "argv": ["true"],
        "caller_cwd": dir.path(),
        "caller_env": {"BERTH_CONFIG": secret},
    })
    .to_string();
    let mut s = std::os::unix::net::UnixStream::connect(d.socket()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(
        answer.contains(&secret.display().to_string()),
        "names the file: {answer}"
    );
    assert!(
        !answer.contains("SeCrEt") && !answer.contains("root:"),
        "quotes it: {answer}"
    );
}
