//! The Qwen2 architecture over a GGUF's quantized weights (candle's `quantized_qwen2`, with two changes
//! this crate needs): the model is `Clone`, so that a key/value state can be kept and continued from
//! (`ChatLm`'s prompt states; the weights are shared, only the cache is copied), and the causal mask is
//! built for each prompt chunk that starts after a kept state.
//!
//! Qwen2 is a llama with biases on the query, key and value projections, grouped-query attention and
//! RoPE at base 1e6. Its token embeddings (151,936 × 896) stay quantized and a row is dequantized when its
//! token is looked up ([`QuantizedEmbedding`]): dequantizing the whole table at load, as candle does, takes
//! ~1 s and 545 MB per process. Its weight matrices are [`Projection`]s: the Q8_0 ones widened where that
//! gets candle's VNNI kernels (4–10× faster products here).

use std::borrow::Cow;
use std::sync::Arc;

use candle_core::quantized::{GgmlDType, QStorage, QTensor, gguf_file};
use candle_core::{D, DType, Device, IndexOp, Result, Tensor};
use candle_nn::Module;
use candle_transformers::quantized_nn::RmsNorm;
use candle_transformers::utils::{build_causal_mask, repeat_kv};

use super::projection::Projection;

#[derive(Debug, Clone)]
struct Layer {
    q: Projection,
    k: Projection,
    v: Projection,
    q_bias: Tensor,
    k_bias: Tensor,
    v_bias: Tensor,
    out: Projection,
    attention_norm: RmsNorm,
    gate: Projection,
    up: Projection,
    down: Projection,
    ffn_norm: RmsNorm,
    /// Keys and values of the positions evaluated so far: `[1, kv_heads, positions, head_dim]`.
    cache: Option<(Tensor, Tensor)>,
}

/// An embedding table kept in its quantized blocks, shared by every clone.
#[derive(Debug, Clone)]
struct QuantizedEmbedding {
    rows: Arc<[u8]>,
    row_bytes: usize,
    dtype: GgmlDType,
    width: usize,
}

impl QuantizedEmbedding {
    fn new(table: QTensor) -> Result<QuantizedEmbedding> {
        let (count, width) = table.shape().dims2()?;
        let rows: Arc<[u8]> = Arc::from(table.data()?.as_ref());
        if !rows.len().is_multiple_of(count) || !width.is_multiple_of(table.dtype().block_size()) {
            candle_core::bail!("the embedding table's rows are not whole {:?} blocks", table.dtype());
        }
        Ok(QuantizedEmbedding { row_bytes: rows.len() / count, rows, dtype: table.dtype(), width })
    }

    /// `[1, n]` token ids → `[1, n, width]`.
    fn forward(&self, tokens: &Tensor) -> Result<Tensor> {
        let ids = tokens.squeeze(0)?.to_vec1::<u32>()?;
        let rows = ids
            .iter()
            .map(|&id| {
                let start = id as usize * self.row_bytes;
                let Some(row) = self.rows.get(start..start + self.row_bytes) else {
                    candle_core::bail!("token {id} is outside the embedding table");
                };
                let storage = QStorage::from_data(Cow::Borrowed(row), &Device::Cpu, self.dtype)?;
                QTensor::new(storage, (1, self.width))?.dequantize(&Device::Cpu)
            })
            .collect::<Result<Vec<_>>>()?;
        Tensor::cat(&rows, 0)?.unsqueeze(0)
    }
}

#[derive(Debug, Clone)]
pub struct Qwen2 {
    embeddings: QuantizedEmbedding,
    layers: Vec<Layer>,
    norm: RmsNorm,
    output: Projection,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    cos: Tensor,
    sin: Tensor,
}

impl Layer {
    fn rope(x: &Tensor, cos: &Tensor, sin: &Tensor, position: usize) -> Result<Tensor> {
        let len = x.dim(2)?;
        candle_nn::rotary_emb::rope(&x.contiguous()?, &cos.narrow(0, position, len)?, &sin.narrow(0, position, len)?)
    }

    fn attention(&mut self, x: &Tensor, mask: Option<&Tensor>, position: usize, model: &Shape) -> Result<Tensor> {
        let (batch, len, width) = x.dims3()?;
        let split =
            |t: Tensor, heads: usize| t.reshape((batch, len, heads, model.head_dim))?.transpose(1, 2)?.contiguous();
        let q = split(self.q.forward(x)?.broadcast_add(&self.q_bias)?, model.heads)?;
        let k = split(self.k.forward(x)?.broadcast_add(&self.k_bias)?, model.kv_heads)?;
        let v = split(self.v.forward(x)?.broadcast_add(&self.v_bias)?, model.kv_heads)?;
        let q = Layer::rope(&q, model.cos, model.sin, position)?;
        let k = Layer::rope(&k, model.cos, model.sin, position)?;
        let (k, v) = match (&self.cache, position) {
            (Some((kept_k, kept_v)), p) if p > 0 => (Tensor::cat(&[kept_k, &k], 2)?, Tensor::cat(&[kept_v, &v], 2)?),
            _ => (k, v),
        };
        self.cache = Some((k.clone(), v.clone()));
        let repeat = model.heads / model.kv_heads;
        let k = repeat_kv(k, repeat)?;
        let v = repeat_kv(v, repeat)?;
        let scores = (q.matmul(&k.t()?)? / (model.head_dim as f64).sqrt())?;
        let scores = match mask {
            Some(mask) => {
                let mask = mask.broadcast_as(scores.shape())?;
                let hidden = Tensor::new(f32::NEG_INFINITY, x.device())?.broadcast_as(scores.shape())?;
                mask.where_cond(&hidden, &scores)?
            }
            None => scores,
        };
        let weights = candle_nn::ops::softmax_last_dim(&scores)?;
        let y = weights.matmul(&v.contiguous()?)?.transpose(1, 2)?.reshape((batch, len, width))?;
        self.out.forward(&y)
    }

    fn feed_forward(&self, x: &Tensor) -> Result<Tensor> {
        let gate = candle_nn::ops::silu(&self.gate.forward(x)?)?;
        self.down.forward(&(gate * self.up.forward(x)?)?)
    }
}

/// What every layer needs from the model to attend.
struct Shape<'a> {
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    cos: &'a Tensor,
    sin: &'a Tensor,
}

impl Qwen2 {
    pub fn from_gguf<R: std::io::Seek + std::io::Read>(
        content: gguf_file::Content,
        reader: &mut R,
        device: &Device,
    ) -> Result<Qwen2> {
        let meta = |key: &str| match content.metadata.get(&format!("qwen2.{key}")) {
            Some(value) => Ok(value),
            None => candle_core::bail!("the GGUF has no qwen2.{key}"),
        };
        let heads = meta("attention.head_count")?.to_u32()? as usize;
        let kv_heads = meta("attention.head_count_kv")?.to_u32()? as usize;
        let width = meta("embedding_length")?.to_u32()? as usize;
        let context = meta("context_length")?.to_u32()? as usize;
        let blocks = meta("block_count")?.to_u32()? as usize;
        let eps = f64::from(meta("attention.layer_norm_rms_epsilon")?.to_f32()?);
        let rope_base = meta("rope.freq_base").and_then(|v| v.to_f32()).unwrap_or(10_000.0);
        let head_dim = width / heads;
        let mut tensor = |name: &str| content.tensor(reader, name, device);
        let embeddings = QuantizedEmbedding::new(tensor("token_embd.weight")?)?;
        let norm = RmsNorm::from_qtensor(tensor("output_norm.weight")?, eps)?;
        let output = match tensor("output.weight") {
            Ok(weights) => Projection::new(weights)?,
            Err(_) => Projection::new(tensor("token_embd.weight")?)?,
        };
        let mut layers = Vec::with_capacity(blocks);
        for index in 0..blocks {
            let mut weights = |name: &str| tensor(&format!("blk.{index}.{name}"));
            layers.push(Layer {
                q: Projection::new(weights("attn_q.weight")?)?,
                k: Projection::new(weights("attn_k.weight")?)?,
                v: Projection::new(weights("attn_v.weight")?)?,
                q_bias: weights("attn_q.bias")?.dequantize(device)?,
                k_bias: weights("attn_k.bias")?.dequantize(device)?,
                v_bias: weights("attn_v.bias")?.dequantize(device)?,
                out: Projection::new(weights("attn_output.weight")?)?,
                attention_norm: RmsNorm::from_qtensor(weights("attn_norm.weight")?, eps)?,
                gate: Projection::new(weights("ffn_gate.weight")?)?,
                up: Projection::new(weights("ffn_up.weight")?)?,
                down: Projection::new(weights("ffn_down.weight")?)?,
                ffn_norm: RmsNorm::from_qtensor(weights("ffn_norm.weight")?, eps)?,
                cache: None,
            });
        }
        let (cos, sin) = rope_tables(head_dim, rope_base, context, device)?;
        Ok(Qwen2 { embeddings, layers, norm, output, heads, kv_heads, head_dim, cos, sin })
    }

    /// Evaluates `tokens` (`[1, n]`) at positions `position..position + n` after the cached ones and
    /// returns the logits of the last: `[1, vocabulary]`.
    pub fn forward(&mut self, tokens: &Tensor, position: usize) -> Result<Tensor> {
        let len = tokens.dim(1)?;
        let mask = if len > 1 { Some(build_causal_mask(len, position, tokens.device())?) } else { None };
        let shape = Shape {
            heads: self.heads,
            kv_heads: self.kv_heads,
            head_dim: self.head_dim,
            cos: &self.cos,
            sin: &self.sin,
        };
        let mut x = self.embeddings.forward(tokens)?;
        for layer in &mut self.layers {
            let attended = layer.attention(&layer.attention_norm.forward(&x)?, mask.as_ref(), position, &shape)?;
            let x_mid = (attended + &x)?;
            x = (layer.feed_forward(&layer.ffn_norm.forward(&x_mid)?)? + x_mid)?;
        }
        let last = self.norm.forward(&x)?.i((.., len - 1, ..))?;
        self.output.forward(&last)
    }
}

/// RoPE's cosines and sines for every position of the context: `[context, head_dim / 2]` each.
fn rope_tables(head_dim: usize, base: f32, context: usize, device: &Device) -> Result<(Tensor, Tensor)> {
    let inverse: Vec<f32> = (0..head_dim).step_by(2).map(|i| 1.0 / base.powf(i as f32 / head_dim as f32)).collect();
    let inverse = Tensor::new(inverse.as_slice(), device)?.unsqueeze(0)?;
    let positions = Tensor::arange(0u32, context as u32, device)?.to_dtype(DType::F32)?.unsqueeze(D::Minus1)?;
    let angles = positions.matmul(&inverse)?;
    Ok((angles.cos()?, angles.sin()?))
}
