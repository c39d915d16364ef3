// Compile every pipeline that tests/tint.rs wrote out with Tint, through Dawn's WebGPU for Node
// (npm `webgpu`). Per pipeline: createShaderModule (Tint's front end: parsing, types, the
// uniformity analysis), then createComputePipeline with its override values (Tint specialises
// the module; Dawn checks it against the device's limits), each inside a validation error scope.
//
// Backends:
//   --backend=null    (default) Dawn's null backend: Tint and Dawn's validation without a driver,
//                     about 5 s for all pipelines; it has shader-f16 and subgroups, so f16
//                     modules are compiled too. Its limits are WebGPU's defaults.
//   --backend=vulkan  the Vulkan adapter Dawn finds, e.g. SwiftShader (VK_ICD_FILENAMES=
//                     /usr/lib/chromium/vk_swiftshader_icd.json): every pipeline is also compiled
//                     to machine code; minutes. f16 modules fail there (no shader-f16).
//
// What may fail, and nothing else (exit 1 otherwise):
//   wgpu_cooperative_matrix  the module enables wgpu's own extension (Matrix variants, in no
//                            browser; the probe never selects them without the feature)
//   f16                      the module enables f16 and the adapter has no shader-f16
//   limits                   only the pipeline step fails, and only because the plan (made for
//                            the test kit's nominal device: 48 KiB of workgroup memory, subgroups
//                            of 32) exceeds this device's limits; a context plans from its own
// A failure of the first two kinds must name the extension, one of the third must be a limit
// message: any other message fails the gate.
//
// Usage: node tools/tint/compile.mjs DIR [--backend=null|vulkan] [--verbose]
//        (DIR holds pipelines.json; prints one FAIL line per failure, then the counts)

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { create, globals } from 'webgpu';

const args = process.argv.slice(2);
const dir = args.find((a) => !a.startsWith('--'));
const verbose = args.includes('--verbose');
const backend = (args.find((a) => a.startsWith('--backend=')) ?? '--backend=null').slice('--backend='.length);
if (!dir) {
  console.error('usage: node compile.mjs DIR [--backend=null|vulkan] [--verbose]');
  process.exit(2);
}
Object.assign(globalThis, globals);
// Keep the GPU object alive: dawn.node crashes when it is collected while a device is in use.
const gpu = create([`backend=${backend}`]);
const adapter = await gpu.requestAdapter();
if (!adapter) {
  console.error(`no WebGPU adapter on the ${backend} backend (for vulkan: is VK_ICD_FILENAMES set, e.g. to SwiftShader?)`);
  process.exit(1);
}
const offered = new Set(adapter.features);
const wanted = ['subgroups', 'shader-f16'].filter((f) => offered.has(f));
const limits = {};
for (const k of ['maxComputeInvocationsPerWorkgroup', 'maxComputeWorkgroupSizeX', 'maxComputeWorkgroupSizeY', 'maxComputeWorkgroupStorageSize', 'maxStorageBuffersPerShaderStage']) {
  limits[k] = adapter.limits[k];
}
const device = await adapter.requestDevice({ requiredFeatures: wanted, requiredLimits: limits });
const info = adapter.info;
console.log(`adapter (${backend}): ${[info.vendor, info.architecture, info.device, info.description].filter(Boolean).join(' ')}; features: ${wanted.join(', ') || 'none'}; limits: ${JSON.stringify(limits)}`);

// The extension a module enables that the adapter cannot give, if any.
function missingExtension(code) {
  if (/^\s*enable\s+wgpu_cooperative_matrix\s*;/m.test(code)) return 'wgpu_cooperative_matrix';
  if (/^\s*enable\s+f16\s*;/m.test(code) && !offered.has('shader-f16')) return 'f16';
  return null;
}
const limitMessage = /(is larger than|exceeds) the maximum allowed/;

// Tint's first error line of a message (the kind of failure).
function firstError(message) {
  const lines = message.split('\n');
  return (lines.find((l) => / error: /.test(l)) ?? lines[0]).replace(/^.* error: /, '');
}

// One pipeline: [stage that failed, message] or null.
async function compile(p, code) {
  device.pushErrorScope('validation');
  // (Not getCompilationInfo: dawn.node 0.6.2 crashes on it for some failing modules; the error
  // scope carries Tint's full message.)
  const module = device.createShaderModule({ code });
  const compiled = await device.popErrorScope();
  if (compiled) return ['module', compiled.message];
  device.pushErrorScope('validation');
  device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: p.entry, constants: p.constants } });
  const built = await device.popErrorScope();
  return built ? ['pipeline', built.message] : null;
}

const pipelines = JSON.parse(readFileSync(join(dir, 'pipelines.json'), 'utf8'));
const counts = { ok: 0, allowed: {}, failed: 0 };
const kinds = new Map();
const t0 = Date.now();
for (const p of pipelines) {
  const code = readFileSync(join(dir, p.file), 'utf8');
  const missing = missingExtension(code);
  const failure = await compile(p, code);
  let allowed = null;
  if (failure && missing && failure[1].includes(missing)) allowed = missing;
  else if (failure && !missing && failure[0] === 'pipeline' && limitMessage.test(failure[1])) allowed = 'limits';
  if (!failure && !missing) {
    counts.ok++;
    continue;
  }
  if (allowed) {
    counts.allowed[allowed] = (counts.allowed[allowed] ?? 0) + 1;
    if (verbose) console.log(`allowed (${allowed}) ${p.label}: ${firstError(failure[1])}`);
    continue;
  }
  counts.failed++;
  const first = failure ? firstError(failure[1]) : `compiles although it enables ${missing}, which the adapter lacks`;
  kinds.set(first.slice(0, 140), (kinds.get(first.slice(0, 140)) ?? 0) + 1);
  console.log(`FAIL ${p.label} (${p.file}, entry ${p.entry}; ${p.sources.join(' + ')}):`);
  console.log(verbose && failure ? failure[1] : `  ${first}`);
}
const secs = ((Date.now() - t0) / 1000).toFixed(1);
const allowed = Object.entries(counts.allowed).map(([k, n]) => `${k} ${n}`).join(', ') || 'none';
console.log(`Tint (${backend}): ${pipelines.length} pipelines: ${counts.ok} compile and build; allowed failures: ${allowed}; ${counts.failed} failed; ${secs} s`);
for (const [kind, n] of [...kinds].sort((a, b) => b[1] - a[1])) console.log(`  ${n} x ${kind}`);
device.destroy();
process.exit(counts.failed === 0 ? 0 : 1);
