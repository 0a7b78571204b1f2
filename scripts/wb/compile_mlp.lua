-- compile_mlp.lua: wb.compile's cost model for the one-kernel MLP (wb.geglu_mlp, wb.swiglu_mlp) in
-- place of the dual GEMM and the down linear it would replace: pays(x, op) -> true or false, why
-- in words (explain shows them), and the thread count the answer used (nil where none: wb.compile
-- guards on it).
--
-- What was measured (experiments/mlp_fused_vs_dual.lua: dim 768, hidden 3072, f32, batches of
-- forwards alternated with the dual's in one process, medians of 9 rounds' dual/fused ratios, two
-- runs; an AMD EPYC Zen 3, AVX2, 2 vCPUs at load 5-6 from other builds, round ranges about
-- +-15%): the fused kernel saves a launch and the hidden activation's trip through memory but
-- re-reads each row block's x once per hidden chunk; the two are a tie:
--   1 thread, 1 to 64 tokens: 0.98-1.07; 128, 512 and 1000 tokens: 0.96-1.02
--   2 threads, 1 to 64 tokens: 0.91-1.14; 128 to 1000 tokens: 0.93-1.05
-- A tie goes to the one kernel (one launch, no [tokens, hidden] buffer) where it was a tie or
-- better on 1 thread in both runs: at most MAX_TOKENS rows of x a thread (the 2-thread figures,
-- wall time on a loaded host, are too noisy to confirm or refute the per-thread form). bf16 is not taken (the fused kernel
-- widens bf16 weights to f32 and was not measured against the dual's bf16 GEMMs), nor cuda (there
-- the op runs as the same two kernels).
local M = {}

M.MAX_TOKENS = 64

function M.pays(x, op)
    if x.device ~= "cpu" then
        return false, string.format("on %s %s runs as the same two kernels", x.device, op)
    end
    if x.dtype ~= "f32" then
        return false, string.format("%s x: %s widens bf16 weights to f32 and was not measured against the dual " ..
            "GEMM's %s path", x.dtype, op, x.dtype)
    end
    local tokens = x:numel() // x.shape[#x.shape]
    local threads = wb.get_num_threads()
    local per_thread = (tokens + threads - 1) // threads
    if per_thread > M.MAX_TOKENS then
        return false, string.format("%d tokens on %d thread%s: more than %d a thread, where the fused kernel " ..
            "measured a tie at best against the dual GEMM + down GEMM", tokens, threads, threads == 1 and "" or "s",
            M.MAX_TOKENS), threads
    end
    return true, string.format("%d tokens on %d thread%s: at most %d a thread, where it measured a tie or " ..
        "better against the dual GEMM + down GEMM: one kernel, no hidden activation in memory", tokens, threads, threads == 1 and "" or "s", M.MAX_TOKENS), threads
end

return M
