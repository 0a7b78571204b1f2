-- wb.mlp_peers: the peers of the main job (experiments/mlp_sweep.lua), timed after each round of
-- ours on the same shapes, so that ours and theirs sample the same stretches of a shared
-- machine's time, their samples kept round by round (wb.torch_peer.keep):
--   PyTorch's eager CPU forward (wb.torch_peer: experiments/peers/torch_mlp.py, or --peer's command);
--   oneDNN's MLP (when its peer module was built): per token count a wb.dnnl.mlp on our weights
--   (three matmul primitives, the gate's activation and the multiply by the up projection as
--   post-ops), checked against eager before any timing, timed by the rule our modes are timed by.
--   Its primitives are made for, and run on, the thread count asked for (a primitive runs on the
--   threads there were when it was made); ours may drop to one under contention
--   (wb.set_threads_adaptive). It runs in this process on the workbench's own OpenMP runtime
--   (libgomp: one team of threads, shared), so it cannot spin against ours: the wait policy of
--   that one runtime is the process's, read from OMP_WAIT_POLICY when the workbench starts.
--
--   local peers = require("wb.mlp_peers").new{command =, torch = enabled, dnnl = enabled, script =}
--   peers.torch, peers.dnnl: each with samples[t], per_round[t], label (once it answered / was built)
--   peers.list: {{name =, prefix =, timing = function(t) -> wb.verdict's timing or nil}}
--   peers.prepare(tokens, mlp, x, ref, tolerance, kind): oneDNN's MLP for a token count, checked
--   peers.round(points, shape, x_of, time_forward) -> " (and PyTorch's and oneDNN's)" or ""
--   peers.notes() -> the lines that say which peer did not run, and why
local torch_peer = require("wb.torch_peer")
local plural = require("wb.words").plural

local M = {}

local function new_dnnl(enabled)
    local dnnl = {samples = {}, per_round = {}, mlp = {}, kernels = {}, threads = wb.get_num_threads()}
    if enabled then
        if wb.dnnl.available() then
            local i = wb.dnnl.info()
            dnnl.label = string.format("%s (%s, %s)", i.version, i.isa, plural(dnnl.threads, "thread"))
        elseif wb.sandboxed then -- (the loader's own message would be a permission error on its library)
            dnnl.why_not = "its library is not loaded under --sandbox"
        else
            dnnl.why_not = wb.dnnl.why_not()
        end
    end
    return dnnl
end

function M.new(o)
    local torch = torch_peer.new{command = o.command, enabled = o.torch, script = o.script}
    local dnnl = new_dnnl(o.dnnl)
    local peers = {torch = torch, dnnl = dnnl}
    local function entry(p, name, prefix)
        return {name = name, prefix = prefix, timing = function(t) return torch_peer.timing(p, t) end}
    end
    peers.list = {entry(torch, "PyTorch", "torch"), entry(dnnl, "oneDNN", "dnnl")}

    -- oneDNN's MLP on the weights of mlp (a wb.nn GeGLUMLP or SwiGLUMLP) for input x, checked
    -- against eager's output ref; where it cannot be made, the peer drops out with the reason
    function peers.prepare(tokens, mlp, x, ref, tolerance, kind)
        if not dnnl.label then return end
        wb.dnnl.set_num_threads(dnnl.threads)
        local ok, m = pcall(wb.dnnl.mlp, mlp.gate_proj.weight, mlp.up_proj.weight, mlp.down_proj.weight, tokens, kind)
        if not ok then
            dnnl.label, dnnl.why_not = nil, tostring(m)
        else
            local err = wb.rel_error(m(x), ref)
            if err >= tolerance then
                error(string.format("mlp_sweep: oneDNN's MLP disagrees with eager at tokens %d (rel. error %.2e)",
                    tokens, err), 0)
            end
            dnnl.mlp[tokens], dnnl.kernels[tokens] = m, m:kernels()
        end
        wb.set_num_threads(dnnl.threads)
    end

    -- One round of each peer at the token counts of these points (the sweep's round's; shape:
    -- torch_peer's {dim, hidden, threads, dtype, rounds, min_time_ms}; x_of(t): our input;
    -- time_forward: our modes' rule), and what the progress line adds.
    function peers.round(points, shape, x_of, time_forward)
        local tokens, seen = {}, {}
        for _, p in ipairs(points) do
            if not seen[p.tokens] then tokens[#tokens + 1] = p.tokens end
            seen[p.tokens] = true
        end
        torch.round(tokens, shape)
        if dnnl.label then
            wb.dnnl.set_num_threads(dnnl.threads)
            for _, t in ipairs(tokens) do
                local m, x = dnnl.mlp[t], x_of(t)
                if m then torch_peer.keep(dnnl, t, time_forward(function() m(x) end)) end
            end
            wb.set_num_threads(dnnl.threads) -- the same OpenMP setting as ours: theirs again, adaptive as before
        end
        local also = {}
        if torch.version then also[#also + 1] = "PyTorch's" end
        if dnnl.label then also[#also + 1] = "oneDNN's" end
        return #also > 0 and " (and " .. table.concat(also, " and ") .. ")" or ""
    end

    function peers.notes()
        local lines = {}
        if torch.why then
            lines[#lines + 1] = "(no PyTorch rows: " .. torch.why .. ")"
        elseif o.command and not torch.version then
            lines[#lines + 1] = "(the --peer command printed no results: " .. o.command .. ")"
        elseif not torch.version and o.torch then
            lines[#lines + 1] = "(PyTorch not found: install python3-torch to time its eager CPU forward beside " ..
                "these figures)"
        end
        if dnnl.why_not then lines[#lines + 1] = "(no oneDNN rows: " .. dnnl.why_not .. ")" end
        return lines
    end
    return peers
end

return M
