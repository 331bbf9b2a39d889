//! The scoped engine's routes that act on a job's children, execs,
//! networks and volumes, and the engine's own (ping, version, info,
//! images), against the engine's own parsing (see `differential.rs`): a
//! start of an old API version reads a whole `HostConfig` from its body, a
//! form body is the query, JSON fields match in any case and the last of
//! two wins. Each request is refused, or the engine is asked what it did.

use serde_json::json;

use super::differential::{Ask, FORM, JSON, NONE, refused};
use super::raw::Scoped;

/// Requests on child `id` that would give it settings past the checks.
fn on_a_child(id: &str) -> Vec<Ask> {
    let settings = json!({"Privileged": true, "Binds": ["/:/host"], "CapAdd": ["ALL"]}).to_string();
    let c = |rest: &str| format!("/v1.41/containers/{id}/{rest}");
    let create = "/v1.41/containers/create".to_string();
    vec![
        (
            "a v1.23 start with settings",
            "POST",
            format!("/v1.23/containers/{id}/start"),
            JSON,
            settings.clone(),
        ),
        (
            "a start with settings",
            "POST",
            c("start"),
            JSON,
            settings.clone(),
        ),
        (
            "an unversioned start with settings",
            "POST",
            format!("/containers/{id}/start"),
            JSON,
            settings,
        ),
        (
            "a start with a form",
            "POST",
            c("start"),
            FORM,
            "Privileged=true".into(),
        ),
        (
            "a start from a checkpoint",
            "POST",
            c("start?checkpoint=x"),
            NONE,
            String::new(),
        ),
        (
            "a stop's wait twice",
            "POST",
            c("stop?t=1&t=600"),
            NONE,
            String::new(),
        ),
        (
            "a wait with a form",
            "POST",
            c("wait"),
            FORM,
            "condition=removed".into(),
        ),
        (
            "an attach, stdin twice",
            "POST",
            c("attach?stream=1&stdin=0&stdin=1"),
            NONE,
            String::new(),
        ),
        (
            "an attach with a body",
            "POST",
            c("attach?stream=1"),
            JSON,
            "{}".into(),
        ),
        (
            "a signal twice",
            "POST",
            c("kill?signal=KILL&signal=HUP"),
            NONE,
            String::new(),
        ),
        ("size twice", "GET", c("json?size=1&size=0"), NONE, String::new()),
        (
            "logs with a body",
            "GET",
            c("logs?stdout=1"),
            FORM,
            "follow=1".into(),
        ),
        (
            "an exec as a form",
            "POST",
            c("exec"),
            FORM,
            "Cmd=id&Privileged=true".into(),
        ),
        (
            "an exec, privileged in lower case",
            "POST",
            c("exec"),
            JSON,
            r#"{"Cmd":["id"],"privileged":true}"#.into(),
        ),
        (
            "an exec, privileged last",
            "POST",
            c("exec"),
            JSON,
            r#"{"Cmd":["id"],"Privileged":false,"Privileged":true}"#.into(),
        ),
        (
            "an archive path twice",
            "PUT",
            c("archive?path=/tmp&path=/"),
            NONE,
            String::new(),
        ),
        (
            "an archive as a form",
            "PUT",
            c("archive?path=/tmp"),
            FORM,
            "path=/".into(),
        ),
        (
            "a remove of a link",
            "DELETE",
            format!("/v1.41/containers/{id}?link=1"),
            NONE,
            String::new(),
        ),
        (
            "a create named twice",
            "POST",
            format!("{create}?name=a&name=b"),
            JSON,
            r#"{"Image":"x"}"#.into(),
        ),
        (
            "a create as a form",
            "POST",
            create.clone(),
            FORM,
            "Image=berth/sandbox:latest".into(),
        ),
        (
            "a create, privileged at the top",
            "POST",
            create,
            JSON,
            r#"{"Image":"x","Privileged":true}"#.into(),
        ),
    ]
}

#[tokio::test]
async fn a_childs_settings_come_from_no_start_body_form_or_doubled_key() {
    let s = Scoped::start().await;
    let id = s.child("c").await;
    refused(&s, on_a_child(&id)).await;
    let c = |rest: &str| format!("/v1.41/containers/{id}/{rest}");
    assert_eq!(s.ask("POST", &c("start"), &[], b"").await.status, 204);
    let seen = crate::common::docker_inspect("container", &id).unwrap();
    assert_eq!(seen["HostConfig"]["Privileged"], false, "{seen}");
    assert!(seen["HostConfig"]["Binds"].is_null(), "{}", seen["HostConfig"]);
    assert!(seen["HostConfig"]["CapAdd"].is_null(), "{}", seen["HostConfig"]);
    // Privileged said twice, false last: the engine reads the last, as berth did.
    let exec = br#"{"Cmd":["id"],"Privileged":true,"Privileged":false}"#;
    let a = s.ask("POST", &c("exec"), JSON, exec).await;
    assert_eq!(a.status, 201, "{}", a.body);
    let e = a.json()["Id"].as_str().unwrap().to_string();
    let seen = s.ask("GET", &format!("/v1.41/exec/{e}/json"), &[], b"").await;
    assert_eq!(seen.json()["ProcessConfig"]["privileged"], false, "{}", seen.body);
    let start = format!("/v1.41/exec/{e}/start");
    let settings = r#"{"Detach":true,"Privileged":true}"#.to_string();
    refused(
        &s,
        vec![
            ("an exec start with settings", "POST", start, JSON, settings),
            (
                "an exec inspect with a body",
                "GET",
                format!("/v1.41/exec/{e}/json"),
                FORM,
                "a=b".into(),
            ),
        ],
    )
    .await;
    s.end().await;
}

/// Requests of networks, volumes and the engine's own routes past the checks.
fn on_the_rest() -> Vec<Ask> {
    let (net, vol) = (
        "/v1.41/networks/create".to_string(),
        "/v1.41/volumes/create".to_string(),
    );
    let none = String::new;
    vec![
        (
            "a network as a form",
            "POST",
            net.clone(),
            FORM,
            "Name=n&Internal=false".into(),
        ),
        (
            "a network, a field in two spellings",
            "POST",
            net,
            JSON,
            r#"{"Name":"n2","Internal":false,"internal":false}"#.into(),
        ),
        (
            "a volume as a form",
            "POST",
            vol.clone(),
            FORM,
            "Name=v&Driver=local".into(),
        ),
        (
            "a volume's options in lower case",
            "POST",
            vol,
            JSON,
            r#"{"Name":"v","driveropts":{"device":"/","o":"bind","type":"none"}}"#.into(),
        ),
        ("a ping with a body", "GET", "/_ping".into(), FORM, "x=1".into()),
        (
            "a version with a body",
            "GET",
            "/v1.41/version".into(),
            JSON,
            "{}".into(),
        ),
        (
            "an info with a body",
            "GET",
            "/v1.41/info".into(),
            FORM,
            "a=b".into(),
        ),
        (
            "images, filters twice",
            "GET",
            "/v1.41/images/json?filters={}&filters={}".into(),
            NONE,
            none(),
        ),
        (
            "an image inspect with a body",
            "GET",
            "/v1.41/images/berth/sandbox/json".into(),
            FORM,
            "a".into(),
        ),
        ("an old API version", "GET", "/v1.9/version".into(), NONE, none()),
    ]
}

#[tokio::test]
async fn networks_volumes_and_the_engines_own_routes_read_only_what_berth_checked() {
    let s = Scoped::start().await;
    refused(&s, on_the_rest()).await;
    // Internal said false: berth's rewrite holds, the engine made it internal.
    let body = json!({"Name": "n3", "Internal": false});
    let a = s.json("POST", "/v1.41/networks/create", &body).await;
    assert_eq!(a.status, 201, "{}", a.body);
    let id = a.json()["Id"].as_str().unwrap().to_string();
    let seen = crate::common::docker_inspect("network", &id).unwrap();
    assert_eq!(seen["Internal"], true, "{seen}");
    let child = s.child("c").await;
    let a = s
        .json("POST", "/v1.41/volumes/create", &json!({"Name": "v"}))
        .await;
    assert_eq!(a.status, 201, "{}", a.body);
    let net = "/v1.41/networks/n3";
    refused(
        &s,
        vec![
            (
                "a connect as a form",
                "POST",
                format!("{net}/connect"),
                FORM,
                format!("Container={child}"),
            ),
            (
                "a network inspect, verbose twice",
                "GET",
                format!("{net}?verbose=1&verbose=0"),
                NONE,
                String::new(),
            ),
            (
                "a network remove with a body",
                "DELETE",
                net.into(),
                FORM,
                "force=1".into(),
            ),
            (
                "a volume remove, force twice",
                "DELETE",
                "/v1.41/volumes/v?force=1&force=1".into(),
                NONE,
                String::new(),
            ),
        ],
    )
    .await;
    // Harmless: a key the route does not read never reaches the engine.
    assert_eq!(s.ask("GET", "/_ping?fromSrc=x", &[], b"").await.status, 200);
    s.end().await;
}

/// A job's creates at once cannot pass its limits together: each network
/// or volume counts from its check until the engine answered (checked
/// before, then made, twenty at once all passed the check).
#[tokio::test]
async fn creates_at_once_make_no_more_than_the_limits() {
    let s = Scoped::start().await;
    let statuses = |answers: Vec<super::raw::Answer>| -> (usize, usize) {
        let made = answers.iter().filter(|a| a.status == 201).count();
        let refused = answers.iter().filter(|a| a.status == 403).count();
        (made, refused)
    };
    let networks = (0..20).map(|i| {
        let body = json!({"Name": format!("at-once-{i}")});
        let s = &s;
        async move { s.json("POST", "/v1.41/networks/create", &body).await }
    });
    let (made, refused) = statuses(futures_util::future::join_all(networks).await);
    assert_eq!((made, refused), (8, 12), "networks made and refused");
    let volumes = (0..30).map(|i| {
        let body = json!({"Name": format!("at-once-{i}")});
        let s = &s;
        async move { s.json("POST", "/v1.41/volumes/create", &body).await }
    });
    let (made, refused) = statuses(futures_util::future::join_all(volumes).await);
    assert_eq!((made, refused), (16, 14), "volumes made and refused");
    s.end().await;
}
