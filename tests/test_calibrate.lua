-- test_calibrate.lua: ceilings calibrated until stable, cached per machine/ISA/threads with their
-- conditions, never cached when measured under load (the machine's state is injected here), the
-- cache-aware roof a kernel is judged against, % of peak above 100 flagged, and device_info
-- showing the theoretical peak beside the measured one.
local lu = require("luaunit")
local cjson = require("cjson")
local scratch = require("scratch")
local machine = require("wb.machine")
local calibrate = require("wb.calibrate")

local real_state = machine.state
local function pretend(busy)
    machine.state = function()
        return {readable = true, cpus = 2, other_runnable = busy and 2 or 0, steal_pct = 0, governor = "test",
            load1 = 0, load5 = 0, load15 = 0, busy = busy}
    end
end

local function read(path)
    local f = io.open(path)
    if not f then return nil end
    local s = f:read("a")
    f:close()
    return s
end

TestCalibrate = {}

function TestCalibrate:setUp()
    self.dir = scratch.path("_cache")
    calibrate.cache_path = function() return self.dir .. "/workbench/calibration.json" end
    calibrate.MAX_REPEATS = 3
end

function TestCalibrate:tearDown()
    machine.state = real_state
    os.execute("rm -rf '" .. self.dir .. "'")
end

function TestCalibrate:test_busy_calibration_is_flagged_and_not_cached()
    pretend(true)
    local busy = calibrate.cpu(1, {force = true})
    lu.assertTrue(busy.under_load)
    lu.assertNil(read(calibrate.cache_path()))
    pretend(false)
    local quiet = calibrate.cpu(1, {force = true})
    lu.assertFalse(quiet.under_load)
    local doc = cjson.decode(read(calibrate.cache_path()))
    local key, entry = next(doc)
    lu.assertStrContains(key, wb.cpu_isa() .. "|1")
    lu.assertStrContains(entry.conditions, "start: load")
    for _, k in ipairs({"peak_gflops", "l2_gbs", "l3_gbs", "dram_gbs"}) do lu.assertTrue(entry[k] > 0, k) end
    lu.assertTrue(entry.peak_runs >= 3)
    -- a later calibration under load does not replace the quiet one
    pretend(true)
    local again = calibrate.cpu(1, {force = true})
    lu.assertFalse(again.under_load)
    lu.assertStrContains(again.source, "not kept")
end

-- The calibration cache's folder is the generated code's too, which refuses a folder that others
-- may use: a first calibration made ~/.cache/workbench 0755 and code generation stayed off ("its
-- mode is 0755 ... chmod 700 it") for every later wb.compile of that user.
function TestCalibrate:test_the_cache_folder_it_makes_is_private_and_code_generation_uses_it()
    pretend(false)
    calibrate.cpu(1, {force = true})
    lu.assertNotNil(read(calibrate.cache_path()))
    for _, dir in ipairs({self.dir, self.dir .. "/workbench"}) do
        local p = io.popen("stat -c %a '" .. dir .. "'")
        lu.assertEquals(p:read("l"), "700", dir)
        p:close()
    end
    local exe = scratch.exe()
    local out = scratch.run(string.format("env -u WB_CACHE_DIR XDG_CACHE_HOME='%s' '%s' -e 'local f = " ..
        "wb.compile(function(a) return wb.tanh(a) * a end) f(wb.randn({2, 3})) print(f:explain())'", self.dir, exe))
    lu.assertStrContains(out, "group wb_poi_fused_tanh_mul_0")
    lu.assertNotStrContains(out, "refused")
end

-- A cache folder others may use is neither read nor written (a planted calibration, or a link at the
-- temporary file the write used to open, made another user's file take the calibration: a red-team
-- finding); in its own folder a link planted at the path is replaced, not followed.
function TestCalibrate:test_a_folder_others_may_use_is_neither_read_nor_written()
    pretend(false)
    local dir, path = self.dir .. "/workbench", calibrate.cache_path()
    os.execute("mkdir -p '" .. dir .. "' && chmod 777 '" .. dir .. "'")
    local victim = scratch.path(".victim")
    local f = io.open(victim, "w")
    f:write("mine")
    f:close()
    os.execute(string.format("ln -s '%s' '%s.tmp'", victim, path))
    f = io.open(path, "w")
    f:write(cjson.encode({[calibrate.cache_key(3)] = {peak_gflops = 1e9, threads = 3}}))
    f:close()
    local e = calibrate.cpu(3)
    lu.assertEquals(e.source, "measured")
    lu.assertNil(e.path) -- not written
    lu.assertEquals(read(victim), "mine")
    os.execute(string.format("chmod 700 '%s' && rm -f '%s' && ln -s '%s' '%s'", dir, path, victim, path))
    e = calibrate.cpu(3, {force = true})
    lu.assertEquals(e.path, path)
    lu.assertEquals(read(victim), "mine")
    lu.assertNotNil(cjson.decode(read(path))[calibrate.cache_key(3)])
end

-- Where the machine's state cannot be read (/proc, as under --sandbox), a calibration is neither called
-- a quiet machine's nor cached (device_info said "quiet machine" at a load of 5 on 2 CPUs)
function TestCalibrate:test_an_unreadable_machine_state_is_not_called_quiet_nor_cached()
    machine.state = function() return {readable = false} end
    local e = calibrate.cpu(1, {force = true})
    lu.assertTrue(e.load_unknown)
    lu.assertFalse(e.under_load)
    lu.assertNil(read(calibrate.cache_path()))
end

function TestCalibrate:test_mkdir_p_mode_is_checked()
    lu.assertErrorMsgContains("mode must be 0 to 0777", wb.mkdir_p, self.dir .. "/x", 1024)
end

-- A ceiling measured under load (no quiet one cached) is never used for % of peak without saying
-- so: each cell is marked ~ and the table's ceiling line says MEASURED UNDER LOAD.
function TestCalibrate:test_a_ceiling_measured_under_load_is_said_where_it_is_used()
    local threads = wb.get_num_threads()
    pretend(true)
    lu.assertTrue(calibrate.cpu(threads, {force = true}).under_load)
    local x, w = wb.randn({16, 64}), wb.randn({64, 64})
    local p = wb.profiler.profile({with_flops = true}, function() local _ = wb.linear(x, w) end)
    local text = p:table{}
    lu.assertStrMatches(text, ".*wb_sgemm_[%w_]+ .* %d+%%[~!] *\n.*")
    lu.assertStrContains(text, "MEASURED UNDER LOAD (no quiet calibration cached), so every % of peak reads high (marked ~)")
    lu.assertEquals(calibrate.pct_cell(92, true), "92%~")
    lu.assertEquals(calibrate.pct_cell(92, false), "92%")
    lu.assertEquals(calibrate.pct_cell(120, true), "120%!")
    -- a quiet calibration is used, and named, once there is one
    pretend(false)
    lu.assertFalse(calibrate.cpu(threads, {force = true}).under_load)
    text = p:table{}
    lu.assertNotStrContains(text, "UNDER LOAD")
    lu.assertNil(text:find("%d%%~"))
end

function TestCalibrate:test_roof_for_and_percent()
    local e = {threads = 1, l2_bytes = 2 << 20, l3_bytes = 32 << 20, l2_gbs = 100, l3_gbs = 40, dram_gbs = 15}
    lu.assertEquals({calibrate.roof_for(e, 1 << 20)}, {"L2", 100})
    lu.assertEquals({calibrate.roof_for(e, 28 << 20)}, {"L3", 40}) -- an MLP's 28 MiB of weights in a 32 MiB L3
    lu.assertEquals({calibrate.roof_for(e, 64 << 20)}, {"DRAM", 15})
    local pct, note = calibrate.percent(120, 100, "peak")
    lu.assertEquals(pct, 120)
    lu.assertStrContains(note, "above the measured peak (120%)")
    lu.assertNil(select(2, calibrate.percent(50, 100, "peak")))
end

function TestCalibrate:test_cpu_blocking_follows_the_path_and_the_caches()
    local before = wb.cpu_isa()
    local ok, err = pcall(function()
        local b = wb.cpu_blocking()
        lu.assertEquals(b.isa, before)
        lu.assertTrue(b.l1 > 0 and b.l2 > 0 and b.l3_share > 0)
        lu.assertEquals(b.mc % b.mr, 0)
        lu.assertEquals(b.nc % b.nr, 0)
        if not b.fixed then
            -- gemm.c's rule: kc a multiple of 64 in [128, 768], the packed A block in a quarter of L2
            lu.assertTrue(b.kc >= 128 and b.kc <= 768 and b.kc % 64 == 0, "kc " .. b.kc)
            lu.assertTrue(b.mc * b.kc * 4 <= b.l2 // 4 or b.mc == b.mr, "A block of " .. b.mc .. " x " .. b.kc)
        end
        if pcall(wb.cpu_isa, "scalar") then
            local s = wb.cpu_blocking()
            lu.assertEquals({s.isa, s.mr, s.nr, s.kc, s.mc, s.nc, s.fixed}, {"scalar", 4, 8, 256, 128, 1024, true})
        end
    end)
    wb.cpu_isa(before)
    if not ok then error(err, 0) end
end

function TestCalibrate:test_device_info_shows_theoretical_beside_measured()
    pretend(false)
    local i = wb.device_info("cpu")
    lu.assertTrue(i.peak_gflops > 0)
    lu.assertTrue(i.l2_gbs > 0 and i.l3_gbs > 0 and i.dram_gbs > 0)
    lu.assertEquals(i.bandwidth_gbs, i.dram_gbs)
    if i.clock_mhz then
        lu.assertAlmostEquals(i.theoretical_peak_gflops, i.fma_lanes * 2 * 2 * i.clock_mhz / 1e3 * i.threads, 1e-6)
    end
    lu.assertStrContains(i.calibrated, "FMA runs")
end

scratch.exit(lu.LuaUnit.run())
