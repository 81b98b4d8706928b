//! A quantized weight matrix as the model multiplies by it, with its rows widened to whole 256-value
//! superblocks where that buys candle's fast kernel.
//!
//! candle multiplies Q8_0 weights with AVX-512 VNNI (or AVX-VNNI) `vpdpbusd` tiles only when the inner
//! dimension is a multiple of 256 (its activations are quantized in 256-value Q8_K blocks); otherwise it
//! falls back to an AVX2 dot product per output, ~18 GMAC/s on a core here, which made Qwen2.5-0.5B
//! (inner dimension 896 in every Q8_0 matrix) compute-bound: ~30 ms a token, 260 ms for a 15-token prompt.
//! Widened to 1024 with zero blocks (and the activations with zeros), the same products take the VNNI
//! tiles: a gate projection (4864 × 896) 0.246 → 0.055 ms for one token and 3.5 → 0.33 ms for fifteen
//! (`docs/performance.md`). The zeros add nothing to any sum; the activations' coarser Q8_K quantization
//! is the one the model's Q4_K/Q6_K matrices already had.
//!
//! Widening is done only where the CPU has the VNNI kernel (elsewhere it would cost 14% for nothing).
//! candle keeps its tiled copy beside the matrix, so a widened matrix holds ~2.3× its bytes in memory.

use std::borrow::Cow;

use candle_core::quantized::{GgmlDType, QMatMul, QStorage, QTensor};
use candle_core::{D, Device, Module, Result, Tensor};

/// The block candle's VNNI kernels need the inner dimension to be a multiple of.
const SUPERBLOCK: usize = 256;

/// A weight matrix (`[out, in]`) and how many zero columns its input gets.
#[derive(Debug, Clone)]
pub struct Projection {
    matmul: QMatMul,
    pad: usize,
}

impl Projection {
    /// The matrix as is, or widened when it is Q8_0 with an inner dimension candle's VNNI tiles refuse and
    /// this CPU has those tiles.
    pub fn new(weights: QTensor) -> Result<Projection> {
        let (rows, width) = weights.shape().dims2()?;
        let pad = width.next_multiple_of(SUPERBLOCK) - width;
        if pad == 0 || weights.dtype() != GgmlDType::Q8_0 || !has_vnni_tiles() {
            return Ok(Projection { matmul: QMatMul::from_qtensor(weights)?, pad: 0 });
        }
        Ok(Projection { matmul: QMatMul::from_qtensor(widen_q8_0(&weights, rows, width, pad)?)?, pad })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        if self.pad == 0 {
            return self.matmul.forward(x);
        }
        self.matmul.forward(&x.pad_with_zeros(D::Minus1, 0, self.pad)?)
    }
}

/// `weights` (`rows × width` Q8_0) with `pad` zero values after each row's own.
fn widen_q8_0(weights: &QTensor, rows: usize, width: usize, pad: usize) -> Result<QTensor> {
    let block_values = GgmlDType::Q8_0.block_size();
    let block_bytes = GgmlDType::Q8_0.type_size();
    let data = weights.data()?;
    let row_bytes = width / block_values * block_bytes;
    let padded_row_bytes = (width + pad) / block_values * block_bytes;
    if data.len() != rows * row_bytes {
        candle_core::bail!("a Q8_0 matrix of {rows} × {width} holds {} bytes", data.len());
    }
    // A Q8_0 block of zeros is all zero bytes (scale 0.0 as f16, 32 zero quants).
    let mut widened = vec![0u8; rows * padded_row_bytes];
    for (row, out) in data.chunks_exact(row_bytes).zip(widened.chunks_exact_mut(padded_row_bytes)) {
        out[..row_bytes].copy_from_slice(row);
    }
    let storage = QStorage::from_data(Cow::Owned(widened), &Device::Cpu, GgmlDType::Q8_0)?;
    QTensor::new(storage, (rows, width + pad))
}

/// Whether candle multiplies Q8_0 with VNNI tiles here (its own test: AVX-512 F and VNNI, or AVX-VNNI
/// with AVX2). Without them (AVX2 alone, most rented VMs) the language model reads and writes about 2.5×
/// slower, and a host holds fewer calls (`confab_worker::media::calls_per_core`).
pub fn has_vnni_tiles() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        (is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vnni"))
            || (is_x86_feature_detected!("avxvnni") && is_x86_feature_detected!("avx2"))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The widened matrix gives the same product as the unwidened one, up to the activations' quantization.
    #[test]
    fn a_widened_matrix_multiplies_like_the_original() -> Result<()> {
        let device = Device::Cpu;
        let weights = Tensor::randn(0f32, 1.0, (64, 96), &device)?;
        let quantized = QTensor::quantize(&weights, GgmlDType::Q8_0)?;
        let widened = widen_q8_0(&quantized, 64, 96, 160)?;
        assert_eq!(widened.shape().dims2()?, (64, 256));
        // Dequantized, the widened rows are the original rows followed by zeros.
        let (original, wide) = (quantized.dequantize(&device)?, widened.dequantize(&device)?);
        assert_eq!(wide.narrow(1, 0, 96)?.to_vec2::<f32>()?, original.to_vec2::<f32>()?);
        assert!(wide.narrow(1, 96, 160)?.flatten_all()?.to_vec1::<f32>()?.iter().all(|&v| v == 0.0));

        let x = Tensor::randn(0f32, 1.0, (1, 3, 96), &device)?;
        let exact = x.broadcast_matmul(&original.t()?)?;
        let product = Projection { matmul: QMatMul::from_qtensor(widened)?, pad: 160 }.forward(&x)?;
        let error = (product - &exact)?.abs()?.max_all()?.to_scalar::<f32>()?;
        let scale = exact.abs()?.max_all()?.to_scalar::<f32>()?;
        assert!(error < 0.02 * scale, "error {error} against values up to {scale}");
        Ok(())
    }
}
