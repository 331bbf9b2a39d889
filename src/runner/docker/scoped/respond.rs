//! Answers rewritten on their way back to the job (pure): the engine's
//! `info` without the host's details, and a child's ports where the job
//! reaches them (berth's relay on the job's gateway) instead of what the
//! engine published (nothing). Everything else passes as the engine said it.

use std::net::SocketAddr;

use serde_json::{Map, Value, json};

/// `info` fields a test library reads (versions, OS, CPUs, memory); the
/// host's name, paths, labels, proxies, registries and container counts are
/// not the job's business.
const INFO_KEPT: &[&str] = &[
    "ServerVersion",
    "OperatingSystem",
    "OSType",
    "OSVersion",
    "Architecture",
    "KernelVersion",
    "NCPU",
    "MemTotal",
    "Driver",
    "CgroupDriver",
    "CgroupVersion",
    "IndexServerAddress",
    "DefaultRuntime",
    "ExperimentalBuild",
    "SecurityOptions",
    "Isolation",
];

pub fn info(v: Value) -> Value {
    let Value::Object(all) = v else { return v };
    let mut kept: Map<String, Value> = all
        .into_iter()
        .filter(|(k, _)| INFO_KEPT.contains(&k.as_str()))
        .collect();
    kept.insert("Name".into(), json!("berth-scoped-engine"));
    kept.insert("ID".into(), json!("berth-scoped-engine"));
    Value::Object(kept)
}

/// A container's inspect answer with its ports as the job reaches them,
/// and the name the job gave it (not the engine's, which berth made unique).
pub fn container(mut v: Value, relayed: &[(u16, SocketAddr)], name: Option<&str>) -> Value {
    if let (Some(name), Some(o)) = (name, v.as_object_mut()) {
        o.insert("Name".into(), json!(format!("/{name}")));
    }
    let Some(settings) = v.get_mut("NetworkSettings").and_then(Value::as_object_mut) else {
        return v;
    };
    let mut ports = match settings.remove("Ports") {
        Some(Value::Object(p)) => p,
        _ => Map::new(),
    };
    // What the engine published (nothing, on a job's network) is not where
    // the job reaches the child.
    for v in ports.values_mut() {
        *v = Value::Null;
    }
    for (port, at) in relayed {
        ports.insert(
            format!("{port}/tcp"),
            json!([{"HostIp": at.ip().to_string(), "HostPort": at.port().to_string()}]),
        );
    }
    settings.insert("Ports".into(), Value::Object(ports));
    v
}

/// A container list narrowed to the job's children (`of(id)` is `None`
/// for anything else, whatever the engine's filter let through), with each
/// child's ports as the job reaches them and its name.
pub fn container_list(v: Value, of: impl Fn(&str) -> Option<(Vec<(u16, SocketAddr)>, String)>) -> Value {
    let Value::Array(items) = v else {
        return Value::Array(Vec::new());
    };
    Value::Array(
        items
            .into_iter()
            .filter_map(|mut item| {
                let id = item.get("Id").and_then(Value::as_str).unwrap_or_default().to_string();
                let (relayed, name) = of(&id)?;
                let ports: Vec<Value> = relayed
                    .iter()
                    .map(|(port, at)| {
                        json!({"IP": at.ip().to_string(), "PrivatePort": port, "PublicPort": at.port(), "Type": "tcp"})
                    })
                    .collect();
                let o = item.as_object_mut()?;
                o.insert("Ports".into(), Value::Array(ports));
                o.insert("Names".into(), json!([format!("/{name}")]));
                Some(item)
            })
            .collect(),
    )
}

/// The job's networks named as it named them (`asked(id)`: `None` for a
/// network that is not the job's): a list narrowed to them, or one renamed.
pub fn networks(v: Value, asked: impl Fn(&str) -> Option<String>) -> Value {
    let name_of = |n: &Value| n.get("Id").and_then(Value::as_str).and_then(&asked);
    let rename = |mut n: Value, name: String| {
        if let Some(o) = n.as_object_mut() {
            o.insert("Name".into(), json!(name));
        }
        n
    };
    match v {
        Value::Array(items) => Value::Array(
            items
                .into_iter()
                .filter_map(|n| name_of(&n).map(|name| rename(n, name)))
                .collect(),
        ),
        one => match name_of(&one) {
            Some(name) => rename(one, name),
            None => one,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_keeps_versions_not_the_host() {
        let v = info(
            json!({"ServerVersion": "20.10", "Name": "buildhost", "DockerRootDir": "/var/lib/docker",
            "Labels": ["secret"], "HttpProxy": "http://user:pw@proxy", "Containers": 40, "NCPU": 2}),
        );
        assert_eq!(
            v,
            json!({"ServerVersion": "20.10", "NCPU": 2, "Name": "berth-scoped-engine", "ID": "berth-scoped-engine"})
        );
    }

    #[test]
    fn ports_are_the_relays() {
        let at: SocketAddr = "172.30.0.1:41000".parse().unwrap();
        let v = container(
            json!({"Id": "c", "NetworkSettings": {"Ports": {"80/tcp": null, "9/udp": [{"HostIp": "0.0.0.0", "HostPort": "9"}]}}}),
            &[(80, at)],
            Some("web"),
        );
        assert_eq!(v["Name"], "/web");
        assert_eq!(
            v["NetworkSettings"]["Ports"],
            json!({"80/tcp": [{"HostIp": "172.30.0.1", "HostPort": "41000"}], "9/udp": null})
        );
        let l = container_list(
            json!([{"Id": "c", "Ports": [{"PrivatePort": 80}]}, {"Id": "other", "Names": ["/db"]}]),
            |id| (id == "c").then(|| (vec![(80, at)], "web".to_string())),
        );
        assert_eq!(l.as_array().map(Vec::len), Some(1), "only the job's own: {l}");
        assert_eq!(l[0]["Names"], json!(["/web"]));
        assert_eq!(
            l[0]["Ports"],
            json!([{"IP": "172.30.0.1", "PrivatePort": 80, "PublicPort": 41000, "Type": "tcp"}])
        );
        let n = networks(
            json!([{"Id": "n1", "Name": "p-testnet"}, {"Id": "n2", "Name": "x"}]),
            |id| (id == "n1").then(|| "testnet".into()),
        );
        assert_eq!(n, json!([{"Id": "n1", "Name": "testnet"}]));
    }
}
