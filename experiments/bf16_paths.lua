-- bf16_paths.lua: which bf16 GEMM path pays off at which size, on this CPU.
--
--   workbench --threads 1 experiments/bf16_paths.lua [--tokens 1,4,8,16,128]
--
-- Expectation: a decode-sized GeGLU MLP forward reads 28 MiB of f32 weights for very little
-- arithmetic, so bf16 weights (half the bytes) should win there if they are kept bf16 in the
-- packed panels (k-pairs, widened in registers on AVX2: "avx2bf16"); with many tokens the
-- arithmetic dominates and widening once while packing ("widen") keeps the f32 kernel's speed,
-- unless the CPU's pair instruction multiplies faster than its f32 FMAs. "auto" (the default)
-- picks by rows and by that measured rate: it should match the best path at every size.
-- Method: the dual-mode MLP (dim 768, hidden 3072) in f32 and in bf16 with the same weights,
-- each bf16 path forced in turn, contenders alternated over 5 rounds, medians; the error of
-- each bf16 path against the f32 MLP is checked first. Ratios (f32 time / bf16 time) last.
local args = require("wb.args")
local plural = require("wb.words").plural
local parser = args.parser("bf16_paths.lua", "Which bf16 GEMM path pays off at which size: the dual-mode GeGLU " ..
    "MLP (768/3072) in f32 and in bf16 on each path this CPU has.")
parser:option("--tokens", "Token counts, comma-separated.", "1,4,8,16,128"):convert(args.ints("--tokens", 1, 65536))
local tokens = args.parse(parser).tokens
local paths = {}
for _, p in ipairs({"widen", "avx2bf16", "avx512bf16", "auto"}) do
    if pcall(wb.cpu_bf16, p) then paths[#paths + 1] = p end
end
wb.cpu_bf16("auto")
print(string.format("bf16 paths on this CPU: %s (default: %s); %s", table.concat(paths, ", "),
    wb.cpu_bf16(), plural(wb.get_num_threads(), "thread")))

wb.manual_seed(0)
local m32 = wb.nn.GeGLUMLP(768, 3072, {impl = "dual"})
wb.manual_seed(0)
local m16 = wb.nn.GeGLUMLP(768, 3072, {impl = "dual", dtype = "bf16"})
local rows = {}
for _, t in ipairs(tokens) do
    local x = wb.randn({t, 768})
    local xh = x:to{dtype = "bf16"}
    local ref = m32(x)
    for _, p in ipairs(paths) do
        wb.cpu_bf16(p)
        local e = wb.rel_error(m16(xh), ref)
        assert(e < 2e-2, string.format("bf16_paths: %s at %d tokens is off by %.2e against f32", p, t, e))
    end
    local samples = {f32 = {}}
    for _, p in ipairs(paths) do samples[p] = {} end
    for _ = 1, 5 do
        table.insert(samples.f32, wb.bench(function() m32(x) end, {iters = 10, min_time_ms = 100}).median_us)
        for _, p in ipairs(paths) do
            wb.cpu_bf16(p)
            table.insert(samples[p], wb.bench(function() m16(xh) end, {iters = 10, min_time_ms = 100}).median_us)
        end
    end
    local function med(s) table.sort(s) return s[(#s + 1) // 2] end
    local row = {tokens = t, f32 = med(samples.f32)}
    local line = string.format("  tokens %-4d f32 %9.0f us", t, row.f32)
    for _, p in ipairs(paths) do
        row[p] = med(samples[p])
        line = line .. string.format("   %s %9.0f us", p, row[p])
    end
    print(line)
    rows[#rows + 1] = row
end
wb.cpu_bf16("auto")
print("\n== ratios: bf16 speed against f32 (f32 time / bf16 time) ==")
for _, r in ipairs(rows) do
    local parts = {}
    for _, p in ipairs(paths) do parts[#parts + 1] = string.format("%s %.2fx", p, r.f32 / r[p]) end
    print(string.format("  tokens %-4d %s", r.tokens, table.concat(parts, "   ")))
end
