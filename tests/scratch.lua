-- scratch.lua: the one place a test gets temporary files and folders. All of them live in one
-- private folder (mktemp -d under $TMPDIR, else /tmp), made at the first use and removed with
-- its contents when the test process ends: by scratch.exit, the suites' last line, whatever the
-- tests' results, or when the Lua state closes after an error that stopped the suite early.
-- Not os.tmpname: it leaves an empty /tmp/lua_XXXXXX behind (it ignores TMPDIR), and the tests
-- used to put their .json files and folders next to it and keep neither.
local scratch = {}

local root -- the folder, once made
local made = 0 -- paths handed out so far: each gets its own number

-- The folder of this process's scratch files, made at the first call.
function scratch.root()
    if root then return root end
    local p = assert(io.popen('mktemp -d "${TMPDIR:-/tmp}/workbench-test.XXXXXX"'))
    local dir = p:read("l")
    local ok = p:close()
    assert(ok and dir and dir:match("^/"), "scratch: mktemp -d could not make a folder under $TMPDIR (or /tmp)")
    -- tests put paths into shell commands, quoted as they were with os.tmpname's (no quotes, no spaces)
    assert(dir:match("^[%w/._+-]+$"), "scratch: the temporary folder's name needs quoting in a shell: " .. dir)
    root = dir
    return root
end

-- A fresh path in the folder; nothing is created there. suffix (optional) ends the name, as in
-- scratch.path(".json").
function scratch.path(suffix)
    made = made + 1
    return string.format("%s/%d%s", scratch.root(), made, suffix or "")
end

-- A fresh, empty folder in the scratch folder.
function scratch.dir(suffix)
    local path = scratch.path(suffix)
    assert(os.execute("mkdir '" .. path .. "'"), "scratch: cannot make " .. path)
    return path
end

-- A fresh file holding text; returns its path.
function scratch.file(text, suffix)
    local path = scratch.path(suffix)
    local f = assert(io.open(path, "w"))
    f:write(text)
    f:close()
    return path
end

-- Removes the folder and everything in it (a later use makes a new one).
function scratch.remove()
    if not root then return end
    os.execute("rm -rf '" .. root .. "'")
    root = nil
end

-- The whole text of a file (the suites' one copy); fails the test when it cannot be opened.
function scratch.read(path)
    local f = assert(io.open(path))
    local text = f:read("a")
    f:close()
    return text
end

-- Runs a shell command, stdout and stderr together: out, exit status (the suites' one copy).
function scratch.run(cmd)
    local p = io.popen(cmd .. " 2>&1")
    local out = p:read("a")
    local _, _, code = p:close()
    return out, code
end

-- Runs a shell command with stdout and stderr apart (stderr through a scratch file): out, err,
-- exit status.
function scratch.run_split(cmd)
    local err = scratch.path(".err")
    local p = io.popen(cmd .. " 2>'" .. err .. "'")
    local out = p:read("a")
    local _, _, code = p:close()
    local e = scratch.read(err)
    os.remove(err)
    return out, e, code
end

-- The workbench under test, by its absolute path: $WB_EXE (ctest sets it to the build's own,
-- $<TARGET_FILE:workbench>), else the executable running this suite (a suite run by hand); never
-- a checkout's build/workbench, which may be another build than the one under test, or none.
local exe_path = wb._realpath and wb._realpath("/proc/self/exe") -- taken at load, as the library does
function scratch.exe()
    local exe = os.getenv("WB_EXE")
    if exe and exe ~= "" then return exe end
    return (assert(exe_path, "scratch: WB_EXE is not set and /proc/self/exe cannot be resolved: set WB_EXE"))
end

-- The source tree whose tests run: $WB_SOURCE_DIR (ctest sets it), else the folder above this
-- file's tests/ (not the current folder: a suite may be run from anywhere).
function scratch.source()
    local dir = os.getenv("WB_SOURCE_DIR")
    if dir and dir ~= "" then return dir end
    local here = debug.getinfo(1, "S").source:match("^@(.*)/tests/[^/]*$")
    return (assert(here, "scratch: WB_SOURCE_DIR is not set and tests/scratch.lua's folder is unknown: set it"))
end

-- Removes the folder, then exits with the status: `scratch.exit(lu.LuaUnit.run())`.
function scratch.exit(status)
    scratch.remove()
    os.exit(status)
end

-- A suite stopped by an error never reaches scratch.exit; main.c then closes the Lua state,
-- which runs this finalizer (the module table, kept by package.loaded, keeps it alive till then).
scratch._guard = setmetatable({}, {__gc = function() scratch.remove() end})

return scratch
