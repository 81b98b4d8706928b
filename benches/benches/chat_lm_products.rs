//! The local language model's hot path: one Q8_0 weight product of Qwen2.5-0.5B's shape (the gate
//! projection, 4864 × 896), for one token (generation) and fifteen (a question's prompt), as candle does
//! it on the matrix as stored and through `Projection` (widened to 1024 for candle's VNNI kernels where the
//! CPU has them). `cargo bench -p confab-benches --bench chat_lm_products`.

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};
use confab_models::chat_lm::projection::Projection;
use criterion::{Criterion, criterion_group, criterion_main};

const ROWS: usize = 4864;
const WIDTH: usize = 896;

fn products(c: &mut Criterion) {
    let device = Device::Cpu;
    let weights = Tensor::randn(0f32, 1.0, (ROWS, WIDTH), &device).unwrap();
    let quantized = || QTensor::quantize(&weights, GgmlDType::Q8_0).unwrap();
    let stored = QMatMul::from_qtensor(quantized()).unwrap();
    let projection = Projection::new(quantized()).unwrap();
    for tokens in [1usize, 15] {
        let x = Tensor::randn(0f32, 1.0, (1, tokens, WIDTH), &device).unwrap();
        c.bench_function(&format!("q8_0 4864x896, {tokens} token(s), as stored"), |b| {
            b.iter(|| stored.forward(&x).unwrap())
        });
        c.bench_function(&format!("q8_0 4864x896, {tokens} token(s), Projection"), |b| {
            b.iter(|| projection.forward(&x).unwrap())
        });
    }
}

criterion_group!(benches, products);
criterion_main!(benches);
