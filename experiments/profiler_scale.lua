-- profiler_scale.lua: the profiler on a long stretch of eager code: N eager `x + 1` ops (four
-- events each: fill_, add and their kernels) under activities {"cpu", "device"}, then the table,
-- the export and the trace read back. Run under /usr/bin/time -v for the peak RSS.
--
--   /usr/bin/time -v workbench experiments/profiler_scale.lua [--ops 2000000] [--trace PATH]
--
-- Expectation (issue 36): nothing dropped, p:table() under 2 s, the export under 10 s, the same
-- table from the exported trace, peak RSS under 400 MB at 2,000,000 ops (max_memory 256 MiB:
-- the rest spills to a file under $TMPDIR).

local args = require("wb.args")
local parser = args.parser("profiler_scale.lua", "The profiler on N eager ops: recording, table, export, read back.")
parser:option("--ops", "Eager x + 1 ops to record.", "2000000"):convert(args.int("--ops", 1, 100000000))
parser:option("--trace", "Where the trace goes (.json or .json.gz).", nil)
local o = args.parse(parser)
local trace = o.trace or ((os.getenv("TMPDIR") or "/tmp") .. "/profiler_scale.trace.json")

-- a trace left by an earlier run is removed first, outside the timings: renaming the new one over
-- a 2.4 GB file frees the old one's blocks inside the export (about 2.4 s on a KVM guest's disk)
os.remove(trace)
os.remove(trace .. ".gz")

local function seconds(t0) return (wb.time_ns() - t0) / 1e9 end

local x = wb.ones({1})
local p = wb.profiler.profile{activities = {"cpu", "device"}}
local t0, c0 = wb.time_ns(), os.clock()
p:start()
for _ = 1, o.ops do local _ = x + 1 end
p:stop()
local record_s, record_cpu = seconds(t0), os.clock() - c0
local st = p:stats()

t0, c0 = wb.time_ns(), os.clock()
local tab = p:table()
local table_s, table_cpu = seconds(t0), os.clock() - c0

t0, c0 = wb.time_ns(), os.clock()
p:export_chrome_trace(trace)
local export_s, export_cpu = seconds(t0), os.clock() - c0

local plain = p.last_export
t0, c0 = wb.time_ns(), os.clock()
p:export_chrome_trace(trace .. ".gz")
local gz_s, gz_cpu = seconds(t0), os.clock() - c0
local gz = p.last_export

local function rows_text(rows)
    local t = {}
    for _, r in ipairs(rows) do
        t[#t + 1] = string.format("%s|%s %d %d %d %d %d %d", r.kind, r.name, r.calls, r.self_cpu_ns, r.cpu_total_ns,
            r.self_device_ns, r.device_total_ns, r.kernels)
    end
    table.sort(t)
    return table.concat(t, "\n")
end
-- the recording is released before the traces are read back: one store in memory at a time
local recorded_rows = rows_text(p:key_averages())
p = nil
collectgarbage()
collectgarbage()
t0, c0 = wb.time_ns(), os.clock()
local q = wb.profiler.load_trace(trace)
local load_s, load_cpu = seconds(t0), os.clock() - c0
local same, loaded_events = rows_text(q:key_averages()) == recorded_rows, q:stats().events
q = nil
collectgarbage()
collectgarbage()
t0, c0 = wb.time_ns(), os.clock()
local qz = wb.profiler.load_trace(trace .. ".gz")
local load_gz_s, load_gz_cpu = seconds(t0), os.clock() - c0

print(tab)
print(string.format("\n== %d eager ops: %d events kept, %d dropped; %.0f MiB of records in memory, %.0f MiB spilled",
    o.ops, st.events, st.dropped, st.memory_bytes / 2 ^ 20, st.spill_bytes / 2 ^ 20))
print(string.format("recording %.2f s, %.2f s of CPU (%.0f ns per op with the profiler)", record_s, record_cpu,
    record_s * 1e9 / o.ops))
print(string.format("p:table() %.2f s, %.2f s of CPU (bar: 2 s)", table_s, table_cpu))
print(string.format("export %.2f s (%.2f s of CPU; written back to the disk as it goes, then fsync'ed), %d bytes " ..
    "per event (bar: 10 s) -> %s", export_s, export_cpu, plain.bytes // math.max(1, plain.events), trace))
print(string.format("export .json.gz %.2f s, %.2f s of CPU, %.1f bytes per event -> %s.gz", gz_s, gz_cpu,
    gz.bytes / math.max(1, gz.events), trace))
print(string.format("read back %.2f s, %.2f s of CPU: %d events; the same table: %s", load_s, load_cpu, loaded_events,
    tostring(same)))
print(string.format("read back the .gz %.2f s, %.2f s of CPU: %d events", load_gz_s, load_gz_cpu, qz:stats().events))
print(string.format("Lua heap at the end: %.1f MiB", collectgarbage("count") / 1024))
assert(st.dropped == 0, "events were dropped")
assert(same, "the table from the trace differs")
assert(qz:stats().events == st.events, "the .gz trace read back has other counts")
