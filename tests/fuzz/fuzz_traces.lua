-- fuzz_traces.lua: the trace fuzzer, beside fuzz_api.lua and fuzz_callbacks.lua: seeded
-- mutations of traces (the red team's small hostile traces from hostile_corpus.lua, a trace the
-- workbench records here with steps, ranges, shapes and memory, and any trace files named on the
-- command line, e.g. torch.profiler's) are written into --out and read back as a sandboxed
-- script can: wb.trace.load, then the table, the findings and diff against the recording. A
-- mutation flips, cuts, inserts (escapes, numbers past any range, deep brackets, NUL, terminal
-- escapes), deletes, duplicates or swaps. Every read must end in a profile or an error that is a
-- message: an error of the Lua runtime itself ("attempt to index a nil value") or a raw C error
-- is a finding, and under ASan+UBSan any memory error ends the run. Seeded: the same seed makes
-- the same cases.
--   workbench --sandbox --out DIR tests/fuzz/fuzz_traces.lua [cases] [seed] [trace files...]
local cases, seed = tonumber(arg[1]) or 2000, tonumber(arg[2]) or 1
math.randomseed(seed)
wb.manual_seed(seed)
local random = math.random
local here = arg[0]:match("^(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local corpus = require("hostile_corpus")
local out = wb.options.out or error("fuzz_traces: run it with --out DIR (the cases are written there)")

-- the seeds: the corpus's small traces, a recording, the files named
-- (a case starts from a trace that reads, the recording or a named file, 3 times in 4: most of
-- the corpus's are refused before an event is read, and mutating those again finds little new)
local seeds, names, readable = {}, {}, {}
local function add_seed(name, text, reads)
    seeds[#seeds + 1], names[#names + 1] = text, name
    if reads then readable[#readable + 1] = #seeds end
end
local hostile = corpus.seeds()
local hostile_names = {}
for name in pairs(hostile) do hostile_names[#hostile_names + 1] = name end
table.sort(hostile_names)
for _, name in ipairs(hostile_names) do add_seed(name, hostile[name]) end
local x, w, b = wb.randn({8, 16}), wb.randn({12, 16}), wb.randn({12})
local recording = wb.profiler.profile({activities = {"cpu", "device"}, record_shapes = true, profile_memory = true,
    with_flops = true}, function(q)
    for _ = 1, 3 do
        wb.profiler.range("fwd", function() return wb.gelu(wb.linear(x, w, b)) * 2 end)
        q:step()
    end
end)
local good_path = out .. "/fuzz_traces_good.json"
recording:export_chrome_trace(good_path)
local function read(path)
    local f = assert(io.open(path, "rb"))
    local t = f:read("a")
    f:close()
    return t
end
add_seed("recording", read(good_path), true)
for i = 3, #arg do add_seed(arg[i]:match("[^/]*$"), read(arg[i]), true) end
local good = wb.trace.load(good_path)

local TOKENS = {"\\u", "\\ud800", "\\u00", "\\", '"', "{", "}", "[", "]", ",", ":", "\0", "\n", "null", "true", "-",
    "1e309", "-1e309", "99999999999999999999999999999999999999", "-9223372036854775809", "9223372036854775808",
    "NaN", "Infinity", "0.0000000000000000000000000001", string.rep("[", 70), string.rep("{\"a\":", 70),
    "\27[2J", "\226\128\174", "\194\155", '"ph": "X"', '"cat": "kernel"', '"cat": "step"', '"cat": "range"',
    '"cat": "memory"', '"ph": "C"', '"ph": "s"', '"ph": "f"', '"ph": "i"', '"args": {}', '"ts": -1', '"dur": -1',
    '"pid": 1', '"tid": 99', '"id": 0', '"correlation": 0', '"flow": [1, 2, 3]', '"External id": 1',
    '"Input Dims": [[1, 2]]', '"traceEvents": [', '], "x": ['}
local NUMBERS = {"0", "-0", "1", "-1", "1e308", "-1e308", "1e-320", "4294967296", "9223372036854775807",
    "9223372036854775808", "18446744073709551616", "0.5", "123456789012345678901234567890", "-2147483649"}

local function mutate(t)
    local n = #t
    local k = random(1, 8)
    local at = random(1, math.max(1, n))
    if k == 1 then -- a byte replaced
        local tok = TOKENS[random(#TOKENS)]
        return t:sub(1, at - 1) .. tok:sub(1, 1) .. t:sub(at + 1)
    elseif k == 2 then -- cut
        return t:sub(1, at)
    elseif k == 3 then -- a token inserted
        return t:sub(1, at - 1) .. TOKENS[random(#TOKENS)] .. t:sub(at)
    elseif k == 4 then -- a span deleted
        return t:sub(1, at - 1) .. t:sub(at + random(1, 64))
    elseif k == 5 or k == 6 then -- a line duplicated, or two swapped
        local lines = {}
        for l in (t .. "\n"):gmatch("([^\n]*)\n") do lines[#lines + 1] = l end
        local i, j = random(#lines), random(#lines)
        if k == 5 then
            table.insert(lines, j, lines[i])
        else
            lines[i], lines[j] = lines[j], lines[i]
        end
        return table.concat(lines, "\n")
    elseif k == 7 then -- a number replaced by one at a range's edge
        local count = select(2, t:gsub("%-?%d+%.?%d*", ""))
        if count == 0 then return t end
        local which, seen = random(count), 0
        return (t:gsub("%-?%d+%.?%d*", function(num)
            seen = seen + 1
            if seen == which then return NUMBERS[random(#NUMBERS)] end
            return num
        end))
    else -- a string's text replaced
        local count = select(2, t:gsub('"[^"\\]*"', ""))
        if count == 0 then return t end
        local which, seen = random(count), 0
        local texts = {'""', '"' .. string.rep("x", random(1, 5000)) .. '"', '"\\u001b[2J"', '"ProfilerStep#999"',
            '"aten::mm"', '"kernel"', '"op"', '"X"', '"wb_sgemm_avx512_12x32_tn"'}
        return (t:gsub('"[^"\\]*"', function(s)
            seen = seen + 1
            if seen == which then return texts[random(#texts)] end
            return s
        end))
    end
end

-- an error from the Lua runtime or a C library, not a message the workbench wrote
local function internal(msg)
    msg = tostring(msg)
    return msg:find("attempt to ", 1, true) or msg:find("bad argument #", 1, true) or
        msg:find("stack overflow", 1, true) or msg:find("internal error", 1, true) or
        msg:find("table index is", 1, true) or msg:find("number has no integer representation", 1, true)
end

local path = out .. "/fuzz_traces_case.json"
local t0 = wb.time_ns()
local loaded, refused, failures = 0, 0, {}
local from = {}
local function try(what, i, f, ...)
    local ok, err = pcall(f, ...)
    if not ok and internal(err) then
        failures[#failures + 1] = string.format("case %d (%s): from %s: %s", i, what, from[i], tostring(err))
    end
    return ok, err
end
for i = 1, cases do
    local k = random() < 0.75 and readable[random(#readable)] or random(#seeds)
    local text = seeds[k]
    from[i] = names[k]
    for _ = 1, random(1, 4) do text = mutate(text) end
    local f = assert(io.open(path, "wb"))
    f:write(text)
    f:close()
    local ok, p = try("load", i, wb.trace.load, path)
    if ok then
        loaded = loaded + 1
        try("table", i, function() return p:table() end)
        try("findings", i, function() return p:findings() end)
        try("describe", i, wb.trace.describe, p)
        try("diff", i, wb.profiler.diff, good, p)
        try("key_averages", i, function() return p:key_averages() end)
    else
        refused = refused + 1
    end
    if #failures >= 20 then break end
end
os.remove(path)
print(string.format("fuzz_traces: %d cases (%d seeds, seed %d): %d read, %d refused with a message, %d internal " ..
    "errors, %.1f s", cases, #seeds, seed, loaded, refused, #failures, (wb.time_ns() - t0) / 1e9))
for _, msg in ipairs(failures) do print("  " .. msg) end
os.exit(#failures == 0 and 0 or 1)
