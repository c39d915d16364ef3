// Run the library's dispatches on Dawn (Chrome's WebGPU implementation, npm `webgpu`), one at a
// time, for tests/dawn.rs, which starts this script and talks to it over stdin/stdout:
//
//   on start   -> one JSON line: the adapter (name, features, limits, subgroup sizes)
//   request    <- u32 LE n, n bytes of JSON {code, entry, constants, params, buffers: [{size,
//                 write}], workgroups}, then the params bytes, then each buffer's bytes
//   response   -> u32 LE n, n bytes of JSON {error?}, then each written buffer's bytes (on success)
//
// The module is compiled by Tint as the browser would (the WGSL specification's dialect, as
// ShaderSource::wgsl writes it); the pipeline has the library's layout (binding 0: the params
// uniform; bindings 1..: storage buffers, read-only unless written). Pipelines are cached.
// Adapter: Dawn's Vulkan backend, SwiftShader with VK_ICD_FILENAMES=
// /usr/lib/chromium/vk_swiftshader_icd.json.

import { create, globals } from 'webgpu';

Object.assign(globalThis, globals);
// Keep the GPU object alive: dawn.node crashes when it is collected while a device is in use.
const gpu = create(['backend=vulkan']);
const adapter = await gpu.requestAdapter();
if (!adapter) {
  process.stdout.write(JSON.stringify({ error: 'no Vulkan adapter for Dawn (set VK_ICD_FILENAMES to SwiftShader)' }) + '\n');
  process.exit(1);
}
// What a browser offers: subgroups, shader-f16 where present (SwiftShader has not).
const features = ['subgroups', 'shader-f16'].filter((f) => adapter.features.has(f));
const limitNames = [
  'maxComputeInvocationsPerWorkgroup', 'maxComputeWorkgroupSizeX', 'maxComputeWorkgroupSizeY', 'maxComputeWorkgroupSizeZ',
  'maxComputeWorkgroupStorageSize', 'maxStorageBuffersPerShaderStage', 'maxStorageBufferBindingSize', 'maxBufferSize',
  'maxComputeWorkgroupsPerDimension', 'minStorageBufferOffsetAlignment', 'minUniformBufferOffsetAlignment',
];
const limits = Object.fromEntries(limitNames.map((k) => [k, adapter.limits[k]]));
const device = await adapter.requestDevice({ requiredFeatures: features, requiredLimits: Object.fromEntries(Object.entries(limits).filter(([k]) => k.startsWith('max'))) });
const info = adapter.info;
const name = [info.vendor, info.architecture, info.device, info.description].filter(Boolean).join(' ');
process.stdout.write(JSON.stringify({ adapter: name, features, limits, subgroupMinSize: info.subgroupMinSize, subgroupMaxSize: info.subgroupMaxSize }) + '\n');

// stdin as a byte stream with exact reads.
let pending = [];
let have = 0;
let waiter = null;
let ended = false;
process.stdin.on('data', (chunk) => {
  pending.push(chunk);
  have += chunk.length;
  if (waiter) waiter();
});
process.stdin.on('end', () => {
  ended = true;
  if (waiter) waiter();
});
async function read(n) {
  while (have < n) {
    if (ended) return null;
    await new Promise((resolve) => (waiter = resolve));
    waiter = null;
  }
  const all = Buffer.concat(pending);
  pending = [all.subarray(n)];
  have -= n;
  return all.subarray(0, n);
}

function send(json, buffers = []) {
  const head = Buffer.from(JSON.stringify(json));
  const len = Buffer.alloc(4);
  len.writeUInt32LE(head.length);
  process.stdout.write(Buffer.concat([len, head, ...buffers]));
}

const pipelines = new Map();
async function pipelineFor(req) {
  const key = JSON.stringify([req.entry, req.constants, req.buffers.map((b) => b.write), req.code]);
  if (pipelines.has(key)) return pipelines.get(key);
  device.pushErrorScope('validation');
  const module = device.createShaderModule({ code: req.code });
  const layout = device.createBindGroupLayout({
    entries: [
      { binding: 0, visibility: GPUShaderStage.COMPUTE, buffer: { type: 'uniform', hasDynamicOffset: true } },
      ...req.buffers.map((b, i) => ({ binding: i + 1, visibility: GPUShaderStage.COMPUTE, buffer: { type: b.write ? 'storage' : 'read-only-storage' } })),
    ],
  });
  const pipeline = device.createComputePipeline({
    layout: device.createPipelineLayout({ bindGroupLayouts: [layout] }),
    compute: { module, entryPoint: req.entry, constants: req.constants },
  });
  const error = await device.popErrorScope();
  const built = error ? { error: error.message } : { pipeline, layout };
  pipelines.set(key, built);
  return built;
}

const round4 = (n) => Math.max(4, Math.ceil(n / 4) * 4);

async function run(req, params, datas) {
  const built = await pipelineFor(req);
  if (built.error) return { error: built.error };
  device.pushErrorScope('validation');
  // As the library binds it: the parameter block at a dynamic offset into a larger uniform buffer.
  const at = device.limits.minUniformBufferOffsetAlignment;
  const span = Math.max(16, Math.ceil(params.length / 16) * 16);
  const uniform = device.createBuffer({ size: at + span, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
  device.queue.writeBuffer(uniform, at, params);
  const bufs = datas.map((d) => {
    const b = device.createBuffer({ size: round4(d.length), usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC });
    if (d.length % 4 === 0) device.queue.writeBuffer(b, 0, d);
    else device.queue.writeBuffer(b, 0, Buffer.concat([d, Buffer.alloc(round4(d.length) - d.length)]));
    return b;
  });
  const group = device.createBindGroup({ layout: built.layout, entries: [{ binding: 0, resource: { buffer: uniform, offset: 0, size: span } }, ...bufs.map((b, i) => ({ binding: i + 1, resource: { buffer: b } }))] });
  const enc = device.createCommandEncoder();
  const pass = enc.beginComputePass();
  pass.setPipeline(built.pipeline);
  pass.setBindGroup(0, group, [at]);
  pass.dispatchWorkgroups(...req.workgroups);
  pass.end();
  const reads = [];
  req.buffers.forEach((b, i) => {
    if (!b.write) return;
    const r = device.createBuffer({ size: bufs[i].size, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    enc.copyBufferToBuffer(bufs[i], 0, r, 0, bufs[i].size);
    reads.push([r, datas[i].length]);
  });
  device.queue.submit([enc.finish()]);
  const error = await device.popErrorScope();
  if (error) return { error: error.message };
  const out = [];
  for (const [r, len] of reads) {
    await r.mapAsync(GPUMapMode.READ);
    out.push(Buffer.from(r.getMappedRange().slice(0, len)));
    r.destroy();
  }
  uniform.destroy();
  bufs.forEach((b) => b.destroy());
  return { out };
}

for (;;) {
  const len = await read(4);
  if (!len) break;
  const req = JSON.parse((await read(len.readUInt32LE(0))).toString());
  const params = Buffer.from(await read(req.params));
  const datas = [];
  for (const b of req.buffers) datas.push(Buffer.from(await read(b.size)));
  const result = await run(req, params, datas);
  if (result.error) send({ error: result.error });
  else send({}, result.out);
}
device.destroy();
process.exit(0);
