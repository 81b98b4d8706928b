//! Rewrites a chat model's GGUF at fetch time with its Q4_1, Q5_0 and Q5_1 weights as Q8_0 (with candle's GGUF
//! reader and writer; the model itself runs on llama.cpp). On llama.cpp the Q8_0 copy of Qwen2.5-Coder reads
//! a question faster than the package's Q4_K_M/Q5_0 mix (first token 0.21 s against 0.28 s on two AVX2
//! cores) and answers as many questions right (`docs/performance.md`, "The local language model on
//! llama.cpp"); Q8_0 holds every value of those types to within 1/254 of its block's range. The metadata
//! (the tokenizer among it) is copied as it is; tensors of other types are kept. Qwen2.5-Coder's GGUF comes
//! split across six packages: its parts are joined first (into a temporary file, removed after).

use std::io::{Read, Seek};
use std::path::Path;

use candle_core::Device;
use candle_core::quantized::{GgmlDType, QTensor, gguf_file};

use crate::paths::{QWEN_CODER_PARTS, QWEN_CODER_Q8, SMOLLM2, SMOLLM2_Q8};

/// The fetch step for SmolLM2: writes `SMOLLM2_Q8` from `SMOLLM2`.
pub fn smollm2(dir: &Path) -> Result<(), String> {
    let mut file = std::fs::File::open(dir.join(SMOLLM2)).map_err(|e| format!("{SMOLLM2}: {e}"))?;
    requantize(&mut file, SMOLLM2, dir, SMOLLM2_Q8)
}

/// The fetch step for Qwen2.5-Coder: joins `QWEN_CODER_PARTS` and writes `QWEN_CODER_Q8`.
pub fn qwen_coder(dir: &Path) -> Result<(), String> {
    let joined = dir.join(format!("{QWEN_CODER_Q8}.joined"));
    let result = (|| {
        let mut out = std::fs::File::create(&joined).map_err(|e| format!("{}: {e}", joined.display()))?;
        for part in QWEN_CODER_PARTS {
            let mut input = std::fs::File::open(dir.join(part)).map_err(|e| format!("{part}: {e}"))?;
            std::io::copy(&mut input, &mut out).map_err(|e| format!("joining {part}: {e}"))?;
        }
        let mut file = std::fs::File::open(&joined).map_err(|e| format!("{}: {e}", joined.display()))?;
        requantize(&mut file, "the joined Qwen2.5-Coder GGUF", dir, QWEN_CODER_Q8)
    })();
    let _ = std::fs::remove_file(&joined);
    result
}

/// Whether the copy holds this type as Q8_0.
fn rewritten_as_q8(dtype: GgmlDType) -> bool {
    matches!(dtype, GgmlDType::Q4_1 | GgmlDType::Q5_0 | GgmlDType::Q5_1)
}

fn requantize<R: Read + Seek>(reader: &mut R, source: &str, dir: &Path, target: &str) -> Result<(), String> {
    let fail = |e: candle_core::Error| format!("{source}: {e}");
    let content = gguf_file::Content::read(reader).map_err(fail)?;
    let mut names: Vec<&String> = content.tensor_infos.keys().collect();
    names.sort();
    let mut tensors: Vec<(&str, QTensor)> = Vec::with_capacity(names.len());
    for name in names {
        let tensor = content.tensor(reader, name, &Device::Cpu).map_err(fail)?;
        let tensor = if rewritten_as_q8(tensor.dtype()) {
            QTensor::quantize(&tensor.dequantize(&Device::Cpu).map_err(fail)?, GgmlDType::Q8_0).map_err(fail)?
        } else {
            tensor
        };
        tensors.push((name.as_str(), tensor));
    }
    let mut metadata: Vec<(&str, &gguf_file::Value)> = content.metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    metadata.sort_by_key(|(k, _)| *k);
    let partial = dir.join(format!("{target}.partial"));
    let written = (|| -> Result<(), String> {
        let mut out = std::io::BufWriter::new(std::fs::File::create(&partial).map_err(|e| e.to_string())?);
        let refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, t)| (*n, t)).collect();
        gguf_file::write(&mut out, &metadata, &refs).map_err(|e| e.to_string())?;
        std::io::Write::flush(&mut out).map_err(|e| e.to_string())
    })();
    match written {
        Ok(()) => std::fs::rename(&partial, dir.join(target)).map_err(|e| format!("cannot store {target}: {e}")),
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            Err(format!("cannot write {target}: {e}"))
        }
    }
}
