//! GGUF reader (versions 2 and 3) and a small writer.
//!
//! Layout (little-endian): magic `GGUF`, u32 version, u64 tensor count, u64 metadata count,
//! the metadata key/values, the tensor infos (name, u32 n_dims, u64 dims ne0 first, u32 ggml
//! type, u64 offset relative to the data section), padding to `general.alignment` (default
//! 32), then the data section.
//!
//! Every length and count is checked against the bytes that remain before anything is
//! allocated, so corrupt input gives a [`FormatError`], never a panic or a huge allocation.

use std::collections::HashSet;
use std::path::Path;

use super::FormatError;

mod write;
pub use write::GgufWriter;

/// The file magic.
pub const MAGIC: [u8; 4] = *b"GGUF";
/// Data alignment when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// Most dimensions a tensor may have (ggml's `GGML_MAX_DIMS`).
pub const MAX_DIMS: u32 = 4;
/// Deepest array nesting the reader accepts.
pub const MAX_ARRAY_DEPTH: usize = 8;

/// Metadata value type ids as stored in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ValueType {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
}

impl ValueType {
    /// The type for a file id, or `UnknownValueType`.
    pub fn from_id(id: u32) -> Result<Self, FormatError> {
        use ValueType::*;
        const ALL: [ValueType; 13] = [U8, I8, U16, I16, U32, I32, F32, Bool, String, Array, U64, I64, F64];
        ALL.get(id as usize).copied().ok_or(FormatError::UnknownValueType(id))
    }

    /// Fewest bytes one value of this type occupies in a file.
    fn min_size(self) -> u64 {
        use ValueType::*;
        match self {
            U8 | I8 | Bool => 1,
            U16 | I16 => 2,
            U32 | I32 | F32 => 4,
            U64 | I64 | F64 | String => 8,
            Array => 12,
        }
    }
}

/// One metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum MetaValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    String(String),
    /// Items all have type `elem_type` (kept so empty arrays round-trip).
    Array {
        elem_type: ValueType,
        items: Vec<MetaValue>,
    },
    U64(u64),
    I64(i64),
    F64(f64),
}

impl MetaValue {
    /// The value's type id.
    pub fn value_type(&self) -> ValueType {
        match self {
            MetaValue::U8(_) => ValueType::U8,
            MetaValue::I8(_) => ValueType::I8,
            MetaValue::U16(_) => ValueType::U16,
            MetaValue::I16(_) => ValueType::I16,
            MetaValue::U32(_) => ValueType::U32,
            MetaValue::I32(_) => ValueType::I32,
            MetaValue::F32(_) => ValueType::F32,
            MetaValue::Bool(_) => ValueType::Bool,
            MetaValue::String(_) => ValueType::String,
            MetaValue::Array { .. } => ValueType::Array,
            MetaValue::U64(_) => ValueType::U64,
            MetaValue::I64(_) => ValueType::I64,
            MetaValue::F64(_) => ValueType::F64,
        }
    }

    /// Any non-negative integer value as u64.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            MetaValue::U8(v) => Some(v.into()),
            MetaValue::U16(v) => Some(v.into()),
            MetaValue::U32(v) => Some(v.into()),
            MetaValue::U64(v) => Some(v),
            MetaValue::I8(v) => u64::try_from(v).ok(),
            MetaValue::I16(v) => u64::try_from(v).ok(),
            MetaValue::I32(v) => u64::try_from(v).ok(),
            MetaValue::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// Any float value as f64.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            MetaValue::F32(v) => Some(v.into()),
            MetaValue::F64(v) => Some(v),
            _ => None,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            MetaValue::String(s) => Some(s),
            _ => None,
        }
    }
}

macro_rules! ggml_types {
    ($($name:ident = $id:literal, $blk:literal, $bytes:literal;)*) => {
        /// ggml tensor types; ids not listed here are kept as `Other(id)`.
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum GgmlType { $($name,)* Other(u32) }

        impl GgmlType {
            /// The type for a file id.
            pub fn from_id(id: u32) -> Self {
                match id { $($id => GgmlType::$name,)* other => GgmlType::Other(other) }
            }
            /// The file id.
            pub fn id(self) -> u32 {
                match self { $(GgmlType::$name => $id,)* GgmlType::Other(id) => id }
            }
            /// `(elements per block, bytes per block)`, or `None` for unknown types.
            pub fn block_size(self) -> Option<(u64, u64)> {
                match self { $(GgmlType::$name => Some(($blk, $bytes)),)* GgmlType::Other(_) => None }
            }
        }
    };
}

ggml_types! {
    F32 = 0, 1, 4;
    F16 = 1, 1, 2;
    Q4_0 = 2, 32, 18;
    Q4_1 = 3, 32, 20;
    Q5_0 = 6, 32, 22;
    Q5_1 = 7, 32, 24;
    Q8_0 = 8, 32, 34;
    Q8_1 = 9, 32, 40;
    Q2_K = 10, 256, 84;
    Q3_K = 11, 256, 110;
    Q4_K = 12, 256, 144;
    Q5_K = 13, 256, 176;
    Q6_K = 14, 256, 210;
    Q8_K = 15, 256, 292;
    IQ2_XXS = 16, 256, 66;
    IQ2_XS = 17, 256, 74;
    IQ3_XXS = 18, 256, 98;
    IQ1_S = 19, 256, 50;
    IQ4_NL = 20, 32, 18;
    IQ3_S = 21, 256, 110;
    IQ2_S = 22, 256, 82;
    IQ4_XS = 23, 256, 136;
    I8 = 24, 1, 1;
    I16 = 25, 1, 2;
    I32 = 26, 1, 4;
    I64 = 27, 1, 8;
    F64 = 28, 1, 8;
    IQ1_M = 29, 256, 56;
    BF16 = 30, 1, 2;
    TQ1_0 = 34, 256, 54;
    TQ2_0 = 35, 256, 66;
    MXFP4 = 39, 32, 17;
}

impl GgmlType {
    /// Bytes needed for `n_elements` values (`n_elements` must be a multiple of the block
    /// size); `None` for unknown types, partial blocks or overflow.
    pub fn bytes_for(self, n_elements: u64) -> Option<u64> {
        let (blk, bytes) = self.block_size()?;
        if n_elements % blk != 0 {
            return None;
        }
        (n_elements / blk).checked_mul(bytes)
    }
}

/// One tensor's header entry.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    pub name: String,
    /// Dimensions, `ne0` (the contiguous one, K for weights) first.
    pub dims: Vec<u64>,
    pub ggml_type: GgmlType,
    /// Offset from the start of the data section.
    pub offset: u64,
    /// Product of `dims` (1 for zero dimensions).
    pub n_elements: u64,
    /// Byte size, `None` when the type's block size is unknown.
    pub n_bytes: Option<u64>,
}

/// Where a file image lives: in memory, or mapped from disk (see [`GgufFile::open`]).
#[derive(Debug)]
enum Image {
    Owned(Vec<u8>),
    #[cfg(not(target_arch = "wasm32"))]
    Mapped(memmap2::Mmap),
}

impl std::ops::Deref for Image {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Image::Owned(v) => v,
            #[cfg(not(target_arch = "wasm32"))]
            Image::Mapped(m) => m,
        }
    }
}

/// A parsed GGUF file that owns (or maps) its bytes.
#[derive(Debug)]
pub struct GgufFile {
    version: u32,
    alignment: u64,
    data_offset: u64,
    metadata: Vec<(String, MetaValue)>,
    tensors: Vec<TensorInfo>,
    bytes: Image,
}

impl GgufFile {
    /// Parses a file image (copies `bytes`; see [`GgufFile::from_vec`] to avoid the copy).
    pub fn parse(bytes: &[u8]) -> Result<Self, FormatError> {
        Self::from_vec(bytes.to_vec())
    }

    /// Parses a file image, taking ownership of it.
    pub fn from_vec(bytes: Vec<u8>) -> Result<Self, FormatError> {
        Self::from_image(Image::Owned(bytes))
    }

    fn from_image(bytes: Image) -> Result<Self, FormatError> {
        let mut r = Reader { buf: &bytes, pos: 0 };
        let magic: [u8; 4] = r.take(4, "magic")?.try_into().expect("4 bytes");
        if magic != MAGIC {
            return Err(FormatError::BadMagic(magic));
        }
        let version = r.u32("version")?;
        if version != 2 && version != 3 {
            return Err(FormatError::UnsupportedVersion(version));
        }
        let n_tensors = r.u64("tensor count")?;
        let n_kv = r.u64("metadata count")?;
        // A key/value needs at least 8 + 4 + 1 bytes, a tensor info at least 8 + 4 + 4 + 8.
        r.check_count(n_kv, 13, "metadata count")?;
        let mut metadata = Vec::with_capacity(n_kv as usize);
        let mut keys = HashSet::new();
        for _ in 0..n_kv {
            let key = r.string("metadata key")?;
            let ty = ValueType::from_id(r.u32("metadata value type")?)?;
            let value = r.value(ty, 0)?;
            if !keys.insert(key.clone()) {
                return Err(FormatError::DuplicateKey(key));
            }
            metadata.push((key, value));
        }
        let alignment = match metadata.iter().find(|(k, _)| k == "general.alignment") {
            None => DEFAULT_ALIGNMENT,
            Some((k, v)) => v.as_u64().ok_or_else(|| FormatError::WrongMetadataType { key: k.clone(), expected: "an unsigned integer" })?,
        };
        if alignment == 0 || !alignment.is_power_of_two() {
            return Err(FormatError::BadAlignment(alignment));
        }
        r.check_count(n_tensors, 24, "tensor count")?;
        let mut tensors = Vec::with_capacity(n_tensors as usize);
        let mut names = HashSet::new();
        for _ in 0..n_tensors {
            let t = r.tensor_info()?;
            if !names.insert(t.name.clone()) {
                return Err(FormatError::DuplicateTensor(t.name));
            }
            tensors.push(t);
        }
        let data_offset = (r.pos as u64).div_ceil(alignment) * alignment;
        let file = GgufFile { version, alignment, data_offset, metadata, tensors, bytes };
        for t in &file.tensors {
            if t.offset % alignment != 0 {
                return Err(FormatError::MisalignedTensor { name: t.name.clone(), offset: t.offset, alignment });
            }
            if t.n_bytes.is_some() {
                file.tensor_data(t)?;
            }
        }
        Ok(file)
    }

    /// Opens and parses a file. The file is memory-mapped (a 7B model's 4 GB are not copied into
    /// RAM; tensor bytes are paged in as [`GgufFile::tensor_data`] slices are read, e.g. by an
    /// upload). The file must not be modified or truncated while the `GgufFile` is alive (that is
    /// the usual contract of a read-only mapping; a truncation can end the process with SIGBUS).
    /// Use [`GgufFile::read`] to read it into memory instead. On wasm32, `open` reads.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, FormatError> {
        #[cfg(not(target_arch = "wasm32"))]
        {
            let file = std::fs::File::open(path)?;
            if file.metadata()?.len() == 0 {
                return Self::from_vec(Vec::new());
            }
            // SAFETY: a read-only private mapping; the contract above (no concurrent writers) is
            // the caller's, as documented.
            let map = unsafe { memmap2::Mmap::map(&file)? };
            Self::from_image(Image::Mapped(map))
        }
        #[cfg(target_arch = "wasm32")]
        Self::read(path)
    }

    /// Reads a whole file into memory and parses it.
    pub fn read(path: impl AsRef<Path>) -> Result<Self, FormatError> {
        Self::from_vec(std::fs::read(path)?)
    }

    /// Format version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Data alignment in bytes.
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Byte offset of the data section in the file.
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }

    /// Metadata in file order.
    pub fn metadata(&self) -> &[(String, MetaValue)] {
        &self.metadata
    }

    /// The metadata value for `key`.
    pub fn get(&self, key: &str) -> Option<&MetaValue> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Tensor infos in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The tensor info named `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// The raw bytes of a tensor, bounds-checked against the data section.
    pub fn tensor_data(&self, info: &TensorInfo) -> Result<&[u8], FormatError> {
        let len = info.n_bytes.ok_or_else(|| FormatError::UnknownTensorType { name: info.name.clone(), id: info.ggml_type.id() })?;
        let file_len = self.bytes.len() as u64;
        let available = file_len.saturating_sub(self.data_offset);
        let out_of_range = || FormatError::TensorOutOfRange { name: info.name.clone(), start: info.offset, len, available };
        let end = info.offset.checked_add(len).ok_or_else(out_of_range)?;
        // The data section itself may be missing (a file cut inside the padding).
        if end > available || self.data_offset > file_len {
            return Err(out_of_range());
        }
        let start = (self.data_offset + info.offset) as usize;
        Ok(&self.bytes[start..start + len as usize])
    }
}

/// Bounds-checked little-endian cursor.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> u64 {
        (self.buf.len() - self.pos) as u64
    }

    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], FormatError> {
        if n as u64 > self.remaining() {
            return Err(FormatError::Truncated { what, offset: self.pos as u64 });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], FormatError> {
        Ok(self.take(N, what)?.try_into().expect("N bytes"))
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, FormatError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &'static str) -> Result<u64, FormatError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// Errors unless `count` items of at least `min_size` bytes could fit in what remains.
    fn check_count(&self, count: u64, min_size: u64, what: &'static str) -> Result<(), FormatError> {
        match count.checked_mul(min_size) {
            Some(n) if n <= self.remaining() => Ok(()),
            _ => Err(FormatError::LengthExceedsFile { what, len: count, remaining: self.remaining() }),
        }
    }

    fn string(&mut self, what: &'static str) -> Result<String, FormatError> {
        let len = self.u64(what)?;
        self.check_count(len, 1, what)?;
        let offset = self.pos as u64;
        let raw = self.take(len as usize, what)?;
        String::from_utf8(raw.to_vec()).map_err(|_| FormatError::InvalidUtf8 { offset })
    }

    fn value(&mut self, ty: ValueType, depth: usize) -> Result<MetaValue, FormatError> {
        const W: &str = "metadata value";
        Ok(match ty {
            ValueType::U8 => MetaValue::U8(self.array::<1>(W)?[0]),
            ValueType::I8 => MetaValue::I8(self.array::<1>(W)?[0] as i8),
            ValueType::U16 => MetaValue::U16(u16::from_le_bytes(self.array(W)?)),
            ValueType::I16 => MetaValue::I16(i16::from_le_bytes(self.array(W)?)),
            ValueType::U32 => MetaValue::U32(u32::from_le_bytes(self.array(W)?)),
            ValueType::I32 => MetaValue::I32(i32::from_le_bytes(self.array(W)?)),
            ValueType::F32 => MetaValue::F32(f32::from_le_bytes(self.array(W)?)),
            ValueType::U64 => MetaValue::U64(u64::from_le_bytes(self.array(W)?)),
            ValueType::I64 => MetaValue::I64(i64::from_le_bytes(self.array(W)?)),
            ValueType::F64 => MetaValue::F64(f64::from_le_bytes(self.array(W)?)),
            ValueType::Bool => match self.array::<1>(W)?[0] {
                0 => MetaValue::Bool(false),
                1 => MetaValue::Bool(true),
                b => return Err(FormatError::InvalidBool(b)),
            },
            ValueType::String => MetaValue::String(self.string("metadata string")?),
            ValueType::Array => {
                if depth >= MAX_ARRAY_DEPTH {
                    return Err(FormatError::NestingTooDeep { depth: MAX_ARRAY_DEPTH });
                }
                let elem_type = ValueType::from_id(self.u32("array element type")?)?;
                let count = self.u64("array length")?;
                self.check_count(count, elem_type.min_size(), "array length")?;
                let mut items = Vec::with_capacity(count as usize);
                for _ in 0..count {
                    items.push(self.value(elem_type, depth + 1)?);
                }
                MetaValue::Array { elem_type, items }
            }
        })
    }

    fn tensor_info(&mut self) -> Result<TensorInfo, FormatError> {
        let name = self.string("tensor name")?;
        let n_dims = self.u32("tensor n_dims")?;
        if n_dims > MAX_DIMS {
            return Err(FormatError::TooManyDims { name, n_dims });
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        for _ in 0..n_dims {
            dims.push(self.u64("tensor dimension")?);
        }
        let ggml_type = GgmlType::from_id(self.u32("tensor type")?);
        let offset = self.u64("tensor offset")?;
        // ggml stores sizes as int64, so anything above i64::MAX is corrupt too.
        let n_elements =
            dims.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d)).filter(|&n| n <= i64::MAX as u64).ok_or_else(|| FormatError::ShapeOverflow { name: name.clone() })?;
        let n_bytes = match ggml_type.block_size() {
            None => None,
            Some((blk, bytes)) => {
                let ne0 = dims.first().copied().unwrap_or(1);
                if ne0 % blk != 0 {
                    return Err(FormatError::BadTensorShape { name, ne0, block: blk });
                }
                let n = (n_elements / blk).checked_mul(bytes).ok_or_else(|| FormatError::ShapeOverflow { name: name.clone() })?;
                Some(n)
            }
        };
        Ok(TensorInfo { name, dims, ggml_type, offset, n_elements, n_bytes })
    }
}

#[cfg(test)]
mod tests;
