//! The forward pass's weight matrices: [`crate::kernels::matmul::WeightMatrix`] for every type
//! the matmul family runs on the GPU. A type it has no GPU kernel for yet (e.g. Q6_K, which
//! llama.cpp's Q4_K_M files use for `output.weight` and some `ffn_down` / `attn_v`) is
//! dequantised on the CPU at load by the crate's dequantisers and uploaded as F32: correct but 4
//! bytes per weight, so [`load`] reports it (`generate` prints the count) and peak host memory for
//! that tensor is its f32 copy.

use crate::context::Context;
use crate::error::{Error, Result};
use crate::formats::gguf::{GgmlType, GgufFile};
use crate::formats::{self, FormatError};

pub use crate::kernels::matmul::{matmul, WeightMatrix};

/// CPU dequantisation of any type the crate can read: the matmul family's formats, then the
/// CPU-only ones.
pub fn dequantize(ty: GgmlType, bytes: &[u8], out: &mut [f32]) -> std::result::Result<(), FormatError> {
    match formats::dequantize(ty, bytes, out) {
        Err(FormatError::UnsupportedType { .. }) => match ty {
            GgmlType::Q4_0 => formats::q4_0::dequantize(bytes, out),
            GgmlType::Q4_1 => formats::q4_1::dequantize(bytes, out),
            GgmlType::Q5_0 => formats::q5_0::dequantize(bytes, out),
            GgmlType::Q5_1 => formats::q5_1::dequantize(bytes, out),
            GgmlType::Q2_K => formats::q2_k::dequantize(bytes, out),
            GgmlType::Q3_K => formats::q3_k::dequantize(bytes, out),
            GgmlType::Q5_K => formats::q5_k::dequantize(bytes, out),
            GgmlType::Q6_K => formats::q6_k::dequantize(bytes, out),
            other => Err(FormatError::UnsupportedType { ggml_type: other, tensor: None }),
        },
        r => r,
    }
}

/// Upload tensor `name` (`[n, k]`); `true` when it went through the F32 fallback.
pub fn load(ctx: &Context, file: &GgufFile, name: &str) -> Result<(WeightMatrix, bool)> {
    match WeightMatrix::from_gguf(ctx, file, name) {
        Err(Error::UnsupportedType { ggml_type, .. }) => {
            let info = file.tensor(name).ok_or_else(|| Error::Format(format!("missing tensor {name}")))?;
            let (n, k) = formats::matrix_dims(info).map_err(|e| Error::Format(e.to_string()))?;
            let len = n.checked_mul(k).ok_or_else(|| Error::Shape(format!("{name}: {n} x {k} overflows")))?;
            let mut w = vec![0f32; len];
            let bytes = file.tensor_data(info).map_err(|e| Error::Format(e.to_string()))?;
            dequantize(ggml_type, bytes, &mut w).map_err(|_| Error::UnsupportedType { ggml_type, tensor: Some(name.to_string()) })?;
            let m = WeightMatrix::upload(ctx, GgmlType::F32, n, k, bytemuck::cast_slice(&w))?;
            Ok((m, true))
        }
        r => r.map(|m| (m, false)),
    }
}
