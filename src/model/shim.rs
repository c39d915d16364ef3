//! Stand-in for `crate::kernels::matmul` (the weight-matrix family) until it lands: the same
//! API, weights dequantised to f32 on the CPU at upload and a naive f32 GEMM. Only for
//! developing the forward pass; replaced by the family's `WeightMatrix`.

use crate::batch::Batch;
use crate::buffer::GpuBuffer;
use crate::caps::{Caps, KernelInfo, Variant};
use crate::context::Context;
use crate::error::{ensure, Error, Result};
use crate::formats::gguf::{GgmlType, GgufFile};
use crate::formats::FormatError;
use crate::pipeline::{PipelineDesc, PipelineKey, ShaderSource, StorageBinding};
use bytemuck::{Pod, Zeroable};
use half::f16;

pub const GEMM: KernelInfo = KernelInfo { name: "shim_gemm", variants: &[Variant::Portable], extra: None };

/// CPU dequantisation of F32 / F16 / BF16 / Q8_0 / Q4_K bytes.
pub fn dequantize(ty: GgmlType, bytes: &[u8], out: &mut [f32]) -> std::result::Result<(), FormatError> {
    let bad = || FormatError::NotBlockMultiple { what: "dequantize", len: bytes.len() as u64, block: 1 };
    match ty {
        GgmlType::F32 => {
            if bytes.len() != out.len() * 4 {
                return Err(bad());
            }
            for (o, c) in out.iter_mut().zip(bytes.chunks_exact(4)) {
                *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
        }
        GgmlType::F16 => {
            if bytes.len() != out.len() * 2 {
                return Err(bad());
            }
            for (o, c) in out.iter_mut().zip(bytes.chunks_exact(2)) {
                *o = f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32();
            }
        }
        GgmlType::BF16 => {
            if bytes.len() != out.len() * 2 {
                return Err(bad());
            }
            for (o, c) in out.iter_mut().zip(bytes.chunks_exact(2)) {
                *o = f32::from_bits((u16::from_le_bytes([c[0], c[1]]) as u32) << 16);
            }
        }
        GgmlType::Q8_0 => {
            if bytes.len() != out.len() / 32 * 34 || out.len() % 32 != 0 {
                return Err(bad());
            }
            for (o, c) in out.chunks_exact_mut(32).zip(bytes.chunks_exact(34)) {
                let d = f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32();
                for (i, v) in o.iter_mut().enumerate() {
                    *v = d * (c[2 + i] as i8) as f32;
                }
            }
        }
        GgmlType::Q4_K => {
            use crate::formats::q4k::{dequantize_row, BlockQ4K, BLOCK_BYTES};
            if bytes.len() != out.len() / 256 * BLOCK_BYTES || out.len() % 256 != 0 {
                return Err(bad());
            }
            let blocks: Vec<BlockQ4K> = bytes.chunks_exact(BLOCK_BYTES).map(|c| BlockQ4K::from_le_bytes(c.try_into().expect("block"))).collect();
            out.copy_from_slice(&dequantize_row(&blocks));
        }
        GgmlType::Q4_0 => crate::formats::q4_0::dequantize(bytes, out)?,
        GgmlType::Q4_1 => crate::formats::q4_1::dequantize(bytes, out)?,
        GgmlType::Q5_0 => crate::formats::q5_0::dequantize(bytes, out)?,
        GgmlType::Q5_1 => crate::formats::q5_1::dequantize(bytes, out)?,
        GgmlType::Q2_K => crate::formats::q2_k::dequantize(bytes, out)?,
        GgmlType::Q3_K => crate::formats::q3_k::dequantize(bytes, out)?,
        GgmlType::Q5_K => crate::formats::q5_k::dequantize(bytes, out)?,
        GgmlType::Q6_K => crate::formats::q6_k::dequantize(bytes, out)?,
        other => return Err(FormatError::UnknownTensorType { name: format!("{other:?} (shim)"), id: other.id() }),
    }
    Ok(())
}

/// A weight matrix `[n, k]` (row r = output r), here as f32 on the GPU.
pub struct WeightMatrix {
    n: usize,
    k: usize,
    ty: GgmlType,
    w: GpuBuffer<f32>,
}

impl WeightMatrix {
    pub fn from_gguf(ctx: &Context, file: &GgufFile, name: &str) -> Result<WeightMatrix> {
        let t = file.tensor(name).ok_or_else(|| Error::Format(format!("missing tensor {name}")))?;
        ensure(t.dims.len() == 2, || Error::Shape(format!("{name}: {} dims", t.dims.len())))?;
        let bytes = file.tensor_data(t).map_err(|e| Error::Format(e.to_string()))?;
        Self::upload(ctx, t.ggml_type, t.dims[1] as usize, t.dims[0] as usize, bytes)
    }

    pub fn upload(ctx: &Context, ty: GgmlType, n: usize, k: usize, bytes: &[u8]) -> Result<WeightMatrix> {
        let mut w = vec![0f32; n * k];
        dequantize(ty, bytes, &mut w).map_err(|e| Error::Format(e.to_string()))?;
        Ok(WeightMatrix { n, k, ty, w: ctx.upload(&w)? })
    }
    pub fn n(&self) -> usize {
        self.n
    }
    pub fn k(&self) -> usize {
        self.k
    }
    pub fn ggml_type(&self) -> GgmlType {
        self.ty
    }
    pub fn bytes(&self) -> u64 {
        self.w.bytes_len()
    }
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct P {
    n: u32,
    k: u32,
    m: u32,
    _p: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct ShimGemm;

const WGSL: &str = "struct P { n: u32, k: u32, m: u32, _p: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let id = (wid.x + wid.y * nwg.x) * 64u + li;
    if (id >= p.n * p.m) { return; }
    let r = id / p.n;
    let i = id - r * p.n;
    var s = 0.0;
    for (var c = 0u; c < p.k; c++) { s += w[i * p.k + c] * x[r * p.k + c]; }
    y[id] = s;
}
";
const BINDINGS: &[StorageBinding] = &[StorageBinding::read("w", "f32"), StorageBinding::read("x", "f32"), StorageBinding::write("y", "f32")];

impl PipelineKey for ShimGemm {
    fn describe(&self, _caps: &Caps) -> PipelineDesc {
        PipelineDesc { source: ShaderSource::Wgsl(vec![WGSL]), entry: "main", constants: vec![], workgroup_size: [64, 1, 1], params_size: 16, bindings: BINDINGS }
    }
}

/// `y[r, i] = sum_c w[i, c] x[r, c]` for `r < m`.
pub fn matmul(b: &mut Batch, w: &WeightMatrix, x: &GpuBuffer<f32>, y: &GpuBuffer<f32>, m: usize) -> Result<()> {
    let ctx = b.context();
    x.require("x", m * w.k)?;
    y.require("y", m * w.n)?;
    let p = P { n: w.n as u32, k: w.k as u32, m: m as u32, _p: 0 };
    b.dispatch(&ShimGemm, &p, &[w.w.raw(), x.raw(), y.raw()], ctx.grid(((w.n * m) as u64).div_ceil(64))?)
}
