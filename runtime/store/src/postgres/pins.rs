//! Accepted tool definitions for the MCP host, which reads and writes
//! them synchronously under its own locks: every pin is kept in memory
//! (read at connect, and again for a source another instance changed),
//! and writes go to the database in order from a task of their own, tried
//! again until the server takes them. [`CachedPins::flush`] waits for the
//! writes made so far; an operator's acceptance is answered after it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use quiver_tool::integrity::{Pin, PinStore, PinStoreError};

use super::Shared;
use crate::StoreError;
use crate::notices::Notice;
use crate::sqlite::pin_from_row;

/// What the writer is asked to do, in order.
enum Write {
    Put { source: String, pins: Vec<Pin> },
    Flush(oneshot::Sender<()>),
}

/// Pins by source, then tool.
type Cache = BTreeMap<String, BTreeMap<String, Pin>>;

/// The pins of a PostgreSQL store.
pub(crate) struct CachedPins {
    shared: Arc<Shared>,
    cache: Mutex<Cache>,
    writes: mpsc::UnboundedSender<Write>,
    writer: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for CachedPins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedPins").finish_non_exhaustive()
    }
}

const PIN_COLUMNS: &str =
    "SELECT source, tool, hash, shape, definition, accepted_ms, accepted_by FROM tool_pins";

impl CachedPins {
    /// Reads every pin and starts the writer.
    pub(crate) async fn load(shared: Arc<Shared>) -> Result<Arc<CachedPins>, StoreError> {
        let cache = read(&shared, None).await?;
        let (writes, queue) = mpsc::unbounded_channel();
        let writer = tokio::spawn(write_in_order(shared.clone(), queue));
        Ok(Arc::new(CachedPins {
            shared,
            cache: Mutex::new(cache),
            writes,
            writer,
        }))
    }

    /// Reads the pins of `source` (all, when `None`) again, keeping a pin
    /// written here more recently than the stored one.
    pub(crate) async fn reload(&self, source: Option<&str>) {
        match read(&self.shared, source).await {
            Ok(stored) => {
                let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
                for (source, pins) in stored {
                    let entry = cache.entry(source).or_default();
                    for (tool, pin) in pins {
                        let newer_here = entry
                            .get(&tool)
                            .is_some_and(|held| held.accepted_ms > pin.accepted_ms);
                        if !newer_here {
                            entry.insert(tool, pin);
                        }
                    }
                }
            }
            Err(error) => tracing::warn!(%error, "cannot read the accepted tool definitions again"),
        }
    }

    /// Waits until the writes made so far are stored; an error when the
    /// server does not take them within the store's connect timeout (they
    /// stay queued and are stored once it does).
    pub(crate) async fn flush(&self) -> Result<(), StoreError> {
        let (done, stored) = oneshot::channel();
        let unavailable = |detail: &str| StoreError::Unavailable {
            location: self.shared.location.clone(),
            detail: detail.to_owned(),
        };
        self.writes
            .send(Write::Flush(done))
            .map_err(|_| unavailable("the store is closing"))?;
        let patience = Duration::from_secs(10);
        match tokio::time::timeout(patience, stored).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(unavailable("the store is closing")),
            Err(_) => Err(unavailable(
                "the accepted tool definitions are not stored yet (the server is not answering); they will be once it does",
            )),
        }
    }

    /// Stops the writer (the store is dropped).
    pub(crate) fn stop(&self) {
        self.writer.abort();
    }
}

impl PinStore for CachedPins {
    fn pins(&self, source: &str) -> Result<Vec<Pin>, PinStoreError> {
        let cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(cache
            .get(source)
            .map(|pins| pins.values().cloned().collect())
            .unwrap_or_default())
    }

    fn put_pins(&self, source: &str, pins: &[Pin]) -> Result<(), PinStoreError> {
        {
            let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
            let entry = cache.entry(source.to_owned()).or_default();
            for pin in pins {
                entry.insert(pin.tool.clone(), pin.clone());
            }
        }
        self.writes
            .send(Write::Put {
                source: source.to_owned(),
                pins: pins.to_vec(),
            })
            .map_err(|_| PinStoreError(format!("{}: the store is closing", self.shared.location)))
    }
}

/// The stored pins of `source` (all, when `None`).
async fn read(shared: &Shared, source: Option<&str>) -> Result<Cache, StoreError> {
    let client = shared.client().await?;
    let rows = client
        .query(
            &format!("{PIN_COLUMNS} WHERE ($1::text IS NULL OR source = $1) ORDER BY source, tool"),
            &[&source],
        )
        .await
        .map_err(|e| shared.fail("reading accepted tool definitions", e))?;
    let mut cache = Cache::new();
    for row in rows {
        let source: String = row.get(0);
        let definition: String = row.get(4);
        let pin = pin_from_row(
            &shared.location,
            &source,
            row.get(1),
            row.get(2),
            row.get(3),
            &definition,
            row.get(5),
            row.get(6),
        )
        .map_err(|e| StoreError::Corrupt {
            what: "accepted tool definition",
            detail: e.0,
        })?;
        cache
            .entry(source)
            .or_default()
            .insert(pin.tool.clone(), pin);
    }
    Ok(cache)
}

/// Stores each write in turn, each tried again until the server takes it.
async fn write_in_order(shared: Arc<Shared>, mut queue: mpsc::UnboundedReceiver<Write>) {
    while let Some(write) = queue.recv().await {
        match write {
            Write::Flush(done) => {
                let _ = done.send(());
            }
            Write::Put { source, pins } => {
                let mut pause = Duration::from_millis(100);
                while let Err(error) = put(&shared, &source, &pins).await {
                    tracing::warn!(%error, source, "accepted tool definitions not stored yet; trying again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(5));
                }
            }
        }
    }
}

async fn put(shared: &Shared, source: &str, pins: &[Pin]) -> Result<(), StoreError> {
    let what = "storing accepted tool definitions";
    let mut client = shared.client().await?;
    let transaction = client
        .transaction()
        .await
        .map_err(|e| shared.fail(what, e))?;
    for pin in pins {
        transaction
            .execute(
                "INSERT INTO tool_pins (source, tool, hash, shape, definition, accepted_ms, accepted_by)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)
                 ON CONFLICT (source, tool) DO UPDATE SET hash = EXCLUDED.hash, shape = EXCLUDED.shape,
                   definition = EXCLUDED.definition, accepted_ms = EXCLUDED.accepted_ms, accepted_by = EXCLUDED.accepted_by",
                &[
                    &source,
                    &pin.tool,
                    &pin.hash,
                    &pin.shape,
                    &pin.definition.to_string(),
                    &pin.accepted_ms,
                    &pin.accepted_by,
                ],
            )
            .await
            .map_err(|e| shared.fail(what, e))?;
    }
    shared
        .notify(
            &transaction,
            &Notice::Pins {
                source: source.to_owned(),
            },
        )
        .await?;
    transaction.commit().await.map_err(|e| shared.fail(what, e))
}
