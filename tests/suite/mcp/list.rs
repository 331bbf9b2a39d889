//! The `list` tool pages like `berth ps`: newest first, 50 by default,
//! `limit` and `before` (the last id of the previous page).

use serde_json::json;

use super::Mcp;

#[tokio::test]
async fn list_pages_newest_first_with_limit_and_before() {
    let mut mcp = Mcp::start_with("canonical", &[("BERTH_RUNNER", "host")], |_| {}).await;
    for _ in 0..3 {
        mcp.ok("run", json!({"command": "true", "runner": "host"})).await;
    }
    let first = mcp.ok("list", json!({"filter": "all", "limit": 2})).await;
    let (j3, j2, j1) = (
        first.find("job-3").expect("newest listed"),
        first.find("job-2").expect("second newest listed"),
        first.find("job-1"),
    );
    assert!(j3 < j2, "newest first:\n{first}");
    assert_eq!(j1, None, "beyond the limit:\n{first}");
    assert!(first.contains("\"before\": \"job-2\""), "{first}");

    let next = mcp.ok("list", json!({"filter": "all", "before": "job-2"})).await;
    assert!(
        next.contains("job-1") && !next.contains("job-2 ") && !next.contains("job-3"),
        "{next}"
    );
    assert!(!next.contains("before\":"), "the last page: {next}");

    let all = mcp.ok("list", json!({"filter": "all"})).await;
    assert!(all.contains("job-1") && all.contains("job-3"), "{all}");
    mcp.close().await;
}
