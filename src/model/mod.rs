//! Running GGUF models: tokenizer, and the pieces that turn a file's tensors into a forward pass.

pub mod tokenizer;
