//! A child's limits from its job's: memory and processes out of what the
//! job's live children leave of its own limits (their sum budget), CPUs at
//! most the job's; a child asking nothing gets the defaults (less when the
//! budget is lower), and no swap beyond its memory.

use serde_json::{Map, Value, json};

use super::super::fields::int;
use super::{Budget, DEFAULT_CHILD_MEMORY, DEFAULT_CHILD_PIDS, MIN_MEMORY, Refusal};

/// Memory, processes and CPUs within the job's budget.
pub fn limits(host: &mut Map<String, Value>, b: &Budget) -> Result<(u64, i64, f64), Refusal> {
    let gib = |n: u64| format!("{:.2} GiB", n as f64 / (1u64 << 30) as f64);
    let asked = int(host, "Memory", "HostConfig")?;
    let memory = match u64::try_from(asked).ok().filter(|m| *m > 0) {
        Some(m) if m > b.memory_left => {
            return Err(Refusal::new(
                "HostConfig.Memory",
                format!(
                    "{} asked, {} of the job's memory is left for its children (the job's limit is their sum budget)",
                    gib(m),
                    gib(b.memory_left)
                ),
            ));
        }
        Some(m) => m,
        None => DEFAULT_CHILD_MEMORY.min(b.memory_left),
    };
    if memory < MIN_MEMORY {
        return Err(Refusal::new(
            "HostConfig.Memory",
            format!(
                "the job's memory budget for children is spent ({} left); remove a child first",
                gib(b.memory_left)
            ),
        ));
    }
    host.insert("Memory".into(), json!(memory));
    host.insert("MemorySwap".into(), json!(memory));
    let asked = int(host, "PidsLimit", "HostConfig")?;
    let pids = match asked {
        p if p > b.pids_left => {
            return Err(Refusal::new(
                "HostConfig.PidsLimit",
                format!(
                    "{p} asked, {} of the job's processes are left for its children",
                    b.pids_left
                ),
            ));
        }
        p if p > 0 => p,
        _ => DEFAULT_CHILD_PIDS.min(b.pids_left),
    };
    if pids < 1 {
        return Err(Refusal::new(
            "HostConfig.PidsLimit",
            "the job's process budget for children is spent; remove a child first",
        ));
    }
    host.insert("PidsLimit".into(), json!(pids));
    let nano = int(host, "NanoCpus", "HostConfig")?;
    let quota = int(host, "CpuQuota", "HostConfig")?;
    let period = int(host, "CpuPeriod", "HostConfig")?;
    let asked = if nano > 0 {
        nano as f64 / 1e9
    } else if quota > 0 {
        quota as f64 / if period > 0 { period as f64 } else { 100_000.0 }
    } else {
        b.cpus
    };
    if asked > b.cpus + 1e-9 {
        return Err(Refusal::new(
            "HostConfig.NanoCpus",
            format!("{asked} CPUs asked, a child gets at most the job's {}", b.cpus),
        ));
    }
    host.remove("CpuQuota");
    host.remove("CpuPeriod");
    host.insert("NanoCpus".into(), json!((asked * 1e9).round() as i64));
    Ok((memory, pids, asked))
}
