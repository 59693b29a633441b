-- PUT then GET: the requests of each wrk thread alternate a PUT of a random key and a GET of a
-- random key, 50% writes and 50% reads. A wrk thread's connections share one Lua state, so a GET
-- cannot wait for "its" PUT; fill the keyspace first (kvctl bench fill --key-prefix key --keys KEYS)
-- so that every GET finds a value.
--   wrk -t1 -c16 -d30s --latency -s bench/mixed.lua http://127.0.0.1:18080
package.path = debug.getinfo(1, "S").source:match("@?(.*/)") .. "?.lua;" .. package.path
local c = require("common")

setup, init, done = c.setup, c.init, c.done

local put = true

request = function()
   put = not put
   if not put then
      return wrk.format("PUT", c.path(c.random_key()), nil, c.value)
   end
   return wrk.format("GET", c.path(c.random_key()))
end
