//! Host jobs carry a tag naming whose they are: `BERTH_JOB_TAG` in the
//! shim's (and the job's) environment, `<state hash>/<instance>/<owner>`.
//! A manager's records say which process groups are its jobs; the tag says
//! it without them, so that host jobs left by a dead manager are found even
//! when its records are not (a store found damaged and started afresh, a
//! record that never reached the disk): the same as containers, found by
//! their labels.

use crate::procinfo;

/// The environment variable that carries the tag.
pub const TAG_VAR: &str = "BERTH_JOB_TAG";

/// The tag of jobs started by manager `owner` (`pid:start_time`) of
/// `instance` in the state dir hashed to `state`.
pub fn tag(state: &str, instance: &str, owner: &str) -> String {
    format!("{state}/{instance}/{owner}")
}

/// Shims (by pid) of `instance` in the state dir hashed to `state` whose
/// manager is no longer alive: jobs nobody supervises.
pub fn orphans(state: &str, instance: &str) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let prefix = format!("{TAG_VAR}={state}/{instance}/");
    let me = procinfo::owner_label();
    dir.flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_string_lossy().parse().ok()?;
            let comm = std::fs::read(e.path().join("comm")).ok()?;
            if comm.strip_suffix(b"\n").unwrap_or(&comm) != super::shim::RUNNING_NAME.to_bytes() {
                return None;
            }
            let environ = std::fs::read(e.path().join("environ")).ok()?;
            let owner = environ
                .split(|b| *b == 0)
                .find_map(|v| v.strip_prefix(prefix.as_bytes()))
                .map(|o| String::from_utf8_lossy(o).into_owned())?;
            (owner != me && !procinfo::owner_alive(&owner)).then_some(pid)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tag_names_state_instance_and_owner() {
        assert_eq!(tag("0123abcd", "default", "42:777"), "0123abcd/default/42:777");
        // No shim carries a tag of a state dir that does not exist.
        assert!(orphans("no-such-state", "x").is_empty());
    }
}
