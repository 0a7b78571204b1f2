-- machine.lua: what machine the test suite runs on, printed once before CTest's output (by
-- scripts/bootstrap.sh --test) and run as the test `machine_summary`: the CPU (model, family and
-- model numbers, the flags that pick the kernels), the CPU paths the tests exercise and those this
-- CPU cannot run, and the GEMM blocking each path uses here (CTest also runs the GEMM tests under
-- the blockings of the other CPUs seen so far: tests/CMakeLists.txt lists them).
local first, cpus = {}, 0
local f = io.open("/proc/cpuinfo")
if f then
    for line in f:lines() do
        local k, v = line:match("^([^\t:]-)%s*:%s*(.*)$")
        if k == "processor" then cpus = cpus + 1 end
        if k and cpus == 1 and first[k] == nil then first[k] = v end
    end
    f:close()
end
local flags = {}
for flag in (first.flags or ""):gmatch("%S+") do flags[flag] = true end
local has = {}
for _, name in ipairs({"avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_bf16", "amx_tile"}) do
    if flags[name] then has[#has + 1] = name end
end
print(string.format("machine: %s (family %s, model %s), %d logical CPUs, %s", first["model name"] or wb._cpu_model(),
    first["cpu family"] or "?", first.model or "?", cpus, #has > 0 and table.concat(has, " ") or "no AVX2 or AVX-512"))

local default = wb.cpu_isa()
local ran, skipped = {}, {}
for _, isa in ipairs({"avx512", "avx2", "scalar"}) do
    if pcall(wb.cpu_isa, isa) then
        local b = wb.cpu_blocking()
        ran[#ran + 1] = string.format("%s (%dx%d tile, kc %d, mc %d, nc %d%s)", isa, b.mr, b.nr, b.kc, b.mc, b.nc,
            b.forced and ", forced" or b.fixed and ", its own constants" or "")
    else
        skipped[#skipped + 1] = isa
    end
end
wb.cpu_isa(default)
print("f32 paths tested: " .. table.concat(ran, "; ") ..
    (#skipped > 0 and ("; not on this CPU (skipped): " .. table.concat(skipped, ", ")) or ""))
local pairs_ran, pairs_skipped = {"widen", "emulated"}, {}
local bf16_default = wb.cpu_bf16()
for _, path in ipairs({"avx2bf16", "avx512bf16"}) do
    if pcall(wb.cpu_bf16, path) then pairs_ran[#pairs_ran + 1] = path else pairs_skipped[#pairs_skipped + 1] = path end
end
wb.cpu_bf16(bf16_default)
print("bf16 paths tested: " .. table.concat(pairs_ran, ", ") ..
    (#pairs_skipped > 0 and ("; not on this CPU (skipped): " .. table.concat(pairs_skipped, ", ")) or ""))
local cache = wb.cpu_blocking()
print(string.format("caches read here: L1d %d KiB, L2 %d KiB, L3 share %d KiB per logical CPU; the GEMM tests also run "
    .. "under the blockings of a Xeon model 207, a Zen 3, a Zen 4 and a ragged small one", cache.l1 // 1024,
    cache.l2 // 1024, cache.l3_share // 1024))
