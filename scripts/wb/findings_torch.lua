-- wb.findings_torch: the rules for traces torch.profiler wrote, in torch's words. torch records no
-- data flow and its kernels carry vendor names only, so these read the op tree, aten's op names
-- and the recorded shapes and dtypes (record_shapes=True): views, copies, the GEMMs and their
-- precision, chains of pointwise ops on one shape, small kernels and launches per op. The groups
-- come from C (core/observe/findings_torch.c); wb.findings runs these on any trace from another
-- tool, in place of the rules that need what such a trace lacks.

local M = {}

local function us(ns) return string.format("%.1f us", ns / 1e3) end
local function pct(x) return string.format("%.0f%%", 100 * x) end
-- n may be a mean (kernels per call: 1.5 when one of two calls launched a second kernel)
local function plural(n, word)
    local whole = n == math.floor(n)
    return string.format(whole and "%.0f %s%s" or "%.1f %s%s", n, word, n == 1 and "" or "s")
end

-- "[16, 256] float": an input's shape and torch's dtype name, when recorded.
local function input_str(g, i)
    local s = g.shapes and g.shapes[i]
    if type(s) ~= "table" then return nil end
    local dt = g.dtypes and g.dtypes[i]
    return "[" .. table.concat(s, ", ") .. "]" .. (type(dt) == "string" and (" " .. dt) or "")
end

local function inputs_str(g)
    local parts = {}
    for i = 1, #(g.shapes or {}) do parts[#parts + 1] = input_str(g, i) or "-" end
    return table.concat(parts, ", ")
end

-- The rules' order on a trace from another tool, and what each needs beyond its ops' times.
M.ORDER = {"view", "copy", "gemm", "precision", "fusion", "epilogue", "layout", "host_bound", "gaps", "small_kernels",
    "launches", "imbalance", "roofline", "unreliable", "sync", "memcpy"}
local OPS = "the trace has no ops (cpu_op events): it is not torch.profiler's"
local SHAPES = "the trace has no shapes; record with record_shapes=True"
local KERNELS = "the trace has no device kernels; record with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]"
M.NEEDS = {
    view = {ops = OPS},
    copy = {ops = OPS},
    gemm = {ops = OPS, shapes = SHAPES},
    precision = {ops = OPS, kernels = "the trace has no GPU kernels: fp32 is the usual GEMM precision on a CPU",
        shapes = SHAPES, dtypes = "the trace has no dtypes (Input type); record with record_shapes=True"},
    fusion = {ops = OPS, shapes = SHAPES},
    small_kernels = {kernels = KERNELS},
    launches = {ops = OPS, kernels = KERNELS,
        links = "no kernel is linked to the op that launched it (no External id or correlation the trace's ops carry)"},
}

local report = {}
M.report = report

-- view: an aten view op (t, transpose, permute, view, expand, as_strided, ...) with no kernel and
-- no aten::copy_ under it: it rewrote shape and strides only.
function report.view(G, out)
    for _, g in ipairs(G.torch.view) do
        local shape = input_str(g, 1)
        out[#out + 1] = {rule = "view", severity = "info",
            message = string.format("%s is a view: no kernel launched, no data moved (%s%s; %s of host time each)",
                g.name, plural(g.calls, "call"), shape and (", " .. shape) or "", us(g.host_ns / g.calls)),
            evidence = {op = g.name, calls = g.calls, input_shape = g.shapes and g.shapes[1], time_ns = g.host_ns,
                ts_ns = g.ts, bytes = 0, kernels = 0}}
    end
end

-- copy: aten::copy_, or an op with one under it (contiguous -> clone -> copy_, reshape, to): data
-- read and written again; a layout copy (contiguous, clone, reshape, flatten) is one a view would avoid.
local LAYOUT_COPY = {["aten::contiguous"] = true, ["aten::clone"] = true, ["aten::reshape"] = true,
    ["aten::flatten"] = true}
function report.copy(G, out)
    for _, g in ipairs(G.torch.copy) do
        local shape = input_str(g, 1)
        local where = g.kernels > 0 and string.format("%s of device time per call in %s", us(g.device_ns / g.calls),
            plural(g.kernels / g.calls, "kernel")) or string.format("%s of host time per call (the copy runs inside it)",
            us(g.host_ns / g.calls))
        out[#out + 1] = {rule = "copy", severity = LAYOUT_COPY[g.chain[1]] and "warn" or "info",
            message = string.format("%s is a copy: %s read and written (%s per call); %s; %s", g.name,
                shape or "its input", g.bytes and string.format("%d bytes", g.bytes // g.calls) or "bytes unknown",
                where, plural(g.calls, "call")),
            evidence = {chain = g.chain, op = g.chain[1], calls = g.calls, input_shape = g.shapes and g.shapes[1],
                bytes = g.bytes, kernels = g.kernels, device_ns = g.device_ns, host_ns = g.host_ns,
                time_ns = g.kernels > 0 and g.device_ns or g.host_ns, ts_ns = g.ts}}
    end
end

-- The GEMM's M, N, K and FLOPs a call from its inputs' shapes (addmm(bias, a, b), mm/bmm/matmul(a,
-- b), linear(x, w, bias)); nil when a shape is missing or they do not multiply.
local A_AT = {["aten::addmm"] = 2, ["aten::_addmm_activation"] = 2, ["aten::baddbmm"] = 2, ["aten::addbmm"] = 2}
function M.gemm_size(g)
    local ia = A_AT[g.name] or 1
    local a, b = g.shapes and g.shapes[ia], g.shapes and g.shapes[ia + 1]
    if type(a) ~= "table" or type(b) ~= "table" or #a < 2 or #b < 1 then return nil end
    local k, n = a[#a], nil
    if g.name == "aten::linear" then
        if b[#b] ~= k then return nil end
        n = b[1]
    else
        if #b < 2 or b[#b - 1] ~= k then return nil end
        n = b[#b]
    end
    local numel = 1
    for _, d in ipairs(a) do numel = numel * d end
    local m = k > 0 and numel // k or 0
    return {m = m, n = n, k = k, flops = 2.0 * m * n * k} -- (a float: the product may pass 2^63)
end

-- gemm: the GEMMs that do the work (addmm, mm, bmm, ...: none under them), with their shapes.
function report.gemm(G, out)
    for _, g in ipairs(G.torch.gemm) do
        local size = M.gemm_size(g)
        local on_device = g.kernels > 0
        local t = on_device and g.device_ns or g.host_ns
        local rate = size and t > 0 and string.format(" (%.1f GFLOP/s%s)", size.flops * g.calls / t,
            on_device and "" or " on the CPU") or ""
        out[#out + 1] = {rule = "gemm", severity = "info",
            message = string.format("%s %s: %s%s; %s, %s of %s time each%s%s", g.name, inputs_str(g),
                size and string.format("M=%d N=%d K=%d, ", size.m, size.n, size.k) or "",
                size and string.format("%.3g MFLOP a call", size.flops / 1e6) or "sizes that do not multiply",
                plural(g.calls, "call"), us(t / g.calls), on_device and "device" or "host",
                on_device and string.format(" in %s", plural(g.kernels / g.calls, "kernel")) or "", rate),
            evidence = {op = g.name, calls = g.calls, shapes = g.shapes, dtypes = g.dtypes, m = size and size.m,
                n = size and size.n, k = size and size.k, flops = size and size.flops, device_ns = g.device_ns,
                host_ns = g.host_ns, time_ns = t, ts_ns = g.ts}}
    end
end

-- precision: GEMMs run in float on the GPU, where bf16 (autocast) or TF32 would use the tensor cores.
function report.precision(G, out)
    local list, time, ts = {}, 0, math.huge
    for _, g in ipairs(G.torch.gemm) do
        local ia = A_AT[g.name] or 1
        if g.kernels > 0 and g.dtypes and g.dtypes[ia] == "float" then
            list[#list + 1] = g
            time, ts = time + g.device_ns, math.min(ts, g.ts)
        end
    end
    if #list == 0 then return end
    table.sort(list, function(a, b) return a.device_ns > b.device_ns end)
    local names = {}
    for i, g in ipairs(list) do
        if i > 3 then names[#names + 1] = string.format("%d more", #list - 3); break end
        names[#names + 1] = string.format("%s %s (%s a call)", g.name, inputs_str(g), us(g.device_ns / g.calls))
    end
    local all = G.torch.kernel_sizes.time_ns
    out[#out + 1] = {rule = "precision", severity = "warn",
        message = string.format("%s in float (fp32) on the GPU: %s; %s of device time%s; under " ..
            "torch.autocast(\"cuda\", dtype=torch.bfloat16) they would run in bf16, or with " ..
            "torch.backends.cuda.matmul.allow_tf32 = True in TF32, on the tensor cores (the trace records dtypes, " ..
            "not whether TF32 was on)", plural(#list, "GEMM shape") .. (#list == 1 and " runs" or " run"),
            table.concat(names, ", "), us(time), all > 0 and string.format(" (%s of all kernel time)", pct(time / all)) or ""),
        evidence = {gemms = #list, time_ns = time, ts_ns = ts}}
end

-- fusion: sibling pointwise ops (gelu then mul, ...) where the next reads a tensor of the size and
-- dtype the one before wrote: one fused kernel would not write and read it again. The shapes say
-- so, not a data flow (torch records none).
function report.fusion(G, out)
    for _, g in ipairs(G.torch.fusion) do
        local inter = input_str(g, g.input)
        out[#out + 1] = {rule = "fusion", severity = "warn",
            message = string.format("%s could be one kernel: each op reads a %s the one before it wrote " ..
                "(by the recorded shapes; torch records no data flow); fused, %s would not be written and read " ..
                "again per instance (%s, %s in these ops' %s); torch.compile fuses such chains", g.name,
                inter and (inter .. " tensor") or "tensor of the size", g.bytes and
                string.format("%d bytes", g.bytes) or "the intermediate (a dtype the workbench does not size)",
                plural(g.calls, "instance"), us(g.device_ns), G.device_events > 0 and "kernels" or "host time"),
            evidence = {chain = g.chain, bytes = g.bytes, instances = g.calls, time_ns = g.device_ns, ts_ns = g.ts,
                intermediate_shape = g.shapes and g.shapes[g.input], intermediate_dtype = g.dtypes and g.dtypes[g.input]}}
    end
end

local function launching(G)
    local list = {}
    for _, g in ipairs(G.torch.launches) do list[#list + 1] = g end
    return list
end

-- small_kernels: kernels shorter than TH.small_kernel_ns, as a share of the kernels and of device
-- time, and the ops that launched the most of them.
function report.small_kernels(G, out, ctx, TH)
    local s = G.torch.kernel_sizes
    if s.small == 0 then return end
    local list = launching(G)
    table.sort(list, function(a, b) return a.small > b.small or (a.small == b.small and a.name < b.name) end)
    local top = {}
    for _, g in ipairs(list) do
        if g.small == 0 or #top == 3 then break end
        top[#top + 1] = string.format("%s %d (%s each)", g.name, g.small, us(g.small_ns / g.small))
    end
    local share = s.small / s.kernels
    out[#out + 1] = {rule = "small_kernels", severity = share >= 0.5 and "warn" or "info",
        message = string.format("%d of %s (%s) ran under %s, %s of device time: %s; each costs a launch whatever " ..
            "its size (fusion makes fewer kernels, CUDA graphs or torch.compile(mode=\"reduce-overhead\") fewer launches)",
            s.small, plural(s.kernels, "kernel"), pct(share), us(TH.small_kernel_ns),
            pct(s.time_ns > 0 and s.small_ns / s.time_ns or 0), table.concat(top, ", ")),
        evidence = {kernels = s.kernels, small = s.small, small_ns = s.small_ns, kernel_ns = s.time_ns,
            threshold_ns = TH.small_kernel_ns, time_ns = s.small_ns, ts_ns = s.ts}}
end

-- launches: per op that launched kernels (the most launches first, TH.launches_listed of them):
-- kernels per call, the launch call's mean time and the kernel time per launch; a launch that
-- takes longer than its kernel runs is a warning (the GPU waits for the host).
function report.launches(G, out, ctx, TH)
    local list = {}
    for _, g in ipairs(launching(G)) do if g.op and g.kernels > 0 then list[#list + 1] = g end end
    table.sort(list, function(a, b) return a.kernels > b.kernels or (a.kernels == b.kernels and a.name < b.name) end)
    for i, g in ipairs(list) do
        if i > TH.launches_listed then break end
        local api = g.launches > 0 and g.launch_ns / g.launches
        local kernel = g.device_ns / g.kernels
        out[#out + 1] = {rule = "launches", severity = api and api >= kernel and "warn" or "info",
            message = string.format("%s: %.1f kernels per call (%s, %s); %s, %s of kernel time per launch%s", g.name,
                g.kernels / math.max(1, g.calls), plural(g.calls, "call"),
                plural(g.kernels, "kernel"), api and string.format("%s per launch call", us(api)) or
                "no launch calls recorded", us(kernel), api and api >= kernel and
                    ": the launch takes longer than the kernel runs" or ""),
            evidence = {op = g.name, calls = g.calls, kernels = g.kernels, launches = g.launches,
                launch_ns = g.launch_ns, kernel_ns = g.device_ns, time_ns = g.launch_ns + g.device_ns, ts_ns = g.ts}}
    end
end

return M
