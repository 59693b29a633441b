-- Shared by put.lua, get.lua and mixed.lua (wrk 4.x, LuaJIT): keys and the summary line.
-- Env: KEYS (keyspace size, default 100000), PREFIX (default "key"), SIZE (value bytes, default 100),
-- QUERY (appended to the URL, e.g. "&ack=1&from=1"; default "" = the cluster's default ack/from).
local M = {}

M.keys = tonumber(os.getenv("KEYS") or "100000")
M.prefix = os.getenv("PREFIX") or "key"
M.query = os.getenv("QUERY") or ""
M.value = string.rep("v", tonumber(os.getenv("SIZE") or "100"))

local threads = {}
local counter = 0

-- setup runs in the main state once per thread: give each thread its own seed.
function M.setup(thread)
   counter = counter + 1
   thread:set("id", counter)
   table.insert(threads, thread)
end

function M.init()
   math.randomseed(os.time() * 1000 + (id or 0))
end

function M.path(n)
   return "/v0/entity?id=" .. M.prefix .. n .. M.query
end

function M.random_key()
   return math.random(0, M.keys - 1)
end

-- done prints one machine-readable line after wrk's own summary (latencies in µs).
function M.done(summary, latency, requests)
   local secs = summary.duration / 1e6
   local errs = summary.errors
   io.write(string.format(
      "RESULT rps=%.0f requests=%d p50_us=%d p75_us=%d p90_us=%d p99_us=%d p999_us=%d max_us=%d mean_us=%.0f " ..
      "non2xx=%d connect=%d read=%d write=%d timeout=%d\n",
      summary.requests / secs, summary.requests,
      latency:percentile(50), latency:percentile(75), latency:percentile(90),
      latency:percentile(99), latency:percentile(99.9), latency.max, latency.mean,
      errs.status, errs.connect, errs.read, errs.write, errs.timeout))
   -- HIST=FILE: wrk's whole latency histogram (1 µs buckets) as wrk holds it after its
   -- stats_correct: latency(i) is the i-th distinct value and its count. bench/run.sh undoes
   -- the correction exactly from it, to compare raw latencies with raw ones.
   local path = os.getenv("HIST")
   if path then
      local f = assert(io.open(path, "w"))
      f:write(string.format("# duration_us=%d requests=%d\n", summary.duration, summary.requests))
      for i = 1, #latency do
         local us, n = latency(i)
         f:write(string.format("%d %d\n", us, n))
      end
      f:close()
   end
end

return M
