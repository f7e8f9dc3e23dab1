//! Loaded sessions leave memory when nothing holds them (no request, no
//! turn, no one watching their events, no tool approved for the session)
//! and are loaded again from the store on their next use, with their
//! history; the ones that hold state only in memory stay.

use quiver_daemon::config::Config;
use quiver_daemon::{Daemon, DaemonOptions, NewSession};
use std::time::Duration;

#[tokio::test]
async fn idle_sessions_are_dropped_and_come_back_from_the_store() {
    let temp = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.serve.state_dir = Some(temp.path().join("state"));
    config.core_tools.workspace = temp.path().to_path_buf();
    let daemon = Daemon::start(config, DaemonOptions::default())
        .await
        .unwrap();
    let mut ids = Vec::new();
    for _ in 0..200 {
        ids.push(
            daemon
                .create_session(NewSession::default())
                .await
                .unwrap()
                .id,
        );
    }
    assert_eq!(daemon.loaded_sessions(), 200);

    // One is watched, one has a tool approved for the session.
    let watched = daemon.session(&ids[0]).await.unwrap();
    let events = watched.session.subscribe();
    daemon
        .session(&ids[1])
        .await
        .unwrap()
        .session
        .approve_for_session("run_command");
    drop(watched);

    // Not idle long enough yet: nothing leaves.
    assert_eq!(daemon.evict_idle_sessions(Duration::from_secs(3600)), 0);
    assert_eq!(daemon.evict_idle_sessions(Duration::ZERO), 198);
    assert_eq!(daemon.loaded_sessions(), 2);

    // A dropped session loads again from the store, as it was.
    let again = daemon.session(&ids[7]).await.unwrap();
    assert_eq!(again.record.id, ids[7]);
    assert_eq!(daemon.messages(&ids[7]).await.unwrap().len(), 0);
    assert_eq!(daemon.loaded_sessions(), 3);
    drop(again);

    // Once no one watches, the watched one can go too.
    drop(events);
    assert_eq!(daemon.evict_idle_sessions(Duration::ZERO), 2);
    assert_eq!(daemon.loaded_sessions(), 1, "the approved one stays");
    daemon.shutdown().await;
}
