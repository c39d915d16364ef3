// Shared by the integration tests: one context on the best adapter, or a loud failure.
use wgkernels::{Context, ContextOptions};

pub fn context() -> Context {
    match Context::new_blocking(ContextOptions::default()) {
        Ok(c) => c,
        Err(e) => panic!("no GPU adapter ({e}); on a machine without a GPU install lavapipe: apt-get install -y mesa-vulkan-drivers"),
    }
}
