//! The forward pass's weight matrices: [`crate::kernels::matmul::WeightMatrix`] (every weight
//! format of the family: F32, F16, BF16, Q8_0, Q4_0/1, Q5_0/1, Q2_K..Q6_K) and the family's CPU
//! dequantiser for embedding rows.

use crate::context::Context;
use crate::error::Result;
use crate::formats::gguf::GgufFile;

pub use crate::formats::dequantize;
pub use crate::kernels::matmul::{gather_row, gather_rows, gemm_q8, gemm_staged, gemv_with, matmul, wide, GemmScratch, WeightMatrix};

/// Upload tensor `name` (`[n, k]`) straight from its bytes in the (mapped) file.
pub fn load(ctx: &Context, file: &GgufFile, name: &str) -> Result<WeightMatrix> {
    WeightMatrix::from_gguf(ctx, file, name)
}
