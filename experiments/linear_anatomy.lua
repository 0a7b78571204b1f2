-- linear_anatomy.lua: the nn.Linear lesson, as a lab notebook.
--
--   workbench experiments/linear_anatomy.lua [--out DIR]
--
-- Expectation (as PyTorch's profiler shows for nn.Linear on a GPU): a linear is a composite op.
-- It calls t() on the weight -- a view: it moves no data and launches no kernel -- and then
-- addmm, whose single kernel is a GEMM named with the BLAS layout "tn" (x times the transposed
-- weight) that adds the bias in its epilogue: no separate add op, no second kernel.
-- Method: Linear(32, 64, bias) on x[1024, 32]; profile 5 steps with wait=1, warmup=1, active=3;
-- print the table; assert the expectation with p:expect; write a Perfetto trace.

local args = require("wb.args")
local parser = args.parser("linear_anatomy.lua", "The nn.Linear lesson: a linear is t() (a view) and addmm (one " ..
    "'tn' GEMM with the bias in its epilogue); table, expectations, Perfetto trace.")
parser:option("--out", "Output folder (default: workbench --out, else out/linear_anatomy/<timestamp>-<pid>).")
local out_dir = args.parse(parser).out or wb.options.out or ("out/linear_anatomy/" .. os.date("%Y%m%d-%H%M%S"))

wb.manual_seed(wb.options.seed or 0)
local lin = wb.nn.Linear(32, 64, {bias = true})
local x = wb.randn({1024, 32})
print(tostring(lin) .. " on x" .. "[1024, 32], device " .. wb.default_device() ..
    (x.device == "cpu" and (", CPU path " .. wb.cpu_isa()) or (", " .. wb.device_info("cuda").name)))

-- correctness first: the fused kernel against the composition it replaces
local ref = wb.matmul(x, lin.weight:t():contiguous()) + lin.bias
local y = lin(x)
print(string.format("rel. error against matmul + add: %.2e", wb.rel_error(y, ref)))
assert(wb.rel_error(y, ref) < 1e-6, "linear_anatomy: the linear disagrees with matmul + add")

local p = wb.profiler.profile{activities = {"cpu", "device"}, schedule = {wait = 1, warmup = 1, active = 3},
    record_shapes = true, with_flops = true, with_stack = true}
p:start()
for _ = 1, 5 do
    wb.profiler.range("linear_fwd", function()
        local _ = lin(x)
        -- cuda runs kernels asynchronously: wait inside the range so its kernel lands in it
        if x.device == "cuda" then wb.synchronize("cuda") end
    end)
    p:step()
end
p:stop()

print()
print(p:table{sort_by = "cpu_total", group_by_input_shape = true})

-- the lesson, asserted: per step one linear, one t, one addmm, one "tn" kernel, no add
p:expect{ops = {linear = 1, t = 1, addmm = 1, add = 0}, kernels = 1, no_kernel_for = {"t"}}
p:expect{range = "linear_fwd", kernels = {count = 1, match = "_tn"}}
local flops = 2 * 1024 * 32 * 64
for _, e in ipairs(p:events()) do
    if e.cat == "kernel" then
        assert(e.flops == flops, string.format("kernel %s reports %g flops, expected %d", e.name, e.flops, flops))
    end
end
print(string.format("\nAll expectations held: per step, linear -> t (a view, no kernel) -> addmm -> one kernel " ..
    "(%s) carrying the bias; %d flops each; no add op.", (function()
        for _, e in ipairs(p:events()) do if e.cat == "kernel" then return e.name end end
    end)(), flops))

-- The same lesson in the profiler's words: its findings come from the events and the kernel's
-- kind (op, layout, epilogue), not from this script.
print("\nWhat the profile shows (p:explain()):")
local found = {}
for _, f in ipairs(p:explain()) do found[f.rule] = f end
assert(found.view and found.view.evidence.op == "t", "linear_anatomy: no view finding for t")
assert(found.epilogue and found.epilogue.evidence.epilogue:find("bias", 1, true),
    "linear_anatomy: no epilogue finding with the bias")
assert(found.layout and found.layout.evidence.layout == "tn", "linear_anatomy: no layout finding for tn")

assert(wb.mkdir_p(out_dir))
local trace = p:export_chrome_trace(out_dir .. "/linear_anatomy.trace.json")
print("\nTrace written to " .. trace)
print("Open it at https://ui.perfetto.dev (Open trace file) or chrome://tracing: host ops on the 'host' process,")
print(string.format("kernels on '%s', and an arrow from each addmm to the kernel it launched.",
    x.device == "cpu" and "cpu:0 stream 0" or "cuda:0 stream N"))
