-- wb.sandbox: the policy `workbench --sandbox script.lua` runs someone else's script under.
--   * no processes (os.execute, io.popen), no C modules (package.loadlib, cpath searchers),
--     no binary chunks (load/loadfile/dofile/require take text only; string.dump is gone), no
--     debug library, no temporary files (os.tmpname), environment variables other than WB_*
--     read as nil;
--   * files are read only under the script's folder, the workbench's library (and the
--     system's Lua library folders) and --out; written, removed and renamed only under --out;
--     paths are resolved (symlinks, ..) before they are checked;
--   * the library's own writers (results, traces, folders) follow the same rule.
-- Installed by main.c before the script's first line; it changes the shared globals in place.

return function(o)
    local realpath, mkdir_p = wb._realpath, wb._mkdir_p
    local io_open, io_lines, io_input, io_output = io.open, io.lines, io.input, io.output
    local os_remove, os_rename, os_getenv = os.remove, os.rename, os.getenv
    local raw_load, raw_loadfile = load, loadfile
    local concat, format = table.concat, string.format

    local function dir_of(path) return path:match("^(.*)/[^/]*$") or "." end
    local ok, err = mkdir_p(o.out)
    if not ok then error("sandbox: " .. tostring(err), 0) end
    local script_dir = assert(realpath(dir_of(o.script)))
    local out_dir = assert(realpath(o.out))
    local read_roots, write_roots = {script_dir, out_dir}, {out_dir}
    -- the system's Lua library folders (Debian links 5.4's files to 5.1's, hence the whole tree)
    for _, d in ipairs({o.library, "/usr/share/lua", "/usr/local/share/lua"}) do
        local p = d and realpath(d)
        if p then read_roots[#read_roots + 1] = p end
    end

    local function under(path, roots)
        local p = realpath(path)
        if not p then return false end
        for _, r in ipairs(roots) do
            if p == r or p:sub(1, #r + 1) == r .. "/" then return true end
        end
        return false
    end

    local function check(path, write, what)
        if type(path) ~= "string" then error(format("sandbox: %s needs a file name", what), 3) end
        if not under(path, write and write_roots or read_roots) then
            error(format("sandbox: %s may not %s '%s' (%s)", what, write and "write" or "read", path,
                write and ("writing is allowed under " .. out_dir)
                    or ("reading is allowed under " .. concat(read_roots, ", "))), 3)
        end
    end

    -- files
    io.open = function(path, mode)
        mode = mode or "r"
        check(path, type(mode) == "string" and mode:find("[wa+]") ~= nil, "io.open")
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
    io.popen = nil
    os.remove = function(path)
        check(path, true, "os.remove")
        return os_remove(path)
    end
    os.rename = function(a, b)
        check(a, true, "os.rename")
        check(b, true, "os.rename")
        return os_rename(a, b)
    end
    os.execute, os.tmpname = nil, nil
    os.getenv = function(name)
        if type(name) == "string" and name:match("^WB_") then return os_getenv(name) end
        return nil
    end

    -- code: text chunks only (the arity of load's env argument matters: nil is not absent)
    load = function(chunk, name, _, ...)
        if select("#", ...) > 0 then return raw_load(chunk, name, "t", (...)) end
        return raw_load(chunk, name, "t")
    end
    loadfile = function(path, _, ...)
        if path == nil then error("sandbox: loadfile from stdin is not allowed", 2) end
        check(path, false, "loadfile")
        if select("#", ...) > 0 then return raw_loadfile(path, "t", (...)) end
        return raw_loadfile(path, "t")
    end
    dofile = function(path)
        if path == nil then error("sandbox: dofile from stdin is not allowed", 2) end
        check(path, false, "dofile")
        local f = assert(raw_loadfile(path, "t"))
        return f()
    end
    string.dump = nil
    debug = nil
    package.loaded.debug = nil

    -- modules: Lua files from the allowed folders only
    package.loadlib = nil
    package.cpath = ""
    package.path = concat({script_dir .. "/?.lua", (o.library or ".") .. "/?.lua", (o.library or ".") .. "/?/init.lua",
        "/usr/share/lua/5.4/?.lua", "/usr/share/lua/5.4/?/init.lua"}, ";")
    local function lua_searcher(name)
        local tried = {}
        local file = name:gsub("%.", "/")
        for template in package.path:gmatch("[^;]+") do
            local path = template:gsub("%?", file)
            local f = under(path, read_roots) and io_open(path)
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

    -- the library's own writers
    wb._mkdir_p = function(path)
        local probe = path
        while probe ~= "" and not realpath(probe) do probe = dir_of(probe) end
        if probe == "" or path:find("%.%.") or not under(probe, write_roots) then
            error(format("sandbox: may not create the folder '%s' (writing is allowed under %s)", tostring(path),
                out_dir), 2)
        end
        return mkdir_p(path)
    end
    wb._sandbox_check_write = function(path) check(path, true, "export") end
    wb.sandboxed = true
    package.loaded["wb.sandbox"] = function() error("sandbox: already installed", 2) end
end
