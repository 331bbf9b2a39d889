//! The Python the scoped-engine tests run inside their jobs: a
//! testcontainers suite, docker-py calls, and raw requests to the socket.

pub const SUITE: &str = r#"import urllib.request, time

from testcontainers.core.container import DockerContainer


def test_a_page_from_a_container():
    web = DockerContainer("berth/sandbox:latest").with_command("httpd -f -v -p 8080 -h /www").with_exposed_ports(8080)
    with web:
        url = f"http://{web.get_container_host_ip()}:{web.get_exposed_port(8080)}/"
        body = None
        for _ in range(100):
            try:
                body = urllib.request.urlopen(url, timeout=2).read().decode()
                break
            except OSError:
                time.sleep(0.1)
        assert body is not None and "hello from berth" in body


def test_a_container_left_running():
    # Never stopped: with Ryuk off, berth is the reaper when the job ends.
    DockerContainer("berth/sandbox:latest").with_command("sleep 300").with_name("left").start()
"#;

pub const RUN_SUITE: &str = "set -e\n\
python3 -m pip install --quiet --no-index --find-links wheels --target .deps testcontainers\n\
PYTHONPATH=.deps python3 -m pytest -q -p no:cacheprovider test_web.py\n";

pub const CALLS_PY: &str = r#"import io, json, tarfile, docker
c = docker.from_env()
out = {"api": c.version()["ApiVersion"]}
net = c.networks.create("testnet")
out["networks"] = [n.name for n in c.networks.list()]
box = c.containers.run("berth/sandbox:latest", "sleep 60", detach=True, name="box", network="testnet")
out["exec"] = box.exec_run("echo hi from exec").output.decode()
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w") as t:
    info = tarfile.TarInfo("f.txt"); info.size = 7; t.addfile(info, io.BytesIO(b"payload"))
out["put"] = box.put_archive("/tmp", buf.getvalue())
bits, stat = box.get_archive("/tmp/f.txt")
out["get"] = stat["size"]
once = c.containers.run("berth/sandbox:latest", ["sh", "-c", "echo attached"], detach=True)
out["wait"] = once.wait()["StatusCode"]
out["attach"] = once.attach(stream=False, logs=True).decode()
out["volume"] = c.volumes.create("data").name
out["names"] = sorted(x.name for x in c.containers.list(all=True))
try:
    c.containers.get("nope")
except docker.errors.NotFound:
    out["nope"] = 404
box.remove(force=True); once.remove(force=True); net.remove()
print("RESULT " + json.dumps(out))
"#;

/// A Python helper the jobs use to talk to their engine socket by hand.
pub const ENGINE_PY: &str = r#"import http.client, json, os, socket, sys

class Unix(http.client.HTTPConnection):
    def __init__(self):
        super().__init__("localhost", timeout=60)
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(os.environ["DOCKER_HOST"][len("unix://"):])

def req(method, path, body=None):
    c = Unix()
    data = None if body is None else json.dumps(body)
    c.request(method, "/v1.41" + path, body=data, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    raw = r.read()
    c.close()
    try:
        return r.status, json.loads(raw)
    except ValueError:
        return r.status, raw.decode(errors="replace")

def child(name, cmd="sleep 300", host=None):
    body = {"Image": "berth/sandbox:latest", "Cmd": ["sh", "-c", cmd], "HostConfig": host or {}}
    status, made = req("POST", "/containers/create?name=" + name, body)
    if status != 201:
        return status, made
    return req("POST", "/containers/%s/start" % made["Id"])
"#;

pub const HOSTILE_PY: &str = r#"import json, os, sys
from engine import req
other = os.environ["OTHER"]
ws = os.getcwd()
out = {}
base = {"Image": "berth/sandbox:latest", "Cmd": ["true"]}
for name, host in [
    ("privileged", {"Privileged": True}),
    ("cap_sys_admin", {"CapAdd": ["SYS_ADMIN"]}),
    ("bind_root", {"Binds": ["/:/host"]}),
    ("bind_engine_socket", {"Binds": ["/var/run/docker.sock:/var/run/docker.sock"]}),
    ("network_host", {"NetworkMode": "host"}),
    ("pid_host", {"PidMode": "host"}),
]:
    out[name] = req("POST", "/containers/create", dict(base, HostConfig=host))[0]
out["inspect_other"] = req("GET", "/containers/%s/json" % other)[0]
out["kill_other"] = req("POST", "/containers/%s/kill" % other)[0]
out["list"] = [c["Id"] for c in req("GET", "/containers/json?all=1")[1]]
print("RESULT " + json.dumps(out))
"#;

pub const TWO_CHILDREN_PY: &str = r#"import sys, time
from engine import child
for n in ("one", "two"):
    status, answer = child(n)
    assert status == 204, (n, status, answer)
print("two children up", flush=True)
time.sleep(300)
"#;

pub const LIMIT_PY: &str = r#"import json
from engine import child, req
out = {}
out["one"] = child("one")[0]
out["too_much_memory"] = req("POST", "/containers/create", {"Image": "berth/sandbox:latest", "HostConfig": {"Memory": 8 << 30}})
out["two"] = child("two")[0]
out["three"] = child("three")
out["memory_of_one"] = req("GET", "/containers/one/json")[1]["HostConfig"]["Memory"]
print("RESULT " + json.dumps(out), flush=True)
import time
time.sleep(300)
"#;
