-- test_tensor.lua: creation, metadata, values in and out, printing, lifetime, the generator.
local lu = require("luaunit")
local scratch = require("scratch")

local function exe() return scratch.exe() end

local function run(cmd)
    local p = io.popen(cmd .. " 2>&1")
    local out = p:read("a")
    local ok, _, code = p:close()
    return out, ok and 0 or code
end

TestCreation = {}

function TestCreation:test_tensor_from_nested_table()
    local x = wb.tensor({{1, 2, 3}, {4, 5, 6}})
    lu.assertEquals(x.shape, {2, 3})
    lu.assertEquals(x:stride(), {3, 1})
    lu.assertEquals(x.dtype, "f32")
    lu.assertEquals(x.device, "cpu")
    lu.assertEquals(x:tolist(), {{1, 2, 3}, {4, 5, 6}})
    lu.assertEquals(x:dim(), 2)
    lu.assertEquals(x:numel(), 6)
    lu.assertEquals(x:size(), {2, 3})
    lu.assertEquals(x:size(-1), 3)
    lu.assertEquals(x:stride(1), 3)
end

function TestCreation:test_scalar_and_empty_tables()
    local s = wb.tensor(3.5)
    lu.assertEquals(s:dim(), 0)
    lu.assertEquals(s.shape, {})
    lu.assertEquals(s:item(), 3.5)
    lu.assertEquals(s:tolist(), 3.5)
    local e = wb.tensor({})
    lu.assertEquals(e.shape, {0})
    lu.assertEquals(e:numel(), 0)
    lu.assertEquals(e:tolist(), {})
end

function TestCreation:test_constant_constructors()
    lu.assertEquals(wb.zeros({2, 2}):tolist(), {{0, 0}, {0, 0}})
    lu.assertEquals(wb.ones({3}):tolist(), {1, 1, 1})
    lu.assertEquals(wb.full({2}, 7.25):tolist(), {7.25, 7.25})
    lu.assertEquals(wb.arange(5):tolist(), {0, 1, 2, 3, 4})
    lu.assertEquals(wb.arange(0):numel(), 0)
    lu.assertEquals(wb.zeros(4).shape, {4}) -- a number is a 1-D shape
    lu.assertEquals(wb.empty({2, 0, 3}):numel(), 0)
    lu.assertEquals(wb.zeros({}, {dtype = "f32", device = "cpu"}):dim(), 0)
end

function TestCreation:test_values_are_float32()
    -- 0.1 is not representable: it must come back rounded to the nearest float
    local v = wb.tensor({0.1}):tolist()[1]
    lu.assertNotEquals(v, 0.1)
    lu.assertAlmostEquals(v, 0.1, 1e-8)
    lu.assertEquals(wb.tensor({16777217}):item(), 16777216)
end

TestRandom = {}

function TestRandom:test_seed_reproduces()
    wb.manual_seed(42)
    local a = wb.randn({5, 7})
    local b = wb.rand({3})
    wb.manual_seed(42)
    lu.assertEquals(wb.max_abs_diff(a, wb.randn({5, 7})), 0)
    lu.assertEquals(wb.max_abs_diff(b, wb.rand({3})), 0)
    lu.assertEquals(wb.initial_seed(), 42)
end

function TestRandom:test_consecutive_draws_differ()
    wb.manual_seed(1)
    local a, b = wb.rand({100}), wb.rand({100})
    lu.assertTrue(wb.max_abs_diff(a, b) > 0)
end

function TestRandom:test_distribution()
    wb.manual_seed(3)
    local u = wb.rand({100000}):tolist()
    local n = wb.randn({100000}):tolist()
    local su, sn, sn2, lo, hi = 0, 0, 0, 1, 0
    for i = 1, #u do
        su = su + u[i]; lo = math.min(lo, u[i]); hi = math.max(hi, u[i])
        sn = sn + n[i]; sn2 = sn2 + n[i] * n[i]
    end
    lu.assertTrue(lo >= 0 and hi < 1)
    lu.assertAlmostEquals(su / #u, 0.5, 0.01)
    lu.assertAlmostEquals(sn / #n, 0, 0.02)
    lu.assertAlmostEquals(sn2 / #n, 1, 0.03)
end

function TestRandom:test_same_numbers_whatever_the_thread_count()
    -- 1M elements: large enough that the kernel splits the work across threads.
    local script = "local x = wb.randn({1000, 1000}); local u = wb.rand({300001}); " ..
        "print(string.format('%.17g %.17g', x:select(1, 777):select(1, 333):item(), " ..
        "wb.max_abs_diff(x, wb.zeros({1})) + u:narrow(1, 300001, 1):item()))"
    local one = run(exe() .. " --seed 5 --threads 1 -e \"" .. script .. "\"")
    local two = run(exe() .. " --seed 5 --threads 2 -e \"" .. script .. "\"")
    lu.assertStrMatches(one, "^%S+ %S+\n$")
    lu.assertEquals(two, one)
end

TestLifetime = {}

function TestLifetime:test_release_then_use_raises()
    local x = wb.ones({2})
    x:release()
    lu.assertErrorMsgContains("attempt to use a released tensor", function() return x:numel() end)
    lu.assertErrorMsgContains("attempt to use a released tensor", function() return x + 1 end)
    lu.assertErrorMsgContains("attempt to use a released tensor", function() return x.shape end)
    lu.assertErrorMsgContains("attempt to use a released tensor", function() return wb.add(x, x) end)
    lu.assertEquals(tostring(x), "tensor(released)")
    x:release() -- twice is harmless
end

function TestLifetime:test_views_outlive_their_base()
    local base = wb.arange(6)
    local v = base:view({2, 3}):t()
    base:release()
    collectgarbage()
    lu.assertEquals(v:tolist(), {{0, 3}, {1, 4}, {2, 5}})
end

function TestLifetime:test_close_releases()
    local keep
    do
        local x <close> = wb.ones({4})
        keep = x
    end
    lu.assertErrorMsgContains("released", function() return keep:numel() end)
end

function TestLifetime:test_dead_tensors_do_not_pile_up()
    -- 400 results of 4 MiB each: the collector must be told about storage, or they pile up
    local f = io.open("/proc/self/status")
    if not f then return end
    f:close()
    local function peak_kib()
        for line in io.lines("/proc/self/status") do
            local v = line:match("^VmHWM:%s+(%d+)")
            if v then return tonumber(v) end
        end
    end
    local a = wb.ones({1 << 20})
    local before = peak_kib()
    for _ = 1, 400 do local _ = a + a end
    local grown = peak_kib() - before
    -- under ASan freed blocks wait in its quarantine (256 MiB by default) before reuse
    local limit = (wb.build.sanitizers and 768 or 256) * 1024
    lu.assertTrue(grown < limit, string.format("peak memory grew by %d MiB over 400 dead 4 MiB tensors", grown // 1024))
end

function TestLifetime:test_intermediates_that_grow_old_are_recycled()
    -- An MLP-shaped chain: each intermediate lives across several ops, long enough for the
    -- generational collector to make it old. Their blocks must still come back to the storage
    -- cache, or every step takes fresh pages (4 MiB = 1024 page faults per intermediate).
    local f = io.open("/proc/self/stat")
    if not f or wb.build.sanitizers then return end -- the cache is off under sanitizers
    f:close()
    local function minor_faults()
        local stat = io.open("/proc/self/stat"):read("a")
        local fields = {}
        for v in stat:match("%) (.*)"):gmatch("%S+") do fields[#fields + 1] = v end
        return tonumber(fields[8]) -- minflt, the 10th field of stat(5)
    end
    local x = wb.ones({1 << 20})
    local function step()
        local g = x * 2
        local u = x + 1
        local h = wb.gelu(g) * u
        return h - g + u
    end
    for _ = 1, 30 do step() end
    local before = minor_faults()
    for _ = 1, 30 do step() end
    local faults = minor_faults() - before
    lu.assertTrue(faults < 2048, string.format("%d page faults over 30 steps of 5 warm 4 MiB intermediates", faults))
end

function TestLifetime:test_garbage_collection()
    for _ = 1, 200 do
        local _ = wb.zeros({256, 256}) -- 256 KiB each; collected as we go
    end
    collectgarbage()
    lu.assertTrue(true)
end

TestPrinting = {}

function TestPrinting:test_small_tensor_shows_values()
    local s = tostring(wb.tensor({{1, 2}, {3, 4}}))
    lu.assertStrContains(s, "{{1, 2},")
    lu.assertStrContains(s, "shape={2, 2}")
    lu.assertStrContains(s, "dtype=f32")
    lu.assertStrContains(s, "device=cpu")
    lu.assertStrContains(tostring(wb.tensor({0.5, 0.25})), "0.5000")
end

function TestPrinting:test_large_tensor_shows_summary()
    local s = tostring(wb.ones({1000, 3}):t())
    lu.assertStrContains(s, "shape={3, 1000}")
    lu.assertStrContains(s, "stride={1, 3}")
    lu.assertStrContains(s, "3000 elements")
    lu.assertStrContains(s, "mean=1")
    lu.assertStrContains(s, "non-contiguous")
end

function TestPrinting:test_type_name()
    local x = wb.ones({1})
    lu.assertEquals(getmetatable(x).__name, "wb.Tensor")
    lu.assertErrorMsgContains("expected a tensor, got FILE*", function() return wb.max_abs_diff(io.stdout, x) end)
    lu.assertErrorMsgContains("operand 1 must be a tensor or a number, got table", function() return wb.add({}, x) end)
end

TestDevices = {}

function TestDevices:test_cpu_always_there()
    lu.assertEquals(wb.devices(), {"cpu"})
    lu.assertFalse(wb.cuda.is_available())
    lu.assertEquals(wb.device_info().device, "cpu")
    lu.assertTrue(wb.device_info().threads >= 1)
    wb.synchronize()
    wb.synchronize("cpu")
end

function TestDevices:test_threads()
    local n = wb.get_num_threads()
    wb.set_num_threads(1)
    lu.assertEquals(wb.get_num_threads(), 1)
    wb.set_num_threads(n)
    lu.assertErrorMsgContains("out of range", function() wb.set_num_threads(0) end)
end

function TestDevices:test_threads_adaptive_switch()
    local was = wb.set_threads_adaptive(false)
    lu.assertIsBoolean(was)
    lu.assertFalse(wb.set_threads_adaptive(false), "it was just turned off")
    lu.assertFalse(wb.set_threads_adaptive(was))
    lu.assertErrorMsgContains("set_threads_adaptive: bad argument #1 (boolean expected, got number)",
        function() wb.set_threads_adaptive(1) end)
end

os.exit(lu.LuaUnit.run())
