//! What upstream servers say of their resources and prompts, sent on to the
//! gateway clients that asked: `notifications/resources/updated` for the
//! resources a client subscribed to (under the gateway's names), and the
//! resource and prompt lists of the servers in its grant changing.
//!
//! Clients before protocol 2026-07-28 subscribe with `resources/subscribe`
//! and hear on their session; later ones name the resources and list
//! changes in `subscriptions/listen` and hear on that stream. Both end in
//! [`forward`], which differs only in where it sends ([`Audience`]).

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::ResourceUpdatedNotificationParam;
use rmcp::service::SubscriptionSink;
use rmcp::{Peer, RoleServer};
use tokio::sync::broadcast::error::RecvError;

use quiver_mcp::{ResourceNotice, ResourceSubscription};
use quiver_tool::tool::ToolSource;

use super::super::LiveSession;

/// A client's resource subscriptions, by the gateway's URI; each holds its
/// upstream subscription until dropped.
pub(super) type Subscriptions = Arc<Mutex<HashMap<String, ResourceSubscription>>>;

/// Where one client hears, and what it asked to hear besides its
/// subscribed resources.
pub(super) enum Audience {
    /// A session of a client before 2026-07-28: every notice it may see.
    Session(Peer<RoleServer>),
    /// A `subscriptions/listen` stream: list changes only if accepted.
    Stream {
        sink: SubscriptionSink,
        resources_changed: bool,
        prompts_changed: bool,
    },
}

impl Audience {
    /// Sends one notification; `false` once the client is gone.
    async fn updated(&self, uri: String) -> bool {
        match self {
            Audience::Session(peer) => peer
                .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                .await
                .is_ok(),
            Audience::Stream { sink, .. } => sink.notify_resource_updated(uri).await.is_ok(),
        }
    }

    async fn resources_changed(&self) -> bool {
        match self {
            Audience::Session(peer) => peer.notify_resource_list_changed().await.is_ok(),
            Audience::Stream {
                sink,
                resources_changed: true,
                ..
            } => sink.notify_resource_list_changed().await.is_ok(),
            Audience::Stream { .. } => true,
        }
    }

    async fn prompts_changed(&self) -> bool {
        match self {
            Audience::Session(peer) => peer.notify_prompt_list_changed().await.is_ok(),
            Audience::Stream {
                sink,
                prompts_changed: true,
                ..
            } => sink.notify_prompt_list_changed().await.is_ok(),
            Audience::Stream { .. } => true,
        }
    }
}

/// Sends `audience` what `notices` bring that concerns it, until `stop`
/// completes, the client is gone or the notices end: updates of the resources in
/// `subscriptions`, and list changes of the servers `live`'s grant holds.
/// A client that fell behind is told its lists changed (it may have missed
/// a change) rather than nothing.
pub(super) async fn forward(
    mut notices: tokio::sync::broadcast::Receiver<ResourceNotice>,
    live: Arc<LiveSession>,
    subscriptions: Subscriptions,
    audience: Audience,
    stop: impl Future<Output = ()>,
) {
    tokio::pin!(stop);
    let granted = |server: &str| {
        live.session
            .scope()
            .allows_toolset(&ToolSource::Mcp(server.to_owned()).toolset())
    };
    loop {
        let notice = tokio::select! {
            () = &mut stop => break,
            notice = notices.recv() => notice,
        };
        let sent = match notice {
            Ok(ResourceNotice::Updated { server, uri }) => {
                let named = quiver_mcp::resource_uri(&server, &uri);
                let subscribed = subscriptions
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .contains_key(&named);
                !subscribed || audience.updated(named).await
            }
            Ok(ResourceNotice::ResourcesChanged { server }) => {
                !granted(&server) || audience.resources_changed().await
            }
            Ok(ResourceNotice::PromptsChanged { server }) => {
                !granted(&server) || audience.prompts_changed().await
            }
            Err(RecvError::Lagged(missed)) => {
                tracing::debug!(missed, "a gateway client fell behind its resource notices");
                audience.resources_changed().await && audience.prompts_changed().await
            }
            Err(RecvError::Closed) => break,
        };
        if !sent {
            break;
        }
    }
    // The client is gone: its upstream subscriptions go with it.
    subscriptions
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
}
