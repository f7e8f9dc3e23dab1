//! Tool retrieval behind `tool_search`: [`classic`] BM25 over names,
//! descriptions and parameters, and the [`enhanced`] BM25F index (field
//! weights, identifier splitting, stemming, typo tolerance, exact names,
//! `server:` filters); with the `eval` feature, [`eval`] scores either on
//! query sets with gold tools.

pub mod classic;
pub mod enhanced;
#[cfg(feature = "eval")]
pub mod eval;
mod name_text;

pub use classic::{Scored, SearchIndex};
