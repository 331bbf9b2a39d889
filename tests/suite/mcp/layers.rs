//! An agent's jobs write its session's layer: two jobs of one session see
//! each other's writes, another session's jobs do not, the checkout sees
//! none of them until `apply`; an agent's apply past its guard (too many
//! deletions, a protected path) is refused naming the user's command, which
//! then goes through.

use serde_json::json;

use super::sessions::{Session, cli, job_id};
use crate::common::{Daemon, SANDBOX};

/// A foreground container job of `s` running `script`; its answer.
async fn run(s: &Session, script: &str) -> super::Reply {
    s.call(
        "run",
        json!({"command": script, "runner": "docker", "image": SANDBOX}),
    )
    .await
}

#[tokio::test]
async fn a_sessions_jobs_share_its_layer_and_no_other_session_sees_it() {
    let d = Daemon::start();
    let (dir, inst) = (d.dir.path(), d.instance.as_str());
    let ws = dir.join("ws");
    let mut a = Session::open(dir, inst, "a").await;
    let b = Session::open(dir, inst, "b").await;

    let r = run(&a, "echo from-a > shared.txt").await;
    assert!(!r.is_error, "{}\n{}", r.text, a.stderr());
    assert!(
        r.text.contains("1 file changed in layer mcp-") && r.text.contains("`apply` brings them there"),
        "{}",
        r.text
    );
    assert!(!ws.join("shared.txt").exists(), "the job wrote the checkout");
    let r = run(&a, "cat shared.txt").await;
    assert!(!r.is_error && r.text.contains("from-a"), "{}", r.text);
    let r = run(&b, "cat shared.txt").await;
    assert!(r.is_error && r.text.contains("No such file"), "{}", r.text);

    let seen = a.call("diff", json!({})).await;
    assert!(seen.text.starts_with("A  shared.txt"), "{}", seen.text);
    let other = b.call("diff", json!({})).await;
    assert!(other.text.contains("no changes"), "{}", other.text);
    // Session B cannot reach A's layer through one of A's jobs either
    // (job-1 is A's first).
    let refused = b.call("diff", json!({"id": "job-1"})).await;
    assert!(
        refused.is_error && refused.text.contains("not a job of this session"),
        "{}",
        refused.text
    );

    let done = a.call("apply", json!({})).await;
    assert!(
        !done.is_error && done.text.contains("applied 1 path"),
        "{}",
        done.text
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("shared.txt")).unwrap(),
        "from-a\n"
    );
    // The session's end takes the volume that mounted its layer (B's stays).
    let a_layer = format!("-layer-{}-", &seen.text[seen.text.find("mcp-").unwrap()..][..14]);
    let of_a = || {
        layer_volumes(inst)
            .iter()
            .filter(|v| v.contains(&a_layer))
            .count()
    };
    assert_eq!(
        of_a(),
        1,
        "A's layer volume {a_layer} in {:?}",
        layer_volumes(inst)
    );
    a.close().await;
    crate::common::eventually(
        std::time::Duration::from_secs(15),
        "no volume of A's layer",
        || of_a() == 0,
    )
    .await;
    assert_eq!(layer_volumes(inst).len(), 1, "B's is still there");
}

/// The instance's named layer volumes.
fn layer_volumes(instance: &str) -> Vec<String> {
    let o = std::process::Command::new("docker")
        .args(["volume", "ls", "-q", "--filter", "label=berth.layer"])
        .args(["--filter", &format!("label=berth.instance={instance}")])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn an_agents_apply_past_its_guard_is_refused_and_the_users_goes_through() {
    let d = Daemon::start();
    let (dir, inst) = (d.dir.path(), d.instance.as_str());
    let ws = dir.join("ws");
    for n in 0..25 {
        std::fs::write(ws.join(format!("f{n}.txt")), "x\n").unwrap();
    }
    let a = Session::open(dir, inst, "a").await;
    let r = run(&a, "rm -f f*.txt && mkdir -p .git && echo evil > .git/config").await;
    assert!(!r.is_error, "{}", r.text);
    let id = job_id(&r.text);

    let refused = a.call("apply", json!({})).await;
    assert!(refused.is_error, "{}", refused.text);
    assert!(
        refused.text.contains("`.git/config`") && refused.text.contains("berth apply mcp-"),
        "{}",
        refused.text
    );
    let refused = a.call("apply", json!({"paths": ["f0.txt", "f1.txt", "f2.txt", "f3.txt", "f4.txt", "f5.txt", "f6.txt", "f7.txt", "f8.txt", "f9.txt", "f10.txt", "f11.txt", "f12.txt", "f13.txt", "f14.txt", "f15.txt", "f16.txt", "f17.txt", "f18.txt", "f19.txt", "f20.txt"]})).await;
    assert!(refused.is_error, "{}", refused.text);
    assert!(
        refused.text.contains("more than 20 files") && refused.text.contains("berth apply mcp-"),
        "{}",
        refused.text
    );
    assert!(ws.join("f0.txt").exists(), "a refused apply changed the checkout");

    // The user, by the job's id.
    let (code, out, err) = cli(dir, inst, &["apply", &id]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!ws.join("f0.txt").exists() && !ws.join("f24.txt").exists());
    assert_eq!(std::fs::read_to_string(ws.join(".git/config")).unwrap(), "evil\n");
}
