//! Compact metadata arrays: one typed vector per array (numbers and bools as plain values,
//! strings as one byte buffer plus end offsets), so an array takes about the bytes it takes in
//! the file instead of one [`MetaValue`] per element.

use super::{MetaValue, ValueType};
use crate::formats::FormatError;

/// Strings stored back to back: item `i` is `bytes[ends[i - 1]..ends[i]]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StringList {
    bytes: String,
    ends: Vec<usize>,
}

impl StringList {
    /// An empty list with room for `count` strings of `bytes` bytes in total.
    pub fn with_capacity(count: usize, bytes: usize) -> Self {
        StringList { bytes: String::with_capacity(bytes), ends: Vec::with_capacity(count) }
    }
    pub fn push(&mut self, s: &str) {
        self.bytes.push_str(s);
        self.ends.push(self.bytes.len());
    }
    pub fn len(&self) -> usize {
        self.ends.len()
    }
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }
    /// String `i`.
    pub fn get(&self, i: usize) -> Option<&str> {
        let end = *self.ends.get(i)?;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        self.bytes.get(start..end)
    }
    pub fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }
}

impl<S: AsRef<str>> FromIterator<S> for StringList {
    fn from_iter<I: IntoIterator<Item = S>>(iter: I) -> Self {
        let mut l = StringList::default();
        for s in iter {
            l.push(s.as_ref());
        }
        l
    }
}

/// A metadata array: all items of one type.
#[derive(Clone, Debug, PartialEq)]
pub enum MetaArray {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    F32(Vec<f32>),
    Bool(Vec<bool>),
    String(StringList),
    Array(Vec<MetaArray>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F64(Vec<f64>),
}

macro_rules! each_scalar {
    ($self:expr, $v:ident => $e:expr, strings $s:ident => $se:expr, arrays $a:ident => $ae:expr) => {
        match $self {
            MetaArray::U8($v) => $e,
            MetaArray::I8($v) => $e,
            MetaArray::U16($v) => $e,
            MetaArray::I16($v) => $e,
            MetaArray::U32($v) => $e,
            MetaArray::I32($v) => $e,
            MetaArray::F32($v) => $e,
            MetaArray::Bool($v) => $e,
            MetaArray::U64($v) => $e,
            MetaArray::I64($v) => $e,
            MetaArray::F64($v) => $e,
            MetaArray::String($s) => $se,
            MetaArray::Array($a) => $ae,
        }
    };
}

impl MetaArray {
    /// The items' type.
    pub fn elem_type(&self) -> ValueType {
        match self {
            MetaArray::U8(_) => ValueType::U8,
            MetaArray::I8(_) => ValueType::I8,
            MetaArray::U16(_) => ValueType::U16,
            MetaArray::I16(_) => ValueType::I16,
            MetaArray::U32(_) => ValueType::U32,
            MetaArray::I32(_) => ValueType::I32,
            MetaArray::F32(_) => ValueType::F32,
            MetaArray::Bool(_) => ValueType::Bool,
            MetaArray::String(_) => ValueType::String,
            MetaArray::Array(_) => ValueType::Array,
            MetaArray::U64(_) => ValueType::U64,
            MetaArray::I64(_) => ValueType::I64,
            MetaArray::F64(_) => ValueType::F64,
        }
    }

    /// An empty array of `elem_type` with room for `count` items (strings: `str_bytes` bytes).
    pub(crate) fn with_capacity(elem_type: ValueType, count: usize, str_bytes: usize) -> MetaArray {
        match elem_type {
            ValueType::U8 => MetaArray::U8(Vec::with_capacity(count)),
            ValueType::I8 => MetaArray::I8(Vec::with_capacity(count)),
            ValueType::U16 => MetaArray::U16(Vec::with_capacity(count)),
            ValueType::I16 => MetaArray::I16(Vec::with_capacity(count)),
            ValueType::U32 => MetaArray::U32(Vec::with_capacity(count)),
            ValueType::I32 => MetaArray::I32(Vec::with_capacity(count)),
            ValueType::F32 => MetaArray::F32(Vec::with_capacity(count)),
            ValueType::Bool => MetaArray::Bool(Vec::with_capacity(count)),
            ValueType::String => MetaArray::String(StringList::with_capacity(count, str_bytes)),
            ValueType::Array => MetaArray::Array(Vec::with_capacity(count)),
            ValueType::U64 => MetaArray::U64(Vec::with_capacity(count)),
            ValueType::I64 => MetaArray::I64(Vec::with_capacity(count)),
            ValueType::F64 => MetaArray::F64(Vec::with_capacity(count)),
        }
    }

    /// Bytes one item of `elem_type` takes in memory (strings: the end offset; nested arrays: the
    /// array value itself).
    pub(crate) fn item_size(elem_type: ValueType) -> usize {
        match elem_type {
            ValueType::U8 | ValueType::I8 | ValueType::Bool => 1,
            ValueType::U16 | ValueType::I16 => 2,
            ValueType::U32 | ValueType::I32 | ValueType::F32 => 4,
            ValueType::U64 | ValueType::I64 | ValueType::F64 => 8,
            ValueType::String => std::mem::size_of::<usize>(),
            ValueType::Array => std::mem::size_of::<MetaArray>(),
        }
    }

    pub fn len(&self) -> usize {
        each_scalar!(self, v => v.len(), strings s => s.len(), arrays a => a.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Item `i` as a value (strings and nested arrays are copied).
    pub fn get(&self, i: usize) -> Option<MetaValue> {
        Some(match self {
            MetaArray::U8(v) => MetaValue::U8(*v.get(i)?),
            MetaArray::I8(v) => MetaValue::I8(*v.get(i)?),
            MetaArray::U16(v) => MetaValue::U16(*v.get(i)?),
            MetaArray::I16(v) => MetaValue::I16(*v.get(i)?),
            MetaArray::U32(v) => MetaValue::U32(*v.get(i)?),
            MetaArray::I32(v) => MetaValue::I32(*v.get(i)?),
            MetaArray::F32(v) => MetaValue::F32(*v.get(i)?),
            MetaArray::Bool(v) => MetaValue::Bool(*v.get(i)?),
            MetaArray::U64(v) => MetaValue::U64(*v.get(i)?),
            MetaArray::I64(v) => MetaValue::I64(*v.get(i)?),
            MetaArray::F64(v) => MetaValue::F64(*v.get(i)?),
            MetaArray::String(s) => MetaValue::String(s.get(i)?.to_string()),
            MetaArray::Array(a) => MetaValue::Array(a.get(i)?.clone()),
        })
    }

    /// The items as values (see [`MetaArray::get`]).
    pub fn iter(&self) -> impl Iterator<Item = MetaValue> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }

    /// The strings, if this is an array of strings.
    pub fn strings(&self) -> Option<&StringList> {
        match self {
            MetaArray::String(s) => Some(s),
            _ => None,
        }
    }

    /// An array of `elem_type` from values of that type (e.g. to write a file), or
    /// [`FormatError::WrongMetadataType`] for an item of another type.
    pub fn from_values(elem_type: ValueType, items: &[MetaValue]) -> Result<MetaArray, FormatError> {
        let mut a = MetaArray::with_capacity(elem_type, items.len(), 0);
        let wrong = || FormatError::WrongMetadataType { key: "array item".into(), expected: "the array's element type" };
        for it in items {
            match (&mut a, it) {
                (MetaArray::U8(v), MetaValue::U8(x)) => v.push(*x),
                (MetaArray::I8(v), MetaValue::I8(x)) => v.push(*x),
                (MetaArray::U16(v), MetaValue::U16(x)) => v.push(*x),
                (MetaArray::I16(v), MetaValue::I16(x)) => v.push(*x),
                (MetaArray::U32(v), MetaValue::U32(x)) => v.push(*x),
                (MetaArray::I32(v), MetaValue::I32(x)) => v.push(*x),
                (MetaArray::F32(v), MetaValue::F32(x)) => v.push(*x),
                (MetaArray::Bool(v), MetaValue::Bool(x)) => v.push(*x),
                (MetaArray::U64(v), MetaValue::U64(x)) => v.push(*x),
                (MetaArray::I64(v), MetaValue::I64(x)) => v.push(*x),
                (MetaArray::F64(v), MetaValue::F64(x)) => v.push(*x),
                (MetaArray::String(v), MetaValue::String(x)) => v.push(x),
                (MetaArray::Array(v), MetaValue::Array(x)) => v.push(x.clone()),
                _ => return Err(wrong()),
            }
        }
        Ok(a)
    }
}

macro_rules! from_vec {
    ($($t:ty => $v:ident),*) => {$(
        impl From<Vec<$t>> for MetaArray {
            fn from(v: Vec<$t>) -> Self {
                MetaArray::$v(v)
            }
        }
    )*};
}
from_vec!(u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32, f32 => F32, bool => Bool, u64 => U64, i64 => I64, f64 => F64);

impl From<StringList> for MetaArray {
    fn from(v: StringList) -> Self {
        MetaArray::String(v)
    }
}

impl From<MetaArray> for MetaValue {
    fn from(a: MetaArray) -> Self {
        MetaValue::Array(a)
    }
}
