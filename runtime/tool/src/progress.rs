//! Progress of a running tool call, carried to whoever asked for it.
//!
//! A caller that wants progress (the MCP gateway, for a client request
//! with a progress token) runs the call inside [`report_to`]; a source that
//! hears progress for the call it is running (an upstream MCP server's
//! `notifications/progress`) hands it to [`current`]. The sink travels as
//! a task-local rather than a parameter so that the middleware chain
//! between the two stays unaware of it: no layer has to forward it, and a
//! call nobody watches pays nothing.

use std::future::Future;
use std::sync::Arc;

/// One progress report, as MCP's `notifications/progress` carries it.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// Work done so far; increases with each report.
    pub progress: f64,
    /// Total work, when known.
    pub total: Option<f64>,
    /// What is being done, when said.
    pub message: Option<String>,
}

/// Where a call's progress goes. Called from the source's notification
/// handler: it must not block.
pub type ProgressSink = Arc<dyn Fn(Progress) + Send + Sync>;

tokio::task_local! {
    static SINK: ProgressSink;
}

/// Runs `call` with its progress going to `sink`.
pub async fn report_to<F: Future>(sink: ProgressSink, call: F) -> F::Output {
    SINK.scope(sink, call).await
}

/// The sink of the call running on this task, if anybody asked.
pub fn current() -> Option<ProgressSink> {
    SINK.try_with(Arc::clone).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[tokio::test]
    async fn a_sink_is_seen_only_inside_its_call() {
        assert!(current().is_none());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink: ProgressSink = {
            let seen = seen.clone();
            Arc::new(move |p: Progress| seen.lock().unwrap().push(p.progress))
        };
        report_to(sink, async {
            let sink = current().expect("inside the call");
            sink(Progress {
                progress: 1.0,
                total: Some(2.0),
                message: None,
            });
        })
        .await;
        assert!(current().is_none());
        assert_eq!(*seen.lock().unwrap(), [1.0]);
    }
}
