//! Knowledge-base retrieval per user turn: embedding the turn's text (all-MiniLM-L6-v2, int8, ONNX
//! Runtime, one thread) and searching the agent's chunks (int8 vectors, exhaustive, two threads from
//! 20,000 chunks), at 1,000, 10,000 and 100,000 chunks. The vectors are pseudo-random unit vectors: the
//! search's cost does not depend on what they mean. Target: embed + search under 10 ms at 100,000 chunks
//! on two cores.
//!
//! `cargo bench -p confab-benches --bench retrieval -- --warm-up-time 2 --measurement-time 5`

use confab_engine::knowledge::index::VectorIndex;
use confab_engine::knowledge::{Chunk, Embedder, Embedding, Knowledge};
use confab_models::minilm::DIMENSIONS;
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

fn unit(seed: u64) -> Embedding {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(1);
    let mut vector = [0.0f32; DIMENSIONS];
    for value in vector.iter_mut() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        *value = (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
    }
    let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt();
    vector.iter_mut().for_each(|v| *v /= norm);
    vector
}

fn retrieval(c: &mut Criterion) {
    let embedder = Embedder::load(&confab_models::default_models_dir()).expect("models are fetched");
    let question = "Where can visitors park their cars, and is it free?";
    let mut group = c.benchmark_group("retrieval");
    group.bench_function("embed the turn's text", |b| b.iter(|| embedder.embed(&[question]).unwrap()));
    let query = embedder.embed(&[question]).unwrap()[0];
    for chunks in [1_000usize, 10_000, 100_000] {
        let mut index = VectorIndex::with_capacity(chunks);
        (0..chunks as u64).for_each(|seed| index.push(&unit(seed)));
        group.bench_with_input(BenchmarkId::new("search top 3", chunks), &index, |b, index| {
            b.iter(|| index.search(&query, 3))
        });
    }
    let knowledge = Knowledge::new((0..100_000u64).map(|seed| {
        let chunk = Chunk {
            knowledge_base_id: "kb".into(),
            document_id: format!("d{seed}"),
            title: String::new(),
            text: String::new(),
        };
        (chunk, unit(seed))
    }));
    group.bench_function("embed + search, 100000 chunks", |b| {
        b.iter(|| {
            let query = embedder.embed(&[question]).unwrap()[0];
            knowledge.search(&query, 3, 0.25)
        })
    });
    group.finish();
}

criterion_group!(benches, retrieval);
criterion_main!(benches);
