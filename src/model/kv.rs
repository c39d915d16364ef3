//! The KV cache: per layer, K (rotated) and V for positions `0..capacity`, and the number of
//! positions written so far. Sized from the context the application asks for, not from the
//! model's trained maximum; a write past the capacity is [`ModelError::ContextFull`], checked
//! before anything is recorded.
//!
//! Two kinds ([`KvKind`]):
//! * `F16`: `[capacity, kv_heads, head_dim]` f16 per layer and tensor (what the attention
//!   kernels read directly; 2 bytes per element).
//! * `TurboQuant`: 4-bit TurboQuant codes plus one f32 norm per vector
//!   ([`crate::kernels::turboquant`]; head_dim a power of two in 64..=512), about 3.8x smaller
//!   than f16 at head_dim 128. Decode attends over the codes directly; a prefill chunk
//!   dequantises positions `0..end` into two f32 scratch tensors and runs the prefill kernel on
//!   them (so prefill sees exactly what later decode steps see).

use super::config::Config;
use super::error::{ModelError, Result};
use crate::buffer::GpuBuffer;
use crate::context::Context;
use crate::kernels::turboquant::{self as tq, CacheKind, TqAttnWorkspace, TqCache, TqConfig};
use half::f16;

/// How K and V are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvKind {
    F16,
    TurboQuant,
}

impl KvKind {
    /// Parse `f16` or `turboquant`.
    pub fn parse(s: &str) -> Option<KvKind> {
        match s {
            "f16" => Some(KvKind::F16),
            "turboquant" | "tq" => Some(KvKind::TurboQuant),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            KvKind::F16 => "f16",
            KvKind::TurboQuant => "turboquant",
        }
    }
}

/// One layer's K and V.
pub enum LayerKv {
    F16 { k: GpuBuffer<f16>, v: GpuBuffer<f16> },
    Tq { k: Box<TqCache>, v: Box<TqCache> },
}

/// The TurboQuant cache's work buffers, shared by all layers.
pub struct TqScratch {
    pub workspace: TqAttnWorkspace,
    /// Dequantised K and V `[capacity, kv_heads, head_dim]` f32 for prefill chunks.
    pub k: GpuBuffer<f32>,
    pub v: GpuBuffer<f32>,
}

/// A model's KV cache.
pub struct KvCache {
    kind: KvKind,
    capacity: usize,
    pos: usize,
    bytes: u64,
    pub(crate) layers: Vec<LayerKv>,
    pub(crate) tq: Option<TqScratch>,
}

fn elems(capacity: usize, cfg: &Config) -> Result<usize> {
    capacity.checked_mul(cfg.kv_dim()).ok_or_else(|| ModelError::Argument(format!("a cache of {capacity} positions overflows")))
}

impl KvCache {
    /// A cache of `capacity` positions for `cfg`'s layers.
    pub fn new(ctx: &Context, cfg: &Config, kind: KvKind, capacity: usize) -> Result<KvCache> {
        if capacity == 0 {
            return Err(ModelError::Argument("context of 0 tokens".into()));
        }
        Self::build(ctx, cfg, kind, capacity).map_err(|e| match e {
            // A device limit hit by the cache's buffers: name the context that sized them (the
            // buffers themselves have no names a user knows).
            ModelError::Gpu(crate::Error::BindingTooLarge { .. } | crate::Error::Limit(_) | crate::Error::Argument(_) | crate::Error::Shape(_) | crate::Error::Device(_)) => {
                let l = &ctx.caps().limits;
                ModelError::Argument(format!(
                    "context of {capacity} tokens: its {} KV cache needs {} values per layer and tensor, over this device's buffer limits ({} bytes per buffer, {} per binding)",
                    kind.name(),
                    capacity.saturating_mul(cfg.kv_dim()),
                    l.max_buffer_size,
                    l.max_storage_buffer_binding_size
                ))
            }
            e => e,
        })
    }

    fn build(ctx: &Context, cfg: &Config, kind: KvKind, capacity: usize) -> Result<KvCache> {
        let n = elems(capacity, cfg)?;
        let mut layers = Vec::with_capacity(cfg.layers);
        let mut bytes = 0u64;
        let mut tq_scratch = None;
        for l in 0..cfg.layers {
            match kind {
                KvKind::F16 => {
                    layers.push(LayerKv::F16 { k: ctx.alloc(n)?, v: ctx.alloc(n)? });
                    bytes += 4 * n as u64;
                }
                KvKind::TurboQuant => {
                    let c = |seed: u64| TqConfig { kv_heads: cfg.kv_heads, head_dim: cfg.head_dim, capacity, kind: CacheKind::Global, sign_seed: Some(seed) };
                    let (kc, vc) = (c(0x7_0000 + 2 * l as u64), c(0x7_0001 + 2 * l as u64));
                    bytes += kc.bytes() + vc.bytes();
                    if tq_scratch.is_none() {
                        let workspace = TqAttnWorkspace::new(ctx, cfg.heads, &kc)?;
                        tq_scratch = Some(TqScratch { workspace, k: ctx.alloc(n)?, v: ctx.alloc(n)? });
                    }
                    layers.push(LayerKv::Tq { k: Box::new(TqCache::new(ctx, kc)?), v: Box::new(TqCache::new(ctx, vc)?) });
                }
            }
        }
        if let Some(s) = &tq_scratch {
            bytes += s.workspace.bytes() + 8 * n as u64;
        }
        Ok(KvCache { kind, capacity, pos: 0, bytes, layers, tq: tq_scratch })
    }

    pub fn kind(&self) -> KvKind {
        self.kind
    }
    /// Positions the cache holds at most.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
    /// Positions written so far (the next token goes to this position).
    pub fn pos(&self) -> usize {
        self.pos
    }
    /// GPU bytes of the cache (and, for TurboQuant, its work buffers).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
    /// Positions still free.
    pub fn remaining(&self) -> usize {
        self.capacity - self.pos
    }

    /// Check that `tokens` more positions fit; returns the first one.
    pub fn check_room(&self, tokens: usize) -> Result<usize> {
        match self.pos.checked_add(tokens) {
            Some(end) if end <= self.capacity => Ok(self.pos),
            _ => Err(ModelError::ContextFull { needed: self.pos.saturating_add(tokens), capacity: self.capacity }),
        }
    }

    /// Mark `tokens` more positions written (after the step that wrote them ran).
    pub(crate) fn advance(&mut self, tokens: usize) -> Result<()> {
        self.check_room(tokens)?;
        self.pos += tokens;
        Ok(())
    }

    /// Forget positions `pos..` (the next write goes to `pos`).
    pub fn truncate(&mut self, pos: usize) {
        self.pos = self.pos.min(pos);
    }

    /// Forget everything.
    pub fn clear(&mut self) {
        self.pos = 0;
    }
}

/// TurboQuant cache sizing check ahead of allocation (head dim a power of two 64..=512).
pub fn check_kind(cfg: &Config, kind: KvKind) -> Result<()> {
    if kind == KvKind::TurboQuant {
        tq::check_dim(cfg.head_dim).map_err(|e| ModelError::Argument(format!("TurboQuant KV cache: {e}")))?;
    }
    Ok(())
}
