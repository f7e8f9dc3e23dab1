//! A call that takes longer than `call_timeout_s` fails with a timeout that
//! names the server and tool, and the server is told to cancel it
//! (`notifications/cancelled`); a caller can cancel a call too. The
//! connection keeps serving.

use quiver_tests::mcp;

use std::time::Duration;

use serde_json::Map;

async fn cancelled_count(host: &quiver_mcp::McpHost) -> u64 {
    let stats = host.call("slow", "stats", Map::new()).await.unwrap();
    stats.structured_content.unwrap()["cancelled"]
        .as_u64()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn hanging_call_times_out_and_is_cancelled() {
    let mut config = mcp::test_server("slow", &[]);
    config.call_timeout = Duration::from_secs(1);
    let (_registry, host) = mcp::start(vec![config]);
    mcp::ready(&host, "slow").await;

    let error = host.call("slow", "hang", Map::new()).await.unwrap_err();
    assert_eq!(error.code(), "timeout");
    assert_eq!(
        error.to_string(),
        "MCP server `slow` tool `hang` did not answer within 1000 ms; the call was cancelled"
    );
    let deadline = tokio::time::Instant::now() + mcp::DEADLINE;
    while cancelled_count(&host).await < 1 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the server never saw the cancellation"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // Cancelled by the caller.
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let call = host.call_with_cancel("slow", "hang", Map::new(), async move {
        let _ = rx.await;
    });
    let cancel = async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let _ = tx.send(());
    };
    let (outcome, ()) = tokio::join!(call, cancel);
    assert_eq!(outcome.unwrap_err().code(), "cancelled");
    while cancelled_count(&host).await < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the server never saw the second cancellation"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    host.shutdown().await;
}
