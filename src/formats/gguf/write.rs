//! Minimal GGUF v3 writer (metadata + tensors), mainly for tests and tools.

use super::{FormatError, GgmlType, MetaArray, MetaValue, DEFAULT_ALIGNMENT};

/// Builds a GGUF v3 file image in memory.
#[derive(Clone, Debug, Default)]
pub struct GgufWriter {
    alignment: Option<u64>,
    metadata: Vec<(String, MetaValue)>,
    tensors: Vec<(String, Vec<u64>, GgmlType, Vec<u8>)>,
}

impl GgufWriter {
    /// An empty file with the default 32-byte alignment.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the data alignment and records it as `general.alignment` (u32).
    pub fn alignment(mut self, alignment: u64) -> Result<Self, FormatError> {
        if alignment == 0 || !alignment.is_power_of_two() || alignment > u32::MAX as u64 {
            return Err(FormatError::BadAlignment(alignment));
        }
        self.alignment = Some(alignment);
        Ok(self)
    }

    /// Appends a metadata key/value.
    pub fn metadata(mut self, key: impl Into<String>, value: MetaValue) -> Self {
        self.metadata.push((key.into(), value));
        self
    }

    /// Appends a tensor; `data.len()` must match the type and dims (`ne0` first).
    pub fn tensor(mut self, name: impl Into<String>, dims: &[u64], ty: GgmlType, data: Vec<u8>) -> Result<Self, FormatError> {
        let name = name.into();
        let n: u64 = dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d)).ok_or_else(|| FormatError::ShapeOverflow { name: name.clone() })?;
        let bytes = ty.bytes_for(n).ok_or_else(|| FormatError::UnknownTensorType { name: name.clone(), id: ty.id() })?;
        if bytes != data.len() as u64 {
            return Err(FormatError::TensorOutOfRange { name, start: 0, len: bytes, available: data.len() as u64 });
        }
        self.tensors.push((name, dims.to_vec(), ty, data));
        Ok(self)
    }

    /// Serialises the file.
    pub fn to_bytes(&self) -> Vec<u8> {
        let align = self.alignment.unwrap_or(DEFAULT_ALIGNMENT);
        let pad = |n: u64| n.div_ceil(align) * align;
        let mut meta = self.metadata.clone();
        if let Some(a) = self.alignment {
            meta.retain(|(k, _)| k != "general.alignment");
            meta.push(("general.alignment".into(), MetaValue::U32(a as u32)));
        }
        let mut out = Vec::new();
        out.extend_from_slice(b"GGUF");
        out.extend_from_slice(&3u32.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(meta.len() as u64).to_le_bytes());
        for (k, v) in &meta {
            put_str(&mut out, k);
            out.extend_from_slice(&(v.value_type() as u32).to_le_bytes());
            put_value(&mut out, v);
        }
        let mut offset = 0u64;
        for (name, dims, ty, data) in &self.tensors {
            put_str(&mut out, name);
            out.extend_from_slice(&(dims.len() as u32).to_le_bytes());
            for d in dims {
                out.extend_from_slice(&d.to_le_bytes());
            }
            out.extend_from_slice(&ty.id().to_le_bytes());
            out.extend_from_slice(&offset.to_le_bytes());
            offset = pad(offset + data.len() as u64);
        }
        out.resize(pad(out.len() as u64) as usize, 0);
        for (_, _, _, data) in &self.tensors {
            out.extend_from_slice(data);
            out.resize(pad(out.len() as u64) as usize, 0);
        }
        out
    }
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_array(out: &mut Vec<u8>, a: &MetaArray) {
    out.extend_from_slice(&(a.elem_type() as u32).to_le_bytes());
    out.extend_from_slice(&(a.len() as u64).to_le_bytes());
    match a {
        MetaArray::String(s) => s.iter().for_each(|s| put_str(out, s)),
        MetaArray::Array(v) => v.iter().for_each(|a| put_array(out, a)),
        _ => a.iter().for_each(|v| put_value(out, &v)),
    }
}

fn put_value(out: &mut Vec<u8>, v: &MetaValue) {
    match v {
        MetaValue::U8(x) => out.push(*x),
        MetaValue::I8(x) => out.push(*x as u8),
        MetaValue::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::Bool(x) => out.push(*x as u8),
        MetaValue::String(s) => put_str(out, s),
        MetaValue::Array(a) => put_array(out, a),
        MetaValue::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
    }
}
