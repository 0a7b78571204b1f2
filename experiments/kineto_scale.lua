-- kineto_scale.lua: how long `workbench explain` takes on a large torch.profiler trace, and how
-- much memory it holds. Writes a Kineto .json.gz of about --events events (the documented schema,
-- docs/torch-traces.md: ProfilerStep#N, cpu_op with Input Dims, cudaLaunchKernel, kernel, ac2g
-- flows), then runs explain on it in a child process and prints its wall time and peak memory
-- (GNU time's maximum RSS) beside the file's size, plain and compressed.
-- Expectation: the import streams, so memory is the store (64 bytes an event plus shapes) and the
-- rules' index, well under the uncompressed trace's size (HTA's users report several times it).
local args = require("wb.args")
local parser = args.parser("kineto_scale.lua", "Explain a generated 2M-event Kineto trace; print time and memory.")
parser:option("--events", "Events to write (about).", "2000000"):convert(args.int("--events", 1000, 50000000))
parser:option("--trace", "The trace to write (.json.gz).", "kineto_scale.pt.trace.json.gz")
local o = args.parse(parser)

local exe = arg[-1] or "workbench"
local path = o.trace
local plain = path:gsub("%.gz$", "")
local dir = path:match("^(.*)/[^/]*$")
if dir and dir ~= "" then wb.mkdir_p(dir) end
if not io.open("/usr/bin/time") then
    io.stderr:write("kineto_scale.lua: /usr/bin/time (Debian's time package) is needed to read explain's peak memory\n")
    os.exit(2)
end

-- One step: an op per layer with a child op that launches one kernel (5 events with the
-- runtime call, the kernel and the flow's two ends), then a sync.
local f = assert(io.open(plain, "w"))
f:write('{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "generated GPU", "numSms": 132}],\n')
f:write('"distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},\n"traceEvents": [\n')
local t, ext, written, step = 1000000, 0, 0, 0
local PER_STEP = 200
local names = {"aten::addmm", "aten::gelu", "aten::mul", "aten::add", "aten::copy_"}
local kernels = {"ampere_sgemm_64x32_sliced1x4_tn", "void at::native::vectorized_elementwise_kernel<4, gelu>",
    "void at::native::vectorized_elementwise_kernel<4, mul>", "void at::native::vectorized_elementwise_kernel<4, add>",
    "void at::native::elementwise_kernel<128, 2, direct_copy>"}
local gpu = t
local first = true
local function put(s)
    f:write(first and "" or ",\n", s)
    first = false
    written = written + 1
end
while written < o.events do
    step = step + 1
    local step_ts = t
    local buf = {}
    for l = 1, PER_STEP do
        ext = ext + 1
        local k = (l - 1) % #names + 1
        local op_ts = t
        t = t + 2
        buf[#buf + 1] = string.format('{"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 7, "tid": 7, ' ..
            '"ts": %d, "dur": 12, "args": {"External id": %d, "Input Dims": [[16, 1024], [4096, 1024], [4096]], ' ..
            '"Input type": ["float", "float", "float"]}}', op_ts, ext)
        ext = ext + 1
        buf[#buf + 1] = string.format('{"ph": "X", "cat": "cpu_op", "name": "%s", "pid": 7, "tid": 7, "ts": %d, ' ..
            '"dur": 8, "args": {"External id": %d, "Input Dims": [[4096], [16, 1024], [1024, 4096]], ' ..
            '"Input type": ["float", "float", "float"]}}', names[k], t, ext)
        buf[#buf + 1] = string.format('{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 7, ' ..
            '"tid": 7, "ts": %d, "dur": 4, "args": {"External id": %d, "cbid": 211, "correlation": %d}}', t + 2, ext, ext)
        buf[#buf + 1] = string.format('{"ph": "s", "id": %d, "pid": 7, "tid": 7, "ts": %d, "cat": "ac2g", "name": "ac2g"}',
            ext, t + 2)
        gpu = math.max(gpu, t + 6)
        buf[#buf + 1] = string.format('{"ph": "X", "cat": "kernel", "name": "%s", "pid": 0, "tid": 7, "ts": %d, ' ..
            '"dur": 9, "args": {"External id": %d, "device": 0, "stream": 7, "correlation": %d}}', kernels[k], gpu, ext, ext)
        buf[#buf + 1] = string.format('{"ph": "f", "id": %d, "pid": 0, "tid": 7, "ts": %d, "cat": "ac2g", ' ..
            '"name": "ac2g", "bp": "e"}', ext, gpu)
        gpu = gpu + 10
        t = op_ts + 13
    end
    t = math.max(t, gpu) + 3
    put(string.format('{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d", "pid": 7, "tid": 7, ' ..
        '"ts": %d, "dur": %d, "args": {}}', step, step_ts - 1, t - step_ts))
    for _, s in ipairs(buf) do put(s) end
    t = t + 5
end
f:write('\n]}\n')
f:close()
local plain_bytes = assert(io.open(plain)):seek("end")
assert(os.execute("gzip -n -1 -f '" .. plain .. "'"), "gzip failed")
local gz_bytes = assert(io.open(path)):seek("end")

local p = assert(io.popen("/usr/bin/time -f 'TIME %e %M' '" .. exe .. "' explain '" .. path .. "' 2>&1 >/dev/null"))
local out = p:read("a")
p:close()
local secs, kb = out:match("TIME ([%d.]+) (%d+)")
print(string.format("%s: %d events, %d steps; %.1f MB as JSON, %.1f MB gzip'ed", path, written, step, plain_bytes / 1e6,
    gz_bytes / 1e6))
if secs then
    print(string.format("workbench explain: %.1f s, peak memory (max RSS) %.0f MB = %.2fx the JSON's size", tonumber(secs),
        tonumber(kb) / 1e3, tonumber(kb) * 1e3 / plain_bytes))
else
    print("workbench explain did not finish: " .. out)
end
