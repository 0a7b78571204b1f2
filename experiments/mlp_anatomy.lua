-- mlp_anatomy.lua: a GeGLU MLP forward taken apart, kernel by kernel, as a lab notebook.
--
--   workbench experiments/mlp_anatomy.lua [--tokens 16] [--dim 768] [--hidden 3072] [--out DIR]
--
-- Expectation. A GeGLU MLP is down(gelu_tanh(gate(x)) * up(x)).
--   eager: linear, linear, gelu, mul, linear  -> 5 kernels per forward
--   fused: gelu and mul in one pointwise pass -> 4 kernels; the gelu output never travels
--          through memory (2 x [tokens, hidden] floats fewer: written once, read once)
--   dual:  gate and up in one dual GEMM whose epilogue applies the GeGLU -> 2 kernels; the two
--          [tokens, hidden] products never reach memory either
-- All three compute the same function. Method: check each against eager, profile a few
-- forwards per mode inside a range, assert the kernel counts with p:expect, and read the
-- bytes each mode must move from the profiler's per-kernel byte counts.

local args = require("wb.args")
local plural = require("wb.words").plural
local parser = args.parser("mlp_anatomy.lua", "The MLP lesson: 5 / 4 / 2 kernels per GeGLU MLP forward (eager, " ..
    "fused, dual) and the bytes fusion keeps out of memory.")
parser:option("--tokens", "Tokens per forward.", "16"):convert(args.int("--tokens", 1, 65536))
parser:option("--dim", "Model dimension.", "768"):convert(args.int("--dim", 1, 65536))
parser:option("--hidden", "Hidden dimension.", "3072"):convert(args.int("--hidden", 1, 262144))
parser:option("--out", "Output folder (default: workbench --out, else out/mlp_anatomy/<timestamp>-<pid>).")
local opts = args.parse(parser)
local out_dir = opts.out or wb.options.out or ("out/mlp_anatomy/" .. os.date("%Y%m%d-%H%M%S"))
local T, D, H = opts.tokens, opts.dim, opts.hidden

wb.manual_seed(wb.options.seed or 0)
local mlp = wb.nn.GeGLUMLP(D, H, {impl = "eager"})
local x = wb.randn({T, D})
local cuda = x.device == "cuda"
print(string.format("%s on x[%d, %d]; %s", tostring(mlp), T, D, cuda and ("cuda: " .. wb.device_info("cuda").name)
    or string.format("CPU path %s, %s", wb.cpu_isa(), plural(wb.get_num_threads(), "thread"))))

-- On cuda the dual mode is one cuBLASLt GEMM on [W_gate; W_up] plus the fused GeGLU kernel (no
-- dual-GEMM epilogue exists there), then down: 3 kernels, and the products do reach memory.
local expected_kernels = {eager = 5, fused = 4, dual = cuda and 3 or 2}
local modes = {"eager", "fused", "dual"}
mlp.impl = "eager"
local ref = mlp(x)
local rows = {}
for _, mode in ipairs(modes) do
    mlp.impl = mode
    local err = wb.rel_error(mlp(x), ref)
    assert(err < 1e-5, string.format("mlp_anatomy: %s disagrees with eager (rel. error %.2e)", mode, err))
    local p = wb.profiler.profile{with_flops = true, record_shapes = true}
    p:start()
    for _ = 1, 3 do
        wb.profiler.range("mlp_fwd", function()
            local _ = mlp(x)
            if cuda then wb.synchronize("cuda") end -- kernels run after the launch returns
        end)
    end
    p:stop()
    p:expect{range = "mlp_fwd", kernels = expected_kernels[mode]}
    local names, bytes, flops, device_ns = {}, 0, 0, 0
    for _, e in ipairs(p:events()) do
        if e.cat == "kernel" then
            if #names < expected_kernels[mode] then names[#names + 1] = e.name end
            bytes, flops, device_ns = bytes + e.bytes / 3, flops + e.flops / 3, device_ns + e.dur_ns / 3
        end
    end
    rows[#rows + 1] = {mode = mode, err = err, kernels = #names, names = names, bytes = bytes, flops = flops,
        us = device_ns / 1e3, findings = p:findings()}
    assert(wb.mkdir_p(out_dir))
    p:export_chrome_trace(string.format("%s/mlp_%s.trace.json", out_dir, mode))
end

print(string.format("\n%-6s %8s %10s %14s %12s  %s", "mode", "kernels", "rel.err", "bytes/forward", "kernel us",
    "kernels in order"))
for _, r in ipairs(rows) do
    print(string.format("%-6s %8d %10.1e %14.0f %12.1f  %s", r.mode, r.kernels, r.err, r.bytes, r.us,
        table.concat(r.names, ", ")))
end

local inter = T * H * 4 -- one [tokens, hidden] fp32 intermediate
local eager, fused, dual = rows[1], rows[2], rows[3]

-- What each profile shows, in the profiler's words (wb.findings: from the events and the kernels'
-- kinds, not from this script), and the lesson asserted on them.
local function fusion_of(r)
    for _, f in ipairs(r.findings) do if f.rule == "fusion" then return f end end
end
for _, r in ipairs(rows) do
    print(string.format("\nFindings, %s:", r.mode))
    print(require("wb.findings").format(r.findings))
end
local ef = fusion_of(eager)
assert(ef and ef.evidence.chain == "gelu -> mul", "mlp_anatomy: the eager profile shows no gelu -> mul fusion chance")
assert(ef.evidence.bytes == 2 * inter, string.format("mlp_anatomy: the fusion finding counts %s bytes, expected %d",
    tostring(ef.evidence.bytes), 2 * inter))
assert(not fusion_of(fused) and not fusion_of(dual), "mlp_anatomy: a fused mode still shows a fusion chance")
if cuda then
    print(string.format("\nAll expectations held on cuda: 5 / 4 / 3 kernels per forward and the same function. " ..
        "The byte lesson below is the CPU's: its dual GEMM keeps gate and up in registers, while cuBLASLt writes " ..
        "the [tokens, 2*hidden] product. Run without --device cuda to see it."))
    print("Traces: " .. out_dir .. "/mlp_{eager,fused,dual}.trace.json (open at https://ui.perfetto.dev)")
    return
end
print(string.format("\nOne [tokens, hidden] intermediate is %d bytes (%.2f MiB).", inter, inter / 1048576))
print(string.format("fused moves %.0f bytes fewer than eager = %.2f intermediates (the gelu output, written and read)",
    eager.bytes - fused.bytes, (eager.bytes - fused.bytes) / inter))
local x_bytes = T * D * 4
print(string.format("dual moves %.0f bytes fewer than fused = %.2f intermediates (gate and up, each written and " ..
    "read) + %d bytes (x is read once for both products, not twice)", fused.bytes - dual.bytes,
    (fused.bytes - dual.bytes - x_bytes) / inter, x_bytes))
assert(math.abs((eager.bytes - fused.bytes) - 2 * inter) < 1, "mlp_anatomy: fused should save two intermediates")
assert(math.abs((fused.bytes - dual.bytes) - 4 * inter - x_bytes) < 1,
    "mlp_anatomy: dual should save four more intermediates and one read of x")
print("\nAll expectations held: 5 / 4 / 2 kernels per forward, the same function, and the intermediates that")
print("fusion keeps out of memory are exactly the ones the byte counts no longer show.")
print("Traces: " .. out_dir .. "/mlp_{eager,fused,dual}.trace.json (open at https://ui.perfetto.dev)")
