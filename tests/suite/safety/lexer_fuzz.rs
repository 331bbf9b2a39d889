//! A differential test of the filter's reading of a line against real bash:
//! 2,000 short command lines (fixed seed, so every run and every CI machine
//! sees the same ones) built from words, quotes (`''`, `""`, `$'…'`),
//! escapes, `;`, `&&`, `|`, `$(…)`, backquotes, variables, assignments and
//! globs. Bash runs each and reports every program it would have executed;
//! the filter's views must name each of those programs (or mark the line
//! `dynamic`, which refuses it). A program bash runs that the filter does
//! not see is a bypass: the test fails with the case, shrunk to a minimum.
//!
//! Safety of running generated text: bash gets it as one `-c` argument
//! (never through another shell), with `--norc --noprofile`, an empty
//! environment, `PATH` an empty directory (no program can be found, so
//! every command that is not a builtin goes to `command_not_found_handle`,
//! which only writes its argv to a descriptor), every builtin that could
//! change anything disabled (`enable -n`: `exec`, `eval`, `source`, `cd`,
//! `trap`, `kill`, …; `echo`, `printf` and `true` stay), the generator
//! makes no redirections, and the working directory is a throw-away
//! temporary directory.

use std::path::Path;
use std::process::Command;

use berth::safety::normalize;

/// Lines generated and compared.
const CASES: usize = 2000;
const SEED: u64 = 0x5eed_3809;
/// Threads comparing lines at once.
const WORKERS: usize = 4;

/// Builtins disabled before the generated text runs: everything but
/// `echo`, `printf` and `true` (and `enable` itself goes last). The
/// handler must use none of them (a disabled `return` in it would be
/// "not found" and call the handler again, without end).
const DISABLED: &str = "alias bg bind break builtin caller cd command compgen complete compopt \
    continue declare dirs disown eval exec exit export false fc fg getopts hash help history \
    jobs kill let local logout mapfile popd pushd pwd read readarray readonly return set shift \
    shopt source suspend test times trap type typeset ulimit umask unalias unset wait . : [ enable";

/// Fragments that make program names when joined (`su`+`do`, `s`+`udo`),
/// ordinary words, and an option.
const FRAGMENTS: &[&str] = &["su", "do", "s", "udo", "sudo", "ls", "id", "a", "x", "-r"];
const VARS: &[&str] = &["p", "q"];

/// splitmix64: small, deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }
}

/// One piece of a word.
fn piece(r: &mut Rng, depth: usize, fixed: bool) -> String {
    let f = r.pick(FRAGMENTS);
    let mut kind = r.below(if depth > 1 { 12 } else { 17 });
    // A fixed word (a program name) has nothing the filter must refuse as
    // undecidable (a variable it does not know, a glob, a default, a
    // process substitution): those become plain text.
    if fixed && [6, 7, 9, 16].contains(&kind) {
        kind = 0;
    }
    let inner = |r: &mut Rng| word(r, depth + 1, fixed);
    match kind {
        0 | 1 => f.to_string(),
        2 => format!("'{f}'"),
        3 => format!("\"{f}\""),
        4 => format!(
            "$'{}'",
            f.chars()
                .map(|c| format!("\\x{:02x}", c as u32))
                .collect::<String>()
        ),
        5 => format!("\\{f}"),
        // Braced or quoted: a letter after `$p` would name another variable.
        6 => [format!("${{{}}}", r.pick(VARS)), format!("\"${}\"", r.pick(VARS))][r.below(2)].clone(),
        7 => ["*", "?", "[s]"][r.below(3)].to_string(),
        8 => format!("{{{f},{}}}", r.pick(FRAGMENTS)),
        9 => format!("${{{}:-{f}}}", r.pick(VARS)),
        10 => format!("$\"{f}\""),
        // A line continuation inside a word.
        11 => format!("{f}\\\n{}", r.pick(FRAGMENTS)),
        12 => format!("$(echo {})", inner(r)),
        13 => format!("$(printf %s {} {})", inner(r), inner(r)),
        14 => format!("`echo {}`", inner(r)),
        15 => format!("\"$(echo {})\"", inner(r)),
        _ => format!("<(echo {})", inner(r)),
    }
}

/// A word of one to three pieces.
fn word(r: &mut Rng, depth: usize, fixed: bool) -> String {
    (0..1 + r.below(3)).map(|_| piece(r, depth, fixed)).collect()
}

/// A simple command (sometimes an assignment first), as its words.
fn command(r: &mut Rng) -> Vec<String> {
    let mut words = Vec::new();
    if r.below(4) == 0 {
        words.push(format!("{}={}", r.pick(VARS), word(r, 1, false)));
        if r.below(2) == 0 {
            return words;
        }
    }
    for _ in 0..1 + r.below(3) {
        let fixed = words.iter().all(|w| w.contains('='));
        words.push(word(r, 1, fixed));
    }
    words
}

/// A line: commands joined by separators, as pieces a shrink can drop.
fn line(r: &mut Rng) -> Vec<Vec<String>> {
    let mut cmds = vec![command(r)];
    for _ in 0..r.below(3) {
        cmds.push(vec![[";", "&&", "||", "|", "\n"][r.below(5)].to_string()]);
        cmds.push(command(r));
    }
    cmds
}

fn render(cmds: &[Vec<String>]) -> String {
    cmds.iter().map(|c| c.join(" ")).collect::<Vec<_>>().join(" ")
}

/// The programs bash would have run for `text` (each as its argv).
fn bash_runs(text: &str, dir: &Path) -> Vec<Vec<String>> {
    let bash = bash().expect("bash on PATH");
    let log = dir.join("runs.log");
    let empty = dir.join("empty-path");
    let cwd = dir.join("cwd");
    std::fs::write(&log, "").unwrap();
    let prelude = format!(
        "exec 9>>'{}'\ncommand_not_found_handle() {{ printf '%s\\x1f' \"$@\" >&9; printf '\\n' >&9; }}\nenable -n {DISABLED}\n",
        log.display()
    );
    // The path: with `PATH` replaced, a bare name would be looked up there.
    let status = Command::new(bash)
        .args(["--norc", "--noprofile", "-c"])
        .arg(format!("{prelude}{text}"))
        .env_clear()
        .env("PATH", &empty)
        .env("HOME", &cwd)
        .current_dir(&cwd)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("bash runs");
    let _ = status;
    std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| {
            l.split('\x1f')
                .filter(|a| !a.is_empty())
                .map(str::to_string)
                .collect()
        })
        .filter(|argv: &Vec<String>| !argv.is_empty())
        .collect()
}

/// A program bash ran that the filter does not see (`None`: it sees them
/// all, or refuses the line as dynamic, which sees more).
fn missed(text: &str, dir: &Path) -> Option<String> {
    let analysis = normalize::line(text, None);
    if refused_as_dynamic(&analysis) {
        return None;
    }
    // A view is the command's words joined by spaces, so a program name
    // with a space in it (`"$(echo a b)"`) is seen when a view starts with it.
    let sees = |p: &str| {
        analysis
            .views
            .iter()
            .any(|v| v == p || v.strip_prefix(p).is_some_and(|rest| rest.starts_with(' ')))
    };
    bash_runs(text, dir)
        .into_iter()
        .find(|argv| !sees(&argv[0].to_lowercase()))
        .map(|argv| format!("bash runs {argv:?}; the filter's views: {:?}", analysis.views))
}

/// The filter refuses the whole line as undecidable: it sees more than
/// any program bash would run.
fn refused_as_dynamic(analysis: &normalize::Analysis) -> bool {
    analysis.incomplete || analysis.views.iter().any(|v| v.starts_with(normalize::DYNAMIC))
}

/// Drop commands and words while the case still fails: the smallest line
/// that shows the difference.
fn shrink(mut cmds: Vec<Vec<String>>, dir: &Path) -> String {
    loop {
        let mut smaller = None;
        'search: for i in 0..cmds.len() {
            for j in 0..cmds[i].len() {
                let mut c = cmds.clone();
                c[i].remove(j);
                if c[i].is_empty() {
                    c.remove(i);
                }
                let text = render(&c);
                if !text.is_empty() && missed(&text, dir).is_some() {
                    smaller = Some(c);
                    break 'search;
                }
            }
        }
        match smaller {
            Some(c) => cmds = c,
            None => return render(&cmds),
        }
    }
}

/// Where this process finds `bash`.
fn bash() -> Option<std::path::PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join("bash"))
        .find(|p| p.is_file())
}

/// A throw-away directory for one worker: an empty `PATH` directory, a
/// working directory with files a glob at command position can match
/// (empty, never executable), and the log of what bash ran.
fn workdir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("empty-path")).unwrap();
    std::fs::create_dir(dir.path().join("cwd")).unwrap();
    for f in ["sudo", "su", "ls"] {
        std::fs::write(dir.path().join("cwd").join(f), "").unwrap();
    }
    dir
}

/// Compare `lines` (each as its pieces): how many were compared program by
/// program, and the failures (each shrunk), at most five.
fn compare(lines: Vec<Vec<Vec<String>>>) -> (usize, Vec<String>) {
    let dir = workdir();
    let mut failures = Vec::new();
    let mut compared = 0;
    for cmds in lines {
        let text = render(&cmds);
        compared += usize::from(!refused_as_dynamic(&normalize::line(&text, None)));
        if let Some(why) = missed(&text, dir.path()) {
            let min = shrink(cmds, dir.path());
            failures.push(format!("{text:?}\n  minimal: {min:?}\n  {why}"));
            if failures.len() >= 5 {
                break;
            }
        }
    }
    (compared, failures)
}

#[test]
fn the_filter_sees_every_program_bash_would_run() {
    if bash().is_none() {
        eprintln!("no bash: the differential test is skipped");
        return;
    }
    let dir = workdir();
    // The harness itself: a program bash runs is reported.
    assert_eq!(
        bash_runs("su''do id", dir.path()),
        vec![vec!["sudo".to_string(), "id".into()]]
    );
    // What the fuzzer found once, kept: a quoted, escaped, computed or
    // brace-made reserved word, or one after an assignment, is a program.
    for found in [
        r"\do",
        r#""id" | 'do'"#,
        r#"q="$q" do"#,
        "$(echo do) x",
        "x=1 if",
        "{do,x}",
    ] {
        assert_eq!(missed(found, dir.path()), None, "{found}");
    }
    // The same lines every run, compared by four workers (each its own
    // directory): bash's start-up is most of the cost.
    let mut r = Rng(SEED);
    let lines: Vec<_> = (0..CASES).map(|_| line(&mut r)).collect();
    let chunks: Vec<Vec<_>> = lines.chunks(CASES.div_ceil(WORKERS)).map(<[_]>::to_vec).collect();
    let results: Vec<(usize, Vec<String>)> = std::thread::scope(|s| {
        let workers: Vec<_> = chunks.into_iter().map(|c| s.spawn(move || compare(c))).collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let compared: usize = results.iter().map(|r| r.0).sum();
    let failures: Vec<String> = results.into_iter().flat_map(|r| r.1).collect();
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    // Lines the filter refuses whole prove nothing: most must be compared.
    eprintln!("{compared} of {CASES} lines compared program by program");
    assert!(compared >= CASES / 2, "only {compared} of {CASES} lines compared");
}
