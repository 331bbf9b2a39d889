//! Which Engine API requests the scoped engine forwards: a request line is
//! read into an [`Endpoint`] or refused (403) with one line saying why.
//!
//! The list is what a test library needs (testcontainers in Python, Java,
//! Go and Rust: ping, version, info, images, its own containers, exec,
//! archives, networks and volumes) and nothing else: no builds, no swarm,
//! no plugins, no events of the whole engine, no `update` of a container's
//! limits. Paths are read strictly (an optional `/vX.Y` prefix, then plain
//! segments): no percent-encoding, no `.`/`..`, no empty segment, so the
//! path the engine sees is the path checked here.

use hyper::Method;

/// What a container request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerOp {
    Inspect,
    Start,
    Stop,
    Kill,
    Wait,
    Logs,
    Attach,
    Remove,
    ExecCreate,
    Archive,
}

/// What a network request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkOp {
    Inspect,
    Connect,
    Remove,
}

/// A request the scoped engine forwards (after its checks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    Ping,
    Version,
    Info,
    ImageList,
    ImageInspect,
    ImagePull,
    ContainerCreate,
    ContainerList,
    /// A container named by the job (id, id prefix or name).
    Container(String, ContainerOp),
    ExecInspect(String),
    ExecStart(String),
    NetworkCreate,
    NetworkList,
    Network(String, NetworkOp),
    VolumeCreate,
    VolumeRemove(String),
}

/// A request line the scoped engine does not forward.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// What a client library prints (one line).
    pub reason: String,
}

/// A request line read: the version prefix (`/v1.41` or empty), the path's
/// segments after it, and the endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routed {
    pub prefix: String,
    pub segments: Vec<String>,
    pub endpoint: Endpoint,
}

impl Routed {
    /// The path for the engine with segment `at` replaced by `with` (a
    /// resolved id), the prefix kept.
    pub fn path_with(&self, at: usize, with: &str) -> String {
        let mut segs = self.segments.clone();
        if let Some(s) = segs.get_mut(at) {
            *s = with.to_string();
        }
        format!("{}/{}", self.prefix, segs.join("/"))
    }

    /// The path as it came (checked).
    pub fn path(&self) -> String {
        format!("{}/{}", self.prefix, self.segments.join("/"))
    }
}

/// `METHOD /path` for refusals and the security log.
pub fn line(method: &Method, path: &str) -> String {
    format!("{method} {}", crate::inert::visible(&truncate(path, 200)))
}

fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// The oldest API version forwarded: before it, `start` takes a
/// `HostConfig` body (privileged, binds…) the engine applies then.
const MIN_API: (u32, u32) = (1, 24);

/// Characters a checked path may hold (image references included).
fn plain(seg: &str) -> bool {
    !seg.is_empty()
        && seg != "."
        && seg != ".."
        && seg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._:@+-".contains(c))
}

/// Read `method path` into what it asks, or refuse it.
pub fn route(method: &Method, path: &str) -> Result<Routed, Refused> {
    let refuse = |why: &str| Refused {
        reason: format!("the scoped engine does not forward {}: {why}", line(method, path)),
    };
    let (prefix, segments) = split_path(path).map_err(refuse)?;
    let s: Vec<&str> = segments.iter().map(String::as_str).collect();
    let endpoint = endpoint(method, &s).map_err(refuse)?;
    Ok(Routed {
        prefix,
        segments,
        endpoint,
    })
}

/// The version prefix (`/v1.41` or empty) and the checked segments after
/// it, or why the path is refused.
fn split_path(path: &str) -> Result<(String, Vec<String>), &'static str> {
    let Some(rest) = path.strip_prefix('/') else {
        return Err("not a path");
    };
    let mut segments: Vec<String> = rest.split('/').map(str::to_string).collect();
    if segments.last().is_some_and(|s| s.is_empty()) && segments.len() > 1 {
        segments.pop();
    }
    if segments.iter().any(|s| !plain(s)) {
        return Err("the path holds characters or segments it does not accept (%, empty, . or ..)");
    }
    let mut prefix = String::new();
    if let Some(v) = segments.first().and_then(|s| s.strip_prefix('v'))
        && v.split('.')
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
    {
        let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(u32::MAX));
        let version = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        if version < MIN_API {
            return Err(
                "API versions before 1.24 read a container's settings when it starts; use 1.24 or later",
            );
        }
        prefix = format!("/{}", segments.remove(0));
    }
    Ok((prefix, segments))
}

/// What `method` on the path's segments `s` (after the prefix) asks, or
/// why it is refused.
fn endpoint(method: &Method, s: &[&str]) -> Result<Endpoint, &'static str> {
    let get = *method == Method::GET;
    let head = *method == Method::HEAD;
    let post = *method == Method::POST;
    let delete = *method == Method::DELETE;
    Ok(match s {
        ["_ping"] if get || head => Endpoint::Ping,
        ["version"] if get => Endpoint::Version,
        ["info"] if get => Endpoint::Info,
        ["images", "json"] if get => Endpoint::ImageList,
        ["images", "create"] if post => Endpoint::ImagePull,
        ["images", name @ .., "json"] if get && !name.is_empty() => Endpoint::ImageInspect,
        ["containers", "create"] if post => Endpoint::ContainerCreate,
        ["containers", "json"] if get => Endpoint::ContainerList,
        ["containers", r] if delete => Endpoint::Container(r.to_string(), ContainerOp::Remove),
        ["containers", r, op] => Endpoint::Container(r.to_string(), container_op(method, op)?),
        ["exec", id, "json"] if get => Endpoint::ExecInspect(id.to_string()),
        ["exec", id, "start"] if post => Endpoint::ExecStart(id.to_string()),
        ["networks", "create"] if post => Endpoint::NetworkCreate,
        ["networks"] if get => Endpoint::NetworkList,
        ["networks", r] if get => Endpoint::Network(r.to_string(), NetworkOp::Inspect),
        ["networks", r] if delete => Endpoint::Network(r.to_string(), NetworkOp::Remove),
        ["networks", r, "connect"] if post => Endpoint::Network(r.to_string(), NetworkOp::Connect),
        ["volumes", "create"] if post => Endpoint::VolumeCreate,
        ["volumes", name] if delete => Endpoint::VolumeRemove(name.to_string()),
        _ => return Err(refused(s)),
    })
}

/// What `method` on one of the job's containers (`/containers/ID/OP`) does.
fn container_op(method: &Method, op: &str) -> Result<ContainerOp, &'static str> {
    use ContainerOp as C;
    let is = |m: Method| *method == m;
    Ok(match op {
        "json" if is(Method::GET) => C::Inspect,
        "start" if is(Method::POST) => C::Start,
        "stop" if is(Method::POST) => C::Stop,
        "kill" if is(Method::POST) => C::Kill,
        "wait" if is(Method::POST) => C::Wait,
        "logs" if is(Method::GET) => C::Logs,
        "attach" if is(Method::POST) => C::Attach,
        "exec" if is(Method::POST) => C::ExecCreate,
        "archive" if is(Method::GET) || is(Method::PUT) || is(Method::HEAD) => C::Archive,
        _ => {
            return Err(
                "a test library needs only create, start, stop, kill, wait, inspect, logs, attach, exec, archive and remove of its own containers",
            );
        }
    })
}

/// Why a path no endpoint reads is refused: the engine's own business says
/// what it is, anything else is not needed.
fn refused(s: &[&str]) -> &'static str {
    match s {
        ["build", ..] => "image builds run the Dockerfile's steps on the engine, outside the job's limits",
        ["events", ..] => "the engine's events are every container's, not the job's",
        ["swarm", ..]
        | ["services", ..]
        | ["nodes", ..]
        | ["secrets", ..]
        | ["configs", ..]
        | ["tasks", ..] => "swarm is the engine's, not the job's",
        ["plugins", ..] => "plugins run with the engine's privileges",
        ["system", ..] | ["auth"] | ["session"] | ["distribution", ..] | ["commit"] => {
            "this is the engine's business, not a test's"
        }
        _ => "not an endpoint a test library needs",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(method: Method, path: &str) -> Result<Endpoint, String> {
        route(&method, path).map(|r| r.endpoint).map_err(|r| r.reason)
    }

    #[test]
    fn what_a_test_library_asks_is_read() {
        assert_eq!(ep(Method::GET, "/_ping"), Ok(Endpoint::Ping));
        assert_eq!(ep(Method::HEAD, "/v1.41/_ping"), Ok(Endpoint::Ping));
        assert_eq!(ep(Method::GET, "/version"), Ok(Endpoint::Version));
        assert_eq!(ep(Method::GET, "/v1.41/info"), Ok(Endpoint::Info));
        assert_eq!(
            ep(Method::GET, "/v1.41/images/berth/sandbox:latest/json"),
            Ok(Endpoint::ImageInspect)
        );
        assert_eq!(ep(Method::POST, "/v1.41/images/create"), Ok(Endpoint::ImagePull));
        assert_eq!(
            ep(Method::POST, "/v1.41/containers/create"),
            Ok(Endpoint::ContainerCreate)
        );
        assert_eq!(
            ep(Method::POST, "/v1.41/containers/abc123/start"),
            Ok(Endpoint::Container("abc123".into(), ContainerOp::Start))
        );
        assert_eq!(
            ep(Method::DELETE, "/v1.41/containers/abc123"),
            Ok(Endpoint::Container("abc123".into(), ContainerOp::Remove))
        );
        assert_eq!(
            ep(Method::PUT, "/v1.41/containers/db/archive"),
            Ok(Endpoint::Container("db".into(), ContainerOp::Archive))
        );
        assert_eq!(
            ep(Method::POST, "/v1.41/exec/e1/start"),
            Ok(Endpoint::ExecStart("e1".into()))
        );
        assert_eq!(
            ep(Method::POST, "/v1.41/networks/n1/connect"),
            Ok(Endpoint::Network("n1".into(), NetworkOp::Connect))
        );
        assert_eq!(
            ep(Method::DELETE, "/volumes/v1"),
            Ok(Endpoint::VolumeRemove("v1".into()))
        );
        let r = route(&Method::POST, "/v1.41/containers/abc/kill").unwrap();
        assert_eq!(r.path_with(1, "f00d"), "/v1.41/containers/f00d/kill");
    }

    #[test]
    fn everything_else_is_refused_in_one_line() {
        for (m, p) in [
            (Method::POST, "/v1.41/build"),
            (Method::GET, "/events"),
            (Method::POST, "/v1.41/containers/abc/update"),
            (Method::POST, "/v1.41/containers/abc/restart"),
            (Method::POST, "/swarm/init"),
            (Method::POST, "/plugins/pull"),
            (Method::GET, "/v1.41/containers/abc/../../info"),
            (Method::GET, "/v1.41/containers/%2e%2e/json"),
            (Method::GET, "//info"),
            (Method::DELETE, "/images/berth/sandbox"),
            (Method::POST, "/containers/prune"),
            (Method::POST, "/v1.23/containers/abc/start"),
            (Method::GET, "/v1.9/info"),
        ] {
            let why = ep(m.clone(), p).unwrap_err();
            assert!(
                why.starts_with("the scoped engine does not forward"),
                "{m} {p}: {why}"
            );
            assert!(!why.contains('\n'), "{why}");
        }
    }
}
