-- wb.sweep: a grid of points (named axes and their values) and the function that measures one
-- point. Any experiment built on it gets --shard I/N (a deterministic, cost-balanced share of the
-- points, a point's modes kept in one shard: M.groups), progress, and results with the raw
-- samples of every point, saved as JSON, CSV and HTML with the run's fingerprint; `workbench
-- merge` (wb.merge) joins the shards' files; --history (or WB_HISTORY=1, or history = true)
-- records the saved run in the results history (wb.history).
--
--   local s = wb.sweep{name = "my_sweep", axes = {{"tokens", {1, 16}}, {"mode", {"eager", "dual"}}},
--                      config = {dim = 768}, measure = function(p, round) return {1.2, 1.1} end}
--   local rows = s:run()        -- rounds over the shard's points; rows carry samples_ms and stats
--   s:save{dir = "out/x"}       -- my_sweep.json (or my_sweep.shard-2-of-4.json), .csv, .html
--
-- Statistics and derived columns are declared as data (stats, derived, constants), not code, so
-- that a merge recomputes them from the raw samples exactly as a run does (M.compute).

local stats = require("wb.stats")
local results = require("wb.results")
local rule = require("wb.verdict")

local M = {}
local Sweep = {}
Sweep.__index = Sweep

-- JSON gives numbers back as floats: whole ones are named as integers, so a point's name is the
-- same in the run that measured it and in the merge that reads it.
local function show(v)
    if type(v) == "number" and v == math.floor(v) and math.abs(v) < 2 ^ 53 then return string.format("%d", v) end
    return tostring(v)
end

-- "tokens=16 mode=dual": a point's name, also how `workbench compare` names a row.
function M.point_name(axes, row)
    local parts = {}
    for i, a in ipairs(axes) do parts[i] = a.name .. "=" .. show(row[a.name]) end
    return table.concat(parts, " ")
end

-- --shard: parse_shard, assign and groups (wb.sweep_shards)
local shards = require("wb.sweep_shards")
M.parse_shard, M.assign = shards.parse_shard, shards.assign
function M.groups(axes, points, paired) return shards.groups(axes, points, paired, M.point_name) end
-- again='s usual rule: the points of the groups not settled yet (wb.sweep_rounds)
M.unsettled = require("wb.sweep_rounds").unsettled

local STAT_NAMES = {n = true, median = true, p10 = true, p25 = true, p75 = true, p90 = true, iqr = true, noise = true}

-- The medians of each round's samples behind a median column of row (a stats entry's `from`,
-- split by its <from>_per_round counts), or nil when the row does not say how they divide.
local function round_medians(desc, row, median_column)
    for _, spec in ipairs(desc.stats) do
        if spec.median == median_column then
            local counts = row[spec.from .. "_per_round"]
            local rounds = type(counts) == "table" and stats.split_rounds(row[spec.from], counts)
            if not rounds then return nil end
            local out = {}
            for r, part in ipairs(rounds) do out[r] = stats.summarize(part).median end
            return out
        end
    end
end

-- The timing (wb.verdict's: samples and how they divide into rounds) behind a median column.
local function timing_of(desc, row, median_column)
    for _, spec in ipairs(desc.stats) do
        if spec.median == median_column and type(row[spec.from]) == "table" and #row[spec.from] > 0 then
            return {samples = row[spec.from], per_round = row[spec.from .. "_per_round"], median = row[median_column]}
        end
    end
end

-- Fills in the statistics and derived columns of rows from their raw samples (desc: a sweep's
-- description as saved; constants_of(row): the constants of the run that measured the row).
-- Every derived column is computed over all rows before the next, so a column may use an
-- earlier one, also from another row (base: the row with the same point but these axis values).
-- A derived column with interval = true whose num and den are medians is, where the rows say how
-- their samples divide into rounds, the ratio of the two sides' medians of their rounds' medians
-- (what wb.verdict's rule compares, so a ratio and its verdict agree), with <column>_lo and
-- <column>_hi, an interval from the same ratio taken on each round's medians (paired in time:
-- robust to a slow spell that falls in one round): stats.median_ci's interval for their median,
-- the rounds' range below 6 rounds (which always holds the ratio of the medians), and
-- <column>_rounds, how many; elsewhere the ratio of the medians.
-- A stats entry with median_of = "rounds" makes its median column the median of the rounds'
-- medians (each round one vote, however many samples it took: a pooled median follows the round
-- with the most samples, and then disagrees with an interval ratio taken round by round), and its
-- noise column the noise of the samples with every round weighing alike (stats.by_rounds, as the
-- verdicts read it). A stats entry's `unstable` names a column set to noise > 0.05 (the target of
-- wb.results' own `unstable`), for a second timing in one row (a peer's).
-- A derived column with verdict = true (and a base) also gets <column>_verdict: wb.verdict's
-- SAME, FASTER, SLOWER or UNSURE for this row's timing (den) against the base row's (num), with
-- the interval above as the paired one, so a ratio and its verdict never disagree.
function M.compute(rows, desc, constants_of)
    for _, spec in ipairs(desc.stats) do
        for _, r in ipairs(rows) do
            local s = r[spec.from]
            if type(s) == "table" and #s > 0 then
                local sum = stats.summarize(s)
                for stat, column in pairs(spec) do
                    if STAT_NAMES[stat] then r[column] = sum[stat] end
                end
                if spec.median_of == "rounds" then
                    local rounds = stats.split_rounds(s, r[spec.from .. "_per_round"])
                    if rounds then
                        local by = stats.by_rounds(rounds)
                        if spec.median then r[spec.median] = by.median end
                        if spec.noise then r[spec.noise] = by.noise end
                        sum.noise = by.noise
                    end
                end
                if spec.unstable then r[spec.unstable] = sum.noise > 0.05 end
            end
        end
    end
    local by_name = {}
    for _, r in ipairs(rows) do by_name[M.point_name(desc.axes, r)] = r end
    for _, d in ipairs(desc.derived) do
        local values, intervals, bases = {}, {}, {}
        for i, r in ipairs(rows) do
            local function get(src, name)
                if name:sub(1, 1) == "@" then return constants_of(src)[name:sub(2)] end
                return src[name]
            end
            local from = r
            if d.base then
                local other = {}
                for _, a in ipairs(desc.axes) do other[a.name] = r[a.name] end
                for k, v in pairs(d.base) do other[k] = v end
                from = by_name[M.point_name(desc.axes, other)]
                bases[i] = from
            end
            local num, den = from and get(from, d.num), get(r, d.den)
            if type(num) == "number" and type(den) == "number" and den ~= 0 then
                values[i] = num / den * (d.scale or 1)
            end
            if d.interval and values[i] then
                local nr, dr = round_medians(desc, from, d.num), round_medians(desc, r, d.den)
                if nr and dr and #nr == #dr then
                    local ratios, all = {}, true
                    for k = 1, #nr do
                        if dr[k] == 0 then all = false else ratios[k] = nr[k] / dr[k] * (d.scale or 1) end
                    end
                    if all then
                        local _, lo, hi = stats.median_ci(ratios)
                        local den_median = stats.summarize(dr).median
                        if den_median ~= 0 then values[i] = stats.summarize(nr).median / den_median * (d.scale or 1) end
                        intervals[i] = {lo, hi, #ratios}
                    end
                end
            end
        end
        for i, r in ipairs(rows) do
            r[d.column] = values[i]
            if d.verdict and d.base then
                r[d.column .. "_verdict"] = nil
                local from = bases[i]
                local ta, tb = from and timing_of(desc, from, d.num), timing_of(desc, r, d.den)
                if ta and tb and values[i] then
                    local iv = intervals[i]
                    -- the interval is for num/den (the base's time over this row's): B/A is its inverse
                    r[d.column .. "_verdict"] = from == r and d.num == d.den and "SAME" or rule.verdict(ta, tb, nil,
                        {interval = iv and iv[1] > 0 and {1 / iv[2], 1 / iv[1]} or nil})
                end
            end
            if d.interval then
                local iv = intervals[i] or {}
                r[d.column .. "_lo"], r[d.column .. "_hi"], r[d.column .. "_rounds"] = iv[1], iv[2], iv[3]
            end
        end
    end
    return rows
end

local function check_name(what, v)
    if type(v) ~= "string" or not v:match("^[%a_][%w_]*$") then
        error(string.format("sweep: %s must be a name (letters, digits, _), got %s", what, tostring(v)), 3)
    end
end

local function scalar(v) return type(v) == "number" or type(v) == "string" or type(v) == "boolean" end

-- The --shard value of a script that did not parse its arguments into spec.shard.
local function shard_from_arg()
    if type(arg) ~= "table" then return nil end
    for i = 1, #arg do
        if arg[i] == "--shard" then return arg[i + 1] or "" end
        local v = arg[i]:match("^%-%-shard=(.*)$")
        if v then return v end
    end
end

-- A --shard from the command line that the sweep cannot honour is an argument error: one line
-- naming the script, exit status 2, as wb.args reports a bad argument (not a traceback after the
-- calibration); a script's own shard = "I/N" raises instead.
local function refuse_shard(shard_text, msg)
    if shard_from_arg() == shard_text then
        local script = type(arg) == "table" and type(arg[0]) == "string" and arg[0]:match("[^/]*$") or "workbench"
        io.stderr:write(string.format("%s: %s (see --help)\n", script, msg))
        io.stderr:flush()
        os.exit(2, true)
    end
    error("sweep: " .. msg, 3)
end

local KNOWN = {name = true, axes = true, measure = true, config = true, rounds = true, shard = true, cost = true,
    prepare = true, after_round = true, finish = true, samples = true, stats = true, derived = true,
    constants = true, columns = true, quiet = true, out = true, history = true, max_rounds = true, again = true,
    report = true}

-- wb.sweep{name=, axes=, measure=, ...}: see the top of this file and help(wb.sweep).
local function new(spec)
    if type(spec) ~= "table" then error("sweep: expected a table {name=, axes=, measure=, ...}", 2) end
    for k in pairs(spec) do
        if not KNOWN[k] then error(string.format("sweep: unknown field '%s'", tostring(k)), 2) end
    end
    if type(spec.name) ~= "string" or not spec.name:match("^[%w_%-]+$") then
        error("sweep: name must be a plain name (letters, digits, _ -), got " .. tostring(spec.name), 2)
    end
    if type(spec.measure) ~= "function" then error("sweep: measure must be a function(point, round) -> samples", 2) end
    if type(spec.axes) ~= "table" or #spec.axes == 0 then
        error("sweep: axes must be a non-empty array of {name, values}", 2)
    end
    local axes, seen = {}, {}
    for i, a in ipairs(spec.axes) do
        if type(a) ~= "table" or type(a[2]) ~= "table" or #a[2] == 0 then
            error(string.format("sweep: axis %d must be {name, {value, ...}} with at least one value", i), 2)
        end
        check_name("an axis name", a[1])
        if a[1] == "name" or a[1] == "index" or a[1] == "shard" or seen[a[1]] then
            error(string.format("sweep: axis name '%s' is reserved or used twice", a[1]), 2)
        end
        seen[a[1]] = true
        local values, vseen = {}, {}
        for j, v in ipairs(a[2]) do
            if type(v) ~= "number" and type(v) ~= "string" then
                error(string.format("sweep: axis '%s' value %d is a %s (numbers and strings only)", a[1], j, type(v)), 2)
            end
            if type(v) == "string" and v:find("[%s=]") then -- "a=1 b=2" names a point: it must split one way
                error(string.format("sweep: axis '%s' value %q holds a space or '=' (a point is named axis=value " ..
                    "joined by spaces)", a[1], v), 2)
            end
            if vseen[show(v)] then error(string.format("sweep: axis '%s' has the value %s twice", a[1], show(v)), 2) end
            vseen[show(v)] = true
            values[j] = v
        end
        axes[i] = {name = a[1], values = values}
    end
    local config = {}
    for k, v in pairs(spec.config or {}) do
        if type(k) ~= "string" or not scalar(v) then error("sweep: config holds name = number, string or boolean", 2) end
        config[k] = v
    end
    -- what else makes two runs different measurements of the same thing
    if config.threads == nil then config.threads = wb.get_num_threads() end
    if config.seed == nil then config.seed = tostring(wb.initial_seed()) end
    local samples = spec.samples or "samples_ms"
    local self = setmetatable({spec = spec, axes = axes, config = config, rounds = spec.rounds or 1,
        samples = samples, constants = spec.constants or {}, quiet = spec.quiet}, Sweep)
    if math.type(self.rounds) ~= "integer" or self.rounds < 1 then error("sweep: rounds must be a whole number >= 1", 2) end
    self.max_rounds = spec.max_rounds or self.rounds
    if math.type(self.max_rounds) ~= "integer" or self.max_rounds < self.rounds then
        error(string.format("sweep: max_rounds must be a whole number >= rounds (%d), got %s", self.rounds,
            tostring(spec.max_rounds)), 2)
    end
    if spec.again ~= nil and type(spec.again) ~= "function" then error("sweep: again must be a function(rows, " ..
        "round)", 2) end
    if spec.report ~= nil and type(spec.report) ~= "function" then
        error("sweep: report must be a function() -> the report's parts (wb.results), for partial results", 2)
    end
    for k, v in pairs(self.constants) do
        if type(k) ~= "string" or not scalar(v) then error("sweep: constants hold name = number, string or boolean", 2) end
    end
    self.stats = spec.stats or {{from = samples, median = "median_ms", p10 = "p10_ms", p90 = "p90_ms"}}
    self.derived = spec.derived or {}
    local paired = {} -- the axes a derived column pairs points across: their points share a shard
    for i, d in ipairs(self.derived) do
        if type(d) ~= "table" or type(d.column) ~= "string" or type(d.num) ~= "string" or type(d.den) ~= "string" or
            (d.base ~= nil and type(d.base) ~= "table") then
            error(string.format("sweep: derived %d must be {column=, num=, den=[, scale=][, base={axis=value}]" ..
                "[, interval=true]}", i), 2)
        end
        for k in pairs(d.base or {}) do
            if not seen[k] then
                error(string.format("sweep: derived %d (%s): base names '%s', which is not an axis", i, d.column,
                    tostring(k)), 2)
            end
            paired[k] = true
        end
    end

    -- the points: the product of the axes, the first axis outermost
    local points = {}
    local function product(k, values)
        if k > #axes then
            local p = {}
            for i, a in ipairs(axes) do p[a.name] = values[i] end
            p.index = #points + 1
            p.name = M.point_name(axes, p)
            points[#points + 1] = p
            return
        end
        for _, v in ipairs(axes[k].values) do
            values[k] = v
            product(k + 1, values)
        end
    end
    product(1, {})
    self.points = points

    local shard_text = spec.shard
    if shard_text == nil then shard_text = shard_from_arg() end
    if shard_text ~= nil then
        local i, n = M.parse_shard(shard_text)
        if not i then refuse_shard(shard_text, n) end
        local groups = M.groups(axes, points, paired)
        if n > #groups then
            if #groups == #points then
                refuse_shard(shard_text, string.format("--shard %s: the sweep has %d points, so at most %d shards",
                    shard_text, #points, #points))
            end
            local names = {}
            for k in pairs(paired) do names[#names + 1] = k end
            table.sort(names)
            refuse_shard(shard_text, string.format("--shard %s: the sweep's %d points make %d group%s (points that " ..
                "differ only in %s share a shard: a derived column pairs them), so at most %d shard%s", shard_text,
                #points, #groups, #groups == 1 and "" or "s", table.concat(names, " and "), #groups,
                #groups == 1 and "" or "s"))
        end
        local cost
        if spec.cost then
            cost = {}
            for k, g in ipairs(groups) do
                cost[k] = 0
                for _, j in ipairs(g) do
                    local c = spec.cost(points[j])
                    if type(c) ~= "number" or c < 0 then error("sweep: cost(point) must return a number >= 0", 2) end
                    cost[k] = cost[k] + c
                end
            end
        end
        self.shard = {index = i, count = n}
        local of_group = M.assign(#groups, n, cost)
        self.assignment = {}
        for k, g in ipairs(groups) do
            for _, j in ipairs(g) do self.assignment[j] = of_group[k] end
        end
        self.mine = {}
        for j, p in ipairs(points) do
            if self.assignment[j] == i then self.mine[#self.mine + 1] = p end
        end
    else
        self.mine = points
    end
    return self
end

-- The description saved with the results: all a merge needs to check that shards belong to one
-- sweep and to recompute their statistics.
function Sweep:description()
    local names = {}
    for i, p in ipairs(self.points) do names[i] = p.name end
    local mine
    if self.shard then
        mine = {}
        for i, p in ipairs(self.mine) do mine[i] = p.name end
    end
    local keys = {}
    for i, a in ipairs(self.axes) do keys[i] = a.name end
    return {name = self.spec.name, axes = self.axes, keys = keys, config = self.config, points = names,
        samples = self.samples, stats = self.stats, derived = self.derived, constants = self.constants,
        shard = self.shard and {index = self.shard.index, count = self.shard.count, points = mine,
            assignment = self.assignment} or nil}
end

-- Measures this run's points: prepare(points) once, then `rounds` rounds over the points in
-- order, measure(point, round) returning raw samples each time (so modes and points alternate
-- in time), after_round(round, points) after each; then, up to max_rounds, more rounds over the
-- points again(rows, round) returns (rows: the statistics so far, without finish's fields;
-- an empty list, or no `again`, ends the rounds): unstable points get more rounds, as nvbench
-- keeps measuring until its criterion holds. Then finish(point, row) adds each row's other
-- fields. Returns the rows with their statistics and derived columns; each row's
-- <samples>_per_round has one count per round it took.
function Sweep:run()
    local spec = self.spec
    local say = self.quiet and function() end or print
    -- the machine as the measurements begin: a busy one gets its warning before the figures
    local machine = require("wb.machine")
    self.machine_start = machine.state()
    local busy = not self.quiet and machine.warning(self.machine_start)
    if busy then io.stderr:write(busy, "\n") end
    if self.shard then
        local names = {}
        for i, p in ipairs(self.mine) do names[i] = p.name end
        say(string.format("shard %d/%d: %d of %d points (%s)", self.shard.index, self.shard.count, #self.mine,
            #self.points, table.concat(names, ", ")))
    end
    if spec.prepare then spec.prepare(self.mine) end
    local samples, per_round = {}, {}
    for _, p in ipairs(self.mine) do samples[p.index], per_round[p.index] = {}, {} end
    local done = 0 -- rounds completed
    local function rounds()
        local points = self.mine
        for round = 1, self.max_rounds do
            if round > self.rounds then
                local why
                points, why = {}, nil
                if spec.again then points, why = spec.again(self:rows_of(samples, per_round), round) end
                if type(points) ~= "table" or #points == 0 then break end
                local words = require("wb.words")
                say(words.wrap(string.format("  round %d (of at most %d): again for %s%s", round, self.max_rounds,
                    #points == #self.mine and "every point" or words.plural(#points, "point"),
                    why and why ~= "" and ": " .. why or ""), 120, "    "))
            end
            for _, p in ipairs(points) do
                local s = spec.measure(p, round)
                if type(s) ~= "table" or #s == 0 then
                    error(string.format("sweep: measure(%s) returned no samples (expected an array of numbers)", p.name), 0)
                end
                for _, v in ipairs(s) do
                    if type(v) ~= "number" then
                        error(string.format("sweep: measure(%s) returned a non-number sample", p.name), 0)
                    end
                end
                local into = samples[p.index]
                for _, v in ipairs(s) do into[#into + 1] = v end
                local pr = per_round[p.index]
                pr[#pr + 1] = #s
            end
            done = round
            local note = spec.after_round and spec.after_round(round, points)
            say(round <= self.rounds and string.format("  round %d/%d done%s", round, self.rounds, note or "") or
                string.format("  round %d done%s", round, note or ""))
        end
    end
    -- Ctrl-C (the workbench raises "interrupted!") keeps what was measured: the points' samples
    -- so far are saved, marked partial, and the run ends in one line (the workbench exits 130)
    local function handler(e)
        if M.is_interrupt(e) or not (debug and debug.traceback) then return e end
        return debug.traceback(e, 2)
    end
    local ok, err = xpcall(rounds, handler)
    if not ok then
        if not M.is_interrupt(err) then error(err, 0) end
        return self:save_interrupted(samples, per_round, done)
    end
    -- finish may take a while (mlp_sweep profiles every point and writes its traces): Ctrl-C there
    -- keeps every round's samples too, saved without finish's fields
    local rows
    ok, err = xpcall(function() rows = self:rows_of(samples, per_round, spec.finish) end, handler)
    if not ok then
        if not M.is_interrupt(err) then error(err, 0) end
        return self:save_interrupted(samples, per_round, done, "while finishing the rows")
    end
    self.rows = rows
    return rows
end

-- The interrupt the workbench raises on Ctrl-C ("...: interrupted!").
function M.is_interrupt(e) return type(e) == "string" and e:match("interrupted!$") ~= nil end

-- The rows of the points that have samples, with their statistics and derived columns (finish,
-- when given, adds each row's other fields first).
function Sweep:rows_of(samples, per_round, finish)
    local rows = {}
    for _, p in ipairs(self.mine) do
        if #samples[p.index] > 0 then
            local row = {}
            for _, a in ipairs(self.axes) do row[a.name] = p[a.name] end
            row[self.samples] = samples[p.index]
            row[self.samples .. "_per_round"] = per_round[p.index] -- how the samples divide into rounds
            if finish then finish(p, row) end
            rows[#rows + 1] = row
        end
    end
    local constants = self.constants
    M.compute(rows, self:description(), function() return constants end)
    return rows
end

-- After Ctrl-C: the samples so far as results marked partial (each row's `partial` column, and
-- `partial` in the JSON: the rounds completed of those asked), in the sweep's `out` folder; then
-- one line saying so, raised as the interrupt (the workbench prints it and exits 130).
function Sweep:save_interrupted(samples, per_round, done, stage)
    local rows = self:rows_of(samples, per_round)
    for _, r in ipairs(rows) do r.partial = true end
    self.rows, self.partial = rows, {rounds_completed = done, rounds = self.rounds,
        reason = "interrupted (Ctrl-C)" .. (stage and " " .. stage or "")}
    local where = "nothing measured, nothing saved"
    if #rows > 0 then
        -- the report's charts and text as the sweep would draw them (its report function), drawn
        -- from the rows so far; results.save puts the partial banner above them
        local okr, rep = true, nil
        if self.spec.report then okr, rep = pcall(self.spec.report) end
        local okp, paths = pcall(self.save, self, {report = okr and rep or nil})
        where = okp and string.format("saved as partial results: %s (and .csv, .html)", paths.json) or
            ("the partial results could not be saved: " .. tostring(paths))
    end
    error(string.format("%s: interrupted (Ctrl-C) %safter %d of %d rounds; %d of %d points measured, %s",
        self.spec.name, stage and stage .. ", " or "", done, self.rounds, #rows, #self.mine, where), 0)
end

-- The file name of this run's results: the sweep's name, or name.shard-I-of-N for a shard.
function Sweep:file_name()
    if not self.shard then return self.spec.name end
    return string.format("%s.shard-%d-of-%d", self.spec.name, self.shard.index, self.shard.count)
end

-- s:save{dir=, report=, extra=}: the rows (after s:run()) as <dir>/<file_name>.json, .csv, .html
-- (dir: by default the sweep's `out`, else --out (out/<script>/<time>-<pid> by default); report: the HTML
-- report's text and charts as data, see wb.results); extra: more top-level fields of the JSON
-- (per-point data that is not a row's column, such as mlp_sweep's findings), beside the sweep's
-- own description.
function Sweep:save(o)
    o = o or {}
    if not self.rows then error("sweep: save before run", 2) end
    local extra = {}
    for k, v in pairs(o.extra or {}) do
        if k == "sweep" then error("sweep: save's extra field 'sweep' is the sweep's own", 2) end
        extra[k] = v
    end
    extra.sweep = self:description()
    local keys = {}
    for i, a in ipairs(self.axes) do keys[i] = a.name end
    local columns = self.spec.columns
    if self.partial and columns then
        columns = table.move(columns, 1, #columns, 1, {})
        columns[#columns + 1] = "partial"
    end
    local r = results(self.spec.name, {keys = keys, columns = columns, machine_start = self.machine_start,
        quiet = self.machine_start ~= nil})
    for _, row in ipairs(self.rows) do r:add(row) end
    if o.html_extra ~= nil then error("sweep: html_extra is gone (a report runs no HTML from scripts): pass report = " ..
        "{text=, charts=, ...}", 2) end
    extra.partial = self.partial
    local paths = r:save{dir = o.dir or self.spec.out, report = o.report, file = self:file_name(), extra = extra}
    -- --history (or WB_HISTORY=1): the run goes into the results history once saved; a shard is
    -- part of a run, recorded when `workbench merge --history` joins the shards
    local history = require("wb.history")
    if history.wanted(self.spec.history) then
        if self.shard then
            if not self.quiet then print("history: a shard is recorded when `workbench merge --history` joins the shards") end
        else
            history.record(paths.json, self.quiet and function() end or print)
        end
    end
    return paths
end

-- For scripts that parse their arguments with argparse: adds --shard, checked as it is parsed.
function M.add_options(parser)
    parser:option("--shard", "Run only shard I of N of the sweep's points (e.g. 2/4); its results are named " ..
        "<name>.shard-I-of-N; `workbench merge` joins the shards."):convert(function(v)
        local i, err = M.parse_shard(v)
        if not i then return nil, err end
        return v
    end)
    parser:flag("--history", "Record the run in the results history when it is saved (also WB_HISTORY=1; " ..
        "the database: WB_HISTORY_DB, else $XDG_DATA_HOME/workbench/history.db; see `workbench history --help`).")
    return parser
end

return setmetatable(M, {__call = function(_, spec) return new(spec) end})
