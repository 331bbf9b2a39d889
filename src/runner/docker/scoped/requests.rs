//! The other bodies and queries a job sends, checked and rewritten (pure):
//! exec creates and starts, network and volume creates, network connects,
//! and the filters of list requests (narrowed to the job's own objects).
//! Container creates are `check.rs`; which query keys and bodies reach a
//! handler at all is `intake.rs`.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::check::{Lookup, Refusal};
use super::fields::{canonical, object, text, unset};

const EXEC: &[&str] = &[
    "Container",
    "AttachStdin",
    "AttachStdout",
    "AttachStderr",
    "DetachKeys",
    "Tty",
    "Env",
    "Cmd",
    "Privileged",
    "User",
    "WorkingDir",
    "ConsoleSize",
];

/// An exec in a child: anything but privileged.
pub fn exec_create(body: Value) -> Result<Value, Refusal> {
    let mut body = canonical(object(Some(body), "body")?, EXEC, "")?;
    // docker-py names the container in the body too; the engine execs in
    // the one the path names (the job's, resolved): the body's is dropped.
    body.remove("Container");
    if !unset(body.get("Privileged")) {
        return Err(Refusal::new(
            "Privileged",
            "a privileged exec is root on the engine's host",
        ));
    }
    Ok(Value::Object(body))
}

const NETWORK: &[&str] = &[
    "Name",
    "CheckDuplicate",
    "Driver",
    "Internal",
    "Attachable",
    "Ingress",
    "IPAM",
    "EnableIPv6",
    "Options",
    "Labels",
    "Scope",
    "ConfigOnly",
    "ConfigFrom",
];

/// A network of the job's: a bridge of its own, internal (its children
/// reach each other, nothing else), labelled, named after the job.
/// Returns the body and the name the job asked.
pub fn network_create(
    body: Value,
    labels: &HashMap<String, String>,
    prefix: &str,
) -> Result<(Value, String), Refusal> {
    let mut body = canonical(object(Some(body), "body")?, NETWORK, "")?;
    let asked = text(&body, "Name").to_string();
    if !name_ok(&asked) {
        return Err(Refusal::new(
            "Name",
            format!("`{asked}` is not a network name ([a-zA-Z0-9][a-zA-Z0-9_.-]*, up to 64)"),
        ));
    }
    if !matches!(text(&body, "Driver"), "" | "bridge") {
        return Err(Refusal::new("Driver", "a job's network is a bridge"));
    }
    for (key, why) in [
        ("Options", "bridge options are berth's"),
        ("Ingress", "swarm is the engine's"),
        ("Attachable", "swarm is the engine's"),
        ("EnableIPv6", "a job's network is IPv4 only"),
        ("Scope", "a job's network is local"),
        ("ConfigOnly", "a job's network is a real one"),
        ("ConfigFrom", "a job's network is its own"),
    ] {
        if !unset(body.get(key)) {
            return Err(Refusal::new(key, why));
        }
        body.remove(key);
    }
    let ipam = canonical(
        object(body.remove("IPAM"), "IPAM")?,
        &["Driver", "Config", "Options"],
        "IPAM",
    )?;
    if !matches!(text(&ipam, "Driver"), "" | "default")
        || !unset(ipam.get("Config"))
        || !unset(ipam.get("Options"))
    {
        return Err(Refusal::new(
            "IPAM",
            "the engine picks a job network's addresses (a chosen subnet could shadow one of the host's)",
        ));
    }
    body.insert("Name".into(), json!(format!("{prefix}-{asked}")));
    body.insert("Driver".into(), json!("bridge"));
    // Children on it reach each other, and nothing beyond it.
    body.insert("Internal".into(), json!(true));
    body.insert("Labels".into(), with_labels(body.get("Labels"), labels)?);
    Ok((Value::Object(body), asked))
}

const VOLUME: &[&str] = &["Name", "Driver", "DriverOpts", "Labels", "ClusterVolumeSpec"];

/// A volume of the job's: the local driver without options (those can
/// mount any host path), labelled, named after the job.
pub fn volume_create(
    body: Value,
    labels: &HashMap<String, String>,
    prefix: &str,
) -> Result<(Value, String), Refusal> {
    let mut body = canonical(object(Some(body), "body")?, VOLUME, "")?;
    let asked = text(&body, "Name").to_string();
    if !name_ok(&asked) {
        return Err(Refusal::new(
            "Name",
            "name the volume ([a-zA-Z0-9][a-zA-Z0-9_.-]*, up to 64); unnamed volumes belong to one container",
        ));
    }
    if !matches!(text(&body, "Driver"), "" | "local") {
        return Err(Refusal::new(
            "Driver",
            "volume drivers run with the engine's privileges",
        ));
    }
    for key in ["DriverOpts", "ClusterVolumeSpec"] {
        if !unset(body.get(key)) {
            return Err(Refusal::new(key, "driver options can mount any host path"));
        }
        body.remove(key);
    }
    body.insert("Name".into(), json!(format!("{prefix}-{asked}")));
    body.insert("Driver".into(), json!("local"));
    body.insert("Labels".into(), with_labels(body.get("Labels"), labels)?);
    Ok((Value::Object(body), asked))
}

/// Connect one of the job's children to one of its networks.
pub fn network_connect(body: Value, lookup: &dyn Lookup) -> Result<Value, Refusal> {
    let mut body = canonical(object(Some(body), "body")?, &["Container", "EndpointConfig"], "")?;
    let r = text(&body, "Container").to_string();
    let Some(id) = lookup.child(&r) else {
        return Err(Refusal::new(
            "Container",
            format!("`{r}` is not a child of this job"),
        ));
    };
    body.insert("Container".into(), json!(id));
    let ep = canonical(
        object(body.remove("EndpointConfig"), "EndpointConfig")?,
        &[
            "IPAMConfig",
            "Links",
            "Aliases",
            "NetworkID",
            "EndpointID",
            "Gateway",
            "IPAddress",
            "IPPrefixLen",
            "IPv6Gateway",
            "GlobalIPv6Address",
            "GlobalIPv6PrefixLen",
            "MacAddress",
            "DriverOpts",
        ],
        "EndpointConfig",
    )?;
    for key in ["Links", "DriverOpts"] {
        if !unset(ep.get(key)) {
            return Err(Refusal::new(
                format!("EndpointConfig.{key}"),
                "links and driver options are the engine's",
            ));
        }
    }
    if !ep.is_empty() {
        body.insert("EndpointConfig".into(), Value::Object(ep));
    }
    Ok(Value::Object(body))
}

/// An exec started: whether it detaches, its terminal and size; nothing else.
pub fn exec_start(body: Value) -> Result<Value, Refusal> {
    let body = canonical(object(Some(body), "body")?, &["Detach", "Tty", "ConsoleSize"], "")?;
    Ok(Value::Object(body))
}

/// A list's `filters` (the job's JSON, if given) narrowed to objects
/// labelled `label` (`key=value`): the engine ANDs it with the job's own.
pub fn narrowed(filters: Option<&str>, label: &str) -> Result<String, Refusal> {
    let mut filters: Map<String, Value> = match filters.unwrap_or("") {
        "" => Map::new(),
        raw => match serde_json::from_str(raw) {
            Ok(Value::Object(f)) => f,
            _ => return Err(Refusal::new("filters", "must be a JSON object")),
        },
    };
    // Either form the engine reads: ["a=b"] or {"a=b": true}.
    let mut labels: Vec<Value> = match filters.remove("label") {
        Some(Value::Array(a)) => a,
        Some(Value::Object(o)) => o
            .into_iter()
            .filter(|(_, v)| v == &json!(true))
            .map(|(k, _)| json!(k))
            .collect(),
        None | Some(Value::Null) => Vec::new(),
        Some(_) => return Err(Refusal::new("filters.label", "must be a list")),
    };
    labels.push(json!(label));
    filters.insert("label".into(), Value::Array(labels));
    Ok(Value::Object(filters).to_string())
}

fn name_ok(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 64
        && n.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && n.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
}

fn with_labels(given: Option<&Value>, ours: &HashMap<String, String>) -> Result<Value, Refusal> {
    let mut labels = match given {
        Some(Value::Object(l)) => l.clone(),
        None | Some(Value::Null) => Map::new(),
        Some(_) => return Err(Refusal::new("Labels", "must be an object")),
    };
    labels.retain(|k, _| !k.to_ascii_lowercase().starts_with("berth."));
    for (k, v) in ours {
        labels.insert(k.clone(), json!(v));
    }
    Ok(Value::Object(labels))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Job;
    impl Lookup for Job {
        fn child(&self, r: &str) -> Option<String> {
            (r == "db").then(|| "c0ffee".into())
        }
        fn network(&self, _: &str) -> Option<String> {
            None
        }
        fn volume(&self, n: &str) -> String {
            n.into()
        }
    }

    #[test]
    fn creates_of_networks_volumes_and_execs() {
        let labels = HashMap::from([("berth.parent".to_string(), "p".to_string())]);
        let (net, asked) = network_create(
            json!({"Name": "testnet", "CheckDuplicate": true, "Driver": null}),
            &labels,
            "p",
        )
        .unwrap();
        assert_eq!(asked, "testnet");
        assert_eq!(net["Name"], "p-testnet");
        assert_eq!(net["Internal"], true);
        assert_eq!(net["Labels"]["berth.parent"], "p");
        assert_eq!(
            network_create(
                json!({"Name": "n", "Options": {"com.docker.network.bridge.name": "eth0"}}),
                &labels,
                "p"
            )
            .unwrap_err()
            .field,
            "Options"
        );
        assert_eq!(
            network_create(
                json!({"Name": "n", "IPAM": {"Config": [{"Subnet": "10.0.0.0/8"}]}}),
                &labels,
                "p"
            )
            .unwrap_err()
            .field,
            "IPAM"
        );
        let (vol, _) = volume_create(json!({"Name": "data"}), &labels, "p").unwrap();
        assert_eq!(vol["Name"], "p-data");
        assert_eq!(
            volume_create(json!({"Name": "d", "DriverOpts": {"device": "/"}}), &labels, "p")
                .unwrap_err()
                .field,
            "DriverOpts"
        );
        assert_eq!(
            exec_create(json!({"Cmd": ["id"], "Privileged": true}))
                .unwrap_err()
                .field,
            "Privileged"
        );
        assert_eq!(exec_create(json!({"cmd": ["id"]})).unwrap()["Cmd"], json!(["id"]));
        assert_eq!(
            network_connect(json!({"Container": "other"}), &Job)
                .unwrap_err()
                .field,
            "Container"
        );
        assert_eq!(
            network_connect(json!({"Container": "db"}), &Job).unwrap()["Container"],
            "c0ffee"
        );
    }

    #[test]
    fn lists_are_narrowed_and_exec_starts_kept_to_their_fields() {
        let f = narrowed(Some(r#"{"id":["abc"]}"#), "berth.parent=p").unwrap();
        let f: Value = serde_json::from_str(&f).unwrap();
        assert_eq!(f, json!({"id": ["abc"], "label": ["berth.parent=p"]}));
        let f = narrowed(Some(r#"{"label":{"a=b":true}}"#), "x=y").unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&f).unwrap(),
            json!({"label": ["a=b", "x=y"]})
        );
        assert_eq!(narrowed(None, "x=y").unwrap(), r#"{"label":["x=y"]}"#);
        assert!(narrowed(Some("nope"), "x=y").is_err());
        assert_eq!(
            exec_start(json!({"detach": false, "Tty": true})).unwrap(),
            json!({"Detach": false, "Tty": true})
        );
        assert_eq!(
            exec_start(json!({"Detach": false, "Privileged": true}))
                .unwrap_err()
                .field,
            "Privileged"
        );
    }
}
