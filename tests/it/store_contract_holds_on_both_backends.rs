//! The store contract (`quiver_store::Store`), one suite run against both
//! backends: the embedded SQLite file and a real PostgreSQL cluster made
//! for the test. Every check goes through the contract only, as the
//! daemon uses it.

use std::sync::Arc;
use std::time::Duration;

use quiver_dispatch::{Event, Status};
use quiver_model::{Message, ToolCall};
use quiver_store::{
    AnswerOutcome, ApprovalAnswer, ApprovalState, EventRecord, InstanceRecord, NewApproval, Notice,
    SavingsSample, SessionKind, SessionRecord, Store, StoreConfig, StoreError, now_ms,
};
use quiver_tests::postgres::Cluster;
use quiver_tool::integrity::Pin;
use serde_json::json;

/// Opening a store, as a future.
type Opening = std::pin::Pin<Box<dyn Future<Output = Arc<dyn Store>>>>;

/// A store of one backend and what keeps it alive.
struct Backend {
    store: Arc<dyn Store>,
    /// Opens the same store once more (a second process or instance).
    reopen: Box<dyn Fn() -> Opening>,
    _dir: Arc<tempfile::TempDir>,
    _cluster: Option<Arc<Cluster>>,
}

async fn sqlite() -> Backend {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let state = dir.path().to_path_buf();
    let open = move || -> Opening {
        let state = state.clone();
        Box::pin(async move {
            quiver_store::open(&StoreConfig::default(), &state)
                .await
                .unwrap()
        })
    };
    Backend {
        store: open().await,
        reopen: Box::new(open),
        _dir: dir,
        _cluster: None,
    }
}

async fn postgres() -> Backend {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let cluster = Arc::new(Cluster::start());
    let mut config = StoreConfig::postgres(&cluster.url());
    config.lease = Duration::from_millis(300);
    let state = dir.path().to_path_buf();
    let open = move || -> Opening {
        let (config, state) = (config.clone(), state.clone());
        Box::pin(async move { quiver_store::open(&config, &state).await.unwrap() })
    };
    Backend {
        store: open().await,
        reopen: Box::new(open),
        _dir: dir,
        _cluster: Some(cluster),
    }
}

/// Each check, as a test on each backend.
macro_rules! on_both {
    ($($check:ident),* $(,)?) => {
        mod sqlite_backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    super::$check(super::sqlite().await).await;
                }
            )*
        }
        mod postgres_backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    super::$check(super::postgres().await).await;
                }
            )*
        }
    };
}

on_both!(
    sessions_and_messages_are_kept_and_deleted,
    appends_from_two_openers_never_share_a_position,
    events_are_ordered_filtered_and_notified,
    gateway_clients_are_found_by_token_digest,
    pins_are_replaced_per_tool_and_survive_reopening,
    approvals_are_answered_once_and_say_how_they_ended,
    an_instance_that_stops_leaves_no_approval_waiting,
    a_session_runs_one_turn_at_a_time,
    credentials_and_savings_are_kept,
);

fn session(id: &str) -> SessionRecord {
    SessionRecord {
        id: id.into(),
        kind: SessionKind::Chat,
        parent: None,
        grants: vec!["core".into(), "mcp-*".into()],
        model: Some("local".into()),
        context_tokens: 32_000,
        created_ms: now_ms(),
        messages: 0,
    }
}

fn instance(id: &str) -> InstanceRecord {
    InstanceRecord {
        id: id.into(),
        host: "test-host".into(),
        pid: 1,
        version: "0".into(),
        listen: None,
        started_ms: 0,
        heartbeat_ms: 0,
        stopped_ms: None,
        stop_reason: None,
    }
}

fn request(instance: &str, call_id: u64) -> NewApproval {
    NewApproval {
        instance: instance.into(),
        session: "s".into(),
        call_id,
        tool: "run_command".into(),
        via_bridge: false,
        arguments: json!({"command": "ls"}),
        digest: "abc".into(),
    }
}

fn answer(decision: &str, digest: Option<&str>) -> ApprovalAnswer {
    ApprovalAnswer {
        decision: decision.into(),
        reason: None,
        answered_by: "console".into(),
        digest: digest.map(str::to_owned),
    }
}

async fn sessions_and_messages_are_kept_and_deleted(backend: Backend) {
    let store = &backend.store;
    store.create_session(&session("a")).await.unwrap();
    store
        .create_session(&SessionRecord {
            parent: Some("a".into()),
            ..session("child")
        })
        .await
        .unwrap();
    store.create_session(&session("b")).await.unwrap();
    assert!(matches!(
        store.create_session(&session("a")).await,
        Err(StoreError::SessionExists(_))
    ));
    store
        .append_message("a", &Message::user("hello"))
        .await
        .unwrap();
    let call = ToolCall {
        id: "c1".into(),
        name: "tool_search".into(),
        arguments: "{\"query\": \"x\"}".into(),
    };
    store
        .append_message("a", &Message::assistant("", vec![call]))
        .await
        .unwrap();
    let third = store
        .append_message(
            "a",
            &Message::tool_result("c1", "tool_search", "nul \0 kept"),
        )
        .await
        .unwrap();
    assert_eq!(third, 3);
    store
        .append_message("b", &Message::user("kept"))
        .await
        .unwrap();
    assert_eq!(store.subagents("a").await.unwrap(), ["child"]);
    assert!(
        store
            .set_session_model("b", Some("other"), 8000)
            .await
            .unwrap()
    );
    assert!(
        store
            .set_session_grants("b", &["plugin-text".into()])
            .await
            .unwrap()
    );
    assert!(!store.set_session_grants("zzz", &[]).await.unwrap());

    // Another opener (process, instance) reads the same.
    let other = (backend.reopen)().await;
    let sessions = other.sessions().await.unwrap();
    // Oldest first; made in the same millisecond, by id.
    assert!(
        sessions
            .windows(2)
            .all(|w| (w[0].created_ms, &w[0].id) < (w[1].created_ms, &w[1].id))
    );
    let mut ids: Vec<&str> = sessions.iter().map(|s| s.id.as_str()).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["a", "b", "child"]);
    let b = other.session("b").await.unwrap().unwrap();
    assert_eq!(
        (b.model.as_deref(), b.context_tokens, b.grants.clone()),
        (Some("other"), 8000, vec!["plugin-text".to_owned()])
    );
    let messages = other.messages("a").await.unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(messages[1].message.tool_calls[0].name, "tool_search");
    assert_eq!(messages[2].message.content, "nul \0 kept");
    assert_eq!(other.session("a").await.unwrap().unwrap().messages, 3);

    assert!(store.delete_session("child").await.unwrap());
    assert!(store.delete_session("a").await.unwrap());
    assert!(!store.delete_session("a").await.unwrap());
    assert!(store.session("a").await.unwrap().is_none());
    assert!(store.messages("a").await.unwrap().is_empty());
    // The id can be used again, from an empty history.
    store.create_session(&session("a")).await.unwrap();
    assert_eq!(store.session("a").await.unwrap().unwrap().messages, 0);
}

async fn appends_from_two_openers_never_share_a_position(backend: Backend) {
    let first = backend.store.clone();
    let second = (backend.reopen)().await;
    first.create_session(&session("a")).await.unwrap();
    let writers: Vec<_> = [first.clone(), second, first.clone()]
        .into_iter()
        .enumerate()
        .map(|(writer, store)| {
            tokio::spawn(async move {
                for n in 0..50 {
                    store
                        .append_message("a", &Message::user(format!("{writer}-{n}")))
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap();
    }
    let positions: Vec<u64> = first
        .messages("a")
        .await
        .unwrap()
        .iter()
        .map(|m| m.seq)
        .collect();
    assert_eq!(positions, (1..=150).collect::<Vec<u64>>());
}

async fn events_are_ordered_filtered_and_notified(backend: Backend) {
    let store = &backend.store;
    let mut notices = store.notices();
    assert_eq!(store.last_event_id().await.unwrap(), 0);
    let mut ids = Vec::new();
    for (session, tool) in [("a", "echo"), ("b", "add"), ("a", "run_command")] {
        let event = Event {
            time: std::time::SystemTime::now(),
            call_id: 7,
            session: session.into(),
            tool: tool.into(),
            via_bridge: true,
            arguments: json!({"x": 1}),
            status: Status::AwaitingApproval,
            duration: Duration::from_millis(3),
            detail: Some("a NUL \0 in the detail".into()),
            result: Some(json!({"n": tool.len()})),
        };
        let mut record = EventRecord::from_event(&event, Some("i-1"));
        record.answered_by = Some("console".into());
        ids.push(store.record_event(&record).await.unwrap());
    }
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    assert_eq!(store.last_event_id().await.unwrap(), ids[2]);
    let a = store.events(Some("a"), 0, 100).await.unwrap();
    assert_eq!(
        a.iter().map(|e| e.tool.as_str()).collect::<Vec<_>>(),
        ["echo", "run_command"]
    );
    assert_eq!(a[0].status, Status::AwaitingApproval);
    assert_eq!(a[0].instance.as_deref(), Some("i-1"));
    assert_eq!(a[0].line, "echo via tool_call  awaiting approval");
    assert!(a[0].detail.as_deref().unwrap().starts_with("a NUL "));
    assert_eq!(a[1].result, Some(json!({"n": 11})));
    assert_eq!(a[1].answered_by.as_deref(), Some("console"));
    assert_eq!(store.events(None, ids[0], 100).await.unwrap().len(), 2);
    assert_eq!(store.events(None, 0, 1).await.unwrap().len(), 1);
    // Every stored event is told, in order.
    let mut told = Vec::new();
    while told.len() < 3 {
        let notice = tokio::time::timeout(Duration::from_secs(10), notices.recv())
            .await
            .unwrap()
            .unwrap();
        if let Notice::Event { id } = notice {
            told.push(id);
        }
    }
    assert_eq!(told, ids);
}

async fn gateway_clients_are_found_by_token_digest(backend: Backend) {
    let store = &backend.store;
    store
        .add_gateway_client("ci", "abc", &["plugin-text".into()])
        .await
        .unwrap();
    assert!(matches!(
        store.add_gateway_client("ci", "def", &[]).await,
        Err(StoreError::ClientExists(_))
    ));
    let client = store.gateway_client_by_token("abc").await.unwrap().unwrap();
    assert_eq!(client.grants, ["plugin-text"]);
    assert!(
        store
            .gateway_client_by_token("def")
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(store.gateway_clients().await.unwrap().len(), 1);
    assert!(store.remove_gateway_client("ci").await.unwrap());
    assert!(!store.remove_gateway_client("ci").await.unwrap());
    assert!(store.gateway_clients().await.unwrap().is_empty());
}

async fn pins_are_replaced_per_tool_and_survive_reopening(backend: Backend) {
    let pin = |tool: &str, hash: &str, accepted_ms: i64| Pin {
        tool: tool.into(),
        hash: hash.into(),
        shape: "s".into(),
        definition: json!({"name": tool}),
        accepted_ms,
        accepted_by: "operator".into(),
    };
    let pins = backend.store.pin_store();
    pins.put_pins("mcp-a", &[pin("x", "h1", 1), pin("y", "h2", 1)])
        .unwrap();
    pins.put_pins("mcp-a", &[pin("x", "h3", 2)]).unwrap();
    pins.put_pins("mcp-b", &[pin("x", "other", 1)]).unwrap();
    backend.store.flush_pins().await.unwrap();
    let reopened = (backend.reopen)().await;
    let read = reopened.pin_store().pins("mcp-a").unwrap();
    let hashes: Vec<(&str, &str)> = read
        .iter()
        .map(|p| (p.tool.as_str(), p.hash.as_str()))
        .collect();
    assert_eq!(hashes, [("x", "h3"), ("y", "h2")]);
    assert_eq!(read[0].definition, json!({"name": "x"}));
    assert!(reopened.pin_store().pins("mcp-none").unwrap().is_empty());
}

async fn approvals_are_answered_once_and_say_how_they_ended(backend: Backend) {
    let store = &backend.store;
    let mut notices = store.notices();
    let asked = store.request_approval(&request("i-1", 1)).await.unwrap();
    assert_eq!(asked.state, ApprovalState::Pending);
    let other = store.request_approval(&request("i-2", 1)).await.unwrap();
    assert_ne!(asked.id, other.id);
    let pending = store.pending_approvals(None).await.unwrap();
    assert_eq!(
        pending.iter().map(|p| p.id).collect::<Vec<_>>(),
        [asked.id, other.id]
    );
    assert_eq!(pending[0].arguments, json!({"command": "ls"}));
    assert_eq!(store.pending_approvals(Some("t")).await.unwrap().len(), 0);

    // An answer for other arguments is refused and changes nothing.
    assert_eq!(
        store
            .answer_approval(asked.id, &answer("approve", Some("zzz")))
            .await
            .unwrap(),
        AnswerOutcome::DigestMismatch {
            expected: "abc".into()
        }
    );
    let AnswerOutcome::Answered(answered) = store
        .answer_approval(asked.id, &answer("approve_for_session", Some("abc")))
        .await
        .unwrap()
    else {
        panic!("the first answer is taken")
    };
    assert_eq!(answered.state, ApprovalState::Answered);
    assert_eq!(answered.decision.as_deref(), Some("approve_for_session"));
    assert_eq!(answered.answered_by.as_deref(), Some("console"));
    assert!(answered.closed_ms.is_some());
    // A second answer names the first.
    let AnswerOutcome::Closed(first) = store
        .answer_approval(asked.id, &answer("deny", None))
        .await
        .unwrap()
    else {
        panic!("a second answer is refused")
    };
    assert_eq!(first.decision.as_deref(), Some("approve_for_session"));
    assert_eq!(
        store
            .answer_approval(999_999, &answer("approve", None))
            .await
            .unwrap(),
        AnswerOutcome::Unknown
    );
    // A call that stops waiting withdraws its request, once.
    assert!(
        store
            .withdraw_approval(other.id, "timed out")
            .await
            .unwrap()
    );
    assert!(
        !store
            .withdraw_approval(other.id, "timed out")
            .await
            .unwrap()
    );
    let withdrawn = store.approval(other.id).await.unwrap().unwrap();
    assert_eq!(
        (withdrawn.state, withdrawn.reason.as_deref()),
        (ApprovalState::Withdrawn, Some("timed out"))
    );
    assert!(store.pending_approvals(None).await.unwrap().is_empty());
    let closed = store.closed_approvals(None, 10).await.unwrap();
    assert_eq!(closed.len(), 2);
    // Each close was told to the instance whose call waited.
    let mut told = Vec::new();
    while told.len() < 2 {
        let notice = tokio::time::timeout(Duration::from_secs(10), notices.recv())
            .await
            .unwrap()
            .unwrap();
        if let Notice::ApprovalClosed {
            id,
            instance,
            state,
        } = notice
        {
            told.push((id, instance, state));
        }
    }
    assert_eq!(
        told,
        [
            (asked.id, "i-1".to_owned(), ApprovalState::Answered),
            (other.id, "i-2".to_owned(), ApprovalState::Withdrawn)
        ]
    );
}

async fn an_instance_that_stops_leaves_no_approval_waiting(backend: Backend) {
    let store = &backend.store;
    assert!(
        store
            .register_instance(&instance("a"))
            .await
            .unwrap()
            .is_empty()
    );
    store.register_instance(&instance("b")).await.unwrap();
    let left = store.request_approval(&request("a", 1)).await.unwrap();
    // A restart of the same instance abandons what its last run left.
    assert_eq!(
        store.register_instance(&instance("a")).await.unwrap(),
        [left.id]
    );
    let abandoned = store.approval(left.id).await.unwrap().unwrap();
    assert_eq!(abandoned.state, ApprovalState::Abandoned);
    assert!(abandoned.reason.unwrap().contains("restarted"));
    // One that stops cleanly abandons its own.
    let waiting = store.request_approval(&request("b", 2)).await.unwrap();
    store.stop_instance("b", "stopped").await.unwrap();
    let closed = store.approval(waiting.id).await.unwrap().unwrap();
    assert_eq!(closed.state, ApprovalState::Abandoned);
    assert!(closed.reason.unwrap().contains("instance b stopped"));
    let instances = store.instances().await.unwrap();
    assert_eq!(
        instances
            .iter()
            .map(|i| (i.id.as_str(), i.stopped_ms.is_some()))
            .collect::<Vec<_>>(),
        [("a", false), ("b", true)]
    );
    assert!(!store.renew_lease("b").await.unwrap());
    // One whose lease runs out is found by anyone looking.
    let silent = store.request_approval(&request("a", 3)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let expired = store
        .expire_leases(Duration::from_millis(300))
        .await
        .unwrap();
    assert_eq!(expired.len(), 1);
    assert_eq!(
        (expired[0].id.as_str(), expired[0].abandoned.clone()),
        ("a", vec![silent.id])
    );
    let reason = store
        .approval(silent.id)
        .await
        .unwrap()
        .unwrap()
        .reason
        .unwrap();
    assert!(reason.contains("stopped renewing its lease"), "{reason}");
    assert!(!store.renew_lease("a").await.unwrap());
    assert!(
        store
            .expire_leases(Duration::from_millis(300))
            .await
            .unwrap()
            .is_empty()
    );
}

async fn a_session_runs_one_turn_at_a_time(backend: Backend) {
    let store = &backend.store;
    store.register_instance(&instance("a")).await.unwrap();
    store.register_instance(&instance("b")).await.unwrap();
    let other = (backend.reopen)().await;
    let held = store
        .claim_turn("s", "a")
        .await
        .unwrap()
        .expect("first claim");
    assert!(other.claim_turn("s", "b").await.unwrap().is_none());
    assert!(other.claim_turn("t", "b").await.unwrap().is_some());
    drop(held);
    // Released (by a task of its own on PostgreSQL).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if other.claim_turn("s", "b").await.unwrap().is_some() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the turn was not released"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn credentials_and_savings_are_kept(backend: Backend) {
    let store = &backend.store;
    assert!(store.credentials("remote").await.unwrap().is_none());
    let credentials = json!({"client_id": "c", "token_response": {"access_token": "t"}});
    store
        .save_credentials("remote", &credentials)
        .await
        .unwrap();
    let (read, stored_ms) = store.credentials("remote").await.unwrap().unwrap();
    assert_eq!(read, credentials);
    assert!(stored_ms > 0);
    assert!(store.clear_credentials("remote").await.unwrap());
    assert!(!store.clear_credentials("remote").await.unwrap());
    assert!(store.credentials("remote").await.unwrap().is_none());
    for (instance, time_ms, calls) in [("a", 1, 1), ("a", 2, 5), ("b", 1, 3)] {
        store
            .record_savings(&SavingsSample {
                instance: instance.into(),
                time_ms,
                point: json!({"tool_calls": calls}),
            })
            .await
            .unwrap();
    }
    let latest = store.latest_savings().await.unwrap();
    assert_eq!(
        latest
            .iter()
            .map(|s| (s.instance.as_str(), s.point["tool_calls"].as_i64()))
            .collect::<Vec<_>>(),
        [("a", Some(5)), ("b", Some(3))]
    );
}
