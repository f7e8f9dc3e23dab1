//! Criterion benchmarks of Quiver (`cargo bench -p quiver-benches`), the
//! `report` binary that runs the headline figures and the whole-process
//! comparison with the Python reference, and what both share.

pub mod generated;
