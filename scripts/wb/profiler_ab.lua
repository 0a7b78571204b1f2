-- wb.profiler.ab: two programs profiled interleaved in one process, step by step (blocks of A B B A
-- and B A A B in a seeded shuffle),
-- into two stopped profiles that wb.profiler.diff and `workbench diff` (after export) compare.
-- Profiled one after the other, two recordings of one unchanged program differ by the machine's
-- drift between them; interleaved, both sides sample the same moments of the machine.
--
--   local pa, pb = wb.profiler.ab{a = step_a, b = step_b, steps = 20, record_shapes = true}
--   local r = wb.profiler.diff(pa, pb)

local machine = require("wb.machine")

local M = {}

local OWN = {a = true, b = true, steps = true, warmup = true, order = true, seed = true}
-- what a schedule or a callback would say is said here by steps and warmup
local REFUSED = {schedule = "steps and warmup say what is recorded", on_trace_ready = "both profiles are ready when ab returns"}
local ORDERS = {abba = true, alternate = true, shuffled = true}

local function fail(msg, level) error("profiler.ab: " .. msg, (level or 1) + 1) end

-- Which side runs in slot k (0-based) of 2*steps: "abba" repeats A B B A, so that each side follows
-- itself as often as it follows the other (what one program leaves behind in caches, the
-- allocator or the scheduler lands on both sides alike) and a drift linear in time cancels within
-- every four slots; "alternate" is A B A B. "shuffled" (the default): each block of four slots is
-- A B B A or B A A B, drawn from `flips` (a seeded generator's bits): within a block the same
-- balance (a drift cancels, each side runs twice), across blocks who follows whom balances only
-- on average, and a periodic disturbance has no fixed phase to lock to. On a 2-vCPU Zen 3 guest
-- a linear run right after a 10 ms sleep took ~320 and ~410 us on alternate iterations; with a
-- fixed A B B A, the unchanged range before the loop read 0.95-1.04x between runs of 800 steps,
-- shuffled 0.99-1.01x.
local function side_of(order, k, flips)
    if order == "alternate" then return k % 2 == 0 and "a" or "b" end
    local r = k % 4
    local a = (r == 0 or r == 3)
    if order == "shuffled" and flips and flips[k // 4 + 1] then a = not a end
    return a and "a" or "b"
end
M.side_of = side_of

-- n pseudo-random booleans from `seed` (a 64-bit LCG's top bit): the order is the same for a seed,
-- whatever wb.manual_seed or math.random the programs use.
local function flips_of(seed, n)
    local state, out = seed * 2 + 1, {}
    for i = 1, n do
        state = state * 6364136223846793005 + 1442695040888963407
        out[i] = state < 0
    end
    return out
end
M.flips_of = flips_of

local function check_count(v, name, min)
    if math.type(v) ~= "integer" or v < min then
        fail(string.format("%s must be an integer >= %d, got %s", name, min, tostring(v)), 4)
    end
end

-- ab(profile, o) -> pa, pb. `profile` is wb.profiler.profile; o holds a, b, steps (default 20),
-- warmup (default 1: slots run with the session on and recording off), order (default "shuffled"),
-- seed (the shuffle's, default 1) and any option of
-- wb.profiler.profile but schedule and on_trace_ready.
function M.run(profile, o)
    if type(o) ~= "table" then fail("expects a table {a = fn, b = fn, steps = N, ...}, got " .. type(o), 3) end
    for _, side in ipairs({"a", "b"}) do
        if type(o[side]) ~= "function" then
            fail(string.format("%s must be a function (one step of program %s), got %s", side, side:upper(), type(o[side])), 3)
        end
    end
    local steps, warmup, order, seed = o.steps or 20, o.warmup or 1, o.order or "shuffled", o.seed or 1
    check_count(steps, "steps", 1)
    check_count(warmup, "warmup", 0)
    check_count(seed, "seed", 0)
    if not ORDERS[order] then
        fail(string.format('order must be "shuffled", "abba" or "alternate", got %s', tostring(order)), 3)
    end
    local popts = {}
    for k, v in pairs(o) do
        if REFUSED[k] then fail(string.format("%s is not an option here (%s)", k, REFUSED[k]), 3) end
        if not OWN[k] then popts[k] = v end
    end
    local ok, pa = pcall(profile, popts)
    if not ok then error((tostring(pa):gsub("^profiler: ", "profiler.ab: ")), 3) end
    local pb = profile(popts)
    local p, fn = {a = pa, b = pb}, {a = o.a, b = o.b}
    local snapshot = machine.snapshot()
    -- each slot starts its side's session, opens the step, runs it, closes it and stops: the
    -- other side's slot records into the other session (sessions do not nest). A session keeps
    -- its events across a stop and start, on one clock, so the steps land in order.
    local function slot(side, number, recording)
        local native = p[side].native
        local oks, err = pcall(native.start, native)
        if not oks then error((tostring(err):gsub("^profiler: ", "profiler.ab: ")), 0) end
        native:set_recording(recording)
        native:step(number)
        local okf, ferr = pcall(fn[side])
        native:end_step()
        native:stop()
        if not okf then error(string.format("profiler.ab: program %s failed in step %d: %s", side:upper(), number,
            tostring(ferr)), 0) end
    end
    local flips = order == "shuffled" and flips_of(seed, (warmup + steps) // 2 + 1) or nil
    local okr, err = pcall(function()
        for k = 0, 2 * (warmup + steps) - 1 do
            local side = side_of(order, k, flips)
            local number = k // 2 -- each side's step number: warmup steps first, as a schedule's
            slot(side, number, number >= warmup)
        end
    end)
    if not okr then error(err, 3) end
    local m = machine.between(snapshot, machine.snapshot())
    for _, x in ipairs({pa, pb}) do
        x.machine, x.started = m, false
        x.step_num = warmup + steps
        x.interleaved = {order = order, steps = steps, warmup = warmup, seed = order == "shuffled" and seed or nil}
    end
    return pa, pb
end

-- A program given as a script for `workbench diff --ab A.lua B.lua`: the script runs once (its
-- setup: tensors, modules, thread count) with `arg` = {[0] = path} and returns the function that
-- is one step. Problems raise {diff_error = one line}.
local function step_of_script(path, which)
    local function refuse(msg) error({diff_error = string.format("%s (%s): %s", path, which, msg)}, 0) end
    local f = io.open(path, "r")
    if not f then refuse("cannot open it") end
    local text = f:read("a")
    f:close()
    if text == nil then refuse(io.open(path .. "/.") and "is a folder, not a script" or "cannot read it") end
    text = text:gsub("^#[^\n]*", "") -- a #! line, as loadfile skips it (its newline kept: lines stay)
    local chunk = load(text, "@" .. path, "t")
    if not chunk then
        -- Lua shortens a long path in the message ("...rk/a.lua:1:"), so the line is taken from a
        -- load under an empty chunk name (":1: <msg>"), not by cutting the path off.
        local _, bare = load(text, "=", "t")
        refuse("line " .. tostring(bare):gsub("^:", ""))
    end
    -- its setup finds the modules beside it, as a script run by itself does (after the library's
    -- and the system's; under --sandbox the sandbox's search applies: both folders, A's first)
    local dir = path:match("^(.*)/[^/]*$") or "."
    local saved, saved_path, loaded_before = arg, package.path, {}
    if not dir:find("[;?]") then package.path = saved_path .. ";" .. dir .. "/?.lua;" .. dir .. "/?/init.lua" end
    for name in pairs(package.loaded) do loaded_before[name] = true end
    arg = {[0] = path}
    local ok, step = pcall(chunk)
    arg, package.path = saved, saved_path
    -- the modules its setup loaded from its own folder are its own: the other script, which may
    -- have a common.lua of its own, loads its own (its step keeps what it took)
    for name in pairs(package.loaded) do
        local own = not loaded_before[name] and type(name) == "string" and io.open(dir .. "/" .. name:gsub("%.", "/") ..
            ".lua")
        if own then own:close(); package.loaded[name] = nil end
    end
    if not ok then refuse("its setup failed: " .. tostring(step)) end
    if type(step) ~= "function" then
        refuse("must return the function to profile (one step of the program), got " .. type(step))
    end
    return step
end

-- scripts(path_a, path_b, o) -> pa, pb: the two scripts' steps profiled interleaved; o: steps,
-- warmup, order as for ab (the command line's values, already numbers).
function M.scripts(path_a, path_b, o, profile)
    local a = step_of_script(path_a, "A")
    local b = step_of_script(path_b, "B")
    local ok, pa, pb = pcall(M.run, profile, {a = a, b = b, steps = o.steps, warmup = o.warmup, order = o.order,
        activities = {"cpu", "device"}, record_shapes = true})
    if not ok then error({diff_error = (tostring(pa):gsub("^profiler%.ab: ", ""))}, 0) end
    return pa, pb
end

return M
