//! Sentence embeddings for semantic tool retrieval: a local
//! sentence-transformers BERT model (`config.json`, `tokenizer.json`,
//! `model.safetensors`, its pooling config) run in pure Rust with candle
//! ([`model`]), and the on-disk cache of the vectors it gave, keyed by
//! the model and the exact text ([`cache`]).

pub mod cache;
pub mod model;

pub use cache::{TextKey, VectorCache};
pub use model::{EmbedError, EmbedOptions, Embedder, Pooling};
