-- wb.mlp_report: the main job's HTML report (experiments/mlp_sweep.lua) as data: its text, the
-- columns of its results table, its charts (latency per forward, speedup against eager, the
-- kernels on the roofline) and a table of findings per mode. wb.results draws it from the rows,
-- as `workbench merge` does for a sharded run; the main job asks for it again for partial results
-- (Ctrl-C), so it reads the run's state (peers, traces, findings) each time it is called.
--
--   require("wb.mlp_report").spec{mlp = "GeGLU", dim =, hidden =, dtype =, device =, info =, threads =,
--       rounds =, max_rounds =, torch =, dnnl =, run_tokens =, traces =, point_findings =}
--   -> {text =, warnings =, columns =, links =, charts =, tables =} (wb.results' report)
local calibrate = require("wb.calibrate")
local report = require("wb.report")
local plural = require("wb.words").plural

local M = {}

-- The line chart's, the bar chart's and the roofline's captions, and the text's second paragraph.
local LATENCY = "Median time of one forward per mode (lower is better), against the number of tokens; bars: " ..
    "p10-p90 of the samples; hollow: unstable."
local SPEEDUP = "How much faster each mode is than eager dispatch at the same token count (the dashed line is " ..
    "eager itself); whiskers: the rounds' range, or a 95% interval from 6 rounds. Fewer kernels and no dispatch " ..
    "matter most where the GEMMs are small."
local ROOFLINE = "Each kernel of each mode (all token counts) at its arithmetic intensity (flops per byte that " ..
    "must move) and achieved GFLOP/s, under the roofline of this device (%s): %.1f GFLOP/s peak. Points near a " ..
    "sloped line are memory-bound (small token counts), near the flat line compute-bound. %s"
local COLUMNS_TEXT = "median_ms: the median of the rounds' medians (each round one vote, however many samples it " ..
    "took); p10_ms-p90_ms: of all the samples; rounds: how many rounds the row took; speedup_vs_eager: eager's " ..
    "median_ms over the mode's, with the same ratio taken round by round (its range, or a 95% interval from 6 " ..
    "rounds) in _lo-_hi, and the verdict against eager (SAME, FASTER, SLOWER, UNSURE) by workbench compare's rule " ..
    "in speedup_vs_eager_verdict"

function M.spec(c)
    local info, torch, dnnl, cuda = c.info, c.torch, c.dnnl, c.device == "cuda"
    local text = {
        string.format("%s MLP forward, dim %d, hidden %d, %s on %s (%s, %s%s). %s of alternating modes%s; every " ..
            "mode checked against eager first; more rounds (at most %d in all) for a token count while a row of it " ..
            "is unstable or UNSURE against eager.", c.mlp, c.dim, c.hidden, c.dtype, c.device, info.name, info.isa,
            cuda and "" or ", " .. plural(c.threads, "thread"), plural(c.rounds, "round"),
            torch.version and string.format(" (%s timed after each round; its GEMMs ran on %s)", torch.label,
                torch.blas) or "", c.max_rounds),
        COLUMNS_TEXT .. (torch.version and "; torch_ms: PyTorch's median of its rounds' medians, torch_noise its " ..
            "noise" or "") .. (dnnl.label and "; dnnl_ms, dnnl_noise: oneDNN's, alike" or "") .. ".",
        "% of peak (pct_peak) is against " .. (cuda and string.format("%.1f GFLOP/s (%s)", info.peak_gflops,
            info.calibrated) or calibrate.ceiling_note(info)) .. ".",
    }
    if dnnl.label then
        local k = {}
        for _, t in ipairs(c.run_tokens) do
            if dnnl.kernels[t] then k[#k + 1] = string.format("%d tokens: %s", t, dnnl.kernels[t]) end
        end
        table.insert(text, 2, string.format("%s timed after each round too, on the same weights and inputs (checked " ..
            "against eager first); dnnl_ms: the median of all its samples; its kernels: %s.", dnnl.label,
            table.concat(k, "; ")))
    end
    local peer_series = {} -- the peers' lines on the latency chart
    if torch.version then peer_series[#peer_series + 1] = {name = torch.label, y = "torch_ms"} end
    if dnnl.label then peer_series[#peer_series + 1] = {name = dnnl.label, y = "dnnl_ms"} end
    return {
        text = text,
        warnings = info.under_load and {"The ceilings were MEASURED UNDER LOAD: every % of peak reads high."} or nil,
        -- the results table: what fits a page (every column is in the JSON and CSV)
        columns = {"tokens", "mode", "median_ms", "p10_ms", "p90_ms", "gflops", "pct_peak", "gbs", "kernels", "host_us",
            "rounds", "speedup_vs_eager", "speedup_vs_eager_verdict", "noise", "torch_ms", "dnnl_ms"},
        links = c.traces,
        charts = {
            {kind = "line", title = "Latency per forward", x_label = "tokens", y_label = "median ms", log_x = true,
                log_y = true, x = "tokens", y = "median_ms", lo = "p10_ms", hi = "p90_ms", series = "mode",
                unstable = "unstable", extra = #peer_series > 0 and peer_series or nil,
                caption = LATENCY .. (torch.version and " PyTorch's eager CPU forward on the same shapes is drawn " ..
                    "for comparison." or "") .. (dnnl.label and " So is oneDNN's: matmul primitives with the " ..
                    "gate's activation and the multiply as post-ops, on the same weights." or "")},
            {kind = "bar", title = "Speedup against eager", y_label = "eager time / mode time", group = "tokens",
                series = "mode", value = "speedup_vs_eager", lo = "speedup_vs_eager_lo", hi = "speedup_vs_eager_hi",
                reference = 1, caption = SPEEDUP},
            {kind = "roofline", title = "Kernels on the roofline", x_label = "arithmetic intensity (FLOP per byte)",
                y_label = "GFLOP/s", peak_gflops = info.peak_gflops, ceilings = calibrate.ceilings(info),
                series = "mode", flops = "kernel_flops", bytes = "kernel_bytes", ns = "kernel_ns",
                caption = string.format(ROOFLINE, cuda and "datasheet rates, not measured" or info.calibrated,
                    info.peak_gflops, cuda and "The bandwidth is DRAM's: a kernel whose data stays in the caches " ..
                    "can sit above the sloped line." or "On the cpu the roofline is cache-aware: L2, L3 and DRAM " ..
                    "roofs measured on working sets sized from the caches; each point's tooltip judges it against " ..
                    "the level its bytes fit in.")},
        },
        -- a Findings section per mode: what the profile of each point showed (wb.findings' rules)
        tables = report.findings_tables(c.point_findings, {by = "mode", at = "tokens"}),
    }
end

return M
