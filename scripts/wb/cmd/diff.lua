-- wb.cmd.diff: `workbench diff A.trace.json B.trace.json` and `workbench diff --ab A.lua B.lua`:
-- reads the two traces (or profiles two scripts interleaved), diffs them (wb.diff), prints the
-- table (wb.diff_text), JSON (--json) or writes the HTML page (--html FILE, wb.diff_html).
-- bindings/main.c requires wb.cmd.<subcommand> and calls its main: returns the exit status.

local cjson = require("cjson")
local diff = require("wb.diff")
local text = require("wb.diff_text")
local words = require("wb.words")

local M = {}

local function clean(s) return words.escaped(tostring(s)) end

local USAGE = "usage: workbench diff [--json] [--html FILE [--step N]] [--fail-on-slower PCT] [--min-effect PCT]\n" ..
    "                      [--width N] [--per-occurrence] A.trace.json B.trace.json\n" ..
    "       workbench diff --ab [--sandbox] [--steps N] [--warmup N] [--order shuffled|abba|alternate] [--save DIR]\n" ..
    "                      [options] A.lua B.lua"
local HELP = [[
  two traces (the workbench's p:export_chrome_trace, torch.profiler's Kineto JSON, any Chrome trace;
  gzip'ed or not), aligned node by node: structural changes, then a row per range/op/kernel path
  (repeats of a path under one parent, as the forwards of a loop, are one row with their count, as
  key_averages does) with its host and device time and a verdict SAME/FASTER/SLOWER/UNSURE by
  compare's rule (one sample per node and step from 6 steps a side, else every occurrence; steps
  that ran slower as a whole or waited for a CPU left out), or removed/added for a node only one
  side has, and where the change per step went; an UNSURE from too few samples says how many steps
  a verdict needs
  --json                the whole comparison as JSON on stdout
  --html FILE           also write FILE: every step of both traces on one time axis, A above B,
                        aligned nodes linked
  --step N              --html: draw step N of each only
  --per-occurrence      a row per repeat (the second forward of a step is its own row, "#2")
  --fail-on-slower PCT  exit with status 1 when the total or a node is SLOWER by more than PCT percent
  --min-effect PCT      the smallest change called FASTER or SLOWER (default 5)
  --width N             the text's width (default: $COLUMNS, else 120)
  --ab                  A and B are scripts: each runs once and returns the function that is one
                        step; both are profiled interleaved in this process (A B B A, B A A B ...), so that
                        they share the machine's state, then diffed as two traces would be
  --steps N             --ab: steps recorded per program (default 20)
  --warmup N            --ab: steps run first per program, not recorded (default 1)
  --order shuffled|abba|alternate  --ab: the order of the steps (default shuffled: blocks of A B B A
                         and B A A B in a seeded shuffle)
  --save DIR            --ab: also write DIR/A.trace.json and DIR/B.trace.json
  --sandbox             --ab: run both scripts under the sandbox, as `workbench --sandbox script.lua`
                        runs one (no processes, files read only in their folders and the library,
                        written only under --save, else out/diff/<time>-<pid>); also `workbench --sandbox
                        diff --ab ...`. Not the default, as a script of one's own runs unsandboxed:
                        use it for scripts from someone else (--sandbox-weak: without Landlock)
  --help, -h            this text]]

local function read_trace(path, which, mo)
    -- a trace in the workbench's layout: read into a store, its model computed in C
    local okq, q = pcall(require("wb.profiler").load_trace, path)
    if okq then
        local okm, model = pcall(diff.model_of, q, mo)
        if not okm then
            diff.fail(string.format("'%s' (%s) %s", path, which, type(model) == "table" and model.diff_error or tostring(model)))
        end
        local meta = type(q.trace_members.workbench) == "table" and q.trace_members.workbench or nil
        return model, diff.fingerprint(type(meta) == "table" and type(meta.context) == "table" and meta.context or nil,
            q.trace_other.build)
    end
    diff.fail((tostring(q):gsub("^load_trace: ", ""))) -- the one reader's one line
end

-- Two traces with the same bytes (read after both loaded: regular files), compared a MiB at a time.
local function same_file(a, b)
    if a == b then return true end
    local fa, fb = io.open(a, "rb"), io.open(b, "rb")
    local same = fa ~= nil and fb ~= nil
    while same do
        local ca, cb = fa:read(1 << 20), fb:read(1 << 20)
        same = ca == cb
        if ca == nil then break end
    end
    if fa then fa:close() end
    if fb then fb:close() end
    return same
end

-- `--ab A.lua B.lua`: the two scripts' steps profiled interleaved, then diffed -> r, ma, mb.
local function interleaved(files, o)
    local profiler = require("wb.profiler")
    if o.sandbox then
        -- the library's modules load first (the sandbox then takes the internals they capture)
        require("wb.profiler_ab")
        require("wb.diff_html")
        local out = o.save or wb._default_out -- out/diff/<time>-<pid>
        if not wb._enter_sandbox(files[1], files[2], out, o.sandbox_weak) then
            diff.fail("--sandbox: the sandbox could not be set up (the reason is above)")
        end
    end
    if o.save then -- made (or refused) before the two scripts run, not after minutes of profiling
        local okd, err = wb.mkdir_p(o.save)
        if not okd then diff.fail(string.format("--save %s: %s", o.save, tostring(err))) end
    end
    local pa, pb = require("wb.profiler_ab").scripts(files[1], files[2], o, profiler.profile)
    if o.save then
        for _, x in ipairs({{"A", pa}, {"B", pb}}) do
            local side, p = x[1], x[2]
            local path = o.save .. "/" .. side .. ".trace.json"
            local okw, err = pcall(p.export_chrome_trace, p, path)
            if not okw then diff.fail(string.format("cannot write %s: %s", path, tostring(err))) end
        end
    end
    local ma, mb = diff.model_of(pa, o.model), diff.model_of(pb, o.model)
    local r = diff.diff(ma, mb, {min_effect = o.min_effect, name_a = files[1], name_b = files[2],
        fingerprint_a = diff.fingerprint(pa:_findings_context(), text.build_of(pa)),
        fingerprint_b = diff.fingerprint(pb:_findings_context(), text.build_of(pb))})
    table.insert(r.notes, 1, text.interleaved_note(pa))
    return r, ma, mb
end

-- Entry point for `workbench diff ...`: returns the exit status.
function M.main(args)
    local o, files = {}, {}
    local function usage_error(msg)
        io.stderr:write("workbench diff: " .. msg .. "\n" .. USAGE .. "\n")
        return 2
    end
    local i = 1
    while i <= #args do
        local a = args[i]
        if a == "--help" or a == "-h" then io.write(USAGE, "\n", HELP, "\n"); return 0
        elseif a == "--json" then o.json = true
        elseif a == "--html" then
            if not args[i + 1] then return usage_error("--html takes a file name") end
            o.html = args[i + 1]
            i = i + 1
        elseif a == "--ab" then o.ab = true
        elseif a == "--sandbox" or a == "--sandbox-weak" then o.sandbox, o.sandbox_weak = true, a == "--sandbox-weak"
        elseif a == "--per-occurrence" then o.per_occurrence = true
        elseif a == "--order" or a == "--save" then
            if not args[i + 1] then return usage_error(a .. " takes a value") end
            o[a:sub(3)] = args[i + 1]
            i = i + 1
        elseif a == "--steps" or a == "--warmup" or a == "--step" then
            local v = math.tointeger(tonumber(args[i + 1] or ""))
            if not v or v < (a == "--warmup" and 0 or 1) or v > 1000000 then
                return usage_error(string.format("%s takes a whole number from %d, got %s", a, a == "--warmup" and 0 or 1,
                    clean(tostring(args[i + 1]))))
            end
            o[a:sub(3)] = v
            i = i + 1
        elseif a == "--fail-on-slower" or a == "--min-effect" or a == "--width" then
            local v = tonumber(args[i + 1])
            if not v or v < 0 or v > (a == "--width" and 10000 or 1000) then
                return usage_error(string.format("%s takes a number%s, got %s", a, a == "--width" and "" or
                    " (a percentage from 0 to 1000)", tostring(args[i + 1])))
            end
            if a == "--fail-on-slower" then o.fail_on_slower = v elseif a == "--min-effect" then o.min_effect = v / 100
            else o.width = math.floor(v) end
            i = i + 1
        elseif a:match("^%-%-?%a") then return usage_error("unknown option " .. clean(a))
        else files[#files + 1] = a end
        i = i + 1
    end
    if not o.ab and (o.steps or o.warmup or o.order or o.save or o.sandbox) then
        return usage_error("--steps, --warmup, --order, --save and --sandbox go with --ab (two scripts profiled " ..
            "interleaved)")
    end
    if o.step and not o.html then return usage_error("--step says which step --html draws: give --html FILE") end
    if o.order and o.order ~= "shuffled" and o.order ~= "abba" and o.order ~= "alternate" then
        return usage_error("--order takes shuffled, abba or alternate, got " .. clean(o.order))
    end
    if #files ~= 2 then return usage_error(string.format("expected two %s, got %d", o.ab and "scripts" or "traces", #files)) end
    -- what the models keep: the steps --html draws (every one, or --step N), none for the table
    o.model = {draw = o.html and (o.step or "all") or "none", per_occurrence = o.per_occurrence}
    local ok, r, ma, mb = pcall(function()
        if o.ab then return interleaved(files, o) end
        local ma, fa = read_trace(files[1], "A", o.model)
        local mb, fb = read_trace(files[2], "B", o.model)
        if same_file(files[1], files[2]) then
            diff.fail(string.format("the same trace given twice ('%s'): nothing to compare", files[1]))
        end
        return diff.diff(ma, mb, {min_effect = o.min_effect, name_a = files[1], name_b = files[2], fingerprint_a = fa,
            fingerprint_b = fb}), ma, mb
    end)
    if not ok then
        local msg = "workbench diff: " .. clean(type(r) == "table" and (r.diff_error or r.explain) or tostring(r))
        if o.json then print(cjson.encode({error = msg})) else io.stderr:write(msg .. "\n") end -- --json: a JSON answer
        return 2
    end
    r.min_effect = o.min_effect
    for _, side in ipairs({{"A", ma}, {"B", mb}}) do
        if o.step and o.step > #side[2].steps then
            io.stderr:write(string.format("workbench diff: --step %d: %s has %d step(s)\n", o.step, side[1], #side[2].steps))
            return 2
        end
    end
    if o.json then
        print(cjson.encode(text.plain(r)))
    else
        local width = o.width or tonumber(os.getenv("COLUMNS") or "") or 120
        print(table.concat(text.format(r, width), "\n"))
    end
    if o.html then
        local okh, err = pcall(require("wb.diff_html").write, o.html, r, ma, mb, o.step)
        if not okh then
            io.stderr:write("workbench diff: cannot write " .. clean(o.html) .. ": " .. clean(tostring(err)) .. "\n")
            return 2
        end
    end
    local worst = diff.worst_slower(r)
    if o.fail_on_slower and worst > o.fail_on_slower then
        io.stderr:write(string.format("workbench diff: slower by %.1f%% (more than --fail-on-slower %g)\n", worst,
            o.fail_on_slower))
        return 1
    end
    return 0
end

return M
