//! One LSTM layer (PyTorch's gate order: input, forget, cell, output) over a batch of sequences. The
//! input projection of every step is one matrix product; each step then adds `W_hh · h`, one dot
//! product per gate row (`matvec`): a matrix product of one row would repack all of `W_hh` at every step
//! (measured: 171 ms per 1.6 s partial that way).

use ndarray::{Array1, Array2, Array3, s};

pub struct Lstm {
    /// `[inputs][4·hidden]`.
    input: Array2<f32>,
    /// PyTorch's `weight_hh` as it is, `[4·hidden][hidden]` row-major.
    recurrent: Vec<f32>,
    /// Both biases summed, `[4·hidden]`.
    bias: Array1<f32>,
    hidden: usize,
}

impl Lstm {
    /// From PyTorch's `weight_ih` `[4·hidden][inputs]`, `weight_hh` `[4·hidden][hidden]` and the biases.
    pub fn new(inputs: usize, weight_ih: Vec<f32>, weight_hh: Vec<f32>, bias_ih: Vec<f32>, bias_hh: Vec<f32>) -> Lstm {
        let gates = bias_ih.len();
        let hidden = gates / 4;
        let transposed = |values: Vec<f32>, columns: usize| {
            Array2::from_shape_vec((gates, columns), values)
                .expect("shape checked by the caller")
                .reversed_axes()
                .as_standard_layout()
                .into_owned()
        };
        Lstm {
            input: transposed(weight_ih, inputs),
            recurrent: weight_hh,
            bias: Array1::from(bias_ih) + Array1::from(bias_hh),
            hidden,
        }
    }

    /// `[batch][steps][inputs]` → every step's hidden state, `[batch][steps][hidden]`.
    pub fn run(&self, x: &Array3<f32>) -> Array3<f32> {
        let (batch, steps, inputs) = x.dim();
        let h4 = 4 * self.hidden;
        let flat = x.view().into_shape_with_order((batch * steps, inputs)).expect("contiguous input");
        let projected = (flat.dot(&self.input) + &self.bias).into_shape_with_order((batch, steps, h4)).expect("sized");
        let mut out = Array3::<f32>::zeros((batch, steps, self.hidden));
        let (hidden, mut gates) = (self.hidden, vec![0.0f32; h4]);
        for b in 0..batch {
            let (mut h, mut c) = (vec![0.0f32; hidden], vec![0.0f32; hidden]);
            for t in 0..steps {
                gates.copy_from_slice(projected.slice(s![b, t, ..]).as_slice().expect("contiguous"));
                matvec(&self.recurrent, &h, &mut gates);
                for k in 0..hidden {
                    let input = sigmoid(gates[k]);
                    let forget = sigmoid(gates[hidden + k]);
                    let cell = tanh(gates[2 * hidden + k]);
                    let output = sigmoid(gates[3 * hidden + k]);
                    c[k] = forget * c[k] + input * cell;
                    h[k] = output * tanh(c[k]);
                }
                out.slice_mut(s![b, t, ..]).as_slice_mut().expect("contiguous").copy_from_slice(&h);
            }
        }
        out
    }
}

/// `out[j] += rows[j] · x` for each row of `rows` (`out.len()` rows of `x.len()`, a multiple of 16), with
/// AVX2 and FMA where the CPU has them.
fn matvec(rows: &[f32], x: &[f32], out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has the features `matvec_fma` is compiled for (checked just above).
        unsafe { matvec_fma(rows, x, out) };
        return;
    }
    matvec_rows(rows, x, out, |w, v, acc| acc + w * v);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn matvec_fma(rows: &[f32], x: &[f32], out: &mut [f32]) {
    matvec_rows(rows, x, out, f32::mul_add);
}

/// Four rows at a time, 16 lanes each: 64 independent sums, so the multiply-adds are not waiting on one
/// another, and each value of `x` is loaded once per four rows.
#[inline(always)]
fn matvec_rows(rows: &[f32], x: &[f32], out: &mut [f32], fma: impl Fn(f32, f32, f32) -> f32) {
    let n = x.len();
    for (block, out) in rows.chunks_exact(4 * n).zip(out.chunks_exact_mut(4)) {
        let mut lanes = [[0.0f32; 16]; 4];
        for (at, v) in x.chunks_exact(16).enumerate() {
            for (r, sums) in lanes.iter_mut().enumerate() {
                let w = &block[r * n + at * 16..r * n + at * 16 + 16];
                for i in 0..16 {
                    sums[i] = fma(w[i], v[i], sums[i]);
                }
            }
        }
        for (out, sums) in out.iter_mut().zip(&lanes) {
            *out += sums.iter().sum::<f32>();
        }
    }
}

/// tanh by Eigen's rational approximation (`generic_fast_tanh_float`: within a few units in the last
/// place of `f32::tanh`), which the compiler vectorizes; libm's `tanhf` and `expf` took a quarter of the
/// encoder's time.
#[inline(always)]
fn tanh(x: f32) -> f32 {
    const CLAMP: f32 = 7.998_811_7;
    let x = x.clamp(-CLAMP, CLAMP);
    if x.abs() < 0.0004 {
        return x;
    }
    let x2 = x * x;
    let mut p = -2.760_768_5e-16f32;
    p = p * x2 + 2.000_187_9e-13;
    p = p * x2 - 8.604_671_5e-11;
    p = p * x2 + 5.122_297e-8;
    p = p * x2 + 1.485_722_4e-5;
    p = p * x2 + 6.372_619_3e-4;
    p = p * x2 + 4.893_524_6e-3;
    p *= x;
    let mut q = 1.198_258_4e-6f32;
    q = q * x2 + 1.185_347_1e-4;
    q = q * x2 + 2.268_434_6e-3;
    q = q * x2 + 4.893_525_2e-3;
    p / q
}

#[inline(always)]
fn sigmoid(x: f32) -> f32 {
    0.5 + 0.5 * tanh(0.5 * x)
}
