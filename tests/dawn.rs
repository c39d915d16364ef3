//! The kernels executed by Dawn, the WebGPU implementation of Chrome, and checked against the CPU
//! reference with each case's own bound: every kernel x the variants a browser offers (Portable,
//! Subgroup). `tools/tint/replay.mjs` (npm `webgpu`, Dawn's Node bindings, on SwiftShader: Dawn's
//! Vulkan backend with VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json) runs each
//! dispatch: the context's dispatch executor sends it there (the module in the WGSL
//! specification's dialect, its override values, params and the whole contents of its buffers)
//! and writes the buffers Dawn wrote back into the context's own, which the case's check then
//! reads. No kernel runs on the context's own device.
//!
//! The context is made on the local adapter with Dawn's limits and features (the smaller of
//! each), so every plan is made for what Dawn's device can run; a kernel or case that cannot fit
//! is UNSUPPORTED, never passed.
//!
//! By default one case per kernel and variant (CI); `WGKERNELS_DAWN_FULL=1` runs every test case:
//!   WGPU_BACKEND=vulkan WGKERNELS_DAWN_FULL=1 cargo test --test dawn -- --nocapture
//! (`WGKERNELS_KERNEL=`, `WGKERNELS_CASE=`: only kernels, cases whose name contains the value.)
//!
//! A replay process that dies (e.g. SwiftShader's shader compiler aborting) or gives no reply
//! within `WGKERNELS_DAWN_TIMEOUT` seconds (default 900, compilation included) fails the case it
//! was running, with its exit status and the end of its stderr; the next dispatch starts a fresh
//! process, so the other cases still run.
//! Needs `npm install --prefix tools/tint` and Chromium's SwiftShader (`.ci/run` installs both).

#[path = "common/json.rs"]
mod json;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wgkernels::native::NativeExecutor;
use wgkernels::pipeline::{PipelineDesc, WgslDialect};
use wgkernels::suite::{run_case, Rng};
use wgkernels::{kernels, Context, ContextOptions, Error, Variant, VariantPolicy};

const SWIFTSHADER: &str = "/usr/lib/chromium/vk_swiftshader_icd.json";

/// One replay process: its pipes, and what it wrote to stderr (the reason, when it dies).
struct Replay {
    child: Arc<Mutex<Child>>,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Replay {
    /// Start `tools/tint/replay.mjs`; its first line describes the adapter.
    fn spawn() -> Result<(Replay, String), String> {
        let root = env!("CARGO_MANIFEST_DIR");
        let icd = std::env::var("VK_ICD_FILENAMES").unwrap_or_else(|_| SWIFTSHADER.to_string());
        let mut child = Command::new("node")
            .arg("tools/tint/replay.mjs")
            .current_dir(root)
            .env("VK_ICD_FILENAMES", icd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("node (apt-get install nodejs): {e}"))?;
        let (stdin, stdout, mut stderr) = (child.stdin.take().unwrap(), child.stdout.take().unwrap(), child.stderr.take().unwrap());
        // Collected until the process exits; read when it died.
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        let mut replay = Replay { child: Arc::new(Mutex::new(child)), stdin, stdout: BufReader::new(stdout), stderr: Some(stderr) };
        let mut adapter = String::new();
        let _ = replay.stdout.read_line(&mut adapter);
        if !adapter.contains("\"limits\"") {
            return Err(format!("Dawn did not start: {adapter}{}", replay.reap()));
        }
        Ok((replay, adapter))
    }

    /// Kill the process (if still running) and say how it ended: its exit status and the last
    /// lines of its stderr (e.g. SwiftShader's compiler aborting with an LLVM error).
    fn reap(&mut self) -> String {
        let status = match self.child.lock() {
            Ok(mut c) => {
                let _ = c.kill();
                c.wait().map(|s| s.to_string()).unwrap_or_else(|e| e.to_string())
            }
            Err(_) => "unknown".into(),
        };
        let text = self.stderr.take().and_then(|t| t.join().ok()).unwrap_or_default();
        // Dawn's start-up notice about XDG_RUNTIME_DIR is noise.
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty() && !l.contains("XDG_RUNTIME_DIR")).collect();
        let tail = lines[lines.len().saturating_sub(3)..].join(" | ");
        format!("; the replay process ended ({status}){}", if tail.is_empty() { String::new() } else { format!(": {tail}") })
    }
}

impl Drop for Replay {
    fn drop(&mut self) {
        self.reap();
    }
}

/// The replay process, restarted after a crash, and the dispatches it ran.
struct Dawn {
    replay: Mutex<Option<Replay>>,
    /// The adapter line it printed on start (name, features, limits).
    adapter: String,
    dispatches: AtomicUsize,
    /// Processes started after one died.
    restarts: AtomicUsize,
    /// Longest a dispatch (pipeline compilation included) may take before the process is killed.
    timeout: Duration,
}

impl Dawn {
    fn start() -> Dawn {
        let root = env!("CARGO_MANIFEST_DIR");
        if !std::path::Path::new(root).join("tools/tint/node_modules/webgpu").exists() {
            // Once per checkout, from the npm registry (tools/tint/package.json pins the version).
            let status =
                Command::new("npm").args(["install", "--prefix", "tools/tint", "--no-audit", "--no-fund", "--no-package-lock"]).current_dir(root).stdout(Stdio::null()).status();
            assert!(
                matches!(status, Ok(s) if s.success()),
                "Dawn's Node bindings are missing and `npm install --prefix tools/tint` failed ({status:?}): install nodejs and npm (and chromium, for SwiftShader)"
            );
        }
        let (replay, adapter) = Replay::spawn().unwrap_or_else(|e| panic!("{e}"));
        let secs = std::env::var("WGKERNELS_DAWN_TIMEOUT").ok().and_then(|v| v.parse().ok()).unwrap_or(900);
        Dawn { replay: Mutex::new(Some(replay)), adapter, dispatches: AtomicUsize::new(0), restarts: AtomicUsize::new(0), timeout: Duration::from_secs(secs) }
    }

    fn limit(&self, key: &str) -> u64 {
        json::number(&self.adapter, key).unwrap_or_else(|| panic!("no {key} in {}", self.adapter)) as u64
    }

    /// One request and its reply on `replay`; `Err` on any I/O failure (the process died or hung).
    fn exchange(replay: &mut Replay, msg: &[u8], desc: &PipelineDesc, buffers: &mut [Vec<u8>], timeout: Duration) -> Result<Option<String>, String> {
        // A watchdog kills the process if the reply does not come in time (then the read fails).
        let (done, child) = (Arc::new((Mutex::new(false), std::sync::Condvar::new())), replay.child.clone());
        let watch = {
            let done = done.clone();
            std::thread::spawn(move || {
                let (lock, cv) = &*done;
                let guard = lock.lock().unwrap();
                let (finished, _) = cv.wait_timeout_while(guard, timeout, |d| !*d).unwrap();
                if !*finished {
                    let _ = child.lock().map(|mut c| c.kill());
                    return true;
                }
                false
            })
        };
        let result = (|| {
            replay.stdin.write_all(msg).and_then(|_| replay.stdin.flush()).map_err(|e| format!("to Dawn: {e}"))?;
            let mut len = [0u8; 4];
            replay.stdout.read_exact(&mut len).map_err(|e| format!("from Dawn: {e}"))?;
            let mut reply = vec![0u8; u32::from_le_bytes(len) as usize];
            replay.stdout.read_exact(&mut reply).map_err(|e| format!("from Dawn: {e}"))?;
            let reply = String::from_utf8_lossy(&reply).into_owned();
            if reply.contains("\"error\"") {
                return Ok(Some(reply));
            }
            for (b, s) in buffers.iter_mut().zip(desc.bindings) {
                if !s.read_only {
                    replay.stdout.read_exact(b).map_err(|e| format!("from Dawn: {e}"))?;
                }
            }
            Ok(None)
        })();
        *done.0.lock().unwrap() = true;
        done.1.notify_all();
        let timed_out = watch.join().unwrap_or(false);
        result.map_err(|e| if timed_out { format!("no reply within {} s, killed ({e})", timeout.as_secs()) } else { e })
    }
}

impl NativeExecutor for Dawn {
    fn execute(&self, desc: &PipelineDesc, params: &[u8], buffers: &mut [Vec<u8>], workgroups: [u32; 3]) -> Result<(), String> {
        let specs: Vec<String> = buffers.iter().zip(desc.bindings).map(|(b, s)| format!("{{\"size\": {}, \"write\": {}}}", b.len(), !s.read_only)).collect();
        let head = format!(
            "{{\"code\": {}, \"entry\": {}, \"constants\": {}, \"params\": {}, \"buffers\": [{}], \"workgroups\": [{}, {}, {}]}}",
            json::string(&desc.source.wgsl(WgslDialect::Spec)),
            json::string(desc.entry),
            json::constants(&desc.constants),
            params.len(),
            specs.join(", "),
            workgroups[0],
            workgroups[1],
            workgroups[2]
        );
        let mut msg = (head.len() as u32).to_le_bytes().to_vec();
        msg.extend_from_slice(head.as_bytes());
        msg.extend_from_slice(params);
        for b in buffers.iter() {
            msg.extend_from_slice(b);
        }
        let mut slot = self.replay.lock().map_err(|e| e.to_string())?;
        if slot.is_none() {
            // The last process died: a fresh one for this dispatch, on the same adapter.
            let (replay, adapter) = Replay::spawn()?;
            if adapter != self.adapter {
                return Err(format!("the restarted replay process has another adapter: {adapter}"));
            }
            self.restarts.fetch_add(1, Ordering::Relaxed);
            *slot = Some(replay);
        }
        let replay = slot.as_mut().expect("started above");
        match Self::exchange(replay, &msg, desc, buffers, self.timeout) {
            Ok(None) => {
                self.dispatches.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Ok(Some(reply)) => {
                // The first error line of Tint's or Dawn's message (JSON-escaped newlines).
                let first = reply.split("\\n").find(|l| l.contains("error:")).unwrap_or(&reply);
                Err(format!("Dawn: {first}"))
            }
            Err(e) => {
                // The process died (or hung) on this dispatch: the case fails with the reason,
                // and the next dispatch starts a fresh process.
                let mut dead = slot.take().expect("present");
                Err(format!("Dawn crashed: {e}{}", dead.reap()))
            }
        }
    }
}

/// A context on the local adapter (lavapipe in CI) with no more than Dawn's limits, only the
/// features a browser gives (subgroups; f16 where Dawn has it) and Dawn's subgroup sizes, so
/// plans fit Dawn's device.
fn context_like(dawn: &Dawn) -> Context {
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions::default())).expect("a local adapter (lavapipe: apt-get install mesa-vulkan-drivers)");
    let mut features = adapter.features() & wgpu::Features::SUBGROUP;
    if dawn.adapter.contains("shader-f16") {
        features |= adapter.features() & wgpu::Features::SHADER_F16;
    }
    let mut l = adapter.limits();
    let cap = |v: &mut u32, key: &str| *v = (*v).min(dawn.limit(key) as u32);
    cap(&mut l.max_compute_invocations_per_workgroup, "maxComputeInvocationsPerWorkgroup");
    cap(&mut l.max_compute_workgroup_size_x, "maxComputeWorkgroupSizeX");
    cap(&mut l.max_compute_workgroup_size_y, "maxComputeWorkgroupSizeY");
    cap(&mut l.max_compute_workgroup_size_z, "maxComputeWorkgroupSizeZ");
    cap(&mut l.max_compute_workgroup_storage_size, "maxComputeWorkgroupStorageSize");
    cap(&mut l.max_storage_buffers_per_shader_stage, "maxStorageBuffersPerShaderStage");
    cap(&mut l.max_compute_workgroups_per_dimension, "maxComputeWorkgroupsPerDimension");
    l.max_storage_buffer_binding_size = l.max_storage_buffer_binding_size.min(dawn.limit("maxStorageBufferBindingSize"));
    l.max_buffer_size = l.max_buffer_size.min(dawn.limit("maxBufferSize"));
    l.min_storage_buffer_offset_alignment = l.min_storage_buffer_offset_alignment.max(dawn.limit("minStorageBufferOffsetAlignment") as u32);
    l.min_uniform_buffer_offset_alignment = l.min_uniform_buffer_offset_alignment.max(dawn.limit("minUniformBufferOffsetAlignment") as u32);
    let desc = wgpu::DeviceDescriptor { label: Some("wgkernels, Dawn's limits"), required_features: features, required_limits: l, ..Default::default() };
    let (device, queue) = pollster::block_on(adapter.request_device(&desc)).expect("device");
    let ctx = Context::from_device(device, queue, ContextOptions::default()).expect("context");
    // Plans that depend on the subgroup size take Dawn's.
    ctx.with_caps(|caps| {
        caps.subgroup_min_size = dawn.limit("subgroupMinSize") as u32;
        caps.subgroup_max_size = dawn.limit("subgroupMaxSize") as u32;
    })
}

#[test]
fn every_kernel_on_dawn() {
    let dawn = Arc::new(Dawn::start());
    println!("Dawn: {}", dawn.adapter.trim());
    let base = context_like(&dawn);
    println!("{}", base.caps().report());
    let full = std::env::var("WGKERNELS_DAWN_FULL").is_ok_and(|v| v == "1");
    let seed = Rng::fresh_seed();
    println!("seed {seed} (set WGKERNELS_SEED={seed} to reproduce); {}\n", if full { "every test case" } else { "one case per kernel and variant" });
    let mut rng = Rng::new(seed);
    let mut passed = 0;
    // Reason -> cases (kernel x variant pairs the device cannot run, and shapes that do not fit).
    let mut unsupported = std::collections::BTreeMap::<String, usize>::new();
    let mut failures = Vec::new();
    let start = std::time::Instant::now();
    // WGKERNELS_KERNEL=substr, WGKERNELS_CASE=substr: only the kernels, cases whose name contains it.
    let only = |var: &str| std::env::var(var).ok().filter(|f| !f.is_empty());
    let (filter, case_filter) = (only("WGKERNELS_KERNEL"), only("WGKERNELS_CASE"));
    for kernel in kernels::registry() {
        let info = kernel.info();
        if filter.as_deref().is_some_and(|f| !info.name.contains(f)) {
            continue;
        }
        for v in [Variant::Portable, Variant::Subgroup] {
            if let Err(reason) = info.support(base.caps(), v) {
                if info.variants.contains(&v) {
                    println!("{:<22} {:<9} UNSUPPORTED: {reason}", info.name, v.name());
                    *unsupported.entry(format!("{} (the whole kernel x variant)", reason)).or_default() += 1;
                }
                continue;
            }
            let ctx = base.with_options(ContextOptions::default().with_policy(VariantPolicy::Require(v)).with_dispatch_executor(dawn.clone()));
            let mut cases = kernel.test_cases();
            let mut ran = 0;
            // CI: the first case this device can run.
            while !cases.is_empty() && (full || ran == 0) {
                let case = cases.remove(0);
                if case_filter.as_deref().is_some_and(|f| !case.name().contains(f)) {
                    continue;
                }
                let before = dawn.dispatches.load(Ordering::Relaxed);
                let result = run_case(&ctx, case.as_ref(), &mut rng);
                let on_dawn = dawn.dispatches.load(Ordering::Relaxed) - before;
                let line = match result {
                    Err(Error::Unsupported { reason, .. }) => {
                        *unsupported.entry(reason.clone()).or_default() += 1;
                        format!("UNSUPPORTED for this shape: {reason}")
                    }
                    Ok(c) if c.passed() && on_dawn > 0 => {
                        passed += 1;
                        ran += 1;
                        format!("PASS  {} ({on_dawn} dispatches on Dawn)", c.summary())
                    }
                    Ok(c) => {
                        ran += 1;
                        let why = if on_dawn == 0 { "nothing ran on Dawn".to_string() } else { c.summary() };
                        failures.push(format!("{} {} {}: {why}", info.name, v.name(), case.name()));
                        format!("FAIL  {why}")
                    }
                    Err(e) => {
                        ran += 1;
                        failures.push(format!("{} {} {}: {e}", info.name, v.name(), case.name()));
                        format!("FAIL  error: {e}")
                    }
                };
                println!("{:<22} {:<9} {:<36} {line}", info.name, v.name(), case.name());
            }
            if ran == 0 && case_filter.is_none() {
                failures.push(format!("{} {}: supported but none of its test cases fits this device", info.name, v.name()));
            }
        }
    }
    println!(
        "\nDawn: {passed} cases passed, {} failed, {} unsupported; {} dispatches on Dawn in {:.1} s; replay process restarted {} times",
        failures.len(),
        unsupported.values().sum::<usize>(),
        dawn.dispatches.load(Ordering::Relaxed),
        start.elapsed().as_secs_f64(),
        dawn.restarts.load(Ordering::Relaxed)
    );
    for (reason, n) in &unsupported {
        println!("UNSUPPORTED x{n}: {reason}");
    }
    for f in &failures {
        println!("FAILED: {f}");
    }
    assert!(failures.is_empty(), "{} cases failed on Dawn (seed {seed})", failures.len());
    assert!(passed > 0, "nothing ran on Dawn");
}

/// The plans made for WebGPU's default 16 KiB of workgroup memory (the families' plan cases that
/// ask for it: TurboQuant's compact split pass, the attention prefill's small tiles), executed by
/// Dawn: what a browser that grants no more runs.
#[test]
fn webgpu_default_memory_plans_on_dawn() {
    let dawn = Arc::new(Dawn::start());
    let base = context_like(&dawn);
    let seed = Rng::fresh_seed();
    println!("seed {seed} (set WGKERNELS_SEED={seed} to reproduce)");
    let mut rng = Rng::new(seed);
    let (mut passed, mut failures) = (0, Vec::new());
    for kernel in kernels::registry() {
        let info = kernel.info();
        for pc in kernel.plan_cases().into_iter().filter(|pc| pc.adapter.workgroup_memory == Some(16 << 10)) {
            for v in [Variant::Portable, Variant::Subgroup].into_iter().filter(|&v| pc.variant.is_none_or(|p| p == v)) {
                if info.support(base.caps(), v).is_err() {
                    continue;
                }
                let options = ContextOptions::default().with_policy(VariantPolicy::Require(v)).with_tuning(pc.tuning.clone()).with_dispatch_executor(dawn.clone());
                let ctx = base.with_options(options).with_caps(|caps| pc.adapter.apply(caps));
                let before = dawn.dispatches.load(Ordering::Relaxed);
                let line = match run_case(&ctx, pc.case.as_ref(), &mut rng) {
                    Ok(c) if c.passed() && dawn.dispatches.load(Ordering::Relaxed) > before => {
                        passed += 1;
                        format!("PASS  {}", c.summary())
                    }
                    Ok(c) => {
                        failures.push(format!("{} {} {}: {}", info.name, v.name(), pc.case.name(), c.summary()));
                        format!("FAIL  {}", c.summary())
                    }
                    Err(e) => {
                        failures.push(format!("{} {} {}: {e}", info.name, v.name(), pc.case.name()));
                        format!("FAIL  error: {e}")
                    }
                };
                println!("{:<22} {:<9} {:<36} {line}", info.name, v.name(), pc.case.name());
            }
        }
    }
    for f in &failures {
        println!("FAILED: {f}");
    }
    assert!(failures.is_empty(), "{} plan cases failed on Dawn (seed {seed})", failures.len());
    assert!(passed > 0, "nothing ran on Dawn");
}
