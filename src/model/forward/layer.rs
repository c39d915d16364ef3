//! Recording one layer of the forward pass (and the final norm and LM head) into a batch: the
//! norms (fused with the int8 quantisation in a decode step), the q/k/v projections (views or a
//! split), attention over the f16 or TurboQuant cache, the output projection and the FFN; in a
//! decode step of a model with post-norms, each post-norm folded into the RMSNorm after it.

use super::*;
use crate::kernels::rope::Elem;
use crate::model::arch::Glu;

/// Views of the first row of a session's `qkv` buffer: q, k, v, and each run of them.
pub(super) struct QkvViews {
    q: GpuBuffer<f32>,
    k: GpuBuffer<f32>,
    v: GpuBuffer<f32>,
    runs: Vec<(usize, usize, GpuBuffer<f32>)>,
}

impl QkvViews {
    pub(super) fn new(ctx: &Context, qkv: &GpuBuffer<f32>, qd: usize, kvd: usize) -> Result<Option<QkvViews>> {
        let ends = [0, qd, qd + kvd, qd + 2 * kvd];
        if !ends[..3].iter().all(|&e| qkv.view_aligned(ctx, e)) {
            return Ok(None);
        }
        let mut runs = Vec::with_capacity(6);
        for i in 0..3 {
            for j in i + 1..4 {
                runs.push((ends[i], ends[j], qkv.view(ctx, ends[i], ends[j] - ends[i])?));
            }
        }
        Ok(Some(QkvViews { q: qkv.view(ctx, 0, qd)?, k: qkv.view(ctx, qd, kvd)?, v: qkv.view(ctx, qd + kvd, kvd)?, runs }))
    }

    /// The view of rows `start..end`.
    fn run(&self, start: usize, end: usize) -> Result<&GpuBuffer<f32>> {
        self.runs.iter().find(|r| r.0 == start && r.1 == end).map(|r| &r.2).ok_or_else(|| ModelError::Argument(format!("q/k/v rows {start}..{end} are not a run of q, k, v")))
    }
}

/// Whether one of `ws` has an integer dot (reads int8 activations in a decode step).
fn int_dot<'a>(ws: impl IntoIterator<Item = &'a mm::WeightMatrix>) -> bool {
    ws.into_iter().any(|w| has_integer_dot(w.format()))
}

/// A decode step's post-norm folded into the RMSNorm after it ([`q8::post_norm`]): the residual
/// it reads and the one it writes, the next norm's weight, and whether a matrix reading that
/// norm's output has an integer dot (then the fold quantises it too).
struct Fold<'a> {
    x: &'a GpuBuffer<f32>,
    x_out: &'a GpuBuffer<f32>,
    norm: &'a GpuBuffer<f32>,
    wanted: bool,
}

impl Session {
    /// The final norm and the LM head of `m` rows (`all`: every row; else the last). `folded`: a
    /// decode step whose last post-norm wrote the final norm's output already.
    pub(super) fn record_head(&self, b: &mut Batch, model: &Model, m: usize, all: bool, folded: bool) -> Result<()> {
        let (c, w, s) = (&model.config, &model.weights, &self.s);
        if all {
            elementwise::rmsnorm(b, &s.x, &w.output_norm, &s.xn, m, c.hidden, c.rms_eps)?;
            mm::matmul(b, &w.lm_head, &s.xn, &s.logits, m)?;
        } else if folded {
            Self::gemv(b, &w.lm_head, &s.xn, self.fused_q8(1, int_dot([&w.lm_head])), &s.logits, Epilogue::Store)?;
        } else {
            let src = if m > 1 {
                ops::copy_row(b, &s.x, m - 1, c.hidden, &s.last)?;
                &s.last
            } else {
                &s.x
            };
            let xq = self.norm(b, src, &w.output_norm, 1, c, int_dot([&w.lm_head]))?;
            Self::gemv(b, &w.lm_head, &s.xn, xq, &s.logits, Epilogue::Store)?;
        }
        if let Some(cap) = c.final_softcap {
            elementwise::softcap_inplace(b, &s.logits, if all { m } else { 1 } * c.vocab, cap)?;
        }
        Ok(())
    }

    /// In a decode step (`m == 1`) or a prefill chunk of up to 16 tokens (`m` rows, the
    /// slot's rows) with int8 activations: quantise the `m` rows of `x` into slot `slot` when
    /// `wanted` (one of the matrices reading it has an integer dot), and return the slot.
    /// `None`: every GEMV / GEMM reads f32 `x`.
    fn quantised(&self, b: &mut Batch, x: &GpuBuffer<f32>, slot: usize, m: usize, wanted: bool) -> Result<Option<&Q8Activations>> {
        let xq = self.q8_slot(slot, m, wanted);
        if let Some(xq) = xq {
            q8::quantize_rows(b, x, xq, m)?;
        }
        Ok(xq)
    }

    /// The slot [`Self::quantised`] quantises into (nothing recorded).
    fn q8_slot(&self, slot: usize, m: usize, wanted: bool) -> Option<&Q8Activations> {
        let pool = if m == 1 { &self.s.q8 } else { &self.s.q8_rows };
        pool[slot].as_ref().filter(|xq| wanted && m <= xq.rows() && xq.has_q4k())
    }

    /// `y = x W^T` for the `m > 1` rows of a prefill chunk: the int8 GEMM of a few rows where
    /// `xq` holds them and `w` has an integer dot, else the f32 GEMM (in two passes where the
    /// session has their work buffers and the two-pass path applies).
    fn matmul_rows(&self, b: &mut Batch, w: &mm::WeightMatrix, x: &GpuBuffer<f32>, xq: Option<&Q8Activations>, y: &GpuBuffer<f32>, m: usize) -> Result<()> {
        match (xq, &self.s.gemm) {
            (Some(xq), _) if has_integer_dot(w.format()) && m <= xq.rows() => Ok(mm::gemm_q8(b, w, xq, y, m)?),
            (_, Some(scratch)) if m > 1 => Ok(mm::gemm_staged(b, w, x, y, m, scratch)?),
            _ => Ok(mm::matmul(b, w, x, y, m)?),
        }
    }

    /// `y (op)= x W^T` for one decode-step projection: int8 activations where `xq` holds them
    /// and `w` has an integer dot, else f32 `x`.
    fn gemv(b: &mut Batch, w: &mm::WeightMatrix, x: &GpuBuffer<f32>, xq: Option<&Q8Activations>, y: &GpuBuffer<f32>, epi: Epilogue) -> Result<()> {
        let input = match xq {
            Some(xq) if has_integer_dot(w.format()) => GemvInput::Q8(xq),
            _ => GemvInput::F32(x),
        };
        Ok(mm::gemv_with(b, w, input, y, epi)?)
    }

    /// The int8 activations a decode step's RMSNorm (`m == 1`) quantises its output into in its
    /// own dispatch: where `wanted` (a matrix reading the output has an integer dot) and
    /// `fused_norm` is on.
    fn fused_q8(&self, m: usize, wanted: bool) -> Option<&Q8Activations> {
        self.s.q8[0].as_ref().filter(|xq| self.opts.fused_norm && wanted && m == 1 && xq.has_q4k())
    }

    /// `xn = rmsnorm(src) * weight` (`m` rows of `hidden`), and with int8 activations when
    /// `wanted` (a matrix reading `xn` has an integer dot), its quantisation (returned): in a
    /// decode step one dispatch ([`q8::rmsnorm_quantize`]) unless `fused_norm` is off; in a
    /// prefill chunk of up to 16 tokens the norm, then the quantisation of its rows.
    fn norm(&self, b: &mut Batch, src: &GpuBuffer<f32>, weight: &GpuBuffer<f32>, m: usize, c: &Config, wanted: bool) -> Result<Option<&Q8Activations>> {
        let s = &self.s;
        match self.fused_q8(m, wanted) {
            Some(xq) => {
                q8::rmsnorm_quantize(b, src, weight, c.rms_eps, &s.xn, xq)?;
                Ok(Some(xq))
            }
            None => {
                elementwise::rmsnorm(b, src, weight, &s.xn, m, c.hidden, c.rms_eps)?;
                self.quantised(b, &s.xn, 0, m, wanted)
            }
        }
    }

    /// `x += a W^T` (the residual add after a projection): fused into the GEMV in a decode step.
    /// With a post-norm weight (Gemma): `x += rmsnorm(a W^T) * post` (through `tmp`); with a
    /// [`Fold`] as well (a decode step), `fold.x_out = fold.x + rmsnorm(a W^T) * post` and the
    /// next RMSNorm into `xn` (and its int8 activations) in the same dispatch. `a_q8`: `a`'s
    /// int8 activations where they are already written (by the decode attention's merge);
    /// else they are quantised into slot `slot` where wanted.
    #[allow(clippy::too_many_arguments)]
    fn project_add(
        &self,
        b: &mut Batch,
        a: &GpuBuffer<f32>,
        slot: usize,
        a_q8: Option<&Q8Activations>,
        m: usize,
        w: &mm::WeightMatrix,
        post: Option<(&GpuBuffer<f32>, f32)>,
        fold: Option<Fold>,
    ) -> Result<()> {
        let s = &self.s;
        let xq = match a_q8 {
            Some(xq) => Some(xq),
            None => self.quantised(b, a, slot, m, has_integer_dot(w.format()))?,
        };
        if let Some((weight, eps)) = post {
            if m == 1 {
                Self::gemv(b, w, a, xq, &s.tmp, Epilogue::Store)?;
            } else {
                self.matmul_rows(b, w, a, xq, &s.tmp, m)?;
            }
            return match fold {
                Some(f) => {
                    let p = q8::PostNorm { x: f.x, a: &s.tmp, post: weight, x_out: f.x_out, norm: f.norm, xn: &s.xn, k: w.n(), eps };
                    Ok(q8::post_norm(b, &p, self.fused_q8(m, f.wanted))?)
                }
                None => Ok(elementwise::rmsnorm_add(b, &s.tmp, weight, &s.x, m, w.n(), eps)?),
            };
        }
        if m == 1 {
            Self::gemv(b, w, a, xq, &s.x, Epilogue::Accumulate)
        } else {
            self.matmul_rows(b, w, a, xq, &s.tmp, m)?;
            Ok(elementwise::add_inplace(b, &s.x, &s.tmp, m * w.n())?)
        }
    }

    /// `gate = act(xn W_gate^T) * (xn W_up^T)` (`xq`: `xn` as int8, in a decode step).
    fn ffn_in(&self, b: &mut Batch, f: &FfnIn, m: usize, ffn: usize, xq: Option<&Q8Activations>, act: elementwise::Activation) -> Result<()> {
        let s = &self.s;
        match f {
            FfnIn::GateUp(w) if m == 1 => {
                let epi = match act {
                    elementwise::Activation::Silu => Epilogue::SwiGlu,
                    elementwise::Activation::GeluTanh => Epilogue::GeGlu,
                };
                Self::gemv(b, w, &s.xn, xq, &s.gate, epi)
            }
            FfnIn::GateUp(w) => {
                self.matmul_rows(b, w, &s.xn, xq, &s.up, m)?;
                Ok(ops::glu_pairs(b, act, &s.up, m * ffn, &s.gate)?)
            }
            FfnIn::Separate { gate, up } => {
                for (w, y) in [(gate, &s.gate), (up, &s.up)] {
                    if m == 1 {
                        Self::gemv(b, w, &s.xn, xq, y, Epilogue::Store)?;
                    } else {
                        self.matmul_rows(b, w, &s.xn, xq, y, m)?;
                    }
                }
                Ok(elementwise::gate_inplace(b, act, &s.gate, &s.up, m * ffn)?)
            }
        }
    }

    /// The q, k and v projections of `xn` (`m` rows), biases added: in a decode step with
    /// views, each matrix of [`crate::model::weights::Layer::qkv`] writes its rows of `qkv` and q, k, v
    /// are views of it; otherwise each writes `qkv` and its columns are split into `q`, `k`, `v`.
    fn project_qkv(
        &self,
        b: &mut Batch,
        w: &crate::model::weights::Layer,
        m: usize,
        qd: usize,
        kvd: usize,
        xq: Option<&Q8Activations>,
    ) -> Result<(&GpuBuffer<f32>, &GpuBuffer<f32>, &GpuBuffer<f32>)> {
        let s = &self.s;
        let n3 = qd + 2 * kvd;
        match &s.qkv_views {
            Some(views) if m == 1 => {
                let mut r0 = 0;
                for mat in &w.qkv {
                    Self::gemv(b, mat, &s.xn, xq, views.run(r0, r0 + mat.n())?, Epilogue::Store)?;
                    r0 += mat.n();
                }
                if let Some(bias) = &w.qkv_bias {
                    ops::bias_add(b, &s.qkv, bias, 1, n3)?;
                }
                Ok((&views.q, &views.k, &views.v))
            }
            _ => {
                let out = ops::QkvOut { q: &s.q, k: &s.k, v: &s.v, qd, kvd };
                let mut r0 = 0;
                for mat in &w.qkv {
                    if m == 1 {
                        Self::gemv(b, mat, &s.xn, xq, &s.qkv, Epilogue::Store)?;
                    } else {
                        self.matmul_rows(b, mat, &s.xn, xq, &s.qkv, m)?;
                    }
                    ops::split_qkv(b, &s.qkv, m, r0, mat.n(), w.qkv_bias.as_ref(), &out)?;
                    r0 += mat.n();
                }
                Ok((&s.q, &s.k, &s.v))
            }
        }
    }

    /// Causal attention of a prefill chunk (`m` queries at `pos0..`) over caches of rotated keys
    /// holding positions `0..pos0 + m`, into `attn` (layer `l`'s window and RoPE table).
    #[allow(clippy::too_many_arguments)]
    fn prefill_attention<KV: Elem>(&self, b: &mut Batch, c: &Config, l: usize, m: usize, pos0: usize, q: &GpuBuffer<f32>, k: &GpuBuffer<KV>, v: &GpuBuffer<KV>) -> Result<()> {
        let p = Prefill {
            shape: AttnShape::new(c.heads, c.kv_heads, c.head_dim),
            tokens: m,
            offset: pos0,
            kv_len: pos0 + m,
            causal: true,
            k_rotated: true,
            layout: c.layout,
            scale: c.attn_scale,
            window: c.window.and_then(|w| w.of_layer(l)),
            softcap: c.attn_softcap,
            q,
            k,
            v,
            table: self.table_of(c, l),
            out: &self.s.attn,
        };
        Ok(attention::prefill(b, &p)?)
    }

    pub(super) fn record_layer(&self, b: &mut Batch, model: &Model, l: usize, m: usize, pos0: usize, decode: bool) -> Result<()> {
        let (c, s) = (&model.config, &self.s);
        let w = &model.weights.layers[l];
        let (qd, kvd) = (c.q_dim(), c.kv_dim());
        let shape = AttnShape::new(c.heads, c.kv_heads, c.head_dim);
        // A decode step of a model with post-norms folds each into the next RMSNorm (the
        // residual alternates between `x` and `x2`, back in `x` after each layer); the first
        // layer's attention norm is the step's only one of its own.
        let fold = match (&s.x2, &w.post_norms) {
            (Some(x2), Some(_)) if decode => Some(x2),
            (Some(_), None) if decode => return Err(ModelError::Argument("a session folding post-norms, a layer without them".into())),
            _ => None,
        };
        let xq = match fold {
            Some(_) if l > 0 => self.fused_q8(m, int_dot(&w.qkv)),
            _ => self.norm(b, &s.x, &w.attn_norm, m, c, int_dot(&w.qkv))?,
        };
        let (qn, kn, vn) = self.project_qkv(b, w, m, qd, kvd, xq)?;
        let (qn, kn) = match (&w.qk_norm, &s.qk) {
            (Some([wq, wk]), Some([q, k])) => {
                let rows_q = elementwise::NormRows { x: qn, w: wq, y: q, rows: m * c.heads };
                let rows_k = elementwise::NormRows { x: kn, w: wk, y: k, rows: m * c.kv_heads };
                elementwise::rmsnorm_qk(b, rows_q, rows_k, c.head_dim, c.rms_eps)?;
                (q, k)
            }
            (None, _) => (qn, kn),
            (Some(_), None) => return Err(ModelError::Argument("q/k norms without their work buffers".into())),
        };
        let cap = self.kv.capacity();
        let (window, table) = (c.window.and_then(|w| w.of_layer(l)), self.table_of(c, l));
        // `attn_q8`: the attention output's int8 activations where they are written with it (a
        // decode step's merge pass writes them, attention::decode_q8, where the output projection
        // reads them); else the projection quantises the output itself.
        let attn_q8 = match &self.kv.layers[l] {
            LayerKv::F16 { k, v } if decode => {
                let step = Decode {
                    shape,
                    pos: pos0,
                    layout: c.layout,
                    scale: c.attn_scale,
                    window,
                    softcap: c.attn_softcap,
                    q: qn,
                    k_new: kn,
                    v_new: vn,
                    k_cache: k,
                    v_cache: v,
                    capacity: cap,
                    table,
                    scratch: &s.decode,
                    out: &s.attn,
                };
                let xq = self.q8_slot(1, m, has_integer_dot(w.wo.format()));
                match xq {
                    Some(xq) => attention::decode_q8(b, &step, xq)?,
                    None => attention::decode(b, &step)?,
                }
                xq
            }
            LayerKv::F16 { k, v } => {
                let store = ops::KvStore { k_new: kn, v_new: vn, tokens: m, kv_heads: c.kv_heads, pos0, layout: c.layout, table, k_cache: k, v_cache: v, capacity: cap };
                ops::kv_store(b, &store)?;
                self.prefill_attention(b, c, l, m, pos0, qn, k, v)?;
                None
            }
            LayerKv::Tq { k, v } => {
                let scratch = self.kv.tq.as_ref().ok_or_else(|| ModelError::Argument("TurboQuant cache without its scratch".into()))?;
                let at = Positions::Start(pos0 as u32);
                // A decode step's q and k side by side in the projection's output (no q/k norms
                // moved them): one dispatch rotates both.
                let qk = match &s.qkv_views {
                    Some(views) if decode && m == 1 && w.qk_norm.is_none() => Some(views.run(0, qd + kvd)?),
                    _ => None,
                };
                match qk {
                    Some(qk) => rope::apply(b, qk, 1, c.heads + c.kv_heads, c.layout, table, at)?,
                    None => rope::apply(b, kn, m, c.kv_heads, c.layout, table, at)?,
                }
                tq::quantize_kv(b, kn, vn, m, pos0, k, v)?;
                if decode {
                    if qk.is_none() {
                        rope::apply(b, qn, 1, c.heads, c.layout, table, at)?;
                    }
                    let scale = c.attn_scale.unwrap_or(1.0 / (c.head_dim as f32).sqrt());
                    let a = tq::DecodeAttention { heads: c.heads, kv_len: pos0 + 1, window, scale };
                    tq::decode_attention(b, &scratch.workspace, qn, k, v, &s.attn, &a)?;
                } else {
                    tq::dequantize(b, k, 0, pos0 + m, &scratch.k)?;
                    tq::dequantize(b, v, 0, pos0 + m, &scratch.v)?;
                    self.prefill_attention(b, c, l, m, pos0, qn, &scratch.k, &scratch.v)?;
                }
                None
            }
        };
        let post = |i: usize| w.post_norms.as_ref().map(|p| (&p[i], c.rms_eps));
        let ffn_wanted = int_dot(w.ffn_in.matrices());
        let fold_attn = fold.map(|x2| Fold { x: &s.x, x_out: x2, norm: &w.ffn_norm, wanted: ffn_wanted });
        self.project_add(b, &s.attn, 1, attn_q8, m, &w.wo, post(0), fold_attn)?;
        let xq = match fold {
            Some(_) => self.fused_q8(m, ffn_wanted),
            None => self.norm(b, &s.x, &w.ffn_norm, m, c, ffn_wanted)?,
        };
        let act = match c.glu {
            Glu::Silu => elementwise::Activation::Silu,
            Glu::GeluTanh => elementwise::Activation::GeluTanh,
        };
        self.ffn_in(b, &w.ffn_in, m, c.ffn, xq, act)?;
        // The next norm: the next layer's attention norm, or after the last layer the final norm.
        let weights = &model.weights;
        let next = match weights.layers.get(l + 1) {
            Some(n) => (&n.attn_norm, int_dot(&n.qkv)),
            None => (&weights.output_norm, int_dot([&weights.lm_head])),
        };
        let fold_ffn = fold.map(|x2| Fold { x: x2, x_out: &s.x, norm: next.0, wanted: next.1 });
        self.project_add(b, &s.gate, 2, None, m, &w.w_down, post(1), fold_ffn)?;
        Ok(())
    }
}
