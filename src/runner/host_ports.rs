//! Published ports of host jobs: which number a job is told to serve on, and
//! what it was actually seen to bind.
//!
//! Why this differs from containers: a host job shares the machine's port
//! space and nothing relays for it, so a mapping `127.0.0.1:21741→8000` would
//! be a fiction (Getting started's app, fixed on 8000, served on 0.0.0.0:8000 while
//! berth waited on 21741). So a published port keeps its own number when it is
//! free (`PORT=8000`); only a busy one that was not asked for explicitly is
//! replaced (with a note, and the job is told the new number); an explicit
//! host port (`-p 3000:8080`) that is busy is refused in one line, never
//! remapped. Numbers handed to jobs of this process stay reserved until the
//! job ends, so two jobs started at once are not both told `PORT=8000` in the
//! moment before either binds.
//!
//! Readiness and the card look at what the job actually bound (see
//! `net::bound`).

use std::collections::HashSet;
use std::sync::Mutex;

use crate::error::{Error, Result};
use crate::model::{JobInfo, JobSpec, PortMapping, RunnerKind};

/// Host ports handed to running host jobs of this process.
static RESERVED: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// The ports a host job was given; released when dropped (its job ended).
#[derive(Debug)]
pub struct Reservation(Vec<u16>);

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut set = RESERVED.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(set) = set.as_mut() {
            for p in &self.0 {
                set.remove(p);
            }
        }
    }
}

/// Pick the ports a host job will serve on, with `is_free` telling whether
/// the machine has a port free (the kernel's view; tests pass their own).
pub fn pick(spec: &JobSpec) -> Result<(Vec<PortMapping>, Reservation)> {
    pick_with(spec, portpicker::is_free, portpicker::pick_unused_port)
}

fn pick_with(
    spec: &JobSpec,
    is_free: impl Fn(u16) -> bool,
    any_free: impl Fn() -> Option<u16>,
) -> Result<(Vec<PortMapping>, Reservation)> {
    let mut guard = RESERVED.lock().unwrap_or_else(|p| p.into_inner());
    let reserved = guard.get_or_insert_with(HashSet::new);
    // Plain numbers until the lock is let go: a Reservation dropped under
    // it (an error return) would take the lock again.
    let mut mine: Vec<u16> = Vec::new();
    let mut out = Vec::new();
    for p in &spec.ports {
        let usable = |n: u16| n != 0 && !reserved.contains(&n) && !mine.contains(&n) && is_free(n);
        let (host_port, note) = match p.host_port {
            Some(h) if usable(h) => (h, None),
            Some(h) => {
                return Err(Error::PortInUse {
                    port: h,
                    job_port: p.port,
                });
            }
            None if usable(p.port) => (p.port, None),
            None => {
                let mut tries = 0;
                let other = loop {
                    tries += 1;
                    match any_free() {
                        Some(n) if usable(n) => break n,
                        Some(_) if tries < 64 => continue,
                        _ => return Err(Error::InvalidSpec("no free host port left to publish".into())),
                    }
                };
                let note = format!(
                    "port {} is in use on this host; the job was told PORT={other} (BERTH_PORT_{}={other})",
                    p.port, p.port
                );
                (other, Some(note))
            }
        };
        mine.push(host_port);
        out.push(PortMapping {
            port: p.port,
            proto: p.proto,
            host_ip: "127.0.0.1".into(),
            host_port,
            note,
            listen: None,
        });
    }
    reserved.extend(mine.iter().copied());
    drop(guard);
    Ok((out, Reservation(mine)))
}

/// Fill in where a running host job's servers are seen bound (the card's
/// real listening address; nothing for container or ended jobs).
pub fn note_listening(info: &mut JobInfo) {
    if info.runner != Some(RunnerKind::Host) || !info.status.is_active() {
        return;
    }
    for m in &mut info.ports {
        m.listen = crate::net::bound::bound(m.host_port, m.proto).map(|a| a.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Proto;

    fn spec(ports: &[(u16, Option<u16>)]) -> JobSpec {
        let mut s = JobSpec::shell("true");
        for (port, host_port) in ports {
            s.ports.push(crate::model::PortSpec {
                port: *port,
                host_port: *host_port,
                proto: Proto::Tcp,
            });
        }
        s
    }

    #[test]
    fn a_free_port_keeps_its_number_and_a_busy_one_is_replaced_with_a_note() {
        let (m, _r) = pick_with(&spec(&[(41001, None)]), |_| true, || Some(1)).unwrap();
        assert_eq!(
            (m[0].port, m[0].host_port, m[0].note.as_deref()),
            (41001, 41001, None)
        );
        let (m, _r) = pick_with(&spec(&[(41002, None)]), |p| p != 41002, || Some(41003)).unwrap();
        assert_eq!(m[0].host_port, 41003);
        assert!(m[0].note.as_deref().unwrap().contains("PORT=41003"), "{m:?}");
    }

    #[test]
    fn a_busy_explicit_host_port_is_refused_not_remapped() {
        let err = pick_with(&spec(&[(8080, Some(41004))]), |p| p != 41004, || Some(41005)).unwrap_err();
        assert!(matches!(err, Error::PortInUse { port: 41004, .. }), "{err}");
        assert!(err.to_string().contains("41004"), "{err}");
        // Free: taken as asked.
        let (m, _r) = pick_with(&spec(&[(8080, Some(41006))]), |_| true, || None).unwrap();
        assert_eq!((m[0].port, m[0].host_port), (8080, 41006));
    }

    #[test]
    fn a_number_handed_out_stays_reserved_until_its_job_ends() {
        let (_, first) = pick_with(&spec(&[(41007, None)]), |_| true, || Some(41008)).unwrap();
        let (m, second) = pick_with(&spec(&[(41007, None)]), |_| true, || Some(41008)).unwrap();
        assert_eq!(
            m[0].host_port, 41008,
            "the second job is not told the first's port"
        );
        let err = pick_with(&spec(&[(1, Some(41007))]), |_| true, || None).unwrap_err();
        assert!(matches!(err, Error::PortInUse { .. }));
        drop((first, second));
        let (m, _r) = pick_with(&spec(&[(41007, None)]), |_| true, || None).unwrap();
        assert_eq!(m[0].host_port, 41007);
    }
}
