-- PUT of random keys key<0..KEYS-1> with a SIZE-byte value (see common.lua for the env).
--   wrk -t1 -c16 -d30s --latency -s bench/put.lua http://127.0.0.1:18080
package.path = debug.getinfo(1, "S").source:match("@?(.*/)") .. "?.lua;" .. package.path
local c = require("common")

setup, init, done = c.setup, c.init, c.done

request = function()
   return wrk.format("PUT", c.path(c.random_key()), nil, c.value)
end
