//! A project with a Makefile and a pytest suite: MCP `run_test` and the CLI's
//! `berth test` run it in a container of the toolchain image (berth/dev,
//! which images/build.sh builds) and report the test output.

use serde_json::json;

use super::Mcp;

fn make_and_pytest(ws: &std::path::Path) {
    std::fs::create_dir_all(ws.join("tests")).unwrap();
    std::fs::write(ws.join("Makefile"), "test:\n\tpython3 -m pytest -q tests\n").unwrap();
    std::fs::write(
        ws.join("tests/test_sum.py"),
        "def test_sum():\n    assert sum([1, 2, 3]) == 6\n\ndef test_text():\n    assert 'berth'.upper() == 'BERTH'\n",
    )
    .unwrap();
}

#[tokio::test]
async fn run_test_and_berth_test_pass_in_the_toolchain_image() {
    let mcp = Mcp::start_with("canonical", &[("BERTH_RUNNER", "docker")], make_and_pytest).await;
    let answer = mcp.ok("run_test", json!({})).await;
    assert!(answer.contains("2 passed"), "{answer}");
    assert!(
        answer.contains("berth/dev:latest"),
        "the answer says the image: {answer}"
    );

    let (code, out, err) = mcp.cli(&["test"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("2 passed"), "{out}\n{err}");
}
