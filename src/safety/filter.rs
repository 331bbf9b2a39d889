//! The command filter: the rules (defaults plus `berth.toml`'s), compiled
//! once, matched against the views the normaliser makes of a job spec. A hit
//! names the rule (its pattern and reason) and the view it matched, so a
//! refusal can always be explained and, when wrong, worked around in config.
//!
//! The filter fails closed on what it cannot afford to read: a command over
//! [`MAX_INPUT`] bytes, or one whose analysis hits the normaliser's caps or
//! spends its [`Budget`], is refused as `too long to check`.

use std::path::Path;

use regex::{Regex, RegexSet};

use super::budget::{Budget, Spent};

use super::normalize;
use super::rules::{DEFAULT_RULES, exception};
use crate::config::SafetyConfig;
use crate::error::{Error, Result};
use crate::model::JobSpec;

/// One compiled rule.
#[derive(Debug, Clone)]
pub struct Rule {
    pub pattern: String,
    pub reason: String,
    /// Views this rule lets through although they match (mentions, not uses).
    unless: Option<Regex>,
}

/// Longest command (shell line, argv, input and environment together) the
/// filter reads; anything longer is refused as undecidable.
pub const MAX_INPUT: usize = 64 << 10;

/// The pattern named by a refusal the filter decided without its rules.
pub const TOO_LONG: &str = "too long to check";

/// Why a command is refused.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub reason: String,
    pub pattern: String,
    /// The normalised view the pattern matched (e.g. `sudo id` for `$(echo su)do id`).
    pub matched: String,
}

/// The compiled blocklist.
#[derive(Debug, Clone)]
pub struct Filter {
    rules: Vec<Rule>,
    /// All the rules' patterns, matched in one pass per view.
    set: RegexSet,
    /// `$HOME` of this process, shown as `~` in views so rules see one form.
    home: Option<String>,
}

impl Filter {
    /// The rules `settings` asks for.
    pub fn new(settings: &SafetyConfig, home: Option<String>) -> Result<Self> {
        let defaults = DEFAULT_RULES
            .iter()
            .filter(|_| settings.default_blocklist)
            .map(|(p, r)| (p.to_string(), r.to_string(), exception(p)));
        let extra = settings
            .blocked
            .iter()
            .map(|b| (b.pattern.clone(), b.reason.clone(), None));
        let compile = |pattern: &str| {
            Regex::new(pattern).map_err(|e| Error::InvalidRegex {
                pattern: pattern.to_string(),
                message: e.to_string(),
            })
        };
        let rules = defaults
            .chain(extra)
            .map(|(pattern, reason, unless)| {
                // Compiled alone first, so a bad pattern is named in the error.
                compile(&pattern)?;
                Ok(Rule {
                    unless: unless.map(compile).transpose()?,
                    pattern,
                    reason,
                })
            })
            .collect::<Result<Vec<Rule>>>()?;
        let set = RegexSet::new(rules.iter().map(|r| &r.pattern)).map_err(|e| Error::InvalidRegex {
            pattern: "(the rules together)".into(),
            message: e.to_string(),
        })?;
        Ok(Filter { rules, set, home })
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The first rule (in order) that matches any view of `spec`, decided
    /// on this thread within [`MAX_STEPS`](super::budget::MAX_STEPS) steps.
    pub fn check_spec(&self, spec: &JobSpec) -> Option<Hit> {
        self.check_spec_in(spec, None, &Budget::steps_only())
    }

    /// [`check_spec`](Self::check_spec) for a job run in `cwd` (paths that
    /// climb out of it are resolved), spending `budget`: a spent or stopped
    /// budget is a refusal.
    pub fn check_spec_in(&self, spec: &JobSpec, cwd: Option<&Path>, budget: &Budget) -> Option<Hit> {
        if self.rules.is_empty() {
            return None;
        }
        if let Some(hit) = self.check_size(spec) {
            return Some(hit);
        }
        budget.start();
        let env: Vec<(String, String)> = spec.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let cwd = cwd.and_then(Path::to_str);
        let place = normalize::Place {
            home: self.home.as_deref(),
            cwd,
            env: &env,
        };
        let mut analysis = match &spec.shell {
            Some(line) => normalize::analyse(line, &place, budget),
            None => normalize::argv(&spec.argv, &place, budget),
        };
        // The environment can point a job at the engine (`DOCKER_HOST`) too.
        for (k, v) in &spec.env {
            analysis.views.push(format!("{k}={v}").to_lowercase());
        }
        // `sh` with `input` runs the input: it is part of the command.
        if analysis.stdin_is_script
            && let Some(input) = &spec.input
        {
            let script = normalize::analyse(input, &place, budget);
            analysis.incomplete |= script.incomplete;
            analysis.views.extend(script.views);
        }
        if analysis.incomplete {
            return Some(too_long(match budget.spent() {
                Some(Spent::Cancelled) => "not decided in time".into(),
                _ => "more than the filter reads in its time and memory budget".into(),
            }));
        }
        self.first_hit(&analysis.views)
    }

    /// The refusal of a spec too big to read (over [`MAX_INPUT`] bytes in
    /// all), decided without reading it.
    pub fn check_size(&self, spec: &JobSpec) -> Option<Hit> {
        if self.rules.is_empty() {
            return None;
        }
        let size = spec.shell.as_ref().map_or(0, String::len)
            + spec.argv.iter().map(|a| a.len() + 1).sum::<usize>()
            + spec.input.as_ref().map_or(0, String::len)
            + spec.env.iter().map(|(k, v)| k.len() + v.len() + 2).sum::<usize>();
        (size > MAX_INPUT).then(|| too_long(format!("{size} bytes")))
    }

    /// The first rule that matches any view of a shell command line.
    pub fn check_line(&self, line: &str) -> Option<Hit> {
        self.check_spec(&JobSpec::shell(line))
    }

    /// The first rule (in order) that matches a view, with the first view it
    /// matches. One pass of the combined set per view; the rules' own regexes
    /// only for exceptions.
    fn first_hit(&self, views: &[String]) -> Option<Hit> {
        let mut best: Option<(usize, &String)> = None;
        for v in views {
            for idx in self.set.matches(v).iter() {
                if best.is_some_and(|(b, _)| b <= idx) {
                    break;
                }
                if self.rules[idx].unless.as_ref().is_some_and(|u| u.is_match(v)) {
                    continue;
                }
                best = Some((idx, v));
                break;
            }
        }
        best.map(|(idx, v)| Hit {
            reason: self.rules[idx].reason.clone(),
            pattern: self.rules[idx].pattern.clone(),
            matched: v.clone(),
        })
    }
}

/// The refusal of a command the filter could not afford to read.
pub fn too_long(what: String) -> Hit {
    Hit {
        reason: format!(
            "{TOO_LONG}: the command is {what}, so the filter cannot decide it; shorten it or put the script in a file in the workspace"
        ),
        pattern: TOO_LONG.into(),
        matched: String::new(),
    }
}
