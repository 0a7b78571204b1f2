-- test_help.lua: every public function has help (help() is the REPL's documentation).
local lu = require("luaunit")
local help = require("wb.help")

local function captured(x)
    local out = {}
    local saved = print
    print = function(...) out[#out + 1] = table.concat({...}, "\t") end -- luacheck: ignore
    help(x)
    print = saved -- luacheck: ignore
    return table.concat(out, "\n")
end

TestHelp = {}

function TestHelp:test_every_public_function_is_documented()
    local missing = {}
    local function check(name, f)
        local text = captured(f)
        if text:match("^no help") then missing[#missing + 1] = name end
    end
    for k, v in pairs(wb) do
        if type(v) == "function" and k:sub(1, 1) ~= "_" then check("wb." .. k, v) end
    end
    for _, m in ipairs({"nn", "graph", "profiler", "sweep", "args"}) do
        for k, v in pairs(wb[m]) do
            if type(v) == "function" then check("wb." .. m .. "." .. k, v) end
        end
    end
    check("wb.compile", wb.compile)
    check("wb.bench", wb.bench)
    check("wb.results", wb.results)
    for k, v in pairs(wb.Tensor.__methods) do check("tensor:" .. k, v) end
    table.sort(missing)
    lu.assertEquals(missing, {})
end

-- What a newcomer looked for: wb.args (converter factories), wb.compile's codegen=, a compiled
-- function's own entry (not its field `fn`), wb.sweep{...} itself beside its helpers.
function TestHelp:test_args_compile_and_sweep_entries()
    lu.assertStrContains(captured(wb.args), "wb.args.int(option, lo, hi) -> a converter for parser:option(...):convert")
    lu.assertStrContains(captured(wb.args.int), 'convert(args.int("--tokens", 1, 65536))')
    lu.assertStrContains(captured(wb.compile), "codegen=true")
    local f = wb.compile(function(x) return x end)
    local text = captured(f)
    lu.assertStrContains(text, "a compiled function (wb.compile(fn))")
    lu.assertStrContains(text, "f:explain()")
    lu.assertNotEquals(text, "fn")
    lu.assertStrContains(captured(wb.sweep):match("^[^\n]*"), "wb.sweep{name=, axes=")
    lu.assertStrContains(captured(nil), "wb.args")
    lu.assertStrContains(captured("options"), "wb.options.out")
end

function TestHelp:test_forms()
    lu.assertStrContains(captured(nil), "workbench help")
    lu.assertStrContains(captured("linear"), "wb.linear(x, w")
    lu.assertStrContains(captured(wb.ones({2})), "methods: ")
    lu.assertStrContains(captured("nope"), "no help for 'nope'")
    -- a table lists its public functions only; an unknown name is echoed short and without
    -- control characters; help has an entry of its own
    local listed = captured(wb)
    lu.assertStrContains(listed, "wb.linear(x, w")
    lu.assertNotStrContains(listed, "_profiler_push")
    lu.assertNil(("\n" .. listed):find("\n_%w"), "an internal _ function listed")
    lu.assertEquals(captured(string.rep("x", 5000) .. "\27[31m"),
        "no help for '" .. string.rep("x", 60) .. "...' (help() lists the topics)")
    lu.assertEquals(captured("a\27[31m"), "no help for 'a?[31m' (help() lists the topics)")
    lu.assertStrContains(captured("help"), "wb.help([x])")
end

os.exit(lu.LuaUnit.run())
