//! Criterion benchmarks of Confab's hot paths; the benchmarks live in `benches/`.
