//! Unit tests of the create body: limits, hardening, user, mounts, network, names.
use super::*;
use crate::model::{Limits, PortSpec};
use bollard::models::MountBindOptionsPropagationEnum;
use pretty_assertions::assert_eq;

const NO_DEFAULTS: Limits = Limits {
    cpus: None,
    memory: None,
    pids: None,
};

fn ctx<'a>(id: &'a JobId, ws: &'a Path, cwd: &'a Path) -> Context<'a> {
    Context {
        remote: None,
        layer: None,
        engine: None,
        id,
        image: "berth/sandbox:latest",
        instance: "t",
        owner: "1:2",
        state: "0123456789abcdef",
        user: "1000:1001",
        network: "berth-t-01234567-net",
        default_network: Network::Isolated,
        defaults: &NO_DEFAULTS,
        workspace: ws,
        cwd,
        attach: &NO_ATTACH,
        read_only: false,
        protected: &[],
        pinned: &[],
        runtime: None,
    }
}

/// Nothing from the network's side: the engine publishes, no extra files.
static NO_ATTACH: crate::runner::docker::reach::Attach = crate::runner::docker::reach::Attach {
    berth_forwards: false,
    env: Vec::new(),
    mounts: Vec::new(),
    hostname: None,
    alias: None,
};

#[test]
fn home_is_never_a_mount_point_inside_the_workspace() {
    // `workspace = "/home"` would have the engine make /home/berth on the host.
    assert_eq!(home_dir(Path::new("/home")), "/run/berth-home");
    assert_eq!(home_dir(Path::new("/home/berth")), "/run/berth-home");
    assert_eq!(home_dir(Path::new("/srv/app")), HOME_DIR);
    let id = JobId::from_number(1);
    let ws = Path::new("/home");
    let (b, _) = body(&JobSpec::shell("true"), &ctx(&id, ws, ws), &[]).unwrap();
    let tmpfs = b.host_config.unwrap().tmpfs.unwrap();
    assert!(tmpfs.keys().all(|k| !Path::new(k).starts_with(ws)), "{tmpfs:?}");
    assert!(b.env.unwrap().contains(&"HOME=/run/berth-home".to_string()));
}

#[test]
fn body_carries_limits_hardening_labels_and_ports() {
    let ws = tempfile::tempdir().unwrap();
    let id = JobId::from_number(7);
    let mut spec = JobSpec::shell("echo hi").with_port(3000);
    spec.ports.push(PortSpec {
        port: 53,
        host_port: None,
        proto: crate::model::Proto::Udp,
    });
    spec.limits = Limits {
        cpus: Some(0.5),
        memory: Some(64 << 20),
        pids: None,
    };
    spec.env.insert("PORT".into(), "9999".into());
    let plan = plan_ports(&spec, true).unwrap();
    let (b, applied) = body(&spec, &ctx(&id, ws.path(), ws.path()), &plan).unwrap();
    let hc = b.host_config.as_ref().unwrap();
    assert_eq!(hc.nano_cpus, Some(500_000_000));
    assert_eq!(hc.memory, Some(64 << 20));
    assert_eq!(hc.memory_swap, hc.memory);
    assert_eq!(hc.pids_limit, Some(DEFAULT_PIDS_LIMIT));
    assert_eq!(hc.init, Some(true));
    assert_eq!(hc.cap_drop, Some(vec!["ALL".to_string()]));
    assert_eq!(hc.auto_remove, Some(false));
    let pb = hc.port_bindings.as_ref().unwrap();
    let tcp = pb["3000/tcp"].as_ref().unwrap();
    assert_eq!(tcp[0].host_ip.as_deref(), Some("127.0.0.1"));
    assert_eq!(tcp[0].host_port.as_deref(), Some(""));
    assert!(pb.contains_key("53/udp"));
    assert_eq!(b.cmd, Some(vec!["sh".into(), "-c".into(), "echo hi".into()]));
    let env = b.env.unwrap();
    assert!(
        env.contains(&"PORT=9999".to_string()),
        "the job's env wins: {env:?}"
    );
    assert!(env.contains(&"BERTH_PORT_3000=3000".to_string()));
    assert_eq!(b.labels.as_ref().unwrap()["berth.job"], "job-7");
    assert_eq!(b.open_stdin, Some(false));
    assert_eq!(
        applied,
        AppliedLimits {
            cpus: Some(0.5),
            memory: Some(64 << 20),
            pids: Some(DEFAULT_PIDS_LIMIT),
            not_enforced: vec![],
            user: Some("1000:1001".into()),
            network: Some("berth-t-01234567-net".into()),
            egress: None,
            isolation: Some("container".into()),
            warm: false,
        }
    );
}

#[test]
fn jobs_run_as_the_given_user_with_a_private_home_and_mount() {
    let ws = tempfile::tempdir().unwrap();
    let id = JobId::from_number(1);
    let (b, applied) = body(&JobSpec::argv(["true"]), &ctx(&id, ws.path(), ws.path()), &[]).unwrap();
    assert_eq!(b.user.as_deref(), Some("1000:1001"));
    assert!(b.env.as_ref().unwrap().contains(&format!("HOME={HOME_DIR}")));
    let hc = b.host_config.unwrap();
    let home = &hc.tmpfs.as_ref().unwrap()[HOME_DIR];
    assert!(
        home.contains("uid=1000,gid=1001") && home.contains("nosuid"),
        "{home}"
    );
    let mount = &hc.mounts.as_ref().unwrap()[0];
    assert_eq!(
        mount.bind_options.as_ref().unwrap().propagation,
        Some(MountBindOptionsPropagationEnum::PRIVATE)
    );
    assert_eq!(b.labels.as_ref().unwrap()[LABEL_STATE], "0123456789abcdef");
    assert_eq!(hc.network_mode.as_deref(), Some("berth-t-01234567-net"));
    assert_eq!(applied.user.as_deref(), Some("1000:1001"));

    // `root` is allowed when asked for, and says so.
    let mut c = ctx(&id, ws.path(), ws.path());
    c.user = "root";
    let (b, applied) = body(&JobSpec::argv(["true"]), &c, &[]).unwrap();
    assert_eq!(b.user.as_deref(), Some("0:0"));
    assert_eq!(applied.user.as_deref(), Some("root"));
}

#[test]
fn config_defaults_fill_unset_limits_and_network_none_is_kept() {
    let ws = tempfile::tempdir().unwrap();
    let id = JobId::from_number(1);
    let defaults = Limits {
        cpus: Some(1.5),
        memory: Some(1 << 30),
        pids: Some(100),
    };
    let mut c = ctx(&id, ws.path(), ws.path());
    c.defaults = &defaults;
    let mut spec = JobSpec::argv(["true"]);
    spec.limits.pids = Some(7);
    spec.network = Some(Network::None);
    let (b, applied) = body(&spec, &c, &[]).unwrap();
    let hc = b.host_config.unwrap();
    assert_eq!(hc.nano_cpus, Some(1_500_000_000));
    assert_eq!(hc.memory, Some(1 << 30));
    assert_eq!(hc.pids_limit, Some(7), "the spec wins over the default");
    assert_eq!(hc.network_mode.as_deref(), Some("none"));
    assert_eq!(applied.network.as_deref(), Some("none"));
    // `bridge` is the engine's own default bridge.
    spec.network = Some(Network::Bridge);
    let (b, applied) = body(&spec, &c, &[]).unwrap();
    assert_eq!(b.host_config.unwrap().network_mode.as_deref(), Some("bridge"));
    assert_eq!(applied.network.as_deref(), Some("bridge"));
}

#[test]
fn cwd_outside_the_workspace_is_refused() {
    let ws = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    let id = JobId::from_number(1);
    let err = body(&JobSpec::argv(["true"]), &ctx(&id, ws.path(), other.path()), &[]).unwrap_err();
    assert!(err.to_string().contains("outside the workspace"), "{err}");
}

#[test]
fn names_are_engine_safe() {
    assert_eq!(
        container_name("my inst/1", "0123456789abcdef", &JobId::from_number(3)),
        "berth-my_inst_1-01234567-job-3"
    );
}

#[test]
fn ports_are_read_back_from_inspect() {
    let plan = vec![PortPlan {
        port: 80,
        proto: crate::model::Proto::Tcp,
        host_port: None,
        note: None,
    }];
    let inspected = HashMap::from([(
        "80/tcp".to_string(),
        Some(vec![PortBinding {
            host_ip: Some("127.0.0.1".into()),
            host_port: Some("49153".into()),
        }]),
    )]);
    assert_eq!(read_ports(&plan, Some(&inspected))[0].host_port, 49153);
    assert_eq!(read_ports(&plan, None)[0].host_port, 0);
}
