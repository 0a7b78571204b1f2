-- cuda_common.lua: what the two halves of the cuda tests share (test_cuda.lua: no GPU, and the
-- mock plugin's rules; test_cuda_gpu.lua: a GPU, or the mock in its place): the executable,
-- whether device cuda runs here and why not, and skips that fail where WB_REQUIRE_GPU=1
-- (scripts/gpu_check.sh) asks for every test.
local lu = require("luaunit")
local scratch = require("scratch")

local M = {}
M.EXE = scratch.exe()
M.HAVE = wb.cuda.is_available()
M.WHY = wb.cuda.why_not()
M.REQUIRE = os.getenv("WB_REQUIRE_GPU") == "1"

-- runs a shell command: its output (stdout and stderr) and exit status
function M.sh(cmd)
    local f = io.popen(cmd .. " 2>&1; echo \"rc=$?\"")
    local out = f:read("a")
    f:close()
    local rc = tonumber(out:match("rc=(%d+)%s*$"))
    return out:gsub("rc=%d+%s*$", ""), rc
end

function M.raises(pattern, fn)
    local ok, err = pcall(fn)
    lu.assertFalse(ok, "expected an error containing: " .. pattern)
    lu.assertStrContains(tostring(err), pattern)
end

-- a test that cannot run here: skipped, or failed where a GPU is required
function M.skip(reason)
    if M.REQUIRE then lu.fail("skipped where WB_REQUIRE_GPU=1 asks for every test: " .. reason) end
    lu.skip(reason)
end

function M.gpu()
    if not M.HAVE then M.skip("no GPU here: " .. tostring(M.WHY)) end
end

-- the tests of a machine without a GPU have nothing to check on one (not a skip there)
function M.no_gpu()
    if M.HAVE and not M.REQUIRE then lu.skip("a GPU is present") end
    return not M.HAVE
end

return M
