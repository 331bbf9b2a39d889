//! JSON-RPC errors on `berth mcp`'s stdio: a line that is not JSON gets a
//! parse error (-32700) and the next request is served; arguments of the
//! wrong type and unknown tools get invalid params (-32602).

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::Mcp;
use crate::common::instance_name;

/// Read stdout lines until one parses as JSON with the wanted `id` (or an error with `id: null`).
async fn next_answer(
    out: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    id: &Value,
) -> Value {
    let read = async {
        loop {
            let line = out
                .next_line()
                .await
                .expect("stdout")
                .expect("berth mcp closed stdout");
            let v: Value =
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON on stdout ({e}): {line}"));
            if &v["id"] == id {
                return v;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(20), read)
        .await
        .expect("an answer within 20 s")
}

#[tokio::test]
async fn a_line_that_is_not_json_gets_a_parse_error_and_the_next_request_is_served() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("ws")).unwrap();
    parse_error_then_served(dir.path(), &instance_name("rpc")).await;
}

/// The same through a session attached to a daemon: the framing is the daemon's.
#[tokio::test]
async fn an_attached_session_answers_parse_errors_too() {
    let d = crate::common::Daemon::start();
    parse_error_then_served(d.dir.path(), &d.instance).await;
    assert!(d.answers(), "the daemon outlives the session");
}

/// Drive `berth mcp` for `instance` under `dir` with raw lines: a parse
/// error, bad calls, one good call, then EOF.
async fn parse_error_then_served(dir: &std::path::Path, instance: &str) {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_berth"));
    cmd.args(["mcp", "--tools", "canonical"]);
    Mcp::apply_env(cmd.as_std_mut(), dir, instance);
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut send = async |v: &str| {
        stdin.write_all(format!("{v}\n").as_bytes()).await.unwrap();
        stdin.flush().await.unwrap();
    };
    send(
        &json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}})
        .to_string(),
    )
    .await;
    let init = next_answer(&mut out, &json!(1)).await;
    assert!(init["result"]["serverInfo"]["name"] == "berth", "{init}");
    send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).await;

    send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list" oops"#).await;
    let err = next_answer(&mut out, &Value::Null).await;
    assert_eq!(err["error"]["code"], -32700, "{err}");
    assert!(
        err["error"]["message"].as_str().unwrap().contains("Parse error"),
        "{err}"
    );

    send(&json!({"jsonrpc":"2.0","id":3,"method":"tools/list"}).to_string()).await;
    let list = next_answer(&mut out, &json!(3)).await;
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"run") && names.contains(&"wait_for_port"),
        "{names:?}"
    );

    // Wrong argument types and unknown tools: invalid params, and still serving.
    for (id, tool, args, says) in [
        (
            4,
            "logs",
            json!({"id": "job-1", "since_seq": "x"}),
            "invalid type",
        ),
        (5, "wait_for_port", json!({"port": "eighty"}), "invalid type"),
        (6, "run", json!({"cmd": "true"}), "unknown field `cmd`"),
        (7, "no_such_tool", json!({}), "unknown tool `no_such_tool`"),
    ] {
        send(
            &json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":args}})
                .to_string(),
        )
        .await;
        let a = next_answer(&mut out, &json!(id)).await;
        assert_eq!(a["error"]["code"], -32602, "{tool}: {a}");
        let msg = a["error"]["message"].as_str().unwrap();
        assert!(msg.contains(says) && !msg.contains('\n'), "{tool}: {msg}");
    }
    send(
        &json!({"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"run",
        "arguments":{"command":"echo served","runner":"host"}}})
        .to_string(),
    )
    .await;
    let ran = next_answer(&mut out, &json!(8)).await;
    assert!(
        ran["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("served"),
        "{ran}"
    );
    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("exits on EOF")
        .unwrap();
    assert!(status.success(), "{status:?}");
}
