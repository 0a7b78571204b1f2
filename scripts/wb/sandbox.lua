-- wb.sandbox: the Lua side of `workbench --sandbox script.lua` (guard.c then has the kernel
-- enforce the same folders with Landlock, and refuse execve, ptrace and sockets with seccomp).
-- What this side adds is clear messages and what the kernel cannot see:
--   * no processes (os.execute, io.popen), no C modules (package.loadlib, cpath searchers),
--     no binary chunks (load/loadfile/dofile/require take text only; string.dump is gone), no
--     debug library, no temporary files (os.tmpname, io.tmpfile), no package.searchpath,
--     environment variables other than WB_* read as nil; a function taken away raises, naming
--     itself and the sandbox (os.execute() without a command answers false: no shell);
--   * files are read only under the script's folder, the workbench's library and --out;
--     written, removed and renamed only under --out: every such call goes through the one check
--     in C (bindings/l_files.c), which the library's own writers use too. A refused path gets
--     the answer standard Lua gives for a file it cannot open: nil, message, EACCES from io.open,
--     os.remove and os.rename, nil, message from loadfile, an error from io.lines, io.input,
--     io.output and dofile; the message names the path as written, never what is there;
--   * the wb._* internals are gone from `wb`; the library's modules captured them at load;
--   * nested coroutine.close calls and cjson's depth setters are bounded (crashes of Lua 5.4.4
--     and lua-cjson: a signal, not an error, otherwise).
-- Everything this file uses is captured before the script runs, so a script that replaces
-- `error`, `type` or string methods changes nothing here. Installed once, by main.c.

return function(o)
    -- the cached calibration, read while HOME and the cache's folder still can be
    require("wb.calibrate").before_sandbox()
    local type, error, select, pcall, tostring, ipairs, pairs = type, error, select, pcall, tostring, ipairs, pairs
    local rawset, getmetatable = rawset, getmetatable
    local sfind, smatch, sgsub, sformat, ssub = string.find, string.match, string.gsub, string.format, string.sub
    local sgmatch = string.gmatch
    local concat = table.concat
    local realpath, mkdir_p, check_path, set_roots = wb._realpath, wb._mkdir_p, wb._check_path, wb._sandbox_roots
    local path_refusal = wb._path_refusal
    local io_open, io_lines, io_input, io_output = io.open, io.lines, io.input, io.output
    local os_remove, os_rename, os_getenv = os.remove, os.rename, os.getenv
    local raw_load, raw_loadfile = load, loadfile
    local require = require

    local function dir_of(path)
        local d = smatch(path, "^(.*)/[^/]*$")
        return d == "" and "/" or d or "."
    end
    local ok, err = mkdir_p(o.out)
    if not ok then error("sandbox: " .. tostring(err), 0) end
    -- the folder of the script as named (of a link, not of its target; guard.c refused /dev/stdin)
    local script_dir = assert(realpath(dir_of(o.script)))
    local out_dir = assert(realpath(o.out))
    local read_roots, write_roots = {script_dir, out_dir}, {out_dir}
    -- `workbench diff --ab --sandbox A.lua B.lua`: B's folder too
    local script2_dir = o.script2 and assert(realpath(dir_of(o.script2)))
    if script2_dir and script2_dir ~= script_dir then read_roots[#read_roots + 1] = script2_dir end
    -- the system's Lua library folders (Debian links 5.4's files to 5.1's, hence the whole tree)
    for _, d in ipairs({o.library, "/usr/share/lua", "/usr/local/share/lua"}) do
        local p = d and realpath(d)
        if p then read_roots[#read_roots + 1] = p end
    end
    set_roots(read_roots, write_roots)

    -- nil where the path is allowed, else the message and EACCES
    local function refusal(path, write, what)
        if type(path) ~= "string" then error(sformat("sandbox: %s needs a file name", what), 3) end
        return path_refusal(path, write, what)
    end
    local function check(path, write, what) -- raises where the path is refused
        if type(path) ~= "string" then error(sformat("sandbox: %s needs a file name", what), 3) end
        local msg = path_refusal(path, write, what)
        if msg then error(msg, 3) end
    end
    local function allowed(path) return (pcall(check_path, path, false)) end
    -- what takes the place of a function the sandbox takes away
    local function removed(name, why)
        return function() error(sformat("%s: sandbox: %s", name, why), 2) end
    end

    -- files
    io.open = function(path, mode)
        mode = mode or "r"
        local msg, code = refusal(path, type(mode) ~= "string" or sfind(mode, "[wa+]") ~= nil, "io.open")
        if msg then return nil, msg, code end
        return io_open(path, mode)
    end
    io.lines = function(path, ...)
        if path ~= nil then check(path, false, "io.lines") end
        return io_lines(path, ...)
    end
    io.input = function(f)
        if type(f) == "string" then check(f, false, "io.input") end
        return io_input(f)
    end
    io.output = function(f)
        if type(f) == "string" then check(f, true, "io.output") end
        return io_output(f)
    end
    local NO_TEMPORARY = "no temporary files under --sandbox (write beneath wb.options.out)"
    io.popen = removed("io.popen", "no processes run under --sandbox")
    io.tmpfile = removed("io.tmpfile", NO_TEMPORARY)
    os.remove = function(path)
        local msg, code = refusal(path, true, "os.remove")
        if msg then return nil, msg, code end
        return os_remove(path)
    end
    os.rename = function(a, b)
        local msg, code = refusal(a, true, "os.rename")
        if not msg then msg, code = refusal(b, true, "os.rename") end
        if msg then return nil, msg, code end
        return os_rename(a, b)
    end
    os.execute = function(...)
        if select("#", ...) == 0 then return false end -- standard Lua's question "is there a shell?"
        error("os.execute: sandbox: no processes run under --sandbox", 2)
    end
    os.tmpname = removed("os.tmpname", NO_TEMPORARY)
    os.getenv = function(name)
        if type(name) == "string" and smatch(name, "^WB_") then return os_getenv(name) end
        return nil
    end

    -- code: text chunks only (the arity of load's env argument matters: nil is not absent)
    load = function(chunk, name, _, ...)
        if select("#", ...) > 0 then return raw_load(chunk, name, "t", (...)) end
        return raw_load(chunk, name, "t")
    end
    loadfile = function(path, _, ...)
        if path == nil then error("sandbox: loadfile from stdin is not allowed", 2) end
        local msg = refusal(path, false, "loadfile")
        if msg then return nil, msg end
        if select("#", ...) > 0 then return raw_loadfile(path, "t", (...)) end
        return raw_loadfile(path, "t")
    end
    dofile = function(path)
        if path == nil then error("sandbox: dofile from stdin is not allowed", 2) end
        check(path, false, "dofile")
        local f, msg = raw_loadfile(path, "t")
        if not f then error(msg, 2) end
        return f()
    end
    string.dump = removed("string.dump", "no binary chunks under --sandbox")
    debug = nil
    package.loaded.debug = nil

    -- modules: Lua files from the allowed folders only
    package.loadlib = removed("package.loadlib", "no C modules load under --sandbox")
    package.searchpath = removed("package.searchpath",
        "not available under --sandbox (require finds the script's modules)")
    package.cpath = ""
    local library = o.library or "."
    -- the order of a run without --sandbox: the library, the system's modules, then the script's
    -- folder (a file beside the script named like a module of either is not it; a folder whose
    -- name holds Lua's path characters ; or ? cannot be an entry: not searched)
    local entries = {library .. "/?.lua", library .. "/?/init.lua", "/usr/share/lua/5.4/?.lua",
        "/usr/share/lua/5.4/?/init.lua"}
    for _, dir in ipairs({script_dir, script2_dir ~= script_dir and script2_dir or nil}) do
        if not dir:find("[;?]") then entries[#entries + 1] = dir .. "/?.lua" end
    end
    package.path = concat(entries, ";")
    local search_path = package.path -- fixed: a script that changes package.path changes nothing
    local function lua_searcher(name)
        if type(name) ~= "string" then error("require: needs a module name", 2) end
        local tried = {}
        local file = sgsub(name, "%.", "/")
        for template in sgmatch(search_path, "[^;]+") do
            local path = sgsub(template, "%?", file)
            local f = allowed(path) and io_open(path)
            if f then
                f:close()
                local chunk, msg = raw_loadfile(path, "t")
                if not chunk then error(msg, 0) end
                return chunk, path
            end
            tried[#tried + 1] = "\n\tno file '" .. path .. "' (or not allowed)"
        end
        return concat(tried)
    end
    package.searchers = {package.searchers[1], lua_searcher}

    -- crashes of the Lua and lua-cjson this ships with, refused here with a message instead of a
    -- signal: Lua 5.4.4 does not count nested coroutine.close calls (a __close handler closing
    -- another coroutine, and so on) against the C stack (fixed in 5.4.5); cjson's depth setters let
    -- a document recurse far past what the C stack holds
    local co_close = coroutine.close
    local closing, MAX_CLOSING = 0, 100
    local function unwind(ok, ...)
        closing = closing - 1
        if not ok then error((...), 0) end
        return ...
    end
    coroutine.close = function(co)
        if closing >= MAX_CLOSING then
            error(sformat("coroutine.close: sandbox: more than %d closes nested inside each other", MAX_CLOSING), 2)
        end
        closing = closing + 1
        return unwind(pcall(co_close, co))
    end
    local raw_cjson = package.loaded.cjson
    if raw_cjson then
        local MAX_DEPTH = 1000 -- lua-cjson's default
        local function clamped(module)
            local proxy = {}
            for k, v in pairs(module) do proxy[k] = v end
            for _, name in ipairs({"decode_max_depth", "encode_max_depth"}) do
                local set = module[name]
                proxy[name] = function(depth, ...)
                    local n = tonumber(depth)
                    if n and n > MAX_DEPTH then
                        error(sformat("cjson.%s: sandbox: at most %d levels (asked for %s)", name, MAX_DEPTH,
                            tostring(depth)), 2)
                    end
                    return set(depth, ...)
                end
            end
            local new = module.new
            if new then proxy.new = function(...) return clamped(new(...)) end end
            return proxy
        end
        package.loaded.cjson = clamped(raw_cjson)
    end

    -- string methods: a copy the script cannot change (`string.find = f` changes its own calls only)
    local string_methods = {}
    for k, v in pairs(string) do string_methods[k] = v end
    local string_meta = getmetatable("")
    string_meta.__index = string_methods
    string_meta.__metatable = false

    -- the library's modules that read internals when they load take them now (wb.compile brings
    -- wb.codegen and wb.compile_choices; wb.help reads the op lists); then the internals go
    for _, m in ipairs({"wb.results", "wb.profiler", "wb.profiler_export", "wb.report", "wb.calibrate", "wb.compile",
        "wb.help", "wb.trace", "wb.merge"}) do
        require(m)
    end
    local internals = {}
    for k in pairs(wb) do
        if type(k) == "string" and ssub(k, 1, 1) == "_" then internals[#internals + 1] = k end
    end
    for _, k in ipairs(internals) do rawset(wb, k, nil) end
    wb.sandboxed = true
    package.loaded["wb.sandbox"] = function() error("sandbox: already installed", 2) end
    return {read = read_roots, write = write_roots}
end
