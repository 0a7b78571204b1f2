-- wb.results(name): rows of measurements, saved with the environment they were measured in.
--
--   local r = wb.results("mlp_sweep")
--   r:add{tokens = 16, mode = "dual", median_ms = 1.7}
--   local paths = r:save{dir = "out/mlp_sweep/run1"}   -- .json, .csv and .html
--
-- Every file carries the environment fingerprint: workbench version and commit, build,
-- device, CPU model and ISA, threads, seed, the command line and the date, the environment
-- variables that change measurements (WB_*, OMP_*, ...: wb.environment), and the machine's
-- state (load, other runnable processes, steal, governor) when the results were created and when
-- they were saved; a busy machine gets a one-line warning when the results are created.
-- A row with a `noise` column (IQR / median) above its `target_noise` (or the results' target,
-- 0.05) is marked unstable = true, in every format; rows with noise get unstable = false.

local cjson = require("cjson")
local machine = require("wb.machine")
local atomic = require("wb.atomic")
local report = require("wb.report")
local environment = require("wb.environment")
local saveset = require("wb.saveset")
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
    return environment.record{
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
-- the text as it was); a cell with a comma, a quote or a line break is quoted.
local function csv_cell(v)
    if v == nil then return "" end
    local s = math.type(v) == "float" and string.format("%.10g", v) or tostring(v)
    if type(v) == "string" and s:find("^[=+%-@\t\r]") then s = "'" .. s end
    if s:find('[,"\r\n]') then s = '"' .. s:gsub('"', '""') .. '"' end
    return s
end

local html_escape = report.escape

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

local SAVE_OPTIONS = {dir = true, report = true, file = true, fingerprint = true, extra = true, quiet = true}

-- The report's parts, all data (no HTML: every string is escaped where it is shown), saved in the
-- JSON so that a merge draws the merged rows the same way: text (paragraphs), warnings, charts
-- (wb.report.render specs), links ({text=, href=} to files beside the report), tables
-- ({title=, header={...}, rows={{...}, ...}}), columns (the columns of the results table, by name;
-- default: every column of single values). Returns the checked copy, or raises naming the problem.
local REPORT_PARTS = {text = true, warnings = true, charts = true, links = true, tables = true, columns = true}
local function check_report(rep)
    if rep == nil then return {} end
    if type(rep) ~= "table" then error("results: report must be a table {text=, charts=, ...}, got " .. type(rep), 3) end
    local function bad(fmt, ...) error("results: report." .. string.format(fmt, ...), 3) end
    for k in pairs(rep) do
        if not REPORT_PARTS[k] then
            bad("%s is not a part of a report (text, warnings, charts, links, tables, columns)", tostring(k))
        end
    end
    for _, part in ipairs({"text", "warnings"}) do
        for i, t in ipairs(rep[part] or {}) do
            if type(t) ~= "string" then bad("%s[%d] must be text, got %s", part, i, type(t)) end
        end
    end
    for i, c in ipairs(rep.charts or {}) do
        local why = report.check_spec(c)
        if why then bad("charts[%d]: %s", i, why) end
    end
    for i, l in ipairs(rep.links or {}) do
        -- a file beside the report, by name: no scheme, no folder, nothing to fetch from elsewhere
        if type(l) ~= "table" or type(l.text) ~= "string" or type(l.href) ~= "string" or
            not l.href:match("^[%w_][%w_%-%.]*$") then
            bad("links[%d] must be {text=, href=a file name beside the report}", i)
        end
    end
    for i, t in ipairs(rep.tables or {}) do
        if type(t) ~= "table" or type(t.header) ~= "table" or type(t.rows) ~= "table" then
            bad("tables[%d] must be {title=, header={...}, rows={{...}, ...}}", i)
        end
    end
    if rep.columns ~= nil and type(rep.columns) ~= "table" then bad("columns must be an array of column names") end
    for i, c in ipairs(rep.columns or {}) do
        if type(c) ~= "string" then bad("columns[%d] must be a column name, got %s", i, type(c)) end
    end
    return rep
end

-- A number as the report's tables show it: 4 significant digits (70.605042112291 -> 70.61).
local function cell(v)
    if math.type(v) == "integer" then return tostring(v) end
    if type(v) == "number" then return string.format("%.4g", v) end
    if type(v) == "table" then return #v .. " values" end
    return v == nil and "" or tostring(v)
end

-- Each save marks its three files (the JSON's save_id and the digest of the CSV's text, a comment
-- atop the HTML; the CSV stays plain CSV): each file is written whole (wb.atomic), and a set that
-- a kill left mixed between two saves says so (wb.saveset.check).
local saves = 0
local function new_save_id()
    saves = saves + 1
    return string.format("%s-%d-%d", os.date("!%Y%m%dT%H%M%SZ"), wb.time_ns() % 1000000000, saves)
end

-- r:save{dir=, report=, file=, fingerprint=, extra=, quiet=}: writes <dir>/<file>.json, .csv, .html
-- (file defaults to the name; a sweep's shard is named after the shard); returns their paths.
-- Without dir (wb.options.out, by default out/<script>/<time>-<pid>; else out/<name>/<time>) it
-- also says where on stderr, in one line (quiet = true: not); a caller that gives dir knows.
-- report: the HTML report's text and charts, as data (above); fingerprint replaces this
-- machine's (a merge of shards keeps what the shards measured on); extra holds more top-level
-- fields of the JSON (a sweep's description).
function Results:save(o)
    o = o or {}
    if type(o) ~= "table" then error("results: save options must be a table like {dir=}, got " .. type(o), 2) end
    for k in pairs(o) do
        if k == "html_extra" then
            error("results: html_extra is gone (a report runs no HTML from scripts): pass report = {text=, charts=, ...}", 2)
        end
        if not SAVE_OPTIONS[k] then
            error(string.format("results: unknown save option '%s' (expected dir, report, file, fingerprint, extra, " ..
                "quiet)", tostring(k)), 2)
        end
    end
    if o.quiet ~= nil and type(o.quiet) ~= "boolean" then
        error("results: quiet must be true or false, got " .. type(o.quiet), 2)
    end
    if o.file ~= nil and (type(o.file) ~= "string" or not o.file:match("^[%w_%-%.]+$")) then
        error("results: file must be a plain file name (letters, digits, _ - .), got " .. tostring(o.file), 2)
    end
    local rep = check_report(o.report)
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
    local save_id = new_save_id()
    local doc = {name = self.name, fingerprint = fp, columns = self.columns, rows = rows, keys = self.keys,
        config = self.config, report = next(rep) and rep or nil, save_id = save_id}
    for k, v in pairs(o.extra or {}) do
        if doc[k] ~= nil then error("results: extra field '" .. tostring(k) .. "' would replace the file's own", 2) end
        doc[k] = v
    end
    -- plain CSV: a header and one line per row, read by Python's csv module and pandas.read_csv as
    -- they are; the fingerprint is in the JSON (and the report's Environment table). Columns of
    -- arrays (raw samples) stay in the JSON only: a 1-token row's thousands of samples make a cell
    -- larger than csv's default field limit (131,072 characters), and a cell of numbers is no value.
    local csv_columns = {}
    for _, c in ipairs(self.columns) do
        local array = false
        for _, r in ipairs(rows) do
            if type(r[c]) == "table" then array = true; break end
        end
        if not array then csv_columns[#csv_columns + 1] = c end
    end
    local header = {}
    for i, c in ipairs(csv_columns) do header[i] = csv_cell(c) end
    local lines = {table.concat(header, ",")}
    for _, r in ipairs(rows) do
        local cells = {}
        for i, c in ipairs(csv_columns) do
            local v = r[c]
            if v == cjson.null then v = nil end
            cells[i] = csv_cell(v)
        end
        lines[#lines + 1] = table.concat(cells, ",")
    end
    local csv = table.concat(lines, "\n") .. "\n"
    doc.csv_digest = saveset.digest(csv)
    write(base .. ".json", cjson.encode(doc))
    write(base .. ".csv", csv)
    for k, v in pairs(self.config or {}) do fp["config_" .. k] = v end
    local fp_keys = {}
    for k in pairs(fp) do fp_keys[#fp_keys + 1] = k end
    table.sort(fp_keys)
    local h = {report.page_head(self.name), "<!-- save_id=" .. save_id .. " -->", "<h1>", html_escape(self.name), "</h1>"}
    -- results a Ctrl-C cut short (a sweep's extra.partial): said first, before anything is read into them
    local partial = type(o.extra) == "table" and type(o.extra.partial) == "table" and o.extra.partial
    if partial then
        local function whole(v) return type(v) == "number" and string.format("%d", math.floor(v)) or "?" end
        h[#h + 1] = string.format("<p class='partial' role='alert'><b>PARTIAL RESULTS</b>: %s after %s of %s " ..
            "rounds. " ..
            "Every row holds the rounds measured so far; the figures are less certain than a whole run's, and " ..
            "merge does not take this file for a shard.</p>", html_escape(tostring(partial.reason or "stopped")),
            whole(partial.rounds_completed), whole(partial.rounds))
    end
    for _, w in ipairs(rep.warnings or {}) do h[#h + 1] = "<p class='warn'><b>" .. html_escape(w) .. "</b></p>" end
    for _, t in ipairs(rep.text or {}) do h[#h + 1] = "<p>" .. html_escape(t) .. "</p>" end
    for _, c in ipairs(rep.charts or {}) do h[#h + 1] = report.render(c, rows) end
    local unstable = 0
    for _, r in ipairs(self.rows) do if r.unstable == true then unstable = unstable + 1 end end
    h[#h + 1] = "<h2>Results</h2>"
    local w = machine.warning(self.machine_start)
    if w then h[#h + 1] = "<p class='warn'>" .. html_escape(w) .. "</p>" end
    if unstable > 0 then
        h[#h + 1] = string.format("<p class='warn'>%d of %d rows are unstable (noise, IQR / median, above %g%%): " ..
            "marked below; do not read small differences into them.</p>", unstable, #self.rows, self.target_noise * 100)
    end
    -- the columns of single values (arrays, raw samples among them, are in the JSON and CSV), or
    -- the report's own choice of them; a column X with X_lo and X_hi shows "X (lo-hi)" in one cell.
    -- Names break only after an underscore (never inside a word), so the table fits the page.
    local present, single = {}, {}
    for _, c in ipairs(self.columns) do
        present[c] = true
        for _, r in ipairs(self.rows) do single[c] = single[c] or (r[c] ~= nil and type(r[c]) ~= "table") end
    end
    local shown, arrays, chosen = {}, 0, rep.columns ~= nil
    for _, c in ipairs(rep.columns or self.columns) do
        if single[c] then shown[#shown + 1] = c elseif present[c] and not chosen then arrays = arrays + 1 end
    end
    local paired = {} -- X_lo and X_hi shown inside X's cell
    for _, c in ipairs(shown) do
        if single[c .. "_lo"] and single[c .. "_hi"] then paired[c .. "_lo"], paired[c .. "_hi"] = c, c end
    end
    local kept = {}
    for _, c in ipairs(shown) do if not paired[c] then kept[#kept + 1] = c end end
    shown = kept
    if chosen then
        h[#h + 1] = string.format("<p>%d of the %d columns shown; all of them, the raw samples among them, are in " ..
            "the JSON and CSV.</p>", #shown, #self.columns)
    elseif arrays > 0 then
        h[#h + 1] = string.format("<p>%d column%s of arrays (raw samples) %s in the JSON and CSV only.</p>", arrays,
            arrays == 1 and "" or "s", arrays == 1 and "is" or "are")
    end
    h[#h + 1] = "<div class='wide'><table class='results'><tr>"
    for _, c in ipairs(shown) do
        local name = single[c .. "_lo"] and single[c .. "_hi"] and c .. " (lo-hi)" or c
        h[#h + 1] = "<th>" .. html_escape(name):gsub("_", "_<wbr>") .. "</th>"
    end
    h[#h + 1] = "</tr>"
    for _, r in ipairs(self.rows) do
        h[#h + 1] = r.unstable == true and "<tr class='unstable' title='unstable: noise above target'>" or "<tr>"
        for _, c in ipairs(shown) do
            local text = cell(r[c])
            if single[c .. "_lo"] and single[c .. "_hi"] and r[c .. "_lo"] ~= nil and r[c .. "_hi"] ~= nil then
                text = text .. " (" .. cell(r[c .. "_lo"]) .. "-" .. cell(r[c .. "_hi"]) .. ")"
            end
            h[#h + 1] = "<td>" .. html_escape(text) .. "</td>"
        end
        h[#h + 1] = "</tr>"
    end
    h[#h + 1] = "</table></div>"
    for _, t in ipairs(rep.tables or {}) do
        h[#h + 1] = "<h2>" .. html_escape(t.title or "") .. "</h2><div class='wide'><table class='fp'><tr>"
        for _, c in ipairs(t.header) do h[#h + 1] = "<th>" .. html_escape(cell(c)) .. "</th>" end
        h[#h + 1] = "</tr>"
        for _, row in ipairs(t.rows) do
            h[#h + 1] = "<tr>"
            for _, v in ipairs(type(row) == "table" and row or {}) do h[#h + 1] = "<td>" .. html_escape(cell(v)) .. "</td>" end
            h[#h + 1] = "</tr>"
        end
        h[#h + 1] = "</table></div>"
    end
    if rep.links and #rep.links > 0 then
        h[#h + 1] = "<h2>Files</h2><ul>"
        for _, l in ipairs(rep.links) do
            h[#h + 1] = "<li><a href='" .. html_escape(l.href) .. "'>" .. html_escape(l.text) .. "</a></li>"
        end
        h[#h + 1] = "</ul>"
    end
    h[#h + 1] = "<h2>Environment</h2><table class='fp'>"
    for _, k in ipairs(fp_keys) do
        local v = fp[k]
        h[#h + 1] = "<tr><th>" .. html_escape(k) .. "</th><td>" ..
            html_escape(type(v) == "number" and string.format("%.6g", v) or tostring(v)) .. "</td></tr>"
    end
    h[#h + 1] = "</table></body></html>\n"
    write(base .. ".html", table.concat(h))
    if o.dir == nil and not o.quiet then
        io.stderr:write(string.format("results: saved %s.json, .csv and .html\n", base))
    end
    return {json = base .. ".json", csv = base .. ".csv", html = base .. ".html", dir = dir, save_id = save_id}
end

return results
