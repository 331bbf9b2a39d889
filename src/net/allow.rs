//! The egress allowlist (`egress_allow`): which hosts a job behind berth's
//! proxy may reach, by the name it asked for.
//!
//! Entries: `pypi.org` (that host), `*.example.com` (its subdomains, not
//! itself), an IP address (`10.1.2.3`, `[fd00::1]`), each optionally with
//! `:PORT`; without a port only 80 and 443 are allowed, so an allowed name
//! is not a way to any service its host runs. `defaults` stands for
//! [`DEFAULT_EGRESS_ALLOW`], the common package registries. Names are
//! matched as asked (case-insensitive, a trailing dot ignored), before any
//! resolution: what the name resolves to is checked separately (the proxy
//! never connects to loopback or to containers of this machine).

use std::net::IpAddr;

use crate::error::{Error, Result};

/// The package registries allowed when a project names none (`defaults` in
/// `egress_allow`): PyPI, npm, crates.io, the Go module proxy, RubyGems,
/// Maven Central and Debian's archive.
pub const DEFAULT_EGRESS_ALLOW: &[&str] = &[
    "pypi.org",
    "files.pythonhosted.org",
    "registry.npmjs.org",
    "registry.yarnpkg.com",
    "crates.io",
    "index.crates.io",
    "static.crates.io",
    "proxy.golang.org",
    "sum.golang.org",
    "rubygems.org",
    "index.rubygems.org",
    "repo.maven.apache.org",
    "repo1.maven.org",
    "deb.debian.org",
    "security.debian.org",
];

/// The word in `egress_allow` that stands for [`DEFAULT_EGRESS_ALLOW`].
pub const DEFAULTS: &str = "defaults";

/// Ports an entry without `:PORT` allows.
const WEB_PORTS: [u16; 2] = [80, 443];

/// Longest host name accepted (DNS's own limit).
const MAX_NAME: usize = 253;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Host {
    Exact(String),
    /// Any name ending in `.<suffix>`.
    Subdomains(String),
    Ip(IpAddr),
}

/// One parsed entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    host: Host,
    port: Option<u16>,
}

/// A parsed `egress_allow`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allowlist {
    rules: Vec<Rule>,
}

/// A host name as compared: lower case, no trailing dot.
pub fn normalize_host(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

impl Rule {
    /// Parse one entry (not `defaults`).
    pub fn parse(entry: &str) -> Result<Rule> {
        let bad = |message: &str| Error::InvalidValue {
            what: "egress_allow",
            input: entry.into(),
            message: message.into(),
        };
        let entry_trim = entry.trim();
        // `[v6]:port`, `[v6]`, `host:port`, `host`.
        let (host, port) = if let Some(rest) = entry_trim.strip_prefix('[') {
            let (ip, after) = rest
                .split_once(']')
                .ok_or_else(|| bad("an IPv6 address needs its closing `]`"))?;
            let port = match after {
                "" => None,
                p => Some(
                    p.strip_prefix(':')
                        .ok_or_else(|| bad("expected `:PORT` after `]`"))?,
                ),
            };
            (ip, port)
        } else if entry_trim.parse::<IpAddr>().is_ok() {
            (entry_trim, None)
        } else {
            match entry_trim.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (entry_trim, None),
            }
        };
        let port = port
            .map(|p| match p.parse::<u16>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(bad("the port must be a number from 1 to 65535")),
            })
            .transpose()?;
        let host = if let Ok(ip) = host.parse::<IpAddr>() {
            Host::Ip(ip)
        } else if let Some(suffix) = host.strip_prefix("*.") {
            let suffix = normalize_host(suffix);
            if !valid_name(&suffix) || !suffix.contains('.') {
                return Err(bad("`*.` must be followed by a domain such as example.com"));
            }
            Host::Subdomains(suffix)
        } else {
            let name = normalize_host(host);
            if !valid_name(&name) {
                return Err(bad(
                    "expected a host name (pypi.org), *.domain, an IP address, each with an optional :PORT, or `defaults`",
                ));
            }
            Host::Exact(name)
        };
        Ok(Rule { host, port })
    }

    fn allows(&self, host: &str, ip: Option<IpAddr>, port: u16) -> bool {
        let port_ok = match self.port {
            Some(p) => p == port,
            None => WEB_PORTS.contains(&port),
        };
        port_ok
            && match &self.host {
                Host::Exact(name) => name == host,
                Host::Subdomains(suffix) => host
                    .strip_suffix(suffix.as_str())
                    .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
                Host::Ip(allowed) => ip == Some(*allowed),
            }
    }
}

impl Allowlist {
    /// Parse `entries` (`defaults` expanded); the first bad entry is the error.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Allowlist> {
        let mut rules = Vec::new();
        for e in entries {
            let e = e.as_ref();
            if e.trim() == DEFAULTS {
                for d in DEFAULT_EGRESS_ALLOW {
                    rules.push(Rule::parse(d)?);
                }
            } else {
                rules.push(Rule::parse(e)?);
            }
        }
        Ok(Allowlist { rules })
    }

    /// True when a request for `host:port` (as the job named it) is allowed.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        let trimmed = host.trim_start_matches('[').trim_end_matches(']');
        let ip = trimmed.parse::<IpAddr>().ok();
        let name = normalize_host(trimmed);
        self.rules.iter().any(|r| r.allows(&name, ip, port))
    }

    /// How many entries (after `defaults` was expanded).
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_subdomains_addresses_and_ports() {
        let a = Allowlist::parse(&[
            "PyPI.org.",
            "*.example.com",
            "10.1.2.3:8080",
            "[fd00::1]",
            "git.corp:22",
        ])
        .unwrap();
        assert!(a.allows("pypi.org", 443));
        assert!(a.allows("PYPI.ORG.", 80));
        assert!(!a.allows("pypi.org", 22), "no port given: web ports only");
        assert!(!a.allows("evilpypi.org", 443));
        assert!(!a.allows("pypi.org.evil.net", 443));
        assert!(a.allows("a.example.com", 443));
        assert!(a.allows("a.b.example.com", 80));
        assert!(!a.allows("example.com", 443), "*. means subdomains");
        assert!(!a.allows("badexample.com", 443));
        assert!(a.allows("10.1.2.3", 8080));
        assert!(!a.allows("10.1.2.3", 80));
        assert!(!a.allows("10.1.2.4", 8080));
        assert!(a.allows("[fd00::1]", 443));
        assert!(a.allows("git.corp", 22));
        assert!(!a.allows("git.corp", 443));
    }

    #[test]
    fn defaults_are_the_registries_and_bad_entries_say_why() {
        let a = Allowlist::parse(&["defaults"]).unwrap();
        assert_eq!(a.len(), DEFAULT_EGRESS_ALLOW.len());
        for host in [
            "pypi.org",
            "registry.npmjs.org",
            "index.crates.io",
            "proxy.golang.org",
            "deb.debian.org",
        ] {
            assert!(a.allows(host, 443), "{host}");
        }
        assert!(!a.allows("example.com", 443));
        assert!(Allowlist::parse::<&str>(&[]).unwrap().is_empty());
        for bad in [
            "", "*.com", "a b", "host:0", "host:x", "[fd00::1", "-x.org", "*.", "a..b",
        ] {
            let e = Allowlist::parse(&[bad]).unwrap_err().to_string();
            assert!(e.contains("egress_allow") && !e.contains('\n'), "{bad}: {e}");
        }
    }
}
