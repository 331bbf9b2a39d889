//! History retention: which finished runs to forget, and forgetting them
//! everywhere at once (the store, the registry, the job's directory with its
//! raw log files). Running and queued jobs are never pruned.
//!
//! The policy is `keep_runs` (the newest N finished runs stay) and
//! `keep_days` (finished runs that ended longer ago go); the daemon applies it
//! when it starts and every hour, and `berth prune` applies it on demand, or
//! prunes every finished run (`--all`) or those older than a given age.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{Manager, number};
use crate::error::{Error, Result};
use crate::model::JobId;

/// What `prune` removes; the default is the configured policy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PruneRequest {
    /// Every finished run.
    #[serde(default)]
    pub all: bool,
    /// Only finished runs that ended more than this many seconds ago.
    #[serde(default)]
    pub older_than_secs: Option<f64>,
}

/// What `prune` removed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PruneOutcome {
    pub pruned: Vec<JobId>,
    /// Finished runs still kept.
    pub kept: usize,
    /// Idle layers removed by `layer_days` (a prune by the policy only:
    /// `--all` and `--older-than` are about runs, not unapplied work).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layers: Vec<String>,
}

/// Jobs listed in a page of history: at most this many unless asked otherwise.
pub const DEFAULT_LIST_LIMIT: usize = 50;

/// A page of a job list: newest first, only jobs numbered below `before`
/// (the id of the last job of the previous page), at most `limit`.
pub fn newest_first(
    mut jobs: Vec<crate::model::JobInfo>,
    before: Option<&JobId>,
    limit: usize,
) -> Vec<crate::model::JobInfo> {
    let below = before.and_then(number).unwrap_or(u64::MAX);
    jobs.retain(|j| number(&j.id).is_some_and(|n| n < below));
    jobs.sort_by_key(|j| std::cmp::Reverse(number(&j.id).unwrap_or(0)));
    jobs.truncate(limit);
    jobs
}

/// The finished runs to prune, given (id, ended_at) of every finished run.
fn select(
    mut finished: Vec<(JobId, Option<DateTime<Utc>>)>,
    req: &PruneRequest,
    keep_runs: usize,
    keep_days: f64,
    now: DateTime<Utc>,
) -> Vec<JobId> {
    if req.all {
        return finished.into_iter().map(|(id, _)| id).collect();
    }
    let age = |secs: f64| chrono::Duration::milliseconds((secs * 1000.0) as i64);
    // Newest first: the first `keep_runs` are kept by count.
    finished.sort_by_key(|(id, _)| std::cmp::Reverse(number(id).unwrap_or(0)));
    let (cutoff, by_count) = match req.older_than_secs {
        Some(secs) => (now - age(secs), false),
        None => (now - age(keep_days * 86_400.0), true),
    };
    finished
        .into_iter()
        .enumerate()
        .filter(|(i, (_, ended))| (by_count && *i >= keep_runs) || ended.is_some_and(|t| t < cutoff))
        .map(|(_, (id, _))| id)
        .collect()
}

impl Manager {
    /// Forget finished runs: by the configured policy, every one (`all`), or
    /// those that ended more than `older_than_secs` ago.
    pub fn prune(&self, req: &PruneRequest) -> Result<PruneOutcome> {
        if let Some(secs) = req.older_than_secs
            && !(secs.is_finite() && secs >= 0.0)
        {
            return Err(Error::InvalidValue {
                what: "older_than",
                input: secs.to_string(),
                message: "must be zero or more seconds".into(),
            });
        }
        let inner = &self.inner;
        let mut finished: Vec<_> = {
            let reg = inner.registry.lock().unwrap();
            reg.jobs
                .values()
                .filter(|e| e.info.status.is_terminal() && e.live.is_none())
                .map(|e| (e.info.id.clone(), e.info.ended_at))
                .collect()
        };
        // And those only in the store (let go of memory, `finished.rs`).
        let in_memory = |n| inner.registry.lock().unwrap().jobs.contains_key(&n);
        finished.extend(
            inner
                .stored_finished(in_memory)
                .into_iter()
                .map(|i| (i.id, i.ended_at)),
        );
        let total = finished.len();
        let ids = select(
            finished,
            req,
            inner.config.keep_runs,
            inner.config.keep_days,
            Utc::now(),
        );
        // The store first: if it fails, nothing is forgotten anywhere.
        inner.store.prune(&ids)?;
        {
            let mut reg = inner.registry.lock().unwrap();
            for id in &ids {
                if let Some(n) = number(id) {
                    reg.jobs.remove(&n);
                }
            }
        }
        let jobs_dir = inner.config.instance_dir().join("jobs");
        for id in &ids {
            let _ = std::fs::remove_dir_all(jobs_dir.join(id.as_str()));
        }
        if !ids.is_empty() {
            tracing::info!(pruned = ids.len(), kept = total - ids.len(), "history pruned");
        }
        let layers = match req.all || req.older_than_secs.is_some() {
            true => Vec::new(),
            false => inner.layers.prune(inner.config.layer_days),
        };
        if !layers.is_empty() {
            tracing::info!(?layers, "idle layers pruned (layer_days)");
        }
        Ok(PruneOutcome {
            kept: total - ids.len(),
            pruned: ids,
            layers,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(now: DateTime<Utc>, ages_days: &[i64]) -> Vec<(JobId, Option<DateTime<Utc>>)> {
        ages_days
            .iter()
            .enumerate()
            .map(|(i, d)| {
                (
                    JobId::from_number(i as u64 + 1),
                    Some(now - chrono::Duration::days(*d)),
                )
            })
            .collect()
    }

    fn names(ids: Vec<JobId>) -> Vec<String> {
        let mut v: Vec<String> = ids.into_iter().map(|i| i.to_string()).collect();
        v.sort();
        v
    }

    #[test]
    fn the_policy_keeps_the_newest_runs_and_drops_old_ones() {
        let now = Utc::now();
        // job-1 … job-5, ended 10, 8, 3, 2, 1 days ago.
        let all = runs(now, &[10, 8, 3, 2, 1]);
        let policy = PruneRequest::default();
        assert_eq!(
            names(select(all.clone(), &policy, 500, 7.0, now)),
            ["job-1", "job-2"]
        );
        // Keep only the newest two by count.
        assert_eq!(
            names(select(all.clone(), &policy, 2, 30.0, now)),
            ["job-1", "job-2", "job-3"]
        );
        // An explicit age ignores the count.
        let older = PruneRequest {
            older_than_secs: Some(2.5 * 86_400.0),
            ..Default::default()
        };
        assert_eq!(
            names(select(all.clone(), &older, 1, 7.0, now)),
            ["job-1", "job-2", "job-3"]
        );
        let every = PruneRequest {
            all: true,
            ..Default::default()
        };
        assert_eq!(select(all, &every, 500, 7.0, now).len(), 5);
    }
}
