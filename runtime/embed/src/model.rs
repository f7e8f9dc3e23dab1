//! A sentence-transformers BERT model loaded from a directory and run on
//! the CPU with candle: tokenised with the model's own `tokenizer.json`,
//! truncated to the model's sequence length (or `max_tokens`), pooled as
//! its `1_Pooling/config.json` says and L2-normalised when its
//! `modules.json` has a `Normalize` step.

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config as BertConfig, DTYPE};
use serde::Deserialize;
use tokenizers::{Tokenizer, TruncationParams};

/// Texts run through the model at once: long enough to amortise each
/// matrix product, short enough that padding to the longest text of a
/// batch (texts are sorted by length first) wastes little.
const BATCH: usize = 16;

/// Why a model could not be loaded or run.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// A file the model needs is not there.
    #[error("{}: missing; a sentence-transformers model directory holds config.json, tokenizer.json and model.safetensors", path.display())]
    Missing {
        /// The file looked for.
        path: PathBuf,
    },
    /// A file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A JSON file of the model is malformed.
    #[error("{}:{line}:{column}: {message}", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// serde's message (it names the field).
        message: String,
    },
    /// The model is of a kind this runtime does not run.
    #[error("{}: {message}", path.display())]
    Unsupported {
        /// The file that says so.
        path: PathBuf,
        /// What is unsupported, and what is.
        message: String,
    },
    /// The tokenizer could not be loaded or failed on a text.
    #[error("{}: tokenizer: {message}", path.display())]
    Tokenizer {
        /// `tokenizer.json`.
        path: PathBuf,
        /// The tokenizer's message.
        message: String,
    },
    /// The weights do not fit the config, or inference failed.
    #[error("{}: {message}", path.display())]
    Model {
        /// `model.safetensors`.
        path: PathBuf,
        /// candle's message.
        message: String,
    },
    /// The thread pool for inference could not be started.
    #[error("cannot start {threads} inference threads: {message}")]
    Threads {
        /// Threads asked for.
        threads: usize,
        /// rayon's message.
        message: String,
    },
}

/// How token vectors become one sentence vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// The mean over the text's tokens (all-MiniLM-L6-v2 and most others).
    Mean,
    /// The `[CLS]` token's vector.
    Cls,
    /// The element-wise maximum over the tokens.
    Max,
    /// The sum over the tokens divided by the square root of their count.
    MeanSqrtLen,
}

/// Settings of an [`Embedder`] that are not the model's own.
#[derive(Debug, Clone, Default)]
pub struct EmbedOptions {
    /// Tokens per text at most (below the model's own limit); longer texts
    /// are truncated.
    pub max_tokens: Option<usize>,
    /// Inference threads (default: every core).
    pub threads: Option<usize>,
}

#[derive(Debug, Deserialize)]
struct ModelKind {
    model_type: Option<String>,
    #[serde(default)]
    architectures: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct Module {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    path: String,
}

#[derive(Debug, Deserialize)]
struct PoolingConfig {
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
    #[serde(default)]
    pooling_mode_max_tokens: bool,
    #[serde(default)]
    pooling_mode_mean_sqrt_len_tokens: bool,
}

#[derive(Debug, Deserialize)]
struct SentenceBertConfig {
    max_seq_length: Option<usize>,
}

/// A loaded model, ready to embed texts; shareable across threads.
pub struct Embedder {
    dir: PathBuf,
    model: BertModel,
    tokenizer: Tokenizer,
    pooling: Pooling,
    normalize: bool,
    max_tokens: usize,
    dimension: usize,
    key: String,
    /// Runs batches: `threads` threads, so background embedding leaves
    /// cores to the daemon.
    pool: rayon::ThreadPool,
    /// Runs [`Embedder::embed_query`]: every core, since a model's tool
    /// call waits on it and it is one short text.
    query_pool: rayon::ThreadPool,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("dir", &self.dir)
            .field("pooling", &self.pooling)
            .field("normalize", &self.normalize)
            .field("max_tokens", &self.max_tokens)
            .field("dimension", &self.dimension)
            .field("key", &self.key)
            .finish()
    }
}

fn read(path: &Path) -> Result<Vec<u8>, EmbedError> {
    std::fs::read(path).map_err(|source| {
        if source.kind() == std::io::ErrorKind::NotFound {
            EmbedError::Missing {
                path: path.to_path_buf(),
            }
        } else {
            EmbedError::Read {
                path: path.to_path_buf(),
                source,
            }
        }
    })
}

fn parse<T: serde::de::DeserializeOwned>(path: &Path, bytes: &[u8]) -> Result<T, EmbedError> {
    serde_json::from_slice(bytes).map_err(|e| EmbedError::Format {
        path: path.to_path_buf(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })
}

/// The pooling and normalisation that `dir`'s `modules.json` and pooling
/// config ask for (mean pooling, no normalisation, without them), with
/// the hashed bytes of the files read.
fn pipeline(dir: &Path, hasher: &mut blake3::Hasher) -> Result<(Pooling, bool), EmbedError> {
    let modules_path = dir.join("modules.json");
    let modules: Vec<Module> = match read(&modules_path) {
        Ok(bytes) => {
            hasher.update(&bytes);
            parse(&modules_path, &bytes)?
        }
        Err(EmbedError::Missing { .. }) => Vec::new(),
        Err(error) => return Err(error),
    };
    let normalize = modules.iter().any(|m| m.kind.ends_with(".Normalize"));
    let pooling_dir = modules
        .iter()
        .find(|m| m.kind.ends_with(".Pooling"))
        .map(|m| dir.join(&m.path))
        .unwrap_or_else(|| dir.join("1_Pooling"));
    let pooling_path = pooling_dir.join("config.json");
    let pooling = match read(&pooling_path) {
        Ok(bytes) => {
            hasher.update(&bytes);
            let config: PoolingConfig = parse(&pooling_path, &bytes)?;
            let modes = [
                (config.pooling_mode_mean_tokens, Pooling::Mean),
                (config.pooling_mode_cls_token, Pooling::Cls),
                (config.pooling_mode_max_tokens, Pooling::Max),
                (
                    config.pooling_mode_mean_sqrt_len_tokens,
                    Pooling::MeanSqrtLen,
                ),
            ];
            let chosen: Vec<Pooling> = modes
                .iter()
                .filter(|(on, _)| *on)
                .map(|(_, p)| *p)
                .collect();
            match chosen.as_slice() {
                [one] => *one,
                [] => {
                    return Err(EmbedError::Unsupported {
                        path: pooling_path,
                        message: "no pooling mode is set; set one of pooling_mode_mean_tokens, pooling_mode_cls_token, pooling_mode_max_tokens, pooling_mode_mean_sqrt_len_tokens".into(),
                    });
                }
                _ => {
                    return Err(EmbedError::Unsupported {
                        path: pooling_path,
                        message: "several pooling modes are set (their vectors concatenated); one is supported".into(),
                    });
                }
            }
        }
        Err(EmbedError::Missing { .. }) => Pooling::Mean,
        Err(error) => return Err(error),
    };
    Ok((pooling, normalize))
}

impl Embedder {
    /// Loads the sentence-transformers BERT model in `dir`.
    pub fn load(dir: &Path, options: &EmbedOptions) -> Result<Embedder, EmbedError> {
        let mut hasher = blake3::Hasher::new();
        let config_path = dir.join("config.json");
        let config_bytes = read(&config_path)?;
        hasher.update(&config_bytes);
        let kind: ModelKind = parse(&config_path, &config_bytes)?;
        let is_bert = kind.model_type.as_deref() == Some("bert")
            || kind.architectures.iter().any(|a| a.starts_with("Bert"));
        if !is_bert {
            return Err(EmbedError::Unsupported {
                path: config_path,
                message: format!(
                    "model_type {:?} (architectures {:?}): only BERT models (model_type \"bert\") are supported",
                    kind.model_type.unwrap_or_default(),
                    kind.architectures
                ),
            });
        }
        let config: BertConfig = parse(&config_path, &config_bytes)?;
        let (pooling, normalize) = pipeline(dir, &mut hasher)?;

        let sentence_path = dir.join("sentence_bert_config.json");
        let model_limit = match read(&sentence_path) {
            Ok(bytes) => parse::<SentenceBertConfig>(&sentence_path, &bytes)?.max_seq_length,
            Err(EmbedError::Missing { .. }) => None,
            Err(error) => return Err(error),
        }
        .unwrap_or(config.max_position_embeddings)
        .min(config.max_position_embeddings);
        let max_tokens = options
            .max_tokens
            .map_or(model_limit, |m| m.clamp(2, model_limit));

        let tokenizer_path = dir.join("tokenizer.json");
        let tokenizer_bytes = read(&tokenizer_path)?;
        hasher.update(&tokenizer_bytes);
        let tokenizer_error = |message: String| EmbedError::Tokenizer {
            path: tokenizer_path.clone(),
            message,
        };
        let mut tokenizer =
            Tokenizer::from_bytes(&tokenizer_bytes).map_err(|e| tokenizer_error(e.to_string()))?;
        // Padding is ours (to the longest text of a batch); truncation is
        // the model's limit, whatever tokenizer.json says.
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_tokens,
                ..TruncationParams::default()
            }))
            .map_err(|e| tokenizer_error(e.to_string()))?;

        let weights_path = dir.join("model.safetensors");
        let weights = read(&weights_path)?;
        hasher.update(&weights);
        hasher.update(&(max_tokens as u64).to_le_bytes());
        let model_error = |message: String| EmbedError::Model {
            path: weights_path.clone(),
            message,
        };
        let device = Device::Cpu;
        let builder = VarBuilder::from_buffered_safetensors(weights, DTYPE, &device)
            .map_err(|e| model_error(e.to_string()))?;
        let model = BertModel::load(builder, &config).map_err(|e| model_error(e.to_string()))?;

        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let pool = thread_pool(options.threads.unwrap_or(cores), "quiver-embed")?;
        let query_pool = thread_pool(cores, "quiver-embed-query")?;
        let key = hasher.finalize().to_hex()[..16].to_owned();
        Ok(Embedder {
            dir: dir.to_path_buf(),
            model,
            tokenizer,
            pooling,
            normalize,
            max_tokens,
            dimension: config.hidden_size,
            key,
            pool,
            query_pool,
        })
    }

    /// The model's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Length of each vector.
    pub fn dimension(&self) -> usize {
        self.dimension
    }

    /// Tokens per text at most.
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// How token vectors are pooled.
    pub fn pooling(&self) -> Pooling {
        self.pooling
    }

    /// Whether vectors are L2-normalised.
    pub fn normalizes(&self) -> bool {
        self.normalize
    }

    /// Identifies the model and its settings: a hash of its files and the
    /// token limit, so that a cached vector is only ever reused for the
    /// model that made it.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// One vector per text, in order, on the batch threads.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut encodings = Vec::with_capacity(texts.len());
        for text in texts {
            encodings.push(self.encode(text)?);
        }
        // Similar lengths together: less padding per batch.
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| encodings.get(i).map_or(0, Vec::len));
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        for chunk in order.chunks(BATCH) {
            let batch: Vec<&[u32]> = chunk
                .iter()
                .filter_map(|&i| encodings.get(i).map(Vec::as_slice))
                .collect();
            let vectors = self.pool.install(|| self.forward(&batch))?;
            for (&i, vector) in chunk.iter().zip(vectors) {
                if let Some(slot) = out.get_mut(i) {
                    *slot = vector;
                }
            }
        }
        Ok(out)
    }

    /// One text's vector on every core: what a search waits on.
    pub fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let ids = self.encode(text)?;
        let vectors = self.query_pool.install(|| self.forward(&[&ids]))?;
        Ok(vectors.into_iter().next().unwrap_or_default())
    }

    fn encode(&self, text: &str) -> Result<Vec<u32>, EmbedError> {
        self.tokenizer
            .encode(text, true)
            .map(|encoding| encoding.get_ids().to_vec())
            .map_err(|e| EmbedError::Tokenizer {
                path: self.dir.join("tokenizer.json"),
                message: e.to_string(),
            })
    }

    /// Token counts of `text` as the model sees it (after truncation).
    pub fn token_count(&self, text: &str) -> Result<usize, EmbedError> {
        self.encode(text).map(|ids| ids.len())
    }

    fn forward(&self, batch: &[&[u32]]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let error = |e: candle_core::Error| EmbedError::Model {
            path: self.dir.join("model.safetensors"),
            message: e.to_string(),
        };
        let rows = batch.len();
        let width = batch.iter().map(|ids| ids.len()).max().unwrap_or(0).max(1);
        let mut ids = Vec::with_capacity(rows * width);
        let mut mask = Vec::with_capacity(rows * width);
        for row in batch {
            ids.extend_from_slice(row);
            mask.extend(std::iter::repeat_n(1u32, row.len()));
            let pad = width - row.len();
            ids.extend(std::iter::repeat_n(0u32, pad));
            mask.extend(std::iter::repeat_n(0u32, pad));
        }
        let device = &self.model.device;
        let ids = Tensor::from_vec(ids, (rows, width), device).map_err(error)?;
        let mask = Tensor::from_vec(mask, (rows, width), device).map_err(error)?;
        let types = ids.zeros_like().map_err(error)?;
        let hidden = self
            .model
            .forward(&ids, &types, Some(&mask))
            .map_err(error)?;
        let mask = mask
            .to_dtype(DType::F32)
            .and_then(|m| m.unsqueeze(2))
            .map_err(error)?;
        let pooled = match self.pooling {
            Pooling::Cls => hidden.narrow(1, 0, 1).and_then(|t| t.squeeze(1)),
            Pooling::Mean | Pooling::MeanSqrtLen => {
                let counts = mask.sum(1);
                let sums = hidden.broadcast_mul(&mask).and_then(|t| t.sum(1));
                match (sums, counts) {
                    (Ok(sums), Ok(counts)) => {
                        let counts = if self.pooling == Pooling::Mean {
                            counts
                        } else {
                            counts.sqrt().map_err(error)?
                        };
                        sums.broadcast_div(&counts.clamp(1e-9f32, f32::MAX).map_err(error)?)
                    }
                    (Err(e), _) | (_, Err(e)) => Err(e),
                }
            }
            Pooling::Max => {
                // Padding must never be the maximum.
                let floor = ((mask.ones_like().map_err(error)? - &mask).map_err(error)? * -1e9)
                    .map_err(error)?;
                hidden.broadcast_add(&floor).and_then(|t| t.max(1))
            }
        }
        .map_err(error)?;
        let mut vectors: Vec<Vec<f32>> = pooled.to_vec2().map_err(error)?;
        if self.normalize {
            for vector in &mut vectors {
                normalize(vector);
            }
        }
        Ok(vectors)
    }
}

/// A pool of `threads` inference threads (at least one), named `name-N`.
fn thread_pool(threads: usize, name: &'static str) -> Result<rayon::ThreadPool, EmbedError> {
    let threads = threads.max(1);
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(move |i| format!("{name}-{i}"))
        .build()
        .map_err(|e| EmbedError::Threads {
            threads,
            message: e.to_string(),
        })
}

/// The dot product of `a` and `b` (the cosine of two unit vectors), over
/// their common length.
///
/// Eight running sums instead of one: a single sum is a chain the compiler
/// may not reorder, so it runs one addition at a time, while eight
/// independent lanes become one vector instruction per step. A search takes
/// this over every tool, so it is most of a fused search's cost.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    const LANES: usize = 8;
    let common = a.len().min(b.len());
    let (a, b) = (
        a.get(..common).unwrap_or(&[]),
        b.get(..common).unwrap_or(&[]),
    );
    let mut sums = [0f32; LANES];
    let (a_chunks, a_rest) = a.as_chunks::<LANES>();
    let (b_chunks, b_rest) = b.as_chunks::<LANES>();
    for (x, y) in a_chunks.iter().zip(b_chunks) {
        for ((sum, x), y) in sums.iter_mut().zip(x).zip(y) {
            *sum += x * y;
        }
    }
    let rest: f32 = a_rest.iter().zip(b_rest).map(|(x, y)| x * y).sum();
    sums.iter().sum::<f32>() + rest
}

/// Scales `vector` to unit length (a zero vector stays zero).
pub fn normalize(vector: &mut [f32]) {
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        for x in vector.iter_mut() {
            *x /= norm;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_is_the_plain_sum_of_products_over_the_common_length() {
        let a: Vec<f32> = (0..389).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..389).map(|i| (i as f32 * 0.11).cos()).collect();
        for length in [0, 1, 7, 8, 9, 384, 389] {
            let plain: f64 = a[..length]
                .iter()
                .zip(&b[..length])
                .map(|(x, y)| f64::from(*x) * f64::from(*y))
                .sum();
            let fast = f64::from(dot(&a[..length], &b[..length]));
            assert!((plain - fast).abs() < 1e-4, "{length}: {plain} vs {fast}");
        }
        // Unequal lengths: only the shared prefix counts.
        assert_eq!(dot(&[1.0, 2.0, 3.0], &[4.0, 5.0]), 14.0);
        assert_eq!(dot(&[], &[4.0]), 0.0);
    }
}
