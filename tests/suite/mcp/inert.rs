//! MCP answers are inert: a job's output (the red team's OSC 52, title,
//! clear screen, CR overwrite, NUL, bidi override), its label and its kill
//! reason reach the model as escapes (`\x1b`, `\u202e`), in every tool's
//! answer and in the events appended to them; no answer carries a raw ESC,
//! NUL, CR or U+202E.

use serde_json::json;

use super::Mcp;

const EVIL: &str = r#"printf '\033]52;c;cm0gLXJmIH4vKg==\007\n\033]0;PWNED\007\n\033[2J\033[HSAFE\rEVIL\nabc\342\200\256def\nnul\000byte\n'"#;

fn assert_inert(tool: &str, text: &str) {
    for raw in ['\x1b', '\0', '\r', '\u{202e}', '\x07'] {
        assert!(!text.contains(raw), "{tool} answered a raw {raw:?}:\n{text}");
    }
}

#[tokio::test]
async fn every_answer_shows_job_text_as_escapes() {
    let mut mcp = Mcp::start_with("canonical", &[("BERTH_RUNNER", "host")], |_| {}).await;
    let label = "lbl\u{202e}x\x1b]0;LABEL\x07";
    // Foreground: the answer carries the output.
    let run = mcp
        .ok("run", json!({"command": EVIL, "label": label, "watch": ["EVIL"]}))
        .await;
    assert_inert("run", &run);
    assert!(run.contains(r"\x1b]52;c;cm0gLXJmIH4vKg==\x07"), "{run}");
    assert!(
        run.contains(r"SAFE\rEVIL") && run.contains(r"abc\u202edef"),
        "{run}"
    );
    assert!(run.contains(r"nul\x00byte"), "{run}");
    let id = "job-1";
    // A background job killed with an evil reason.
    let bg = mcp
        .ok(
            "run",
            json!({"command": "sleep 600", "background": true, "label": label}),
        )
        .await;
    assert_inert("run", &bg);
    let (code, _, err) = mcp.cli(&["kill", "job-2", "--reason", "\x1b]0;REASON\x07\u{202e}"]);
    assert_eq!(code, 0, "{err}");
    for (tool, args) in [
        ("logs", json!({"id": id})),
        ("status", json!({"id": id})),
        ("status", json!({"id": "job-2"})),
        ("list", json!({"filter": "all"})),
        ("events", json!({"since": 1})),
    ] {
        let text = mcp.ok(tool, args).await;
        assert_inert(tool, &text);
        if tool == "status" && text.contains("job-2") {
            assert!(text.contains(r"\x1b]0;REASON\x07\u202e"), "{text}");
        }
        if tool == "events" {
            assert!(text.contains(r"SAFE\rEVIL"), "the watch hit: {text}");
        }
    }
    mcp.close().await;
}
