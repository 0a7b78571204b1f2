-- test_torch_traces.lua: traces users already have (issue 43), read by explain, diff and
-- wb.trace.load: Kineto JSON (CPU only; with GPU kernels, flows, memory and Python frames), the
-- legacy array, gzip, a TensorBoard folder of per-rank files, any Chrome trace; and the refusals.
-- The traces come from tests/torch_traces.lua, which writes the documented schema.
local lu = require("luaunit")
local cjson = require("cjson")
local scratch = require("scratch")
local T = require("torch_traces")
local EXE = scratch.exe()

-- (stdout, stderr, status) of `workbench ARGS`.
local function run(args)
    local err = scratch.path(".err")
    local p = io.popen(EXE .. " " .. args .. " 2>" .. err)
    local out = p:read("a")
    local _, _, code = p:close()
    local f = io.open(err)
    local e = f:read("a")
    f:close()
    return out, e, code
end

local function count(s, pat)
    local n = 0
    for _ in s:gmatch(pat) do n = n + 1 end
    return n
end

function test_kineto_cpu_only_explains_and_lists_the_rules_it_skipped()
    local path = T.write(scratch.path(".pt.trace.json"), T.kineto({gpu = false, steps = 4}))
    local q = wb.trace.load(path)
    lu.assertEquals(q.trace_format, "kineto")
    local steps, ops = {}, 0
    for e in q:each_event() do
        if e.cat == "step" then steps[#steps + 1] = e.name end
        if e.cat == "op" then ops = ops + 1 end
    end
    lu.assertEquals(steps, {"ProfilerStep#10", "ProfilerStep#11", "ProfilerStep#12", "ProfilerStep#13"})
    lu.assertEquals(ops, 4 * 11) -- linear (t, addmm) x3, gelu, mul
    local out, err, code = run("explain " .. path)
    lu.assertEquals(code, 0, err)
    lu.assertStrContains(out, "a torch.profiler trace (Kineto JSON): 44 ops, 4 steps")
    lu.assertStrContains(out, "[skipped] host_bound: the trace has no device kernels; record with activities=")
    lu.assertStrContains(out, "[info] view: aten::t is a view") -- read from the op tree, not a data flow
    local list = cjson.decode((run("explain --json " .. path)))
    local skipped = {}
    for _, f in ipairs(list) do if f.severity == "skipped" then skipped[f.rule] = f.message end end
    lu.assertStrContains(skipped.gaps, "no device kernels")
end

function test_kineto_gpu_trace_links_kernels_shapes_frames_and_memory()
    local path = T.write(scratch.path(".json"), T.kineto({steps = 3, memory = true, python = true}))
    local q = wb.trace.load(path)
    local kernels, linked, runtime, memory, framed, addmm = 0, 0, 0, 0, 0, nil
    local ops = {}
    for e in q:each_event() do
        if e.cat == "op" then ops[e.id] = e end
    end
    for e in q:each_event() do
        if e.cat == "kernel" then
            kernels = kernels + 1
            local op = ops[e.correlation]
            if op then linked = linked + 1 end
            if op and op.name == "aten::addmm" then addmm = op end
        elseif e.cat == "runtime" then runtime = runtime + 1
        elseif e.cat == "memory" then memory = memory + 1
        elseif e.cat == "op" and e.src == "mlp.py:21" then framed = framed + 1 end
    end
    lu.assertEquals(kernels, 3 * 5)
    lu.assertEquals(linked, kernels) -- each kernel under the op whose External id it carries
    lu.assertEquals(runtime, 3 * 5 + 3) -- a launch per kernel and a sync per step
    lu.assertEquals(memory, 3 * 5)
    lu.assertEquals(framed, 3 * 11)
    lu.assertNotNil(addmm)
    lu.assertEquals(addmm.shapes, {{64}, {16, 256}, {256, 64}}) -- the last addmm seen: the down projection
    lu.assertEquals(addmm.dtypes, {"f32", "f32", "f32"})
    local fp = wb.trace.fingerprint(q)
    lu.assertEquals(fp.gpu, "NVIDIA H100 80GB HBM3")
    local out, err, code = run("explain " .. path)
    lu.assertEquals(code, 0, err)
    lu.assertStrContains(out, "15 kernels and copies linked to the op that launched them; NVIDIA H100 80GB HBM3, rank 0 of 1")
    lu.assertStrContains(out, "[warn] sync: ProfilerStep synchronizes the host with the device 3 times in 3 instances")
    lu.assertStrContains(out, "cudaDeviceSynchronize")
    lu.assertNotStrContains(out, "[skipped] host_bound")
    lu.assertStrContains(out, "[skipped] roofline")
end

-- A rank or world size out of range (1e30, 0) is not told: it used to read "rank 0 of 0"
function test_a_rank_out_of_range_is_not_told()
    local q = wb.trace.load(T.write(scratch.path(".json"), T.kineto({steps = 1, rank = 1e30, world = 0})))
    local fp = wb.trace.fingerprint(q)
    lu.assertNil(fp.rank)
    lu.assertNil(fp.world_size)
    lu.assertNotStrContains(wb.trace.describe(q), "rank")
    q = wb.trace.load(T.write(scratch.path(".json"), T.kineto({steps = 1, rank = 3, world = 8})))
    lu.assertStrContains(wb.trace.describe(q), "rank 3 of 8")
end

-- Input Dims no tensor can have (more than 2^53 elements, a negative size) are read as no shape:
-- they overflowed the GEMM rule's products ("M=-1 ... -8.49e+12 MFLOP", a red-team trace)
function test_shapes_no_tensor_can_have_are_no_shapes()
    local doc = {schemaVersion = 1, traceEvents = {
        {ph = "X", cat = "cpu_op", name = "aten::mm", pid = 1, tid = 1, ts = 0, dur = 10,
            args = {["Input Dims"] = {{9e18, 9e18}, {9e18, 9e18}}, ["Input type"] = {"float", "float"},
                ["External id"] = 1}},
        {ph = "X", cat = "cpu_op", name = "aten::mm", pid = 1, tid = 1, ts = 20, dur = 10,
            args = {["Input Dims"] = {{4, -3}, {-3, 5}}, ["Input type"] = {"float", "float"}, ["External id"] = 2}},
        {ph = "X", cat = "cpu_op", name = "aten::mm", pid = 1, tid = 1, ts = 40, dur = 10,
            args = {["Input Dims"] = {{64, 256}, {256, 32}}, ["Input type"] = {"float", "float"}, ["External id"] = 3}}}}
    local path = scratch.path(".json")
    local f = io.open(path, "w")
    f:write(cjson.encode(doc))
    f:close()
    local out, err, code = run("explain " .. path)
    lu.assertEquals(code, 0, err)
    lu.assertStrContains(out, "aten::mm [64, 256] float, [256, 32] float: M=64 N=32 K=256, 1.05 MFLOP a call")
    lu.assertNotStrContains(out, "M=-")
    lu.assertNotStrContains(out, "-3")
    lu.assertNotStrContains(out, "9000000000000000000")
end

function test_gzip_is_told_from_content_and_reads_as_the_plain_file()
    local doc = T.kineto({steps = 3})
    local plain = T.write(scratch.path(".json"), doc)
    local gz = T.write(scratch.path(".json.gz"), doc)
    local renamed = scratch.path(".json") -- gzip bytes under a plain name: still read
    assert(os.execute("cp '" .. gz .. "' '" .. renamed .. "'"))
    local a, _, ca = run("explain " .. plain)
    local b, _, cb = run("explain " .. gz)
    local c, _, cc = run("explain " .. renamed)
    lu.assertEquals({ca, cb, cc}, {0, 0, 0})
    lu.assertEquals(b, a)
    lu.assertEquals(c, a)
end

function test_legacy_array_links_kernels_through_its_flows()
    local path = T.write(scratch.path(".json"), T.legacy({steps = 3}))
    local q = wb.trace.load(path)
    lu.assertEquals(q.trace_format, "legacy")
    local ops, kernels, linked, steps = {}, 0, 0, 0
    for e in q:each_event() do if e.cat == "op" then ops[e.id] = e end end
    for e in q:each_event() do
        if e.cat == "kernel" then
            kernels = kernels + 1
            if ops[e.correlation] and ops[e.correlation].name ~= "aten::linear" then linked = linked + 1 end
        elseif e.cat == "step" then steps = steps + 1 end
    end
    lu.assertEquals({kernels, linked, steps}, {15, 15, 3})
    local out, err, code = run("explain " .. path)
    lu.assertEquals(code, 0, err)
    lu.assertStrContains(out, "legacy profiler's array")
end

function test_a_tensorboard_folder_is_explained_rank_by_rank()
    local dir = scratch.dir()
    for rank = 0, 1 do
        T.write(string.format("%s/worker%d.1700000000%d.pt.trace.json.gz", dir, rank, rank),
            T.kineto({steps = 2, rank = rank, world = 2}))
    end
    local qs = wb.trace.load(dir)
    lu.assertEquals(#qs, 2)
    lu.assertEquals(wb.trace.fingerprint(qs[2]).rank, 1)
    local out, err, code = run("explain " .. dir)
    lu.assertEquals(code, 0, err)
    lu.assertEquals(count(out, "\n== "), 1)
    lu.assertStrContains(out, "rank 0 of 2")
    lu.assertStrContains(out, "rank 1 of 2")
    local list = cjson.decode((run("explain --json " .. dir)))
    lu.assertEquals(#list, 2)
end

function test_any_chrome_trace_reads_its_complete_events_as_ranges()
    local path = scratch.file('{"traceEvents": [{"ph": "X", "name": "load", "pid": "Main", "tid": 1, "ts": 1.5, ' ..
        '"dur": 10}, {"ph": "X", "name": "parse", "pid": "Main", "tid": 1, "ts": 2, "dur": 3}]}', ".json")
    local q = wb.trace.load(path)
    lu.assertEquals(q.trace_format, "chrome")
    local names = {}
    for e in q:each_event() do names[#names + 1] = e.cat .. ":" .. e.name end
    lu.assertEquals(names, {"range:load", "range:parse"})
end

-- torch (since 2.7) writes "dur": -1 for an op still open when profiling stopped: left out, and
-- said; any other negative duration is refused naming the field and the event's own line; a
-- trace of kinds not read (B/E pairs, async) says so instead of "no events".
function test_unfinished_ops_are_left_out_and_other_bad_durations_named()
    local doc = T.kineto({gpu = false, steps = 1})
    local whole = wb.trace.load(T.write(scratch.path(".json"), doc))
    local n = 0
    for _ in whole:each_event() do n = n + 1 end
    local events, last = doc.traceEvents, 0
    for _, e in ipairs(events) do last = math.max(last, e.ts or 0) end
    events[#events + 1] = {ph = "X", cat = "cpu_op", name = "aten::still_open", pid = 4242, tid = 4242,
        ts = last + 5, dur = -1, args = {}}
    local path = T.write(scratch.path(".json"), doc)
    local out, err, code = run("explain " .. path)
    lu.assertEquals(code, 0, err)
    lu.assertStrContains(out:match("^[^\n]*"), ', 1 event still open when profiling stopped ("dur": -1), left out')
    local q, m = wb.trace.load(path), 0
    for e in q:each_event() do m = m + 1; lu.assertNotEquals(e.name, "aten::still_open") end
    lu.assertEquals(m, n)
    -- one event a line, as Kineto writes: the bad one is on line 4
    local bad = scratch.file('{\n"traceEvents": [\n{"ph": "X", "name": "a", "ts": 0, "dur": 10, "pid": 1, "tid": 1},\n' ..
        '{"ph": "X", "name": "b", "ts": 1, "dur": -2.5, "pid": 1, "tid": 1},\n' ..
        '{"ph": "X", "name": "c", "ts": 2, "dur": 1, "pid": 1, "tid": 1}\n]}\n', ".json")
    out, err, code = run("explain " .. bad)
    lu.assertEquals(code, 2, out)
    lu.assertStrContains(err, "', line 4: a complete event whose \"dur\" is negative (-2.500 us; -1 alone is read: " ..
        "an op still open)")
    local be = scratch.file('{"traceEvents": [{"ph": "B", "name": "a", "ts": 0, "pid": 1, "tid": 1}, ' ..
        '{"ph": "E", "ts": 5, "pid": 1, "tid": 1}, {"ph": "b", "name": "x", "id": 1, "ts": 1, "pid": 1, "tid": 1}]}',
        ".json")
    out, err, code = run("explain " .. be)
    lu.assertEquals(code, 2, out)
    lu.assertStrContains(err, "holds no events the workbench reads (a Chrome trace from another tool: 3 events of " ..
        "kinds not read (B/E pairs, async, counters, samples, ...))")
end

function test_refusals_say_what_the_file_is_exit_2_and_answer_json_under_json()
    local cases = {
        {scratch.file("[1, 2]", ".json"), "the event list holds something that is not an event object"},
        {scratch.file("hello\n", ".json"), "is not JSON text (it starts with 'h')"},
        {scratch.file('{"rows": []}', ".json"), "is JSON but not a trace: an object with no traceEvents list"},
        {scratch.file('"trace"', ".json"), "is JSON but not a trace: a bare value"},
        {scratch.file('{"traceEvents": []}', ".json"), "holds no events"},
        {scratch.dir(), "is a folder with no .json or .json.gz trace in it"},
    }
    local gz = T.write(scratch.path(".json.gz"), T.kineto({steps = 1}))
    local f = io.open(gz, "rb")
    local bytes = f:read("a")
    f:close()
    cases[#cases + 1] = {scratch.file(bytes:sub(1, #bytes // 2), ".json.gz"), "the trace is truncated"}
    -- the text whole but the gzip trailer (CRC, size) cut: was read without a word; the magic alone
    for _, cut in ipairs({1, 8}) do
        cases[#cases + 1] = {scratch.file(bytes:sub(1, #bytes - cut), ".json.gz"), "is a gzip file cut short: it " ..
            "ends before its gzip stream does (the checksum or more is missing)"}
    end
    cases[#cases + 1] = {scratch.file(bytes:sub(1, 2), ".json.gz"), "is a gzip file cut short"}
    for _, c in ipairs(cases) do
        local out, err, code = run("explain " .. c[1])
        lu.assertEquals(code, 2, c[1])
        lu.assertEquals(out, "")
        lu.assertStrContains(err, c[2])
        lu.assertStrContains(err, "explain: ")
        out, err, code = run("explain --json " .. c[1])
        lu.assertEquals(code, 2)
        lu.assertEquals(err, "")
        local doc = cjson.decode(out)
        lu.assertStrContains(doc.error, c[2])
    end
    -- diff --json answers a refusal as a JSON object too
    local out, err, code = run("diff --json " .. cases[1][1] .. " " .. T.write(scratch.path(".json"), T.kineto({steps = 1})))
    lu.assertEquals({code, err}, {2, ""})
    lu.assertStrContains(cjson.decode(out).error, cases[1][2])
end

function test_diff_of_two_torch_traces_aligns_steps_and_names_added_nodes()
    local function jitter(seed)
        local x = seed
        return function(i)
            x = (x * 1103515245 + 12345 + i) % 2147483648
            return (x % 1000) / 1000 - 0.5
        end
    end
    local a = T.write(scratch.path(".json"), T.kineto({steps = 8, jitter = jitter(1)}))
    local a2 = T.write(scratch.path(".json"), T.kineto({steps = 8, jitter = jitter(2)}))
    local b = T.write(scratch.path(".json"), T.kineto({steps = 8, variant = "b", adds = 6, jitter = jitter(3)}))
    local out, err, code = run("diff " .. a .. " " .. a2)
    lu.assertEquals(code, 0, err)
    lu.assertNotStrContains(out, "SLOWER")
    lu.assertNotStrContains(out, "FASTER")
    out, err, code = run("diff " .. a .. " " .. b)
    lu.assertEquals(code, 0, err)
    lu.assertStrContains(out, "aten::copy_")
    lu.assertStrContains(out, "aten::add")
    -- the attribution names what was added, with its time per step, largest first: the 730 us copy
    -- before the six 2 us adds, under the device time of the step
    local device = out:match("\ndevice time of the step.-\nverdicts by")
    lu.assertNotNil(device, out)
    local copy_at, copy_us = device:match("()\n%s+%+(%d+%.%d) us  %+ aten::contiguous %(16x256%)\n")
    local adds_at, adds_us = device:match("()\n%s+%+(%d+%.%d) us  %+ aten::add %(16, 16%)\n")
    lu.assertNotNil(copy_at, device)
    lu.assertNotNil(adds_at, device)
    lu.assertTrue(copy_at < adds_at)
    lu.assertAlmostEquals(tonumber(copy_us), 730, 730 * 0.03)
    lu.assertAlmostEquals(tonumber(adds_us), 6 * 2, 6 * 2 * 0.03)
    -- and the other way round, removed
    out = run("diff " .. b .. " " .. a)
    lu.assertStrMatches(out, ".*\ndevice time of the step.-\n%s+%-7%d%d%.%d us  %- aten::contiguous %(16x256%)\n.*")
end

-- The findings of a generated trace by rule: {rule = {finding, ...}}, and the skipped rules' reasons.
local function findings_of(o)
    local q = wb.trace.load(T.write(scratch.path(".json"), T.kineto(o)))
    local list, skipped = q:findings()
    local by, why = {}, {}
    for _, f in ipairs(list) do
        by[f.rule] = by[f.rule] or {}
        table.insert(by[f.rule], f)
    end
    for _, f in ipairs(skipped) do why[f.rule] = f.message end
    return by, why
end

local function find(list, field, value)
    for _, f in ipairs(list or {}) do if f.evidence[field] == value then return f end end
    return nil
end

-- The eager GeGLU MLP (down(gelu(gate(x)) * up(x)), 16 tokens, 64 -> 256 -> 64, fp32) on a GPU.
function test_torch_rules_on_an_eager_geglu_mlp_with_gpu_kernels()
    local by, why = findings_of({steps = 5})
    -- (a) gelu then mul on [16, 256]: one fused kernel would not write and read it
    lu.assertEquals(#by.fusion, 1)
    local f = by.fusion[1]
    lu.assertEquals(f.evidence.chain, {"aten::gelu", "aten::mul"})
    lu.assertEquals(f.evidence.intermediate_shape, {16, 256})
    lu.assertEquals(f.evidence.bytes, 16 * 256 * 4 * 2) -- elements x float x (write + read)
    lu.assertEquals(f.evidence.instances, 5)
    lu.assertEquals(f.evidence.time_ns, 5 * (4 + 4) * 1000) -- their kernels' time
    lu.assertStrContains(f.message, "aten::gelu -> aten::mul could be one kernel")
    -- (b) aten::t is a view; aten::addmm, aten::linear (with a kernel under them) never are
    lu.assertEquals(#by.view, 1)
    lu.assertEquals(by.view[1].evidence.op, "aten::t")
    lu.assertEquals(by.view[1].evidence.calls, 15)
    lu.assertEquals(by.view[1].evidence.input_shape, {256, 64})
    lu.assertNil(by.copy) -- nothing is copied in the eager MLP
    -- (c) the GEMMs that do the work, with their shapes; aten::linear is their caller, not a GEMM row
    lu.assertEquals(#by.gemm, 2)
    local up = find(by.gemm, "k", 64)
    lu.assertEquals({up.evidence.op, up.evidence.m, up.evidence.n, up.evidence.calls}, {"aten::addmm", 16, 256, 10})
    lu.assertEquals(up.evidence.flops, 2 * 16 * 256 * 64)
    lu.assertEquals(up.evidence.shapes, {{256}, {16, 64}, {64, 256}})
    lu.assertNil(find(by.gemm, "op", "aten::linear"))
    lu.assertEquals(#by.precision, 1) -- float GEMMs on the GPU
    lu.assertEquals(by.precision[1].severity, "warn")
    lu.assertEquals(by.precision[1].evidence.time_ns, 15 * 20 * 1000)
    lu.assertStrContains(by.precision[1].message, "torch.autocast")
    -- (d) gelu's and mul's 4 us kernels are small, the GEMMs' 20 us ones are not; launches per op
    local s = by.small_kernels[1]
    lu.assertEquals({s.evidence.small, s.evidence.kernels}, {10, 25})
    lu.assertEquals(s.evidence.small_ns, 10 * 4000)
    lu.assertEquals(s.severity, "info") -- 40% of the kernels: under half
    lu.assertNotStrContains(s.message, "aten::addmm")
    local l = find(by.launches, "op", "aten::addmm")
    lu.assertEquals({l.evidence.calls, l.evidence.kernels, l.evidence.launches}, {15, 15, 15})
    lu.assertEquals(l.evidence.launch_ns, 15 * 3000)
    lu.assertEquals(l.severity, "info") -- a 3 us launch for a 20 us kernel
    for _, rule in ipairs({"view", "fusion", "gemm", "precision", "small_kernels", "launches", "copy"}) do
        lu.assertNil(why[rule], rule)
    end
    lu.assertNotNil(why.roofline)
end

function test_torch_rules_on_a_cpu_only_trace_and_without_shapes()
    local by, why = findings_of({steps = 4, gpu = false})
    lu.assertEquals(by.fusion[1].evidence.chain, {"aten::gelu", "aten::mul"})
    lu.assertEquals(by.view[1].evidence.op, "aten::t")
    lu.assertEquals(#by.gemm, 2)
    lu.assertStrContains(by.gemm[1].message, "on the CPU")
    lu.assertNil(by.precision) -- fp32 is the CPU's usual precision
    lu.assertStrContains(why.precision, "no GPU kernels")
    lu.assertStrContains(why.small_kernels, "no device kernels")
    lu.assertStrContains(why.launches, "no device kernels")
    -- without record_shapes: no fusion, no GEMM sizes, each skipped with the reason; views still found
    by, why = findings_of({steps = 4, shapes = false})
    lu.assertNil(by.fusion)
    lu.assertNil(by.gemm)
    lu.assertEquals(why.fusion, "the trace has no shapes; record with record_shapes=True")
    lu.assertEquals(why.gemm, "the trace has no shapes; record with record_shapes=True")
    lu.assertEquals(by.view[1].evidence.op, "aten::t")
    lu.assertNil(by.view[1].evidence.input_shape)
    lu.assertNotNil(by.small_kernels)
end

function test_a_contiguous_copy_and_a_loop_of_small_adds_are_named()
    local by = findings_of({steps = 5, variant = "b", adds = 6})
    lu.assertEquals(#by.copy, 1)
    local c = by.copy[1]
    lu.assertEquals(c.evidence.chain, {"aten::contiguous", "aten::clone", "aten::copy_"})
    lu.assertEquals(c.evidence.device_ns, 5 * 730 * 1000)
    lu.assertEquals(c.evidence.bytes, 5 * 16 * 256 * 4 * 2)
    lu.assertEquals(c.severity, "warn")
    lu.assertStrContains(c.message, "aten::contiguous -> aten::clone -> aten::copy_ is a copy: [16, 256] float")
    for _, v in ipairs(by.view) do lu.assertNotEquals(v.evidence.op, "aten::contiguous") end
    -- the adds: a pointwise chain on [16], and most kernels now small
    local adds = find(by.fusion, "bytes", 5 * 16 * 4 * 2)
    lu.assertNotNil(adds)
    lu.assertEquals(#adds.evidence.chain, 6)
    lu.assertNotNil(find(by.fusion, "bytes", 16 * 256 * 4 * 2)) -- gelu -> mul still
    lu.assertEquals(by.small_kernels[1].severity, "warn") -- 40 of 60
    local l = find(by.launches, "op", "aten::add")
    lu.assertEquals(l.severity, "warn") -- a 3 us launch for a 2 us kernel
    lu.assertStrContains(l.message, "the launch takes longer than the kernel runs")
end

-- A copy that launched two kernels in one of its two calls: 1.5 kernels per call (the message
-- formatted the mean as a whole number and raised; found by tests/fuzz/fuzz_traces.lua).
function test_a_mean_of_kernels_per_call_is_said_as_a_mean()
    local doc = T.kineto({steps = 2, variant = "b"})
    for i, e in ipairs(doc.traceEvents) do
        if e.cat == "kernel" and e.name:find("direct_copy", 1, true) then
            local again = {}
            for k, v in pairs(e) do again[k] = v end
            again.ts = e.ts + e.dur + 1
            table.insert(doc.traceEvents, i + 1, again)
            break
        end
    end
    local list = wb.trace.load(T.write(scratch.path(".json"), doc)):findings()
    local c
    for _, f in ipairs(list) do if f.rule == "copy" then c = f end end
    lu.assertNotNil(c)
    lu.assertStrContains(c.message, "in 1.5 kernels; 2 calls")
end

-- `gelu(gate(x)) * up(x)` runs up's linear between gelu and mul: still one chain; a GEMM never is a link
function test_a_fusion_chain_spans_the_linear_between_gelu_and_mul()
    local by = findings_of({steps = 3, interleaved = true})
    lu.assertEquals(#by.fusion, 1)
    lu.assertEquals(by.fusion[1].evidence.chain, {"aten::gelu", "aten::mul"})
    lu.assertEquals(by.fusion[1].evidence.bytes, 16 * 256 * 4 * 2)
    by = findings_of({steps = 3, interleaved = true, gpu = false})
    lu.assertEquals(by.fusion[1].evidence.chain, {"aten::gelu", "aten::mul"})
    -- zero tokens: nothing a fusion would keep from memory, so no finding (it read "a dtype the
    -- workbench does not size")
    by = findings_of({steps = 3, interleaved = true, tokens = 0})
    lu.assertNil(by.fusion)
end

function test_bf16_gemms_are_not_a_precision_finding()
    local by = findings_of({steps = 3, dtype = "c10::BFloat16"})
    lu.assertNil(by.precision)
    lu.assertEquals(#by.gemm, 2)
    lu.assertEquals(by.fusion[1].evidence.bytes, 16 * 256 * 2 * 2)
end

-- docs/torch-traces.md shows explain's output on the generated GeGLU trace: it is what explain says.
function test_the_docs_show_what_explain_says_on_the_geglu_trace()
    local f = assert(io.open(scratch.source() .. "/docs/torch-traces.md"))
    local page = f:read("a")
    f:close()
    local shown = page:match("### On an eager GeGLU MLP.-```text\n(.-)\n```")
    lu.assertNotNil(shown, "docs/torch-traces.md has no explain output under 'On an eager GeGLU MLP'")
    local out, err, code = run("explain " .. T.write(scratch.path(".pt.trace.json"), T.kineto({steps = 5})))
    lu.assertEquals(code, 0, err)
    lu.assertEquals(shown, (out:gsub("\n$", "")), "docs/torch-traces.md's explain output is stale")
end

-- A real torch.profiler recording of an MLP, where python3-torch is installed.
function test_a_real_torch_profiler_trace()
    local probe = io.popen("python3 -c 'import torch' 2>/dev/null && echo yes")
    local has = probe and probe:read("a"):match("yes")
    if probe then probe:close() end
    if not has then
        lu.skip("python3-torch is not installed: the real-recording check needs torch (the generated traces above cover the schema)")
    end
    local path, path2 = scratch.path(".json"), scratch.path(".json")
    local script = scratch.file(string.format([[
import torch
from torch.profiler import profile, ProfilerActivity, schedule
x = torch.randn(16, 64)
w1, w2, w3 = torch.randn(256, 64), torch.randn(256, 64), torch.randn(64, 256)
def mlp(x):
    return torch.nn.functional.linear(torch.nn.functional.gelu(torch.nn.functional.linear(x, w1)) *
        torch.nn.functional.linear(x, w2), w3)
for out in (%q, %q):
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, schedule=schedule(wait=0, warmup=1, active=5)) as p:
        for _ in range(6):
            mlp(x)
            p.step()
    p.export_chrome_trace(out)
]], path, path2), ".py")
    lu.assertTrue(os.execute("python3 " .. script), "the torch script ran")
    local out, err, code = run("explain " .. path)
    lu.assertEquals(code, 0, err)
    lu.assertStrContains(out, "torch.profiler trace")
    out, err, code = run("diff " .. path .. " " .. path2) -- A/A: two recordings of one program
    lu.assertEquals(code, 0, err)
    lu.assertNotStrContains(out, "SLOWER")
end

scratch.exit(lu.LuaUnit.run())
