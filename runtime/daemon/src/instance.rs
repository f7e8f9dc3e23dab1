//! Who this process is among the instances using one store: its id
//! (`serve.instance_id`, else the one kept in `STATE_DIR/instance-id`, so a
//! restart is the same instance), its host and process, and its lease.
//!
//! In a shared store ([`Store::is_shared`]) a running instance renews its
//! lease every third of `store.lease_s`, and looks for others whose lease
//! ran out: their pending approvals are abandoned (with a reason saying
//! so) and their sessions' turns may run elsewhere. Any store also learns
//! at start of instances of this host whose process is gone, so that
//! a crashed daemon's approvals do not wait for ever even where no lease
//! is kept (SQLite: one daemon, no writes while idle).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use quiver_store::{InstanceRecord, Store};

use crate::DaemonError;

/// The file in the state directory that keeps the instance id.
pub const INSTANCE_ID_FILE: &str = "instance-id";

/// Where this instance listens, as recorded in the store: the configured
/// address at start, the bound one once its socket is (the config may say
/// port 0). Shared with the lease keeper, which registers it again.
#[derive(Debug, Clone, Default)]
pub struct ListenAddress(Arc<std::sync::Mutex<Option<String>>>);

impl ListenAddress {
    /// `address` until [`ListenAddress::set`].
    pub fn new(address: Option<String>) -> ListenAddress {
        ListenAddress(Arc::new(std::sync::Mutex::new(address)))
    }

    /// The address now.
    pub fn get(&self) -> Option<String> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Replaces it.
    pub fn set(&self, address: String) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(address);
    }
}

/// This process as an instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    /// Its id.
    pub id: String,
    /// The host name.
    pub host: String,
    /// The process id.
    pub pid: u32,
}

/// The host's name (`localhost` when it cannot be read).
pub fn host_name() -> String {
    let mut buffer = [0u8; 256];
    // SAFETY: the buffer is valid for its whole length, which is passed.
    let status = unsafe { libc::gethostname(buffer.as_mut_ptr().cast(), buffer.len()) };
    let end = buffer.iter().position(|b| *b == 0).unwrap_or(buffer.len());
    let name = String::from_utf8_lossy(&buffer[..end]).into_owned();
    if status != 0 || name.is_empty() {
        "localhost".to_owned()
    } else {
        name
    }
}

impl Instance {
    /// The instance of this process: `configured`, else the id kept in
    /// `state_dir` (made now from the host name and a random suffix when
    /// there is none).
    pub fn resolve(state_dir: &Path, configured: Option<&str>) -> Result<Instance, String> {
        let host = host_name();
        let id = match configured {
            Some(id) => id.to_owned(),
            None => {
                let file = state_dir.join(INSTANCE_ID_FILE);
                match std::fs::read_to_string(&file) {
                    Ok(text) if crate::settings::is_instance_id(text.trim()) => {
                        text.trim().to_owned()
                    }
                    Ok(text) => {
                        return Err(format!(
                            "{} holds `{}`, not an instance id (1 to 64 of [A-Za-z0-9._-]); remove it to make a new one",
                            file.display(),
                            text.trim()
                        ));
                    }
                    Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                        let stem: String = host
                            .chars()
                            .map(|c| {
                                if c.is_ascii_alphanumeric() || c == '-' {
                                    c
                                } else {
                                    '-'
                                }
                            })
                            .take(48)
                            .collect();
                        let id = format!("{stem}-{}", crate::auth::random_hex(3));
                        write_new(&file, &id)?;
                        id
                    }
                    Err(error) => return Err(format!("cannot read {}: {error}", file.display())),
                }
            }
        };
        Ok(Instance {
            id,
            host,
            pid: std::process::id(),
        })
    }

    /// Its record for the store, listening at `listen` (when it serves).
    pub fn record(&self, listen: Option<String>) -> InstanceRecord {
        InstanceRecord {
            id: self.id.clone(),
            host: self.host.clone(),
            pid: self.pid,
            version: env!("CARGO_PKG_VERSION").to_owned(),
            listen,
            started_ms: 0,
            heartbeat_ms: 0,
            stopped_ms: None,
            stop_reason: None,
        }
    }

    /// What status shows of it.
    pub fn json(&self) -> Value {
        json!({"id": self.id, "host": self.host, "pid": self.pid})
    }
}

/// Writes `id` into a new file at `path` (mode 0600), unless another
/// process made it first, whose id is then read.
fn write_new(path: &Path, id: &str) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(mut file) => file
            .write_all(format!("{id}\n").as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", path.display())),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(error) => Err(format!("cannot make {}: {error}", path.display())),
    }
}

/// Whether process `pid` runs on this host.
fn process_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists.
    let status = unsafe { libc::kill(pid, 0) };
    status == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Records `instance` as running in `store`, after marking stopped the
/// instances of this host recorded as running whose process is gone (and,
/// in a shared store, those whose lease ran out). Returns the approvals
/// abandoned (this id's leftovers and theirs).
///
/// In a shared store an id another live process holds is refused: two
/// processes with one id would take each other's approvals and turns
/// (the same `serve.instance_id` in a config every instance reads, or a
/// copied state directory).
pub async fn register(
    store: &dyn Store,
    instance: &Instance,
    listen: Option<String>,
    lease: Duration,
) -> Result<Vec<i64>, DaemonError> {
    let mut abandoned = Vec::new();
    if store.is_shared() {
        for gone in store.expire_leases(lease).await? {
            abandoned.extend(gone.abandoned);
        }
    }
    let instances = store.instances().await?;
    if store.is_shared() {
        // Another process that may be alive: another host's (its lease is
        // still running), or a live one of this host.
        let holder = instances.iter().find(|other| {
            other.id == instance.id
                && other.stopped_ms.is_none()
                && (other.host != instance.host
                    || (other.pid != instance.pid && process_alive(other.pid)))
        });
        if let Some(holder) = holder {
            return Err(DaemonError::InstanceIdInUse {
                id: holder.id.clone(),
                host: holder.host.clone(),
                pid: holder.pid,
                listening: holder
                    .listen
                    .as_ref()
                    .map(|l| format!(", listening on {l}"))
                    .unwrap_or_default(),
            });
        }
    }
    for other in instances {
        let gone = other.stopped_ms.is_none()
            && other.id != instance.id
            && other.host == instance.host
            && !process_alive(other.pid);
        if gone {
            tracing::info!(instance = %other.id, pid = other.pid, "an instance of this host is gone; its pending approvals are abandoned");
            store
                .stop_instance(&other.id, &format!("its process {} is gone", other.pid))
                .await?;
        }
    }
    abandoned.extend(store.register_instance(&instance.record(listen)).await?);
    Ok(abandoned)
}

/// Renews `instance`'s lease and expires the others' until the process
/// ends (a shared store only; see the module docs).
pub async fn keep_lease(
    store: Arc<dyn Store>,
    instance: Instance,
    lease: Duration,
    listen: ListenAddress,
) {
    let every = (lease / 3).max(Duration::from_millis(100));
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    loop {
        ticks.tick().await;
        match store.renew_lease(&instance.id).await {
            Ok(true) => {}
            Ok(false) => {
                // Another instance found this one's lease expired (the
                // store was out of reach longer than the lease): its
                // pending approvals were abandoned. Back in.
                tracing::warn!(instance = %instance.id, "this instance's lease had expired; registering again");
                if let Err(error) = store
                    .register_instance(&instance.record(listen.get()))
                    .await
                {
                    tracing::warn!(%error, "cannot register the instance again");
                }
            }
            Err(error) => {
                tracing::warn!(%error, "cannot renew this instance's lease");
                continue;
            }
        }
        match store.expire_leases(lease).await {
            Ok(expired) => {
                for gone in expired {
                    tracing::warn!(
                        instance = %gone.id,
                        abandoned = ?gone.abandoned,
                        "an instance stopped renewing its lease; its pending approvals are abandoned"
                    );
                }
            }
            Err(error) => tracing::warn!(%error, "cannot look for expired leases"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kept_id_is_made_once_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let first = Instance::resolve(dir.path(), None).unwrap();
        assert!(crate::settings::is_instance_id(&first.id), "{}", first.id);
        assert_eq!(Instance::resolve(dir.path(), None).unwrap().id, first.id);
        assert_eq!(Instance::resolve(dir.path(), Some("b")).unwrap().id, "b");
        std::fs::write(dir.path().join(INSTANCE_ID_FILE), "no spaces please").unwrap();
        let error = Instance::resolve(dir.path(), None).unwrap_err();
        assert!(error.contains("not an instance id"), "{error}");
    }

    #[test]
    fn this_process_is_alive_and_a_reaped_one_is_not() {
        assert!(process_alive(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!process_alive(pid));
    }
}
