//! Test support for tests/model.rs: small random llama (and Mistral-style llama with a sliding
//! window key, not applied), qwen2, qwen3 and phi3 GGUF files written with the crate's GgufWriter, and an f64 CPU
//! forward pass of the same architecture (the reference the
//! GPU forward pass is compared with on synthetic files; llama.cpp is the reference for the
//! fixtures).

use half::f16;
use wgkernels::formats::gguf::{GgmlType, GgufWriter, MetaValue};
use wgkernels::kernels::rope::PairLayout;

/// Shape and architecture of a synthetic model.
#[derive(Clone, Debug)]
pub struct Spec {
    pub arch: &'static str,
    pub hidden: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub ffn: usize,
    pub layers: usize,
    pub vocab: usize,
    pub theta: f64,
    pub eps: f64,
    /// rope_freqs divisors (llama3-style), if any.
    pub freqs: Option<Vec<f32>>,
    /// Store the matrices as F16 (else F32).
    pub f16: bool,
    /// `{arch}.attention.key_length` / `value_length` (else hidden / heads).
    pub key_length: Option<usize>,
    /// `{arch}.attention.sliding_window`.
    pub window: Option<usize>,
    /// LongRoPE (phi3): short and long per-pair divisors, their original context and the
    /// attention factor.
    pub rope_factors: Option<(Vec<f32>, Vec<f32>, usize, f64)>,
    /// `{arch}.rope.dimension_count` (else the head dim): NeoX pairs `(i, i + r/2)` over the
    /// first r dims of each head.
    pub rope_dims: Option<usize>,
}

impl Spec {
    pub fn llama() -> Spec {
        let freqs = (0..8)
            .map(|i| {
                if i < 3 {
                    1.0
                } else if i < 6 {
                    1.0 + i as f32
                } else {
                    8.0
                }
            })
            .collect();
        Spec {
            arch: "llama",
            hidden: 64,
            heads: 4,
            kv_heads: 2,
            ffn: 96,
            layers: 2,
            vocab: 61,
            theta: 10_000.0,
            eps: 1e-5,
            freqs: Some(freqs),
            f16: false,
            key_length: None,
            window: None,
            rope_factors: None,
            rope_dims: None,
        }
    }
    pub fn qwen2() -> Spec {
        Spec {
            arch: "qwen2",
            hidden: 64,
            heads: 4,
            kv_heads: 1,
            ffn: 80,
            layers: 2,
            vocab: 53,
            theta: 1_000_000.0,
            eps: 1e-6,
            freqs: None,
            f16: true,
            key_length: None,
            window: None,
            rope_factors: None,
            rope_dims: None,
        }
    }
    /// Heads of 32 over a hidden size of 64 (q is twice as wide as the residual stream).
    pub fn qwen3() -> Spec {
        Spec { arch: "qwen3", kv_heads: 2, ffn: 72, vocab: 57, key_length: Some(32), ..Spec::qwen2() }
    }
    /// LongRoPE factors whose original context (8) is below the tests' (16): the long ones apply.
    pub fn phi3() -> Spec {
        let short: Vec<f32> = (0..8).map(|i| 1.0 + 0.25 * i as f32).collect();
        let long: Vec<f32> = (0..8).map(|i| 1.5 + i as f32).collect();
        Spec { arch: "phi3", kv_heads: 2, ffn: 88, vocab: 59, freqs: None, rope_factors: Some((short, long, 8, 1.1902380714238083)), ..Spec::llama() }
    }
    /// phi3 with partial rotary embeddings (8 of 16 head dims, as Phi-4-mini's 96 of 128).
    pub fn phi3_partial() -> Spec {
        let short: Vec<f32> = (0..4).map(|i| 1.0 + 0.5 * i as f32).collect();
        let long: Vec<f32> = (0..4).map(|i| 2.0 + i as f32).collect();
        Spec { rope_dims: Some(8), rope_factors: Some((short, long, 8, 1.1902380714238083)), ..Spec::phi3() }
    }
    /// A Mistral-style llama file: `llama.attention.sliding_window` of 4 positions, which
    /// llama.cpp (and so the runner, and this reference) does not apply to the llama
    /// architecture.
    pub fn mistral() -> Spec {
        Spec { freqs: None, window: Some(4), ..Spec::llama() }
    }
    pub fn head_dim(&self) -> usize {
        self.key_length.unwrap_or(self.hidden / self.heads)
    }
    fn tied(&self) -> bool {
        matches!(self.arch, "qwen2" | "qwen3")
    }
    fn bias(&self) -> bool {
        self.arch == "qwen2"
    }
    fn qk_norm(&self) -> bool {
        self.arch == "qwen3"
    }
    /// Fused attn_qkv and gate/up (phi3).
    fn fused(&self) -> bool {
        self.arch == "phi3"
    }
    fn rotary_dims(&self) -> usize {
        self.rope_dims.unwrap_or(self.head_dim())
    }
    /// The layout the runner's kernels rotate with (a partial NeoX rotary is reordered into
    /// interleaved pairs when loaded).
    pub fn layout(&self) -> PairLayout {
        if self.arch == "llama" || self.rotary_dims() < self.head_dim() {
            PairLayout::Interleaved
        } else {
            PairLayout::HalfSplit
        }
    }
}

/// A matrix `[n, k]` row-major (or a vector when n = 1).
#[derive(Clone)]
pub struct Mat {
    pub n: usize,
    pub k: usize,
    pub w: Vec<f64>,
}

impl Mat {
    fn mv(&self, x: &[f64]) -> Vec<f64> {
        (0..self.n).map(|r| self.w[r * self.k..(r + 1) * self.k].iter().zip(x).map(|(a, b)| a * b).sum()).collect()
    }
}

pub struct RefLayer {
    attn_norm: Vec<f64>,
    wq: Mat,
    wk: Mat,
    wv: Mat,
    bias: Option<[Vec<f64>; 3]>,
    qk_norm: Option<[Vec<f64>; 2]>,
    wo: Mat,
    ffn_norm: Vec<f64>,
    gate: Mat,
    up: Mat,
    down: Mat,
}

/// The synthetic model's weights as the file stores them (rounded to F16 where stored so).
pub struct RefModel {
    pub spec: Spec,
    pub embd: Mat,
    layers: Vec<RefLayer>,
    out_norm: Vec<f64>,
    output: Mat,
}

/// The file writer and the reference weights of a random model.
pub fn build(spec: &Spec, seed: u64) -> (GgufWriter, RefModel) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let (h, d) = (spec.hidden, spec.head_dim());
    let (qd, kvd) = (spec.heads * d, spec.kv_heads * d);
    let a = spec.arch;
    let mut w = GgufWriter::new()
        .metadata("general.architecture", MetaValue::String(a.into()))
        .metadata(format!("{a}.block_count"), MetaValue::U32(spec.layers as u32))
        .metadata(format!("{a}.embedding_length"), MetaValue::U32(h as u32))
        .metadata(format!("{a}.feed_forward_length"), MetaValue::U32(spec.ffn as u32))
        .metadata(format!("{a}.attention.head_count"), MetaValue::U32(spec.heads as u32))
        .metadata(format!("{a}.attention.head_count_kv"), MetaValue::U32(spec.kv_heads as u32))
        .metadata(format!("{a}.attention.layer_norm_rms_epsilon"), MetaValue::F32(spec.eps as f32))
        .metadata(format!("{a}.context_length"), MetaValue::U32(4096))
        .metadata(format!("{a}.rope.freq_base"), MetaValue::F32(spec.theta as f32))
        .metadata(format!("{a}.rope.dimension_count"), MetaValue::U32(spec.rotary_dims() as u32));
    if let Some(d) = spec.key_length {
        w = w.metadata(format!("{a}.attention.key_length"), MetaValue::U32(d as u32)).metadata(format!("{a}.attention.value_length"), MetaValue::U32(d as u32));
    }
    if let Some(win) = spec.window {
        w = w.metadata(format!("{a}.attention.sliding_window"), MetaValue::U32(win as u32));
    }
    let f16_store = spec.f16;
    // A random matrix, rounded as it is stored.
    let gen = |n: usize, k: usize, scale: f64, rng: &mut fastrand::Rng| -> Mat {
        let vals = (0..n * k).map(|_| (2.0 * rng.f64() - 1.0) * scale);
        let w = if f16_store { vals.map(|v| f16::from_f64(v).to_f64()).collect() } else { vals.map(|v| v as f32 as f64).collect() };
        Mat { n, k, w }
    };
    // Matrices of one row length stored as one tensor, rows in order.
    let put = |w: &mut GgufWriter, name: &str, mats: &[&Mat]| {
        let (k, n) = (mats[0].k, mats.iter().map(|m| m.n).sum::<usize>());
        let vals = mats.iter().flat_map(|m| m.w.iter().copied());
        let (bytes, ty) = if f16_store {
            (vals.flat_map(|v| f16::from_f64(v).to_le_bytes()).collect(), GgmlType::F16)
        } else {
            (vals.flat_map(|v| (v as f32).to_le_bytes()).collect(), GgmlType::F32)
        };
        *w = std::mem::take(w).tensor(name, &[k as u64, n as u64], ty, bytes).expect("tensor");
    };
    let fused = spec.fused();
    let mat = |w: &mut GgufWriter, name: &str, n: usize, k: usize, scale: f64, rng: &mut fastrand::Rng| -> Mat {
        let m = gen(n, k, scale, rng);
        if !fused || !(name.contains("attn_q") || name.contains("attn_k") || name.contains("attn_v") || name.contains("ffn_gate") || name.contains("ffn_up")) {
            put(w, name, &[&m]);
        }
        m
    };
    let vecf32 = |w: &mut GgufWriter, name: &str, vals: Vec<f32>| -> Vec<f64> {
        *w = std::mem::take(w).tensor(name, &[vals.len() as u64], GgmlType::F32, bytemuck::cast_slice::<f32, u8>(&vals).to_vec()).expect("tensor");
        vals.iter().map(|&v| v as f64).collect()
    };
    let norm = |rng: &mut fastrand::Rng, n: usize| (0..n).map(|_| 0.8 + 0.4 * rng.f32()).collect::<Vec<f32>>();
    let embd = mat(&mut w, "token_embd.weight", spec.vocab, h, 1.0, &mut rng);
    let mut layers = Vec::new();
    for l in 0..spec.layers {
        let p = |s: &str| format!("blk.{l}.{s}");
        let inv = |k: usize| 1.5 / (k as f64).sqrt();
        let an = norm(&mut rng, h);
        let attn_norm = vecf32(&mut w, &p("attn_norm.weight"), an);
        let wq = mat(&mut w, &p("attn_q.weight"), qd, h, inv(h), &mut rng);
        let wk = mat(&mut w, &p("attn_k.weight"), kvd, h, inv(h), &mut rng);
        let wv = mat(&mut w, &p("attn_v.weight"), kvd, h, inv(h), &mut rng);
        let bias = if spec.bias() {
            let mut bv = |name: &str, n: usize| {
                let v: Vec<f32> = (0..n).map(|_| rng.f32() - 0.5).collect();
                vecf32(&mut w, &p(name), v)
            };
            Some([bv("attn_q.bias", qd), bv("attn_k.bias", kvd), bv("attn_v.bias", kvd)])
        } else {
            None
        };
        if fused {
            put(&mut w, &p("attn_qkv.weight"), &[&wq, &wk, &wv]);
        }
        let qk_norm = if spec.qk_norm() {
            let (qn, kn) = (norm(&mut rng, d), norm(&mut rng, d));
            Some([vecf32(&mut w, &p("attn_q_norm.weight"), qn), vecf32(&mut w, &p("attn_k_norm.weight"), kn)])
        } else {
            None
        };
        let wo = mat(&mut w, &p("attn_output.weight"), h, qd, inv(qd), &mut rng);
        let fnm = norm(&mut rng, h);
        let ffn_norm = vecf32(&mut w, &p("ffn_norm.weight"), fnm);
        let gate = mat(&mut w, &p("ffn_gate.weight"), spec.ffn, h, inv(h), &mut rng);
        let up = mat(&mut w, &p("ffn_up.weight"), spec.ffn, h, inv(h), &mut rng);
        let down = mat(&mut w, &p("ffn_down.weight"), h, spec.ffn, inv(spec.ffn), &mut rng);
        if fused {
            put(&mut w, &p("ffn_up.weight"), &[&gate, &up]);
        }
        layers.push(RefLayer { attn_norm, wq, wk, wv, bias, qk_norm, wo, ffn_norm, gate, up, down });
    }
    let on = norm(&mut rng, h);
    let out_norm = vecf32(&mut w, "output_norm.weight", on);
    let output = if spec.tied() { embd.clone() } else { mat(&mut w, "output.weight", spec.vocab, h, 2.0 / (h as f64).sqrt(), &mut rng) };
    if let Some(f) = &spec.freqs {
        vecf32(&mut w, "rope_freqs.weight", f.clone());
    }
    if let Some((short, long, original, attn)) = &spec.rope_factors {
        vecf32(&mut w, "rope_factors_short.weight", short.clone());
        vecf32(&mut w, "rope_factors_long.weight", long.clone());
        w = w
            .metadata(format!("{a}.rope.scaling.original_context_length"), MetaValue::U32(*original as u32))
            .metadata(format!("{a}.rope.scaling.attn_factor"), MetaValue::F32(*attn as f32));
    }
    (w, RefModel { spec: spec.clone(), embd, layers, out_norm, output })
}

fn rms(x: &[f64], w: &[f64], eps: f64) -> Vec<f64> {
    let inv = 1.0 / (x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64 + eps).sqrt();
    x.iter().zip(w).map(|(v, g)| v * inv * g).collect()
}

impl RefModel {
    fn inv_freq(&self) -> Vec<f64> {
        let r = self.spec.rotary_dims();
        (0..r / 2)
            .map(|i| {
                let f = self.spec.theta.powf(-2.0 * i as f64 / r as f64);
                let long = self.spec.rope_factors.as_ref().map_or(1.0, |r| r.1[i] as f64);
                f / self.spec.freqs.as_ref().map_or(1.0, |v| v[i] as f64) / long
            })
            .collect()
    }

    fn rotate(&self, x: &mut [f64], pos: usize, inv: &[f64]) {
        let d = self.spec.head_dim();
        // LongRoPE's attention factor multiplies cos and sin.
        let att = self.spec.rope_factors.as_ref().map_or(1.0, |r| r.3 as f32 as f64);
        for head in x.chunks_mut(d) {
            for (i, f) in inv.iter().enumerate() {
                let (a, b) = if self.spec.arch == "llama" { (2 * i, 2 * i + 1) } else { (i, i + inv.len()) };
                let ang = pos as f64 * f;
                let (xa, xb) = (head[a], head[b]);
                let (c, sn) = (att * ang.cos(), att * ang.sin());
                head[a] = xa * c - xb * sn;
                head[b] = xb * c + xa * sn;
            }
        }
    }

    /// Logits `[tokens, vocab]` of every position of `tokens`, in f64.
    pub fn forward(&self, tokens: &[u32]) -> Vec<Vec<f64>> {
        let s = &self.spec;
        let (h, d) = (s.hidden, s.head_dim());
        let group = s.heads / s.kv_heads;
        let inv = self.inv_freq();
        let mut xs: Vec<Vec<f64>> = tokens.iter().map(|&t| self.embd.w[t as usize * h..(t as usize + 1) * h].to_vec()).collect();
        for l in &self.layers {
            let mut ks = Vec::new();
            let mut vs = Vec::new();
            let mut qs = Vec::new();
            for (pos, x) in xs.iter().enumerate() {
                let xn = rms(x, &l.attn_norm, s.eps);
                let (mut q, mut k, mut v) = (l.wq.mv(&xn), l.wk.mv(&xn), l.wv.mv(&xn));
                if let Some([bq, bk, bv]) = &l.bias {
                    q.iter_mut().zip(bq).for_each(|(a, b)| *a += b);
                    k.iter_mut().zip(bk).for_each(|(a, b)| *a += b);
                    v.iter_mut().zip(bv).for_each(|(a, b)| *a += b);
                }
                if let Some([qn, kn]) = &l.qk_norm {
                    q = q.chunks(d).flat_map(|hq| rms(hq, qn, s.eps)).collect();
                    k = k.chunks(d).flat_map(|hk| rms(hk, kn, s.eps)).collect();
                }
                self.rotate(&mut q, pos, &inv);
                self.rotate(&mut k, pos, &inv);
                qs.push(q);
                ks.push(k);
                vs.push(v);
            }
            for (pos, x) in xs.iter_mut().enumerate() {
                let mut attn = vec![0.0; s.heads * d];
                for hd in 0..s.heads {
                    let kh = hd / group;
                    let q = &qs[pos][hd * d..(hd + 1) * d];
                    let scores: Vec<f64> = (0..=pos).map(|j| q.iter().zip(&ks[j][kh * d..(kh + 1) * d]).map(|(a, b)| a * b).sum::<f64>() / (d as f64).sqrt()).collect();
                    let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let e: Vec<f64> = scores.iter().map(|v| (v - m).exp()).collect();
                    let z: f64 = e.iter().sum();
                    for (j, p) in e.iter().enumerate() {
                        for i in 0..d {
                            attn[hd * d + i] += p / z * vs[j][kh * d + i];
                        }
                    }
                }
                let o = l.wo.mv(&attn);
                x.iter_mut().zip(&o).for_each(|(a, b)| *a += b);
                let xn = rms(x, &l.ffn_norm, s.eps);
                let (g, u) = (l.gate.mv(&xn), l.up.mv(&xn));
                let act: Vec<f64> = g.iter().zip(&u).map(|(&g, &u)| g / (1.0 + (-g).exp()) * u).collect();
                let dn = l.down.mv(&act);
                x.iter_mut().zip(&dn).for_each(|(a, b)| *a += b);
            }
        }
        xs.iter().map(|x| self.output.mv(&rms(x, &self.out_norm, s.eps))).collect()
    }
}
pub mod fixtures;
