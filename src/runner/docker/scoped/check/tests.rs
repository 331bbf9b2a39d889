use super::*;
use pretty_assertions::assert_eq;

struct Job;

impl Lookup for Job {
    fn child(&self, r: &str) -> Option<String> {
        (r == "db" || r == "c0ffee").then(|| "c0ffee00".to_string())
    }
    fn network(&self, r: &str) -> Option<String> {
        (r == "testnet").then(|| "n1d".to_string())
    }
    fn volume(&self, name: &str) -> String {
        format!("berth-x-job-1-{name}")
    }
}

fn labels() -> HashMap<String, String> {
    HashMap::from([("berth.parent".to_string(), "job-1".to_string())])
}

fn check(body: Value) -> Result<Plan, Refusal> {
    let labels = labels();
    let rules = Rules {
        workspace: Path::new("/ws"),
        budget: Budget {
            cpus: 2.0,
            memory_left: 1 << 30,
            pids_left: 300,
        },
        labels: &labels,
        network: "pool-7",
    };
    create(body, &rules, &Job)
}

fn refused(body: Value) -> String {
    check(body).unwrap_err().field
}

#[test]
fn what_testcontainers_sends_is_rewritten_not_refused() {
    // docker-py's create for DockerContainer("img").with_exposed_ports(80).
    let plan = check(json!({
        "Image": "berth/sandbox:latest", "Cmd": ["httpd", "-f"], "Tty": false,
        "ExposedPorts": {"80/tcp": {}},
        "Labels": {"org.testcontainers.lang": "python", "berth.instance": "forged"},
        "HostConfig": {"PortBindings": {"80/tcp": [{"HostIp": "", "HostPort": ""}]}, "NetworkMode": "default",
                       "Binds": ["/ws/fixtures:/data:rw"], "Privileged": false, "Init": true}
    }))
    .unwrap();
    let host = &plan.body["HostConfig"];
    assert_eq!(host["NetworkMode"], "pool-7");
    assert_eq!(host.get("PortBindings"), None);
    assert_eq!(host["SecurityOpt"], json!(["no-new-privileges"]));
    assert_eq!(host["Memory"], json!(512u64 << 20));
    assert_eq!(host["MemorySwap"], host["Memory"]);
    assert_eq!(host["PidsLimit"], json!(256));
    assert_eq!(host["NanoCpus"], json!(2_000_000_000i64));
    assert_eq!(
        host["Mounts"][0],
        json!({"Type": "bind", "Source": "", "Target": "/data", "ReadOnly": true})
    );
    assert_eq!(
        plan.copies,
        [BindCopy {
            index: 0,
            rel: "fixtures".into()
        }]
    );
    assert_eq!(plan.body["ExposedPorts"], json!({"80/tcp": {}}));
    let labels = plan.body["Labels"].as_object().unwrap();
    assert_eq!(
        labels.get("berth.instance"),
        None,
        "a forged berth label is dropped"
    );
    assert_eq!(labels["berth.parent"], "job-1");
    assert_eq!(labels["org.testcontainers.lang"], "python");
    assert!(plan.own_network);
}

#[test]
fn the_hostile_creates_are_refused_by_field() {
    let img = |host: Value| json!({"Image": "x", "HostConfig": host});
    assert_eq!(refused(img(json!({"Privileged": true}))), "HostConfig.Privileged");
    assert_eq!(refused(img(json!({"privileged": true}))), "HostConfig.Privileged");
    assert_eq!(
        refused(img(json!({"CapAdd": ["SYS_ADMIN"]}))),
        "HostConfig.CapAdd"
    );
    assert_eq!(refused(img(json!({"CapAdd": ["ALL"]}))), "HostConfig.CapAdd");
    assert_eq!(refused(img(json!({"Binds": ["/:/host"]}))), "HostConfig.Binds");
    assert_eq!(
        refused(img(
            json!({"Binds": ["/var/run/docker.sock:/var/run/docker.sock"]})
        )),
        "HostConfig.Binds"
    );
    assert_eq!(
        refused(img(
            json!({"Mounts": [{"Type": "bind", "Source": "/etc", "Target": "/e"}]})
        )),
        "HostConfig.Mounts"
    );
    assert_eq!(
        refused(img(json!({"Binds": ["/ws/../etc:/e"]}))),
        "HostConfig.Binds"
    );
    assert_eq!(
        refused(img(json!({"NetworkMode": "host"}))),
        "HostConfig.NetworkMode"
    );
    assert_eq!(
        refused(img(json!({"NetworkMode": "container:other"}))),
        "HostConfig.NetworkMode"
    );
    assert_eq!(
        refused(img(json!({"NetworkMode": "someones-net"}))),
        "HostConfig.NetworkMode"
    );
    assert_eq!(refused(img(json!({"PidMode": "host"}))), "HostConfig.PidMode");
    assert_eq!(refused(img(json!({"IpcMode": "host"}))), "HostConfig.IpcMode");
    assert_eq!(refused(img(json!({"UTSMode": "host"}))), "HostConfig.UTSMode");
    assert_eq!(
        refused(img(json!({"UsernsMode": "host"}))),
        "HostConfig.UsernsMode"
    );
    assert_eq!(
        refused(img(json!({"CgroupnsMode": "host"}))),
        "HostConfig.CgroupnsMode"
    );
    assert_eq!(
        refused(img(json!({"Devices": [{"PathOnHost": "/dev/sda"}]}))),
        "HostConfig.Devices"
    );
    assert_eq!(
        refused(img(json!({"SecurityOpt": ["seccomp=unconfined"]}))),
        "HostConfig.SecurityOpt"
    );
    assert_eq!(
        refused(img(json!({"SecurityOpt": ["apparmor:unconfined"]}))),
        "HostConfig.SecurityOpt"
    );
    assert_eq!(refused(img(json!({"MaskedPaths": []}))), "HostConfig.MaskedPaths");
    assert_eq!(
        refused(img(json!({"Sysctls": {"kernel.x": "1"}}))),
        "HostConfig.Sysctls"
    );
    assert_eq!(
        refused(img(json!({"CgroupParent": "/"}))),
        "HostConfig.CgroupParent"
    );
    assert_eq!(
        refused(img(json!({"Runtime": "runsc-debug"}))),
        "HostConfig.Runtime"
    );
    assert_eq!(
        refused(img(json!({"VolumeDriver": "x"}))),
        "HostConfig.VolumeDriver"
    );
    assert_eq!(
        refused(img(
            json!({"Mounts": [{"Type": "volume", "Source": "v", "Target": "/v",
            "VolumeOptions": {"DriverConfig": {"Name": "local", "Options": {"type": "none", "o": "bind", "device": "/"}}}}]})
        )),
        "HostConfig.Mounts.VolumeOptions.DriverConfig"
    );
    assert_eq!(
        refused(img(json!({"OomKillDisable": true}))),
        "HostConfig.OomKillDisable"
    );
    assert_eq!(
        refused(img(json!({"RestartPolicy": {"Name": "always"}}))),
        "HostConfig.RestartPolicy"
    );
    assert_eq!(
        refused(img(json!({"LogConfig": {"Type": "syslog"}}))),
        "HostConfig.LogConfig"
    );
    assert_eq!(refused(img(json!({"Frobnicate": 1}))), "HostConfig.Frobnicate");
    assert_eq!(refused(json!({"Image": "x", "Nope": 1})), "Nope");
    assert_eq!(refused(json!({"HostConfig": {}})), "Image");
}

#[test]
fn limits_come_from_the_jobs_budget() {
    let img = |host: Value| json!({"Image": "x", "HostConfig": host});
    assert_eq!(refused(img(json!({"Memory": 2u64 << 30}))), "HostConfig.Memory");
    assert_eq!(refused(img(json!({"PidsLimit": 301}))), "HostConfig.PidsLimit");
    assert_eq!(
        refused(img(json!({"NanoCpus": 3_000_000_000i64}))),
        "HostConfig.NanoCpus"
    );
    assert_eq!(
        refused(img(json!({"CpuQuota": 300_000, "CpuPeriod": 100_000}))),
        "HostConfig.NanoCpus"
    );
    let plan = check(img(
        json!({"Memory": 64u64 << 20, "PidsLimit": 10, "CpuQuota": 50_000}),
    ))
    .unwrap();
    assert_eq!((plan.memory, plan.pids, plan.cpus), (64 << 20, 10, 0.5));
    assert_eq!(plan.body["HostConfig"]["NanoCpus"], json!(500_000_000i64));
    assert_eq!(plan.body["HostConfig"].get("CpuQuota"), None);
    // A spent budget refuses rather than starting a child with nothing.
    let labels = labels();
    let rules = Rules {
        workspace: Path::new("/ws"),
        budget: Budget {
            cpus: 1.0,
            memory_left: 1 << 20,
            pids_left: 100,
        },
        labels: &labels,
        network: "pool-7",
    };
    let err = create(img(json!({})), &rules, &Job).unwrap_err();
    assert_eq!(err.field, "HostConfig.Memory");
    assert!(err.reason.contains("spent"), "{}", err.reason);
}

#[test]
fn only_the_jobs_own_children_networks_and_volumes() {
    let plan = check(
        json!({"Image": "x", "HostConfig": {"NetworkMode": "testnet", "PidMode": "container:db",
        "Binds": ["data:/var/lib/data:ro"], "VolumesFrom": ["db:ro"]},
        "NetworkingConfig": {"EndpointsConfig": {"testnet": {"Aliases": ["web"]}}}}),
    )
    .unwrap();
    assert_eq!(plan.connect, [("n1d".to_string(), json!({"Aliases": ["web"]}))]);
    assert_eq!(plan.body["HostConfig"]["NetworkMode"], "pool-7");
    assert_eq!(plan.body["HostConfig"]["PidMode"], "container:c0ffee00");
    assert_eq!(plan.body["HostConfig"]["VolumesFrom"], json!(["c0ffee00:ro"]));
    assert_eq!(
        plan.volumes,
        [("data".to_string(), "berth-x-job-1-data".to_string())]
    );
    assert_eq!(plan.body.get("NetworkingConfig"), None);
    assert_eq!(
        refused(json!({"Image": "x", "HostConfig": {"VolumesFrom": ["someone"]}})),
        "HostConfig.VolumesFrom"
    );
    assert_eq!(
        refused(json!({"Image": "x", "NetworkingConfig": {"EndpointsConfig": {"other": {}}}})),
        "NetworkingConfig.EndpointsConfig"
    );
    // docker-py's `network=` sends `{"testnet": null}` beside EndpointsConfig: ignored, as the engine does.
    let py = check(
        json!({"Image": "x", "HostConfig": {"NetworkMode": "testnet"}, "NetworkingConfig": {"testnet": null}}),
    );
    assert_eq!(py.unwrap().connect, [("n1d".to_string(), json!({}))]);
    let none = check(json!({"Image": "x", "HostConfig": {"NetworkMode": "none"}})).unwrap();
    assert!(!none.own_network);
}
