//! What one job made through its scoped engine: its children (with their
//! limits, network slot, relays and state), exec instances, networks and
//! volumes. Every reference a job sends is resolved here and only here: an
//! id, id prefix or name that is not one of the job's own is "no such"
//! (404), whatever the engine holds, so a job learns nothing of other
//! containers, not even that they exist.
//!
//! Held under a `std::sync::Mutex` for short sections (never across an
//! engine call); a create reserves its child first ([`Registry::reserve`]),
//! so concurrent creates cannot pass the child limit or the budget together.

use std::collections::BTreeSet;
use std::net::IpAddr;

use super::check::{Budget, Lookup};
use super::relay::Relay;
use crate::model::{ChildInfo, ChildPort, ChildState};
use crate::runner::docker::pool::Slot;

/// One child of the job.
pub struct Child {
    /// Set once the engine made it (empty while the create is under way).
    pub id: String,
    /// The name the job knows it by (its own, else `<image>-<n>`).
    pub name: String,
    /// The engine's name (`<job container>-<name>`): unique on the engine.
    pub engine_name: String,
    pub image: String,
    pub state: ChildState,
    pub exit_code: Option<i64>,
    pub memory: u64,
    pub pids: i64,
    /// The pool network the child has to itself.
    pub slot: Option<Slot>,
    pub ip: Option<IpAddr>,
    pub relay: Option<Relay>,
}

/// A network the job made: the name it gave, the engine's id and name.
pub struct JobNetwork {
    pub asked: String,
    pub id: String,
    pub engine_name: String,
}

/// The job's engine objects.
pub struct Registry {
    /// `<job container name>`: children's and objects' names start with it,
    /// and their `berth.parent` label says it.
    pub parent: String,
    pub max_children: usize,
    /// The job's own limits: its children's sum budget.
    pub cpus: f64,
    pub memory: u64,
    pub pids: i64,
    pub children: Vec<Child>,
    pub execs: BTreeSet<String>,
    pub networks: Vec<JobNetwork>,
    /// (name the job gave, engine name).
    pub volumes: Vec<(String, String)>,
    /// Children made so far (for `<image>-<n>` names).
    made: usize,
    /// Networks and volumes asked of the engine and not yet answered: they
    /// count against the limits, so creates at once cannot pass them together.
    pub making: [usize; 2],
}

impl Registry {
    pub fn new(parent: String, max_children: usize, cpus: f64, memory: u64, pids: i64) -> Self {
        Registry {
            parent,
            max_children,
            cpus,
            memory,
            pids,
            children: Vec::new(),
            execs: BTreeSet::new(),
            networks: Vec::new(),
            volumes: Vec::new(),
            made: 0,
            making: [0; 2],
        }
    }

    /// Children that still hold something (not removed).
    fn live(&self) -> impl Iterator<Item = &Child> {
        self.children.iter().filter(|c| c.state != ChildState::Removed)
    }

    /// What the live children leave of the job's budget.
    pub fn budget(&self) -> Budget {
        let (mem, pids) = self
            .live()
            .fold((0u64, 0i64), |(m, p), c| (m + c.memory, p + c.pids));
        Budget {
            cpus: self.cpus,
            memory_left: self.memory.saturating_sub(mem),
            pids_left: (self.pids - pids).max(0),
        }
    }

    /// How many live children the job has (pending creates included).
    pub fn count(&self) -> usize {
        self.live().count()
    }

    /// A name for a child: the one asked (checked), else `<image>-<n>`.
    pub fn name_for(&self, asked: Option<&str>, image: &str) -> Result<String, String> {
        if let Some(a) = asked.map(|a| a.trim_start_matches('/')) {
            let ok = !a.is_empty()
                && a.len() <= 64
                && a.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
                && a.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
            if !ok {
                return Err(format!(
                    "`{a}` is not a container name ([a-zA-Z0-9][a-zA-Z0-9_.-]*, up to 64)"
                ));
            }
            if self.live().any(|c| c.name == a) {
                return Err(format!("the job already has a container named `{a}`"));
            }
            return Ok(a.to_string());
        }
        let base = image
            .rsplit('/')
            .next()
            .unwrap_or(image)
            .split([':', '@'])
            .next()
            .unwrap_or("child");
        let base: String = base
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || "_.-".contains(*c))
            .take(40)
            .collect();
        let base = if base.is_empty() { "child".into() } else { base };
        let mut n = self.made + 1;
        loop {
            let name = format!("{base}-{n}");
            if !self.children.iter().any(|c| c.name == name) {
                return Ok(name);
            }
            n += 1;
        }
    }

    /// Hold a place for a child being created (counted and budgeted).
    pub fn reserve(&mut self, name: String, image: String, memory: u64, pids: i64, slot: Option<Slot>) {
        let engine_name = format!("{}-{name}", self.parent);
        self.made += 1;
        self.children.push(Child {
            id: String::new(),
            name,
            engine_name,
            image,
            state: ChildState::Created,
            exit_code: None,
            memory,
            pids,
            slot,
            ip: None,
            relay: None,
        });
    }

    /// The child being created under `name` (still without an id).
    pub fn pending(&mut self, name: &str) -> Option<&mut Child> {
        self.children
            .iter_mut()
            .find(|c| c.name == name && c.id.is_empty() && c.state != ChildState::Removed)
    }

    /// Drop a reservation whose create failed; its slot goes back.
    pub fn unreserve(&mut self, name: &str) -> Option<Child> {
        let at = self
            .children
            .iter()
            .position(|c| c.name == name && c.id.is_empty())?;
        Some(self.children.remove(at))
    }

    /// The live child `r` names: its full id, a unique prefix of it, its
    /// name or its engine name (with or without the leading `/`).
    pub fn find(&self, r: &str) -> Option<&Child> {
        let r = r.trim_start_matches('/');
        if r.is_empty() {
            return None;
        }
        let live = || self.live().filter(|c| !c.id.is_empty());
        if let Some(c) = live().find(|c| c.id == r || c.name == r || c.engine_name == r) {
            return Some(c);
        }
        let mut by_prefix = live().filter(|c| c.id.starts_with(r));
        match (by_prefix.next(), by_prefix.next()) {
            (Some(c), None) => Some(c),
            _ => None,
        }
    }

    pub fn find_mut(&mut self, id: &str) -> Option<&mut Child> {
        self.children
            .iter_mut()
            .find(|c| c.id == id && c.state != ChildState::Removed)
    }

    /// True when `r` named a child of this job that is gone now (a late
    /// request of the job's own, not a probe of someone else's).
    pub fn was_child(&self, r: &str) -> bool {
        let r = r.trim_start_matches('/');
        !r.is_empty()
            && self
                .children
                .iter()
                .any(|c| !c.id.is_empty() && (c.id.starts_with(r) || c.name == r || c.engine_name == r))
    }

    pub fn network_of(&self, r: &str) -> Option<&JobNetwork> {
        self.networks.iter().find(|n| {
            n.asked == r || n.id == r || n.engine_name == r || (r.len() >= 6 && n.id.starts_with(r))
        })
    }

    /// The engine's name for the job's volume `name`.
    pub fn volume_name(&self, name: &str) -> String {
        self.volumes
            .iter()
            .find(|(asked, real)| asked == name || real == name)
            .map(|(_, real)| real.clone())
            .unwrap_or_else(|| format!("{}-{name}", self.parent))
    }

    /// The children as the record shows them.
    pub fn infos(&self) -> Vec<ChildInfo> {
        self.children
            .iter()
            .filter(|c| !c.id.is_empty())
            .map(|c| ChildInfo {
                name: c.name.clone(),
                id: c.id.chars().take(12).collect(),
                image: c.image.clone(),
                state: c.state,
                exit_code: c.exit_code,
                ports: c
                    .relay
                    .as_ref()
                    .map(|r| {
                        r.ports()
                            .iter()
                            .map(|(port, at)| ChildPort {
                                port: *port,
                                host_ip: at.ip().to_string(),
                                host_port: at.port(),
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
            })
            .collect()
    }
}

impl Lookup for Registry {
    fn child(&self, r: &str) -> Option<String> {
        self.find(r).map(|c| c.id.clone())
    }
    fn network(&self, r: &str) -> Option<String> {
        self.network_of(r).map(|n| n.id.clone())
    }
    fn volume(&self, name: &str) -> String {
        self.volume_name(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_children(ids: &[(&str, &str)]) -> Registry {
        let mut r = Registry::new("berth-i-abcd-job-1".into(), 8, 2.0, 1 << 30, 512);
        for (id, name) in ids {
            r.reserve(name.to_string(), "img".into(), 256 << 20, 100, None);
            r.pending(name).unwrap().id = id.to_string();
        }
        r
    }

    #[test]
    fn only_the_jobs_own_children_resolve() {
        let r = with_children(&[("aaaa1111", "db"), ("aaab2222", "web")]);
        assert_eq!(r.child("db"), Some("aaaa1111".into()));
        assert_eq!(r.child("/web"), Some("aaab2222".into()));
        assert_eq!(r.child("aaaa"), Some("aaaa1111".into()));
        assert_eq!(r.child("aaa"), None, "an ambiguous prefix names none");
        assert_eq!(r.child("berth-i-abcd-job-1-db"), Some("aaaa1111".into()));
        assert_eq!(r.child("f00d"), None);
        assert_eq!(r.child(""), None);
        let b = r.budget();
        assert_eq!((b.memory_left, b.pids_left), ((1 << 30) - (512 << 20), 312));
    }

    #[test]
    fn names_are_checked_and_made_up() {
        let r = with_children(&[("aaaa1111", "db")]);
        assert!(r.name_for(Some("db"), "x").is_err());
        assert!(r.name_for(Some("../x"), "x").is_err());
        assert_eq!(r.name_for(Some("/cache"), "x").unwrap(), "cache");
        assert_eq!(
            r.name_for(None, "docker.io/library/postgres:16").unwrap(),
            "postgres-2"
        );
    }
}
