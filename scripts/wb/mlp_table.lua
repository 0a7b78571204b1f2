-- wb.mlp_table: the main job's text table (experiments/mlp_sweep.lua), within 120 columns: a note
-- first where a point is above the calibrated peak, then one row per mode and per peer at each
-- token count with its verdict against eager (wb.verdict's rule, the one compare uses), taken on
-- the medians shown; then our fastest mode against each peer, a warning naming any mode measured
-- SLOWER than eager, and the footer that says what each figure is, the rounds each token count
-- took and the peers' builds.
--
--   require("wb.mlp_table").print(run, by_tokens): run, the main job's state as wb.mlp_report reads it
--       ({info =, device =, rounds =, max_rounds =, torch =, dnnl =, run_tokens =}) and peers =
--       {{name =, prefix =, timing = function(tokens) -> wb.verdict's timing or nil}}, flops_of =,
--       bytes_of = (functions of a token count), target_noise =; by_tokens: the rows per token count
local calibrate = require("wb.calibrate")
local stats = require("wb.stats")
local verdict_rule = require("wb.verdict")
local words = require("wb.words")

local M = {}

function M.print(c, by_tokens)
    local run_tokens, PEERS, info, cuda = c.run_tokens, c.peers, c.info, c.device == "cuda"
    local flops_of, bytes_of, rounds, max_rounds = c.flops_of, c.bytes_of, c.rounds, c.max_rounds
    local torch, dnnl, wait_policy, TARGET_NOISE = c.torch, c.dnnl, c.torch.wait_policy, c.target_noise
    -- % of peak above 100 means the ceiling is wrong (calibrated low, or under load): never shown
    -- as an ordinary figure (marked "!"; wb.device_info's calibration says how it was measured)
    local above = 0
    for _, t in ipairs(run_tokens) do
        for _, r in ipairs(by_tokens[t]) do if r.pct_peak > 100 then above = above + 1 end end
    end
    if above > 0 then
        print(words.wrap(string.format("note: %s above the calibrated peak (marked !): the ceiling is too low; %s",
            words.plural(above, "point is", "points are"), info.calibrated), 120, "  "))
    end
    -- The main table, within 120 columns: one row per mode and per peer at each token count, each
    -- with its verdict against eager (wb.verdict's rule, the one compare uses), taken on the medians
    -- shown; the bracket: the range of the same ratio taken round by round (a 95% interval from 6
    -- rounds). Printed with decimals enough that no figure lands on the other side of 1 than it is.
    local function vs_eager_cell(value, lo, hi, n)
        if not value then return "-" end
        if not lo or (n or 0) < 2 then return string.format("%.2fx", value) end
        local v, l, h = stats.against_bar(2, 1, value, lo, hi)
        return string.format("%sx (%s-%s)", v, l, h)
    end
    local function flag(noise)
        return noise and noise > TARGET_NOISE and string.format(" unstable (noise %.0f%%)", noise * 100) or ""
    end
    local LINE = "%-6s %-9s %9s %7s %5s %6s %7s %7s %6s %-17s %-6s%s"
    print("\n" .. string.format(LINE, "tokens", "mode", "median ms", "GFLOP/s", "%peak", "GB/s", "kernels", "host us",
        "rounds", "vs eager (range)", "verdict", ""))
    for _, t in ipairs(run_tokens) do
        for _, r in ipairs(by_tokens[t]) do
            print(string.format(LINE, tostring(r.tokens), r.mode, string.format("%.3f", r.median_ms),
                string.format("%.1f", r.gflops), calibrate.pct_cell(r.pct_peak, info.under_load),
                string.format("%.1f", r.gbs),
                tostring(r.kernels), string.format("%.1f", r.host_us), tostring(r.rounds),
                r.mode == "eager" and "1.00x" or vs_eager_cell(r.speedup_vs_eager, r.speedup_vs_eager_lo,
                    r.speedup_vs_eager_hi, r.speedup_vs_eager_rounds),
                r.mode == "eager" and "-" or r.speedup_vs_eager_verdict or "-", flag(r.noise)))
        end
        local r = by_tokens[t][1]
        for _, pr in ipairs(PEERS) do
            local median = r[pr.prefix .. "_ms"]
            if median then
                local c = pr.prefix .. "_speedup_vs_eager"
                local has_eager = by_tokens[t][1].mode == "eager" or r[c] ~= nil
                print(string.format(LINE, tostring(t), pr.name, string.format("%.3f", median),
                    string.format("%.1f", flops_of(t) / (median * 1e6)),
                    calibrate.pct_cell(100 * flops_of(t) / (median * 1e6)
                        / info.peak_gflops, info.under_load), string.format("%.1f", bytes_of(t) / (median * 1e6)), "-", "-",
                    tostring(#(r[pr.prefix .. "_samples_ms_per_round"] or {})),
                    has_eager and vs_eager_cell(r[c], r[c .. "_lo"], r[c .. "_hi"], r[c .. "_rounds"]) or "-",
                    has_eager and r[c .. "_verdict"] or "-", flag(r[pr.prefix .. "_noise"])))
            end
        end
    end

    -- Our fastest mode at each token count against each peer, by the same rule: the peer's median over
    -- the mode's (above 1: ours is faster), and the verdict for ours against the peer's.
    local peer_lines = {}
    for _, t in ipairs(run_tokens) do
        local best
        for _, r in ipairs(by_tokens[t]) do if not best or r.median_ms < best.median_ms then best = r end end
        local parts = {}
        for _, pr in ipairs(PEERS) do
            local tp = pr.timing(t)
            if tp and best[pr.prefix .. "_ms"] then
                local ours = {samples = best.samples_ms, per_round = best.samples_ms_per_round}
                local v, ratio = verdict_rule.verdict(tp, ours)
                parts[#parts + 1] = string.format("%s %.2fx %s", pr.name, 1 / ratio, v)
            end
        end
        if #parts > 0 then
            peer_lines[#peer_lines + 1] = string.format("  tokens %-5d %-9s against " ..
                "%s", t, best.mode, table.concat(parts, ", "))
        end
    end
    if #peer_lines > 0 then
        print("\nvs peers: our fastest mode, the peer's median over its (above 1: ours is faster), verdict for ours:")
        print(table.concat(peer_lines, "\n"))
    end

    -- a mode meant to be faster than eager (fewer kernels, or eager's kernels with less host work)
    -- measured SLOWER by the verdict: said under the table, not left to be spotted in it
    local slower = {}
    for _, t in ipairs(run_tokens) do
        for _, r in ipairs(by_tokens[t]) do
            if r.mode ~= "eager" and r.speedup_vs_eager_verdict == "SLOWER" then
                slower[#slower + 1] = string.format("%s at %d tokens %s", r.mode, r.tokens,
                    vs_eager_cell(r.speedup_vs_eager, r.speedup_vs_eager_lo, r.speedup_vs_eager_hi, r.rounds))
            end
        end
    end
    if #slower > 0 then
        print(words.wrap(string.format("\nwarning: measured SLOWER than eager, though every mode runs eager's work " ..
            "with fewer kernels or less host work: %s. Compare the modes' traces (workbench diff), or rerun on a " ..
            "quiet machine", table.concat(slower, "; ")), 120, "  "))
    end

    -- the footer: what each figure is, the rounds each token count took, and the peers' builds
    local footer = {
        "%peak: against " .. (cuda and string.format("%.1f GFLOP/s (%s)", info.peak_gflops, info.calibrated) or
            calibrate.ceiling_note(info)),
        "median ms: the median of the rounds' medians (each round one vote); p10-p90 of all samples are in the JSON, " ..
            "CSV and report",
        "vs eager: eager's median over the row's; in brackets the same ratio taken round by round, their " ..
            (rounds >= 6 and "95% interval" or "range (a 95% interval from 6 rounds)") .. "; verdict: " ..
            verdict_rule.rule_text() .. ", and FASTER or SLOWER only when the bracket is on one side of 1",
    }
    local taken = {}
    for _, t in ipairs(run_tokens) do
        local n = by_tokens[t][1].rounds
        taken[#taken + 1] = string.format("%d: %d%s", t, n, n >= max_rounds and n > rounds and " (the cap)" or "")
    end
    footer[#footer + 1] = string.format("rounds per token count: %s (--rounds %d, more while a row is unstable or " ..
        "UNSURE, " ..
        "at most --max-rounds %d)", table.concat(taken, ", "), rounds, max_rounds)
    if torch.label then
        footer[#footer + 1] = string.format("PyTorch: %s, timed after each round " ..
            "(OMP_WAIT_POLICY=%s)", torch.label, wait_policy)
    end
    if dnnl.label then
        local k = {}
        for _, t in ipairs(run_tokens) do
            if dnnl.kernels[t] then k[#k + 1] = string.format("%d tokens: %s", t, dnnl.kernels[t]) end
        end
        footer[#footer + 1] = string.format("oneDNN: %s, in this process (its OpenMP runtime is ours); kernels: %s",
            dnnl.label, table.concat(k, "; "))
    end
    for _, line in ipairs(footer) do print(words.wrap(line, 120, "  ")) end
end

return M
