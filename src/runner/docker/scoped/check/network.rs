//! A child's network in its create: its own pool network (one container
//! per network), `none`, or another child's namespace; networks the job
//! made are joined after the create; nothing is published (berth relays).

use serde_json::{Map, Value, json};

use super::super::fields::{canonical, join, object, text, unset};
use super::{ENDPOINT, Lookup, Refusal};

/// The child's network: its own pool network, `none`, or another child's
/// namespace; networks the job made are joined after the create.
pub fn network(
    host: &mut Map<String, Value>,
    top: &mut Map<String, Value>,
    own: &str,
    lookup: &dyn Lookup,
) -> Result<(bool, Vec<(String, Value)>), Refusal> {
    let mode = text(host, "NetworkMode").to_string();
    let field = "HostConfig.NetworkMode";
    let mut connect = Vec::new();
    let (own_network, mode_out, asked_net) = match mode.as_str() {
        "" | "default" | "bridge" => (true, own.to_string(), None),
        "none" => (false, "none".to_string(), None),
        "host" => return Err(Refusal::new(field, "the host's network is not a child's")),
        m if m.starts_with("container:") => match lookup.child(&m["container:".len()..]) {
            Some(id) => (false, format!("container:{id}"), None),
            None => {
                return Err(Refusal::new(
                    field,
                    "a child may share only the network of another child of the same job",
                ));
            }
        },
        m => match lookup.network(m) {
            Some(id) => (true, own.to_string(), Some((m.to_string(), id))),
            None => return Err(Refusal::new(field, format!("`{m}` is not a network of this job"))),
        },
    };
    host.insert("NetworkMode".into(), json!(mode_out));
    let mut net = object(top.remove("NetworkingConfig"), "NetworkingConfig")?;
    // Only `EndpointsConfig` means anything to the engine; docker-py also
    // sends `{<network>: null}` here, which the engine ignores: so do we
    // (dropped, never forwarded).
    net.retain(|k, _| k.eq_ignore_ascii_case("EndpointsConfig"));
    let net = canonical(net, &["EndpointsConfig"], "NetworkingConfig")?;
    let mut endpoints = object(
        net.get("EndpointsConfig").cloned(),
        "NetworkingConfig.EndpointsConfig",
    )?;
    if let Some((name, id)) = &asked_net {
        let settings = endpoints.remove(name).unwrap_or(Value::Null);
        connect.push((id.clone(), settings));
    }
    for (name, settings) in endpoints {
        if matches!(name.as_str(), "bridge" | "default") || name == mode {
            continue;
        }
        let Some(id) = lookup.network(&name) else {
            return Err(Refusal::new(
                "NetworkingConfig.EndpointsConfig",
                format!("`{name}` is not a network of this job"),
            ));
        };
        connect.push((id, settings));
    }
    for (_, settings) in connect.iter_mut() {
        let s = canonical(
            object(Some(settings.take()), "NetworkingConfig.EndpointsConfig")?,
            ENDPOINT,
            "NetworkingConfig.EndpointsConfig",
        )?;
        for key in ["Links", "DriverOpts"] {
            if !unset(s.get(key)) {
                return Err(Refusal::new(
                    join("NetworkingConfig.EndpointsConfig", key),
                    "not a child's (links and driver options are the engine's)",
                ));
            }
        }
        *settings = Value::Object(s);
    }
    if !own_network && !connect.is_empty() {
        return Err(Refusal::new(
            "NetworkingConfig.EndpointsConfig",
            "a child without a network of its own joins no other",
        ));
    }
    Ok((own_network, connect))
}

/// No published ports: berth relays each exposed port from the job's
/// gateway (the engine publishes nothing on a job's network, and never on
/// a public address).
pub fn ports(host: &mut Map<String, Value>, top: &mut Map<String, Value>) -> Result<(), Refusal> {
    let bindings = object(host.remove("PortBindings"), "HostConfig.PortBindings")?;
    host.remove("PublishAllPorts");
    let mut exposed = object(top.remove("ExposedPorts"), "ExposedPorts")?;
    for key in bindings.keys() {
        exposed.entry(key.clone()).or_insert(json!({}));
    }
    if !exposed.is_empty() {
        top.insert("ExposedPorts".into(), Value::Object(exposed));
    }
    Ok(())
}
