-- wb.results(name): rows of measurements, saved with the environment they were measured in.
--
--   local r = wb.results("mlp_sweep")
--   r:add{tokens = 16, mode = "dual", median_ms = 1.7}
--   local paths = r:save{dir = "out/mlp_sweep/run1"}   -- .json, .csv and .html
--
-- Every file carries the environment fingerprint: workbench version and commit, build,
-- device, CPU model and ISA, threads, seed, the command line and the date, and the machine's
-- state (load, other runnable processes, steal, governor) when the results were created and when
-- they were saved; a busy machine gets a one-line warning when the results are created.
-- A row with a `noise` column (IQR / median) above its `target_noise` (or the results' target,
-- 0.05) is marked unstable = true, in every format; rows with noise get unstable = false.

local cjson = require("cjson")
local machine = require("wb.machine")
local atomic = require("wb.atomic")
local hostname, mkdir_p = wb._hostname, wb.mkdir_p -- captured at load: wb._* are gone under --sandbox

local Results = {}
Results.__index = Results

-- The device the measurements ran on, whichever option chose it: cuda once its allocator has
-- held memory in this process, else the cpu (a default of cuda that nothing used is not it).
local function device_used()
    if wb.cuda.is_available() and wb.cuda.memory().peak > 0 then return "cuda" end
    return "cpu"
end

local function fingerprint(device)
    local info = wb.device_info("cpu")
    local cmd = {}
    for i = -10, #arg do if arg[i] then cmd[#cmd + 1] = arg[i] end end
    local host = hostname()
    return {
        workbench = wb.version, commit = wb.commit, build = wb.build.type, sanitizers = wb.build.sanitizers,
        device = device or device_used(), cpu = info.name, isa = info.isa, threads = wb.get_num_threads(),
        peak_gflops = info.peak_gflops, bandwidth_gbs = info.bandwidth_gbs,
        command = table.concat(cmd, " "), date = os.date("!%Y-%m-%dT%H:%M:%SZ"), host = host, lua = _VERSION,
        seed = tostring(wb.initial_seed()), -- as text: a 64-bit seed does not survive JSON's doubles
        cuda = wb.cuda.is_available() and "available" or "not used",
    }
end

-- With a GPU, what it is and which CUDA pieces ran (their versions, when used).
local function with_cuda(fp)
    if fp.device ~= "cuda" then return fp end
    local g = wb.device_info("cuda")
    fp.cuda = "used"
    fp.gpu, fp.gpu_arch, fp.gpu_sms = g.name, g.isa, g.sm_count
    fp.cuda_runtime, fp.cuda_driver, fp.cublaslt, fp.cupti_api = g.cuda_runtime, g.cuda_driver, g.cublaslt, g.cupti_api
    fp.gpu_peak_gflops, fp.gpu_peak_gflops_bf16, fp.gpu_bandwidth_gbs = g.peak_gflops, g.peak_gflops_bf16, g.bandwidth_gbs
    return fp
end

-- wb.results(name[, {columns = {...}, keys = {...}}]): columns fixes the column order (others
-- follow, sorted); keys names the columns that identify a row (workbench compare aligns on them).
-- config: run-wide settings (dim, dtype, ...) that workbench compare requires to match;
-- target_noise: the noise above which a row is unstable; quiet = true skips the busy warning;
-- machine_start: the machine's state when the measurements began (wb.machine.state(); default:
-- now), for a caller that creates its results after measuring (wb.sweep).
local function results(name, o)
    if type(name) ~= "string" or not name:match("^[%w_%-%.]+$") then
        error("results: name must be a plain file name (letters, digits, _ - .), got " .. tostring(name), 2)
    end
    if o ~= nil and type(o) ~= "table" then error("results: options must be a table, got " .. type(o), 2) end
    local target = o and o.target_noise or 0.05
    if type(target) ~= "number" or target < 0 then error("results: target_noise must be a number >= 0", 2) end
    local self = setmetatable({name = name, rows = {}, columns = {}, seen = {}, keys = o and o.keys,
        config = o and o.config, target_noise = target, machine_start = o and o.machine_start or machine.state()},
        Results)
    if not (o and o.quiet) then
        local w = machine.warning(self.machine_start)
        if w then io.stderr:write(w, "\n") end
    end
    for _, c in ipairs(o and o.columns or {}) do
        self.seen[c] = true
        self.columns[#self.columns + 1] = c
    end
    return self
end

function Results:add(row)
    if type(row) ~= "table" then error("results: add needs a table (one row)", 2) end
    local new = {}
    for k, v in pairs(row) do
        if type(k) ~= "string" then error("results: column names must be strings", 2) end
        local t = type(v)
        if t == "table" then -- raw samples: an array of numbers
            for i, x in pairs(v) do
                if math.type(i) ~= "integer" or i < 1 or i > #v or type(x) ~= "number" then
                    error(string.format("results: column '%s' holds a table that is not an array of numbers", k), 2)
                end
            end
        elseif t ~= "number" and t ~= "string" and t ~= "boolean" then
            error(string.format("results: column '%s' holds a %s; rows hold numbers, strings, booleans and arrays " ..
                "of numbers (raw samples)", k, t), 2)
        end
        if not self.seen[k] then new[#new + 1] = k end
    end
    if type(row.noise) == "number" then
        row.unstable = row.noise > (type(row.target_noise) == "number" and row.target_noise or self.target_noise)
        if not self.seen.unstable then new[#new + 1] = "unstable" end
    end
    table.sort(new)
    for _, k in ipairs(new) do
        self.seen[k] = true
        self.columns[#self.columns + 1] = k
    end
    self.rows[#self.rows + 1] = row
    return self
end

-- One CSV cell. Text that a spreadsheet would run as a formula (starting with = + - @, or a tab or
-- carriage return before one) gets a leading ' (OWASP's advice for CSV injection; the JSON keeps
-- the text as it was), unless plain (the fingerprint's "# key=value" lines, one comment cell
-- each); a cell with a comma, a quote or a line break is quoted.
local function csv_cell(v, plain)
    if v == nil then return "" end
    if type(v) == "table" then -- raw samples: space-separated in one cell
        local parts = {}
        for i, x in ipairs(v) do parts[i] = type(x) == "number" and string.format("%.10g", x) or "" end
        return table.concat(parts, " ")
    end
    local s = math.type(v) == "float" and string.format("%.10g", v) or tostring(v)
    if type(v) == "string" and not plain and s:find("^[=+%-@\t\r]") then s = "'" .. s end
    if s:find('[,"\r\n]') then s = '"' .. s:gsub('"', '""') .. '"' end
    return s
end

local function html_escape(s)
    return (tostring(s):gsub("[&<>\"]", {["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;"}))
end

local function write(path, text) atomic.write("results", path, text, 3) end

-- Rows with NaN and infinities replaced by JSON's null (JSON has no such numbers), and how many.
local function finite_rows(rows)
    local out, count = {}, 0
    local function fix(v)
        if type(v) == "number" and v ~= v or v == math.huge or v == -math.huge then
            count = count + 1
            return cjson.null
        end
        return v
    end
    for i, r in ipairs(rows) do
        local copy = {}
        for k, v in pairs(r) do
            if type(v) == "table" then
                local samples = {}
                for j, x in ipairs(v) do samples[j] = fix(x) end
                copy[k] = samples
            else
                copy[k] = fix(v)
            end
        end
        out[i] = copy
    end
    return out, count
end

local SAVE_OPTIONS = {dir = true, html_extra = true, file = true, fingerprint = true, extra = true}

-- r:save{dir=, html_extra=, file=, fingerprint=, extra=}: writes <dir>/<file>.json, .csv, .html
-- (file defaults to the name; a sweep's shard is named after the shard); returns their paths.
-- fingerprint replaces this machine's (a merge of shards keeps what the shards measured on);
-- extra holds more top-level fields of the JSON (a sweep's description).
function Results:save(o)
    o = o or {}
    if type(o) ~= "table" then error("results: save options must be a table like {dir=}, got " .. type(o), 2) end
    for k in pairs(o) do
        if not SAVE_OPTIONS[k] then
            error(string.format("results: unknown save option '%s' (expected dir, html_extra, file, fingerprint, extra)",
                tostring(k)), 2)
        end
    end
    if o.file ~= nil and (type(o.file) ~= "string" or not o.file:match("^[%w_%-%.]+$")) then
        error("results: file must be a plain file name (letters, digits, _ - .), got " .. tostring(o.file), 2)
    end
    local dir = o.dir or wb.options.out or ("out/" .. self.name .. "/" .. os.date("%Y%m%d-%H%M%S"))
    local ok, err = mkdir_p(dir)
    if not ok then error("results: " .. tostring(err), 2) end -- "cannot create DIR: reason"
    local fp = o.fingerprint
    if not fp then
        fp = with_cuda(fingerprint())
        machine.flatten(self.machine_start, "machine_start_", fp)
        machine.flatten(machine.state(), "machine_end_", fp)
        fp.target_noise = self.target_noise
    end
    local base = dir .. "/" .. (o.file or self.name)
    local rows, nonfinite = finite_rows(self.rows)
    if nonfinite > 0 then
        io.stderr:write(string.format("results: %s: %d value%s NaN or infinite; written as null (empty in the CSV)\n",
            self.name, nonfinite, nonfinite == 1 and " was" or "s were"))
    end
    local doc = {name = self.name, fingerprint = fp, columns = self.columns, rows = rows, keys = self.keys,
        config = self.config}
    for k, v in pairs(o.extra or {}) do
        if doc[k] ~= nil then error("results: extra field '" .. tostring(k) .. "' would replace the file's own", 2) end
        doc[k] = v
    end
    write(base .. ".json", cjson.encode(doc))
    local header = {}
    for i, c in ipairs(self.columns) do header[i] = csv_cell(c) end
    local lines = {table.concat(header, ",")}
    for _, r in ipairs(rows) do
        local cells = {}
        for i, c in ipairs(self.columns) do
            local v = r[c]
            if v == cjson.null then v = nil end
            cells[i] = csv_cell(v)
        end
        lines[#lines + 1] = table.concat(cells, ",")
    end
    for k, v in pairs(self.config or {}) do fp["config_" .. k] = v end
    local fp_keys = {}
    for k in pairs(fp) do fp_keys[#fp_keys + 1] = k end
    table.sort(fp_keys)
    for _, k in ipairs(fp_keys) do lines[#lines + 1] = "# " .. csv_cell(k, true) .. "=" .. csv_cell(fp[k], true) end
    write(base .. ".csv", table.concat(lines, "\n") .. "\n")
    local h = {"<!doctype html><html><head><meta charset='utf-8'><title>", html_escape(self.name),
        "</title><style>body{font-family:sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse}",
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#eee}",
        "td:first-child,th:first-child{text-align:left}.fp td{text-align:left}figure{margin:2em 0}",
        "figcaption{color:#444;max-width:900px}.warn{color:#a40}tr.unstable td{background:#fde8d8}</style></head><body><h1>", html_escape(self.name), "</h1>"}
    if o.html_extra then h[#h + 1] = o.html_extra end
    local unstable = 0
    for _, r in ipairs(self.rows) do if r.unstable == true then unstable = unstable + 1 end end
    h[#h + 1] = "<h2>Results</h2>"
    local w = machine.warning(self.machine_start)
    if w then h[#h + 1] = "<p class='warn'>" .. html_escape(w) .. "</p>" end
    if unstable > 0 then
        h[#h + 1] = string.format("<p class='warn'>%d of %d rows are unstable (noise, IQR / median, above %g%%): " ..
            "marked below; do not read small differences into them.</p>", unstable, #self.rows, self.target_noise * 100)
    end
    h[#h + 1] = "<table><tr>"
    for _, c in ipairs(self.columns) do h[#h + 1] = "<th>" .. html_escape(c) .. "</th>" end
    h[#h + 1] = "</tr>"
    for _, r in ipairs(self.rows) do
        h[#h + 1] = r.unstable == true and "<tr class='unstable' title='unstable: noise above target'>" or "<tr>"
        for _, c in ipairs(self.columns) do
            local v = r[c]
            if type(v) == "table" then v = #v .. " samples" end
            h[#h + 1] = "<td>" .. html_escape(type(v) == "number" and string.format("%.4g", v) or (v == nil and "" or v)) .. "</td>"
        end
        h[#h + 1] = "</tr>"
    end
    h[#h + 1] = "</table><h2>Environment</h2><table class='fp'>"
    for _, k in ipairs(fp_keys) do
        h[#h + 1] = "<tr><th>" .. html_escape(k) .. "</th><td>" .. html_escape(tostring(fp[k])) .. "</td></tr>"
    end
    h[#h + 1] = "</table></body></html>\n"
    write(base .. ".html", table.concat(h))
    return {json = base .. ".json", csv = base .. ".csv", html = base .. ".html", dir = dir}
end

return results
