//! Who is in a pod (`pod/mod.rs`) and what follows from it: the pod's
//! `/etc/hosts` (every member's label and id on 127.0.0.1), the names its
//! members never send through their proxy, and the ports no second member
//! may publish. Plain data, so it is checked without an engine.

use std::collections::BTreeMap;

use crate::model::{JobId, Proto};

pub type Seats = BTreeMap<JobId, Seat>;

/// One member: the name it is known by and the ports it publishes.
pub struct Seat {
    pub label: Option<String>,
    pub ports: Vec<(u16, Proto)>,
}

/// The names `seats` go by: labels and ids.
pub fn names(seats: &Seats) -> Vec<String> {
    seats
        .iter()
        .flat_map(|(id, s)| s.label.iter().cloned().chain([id.to_string()]))
        .collect()
}

/// Why `seat` cannot join `seats`: a port it publishes is a member's already.
pub fn conflict(seats: &Seats, seat: &Seat) -> Option<String> {
    seats.iter().find_map(|(other, s)| {
        let (port, proto) = seat.ports.iter().find(|p| s.ports.contains(p))?;
        Some(format!(
            "port {port}/{} is published already by {other}, a job of this session: the session's jobs \
share one network (one pod), so only one can listen on it; stop {other} or use another port",
            proto.as_str()
        ))
    })
}

/// The pod's hosts file: the usual localhost lines, then each member's
/// label (when it is a valid host name) and id on 127.0.0.1.
pub fn hosts_text(seats: &Seats) -> String {
    let mut text = super::super::etc::LOCALHOST.to_string();
    for (id, seat) in seats {
        match &seat.label {
            Some(label) => text.push_str(&format!("127.0.0.1\t{label} {id}\n")),
            None => text.push_str(&format!("127.0.0.1\t{id}\n")),
        }
    }
    text
}

/// A label usable as a host name: letters, digits, `-`, `_` and `.`, not
/// starting with `-` or `.`, at most 63 characters (anything else is left
/// out of the hosts file, never written into it).
pub fn hostname_ok(label: &str) -> bool {
    !label.is_empty()
        && label.len() <= 63
        && !label.starts_with(['-', '.'])
        && label
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hosts_file_names_each_member_on_loopback_and_nothing_else() {
        let mut seats = Seats::new();
        seats.insert(
            JobId::from("job-1"),
            Seat {
                label: Some("web".into()),
                ports: vec![],
            },
        );
        seats.insert(
            JobId::from("job-2"),
            Seat {
                label: None,
                ports: vec![],
            },
        );
        let text = hosts_text(&seats);
        assert_eq!(names(&seats), ["web", "job-1", "job-2"]);
        let web = Seat {
            label: None,
            ports: vec![(8000, Proto::Tcp)],
        };
        assert!(conflict(&seats, &web).is_none());
        seats.insert(JobId::from("job-3"), web);
        let again = Seat {
            label: None,
            ports: vec![(9000, Proto::Tcp), (8000, Proto::Tcp)],
        };
        let said = conflict(&seats, &again).expect("8000 is taken");
        assert!(said.contains("port 8000/tcp") && said.contains("job-3"), "{said}");
        let udp = Seat {
            label: None,
            ports: vec![(8000, Proto::Udp)],
        };
        assert!(
            conflict(&seats, &udp).is_none(),
            "another protocol is another port"
        );
        assert!(text.starts_with("127.0.0.1\tlocalhost\n"), "{text}");
        assert!(
            text.ends_with("127.0.0.1\tweb job-1\n127.0.0.1\tjob-2\n"),
            "{text}"
        );
        assert!(hostname_ok("web") && hostname_ok("db-2.local") && hostname_ok("a_b"));
        for bad in [
            "",
            "-x",
            ".x",
            "a b",
            "a\n1.2.3.4 pypi.org",
            "x#y",
            &"a".repeat(64),
        ] {
            assert!(!hostname_ok(bad), "{bad:?}");
        }
    }
}
