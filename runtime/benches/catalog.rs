//! Criterion benchmarks for assembly and search (filled in by the benchmark commit).
fn main() {}
