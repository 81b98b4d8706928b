//! Converts Whisper from a CTranslate2 `model.bin` into the safetensors layout candle-transformers'
//! Whisper loads: fused attention projections are split (`linear_0` of self-attention holds q, k and v
//! stacked; of cross-attention, `linear_1` holds k and v), names are mapped, and float16 becomes float32.
//!
//! The CTranslate2 file (binary version 6): `u32` version, the spec name and `u32` revision, `u32` count
//! of variables, each as name (`u16` length incl. NUL, bytes), `u8` rank, `u32` dims, `u8` dtype
//! (0 f32, 1 i8, 2 i16, 3 i32, 4 f16, 5 bf16), `u32` byte count, data; then aliases.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

use candle_core::{DType, Device, Tensor};

fn read_u8(r: &mut impl Read) -> std::io::Result<u8> {
    let mut b = [0u8; 1];
    r.read_exact(&mut b)?;
    Ok(b[0])
}

fn read_u16(r: &mut impl Read) -> std::io::Result<u16> {
    let mut b = [0u8; 2];
    r.read_exact(&mut b)?;
    Ok(u16::from_le_bytes(b))
}

fn read_u32(r: &mut impl Read) -> std::io::Result<u32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b)?;
    Ok(u32::from_le_bytes(b))
}

fn read_string(r: &mut impl Read) -> std::io::Result<String> {
    let n = usize::from(read_u16(r)?);
    let mut b = vec![0u8; n];
    r.read_exact(&mut b)?;
    b.pop(); // NUL
    Ok(String::from_utf8_lossy(&b).into_owned())
}

/// Every float variable of a CTranslate2 model, as float32 tensors.
pub fn read_ct2(path: &Path) -> Result<HashMap<String, Tensor>, String> {
    let mut r = std::io::BufReader::new(std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?);
    let io = |e: std::io::Error| format!("truncated or unreadable CTranslate2 file: {e}");
    let version = read_u32(&mut r).map_err(io)?;
    if version != 6 {
        return Err(format!("unsupported CTranslate2 binary version {version} (expected 6)"));
    }
    let spec = read_string(&mut r).map_err(io)?;
    if spec != "WhisperSpec" {
        return Err(format!("not a Whisper model: {spec}"));
    }
    read_u32(&mut r).map_err(io)?; // revision
    let count = read_u32(&mut r).map_err(io)?;
    let mut tensors = HashMap::new();
    for _ in 0..count {
        let name = read_string(&mut r).map_err(io)?;
        let rank = read_u8(&mut r).map_err(io)?;
        let dims: Vec<usize> =
            (0..rank).map(|_| read_u32(&mut r).map(|d| d as usize)).collect::<Result<_, _>>().map_err(io)?;
        let dtype = read_u8(&mut r).map_err(io)?;
        let bytes = read_u32(&mut r).map_err(io)? as usize;
        let mut data = vec![0u8; bytes];
        r.read_exact(&mut data).map_err(io)?;
        let dtype = match dtype {
            0 => DType::F32,
            4 => DType::F16,
            5 => DType::BF16,
            _ => continue, // integer flags (heads, activation…) are not weights
        };
        if dims.is_empty() {
            continue;
        }
        let tensor = Tensor::from_raw_buffer(&data, dtype, &dims, &Device::Cpu)
            .and_then(|t| t.to_dtype(DType::F32))
            .map_err(|e| format!("{name}: {e}"))?;
        tensors.insert(name, tensor);
    }
    Ok(tensors)
}

/// Maps CTranslate2 Whisper variables to candle-transformers names, splitting fused projections.
pub fn to_candle(
    ct2: &HashMap<String, Tensor>,
    encoder_layers: usize,
    decoder_layers: usize,
    d_model: usize,
) -> Result<HashMap<String, Tensor>, String> {
    let mut out = HashMap::new();
    let get = |name: &str| ct2.get(name).cloned().ok_or_else(|| format!("missing {name}"));
    let split = |t: &Tensor, part: usize| {
        t.narrow(0, part * d_model, d_model).and_then(|t| t.contiguous()).map_err(|e| e.to_string())
    };
    let linear = |out: &mut HashMap<String, Tensor>, from: &str, to: &str| -> Result<(), String> {
        out.insert(format!("{to}.weight"), get(&format!("{from}/weight"))?);
        out.insert(format!("{to}.bias"), get(&format!("{from}/bias"))?);
        Ok(())
    };
    let norm = |out: &mut HashMap<String, Tensor>, from: &str, to: &str| -> Result<(), String> {
        out.insert(format!("{to}.weight"), get(&format!("{from}/gamma"))?);
        out.insert(format!("{to}.bias"), get(&format!("{from}/beta"))?);
        Ok(())
    };
    let fused = |out: &mut HashMap<String, Tensor>, from: &str, to: &str, parts: &[&str]| -> Result<(), String> {
        let weight = get(&format!("{from}/weight"))?;
        let bias = get(&format!("{from}/bias"))?;
        for (i, part) in parts.iter().enumerate() {
            out.insert(format!("{to}.{part}.weight"), split(&weight, i)?);
            if *part != "k_proj" {
                out.insert(format!("{to}.{part}.bias"), split(&bias, i)?);
            }
        }
        Ok(())
    };
    out.insert("model.encoder.conv1.weight".into(), get("encoder/conv1/weight")?);
    out.insert("model.encoder.conv1.bias".into(), get("encoder/conv1/bias")?);
    out.insert("model.encoder.conv2.weight".into(), get("encoder/conv2/weight")?);
    out.insert("model.encoder.conv2.bias".into(), get("encoder/conv2/bias")?);
    norm(&mut out, "encoder/layer_norm", "model.encoder.layer_norm")?;
    // What every layer has: self-attention (fused q, k, v) and the feed-forward block.
    let block = |out: &mut HashMap<String, Tensor>, from: &str, to: &str| -> Result<(), String> {
        norm(out, &format!("{from}/self_attention/layer_norm"), &format!("{to}.self_attn_layer_norm"))?;
        fused(
            out,
            &format!("{from}/self_attention/linear_0"),
            &format!("{to}.self_attn"),
            &["q_proj", "k_proj", "v_proj"],
        )?;
        linear(out, &format!("{from}/self_attention/linear_1"), &format!("{to}.self_attn.out_proj"))?;
        norm(out, &format!("{from}/ffn/layer_norm"), &format!("{to}.final_layer_norm"))?;
        linear(out, &format!("{from}/ffn/linear_0"), &format!("{to}.fc1"))?;
        linear(out, &format!("{from}/ffn/linear_1"), &format!("{to}.fc2"))
    };
    for i in 0..encoder_layers {
        block(&mut out, &format!("encoder/layer_{i}"), &format!("model.encoder.layers.{i}"))?;
    }
    out.insert("model.decoder.embed_tokens.weight".into(), get("decoder/embeddings/weight")?);
    out.insert("model.decoder.embed_positions.weight".into(), get("decoder/position_encodings/encodings")?);
    norm(&mut out, "decoder/layer_norm", "model.decoder.layer_norm")?;
    for i in 0..decoder_layers {
        let (from, to) = (format!("decoder/layer_{i}"), format!("model.decoder.layers.{i}"));
        block(&mut out, &from, &to)?;
        norm(&mut out, &format!("{from}/attention/layer_norm"), &format!("{to}.encoder_attn_layer_norm"))?;
        linear(&mut out, &format!("{from}/attention/linear_0"), &format!("{to}.encoder_attn.q_proj"))?;
        fused(&mut out, &format!("{from}/attention/linear_1"), &format!("{to}.encoder_attn"), &["k_proj", "v_proj"])?;
        linear(&mut out, &format!("{from}/attention/linear_2"), &format!("{to}.encoder_attn.out_proj"))?;
    }
    Ok(out)
}

/// Converts `ct2_model` into `safetensors_out` for the tiny.en shape (4 + 4 layers, 384 wide).
pub fn convert_tiny_en(ct2_model: &Path, safetensors_out: &Path) -> Result<(), String> {
    let ct2 = read_ct2(ct2_model)?;
    let tensors = to_candle(&ct2, 4, 4, 384)?;
    let partial = safetensors_out.with_extension("partial");
    candle_core::safetensors::save(&tensors, &partial).map_err(|e| e.to_string())?;
    std::fs::rename(&partial, safetensors_out).map_err(|e| e.to_string())
}
