-- threads.lua: runs a test's body on a fixed number of threads, restoring the count and the
-- adaptive setting after it, also when the body fails.
local M = {}

function M.with_threads(n, fn)
    local was_n, was_adaptive = wb.get_num_threads(), wb.set_threads_adaptive(false)
    wb.set_num_threads(n)
    local ok, err = pcall(fn)
    wb.set_num_threads(was_n)
    wb.set_threads_adaptive(was_adaptive)
    if not ok then error(err, 0) end
end

return M
