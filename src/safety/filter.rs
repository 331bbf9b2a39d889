//! The command filter: the rules (defaults plus `berth.toml`'s), compiled
//! once, matched against the views the normaliser makes of a job spec. A hit
//! names the rule (its pattern and reason) and the view it matched, so a
//! refusal can always be explained and, when wrong, worked around in config.

use regex::Regex;

use super::normalize;
use super::rules::DEFAULT_RULES;
use super::settings::SafetyConfig;
use crate::error::{Error, Result};
use crate::job::JobSpec;

/// One compiled rule.
#[derive(Debug, Clone)]
pub struct Rule {
    pub pattern: String,
    pub reason: String,
    regex: Regex,
}

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
    /// `$HOME` of this process, shown as `~` in views so rules see one form.
    home: Option<String>,
}

impl Filter {
    /// The rules `settings` asks for.
    pub fn new(settings: &SafetyConfig, home: Option<String>) -> Result<Self> {
        let defaults = DEFAULT_RULES
            .iter()
            .filter(|_| settings.default_blocklist)
            .map(|(p, r)| (p.to_string(), r.to_string()));
        let extra = settings
            .blocked
            .iter()
            .map(|b| (b.pattern.clone(), b.reason.clone()));
        let rules = defaults
            .chain(extra)
            .map(|(pattern, reason)| {
                let regex = Regex::new(&pattern).map_err(|e| Error::InvalidRegex {
                    pattern: pattern.clone(),
                    message: e.to_string(),
                })?;
                Ok(Rule {
                    pattern,
                    reason,
                    regex,
                })
            })
            .collect::<Result<_>>()?;
        Ok(Filter { rules, home })
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The first rule (in order) that matches any view of `spec`.
    pub fn check_spec(&self, spec: &JobSpec) -> Option<Hit> {
        let home = self.home.as_deref();
        let mut analysis = match &spec.shell {
            Some(line) => normalize::line(line, home),
            None => normalize::argv(&spec.argv, home),
        };
        // The environment can point a job at the engine (`DOCKER_HOST`) too.
        for (k, v) in &spec.env {
            analysis.views.push(format!("{k}={v}").to_lowercase());
        }
        // `sh` with `input` runs the input: it is part of the command.
        if analysis.stdin_is_script
            && let Some(input) = &spec.input
        {
            analysis.views.extend(normalize::line(input, home).views);
        }
        self.first_hit(&analysis.views)
    }

    /// The first rule that matches any view of a shell command line.
    pub fn check_line(&self, line: &str) -> Option<Hit> {
        self.first_hit(&normalize::line(line, self.home.as_deref()).views)
    }

    fn first_hit(&self, views: &[String]) -> Option<Hit> {
        self.rules.iter().find_map(|rule| {
            views.iter().find(|v| rule.regex.is_match(v)).map(|v| Hit {
                reason: rule.reason.clone(),
                pattern: rule.pattern.clone(),
                matched: v.clone(),
            })
        })
    }
}
