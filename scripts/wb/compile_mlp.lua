-- compile_mlp.lua: wb.compile's cost model for the one-kernel MLP (wb.geglu_mlp, wb.swiglu_mlp) in
-- place of the dual GEMM and the down linear it would replace: pays(x, op) -> true or false, why
-- in words (explain shows them), and the thread count the answer used (nil where none: wb.compile
-- guards on it).
--
-- What was measured (experiments/mlp_fused_vs_dual.lua: dim 768, hidden 3072, batches of forwards
-- alternated with the dual path's in one process, medians of 7-9 rounds' dual/fused ratios, above
-- 1: fused faster; an AMD EPYC Zen 3, AVX2, 2 vCPUs, nothing else running, round ranges about
-- +-10-20%):
--   f32, 1 thread: 16 tokens 0.97, 0.99; 64: 1.09, 1.04; 128: 1.05, 1.04, 1.04, 1.06;
--        512: 1.02, 1.01, 1.00, 1.06; 1000: 1.05, 1.00, 1.03, 1.02 (4 runs, 2 at 16)
--   f32, 2 threads: 1 token 1.05, 1.09; 16: 0.93, 1.08; 128: 0.98, 1.09; 512: 1.04, 1.04;
--        1000: 1.07, 1.00
--   bf16, 1 thread: 1 token 0.29, 0.23; 4: 0.34; 8: 1.02; 16: 0.98, 1.00; 32: 1.02; 64: 1.04, 1.06;
--        128: 1.04, 1.05; 256: 1.10; 512: 1.04
--   bf16, 2 threads: 4 tokens 0.44; 8: 0.97; 16: 1.00; 128: 1.01
--   bf16 since the one kernel runs the k-pair microkernels on up to 6 rows, as the linears do,
--   and packs its hidden a pair word at a time (quiet, 1 thread, 15 rounds, 4 runs): 1 token 0.995,
--   0.957, 1.019, 0.982; 4: 1.003, 0.988, 1.007, 1.002; 6: 1.000, 0.998, 1.001, 0.999; 8: 0.986,
--   0.996; 2 threads: 1 token 1.025, 4: 1.018
-- So in f32 the one kernel is a tie or better at every count: it is taken (one launch, no [tokens,
-- hidden] buffer). In bf16 on up to 6 rows both paths run the k-pair microkernels (avx2bf16,
-- avx512bf16: the packed weights read as bf16, 13.5 MiB for 768 x 3072 where widened ones take 27;
-- before, the one kernel ran the f32 kernels on widened weights: 1 token 1.88 ms against the dual
-- path's 0.45), from 7 rows both the f32 kernels: a tie at every count, so it is taken in bf16
-- too. BF16_MIN_TOKENS keeps the form of the rule it had (the two kernels under 8 tokens); a test
-- sets it. On cuda the op runs as the same two kernels.
-- (Under load, before the fused kernel's transpose, 128-1000 tokens measured 0.96-1.02: the model
-- then took f32 only up to 64 tokens a thread. MAX_TOKENS keeps that form of rule, per thread,
-- unlimited now; a test sets it to check the guard on the thread count.)
local M = {}

M.MAX_TOKENS = math.huge -- f32: the most rows of x a thread where the one kernel pays
M.BF16_MIN_TOKENS = 1 -- bf16: the fewest rows of x where it pays (every count: a tie or better)
M.BF16_WIDENED_MIN_TOKENS = 8 -- bf16 x the pair kernels cannot read in place: the rule before them

local plural = require("wb.words").plural

function M.pays(x, op)
    if x.device ~= "cpu" then
        return false, string.format("on %s %s runs as the same two kernels", x.device, op)
    end
    local tokens = x:numel() // x.shape[#x.shape]
    if x.dtype == "bf16" then
        -- the one kernel reads x as pair words only along rows of even length with unit stride (as
        -- core/cpu/launch_mlp.c asks); otherwise it widens, where the linears still read pairs
        local features, strides = x.shape[#x.shape], x:stride()
        if (features % 2 == 1 or strides[#strides] ~= 1) and tokens < M.BF16_WIDENED_MIN_TOKENS then
            return false, string.format("bf16, %s: x's rows are %s, so %s would widen it where the linears read " ..
                "bf16 pairs (measured 2.6-4.2x slower at 1-4 tokens; kept under %d)", plural(tokens, "token"),
                features % 2 == 1 and "of odd length" or "strided", op, M.BF16_WIDENED_MIN_TOKENS)
        end
        if tokens < M.BF16_MIN_TOKENS then
            return false, string.format("bf16, %s: under the model's limit of %d (BF16_MIN_TOKENS)",
                plural(tokens, "token"), M.BF16_MIN_TOKENS)
        end
        return true, string.format("bf16, %s: it measured a tie or better against the dual GEMM + down GEMM " ..
            "(both on the bf16 pair kernels up to 6 tokens): one kernel, no hidden activation in memory",
            plural(tokens, "token"))
    end
    if x.dtype ~= "f32" then
        return false, string.format("%s x: %s was not measured in %s", x.dtype, op, x.dtype)
    end
    if M.MAX_TOKENS == math.huge then
        return true, string.format("f32, %s: it measured a tie or better against the dual GEMM + down GEMM " ..
            "at every count: one kernel, no hidden activation in memory", plural(tokens, "token"))
    end
    local threads = wb.get_num_threads()
    local per_thread = (tokens + threads - 1) // threads
    if per_thread > M.MAX_TOKENS then
        return false, string.format("%s on %s: more than %d a thread, where the fused kernel measured a tie at " ..
            "best against the dual GEMM + down GEMM", plural(tokens, "token"), plural(threads, "thread"), M.MAX_TOKENS),
            threads
    end
    return true, string.format("%s on %s: at most %d a thread, where it measured a tie or better against the " ..
        "dual GEMM + down GEMM: one kernel, no hidden activation in memory", plural(tokens, "token"),
        plural(threads, "thread"), M.MAX_TOKENS), threads
end

return M
