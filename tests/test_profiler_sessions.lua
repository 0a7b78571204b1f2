-- test_profiler_sessions.lua: one session runs at a time. A second start names when (and where)
-- the running one began and how to stop it; wb.profiler.current() finds a session whose variable
-- is lost (the REPL trap of issue 47: p:start(), a chunk interrupted, `p` made anew), and start()
-- and stop() return nothing (the REPL would print the session). The REPL itself: test_repl.sh.
local lu = require("luaunit")

TestSessions = {}

function TestSessions:test_sessions_do_not_nest()
    local a = wb.profiler.profile{}
    local line = debug.getinfo(1, "l").currentline + 1
    a:start()
    local b = wb.profiler.profile{}
    local ok, err = pcall(b.start, b)
    a:stop()
    lu.assertFalse(ok)
    -- the message says where the running one was started and how to stop it
    lu.assertStrMatches(err, "^[^\n]*profiler: start%(%): a session is already running %(started at [^\n]*" ..
        "test_profiler_sessions%.lua:" .. line .. " at %d%d:%d%d:%d%d; sessions do not nest%); " ..
        "stop it with wb%.profiler%.current%(%):stop%(%)$")
    -- the error points at the line that called start(), not into the library
    local _, located = pcall(function() a:start(); b:start() end)
    a:stop()
    lu.assertStrMatches(located,
        "^[^\n]*test_profiler_sessions%.lua:%d+: profiler: start%(%): a session is already running.*")
    b:start() -- fine once the first one stopped
    b:stop()
    -- a native session started outside wb.profiler.profile gets the core's message, which says the same
    local native = wb._profiler_session{}
    native:start()
    ok, err = pcall(b.start, b)
    native:stop()
    lu.assertFalse(ok)
    lu.assertStrContains(err, "a session is already running (sessions do not nest); " ..
        "stop it first with wb.profiler.current():stop()")
end

-- The REPL trap: p:start(), the chunk interrupted, `p` made anew. The lost session is found by
-- wb.profiler.current(), stopped through it, and a new one starts; no collection needed.
function TestSessions:test_a_lost_session_is_found_and_stopped()
    lu.assertNil(wb.profiler.current())
    local p = wb.profiler.profile{}
    lu.assertNil(p:start()) -- nothing returned: the REPL prints nothing
    lu.assertIs(wb.profiler.current(), p)
    p = nil -- luacheck: ignore (the variable is lost)
    collectgarbage()
    collectgarbage()
    p = wb.profiler.profile{}
    lu.assertErrorMsgContains("stop it with wb.profiler.current():stop()", p.start, p)
    local lost = wb.profiler.current()
    lu.assertNotNil(lost)
    lu.assertNotIs(lost, p)
    lu.assertNil(lost:stop())
    lu.assertNil(wb.profiler.current())
    p:start()
    local _ = wb.ones({2}) + 1
    p:stop()
    lu.assertNil(wb.profiler.current())
    lu.assertEquals(#p:events{cat = "op", name = "add"}, 1)
    -- profile(opts, fn) is running inside fn and not after it
    local inside
    wb.profiler.profile({}, function(q) inside = wb.profiler.current() == q end)
    lu.assertTrue(inside)
    lu.assertNil(wb.profiler.current())
end

-- The collector's major collection runs between steps, not inside them: 40 fresh 256 KiB tensors
-- a step (10 MiB, over the 4 MiB that makes one due between steps) give one at every step
-- boundary, counted with its time. A session whose steps allocate nothing runs none.
function TestSessions:test_the_collector_runs_between_steps()
    local x = wb.randn({64, 1024})
    local p = wb.profiler.profile{activities = {"cpu"}, schedule = {wait = 0, warmup = 1, active = 12}}
    p:start()
    for _ = 1, 13 do
        for _ = 1, 40 do local _ = wb.gelu(x) end
        p:step()
    end
    p:stop()
    local st = p:stats()
    lu.assertTrue(st.collections_between_steps >= 12, st.collections_between_steps)
    lu.assertTrue(st.collection_ns > 0)
    local q = wb.profiler.profile{activities = {"cpu"}, schedule = {wait = 0, warmup = 1, active = 12}}
    q:start()
    for _ = 1, 13 do q:step() end
    q:stop()
    lu.assertEquals(q:stats().collections_between_steps, 0)
end

os.exit(lu.LuaUnit.run())
