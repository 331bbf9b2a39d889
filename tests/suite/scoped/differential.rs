//! The scoped engine against the engine's own parsing, route by route: the
//! engine (Go's `net/http`) merges a form-encoded body into a request's
//! query, reads the first of a key given twice, reads old API versions'
//! `start` bodies as settings, and matches JSON fields without regard to
//! case. Each table sends such requests through a job's socket, byte for
//! byte; each must be refused (403) or shown harmless by asking the engine
//! itself what it did. Payloads only ever name this test's own canaries.
//! Here images and lists; the routes of children, execs, networks,
//! volumes and the engine's own are `bodies.rs`.

use std::net::Ipv4Addr;
use std::process::Command;

use serde_json::json;

use super::raw::{Answer, Scoped, request};
use crate::common::canary::Canary;

pub const FORM: &[(&str, &str)] = &[("Content-Type", "application/x-www-form-urlencoded")];
pub const JSON: &[(&str, &str)] = &[("Content-Type", "application/json")];
pub const NONE: &[(&str, &str)] = &[];

/// One request of a table: what it tries, method, path, headers, body.
pub type Ask = (
    &'static str,
    &'static str,
    String,
    &'static [(&'static str, &'static str)],
    String,
);

/// Every request of `table` is refused (403).
pub async fn refused(s: &Scoped, table: Vec<Ask>) {
    for (name, method, path, headers, body) in table {
        let a = s.send(&request(method, &path, headers, body.as_bytes())).await;
        assert_eq!(a.status, 403, "{name}: {}", a.body);
    }
}

/// Image ids of the engine's images whose reference matches `pattern`.
fn images(pattern: &str) -> Vec<String> {
    let o = Command::new("docker")
        .args(["images", "-q", "--no-trunc", "--filter"])
        .arg(format!("reference={pattern}"))
        .output()
        .expect("docker CLI");
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

const PULL: &str = "/v1.41/images/create?fromImage=berth%2Fsandbox&tag=latest";
const MIXED: &[(&str, &str)] = &[("Content-Type", "Application/X-WWW-Form-URLEncoded; charset=UTF-8")];
const CHUNKED_FORM: &[(&str, &str)] = &[
    ("Content-Type", "application/x-www-form-urlencoded"),
    ("Transfer-Encoding", "chunked"),
];

/// An import of `src` as `repo` (`form`) hidden in a pull's body or query.
fn imports(form: &str, src: &str, repo: &str) -> Vec<Ask> {
    let enc = |v: &str| serde_urlencoded::to_string([("", v)]).unwrap()[1..].to_string();
    let q = |rest: String| format!("/v1.41/images/create?{rest}");
    let (form, none) = (form.to_string(), String::new);
    vec![
        ("form body", "POST", PULL.into(), FORM, form.clone()),
        (
            "form, its type in capitals",
            "POST",
            PULL.into(),
            MIXED,
            form.clone(),
        ),
        ("form body, no type", "POST", PULL.into(), NONE, form.clone()),
        ("form body called JSON", "POST", PULL.into(), JSON, form.clone()),
        (
            "form body, chunked",
            "POST",
            PULL.into(),
            CHUNKED_FORM,
            form.clone(),
        ),
        ("fromSrc in the query", "POST", q(form), NONE, none()),
        (
            "fromImage twice",
            "POST",
            q("fromImage=berth%2Fsandbox&fromImage=evil".into()),
            NONE,
            none(),
        ),
        (
            "fromSrc percent-encoded",
            "POST",
            q(format!("from%53rc={}&fromImage=x", enc(src))),
            NONE,
            none(),
        ),
        (
            "fromsrc in lower case",
            "POST",
            q(format!("fromsrc={}&fromImage=x", enc(src))),
            NONE,
            none(),
        ),
        (
            "repo beside fromImage",
            "POST",
            q(format!("fromImage=x&repo={}", enc(repo))),
            NONE,
            none(),
        ),
    ]
}

#[tokio::test]
async fn an_image_import_hidden_in_a_form_body_or_a_second_key_never_reaches_the_engine() {
    let canary = Canary::on(Ipv4Addr::LOCALHOST.into());
    let repo = format!("berth-canary-{}/evil", std::process::id());
    let src = format!("http://{}/layer.tar", canary.addr);
    let form = serde_urlencoded::to_string([
        ("fromImage", ""),
        ("fromSrc", src.as_str()),
        ("repo", repo.as_str()),
        ("tag", "latest"),
    ])
    .unwrap();
    let s = Scoped::start().await;
    let sandbox = images("berth/sandbox:latest");
    refused(&s, imports(&form, &src, &repo)).await;
    assert_eq!(
        canary.heard(),
        Vec::<String>::new(),
        "the engine fetched the canary"
    );
    assert!(images(&format!("{repo}*")).is_empty(), "a new tag");
    assert_eq!(
        images("berth/sandbox:latest"),
        sandbox,
        "the sandbox was retagged"
    );
    s.end().await;

    // Control: the same form body sent to the engine itself is an import
    // that fetches the canary (what the scoped engine must never let through).
    let direct = Command::new("curl")
        .args(["-s", "--unix-socket", "/var/run/docker.sock", "-X", "POST"])
        .args([
            "-H",
            "Content-Type: application/x-www-form-urlencoded",
            "--data-binary",
        ])
        .arg(&form)
        .arg(format!("http://docker{PULL}"))
        .output()
        .expect("curl");
    assert!(direct.status.success(), "{direct:?}");
    for id in images(&format!("{repo}*")) {
        let _ = Command::new("docker").args(["rmi", "-f", &id]).output();
    }
    assert!(
        canary.heard().iter().any(|l| l.starts_with("GET /layer.tar")),
        "{:?}",
        canary.heard()
    );
}

/// What a list answered: each object's id, and whether `needle` shows anywhere.
fn listed(a: &Answer, key: &str) -> Vec<String> {
    a.json()
        .as_array()
        .map(|l| {
            l.iter()
                .filter_map(|o| o[key].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_doubled_or_respelled_filter_lists_only_the_jobs_own_containers_and_networks() {
    let tag = format!("berth-test-foreign-{}", std::process::id());
    let run = |args: &[&str]| {
        let o = Command::new("docker").args(args).output().expect("docker CLI");
        assert!(o.status.success(), "{o:?}");
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    // Removed however the test ends.
    struct Foreign(String);
    impl Drop for Foreign {
        fn drop(&mut self) {
            let _ = Command::new("docker").args(["rm", "-f", &self.0]).output();
            let _ = Command::new("docker").args(["network", "rm", &self.0]).output();
        }
    }
    let _foreign = Foreign(tag.clone());
    let other = run(&[
        "create",
        "--label",
        &format!("{tag}=1"),
        "--name",
        &tag,
        "berth/sandbox:latest",
        "true",
    ]);
    let other_net = run(&["network", "create", "--label", &format!("{tag}=1"), &tag]);
    let s = Scoped::start().await;
    let mine = s.child("mine").await;
    let net = s
        .json("POST", "/v1.41/networks/create", &json!({"Name": "mynet"}))
        .await;
    let my_net = net.json()["Id"].as_str().unwrap_or_default().to_string();
    let foreign = format!("{{\"label\":[\"{tag}=1\"]}}");
    let by_id = format!("{{\"id\":[\"{other}\"]}}");
    for (path, key, own, theirs) in [
        ("/v1.41/containers/json?all=1", "Id", &mine, [&other, &tag]),
        ("/v1.41/networks?", "Id", &my_net, [&other_net, &tag]),
    ] {
        let plain = s.ask("GET", path, &[], b"").await;
        assert_eq!(
            listed(&plain, key),
            std::slice::from_ref(own),
            "{path}: {}",
            plain.body
        );
        let enc = |v: &str| serde_urlencoded::to_string([("filters", v)]).unwrap();
        let asks = [
            format!("{path}&filters={{}}&filters={{}}"),
            format!("{path}&{}&{}", enc("{}"), enc(&foreign)),
            format!("{path}&{}", enc(&foreign).replace("filters", "Filters")),
            format!("{path}&{}", enc(&foreign).replace("filters", "filter%73")),
            format!("{path}&{}", enc(&by_id)),
            format!("{path}&since={other}"),
        ];
        for ask in asks.iter() {
            let a = s.ask("GET", ask, &[], b"").await;
            assert!(matches!(a.status, 200 | 403), "{ask}: {} {}", a.status, a.body);
            let ids = listed(&a, key);
            assert!(ids.iter().all(|i| i == own), "{ask}: {}", a.body);
            assert!(
                theirs.iter().all(|t| !a.body.contains(t.as_str())),
                "{ask}: {}",
                a.body
            );
        }
        let a = s.ask("GET", path, FORM, enc(&foreign).as_bytes()).await;
        assert_eq!(a.status, 403, "a form body on a list: {}", a.body);
    }
    s.end().await;
}
