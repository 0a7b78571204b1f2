-- test_codegen_cache.lua: the code cache cannot be planted (issue 33): a folder open to others or
-- owned by another user is refused with the reason, an object is loaded only when its record
-- matches (a planted .so's constructor never runs), a planted symlink is replaced instead of
-- written through, there is no shared default under /tmp, and a sandboxed script sees no cache.
local lu = require("luaunit")
local scratch = require("scratch")

local exe = scratch.exe()

local function sh(cmd)
    local f = assert(io.popen(cmd .. " 2>&1"))
    local out = f:read("a")
    f:close()
    return out
end

-- a child that builds one kernel from this source in `cache` and prints what happened
local SOURCE = "void wb_cache_probe(const void *a) { (void)a; }\n"
local CHILD = scratch.file(string.format([[
local k, msg, why = wb.codegen.build{symbol = "wb_cache_probe", source = %q, ops = "probe", dtype = "f32", inputs = 1}
local i = wb.codegen.info()
print(k and "built" or "refused", msg, why)
print("counts", i.compiles, i.hits)
]], SOURCE), ".lua")
local function build_in(cache, env) return sh((env or "") .. "WB_CACHE_DIR=" .. cache .. " " .. exe .. " " .. CHILD) end

local function fresh_cache()
    local dir = scratch.dir("_cache")
    sh("chmod 700 " .. dir)
    return dir
end

local function entries(dir, ext)
    local list = {}
    for name in sh("ls " .. dir):gmatch("[^\n]+") do
        if name:sub(-#ext) == ext then list[#list + 1] = dir .. "/" .. name end
    end
    return list
end

function test_compiles_once_then_hits()
    local cache = fresh_cache()
    lu.assertStrContains(build_in(cache), "counts\t1\t0")
    lu.assertStrContains(build_in(cache), "counts\t0\t1")
    lu.assertEquals(#entries(cache, ".rec"), 1) -- the record beside the object
    lu.assertStrContains(io.open(entries(cache, ".rec")[1]):read("a"), "command ")
end

-- a cache folder with a space in its path ("/home/Jane Doe/.cache"): the compiler's command was
-- split at every space, the object's and the source's paths with it (every group then ran eager)
function test_cache_folder_with_a_space_in_its_path()
    local cache = scratch.dir("_cache with space")
    sh("chmod 700 '" .. cache .. "'")
    local out = build_in("'" .. cache .. "'")
    lu.assertStrContains(out, "built")
    lu.assertStrContains(out, "counts\t1\t0")
    lu.assertStrContains(build_in("'" .. cache .. "'"), "counts\t0\t1")
end

-- a cache folder longer than the code keeps: refused naming the variable (it was cut to 399 bytes,
-- and the kernels went into another, shorter folder)
function test_cache_folder_too_long_is_refused()
    local long = scratch.path("_" .. string.rep("x", 420))
    local out = build_in(long)
    lu.assertStrContains(out, "refused\tcodegen: the cache folder from WB_CACHE_DIR is longer than 399 bytes")
    lu.assertStrContains(out, "counts\t0\t0")
end

-- a CC too long for the command, or of more words than it holds: refused by name (it was cut,
-- and a cut between flags compiles with flags missing)
function test_compiler_command_too_long_is_refused_not_cut()
    local out = build_in(fresh_cache(), "CC='cc -DX" .. string.rep("x", 2100) .. "' ")
    lu.assertStrContains(out, "refused\tcodegen: CC and the flags are longer than 2047 bytes")
    out = build_in(fresh_cache(), "CC='cc" .. string.rep(" -DX", 70) .. "' ")
    lu.assertStrContains(out, "refused\tcodegen: the compiler's command has more than 60 words")
end

-- a FIFO where the record (or the object) should be: the open waited for a writer, for ever
function test_fifo_in_the_cache_is_rebuilt_over_not_waited_on()
    local cache = fresh_cache()
    lu.assertStrContains(build_in(cache), "counts\t1\t0")
    for _, ext in ipairs({".rec", ".so"}) do
        local entry = entries(cache, ext)[1]
        sh("rm -f '" .. entry .. "' && mkfifo '" .. entry .. "'")
        local out = build_in(cache, "timeout 20 env ")
        lu.assertStrContains(out, "built")
        lu.assertStrContains(out, "counts\t1\t0")
    end
end

function test_folder_open_to_others_is_refused_with_the_reason()
    local cache = fresh_cache()
    sh("chmod 755 " .. cache)
    local out = build_in(cache)
    lu.assertStrContains(out, "refused")
    lu.assertStrContains(out, "is refused: its mode is 0755")
    lu.assertStrContains(out, "no_compiler") -- the code generator is off, not failing group by group
    lu.assertStrContains(out, "counts\t0\t0")
end

function test_folder_of_another_user_is_refused()
    if sh("id -u"):match("^(%d+)") ~= "0" then return end -- only root can give a folder away
    local cache = fresh_cache()
    sh("chown 12345 " .. cache)
    local out = build_in(cache)
    lu.assertStrContains(out, "is owned by uid 12345, not by this user (uid 0)")
    lu.assertStrContains(out, "counts\t0\t0")
end

-- a planted object (the right symbol, and a constructor that leaves a mark) is not loaded: its
-- record does not match, so it is rebuilt; before, dlopen ran its constructor
function test_planted_object_is_rebuilt_not_loaded()
    local cache = fresh_cache()
    lu.assertStrContains(build_in(cache), "counts\t1\t0")
    local mark = scratch.path(".mark")
    local planted = scratch.file(string.format([[
#include <stdio.h>
__attribute__((constructor)) static void planted(void) { FILE *f = fopen("%s", "w"); if (f) fclose(f); }
void wb_cache_probe(const void *a) { (void)a; }
]], mark), ".c")
    local so = entries(cache, ".so")[1]
    lu.assertEquals(sh("cc -shared -fPIC -o " .. so .. " " .. planted), "")
    lu.assertStrContains(build_in(cache), "counts\t1\t0")
    lu.assertNil(io.open(mark), "the planted object's constructor ran")
    -- and a record that matches no longer: the object's bytes changed since it was written
    sh("printf 'x' >> " .. entries(cache, ".so")[1])
    lu.assertStrContains(build_in(cache), "counts\t1\t0")
end

-- a symlink planted where the source goes is replaced; the file it points to is untouched
function test_planted_symlink_is_not_written_through()
    local cache = fresh_cache()
    lu.assertStrContains(build_in(cache), "counts\t1\t0")
    local c, victim = entries(cache, ".c")[1], scratch.file("precious\n")
    sh("rm -f " .. cache .. "/*.so " .. c .. " && ln -s " .. victim .. " " .. c)
    lu.assertStrContains(build_in(cache), "counts\t1\t0")
    lu.assertEquals(io.open(victim):read("a"), "precious\n")
    lu.assertStrContains(io.open(c):read("a"), "wb_cache_probe")
end

function test_no_shared_default_under_tmp()
    local out = sh("env -u WB_CACHE_DIR -u XDG_CACHE_HOME -u HOME " .. exe ..
        " -e 'print(\"dir\", wb.codegen.info().cache_dir)'")
    lu.assertStrContains(out, "dir\t")
    lu.assertNotStrContains(out, "/tmp/.cache")
end

function test_sandboxed_script_sees_no_cache_folder()
    local out_dir = scratch.dir("_out")
    local script = scratch.file([[
print("dir", wb.codegen.info().cache_dir)
print("build", wb.codegen.build{symbol = "wb_x", source = "", ops = "x", dtype = "f32", inputs = 1})
]], ".lua")
    local out = sh(exe .. " --sandbox --out " .. out_dir .. " " .. script)
    lu.assertStrContains(out, "dir\tnil")
    lu.assertStrContains(out, "build\tnil\t--sandbox: no compiler runs")
end

scratch.exit(lu.LuaUnit.run())
