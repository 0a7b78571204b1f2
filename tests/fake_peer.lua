-- fake_peer.lua: stands in for experiments/peers/torch_mlp.py in test_sweep.lua (mlp_sweep.lua's
-- --peer option): takes the same options, appends them and the OMP_WAIT_POLICY it was given to
-- $WB_FAKE_PEER_LOG, and prints the same JSON with the samples 1, 2, 3 ms for every token count,
-- and the raw build string torch reports.
local tokens
for i = 1, #arg do if arg[i] == "--tokens" then tokens = arg[i + 1] end end
local log = assert(io.open(assert(os.getenv("WB_FAKE_PEER_LOG"), "WB_FAKE_PEER_LOG is not set"), "a"))
log:write(table.concat(arg, " "), " OMP_WAIT_POLICY=", os.getenv("OMP_WAIT_POLICY") or "(unset)", "\n")
log:close()
local results = {}
for t in tokens:gmatch("[^,]+") do
    results[#results + 1] = string.format('{"tokens": %s, "median_ms": 2.0, "samples_ms": [1.0, 2.0, 3.0]}', t)
end
-- $WB_FAKE_PEER_BLAS_LIBRARY: the library the real peer finds loaded (blas_library), when set
local library = os.getenv("WB_FAKE_PEER_BLAS_LIBRARY")
print(string.format('{"torch": "fake-1.0", "blas": "- Build settings: BLAS_INFO=generic, BUILD_TYPE=Release, ' ..
    'CXX_FLAGS=-D_GLIBCXX_USE_CXX11_ABI=1 -fvisibility-inlines-hidden -DUSE_PTHREADPOOL", %s' ..
    '"threads": 1, "results": [%s]}', library and string.format('"blas_library": "%s", ', library) or "",
    table.concat(results, ", ")))
