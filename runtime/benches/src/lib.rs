//! Criterion benchmarks of Quiver (`cargo bench -p quiver-benches`) and
//! what they share with the examples.

pub mod generated;
