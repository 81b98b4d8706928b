//! Rewrites SmolLM2's GGUF at fetch time with its Q4_1 weights as Q8_0. candle has AVX2 kernels for Q8_0
//! (and Q4_0) but multiplies Q4_1 with its generic loop, so the Q8_0 copy computes the same model several
//! times faster (`docs/performance.md`); Q8_0 holds every Q4_1 value to within 1/254 of its block's range.
//! The metadata (the tokenizer among it) is copied as it is; tensors of other types are kept.

use std::path::Path;

use candle_core::Device;
use candle_core::quantized::{GgmlDType, QTensor, gguf_file};

use crate::registry::{SMOLLM2, SMOLLM2_Q8};

/// The fetch step: writes `SMOLLM2_Q8` from `SMOLLM2`.
pub fn requantize(dir: &Path) -> Result<(), String> {
    let fail = |e: candle_core::Error| format!("{SMOLLM2}: {e}");
    let mut file = std::fs::File::open(dir.join(SMOLLM2)).map_err(|e| format!("{SMOLLM2}: {e}"))?;
    let content = gguf_file::Content::read(&mut file).map_err(fail)?;
    let mut names: Vec<&String> = content.tensor_infos.keys().collect();
    names.sort();
    let mut tensors: Vec<(&str, QTensor)> = Vec::with_capacity(names.len());
    for name in names {
        let tensor = content.tensor(&mut file, name, &Device::Cpu).map_err(fail)?;
        let tensor = if tensor.dtype() == GgmlDType::Q4_1 {
            QTensor::quantize(&tensor.dequantize(&Device::Cpu).map_err(fail)?, GgmlDType::Q8_0).map_err(fail)?
        } else {
            tensor
        };
        tensors.push((name.as_str(), tensor));
    }
    let mut metadata: Vec<(&str, &gguf_file::Value)> = content.metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    metadata.sort_by_key(|(k, _)| *k);
    let partial = dir.join(format!("{SMOLLM2_Q8}.partial"));
    let written = (|| -> Result<(), String> {
        let mut out = std::io::BufWriter::new(std::fs::File::create(&partial).map_err(|e| e.to_string())?);
        let refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, t)| (*n, t)).collect();
        gguf_file::write(&mut out, &metadata, &refs).map_err(|e| e.to_string())?;
        std::io::Write::flush(&mut out).map_err(|e| e.to_string())
    })();
    match written {
        Ok(()) => {
            std::fs::rename(&partial, dir.join(SMOLLM2_Q8)).map_err(|e| format!("cannot store {SMOLLM2_Q8}: {e}"))
        }
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            Err(format!("cannot write {SMOLLM2_Q8}: {e}"))
        }
    }
}
