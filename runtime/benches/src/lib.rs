//! Criterion benchmarks of Quiver (`cargo bench -p quiver-benches`); the
//! library itself is empty, the benches and examples are the crate.
