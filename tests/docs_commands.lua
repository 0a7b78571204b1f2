-- docs_commands.lua: every command the README and docs/*.md show still runs. Each fenced block
-- marked ```sh runs in sh -e, each ```lua block as a workbench script, in order, all in one scratch
-- folder of the build tree where build/workbench, experiments/ and scripts/ resolve as in a checkout.
--
-- A block is run unless the line before its fence says otherwise:
--   <!-- not run: REASON -->         never run here (it installs packages, needs a cluster or a GPU)
--   <!-- ctest: NAME[, NAME...] -->  run by those CTest tests instead (tests/CMakeLists.txt must
--                                    register them, running every script the block names); for
--                                    lessons that time host work and so run alone (RUN_SERIAL)
-- Long jobs run with their quick flags (QUICK below: added when the command does not give them).
--   workbench tests/docs_commands.lua            (ctest docs_commands; WB_EXE, WB_SOURCE_DIR)

local scratch = require("scratch")

local SOURCE = os.getenv("WB_SOURCE_DIR") or error("docs_commands: WB_SOURCE_DIR is not set")
local EXE = os.getenv("WB_EXE") or error("docs_commands: WB_EXE is not set")

-- Quick flags per experiment: the sizes the experiments' own CTest tests use.
local QUICK = {
    ["mlp_sweep.lua"] = {"--tokens", "1,16", "--dim", "64", "--hidden", "128", "--rounds", "1", "--max-rounds", "2",
        "--iters", "2", "--no-peer"},
    ["mlp_anatomy.lua"] = {"--tokens", "4", "--dim", "64", "--hidden", "256"},
    ["graph_replay.lua"] = {"--tokens", "1"},
    ["compile_linear.lua"] = {"--in", "64", "--out-features", "64", "--rounds", "2"},
    ["fusion.lua"] = {"--quick", "--tokens", "8", "--threads", "1"},
    ["gemm_bench.lua"] = {"--only", "epilogues", "--bf16-size", "64", "--rounds", "1", "--max-rounds", "1",
        "--threads", "1"},
    ["bf16_paths.lua"] = {"--tokens", "1"},
    ["contention.lua"] = {"--tokens", "1", "--dim", "64", "--hidden", "128", "--max-time-ms", "200"},
    ["profiler_overhead.lua"] = {"--rounds", "1"},
    ["gemm_anatomy.lua"] = {"--sizes", "96", "--tokens", "5", "--dim", "64", "--hidden", "160", "--rounds", "1"},
}

local function shell_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local read = scratch.read

local function write(path, text)
    local f = assert(io.open(path, "w"))
    f:write(text)
    f:close()
end

-- The pages: README.md, then docs/*.md by name.
local function pages()
    local list = {"README.md"}
    local p = assert(io.popen("cd " .. shell_quote(SOURCE) .. " && ls docs/*.md"))
    for line in p:lines() do list[#list + 1] = line end
    p:close()
    return list
end

-- The fenced blocks of a page: {file, line, lang, text, not_run, ctest}; problems in `bad`.
local function blocks_of(file, bad)
    local found, lines = {}, {}
    for l in (read(SOURCE .. "/" .. file) .. "\n"):gmatch("(.-)\n") do lines[#lines + 1] = l end
    local i = 1
    while i <= #lines do
        local lang = lines[i]:match("^```(%S*)%s*$")
        if lang and lang ~= "" then
            local b = {file = file, line = i, lang = lang, body = {}}
            local prev = lines[i - 1] or ""
            b.not_run = prev:match("^<!%-%- not run: (.-) %-%->$")
            local names = prev:match("^<!%-%- ctest: (.-) %-%->$")
            if names then
                b.ctest = {}
                for n in names:gmatch("[^,%s]+") do b.ctest[#b.ctest + 1] = n end
            elseif not b.not_run and prev:match("^<!%-%-") and (lang == "sh" or lang == "lua") then
                bad[#bad + 1] = string.format("%s:%d: a marker that is neither '<!-- not run: REASON -->' nor " ..
                    "'<!-- ctest: NAME -->': %s", file, i - 1, prev)
            end
            i = i + 1
            while i <= #lines and not lines[i]:match("^```%s*$") do
                b.body[#b.body + 1] = lines[i]
                i = i + 1
            end
            if i > #lines then bad[#bad + 1] = string.format("%s:%d: a code block never closed", file, b.line) end
            b.text = table.concat(b.body, "\n") .. "\n"
            found[#found + 1] = b
        end
        i = i + 1
    end
    return found
end

-- The experiments a block names (experiments/NAME.lua).
local function scripts_in(text)
    local names = {}
    for name in text:gmatch("experiments/([%w_]+%.lua)") do names[#names + 1] = name end
    return names
end

-- CTest tests registered in tests/CMakeLists.txt: name -> the text of its add_test(...).
local function registered_tests()
    local cmake = read(SOURCE .. "/tests/CMakeLists.txt")
    local tests = {}
    for body in cmake:gmatch("add_test(%b())") do
        local name = body:match("^%(NAME%s+([%w_]+)")
        if name then tests[name] = body end
    end
    return tests
end

-- build/workbench in the scratch folder: the real one, with an experiment's quick flags appended
-- unless the command gives that option itself.
local function write_wrapper(dir)
    local sh = {"#!/bin/sh", "# tests/docs_commands.lua: the workbench with each experiment's quick flags"}
    sh[#sh + 1] = "case \" $* \" in"
    local names = {}
    for name in pairs(QUICK) do names[#names + 1] = name end
    table.sort(names)
    for _, name in ipairs(names) do
        sh[#sh + 1] = string.format("*\"/%s \"*|*\" %s \"*)", name, name)
        local flags, i = QUICK[name], 1
        while i <= #flags do
            local opt, value = flags[i], flags[i + 1]
            if value and value:sub(1, 2) ~= "--" then i = i + 2 else value = nil; i = i + 1 end
            sh[#sh + 1] = string.format("    case \" $* \" in *\" %s \"*|*\" %s=\"*) ;; *) set -- \"$@\" %s%s ;; esac",
                opt, opt, opt, value and (" " .. value) or "")
        end
        sh[#sh + 1] = "    ;;"
    end
    sh[#sh + 1] = "esac"
    sh[#sh + 1] = "exec " .. shell_quote(EXE) .. " \"$@\""
    write(dir .. "/build/workbench", table.concat(sh, "\n") .. "\n")
    assert(os.execute("chmod +x " .. shell_quote(dir .. "/build/workbench")))
end

local bad, all = {}, {}
for _, file in ipairs(pages()) do
    for _, b in ipairs(blocks_of(file, bad)) do all[#all + 1] = b end
end

local dir = scratch.dir("-docs")
-- the plugins beside the executable too (WB_CUDA_PLUGIN=build/libwb_cuda_mock.so)
local exe_dir = EXE:match("^(.*)/[^/]*$") or "."
assert(os.execute(string.format("mkdir %s/build && ln -s %s/experiments %s/scripts %s/ && " ..
    "for f in %s/lib*.so; do [ -e \"$f\" ] && ln -s \"$f\" %s/build/; done; true", shell_quote(dir),
    shell_quote(SOURCE), shell_quote(SOURCE), shell_quote(dir), shell_quote(exe_dir), shell_quote(dir))))
write_wrapper(dir)

local tests = registered_tests()
local ran, skipped, by_ctest, failed = 0, {}, 0, {}
local env = "WB_HISTORY_DB=" .. shell_quote(dir .. "/history.db") .. " "
for n, b in ipairs(all) do
    local where = string.format("%s:%d", b.file, b.line)
    if b.lang ~= "sh" and b.lang ~= "lua" then -- output, synopses, tables: not commands
    elseif b.not_run then
        skipped[#skipped + 1] = where .. ": " .. b.not_run
    elseif b.ctest then
        local covered = {}
        for _, name in ipairs(b.ctest) do
            if not tests[name] then
                bad[#bad + 1] = where .. ": the block says CTest runs it as '" .. name ..
                    "', which tests/CMakeLists.txt does not register"
            else
                for _, s in ipairs(scripts_in(tests[name])) do covered[s] = true end
            end
        end
        for _, s in ipairs(scripts_in(b.text)) do
            if not covered[s] then bad[#bad + 1] = where .. ": no test of " .. table.concat(b.ctest, ", ") .. " runs " .. s end
        end
        by_ctest = by_ctest + 1
    else
        local file = string.format("%s/block%d.%s", dir, n, b.lang)
        write(file, b.text)
        local cmd = b.lang == "sh" and ("sh -e " .. shell_quote(file)) or ("build/workbench " .. shell_quote(file))
        local t0 = wb.time_ns()
        local out, code = scratch.run("cd " .. shell_quote(dir) .. " && " .. env .. cmd .. " </dev/null")
        local seconds = (wb.time_ns() - t0) / 1e9
        print(string.format("%-28s %-4s %6.1f s  %s", where, b.lang, seconds, code == 0 and "ok" or ("FAILED, status " .. tostring(code))))
        ran = ran + 1
        if code ~= 0 then
            failed[#failed + 1] = where
            print("  the block:\n    " .. b.text:gsub("\n$", ""):gsub("\n", "\n    "))
            print("  its output (the end):\n    " .. out:sub(-3000):gsub("\n$", ""):gsub("\n", "\n    "))
        end
    end
end

print(string.format("\n%d blocks run, %d run by other CTest tests, %d not run:", ran, by_ctest, #skipped))
for _, s in ipairs(skipped) do print("  " .. s) end
for _, s in ipairs(bad) do print("ERROR " .. s) end
scratch.remove()
if #failed > 0 or #bad > 0 or ran == 0 then
    print(string.format("docs_commands: %d failed (%s), %d problems with the pages", #failed,
        table.concat(failed, ", "), #bad))
    os.exit(1)
end
print("docs_commands: every command in README.md and docs/ ran")
