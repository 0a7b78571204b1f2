-- torch_traces.lua: small traces in the formats torch.profiler writes, generated from the
-- documented schema (docs/torch-traces.md), never copied from a recording: Kineto JSON
-- (export_chrome_trace / tensorboard_trace_handler: cpu_op, user_annotation, ProfilerStep#N,
-- cuda_runtime, kernel, gpu_memcpy, ac2g flows, [memory] instants, python_function, Input Dims /
-- Input type, deviceProperties, distributedInfo) and the legacy profiler's bare array. An eager
-- GeGLU MLP step: linear (t + addmm) twice, gelu, mul, linear; variants add a .contiguous() copy
-- and a loop of small adds. Times in microseconds from `t0`; `jitter(i)` (optional) perturbs them.
local cjson = require("cjson")

local M = {}

-- A program: a list of ops per step, each {name, us (host), kernel = {name, us} or nil,
-- children = {...}, dims = {...}, types = {...}}.
local function linear(x, w, kernel_us, dt)
    return {name = "aten::linear", us = 6, dims = {x, w, {w[1]}}, types = {dt, dt, dt}, children = {
        {name = "aten::t", us = 1, dims = {w}, types = {dt}},
        {name = "aten::addmm", us = 4, dims = {{w[1]}, x, {w[2], w[1]}}, types = {dt, dt, dt},
            kernel = {name = "ampere_sgemm_64x32_sliced1x4_tn", us = kernel_us}},
    }}
end

-- The ops of one step of the eager GeGLU MLP (down(gelu(gate(x)) * up(x))); variant "b" adds a
-- copy and `adds` small adds. dtype: torch's name for the tensors' dtype ("float" unless given).
-- interleaved: in the order `gelu(gate(x)) * up(x)` runs them (gate, gelu, up, mul).
function M.mlp_step(variant, tokens, dim, hidden, adds, dtype, interleaved)
    tokens, dim, hidden = tokens or 16, dim or 64, hidden or 256
    local x, h, dt = {tokens, dim}, {tokens, hidden}, dtype or "float"
    local ops = {
        linear(x, {hidden, dim}, 20, dt), linear(x, {hidden, dim}, 20, dt),
        {name = "aten::gelu", us = 3, dims = {h}, types = {dt},
            kernel = {name = "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>", us = 4}},
        {name = "aten::mul", us = 3, dims = {h, h}, types = {dt, dt},
            kernel = {name = "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> > >", us = 4}},
    }
    if interleaved then ops[2], ops[3] = ops[3], ops[2] end
    if variant == "b" then
        ops[#ops + 1] = {name = "aten::contiguous", us = 4, dims = {h}, types = {dt}, children = {
            {name = "aten::clone", us = 3, dims = {h}, types = {dt}, children = {
                {name = "aten::copy_", us = 2, dims = {h, h}, types = {dt, dt},
                    kernel = {name = "void at::native::elementwise_kernel<128, 2, at::native::direct_copy_kernel_cuda>", us = 730}}}}}}
        for _ = 1, adds or 8 do
            ops[#ops + 1] = {name = "aten::add", us = 3, dims = {{tokens}, {tokens}}, types = {dt, dt},
                kernel = {name = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float> >", us = 2}}
        end
    end
    ops[#ops + 1] = linear(h, {dim, hidden}, 20, dt)
    return ops
end

-- Kineto JSON as a Lua table. o: steps, variant, gpu (kernels and launches), memory, python,
-- shapes (Input Dims), dtype (torch's name: "float", "c10::BFloat16"), interleaved (the ops in
-- the order gelu(gate(x)) * up(x) runs them), rank, world, jitter(i) -> extra us, t0.
function M.kineto(o)
    o = o or {}
    local ev, pid, tid, stream = {}, 4242, 4242, 7
    local t, ext, corr = o.t0 or 1000000, 0, 100000
    local n = 0
    local function jit() n = n + 1; return o.jitter and math.floor(o.jitter(n) * 1000) / 1000 or 0 end
    local function emit(op)
        ext = ext + 1
        local start, my_ext = t, ext
        t = t + 1
        local e = {ph = "X", cat = "cpu_op", name = op.name, pid = pid, tid = tid, ts = start, dur = 0,
            args = {["External id"] = my_ext, ["Sequence number"] = my_ext, ["Fwd thread id"] = 0}}
        if o.shapes ~= false then
            e.args["Input Dims"], e.args["Input type"] = op.dims, op.types
            e.args["Input Strides"] = {}
        end
        ev[#ev + 1] = e
        for _, c in ipairs(op.children or {}) do emit(c) end
        if op.kernel and o.gpu ~= false then
            corr = corr + 1
            ev[#ev + 1] = {ph = "X", cat = "cuda_runtime", name = "cudaLaunchKernel", pid = pid, tid = tid, ts = t, dur = 3,
                args = {["External id"] = my_ext, cbid = 211, correlation = corr}}
            ev[#ev + 1] = {ph = "s", id = corr, pid = pid, tid = tid, ts = t, cat = "ac2g", name = "ac2g"}
            local kus = op.kernel.us + jit() * op.kernel.us / 20
            o._gpu = math.max(o._gpu or 0, t + 5)
            ev[#ev + 1] = {ph = "X", cat = "kernel", name = op.kernel.name, pid = 0, tid = stream, ts = o._gpu, dur = kus,
                args = {["External id"] = my_ext, device = 0, stream = stream, correlation = corr, grid = {8, 1, 1},
                    block = {128, 1, 1}}}
            ev[#ev + 1] = {ph = "f", id = corr, pid = 0, tid = stream, ts = o._gpu, cat = "ac2g", name = "ac2g", bp = "e"}
            o._gpu = o._gpu + kus + 1
            t = t + 3
        end
        if o.memory and op.kernel then
            ev[#ev + 1] = {ph = "i", s = "t", cat = "cpu_instant_event", name = "[memory]", pid = pid, tid = tid, ts = t,
                args = {Bytes = 4096, ["Total Allocated"] = 4096 * ext, ["Total Reserved"] = 1 << 21, Addr = 1 << 30,
                    ["Device Id"] = 0, ["Device Type"] = 1}}
        end
        t = t + op.us + jit() * op.us / 20
        e.dur = t - start
        t = t + 1
    end
    for s = 1, o.steps or 5 do
        local step = {ph = "X", cat = "user_annotation", name = "ProfilerStep#" .. (s + 9), pid = pid, tid = tid, ts = t,
            dur = 0, args = {["External id"] = 0}}
        ev[#ev + 1] = step
        t = t + 1
        local py
        if o.python then
            py = {ph = "X", cat = "python_function", name = "mlp.py(21): forward", pid = pid, tid = tid, ts = t, dur = 0,
                args = {["Python id"] = s, ["Python parent id"] = 0}}
            ev[#ev + 1] = py
        end
        for _, op in ipairs(M.mlp_step(o.variant, o.tokens, o.dim, o.hidden, o.adds, o.dtype, o.interleaved)) do
            emit(op)
        end
        if py then py.dur = t - py.ts end
        if o.gpu ~= false then
            ev[#ev + 1] = {ph = "X", cat = "cuda_runtime", name = "cudaDeviceSynchronize", pid = pid, tid = tid, ts = t,
                dur = math.max(1, (o._gpu or t) - t), args = {cbid = 165, correlation = 0}}
            t = math.max(t, o._gpu or t) + 2
        end
        step.dur = t - step.ts
        t = t + 5
    end
    ev[#ev + 1] = {ph = "M", name = "process_name", pid = pid, tid = 0, args = {name = "python"}}
    ev[#ev + 1] = {ph = "M", name = "thread_name", pid = 0, tid = stream, args = {name = "stream 7"}}
    local doc = {schemaVersion = 1, traceEvents = ev, traceName = "mlp.pt.trace.json", baseTimeNanoseconds = 0,
        distributedInfo = {backend = "nccl", rank = o.rank or 0, world_size = o.world or 1}}
    if o.gpu ~= false then
        doc.deviceProperties = {{id = 0, name = "NVIDIA H100 80GB HBM3", totalGlobalMem = 85031714816, computeMajor = 9,
            computeMinor = 0, numSms = 132}}
    end
    return doc
end

-- The legacy profiler's export (torch without Kineto): a bare array, pids "CPU functions" and
-- "CUDA functions", each kernel after an "s"/"f" flow pair from its op.
function M.legacy(o)
    o = o or {}
    local out, t, flow = {}, 1000, 0
    local function emit(op)
        local start = t
        t = t + 1
        local e = {name = op.name, ph = "X", ts = start, dur = 0, tid = 1, pid = "CPU functions", args = {}}
        out[#out + 1] = e
        for _, c in ipairs(op.children or {}) do emit(c) end
        t = t + op.us
        e.dur = t - start
        if op.kernel and o.gpu ~= false then
            out[#out + 1] = {name = op.name, ph = "s", ts = start, tid = 1, pid = "CPU functions", id = flow, cat = "cpu_to_cuda", args = {}}
            out[#out + 1] = {name = op.name, ph = "f", ts = start + 2, tid = 0, pid = "CUDA functions", id = flow, cat = "cpu_to_cuda", args = {}}
            out[#out + 1] = {name = op.kernel.name, ph = "X", ts = start + 2, dur = op.kernel.us, tid = 0, pid = "CUDA functions", args = {}}
            flow = flow + 1
        end
        t = t + 1
    end
    for s = 1, o.steps or 3 do
        local step = {name = "ProfilerStep#" .. s, ph = "X", ts = t, dur = 0, tid = 1, pid = "CPU functions", args = {}}
        out[#out + 1] = step
        t = t + 1
        for _, op in ipairs(M.mlp_step(o.variant)) do emit(op) end
        step.dur = t - step.ts + 800
        t = t + 801
    end
    return out
end

-- Writes a table as JSON to path; gzip'ed (by the gzip program) when path ends in .gz.
function M.write(path, doc)
    local plain = path:gsub("%.gz$", "")
    local f = assert(io.open(plain, "w"))
    f:write(cjson.encode(doc))
    f:close()
    if plain ~= path then assert(os.execute("gzip -n -f '" .. plain .. "'"), "gzip failed on " .. plain) end
    return path
end

return M
