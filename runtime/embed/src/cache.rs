//! The vectors a model gave, kept in memory for every session and on disk
//! in the state directory, keyed by the model ([`Embedder::key`]) and the
//! exact text embedded, so a restart or a reload re-embeds only texts it
//! has never seen.
//!
//! One append-only file per model, `<state>/embeddings/<model key>.vectors`
//! (0600 in a 0700 directory): an 8-byte magic, the dimension as a
//! little-endian `u32`, then records of a text's 32-byte BLAKE3 hash and
//! its vector as little-endian `f32`s. A record cut short (a crash while
//! writing) is dropped when the file is read, and the file is cut back to
//! the last whole record so that later appends stay aligned.
//!
//! [`Embedder::key`]: crate::Embedder::key

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use dashmap::DashMap;

const MAGIC: &[u8; 8] = b"QVECTOR1";
const HEADER: usize = 12;

/// The BLAKE3 hash of an embedded text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TextKey([u8; 32]);

impl TextKey {
    /// The key of `text`.
    pub fn of(text: &str) -> TextKey {
        TextKey(*blake3::hash(text.as_bytes()).as_bytes())
    }
}

/// Why the cache file could not be used; the cache then lives in memory
/// only, and says so once.
#[derive(Debug, thiserror::Error)]
#[error("{}: {message}", path.display())]
pub struct CacheError {
    /// The file or directory.
    pub path: PathBuf,
    /// What went wrong.
    pub message: String,
}

/// Vectors by text, for one model.
#[derive(Debug)]
pub struct VectorCache {
    dimension: usize,
    vectors: DashMap<TextKey, Arc<[f32]>>,
    file: Option<Mutex<BufWriter<File>>>,
    path: Option<PathBuf>,
}

impl VectorCache {
    /// A cache that is never written to disk.
    pub fn in_memory(dimension: usize) -> VectorCache {
        VectorCache {
            dimension,
            vectors: DashMap::new(),
            file: None,
            path: None,
        }
    }

    /// The cache of model `model_key` under `state_dir`, with every vector
    /// its file holds.
    pub fn open(
        state_dir: &Path,
        model_key: &str,
        dimension: usize,
    ) -> Result<VectorCache, CacheError> {
        let dir = state_dir.join("embeddings");
        quiver_config::paths::make_private_dir(&dir).map_err(|e| CacheError {
            path: e.path,
            message: e.detail,
        })?;
        let path = dir.join(format!("{model_key}.vectors"));
        let error = |message: String| CacheError {
            path: path.clone(),
            message,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| error(e.to_string()))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| error(e.to_string()))?;
        let vectors = DashMap::new();
        let record = 32 + 4 * dimension;
        if bytes.is_empty() {
            let mut header = Vec::with_capacity(HEADER);
            header.extend_from_slice(MAGIC);
            header.extend_from_slice(&(dimension as u32).to_le_bytes());
            file.write_all(&header).map_err(|e| error(e.to_string()))?;
        } else {
            let stored_dimension = bytes
                .get(8..HEADER)
                .and_then(|b| <[u8; 4]>::try_from(b).ok())
                .map(u32::from_le_bytes);
            if bytes.get(..8) != Some(MAGIC.as_slice())
                || stored_dimension != Some(dimension as u32)
            {
                return Err(error(format!(
                    "not a vector cache of dimension {dimension}; remove it to start afresh"
                )));
            }
            let body = bytes.get(HEADER..).unwrap_or_default();
            let whole = body.len() / record * record;
            for chunk in body.get(..whole).unwrap_or_default().chunks_exact(record) {
                let (key, floats) = chunk.split_at(32);
                let Ok(key) = <[u8; 32]>::try_from(key) else {
                    continue;
                };
                let vector: Arc<[f32]> = floats
                    .chunks_exact(4)
                    .filter_map(|b| <[u8; 4]>::try_from(b).ok())
                    .map(f32::from_le_bytes)
                    .collect();
                vectors.insert(TextKey(key), vector);
            }
            if whole != body.len() {
                tracing::warn!(path = %path.display(), dropped_bytes = body.len() - whole, "vector cache ends in a cut record (dropped)");
                file.set_len((HEADER + whole) as u64)
                    .and_then(|()| file.seek(SeekFrom::End(0)).map(|_| ()))
                    .map_err(|e| error(e.to_string()))?;
            }
        }
        Ok(VectorCache {
            dimension,
            vectors,
            file: Some(Mutex::new(BufWriter::new(file))),
            path: Some(path),
        })
    }

    /// The file, when the cache has one.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Length of each vector.
    pub fn dimension(&self) -> usize {
        self.dimension
    }

    /// The vector of the text with `key`, if known.
    pub fn get(&self, key: &TextKey) -> Option<Arc<[f32]>> {
        self.vectors.get(key).map(|v| v.value().clone())
    }

    /// Number of vectors held.
    pub fn len(&self) -> usize {
        self.vectors.len()
    }

    /// Whether no vector is held.
    pub fn is_empty(&self) -> bool {
        self.vectors.is_empty()
    }

    /// Keeps `vectors` (in memory at once, then on disk); a vector of the
    /// wrong length is not kept.
    pub fn insert(&self, vectors: &[(TextKey, Arc<[f32]>)]) -> Result<(), CacheError> {
        let mut fresh = Vec::new();
        for (key, vector) in vectors {
            if vector.len() != self.dimension {
                continue;
            }
            if self.vectors.insert(*key, vector.clone()).is_none() {
                fresh.push((key, vector));
            }
        }
        let Some(file) = &self.file else {
            return Ok(());
        };
        if fresh.is_empty() {
            return Ok(());
        }
        let mut file = file.lock().unwrap_or_else(PoisonError::into_inner);
        let mut write = || -> std::io::Result<()> {
            for (key, vector) in &fresh {
                file.write_all(&key.0)?;
                for x in vector.iter() {
                    file.write_all(&x.to_le_bytes())?;
                }
            }
            file.flush()
        };
        write().map_err(|e| CacheError {
            path: self.path.clone().unwrap_or_default(),
            message: e.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vector(seed: f32) -> Arc<[f32]> {
        (0..4).map(|i| seed + i as f32).collect()
    }

    #[test]
    fn vectors_survive_a_reopen_and_a_cut_record_is_dropped() {
        let state = match tempfile::tempdir() {
            Ok(dir) => dir,
            Err(e) => panic!("{e}"),
        };
        let cache = match VectorCache::open(state.path(), "m1", 4) {
            Ok(cache) => cache,
            Err(e) => panic!("{e}"),
        };
        let a = TextKey::of("a");
        let b = TextKey::of("b");
        assert!(cache.insert(&[(a, vector(1.0)), (b, vector(2.0))]).is_ok());
        let path = cache.path().map(Path::to_path_buf).unwrap_or_default();
        drop(cache);
        // A crash halfway through a third record.
        let mut file = match OpenOptions::new().append(true).open(&path) {
            Ok(file) => file,
            Err(e) => panic!("{e}"),
        };
        assert!(file.write_all(&[7u8; 40]).is_ok());
        drop(file);

        let cache = match VectorCache::open(state.path(), "m1", 4) {
            Ok(cache) => cache,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.get(&b).as_deref(), Some(&vector(2.0)[..]));
        let c = TextKey::of("c");
        assert!(cache.insert(&[(c, vector(3.0))]).is_ok());
        drop(cache);
        let cache = match VectorCache::open(state.path(), "m1", 4) {
            Ok(cache) => cache,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get(&c).as_deref(), Some(&vector(3.0)[..]));
        let mode = std::fs::metadata(&path).map(|m| {
            use std::os::unix::fs::PermissionsExt;
            m.permissions().mode() & 0o777
        });
        assert_eq!(mode.ok(), Some(0o600));
        // Another model's file, or another dimension, is not this one.
        assert!(VectorCache::open(state.path(), "m1", 8).is_err());
        assert!(VectorCache::open(state.path(), "m2", 8).is_ok_and(|c| c.is_empty()));
    }
}
