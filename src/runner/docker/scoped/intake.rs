//! A job's request read once, the way the engine would read it, before any
//! handler sees it: berth forwards only what it parsed and checked.
//!
//! The engine (Go's `net/http`) reads more than the URL's query: a
//! form-encoded body of a POST or PUT is merged into the same parameters,
//! ahead of the query's, and of a key given twice a handler reads the first.
//! A check of the raw query could then pass while the engine acts on other
//! values (`fromSrc=URL` in the body of an `images/create` whose query says
//! `fromImage`, or a second `filters`). So here the query is parsed into
//! pairs, a key given twice is refused, and only the keys the endpoint reads
//! are kept ([`Rule`]): the engine gets a query berth wrote from those pairs,
//! never the job's string. A form or multipart body is refused on every
//! route; a body on a route that takes none is refused (an old API version's
//! `start` reads a whole `HostConfig` from it); a JSON body is parsed here
//! and sent on as berth re-serialised it. Of the headers only those the
//! engine reads for these routes go on.

use hyper::body::Incoming;
use hyper::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, USER_AGENT};
use hyper::{Method, Request, Response};
use serde_json::Value;

use super::Shared;
use super::fields::Refusal;
use super::proxy::{self, Body};
use super::route::{self, ContainerOp, Endpoint, NetworkOp, Routed};

/// What a route takes as its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Takes {
    Nothing,
    Json,
    /// A tar, streamed through (archive uploads).
    Stream,
}

/// The query keys an endpoint reads (forwarded), those it reads and berth
/// refuses (with why), and its body.
struct Rule {
    keys: &'static [&'static str],
    refused: &'static [(&'static str, &'static str)],
    takes: Takes,
}

const fn rule(keys: &'static [&'static str], takes: Takes) -> Rule {
    Rule {
        keys,
        refused: &[],
        takes,
    }
}

/// Per endpoint (API 1.41's parameters; any other key is dropped, the
/// engine never sees it).
fn rule_of(endpoint: &Endpoint, method: &Method) -> Rule {
    use ContainerOp as C;
    use Takes::*;
    const IMPORT: &str = "image imports are not forwarded; pull with fromImage";
    match endpoint {
        Endpoint::Ping | Endpoint::Version | Endpoint::Info | Endpoint::ImageInspect => rule(&[], Nothing),
        Endpoint::ImageList => rule(&["all", "filters", "digests", "shared-size"], Nothing),
        Endpoint::ImagePull => Rule {
            keys: &["fromImage", "tag", "platform"],
            refused: &[
                ("fromSrc", IMPORT),
                ("repo", IMPORT),
                ("message", IMPORT),
                ("changes", IMPORT),
            ],
            takes: Nothing,
        },
        Endpoint::ContainerCreate => rule(&["name", "platform"], Json),
        Endpoint::ContainerList => Rule {
            keys: &["all", "limit", "size", "filters"],
            refused: &[
                ("since", "it names other containers; filter by id instead"),
                ("before", "it names other containers; filter by id instead"),
            ],
            takes: Nothing,
        },
        Endpoint::Container(_, op) => match op {
            C::Inspect => rule(&["size"], Nothing),
            C::Start => Rule {
                keys: &[],
                refused: &[
                    ("checkpoint", "checkpoints restore state from the engine's host"),
                    (
                        "checkpoint-dir",
                        "checkpoints restore state from the engine's host",
                    ),
                ],
                takes: Nothing,
            },
            C::Stop => rule(&["t", "signal"], Nothing),
            C::Kill => rule(&["signal"], Nothing),
            C::Wait => rule(&["condition"], Nothing),
            C::Logs => rule(
                &[
                    "follow",
                    "stdout",
                    "stderr",
                    "since",
                    "until",
                    "timestamps",
                    "tail",
                    "details",
                ],
                Nothing,
            ),
            C::Attach => rule(
                &["detachKeys", "logs", "stream", "stdin", "stdout", "stderr"],
                Nothing,
            ),
            C::Remove => Rule {
                keys: &["v", "force"],
                refused: &[("link", "links are not kept")],
                takes: Nothing,
            },
            C::ExecCreate => rule(&[], Json),
            C::Archive => {
                let keys = &["path", "noOverwriteDirNonDir", "copyUIDGID"];
                rule(keys, if *method == Method::PUT { Stream } else { Nothing })
            }
        },
        Endpoint::ExecInspect(_) => rule(&[], Nothing),
        Endpoint::ExecStart(_) => rule(&[], Json),
        Endpoint::NetworkCreate | Endpoint::VolumeCreate => rule(&[], Json),
        Endpoint::NetworkList => rule(&["filters"], Nothing),
        Endpoint::Network(_, NetworkOp::Inspect) => rule(&["verbose", "scope"], Nothing),
        Endpoint::Network(_, NetworkOp::Remove) => rule(&[], Nothing),
        Endpoint::Network(_, NetworkOp::Connect) => rule(&[], Json),
        Endpoint::VolumeRemove(_) => rule(&["force"], Nothing),
    }
}

/// A request's body as berth read it.
pub enum Payload {
    Empty,
    Json(Value),
    Stream(Incoming),
}

/// A request as berth parsed and checked it: all of it the engine may get.
pub struct Intake {
    pub method: Method,
    /// `METHOD /path` for refusals and the security log.
    pub line: String,
    pub routed: Routed,
    /// The query's pairs the endpoint reads, each key once.
    query: Vec<(String, String)>,
    /// The headers the engine reads (agent, accept, registry auth, a
    /// streamed body's type).
    pub headers: HeaderMap,
    pub payload: Payload,
    /// The connection, for an attach or exec start that asked to take it over.
    pub upgrade: Option<hyper::upgrade::OnUpgrade>,
}

impl Intake {
    /// The value of query key `key`, if given.
    pub fn param(&self, key: &str) -> Option<&str> {
        self.query.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// Set (or replace) query key `key`.
    pub fn set_param(&mut self, key: &str, value: String) {
        self.query.retain(|(k, _)| k != key);
        self.query.push((key.to_string(), value));
    }

    /// `path` with the checked query, as berth writes it.
    pub fn target(&self, path: String) -> String {
        if self.query.is_empty() {
            return path;
        }
        let q = serde_urlencoded::to_string(&self.query).unwrap_or_default();
        format!("{path}?{q}")
    }

    /// The JSON body (`Value::Null` when the route takes none).
    pub fn take_json(&mut self) -> Value {
        match std::mem::replace(&mut self.payload, Payload::Empty) {
            Payload::Json(v) => v,
            other => {
                self.payload = other;
                Value::Null
            }
        }
    }
}

/// Headers passed on: what the engine reads of these routes.
const HEADERS: &[HeaderName] = &[USER_AGENT, ACCEPT];
const REGISTRY_AUTH: &str = "x-registry-auth";

/// Read `req` into an [`Intake`], or answer the refusal (403, logged; 413
/// for a body too large to check).
pub async fn read(s: &Shared, mut req: Request<Incoming>) -> Result<Intake, Response<Body>> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let line = route::line(&method, &path);
    let routed = route::route(&method, &path).map_err(|r| s.refuse(&line, "path", &r.reason))?;
    let rule = rule_of(&routed.endpoint, &method);
    let refuse = |r: Refusal| s.refuse(&line, &r.field, &r.reason);
    let query = checked_query(req.uri().query(), &rule).map_err(refuse)?;
    let streamed = body_type(req.headers(), rule.takes).map_err(refuse)?;
    let mut headers = HeaderMap::new();
    for name in HEADERS {
        if let Some(v) = req.headers().get(name) {
            headers.insert(name.clone(), v.clone());
        }
    }
    if let Some(v) = req.headers().get(REGISTRY_AUTH) {
        headers.insert(HeaderName::from_static(REGISTRY_AUTH), v.clone());
    }
    if let Some(t) = streamed {
        headers.insert(CONTENT_TYPE, t);
    }
    let upgrade = (matches!(
        routed.endpoint,
        Endpoint::Container(_, ContainerOp::Attach) | Endpoint::ExecStart(_)
    ) && req.headers().contains_key(hyper::header::UPGRADE))
    .then(|| hyper::upgrade::on(&mut req));
    let body = req.into_body();
    let payload = match rule.takes {
        Takes::Stream => Payload::Stream(body),
        Takes::Nothing => match proxy::read_body(body).await?.is_empty() {
            true => Payload::Empty,
            false => {
                return Err(refuse(Refusal::new(
                    "body",
                    "this endpoint takes no body (the engine could read settings from it)",
                )));
            }
        },
        Takes::Json => {
            let bytes = proxy::read_body(body).await?;
            match serde_json::from_slice::<Value>(&bytes) {
                Ok(v) => Payload::Json(v),
                Err(_) => return Err(refuse(Refusal::new("body", "the body is not JSON"))),
            }
        }
    };
    Ok(Intake {
        method,
        line,
        routed,
        query,
        headers,
        payload,
        upgrade,
    })
}

/// The query's pairs the endpoint reads: a key given twice (in any
/// spelling) or one berth refuses (unless it says no) is refused; keys it
/// does not read are dropped.
fn checked_query(raw: Option<&str>, rule: &Rule) -> Result<Vec<(String, String)>, Refusal> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(raw.unwrap_or(""))
        .map_err(|_| Refusal::new("query", "not a query string"))?;
    let mut seen: Vec<String> = Vec::new();
    let mut kept = Vec::new();
    for (k, v) in pairs {
        let folded = k.to_ascii_lowercase();
        if seen.contains(&folded) {
            return Err(Refusal::new(
                format!("query {k}"),
                "given twice; the engine would read one and berth check the other: say it once",
            ));
        }
        seen.push(folded);
        if let Some((_, why)) = rule.refused.iter().find(|(r, _)| r.eq_ignore_ascii_case(&k)) {
            // Dropped when it says no (docker-py sends `link=False`), as the engine reads a flag.
            let no = ["", "0", "no", "false", "none"];
            match no.contains(&v.trim().to_ascii_lowercase().as_str()) {
                true => continue,
                false => return Err(Refusal::new(format!("query {k}"), *why)),
            }
        }
        if rule.keys.contains(&k.as_str()) {
            kept.push((k, v));
        }
    }
    Ok(kept)
}

/// A form body is the engine's query too: refused wherever it comes. The
/// type of a streamed body (a tar) is passed on; a JSON body gets berth's.
fn body_type(headers: &HeaderMap, takes: Takes) -> Result<Option<hyper::header::HeaderValue>, Refusal> {
    let types: Vec<_> = headers.get_all(CONTENT_TYPE).iter().collect();
    if types.len() > 1 {
        return Err(Refusal::new("Content-Type", "given twice; say it once"));
    }
    let Some(t) = types.first() else {
        return Ok(None);
    };
    let lower = String::from_utf8_lossy(t.as_bytes()).to_ascii_lowercase();
    if lower.contains("form") {
        return Err(Refusal::new(
            "Content-Type",
            "form bodies are read by the engine as query parameters; send JSON and the query in the URL",
        ));
    }
    Ok((takes == Takes::Stream).then(|| (*t).clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(raw: &str, e: Endpoint) -> Result<Vec<(String, String)>, String> {
        checked_query(Some(raw), &rule_of(&e, &Method::GET)).map_err(|r| r.field)
    }

    #[test]
    fn a_query_is_kept_only_as_parsed_once() {
        assert_eq!(
            q("all=1&trunc_cmd=0&filters=%7B%7D", Endpoint::ContainerList).unwrap(),
            [("all".into(), "1".into()), ("filters".into(), "{}".into())]
        );
        assert_eq!(
            q("filters={}&filters={}", Endpoint::ContainerList).unwrap_err(),
            "query filters"
        );
        assert_eq!(
            q("filters={}&Filters={}", Endpoint::NetworkList).unwrap_err(),
            "query Filters"
        );
        assert_eq!(
            q("fromImage=a&fromsrc=http://x", Endpoint::ImagePull).unwrap_err(),
            "query fromsrc"
        );
        assert_eq!(
            q("since=other", Endpoint::ContainerList).unwrap_err(),
            "query since"
        );
        let remove = Endpoint::Container("c".into(), ContainerOp::Remove);
        assert_eq!(
            q("v=False&link=False&force=True", remove.clone()).unwrap(),
            [("v".into(), "False".into()), ("force".into(), "True".into())]
        );
        assert_eq!(q("link=1", remove).unwrap_err(), "query link");
        // Percent-encodings are read once here; the engine gets berth's encoding.
        let got = q("from%49mage=berth%2Fsandbox&tag=latest", Endpoint::ImagePull).unwrap();
        assert_eq!(got[0], ("fromImage".into(), "berth/sandbox".into()));
        // Keys the endpoint does not read never reach the engine.
        assert_eq!(q("a=%ff&fromSrc=x", Endpoint::Ping).unwrap(), []);
    }

    #[test]
    fn form_bodies_are_refused_and_a_tar_keeps_its_type() {
        let mut h = HeaderMap::new();
        h.insert(
            CONTENT_TYPE,
            "Application/X-WWW-Form-Urlencoded; charset=utf-8"
                .parse()
                .unwrap(),
        );
        assert!(body_type(&h, Takes::Nothing).is_err());
        h.insert(CONTENT_TYPE, "multipart/form-data; boundary=x".parse().unwrap());
        assert!(body_type(&h, Takes::Json).is_err());
        h.insert(CONTENT_TYPE, "application/x-tar".parse().unwrap());
        assert!(body_type(&h, Takes::Stream).unwrap().is_some());
        assert!(body_type(&h, Takes::Json).unwrap().is_none());
        h.append(CONTENT_TYPE, "application/json".parse().unwrap());
        assert!(body_type(&h, Takes::Json).is_err(), "two types");
    }
}
