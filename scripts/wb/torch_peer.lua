-- wb.torch_peer: PyTorch's eager CPU forward of the same GeGLU MLP as a peer of the main job
-- (experiments/mlp_sweep.lua), through experiments/peers/torch_mlp.py: one run per round, after
-- our modes' round, so that ours and the peer's samples come from the same stretches of time
-- (alternate the contenders: a machine's speed drifts between minutes). Its OpenMP runtime is told
-- not to spin-wait (OMP_WAIT_POLICY=passive, unless the environment sets it): a spinning team left
-- behind by a peer competes with the next round of ours for the cores.
--
--   local torch = require("wb.torch_peer").new{command =, enabled =, script =}
--       command: another peer's command (--peer), taking torch_mlp.py's options and JSON; else
--       script (torch_mlp.py) where enabled and the file is there
--   torch.round(tokens, {dim =, hidden =, threads =, dtype =, rounds =, min_time_ms =, min_sample_us =}): one round;
--       the samples go to torch.samples[t] (torch.per_round[t]: how many each round gave);
--       torch.version, .blas, .label once it answered; torch.failed when it did not
--   require("wb.torch_peer").keep(peer, t, samples): a round's samples of any peer, kept the same way;
--   .timing(peer, t): its timing at t tokens for wb.verdict, or nil
local M = {}

-- A peer's samples per token count, kept round by round (per_round: one count per round), so its
-- statistics are taken as ours are (the median of the rounds' medians, the noise with rounds alike).
function M.keep(peer, t, samples)
    local s, per = peer.samples[t] or {}, peer.per_round[t] or {}
    for _, v in ipairs(samples) do s[#s + 1] = v end
    per[#per + 1] = #samples
    peer.samples[t], peer.per_round[t] = s, per
end

-- A peer's timing at a token count (wb.verdict's {samples =, per_round =}), or nil where it did not run.
function M.timing(peer, t)
    if not peer.samples[t] then return nil end
    return {samples = peer.samples[t], per_round = peer.per_round[t]}
end

local function exists(path)
    local f = io.open(path)
    if f then f:close() end
    return f ~= nil
end

function M.new(o)
    local torch = {samples = {}, per_round = {}}
    local peer_cmd
    if o.command then
        peer_cmd = o.command
    elseif o.enabled and exists(o.script) then
        -- Debian's python3-torch lives with Debian's interpreter, which a pyenv python3 would hide
        local python = exists("/usr/bin/python3") and "/usr/bin/python3" or "python3"
        peer_cmd = string.format("%s '%s'", python, o.script)
    end
    local wait_policy = (os.getenv("OMP_WAIT_POLICY") or "") ~= "" and os.getenv("OMP_WAIT_POLICY") or "passive"
    torch.wait_policy = wait_policy
    function torch.round(peer_tokens, c)
        if not peer_cmd or torch.failed then return end
        local cmd = string.format("OMP_WAIT_POLICY=%s %s --tokens %s --dim %d --hidden %d --threads %d --dtype %s " ..
            "--rounds %d --min-time-ms %d%s 2>/dev/null", wait_policy, peer_cmd, table.concat(peer_tokens, ","), c.dim,
            c.hidden, c.threads, c.dtype, c.rounds, c.min_time_ms,
            (c.min_sample_us or 0) > 0 and string.format(" --min-sample-us %d", c.min_sample_us) or "")
        -- (under --sandbox io.popen raises: no processes run there; the sweep goes on without it)
        local opened, pipe = pcall(io.popen, cmd)
        if not opened then
            torch.failed, torch.why = true, wb.sandboxed and "it runs as a process, and no processes run under " ..
                "--sandbox" or tostring(pipe)
            return
        end
        local text = pipe and pipe:read("a") or ""
        if pipe then pipe:close() end
        local okj, data = pcall(require("cjson").decode, text)
        if not (okj and type(data) == "table" and type(data.results) == "table") then
            torch.failed = true -- not installed (or broken): no peer rows, said at the end
            return
        end
        torch.version = tostring(data.torch)
        -- what the rows and the report name: the version and the BLAS its GEMMs ran on: the library
        -- the peer found loaded (BLAS_INFO=generic only says torch calls whatever libblas.so.3 is),
        -- else the build's BLAS_INFO; never the raw build string
        local info = type(data.blas) == "string" and data.blas:match("BLAS_INFO=([%w_]+)")
        local library = type(data.blas_library) == "string" and data.blas_library ~= "" and data.blas_library:sub(1, 80)
        torch.blas = library or (info and "BLAS_INFO=" .. info) or "BLAS not reported"
        torch.label = string.format("PyTorch %s (%s)", torch.version, library or (info and "BLAS " .. info) or
            "BLAS not reported")
        for _, r in ipairs(data.results) do
            M.keep(torch, r.tokens, type(r.samples_ms) == "table" and r.samples_ms or {r.median_ms})
        end
    end
    return torch
end

return M
