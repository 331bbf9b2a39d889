//! The shell examples of README.md, API.md and every chapter of the manual
//! (`docs/src/**/*.md`) run as written.
//!
//! The rule: every fenced block marked `sh`, `bash`, `shell` or `console` is
//! run, unless the line right before its fence is
//! `<!-- not run: REASON -->` with a reason (it installs packages, needs a
//! remote engine, runs the whole suite, follows until interrupted, is a
//! synopsis …). A marker without a reason fails the test, as does an
//! unmarked block that fails: a user copies these blocks, so one that cannot
//! run must say why.
//!
//! A block's output is checked too when a ```` ```text output ```` block
//! follows it (blank lines between them allowed): each of its lines must be
//! a line of what the block printed (stdout and stderr together), in that
//! order, where `…` stands for any text. So a documented command whose
//! output changes fails here, not in a user's terminal.
//!
//! How a block runs: alone, as a fresh user would type it after building
//! berth and its images (`scripts/test.sh` builds berth/sandbox and
//! berth/dev first): `bash -euo pipefail` in a new, empty project directory,
//! with this build's `berth` first on `PATH`, a private `HOME` and XDG
//! directories (so the daemon's socket, state and config are the block's
//! own), a fresh instance (its first job is `job-1`), and no `BERTH_*`
//! variable from the test's own environment. Blocks run side by side; each
//! gets `berth down` afterwards, and no container of its instance may be
//! left.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{containers_of, instance_name};

/// A block's longest run (a block that starts a server detaches it).
const BLOCK_TIMEOUT: Duration = Duration::from_secs(90);

const SHELLS: &[&str] = &["sh", "bash", "shell", "console"];

#[derive(Debug)]
struct Block {
    /// Where the block's fence is (`README.md:25`).
    at: String,
    code: String,
    /// `Some(reason)` for a block marked `<!-- not run: reason -->`.
    skip: Option<String>,
    /// The lines of the ```` ```text output ```` block right after it.
    expect: Option<Vec<String>>,
}

/// The shell blocks of a Markdown document, with their markers. Errors name
/// a marker with no reason.
fn shell_blocks(name: &str, text: &str) -> Result<Vec<Block>, String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks = Vec::new();
    // The closing fence of the last shell block: an output block right
    // after it is its expected output.
    let mut shell_end: Option<usize> = None;
    let mut i = 0;
    while i < lines.len() {
        let Some(info) = lines[i].trim_start().strip_prefix("```") else {
            i += 1;
            continue;
        };
        let lang = info.split([',', ' ']).next().unwrap_or("").trim();
        let start = i;
        let mut end = i + 1;
        while end < lines.len() && !lines[end].trim_start().starts_with("```") {
            end += 1;
        }
        if SHELLS.contains(&lang) {
            let marker = start
                .checked_sub(1)
                .map(|p| lines[p].trim())
                .and_then(|l| l.strip_prefix("<!-- not run"))
                .map(|rest| {
                    rest.trim_end_matches("-->")
                        .trim()
                        .trim_start_matches(':')
                        .trim()
                        .to_string()
                });
            if marker.as_deref() == Some("") {
                return Err(format!(
                    "{name}:{}: `<!-- not run -->` without a reason: say why it is not run (`<!-- not run: installs packages -->`)",
                    start + 1
                ));
            }
            blocks.push(Block {
                at: format!("{name}:{}", start + 1),
                code: lines[start + 1..end.min(lines.len())].join("\n"),
                skip: marker,
                expect: None,
            });
            shell_end = Some(end);
        } else if is_output_fence(info)
            && let Some(last) = blocks.last_mut()
            && last.expect.is_none()
            && shell_end.is_some_and(|e| lines[e + 1..start].iter().all(|l| l.trim().is_empty()))
        {
            let expect = lines[start + 1..end.min(lines.len())]
                .iter()
                .map(|l| l.to_string());
            last.expect = Some(expect.collect());
        }
        i = end + 1;
    }
    Ok(blocks)
}

/// A fence that holds the output of the block above: ```` ```text output ````.
fn is_output_fence(info: &str) -> bool {
    let words: Vec<&str> = info.split([',', ' ']).map(str::trim).collect();
    words.first() == Some(&"text") && words.contains(&"output")
}

/// Whether every line of `expect` is a line of `output`, in order (`…`:
/// any text); `Err` names the first that is not.
fn expected_in_order(output: &str, expect: &[String]) -> Result<(), String> {
    let mut lines = output.lines();
    for want in expect.iter().map(|l| l.trim_end()).filter(|l| !l.is_empty()) {
        if !lines.by_ref().any(|got| line_matches(got.trim_end(), want)) {
            return Err(format!(
                "its output has no line `{want}` (after the lines matched before it)"
            ));
        }
    }
    Ok(())
}

/// `got` is `want`, where each `…` of `want` stands for any text.
fn line_matches(got: &str, want: &str) -> bool {
    let parts: Vec<&str> = want.split('…').collect();
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if parts.len() == 1 {
        return got == want;
    }
    if !got.starts_with(first) || got.len() < first.len() + last.len() || !got.ends_with(last) {
        return false;
    }
    let mut rest = &got[first.len()..got.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

/// What one block did: its exit, its output, and what it left behind.
struct Outcome {
    at: String,
    failure: Option<String>,
}

/// Run `block` in an environment of its own; `None` when it passed.
fn run_block(block: &Block) -> Outcome {
    let dir = tempfile::tempdir().expect("temp dir");
    let home = dir.path().join("home");
    let project = home.join("project");
    // A user's project: a root test's is another uid's, as a user's is
    // theirs (container jobs run as the workspace's owner).
    crate::common::workspace_dir(&project);
    std::fs::create_dir_all(home.join(".run")).unwrap();
    let instance = instance_name("doc");
    let bin = Path::new(env!("CARGO_BIN_EXE_berth"))
        .parent()
        .unwrap()
        .to_path_buf();
    let env = BlockEnv {
        home: home.clone(),
        instance: instance.clone(),
        path: format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default()),
    };
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(format!("set -euo pipefail\n{}\n", block.code))
        .current_dir(&project);
    env.apply(&mut cmd);
    let started = Instant::now();
    let result = run_with_deadline(cmd, BLOCK_TIMEOUT);
    // Whatever the block did, its daemon goes, and with it its containers.
    let mut down = Command::new(env!("CARGO_BIN_EXE_berth"));
    down.arg("down").current_dir(&project);
    env.apply(&mut down);
    let _ = down.stdout(Stdio::null()).stderr(Stdio::null()).status();
    let mut failure = match result {
        Ok((0, out)) => block
            .expect
            .as_ref()
            .and_then(|e| expected_in_order(&out, e).err())
            .map(|why| format!("{why}; its output:\n{out}")),
        Ok((code, out)) => Some(format!(
            "exited {code} after {:.1} s; its output:\n{out}",
            started.elapsed().as_secs_f64()
        )),
        Err(out) => Some(format!(
            "still running after {} s (killed); its output:\n{out}",
            BLOCK_TIMEOUT.as_secs()
        )),
    };
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut left = containers_of(&instance);
    while left > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        left = containers_of(&instance);
    }
    if left > 0 && failure.is_none() {
        failure = Some(format!(
            "left {left} container(s) of instance {instance} after `berth down`"
        ));
    }
    Outcome {
        at: block.at.clone(),
        failure,
    }
}

/// The environment a block runs in: nothing of the test's own berth setup.
struct BlockEnv {
    home: PathBuf,
    instance: String,
    path: String,
}

impl BlockEnv {
    fn apply(&self, cmd: &mut Command) {
        for (k, _) in std::env::vars() {
            if k.starts_with("BERTH_") || k.starts_with("XDG_") || k == "DOCKER_HOST" || k == "DOCKER_CONTEXT"
            {
                cmd.env_remove(k);
            }
        }
        let h = &self.home;
        cmd.env("HOME", h)
            .env("PATH", &self.path)
            .env("XDG_CONFIG_HOME", h.join(".config"))
            .env("XDG_STATE_HOME", h.join(".local/state"))
            .env("XDG_DATA_HOME", h.join(".local/share"))
            .env("XDG_RUNTIME_DIR", h.join(".run"))
            .env("BERTH_INSTANCE", &self.instance)
            // The docker CLI keeps its config under HOME: the real one's.
            .env("DOCKER_CONFIG", docker_config());
    }
}

fn docker_config() -> PathBuf {
    std::env::var_os("DOCKER_CONFIG")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".docker"))
}

/// Run `cmd` (stdout and stderr together) in a process group of its own;
/// `Ok((code, output))`, or `Err(output)` when it outlived `timeout`
/// (then its group is killed).
fn run_with_deadline(mut cmd: Command, timeout: Duration) -> Result<(i32, String), String> {
    use std::os::unix::process::CommandExt;
    let out = tempfile::NamedTempFile::new().unwrap();
    // One open file for both streams: they share its offset, so neither
    // writes over the other.
    let child_out = out.reopen().unwrap();
    let child_err = child_out.try_clone().unwrap();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(child_out)
        .stderr(child_err)
        .process_group(0)
        .spawn()
        .expect("spawn bash");
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() > deadline {
            let pgid = nix::unistd::Pid::from_raw(-(child.id() as i32));
            let _ = nix::sys::signal::kill(pgid, nix::sys::signal::Signal::SIGKILL);
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = std::fs::read_to_string(out.path()).unwrap_or_default();
    match status {
        Some(s) => Ok((s.code().unwrap_or(-1), text)),
        None => Err(text),
    }
}

/// The manual's chapters, `docs/src/**/*.md` relative to the repository's
/// root, sorted.
pub(super) fn book_chapters() -> Vec<String> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, root, out);
            } else if path.extension().is_some_and(|x| x == "md") {
                out.push(path.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    walk(&root.join("docs/src"), root, &mut out);
    out.sort();
    out
}

/// The shell blocks of `docs` (paths from the repository's root); panics
/// naming a marker without a reason.
fn blocks_of(docs: &[String]) -> Vec<Block> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    docs.iter()
        .flat_map(|doc| {
            let text = std::fs::read_to_string(root.join(doc)).unwrap();
            shell_blocks(doc, &text).unwrap_or_else(|e| panic!("{e}"))
        })
        .collect()
}

/// Run every unmarked shell block of `docs` side by side; fail naming each
/// block that failed.
fn check_documents(docs: &[String]) {
    let blocks = blocks_of(docs);
    assert!(
        !blocks.is_empty(),
        "{docs:?} have no shell blocks: is the rule still right?"
    );
    let failures: Vec<String> = std::thread::scope(|s| {
        let runs: Vec<_> = blocks
            .iter()
            .filter(|b| b.skip.is_none())
            .map(|b| s.spawn(move || run_block(b)))
            .collect();
        runs.into_iter()
            .map(|r| r.join().expect("block thread"))
            .filter_map(|o| o.failure.map(|f| format!("--- {} {f}", o.at)))
            .collect()
    });
    for b in blocks.iter().filter(|b| b.skip.is_some()) {
        eprintln!("{}: not run: {}", b.at, b.skip.as_deref().unwrap_or(""));
    }
    assert!(
        failures.is_empty(),
        "{} example block(s) failed as written (fix the example, or mark it `<!-- not run: reason -->`):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn readme_shell_examples_run_as_written() {
    check_documents(&["README.md".into()]);
}

#[test]
fn api_shell_examples_run_as_written() {
    check_documents(&["API.md".into()]);
}

/// Every chapter of the manual: the blocks that moved there from the
/// README keep running, and so do the chapters' own.
#[test]
fn book_shell_examples_run_as_written() {
    check_documents(&book_chapters());
}

/// Without an engine: every document parses (markers have reasons), the
/// README's journey runs with its output checked, and the moved blocks are
/// in the book.
#[test]
fn docs_shell_blocks_parse() {
    let readme = blocks_of(&["README.md".into()]);
    assert!(
        readme.iter().any(|b| b.skip.is_none() && b.expect.is_some()),
        "the README's journey should run with its output checked: {readme:?}"
    );
    let book = blocks_of(&book_chapters());
    let runs = book.iter().filter(|b| b.skip.is_none()).count();
    assert!(runs >= 5, "only {runs} runnable blocks in the book: {book:?}");
    blocks_of(&["API.md".into()]);
}

/// A changed output line fails its block; `…` stands for any text.
#[test]
fn a_blocks_output_is_checked_line_by_line() {
    let doc = "```sh\necho hi\n```\n\n```text output\nstarted job-…\n…ready\n```\n";
    let blocks = shell_blocks("doc.md", doc).unwrap();
    let expect = blocks[0].expect.clone().unwrap();
    assert_eq!(expect, ["started job-…", "…ready"]);
    assert!(expected_in_order("noise\nstarted job-1\nall ready\n", &expect).is_ok());
    // Changed wording, and the right lines in the wrong order.
    let err = expected_in_order("started job-1\nall set\n", &expect).unwrap_err();
    assert!(err.contains("`…ready`"), "{err}");
    assert!(expected_in_order("all ready\nstarted job-1\n", &expect).is_err());
    assert!(line_matches("a 127.0.0.1:41234→8080 b", "…127.0.0.1:…→8080…"));
    assert!(!line_matches("job-12", "job-1"));
    // Only a block right after a shell block is its output.
    let doc = "```sh\ntrue\n```\nsome text\n```text output\nx\n```\n";
    assert_eq!(shell_blocks("doc.md", doc).unwrap()[0].expect, None);
}

#[test]
fn a_not_run_marker_needs_a_reason() {
    let doc = "text\n<!-- not run -->\n```sh\nfalse\n```\n";
    let err = shell_blocks("doc.md", doc).unwrap_err();
    assert!(
        err.contains("doc.md:3") && err.contains("without a reason"),
        "{err}"
    );
    let doc = "<!-- not run: needs a remote engine -->\n```sh\nfalse\n```\n\n```bash\ntrue\n```\n```json\n{}\n```\n";
    let blocks = shell_blocks("doc.md", doc).unwrap();
    assert_eq!(blocks.len(), 2, "{blocks:?}");
    assert_eq!(blocks[0].skip.as_deref(), Some("needs a remote engine"));
    assert_eq!(
        (blocks[1].skip.as_deref(), blocks[1].code.as_str()),
        (None, "true")
    );
}
