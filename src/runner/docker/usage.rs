//! Resource usage of a container job as `list` shows it: CPU % from two
//! stats samples and memory without the reclaimable page cache, the same
//! arithmetic as `docker stats`. Also what [`super::Engine::usage`] accepts.

use bollard::models::ContainerStatsResponse;

use crate::model::{JobInfo, Usage};

/// What [`super::Engine::usage`] can be asked about: a container id, or a job
/// record (which has a container only when it ran on Docker).
pub trait UsageTarget {
    fn container_id(&self) -> Option<&str>;
}

impl UsageTarget for str {
    fn container_id(&self) -> Option<&str> {
        Some(self)
    }
}

impl UsageTarget for String {
    fn container_id(&self) -> Option<&str> {
        Some(self)
    }
}

impl UsageTarget for JobInfo {
    fn container_id(&self) -> Option<&str> {
        self.container_id.as_deref()
    }
}

/// CPU % and memory between two stats samples, computed like `docker stats`:
/// container CPU time over system CPU time, times the online CPUs; memory
/// without the reclaimable page cache.
pub(super) fn between(first: &ContainerStatsResponse, second: &ContainerStatsResponse) -> Usage {
    let cpu = |s: &ContainerStatsResponse| {
        let c = s.cpu_stats.as_ref();
        let total = c
            .and_then(|c| c.cpu_usage.as_ref())
            .and_then(|u| u.total_usage)
            .unwrap_or(0);
        let system = c.and_then(|c| c.system_cpu_usage).unwrap_or(0);
        let online = c
            .and_then(|c| c.online_cpus)
            .filter(|n| *n > 0)
            .or_else(|| {
                c.and_then(|c| c.cpu_usage.as_ref())
                    .and_then(|u| u.percpu_usage.as_ref())
                    .map(|v| v.len() as u32)
            })
            .unwrap_or(1);
        (total, system, online)
    };
    let (t1, s1, _) = cpu(first);
    let (t2, s2, online) = cpu(second);
    let cpu_percent = if s2 > s1 && t2 >= t1 {
        (t2 - t1) as f64 / (s2 - s1) as f64 * online as f64 * 100.0
    } else {
        0.0
    };
    let memory_bytes = second
        .memory_stats
        .as_ref()
        .map(|m| {
            let usage = m.usage.unwrap_or(0);
            let cache = m
                .stats
                .as_ref()
                .and_then(|s| s.get("inactive_file").or_else(|| s.get("total_inactive_file")))
                .copied()
                .unwrap_or(0);
            usage.saturating_sub(cache)
        })
        .unwrap_or(0);
    Usage {
        cpu_percent,
        memory_bytes,
    }
}
