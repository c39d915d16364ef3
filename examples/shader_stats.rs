//! What the Vulkan driver made of each kernel: registers, spills, shared memory, instruction
//! counts, as the driver reports them through `VK_KHR_pipeline_executable_properties`.
//!
//! `cargo run --release --example shader_stats -- [--filter A|B] [--variants subgroup,matrix]
//! [--small] [--checked] [--ir DIR]`
//!
//! wgpu does not expose that extension, so this builds each pipeline a second time on its own
//! raw Vulkan device (ash), from the SPIR-V that wgpu 30 writes for it (`shaders::vulkan_spirv`:
//! same naga options, overrides resolved), with the capture flags set. Which pipelines: every
//! bench case (`--small`: test case) of the registry whose "kernel case" label contains one of
//! the `--filter` parts, for every variant the adapter supports (or those of `--variants`), is set
//! up and recorded once on the wgpu context; every pipeline that built is then compiled again
//! here. `--checked` compiles them as `WGKERNELS_BOUNDS_CHECKS=1` would. `--ir DIR` also writes the
//! driver's internal representations, where it gives any, to DIR.
//!
//! What the statistics are named and mean is the driver's business: the tool prints them as
//! given. Vulkan only (on Metal, Xcode's shader profiler shows the same things).

use ash::vk;
use std::collections::BTreeMap;
use std::ffi::CStr;
use wgkernels::kernels;
use wgkernels::pipeline::PipelineDesc;
use wgkernels::suite::Rng;
use wgkernels::{shaders, Context, ContextOptions, Variant, VariantPolicy};

struct Args {
    filter: Option<String>,
    variants: Vec<Variant>,
    small: bool,
    checked: bool,
    ir: Option<String>,
}

fn args() -> Args {
    let mut a = Args { filter: None, variants: vec![], small: false, checked: false, ir: None };
    let mut it = std::env::args().skip(1);
    while let Some(x) = it.next() {
        match x.as_str() {
            "--filter" => a.filter = it.next(),
            "--variants" => {
                a.variants = it.next().unwrap_or_default().split(',').filter_map(Variant::parse).collect();
            }
            "--small" => a.small = true,
            "--checked" => a.checked = true,
            "--ir" => a.ir = it.next(),
            other => {
                eprintln!("unknown argument {other}; see the file's header");
                std::process::exit(2);
            }
        }
    }
    a
}

/// The pipelines the matching cases build, by label.
fn collect(ctx: &Context, a: &Args) -> BTreeMap<String, PipelineDesc> {
    let mut all = BTreeMap::new();
    let mut rng = Rng::new(Rng::fresh_seed());
    for kernel in kernels::registry() {
        let info = kernel.info();
        let cases = if a.small { kernel.test_cases() } else { kernel.bench_cases() };
        for case in cases {
            let label = format!("{} {}", info.name, case.name());
            if a.filter.as_ref().is_some_and(|f| !f.split('|').any(|part| label.contains(part))) {
                continue;
            }
            for v in Variant::ALL {
                if (!a.variants.is_empty() && !a.variants.contains(&v)) || info.support(ctx.caps(), v).is_err() {
                    continue;
                }
                let vctx = ctx.with_options(ctx.options().clone().with_policy(VariantPolicy::Require(v)));
                let recorded = case.setup(&vctx, &mut rng, 1).and_then(|p| p.encode(&mut vctx.batch(), 0));
                // A shape the variant does not take (e.g. Matrix with head_dim 6) is no news here.
                if let Err(e) = recorded.map_err(|e| e.to_string()) {
                    if !e.contains("unsupported") {
                        println!("{label} [{}]: not recorded: {e}", v.name());
                    }
                }
                for (l, d) in vctx.built_pipelines() {
                    all.entry(l).or_insert(d);
                }
            }
        }
    }
    all
}

/// One executable of a pipeline: its name, its statistics and its internal representations, each
/// as (name, value).
type Executable = (String, Vec<(String, String)>, Vec<(String, String)>);

/// A raw Vulkan device on the adapter named `name` with pipeline-executable properties and every
/// feature the device has (so any SPIR-V wgpu would accept compiles).
struct Raw {
    _entry: ash::Entry,
    instance: ash::Instance,
    device: ash::Device,
    exec: ash::khr::pipeline_executable_properties::Device,
}

impl Raw {
    fn new(name: &str) -> Result<Raw, String> {
        let entry = unsafe { ash::Entry::load() }.map_err(|e| format!("no Vulkan loader: {e}"))?;
        let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_3);
        let instance = unsafe { entry.create_instance(&vk::InstanceCreateInfo::default().application_info(&app), None) }.map_err(|e| format!("instance: {e}"))?;
        let pds = unsafe { instance.enumerate_physical_devices() }.map_err(|e| format!("devices: {e}"))?;
        let name_of = |pd: vk::PhysicalDevice| {
            let p = unsafe { instance.get_physical_device_properties(pd) };
            p.device_name_as_c_str().map(|c| c.to_string_lossy().into_owned()).unwrap_or_default()
        };
        let pd = *pds.iter().find(|&&pd| name_of(pd) == name).or(pds.first()).ok_or("no Vulkan device")?;
        let exts = unsafe { instance.enumerate_device_extension_properties(pd) }.map_err(|e| format!("extensions: {e}"))?;
        let has = |n: &CStr| exts.iter().any(|e| e.extension_name_as_c_str() == Ok(n));
        if !has(ash::khr::pipeline_executable_properties::NAME) {
            return Err(format!("{} does not offer VK_KHR_pipeline_executable_properties", name_of(pd)));
        }
        let mut names = vec![ash::khr::pipeline_executable_properties::NAME.as_ptr()];
        let coop = has(ash::khr::cooperative_matrix::NAME);
        if coop {
            names.push(ash::khr::cooperative_matrix::NAME.as_ptr());
        }
        let queue_family =
            unsafe { instance.get_physical_device_queue_family_properties(pd) }.iter().position(|q| q.queue_flags.contains(vk::QueueFlags::COMPUTE)).ok_or("no compute queue")?
                as u32;
        // Every feature the device has, from the same chain that is then passed to create it.
        let mut v11 = vk::PhysicalDeviceVulkan11Features::default();
        let mut v12 = vk::PhysicalDeviceVulkan12Features::default();
        let mut v13 = vk::PhysicalDeviceVulkan13Features::default();
        let mut exec_f = vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR::default();
        let mut coop_f = vk::PhysicalDeviceCooperativeMatrixFeaturesKHR::default();
        let mut f2 = vk::PhysicalDeviceFeatures2::default().push_next(&mut v11).push_next(&mut v12).push_next(&mut v13).push_next(&mut exec_f);
        if coop {
            f2 = f2.push_next(&mut coop_f);
        }
        unsafe { instance.get_physical_device_features2(pd, &mut f2) };
        let prio = [1.0f32];
        let queues = [vk::DeviceQueueCreateInfo::default().queue_family_index(queue_family).queue_priorities(&prio)];
        let info = vk::DeviceCreateInfo::default().queue_create_infos(&queues).enabled_extension_names(&names).push_next(&mut f2);
        let device = unsafe { instance.create_device(pd, &info, None) }.map_err(|e| format!("device: {e}"))?;
        let exec = ash::khr::pipeline_executable_properties::Device::new(&instance, &device);
        Ok(Raw { _entry: entry, instance, device, exec })
    }

    /// Compile `spirv` as `desc`'s pipeline with the capture flags; per executable its name and
    /// statistics, and (with `ir`) its internal representations as (name, text).
    fn stats(&self, desc: &PipelineDesc, spirv: &[u32], ir: bool) -> Result<Vec<Executable>, String> {
        let d = &self.device;
        let mut bindings = vec![vk::DescriptorSetLayoutBinding::default()
            .binding(0)
            .descriptor_type(vk::DescriptorType::UNIFORM_BUFFER)
            .descriptor_count(1)
            .stage_flags(vk::ShaderStageFlags::COMPUTE)];
        for i in 0..desc.bindings.len() {
            bindings.push(
                vk::DescriptorSetLayoutBinding::default()
                    .binding(i as u32 + 1)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE),
            );
        }
        unsafe {
            let set = d.create_descriptor_set_layout(&vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings), None).map_err(|e| format!("set layout: {e}"))?;
            let sets = [set];
            let layout = d.create_pipeline_layout(&vk::PipelineLayoutCreateInfo::default().set_layouts(&sets), None).map_err(|e| format!("layout: {e}"))?;
            let module = d.create_shader_module(&vk::ShaderModuleCreateInfo::default().code(spirv), None).map_err(|e| format!("module: {e}"))?;
            let mut flags = vk::PipelineCreateFlags::CAPTURE_STATISTICS_KHR;
            if ir {
                flags |= vk::PipelineCreateFlags::CAPTURE_INTERNAL_REPRESENTATIONS_KHR;
            }
            let entry = std::ffi::CString::new(desc.entry).map_err(|e| e.to_string())?;
            let stage = vk::PipelineShaderStageCreateInfo::default().stage(vk::ShaderStageFlags::COMPUTE).module(module).name(&entry);
            let info = [vk::ComputePipelineCreateInfo::default().flags(flags).stage(stage).layout(layout)];
            let result = d.create_compute_pipelines(vk::PipelineCache::null(), &info, None).map_err(|(_, e)| format!("pipeline: {e}"));
            let out = result.and_then(|p| {
                let r = self.read(p[0], ir);
                d.destroy_pipeline(p[0], None);
                r
            });
            d.destroy_shader_module(module, None);
            d.destroy_pipeline_layout(layout, None);
            d.destroy_descriptor_set_layout(set, None);
            out
        }
    }

    unsafe fn read(&self, pipeline: vk::Pipeline, ir: bool) -> Result<Vec<Executable>, String> {
        let text = |s: Result<&CStr, _>| s.map(|c: &CStr| c.to_string_lossy().into_owned()).unwrap_or_default();
        let props = self.exec.get_pipeline_executable_properties(&vk::PipelineInfoKHR::default().pipeline(pipeline)).map_err(|e| format!("executables: {e}"))?;
        let mut out = vec![];
        for (i, p) in props.iter().enumerate() {
            let ei = vk::PipelineExecutableInfoKHR::default().pipeline(pipeline).executable_index(i as u32);
            let stats = self.exec.get_pipeline_executable_statistics(&ei).map_err(|e| format!("statistics: {e}"))?;
            let stats = stats
                .iter()
                .map(|s| {
                    let v = match s.format {
                        vk::PipelineExecutableStatisticFormatKHR::BOOL32 => (s.value.b32 != 0).to_string(),
                        vk::PipelineExecutableStatisticFormatKHR::INT64 => s.value.i64.to_string(),
                        // NVIDIA 580's "Local Memory Size" carries 2^36 on every pipeline (the
                        // stage passes, with no arrays at all, report exactly 2^36); the rest
                        // is shown apart as bytes (an inference, not a documented meaning).
                        vk::PipelineExecutableStatisticFormatKHR::UINT64 if s.value.u64 >= 1 << 36 => format!("2^36 + {}", s.value.u64 - (1 << 36)),
                        vk::PipelineExecutableStatisticFormatKHR::UINT64 => s.value.u64.to_string(),
                        _ => format!("{:.3}", s.value.f64),
                    };
                    (text(s.name_as_c_str()), v)
                })
                .collect();
            let irs = if ir { self.internal(&ei)? } else { vec![] };
            out.push((format!("{} ({}), subgroup {}", text(p.name_as_c_str()), text(p.description_as_c_str()), p.subgroup_size), stats, irs));
        }
        Ok(out)
    }

    /// The two-call query of internal representations (ash returns them without their data).
    unsafe fn internal(&self, ei: &vk::PipelineExecutableInfoKHR) -> Result<Vec<(String, String)>, String> {
        let f = self.exec.fp().get_pipeline_executable_internal_representations_khr;
        let mut n = 0u32;
        f(self.device.handle(), ei, &mut n, std::ptr::null_mut()).result().map_err(|e| format!("representations: {e}"))?;
        let mut reps = vec![vk::PipelineExecutableInternalRepresentationKHR::default(); n as usize];
        f(self.device.handle(), ei, &mut n, reps.as_mut_ptr()).result().map_err(|e| format!("representations: {e}"))?;
        let mut bufs: Vec<Vec<u8>> = reps.iter().map(|r| vec![0u8; r.data_size]).collect();
        for (r, b) in reps.iter_mut().zip(bufs.iter_mut()) {
            r.p_data = b.as_mut_ptr().cast();
        }
        f(self.device.handle(), ei, &mut n, reps.as_mut_ptr()).result().map_err(|e| format!("representations: {e}"))?;
        Ok(reps
            .iter()
            .zip(bufs)
            .map(|(r, b)| {
                let name = r.name_as_c_str().map(|c| c.to_string_lossy().into_owned()).unwrap_or_default();
                let body = if r.is_text != 0 { String::from_utf8_lossy(b.split(|&c| c == 0).next().unwrap_or(&[])).into_owned() } else { format!("({} bytes of binary)", b.len()) };
                (name, body)
            })
            .collect())
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        unsafe {
            self.device.destroy_device(None);
            self.instance.destroy_instance(None);
        }
    }
}

fn main() {
    let a = args();
    let ctx = Context::new_blocking(ContextOptions::from_env().expect("WGKERNELS_* environment")).unwrap_or_else(|e| {
        eprintln!("no GPU adapter: {e}");
        std::process::exit(1);
    });
    let caps = ctx.caps().clone();
    println!("{}\n", caps.report());
    if caps.backend != wgpu::Backend::Vulkan {
        println!("shader_stats reads Vulkan's pipeline-executable statistics; this adapter is {:?}", caps.backend);
        return;
    }
    let raw = Raw::new(&caps.adapter_name).unwrap_or_else(|e| {
        println!("unsupported here: {e}");
        std::process::exit(0);
    });
    let pipelines = collect(&ctx, &a);
    println!("{} pipelines ({} SPIR-V)\n", pipelines.len(), if a.checked { "bounds-checked" } else { "as built by default" });
    if let Some(dir) = &a.ir {
        let _ = std::fs::create_dir_all(dir);
    }
    for (n, (label, desc)) in pipelines.iter().enumerate() {
        println!("{label}");
        let result = shaders::vulkan_spirv(desc, a.checked).and_then(|spv| raw.stats(desc, &spv, a.ir.is_some()));
        match result {
            Err(e) => println!("  not compiled: {e}"),
            Ok(execs) => {
                for (name, stats, irs) in execs {
                    println!("  {name}");
                    let line: Vec<String> = stats.iter().map(|(k, v)| format!("{k} {v}")).collect();
                    println!("    {}", line.join(" | "));
                    for (i, (rname, body)) in irs.iter().enumerate() {
                        let path = format!("{}/{n:03}_{i}_{}.txt", a.ir.as_deref().unwrap_or("."), rname.replace(|c: char| !c.is_ascii_alphanumeric(), "_"));
                        let _ = std::fs::write(&path, format!("{label}\n{body}"));
                        println!("    IR {rname}: {} bytes -> {path}", body.len());
                    }
                }
            }
        }
    }
}
