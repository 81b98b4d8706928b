//! The in-memory vector index of an agent's knowledge: every chunk's embedding quantised to int8 (one
//! scale per vector: 384 bytes + 4 instead of 1,536), searched exhaustively. The query is quantised the
//! same way and scored with integer dot products (cosine similarity to within about 0.01 of the float
//! result, since the embeddings are unit vectors); large indexes are searched on several threads.
//!
//! Built for up to a few hundred thousand chunks per agent (100,000 chunks: 39 MB, searched in a few
//! milliseconds on two cores; `docs/performance.md`). Beyond that, use an approximate index (HNSW,
//! e.g. pgvector or a vector database) instead.

use confab_models::minilm::DIMENSIONS;

/// Indexes larger than this are searched on `threads` threads.
const PARALLEL_FROM: usize = 20_000;

#[derive(Debug, Clone)]
pub struct VectorIndex {
    codes: Vec<i8>,
    scales: Vec<f32>,
    threads: usize,
}

/// A vector as int8 codes and the scale that turns them back (`value ≈ code × scale`).
fn quantize(vector: &[f32], codes: &mut [i8]) -> f32 {
    let peak = vector.iter().fold(0.0f32, |m, v| m.max(v.abs())).max(1e-12);
    let scale = peak / 127.0;
    for (code, value) in codes.iter_mut().zip(vector) {
        *code = (value / scale).round().clamp(-127.0, 127.0) as i8;
    }
    scale
}

fn dot_portable(a: &[i8], b: &[i8]) -> i32 {
    a.iter().zip(b).map(|(&x, &y)| i32::from(x) * i32::from(y)).sum()
}

/// The same loop compiled for AVX2 (16 products per instruction instead of SSE2's 4).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn dot_avx2(a: &[i8], b: &[i8]) -> i32 {
    a.iter().zip(b).map(|(&x, &y)| i32::from(x) * i32::from(y)).sum()
}

/// The integer dot product for this CPU: AVX2 where it has it (detected once per process).
fn dot_for_this_cpu() -> fn(&[i8], &[i8]) -> i32 {
    #[cfg(target_arch = "x86_64")]
    {
        static AVX2: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        if *AVX2.get_or_init(|| std::arch::is_x86_feature_detected!("avx2")) {
            // SAFETY: only called where AVX2 was detected.
            return |a, b| unsafe { dot_avx2(a, b) };
        }
    }
    dot_portable
}

/// The best `k` (score, position) pairs, best first.
#[derive(Debug)]
struct Best {
    k: usize,
    hits: Vec<(f32, usize)>,
}

impl Best {
    fn new(k: usize) -> Best {
        Best { k, hits: Vec::with_capacity(k + 1) }
    }

    fn offer(&mut self, score: f32, position: usize) {
        if self.hits.len() == self.k && self.hits.last().is_some_and(|(worst, _)| score <= *worst) {
            return;
        }
        let at = self.hits.partition_point(|(s, _)| *s >= score);
        self.hits.insert(at, (score, position));
        self.hits.truncate(self.k);
    }
}

impl Default for VectorIndex {
    fn default() -> Self {
        VectorIndex::new()
    }
}

impl VectorIndex {
    pub fn new() -> VectorIndex {
        VectorIndex { codes: Vec::new(), scales: Vec::new(), threads: 2 }
    }

    pub fn with_capacity(vectors: usize) -> VectorIndex {
        VectorIndex { codes: Vec::with_capacity(vectors * DIMENSIONS), scales: Vec::with_capacity(vectors), threads: 2 }
    }

    pub fn len(&self) -> usize {
        self.scales.len()
    }

    pub fn is_empty(&self) -> bool {
        self.scales.is_empty()
    }

    /// Adds a unit vector; its position is the index's length before the call.
    pub fn push(&mut self, vector: &[f32; DIMENSIONS]) {
        let start = self.codes.len();
        self.codes.resize(start + DIMENSIONS, 0);
        let scale = quantize(vector, &mut self.codes[start..]);
        self.scales.push(scale);
    }

    /// The `k` positions most similar to `query` (a unit vector), with their cosine similarity, best
    /// first.
    pub fn search(&self, query: &[f32; DIMENSIONS], k: usize) -> Vec<(f32, usize)> {
        let mut query_codes = [0i8; DIMENSIONS];
        let query_scale = quantize(query, &mut query_codes);
        let dot = dot_for_this_cpu();
        let scan = |first: usize, codes: &[i8]| {
            let mut best = Best::new(k);
            for (offset, vector) in codes.chunks_exact(DIMENSIONS).enumerate() {
                let position = first + offset;
                let score = dot(&query_codes, vector) as f32 * query_scale * self.scales[position];
                best.offer(score, position);
            }
            best
        };
        if self.len() < PARALLEL_FROM || self.threads < 2 {
            return scan(0, &self.codes).hits;
        }
        let per_thread = self.len().div_ceil(self.threads);
        let parts: Vec<Best> = std::thread::scope(|scope| {
            let handles: Vec<_> = self
                .codes
                .chunks(per_thread * DIMENSIONS)
                .enumerate()
                .map(|(i, codes)| scope.spawn(move || scan(i * per_thread, codes)))
                .collect();
            handles.into_iter().map(|h| h.join().expect("a search thread panicked")).collect()
        });
        let mut best = Best::new(k);
        for (score, position) in parts.into_iter().flat_map(|part| part.hits) {
            best.offer(score, position);
        }
        best.hits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(seed: u64) -> [f32; DIMENSIONS] {
        let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let mut v = [0.0f32; DIMENSIONS];
        for value in v.iter_mut() {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            *value = ((state >> 33) as f32 / (1u64 << 31) as f32) - 0.5;
        }
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter_mut().for_each(|x| *x /= norm);
        v
    }

    fn exact(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn every_dot_product_agrees() {
        let a: Vec<i8> = (0..DIMENSIONS).map(|i| (i as i32 * 37 % 255 - 127) as i8).collect();
        let b: Vec<i8> = (0..DIMENSIONS).map(|i| (i as i32 * 91 % 255 - 127) as i8).collect();
        let dot = dot_for_this_cpu();
        assert_eq!(dot(&a, &b), dot_portable(&a, &b));
        let extreme = vec![-127i8; DIMENSIONS];
        assert_eq!(dot(&extreme, &extreme), 127 * 127 * DIMENSIONS as i32);
    }

    #[test]
    fn finds_the_nearest_vectors_like_an_exact_search() {
        for size in [1_000, 30_000] {
            let vectors: Vec<[f32; DIMENSIONS]> = (0..size as u64).map(unit).collect();
            let mut index = VectorIndex::with_capacity(size);
            vectors.iter().for_each(|v| index.push(v));
            for query_seed in [7u64, 1_000_003] {
                // A query near vector 123: the vector plus a little noise.
                let noise = unit(query_seed);
                let mut query = vectors[123];
                query.iter_mut().zip(noise).for_each(|(q, n)| *q += 0.3 * n);
                let norm = query.iter().map(|x| x * x).sum::<f32>().sqrt();
                query.iter_mut().for_each(|x| *x /= norm);
                let hits = index.search(&query, 5);
                assert_eq!(hits.len(), 5);
                assert_eq!(hits[0].1, 123, "size {size}");
                assert!(hits.windows(2).all(|w| w[0].0 >= w[1].0));
                for (score, position) in &hits {
                    assert!((score - exact(&query, &vectors[*position])).abs() < 0.02, "{score}");
                }
            }
        }
        assert!(VectorIndex::new().search(&unit(1), 3).is_empty());
    }
}
