//! Resource subscriptions held at upstream servers on behalf of gateway
//! clients, and the notices those servers send about their resources and
//! prompts.
//!
//! Many clients may watch one resource: a server is asked once per URI
//! however many subscribe ([`Interest`] counts them), and told to stop when
//! the last [`ResourceSubscription`] is dropped. Each connection of a server
//! runs [`follow`], which holds upstream what is wanted with the protocol
//! the server speaks (`resources/subscribe` before 2026-07-28, one
//! `subscriptions/listen` stream from then on) and starts again from
//! nothing after a reconnect, so subscriptions survive a server restart.
//!
//! What servers announce (`notifications/resources/updated`, and their
//! resource and prompt lists changing) goes out as [`ResourceNotice`]s on
//! the host's broadcast ([`McpHost::resource_notices`]); whoever serves the
//! clients picks out what each one asked for.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::{
    ServerNotification, SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::{Peer, RoleClient};
use tokio::sync::{broadcast, watch};

use super::McpCallError;
use super::host::{McpHost, service_error};
use super::supervisor::Slot;

/// Something a server said about its resources or prompts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResourceNotice {
    /// `notifications/resources/updated` for one of the server's own URIs.
    Updated {
        /// The server.
        server: String,
        /// The resource, by the server's own URI.
        uri: String,
    },
    /// The server's resource list changed.
    ResourcesChanged {
        /// The server.
        server: String,
    },
    /// The server's prompt list changed.
    PromptsChanged {
        /// The server.
        server: String,
    },
}

impl ResourceNotice {
    /// The server it came from.
    pub fn server(&self) -> &str {
        match self {
            ResourceNotice::Updated { server, .. }
            | ResourceNotice::ResourcesChanged { server }
            | ResourceNotice::PromptsChanged { server } => server,
        }
    }
}

/// Notices a slow receiver may fall behind by before it loses the oldest.
pub(crate) const NOTICES_CAPACITY: usize = 256;

/// What is held at the server on the current connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Held {
    /// URIs the server accepted.
    active: BTreeSet<String>,
    /// URIs the server refused, with its reason; not asked again until
    /// nobody wants them any more.
    refused: BTreeMap<String, String>,
}

/// Who wants which of one server's resources, and what is held for them.
pub(crate) struct Interest {
    counts: Mutex<BTreeMap<String, usize>>,
    wanted: watch::Sender<BTreeSet<String>>,
    held: watch::Sender<Held>,
}

impl Default for Interest {
    fn default() -> Interest {
        Interest {
            counts: Mutex::new(BTreeMap::new()),
            wanted: watch::channel(BTreeSet::new()).0,
            held: watch::channel(Held::default()).0,
        }
    }
}

impl Interest {
    fn counts(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, usize>> {
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn acquire(&self, uri: &str) {
        let mut counts = self.counts();
        let count = counts.entry(uri.to_owned()).or_default();
        *count += 1;
        if *count == 1 {
            self.wanted.send_modify(|wanted| {
                wanted.insert(uri.to_owned());
            });
        }
    }

    fn release(&self, uri: &str) {
        let mut counts = self.counts();
        let Some(count) = counts.get_mut(uri) else {
            return;
        };
        *count -= 1;
        if *count == 0 {
            counts.remove(uri);
            self.wanted.send_modify(|wanted| {
                wanted.remove(uri);
            });
            // Asked for again later, a refused URI is tried again.
            self.held
                .send_if_modified(|held| held.refused.remove(uri).is_some());
        }
    }
}

/// One client's subscription to one resource of a server: held upstream
/// while any such handle lives, released when the last one is dropped.
pub struct ResourceSubscription {
    slot: Arc<Slot>,
    uri: String,
}

impl std::fmt::Debug for ResourceSubscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceSubscription")
            .field("server", &self.slot.config.name)
            .field("uri", &self.uri)
            .finish()
    }
}

impl ResourceSubscription {
    /// The server.
    pub fn server(&self) -> &str {
        &self.slot.config.name
    }

    /// The resource, by the server's own URI.
    pub fn uri(&self) -> &str {
        &self.uri
    }
}

impl Drop for ResourceSubscription {
    fn drop(&mut self) {
        self.slot.interest.release(&self.uri);
    }
}

impl McpHost {
    /// Every server's notices about its resources and prompts, from now on.
    pub fn resource_notices(&self) -> broadcast::Receiver<ResourceNotice> {
        self.notices().subscribe()
    }

    /// Subscribes to `server`'s resource `uri` (its own URI), waiting
    /// (within the server's call timeout) until the server has accepted it.
    /// Its `notifications/resources/updated` then arrive on
    /// [`McpHost::resource_notices`] until the handle is dropped. A server
    /// that offers no subscriptions is refused as it would refuse (`-32601`).
    pub async fn subscribe_resource(
        &self,
        server: &str,
        uri: &str,
    ) -> Result<ResourceSubscription, McpCallError> {
        let what = format!("resources/subscribe {uri}");
        let (slot, peer) = self.connected(server, &what)?;
        let offered = peer.peer_info().is_some_and(|info| {
            info.capabilities
                .resources
                .as_ref()
                .is_some_and(|r| r.subscribe == Some(true))
        });
        if !offered {
            return Err(McpCallError::Protocol {
                server: server.to_owned(),
                tool: what,
                code: -32601,
                message: "the server offers no resource subscriptions".to_owned(),
            });
        }
        let mut held = slot.interest.held.subscribe();
        slot.interest.acquire(uri);
        let subscription = ResourceSubscription {
            slot: slot.clone(),
            uri: uri.to_owned(),
        };
        let timeout = slot.config.call_timeout;
        let settled = tokio::time::timeout(
            timeout,
            held.wait_for(|h| h.active.contains(uri) || h.refused.contains_key(uri)),
        )
        .await;
        let refusal = match settled {
            Err(_) => {
                return Err(McpCallError::Timeout {
                    server: server.to_owned(),
                    tool: what,
                    timeout_ms: timeout.as_millis() as u64,
                });
            }
            // The slot (and its sender) outlives this call.
            Ok(Err(_)) => None,
            Ok(Ok(held)) => held.refused.get(uri).cloned(),
        };
        match refusal {
            Some(message) => Err(McpCallError::Protocol {
                server: server.to_owned(),
                tool: what,
                code: -32602,
                message,
            }),
            None => Ok(subscription),
        }
    }
}

/// How long one upstream subscribe or unsubscribe may take.
const UPSTREAM_PATIENCE: Duration = Duration::from_secs(30);

/// Holds at the server, over one connection, the subscriptions its
/// [`Interest`] wants; runs until the connection ends (the caller aborts
/// it). Starts from nothing held: a new connection holds nothing yet.
pub(crate) async fn follow(slot: Arc<Slot>, peer: Peer<RoleClient>) {
    let interest = &slot.interest;
    interest.held.send_replace(Held::default());
    let mut wanted = interest.wanted.subscribe();
    let legacy = peer
        .peer_info()
        .is_none_or(|info| info.protocol_version.has_initialize());
    if legacy {
        loop {
            let now = wanted.borrow_and_update().clone();
            reconcile_one_by_one(&slot, &peer, &now).await;
            if wanted.changed().await.is_err() {
                return;
            }
        }
    }
    // 2026-07-28 and later: one listen stream holds the whole set, opened
    // anew when the set changes.
    let mut stream: Option<rmcp::service::Subscription> = None;
    loop {
        let now = wanted.borrow_and_update().clone();
        let refused = interest.held.borrow().refused.clone();
        let asked: BTreeSet<String> = now
            .iter()
            .filter(|uri| !refused.contains_key(*uri))
            .cloned()
            .collect();
        let current = interest.held.borrow().active.clone();
        if asked != current || stream.is_none() && !asked.is_empty() {
            if let Some(mut old) = stream.take() {
                let _ = old.cancel().await;
            }
            stream = listen(&slot, &peer, asked).await;
        }
        loop {
            let next = async {
                match stream.as_mut() {
                    Some(stream) => stream.next().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                changed = wanted.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    break;
                }
                notification = next => match notification {
                    Ok(Some(notification)) => relay(&slot, notification),
                    // The server ended the stream: nothing is held.
                    _ => {
                        stream = None;
                        interest.held.send_modify(|held| held.active.clear());
                        tracing::debug!(server = %slot.config.name, "an upstream resource subscription stream ended");
                    }
                },
            }
        }
    }
}

/// Opens a listen stream for `asked`; what the server leaves out of its
/// acknowledgment is refused.
async fn listen(
    slot: &Slot,
    peer: &Peer<RoleClient>,
    asked: BTreeSet<String>,
) -> Option<rmcp::service::Subscription> {
    if asked.is_empty() {
        slot.interest.held.send_modify(|held| held.active.clear());
        return None;
    }
    let filter = SubscriptionFilter::builder()
        .resource_subscriptions(asked.iter().cloned())
        .build();
    let opened = tokio::time::timeout(UPSTREAM_PATIENCE, peer.listen(filter)).await;
    let server = slot.config.name.as_str();
    match opened {
        Ok(Ok(stream)) => {
            let accepted: BTreeSet<String> = stream
                .acknowledged()
                .resource_subscriptions
                .iter()
                .flatten()
                .cloned()
                .collect();
            slot.interest.held.send_modify(|held| {
                for uri in asked.difference(&accepted) {
                    held.refused.insert(
                        uri.clone(),
                        format!("MCP server `{server}` did not accept a subscription to `{uri}`"),
                    );
                }
                held.active = accepted;
            });
            Some(stream)
        }
        outcome => {
            let message = match outcome {
                Ok(Err(error)) => service_error(server, "subscriptions/listen", error).to_string(),
                _ => format!("MCP server `{server}` did not answer subscriptions/listen"),
            };
            tracing::warn!(server, %message, "cannot subscribe to an upstream server's resources");
            slot.interest.held.send_modify(|held| {
                held.active.clear();
                for uri in &asked {
                    held.refused.insert(uri.clone(), message.clone());
                }
            });
            None
        }
    }
}

/// `resources/subscribe` for each wanted URI not held yet (and not
/// refused), `resources/unsubscribe` for each held one no longer wanted.
#[allow(deprecated)] // the protocol versions before 2026-07-28 have only these
async fn reconcile_one_by_one(slot: &Slot, peer: &Peer<RoleClient>, wanted: &BTreeSet<String>) {
    let server = slot.config.name.as_str();
    let held = slot.interest.held.borrow().clone();
    for uri in wanted
        .iter()
        .filter(|u| !held.active.contains(*u) && !held.refused.contains_key(*u))
    {
        let asked = tokio::time::timeout(
            UPSTREAM_PATIENCE,
            peer.subscribe(SubscribeRequestParams::new(uri.clone())),
        )
        .await;
        slot.interest.held.send_modify(|held| match asked {
            Ok(Ok(())) => {
                held.active.insert(uri.clone());
            }
            Ok(Err(error)) => {
                let message = service_error(server, "resources/subscribe", error);
                let message = match message {
                    McpCallError::Protocol { message, .. } => message,
                    other => other.to_string(),
                };
                held.refused.insert(uri.clone(), message);
            }
            Err(_) => {
                held.refused.insert(
                    uri.clone(),
                    format!("MCP server `{server}` did not answer resources/subscribe"),
                );
            }
        });
    }
    for uri in held.active.iter().filter(|u| !wanted.contains(*u)) {
        let _ = tokio::time::timeout(
            UPSTREAM_PATIENCE,
            peer.unsubscribe(UnsubscribeRequestParams::new(uri.clone())),
        )
        .await;
        slot.interest.held.send_modify(|held| {
            held.active.remove(uri);
        });
    }
}

/// A notification of a listen stream, as a notice.
fn relay(slot: &Slot, notification: ServerNotification) {
    let server = slot.config.name.clone();
    let notice = match notification {
        ServerNotification::ResourceUpdatedNotification(updated) => ResourceNotice::Updated {
            server,
            uri: updated.params.uri,
        },
        ServerNotification::ResourceListChangedNotification(_) => {
            ResourceNotice::ResourcesChanged { server }
        }
        ServerNotification::PromptListChangedNotification(_) => {
            ResourceNotice::PromptsChanged { server }
        }
        _ => return,
    };
    // Nobody listening is not an error.
    let _ = slot.notices.send(notice);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interest_counts_subscribers_and_retries_a_refusal_once_nobody_wants_it() {
        let interest = Interest::default();
        interest.acquire("a");
        interest.acquire("a");
        assert_eq!(*interest.wanted.borrow(), BTreeSet::from(["a".to_owned()]));
        interest
            .held
            .send_modify(|held| drop(held.refused.insert("a".to_owned(), "no".to_owned())));
        interest.release("a");
        assert!(interest.wanted.borrow().contains("a"), "one still wants it");
        assert!(interest.held.borrow().refused.contains_key("a"));
        interest.release("a");
        assert!(interest.wanted.borrow().is_empty());
        assert!(interest.held.borrow().refused.is_empty());
        // A release of something never acquired changes nothing.
        interest.release("b");
        assert!(interest.wanted.borrow().is_empty());
    }
}
