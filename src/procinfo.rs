//! Facts about processes from `/proc`, used wherever berth must be sure a pid
//! still means the process it recorded: a pid is only trusted together with
//! its start time (field 22 of `/proc/PID/stat`, clock ticks since boot), so
//! a pid reused by an unrelated process is never signalled.

/// Start time of `pid`, or None when it does not exist.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    field(&stat, 22)?.parse().ok()
}

/// Field `n` (1-based, as in `man proc`) of a stat line; the command name
/// (field 2) may contain spaces, so count after its closing `)`.
fn field(stat: &str, n: usize) -> Option<&str> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(n - 3)
}

/// True when `pid` runs (not a zombie) and started at `start`.
pub fn is_same_process(pid: u32, start: u64) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    field(&stat, 3) != Some("Z") && field(&stat, 22).and_then(|s| s.parse().ok()) == Some(start)
}

/// This process as `pid:start_time`: the owner of the jobs it starts.
pub fn owner_label() -> String {
    let pid = std::process::id();
    format!("{pid}:{}", start_time(pid).unwrap_or(0))
}

/// Parse an owner label back; None when malformed.
pub fn parse_owner(label: &str) -> Option<(u32, u64)> {
    let (pid, start) = label.split_once(':')?;
    Some((pid.parse().ok()?, start.parse().ok()?))
}

/// True when the manager named by `owner` is still running.
pub fn owner_alive(owner: &str) -> bool {
    parse_owner(owner).is_some_and(|(pid, start)| is_same_process(pid, start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knows_itself_and_not_a_stranger() {
        let me = owner_label();
        assert!(owner_alive(&me), "{me}");
        let (pid, start) = parse_owner(&me).unwrap();
        assert!(
            !is_same_process(pid, start + 1),
            "a different start time is another process"
        );
        assert!(!owner_alive("999999999:1"));
        assert!(!owner_alive("garbage"));
    }
}
