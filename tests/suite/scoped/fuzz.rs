//! A small fuzzer of the scoped engine's container creates, on the real
//! engine: 1,000 random mutations of create requests as test libraries
//! send them (testcontainers for Python through docker-py, for Java through
//! docker-java, for Go), each mutation a hostile setting, a respelling, a
//! doubled or hidden key, another body type or API version. Whatever the
//! scoped engine lets through is inspected on the engine and must hold the
//! rules (not privileged, default capabilities at most, no host namespace,
//! device or path, the job's limits and labels, berth's network), then is
//! removed. The seed is printed; `BERTH_FUZZ_SEED` replays one.

use serde_json::{Value, json};

use super::raw::{Scoped, request};

/// Creates as the libraries send them (recorded, trimmed of nulls docker-java omits).
fn recorded(ws: &str) -> Vec<Value> {
    vec![
        // testcontainers-python (docker-py `containers.run`).
        json!({"Hostname": null, "Domainname": null, "ExposedPorts": {"8080/tcp": {}}, "User": null,
            "Tty": false, "OpenStdin": false, "StdinOnce": false, "AttachStdin": false,
            "AttachStdout": false, "AttachStderr": false, "Env": [], "Cmd": ["sleep", "30"],
            "Image": "berth/sandbox:latest", "Volumes": null, "NetworkDisabled": false,
            "Entrypoint": null, "WorkingDir": null, "Healthcheck": null, "StopSignal": null,
            "Labels": {"org.testcontainers.lang": "python", "org.testcontainers.session-id": "s1"},
            "HostConfig": {"NetworkMode": "default", "PublishAllPorts": false,
                "PortBindings": {"8080/tcp": [{"HostIp": "", "HostPort": ""}]}},
            "NetworkingConfig": null}),
        // testcontainers-java (docker-java).
        json!({"Image": "berth/sandbox:latest", "Cmd": ["sleep", "30"], "Env": ["A=1"],
            "ExposedPorts": {"80/tcp": {}},
            "Labels": {"org.testcontainers": "true", "org.testcontainers.lang": "java"},
            "HostConfig": {"PortBindings": {"80/tcp": [{"HostIp": "", "HostPort": ""}]},
                "PublishAllPorts": true, "Binds": [format!("{ws}:/work:ro")], "ExtraHosts": [],
                "Links": [], "Memory": 268435456}}),
        // testcontainers-go.
        json!({"Image": "berth/sandbox:latest", "Cmd": ["sleep", "30"], "Tty": false,
            "Labels": {"org.testcontainers": "true", "org.testcontainers.lang": "go"},
            "HostConfig": {"AutoRemove": false, "NetworkMode": "bridge", "Privileged": false,
                "Mounts": [{"Type": "tmpfs", "Target": "/scratch"}], "CapAdd": null,
                "ShmSize": 67108864},
            "NetworkingConfig": {"EndpointsConfig": {}}}),
    ]
}

/// xorshift64*: small, seeded, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn pick<'a, T>(&mut self, of: &'a [T]) -> &'a T {
        &of[(self.next() % of.len() as u64) as usize]
    }
}

/// A hostile HostConfig setting.
fn hostile(r: &mut Rng, ws: &str) -> (String, Value) {
    let v = |k: &str, v: Value| (k.to_string(), v);
    let bind = r.pick(&[
        "/:/host",
        "/var/run/docker.sock:/s",
        "/etc:/etc:ro",
        "../..:/up",
        "/tmp:/t:rshared",
    ]);
    let binds = [bind.to_string(), format!("{ws}/../..:/up"), format!("{ws}:/w:rw")];
    match r.next() % 24 {
        0 => v("Privileged", json!(true)),
        1 => v(
            "CapAdd",
            json!([r.pick(&["SYS_ADMIN", "ALL", "cap_net_admin", "SYS_PTRACE", "CHOWN"])]),
        ),
        2 => v("Binds", json!([r.pick(&binds)])),
        3 => v(
            "Mounts",
            json!([{"Type": r.pick(&["bind", "volume", "tmpfs", "npipe"]), "Source": r.pick(&["/", ws, "vol"]),
                "Target": "/m", "VolumeOptions": {"DriverConfig": {"Name": "local", "Options": {"device": "/"}}}}]),
        ),
        4 => v(
            "NetworkMode",
            json!(r.pick(&["host", "none", "container:other", "bridge", "evilnet"])),
        ),
        5 => v(
            r.pick::<&str>(&["PidMode", "IpcMode", "UTSMode", "UsernsMode", "CgroupnsMode"]),
            json!("host"),
        ),
        6 => v(
            "Devices",
            json!([{"PathOnHost": "/dev/mem", "PathInContainer": "/dev/m", "CgroupPermissions": "rwm"}]),
        ),
        7 => v(
            "SecurityOpt",
            json!([r.pick(&[
                "seccomp=unconfined",
                "apparmor=unconfined",
                "no-new-privileges:false",
                "label=disable"
            ])]),
        ),
        8 => v("Memory", json!(r.pick(&[1i64 << 40, -1, 0, 7 << 20]))),
        9 => v("PidsLimit", json!(r.pick(&[-1i64, 0, 1 << 30]))),
        10 => v("NanoCpus", json!(r.pick(&[64_000_000_000i64, -1, 1]))),
        11 => v("Sysctls", json!({"net.ipv4.ip_forward": "1"})),
        12 => v("CgroupParent", json!("/")),
        13 => v(
            "Runtime",
            json!(r.pick(&["runsc", "io.containerd.runc.v2", "runc"])),
        ),
        14 => v(r.pick::<&str>(&["MaskedPaths", "ReadonlyPaths"]), json!([])),
        15 => v(
            "RestartPolicy",
            json!({"Name": r.pick(&["always", "unless-stopped", "on-failure"])}),
        ),
        16 => v(
            r.pick::<&str>(&["OomScoreAdj", "OomKillDisable"]),
            json!(r.pick(&[json!(-1000), json!(true)])),
        ),
        17 => v(
            "PortBindings",
            json!({"80/tcp": [{"HostIp": "0.0.0.0", "HostPort": "80"}]}),
        ),
        18 => v("VolumeDriver", json!(r.pick(&["local", "evil"]))),
        19 => v(
            "LogConfig",
            json!({"Type": r.pick(&["syslog", "json-file", "gelf"])}),
        ),
        20 => v("CpuQuota", json!(r.pick(&[10_000_000i64, 100_000]))),
        21 => v("MemorySwap", json!(-1)),
        22 => v("DeviceRequests", json!([{"Driver": "nvidia", "Count": -1}])),
        _ => v("Cgroup", json!("host")),
    }
}

/// One mutated request: the request line's path and the body, JSON text.
fn mutate(r: &mut Rng, base: &Value, ws: &str) -> (String, Vec<(&'static str, &'static str)>, Vec<u8>) {
    let mut body = base.clone();
    let mut path = String::from("/v1.41/containers/create");
    let mut headers = vec![("Content-Type", "application/json")];
    let mut raw_edit: Option<String> = None;
    for _ in 0..=(r.next() % 3) {
        match r.next() % 10 {
            0..=4 => {
                let (k, v) = hostile(r, ws);
                body["HostConfig"][k.as_str()] = v;
            }
            5 => {
                // A setting respelled, or moved to the top (the engine's old wrapper reads it there).
                let (k, v) = hostile(r, ws);
                match r.next() % 2 {
                    0 => body["HostConfig"][k.to_ascii_lowercase().as_str()] = v,
                    _ => body[k.as_str()] = v,
                }
            }
            6 => {
                let labels =
                    json!({"berth.parent": "someone-else", "BERTH.instance": "x", "berth.child": "y"});
                body["Labels"] = labels;
            }
            7 => {
                // Twice in two spellings, or behind a unicode escape, in the text itself.
                let key = r.pick(&[
                    r#""privileged": true, "#,
                    r#""Privil\u0065ged": true, "#,
                    r#""binds": ["/:/h"], "#,
                ]);
                raw_edit = Some(key.to_string());
            }
            8 => {
                path = r
                    .pick(&[
                        "/v1.41/containers/create?name=a&name=b",
                        "/v1.23/containers/create",
                        "/containers/create?Name=x",
                        "/v1.41/containers/create?name=../x",
                        "/v1.41/containers/create?platform=linux",
                    ])
                    .to_string();
            }
            _ => {
                headers = vec![*r.pick(&[
                    ("Content-Type", "application/x-www-form-urlencoded"),
                    ("Content-Type", "text/plain"),
                    ("Transfer-Encoding", "chunked"),
                    ("X-Registry-Auth", "e30="),
                ])];
            }
        }
    }
    let mut text = body.to_string();
    if let (Some(edit), Some(at)) = (raw_edit, text.find("\"HostConfig\":{")) {
        text.insert_str(at + "\"HostConfig\":{".len(), &edit);
    }
    (path, headers, text.into_bytes())
}

/// The engine's default capabilities (20.10): all a child may add.
#[rustfmt::skip]
const DEFAULT_CAPS: &[&str] = &[
    "CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID", "SETUID", "SETFCAP", "SETPCAP",
    "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE",
];

fn empty(v: &Value) -> bool {
    v.is_null() || v.as_array().is_some_and(Vec::is_empty) || v.as_object().is_some_and(|o| o.is_empty())
}

/// Binds only of the job's copies, read-only; volumes only the job's, local.
fn mounts_ok(c: &Value, parent: &str, copies: &str) -> bool {
    empty(&c["HostConfig"]["Binds"])
        && c["Mounts"].as_array().is_none_or(|m| {
            m.iter().all(|m| match m["Type"].as_str() {
                Some("bind") => {
                    m["Source"].as_str().is_some_and(|p| p.starts_with(copies)) && m["RW"] == false
                }
                Some("volume") => {
                    m["Driver"] == "local" && m["Name"].as_str().is_some_and(|n| n.starts_with(parent))
                }
                _ => true,
            })
        })
}

/// The rules every child the engine made must hold; the first broken, if any.
fn broken(c: &Value, s: &Scoped, copies: &str) -> Option<&'static str> {
    let h = &c["HostConfig"];
    let caps_ok = h["CapAdd"].as_array().is_none_or(|a| {
        a.iter().all(|c| {
            let c = c.as_str().unwrap_or("").to_ascii_uppercase();
            DEFAULT_CAPS.contains(&c.trim_start_matches("CAP_"))
        })
    });
    // (Not CgroupnsMode: the engine's default is `host` on cgroup v1 for
    // every container, `docker run`'s too; an asked `host` is refused.)
    let host_ns = ["PidMode", "IpcMode", "UTSMode", "UsernsMode"]
        .iter()
        .any(|k| h[*k].as_str().is_some_and(|m| m == "host"));
    let int = |k: &str| h[k].as_i64().unwrap_or(0);
    let (cpus, memory, pids) = (int("NanoCpus"), int("Memory"), int("PidsLimit"));
    let network = h["NetworkMode"].as_str().unwrap_or("");
    let checks = [
        (h["Privileged"] == false, "privileged"),
        (caps_ok, "capabilities beyond the default set"),
        (!host_ns, "a host namespace"),
        (empty(&h["Devices"]) && empty(&h["DeviceRequests"]), "devices"),
        (
            h["SecurityOpt"] == json!(["no-new-privileges"]),
            "security options",
        ),
        (
            mounts_ok(c, &s.parent, copies),
            "a mount outside the job's copies",
        ),
        (
            memory > 0 && memory <= 2 << 30 && h["MemorySwap"] == h["Memory"],
            "memory",
        ),
        (pids > 0 && pids <= 512, "processes"),
        (cpus > 0 && cpus <= 2_000_000_000 && int("CpuQuota") == 0, "CPUs"),
        (
            empty(&h["Sysctls"]) && h["CgroupParent"] == "" && h["Runtime"] == "runc",
            "kernel settings",
        ),
        (
            !empty(&h["MaskedPaths"]) && h["OomKillDisable"] != true,
            "masked paths or OOM",
        ),
        (int("OomScoreAdj") >= 0, "OOM score"),
        (
            empty(&h["PortBindings"]) && h["PublishAllPorts"] != true,
            "published ports",
        ),
        (
            matches!(
                h["RestartPolicy"]["Name"].as_str(),
                Some("" | "no" | "on-failure") | None
            ),
            "restart",
        ),
        (c["Config"]["Labels"]["berth.parent"] == json!(s.parent), "labels"),
        (
            network == "none" || network.contains("-net-") || network.starts_with("container:"),
            "network",
        ),
    ];
    checks.iter().find(|(ok, _)| !ok).map(|(_, what)| *what)
}

#[tokio::test]
async fn a_thousand_mutated_creates_never_make_a_child_outside_the_rules() {
    let seed = std::env::var("BERTH_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x0037_b3e7_u64);
    eprintln!("scoped fuzz seed {seed} (BERTH_FUZZ_SEED replays it)");
    let mut r = Rng(seed | 1);
    let s = Scoped::start().await;
    let ws = s.tm.workspace().canonicalize().unwrap().display().to_string();
    let copies = s.socket.parent().unwrap().join("copies").display().to_string();
    let bases = recorded(&ws);
    let (mut made, mut statuses) = (0, std::collections::BTreeMap::<u16, usize>::new());
    for (n, base) in bases.iter().enumerate() {
        let a = s.json("POST", "/v1.41/containers/create", base).await;
        assert_eq!(a.status, 201, "recorded create {n} as it is: {}", a.body);
        let id = a.json()["Id"].as_str().unwrap().to_string();
        assert_eq!(
            s.ask("DELETE", &format!("/v1.41/containers/{id}?force=1"), &[], b"")
                .await
                .status,
            204
        );
    }
    for i in 0..1000 {
        let base = r.pick(&bases).clone();
        let (path, headers, body) = mutate(&mut r, &base, &ws);
        let a = s.send(&request("POST", &path, &headers, &body)).await;
        *statuses.entry(a.status).or_default() += 1;
        assert!(
            a.status == 201 || a.status >= 400,
            "#{i}: {} {}",
            a.status,
            a.body
        );
        if a.status != 201 {
            continue;
        }
        made += 1;
        let id = a.json()["Id"].as_str().unwrap().to_string();
        let seen = crate::common::docker_inspect("container", &id).expect("the child made");
        let text = String::from_utf8_lossy(&body);
        if let Some(what) = broken(&seen, &s, &copies) {
            panic!(
                "#{i} (seed {seed}) made a child with {what}:\n{path} {headers:?} {text}\n{}",
                seen["HostConfig"]
            );
        }
        let gone = s
            .ask("DELETE", &format!("/v1.41/containers/{id}?force=1"), &[], b"")
            .await;
        assert_eq!(gone.status, 204, "#{i}: {}", gone.body);
    }
    eprintln!("scoped fuzz: {made} of 1000 made and inspected; statuses {statuses:?}");
    assert!(
        made > 50,
        "too few creates got through to test the rules: {statuses:?}"
    );
    assert!(s.children().is_empty(), "children left: {:?}", s.children());
    s.end().await;
}
