//! The instance's ear on the store: one connection of its own that
//! `LISTEN`s on [`CHANNEL`] and passes each notice on to the store's
//! receivers, made again (with a pause that grows to 5 s) whenever it
//! drops. After a reconnection it sends [`Notice::Resync`]: what was
//! notified meanwhile is lost, so whoever watches reads again.

use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use tokio_postgres::{AsyncMessage, NoTls};

use super::Shared;
use super::pins::CachedPins;
use crate::notices::{CHANNEL, Notice, NoticeBus};

/// Longest pause between two attempts to listen again.
const MAX_PAUSE: Duration = Duration::from_secs(5);

/// Listens until the store is dropped (which aborts this task); `listening`
/// is told once the first `LISTEN` is in place (or why it could not be).
pub(crate) async fn listen(
    shared: Arc<Shared>,
    pg: tokio_postgres::Config,
    pins: Weak<CachedPins>,
    listening: tokio::sync::oneshot::Sender<Result<(), String>>,
) {
    let mut listening = Some(listening);
    let mut connected_before = false;
    let mut pause = Duration::from_millis(100);
    loop {
        match pg.connect(NoTls).await {
            Ok((client, mut connection)) => {
                let (sender, mut payloads) = tokio::sync::mpsc::unbounded_channel::<String>();
                // The connection must be polled for the client's own
                // statements to run; notifications come out of it too.
                let driver = tokio::spawn(async move {
                    let mut messages =
                        futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
                    while let Some(message) = messages.next().await {
                        match message {
                            Ok(AsyncMessage::Notification(notification)) => {
                                if sender.send(notification.payload().to_owned()).is_err() {
                                    break;
                                }
                            }
                            Ok(_) => {}
                            Err(error) => {
                                tracing::debug!(%error, "the store's notice connection ended");
                                break;
                            }
                        }
                    }
                });
                if let Err(error) = client.batch_execute(&format!("LISTEN {CHANNEL}")).await {
                    tracing::warn!(store = %shared.location, %error, "cannot listen for the store's notices");
                    if let Some(listening) = listening.take() {
                        let _ = listening.send(Err(error.to_string()));
                    }
                    driver.abort();
                } else {
                    pause = Duration::from_millis(100);
                    if let Some(listening) = listening.take() {
                        let _ = listening.send(Ok(()));
                    }
                    if connected_before {
                        tracing::info!(store = %shared.location, "listening for the store's notices again");
                        if let Some(pins) = pins.upgrade() {
                            pins.reload(None).await;
                        }
                        shared.notices.send(Notice::Resync);
                    }
                    connected_before = true;
                    while let Some(payload) = payloads.recv().await {
                        let Some(notice) = NoticeBus::parse(&payload) else {
                            continue;
                        };
                        if let (Notice::Pins { source }, Some(pins)) = (&notice, pins.upgrade()) {
                            pins.reload(Some(source)).await;
                        }
                        shared.notices.send(notice);
                    }
                    drop(client);
                    driver.abort();
                    tracing::warn!(store = %shared.location, "lost the store's notice connection; connecting again");
                }
            }
            Err(error) => {
                tracing::debug!(store = %shared.location, %error, "cannot reach the store to listen for notices");
                if let Some(listening) = listening.take() {
                    let _ = listening.send(Err(error.to_string()));
                }
            }
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MAX_PAUSE);
    }
}
