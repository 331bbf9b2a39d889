//! The filter's cost is bounded: pathological commands just under the size
//! cap are decided (blocked or not) within a bound of CPU time (the feature)
//! and without unbounded memory, anything over the cap is refused unread as
//! `too long to check`, one budget holds for every walker of a check and
//! stops them all, and checks past the per-manager limit are refused as busy.

use std::time::Duration;

use super::budget::Budget;
use super::filter::{Filter, MAX_INPUT, TOO_LONG};
use crate::config::SafetyConfig;
use crate::model::JobSpec;

/// Repeat `unit` (after `head`) until the command is just under the cap.
fn fill(head: &str, unit: &str, tail: &str) -> String {
    let n = (MAX_INPUT - head.len() - tail.len() - 16) / unit.len();
    format!("{head}{}{tail}", unit.repeat(n))
}

/// Commands built to make a naive shell analyser quadratic or worse.
pub(crate) fn pathological() -> Vec<(&'static str, String)> {
    vec![
        ("unclosed functions", fill("", "f(){ ", "")),
        ("nested substitutions", fill("", "$(", "")),
        ("nested parameter expansions", fill("", "${", "")),
        ("nested arithmetic", fill("", "$((", "")),
        ("open braces in one word", fill("x", "{", "")),
        ("brace lists in one word", fill("x", "{a,b}", "")),
        ("doubling variable", fill("a=xxxxxxxx;", "a=$a$a;", "$a")),
        ("wrappers", fill("", "nohup ", "sudo id")),
        ("keywords", fill("", "if ", "true")),
        ("one long quoted word", fill("echo \"", "x", "\"")),
        ("long pipeline", fill("", "a|", "a")),
        ("many commands", fill("", "a;", "")),
        (
            "many distinct commands",
            (0..8000).map(|i| format!("c{i};")).collect::<String>(),
        ),
        ("assignments then substitutions", {
            let vars: String = (0..3000).map(|i| format!("v{i}=1;")).collect();
            fill(&vars, "$(x)", "")
        }),
        ("assignments then sh -c", {
            let vars: String = (0..3000).map(|i| format!("v{i}=1;")).collect();
            fill(&vars, "sh -c x;", "")
        }),
        ("backticks", fill("", "`", "")),
        ("unterminated quote", fill("'", "x", "")),
        ("here-documents", fill("", "cat <<E\n", "")),
        ("nested echo substitutions", fill("", "$(echo ", "")),
        ("find -exec chains", fill("find . ", "-exec ", "")),
        ("globs", fill("", "/*/*/*/*/ ", "")),
    ]
}

#[test]
fn pathological_commands_under_the_cap_are_decided_within_two_cpu_seconds() {
    let filter = Filter::new(&SafetyConfig::default(), None).unwrap();
    let mut slow = Vec::new();
    for (name, cmd) in pathological() {
        assert!(cmd.len() <= MAX_INPUT, "{name}: {}", cmd.len());
        // CPU time of this thread, so other work on the machine does not count.
        let start = super::budget::thread_cpu();
        let hit = filter.check_spec(&JobSpec::shell(cmd));
        let took = super::budget::thread_cpu() - start;
        eprintln!("{name}: {took:?} {:?}", hit.map(|h| h.pattern));
        // Generous for a debug build; the release build is far below the
        // daemon's 100 ms budget.
        if took > Duration::from_secs(2) {
            slow.push(format!("{name}: {took:?}"));
        }
    }
    assert!(slow.is_empty(), "{slow:?}");
}

#[test]
fn over_the_cap_is_refused_without_reading() {
    let filter = Filter::new(&SafetyConfig::default(), None).unwrap();
    let cmd = "f(){ ".repeat(300_000 / 5);
    // Refused for its size: the normaliser never took a step on it (every
    // step it takes is charged to the budget), and the reason names the size,
    // not a spent budget.
    let budget = Budget::steps_only();
    let hit = filter
        .check_spec_in(&JobSpec::shell(cmd), None, &budget)
        .expect("refused");
    assert_eq!(budget.steps(), 0, "the command was read");
    assert_eq!(hit.pattern, TOO_LONG);
    assert!(
        hit.reason
            .starts_with("too long to check: the command is 300000 bytes,"),
        "{}",
        hit.reason
    );
    // Every part of the spec counts: a huge environment or input too.
    let mut spec = JobSpec::shell("true");
    spec.env.insert("X".into(), "x".repeat(MAX_INPUT));
    assert_eq!(
        filter.check_spec(&spec).map(|h| h.pattern).as_deref(),
        Some(TOO_LONG)
    );
    // With no rules there is nothing to check and nothing is refused.
    let none = Filter::new(&SafetyConfig::default().with_default_blocklist(false), None).unwrap();
    assert!(
        none.check_spec(&JobSpec::shell("x".repeat(MAX_INPUT * 2)))
            .is_none()
    );
}

#[test]
fn a_passed_deadline_is_a_refusal() {
    let filter = Filter::new(&SafetyConfig::default(), None).unwrap();
    let cmd = fill("", "a;", "");
    let hit = filter
        .check_spec_in(
            &JobSpec::shell(cmd),
            None,
            &super::budget::Budget::new(u64::MAX, Some(Duration::ZERO)),
        )
        .expect("refused");
    assert_eq!(hit.pattern, TOO_LONG);
}

#[test]
fn random_shell_text_never_panics() {
    // A fixed-seed generator over the characters the lexer treats specially.
    const ALPHABET: &[&str] = &[
        "$", "(", ")", "{", "}", "[", "]", "'", "\"", "`", "\\", "\n", "\t", " ", ";", "|", "&", "<", ">",
        "<<", "<<-", "EOF", "-", "=", ",", "*", "?", "!", "#", "~", "/", "a", "sh", "-c", "sudo", "IFS", "x",
        "0", "1", "@", ":", "%", "^", "\u{a0}", "\u{200b}", "é", "f(){ ", "$((", "${", "$(",
    ];
    let filter = Filter::new(&SafetyConfig::default(), Some("/home/me".into())).unwrap();
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..3000 {
        let len = (next() % 60) as usize;
        let cmd: String = (0..len)
            .map(|_| ALPHABET[(next() % ALPHABET.len() as u64) as usize])
            .collect();
        // Must return (either way) without panicking.
        let _ = filter.check_spec(&JobSpec::shell(cmd.clone()));
        let argv: Vec<String> = cmd.split(' ').map(str::to_string).collect();
        let _ = filter.check_spec(&JobSpec::argv(argv));
    }
}

/// The red team's nested-brace command (see `tests/suite/safety/cost.rs`).
fn nested_braces() -> String {
    let inner = format!("echo {}xx", "{a..p}".repeat(36));
    format!("{}{inner}{}", "{a..p}$(".repeat(8), ")".repeat(8))
}

#[test]
fn each_part_of_a_braced_word_is_walked_once() {
    // 16 words per level, 8 levels: walking the substitution once per word
    // would be 16^8 walks; once per part it is a few hundred steps.
    let filter = Filter::new(&SafetyConfig::default(), None).unwrap();
    let budget = Budget::new(1_000_000, None);
    let hit = filter
        .check_spec_in(&JobSpec::shell(nested_braces()), None, &budget)
        .expect("refused");
    assert_ne!(hit.pattern, TOO_LONG, "decided, not given up on");
    assert!(budget.steps() < 20_000, "{} steps", budget.steps());
}

#[test]
fn one_step_budget_holds_for_every_walker_of_a_check() {
    // Substitutions evaluated by scratch walkers spend the same budget: a
    // line made of them is refused once the shared count runs out.
    let filter = Filter::new(&SafetyConfig::default(), None).unwrap();
    let cmd = "echo $(echo $(echo $(echo x)))".repeat(50);
    let whole = Budget::new(u64::MAX, None);
    assert!(
        filter
            .check_spec_in(&JobSpec::shell(cmd.clone()), None, &whole)
            .is_none()
    );
    let short = Budget::new(whole.steps() / 2, None);
    let hit = filter
        .check_spec_in(&JobSpec::shell(cmd), None, &short)
        .expect("refused");
    assert_eq!(hit.pattern, TOO_LONG);
}

#[test]
fn a_stopped_budget_stops_the_check_at_once() {
    let filter = Filter::new(&SafetyConfig::default(), None).unwrap();
    let budget = Budget::new(u64::MAX, None);
    budget.stop();
    let hit = filter
        .check_spec_in(&JobSpec::shell("true"), None, &budget)
        .expect("refused");
    assert_eq!(hit.pattern, TOO_LONG);
    assert!(hit.reason.contains("not decided in time"), "{}", hit.reason);
    assert!(budget.steps() <= 1, "{} steps after the stop", budget.steps());
}

#[tokio::test]
async fn checks_past_the_limit_wait_then_are_refused_as_busy() {
    use super::{MAX_CHECKS, Safety};
    use crate::error::Error;
    let dir = tempfile::tempdir().unwrap();
    let config = crate::config::Config::isolated(dir.path().join("state"), "busy").with_workspace(dir.path());
    let safety = Safety::from_config(&config).unwrap();
    // A project's safety shares the manager's places.
    let project = safety.for_project(&config).unwrap();
    let held: Vec<_> = (0..MAX_CHECKS)
        .map(|_| safety.checks.clone().try_acquire_owned().unwrap())
        .collect();
    let started = std::time::Instant::now();
    let err = project
        .check_bounded(&JobSpec::shell("true"), dir.path(), "test")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::FilterBusy { running: MAX_CHECKS }), "{err}");
    assert_eq!((err.code(), err.http_status()), ("filter_busy", 503));
    assert!(!err.to_string().contains('\n'), "one line: {err}");
    assert!(
        started.elapsed() >= super::CHECK_QUEUE_WAIT,
        "it waited for a place first"
    );
    drop(held);
    project
        .check_bounded(&JobSpec::shell("true"), dir.path(), "test")
        .await
        .expect("a free place: checked");
}
